/* SPDX-License-Identifier: BSD-3-Clause */
/* N node heads driving the built plug-in's CollNet table exactly as NCCL's proxy does, one per
 * process, for the ABI and chaos tests. A head is the test program exec'ed afresh, not a forked
 * copy of the test: processes forked from one parent share the kernel's locks of the memory
 * mappings they inherited, and one head's munmap (the sanitizer's allocator returning memory)
 * was seen waiting 28 s on another's page fault under load.
 *
 * Each head dlopens FTCC_PLUGIN_PATH, inits table v@version (v11: init(ctx, comm id, logger);
 * older: the global init), asks reduceSupport for every (op, type) NCCL 2.28 asks about, listens
 * on device 0 and publishes its 128-byte handle in a page it shares with the parent (a memory
 * file; the options are copied beside it). Once every head published (or when the parent says
 * go), each calls the blocking connect with all handles in head order, registers its buffers
 * (regMr), then runs the script: op s is script[s % nspec] (struct ft_spec of ft_group.h:
 * count, type, op, in place) with head h's input ft_input(.., h, s), posted with iallreduce in
 * order with up to @depth in flight (a NULL request is retried), completed by polling test()
 * (sched_yield between passes without progress). Every completion is recorded per op (result
 * code, the size test() reported, FNV-1a of the result bytes, times). At the end, or
 * when told to, it closes (deregMr, closeColl, closeListen, finalize) with whatever is still in
 * flight and times each call.
 *
 * The parent reads the records and rebuilds the expected result of every op over any set of heads
 * (cn_heads_check()); times are CLOCK_MONOTONIC and compare across processes. One test thread
 * drives a group.
 */
#ifndef FTCC_TESTS_CN_HEADS_H
#define FTCC_TESTS_CN_HEADS_H

#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>

#include "ft_group.h"
#include "nccl/net_v11.h"

#define CN_MAX_HEADS 8
#define CN_MAX_OPS 4096	 /* ops one head records */
#define CN_MAX_DEPTH 64	 /* in flight at once */
#define CN_MAX_SPECS 64	 /* script entries */
#define CN_NCCL_OPS 4	 /* reduceSupport is asked for sum, prod, max, min ... */
#define CN_NCCL_TYPES 12 /* ... times the 12 types of NCCL 2.28 */

/* Where a head is; only moves forward. */
enum cn_stage {
	CN_ST_START = 0,
	CN_ST_LISTENING, /* handle published */
	CN_ST_CONNECTED, /* connect returned success; regMr done */
	CN_ST_RAN,	 /* script over: all done, an error, close_now or the parent's stop */
	CN_ST_CLOSED,	 /* close calls made and timed; the head exits next */
	CN_ST_FAILED,	 /* dlopen, init, listen, connect or regMr failed: see why / connect_res */
};

/* One op as one head saw it. */
struct cn_op {
	_Atomic int state; /* 0 none, 1 posted, 2 completed (published with release) */
	int res;	   /* test()'s (or iallreduce's) ncclResult_t */
	int size;	   /* the size test() reported */
	uint64_t sum;	   /* ft_fnv() of the result bytes (when res is ncclSuccess) */
	int64_t t_post, t_done;
};

/* Close calls a head times. */
enum { CN_CLOSE_DEREG = 0, CN_CLOSE_COLL, CN_CLOSE_LISTEN, CN_CLOSE_FINALIZE, CN_NCLOSE };

/* What one head reports. Written by that head only, except the control flags. */
struct cn_head {
	pid_t pid;	   /* set by the parent */
	_Atomic int stage; /* enum cn_stage */
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	int connect_res;			 /* connect's ncclResult_t */
	int64_t t_connect0;			 /* connect called */
	int64_t t_connect1;			 /* connect returned */
	int support[CN_NCCL_OPS][CN_NCCL_TYPES]; /* reduceSupport answers (-1: the call failed) */
	int ndev;
	/* Control flags, set by the parent. */
	_Atomic int stop;      /* post no more; drain what is in flight, then close */
	_Atomic int close_now; /* close at once with whatever is in flight */
	/* Progress. */
	_Atomic int64_t ndone; /* ops completed (any result) */
	_Atomic int err;       /* first non-success result (0 none) */
	int64_t err_seq;       /* of which op (-1: not an op's) */
	int64_t t_err;
	int inflight_at_close; /* requests still in flight when the close began */
	int64_t close_ns[CN_NCLOSE];
	int close_res[CN_NCLOSE];
	char why[200]; /* what failed (setup) */
	struct cn_op ops[CN_MAX_OPS];
};

/* The page the parent and the heads share. */
struct cn_shared {
	_Atomic int go; /* the parent lets the heads connect (when opts.hold_connect) */
	struct cn_head head[CN_MAX_HEADS];
};

/* Options of a group of heads. Zero fields take the defaults given. */
struct cn_opts {
	int version;		/* table: 11 (0), 10, 9 or 8 */
	uint64_t comm_id;	/* v11 init's comm id; 0: a value made from the test's pid */
	int depth;		/* in flight: 0 = 8 */
	int nops;		/* ops in the script run; 0: nspec; < 0: until stopped */
	int pace_us;		/* op s is posted no earlier than start + s * pace_us */
	int timeout_ms;		/* FTCC_FAILURE_TIMEOUT_MS; 0: 1000 */
	int connect_timeout_ms; /* FTCC_CONNECT_TIMEOUT_MS; 0: 10000 */
	const char *degraded;	/* FTCC_DEGRADED; NULL: unset (rescale) */
	int min_nodes;		/* FTCC_COLLNET_MIN_NODES; 0: unset */
	int hold_connect;	/* heads wait for shared->go before connect */
	int absent;		/* heads with bit h set publish a handle but never connect */
	int linger_err;		/* a head whose script ended in an error waits like one whose
				 * script is over (for every head to be done) before it closes */
	const char *ifname[CN_MAX_HEADS]; /* FTCC_SOCKET_IFNAME per head; NULL: "lo" */
	const char *env[CN_MAX_HEADS];	  /* "NAME=value" set in head h; NULL: none */
	const struct ft_spec *script;	  /* nspec entries */
	int nspec;
	/* Head h's own script instead (nspec entries, kept by the caller); NULL: the common one. */
	const struct ft_spec *own_script[CN_MAX_HEADS];
	/* Heads that corrupt the handle they publish, from their own copy:
	 * handle_edit(h, handle) runs in head h after listen. NULL: none. */
	void (*handle_edit)(int head, char *handle);
};

/* A group of heads as the test sees it. Zero it before cn_heads_start(). */
struct cn_heads {
	int n;
	struct cn_opts o;
	struct ft_spec script[CN_MAX_SPECS];
	struct cn_shared *sh;	 /* NULL when not started */
	int errfd[CN_MAX_HEADS]; /* each head's captured stderr */
	int exit_status[CN_MAX_HEADS];
	int frozen[CN_MAX_HEADS];
	int64_t t0_ns;
};

/* The spec of op @seq as head @head posts it. */
const struct ft_spec *cn_spec_for(const struct cn_heads *g, int head, int64_t seq);

/* Starts @n heads with @o (opts.env strings up to 511 bytes, ifname 31, degraded 63;
 * handle_edit a function of the test program). Does not wait for anything. 0 or -1 (a line on
 * stderr). */
int cn_heads_start(struct cn_heads *g, int n, const struct cn_opts *o);
/* Polls up to @timeout_ms until every head in @who reached @stage (or FAILED). 0 when all
 * reached it, -1 otherwise. */
int cn_heads_wait_stage(const struct cn_heads *g, uint32_t who, enum cn_stage stage,
			int timeout_ms);
/* Polls up to @timeout_ms until every head in @who completed @nops ops or stopped running.
 * 0 or -1. */
int cn_heads_wait_ops(const struct cn_heads *g, uint32_t who, int64_t nops, int timeout_ms);
/* SIGKILLs head @i and reaps it; returns the time just before the signal. */
int64_t cn_heads_kill(struct cn_heads *g, int i);
/* SIGSTOPs head @i (waits, bounded, until it is stopped); the time before the signal, 0 on
 * failure. cn_heads_end() kills frozen heads. */
int64_t cn_heads_freeze(struct cn_heads *g, int i);
/* Sets stop (or close_now) on every head in @who and waits up to @timeout_ms until they closed
 * (CN_ST_CLOSED) and exited. 0 or -1. */
int cn_heads_stop(struct cn_heads *g, uint32_t who, int close_now, int timeout_ms);
/* Kills whatever is left, reaps, closes the stderr pipes, unmaps and zeroes @g. */
void cn_heads_end(struct cn_heads *g);

/* Head @i's record (NULL when not started); valid until cn_heads_end(). */
const struct cn_head *cn_heads_head(const struct cn_heads *g, int i);
/* The last @len - 1 bytes of head @i's stderr (its plug-in log). Returns the length. */
size_t cn_heads_log(const struct cn_heads *g, int i, char *buf, size_t len);

/* Checks every op completed by the heads in @who (a mask): for each op, every head of @who that
 * completed it with success reported the same size and checksum; that checksum is the exact
 * result (ft_expect(), under @policy) over either all heads or all heads but those in @lost
 * (an op may have counted a head that died during it); ops completed before @t_fault_ns count
 * all heads. *@nfull / *@ndegraded (may be NULL) get how many ops matched each. Returns the
 * number of ops checked, or -1 with the first violation in @why. */
int cn_heads_check(const struct cn_heads *g, uint32_t who, uint32_t lost, int64_t t_fault_ns,
		   enum ftcc_degraded policy, int *nfull, int *ndegraded, char *why, size_t len);

/* One member list per epoch number across every head, from the epochs the heads' plug-in logs
 * name with their members (the membership's "epoch E (K members {ids}, ...)" INFO lines, the
 * engine's "op S continues in epoch E with members {ids}" WARN lines). Returns the number of
 * epoch numbers seen (0 when the logs name none), or -1 with the conflict in @why.
 * cn_heads_check() runs it too. */
int cn_heads_epochs(const struct cn_heads *g, char *why, size_t len);

/* Plain text of every head's state (stage, counts, first error, the last @tail ops) into @buf,
 * for assertion messages. Returns the length. */
size_t cn_heads_describe(const struct cn_heads *g, int tail, char *buf, size_t len);
/* cn_heads_describe() (the last 4 ops, in at most half of @buf), then the last @log_tail bytes
 * of each head's log, then what each head that still ran showed of its threads when the first
 * explanation of the group asked it (sched_watch.h; it waits half a second for them): what an
 * assertion message shows. Returns @buf. */
const char *cn_heads_explain(const struct cn_heads *g, size_t log_tail, char *buf, size_t len);

#endif
