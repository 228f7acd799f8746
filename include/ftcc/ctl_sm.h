/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership state machines as pure logic: the coordinator of one group (struct ctl_coord) and
 * one member's view of the group (struct ctl_msm).
 *
 * Neither does I/O, reads a clock or takes a lock. The caller (the runtime in control/, or a
 * test with a fake network and a fake clock) feeds them events with the current time in
 * milliseconds and carries out what they ask through their ops table. Every call runs to
 * completion; ops callbacks must not call back into the same machine.
 *
 * Protocol in brief (README "Membership" has the long form):
 *  - A coordinator forms epoch 1 once all expected members said HELLO, then owns every epoch
 *    change. A change is PROPOSEd to the members that stay; each ACKs with its op progress; the
 *    VIEW (commit) names the first op of the new epoch: the lowest op not done by some member
 *    when members are removed or the ops in flight need another attempt, or every member's next
 *    op plus CTL_JOIN_SLACK when members are only added, so nobody waits. A member that ACKed
 *    may issue ops below its next op plus CTL_JOIN_SLACK in the old epoch; further ops wait for
 *    the VIEW (the fence).
 *  - Only the coordinator decides who is in the group, and only on evidence about the accused
 *    that it holds itself: a LEAVE (the member's own word), a new incarnation asking to join,
 *    silence on the accused's control connection for the failure timeout, or its control
 *    connection ended without a LEAVE and a connect to its listening port refused (the process
 *    is gone). What one member says of another (SUSPECT) is a reason to look, never a verdict:
 *    a broken data link between two live members asks for another attempt of the ops in flight
 *    (a retry epoch, same members); a link that stays broken between two members the
 *    coordinator hears removes exactly one of them, by a fixed rule (coord_verdict.c).
 *  - Safety: the members that go on must be a quorum of the epoch they leave (more than half,
 *    or exactly half including its lowest id), unless every other member left on purpose. A
 *    death the coordinator proved does not shrink the base (a firewall can forge the resets
 *    and refusals that prove it), except at a daemon, which no member ever replaces. Without
 *    quorum the coordinator stops and tells everyone why.
 *  - Embedded backend: the lowest live member hosts the coordinator. A member whose link to it
 *    ends connects again; a refused connect, silence for the failure timeout, or the host
 *    leaving (REFUSE LEFT) is the loss of the coordinator. The member then tells it so if it can
 *    (SUSPECT of the coordinator, never a bare close) and goes to the lowest member of its view
 *    it holds no evidence against; if that is itself, it hosts a coordinator in takeover mode,
 *    which rebuilds the group from the HELLO reports (views, progress, evidence) and commits
 *    max(epoch numbers reported) + 1, under the same quorum rule. Epoch numbers never repeat.
 *  - Final member states: LOST (no quorum, no coordinator within the bound), REMOVED (refused as
 *    stale), LEFT.
 */
#ifndef FTCC_CTL_SM_H
#define FTCC_CTL_SM_H

#include <stddef.h>
#include <stdint.h>

#include "ctl_wire.h"

/* Ops a member may issue in the old epoch beyond its next op when it ACKs a join proposal. */
#define CTL_JOIN_SLACK 16

/* Quorum rule over member id sets: 1 when the @nlive ids of @live (a subset of @base) form a
 * quorum of the @nbase ids of @base. Pure; used by both machines and by tests. */
int ctl_quorum(const uint32_t *live, uint32_t nlive, const uint32_t *base, uint32_t nbase);

/* ---- coordinator --------------------------------------------------------------------------- */

enum ctl_coord_state {
	CTL_C_FORMING = 1, /* waiting for the expected members' first HELLO */
	CTL_C_TAKEOVER,	   /* rebuilding the group from members' reports */
	CTL_C_RUNNING,	   /* an epoch is committed; changes are proposed as they come */
	CTL_C_STOPPED,	   /* no quorum, formation timed out, or shut down: refuses everyone */
};

/* Configuration of one group's coordinator. Copied at create. */
struct ctl_coord_cfg {
	char group[CTL_GROUP_MAX];
	uint32_t expected;	  /* members at formation; ids are 0 .. expected - 1 */
	uint32_t host;		  /* hosting member's id (embedded), CTL_NO_MEMBER for a daemon */
	uint64_t timeout_ms;	  /* failure timeout (silence) */
	uint64_t hb_ms;		  /* heartbeat period */
	uint64_t form_timeout_ms; /* FORMING: stop if not everyone came by then */
	uint32_t nstreams;	  /* op sequences of the group, 1 .. CTL_STREAMS_MAX (0: 1); a
				   * HELLO with another number is refused */

	/* Takeover (embedded): the hosting member's state when it lost the coordinator. */
	int takeover;
	uint64_t epoch;			      /* its epoch */
	uint64_t max_epoch;		      /* highest epoch number it saw, proposals included */
	uint32_t nmembers;		      /* its view */
	const struct ctl_member_rec *members; /* CTL_MF_DEAD marks its death evidence */
	uint32_t suspect;		      /* the coordinator it lost (not awaited), or none */
};

/* What a probe of a member's listening port found. */
enum ctl_probe_result {
	CTL_PROBE_ALIVE = 1, /* a connection was accepted: the process lives */
	CTL_PROBE_REFUSED,   /* refused: nothing listens there, the process is gone */
	CTL_PROBE_UNKNOWN,   /* no answer within the bound, or no address to probe */
};

/* What a coordinator asks of its runtime. @conn is the runtime's handle of a connection that
 * delivered a HELLO to this coordinator. */
struct ctl_coord_ops {
	void *arg;
	/* Queues @m on @conn. Failure is reported later through ctl_coord_on_close(). */
	void (*send)(void *arg, uint32_t conn, const struct ctl_msg *m);
	/* Closes @conn after what was queued on it is flushed (bounded by the runtime). The
	 * coordinator forgets @conn; no on_close follows. */
	void (*close)(void *arg, uint32_t conn);
	/* Connects to member @id's listening port (the address its HELLO named) and answers
	 * through ctl_coord_on_probe() with @incarnation, within about the failure timeout.
	 * Optional: without it, connections that end are left to the silence rule. */
	void (*probe)(void *arg, uint32_t id, uint64_t incarnation);
};

struct ctl_coord;

/* Creates a coordinator in FORMING (or TAKEOVER when cfg->takeover). NULL when out of memory.
 * @ops is copied. */
struct ctl_coord *ctl_coord_create(const struct ctl_coord_cfg *cfg, const struct ctl_coord_ops *ops,
				   uint64_t now);
/* Frees @c. Sends nothing: call ctl_coord_shutdown() first to tell the members. */
void ctl_coord_destroy(struct ctl_coord *c);
/* REFUSE(CLOSED) and close for every connection; the state becomes STOPPED. */
void ctl_coord_shutdown(struct ctl_coord *c, uint64_t now);
/* The hosting member leaves the group on purpose (@reason): REFUSE(LEFT) to everyone, which the
 * members take as proof that it is out (a takeover may go on without it); STOPPED. A daemon's
 * coordinator just shuts down. */
void ctl_coord_host_left(struct ctl_coord *c, const char *reason, uint64_t now);

/* A decoded frame arrived on @conn (the first one on a connection is HELLO; the runtime has
 * checked the group id). */
void ctl_coord_on_msg(struct ctl_coord *c, uint32_t conn, const struct ctl_msg *m, uint64_t now);
/* @conn ended. @death: closed or reset by the peer (EOF, ECONNRESET), which is death evidence
 * for its member; 0 for a local error or timeout. */
void ctl_coord_on_close(struct ctl_coord *c, uint32_t conn, int death, uint64_t now);
/* The answer to ops.probe(@id, @incarnation). */
void ctl_coord_on_probe(struct ctl_coord *c, uint32_t id, uint64_t incarnation,
			enum ctl_probe_result res, uint64_t now);
/* Timers: heartbeats, silence, links, proposal and formation deadlines. Call at least every
 * hb_ms/2. */
void ctl_coord_tick(struct ctl_coord *c, uint64_t now);

enum ctl_coord_state ctl_coord_state(const struct ctl_coord *c);
uint64_t ctl_coord_epoch(const struct ctl_coord *c);
/* Members of the committed epoch (ids, in order) into @ids (up to @cap); returns the count. */
uint32_t ctl_coord_members(const struct ctl_coord *c, uint32_t *ids, uint32_t cap);
/* Appends a plain-text status of the group to @buf (NUL-terminated, cut at @len): one line for
 * the group (name, state, epoch, boundary, expected, coordinator), one per member (id,
 * incarnation, contributor, connected, ms since its last frame, progress), one per pending join.
 * Returns the length written. */
size_t ctl_coord_status(const struct ctl_coord *c, char *buf, size_t len, uint64_t now);

/* ---- member ------------------------------------------------------------------------------- */

enum ctl_member_state {
	CTL_M_BOOT = 1, /* reaching the first coordinator; waiting for epoch 1 */
	CTL_M_JOINING,	/* asked to join a running group */
	CTL_M_ACTIVE,	/* in an epoch, coordinator reachable */
	CTL_M_SEARCH,	/* coordinator lost: finding (or hosting) its successor */
	CTL_M_LOST,	/* final: no quorum, or no coordinator within the bound */
	CTL_M_REMOVED,	/* final: refused as stale (removed from the group) */
	CTL_M_LEFT,	/* final: left on purpose */
};

/* Configuration of one member. Copied at create. */
struct ctl_msm_cfg {
	char group[CTL_GROUP_MAX];
	uint32_t id;
	uint32_t expected;
	uint64_t incarnation;
	int daemon;  /* 1: the coordinator is a daemon (no takeover); 0: embedded */
	int join;    /* start by joining a running group (restart or new member) */
	int catchup; /* join as a non-contributor until ctl_msm_ready() */
	uint64_t timeout_ms;
	uint64_t hb_ms;
	uint64_t connect_timeout_ms; /* BOOT/JOINING: give up after this long */
	uint16_t listen_port;	     /* its control listener's port, sent in HELLO (0: none) */
	uint32_t nstreams;	     /* op sequences, 1 .. CTL_STREAMS_MAX (0: 1), the same on
				      * every member */
	uint16_t info_len;
	uint8_t info[CTL_INFO_MAX];
};

/* One committed epoch as the member learnt it. */
struct ctl_epoch_rec {
	uint64_t epoch;
	uint64_t boundary;			 /* first op in this epoch */
	uint64_t xboundary[CTL_STREAMS_MAX - 1]; /* stream t >= 1's: xboundary[t - 1] */
	uint32_t coord;
	uint32_t nmembers;
	struct ctl_member_rec *members; /* owned by the machine */
};

/* What a member asks of its runtime. There is at most one coordinator connection at a time. */
struct ctl_msm_ops {
	void *arg;
	/* Opens a connection to member @target's control port (embedded) or the daemon
	 * (@target == CTL_NO_MEMBER). Later: ctl_msm_on_connected, or ctl_msm_on_close. */
	void (*connect)(void *arg, uint32_t target);
	/* Queues @m on the open connection. */
	void (*send)(void *arg, const struct ctl_msg *m);
	/* Closes the connection after flushing what was queued. No on_close follows. */
	void (*disconnect)(void *arg);
	/* Embedded: start hosting a coordinator with @cfg (FORMING or TAKEOVER), replacing one
	 * hosted before (shut down, then destroyed). The runtime fills ops and timeouts it owns.
	 * @cfg NULL: stop hosting (another member coordinates). */
	void (*host)(void *arg, const struct ctl_coord_cfg *cfg);
	/* The state or the committed epoch changed (wake waiters). */
	void (*changed)(void *arg);
};

struct ctl_msm;

/* Creates a member and starts it (asks for its first connection, hosts the first coordinator
 * if it is member 0 of an embedded group being formed). NULL when out of memory. */
struct ctl_msm *ctl_msm_create(const struct ctl_msm_cfg *cfg, const struct ctl_msm_ops *ops,
			       uint64_t now);
void ctl_msm_destroy(struct ctl_msm *s);

/* The connection asked for is open. */
void ctl_msm_on_connected(struct ctl_msm *s, uint64_t now);
/* The connection failed or ended. @refused: nobody listens there (ECONNREFUSED); @death: closed
 * or reset by the peer after it was open. Both 0: timeout or local error. */
void ctl_msm_on_close(struct ctl_msm *s, int refused, int death, uint64_t now);
void ctl_msm_on_msg(struct ctl_msm *s, const struct ctl_msg *m, uint64_t now);
void ctl_msm_tick(struct ctl_msm *s, uint64_t now);

/* The engine's progress: next op it will issue and first op not completed. Cheap; read when
 * ACKing and in heartbeats. */
void ctl_msm_progress(struct ctl_msm *s, uint64_t next_op, uint64_t done_op);
/* The same for stream @stream (< the configured number; others are ignored). */
void ctl_msm_progress_s(struct ctl_msm *s, uint32_t stream, uint64_t next_op, uint64_t done_op);
/* Evidence about member @peer from the data path, seen while running op @seq: sent to the
 * coordinator (dropped when there is no link to it; the caller sends it again while it waits). */
void ctl_msm_suspect(struct ctl_msm *s, uint32_t peer, enum ctl_evidence ev, uint64_t seq,
		     uint64_t now);
/* The same for op @seq of stream @stream. */
void ctl_msm_suspect_s(struct ctl_msm *s, uint32_t peer, enum ctl_evidence ev, uint32_t stream,
		       uint64_t seq, uint64_t now);
/* A catch-up member is ready to contribute. -EINVAL when not a catch-up member. */
int ctl_msm_ready(struct ctl_msm *s, uint64_t now);
/* Leave on purpose for @reason (may be NULL): LEAVE is queued and the connection closed; state
 * LEFT. */
void ctl_msm_leave(struct ctl_msm *s, const char *reason, uint64_t now);

enum ctl_member_state ctl_msm_state(const struct ctl_msm *s);
/* Why the member is in a final state (or the last notable event); never NULL. */
const char *ctl_msm_reason(const struct ctl_msm *s);
/* The newest committed epoch, or NULL before the first. Valid until the next event. */
const struct ctl_epoch_rec *ctl_msm_view(const struct ctl_msm *s);
/* Epoch that op @seq belongs to, among the newest few committed (NULL when older than those or
 * before the first epoch). *@fenced = 1 when @seq may not be issued yet (a proposal is open and
 * @seq is at or past the fence). */
const struct ctl_epoch_rec *ctl_msm_op_epoch(const struct ctl_msm *s, uint64_t seq, int *fenced);
/* The same for op @seq of stream @stream (its boundaries and fence). */
const struct ctl_epoch_rec *ctl_msm_op_epoch_s(const struct ctl_msm *s, uint32_t stream,
					       uint64_t seq, int *fenced);
/* Stream @stream's boundary in @e. */
static inline uint64_t ctl_epoch_rec_boundary(const struct ctl_epoch_rec *e, uint32_t stream)
{
	return stream ? e->xboundary[stream - 1] : e->boundary;
}
/* The first op of this incarnation (its record's start in the newest view): 0 for a founding
 * member, its admission boundary for a joiner. */
uint64_t ctl_msm_admitted(const struct ctl_msm *s);
/* The same in stream @stream. */
uint64_t ctl_msm_admitted_s(const struct ctl_msm *s, uint32_t stream);
/* Member id believed to coordinate now (CTL_NO_MEMBER: unknown or the daemon). */
uint32_t ctl_msm_coord(const struct ctl_msm *s);
/* Earliest time a tick is needed. */
uint64_t ctl_msm_next_deadline(const struct ctl_msm *s);

const char *ctl_member_state_name(enum ctl_member_state st);
const char *ctl_coord_state_name(enum ctl_coord_state st);

#endif
