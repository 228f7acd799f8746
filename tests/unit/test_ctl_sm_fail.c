/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership state machines on a fake network, part two: members and coordinator hosts that die
 * (death evidence: removed within a heartbeat or so) or stop (silence: removed after the failure
 * timeout), alone or several at once, and what a stopped process does when it runs again.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ctl_fakenet.h"
#include "ftcc/log.h"

#define HB 100
#define TIMEOUT 1000

/* A formed group of @n with distinct progress: member k issued up to 100 + k, completed 90 + k. */
static struct fn *formed(uint32_t n)
{
	struct fn_cfg cfg = { .sizes = { n } };
	struct fn *fn = fn_new(&cfg);

	fn_form(fn, 2000);
	for (uint32_t k = 0; k < n; k++) {
		fn_progress(fn, (int)k, 100 + k, 90 + k);
	}
	fn_run(fn, 500);
	return fn;
}

static int epoch_at_least(struct fn *fn, void *arg)
{
	return fn_max_epoch(fn, 0) >= (uint64_t)(uintptr_t)arg;
}

static uint64_t since(struct fn *fn, uint64_t who, uint64_t epoch, uint64_t t0)
{
	uint64_t t = fn_seen_all(fn, who, epoch);

	cr_assert_neq(t, UINT64_MAX, "epoch %llu not seen by all", (unsigned long long)epoch);
	return t - t0;
}

Test(ctl_sm, kill_member_removed_within_a_heartbeat)
{
	struct fn *fn = formed(5);
	const struct ctl_epoch_rec *v;
	uint64_t t = fn_now(fn), dt;
	uint32_t ids[8];
	int fenced = -1;

	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	v = fn_view(fn, 1);
	cr_expect_eq(v->epoch, 2);
	cr_expect_eq(v->coord, 0);
	dt = since(fn, 0x17, 2, t);
	cr_expect_leq(dt, HB + 50, "removed %llu ms after the kill", (unsigned long long)dt);
	/* Removing: the first op of the new epoch is the lowest op some survivor has not done. */
	cr_expect_leq(v->boundary, 90, "boundary %llu past survivor 0's done op 90",
		      (unsigned long long)v->boundary);
	cr_expect_eq(v->boundary, 90);
	cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, 1), 89, &fenced)->epoch, 1);
	cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, 1), v->boundary, &fenced)->epoch, 2);
	cr_expect_eq(fenced, 0);
	cr_assert_eq(ctl_coord_members(fn_coord(fn, 0), ids, 8), 4);
	cr_expect_eq(ids[3], 4);
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), 2);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, freeze_member_removed_after_timeout)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn), dt;

	fn_freeze(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, TIMEOUT + 3000, 0, 1, 2, 4), 0);
	dt = since(fn, 0x17, 2, t);
	cr_expect_geq(dt, TIMEOUT - HB, "removed %llu ms after the freeze", (unsigned long long)dt);
	cr_expect_leq(dt, TIMEOUT + 1000, "removed %llu ms after the freeze",
		      (unsigned long long)dt);
	cr_expect_eq(fn_view(fn, 0)->epoch, 2);
	cr_expect_leq(fn_view(fn, 0)->boundary, 90);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, freeze_and_thaw_after_removal)
{
	struct fn *fn = formed(5);
	uint32_t n;
	const struct fn_rec *r;

	fn_freeze(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, TIMEOUT + 3000, 0, 1, 2, 4), 0);
	fn_run(fn, 500);
	fn_thaw(fn, 3);
	cr_assert_eq(fn_wait_final(fn, FN_BIT(3), 10000), 0);
	cr_expect_eq(fn_state(fn, 3), CTL_M_REMOVED, "thawed member ended %s: %s",
		     ctl_member_state_name(fn_state(fn, 3)), fn_reason(fn, 3));
	cr_expect_gt(strlen(fn_reason(fn, 3)), 0);
	r = fn_recs(fn, 3, &n);
	cr_expect_eq(n, 1);
	cr_expect_eq(r[n - 1].epoch, 1, "the removed member saw epoch %llu",
		     (unsigned long long)r[n - 1].epoch);
	cr_expect_null(fn_coord(fn, 3), "the thawed member hosts a coordinator");
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), 2, "the group changed when the removed member woke");
	cr_expect_eq(fn_max_proposed(fn, 0), 2);
	cr_expect_eq(fn_state(fn, 3), CTL_M_REMOVED);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, kill_coordinator_host_takeover)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn), before = fn_max_epoch(fn, 0), dt;
	const struct ctl_epoch_rec *v;

	if (fn_max_proposed(fn, 0) > before) {
		before = fn_max_proposed(fn, 0);
	}
	fn_kill(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x1e, 3000, 1, 2, 3, 4), 0);
	v = fn_view(fn, 2);
	cr_expect_gt(v->epoch, before);
	cr_expect_eq(v->coord, 1);
	dt = since(fn, 0x1e, v->epoch, t);
	cr_expect_leq(dt, 5 * HB, "took over %llu ms after the kill", (unsigned long long)dt);
	cr_expect_leq(v->boundary, 91, "boundary %llu past survivor 1's done op",
		      (unsigned long long)v->boundary);
	cr_assert_not_null(fn_coord(fn, 1));
	cr_expect_eq(ctl_coord_state(fn_coord(fn, 1)), CTL_C_RUNNING);
	cr_expect_eq(ctl_coord_epoch(fn_coord(fn, 1)), v->epoch);
	for (int k = 2; k < 5; k++) {
		cr_expect_null(fn_coord(fn, k), "member %d hosts a coordinator too", k);
		cr_expect_eq(ctl_msm_coord(fn_msm(fn, k)), 1);
	}
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), v->epoch);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, freeze_coordinator_host_takeover_and_thaw)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn), dt, e;
	const struct fn_rec *r;
	uint32_t n;

	fn_freeze(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x1e, TIMEOUT + 4000, 1, 2, 3, 4), 0);
	e = fn_view(fn, 1)->epoch;
	cr_expect_gt(e, 1);
	cr_expect_eq(fn_view(fn, 1)->coord, 1);
	dt = since(fn, 0x1e, e, t);
	cr_expect_geq(dt, TIMEOUT - HB, "took over %llu ms after the freeze",
		      (unsigned long long)dt);
	cr_expect_leq(dt, TIMEOUT + 1000, "took over %llu ms after the freeze",
		      (unsigned long long)dt);

	fn_run(fn, 1000);
	fn_thaw(fn, 0);
	cr_assert_eq(fn_wait_final(fn, FN_BIT(0), 10000), 0);
	cr_expect(fn_state(fn, 0) == CTL_M_LOST || fn_state(fn, 0) == CTL_M_REMOVED,
		  "old host ended %s: %s", ctl_member_state_name(fn_state(fn, 0)),
		  fn_reason(fn, 0));
	r = fn_recs(fn, 0, &n);
	cr_expect_eq(n, 1);
	cr_expect_eq(r[n - 1].epoch, 1, "the old host saw epoch %llu",
		     (unsigned long long)r[n - 1].epoch);
	if (fn_coord(fn, 0)) {
		cr_expect_eq(ctl_coord_state(fn_coord(fn, 0)), CTL_C_STOPPED);
		cr_expect_eq(ctl_coord_epoch(fn_coord(fn, 0)), 1);
	}
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), e, "epoch %llu committed after the thaw",
		     (unsigned long long)fn_max_epoch(fn, 0));
	for (int k = 1; k < 5; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE);
		cr_expect_eq(fn_view(fn, k)->epoch, e);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

/* The coordinator's host stops, and so does member 2 for 1.2 s (a loaded host starves its
 * thread): 2 restarts its silence timer when it runs again and notices the loss a failure timeout
 * after the others. Members 1 and 3 alone are half of the group, no quorum: the takeover waits for
 * 2 rather than ending the group for a slow member, and goes on with {1, 2, 3}. */
Test(ctl_sm, takeover_waits_for_a_stalled_member_to_make_the_quorum)
{
	struct fn *fn = formed(4);
	uint64_t t = fn_now(fn), e;

	fn_freeze(fn, 0);
	fn_freeze(fn, 2);
	fn_run(fn, TIMEOUT + 200);
	fn_thaw(fn, 2);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xe, 3 * TIMEOUT, 1, 2, 3), 0, "%s / %s", fn_reason(fn, 1),
		     fn_reason(fn, 3));
	e = fn_view(fn, 1)->epoch;
	cr_expect_eq(fn_view(fn, 1)->coord, 1);
	cr_expect_geq(fn_seen_at(fn, 2, e) - t, 2 * TIMEOUT + 200 - HB,
		      "member 2 cannot have noticed the loss before %d ms", 2 * TIMEOUT + 200);
	fn_run(fn, 3000);
	for (int k = 1; k < 4; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d: %s", k, fn_reason(fn, k));
		cr_expect_eq(fn_view(fn, k)->epoch, e);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

/* The same with member 2 stopped for good: 1 and 3 wait for it, then stop, saying why. */
Test(ctl_sm, takeover_without_quorum_stops_after_waiting)
{
	struct fn *fn = formed(4);
	uint64_t t = fn_now(fn);

	fn_freeze(fn, 0);
	fn_freeze(fn, 2);
	cr_assert_eq(fn_wait_final(fn, 0xa, 6 * TIMEOUT), 0);
	cr_expect_geq(fn_now(fn) - t, 2 * TIMEOUT + TIMEOUT / 2 - HB,
		      "stopped %llu ms after the freeze", (unsigned long long)(fn_now(fn) - t));
	cr_expect_leq(fn_now(fn) - t, 3 * TIMEOUT, "stopped %llu ms after the freeze",
		      (unsigned long long)(fn_now(fn) - t));
	for (int k = 1; k < 4; k += 2) {
		cr_expect_eq(fn_state(fn, k), CTL_M_LOST);
		cr_expect(fn_reason_has(fn, k, "quorum"), "member %d's reason: %s", k,
			  fn_reason(fn, k));
	}
	cr_expect_eq(fn_max_epoch(fn, 0), 1);
	FN_CHECK(fn);
	fn_free(fn);
}

/* Isolates member 0 as its VIEW of epoch 2 leaves for member 3 (fn_partition only sets flags). */
struct isolate_at {
	struct fn *fn;
	int done;
};

static void isolate_host_on_view_to_3(void *arg, int from, int to, const struct ctl_msg *m)
{
	struct isolate_at *c = arg;

	if (!c->done && from == 0 && to == 3 && m->type == CTL_VIEW && m->epoch == 2) {
		c->done = 1;
		fn_partition(c->fn, FN_BIT(0), 0);
	}
}

/* {0, 3} | {1, 2}: the host goes on with 3 (half of four with the lowest id) and commits epoch 2,
 * whose VIEW is lost as the host is cut from 3 too. 1 and 2 take over and wait for 3; 3 loses
 * the host a timeout later and reports with epoch 1 but having ACKed epoch 2. Counting it would
 * let 1 commit {1, 2, 3} while 0 goes on as {0} (half of epoch 2 with the lowest id): two groups,
 * one epoch number. A report that late from a member that saw a newer epoch must not count. */
Test(ctl_sm, late_reporter_that_acked_a_newer_epoch_does_not_make_the_quorum)
{
	struct fn *fn = formed(4);
	struct isolate_at c = { .fn = fn };

	fn_set_watch(fn, isolate_host_on_view_to_3, &c);
	fn_partition(fn, FN_BIT(1) | FN_BIT(2), 0);
	fn_run(fn, 8 * TIMEOUT);
	cr_assert(c.done, "the host never committed epoch 2 with member 3");
	FN_CHECK(fn);
	for (int k = 1; k < 4; k++)
		cr_expect_neq(fn_state(fn, k), CTL_M_ACTIVE, "member %d is ACTIVE in epoch %llu", k,
			      (unsigned long long)fn_view(fn, k)->epoch);
	fn_free(fn);
}

Test(ctl_sm, kill_coordinator_and_member_at_once)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn), dt, e;

	fn_kill(fn, 0);
	fn_kill(fn, 2);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x1a, TIMEOUT + 4000, 1, 3, 4), 0);
	e = fn_view(fn, 1)->epoch;
	cr_expect_gt(e, 1);
	cr_expect_eq(fn_view(fn, 1)->coord, 1);
	dt = since(fn, 0x1a, e, t);
	cr_expect_leq(dt, TIMEOUT + 1000, "settled %llu ms after the kills",
		      (unsigned long long)dt);
	cr_expect_leq(fn_view(fn, 1)->boundary, 91);
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), e);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, kill_two_of_five)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn), e, dt;

	fn_kill(fn, 1);
	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x15, 2000, 0, 2, 4), 0);
	e = fn_view(fn, 0)->epoch;
	cr_expect(e == 2 || e == 3, "epoch %llu", (unsigned long long)e);
	dt = since(fn, 0x15, e, t);
	cr_expect_leq(dt, HB + 100, "settled %llu ms after the kills", (unsigned long long)dt);
	cr_expect_eq(fn_view(fn, 0)->boundary, 90);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, freeze_two_of_five)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn), e, dt;

	fn_freeze(fn, 1);
	fn_freeze(fn, 4);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xd, TIMEOUT + 3000, 0, 2, 3), 0);
	e = fn_view(fn, 0)->epoch;
	dt = since(fn, 0xd, e, t);
	cr_expect_geq(dt, TIMEOUT - HB, "settled %llu ms after the freeze", (unsigned long long)dt);
	cr_expect_leq(dt, TIMEOUT + 1000, "settled %llu ms after the freeze",
		      (unsigned long long)dt);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, freeze_three_of_five_stops_without_quorum)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn);

	fn_freeze(fn, 2);
	fn_freeze(fn, 3);
	fn_freeze(fn, 4);
	cr_assert_eq(fn_wait_final(fn, 0x3, 20000), 0);
	cr_expect_leq(fn_now(fn) - t, TIMEOUT + 2000, "stopped %llu ms after the freeze",
		      (unsigned long long)(fn_now(fn) - t));
	for (int k = 0; k < 2; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_LOST, "member %d: %s", k,
			     ctl_member_state_name(fn_state(fn, k)));
		cr_expect(fn_reason_has(fn, k, "quorum"), "member %d's reason: %s", k,
			  fn_reason(fn, k));
	}
	cr_expect_eq(ctl_coord_state(fn_coord(fn, 0)), CTL_C_STOPPED);
	cr_expect_eq(fn_max_epoch(fn, 0), 1, "epoch %llu committed without a quorum",
		     (unsigned long long)fn_max_epoch(fn, 0));
	FN_CHECK(fn);
	fn_free(fn);
}

/* A 2-member group never goes on on both sides. Member 1 dies: member 0 is half the group with
 * its lowest id, and goes on at once (its probe proves the process gone). Member 0 dies: member
 * 1 cannot tell its death from a partition (resets and refusals can be forged by a firewall
 * between them), so it stops, saying why. */
Test(ctl_sm, two_members_kill_either)
{
	for (int victim = 0; victim < 2; victim++) {
		struct fn *fn = formed(2);
		uint64_t t = fn_now(fn), dt;
		const struct ctl_epoch_rec *v;

		fn_kill(fn, victim);
		if (victim == 0) {
			cr_assert_eq(fn_wait_final(fn, FN_BIT(1), 3 * TIMEOUT + 3000), 0,
				     "member 1 did not stop");
			cr_expect_eq(fn_state(fn, 1), CTL_M_LOST);
			cr_expect(fn_reason_has(fn, 1, "quorum"), "member 1's reason: %s",
				  fn_reason(fn, 1));
			cr_expect_eq(fn_view(fn, 1)->epoch, 1, "member 1 moved on");
			FN_CHECK(fn);
			fn_free(fn);
			continue;
		}
		cr_assert_eq(FN_WAIT_VIEW(fn, FN_BIT(0), 3000, 0), 0,
			     "member 0 alone after 1 died");
		v = fn_view(fn, 0);
		cr_expect_gt(v->epoch, 1);
		cr_expect_eq(v->coord, 0);
		dt = since(fn, FN_BIT(0), v->epoch, t);
		cr_expect_leq(dt, 5 * HB, "member 0 alone %llu ms after 1 died",
			      (unsigned long long)dt);
		fn_run(fn, 3000);
		cr_expect_eq(fn_state(fn, 0), CTL_M_ACTIVE);
		FN_CHECK(fn);
		fn_free(fn);
	}
}

/* A LEAVE is proof: whichever member of two leaves, the other goes on alone at once. */
Test(ctl_sm, two_members_leave_either)
{
	for (int who = 0; who < 2; who++) {
		struct fn *fn = formed(2);
		int other = 1 - who;
		uint64_t t = fn_now(fn);

		fn_leave(fn, who);
		cr_assert_eq(
			fn_wait_view(fn, FN_BIT(other), (uint32_t[]){ (uint32_t)other }, 1, 3000),
			0, "member %d alone after %d left", other, who);
		cr_expect_leq(since(fn, FN_BIT(other), fn_view(fn, other)->epoch, t), 5 * HB);
		cr_expect_eq(fn_state(fn, who), CTL_M_LEFT);
		fn_run(fn, 3000);
		cr_expect_eq(fn_state(fn, other), CTL_M_ACTIVE);
		FN_CHECK(fn);
		fn_free(fn);
	}
}

/* What one member says of another is never a verdict. Member 2 is frozen and member 1 reports
 * its link to 2 closed: the coordinator probes 2 (its kernel accepts: alive) and waits for
 * silence. */
Test(ctl_sm, suspect_death_is_no_verdict)
{
	struct fn *fn = formed(4);
	uint64_t t = fn_now(fn);

	fn_freeze(fn, 2);
	fn_suspect(fn, 1, 2, CTL_EV_DEATH);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xb, TIMEOUT + 2000, 0, 1, 3), 0);
	cr_expect_geq(since(fn, 0xb, 2, t), TIMEOUT - HB, "removed before the silence rule");
	FN_CHECK(fn);
	fn_free(fn);
}

/* A data link between two live members broke: the coordinator commits another epoch with the
 * same members (the ops in flight get another attempt) at once; nobody is removed. */
Test(ctl_sm, link_report_gives_a_retry_epoch)
{
	struct fn *fn = formed(3);
	uint64_t t = fn_now(fn);

	fn_suspect(fn, 1, 2, CTL_EV_LINK);
	cr_assert_eq(fn_run_until(fn, epoch_at_least, (void *)2, 1000), 0);
	cr_expect_leq(fn_now(fn) - t, 3 * HB, "retry epoch after %llu ms",
		      (unsigned long long)(fn_now(fn) - t));
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x7, 1000, 0, 1, 2), 0);
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), 2, "epoch %llu: the retry was repeated",
		     (unsigned long long)fn_max_epoch(fn, 0));
	FN_CHECK(fn);
	fn_free(fn);
}

/* The coordinator's WARN lines naming the two ends of the cut link and the removal (kept from
 * the test's thread). */
static char cut_warn[512], removal_warn[512];

static void cut_warn_sink(enum ftcc_log_level level, const char *file, int line, const char *msg)
{
	(void)file;
	(void)line;
	if (level == FTCC_LOG_WARN && strstr(msg, "cannot exchange data")) {
		snprintf(cut_warn, sizeof(cut_warn), "%s", msg);
	}
	if (level == FTCC_LOG_WARN && strstr(msg, "to be removed")) {
		snprintf(removal_warn, sizeof(removal_warn), "%s", msg);
	}
}

/* Members 1 and 2 cannot reach each other's data plane, both reach the coordinator: exactly one
 * goes (the higher id, both having one broken link), within about a quarter of the timeout, and
 * the WARN line names the link's two ends. */
Test(ctl_sm, cut_between_live_members_removes_exactly_one)
{
	struct fn *fn = formed(4);
	uint64_t t = fn_now(fn);

	cut_warn[0] = removal_warn[0] = '\0';
	ftcc_log_set_sink(cut_warn_sink);

	fn_suspect(fn, 1, 2, CTL_EV_CUT);
	fn_suspect(fn, 2, 1, CTL_EV_CUT);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xb, TIMEOUT + 2000, 0, 1, 3), 0);
	cr_expect_leq(since(fn, 0xb, 2, t), TIMEOUT / 4 + 4 * HB);
	fn_run(fn, 3000);
	ftcc_log_set_sink(NULL);
	cr_expect(strstr(cut_warn, "members 1 and 2 are both alive") != NULL, "WARN: \"%s\"",
		  cut_warn);
	cr_expect(strstr(cut_warn, "removing member 2") != NULL, "WARN: \"%s\"", cut_warn);
	cr_expect(strstr(removal_warn, "member 2 to be removed") != NULL, "WARN: \"%s\"",
		  removal_warn);
	/* The coordinator's status names the removed member, when and why. */
	{
		char status[4096];

		ctl_coord_status(fn_coord(fn, 0), status, sizeof(status), fn_now(fn));
		cr_expect(strstr(status, "removed 2 incarnation") && strstr(status, "at epoch 2") &&
				  strstr(status, "ms ago: its data links"),
			  "status:\n%s", status);
	}
	cr_expect_eq(fn_state(fn, 2), CTL_M_REMOVED);
	for (int k = 0; k < 4; k++) {
		if (k != 2) {
			cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
		}
	}
	FN_CHECK(fn);
	fn_free(fn);
}

/* A faulty member (its data plane fails every send; here the coordinator's own host) is the one
 * with broken links to everyone: it goes, the healthy ones stay. */
Test(ctl_sm, faulty_member_with_links_broken_to_all_goes_alone)
{
	struct fn *fn = formed(4);

	for (int round = 0; round < 3; round++) {
		for (uint32_t p = 1; p < 4; p++) {
			fn_suspect(fn, 0, p, CTL_EV_CUT);
			fn_suspect(fn, (int)p, 0, CTL_EV_CUT);
		}
		fn_run(fn, 50);
	}
	cr_assert_eq(fn_wait_state(fn, FN_BIT(0), CTL_M_REMOVED, TIMEOUT + 2000), 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xe, 3000, 1, 2, 3), 0);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, stopped_successor_does_not_reuse_an_epoch_number)
{
	struct fn *fn = formed(5);
	uint64_t e;
	const struct fn_rec *r;
	uint32_t n;

	/* Member 1 stops; the host dies before anyone noticed. The others go to 1 (its port still
	 * accepts), give up on it after the timeout, and 2 takes over. */
	fn_freeze(fn, 1);
	fn_kill(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x1c, 3 * TIMEOUT + 2000, 2, 3, 4), 0);
	e = fn_view(fn, 2)->epoch;
	cr_expect_eq(fn_view(fn, 2)->coord, 2);
	fn_run(fn, 1000);
	/* Member 1 runs again: its link to 0 ends and the HELLOs 2, 3, 4 sent it long ago (then
	 * abandoned with a SUSPECT) are waiting. They are no quorum for a takeover by 1. */
	fn_thaw(fn, 1);
	cr_assert_eq(fn_wait_final(fn, FN_BIT(1), 10000), 0);
	r = fn_recs(fn, 1, &n);
	cr_expect_eq(r[n - 1].epoch, 1, "the stopped member committed epoch %llu",
		     (unsigned long long)r[n - 1].epoch);
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), e);
	for (int k = 2; k < 5; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE);
		cr_expect_eq(fn_view(fn, k)->epoch, e);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

/* Member 0 (the host) stops; 1 and 2 form epoch 2 without it; member 2 restarts and its new
 * process asks 0 to join. When 0 runs again, it holds death evidence against the old 2 (a new
 * incarnation) and hears nobody else: base {0, 1} without the dead, half of it with the lowest
 * id. Yet 1 and the old 2 were a majority of epoch 1 and moved on: 0 must not form a group. */
static void deposed_host_case(int partition)
{
	struct fn *fn = formed(3);
	const struct fn_rec *r;
	uint32_t n;

	if (partition) {
		/* The SUSPECTs 1 and 2 send to 0 are lost too. */
		fn_partition(fn, FN_BIT(0), 0);
	}
	fn_freeze(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x6, TIMEOUT + 3000, 1, 2), 0);
	fn_run(fn, 300);
	fn_heal(fn);
	fn_restart(fn, 2, 0);
	fn_run(fn, 2000);
	fn_thaw(fn, 0);
	fn_run(fn, 10000);
	r = fn_recs(fn, 0, &n);
	cr_expect_eq(r[n - 1].epoch, 1, "the deposed host committed epoch %llu",
		     (unsigned long long)r[n - 1].epoch);
	cr_expect_neq(fn_state(fn, 0), CTL_M_ACTIVE, "the deposed host is ACTIVE in epoch %llu",
		      (unsigned long long)fn_view(fn, 0)->epoch);
	cr_expect_eq(fn_state(fn, 1), CTL_M_ACTIVE);
	if (fn_state(fn, 2) == CTL_M_ACTIVE) {
		cr_expect_eq(fn_view(fn, 2)->epoch, fn_view(fn, 1)->epoch,
			     "two live groups: member 1 in epoch %llu, member 2 in %llu",
			     (unsigned long long)fn_view(fn, 1)->epoch,
			     (unsigned long long)fn_view(fn, 2)->epoch);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, deposed_host_does_not_split_the_group)
{
	deposed_host_case(0);
}

Test(ctl_sm, deposed_host_does_not_split_the_group_after_partition)
{
	deposed_host_case(1);
}

/* Freezes member 0 when it sends its first PROPOSE (fn_freeze only sets a flag: safe here). */
struct freeze_at {
	struct fn *fn;
	int done;
};

static void freeze_on_propose(void *arg, int from, int to, const struct ctl_msg *m)
{
	struct freeze_at *f = arg;

	if (!f->done && from == 0 && m->type == CTL_PROPOSE) {
		f->done = 1;
		fn_freeze(f->fn, 0);
	}
}

Test(ctl_sm, deposed_host_with_an_open_proposal_does_not_split_the_group)
{
	struct fn *fn = formed(4);
	struct freeze_at f = { .fn = fn };
	const struct fn_rec *r;
	uint32_t n;

	fn_kill(fn, 2);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xb, 3000, 0, 1, 3), 0);
	fn_run(fn, 300);
	/* The host stops as it proposes to admit the restarted 2; 1 and 3 ACK into its queue,
	 * give up on it and go on as {1, 3}. */
	fn_set_watch(fn, freeze_on_propose, &f);
	fn_restart(fn, 2, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xa, TIMEOUT + 4000, 1, 3), 0);
	cr_assert(f.done);
	fn_run(fn, 500);
	/* 1 leaves as 0 runs again: 3 goes on alone (1 left on purpose), and 0 hears nobody. */
	fn_leave(fn, 1);
	fn_thaw(fn, 0);
	fn_run(fn, 10000);
	r = fn_recs(fn, 0, &n);
	cr_expect_eq(r[n - 1].epoch, 2, "the deposed host committed epoch %llu",
		     (unsigned long long)r[n - 1].epoch);
	cr_expect_neq(fn_state(fn, 0), CTL_M_ACTIVE);
	cr_expect_eq(fn_state(fn, 3), CTL_M_ACTIVE);
	if (fn_state(fn, 2) == CTL_M_ACTIVE && fn_state(fn, 3) == CTL_M_ACTIVE) {
		cr_expect_eq(fn_view(fn, 2)->epoch, fn_view(fn, 3)->epoch,
			     "two live groups: member 2 in epoch %llu, member 3 in %llu",
			     (unsigned long long)fn_view(fn, 2)->epoch,
			     (unsigned long long)fn_view(fn, 3)->epoch);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, two_members_epoch_number_never_reused)
{
	struct fn *fn = formed(2);
	uint64_t e;

	/* Move the coordinator to member 1 (0 leaves and comes back). */
	fn_leave(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_BIT(1), 3000, 1), 0);
	fn_run(fn, 300);
	fn_restart(fn, 0, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x3, 3000, 0, 1), 0);
	fn_run(fn, 300);
	/* 1 stops: 0 (the lowest id) goes on alone in a new epoch, as the 2-member rule says. */
	fn_freeze(fn, 1);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_BIT(0), TIMEOUT + 3000, 0), 0);
	e = fn_view(fn, 0)->epoch;
	fn_run(fn, 300);
	/* 0 dies and its next process asks the stopped 1 to join. When 1 runs again it holds death
	 * evidence against the 0 that went on without it: whatever it does, it must not commit
	 * epoch e (or any number 0 may have used) again. */
	fn_restart(fn, 0, 0);
	fn_run(fn, 1500);
	fn_thaw(fn, 1);
	fn_run(fn, 10000);
	cr_expect_eq(fn_seen_at(fn, 1, e), UINT64_MAX, "member 1 has an epoch %llu of its own",
		     (unsigned long long)e);
	FN_CHECK(fn);
	fn_free(fn);
}
