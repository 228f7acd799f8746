/* SPDX-License-Identifier: BSD-3-Clause */
/* Data plane of the allreduce engine: one connection per pair of members of a group,
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
 * Either side connecting (dp_cfg.either_connects, for a layer that wants a peer only when it
 * has something for it: the point-to-point layer). A member connects to any peer a transfer
 * names and it has no connection with. The lower member's connection goes first: the lower
 * member refuses the higher one's while it has its own (up, or an attempt with a socket), and
 * the higher member takes the lower one's in place of whatever it has, as a connector's new
 * connection always replaced the old one (its side of the old one broke). The lower member
 * takes a connection of the higher one when it has none of its own, in place of an earlier one
 * the higher member made (whose side of it broke). So two attempts that cross end in one
 * connection, and a connection refused because the lower member still holds one that broke on
 * the other side is taken once the lower member sees the break (it reads every connection it
 * holds, as a caller that peeks at its peers does). A call without transfers waits (up to its
 * @wait_ms) for connections to accept, and a call returns as soon as one is taken, so that its
 * caller can post transfers on it (dp_linked()).
 *
 * Faults between live members. The data plane never gives up on a peer and never closes a
 * connection to one on its own account: a connection that breaks (reset, closed, out of step)
 * is made again, the connector retrying with back-off for as long as transfers want it. What
 * was in flight on a broken connection is lost: the call whose transfers used it fails with
 * -EPIPE, and the engine asks the membership for another attempt of its op (every member
 * abandons the attempt; the op is finished from the data the members hold, or redone). A
 * connection with data outstanding that the peer's kernel has not acknowledged for half the
 * failure timeout counts as broken (a cut or a dead host; a peer that only reads slowly still
 * acknowledges); a receive that waits long sends a NOP frame so that a broken connection shows.
 * A peer that could not be connected to for half the failure timeout fails the call with
 * -EHOSTUNREACH; the membership decides what that means. A sender that abandons a frame it had
 * half written hands the rest to the data plane, which finishes it (a copy) before anything
 * else on that connection.
 *
 * Over ib. When FTCC_TRANSPORT picks the ib transport (ftcc_transport_pick()), the TCP
 * connection and its HELLO stay, and the frames then travel over a pair of connections of that
 * transport set up through it (dp_xport.c): a byte stream of copies through registered slots,
 * so everything above holds unchanged, a frame's buffers being the caller's again as soon as dp
 * has taken its bytes. The transport hides transient faults and fails a dead or silent peer; a
 * message it keeps unacknowledged for half the failure timeout counts as broken, as unacknowledged
 * data on a socket does. See README "InfiniBand and RoCE".
 *
 * Op shapes. A transfer may carry its op's shape (struct dp_xfer.shape: an opaque nonzero word
 * the caller derives from the op's count, type and operator; 0: unchecked), which every frame
 * header carries too. A frame whose shape differs from that of a transfer of this call of the
 * same op (seq) is dropped, payload and all, and the call fails with -EBADE: the members called
 * that op differently. The connection stays up. dp_mismatch() says what was seen. While a call
 * waits, the headers of frames from members it has no transfers with are read too (not their
 * payloads), so that a mismatch shows even when the differing members would never receive
 * from each other (a size that chose another algorithm).
 *
 * Frames: header {magic, tag, shape, payload length}; the payload lands directly in the receiving
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
	const char *bind_host; /* address to listen on and publish; NULL: the first network
				* interface (FTCC_SOCKET_IFNAME rules) */
	uint64_t group_id;     /* every HELLO carries it */
	uint32_t self_id;      /* member id */
	uint64_t incarnation;  /* this process's incarnation (the control plane's) */
	int64_t failure_ms;    /* the failure timeout its liveness bounds derive from; 0: setting */
	int either_connects;   /* either member of a pair connects (below); 0: the lower id */
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
	DP_PH_NOP = 0,	  /* no payload, matched by nothing: keeps a waiting connection honest */
	DP_PH_REPORT = 1, /* resume reports */
	DP_PH_FILL = 2,	  /* missing chunks pushed after a resume decision */
	DP_PH_DATA = 3,	 /* an algorithm's steps (an op in an epoch has a fill or data, not both) */
	DP_PH_HAVE = 4,	 /* "I hold the whole result" notices */
	DP_PH_TEST = 99, /* unit tests */
};

/* DP_PEEK: completes when the next frame from its peer that no receive of the call takes has
 * its header read, with that frame's tag and payload length in @tag and @len. A frame whose
 * payload fits the peek's @buf (@len bytes, set by the caller) is read into it, and the peek
 * completes with @off = @len; otherwise @off = 0 and the frame waits for a receive with its tag
 * in a later call (or is dropped by a receive with no buffer). A peek not complete when a call
 * returns is posted again unchanged (it may hold part of a frame). While
 * a call holds a peek of a peer (open or done), no frame of that peer is stale nor proof of a
 * loss (-ENOMSG): the caller orders them. For a layer that matches frames itself (p2p.c). */
enum dp_dir { DP_SEND = 1, DP_RECV = 2, DP_PEEK = 3 };

/* One transfer. The caller fills peer, dir, tag, buf, len; dp owns the rest while it is posted.
 * A receive completes with a frame of exactly @len bytes (a different length is -EPROTO); a
 * receive with a NULL @buf completes as soon as its frame's header is read, and the payload is
 * drained (dropped). */
struct dp_xfer {
	uint32_t peer;
	enum dp_dir dir;
	struct dp_tag tag;
	void *buf; /* send: const data */
	size_t len;
	uint64_t shape; /* the op's shape (frames carry it; see above); 0: not checked */
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
 * again). Spins briefly before sleeping in poll(). Errors (*@bad_peer names the peer): -ENOMSG
 * when a frame of a later op than a receive of the call came from that receive's peer (the
 * awaited frame was sent before it, and lost with a connection that broke since; the link and
 * the later frame stay); -EPIPE
 * when a connection this call used broke (closed, reset, replaced by the peer's new one, or
 * silent with data outstanding): frames may be lost, and a later transfer reconnects;
 * -EHOSTUNREACH when a peer could not be connected to for half the failure timeout (attempts
 * go on); -EPROTO on a malformed frame or length mismatch (its connection is closed); -EBADE
 * when a frame of one of this call's ops carried another shape (dp_mismatch());
 * -ECANCELED after dp_abort(); -EINVAL for a transfer naming an unknown peer or self;
 * -ENOMEM or -EIO, for good, when this member could not set up a stream (its buffers, their
 * registration, a listen endpoint of the transport): a local failure, whoever's call met it. After an
 * error, the caller either calls again or gives the transfers up with dp_release(). With no
 * transfers (@n 0) it writes what dp holds of abandoned frames, waiting up to @wait_ms. */
int dp_progress(struct dp *dp, struct dp_xfer *x, int n, int wait_ms, uint32_t *bad_peer);

/* Runs @x to completion: dp_progress() until all are done, calling @check(@arg) whenever a
 * wait returns 0 and every @check_ms; a nonzero result from @check stops it and is returned.
 * Otherwise 0 or dp_progress's error. */
int dp_run(struct dp *dp, struct dp_xfer *x, int n, int (*check)(void *arg), void *arg,
	   int check_ms, uint32_t *bad_peer);

/* The caller gives up the @n transfers @x (its check said stop, or a peer failed): after this
 * their buffers are the caller's again. A send dp left half written is finished from a copy
 * before anything else goes on its connection (an abandoned half frame could only be ended by
 * closing the connection); a receive half read has the rest of its frame drained. Sends not
 * started are dropped. Never blocks; out of memory for the copy, the connection is closed (a
 * broken link, which the peer survives). dp_run() does this itself before it returns an error
 * or a check's value. */
void dp_release(struct dp *dp, const struct dp_xfer *x, int n);

/* The last shape mismatch a call failed with: the op, the member whose frame it was, the shape
 * its frame carried and the one this member's transfer had. 0, or -ENOENT when none was seen. */
int dp_mismatch(const struct dp *dp, uint64_t *seq, uint32_t *peer, uint64_t *theirs,
		uint64_t *ours);

/* Whether @dp has a connection with member @id, made or being made (a socket, either side's;
 * not an attempt waiting to be retried). */
int dp_linked(const struct dp *dp, uint32_t id);

/* Makes every current and later dp_progress() return -ECANCELED at once. Any thread. */
void dp_abort(struct dp *dp);

/* Makes the current dp_progress() (or the next one, if none runs) return 0 soon, as if its wait
 * had passed: the caller has new transfers to post. Any thread. */
void dp_kick(struct dp *dp);

/* Closes every socket and frees. */
void dp_destroy(struct dp *dp);

/* Compares tags: <0, 0, >0. */
int dp_tag_cmp(const struct dp_tag *a, const struct dp_tag *b);

#endif
