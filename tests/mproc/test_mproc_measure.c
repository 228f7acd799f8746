/* SPDX-License-Identifier: BSD-3-Clause */
/* FTCC_MEASURE_NO_HAVE=1, the setting perf/ft_cost.sh measures the cost of fault tolerance
 * with: ops return without the have round and their results stay exact. Member 1 is armed to
 * exit at op 2's have notices (FTCC_FAULT have:2:*:exit): with the setting it never gets there
 * and every op of the script counts all three members; by default it does (the control, so the
 * first test cannot pass on a point never reached). A recursive doubling op (op 1, 4 floats)
 * among 3 members has its have round too (only two members go without): armed there, member 1
 * exits.
 *
 * The script: recursive doubling (4 floats) and ring (100 000 floats) sizes, in place and out of
 * place, results and records checked at every member. Members run in their own processes
 * (tests/lib/p2p_group.h). No root needed. Run with --jobs 1.
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
#define NOPS 6
#define BIG 100000

TestSuite(ft_mproc_measure, .fini = pg_teardown, .timeout = 60);

static float input_of(int me, uint64_t seq, size_t i)
{
	return (float)((me + 1) * (int)(seq + 1) + (int)(i % 1000));
}

/* Ops 0 .. NOPS-1: even ones out of place, odd ones in place; sizes alternate by twos. */
static void sc_script(struct pg_shared *S, int me, ftcc_comm_t *c)
{
	static float in[BIG], out[BIG];
	struct ftcc_record rec;

	(void)S;
	for (uint64_t s = 0; s < NOPS; s++) {
		size_t count = s / 2 % 2 ? BIG : 4;
		float *dst = s % 2 ? in : out;
		int rc;

		for (size_t i = 0; i < count; i++)
			in[i] = input_of(me, s, i);
		rc = ftcc_allreduce(c, in, dst, count, FTCC_FLOAT32, FTCC_SUM, &rec);
		PG_FAIL_IF(rc, "op %llu: %s", (unsigned long long)s, ftcc_strerror(rc));
		PG_FAIL_IF(rec.seq != s || rec.ncontrib != N,
			   "op %llu: record seq %llu, %u members", (unsigned long long)s,
			   (unsigned long long)rec.seq, rec.ncontrib);
		for (size_t i = 0; i < count; i++) {
			float want = 0;

			for (int m = 0; m < N; m++)
				want += input_of(m, s, i);
			PG_FAIL_IF(dst[i] != want, "op %llu element %zu: %g, expected %g",
				   (unsigned long long)s, i, dst[i], want);
		}
	}
}

/* The control's scenario: the ops run; member 1 exits at op 2 and the others go on. */
static void sc_ops(struct pg_shared *S, int me, ftcc_comm_t *c)
{
	static float x[BIG];
	struct ftcc_record rec;

	(void)S;
	for (uint64_t s = 0; s < NOPS; s++) {
		size_t count = s / 2 % 2 ? BIG : 4;
		int rc;

		for (size_t i = 0; i < count; i++)
			x[i] = input_of(me, s, i);
		rc = ftcc_allreduce(c, x, x, count, FTCC_FLOAT32, FTCC_SUM, &rec);
		PG_FAIL_IF(rc, "op %llu: %s", (unsigned long long)s, ftcc_strerror(rc));
	}
}

static void arm_member1(int me)
{
	if (me == 1)
		setenv("FTCC_FAULT", "have:2:*:exit", 1);
}

Test(ft_mproc_measure, no_have_round_and_exact_results)
{
	setenv("FTCC_MEASURE_NO_HAVE", "1", 1);
	pg_before_create = arm_member1;
	pg_run("nohave", N, sc_script, 30000, 0);
	unsetenv("FTCC_MEASURE_NO_HAVE");
}

/* Op 2 (100 000 floats, a ring op) among 3 members has a have round, whatever its algorithm: only
 * a recursive doubling op of two members goes without. */
Test(ft_mproc_measure, the_have_round_runs_by_default)
{
	int st = 0;

	unsetenv("FTCC_MEASURE_NO_HAVE");
	pg_before_create = arm_member1;
	pg_run("have", N, sc_ops, 30000, 1u << 1);
	cr_assert_eq(chaos_wait_exit(pg->m[1].pid, 30000, &st), 0, "member 1 did not end");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 3,
		  "member 1 did not exit at op 2's have notices: status %#x", st);
}

static void arm_member1_rd(int me)
{
	if (me == 1)
		setenv("FTCC_FAULT", "have:1:*:exit", 1);
}

/* Op 1 (4 floats) is a recursive doubling op of 3 members: it has a have round (a member that
 * returned it early and then left would hold a result the survivors compute without it), and
 * member 1 exits there. */
Test(ft_mproc_measure, recursive_doubling_of_3_has_its_have_round)
{
	int st = 0;

	unsetenv("FTCC_MEASURE_NO_HAVE");
	pg_before_create = arm_member1_rd;
	pg_run("rdhave", N, sc_ops, 30000, 1u << 1);
	cr_assert_eq(chaos_wait_exit(pg->m[1].pid, 30000, &st), 0, "member 1 did not end");
	cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 3,
		  "member 1 did not exit at op 1's have notices: status %#x", st);
}
