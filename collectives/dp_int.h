/* SPDX-License-Identifier: BSD-3-Clause */
/* Private state of the data plane (dp.c, dp_conn.c, dp_frame.c): the peer table, one connection
 * per peer, accepted connections waiting for their HELLO or for the epoch that names them, and
 * the wire formats of HELLOs and frame headers. Not part of any API.
 */
#ifndef FTCC_DP_INT_H
#define FTCC_DP_INT_H

#include <netinet/in.h>
#include <poll.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "ftcc/dp.h"
#include "ftcc/transport.h"

/* HELLO, 40 bytes little-endian: magic "FTDP"(4) version(2) stream(1) reserved(1) group(8)
 * from id(4) to id(4) from incarnation(8) to incarnation(8). Version 2: frame headers carry the
 * shape. stream: 1 when the sender moves frames over a transport (dp_xport.c); a pair does when
 * both ends say so, else over the TCP connection (0 was reserved, and is what older peers send). */
#define DP_HELLO_MAGIC 0x50445446u /* "FTDP" */
#define DP_HELLO_VERSION 3
#define DP_HELLO_SIZE 40

/* Frame header, 48 bytes little-endian: magic "FTDF"(4) phase(4) seq(8) epoch(8) step(4)
 * reserved(4) payload length(8) shape(8). */
#define DP_FRAME_MAGIC 0x46445446u /* "FTDF" */
#define DP_FRAME_HDR 48

#define DP_PENDING_MAX 64	/* accepted connections not yet tied to a peer */
#define DP_PENDING_MS 5000	/* how long one may stay so */
#define DP_SCRATCH (64u << 10)	/* stale payloads are drained through this, in pieces */
#define DP_SPIN_NS 200000	/* busy retries before poll() */
#define DP_BACKOFF_MIN_MS 5	/* first retry after a refused connect */
#define DP_BACKOFF_MAX_MS 200	/* retries back off up to this */
#define DP_RX_BUDGET (8u << 20) /* payload bytes read from one connection per pass */
#define DP_IOV_FRAMES 8		/* frames gathered into one writev */

#define DP_ACCEPT_IDLE_NS 1000000 /* struct dp's accept_ns */
/* A read of fewer bytes than this (a frame header) takes up to this many from the socket, so a
 * small frame's header and payload come in one recv(): a recv() per frame, not two. */
#define DP_RBUF 256

/* Streams over a transport of the ops table (dp_xport.c). */
#define DPX_SLOTS 8		  /* messages in flight each way per connection */
#define DPX_SLOT (256u << 10)	  /* bytes per message at most */
#define DPX_TAG 0x4450		  /* the tag every message of a stream carries */
#define DPX_SPIN_NS 200000	  /* busy retries (yielding) before a sleep */
#define DPX_POLL_NS 100000	  /* longest sleep while streams may have moved */
#define DPX_FD_CHECK_NS 1000000	  /* how often the idle TCP connection is looked at */
#define DPX_DRAIN_NS 100000000	  /* dp_destroy(): how long posted messages may take */
#define DPX_EOF_GRACE_NS 50000000 /* completions after the TCP end may still show */

enum dp_conn_state {
	DPC_BACKOFF = 1, /* connector: no socket, retrying at @retry_ns */
	DPC_CONNECTING,	 /* connector: non-blocking connect in flight */
	DPC_HELLO,	 /* connector: sending our HELLO / reading the reply */
	DPC_ACCEPTED,	 /* acceptor: reading the peer's HELLO */
	DPC_UNKNOWN,	 /* acceptor: valid HELLO from a member the epoch does not name yet */
	DPC_XPORT,	 /* either side: HELLOs done, transport handles being exchanged */
	DPC_READY,	 /* frames flow */
};

enum dp_rx_mode {
	DPR_HDR = 0, /* reading a frame header */
	DPR_WAIT,    /* header read, no receive posted for it yet; socket not read */
	DPR_BODY,    /* payload going into @rx_buf */
	DPR_DROP,    /* stale payload being drained */
};

/* A byte stream over a pair of transport connections (one each way), after the handles were
 * exchanged on the TCP connection. Send ring: slots [s_done, s_post) are posted (a message
 * each). Receive ring: slots [r_head, r_post) have a receive posted; r_head's message, once
 * complete (r_have), is read out from r_off. */
struct dp_xs {
	struct ftcc_listen *l;
	struct ftcc_conn *sc, *rc;
	uint8_t hout[FTCC_HANDLE_SIZE], hin[FTCC_HANDLE_SIZE];
	uint32_t hout_off, hin_off;
	uint8_t *sbuf, *rbuf;
	void *smh, *rmh;
	uint64_t s_done, s_post;
	int64_t s_ns[DPX_SLOTS]; /* when each posted message was posted */
	struct ftcc_req *s_req[DPX_SLOTS];
	uint64_t r_head, r_post;
	struct ftcc_req *r_req[DPX_SLOTS];
	size_t r_len, r_off;
	int r_have;
	int err;		  /* sticky: the transport's error, or the TCP connection's end */
	int64_t eof_ns;		  /* the TCP connection ended then (0: not seen) */
	int64_t start_ns;	  /* the set-up began (dpx_start) */
	uint8_t my_say, peer_say; /* each end's byte after its handle (dp_xport.c), 0 not yet */
	int up;			  /* this end's stream is up (its receives posted) */
	int64_t step_ns;	  /* dpx_step last ran */
	int64_t fd_check_ns;	  /* the TCP connection was last looked at */
};

/* One TCP connection with one peer (or a not yet identified accepted socket). Owned by the
 * peer entry that points to it, or by the dp's pending list. */
struct dp_conn {
	int fd; /* -1 in DPC_BACKOFF */
	enum dp_conn_state state;
	int mine; /* this member connected (the connector's states); 0: accepted */
	uint32_t peer_id;
	uint64_t peer_inc;
	int64_t deadline_ns; /* connector: this attempt's bound; acceptor: HELLO/adoption bound */
	int64_t retry_ns;    /* DPC_BACKOFF: when to try again */
	int backoff_ms;
	uint8_t hello_out[DP_HELLO_SIZE];
	uint8_t hello_in[DP_HELLO_SIZE];
	uint32_t hout_off, hin_off; /* bytes sent / received of the HELLOs */
	/* receive side */
	uint8_t rbuf[DP_RBUF]; /* bytes read ahead of the frames (dp_io_recv()) */
	uint16_t rb_off, rb_len;
	enum dp_rx_mode rx_mode;
	uint8_t rhdr[DP_FRAME_HDR];
	uint32_t rhdr_off;
	struct dp_tag rx_tag; /* of the frame whose header was read */
	uint64_t rx_shape;    /* and its shape */
	uint64_t rx_len, rx_off;
	void *rx_buf;	      /* DPR_BODY: destination (the bound receive's buffer) */
	struct dp_xfer *rx_x; /* DPR_BODY: the receive, valid while bind_gen is the call's */
	uint64_t bind_gen;    /* call in which partly moved frames were last rebound */
	int rx_blocked;	      /* DPR_WAIT re-checked in this call and still unmatched */
	/* send side: the frame partly written, if any */
	int tx_partial;
	struct dp_tag tx_tag;
	uint64_t tx_shape;
	size_t tx_len;
	const void *tx_buf;
	uint64_t tx_sent; /* header and payload bytes written */
	int used;	  /* a frame header went out or came in on it: losing it may lose frames */
	/* bytes owned by dp that go before any frame: the rest of an abandoned frame, or a NOP */
	uint8_t *tail;
	size_t tail_len, tail_off;
	struct dp_xs *xs; /* frames go over a transport (DPC_XPORT, DPC_READY); NULL: the socket */
};

/* One member of the current epoch. */
struct dp_peer_ent {
	uint32_t id;
	uint64_t inc;
	struct sockaddr_storage sa;
	socklen_t salen;
	struct dp_conn *conn; /* NULL: none */
	uint64_t stamp;	      /* pass in which it was last visited */
	int want_tx, want_rx; /* this call has unfinished sends / receives with it */
	int64_t down_ns;      /* no ready connection since then (0: up, or never wanted) */
	int64_t want_ns;      /* a call last wanted it while not ready (restarts down_ns) */
	int64_t rx_ns;	      /* bytes last came from it (or a wait on it began) */
	int64_t check_ns;     /* its connection's liveness was last looked at */
	int64_t stall_ns;     /* data outstanding and retransmitted since then (0: none) */
	int xfail;	      /* acceptor: broke_idle says its stream set-up failed (no frames
			       * lost), withdrawn when one comes up */
	int broke_idle;	      /* a connection that carried frames broke or was replaced while
			       * no call wanted it: the next call that does gets -EPIPE (frames
			       * may have been lost); kept across dp_set_peers() */
};

struct dp {
	struct dp_cfg cfg;
	int64_t cut_ns;	 /* unreachable this long: -EHOSTUNREACH; unacknowledged: broken */
	int64_t nop_ns;	 /* a receive waiting this long without a byte sends a NOP */
	uint32_t ntails; /* connections with a tail to write */
	int lfd;	 /* listening socket */
	int wake;	 /* eventfd written by dp_abort() */
	atomic_int aborted;
	atomic_int kicked; /* dp_kick() */
	char addr[DP_ADDR_MAX];
	struct sockaddr_storage self_sa; /* bind address, port 0 (source of our connects) */
	socklen_t self_salen;
	struct dp_peer_ent *peers; /* sorted by id */
	uint32_t npeers;
	struct dp_conn *pending[DP_PENDING_MAX];
	uint32_t npending;
	uint64_t gen;	 /* dp_progress() calls so far */
	uint64_t pass;	 /* passes over the transfers so far */
	uint32_t *xpeer; /* per transfer of the current call: index into @peers */
	int xpeer_cap;
	struct pollfd *pfd;
	uint32_t *pfd_peek; /* per pfd entry: the peer index it peeks at, or UINT32_MAX */
	int pfd_cap;
	struct { /* the last shape mismatch (dp_mismatch()) */
		int seen;
		uint32_t peer;
		uint64_t seq, theirs, ours;
	} mm;
	/* frames over a transport (FTCC_TRANSPORT picked ib), NULL: over the TCP connections */
	const struct ftcc_transport_ops *xt;
	struct ftcc_tctx xctx;
	uint32_t nxport;  /* connections in DPC_XPORT */
	int local_err;	  /* a local failure on a path no call waited on (-errno): the next
			  * dp_progress() returns it */
	int spin_yield;	  /* more members on this host than cores it may run on: the spin
			  * before poll() yields the core (a busy one would hold what the
			  * peer needs) */
	int mixed_warned; /* a member without a stream was logged */
	int tcp_warned;	  /* a stream that did not come up was logged */
	/* A call's first pass accepts only DP_ACCEPT_IDLE_NS after the last accept pass, unless
	 * the last poll() saw the listening socket readable or connections wait for their HELLO:
	 * a failed accept() allocates and frees a socket in the kernel, a cost on every small op. */
	int lfd_ready;
	int64_t accept_ns;
	int adopted; /* either_connects: a connection was taken; the call returns */
	uint8_t scratch[DP_SCRATCH];
};

/* The current call's view: transfers, their peer indexes, completions and the error peer. */
struct dp_call {
	struct dp_xfer *x;
	int n;
	int completed;
	int accept_due; /* accept and read HELLOs in the next pass (first pass, after a poll) */
	uint32_t *bad_peer;
};

/* Monotonic clock, ns. */
int64_t dp_now_ns(void);

/* The peer entry with @id, or NULL. */
struct dp_peer_ent *dp_peer_find(struct dp *dp, uint32_t id);

/* Closes @c's socket and frees it (its tail too). NULL is a no-op. */
void dp_conn_free(struct dp *dp, struct dp_conn *c);

/* Sets the socket options every data socket gets (TCP_NODELAY, FTCC_SOCKBUF_BYTES). */
void dp_sock_opts(int fd);

/* Makes @c's tail the @len bytes at @hdr (NULL: none) followed by @len2 bytes at @buf, copied.
 * 0, or -ENOMEM (nothing changed). */
int dp_tail_set(struct dp *dp, struct dp_conn *c, const void *hdr, size_t len, const void *buf,
		size_t len2);
/* Writes what the socket takes of @c's tail. 1 when none is left, 0 when the socket is full,
 * -EPIPE when the connection broke. */
int dp_tail_flush(struct dp *dp, struct dp_conn *c);
/* Encodes a frame header for @t, @len and @shape into @p (DP_FRAME_HDR bytes). */
void dp_hdr_encode(uint8_t *p, const struct dp_tag *t, uint64_t len, uint64_t shape);

/* Accepts new connections and reads pending HELLOs; adopts those the epoch names. 0, or -EPIPE
 * (*@call->bad_peer) when an adopted connection replaced one that this call was using. Does
 * nothing unless the last poll() saw the listening socket readable, HELLOs are pending, or
 * DP_ACCEPT_IDLE_NS passed since the last pass (struct dp's accept_ns). */
int dp_accept_pass(struct dp *dp, struct dp_call *call);

/* Adopts pending connections that the peer table now names (after dp_set_peers()), refuses
 * those it names with another incarnation. */
void dp_pending_adopt(struct dp *dp);

/* Drives @pe's connection set-up (connector side: starts it when missing, retries with
 * back-off when an attempt fails). 1 when ready, 0 not yet, -EHOSTUNREACH when the peer has
 * been unreachable for dp->cut_ns (the attempts go on), -ENOMEM. */
int dp_conn_setup(struct dp *dp, struct dp_peer_ent *pe);

/* @pe's connection broke (@why for the log): it is closed; the peer is down from now. */
void dp_conn_broken(struct dp *dp, struct dp_peer_ent *pe, const char *why);
/* The same while no call wants @pe: the next call that does hears of it (broke_idle) when the
 * connection had carried frames. */
void dp_conn_broken_idle(struct dp *dp, struct dp_peer_ent *pe, const char *why);

/* Liveness of @pe's ready connection while a call waits on it: a NOP when a receive waited
 * dp->nop_ns without a byte, and the kernel's view of outstanding data. 0, or -EPIPE when data
 * went unacknowledged for dp->cut_ns (the connection is then broken). */
int dp_conn_watch(struct dp *dp, struct dp_peer_ent *pe, int64_t now);

/* Moves frames of @pe's ready connection: sends of this call in array order, then receives.
 * Counts completions in @call. 0, or -EPIPE/-EPROTO (the caller closes the connection). */
int dp_conn_io(struct dp *dp, struct dp_peer_ent *pe, uint32_t pidx, struct dp_call *call);

/* Poll events @pe's connection waits for in this call (0: none). */
short dp_conn_events(const struct dp *dp, const struct dp_peer_ent *pe);

/* Reads what @pe's ready connection holds while the call has no transfers with it: the header
 * of the next frame (checked against the call's shapes; the frame then waits for its receive),
 * or the rest of a dropped payload. 0, -EBADE (a shape mismatch: the frame is dropped), or
 * -EPIPE/-EPROTO (the caller closes the connection). */
int dp_conn_peek(struct dp *dp, struct dp_peer_ent *pe, uint32_t pidx, struct dp_call *call);
/* Whether dp_conn_peek() has something to read on @pe's connection (poll for POLLIN). */
int dp_conn_peekable(const struct dp_peer_ent *pe);

/* Streams over a transport (dp_xport.c). */

/* Starts the handle exchange of @c (HELLOs done): listens and sends the handle. DPC_XPORT, 0,
 * or -errno (a local failure; @c unchanged). */
int dpx_start(struct dp *dp, struct dp_conn *c, int64_t now);
/* Moves @c's handle exchange and transport connections on. 1 when @c is DPC_READY: over the
 * stream, or over its socket (c->xs NULL) when a stream did not come up by c->deadline_ns or
 * failed to; 0 not yet; -ENOMEM for a local failure (buffers, registration: this member's
 * fault, not the link's); another -errno when the TCP connection failed, or -ETIMEDOUT when
 * the peer's handle is not in by c->deadline_ns or its byte by nop_ns later. */
int dpx_step(struct dp *dp, struct dp_conn *c, int64_t now);
/* Moves every connection in DPC_XPORT on, wanted by the call or not: the peer waits on this
 * side's accept as much as on its own. */
void dp_xport_idle(struct dp *dp);
/* Liveness of @c's stream while a call waits on it: a message the transport has not had
 * acknowledged for @cut_ns (the caller gives it the failure timeout, in which the transport
 * hides a link flap by rebuilding its queue pairs; the peer's HCA answers whatever its process
 * does, as a kernel acknowledges what its process has not read) means a cut or a dead host.
 * 0 or -EPIPE. */
int dpx_watch(struct dp_conn *c, int64_t now, int64_t cut_ns);
/* Waits, at most DPX_DRAIN_NS in all, until the messages posted on the streams of @dp are
 * acknowledged (a close then loses nothing sent, as a socket's close does not). */
void dpx_drain(struct dp *dp);
/* Closes @c's transport connections and frees its stream. */
void dpx_free(struct dp *dp, struct dp_conn *c);

/* I/O on a ready connection, over its stream or its socket: as send(2), writev(2), recv(2)
 * (non-blocking, -1 with errno; a stream never returns 0). */
ssize_t dp_io_send(struct dp_conn *c, const void *buf, size_t len);
ssize_t dp_io_sendv(struct dp_conn *c, const struct iovec *iov, int n);
ssize_t dp_io_recv(struct dp_conn *c, void *buf, size_t len);
/* Whether @c holds bytes read ahead that poll() cannot see. */
static inline int dp_conn_buffered(const struct dp_conn *c)
{
	return c && c->rb_off < c->rb_len;
}

#endif
