/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal pieces of the membership runtime (control/): framed non-blocking connections, the
 * poll set, the host that accepts control connections and routes them to coordinators, epoch
 * snapshots, and small shared pieces (clock, settings, addresses). Not part of any public API.
 *
 * Threading: nothing here takes a lock. Each object belongs to one control thread (a member's
 * or the daemon's) and is used under that owner's mutex.
 */
#ifndef FTCC_CONTROL_RT_H
#define FTCC_CONTROL_RT_H

#include <poll.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "ftcc/ctl.h"

#define RT_WQ_MAX (4u << 20)   /* queued output above this fails a connection (local error) */
#define RT_CLOSE_MS 100	       /* a closing connection is dropped after this if unflushed */
#define RT_FIRST_FRAME_MS 5000 /* an accepted connection must say something by then */
#define RT_PEER_MAX 64	       /* "host:port" text of a peer, for logs */
#define RT_STATUS_MAX (1u << 20)

/* ---- shared pieces (backend.c) ---------------------------------------------------------- */

/* CLOCK_MONOTONIC in milliseconds. */
uint64_t rt_now_ms(void);

/* Loads the FTCC_* settings the first time any control object is made (later calls do
 * nothing), so a library used without the plug-in still honours the environment. */
void rt_settings_once(void);

/* Effective timings: @timeout_ms, @hb_ms, @connect_ms as given, or (0) from the settings with
 * the heartbeat rule (FAILURE_TIMEOUT_MS / 8, at most 100 ms, at least 5 ms). */
struct rt_times {
	uint64_t timeout_ms;
	uint64_t hb_ms;
	uint64_t connect_ms;
};
void rt_times_fill(int64_t timeout_ms, int64_t hb_ms, int64_t connect_ms, struct rt_times *t);

/* A random, nonzero 64-bit incarnation (getrandom; clock and pid when that fails). */
uint64_t rt_incarnation(void);

/* Backend spec: "" or "embedded" -> RT_EMBEDDED; "host:port" -> RT_DAEMON with its address in
 * @ss; "etcd://..." -> -EPROTONOSUPPORT (logged). -EINVAL (logged) for anything else. */
enum rt_backend { RT_EMBEDDED = 1, RT_DAEMON };
int rt_backend_parse(const char *spec, enum rt_backend *kind, struct sockaddr_storage *ss,
		     unsigned *sslen);

/* "a.b.c.d:port" or "[v6]:port" of @sa into @buf. */
void rt_addr_text(const struct sockaddr *sa, char *buf, size_t len);

/* ---- sockets and framed connections (rt_conn.c) ----------------------------------------- */

/* One non-blocking control connection: a read buffer cut into checked frames and a bounded
 * write queue. Owned by whoever holds it (a member's link, or a host connection). */
struct rt_conn {
	int fd;
	int err;	/* sticky: first fatal error (negative errno), 0 while healthy */
	int death;	/* with @err: the peer closed or reset the connection (death evidence) */
	int connecting; /* connect() in progress: output is only queued */
	uint8_t *rbuf;
	size_t roff, rlen, rcap; /* unconsumed input is rbuf[roff .. rlen) */
	uint8_t *wbuf;
	size_t woff, wlen, wcap; /* unsent output is wbuf[woff .. wlen) */
	char peer[RT_PEER_MAX];
};

/* Takes ownership of @fd (non-blocking) and names the peer for logs. */
void rt_conn_init(struct rt_conn *c, int fd, const char *peer);
/* Reads and drops pending input (so close sends FIN rather than RST), closes the socket and
 * frees the buffers. Safe on a connection already closed. */
void rt_conn_close(struct rt_conn *c);

/* Encodes @m, queues it and tries to send at once. 0, or the sticky error (set here when the
 * queue passes RT_WQ_MAX or the encoder rejects @m, each logged once). Never blocks. */
int rt_conn_send(struct rt_conn *c, const struct ctl_msg *m);
/* Queues @len raw bytes (status text) and tries to send. 0 or the sticky error. */
int rt_conn_send_raw(struct rt_conn *c, const void *buf, size_t len);
/* Sends what the socket takes now. 0 or the sticky error (EPIPE/ECONNRESET set @death). */
int rt_conn_flush(struct rt_conn *c);
/* Bytes queued and not yet sent. */
size_t rt_conn_pending(const struct rt_conn *c);

/* One recv() into the read buffer: bytes read (> 0); 0 when nothing is there or the buffer
 * is full (consume frames first); or the sticky error: EOF and ECONNRESET set @death. */
ssize_t rt_conn_fill(struct rt_conn *c);
/* Cuts the next complete frame off the read buffer and decodes it into @m (whose members
 * storage rt_msg_alloc made). 1 = a frame; 0 = incomplete; -EPROTO = bad header (magic, type,
 * length); -EPROTONOSUPPORT = foreign version; -EBADMSG = valid header, malformed body. */
int rt_conn_next(struct rt_conn *c, struct ctl_msg *m);
/* For logs after rt_conn_next failed: "bad magic", "foreign version N" or "bad header". */
void rt_conn_head_text(const struct rt_conn *c, int err, char *buf, size_t len);

/* Gives @m members storage for CTL_MAX_MEMBERS records. 0 or -ENOMEM; rt_msg_free undoes. */
int rt_msg_alloc(struct ctl_msg *m);
void rt_msg_free(struct ctl_msg *m);

/* A listening socket on @sa (SO_REUSEADDR, non-blocking). 0 and *@fd, *@port; or -errno. */
int rt_listen(const struct sockaddr *sa, socklen_t len, int *fd, int *port);
/* Starts a non-blocking connect to @dst from @src (port 0; NULL: any). TCP_NODELAY, no
 * keepalive or user timeout. 0 = connected, -EINPROGRESS = pending (*@fd set in both cases);
 * else -errno (no socket left open). */
int rt_connect_start(const struct sockaddr *dst, socklen_t dlen, const struct sockaddr *src,
		     socklen_t slen, int *fd);
/* Outcome of a pending connect once the socket polls writable: 0 or -errno (SO_ERROR). */
int rt_connect_result(int fd);

/* An eventfd to wake a control thread from poll(). */
int rt_wake_open(void);
void rt_wake(int fd);
void rt_wake_clear(int fd);

/* The descriptors of one poll() round, each tagged with what it belongs to. */
struct rt_pollref {
	int kind;
	void *ptr;
};
struct rt_pollset {
	struct pollfd *pfd;
	struct rt_pollref *ref;
	unsigned n, cap;
};
/* Empties @ps for a new round. */
void rt_pollset_reset(struct rt_pollset *ps);
/* Adds @fd with @events, tagged (@kind, @ptr). 0 or -ENOMEM. */
int rt_pollset_add(struct rt_pollset *ps, int fd, short events, int kind, void *ptr);
void rt_pollset_free(struct rt_pollset *ps);
/* poll() for at most @timeout_ms. Returns what poll returns (EINTR reads as 0). */
int rt_pollset_wait(struct rt_pollset *ps, uint64_t timeout_ms);

/* ---- epoch snapshots (epoch.c) ----------------------------------------------------------- */

/* A new snapshot of @r (one reference) for member @self, as stream @stream sees it (its
 * boundary and its members' starts in the scalar fields); NULL when out of memory. */
struct ctl_epoch *rt_epoch_make(const struct ctl_epoch_rec *r, uint32_t self, uint32_t stream);
/* Takes one more reference to @e and returns it. */
const struct ctl_epoch *rt_epoch_get(const struct ctl_epoch *e);

/* The last few snapshots, by epoch number and stream, each holding one reference. */
#define RT_EPOCH_CACHE_PER_STREAM 8
#define RT_EPOCH_CACHE (RT_EPOCH_CACHE_PER_STREAM * CTL_STREAMS_MAX)
struct rt_epoch_cache {
	unsigned cap; /* slots in use: RT_EPOCH_CACHE_PER_STREAM per stream (0: for one) */
	const struct ctl_epoch *e[RT_EPOCH_CACHE];
	unsigned next; /* slot the next insert replaces */
};
/* The cached snapshot of epoch @epoch for @stream (no reference taken), or NULL. */
const struct ctl_epoch *rt_epoch_cache_find(const struct rt_epoch_cache *c, uint64_t epoch,
					    uint32_t stream);
/* The snapshot of @r for @stream from the cache, made and inserted when missing (no reference
 * taken for the caller); NULL when out of memory. */
const struct ctl_epoch *rt_epoch_cache_get(struct rt_epoch_cache *c, const struct ctl_epoch_rec *r,
					   uint32_t self, uint32_t stream);
/* Drops every cached reference. */
void rt_epoch_cache_clear(struct rt_epoch_cache *c);

/* ---- host: a listener and the connections it accepted (host.c) -------------------------- */

/* Where a coordinator's member takes connections (its death probes go there). */
struct rt_probe_addr {
	struct sockaddr_storage sa;
	socklen_t len; /* 0: not known */
	uint64_t inc;  /* the incarnation that said HELLO from there (unused when fixed) */
};

/* A coordinator served by a host; connections that said HELLO to it point here. The owner
 * (member or daemon) embeds it and sets @coord; the host counts @nconns. */
struct rt_route {
	struct rt_host *host;
	struct ctl_coord *coord;
	uint32_t nconns;	     /* connections routed here and not closed yet */
	const char *group;	     /* the group's name (probes say HELLO in it) */
	struct rt_probe_addr *paddr; /* per member id (@npaddr entries); NULL: no probes */
	uint32_t npaddr;
	int paddr_fixed; /* the owner filled @paddr (embedded: the configured addresses); the
			  * HELLOs' listen ports do not change it */
};

/* What the host asks its owner. Called on the owner's thread with its lock held. */
struct rt_host_ops {
	void *arg;
	/* A well-formed HELLO (its group id matches its name) on a new connection: the route to
	 * hand it to, or NULL after filling @refuse (code, hint, text) to answer and close. */
	struct rt_route *(*route)(void *arg, const struct ctl_msg *hello, struct ctl_msg *refuse,
				  uint64_t now);
	/* Status text for a "STATUS" request. Returns the length. */
	size_t (*status)(void *arg, char *buf, size_t len, uint64_t now);
};

struct rt_hconn;
struct rt_probe;

/* A listener (or none) and its accepted connections, plus connections adopted only to be
 * flushed and closed, plus the probes its coordinators asked for. Owned by a member or the
 * daemon. */
struct rt_host {
	int lfd; /* -1: no listener */
	int port;
	struct rt_host_ops ops;
	struct ctl_msg *msg; /* decode scratch, the owner's */
	struct rt_hconn *conns;
	struct rt_hconn *byid[256]; /* hash of conns by id */
	uint32_t nlinger;	    /* adopted connections not closed yet */
	struct rt_probe *probes;    /* rt_probe.c */
	uint64_t probe_ms;	    /* a probe without an answer by then is UNKNOWN */
};

/* Poll kinds the host uses (owners use their own above RT_POLL_OWNER). */
enum { RT_POLL_LISTEN = 1, RT_POLL_HCONN, RT_POLL_PROBE, RT_POLL_OWNER = 16 };

/* Listens on @sa (NULL: no listener) and remembers @ops and the scratch @msg. With @adopt_fd
 * >= 0, listens on a duplicate of that socket instead, which must already listen on @sa's port
 * (the caller keeps and closes its own descriptor). 0 or -errno (-EBADF: @adopt_fd is not a
 * listening socket of @sa's family; -EADDRNOTAVAIL: another port). */
int rt_host_init(struct rt_host *h, const struct sockaddr *sa, socklen_t len, int adopt_fd,
		 const struct rt_host_ops *ops, struct ctl_msg *msg);
/* Closes the listener and every connection at once; frees them. */
void rt_host_fini(struct rt_host *h);
/* The ops a coordinator served through @r must be created with. */
struct ctl_coord_ops rt_route_coord_ops(struct rt_route *r);
/* Closes (flush, then close) every connection still routed to @r: its coordinator is going. */
void rt_host_unroute(struct rt_host *h, struct rt_route *r);
/* Takes over @c (a member's former link: its socket and buffers; @c is left closed) to flush
 * it and close it within RT_CLOSE_MS. */
void rt_host_adopt(struct rt_host *h, struct rt_conn *c, uint64_t now);
/* Adds the listener and connections to @ps. 0 or -ENOMEM. */
int rt_host_poll_add(struct rt_host *h, struct rt_pollset *ps);
/* Handles the events of one entry the host added. */
void rt_host_on_poll(struct rt_host *h, const struct rt_pollref *ref, short revents, uint64_t now);
/* Deadlines (first frame, closing), deferred errors, and frees closed connections. Returns
 * the next time it needs to run. */
uint64_t rt_host_timers(struct rt_host *h, uint64_t now);
/* One last send attempt on every connection (before the owner closes everything). */
void rt_host_flush_all(struct rt_host *h);

/* ---- probes of members' listening ports (rt_probe.c) --------------------------------------- */

/* Gives @r room for @n members' probe addresses (all unknown). 0 or -ENOMEM. */
int rt_route_paddr_alloc(struct rt_route *r, uint32_t n);
/* Frees them. */
void rt_route_paddr_free(struct rt_route *r);
/* A HELLO routed to @r on a connection from @peer: remembers where member hello->member takes
 * connections (the peer's address with the HELLO's listen port), unless the owner fixed it. */
void rt_route_note_hello(struct rt_route *r, const struct ctl_msg *hello,
			 const struct sockaddr_storage *peer);
/* The coordinator op: starts a probe of member @id of @arg (a struct rt_route). */
void rt_route_probe(void *arg, uint32_t id, uint64_t incarnation);
/* Drops the probes of @r (its coordinator is going). */
void rt_probe_drop_route(struct rt_host *h, struct rt_route *r);
/* Adds the probes in flight to @ps. 0 or -ENOMEM. */
int rt_probe_poll_add(struct rt_host *h, struct rt_pollset *ps);
/* A probe's socket is ready (RT_POLL_PROBE entry). */
void rt_probe_on_poll(struct rt_host *h, struct rt_probe *p, short revents, uint64_t now);
/* Delivers decided probes and expires late ones. Returns the next deadline (UINT64_MAX none). */
uint64_t rt_probe_timers(struct rt_host *h, uint64_t now);
/* Closes and frees every probe without answering. */
void rt_probe_fini(struct rt_host *h);

#endif
