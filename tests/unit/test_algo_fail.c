/* SPDX-License-Identifier: BSD-3-Clause */
/* The allreduce algorithms when a member fails: one aborts midway or is gone, or the epoch check
 * stops the attempt; every member ends within its bound with an error that names a member of
 * the group; and fault points are passed.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/algo.h"
#include "ftcc/dp.h"
#include "ftcc/fault.h"
#include "ftcc/reduce.h"
#include "ftcc/settings.h"

#include "algo_grp.h"

/* ---- failures -------------------------------------------------------------------------------- */

/* Member @victim of @n aborts its data plane once data flows; every member returns an error
 * within a bound: the victim -ECANCELED; the member whose data reached it -EPIPE (from its link
 * to the victim, or to a member that gave up before); the others -EPIPE, -EHOSTUNREACH (one that
 * had to connect to a member whose data plane was gone by then), -ECANCELED, or -ESTALE from the
 * epoch check, which stands in for the control plane and says the epoch is over
 * ABORT_NOTICE_NS after the abort. A member waiting for the victim to connect to it (the lower
 * id connects) has no connection to see break: an attempt that ended before its answer is
 * dropped and awaited again, so the control plane's word ends that wait, as in the engine. A
 * member that saw -EPIPE or -EHOSTUNREACH names a member of the group. */
static void abort_midway(enum algo_id id, uint32_t n, uint32_t victim, size_t count)
{
	uint32_t upstream = (victim + n - 1) % n; /* the ring's sender to the victim */
	struct grp g;

	cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "4096"), 0);
	grp_open(&g, n);
	g.destroy_on_error = 1;
	g.m[victim].mode = M_ABORT_MIDWAY;
	grp_buffers(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
	grp_run(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
	cr_assert(g.m[victim].aborted, "the victim finished before aborting");
	cr_expect_eq(g.m[victim].rc, -ECANCELED);
	cr_expect_eq(g.m[upstream].rc, -EPIPE, "member %u, whose data reached the victim: rc %d",
		     upstream, g.m[upstream].rc);
	for (uint32_t i = 0; i < n; i++) {
		struct member *m = &g.m[i];

		cr_expect(m->rc == -EPIPE || m->rc == -EHOSTUNREACH || m->rc == -ECANCELED ||
				  m->rc == -ESTALE,
			  "member %u rc %d", i, m->rc);
		cr_expect(m->t_end - g.m[victim].t_abort < 5000000000ll,
			  "member %u took %lld ms after the abort", i,
			  (long long)(m->t_end - g.m[victim].t_abort) / 1000000);
		if (m->rc == -EPIPE || m->rc == -EHOSTUNREACH) {
			int known = 0;

			for (uint32_t j = 0; j < n; j++) {
				known |= m->a.bad_peer == g.ids[j] && j != i;
			}
			cr_expect(known, "member %u: bad peer %u", i, m->a.bad_peer);
		}
	}
	grp_free_buffers(&g);
	grp_close(&g);
}

Test(algo_ring, member_aborts_midway, .timeout = 60)
{
	abort_midway(ALGO_RING, 4, 2, (16u << 20) / 4);
}

Test(algo_ring, member_aborts_midway_two, .timeout = 60)
{
	abort_midway(ALGO_RING, 2, 0, (16u << 20) / 4);
}

/* Recursive doubling: a member whose data plane is gone before the op. A member that connects
 * to it (the lower id connects) sees -EHOSTUNREACH after half the failure timeout of refused
 * connects; one that waits for it to connect learns of the loss from the epoch check (standing
 * in for the control plane, which says so after 3 s here). Nobody claims the result. */
Test(algo_rd, member_gone, .timeout = 60)
{
	const uint32_t n = 5, victim = 3;
	int64_t t0 = now_ns();
	struct grp g;
	int epipe = 0;

	grp_open(&g, n);
	g.destroy_on_error = 1;
	g.m[victim].mode = M_ABSENT_DESTROY;
	g.stale_at = t0 + 3000000000ll;
	grp_buffers(&g, ALGO_RD, 1000, FTCC_INT64, FTCC_SUM);
	grp_run(&g, ALGO_RD, 1000, FTCC_INT64, FTCC_SUM);
	for (uint32_t i = 0; i < n; i++) {
		if (i == victim) {
			continue;
		}
		/* -EPIPE: a member that gave up first closed its data plane on this one */
		cr_expect(g.m[i].rc == -EHOSTUNREACH || g.m[i].rc == -ESTALE || g.m[i].rc == -EPIPE,
			  "member %u rc %d", i, g.m[i].rc);
		epipe += g.m[i].rc == -EHOSTUNREACH;
		cr_expect(g.m[i].t_end - t0 < 4000000000ll, "member %u took %lld ms", i,
			  (long long)(g.m[i].t_end - t0) / 1000000);
		cr_expect(!algo_have_get(g.m[i].have, 0), "member %u claims the result", i);
	}
	cr_expect(epipe > 0, "nobody saw the member gone");
	grp_free_buffers(&g);
	grp_close(&g);
}

/* The epoch check stops an attempt that cannot finish (a silent member) promptly, with its
 * own value. */
static void check_stops(enum algo_id id, uint32_t n, size_t count)
{
	struct grp g;
	int64_t t0;

	grp_open(&g, n);
	g.m[n - 1].mode = M_ABSENT;
	grp_buffers(&g, id, count, FTCC_UINT32, FTCC_MAX);
	t0 = now_ns();
	g.stale_at = t0 + 100000000;
	grp_run(&g, id, count, FTCC_UINT32, FTCC_MAX);
	for (uint32_t i = 0; i + 1 < n; i++) {
		cr_expect_eq(g.m[i].rc, -ESTALE, "member %u rc %d", i, g.m[i].rc);
		cr_expect(g.m[i].t_end - g.stale_at < 300000000ll,
			  "member %u stopped %lld ms after the check said so", i,
			  (long long)(g.m[i].t_end - g.stale_at) / 1000000);
	}
	grp_free_buffers(&g);
	grp_close(&g);
}

Test(algo_ring, check_stops_attempt, .timeout = 30)
{
	check_stops(ALGO_RING, 3, 100000);
}

Test(algo_rd, check_stops_attempt, .timeout = 30)
{
	check_stops(ALGO_RD, 4, 100);
}

/* Runs op 0 of @id among @n members in a forked child armed with @spec: 0 when the child
 * completed it, 3 when a fault point made it exit, -1 otherwise. */
static int fault_child(enum algo_id id, uint32_t n, const char *spec)
{
	struct timespec tick = { 0, 2000000 };
	pid_t pid = fork();
	int st = 0;

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		struct grp g;

		if (ftcc_settings_set(FTCC_SET_FAULT, spec) || ftcc_fault_load()) {
			_exit(10);
		}
		grp_open(&g, n);
		grp_buffers(&g, id, 5000, FTCC_INT32, FTCC_SUM);
		grp_run(&g, id, 5000, FTCC_INT32, FTCC_SUM);
		for (uint32_t i = 0; i < n; i++) {
			if (g.m[i].rc) {
				_exit(11);
			}
		}
		_exit(0);
	}
	for (int i = 0; i < 5000 && waitpid(pid, &st, WNOHANG) == 0; i++) {
		nanosleep(&tick, NULL);
	}
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(algo_fault, points_are_passed, .timeout = 60)
{
	cr_expect_eq(fault_child(ALGO_RING, 3, "rs:0:1:exit"), 3);
	cr_expect_eq(fault_child(ALGO_RING, 3, "ag:0:1:exit"), 3);
	cr_expect_eq(fault_child(ALGO_RING, 3, "ag:0:2:exit"), 0, "the ring has 2 allgather steps");
	cr_expect_eq(fault_child(ALGO_RING, 3, "rs:1:0:exit"), 0, "op 1 never runs");
	cr_expect_eq(fault_child(ALGO_RD, 3, "rd:0:0:exit"), 3);
	cr_expect_eq(fault_child(ALGO_RD, 3, "rd:0:2:exit"), 3);
	cr_expect_eq(fault_child(ALGO_RD, 3, "rd:0:3:exit"), 0, "3 members: rounds 0..2");
}

Test(algo_run, bad_arguments)
{
	struct grp g;
	struct algo_att a;
	uint8_t have = 0;
	int x = 1, y = 0;

	grp_open(&g, 2);
	a = (struct algo_att){ .dp = g.m[0].dp,
			       .n = 2,
			       .ids = g.ids,
			       .self = 2,
			       .input = &x,
			       .out = &y,
			       .count = 1,
			       .dtype = FTCC_INT32,
			       .have = &have };
	cr_expect_eq(algo_run(ALGO_RING, &a), -EINVAL);
	a.self = 0;
	a.out = &x;
	cr_expect_eq(algo_run(ALGO_RING, &a), -EINVAL, "out aliasing input");
	a.out = &y;
	cr_expect_eq(algo_run((enum algo_id)7, &a), -EINVAL);
	a.dtype = FTCC_DTYPE_COUNT;
	cr_expect_eq(algo_run(ALGO_RD, &a), -EINVAL);
	cr_expect_eq(have, 0);
	grp_close(&g);
}
