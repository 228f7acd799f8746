/* SPDX-License-Identifier: BSD-3-Clause */
/* The fault-tolerant allreduce (ftcc.h) under silence and membership changes: a member frozen
 * (SIGSTOP) or cut off by nftables while ops run, killed and restarted (with and without
 * catch-up), the degraded policies, abort, and a randomized soak of kills and restarts. The checks
 * are those of test_chaos_allreduce.c (ft_chaos.h). Needs root for the nftables cut (skipped
 * otherwise). Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "abi_net.h"
#include "chaos_fault.h"
#include "chaos_proc.h"
#include "ft_chaos.h"

TestSuite(ft_freeze, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_cut, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_join, .fini = chaos_teardown, .timeout = 90);
TestSuite(ft_degraded, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_abort, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_soak, .fini = chaos_teardown, .timeout = 240);

/* ---- silence --------------------------------------------------------------------------------- */

/* The longest time any member of @live went without completing an op from @t_ns until it finished
 * its script (the stall a fault at @t_ns caused). */
static double worst_gap(uint32_t live, int64_t t_ns)
{
	double worst = 0;

	for (int i = 0; i < grp.n; i++) {
		double gap;

		if (!(live >> i & 1))
			continue;
		gap = ft_group_max_gap(&grp, i, t_ns, chaos_now_ns());
		worst = gap > worst ? gap : worst;
	}
	return worst;
}

/* SIGSTOPs member @victim after its op 5 of 20: the others finish within the failure timeout + 1 s
 * and go on without it; it is killed at teardown. */
static void freeze(const char *name, int n, int victim)
{
	struct ft_group_opts o = { .timeout_ms = TIMEOUT_MS,
				   .degraded = FTCC_DEGRADED_SUM,
				   .limit = 20,
				   .pace_us = PACE_US,
				   .script = mixed,
				   .nspec = 4 };
	uint32_t all = ids_all(n), live = all & ~bit(victim);
	int64_t t, first;
	double gap;

	cr_assert_eq(ft_group_start(&grp, name, n, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, all, FORM_MS), 0, "no group\n%s", describe());
	cr_assert_eq(ft_group_wait_op(&grp, bit(victim), 5, RUN_MS), 0, "no op 5\n%s", describe());
	t = ft_group_freeze(&grp, victim);
	cr_assert_neq(t, 0, "could not freeze member %d", victim);
	cr_assert_eq(ft_group_wait_ended(&grp, live, FREEZE_BOUND_MS + RUN_MS), 0,
		     "the others did not finish\n%s", describe());
	expect_finished(live, 20);
	first = expect_transition(live, bit(victim), all, 0, 20);
	gap = worst_gap(live, t);
	chaos_report("ft: %s: member %d SIGSTOPped after op 5: the others stalled %.1f ms at most; "
		     "first op without it %lld; %d ops checked",
		     name, victim, gap, (long long)first, expect_agree());
	cr_expect_leq(gap, FREEZE_BOUND_MS, "stalled %.1f ms\n%s", gap, describe());
	cr_expect_geq(gap, TIMEOUT_MS / 2, "a frozen member was dropped after only %.1f ms", gap);
	end_group();
}

Test(ft_freeze, sigstop_member2_of_3)
{
	freeze("stop2", 3, 2);
}

Test(ft_freeze, sigstop_member0_of_3)
{
	freeze("stop0", 3, 0);
}

/* A reduce-scatter member stops (SIGSTOP) once its ring ended at op SEQ: what it sent is
 * delivered, so each survivor holds its own slot, the only chunk it needs, while nobody holds the
 * frozen member's. Once it is removed for its silence the survivors finish op SEQ from the data,
 * its input in (the resume counts only their own slots), and go on without it. Over the verbs
 * emulator the port is a thread of the member's process and stops with it: its last segment,
 * posted but not yet on the wire (an HCA would send it), may never leave, and then the survivors
 * must redo the op without it (2 runs in 10); over TCP the kernel delivers what was written. */
Test(ft_freeze, reduce_scatter_member1_after_its_slot)
{
	static const struct ft_spec rs[] = {
		{ .count = 65536, .dtype = FTCC_FLOAT32, .op = FTCC_SUM, .kind = FT_REDUCE_SCATTER }
	};
	struct ft_group_opts o = { .timeout_ms = TIMEOUT_MS, .limit = K, .script = rs, .nspec = 1 };
	uint32_t all = ids_all(3), live = all & ~bit(1);
	const char *transport = getenv("FTCC_TEST_TRANSPORT");
	int emulated = transport && strcmp(transport, "ib") == 0, redone;
	struct ft_seq_info in;

	o.fault[1] = "have:5:0:stop";
	cr_assert_eq(ft_group_start(&grp, "rsfrz", 3, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, all, FORM_MS), 0, "no group\n%s", describe());
	cr_assert_eq(ft_group_wait_ended(&grp, live, FREEZE_BOUND_MS + RUN_MS), 0,
		     "the others did not finish\n%s", describe());
	expect_finished(live, K);
	ft_group_seq(&grp, SEQ, &in);
	redone = emulated && in.mask == live && !in.resumed;
	cr_expect((in.mask == all && in.resumed && (in.done_by & live) == live) ||
			  (redone && (in.done_by & live) == live),
		  "op %d: set %s, resumed %d, done by %s: expected %s finished from the data%s\n%s",
		  SEQ, ids(in.mask, 0), in.resumed, ids(in.done_by, 1), ids(all, 2),
		  emulated ? " or redone without member 1" : "", describe());
	cr_expect_eq(expect_transition(live, bit(1), all, 0, K), redone ? SEQ : SEQ + 1, "\n%s",
		     describe());
	chaos_report("ft: rsfrz: member 1 stopped after its slot at op %d: done by %s with set %s, "
		     "resumed %d; %d ops checked",
		     SEQ, ids(in.done_by, 0), ids(in.mask, 1), in.resumed, expect_agree());
	ft_group_kill(&grp, 1); /* it stopped itself: nothing asks it to end */
	end_group();
}

/* ---- network cut ----------------------------------------------------------------------------- */

static void need_nft(void)
{
	char why[256];

	if (!chaos_nft_usable(why, sizeof(why)))
		cr_skip_test("nftables not usable: %s", why);
	chaos_nft_sweep();
}

/* Member @k of @n is cut off by nftables after its op 5 of 20: the others finish within the failure
 * timeout + 1 s; its op in flight fails (FTCC_ERR_LOST) within LOST_BOUND_MS. */
static void cut(const char *name, int n, int k)
{
	struct ft_group_opts o = { .timeout_ms = TIMEOUT_MS,
				   .degraded = FTCC_DEGRADED_SUM,
				   .limit = 20,
				   .pace_us = CUT_PACE_US,
				   .script = mixed,
				   .nspec = 4 };
	uint32_t all = ids_all(n), live = all & ~bit(k);
	const struct ft_run *r;
	char table[32];
	int64_t t_cut, t_in, first;
	double gap, lost_ms;
	int rc;

	need_nft();
	cr_assert_eq(ft_group_start(&grp, name, n, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, all, FORM_MS), 0, "no group\n%s", describe());
	cr_assert_eq(chaos_nft_table(table, sizeof(table)), 0, "nft table");
	cr_assert_eq(ft_group_wait_op(&grp, bit(k), 5, RUN_MS), 0, "no op 5\n%s", describe());
	t_cut = chaos_now_ns();
	cr_assert_eq(chaos_nft_isolate_ip(table, grp.ip[k]), 0, "nft rules");
	/* over ib, its port leaves the emulated fabric too */
	cr_assert_eq(test_fabric_cut(ft_group_cur(&grp, k)->pid, 1), 0, "fabric cut");
	t_in = chaos_now_ns();
	cr_assert_eq(ft_group_wait_ended(&grp, live, FREEZE_BOUND_MS + RUN_MS), 0,
		     "the majority did not finish\n%s", describe());
	expect_finished(live, 20);
	first = expect_transition(live, bit(k), all, 0, 20);
	gap = worst_gap(live, t_cut);
	ft_group_wait_ended(&grp, bit(k), LOST_BOUND_MS + GRACE_MS);
	r = ft_group_cur(&grp, k);
	rc = atomic_load(&r->end_rc);
	lost_ms = atomic_load(&r->ended) ? chaos_ms(t_cut, atomic_load(&r->t_end)) : -1;
	chaos_report("ft: %s: member %d cut off after op 5 (rules in %.1f ms): the majority "
		     "stalled %.1f ms at most, first op without it %lld; the cut member ended with "
		     "%s after %.1f ms (\"%s\"); %d ops checked",
		     name, k, chaos_ms(t_cut, t_in), gap, (long long)first, ftcc_strerror(rc),
		     lost_ms, r->last_error, expect_agree());
	cr_expect_leq(gap, FREEZE_BOUND_MS, "the majority stalled %.1f ms\n%s", gap, describe());
	cr_expect(atomic_load(&r->ended) && rc != 0, "the cut member's ops did not fail\n%s",
		  describe());
	cr_expect_eq(rc, FTCC_ERR_LOST, "the cut member ended with %s, not FTCC_ERR_LOST",
		     ftcc_strerror(rc));
	cr_expect(lost_ms >= 0 && lost_ms <= LOST_BOUND_MS, "the cut member failed after %.1f ms",
		  lost_ms);
	cr_expect_eq(chaos_nft_delete(table), 0, "nft delete table %s", table);
	cr_expect_eq(test_fabric_cut(ft_group_cur(&grp, k)->pid, 0), 0, "fabric mend");
	end_group();
}

Test(ft_cut, cut_member2_of_3)
{
	cut("cut2", 3, 2);
}

Test(ft_cut, cut_member0_of_3)
{
	cut("cut0", 3, 0);
}

/* ---- restart and join ------------------------------------------------------------------------ */

/* Starts @n members on the paced script, open-ended, one op every @pace_us at most. */
static void start_paced(const char *name, int n, enum ftcc_degraded policy, int pace_us)
{
	struct ft_group_opts o = { .timeout_ms = TIMEOUT_MS,
				   .degraded = policy,
				   .limit = FT_GROUP_MAX_SEQ,
				   .pace_us = pace_us,
				   .script = paced,
				   .nspec = 4 };

	cr_assert_eq(ft_group_start(&grp, name, n, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, ids_all(n), FORM_MS), 0, "no group\n%s",
		     describe());
}

/* Kills member @v once it completed op @after and waits until the others completed an op without
 * it. Returns the kill time. */
static int64_t kill_and_settle(int v, uint64_t after)
{
	uint32_t live = ids_all(grp.n) & ~bit(v);
	int64_t t;
	double hi;

	cr_assert_eq(ft_group_wait_op(&grp, bit(v), after, RUN_MS), 0, "no op %llu\n%s",
		     (unsigned long long)after, describe());
	t = ft_group_kill(&grp, v);
	cr_assert_eq(ft_group_wait_op(&grp, live, (uint64_t)ft_group_max_seq(&grp) + 3, RUN_MS), 0,
		     "the others stopped after the kill\n%s", describe());
	hi = ft_group_stall(&grp, live, t, NULL, NULL);
	cr_expect(hi >= 0 && hi <= KILL_BOUND_MS, "op done %.1f ms after the kill\n%s", hi,
		  describe());
	return t;
}

/* Member 2 of 3 is killed and started again with join: it is admitted at an op boundary, its ops
 * have every member again, and nobody stalled for it. */
Test(ft_join, kill_and_rejoin_member2_of_3)
{
	const int n = 3, v = 2;
	uint32_t all = ids_all(n), live = all & ~bit(v);
	const struct ft_run *r;
	const struct ft_op *op;
	int64_t t_spawn, last;
	uint64_t first;
	double gap, admit_ms;

	start_paced("rejoin", n, FTCC_DEGRADED_SUM, PACE_US);
	kill_and_settle(v, 10);
	t_spawn = chaos_now_ns();
	cr_assert_eq(ft_group_spawn(&grp, v, 1, 0, NULL), 0);
	cr_assert_eq(ft_group_wait_created(&grp, bit(v), FORM_MS), 0, "not admitted\n%s",
		     describe());
	r = ft_group_cur(&grp, v);
	admit_ms = chaos_ms(t_spawn, atomic_load(&r->t_created));
	first = r->view0.next_seq;
	cr_assert_eq(ft_group_wait_op(&grp, all, first + 10, RUN_MS), 0,
		     "the joined member's ops did not complete\n%s", describe());
	op = ft_group_op(&grp, v, first);
	cr_assert(op);
	gap = 0;
	for (int i = 0; i < n; i++)
		if (live >> i & 1) {
			double g1 = ft_group_max_gap(&grp, i, t_spawn, op->t_done + 100000000);

			gap = g1 > gap ? g1 : gap;
		}
	cr_expect_eq(r->view0.contributor, 1, "the joined member is not a contributor");
	cr_expect_eq(r->view0.self_index >= 0, 1, "the joined member is not in its view");
	last = ft_group_settle(&grp, all, RUN_MS);
	cr_assert_geq(last, 0, "could not end the script\n%s", describe());
	for (uint64_t s = first; s <= (uint64_t)last; s++) {
		struct ft_seq_info in;

		ft_group_seq(&grp, s, &in);
		cr_expect_eq(in.mask, all, "op %llu after the join: set %s", (unsigned long long)s,
			     ids(in.mask, 0));
	}
	chaos_report("ft: rejoin: member 2 admitted %.1f ms after its restart, at op %llu (epoch "
		     "%llu); the others' longest gap between ops meanwhile %.1f ms; %d ops checked",
		     admit_ms, (unsigned long long)first, (unsigned long long)r->view0.epoch, gap,
		     expect_agree());
	cr_expect_leq(gap, JOIN_GAP_MS, "a survivor stalled %.1f ms at the join\n%s", gap,
		      describe());
	end_group();
}

/* Restarted with catch-up: it gets every result but is in no contributor set until it declares
 * itself ready; from an op after that on, it is in every one. */
Test(ft_join, catchup_rejoin_member2_of_3)
{
	const int n = 3, v = 2;
	uint32_t all = ids_all(n), live = all & ~bit(v);
	const struct ft_run *r;
	int64_t ready_seq, back = -1, last, t_ready;
	uint64_t first;

	start_paced("catchup", n, FTCC_DEGRADED_SUM, PACE_US);
	kill_and_settle(v, 10);
	cr_assert_eq(ft_group_spawn(&grp, v, 1, 1, NULL), 0);
	cr_assert_eq(ft_group_wait_created(&grp, bit(v), FORM_MS), 0, "not admitted\n%s",
		     describe());
	r = ft_group_cur(&grp, v);
	first = r->view0.next_seq;
	cr_expect_eq(r->view0.contributor, 0, "a catch-up member starts as a contributor");
	cr_assert_eq(ft_group_wait_op(&grp, all, first + 10, RUN_MS), 0,
		     "the catch-up member's ops did not complete\n%s", describe());
	t_ready = chaos_now_ns();
	ft_group_ready(&grp, v);
	for (int64_t deadline = chaos_now_ns() + 5000000000ll; chaos_now_ns() < deadline;) {
		if (atomic_load(&r->ready_seq) >= 0)
			break;
		chaos_sleep_ms(1);
	}
	ready_seq = atomic_load(&r->ready_seq);
	cr_assert_geq(ready_seq, 0, "ftcc_comm_ready() not called\n%s", describe());
	cr_expect_eq(atomic_load(&r->ready_rc), 0, "ftcc_comm_ready: %d",
		     atomic_load(&r->ready_rc));
	/* Poll until an op has it back. */
	for (int64_t deadline = chaos_now_ns() + 5000000000ll;
	     chaos_now_ns() < deadline && back < 0;) {
		for (int64_t s = ready_seq; s <= atomic_load(&r->last_seq); s++) {
			const struct ft_op *op = ft_group_op(&grp, v, (uint64_t)s);

			if (op && (op->mask >> v & 1)) {
				back = s;
				break;
			}
		}
		chaos_sleep_ms(1);
	}
	cr_assert_geq(back, 0, "member %d never contributed after ftcc_comm_ready()\n%s", v,
		      describe());
	last = ft_group_settle(&grp, all, RUN_MS);
	cr_assert_geq(last, back, "could not end the script\n%s", describe());
	for (uint64_t s = first; s <= (uint64_t)last; s++) {
		struct ft_seq_info in;

		ft_group_seq(&grp, s, &in);
		cr_expect_eq(in.done_by, all, "op %llu done by %s", (unsigned long long)s,
			     ids(in.done_by, 0));
		cr_expect_eq(in.mask, (int64_t)s < back ? live : all,
			     "op %llu: set %s (ready at %lld, back at %lld)", (unsigned long long)s,
			     ids(in.mask, 0), (long long)ready_seq, (long long)back);
	}
	chaos_report("ft: catchup: member 2 admitted at op %llu as a non-contributor, ready before "
		     "op %lld, contributing from op %lld (%.1f ms after asking); %d ops checked",
		     (unsigned long long)first, (long long)ready_seq, (long long)back,
		     chaos_ms(t_ready, ft_group_op(&grp, v, (uint64_t)back)->t_done),
		     expect_agree());
	end_group();
}

/* ---- degraded policies ----------------------------------------------------------------------- */

/* Member 1 of 3 dies at op 6 (the 1 MiB float32 SUM): every later result follows @policy (the check
 * computes what each must be: plain sum, float SUM scaled by 3/2, or FTCC_ERR_DEGRADED). */
static void degraded(const char *name, enum ftcc_degraded policy)
{
	struct ft_group_opts o = { .timeout_ms = TIMEOUT_MS,
				   .degraded = policy,
				   .limit = K,
				   .script = mixed,
				   .nspec = 4 };
	uint32_t live = ids_all(3) & ~bit(1);
	int degraded_rc = 0, scaled = 0, st = -1;

	o.fault[1] = "rs:8:0";
	cr_assert_eq(ft_group_start(&grp, name, 3, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, ids_all(3), FORM_MS), 0, "no group\n%s",
		     describe());
	cr_assert_neq(ft_group_wait_exit(&grp, 1, RUN_MS, &st), 0, "member 1 did not die\n%s",
		      describe());
	cr_assert_eq(ft_group_wait_ended(&grp, live, RUN_MS), 0, "no finish\n%s", describe());
	for (int i = 0; i < 3; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		if (live >> i & 1)
			cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d ended with %s\n%s", i,
				     ftcc_strerror(atomic_load(&r->end_rc)), describe());
	}
	expect_transition(live, bit(1), ids_all(3), 0, K);
	for (uint64_t s = 8; s < K; s++) {
		const struct ft_op *op = ft_group_op(&grp, 0, s);

		cr_assert(op);
		degraded_rc += op->rc == FTCC_ERR_DEGRADED;
		scaled += op->scale != 1.0;
		if (s % 4 == 0)
			cr_expect_eq(op->scale, policy == FTCC_DEGRADED_RESCALE ? 1.5 : 1.0,
				     "op %llu (float32 SUM over 2 of 3): scale %g",
				     (unsigned long long)s, op->scale);
		else
			cr_expect_eq(op->scale, 1.0, "op %llu: scale %g", (unsigned long long)s,
				     op->scale);
	}
	cr_expect_eq(degraded_rc, policy == FTCC_DEGRADED_FAIL ? K - 8 : 0,
		     "%d ops returned FTCC_ERR_DEGRADED", degraded_rc);
	chaos_report("ft: %s: after member 1 died at op 8, %d of %d ops returned "
		     "FTCC_ERR_DEGRADED, %d were scaled; %d ops checked",
		     name, degraded_rc, K - 8, scaled, expect_agree());
	end_group();
}

Test(ft_degraded, policy_sum)
{
	degraded("degsum", FTCC_DEGRADED_SUM);
}

Test(ft_degraded, policy_rescale)
{
	degraded("degrescale", FTCC_DEGRADED_RESCALE);
}

Test(ft_degraded, policy_fail)
{
	degraded("degfail", FTCC_DEGRADED_FAIL);
}

/* ---- abort ----------------------------------------------------------------------------------- */

/* Member 1 of 3 aborts with an op in flight: abort returns within 100 ms, that op ends with
 * FTCC_ERR_ABORTED, and the others go on without it at once. */
Test(ft_abort, abort_member1_of_3)
{
	struct ft_group_opts o = { .timeout_ms = TIMEOUT_MS,
				   .degraded = FTCC_DEGRADED_SUM,
				   .limit = 30,
				   .script = big,
				   .nspec = 1,
				   .algo = "ring" };
	uint32_t all = ids_all(3), live = all & ~bit(1);
	const struct ft_run *r;
	int64_t t, t_ret, first, failed = -1;
	double hi, abort_ms;

	cr_assert_eq(ft_group_start(&grp, "abort", 3, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, all, FORM_MS), 0, "no group\n%s", describe());
	cr_assert_eq(ft_group_wait_op(&grp, bit(1), 5, RUN_MS), 0, "no op 5\n%s", describe());
	t = ft_group_abort(&grp, 1, 5000);
	r = ft_group_cur(&grp, 1);
	cr_assert_neq(t, 0, "ftcc_comm_abort did not return within 5 s\n%s", describe());
	abort_ms = chaos_ms(0, atomic_load(&r->abort_ns));
	t_ret = atomic_load(&r->t_abort);
	cr_expect_eq(atomic_load(&r->abort_rc), 0, "ftcc_comm_abort: %d",
		     atomic_load(&r->abort_rc));
	cr_expect_leq(abort_ms, ABORT_BOUND_MS, "ftcc_comm_abort took %.1f ms", abort_ms);
	cr_assert_eq(ft_group_wait_ended(&grp, bit(1), 2000), 0, "the aborted member goes on\n%s",
		     describe());
	for (int64_t s = 0; s < FT_GROUP_MAX_SEQ && failed < 0; s++) {
		const struct ft_op *op = ft_group_op(&grp, 1, (uint64_t)s);

		if (op && op->rc != 0)
			failed = s;
		else if (!op)
			break;
	}
	if (failed < 0) {
		/* Aborted between two ops: the next one was never started. */
		cr_expect_neq(atomic_load(&r->end_rc), 0, "the aborted member ended cleanly\n%s",
			      describe());
	} else {
		const struct ft_op *op = ft_group_op(&grp, 1, (uint64_t)failed);

		if (op->t_start < t_ret)
			cr_expect_eq(op->rc, FTCC_ERR_ABORTED, "op %lld in flight ended with %s",
				     (long long)failed, ftcc_strerror(op->rc));
		else
			cr_expect(op->rc == FTCC_ERR_ABORTED || op->rc == FTCC_ERR_LOST ||
					  op->rc == FTCC_ERR_INVALID,
				  "op %lld after the abort returned %s", (long long)failed,
				  ftcc_strerror(op->rc));
	}
	cr_assert_eq(ft_group_wait_ended(&grp, live, RUN_MS), 0, "no finish\n%s", describe());
	expect_finished(live, 30);
	first = expect_transition(live, bit(1), all, 0, 30);
	hi = ft_group_stall(&grp, live, t, NULL, NULL);
	chaos_report("ft: abort: ftcc_comm_abort took %.2f ms, op %lld ended with %s; the others' "
		     "next op done %.1f ms after; first op without it %lld; %d ops checked",
		     abort_ms, (long long)failed,
		     ftcc_strerror(failed >= 0 ? ft_group_op(&grp, 1, (uint64_t)failed)->rc :
						 atomic_load(&r->end_rc)),
		     hi, (long long)first, expect_agree());
	cr_expect(hi >= 0 && hi <= KILL_BOUND_MS, "the others stalled %.1f ms\n%s", hi, describe());
	end_group();
}

/* ---- soak ---------------------------------------------------------------------------------- */

/* xorshift64: the soak's choices, from a seed it prints. */
static uint32_t soak_rand(uint64_t *x, uint32_t below)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (uint32_t)(*x >> 32) % below;
}

/* 4 members for FTCC_TEST_SOAK_SECONDS (default 20, at most 150): every 1 to 3 s one member dies,
 * SIGKILLed at a random moment or at a random engine phase (armed at its previous restart), and is
 * started again with join. Every result of every process is checked at the end. FTCC_TEST_SEED
 * repeats a run. */
Test(ft_soak, random_kills_and_rejoins_of_4)
{
	static const char *const points[] = { "rs", "ag", "rd" };
	const int n = 4;
	const char *env = getenv("FTCC_TEST_SOAK_SECONDS");
	int secs = env && atoi(env) > 0 ? atoi(env) : 20;
	int kills = 0, faults = 0, unfired = 0, round = 0, armed = -1;
	double worst_stall = 0, worst_admit = 0;
	uint64_t seed = getenv("FTCC_TEST_SEED") ? strtoull(getenv("FTCC_TEST_SEED"), NULL, 0) :
						   (uint64_t)chaos_now_ns();
	uint64_t x = seed | 1;
	int64_t end, last;

	secs = secs > 150 ? 150 : secs;
	chaos_report("ft: soak: %d s, FTCC_TEST_SEED=%llu", secs, (unsigned long long)seed);
	/* Slower ops for a long soak: the records hold FT_GROUP_MAX_SEQ ops. */
	start_paced("soak", n, FTCC_DEGRADED_RESCALE,
		    secs * 1000000 / 7000 > PACE_US ? secs * 1000000 / 7000 : PACE_US);
	end = chaos_now_ns() + (int64_t)secs * 1000000000;
	while (chaos_now_ns() < end && grp.nruns < FT_GROUP_MAX_RUNS - 1 &&
	       ft_group_max_seq(&grp) < FT_GROUP_MAX_SEQ - 600) {
		int v = armed >= 0 ? armed : (int)soak_rand(&x, n), st = -1;
		uint32_t live = ids_all(n) & ~bit(v);
		const char *how = "SIGKILLed";
		char fault[64] = "";
		int64_t t;
		double stall, admit;

		round++;
		chaos_sleep_ms(1000 + (int)soak_rand(&x, 2000)); /* when the next fault comes */
		if (armed >= 0) {
			t = ft_group_wait_exit(&grp, v, 5000, &st);
			how = t ? "died at its point" : "did not reach its point: SIGKILLed";
			faults += t != 0;
			unfired += t == 0;
			t = t ? t : ft_group_kill(&grp, v);
			armed = -1;
		} else {
			t = ft_group_kill(&grp, v);
			kills++;
		}
		cr_assert_eq(
			ft_group_wait_op(&grp, live, (uint64_t)ft_group_max_seq(&grp) + 3, RUN_MS),
			0, "round %d: the others stopped after member %d died\n%s", round, v,
			describe());
		stall = ft_group_stall(&grp, live, t, NULL, NULL);
		worst_stall = stall > worst_stall ? stall : worst_stall;
		cr_expect(stall >= 0 && stall <= KILL_BOUND_MS,
			  "round %d: op done %.1f ms after member %d died\n%s", round, stall, v,
			  describe());
		/* Every other restart is armed to die at a random phase of a later op: ops
		 * s % 4 == 0 use the ring, s % 4 == 1 recursive doubling. */
		if (soak_rand(&x, 2)) {
			int p = (int)soak_rand(&x, 3);
			uint64_t s = (uint64_t)ft_group_max_seq(&grp) + 200 + soak_rand(&x, 200);

			s = s - s % 4 + (p == 2);
			snprintf(fault, sizeof(fault), "%s:%llu", points[p], (unsigned long long)s);
			armed = v;
		}
		t = chaos_now_ns();
		cr_assert_eq(ft_group_spawn(&grp, v, 1, 0, fault[0] ? fault : NULL), 0);
		cr_assert_eq(ft_group_wait_created(&grp, bit(v), FORM_MS), 0,
			     "member %d not admitted again\n%s", v, describe());
		admit = chaos_ms(t, atomic_load(&ft_group_cur(&grp, v)->t_created));
		worst_admit = admit > worst_admit ? admit : worst_admit;
		cr_assert_eq(ft_group_wait_op(&grp, ids_all(n),
					      ft_group_cur(&grp, v)->view0.next_seq + 2, RUN_MS),
			     0, "member %d's first ops after joining did not complete\n%s", v,
			     describe());
		chaos_report("ft: soak: round %d: member %d %s; the others' next op %.1f ms after; "
			     "back at op %llu after %.1f ms%s%s",
			     round, v, how, stall,
			     (unsigned long long)ft_group_cur(&grp, v)->view0.next_seq, admit,
			     fault[0] ? ", armed with " : "", fault);
	}
	/* An armed member left running has its point beyond the last op: it just finishes. */
	last = ft_group_settle(&grp, ids_all(n), RUN_MS);
	chaos_report("ft: soak: %d s, %d rounds: %d SIGKILLs, %d deaths at an armed phase, %d "
		     "armed not reached; %lld ops, %d processes; worst stall %.1f ms, worst "
		     "admission %.1f ms; %d ops checked",
		     secs, round, kills, faults, unfired, (long long)last + 1, grp.nruns,
		     worst_stall, worst_admit, expect_agree());
	cr_expect_geq(last, 0, "the members did not settle\n%s", describe());
	end_group();
}
