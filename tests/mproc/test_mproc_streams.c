/* SPDX-License-Identifier: BSD-3-Clause */
/* Streams (struct ftcc_config's nstreams, ftcc_comm_stream()): independent op sequences of one
 * communicator.
 *
 *  - Members call the ops of different streams in different orders, each stream's ops with
 *    shapes of its own (with one op sequence that order would pair ops of different shapes:
 *    FTCC_ERR_MISMATCH); every result is exact and the same everywhere, each stream numbering
 *    its own ops.
 *  - A stream's ops complete while another stream's op waits for a member that has not called
 *    it yet.
 *  - A member killed with ops of every stream in flight: the survivors finish every op of every
 *    stream, one result per op and one member list per epoch across all processes.
 *  - A data link reset in stream 1's op (a fault between live members): retried, nobody
 *    evicted; a member late in one stream while busy in another is a straggler, not cut; a
 *    member whose op of one stream fails out of memory leaves at once, for every stream.
 *  - Handles: a stream that does not exist, destroy or point-to-point calls on a stream's handle,
 *    a configuration with too many streams: FTCC_ERR_INVALID.
 *
 * Members run in their own processes (tests/lib/ft_group.h, p2p_group.h). No root needed. Run
 * with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "chaos_proc.h"
#include "ft_group.h"
#include "p2p_group.h"

#define FORM_MS 15000
#define RUN_MS 60000
#define NS 3
#define PERIOD (2 * NS - 1) /* ft_group's: NS ops of stream 0, one of each other stream */

static struct ft_group grp;
static char desc[1 << 15];

static const char *describe(void)
{
	ft_group_describe(&grp, 6, desc, sizeof(desc));
	return desc;
}

static void streams_teardown(void)
{
	ft_group_end(&grp, 3000, NULL, NULL);
	pg_teardown();
	chaos_proc_cleanup();
}

TestSuite(ft_mproc_streams, .fini = streams_teardown, .timeout = 120);

/* Op s is script[s % PERIOD] on stream ft_stream_of(s): one shape per stream (a small op for
 * stream 0, a ring op for 1, an in-place one of another type for 2), so that ops of two streams
 * never have the same shape. */
static const struct ft_spec per_stream[PERIOD] = {
	{ 5, FTCC_FLOAT32, FTCC_SUM, 0 },    { 5, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 5, FTCC_FLOAT32, FTCC_SUM, 0 },    { 70000, FTCC_INT32, FTCC_SUM, 0 },
	{ 3000, FTCC_FLOAT64, FTCC_MAX, 1 },
};

static uint32_t all(int n)
{
	return (1u << n) - 1;
}

/* Member 3 left: the last period's ops, one of every stream, ran with the other three, and
 * the invariants hold over all four processes' records (@limit ops) with members 0-2 steady. */
static void expect_without_member_3(uint64_t limit)
{
	char why[1024];
	int checked;

	for (int r = 0; r < PERIOD; r++)
		cr_expect_eq(ft_group_op(&grp, 0, limit - PERIOD + (uint64_t)r)->ncontrib, 3,
			     "op %llu of the last period",
			     (unsigned long long)(limit - PERIOD + r));
	checked = ft_group_invariants(&grp, all(3), why, sizeof(why));
	cr_expect_geq(checked, (int)limit, "%s\n%s", why, describe());
}

/* Starts group @name of @n members with @o and waits until it formed. */
static void streams_start(const char *name, int n, const struct ft_group_opts *o)
{
	cr_assert_eq(ft_group_start(&grp, name, n, o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, all(n), FORM_MS), 0, "%s", describe());
}

/* Member @i ended its script without an error, with @n members in its view: returns the view's
 * epoch. */
static uint64_t expect_steady(int i, uint32_t n)
{
	const struct ft_run *r = ft_group_cur(&grp, i);

	cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d: %s\n%s", i,
		     ftcc_strerror(atomic_load(&r->end_rc)), describe());
	cr_expect_eq(r->view1.nmembers, n, "member %d: %u members at the end", i,
		     r->view1.nmembers);
	return r->view1.epoch;
}

/* Member i issues each period's ops from stream i % NS on (ft_group's opts.nstreams): checks
 * that the members' orders did differ, from the ops' start times. */
static void expect_orders_differ(int n, uint64_t periods)
{
	int differ = 0;

	for (uint64_t k = 0; k < periods; k++) {
		int first[FT_GROUP_MAX_N];

		for (int i = 0; i < n; i++) {
			int64_t t = INT64_MAX;

			first[i] = -1;
			for (int r = 0; r < PERIOD; r++) {
				uint64_t s = k * PERIOD + (uint64_t)r, j;
				const struct ft_op *op = ft_group_op(&grp, i, s);

				if (op && op->t_start && op->t_start < t) {
					t = op->t_start;
					first[i] = (int)ft_stream_of(&grp, s, &j);
				}
			}
		}
		for (int i = 1; i < n; i++)
			differ += first[i] != first[0];
	}
	cr_expect_gt(differ, 0, "the members called the streams' ops in the same order");
}

Test(ft_mproc_streams, members_call_streams_in_different_orders_of_3)
{
	struct ft_group_opts o = {
		.script = per_stream, .nspec = PERIOD, .nstreams = NS, .depth = 6, .limit = 100
	};
	char why[1024];
	int checked;

	streams_start("streams3", 3, &o);
	cr_assert_eq(ft_group_wait_ended(&grp, all(3), RUN_MS), 0, "%s", describe());
	for (int i = 0; i < 3; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d: %s", i,
			     ftcc_strerror(atomic_load(&r->end_rc)));
		for (uint64_t s = 0; s < o.limit; s++) {
			const struct ft_op *op = ft_group_op(&grp, i, s);

			cr_assert(op, "member %d: op %llu not done\n%s", i, (unsigned long long)s,
				  describe());
			uint64_t j;
			uint32_t t = ft_stream_of(&grp, s, &j);

			cr_expect_eq(op->rc, 0, "member %d op %llu (stream %u): %s", i,
				     (unsigned long long)s, t, ftcc_strerror(op->rc));
			cr_expect(!op->bad_seq,
				  "member %d op %llu: its record is not op %llu of "
				  "stream %u",
				  i, (unsigned long long)s, (unsigned long long)j, t);
			cr_expect_eq(op->ncontrib, 3);
			cr_expect_eq(op->epoch, 1);
		}
	}
	expect_orders_differ(3, o.limit / PERIOD);
	checked = ft_group_invariants(&grp, all(3), why, sizeof(why));
	cr_expect_eq(checked, (int)o.limit, "%s\n%s", why, describe());
}

/* Larger ops: streams 0 and 1 run the ring, stream 2 recursive doubling. */
static const struct ft_spec big[PERIOD] = {
	{ 1 << 16, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1 << 16, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 1 << 16, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1 << 18, FTCC_INT32, FTCC_SUM, 0 },
	{ 200, FTCC_FLOAT64, FTCC_SUM, 1 },
};

Test(ft_mproc_streams, killed_with_ops_of_every_stream_in_flight_of_4)
{
	struct ft_group_opts o = {
		.script = big, .nspec = PERIOD, .nstreams = NS, .depth = 6, .limit = 250
	};
	uint64_t max = 0;

	streams_start("streams4k", 4, &o);
	cr_assert_eq(ft_group_wait_op(&grp, all(4), 60, RUN_MS), 0, "%s", describe());
	ft_group_kill(&grp, 3);
	cr_assert_eq(ft_group_wait_ended(&grp, all(3), RUN_MS), 0, "%s", describe());
	for (int i = 0; i < 3; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d: %s\n%s", i,
			     ftcc_strerror(atomic_load(&r->end_rc)), describe());
		for (uint64_t s = 0; s < o.limit; s++) {
			const struct ft_op *op = ft_group_op(&grp, i, s);

			cr_assert(op, "member %d: op %llu not done\n%s", i, (unsigned long long)s,
				  describe());
			cr_expect(op->rc == 0 && !op->bad_seq, "member %d op %llu: %s", i,
				  (unsigned long long)s, ftcc_strerror(op->rc));
		}
		max = ft_group_op(&grp, i, o.limit - 1)->epoch > max ?
			      ft_group_op(&grp, i, o.limit - 1)->epoch :
			      max;
	}
	cr_expect_gt(max, 1, "no epoch after the kill");
	expect_without_member_3(o.limit);
}

/* A fault between live members: member 2's data-plane send fails with ECONNRESET in the ring of
 * stream 1's op 20 (FTCC_FAULT reset; only stream 1 runs the ring here), with ops of every
 * stream in flight. The retry epoch that stream's report asks for reopens it: every op of every
 * stream ends with all four members, one result per op, and nobody is evicted. */
static const struct ft_spec ring1[PERIOD] = {
	{ 5, FTCC_FLOAT32, FTCC_SUM, 0 },   { 5, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 5, FTCC_FLOAT32, FTCC_SUM, 0 },   { 1 << 18, FTCC_INT32, FTCC_SUM, 0 },
	{ 200, FTCC_FLOAT64, FTCC_SUM, 1 },
};

Test(ft_mproc_streams, a_reset_link_in_stream_1_evicts_nobody_of_4)
{
	struct ft_group_opts o = {
		.script = ring1, .nspec = PERIOD, .nstreams = NS, .depth = 6, .limit = 150
	};
	uint64_t max = 0;
	char why[1024];
	int checked;

	o.fault[2] = "rs:20:0:reset";
	streams_start("streams4r", 4, &o);
	cr_assert_eq(ft_group_wait_ended(&grp, all(4), RUN_MS), 0, "%s", describe());
	for (int i = 0; i < 4; i++) {
		uint64_t e = expect_steady(i, 4);

		max = e > max ? e : max;
	}
	cr_expect_gt(max, 1, "the reset made no epoch (did the fault fire?)\n%s", describe());
	/* every member in every op, every result exact and alike, one member list per epoch */
	checked = ft_group_invariants(&grp, all(4), why, sizeof(why));
	cr_expect_eq(checked, (int)o.limit, "%s\n%s", why, describe());
}

/* A local failure in one stream: member 3's op 20 of stream 0 fails out of memory (FTCC_FAULT
 * input:20:0:fail acts at op 20 of each stream; stream 0, running three ops to the others' one,
 * gets there first), with ops of every stream in flight. The member leaves at once, for every
 * stream: the others end that op, and every op of every stream, without it, well within the
 * failure timeout that a silent member would cost them; nobody else is removed. */
Test(ft_mproc_streams, a_member_out_of_memory_in_one_stream_leaves_at_once_of_4)
{
	struct ft_group_opts o = { .script = per_stream,
				   .nspec = PERIOD,
				   .nstreams = NS,
				   .depth = 6,
				   .limit = 150,
				   .timeout_ms = 5000 };
	const struct ft_run *r3;
	uint64_t failed = UINT64_MAX, j = 0;
	int64_t stall = 0;

	o.fault[3] = "input:20:0:fail";
	streams_start("streams4m", 4, &o);
	cr_assert_eq(ft_group_wait_ended(&grp, 1u << 3, RUN_MS), 0, "member 3 goes on\n%s",
		     describe());
	r3 = ft_group_cur(&grp, 3);
	for (uint64_t s = 0; s < o.limit && failed == UINT64_MAX; s++) {
		if (atomic_load(&r3->ops[s].state) == FT_OP_DONE && r3->ops[s].rc == FTCC_ERR_NOMEM)
			failed = s;
	}
	cr_assert_neq(failed, UINT64_MAX, "no op of member 3 failed out of memory\n%s", describe());
	cr_expect_eq(ft_stream_of(&grp, failed, &j), 0, "op %llu", (unsigned long long)failed);
	cr_expect_eq(j, 20, "op %llu is op %llu of its stream", (unsigned long long)failed,
		     (unsigned long long)j);
	cr_assert_eq(ft_group_wait_ended(&grp, all(3), RUN_MS), 0, "%s", describe());
	for (int i = 0; i < 3; i++) {
		const struct ft_op *op = ft_group_op(&grp, i, failed);

		expect_steady(i, 3);
		cr_assert(op, "member %d: op %llu not done\n%s", i, (unsigned long long)failed,
			  describe());
		cr_expect(op->rc == 0 && op->ncontrib == 3,
			  "member %d op %llu: %s, %u contributors", i, (unsigned long long)failed,
			  ftcc_strerror(op->rc), op->ncontrib);
		if (op->t_done - r3->ops[failed].t_start > stall)
			stall = op->t_done - r3->ops[failed].t_start;
		for (uint64_t s = 0; s < o.limit; s++) {
			op = ft_group_op(&grp, i, s);
			cr_assert(op, "member %d: op %llu not done\n%s", i, (unsigned long long)s,
				  describe());
			cr_expect(op->rc == 0 && !op->bad_seq, "member %d op %llu: %s", i,
				  (unsigned long long)s, ftcc_strerror(op->rc));
		}
	}
	/* a member that went silent would cost the timeout (5 s) */
	cr_expect_lt(stall, 2500 * 1000000ll, "op %llu ended %lld ms after member 3 started it",
		     (unsigned long long)failed, (long long)(stall / 1000000));
	expect_without_member_3(o.limit);
}

/* ---- a stream waits, the others go on ----------------------------------------------------- */

#define COUNT 4

static float input_of(int me, int stream, uint64_t seq, int i)
{
	return (float)((me + 1) * 100 + stream * 10 + (int)seq * 1000 + i);
}

static void check_sum(int me, const float *x, int stream, uint64_t seq, int n,
		      const struct ftcc_record *rec, int *bad)
{
	if (rec->seq != seq || rec->ncontrib != (uint32_t)n) {
		*bad = 1;
	}
	for (int i = 0; i < COUNT; i++) {
		float want = 0;

		for (int m = 0; m < n; m++)
			want += input_of(m, stream, seq, i);
		*bad |= x[i] != want;
	}
	(void)me;
}

/* Every member of the three saw all three in its view at the end (t_ns[1]). */
static void expect_three_at_the_end(void)
{
	for (int m = 0; m < 3; m++)
		cr_expect_eq(pg->m[m].t_ns[1], 3, "member %d: %lld members at the end", m,
			     (long long)pg->m[m].t_ns[1]);
}

/* The member that calls stream 1's op 0 last, and how late after the others looked at theirs. */
static int late_member, late_ms;

/* The members but late_member start stream 1's op 0 first, then all three run five ops of stream
 * 0; late_member calls stream 1's op 0 only once the others looked at theirs (flag 0), late_ms
 * later. t_ns[0]: 1 when that op was not done when the member looked; t_ns[1]: the members
 * in its view then. */
static void sc_wait(struct pg_shared *S, int me, ftcc_comm_t *c)
{
	ftcc_comm_t *s1;
	ftcc_request_t *r1 = NULL;
	struct ftcc_record rec;
	float x[6][COUNT];
	int done = 0, rc, bad = 0;

	(void)S;
	rc = ftcc_comm_stream(c, 1, &s1);
	PG_FAIL_IF(rc, "ftcc_comm_stream: %s", ftcc_strerror(rc));
	for (int i = 0; i < COUNT; i++) {
		x[5][i] = input_of(me, 1, 0, i);
		for (int k = 0; k < 5; k++)
			x[k][i] = input_of(me, 0, (uint64_t)k, i);
	}
	if (me != late_member) {
		rc = ftcc_iallreduce(s1, x[5], x[5], COUNT, FTCC_FLOAT32, FTCC_SUM, &r1);
		PG_FAIL_IF(rc, "stream 1 op 0: %s", ftcc_strerror(rc));
	}
	for (int k = 0; k < 5; k++) {
		rc = ftcc_allreduce(c, x[k], x[k], COUNT, FTCC_FLOAT32, FTCC_SUM, &rec);
		PG_FAIL_IF(rc, "stream 0 op %d: %s", k, ftcc_strerror(rc));
		check_sum(me, x[k], 0, (uint64_t)k, 3, &rec, &bad);
		PG_FAIL_IF(bad, "stream 0 op %d: wrong result or record", k);
	}
	if (me != late_member) {
		rc = ftcc_test(r1, &done, &rec);
		PG_FAIL_IF(rc, "test stream 1 op 0: %s", ftcc_strerror(rc));
		pg->m[me].t_ns[0] = !done;
		atomic_fetch_add(&pg->flag[0], 1);
	} else {
		pg_wait_flag(0, 2);
		chaos_sleep_ms(late_ms); /* stream 0 has nothing to do meanwhile either */
		rc = ftcc_iallreduce(s1, x[5], x[5], COUNT, FTCC_FLOAT32, FTCC_SUM, &r1);
		PG_FAIL_IF(rc, "stream 1 op 0: %s", ftcc_strerror(rc));
	}
	rc = ftcc_wait(r1, &rec);
	PG_FAIL_IF(rc, "stream 1 op 0: %s", ftcc_strerror(rc));
	check_sum(me, x[5], 1, 0, 3, &rec, &bad);
	PG_FAIL_IF(bad, "stream 1 op 0: wrong result or record");
	{
		struct ftcc_view v;

		rc = ftcc_comm_view(c, &v, NULL, 0);
		PG_FAIL_IF(rc || v.state, "view: %s", ftcc_strerror(rc ? rc : v.state));
		pg->m[me].t_ns[1] = v.nmembers;
	}
}

Test(ft_mproc_streams, a_stream_waiting_for_a_member_holds_no_other)
{
	pg_nstreams = 2;
	late_member = 0;
	late_ms = 0;
	pg_run("streamwait", 3, sc_wait, 30000, 0);
	for (int m = 1; m < 3; m++) /* (member 0 is the one that called it last) */
		cr_expect_eq(pg->m[m].t_ns[0], 1,
			     "member %d: stream 1's op 0 was done before "
			     "member 0 called it",
			     m);
}

/* The same with member 2 calling stream 1's op 0 three failure timeouts late, having completed
 * more ops of stream 0 than it issued of stream 1: the others cannot reach its stream 1 data
 * plane meanwhile (nobody answers one between ops) and say so, and the membership, which sees
 * that member 2 has not issued that op of that stream, gives them another attempt (an epoch of
 * the same members) and no verdict: a straggler, not a cut. The op completes with all three,
 * and the group is still the three. */
Test(ft_mproc_streams, a_member_late_in_one_stream_is_not_cut)
{
	pg_nstreams = 2;
	late_member = 2;
	late_ms = PG_TIMEOUT_MS * 3;
	pg_run("streamlate", 3, sc_wait, 30000, 0);
	expect_three_at_the_end();
}

/* Each of two members busy in one stream while late in the other: member 0 calls stream 1's op 0
 * and only three failure timeouts later stream 0's; member 2 calls stream 0's op 0 (so it waits
 * for member 0 there) before stream 1's; member 1 calls both at once. Stream 0 waits for member
 * 0 and stream 1 for member 2, each of them in an op of the other stream meanwhile, its data
 * planes answering: healthy slowness on both sides, nobody removed, both ops exact with all
 * three. t_ns[1]: the members in the view at the end. */
static void sc_busy(struct pg_shared *S, int me, ftcc_comm_t *c)
{
	ftcc_comm_t *s1;
	ftcc_request_t *r1 = NULL;
	struct ftcc_record rec;
	float x0[COUNT], x1[COUNT];
	struct ftcc_view v;
	int rc, bad = 0;

	(void)S;
	rc = ftcc_comm_stream(c, 1, &s1);
	PG_FAIL_IF(rc, "ftcc_comm_stream: %s", ftcc_strerror(rc));
	for (int i = 0; i < COUNT; i++) {
		x0[i] = input_of(me, 0, 0, i);
		x1[i] = input_of(me, 1, 0, i);
	}
	if (me != 2) {
		rc = ftcc_iallreduce(s1, x1, x1, COUNT, FTCC_FLOAT32, FTCC_SUM, &r1);
		PG_FAIL_IF(rc, "stream 1 op 0: %s", ftcc_strerror(rc));
	}
	if (me == 0)
		chaos_sleep_ms(late_ms); /* busy in stream 1, late in stream 0 */
	rc = ftcc_allreduce(c, x0, x0, COUNT, FTCC_FLOAT32, FTCC_SUM, &rec);
	PG_FAIL_IF(rc, "stream 0 op 0: %s", ftcc_strerror(rc));
	check_sum(me, x0, 0, 0, 3, &rec, &bad);
	PG_FAIL_IF(bad, "stream 0 op 0: wrong result or record");
	if (me == 2) { /* it was busy in stream 0, late in stream 1 */
		rc = ftcc_iallreduce(s1, x1, x1, COUNT, FTCC_FLOAT32, FTCC_SUM, &r1);
		PG_FAIL_IF(rc, "stream 1 op 0: %s", ftcc_strerror(rc));
	}
	rc = ftcc_wait(r1, &rec);
	PG_FAIL_IF(rc, "stream 1 op 0: %s", ftcc_strerror(rc));
	check_sum(me, x1, 1, 0, 3, &rec, &bad);
	PG_FAIL_IF(bad, "stream 1 op 0: wrong result or record");
	rc = ftcc_comm_view(c, &v, NULL, 0);
	PG_FAIL_IF(rc || v.state, "view: %s", ftcc_strerror(rc ? rc : v.state));
	pg->m[me].t_ns[1] = v.nmembers;
}

Test(ft_mproc_streams, members_busy_in_one_stream_and_late_in_the_other_are_not_cut)
{
	pg_nstreams = 2;
	late_ms = PG_TIMEOUT_MS * 3;
	pg_run("streambusy", 3, sc_busy, 30000, 0);
	expect_three_at_the_end();
}

/* ---- handles --------------------------------------------------------------------------------- */

static void sc_handles(struct pg_shared *S, int me, ftcc_comm_t *c)
{
	ftcc_comm_t *s1 = NULL, *s0 = NULL, *bad = (ftcc_comm_t *)1;
	ftcc_request_t *req = NULL;
	char b[8] = { 0 };
	int rc;

	(void)S;
	rc = ftcc_comm_stream(c, 1, &s1);
	PG_FAIL_IF(rc || !s1 || s1 == c, "stream 1: %s", ftcc_strerror(rc));
	PG_FAIL_IF(ftcc_comm_stream(s1, 0, &s0) || s0 != c, "stream 0 from stream 1's handle");
	PG_FAIL_IF(ftcc_comm_stream(c, 2, &bad) != FTCC_ERR_INVALID || bad,
		   "a third stream of two");
	PG_FAIL_IF(ftcc_comm_stream(c, 0, NULL) != FTCC_ERR_INVALID, "no out pointer");
	PG_FAIL_IF(ftcc_comm_destroy(s1) != FTCC_ERR_INVALID, "destroy of a stream's handle");
	PG_FAIL_IF(ftcc_comm_abort(s1) != FTCC_ERR_INVALID, "abort of a stream's handle");
	PG_FAIL_IF(ftcc_isend(s1, b, sizeof(b), (uint32_t)((me + 1) % 3), 1, &req) !=
			   FTCC_ERR_INVALID,
		   "a send on a stream's handle");
	/* and the stream still works, like the communicator */
	rc = ftcc_barrier(s1, NULL);
	PG_FAIL_IF(rc, "barrier on stream 1: %s", ftcc_strerror(rc));
	rc = ftcc_barrier(c, NULL);
	PG_FAIL_IF(rc, "barrier on stream 0: %s", ftcc_strerror(rc));
}

Test(ft_mproc_streams, stream_handles)
{
	struct ftcc_config cfg;
	ftcc_comm_t *c = (ftcc_comm_t *)1;
	const char *addrs[1] = { "127.0.0.1:0" };

	pg_nstreams = 2;
	pg_run("streamhandles", 3, sc_handles, 30000, 0);
	ftcc_config_init(&cfg);
	cfg.group = "toomany";
	cfg.size = 1;
	cfg.addrs = addrs;
	cfg.nstreams = FTCC_STREAMS_MAX + 1;
	cr_expect_eq(ftcc_comm_create(&cfg, &c), FTCC_ERR_INVALID);
	cr_expect_null(c);
}
