/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership state machines, the evidence rules on their own: frames crafted by hand into a bare
 * member (ids out of the group's range, a coordinator that says it left) and reports staggered
 * in time into a cluster on the fake network (the cut rule's choice when a faulty member's
 * links are judged broken one after another).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "ctl_fakenet.h"

#define HB 100
#define TIMEOUT 1000

/* ---- a bare member, driven by hand ---------------------------------------------------------- */

struct bare {
	int connects, sends, hosts;
	uint32_t target;
	struct ctl_msg last;
};

static void b_connect(void *arg, uint32_t target)
{
	struct bare *b = arg;

	b->connects++;
	b->target = target;
}

static void b_send(void *arg, const struct ctl_msg *m)
{
	struct bare *b = arg;

	b->sends++;
	b->last = *m;
	b->last.members = NULL;
	b->last.nmembers = 0;
}

static void b_disconnect(void *arg)
{
	(void)arg;
}

static void b_host(void *arg, const struct ctl_coord_cfg *cfg)
{
	struct bare *b = arg;

	(void)cfg;
	b->hosts++;
}

static struct ctl_msm *bare_member(struct bare *b, uint32_t id, uint32_t expected)
{
	struct ctl_msm_cfg cfg = { .id = id,
				   .expected = expected,
				   .incarnation = 77,
				   .timeout_ms = TIMEOUT,
				   .hb_ms = HB,
				   .connect_timeout_ms = 5000 };
	struct ctl_msm_ops ops = { .arg = b,
				   .connect = b_connect,
				   .send = b_send,
				   .disconnect = b_disconnect,
				   .host = b_host };
	struct ctl_msm *s;

	snprintf(cfg.group, sizeof(cfg.group), "bare");
	memset(b, 0, sizeof(*b));
	s = ctl_msm_create(&cfg, &ops, 1000);
	cr_assert_not_null(s);
	ctl_msm_on_connected(s, 1000);
	return s;
}

/* A VIEW of @n members with ids @ids (incarnation 77 for this member's id @self). */
static struct ctl_msg view_of(struct ctl_member_rec *recs, const uint32_t *ids, uint32_t n,
			      uint32_t self, uint64_t epoch)
{
	struct ctl_msg m = { .type = CTL_VIEW, .epoch = epoch, .coord = 0, .members = recs };

	m.group_id = ctl_group_id("bare");
	for (uint32_t i = 0; i < n; i++) {
		memset(&recs[i], 0, sizeof(recs[i]));
		recs[i].id = ids[i];
		recs[i].flags = CTL_MF_CONTRIB;
		recs[i].incarnation = ids[i] == self ? 77 : 1000 + ids[i];
	}
	m.nmembers = m.members_cap = n;
	return m;
}

/* Member ids come off the wire as 32-bit numbers; the engine indexes bitmaps by them. A view
 * naming an id outside the group's size is ignored whole, and so is a proposal. */
Test(ctl_sm, view_naming_an_id_outside_the_group_is_ignored)
{
	struct ctl_member_rec recs[4];
	struct bare b;
	struct ctl_msm *s = bare_member(&b, 1, 3);
	struct ctl_msg m;
	int sends;

	m = view_of(recs, (uint32_t[]){ 0, 1, 7 }, 3, 1, 1);
	ctl_msm_on_msg(s, &m, 1010);
	cr_expect_null(ctl_msm_view(s), "a view with member 7 of a group of 3 was taken");
	cr_expect_neq(ctl_msm_state(s), CTL_M_ACTIVE);
	m = view_of(recs, (uint32_t[]){ 0, 1, 4096 }, 3, 1, 1);
	ctl_msm_on_msg(s, &m, 1020);
	cr_expect_null(ctl_msm_view(s));
	/* a proposal with such an id is not ACKed */
	m = view_of(recs, (uint32_t[]){ 1, 3 }, 2, 1, 2);
	m.type = CTL_PROPOSE;
	sends = b.sends;
	ctl_msm_on_msg(s, &m, 1030);
	cr_expect_eq(b.sends, sends, "a proposal naming member 3 of 3 was answered");
	/* the same view with ids in range is taken */
	m = view_of(recs, (uint32_t[]){ 0, 1, 2 }, 3, 1, 1);
	ctl_msm_on_msg(s, &m, 1040);
	cr_assert_not_null(ctl_msm_view(s));
	cr_expect_eq(ctl_msm_view(s)->nmembers, 3);
	cr_expect_eq(ctl_msm_state(s), CTL_M_ACTIVE);
	ctl_msm_destroy(s);
}

/* A member whose coordinator's link ends (a reset, a firewall) connects to it again: no
 * search, no takeover. Only a refused connect makes it a loss. */
Test(ctl_sm, coordinator_link_reset_reconnects)
{
	struct ctl_member_rec recs[4];
	struct bare b;
	struct ctl_msm *s = bare_member(&b, 1, 3);
	struct ctl_msg m = view_of(recs, (uint32_t[]){ 0, 1, 2 }, 3, 1, 1);
	int connects;

	ctl_msm_on_msg(s, &m, 1010);
	cr_assert_eq(ctl_msm_state(s), CTL_M_ACTIVE);
	connects = b.connects;
	ctl_msm_on_close(s, 0, 1, 1100); /* closed by the other end */
	ctl_msm_tick(s, 1100);
	cr_expect_eq(ctl_msm_state(s), CTL_M_ACTIVE, "a reset link lost the coordinator");
	cr_expect_eq(b.connects, connects + 1);
	cr_expect_eq(b.target, 0, "reconnects to its coordinator");
	cr_expect_eq(b.hosts, 0);
	/* the reconnect is refused: the coordinator's process is gone */
	ctl_msm_on_close(s, 1, 0, 1110);
	cr_expect_eq(ctl_msm_state(s), CTL_M_SEARCH);
	ctl_msm_destroy(s);
}

/* The coordinator's host leaving (REFUSE LEFT) is proof that it is out: the takeover reports say
 * so, and the log says it at INFO (a normal exit is no alert). */
Test(ctl_sm, coordinator_host_left_is_proof)
{
	struct ctl_member_rec recs[4];
	struct bare b;
	struct ctl_msm *s = bare_member(&b, 1, 2);
	struct ctl_msg m = view_of(recs, (uint32_t[]){ 0, 1 }, 2, 1, 1);
	struct ctl_msg r = { .type = CTL_REFUSE, .code = CTL_REF_LEFT };

	ctl_msm_on_msg(s, &m, 1010);
	cr_assert_eq(ctl_msm_state(s), CTL_M_ACTIVE);
	r.group_id = ctl_group_id("bare");
	snprintf(r.text, sizeof(r.text), "member 0 left");
	ctl_msm_on_msg(s, &r, 1020);
	cr_expect_eq(ctl_msm_state(s), CTL_M_SEARCH);
	cr_expect_eq(b.hosts, 1, "member 1 hosts the takeover");
	ctl_msm_destroy(s);
}

/* ---- the cut rule with reports staggered in time -------------------------------------------- */

static struct fn *formed(uint32_t n)
{
	struct fn_cfg cfg = { .sizes = { n } };
	struct fn *fn = fn_new(&cfg);

	fn_form(fn, 2000);
	for (uint32_t k = 0; k < n; k++)
		fn_progress(fn, (int)k, 100, 90);
	fn_run(fn, 500);
	return fn;
}

/* The coordinator's own host has a bad NIC: its data links to 1, 2 and 3 start failing 300 ms
 * apart and keep failing (LINK reports every 100 ms, from both ends). The link to 1 is judged
 * broken first; counting the links still under trial, member 0 has trouble with everyone and
 * goes, not member 1. */
Test(ctl_sm, faulty_member_goes_when_its_links_are_judged_one_by_one)
{
	struct fn *fn = formed(4);

	for (int t = 0; t < 25; t++) {
		for (uint32_t p = 1; p < 4; p++) {
			if (t * 100 < (int)(p - 1) * 300)
				continue;
			if (fn_state(fn, 0) == CTL_M_ACTIVE)
				fn_suspect(fn, 0, p, CTL_EV_LINK);
			if (fn_state(fn, (int)p) == CTL_M_ACTIVE)
				fn_suspect(fn, (int)p, 0, CTL_EV_LINK);
		}
		fn_run(fn, 100);
	}
	cr_assert_eq(fn_wait_state(fn, FN_BIT(0), CTL_M_REMOVED, TIMEOUT + 2000), 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xe, 3000, 1, 2, 3), 0);
	for (int k = 1; k < 4; k++)
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	FN_CHECK(fn);
	fn_free(fn);
}

/* A link that keeps breaking gets retry epochs with a back-off, not one per report. */
Test(ctl_sm, retry_epochs_back_off)
{
	struct fn *fn = formed(3);
	uint64_t e0 = fn_max_epoch(fn, 0);

	for (int t = 0; t < 8; t++) {
		fn_suspect(fn, 1, 2, CTL_EV_LINK);
		fn_run(fn, 20);
	}
	/* 8 reports over 160 ms: the first retry at once, then 10, 20, 40 ms apart at most */
	cr_expect_leq(fn_max_epoch(fn, 0) - e0, 4, "%llu retry epochs for 8 reports",
		      (unsigned long long)(fn_max_epoch(fn, 0) - e0));
	cr_expect_geq(fn_max_epoch(fn, 0) - e0, 1);
	FN_CHECK(fn);
	fn_free(fn);
}

/* Member 1 dies without a word (frozen: its kernel still accepts) and member 2's data path
 * reports it unreachable half a timeout later, while 1 is still within the failure timeout.
 * The cut rule must not judge that link (both ends would count as alive and the tie would
 * remove member 2): silence removes member 1, member 2 stays. */
Test(ctl_sm, cut_reports_about_a_dead_member_are_left_to_silence)
{
	struct fn *fn = formed(4);

	fn_freeze(fn, 1);
	fn_run(fn, TIMEOUT / 2);
	for (int t = 0; t < (TIMEOUT + 1000) / 100 && fn_state(fn, 2) == CTL_M_ACTIVE; t++) {
		fn_suspect(fn, 2, 1, CTL_EV_CUT);
		fn_run(fn, 100);
	}
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xd, 3000, 0, 2, 3), 0);
	for (int k = 0; k < 4; k++) {
		if (k != 1)
			cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

/* A link that breaks now and then (a reset every 600 ms, each op done after its retry epoch)
 * is not a broken link: each failure is a new streak once both ends have done the failed op,
 * so nobody is removed however long it goes on. */
Test(ctl_sm, link_that_recovers_after_each_retry_removes_nobody)
{
	struct fn *fn = formed(3);
	uint64_t op = 90, e0 = fn_max_epoch(fn, 0);

	for (int round = 0; round < 6; round++) {
		fn_suspect(fn, 1, 2, CTL_EV_LINK);
		fn_run(fn, 300);
		op += 5; /* the retry worked: both ends went on */
		for (int k = 0; k < 3; k++)
			fn_progress(fn, k, op + 10, op);
		fn_run(fn, 300);
	}
	fn_run(fn, TIMEOUT);
	for (int k = 0; k < 3; k++)
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	cr_expect_geq(fn_max_epoch(fn, 0) - e0, 6, "a retry epoch per failure");
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x7, 1000, 0, 1, 2), 0);
	FN_CHECK(fn);
	fn_free(fn);
}

static int epoch_at_least(struct fn *fn, void *arg)
{
	return fn_max_epoch(fn, 0) >= (uint64_t)(uintptr_t)arg;
}

/* A restarted member's new incarnation is admitted by an epoch that also gives the ops in flight
 * another attempt, which reopens them from the lowest op a stayer has not done. The newcomer's
 * first op must still be past every stayer's next op: the ops below it may be done somewhere
 * already, and nobody could give the newcomer their results. */
Test(ctl_sm, joiner_of_a_retry_epoch_starts_past_every_next_op)
{
	struct fn *fn = formed(4);
	const struct ctl_epoch_rec *v;

	/* 3 stalls the epoch that removes 2's old incarnation; meanwhile the newcomer asks to
	 * join and a data link breaks: one epoch takes both */
	fn_freeze(fn, 3);
	fn_restart(fn, 2, 0);
	fn_run(fn, 200);
	fn_suspect(fn, 0, 1, CTL_EV_LINK);
	fn_run(fn, 100);
	fn_thaw(fn, 3);
	cr_assert_eq(fn_wait_state(fn, FN_BIT(2), CTL_M_ACTIVE, 3000), 0);
	v = fn_view(fn, 2);
	cr_assert(v);
	cr_expect_leq(v->boundary, 90, "the epoch reopens from op %llu (not a retry epoch?)",
		      (unsigned long long)v->boundary);
	cr_expect_geq(ctl_msm_admitted(fn_msm(fn, 2)), 100 + CTL_JOIN_SLACK,
		      "admitted from op %llu", (unsigned long long)ctl_msm_admitted(fn_msm(fn, 2)));
	/* Its engine has not reported progress yet (its heartbeats say 0): the next epoch that
	 * reopens ops must still reopen them from the stayers' ops, not from op 0. */
	uint64_t e = fn_max_epoch(fn, 0);

	fn_run(fn, 500);
	fn_suspect(fn, 0, 1, CTL_EV_LINK);
	cr_assert_eq(fn_run_until(fn, epoch_at_least, (void *)(uintptr_t)(e + 1), 1000), 0);
	fn_run(fn, 200);
	v = fn_view(fn, 0);
	cr_expect_geq(v->boundary, 90, "the epoch reopens from op %llu",
		      (unsigned long long)v->boundary);
	FN_CHECK(fn);
	fn_free(fn);
}

/* A report about an op the reporter has done already (its report to a reopened op failed) asks
 * for a retry as long as some member has not done that op: here member 2, which waits for the
 * report. The link does not count as recovered because both of its ends are past the op. */
Test(ctl_sm, link_report_about_a_done_op_still_gets_a_retry)
{
	struct fn *fn = formed(3);
	uint64_t e0 = fn_max_epoch(fn, 0);

	fn_progress(fn, 0, 100, 95);
	fn_progress(fn, 1, 100, 95);
	fn_progress(fn, 2, 100, 90);
	fn_run(fn, 300);
	fn_suspect_at(fn, 0, 1, CTL_EV_LINK, 92);
	cr_assert_eq(fn_run_until(fn, epoch_at_least, (void *)(uintptr_t)(e0 + 1), 1000), 0,
		     "no retry epoch");
	fn_run(fn, 200);
	FN_CHECK(fn);
	fn_free(fn);
}

/* A link that could not be used (CUT), then carried the ops after all, then breaks once more
 * within the timeout: the new streak is a plain break (a retry epoch), not the old cut. */
Test(ctl_sm, cut_that_recovered_does_not_carry_over)
{
	struct fn *fn = formed(3);

	fn_suspect(fn, 1, 2, CTL_EV_CUT);
	for (int k = 0; k < 3; k++)
		fn_progress(fn, k, 110, 95);
	fn_run(fn, 150);
	fn_suspect(fn, 1, 2, CTL_EV_LINK);
	fn_run(fn, 400); /* the retried op takes a while */
	for (int k = 0; k < 3; k++)
		fn_progress(fn, k, 120, 100);
	fn_run(fn, 2 * TIMEOUT);
	for (int k = 0; k < 3; k++)
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x7, 1000, 0, 1, 2), 0);
	FN_CHECK(fn);
	fn_free(fn);
}

/* Member 2 sits between ops (it issued up to op 95, all done) when its connection to member 1
 * breaks; member 1, in op 96, cannot get an answer and reports it unreachable, again and again.
 * A member that has not issued the op answers no connection: that is a straggler, not a cut.
 * The reports get retry epochs and nobody is removed. */
Test(ctl_sm, cut_report_about_a_member_between_ops_removes_nobody)
{
	struct fn *fn = formed(3);
	uint64_t e0 = fn_max_epoch(fn, 0);

	fn_progress(fn, 0, 100, 96);
	fn_progress(fn, 1, 100, 96);
	fn_progress(fn, 2, 96, 96);
	fn_run(fn, 300);
	for (int t = 0; t < (2 * TIMEOUT) / 100; t++) {
		fn_suspect(fn, 1, 2, CTL_EV_CUT);
		fn_run(fn, 100);
	}
	for (int k = 0; k < 3; k++)
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	cr_expect_gt(fn_max_epoch(fn, 0), e0, "no retry epoch");
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x7, 1000, 0, 1, 2), 0);
	FN_CHECK(fn);
	fn_free(fn);
}

/* The retry that straggler reports ask for is held while the accused has not issued the op (an
 * attempt before that meets the same silence, and restarts every op in flight), and comes as
 * soon as its heartbeat says it did. The reporter repeats its report until that epoch commits:
 * the same report (same op, same epoch), made while the accused was between ops, still counts
 * nothing, though the accused is in the op now. Counted, it made the link a cut, and the cut rule
 * removed a member that had only been late. */
Test(ctl_sm, a_straggler_retry_waits_for_the_op_and_its_repeats_count_nothing)
{
	struct fn *fn = formed(3);
	uint64_t e0 = fn_max_epoch(fn, 0), t0;
	int repeats = 0;

	fn_progress(fn, 0, 100, 96);
	fn_progress(fn, 1, 100, 96);
	fn_progress(fn, 2, 96, 96);
	fn_run(fn, 300);
	for (int t = 0; t < 5; t++) {
		fn_suspect_at(fn, 1, 2, CTL_EV_CUT, 96);
		fn_run(fn, 100);
	}
	cr_expect_eq(fn_max_epoch(fn, 0), e0, "a retry epoch before member 2 issued op 96");
	fn_progress(fn, 2, 97, 96);
	t0 = fn_now(fn);
	for (int t = 0; t < 10 && fn_max_epoch(fn, 0) == e0; t++) {
		fn_suspect_at(fn, 1, 2, CTL_EV_CUT, 96); /* again, until the epoch comes */
		repeats++;
		fn_run(fn, 50);
	}
	cr_expect_geq(repeats, 2, "no repeat between the op's issue and the epoch");
	cr_expect_gt(fn_max_epoch(fn, 0), e0, "no retry epoch once member 2 issued op 96");
	cr_expect_leq(fn_now(fn) - t0, 400, "the retry came %llu ms after member 2 issued op 96",
		      (unsigned long long)(fn_now(fn) - t0));
	fn_run(fn, 2 * TIMEOUT);
	for (int k = 0; k < 3; k++)
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	FN_CHECK(fn);
	fn_free(fn);
}

/* The same reports about a member that has not issued op 97 either but is still in op 96 (the
 * ops of a communicator run on lanes: it answers connections meanwhile): a cut, and the rule
 * removes one of the two (the higher id). */
Test(ctl_sm, cut_report_about_a_member_busy_in_an_earlier_op_removes_one)
{
	struct fn *fn = formed(3);

	fn_progress(fn, 0, 100, 97);
	fn_progress(fn, 1, 100, 97);
	fn_progress(fn, 2, 97, 96);
	fn_run(fn, 300);
	for (int t = 0; t < (2 * TIMEOUT) / 100 && fn_state(fn, 2) == CTL_M_ACTIVE; t++) {
		fn_suspect_at(fn, 1, 2, CTL_EV_CUT, 97);
		fn_run(fn, 100);
	}
	cr_assert_eq(fn_wait_state(fn, FN_BIT(2), CTL_M_REMOVED, TIMEOUT + 2000), 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x3, 3000, 0, 1), 0);
	FN_CHECK(fn);
	fn_free(fn);
}

/* Member 1 restarted and was admitted from an op past 97 while member 2 is still in op 96 (for a
 * slow member 3): member 2's op began before the join, its data plane does not know the new
 * member 1 and holds its connection unanswered, so member 1 reports member 2 unreachable in its
 * first op, again and again. Member 2 could not know better: retry epochs (its next attempt
 * knows member 1), and nobody is removed. */
Test(ctl_sm, cut_report_by_a_joiner_about_a_member_in_an_earlier_op_removes_nobody)
{
	struct fn *fn = formed(4);
	uint64_t e0;

	for (int k = 0; k < 4; k++)
		fn_progress(fn, k, 97, 96);
	fn_run(fn, 300);
	fn_restart(fn, 1, 0);
	cr_assert_eq(fn_wait_state(fn, FN_BIT(1), CTL_M_ACTIVE, 3000), 0);
	cr_assert_gt(ctl_msm_admitted(fn_msm(fn, 1)), 97);
	fn_run(fn, 300);
	e0 = fn_max_epoch(fn, 0);
	for (int t = 0; t < (2 * TIMEOUT) / 100; t++) {
		fn_suspect_at(fn, 1, 2, CTL_EV_CUT, ctl_msm_admitted(fn_msm(fn, 1)));
		fn_run(fn, 100);
	}
	for (int k = 0; k < 4; k++)
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	cr_expect_gt(fn_max_epoch(fn, 0), e0, "no retry epoch");
	FN_CHECK(fn);
	fn_free(fn);
}

/* Member 0's NIC fails every send (LINK reports from both ends of its three links); members 2
 * and 3 stall for 600 ms just before the link to 1 is judged broken. While they are not heard
 * lately the cut rule waits instead of judging without their links (which would tie 0 and 1 and
 * remove member 1); then member 0, with trouble to everyone, goes. */
Test(ctl_sm, cut_rule_waits_for_stale_ends_of_troubled_links)
{
	struct fn *fn = formed(4);
	int frozen = 0;

	for (int t = 0; t < 25; t++) {
		if (t == 5) {
			fn_freeze(fn, 2);
			fn_freeze(fn, 3);
			frozen = 1;
		} else if (t == 11) {
			fn_thaw(fn, 2);
			fn_thaw(fn, 3);
			frozen = 0;
		}
		for (uint32_t p = 1; p < 4; p++) {
			if (fn_state(fn, 0) == CTL_M_ACTIVE)
				fn_suspect(fn, 0, p, CTL_EV_LINK);
			if (fn_state(fn, (int)p) == CTL_M_ACTIVE && !(frozen && p >= 2))
				fn_suspect(fn, (int)p, 0, CTL_EV_LINK);
		}
		fn_run(fn, 100);
	}
	cr_assert_eq(fn_wait_state(fn, FN_BIT(0), CTL_M_REMOVED, TIMEOUT + 2000), 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xe, 3000, 1, 2, 3), 0);
	for (int k = 1; k < 4; k++)
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE, "member %d", k);
	FN_CHECK(fn);
	fn_free(fn);
}
