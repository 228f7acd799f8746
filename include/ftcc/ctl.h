/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership service: who is in the group now. The one interface the engine and the CollNet
 * plug-in use, over interchangeable backends:
 *
 *   embedded (default, spec "" or "embedded"): the lowest live member hosts the coordinator;
 *            the members' control addresses are all it needs.
 *   daemon   (spec "host:port"): ftcc-coordinator serves the group, and many others.
 *   etcd     (spec "etcd://..."): reserved; ctl_member_create() says it is not built yet.
 *
 * Each member runs its own control thread: heartbeats, failure detection and epoch changes go
 * on whether or not the application calls in. All functions are thread-safe unless noted.
 * Errors are negative errno values; a final state carries a reason text (ctl_view.reason).
 */
#ifndef FTCC_CTL_H
#define FTCC_CTL_H

#include <stddef.h>
#include <stdint.h>

#include "ctl_sm.h"
#include "ctl_wire.h"

/* Creation parameters. Strings and arrays are copied at create. */
struct ctl_member_cfg {
	const char *group;	      /* group name, 1..63 bytes */
	uint32_t id;		      /* this member's id (rank), < expected */
	uint32_t expected;	      /* group size at formation, 1..CTL_MAX_MEMBERS */
	const char *coordinator;      /* backend spec (above); NULL = FTCC_COORDINATOR */
	const char *const *addrs;     /* embedded: "host:port" control address of each member id
				   * (expected entries; this member listens on addrs[id]) */
	int join;		      /* 1: (re)join a running group instead of forming it */
	int catchup;		      /* with join: non-contributor until ctl_member_ready() */
	const void *info;	      /* opaque blob published with this member in every view */
	size_t info_len;	      /* <= CTL_INFO_MAX */
	uint32_t nstreams;	      /* independent op sequences, each with its own progress,
				       * boundaries and fences (the *_s calls): 1 .. CTL_STREAMS_MAX,
				       * the same on every member (0: 1) */
	int64_t timeout_ms;	      /* 0 = FTCC_FAILURE_TIMEOUT_MS */
	int64_t hb_ms;		      /* 0 = FTCC_HEARTBEAT_MS rule */
	int64_t connect_timeout_ms;   /* 0 = FTCC_CONNECT_TIMEOUT_MS */
	uint64_t incarnation;	      /* 0 = a random one; the engine passes its own so the data
				       * plane can name it */
	int has_listen_fd;	      /* embedded: listen on a duplicate of listen_fd, a socket */
	int listen_fd;		      /* already listening on addrs[id]'s port (the caller keeps
				       * and closes its own; the CollNet plug-in hands out that
				       * port in its handle before the group is known) */
	void (*on_change)(void *arg); /* optional: called on the control thread after every view
				       * or state change; must not block or call ctl_member_* */
	void *on_change_arg;
};

/* One committed epoch, immutable once published and shared by reference: whoever got it from
 * ctl_member_view() or ctl_member_op_epoch() releases it with ctl_epoch_put(). */
struct ctl_epoch {
	uint64_t epoch;	   /* epoch number (>= 1) */
	uint32_t stream;   /* the op sequence it describes: 0 but from ctl_member_op_epoch_s() */
	uint64_t boundary; /* first op of this epoch (in that stream) */
	uint32_t coord;	   /* coordinating member id, CTL_NO_MEMBER for a daemon */
	int self_index;	   /* position of this member in members[], -1 when not a member */
	uint32_t nmembers;
	struct ctl_member_rec members[]; /* in id order; info is each member's published blob */
};

/* Drops a reference taken by ctl_member_view() or ctl_member_op_epoch(). NULL is ignored. */
void ctl_epoch_put(const struct ctl_epoch *e);

/* A member's current state. */
struct ctl_view {
	enum ctl_member_state state;
	uint32_t self;		   /* this member's id */
	const struct ctl_epoch *e; /* newest committed epoch (a reference), NULL before the first */
	char reason[CTL_TEXT_MAX]; /* why LOST / REMOVED / LEFT, or the last notable event */
};

struct ctl_member;

/* Validates @cfg, binds the control port (embedded) and starts the control thread. Does not
 * wait for the group: use ctl_member_wait(). Returns 0 and *@out, or -EINVAL (bad config, with
 * a log line saying which field), -EADDRINUSE, -EPROTONOSUPPORT (etcd), -ENOMEM. */
int ctl_member_create(const struct ctl_member_cfg *cfg, struct ctl_member **out);

/* Waits up to @timeout_ms (< 0: forever is refused, -EINVAL) until the member is in an epoch
 * numbered >= @min_epoch. 0; -ETIMEDOUT; or, when the member reached a final state, -ENOTCONN
 * (LOST), -ESTALE (REMOVED), -ESHUTDOWN (LEFT). */
int ctl_member_wait(struct ctl_member *m, uint64_t min_epoch, int timeout_ms);

/* Fills @v with the current state; v->e holds a reference (ctl_epoch_put(v->e) when done).
 * Never blocks for long (a mutex). */
void ctl_member_view(struct ctl_member *m, struct ctl_view *v);
/* The same with the epoch as stream @stream sees it (ctl_member_op_epoch_s()). */
void ctl_member_view_s(struct ctl_member *m, uint32_t stream, struct ctl_view *v);

/* The epoch op @seq belongs to, as a reference in *@out: 0; -EAGAIN when @seq is fenced by an
 * open proposal, or no epoch has begun yet (retry after the next change); -ERANGE when @seq is
 * older than the epochs kept; a final state's error as in ctl_member_wait(). */
int ctl_member_op_epoch(struct ctl_member *m, uint64_t seq, const struct ctl_epoch **out);
/* The same for op @seq of stream @stream: the epoch as that stream sees it (its boundary, each
 * member's start in it). -EINVAL for a stream the member does not have. */
int ctl_member_op_epoch_s(struct ctl_member *m, uint32_t stream, uint64_t seq,
			  const struct ctl_epoch **out);

/* Engine progress (next op to issue, first op not completed); reported in heartbeats and ACKs.
 * The next op only grows (calls from the issuing and the executing thread may cross).
 * Lock-free. */
void ctl_member_progress(struct ctl_member *m, uint64_t next_op, uint64_t done_op);
/* The same for stream @stream (a stream the member does not have is ignored). */
void ctl_member_progress_s(struct ctl_member *m, uint32_t stream, uint64_t next_op,
			   uint64_t done_op);

/* An op was issued: the next op to issue is now @next_op (or more). Lock-free. */
void ctl_member_issued(struct ctl_member *m, uint64_t next_op);
void ctl_member_issued_s(struct ctl_member *m, uint32_t stream, uint64_t next_op);

/* Reports what the data path saw of @peer while running op @seq: CTL_EV_LINK (a data link
 * broke: the ops in flight need another attempt) or CTL_EV_CUT (the peer cannot be reached).
 * The coordinator decides; nothing here is a verdict. Sent only while the coordinator's link is
 * up: a caller waiting on the outcome sends it again. 0 or -EINVAL. */
int ctl_member_suspect(struct ctl_member *m, uint32_t peer, enum ctl_evidence ev, uint64_t seq);
/* The same about op @seq of stream @stream. */
int ctl_member_suspect_s(struct ctl_member *m, uint32_t peer, enum ctl_evidence ev, uint32_t stream,
			 uint64_t seq);

/* Leaves the group on purpose for @reason (LEAVE, best effort), without freeing anything: the
 * member's state becomes LEFT, and the others go on without it at once (a LEAVE is proof that
 * it is out). For a member that gives up (a local failure) and must not make the others wait.
 * 0, or -EINVAL. */
int ctl_member_leave(struct ctl_member *m, const char *reason);

/* The first op of this member's incarnation in the group: 0 for a founding member, its
 * admission boundary for a joiner (the start of its record in every view). */
uint64_t ctl_member_admitted(struct ctl_member *m);
/* The same in stream @stream. */
uint64_t ctl_member_admitted_s(struct ctl_member *m, uint32_t stream);

/* A catch-up member declares itself ready to contribute. 0 or -EINVAL. */
int ctl_member_ready(struct ctl_member *m);

/* Leaves the group (LEAVE sent, best effort) and frees everything. Returns within about 100 ms
 * whatever the peers do. @m may be NULL. */
void ctl_member_destroy(struct ctl_member *m);

/* Plain-text status of the group as this member sees it (and of the coordinator it hosts, if
 * any) into @buf. Returns the length. */
size_t ctl_member_status(struct ctl_member *m, char *buf, size_t len);

/* ---- daemon ---------------------------------------------------------------------------------- */

struct ctl_daemon;

/* Starts a coordinator daemon listening on @addr ("host:port"; port 0 picks one) on its own
 * thread, serving any number of groups. 0 and *@out, or -errno. */
int ctl_daemon_start(const char *addr, struct ctl_daemon **out);
/* The port it listens on. */
int ctl_daemon_port(const struct ctl_daemon *d);
/* Status of every group (the same text a "STATUS" request on the port returns). */
size_t ctl_daemon_status(struct ctl_daemon *d, char *buf, size_t len);
/* Stops the thread, tells every member (REFUSE CLOSED), frees everything. */
void ctl_daemon_stop(struct ctl_daemon *d);

/* Parses "host:port" (IPv4 dotted, IPv6 in brackets, or a name resolved once) into @ss.
 * 0 or -EINVAL. */
struct sockaddr_storage;
int ctl_parse_addr(const char *text, struct sockaddr_storage *ss, unsigned *sslen);

#endif
