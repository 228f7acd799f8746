/* SPDX-License-Identifier: BSD-3-Clause */
/* Harness of the in-process TCP transport tests: both ends of a connection in one process
 * over lo, every wait bounded by a deadline, a captured log, and a message-stream driver that
 * checks each message arrives once, in order, with its size and content intact.
 */
#ifndef FTCC_TESTS_TCP_HARNESS_H
#define FTCC_TESTS_TCP_HARNESS_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc/transport.h"

/* One connection: listen, send side and receive side. Owned by the test. */
struct th_pair {
	const struct ftcc_transport_ops *ops;
	struct ftcc_tctx ctx;
	uint8_t handle[FTCC_HANDLE_SIZE];
	struct ftcc_listen *l;
	struct ftcc_conn *s, *r;
};

/* Sets FTCC_SOCKET_IFNAME=lo, FTCC_DEBUG=INFO and the "NAME=VALUE" entries of @env (NULL
 * terminated, may be NULL), reloads the settings, installs the capturing log sink and inits
 * the transport. Returns the ops table; fails the test on any error. */
const struct ftcc_transport_ops *th_start(const char *const *env);
/* Drops the reference th_start took; after the last one, checks for leaks (ASan builds). */
void th_stop(void);

int64_t th_now_ms(void);
/* Number of tasks (threads) of this process. */
int th_threads(void);

/* Listens on device 0 and polls connect and accept (non-blocking, one thread) until both
 * ends exist. 0, a negative errno from an op, or -ETIMEDOUT. */
int th_pair_open(struct th_pair *p, uint64_t comm_id, int timeout_ms);
/* Closes whatever @p holds. */
void th_pair_close(struct th_pair *p);

/* Polls @r until done: 0 (sizes filled), the op's error, or -ETIME after @timeout_ms. */
int th_wait(const struct ftcc_transport_ops *ops, struct ftcc_req *r, size_t *sizes,
	    int timeout_ms);

/* Deterministic content of @size bytes for @seed; th_check returns the first wrong offset, or
 * -1 when all match. */
void th_fill(void *buf, size_t size, uint64_t seed);
long th_check(const void *buf, size_t size, uint64_t seed);

/* Under LeakSanitizer, checks the heap for leaks now (Criterion's workers never reach the
 * exit-time check) and returns nonzero when some were found (and printed); else 0. */
int th_leak_check(void);

/* Log lines captured since th_start (or th_log_reset) that contain @needle. Thread-safe. */
int th_log_count(const char *needle);
void th_log_reset(void);
/* Prints the captured log to stderr (for a failing test). */
void th_log_dump(void);

/* A stream of messages from p->s to p->r. Message i has size size_of(i); receives are
 * posted in groups of @recv_n buffers (1..8), each group covering recv_n consecutive
 * messages, which are sent in a tag order different from the buffers' order. */
struct th_stream {
	int nmsg;   /* a multiple of recv_n */
	int window; /* messages in flight each way (sends; receive groups * recv_n) */
	int recv_n;
	int same_tags;	  /* every buffer of a group has one tag: filled in posting order */
	size_t extra_cap; /* posted buffers are this much larger than the message */
	size_t (*size_of)(int i);
	void (*at)(int i, void *arg); /* called once before message i is first posted */
	void *arg;
	int timeout_ms;
};

/* Runs @o to completion. 0, or -1 with a description in @err. */
int th_stream_run(struct th_pair *p, const struct th_stream *o, char *err, size_t errlen);

#endif
