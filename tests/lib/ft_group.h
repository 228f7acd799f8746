/* SPDX-License-Identifier: BSD-3-Clause */
/* A group of fault-tolerant allreduce communicators (include/ftcc.h), one per forked process, for
 * the multi-process and chaos tests: every member runs the same script of allreduce ops and
 * records, per op, what it got; the test kills, freezes, cuts off, aborts or restarts members and
 * then checks every record against the others and against the exact expected result.
 *
 * Member i listens on 127.0.0.(10 + i):port (distinct loopback addresses, so an nftables rule can
 * cut one member off by address). The op with sequence number s is script[s % nspec] on every
 * member, and its input is a function of (member id, s, element index) only, with small integer
 * values whose reductions are exact in every type. So the parent can rebuild the result of any op
 * from its record's contributor set and compare checksums (ft_group_check()). Each process (a
 * restart is a new one) has its own record of every op it ran, indexed by sequence number, in a
 * page shared before fork; the child writes it, the parent reads it and sets the control flags. One
 * test thread drives a group. */
#ifndef FTCC_TESTS_FT_GROUP_H
#define FTCC_TESTS_FT_GROUP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftcc.h"

#define FT_GROUP_MAX_N 8	      /* members in one test group */
#define FT_GROUP_MAX_RUNS 32	      /* member processes over a group's life, restarts included */
#define FT_GROUP_MAX_SEQ 8192	      /* ops one process can record (sequence numbers below this) */
#define FT_GROUP_MAX_SPECS 96	      /* entries of a script */
#define FT_GROUP_MAX_DEPTH 8	      /* ops in flight at once (iallreduce) */
#define FT_GROUP_IP_BASE 10	      /* member i listens on 127.0.0.(FT_GROUP_IP_BASE + i) */
#define FT_GROUP_MAX_EPOCHS 512	      /* epochs one process records (then it counts the rest) */
#define FT_GROUP_AS_SLACK (24u << 20) /* opts.as_limit_seq: address space left to grow */

/* Which collective an op of the script is. */
enum ft_kind {
	FT_ALLREDUCE = 0,
	FT_BROADCAST = 1,      /* from member root; count elements */
	FT_ALLGATHER = 2,      /* count elements per member; inplace: from its own slot */
	FT_REDUCE_SCATTER = 3, /* size * count elements in, count out */
	FT_BARRIER = 4,
};

/* One op of the script. */
struct ft_spec {
	size_t count; /* elements */
	enum ftcc_dtype dtype;
	enum ftcc_redop op;
	int inplace;	       /* sendbuf == recvbuf */
	enum ftcc_codec codec; /* a quantized allreduce (ftcc_allreduce_opts); 0: plain */
	enum ft_kind kind;
	uint32_t root; /* a broadcast's */
};

/* Op states in struct ft_op. */
enum { FT_OP_NONE = 0, FT_OP_STARTED = 1, FT_OP_DONE = 2 };

/* One op as one member process saw it: written by that process, published by state (release). */
struct ft_op {
	_Atomic int state; /* FT_OP_* */
	int rc;		   /* what the op returned */
	int bad_seq;	   /* the record's seq is not the one announced before the start */
	int resumed;
	uint64_t epoch;
	uint32_t size, ncontrib, attempts;
	uint32_t mask; /* contributor bits of ids < 32 (the record's bitmap) */
	double scale;
	uint64_t sum; /* FNV-1a 64 of the result bytes (0 unless rc is 0, DEGRADED or MISMATCH) */
	int64_t t_start; /* CLOCK_MONOTONIC ns before the start call */
	int64_t t_done;	 /* when the op completed (returned) */
};

/* Argument probes a process runs once the group formed, before its script (opts.probe). */
enum {
	FT_PROBE_NULL_SEND, /* sendbuf NULL, count 8 */
	FT_PROBE_NULL_RECV, /* recvbuf NULL, count 8 */
	FT_PROBE_DTYPE,	    /* dtype FTCC_DTYPE_COUNT */
	FT_PROBE_OP,	    /* op FTCC_REDOP_COUNT */
	FT_PROBE_IDTYPE,    /* ftcc_iallreduce with dtype 99 */
	FT_PROBE_NULL_REQ,  /* ftcc_iallreduce with req NULL */
	FT_PROBE_ZERO,	    /* count 0 (valid buffers): 0 or FTCC_ERR_INVALID, never a hang */
	FT_PROBE_COUNT
};

/* One epoch as a process saw it (ftcc_comm_view() after each op): its number and members. */
struct ft_epoch_seen {
	uint64_t epoch;
	uint32_t mask; /* member ids < 32 */
};

/* What one member process reports. Written by that process only, except the control flags. */
struct ft_run {
	int member;	       /* member id it runs */
	int join;	       /* started with cfg.join */
	int catchup;	       /* and cfg.catchup */
	pid_t pid;	       /* set by the parent */
	char fault[64];	       /* FTCC_FAULT of this process ("" none) */
	char inject[64];       /* FTCC_INJECT of this process ("" none) */
	uint64_t as_limit_seq; /* 0, or 1 + the op before which it caps RLIMIT_AS */
	uint64_t late_seq;     /* 0, or 1 + the op it issues only late_ms late (a straggler) */
	int late_ms;
	/* Control flags, set by the parent. */
	_Atomic int stop;  /* destroy the communicator and exit 0 */
	_Atomic int abort; /* call ftcc_comm_abort() now, from a second thread */
	_Atomic int ready; /* call ftcc_comm_ready() before the next op */
	/* Progress. */
	_Atomic int created;	   /* 0: not yet; 1: created; < 0: ftcc_comm_create()'s error */
	_Atomic int64_t t_created; /* when ftcc_comm_create() returned */
	_Atomic int ended;	   /* the script loop ended: its ops stopped for good */
	_Atomic int end_rc;	   /* the error that ended it (0: stop asked) */
	_Atomic int64_t t_end;	   /* when */
	_Atomic int64_t last_seq;  /* highest sequence number completed, -1 before */
	_Atomic uint64_t ndone;	   /* ops completed (any result) */
	_Atomic int overflow;	   /* reached FT_GROUP_MAX_SEQ */
	_Atomic int64_t abort_ns;  /* how long ftcc_comm_abort() took (0: not called) */
	_Atomic int abort_rc;
	_Atomic int64_t t_abort;   /* when it returned */
	_Atomic int64_t ready_seq; /* next_seq when ftcc_comm_ready() was called, -1 before */
	_Atomic int ready_rc;
	_Atomic int64_t destroy_ns; /* how long ftcc_comm_destroy() took (0: not yet) */
	_Atomic int destroy_rc;
	_Atomic int64_t destroy_cpu_ns;	   /* CPU time of the process (all threads) in it */
	int probe_rc[FT_PROBE_COUNT];	   /* opts.probe: each probe's return */
	uint64_t probe_seq[2];		   /* next_seq before and after the probes */
	struct ftcc_view view0;		   /* right after create (valid once created == 1) */
	uint32_t members0[FT_GROUP_MAX_N]; /* and its member ids */
	int view0_rc;
	struct ftcc_view view1; /* when the loop ended (valid once ended) */
	int view1_rc;
	char last_error[256];		 /* ftcc_comm_last_error() when the loop ended */
	_Atomic uint32_t nepochs;	 /* entries of epochs[] written (release) */
	_Atomic uint32_t epochs_dropped; /* epochs seen past FT_GROUP_MAX_EPOCHS */
	struct ft_epoch_seen epochs[FT_GROUP_MAX_EPOCHS];
	struct ft_op ops[FT_GROUP_MAX_SEQ]; /* indexed by sequence number */
};

/* The page the parent and every member process of one group share. */
struct ft_group_shared {
	_Atomic uint64_t limit; /* members run the ops numbered below this (parent raises it) */
	struct ft_run run[FT_GROUP_MAX_RUNS];
};

/* Options of a group. Zero fields take the defaults given. */
struct ft_group_opts {
	int timeout_ms;		     /* failure timeout of every member; 0: 1000 */
	int connect_timeout_ms;	     /* bound on forming or joining; 0: 10000 */
	enum ftcc_degraded degraded; /* the policy of every member */
	int depth;	  /* ops in flight: 1 (0) = ftcc_allreduce; more: ftcc_iallreduce */
	int use_test;	  /* with depth > 1: complete by polling ftcc_test, not ftcc_wait */
	int probe;	  /* run the argument probes before the script */
	uint64_t limit;	  /* ops to run (sequence numbers below); 0: nspec */
	int pace_us;	  /* op s starts no earlier than start + s * pace_us (0: at once) */
	const char *algo; /* FTCC_ALGO of every member; NULL: unset */
	int lanes[FT_GROUP_MAX_N]; /* FTCC_LANES of member i (every process of it); 0: unset */
	const char *fault[FT_GROUP_MAX_N];  /* FTCC_FAULT of each first process; NULL: none */
	const char *inject[FT_GROUP_MAX_N]; /* FTCC_INJECT of each first process; NULL: none */
	/* 0, or 1 + the op before which each first process caps its address space (RLIMIT_AS) at
	 * its size then plus FT_GROUP_AS_SLACK: a local allocation failure. */
	uint64_t as_limit_seq[FT_GROUP_MAX_N];
	/* 0, or 1 + the op each first process issues only late_ms late (between ops meanwhile) */
	uint64_t late_seq[FT_GROUP_MAX_N];
	int late_ms;
	/* Streams (ftcc_comm_stream()): 2 .. FTCC_STREAMS_MAX (ns). The ops come in periods of
	 * 2 ns - 1: ns ops of stream 0, then one of each other stream (ft_stream_of(): stream 0
	 * runs ns times as many ops as each other, so the streams' op numbers drift apart). Member
	 * i issues a period's ops round by round (the first op of each stream, then stream 0's
	 * second, ...), each round from stream i % ns on: the order across streams differs from
	 * member to member, within a stream it is the stream's. Needs depth >= ns, and a limit
	 * that is a whole number of periods (a member stops at the first op it would issue at or
	 * past the limit, in its own order). 0 or 1: one. */
	int nstreams;
	const struct ft_spec *script; /* nspec entries: op s is script[s % nspec] */
	int nspec;
	/* Member i's own script instead (nspec entries, kept by the caller), NULL: the common
	 * one. Ops it calls with another shape than the others end with FTCC_ERR_MISMATCH, which
	 * does not end its script. */
	const struct ft_spec *own_script[FT_GROUP_MAX_N];
	/* Member i's transport ("ib": over the verbs emulator, "tcp"), kept by the caller; NULL:
	 * the one FTCC_TEST_TRANSPORT names. */
	const char *transport[FT_GROUP_MAX_N];
};

/* A group as the test (the parent) sees it. Owned by the test; zero it (or let ft_group_end() do
 * so) before ft_group_start(). */
struct ft_group {
	char name[64];
	int n;
	struct ft_group_opts o; /* with defaults applied; o.script points at script[] */
	struct ft_spec script[FT_GROUP_MAX_SPECS];
	char algo[16];
	char fault0[FT_GROUP_MAX_N][64];
	char inject0[FT_GROUP_MAX_N][64];
	char ip[FT_GROUP_MAX_N][16];	    /* "127.0.0.(10 + i)" */
	char addr[FT_GROUP_MAX_N][32];	    /* "ip:port" */
	int run[FT_GROUP_MAX_N];	    /* current run of each member, -1: none */
	int frozen[FT_GROUP_MAX_N];	    /* SIGSTOPped and not resumed */
	int nruns;			    /* runs started */
	int errfd[FT_GROUP_MAX_RUNS];	    /* each run's captured stderr */
	int exit_status[FT_GROUP_MAX_RUNS]; /* wait status once reaped, -1 before */
	int64_t t_exit[FT_GROUP_MAX_RUNS];  /* when the parent killed or reaped it (0: not yet) */
	int64_t t0_ns;			    /* when ft_group_start() began */
	struct ft_group_shared *sh;	    /* NULL when the group is not started */
};

/* ---- inputs and expected results ------------------------------------------------------------- */

/* Writes member @member's input of op @seq (@spec) into @buf (spec->count elements). */
void ft_input(void *buf, const struct ft_spec *spec, uint32_t member, uint64_t seq);
/* The spec of op @seq in @g's script. */
const struct ft_spec *ft_spec_of(const struct ft_group *g, uint64_t seq);
/* With opts.nstreams: the stream op @seq runs on, and in *@j its number there. */
uint32_t ft_stream_of(const struct ft_group *g, uint64_t seq, uint64_t *j);
/* The spec of op @seq as member @member calls it (its own script, else the common one). */
const struct ft_spec *ft_spec_for(const struct ft_group *g, int member, uint64_t seq);
/* The degraded policy @g's members run under (their option, else FTCC_DEGRADED, else rescale). */
enum ftcc_degraded ft_policy(const struct ft_group *g);
/* The largest op of a script in bytes (at least 64), inputs and results of a group of up to
 * FT_GROUP_MAX_N members: what ft_expect()'s buffers need. */
size_t ft_script_max_bytes(const struct ft_spec *script, int nspec);
/* Bytes of a member's input and of its result of op @spec in a group of @n. */
size_t ft_in_bytes(const struct ft_spec *spec, uint32_t n);
size_t ft_out_bytes(const struct ft_spec *spec, uint32_t n);
/* Writes member @member's input of op @seq into @buf (ft_in_bytes()): ft_input() of every kind. */
void ft_input_n(void *buf, const struct ft_spec *spec, uint32_t member, uint64_t seq, uint32_t n);
/* ft_expect() for every kind: a reduce-scatter's is @member's slot. @acc and @tmp hold
 * ft_script_max_bytes(). A broadcast without its root expects zeros (it must not complete). */
uint64_t ft_expect_member(const struct ft_spec *spec, uint64_t seq, uint32_t mask, uint32_t size,
			  enum ftcc_degraded policy, void *acc, void *tmp, double *scale,
			  uint32_t member);
/* FNV-1a 64 of @len bytes. */
uint64_t ft_fnv(const void *buf, size_t len);
/* The checksum of the exact result of op @seq (@spec) over the members of @mask, in a group of
 * @size under @policy (never FTCC_DEGRADED_DEFAULT). *@scale (may be NULL) gets the factor the
 * rescale policy applies (1.0: none). @acc and @tmp hold spec->count elements each. */
uint64_t ft_expect(const struct ft_spec *spec, uint64_t seq, uint32_t mask, uint32_t size,
		   enum ftcc_degraded policy, void *acc, void *tmp, double *scale);

/* ---- the group ------------------------------------------------------------------------------- */

/* Starts @n (<= FT_GROUP_MAX_N) member processes forming the group "<test>-<pid>": picks a free
 * port on each member's address, maps the shared page and forks. Does not wait for the group. 0, or
 * -1 with a line on stderr (what was started is left for ft_group_end()). */
int ft_group_start(struct ft_group *g, const char *test, int n, const struct ft_group_opts *o);
/* Starts a new process for member @i (whose previous one must be dead) with cfg.join = @join,
 * cfg.catchup = @catchup and FTCC_FAULT = @fault (NULL: none), on the same address. 0 or -1. */
int ft_group_spawn(struct ft_group *g, int i, int join, int catchup, const char *fault);

/* SIGKILLs member @i's process and reaps it. Returns the time just before the signal. */
int64_t ft_group_kill(struct ft_group *g, int i);
/* SIGSTOPs member @i's process and waits (bounded) until it is stopped; the time just before the
 * signal, or 0 on failure. */
int64_t ft_group_freeze(struct ft_group *g, int i);
/* Waits up to @timeout_ms for member @i's process to exit by itself (an FTCC_FAULT kill) and reaps
 * it. The time it was seen gone (within about 1 ms), or 0 at the deadline. *@status (may be NULL)
 * gets the wait status. */
int64_t ft_group_wait_exit(struct ft_group *g, int i, int timeout_ms, int *status);
/* Asks member @i to call ftcc_comm_abort() (from a second thread, with its op in flight) and waits
 * up to @timeout_ms until it returned. The time the flag was set, or 0 at the deadline. */
int64_t ft_group_abort(struct ft_group *g, int i, int timeout_ms);
/* Asks member @i's process to end its script, destroy its communicator and exit 0 (then
 * ft_group_wait_exit()). */
void ft_group_stop(struct ft_group *g, int i);
/* Asks member @i to call ftcc_comm_ready() before its next op. */
void ft_group_ready(struct ft_group *g, int i);
/* Lets every member run the ops numbered below @limit (never lowers it). A member whose next op
 * reached the limit with nothing in flight has ended its script for good. */
void ft_group_set_limit(struct ft_group *g, uint64_t limit);
/* Ends an open-ended script: the limit becomes the highest op any process completed + 64 (so no
 * member is past it), then waits up to @timeout_ms until every member in @who completed the last op
 * below it, or its loop ended. Returns that op's number, or -1 at the deadline. */
int64_t ft_group_settle(struct ft_group *g, uint32_t who, int timeout_ms);

/* Member @i's current process record, or NULL when it has none. Points into the shared page, valid
 * until ft_group_end(). */
const struct ft_run *ft_group_cur(const struct ft_group *g, int i);
/* Member @i's current record of op @seq once completed, else NULL. */
const struct ft_op *ft_group_op(const struct ft_group *g, int i, uint64_t seq);

/* Polls up to @timeout_ms until every member in @who (a mask of ids) has created its communicator
 * (or failed to). 0 when all succeeded, -1 otherwise. */
int ft_group_wait_created(const struct ft_group *g, uint32_t who, int timeout_ms);
/* Polls up to @timeout_ms until every member in @who completed op @seq (any result), or its script
 * loop ended. 0 when all completed it, -1 otherwise. */
int ft_group_wait_op(const struct ft_group *g, uint32_t who, uint64_t seq, int timeout_ms);
/* Polls up to @timeout_ms until the script loop of every member in @who ended. 0 or -1. */
int ft_group_wait_ended(const struct ft_group *g, uint32_t who, int timeout_ms);

/* For each member in @who, the first op its current process completed at or after @t_ns: the
 * largest of those delays in ms (the stall a fault at @t_ns caused), or -1 when some member
 * completed none. *@min_ms and *@seq (the op with the largest delay) may be NULL. */
double ft_group_stall(const struct ft_group *g, uint32_t who, int64_t t_ns, double *min_ms,
		      uint64_t *seq);
/* The longest time member @i's current process went without completing an op within [@t_from_ns,
 * @t_to_ns], in ms: from @t_from_ns to its first completion, and between consecutive completions
 * (the time after the last one is not counted). */
double ft_group_max_gap(const struct ft_group *g, int i, int64_t t_from_ns, int64_t t_to_ns);

/* What the completers of one op agree on (ft_group_seq()). */
struct ft_seq_info {
	int ndone;     /* processes that completed it with a result (rc 0 or DEGRADED) */
	int nerr;      /* processes for which it ended with another error */
	int rc;	       /* the result code of the first completer */
	uint32_t mask; /* contributors, as the first completer recorded them */
	uint32_t ncontrib, attempts_max;
	int resumed; /* some completer says resumed (each says what it did itself) */
	uint64_t epoch;
	uint32_t done_by;	 /* member ids of the completers with a result */
	int64_t t_first, t_last; /* completion times */
};
/* Summary of op @seq over every process of the group; returns info->ndone. */
int ft_group_seq(const struct ft_group *g, uint64_t seq, struct ft_seq_info *info);
/* The highest sequence number any process completed, or -1. */
int64_t ft_group_max_seq(const struct ft_group *g);

/* Checks every op every process completed, dead ones included: for each sequence number, the
 * completers with a result agree (checksum, contributor set, ncontrib, epoch, scale, result code;
 * not resumed or attempts, which say what each member did itself: one that returned the op before
 * it saw the failure says 0 where another, settling the op with it, says 1), the checksum is the
 * exact result over that set (ft_expect()), the result code and scale follow the policy, ncontrib
 * is the set's size, the record's seq is the announced one, and each completer is in the set unless
 * it is a catch-up process. Returns the number of ops checked, or -1 with the first violation
 * described in @why. */
int ft_group_check(const struct ft_group *g, char *why, size_t len);

/* The invariants of every run, across every process (dead ones included):
 *  - one member list per epoch number (what each process saw after its ops);
 *  - ft_group_check(): one result and one contributor set per op, exact;
 *  - every member in @steady (never faulted: not killed, frozen, cut, failed or restarted) is in
 *    the contributor set of every op anyone completed, and its script ended without an error.
 * Returns the number of ops checked, or -1 with the first violation in @why. */
int ft_group_invariants(const struct ft_group *g, uint32_t steady, char *why, size_t len);

/* Plain text of every process record (times in ms since the start; the last @tail ops each) into
 * @buf; returns the length. For assertion messages. */
size_t ft_group_describe(const struct ft_group *g, int tail, char *buf, size_t len);
/* The last @len - 1 bytes captured of member @i's current process's stderr (the library's log).
 * Returns the length. */
size_t ft_group_log(const struct ft_group *g, int i, char *buf, size_t len);

/* Asks every running, unfrozen member process to destroy its communicator and exit, waits up to
 * @timeout_ms for all, then kills whatever is left (frozen ones at once), unmaps the page and
 * zeroes @g. Returns how many processes asked to stop did not exit 0 in time; *@max_destroy_ms (may
 * be NULL) and *@cpu_wait_ms (may be NULL) describe the ftcc_comm_destroy() that took longest
 * beyond what the others kept it waiting: its time, and the CPU time of the other members'
 * destroys together over the cores this process may run on (its affinity, at most its cgroup's
 * quota), which is how long those destroys, run at once, can keep it waiting for a core. Its
 * own CPU time, and any wait on a peer or a timer, are not in that. No-op on a group not
 * started. */
int ft_group_end(struct ft_group *g, int timeout_ms, double *max_destroy_ms, double *cpu_wait_ms);
/* A port nobody listens on at @ip now, outside the kernel's ephemeral range (so that no
 * listener on port 0 or connection takes it before its member binds it) and not given out
 * lately by this process. 0 on failure. */
uint16_t ft_group_free_port(const char *ip);

#endif
