/* SPDX-License-Identifier: BSD-3-Clause */
/* Groups of C API members in forked processes for the point-to-point and state healing tests
 * (tests/mproc/test_mproc_p2p*.c, test_mproc_heal.c): each member runs a scenario and writes
 * what it saw to a page shared before fork (pg); the parent checks across members, e.g. that
 * every send that ended with 0 was received exactly once with its tag, length and content.
 */
#ifndef FTCC_TESTS_P2P_GROUP_H
#define FTCC_TESTS_P2P_GROUP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "ftcc.h"

#define PG_NMAX 6
#define PG_RECS 512
#define PG_TIMEOUT_MS 2000 /* the failure timeout of the groups */

/* One message as a member saw it: the peer (sender or destination), tag, length, a hash of
 * the content, the request's result. */
struct pg_rec {
	uint32_t peer;
	uint64_t tag, bytes;
	uint32_t sum;
	int rc;
};

struct pg_member {
	_Atomic int stage; /* 1 created, 2 finished the scenario */
	pid_t pid;
	int fail_line;
	char why[256];
	int nrx, ntx;
	struct pg_rec rx[PG_RECS], tx[PG_RECS];
	int64_t t_ns[4];
};

struct pg_shared {
	char group[64];
	uint16_t ports[PG_NMAX];
	int n;
	_Atomic int flag[8];
	_Atomic int finished; /* members done with their scenario */
	int expect_finished;  /* members that will be (not those killed or frozen on purpose) */
	struct pg_member m[PG_NMAX];
};

typedef void (*pg_fn)(struct pg_shared *S, int me, ftcc_comm_t *c);

/* The shared page of the running test (NULL between tests). */
extern struct pg_shared *pg;
/* In a member: its communicator, which the member destroys after the scenario (a scenario
 * that makes another, a restart, puts it here). */
extern ftcc_comm_t *pg_comm;

/* In a scenario: records the first failure (line and text) of member @me and returns (@rv). */
#define PG_FAIL_RET(rv, cond, ...)                                                                 \
	do {                                                                                       \
		if (cond) {                                                                        \
			struct pg_member *m_ = &pg->m[me];                                         \
			if (!m_->fail_line) {                                                      \
				m_->fail_line = __LINE__;                                          \
				snprintf(m_->why, sizeof(m_->why), __VA_ARGS__);                   \
			}                                                                          \
			return rv;                                                                 \
		}                                                                                  \
	} while (0)
#define PG_FAIL_IF(cond, ...) PG_FAIL_RET(, cond, __VA_ARGS__)

/* The content of a message from @src with @tag, its check (first differing index or -1), a
 * hash, and a record of it in @r (@n of them). */
void pg_fill(uint8_t *b, size_t len, uint32_t src, uint64_t tag);
long pg_check(const uint8_t *b, size_t len, uint32_t src, uint64_t tag);
void pg_note(struct pg_rec *r, int *n, uint32_t peer, uint64_t tag, const void *b, size_t len,
	     int rc);
/* Waits (30 s at most) until flag @k of the page reaches @v. */
void pg_wait_flag(int k, int v);
/* Creates member @me of the test's group (timeout PG_TIMEOUT_MS), joining a running group
 * with @join (and @catchup). 0 or the FTCC_ERR_*. */
int pg_create(int me, int join, int catchup, ftcc_comm_t **c);
/* Called in each member's process before it creates its communicator (NULL: nothing); reset by
 * pg_teardown(). */
extern void (*pg_before_create)(int me);
/* The nstreams of the members' communicators (0: 1); reset by pg_teardown(). */
extern uint32_t pg_nstreams;
/* Runs @fn on @n members, each in its own process; each must finish within @ms, except those
 * in @dying (killed or frozen on purpose), and end without a failure. */
void pg_run(const char *name, int n, pg_fn fn, int ms, uint32_t dying);
/* Across members: every send that ended with 0 to a member in @live was received once, with
 * its tag, length and content; every receive that ended with 0 matches one such send. */
void pg_exactly_once(int n, uint32_t live);
/* Kills what is left and unmaps the page. */
void pg_teardown(void);

#endif
