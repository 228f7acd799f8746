/* SPDX-License-Identifier: BSD-3-Clause */
/* A sender and a receiver process streaming through the built plug-in's v11 table, for the
 * chaos tests: the test (the parent) injects a fault and reads what each side saw.
 *
 * Each child dlopens FTCC_PLUGIN_PATH itself, inits with the configured commId, and the two
 * meet through the handle the receiver publishes in a page shared before fork. The sender
 * streams CHAOS_MSG_BYTES messages, up to CHAOS_WINDOW in flight, message k filled with a
 * pattern of k; the receiver posts matching receives and checks each message against the
 * pattern of its position, so a lost, repeated, reordered or corrupted message is counted.
 * Results (counts, the first error and when it came, gaps between completions, time taken by
 * each close call) land in the shared page, written by the child only; times are
 * CLOCK_MONOTONIC (chaos_now_ns) and compare across processes.
 */
#ifndef FTCC_TESTS_CHAOS_NET_H
#define FTCC_TESTS_CHAOS_NET_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../plugin/nccl/net_v11.h"

#define CHAOS_MSG_BYTES (1u << 20)
#define CHAOS_WINDOW 8
#define CHAOS_TAG 7

enum chaos_role { CHAOS_SENDER = 0, CHAOS_RECEIVER = 1 };

/* Where a child is; only moves forward. */
enum chaos_stage {
	CHAOS_ST_START = 0,
	CHAOS_ST_LISTENING,    /* receiver: handle published */
	CHAOS_ST_CONNECTED,    /* comm ready, streaming */
	CHAOS_ST_STREAMED,     /* stream over: all done, an error, close_now or the deadline */
	CHAOS_ST_CLOSED,       /* close calls made and timed; the child exits next */
	CHAOS_ST_SETUP_FAILED, /* dlopen, init, listen, connect or accept failed: see why */
};

/* The plug-in call that returned the first error. */
enum chaos_call {
	CHAOS_CALL_NONE = 0,
	CHAOS_CALL_CONNECT,
	CHAOS_CALL_ACCEPT,
	CHAOS_CALL_POST,
	CHAOS_CALL_TEST
};

/* Close calls a child times: closeSend or closeRecv, closeListen, finalize. */
enum { CHAOS_CLOSE_COMM = 0, CHAOS_CLOSE_LISTEN, CHAOS_CLOSE_FINALIZE, CHAOS_NCLOSE };

/* What one side reports. Written by that side's child only. */
struct chaos_side {
	_Atomic int stage;
	_Atomic long done;	       /* messages completed (receiving: and checked) */
	_Atomic int err;	       /* first failing call's ncclResult_t; 0 none */
	int err_call;		       /* enum chaos_call */
	int64_t t_err_ns;	       /* when that call returned */
	_Atomic int test_err;	       /* first failing test() of a pending request; 0 none */
	int64_t t_test_err_ns;	       /* when it returned */
	long bad;		       /* received messages with a wrong size or content */
	long first_bad;		       /* index of the first, -1 none */
	int64_t t_first_ns, t_last_ns; /* first and last completion */
	int64_t max_gap_ns;	       /* longest time between two completions */
	int64_t t_setup_ns;	       /* connect (sender) or accept (receiver) polling began */
	int64_t t_ready_ns;	       /* the comm came */
	_Atomic long served;	       /* receiver in serve mode: connections fully received */
	int64_t close_ns[CHAOS_NCLOSE];
	int close_res[CHAOS_NCLOSE];
	char why[160]; /* setup failure */
};

/* The page both children and the parent share. */
struct chaos_shared {
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	_Atomic int stop;	 /* parent: the sender posts no more and drains what is in flight */
	_Atomic long sent_total; /* sender: messages it sent when it stopped; -1 while sending */
	_Atomic int close_now;	 /* parent: both sides abandon their stream and close at once */
	struct chaos_side side[2];
};

/* How a pair runs. */
struct chaos_cfg {
	uint64_t comm_id;      /* both sides' v11 commId */
	uint64_t send_comm_id; /* the sender's instead, when not 0 */
	long count;	       /* messages per connection; 0 = until stop or close_now */
	int deadline_ms;       /* a child gives up (and reports) after this long */
	bool wait_close;       /* after its stream, a child waits for close_now, then closes */
	bool serve;	       /* receiver accepts connection after connection until stop */
};

/* A running pair. chaos_pair_end() releases it. */
struct chaos_pair {
	struct chaos_shared *sh; /* MAP_SHARED page */
	struct chaos_cfg cfg;
	pid_t pid[2]; /* 0 when not running */
	int errfd[2]; /* each child's stderr (memfd), kept across restarts */
};

/* Sets the environment every child inherits: FTCC_DEBUG=WARN, FTCC_SOCKET_IFNAME=lo,
 * FTCC_FAILURE_TIMEOUT_MS=@failure_timeout_ms, FTCC_NSTREAMS=2, and clears the other FTCC_*
 * tunables and NCCL_DEBUG so the caller's environment cannot change a test. */
void chaos_env(int failure_timeout_ms);

/* Maps the shared page and stderr captures of @p. 0 or -1. */
int chaos_pair_init(struct chaos_pair *p, const struct chaos_cfg *cfg);
/* Forks the @role child (its side of the shared page is reset first). 0 or -1. */
int chaos_pair_spawn(struct chaos_pair *p, enum chaos_role role);
/* chaos_pair_init, then the receiver, then the sender. 0 or -1. */
int chaos_pair_start(struct chaos_pair *p, const struct chaos_cfg *cfg);
/* Kills and reaps both children if still there; unmaps and closes everything. Idempotent. */
void chaos_pair_end(struct chaos_pair *p);

/* Waits until side @role has completed @n messages: 0, or -1 at an error, a setup failure or
 * the deadline. */
int chaos_wait_done(struct chaos_pair *p, enum chaos_role role, long n, int timeout_ms);
/* Waits until side @role reached @stage (or a later one). 0 or -1. */
int chaos_wait_stage(struct chaos_pair *p, enum chaos_role role, int stage, int timeout_ms);
/* Waits until side @role reported an error from any call. 0 or -1. */
int chaos_wait_err(struct chaos_pair *p, enum chaos_role role, int timeout_ms);
/* Waits until a pending request's test() on side @role failed. 0 or -1. */
int chaos_wait_test_err(struct chaos_pair *p, enum chaos_role role, int timeout_ms);
/* Waits until the @role child exits; *code gets its exit code (-1 for a signal). 0 or -1. */
int chaos_wait_child(struct chaos_pair *p, enum chaos_role role, int timeout_ms, int *code);
/* Sets close_now and waits up to @timeout_ms for both children to exit. 0 when both exited
 * with status 0; -1 with what went wrong in @why otherwise. */
int chaos_pair_finish(struct chaos_pair *p, int timeout_ms, char *why, size_t len);

/* The @role child's stderr so far. */
size_t chaos_pair_stderr(struct chaos_pair *p, enum chaos_role role, char *buf, size_t len);
/* The engine listen port in the receiver's published handle (bytes 10..11, little-endian).
 * 0 or -1. */
int chaos_handle_port(const struct chaos_pair *p, uint16_t *port);

/* The body of a forked @role child (chaos_child.c): load, connect, stream, close as @p's
 * configuration says, reporting into p->sh->side[@role]. Returns the exit code: 0, or 2 when
 * setup failed. Called by chaos_pair_spawn() in the child only. */
int chaos_child_run(struct chaos_pair *p, enum chaos_role role);

/* Name of @role and of enum chaos_call values, for messages. */
const char *chaos_role_name(enum chaos_role role);
const char *chaos_call_name(int call);
/* One line on side @role (stage, counts, error, why) for assertion messages; a static buffer
 * per role, valid until the next call for that role. */
const char *chaos_side_str(struct chaos_pair *p, enum chaos_role role);

#endif
