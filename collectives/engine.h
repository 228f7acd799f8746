/* SPDX-License-Identifier: BSD-3-Clause */
/* Private state of a communicator (struct ftcc_comm) and its ops (struct ftcc_request), shared
 * by comm.c (life cycle, API), engine.c (running one op through its attempts) and
 * engine_sync.c (the resume exchanges, fills and have notices).
 */
#ifndef FTCC_ENGINE_H
#define FTCC_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "ftcc.h"
#include "ftcc/algo.h"
#include "ftcc/ctl.h"
#include "ftcc/dp.h"
#include "ftcc/resume.h"

/* Lanes: op seq runs on lane seq % nlanes, each lane with a thread and a data plane of its own,
 * so that up to nlanes consecutive ops are in flight at once (FTCC_LANES, the same on every
 * member). Op seq starts only once every op up to seq - nlanes completed here (the gate): a
 * member that takes part in op seq + nlanes has completed op seq. */
#define ENG_LANES_MAX 8
#define ENG_LANE_SALT 0x6c616e6500000000ull /* lane i > 0: its HELLOs are not lane 0's */
/* Ops from a new epoch's boundary that start with a resume exchange: the members may have
 * begun at most CTL_JOIN_SLACK ops past their progress report in the old epoch, plus the ops in
 * flight (one per lane) and the one after them. Every member has the same number of lanes. */
#define ENG_WINDOW(c) (CTL_JOIN_SLACK + (c)->nlanes + 1)
/* Completed ops remembered for the exchanges of later epochs. */
#define ENG_DONE_RING 64

/* What a request is: its shape's kind (bits 0-3). Every kind runs as an allreduce. */
enum eng_kind {
	ENG_ALLREDUCE = 1,
	ENG_BROADCAST = 2,	/* uint8 SUM of the bytes; every member but the root gives 0 */
	ENG_ALLGATHER = 3,	/* uint8 SUM of size slots, each member's own filled */
	ENG_REDUCE_SCATTER = 4, /* allreduce into the lane's buffer, then the own slot copied */
	ENG_BARRIER = 5,	/* an allreduce of no elements */
	ENG_SEND = 6,		/* point-to-point (p2p.c): never queued, never shaped */
	ENG_RECV = 7,
	ENG_FETCH = 8, /* a state fetch (p2p_state.c) */
};

struct p2p;

/* An op as a call describes it, for eng_start(): the allreduce the engine runs, and what the
 * shape says (@kind, @param: a broadcast's root; the caller's type and operator otherwise). */
struct eng_op {
	enum eng_kind kind;
	uint32_t param;
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	enum ftcc_dtype dtype;
	enum ftcc_redop op;
	enum ftcc_codec codec;
	void *tmp;		 /* owned by the request from then on (freed with it) */
	void *dst;		 /* reduce-scatter: where the own slot goes */
	size_t dst_off, dst_len; /* its bytes in the result */
};

/* One op: the caller's arguments, and its outcome once done. Owned by the caller between
 * ftcc_iallreduce() and ftcc_test()/ftcc_wait(); queued on the comm meanwhile. */
struct ftcc_request {
	struct ftcc_comm *comm;
	struct ftcc_request *next;	    /* queue of ops not yet run */
	struct ftcc_request *lprev, *lnext; /* every request not collected yet (under comm->mu) */
	uint64_t seq;
	const void *sendbuf;
	void *recvbuf;
	size_t count;
	enum ftcc_dtype dtype;
	enum ftcc_redop op;
	enum ftcc_codec codec; /* FTCC_CODEC_NONE: a plain allreduce */
	enum eng_kind kind;
	uint32_t param;		 /* struct eng_op's */
	void *tmp, *dst;	 /* struct eng_op's */
	size_t dst_off, dst_len; /* struct eng_op's */
	int done;		 /* under comm->mu (point-to-point: under the p2p lock) */
	int result;
	struct ftcc_record rec;
	/* point-to-point (ENG_SEND, ENG_RECV; p2p.c, under its lock): */
	uint32_t peer;		    /* destination, or source (FTCC_ANY_SOURCE) */
	uint64_t tag;		    /* FTCC_ANY_TAG: a receive of any */
	void *pm;		    /* its message (struct p2p_out / p2p_in), or NULL */
	struct ftcc_request *pnext; /* receives in post order; sends not yet taken */
	int busy;		    /* its buffer is in the transfers of the running progress */
	int cancel;		    /* ftcc_cancel() waits for the progress thread */
	int cancel_rc;		    /* and its answer */
	int cancelling;		    /* ftcc_cancel calls looking at it: not freed meanwhile */
	int internal;		    /* the library's own (p2p_state.c): on no live list */
	int rematch;		    /* its message's sender left: it takes another (p2p_run.c) */
	struct ftcc_p2p_status st;
};

/* What this member holds of op's current attempt. */
struct eng_att {
	uint64_t shape;	   /* the op's shape as this member called it (eng_shape()), always set */
	int mismatch;	   /* the op ended with a shape mismatch (then nothing below counts) */
	uint32_t mm_id;	   /* mismatch: a member whose shape differs from this member's */
	uint64_t mm_shape; /* and its shape */
	int valid;	   /* took part in an attempt */
	uint64_t epoch;	   /* its epoch */
	enum algo_id algo;
	uint32_t nchunks;
	uint32_t ncontrib;
	uint8_t contrib[FTCC_MAX_MEMBERS / 8];
	uint8_t have[RS_CHUNKS_MAX / 8];
};

/* A completed op, for the resume exchanges of epochs that begin at or before it. */
struct eng_done {
	uint64_t seq; /* UINT64_MAX: empty */
	struct eng_att att;
	uint64_t reported; /* newest epoch it was reported in */
	/* A 2-member recursive doubling op returns without the have notices: a copy of its
	 * result stays here (two ops long, in one of the comm's two copy buffers) so that this
	 * member can give it to its peer, whose last frame a broken link may have lost. NULL
	 * otherwise. */
	void *copy;
	size_t count;
	enum ftcc_dtype dtype;
};

struct ftcc_comm;

/* One lane: its ops' queue, data plane and executor state. */
struct eng_lane {
	struct ftcc_comm *c;
	uint32_t idx;
	struct dp *dp;
	pthread_t thread;
	int thread_started;
	int executing;			    /* a thread runs its ops (under c->mu) */
	int waiters;			    /* ftcc_wait() callers waiting for it (under c->mu) */
	struct ftcc_request *qhead, *qtail; /* not yet run, in seq order (under c->mu) */
	uint64_t exec_seq;		    /* its next op to run: its ops below are done (under
					     * c->mu) */
	unsigned sync_gen;		    /* ctl_gen at the last sync */

	/* Its executor's (whoever holds executing): */
	int64_t served_ms;  /* eng_serve() last ran */
	uint64_t dp_epoch;  /* epoch whose members the data plane knows */
	uint64_t dp_newest; /* and the newest epoch it also knows */
	struct eng_done done[ENG_DONE_RING];
	void *scratch;
	size_t scratch_len;
	void *keep; /* the preserved input of an in-place op */
	size_t keep_len;
	/* @keep is not written yet: the result buffer still holds the input (eng_keep_settle()
	 * copies it; a fresh ring attempt fills it as it goes: algo.h's keep_fill) */
	int keep_pending;
	void *ident; /* the identity input of a member catching up */
	size_t ident_len;
	void *rsbuf; /* a reduce-scatter's whole result */
	size_t rsbuf_len;
	struct ctl_epoch *opv; /* eng_op_view()'s buffer */
	size_t opv_cap;
	void *copybuf[2]; /* eng_done copies, by the parity of the op's turn in the lane */
	size_t copycap[2];
	struct eng_done *copyowner[2]; /* the entry whose copy is in copybuf[k], or NULL */
	struct rs_report *reports;     /* FTCC_MAX_MEMBERS, for the resume exchanges */
	uint64_t last_warned_epoch;
};

/* One member of a group: the membership, the lanes, the point-to-point plane. A communicator
 * with several streams (FTCC_STREAMS_MAX: independent op sequences) has one of these per
 * stream: stream 0's is the communicator itself, and owns the others, the membership and the
 * point-to-point plane; each stream has its own lanes, op numbers, queue and records, and the
 * membership's boundaries, progress and fences of its own (ctl_member_*_s()). */
struct ftcc_comm {
	struct ctl_member *ctl; /* stream 0's own; the others' is stream 0's */
	struct eng_lane lane[ENG_LANES_MAX];
	uint32_t nlanes;
	uint32_t stream;			     /* its index: 0 for the communicator */
	uint32_t nstreams;			     /* the communicator's streams */
	struct ftcc_comm *streams[FTCC_STREAMS_MAX]; /* stream 0's: every stream ([0] itself) */
	struct ftcc_comm *owner;		     /* stream 0's comm (itself for stream 0) */
	struct p2p *p2p; /* point-to-point messages, NULL when not started (p2p.h); stream 0 */
	char group[64];
	uint32_t rank, size;
	enum ftcc_degraded degraded;
	uint64_t incarnation;

	pthread_mutex_t mu;
	pthread_cond_t cv;
	int stop;		   /* under mu */
	atomic_int aborted;	   /* abort or destroy began */
	struct ftcc_request *live; /* not collected yet, freed by destroy (under mu) */
	uint64_t next_seq;	   /* given to the next op started (under mu) */
	atomic_int failed;	   /* gave up (left the group): the sticky error (written under
				    * mu; read by every lane) */
	int64_t timeout_ms;	   /* the failure timeout in effect */
	int no_have;	     /* FTCC_MEASURE_NO_HAVE: ops that moved data skip the have round */
	atomic_uint ctl_gen; /* bumped on every membership change */

	char last_error[256]; /* under mu */
};

/* The lane of op @seq. */
static inline struct eng_lane *eng_lane_of(struct ftcc_comm *c, uint64_t seq)
{
	return &c->lane[seq % c->nlanes];
}

/* The first op not completed here (every op below it is): the lowest lane's next op. Under
 * c->mu. */
uint64_t eng_done_below(const struct ftcc_comm *c);

/* Lane @idx's data plane address for member @m of an epoch (the control plane's info blob:
 * lane 0's "host:port", NUL, the point-to-point address or nothing, NUL, the other lanes'
 * ports "p1,p2,..."; lanes beyond 0 listen on lane 0's host) into @out (DP_ADDR_MAX). 0, or
 * -EPROTO when the blob names another number of lanes than @nlanes (then @out holds lane 0's
 * address). */
int eng_lane_addr(const uint8_t *info, size_t len, uint32_t idx, uint32_t nlanes, char *out);
/* The number of lanes a member's blob names (1 without the ports field). */
uint32_t eng_info_lanes(const uint8_t *info, size_t len);

/* The shape of op @r as every data frame and resume report carries it (dp.h, resume.h): its
 * kind (enum eng_kind) in bits 0-3, codec in 4-7, param in 8-23 (an allreduce's or
 * reduce-scatter's type | operator << 8, an allgather's type, a broadcast's root), the engine's
 * count in 24-63. */
uint64_t eng_shape(const struct ftcc_request *r);
/* "@count x @type @op" of @shape into @buf. */
void eng_shape_text(uint64_t shape, char *buf, size_t len);

/* Starts the lanes' threads, the first op being @first. 0 or FTCC_ERR_SYSTEM (the threads
 * started are marked; eng_lanes_join() ends them once c->stop is set). */
int eng_lanes_start(struct ftcc_comm *c, uint64_t first);
/* Whether a thread runs ops of some lane (under c->mu). */
int eng_lanes_busy(struct ftcc_comm *c);
/* Ends every op still queued on a lane (no thread will run it once c->stop is set) with
 * FTCC_ERR_ABORTED, for their ftcc_test() and ftcc_wait(). Under c->mu. */
void eng_lanes_abort_queued(struct ftcc_comm *c);
void eng_lanes_join(struct ftcc_comm *c);

/* Starts op @d (checked here: FTCC_ERR_INVALID for bad arguments) and queues it; @wake: tell the
 * executor thread. 0 and *@req, or an FTCC_ERR_*; @d->tmp is freed on an error. */
int eng_start(struct ftcc_comm *c, const struct eng_op *d, int wake, ftcc_request_t **req);
/* What the kind of op @r does once the engine ran it (colls.c): a broadcast without its root
 * fails, a reduce-scatter's slot is copied out. Executor only. */
void eng_coll_finish(struct eng_lane *l, struct ftcc_request *r);

/* Hands the result of ended request @r to its caller (and @rec), and frees it. */
int eng_collect(struct ftcc_request *r, struct ftcc_record *rec);

/* Runs op @r to its end (any number of attempts); fills r->result and r->rec. Executor only. */
void eng_run_op(struct eng_lane *l, struct ftcc_request *r);
/* Makes the kept input of in-place op @r whole (from its result buffer, which still holds the
 * input while l->keep_pending) before anything reads l->keep or writes the buffer. */
void eng_keep_settle(struct eng_lane *l, const struct ftcc_request *r);

/* Reports the completed ops a newer epoch reopens (members still finishing them wait for these
 * reports). Executor only; cheap when nothing changed. */
void eng_sync_done(struct eng_lane *l);
/* The same for epoch @e: every completed op from its boundary (within ENG_WINDOW) not yet
 * reported in it. Called before this member's own exchanges in @e, whose frames come after
 * those reports on every link (the tag order). Executor only. */
void eng_sync_epoch(struct eng_lane *l, const struct ctl_epoch *e);

/* The members of @e that take part in op @seq (those whose start is at or below it: a joiner
 * admitted from a later op is not part of the ops below it, even in an epoch that reopened
 * them): @e itself when all do, else a filtered copy in the executor's buffer, valid until the
 * next call. NULL when out of memory. Executor only. */
const struct ctl_epoch *eng_op_view(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq);

/* Answers the data plane's new connections (accepts, HELLOs, the rest of abandoned frames)
 * while no op moves data: between ops and while waiting for an epoch. A peer that reconnects
 * meanwhile is answered, not left to take this member for unreachable. At most every
 * ENG_SERVE_MS. Executor only. */
void eng_serve(struct eng_lane *l);

/* This member gives up: it leaves the group (LEAVE with @why, so the others finish without it
 * at once) and every later op fails with FTCC_ERR_LOST. */
void eng_give_up(struct ftcc_comm *c, int err, const char *why);

/* Records the communicator's last failure text. */
void eng_set_error(struct ftcc_comm *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Fills @buf with the identity element of @op for @dtype (the input of a member catching up). */
void eng_identity(void *buf, size_t count, enum ftcc_dtype dtype, enum ftcc_redop op);

/* Makes sure the data plane knows the members of @e. 0 or -errno. */
int eng_dp_peers(struct eng_lane *l, const struct ctl_epoch *e);

/* Waits until op @seq belongs to an epoch (not fenced); *@out is a reference. 0 or an
 * FTCC_ERR_*. Bounded. */
int eng_op_epoch(struct eng_lane *l, uint64_t seq, const struct ctl_epoch **out);

/* The data plane's check callback: nonzero when the epoch of op *(uint64_t *)... changed. */
struct eng_check {
	struct ftcc_comm *c;
	uint64_t seq;
	uint64_t epoch;
	unsigned gen;
	int64_t deadline_ms; /* -ETIMEDOUT from then (now_ms() clock); 0: none */
};
int eng_check(void *arg);
/* The monotonic clock of eng_check's deadline, ms. */
int64_t eng_now_ms(void);

/* The resume exchange of op @seq in epoch @e: sends this member's report (@mine, with the
 * RS_F_* @flags: COMPLETED from a member that returned the op, with SERVE when it kept a copy),
 * gathers everyone's, decides. 0 or an error (dp's, the check's, or, for a member that returned
 * the op, -ETIMEDOUT when a round of a larger group's reports waited past its bound, *@bad_peer
 * the member it waited on). */
int eng_exchange(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq,
		 const struct eng_att *mine, uint32_t flags, struct rs_decision *d,
		 uint32_t *bad_peer);

/* Pushes and receives the chunks of attempt @d that members of @e lack (reports from the
 * exchange). 0 or an error. */
int eng_fill(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq, struct ftcc_request *r,
	     const struct rs_decision *d, uint64_t shape, uint32_t *bad_peer);

/* Members up to which the have notices and the resume reports go to every member in one round;
 * larger groups send the notices in log2(n) rounds of one each (a dissemination barrier) and
 * gather the reports in log2(n) rounds with the same peers (Bruck's allgather). */
#define ENG_HAVE_ALL_MAX 8

/* The have notices of op @seq (of @shape) among the members of @e. 0 or an error. */
int eng_have(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq, uint64_t shape,
	     uint32_t *bad_peer);

#endif
