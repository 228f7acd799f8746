/* Data plane of the allreduce engine: one TCP connection per pair of members of a group,
 * carrying tagged frames (header + payload) that the engine's algorithms post as transfer
 * lists and progress together, so a send and a receive (or many) never deadlock on full
 * socket buffers.
 *
 * Not thread-safe: one thread at a time calls into a struct dp (the engine serializes), except
 * dp_abort(), which any thread may call at any time.
 *
 * Connections: dp_set_peers() names the members of the current epoch with their incarnation and
 * published address. Connections are made when a transfer first needs them, the lower member
 * id connecting to the higher. Both ends send a HELLO (magic, version, group id, from id, from
 * incarnation, to id, to incarnation) and check the other's: a stranger, another group, a
 * foreign version or a wrong incarnation is logged and closed, never fatal. An accepted
 * connection whose HELLO names a member not yet known is kept (bounded, with a 5 s deadline for
 * its HELLO) until dp_set_peers() names it or refuses it.
 *
 * Frames: header {magic, tag, payload length}; the payload lands directly in the receiving
 * transfer's buffer. Tags order lexicographically by (epoch, seq, phase, step), which is the
 * order a member sends in: ops in sequence within an epoch, and a newer epoch only after it
 * abandoned the older one's attempts (an op reopened by a new epoch comes after later ops of
 * the old one: epoch first). From each peer,
 * frames arrive in order; a frame whose tag is lower than every receive posted for that peer
 * is stale (an aborted attempt) and is dropped, payload and all; a frame matching no posted
 * receive and not stale waits (its header read, its payload not) until one is posted.
 */
#ifndef FTCC_DP_H
#define FTCC_DP_H

#include <stddef.h>
#include <stdint.h>

struct dp;

struct dp_cfg {
	const char *bind_host;	    /* address to listen on and publish; NULL: the first network
				     * interface (FTCC_SOCKET_IFNAME rules) */
	uint64_t group_id;	    /* every HELLO carries it */
	uint32_t self_id;	    /* member id */
	uint64_t incarnation;	    /* this process's incarnation (the control plane's) */
	int64_t connect_timeout_ms; /* bound on one connection's setup; 0: setting */
};

/* One published address, "host:port" text. */
#define DP_ADDR_MAX 64

struct dp_peer {
	uint32_t id;
	uint64_t incarnation;
	char addr[DP_ADDR_MAX];
};

struct dp_tag {
	uint64_t seq;	/* op */
	uint64_t epoch; /* the epoch of the exchange (not of the attempt being finished); orders
			 * before seq */
	uint32_t phase; /* DP_PH_* */
	uint32_t step;	/* algorithm step and segment, as the phase defines */
};

/* Phases, in protocol order within one op and epoch: a frame of a later phase may arrive while
 * the receiver still waits in an earlier one, and must not look stale to it. */
enum {
	DP_PH_REPORT = 1, /* resume reports */
	DP_PH_FILL = 2,	  /* missing chunks pushed after a resume decision */
	DP_PH_DATA = 3,	 /* an algorithm's steps (an op in an epoch has a fill or data, not both) */
	DP_PH_HAVE = 4,	 /* "I hold the whole result" notices */
	DP_PH_TEST = 99, /* unit tests */
};

enum dp_dir { DP_SEND = 1, DP_RECV = 2 };

/* One transfer. The caller fills peer, dir, tag, buf, len; dp owns the rest while it is posted.
 * A receive completes with a frame of exactly @len bytes (a different length is -EPROTO). */
struct dp_xfer {
	uint32_t peer;
	enum dp_dir dir;
	struct dp_tag tag;
	void *buf; /* send: const data */
	size_t len;
	/* dp's: */
	int done;      /* 1 once complete */
	size_t off;    /* bytes moved so far */
	int hdr_state; /* private */
};

/* Creates the data plane and its listening socket (ephemeral port on the bind host). 0 and
 * *@out; -EINVAL; -errno of socket/bind/listen. */
int dp_create(const struct dp_cfg *cfg, struct dp **out);

/* The address to publish, "host:port". */
const char *dp_addr(const struct dp *dp);

/* The members of the current epoch (self may be listed; it is ignored). Connections to members
 * no longer listed, or listed with another incarnation, are closed. 0 or -EINVAL/-ENOMEM. */
int dp_set_peers(struct dp *dp, const struct dp_peer *peers, uint32_t n);

/* Progresses the @n transfers in @x (all posted by this call, in any state) for up to
 * @wait_ms: returns as soon as at least one transfer completes that was not complete on entry
 * (> 0: how many), or 0 when @wait_ms passed with none (the caller checks the epoch and calls
 * again). Spins briefly before sleeping in poll(). Errors: -EPIPE when a peer's connection was
 * closed or reset or failed to connect (*@bad_peer names it; the connection is gone, and a
 * later transfer with that peer reconnects); -ECANCELED after dp_abort(); -EPROTO on a
 * malformed frame or length mismatch (*@bad_peer names the peer; its connection is closed);
 * -EINVAL for a transfer naming an unknown peer or self. */
int dp_progress(struct dp *dp, struct dp_xfer *x, int n, int wait_ms, uint32_t *bad_peer);

/* Runs @x to completion: dp_progress() until all are done, calling @check(@arg) whenever a
 * wait returns 0 and every @check_ms; a nonzero result from @check stops it and is returned.
 * Otherwise 0 or dp_progress's error. */
int dp_run(struct dp *dp, struct dp_xfer *x, int n, int (*check)(void *arg), void *arg,
	   int check_ms, uint32_t *bad_peer);

/* Finishes, for up to @ms, the sends of @x that dp left half written (a frame's header or part
 * of its payload on the stream), so that a caller giving up on @x (its check said stop, or
 * another peer failed) does not cost those connections: an abandoned half frame can only be
 * ended by closing the connection, which the peer sees as -EPIPE. The peer uses or drops the
 * finished frames like any other. Sends not yet started are left alone; errors are ignored.
 * dp_run() does this itself before returning a check's value or an error other than
 * -ECANCELED. */
void dp_settle(struct dp *dp, const struct dp_xfer *x, int n, int ms);

/* Makes every current and later dp_progress() return -ECANCELED at once. Any thread. */
void dp_abort(struct dp *dp);

/* Closes every socket and frees. */
void dp_destroy(struct dp *dp);

/* Compares tags: <0, 0, >0. */
int dp_tag_cmp(const struct dp_tag *a, const struct dp_tag *b);

#endif
