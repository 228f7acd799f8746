/* SPDX-License-Identifier: BSD-3-Clause */
/* Lanes (FTCC_LANES): consecutive ops of a communicator in flight at once. Op 2 stalls a second
 * at every member (FTCC_FAULT input:2:*:hold, its lane's thread sleeps) and op 3, started right
 * after it, must complete meanwhile on the other lane; with one lane it cannot, which the second
 * test checks (so the first cannot pass on ops run one after the other). Both ops' results and
 * records are checked at every member. A member started with another number of lanes cannot
 * take part: its create fails with FTCC_ERR_INVALID, and the others go on without it.
 *
 * Members run in their own processes (tests/lib/p2p_group.h). No root needed. Run with
 * --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "chaos_proc.h"
#include "p2p_group.h"

#define N 3
#define COUNT 4

TestSuite(ft_mproc_lanes, .fini = pg_teardown, .timeout = 60);

static float input_of(int me, uint64_t seq, int i)
{
	return (float)((me + 1) * (int)(seq + 1) + i);
}

/* The sum of every member's input of op @seq at element @i. */
static float sum_of(uint64_t seq, int i)
{
	float s = 0;

	for (int m = 0; m < N; m++)
		s += input_of(m, seq, i);
	return s;
}

static void check_op(int me, const float *x, const struct ftcc_record *rec, uint64_t seq)
{
	PG_FAIL_IF(rec->seq != seq || rec->ncontrib != N, "op %llu: record seq %llu, %u members",
		   (unsigned long long)seq, (unsigned long long)rec->seq, rec->ncontrib);
	for (int i = 0; i < COUNT; i++)
		PG_FAIL_IF(x[i] != sum_of(seq, i), "op %llu element %d: %g, expected %g",
			   (unsigned long long)seq, i, x[i], sum_of(seq, i));
}

/* Ops 0 and 1 connect both lanes; op 2 (held a second before it starts) and op 3 are started
 * together and op 3 is waited for first. t_ns[0]: 1 when op 2 was done by then. */
static void sc_overtake(struct pg_shared *S, int me, ftcc_comm_t *c)
{
	float x[4][COUNT];
	ftcc_request_t *r2, *r3;
	struct ftcc_record rec;
	int done = 0, rc;

	(void)S;
	for (uint64_t s = 0; s < 4; s++)
		for (int i = 0; i < COUNT; i++)
			x[s][i] = input_of(me, s, i);
	for (uint64_t s = 0; s < 2; s++) {
		rc = ftcc_allreduce(c, x[s], x[s], COUNT, FTCC_FLOAT32, FTCC_SUM, &rec);
		PG_FAIL_IF(rc, "op %llu: %s", (unsigned long long)s, ftcc_strerror(rc));
		check_op(me, x[s], &rec, s);
	}
	rc = ftcc_iallreduce(c, x[2], x[2], COUNT, FTCC_FLOAT32, FTCC_SUM, &r2);
	PG_FAIL_IF(rc, "start op 2: %s", ftcc_strerror(rc));
	rc = ftcc_iallreduce(c, x[3], x[3], COUNT, FTCC_FLOAT32, FTCC_SUM, &r3);
	PG_FAIL_IF(rc, "start op 3: %s", ftcc_strerror(rc));
	rc = ftcc_wait(r3, &rec);
	PG_FAIL_IF(rc, "op 3: %s", ftcc_strerror(rc));
	check_op(me, x[3], &rec, 3);
	rc = ftcc_test(r2, &done, &rec);
	PG_FAIL_IF(rc, "test op 2: %s", ftcc_strerror(rc));
	pg->m[me].t_ns[0] = done;
	if (!done) {
		rc = ftcc_wait(r2, &rec);
		PG_FAIL_IF(rc, "op 2: %s", ftcc_strerror(rc));
	}
	check_op(me, x[2], &rec, 2);
}

static void run_overtake(const char *lanes, int overtakes)
{
	setenv("FTCC_FAULT", "input:2:*:hold", 1);
	setenv("FTCC_LANES", lanes, 1);
	pg_run("lanes", N, sc_overtake, 30000, 0);
	unsetenv("FTCC_FAULT");
	unsetenv("FTCC_LANES");
	for (int m = 0; m < N; m++)
		cr_expect_eq(pg->m[m].t_ns[0], overtakes ? 0 : 1,
			     "FTCC_LANES=%s, member %d: op 2 %s when op 3 was", lanes, m,
			     pg->m[m].t_ns[0] ? "was done" : "was not done");
}

Test(ft_mproc_lanes, next_op_overtakes_a_stalled_one)
{
	run_overtake("2", 1);
}

Test(ft_mproc_lanes, one_lane_runs_ops_in_order)
{
	run_overtake("1", 0);
}

/* Op 2 held (a second) at every member, ops 3 .. 7 started behind it, then the comm aborted: the
 * ops still queued (4 .. 7 wait for op 2 with one or two lanes) are done with FTCC_ERR_ABORTED
 * by the time ftcc_comm_abort() returns, for ftcc_test() as for ftcc_wait(); the ones running
 * end by themselves. */
static void sc_abort_queued(struct pg_shared *S, int me, ftcc_comm_t *c)
{
	float x[8][COUNT];
	ftcc_request_t *r[8] = { NULL };
	struct ftcc_record rec;
	int done = 0, rc;

	(void)S;
	for (uint64_t s = 0; s < 8; s++)
		for (int i = 0; i < COUNT; i++)
			x[s][i] = input_of(me, s, i);
	for (uint64_t s = 0; s < 2; s++) {
		rc = ftcc_allreduce(c, x[s], x[s], COUNT, FTCC_FLOAT32, FTCC_SUM, &rec);
		PG_FAIL_IF(rc, "op %llu: %s", (unsigned long long)s, ftcc_strerror(rc));
	}
	for (int s = 2; s < 8; s++) {
		rc = ftcc_iallreduce(c, x[s], x[s], COUNT, FTCC_FLOAT32, FTCC_SUM, &r[s]);
		PG_FAIL_IF(rc, "start op %d: %s", s, ftcc_strerror(rc));
	}
	ftcc_comm_abort(c);
	for (int s = 4; s < 8; s++) {
		rc = ftcc_test(r[s], &done, &rec);
		PG_FAIL_IF(!done, "op %d is not done when the abort returned", s);
		PG_FAIL_IF(rc != FTCC_ERR_ABORTED, "op %d: %s", s, ftcc_strerror(rc));
	}
	for (int s = 2; s < 4; s++) {
		rc = ftcc_wait(r[s], &rec); /* bounded: they end by themselves */
		PG_FAIL_IF(rc == 0 && rec.seq != (uint64_t)s, "op %d: record of op %llu", s,
			   (unsigned long long)rec.seq);
	}
}

static void run_abort_queued(const char *lanes)
{
	setenv("FTCC_FAULT", "input:2:*:hold", 1);
	setenv("FTCC_LANES", lanes, 1);
	pg_run("abortq", N, sc_abort_queued, 30000, 0);
	unsetenv("FTCC_FAULT");
	unsetenv("FTCC_LANES");
}

Test(ft_mproc_lanes, abort_ends_the_ops_queued_one_lane)
{
	run_abort_queued("1");
}

Test(ft_mproc_lanes, abort_ends_the_ops_queued_two_lanes)
{
	run_abort_queued("2");
}

static void three_lanes_for_member2(int me)
{
	if (me == 2)
		setenv("FTCC_LANES", "3", 1);
}

/* Members 0 and 1: an allreduce that member 2 (which could not take part) is not in. */
static void sc_without_2(struct pg_shared *S, int me, ftcc_comm_t *c)
{
	struct ftcc_record rec;
	float x = 1;
	int rc;

	(void)S;
	rc = ftcc_allreduce(c, &x, &x, 1, FTCC_FLOAT32, FTCC_SUM, &rec);
	PG_FAIL_IF(rc, "allreduce: %s", ftcc_strerror(rc));
	PG_FAIL_IF(rec.ncontrib != 2 || ftcc_record_has(&rec, 2), "%u members, member 2 %s",
		   rec.ncontrib, ftcc_record_has(&rec, 2) ? "in" : "out");
}

Test(ft_mproc_lanes, another_number_of_lanes_is_refused)
{
	int st = 0;

	pg_before_create = three_lanes_for_member2;
	pg_run("lanesdiff", N, sc_without_2, 30000, 1u << 2);
	cr_assert_eq(chaos_wait_exit(pg->m[2].pid, 30000, &st), 0, "member 2 did not end");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 1, "member 2: status %#x", st);
	cr_expect_str_eq(pg->m[2].why, "create: invalid argument");
}
