/* SPDX-License-Identifier: BSD-3-Clause */
/* The membership service across processes: groups of 2 to 7 member processes form; members are
 * SIGKILLed (death evidence: a new epoch within 1 s), SIGSTOPped (silence: within the failure
 * timeout + 1 s, and the frozen one, resumed, must end REMOVED or LOST without disturbing the
 * group), restarted, or are the coordinator's host (takeover); two-member groups show the quorum
 * rule; three groups share one daemon.
 *
 * Every member runs in its own process (tests/lib/ctl_group.h) and records each epoch it sees;
 * after each fault every record is checked for agreement. Lines "chaos: ctl: ..." carry the
 * measurements. No root needed. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_proc.h"
#include "ctl_group.h"

#define TIMEOUT_MS 1000
/* Death evidence acts at once. */
#define KILL_BOUND_MS 1000
/* Silence needs the failure timeout. */
#define FREEZE_BOUND_MS (TIMEOUT_MS + 1000)
/* n processes starting on a small, busy machine. */
#define FORM_MS 10000
/* A resumed member reaches its final state: at worst the failure timeout of silence, then a search
 * for a successor bounded by 3 failure timeouts, then 1 s of slack. */
#define RESUME_BOUND_MS (TIMEOUT_MS + 3 * TIMEOUT_MS + 1000)
/* After the last change: how long the others are watched for a change that must not come. */
#define QUIET_MS 500
/* Waits run this much past a bound so that a late event is measured, not just missed. */
#define GRACE_MS 3000
/* ctl.h: destroy returns within about 100 ms. */
#define DESTROY_BOUND_MS 500

static struct ctl_group grp[3];
static struct ctl_group_daemon dmn;
static char text[1 << 16];

static void mproc_teardown(void)
{
	for (int k = 0; k < 3; k++)
		ctl_group_end(&grp[k], 2000, NULL);
	ctl_group_daemon_end(&dmn, 2000);
	chaos_proc_cleanup();
}

TestSuite(ctl_member, .fini = mproc_teardown, .timeout = 30);
TestSuite(ctl_daemon, .fini = mproc_teardown, .timeout = 30);

static uint32_t ids_all(int n)
{
	return (1u << n) - 1;
}

static uint32_t bit(int i)
{
	return 1u << i;
}

static const char *describe(const struct ctl_group *g)
{
	size_t at = ctl_group_describe(g, text, sizeof(text));

	/* The tail of each member's log (the runtime's own account of what happened). */
	for (int i = 0; i < g->n && at + 1 < sizeof(text); i++) {
		char log[4096];
		int k;

		ctl_group_log(g, i, log, sizeof(log));
		k = snprintf(text + at, sizeof(text) - at, "--- member %d, end of its log:\n%s\n",
			     i, log);
		at = k < 0 ? at : at + (size_t)k < sizeof(text) ? at + (size_t)k : sizeof(text) - 1;
	}
	return text;
}

static void expect_agree(const struct ctl_group *g, uint32_t live)
{
	char why[512];

	cr_expect_eq(ctl_group_agree(g, live, why, sizeof(why)), 0, "disagreement: %s\n%s", why,
		     describe(g));
}

/* Starts @n members as group "<name>-<pid>" and waits until all saw epoch 1 with every id. Returns
 * when the first process was started. */
static int64_t form(struct ctl_group *g, const char *name, int n, const struct ctl_group_opts *o)
{
	int64_t t0 = chaos_now_ns();

	cr_assert_eq(ctl_group_start(g, name, n, o), 0, "could not start %d members", n);
	cr_assert_eq(ctl_group_wait_view(g, ids_all(n), ids_all(n), 1, FORM_MS), 0,
		     "%d members did not form within %d ms:\n%s", n, FORM_MS, describe(g));
	for (int i = 0; i < n; i++) {
		const struct ctl_group_run *r = ctl_group_cur(g, i);

		cr_assert_eq(r->epochs[0].epoch, 1, "member %d first saw epoch %llu\n%s", i,
			     (unsigned long long)r->epochs[0].epoch, describe(g));
		cr_assert_eq(r->nepochs, 1, "member %d already moved on\n%s", i, describe(g));
	}
	return t0;
}

/* The newest epoch of every member in @who has exactly @mask and coordinator @coord. */
static void expect_newest(const struct ctl_group *g, uint32_t who, uint32_t mask, uint32_t coord)
{
	for (int i = 0; i < g->n; i++) {
		const struct ctl_group_epoch *e = ctl_group_newest(g, i);

		if (!(who & bit(i)))
			continue;
		cr_assert_not_null(e, "member %d saw no epoch", i);
		cr_expect_eq(e->mask, mask,
			     "member %d: newest epoch %llu has members %#x, not %#x\n%s", i,
			     (unsigned long long)e->epoch, e->mask, mask, describe(g));
		cr_expect_eq(e->coord, coord, "member %d: epoch %llu coordinated by %d, not %d\n%s",
			     i, (unsigned long long)e->epoch, (int)e->coord, (int)coord,
			     describe(g));
	}
}

/* Watches the members of @who for QUIET_MS: none may see another epoch or leave ACTIVE (the
 * first deviation fails the test, which goes on to its other checks). */
static void expect_quiet(const struct ctl_group *g, uint32_t who)
{
	const struct ctl_group_epoch *before[CTL_GROUP_MAX_N] = { 0 };
	int64_t end = chaos_now_ns() + (int64_t)QUIET_MS * 1000000;

	for (int i = 0; i < g->n; i++)
		before[i] = ctl_group_newest(g, i);
	while (chaos_now_ns() < end) {
		for (int i = 0; i < g->n; i++) {
			struct ctl_group_state st;

			if (!(who & bit(i)))
				continue;
			if (ctl_group_newest(g, i) != before[i]) {
				cr_expect_fail("member %d saw another epoch\n%s", i, describe(g));
				return;
			}
			if (ctl_group_state(g, i, &st) != CTL_M_ACTIVE) {
				cr_expect_fail("member %d left ACTIVE: %s\n%s", i, st.reason,
					       describe(g));
				return;
			}
		}
		chaos_sleep_ms(5);
	}
}

/* ---- formation ------------------------------------------------------------------------------- */

/* All members agree on epoch 1 with every id, coordinated by member 0; each one's incarnation is
 * the one every view lists for it; all leave within the destroy bound. */
static void form_group(int n)
{
	char name[32], what[64];
	double destroy_ms = 0;
	int64_t t0;
	int bad;

	snprintf(name, sizeof(name), "form%d", n);
	t0 = form(&grp[0], name, n, NULL);
	snprintf(what, sizeof(what), "form %d members", n);
	ctl_group_report(&grp[0], what, t0, ids_all(n), ids_all(n), 1, NULL);
	expect_newest(&grp[0], ids_all(n), ids_all(n), 0);
	for (int i = 0; i < n; i++) {
		const struct ctl_group_epoch *e = ctl_group_newest(&grp[0], i);
		struct ctl_group_state st;

		cr_expect_eq(e->self_index, i, "member %d: self_index %d", i, e->self_index);
		cr_expect_eq(ctl_group_state(&grp[0], i, &st), CTL_M_ACTIVE, "member %d: %s", i,
			     describe(&grp[0]));
		for (int j = 0; j < n; j++)
			cr_expect_eq(e->m[j].incarnation, ctl_group_cur(&grp[0], j)->incarnation,
				     "member %d lists member %d with another incarnation", i, j);
		cr_expect(e->m[i].flags & CTL_MF_CONTRIB, "member %d does not contribute", i);
	}
	expect_agree(&grp[0], ids_all(n));
	bad = ctl_group_end(&grp[0], 3000, &destroy_ms);
	chaos_report("ctl: form %d members: slowest ctl_member_destroy took %.1f ms", n,
		     destroy_ms);
	cr_expect_eq(bad, 0, "%d member processes did not exit cleanly", bad);
	cr_expect_leq(destroy_ms, DESTROY_BOUND_MS, "ctl_member_destroy took %.1f ms", destroy_ms);
}

Test(ctl_member, form_group_of_2)
{
	form_group(2);
}

Test(ctl_member, form_group_of_3)
{
	form_group(3);
}

Test(ctl_member, form_group_of_5)
{
	form_group(5);
}

Test(ctl_member, form_group_of_7)
{
	form_group(7);
}

/* ---- SIGKILL --------------------------------------------------------------------------------- */

/* SIGKILLs the members of @dead (at once) in a formed group of @n: every survivor sees an epoch of
 * exactly the survivors within KILL_BOUND_MS, coordinated by the lowest survivor. */
static void kill_members(const char *name, int n, uint32_t dead)
{
	uint32_t live = ids_all(n) & ~dead;
	char what[96];
	size_t at = 0;
	double hi;
	int64_t t;

	form(&grp[0], name, n, NULL);
	at += (size_t)snprintf(what + at, sizeof(what) - at, "SIGKILL member%s",
			       __builtin_popcount(dead) > 1 ? "s" : "");
	for (int i = 0, k = 0; i < n; i++)
		if (dead & bit(i))
			at += (size_t)snprintf(what + at, sizeof(what) - at, "%s %d",
					       k++ ? " and" : "", i);
	snprintf(what + at, sizeof(what) - at, " of %d", n);
	t = chaos_now_ns();
	for (int i = 0; i < n; i++)
		if (dead & bit(i))
			ctl_group_kill(&grp[0], i);
	ctl_group_wait_view(&grp[0], live, live, 2, KILL_BOUND_MS + GRACE_MS);
	hi = ctl_group_report(&grp[0], what, t, live, live, 2, NULL);
	cr_assert_geq(hi, 0, "%s: survivors did not all move on:\n%s", what, describe(&grp[0]));
	cr_expect_leq(hi, KILL_BOUND_MS, "%s: new epoch after %.1f ms\n%s", what, hi,
		      describe(&grp[0]));
	expect_newest(&grp[0], live, live, (uint32_t)__builtin_ctz(live));
	expect_agree(&grp[0], live);
}

Test(ctl_member, kill_member_1_of_3)
{
	kill_members("kill1of3", 3, bit(1));
}

Test(ctl_member, kill_member_3_of_5)
{
	kill_members("kill3of5", 5, bit(3));
}

/* The coordinator's host dies: the lowest survivor takes over. */
Test(ctl_member, kill_coordinator_of_3)
{
	kill_members("killc3", 3, bit(0));
}

Test(ctl_member, kill_coordinator_of_5)
{
	kill_members("killc5", 5, bit(0));
}

Test(ctl_member, kill_members_0_and_3_of_5)
{
	kill_members("kill03of5", 5, bit(0) | bit(3));
}

/* 2 members, member 1 killed: member 0 is half the group with its lowest id, and goes on at
 * once (its probe of 1's port is refused). */
Test(ctl_member, pair_kill_member_1)
{
	kill_members("pairkill1", 2, bit(1));
}

/* 2 members, member 0 killed: member 1 cannot tell a dead member 0 from a partition (resets and
 * refused connects can be forged by a firewall between them, and member 0 would go on on its
 * side), so it must stop (LOST) and say why, never forming a group of its own. */
Test(ctl_member, pair_kill_member_0)
{
	struct ctl_group_state st;
	const struct ctl_group_epoch *e;
	int64_t t;
	int fin;

	form(&grp[0], "pairkill0", 2, NULL);
	t = chaos_now_ns();
	ctl_group_kill(&grp[0], 0);
	fin = ctl_group_wait_final(&grp[0], 1, RESUME_BOUND_MS + GRACE_MS);
	ctl_group_state(&grp[0], 1, &st);
	chaos_report("ctl: SIGKILL member 0 of 2: member 1 reached %s after %.1f ms: \"%s\"",
		     fin ? ctl_member_state_name((enum ctl_member_state)fin) : "no final state",
		     fin ? chaos_ms(t, st.t_ns) : -1.0, st.reason);
	cr_assert_eq(fin, CTL_M_LOST, "member 1 did not stop\n%s", describe(&grp[0]));
	cr_expect_leq(chaos_ms(t, st.t_ns), RESUME_BOUND_MS, "LOST after %.1f ms",
		      chaos_ms(t, st.t_ns));
	cr_expect(strcasestr(st.reason, "quorum"), "reason does not say why: \"%s\"", st.reason);
	e = ctl_group_newest(&grp[0], 1);
	cr_expect(e && e->epoch == 1, "member 1 moved on\n%s", describe(&grp[0]));
}

/* 2 members, member 0 leaves (its process destroys its member and exits): a LEAVE is proof,
 * so member 1 goes on alone at once, and takes over the coordinator. */
Test(ctl_member, pair_leave_member_0)
{
	const uint32_t live = bit(1);
	double hi;
	int64_t t;

	form(&grp[0], "pairleave0", 2, NULL);
	t = chaos_now_ns();
	atomic_store(&grp[0].sh->run[grp[0].run[0]].stop, 1);
	ctl_group_wait_view(&grp[0], live, live, 2, KILL_BOUND_MS + GRACE_MS);
	hi = ctl_group_report(&grp[0], "member 0 of 2 leaves", t, live, live, 2, NULL);
	cr_assert_geq(hi, 0, "member 1 did not go on alone:\n%s", describe(&grp[0]));
	cr_expect_leq(hi, KILL_BOUND_MS, "new epoch after %.1f ms\n%s", hi, describe(&grp[0]));
	expect_newest(&grp[0], live, live, 1);
	expect_agree(&grp[0], live);
}

/* ---- SIGSTOP --------------------------------------------------------------------------------- */

/* SIGSTOPs member @k of a formed group of @n: the others see an epoch without it within
 * FREEZE_BOUND_MS (and not before half the timeout: silence must last). Resumed, it must end
 * REMOVED or LOST with a reason, having seen no newer epoch, and the group must not move. */
static void freeze_member(const char *name, int n, int k)
{
	uint32_t live = ids_all(n) & ~bit(k);
	struct ctl_group_state st;
	const struct ctl_group_epoch *e;
	char what[64];
	double hi, lo;
	int64_t t;
	int fin;

	form(&grp[0], name, n, NULL);
	snprintf(what, sizeof(what), "SIGSTOP member %d of %d", k, n);
	t = chaos_now_ns();
	cr_assert_eq(ctl_group_freeze(&grp[0], k), 0, "member %d did not stop", k);
	ctl_group_wait_view(&grp[0], live, live, 2, FREEZE_BOUND_MS + GRACE_MS);
	hi = ctl_group_report(&grp[0], what, t, live, live, 2, &lo);
	cr_assert_geq(hi, 0, "%s: the others did not move on:\n%s", what, describe(&grp[0]));
	cr_expect_leq(hi, FREEZE_BOUND_MS, "%s: new epoch after %.1f ms\n%s", what, hi,
		      describe(&grp[0]));
	cr_expect_geq(lo, TIMEOUT_MS / 2, "%s: removed after only %.1f ms of silence", what, lo);
	expect_newest(&grp[0], live, live, (uint32_t)__builtin_ctz(live));

	t = chaos_now_ns();
	ctl_group_thaw(&grp[0], k);
	fin = ctl_group_wait_final(&grp[0], k, RESUME_BOUND_MS);
	ctl_group_state(&grp[0], k, &st);
	chaos_report("ctl: %s, then SIGCONT: it reached %s after %.1f ms: \"%s\"", what,
		     fin ? ctl_member_state_name((enum ctl_member_state)fin) : "no final state",
		     fin ? chaos_ms(t, st.t_ns) : -1.0, st.reason);
	cr_expect(fin == CTL_M_REMOVED || fin == CTL_M_LOST,
		  "resumed member %d did not end REMOVED or LOST within %d ms\n%s", k,
		  RESUME_BOUND_MS, describe(&grp[0]));
	cr_expect_neq(st.reason[0], '\0', "resumed member %d gives no reason", k);
	e = ctl_group_newest(&grp[0], k);
	cr_expect(e && e->epoch == 1, "resumed member %d saw epoch %llu\n%s", k,
		  e ? (unsigned long long)e->epoch : 0ull, describe(&grp[0]));
	expect_quiet(&grp[0], live);
	expect_agree(&grp[0], live);
}

Test(ctl_member, freeze_member_2_of_3)
{
	freeze_member("freeze2of3", 3, 2);
}

/* The coordinator's host freezes: the others take over after the failure timeout; resumed, the old
 * coordinator must not form a group of its own. */
Test(ctl_member, freeze_coordinator_of_3)
{
	freeze_member("freezec3", 3, 0);
}

Test(ctl_member, freeze_coordinator_of_5)
{
	freeze_member("freezec5", 5, 0);
}

/* 2 members, member 1 frozen: member 0 alone is half the group with its lowest id, a quorum. */
Test(ctl_member, pair_freeze_member_1)
{
	const uint32_t live = bit(0);
	double hi;
	int64_t t;

	form(&grp[0], "pairfreeze1", 2, NULL);
	t = chaos_now_ns();
	cr_assert_eq(ctl_group_freeze(&grp[0], 1), 0);
	ctl_group_wait_view(&grp[0], live, live, 2, FREEZE_BOUND_MS + GRACE_MS);
	hi = ctl_group_report(&grp[0], "SIGSTOP member 1 of 2", t, live, live, 2, NULL);
	cr_assert_geq(hi, 0, "member 0 did not go on alone:\n%s", describe(&grp[0]));
	cr_expect_leq(hi, FREEZE_BOUND_MS, "new epoch after %.1f ms\n%s", hi, describe(&grp[0]));
	expect_newest(&grp[0], live, live, 0);
	expect_agree(&grp[0], live);
}

/* 2 members, member 0 frozen: member 1 cannot tell its death from a partition and is not a quorum
 * alone, so it must stop (LOST) and say why, never forming a group of its own. */
Test(ctl_member, pair_freeze_member_0)
{
	struct ctl_group_state st;
	const struct ctl_group_epoch *e;
	int64_t t;
	int fin;

	form(&grp[0], "pairfreeze0", 2, NULL);
	t = chaos_now_ns();
	cr_assert_eq(ctl_group_freeze(&grp[0], 0), 0);
	fin = ctl_group_wait_final(&grp[0], 1, FREEZE_BOUND_MS + GRACE_MS);
	ctl_group_state(&grp[0], 1, &st);
	chaos_report("ctl: SIGSTOP member 0 of 2: member 1 reached %s after %.1f ms: \"%s\"",
		     fin ? ctl_member_state_name((enum ctl_member_state)fin) : "no final state",
		     fin ? chaos_ms(t, st.t_ns) : -1.0, st.reason);
	cr_assert_eq(fin, CTL_M_LOST, "member 1 did not stop\n%s", describe(&grp[0]));
	cr_expect_leq(chaos_ms(t, st.t_ns), FREEZE_BOUND_MS, "LOST after %.1f ms",
		      chaos_ms(t, st.t_ns));
	cr_expect(strcasestr(st.reason, "quorum") || strcasestr(st.reason, "partition"),
		  "reason does not say why: \"%s\"", st.reason);
	e = ctl_group_newest(&grp[0], 1);
	cr_expect(e && e->epoch == 1 && e->mask == ids_all(2), "member 1 moved on\n%s",
		  describe(&grp[0]));
	expect_agree(&grp[0], 0);
}

/* ---- restart --------------------------------------------------------------------------------- */

/* Member 2 of 3 killed, then started again as a new process with join = 1: it is back, with a new
 * incarnation, in a later epoch at every member. */
Test(ctl_member, restart_member_2_of_3)
{
	const uint32_t live = bit(0) | bit(1);
	const struct ctl_group_epoch *gone;
	uint64_t old_inc;
	double hi;
	int64_t t;

	form(&grp[0], "restart2of3", 3, NULL);
	old_inc = ctl_group_cur(&grp[0], 2)->incarnation;
	t = chaos_now_ns();
	ctl_group_kill(&grp[0], 2);
	ctl_group_wait_view(&grp[0], live, live, 2, KILL_BOUND_MS + GRACE_MS);
	hi = ctl_group_report(&grp[0], "restart member 2 of 3: SIGKILL", t, live, live, 2, NULL);
	cr_assert_geq(hi, 0, "member 2 was not removed:\n%s", describe(&grp[0]));
	cr_expect_leq(hi, KILL_BOUND_MS, "removed after %.1f ms", hi);
	gone = ctl_group_newest(&grp[0], 0);

	t = chaos_now_ns();
	cr_assert_eq(ctl_group_spawn(&grp[0], 2, 1), 0);
	ctl_group_wait_view(&grp[0], ids_all(3), ids_all(3), gone->epoch + 1, FORM_MS);
	hi = ctl_group_report(&grp[0], "restart member 2 of 3: join of the new process", t,
			      ids_all(3), ids_all(3), gone->epoch + 1, NULL);
	cr_assert_geq(hi, 0, "member 2 is not back at every member:\n%s", describe(&grp[0]));
	cr_expect_neq(ctl_group_cur(&grp[0], 2)->incarnation, old_inc,
		      "the restarted member kept incarnation %#llx", (unsigned long long)old_inc);
	cr_expect_neq(ctl_group_cur(&grp[0], 2)->incarnation, 0);
	expect_newest(&grp[0], ids_all(3), ids_all(3), 0);
	expect_agree(&grp[0], ids_all(3));
}

/* ---- daemon ---------------------------------------------------------------------------------- */

/* The epoch number that follows the word "epoch" on the line of @status naming @group, or -1. */
static long status_epoch(const char *status, const char *group)
{
	const char *line = strstr(status, group), *end, *p;

	if (!line)
		return -1;
	end = strchr(line, '\n');
	end = end ? end : line + strlen(line);
	p = strstr(line, "epoch");
	if (!p || p > end)
		return -1;
	p += strlen("epoch");
	while (p < end && (*p < '0' || *p > '9'))
		p++;
	return p < end ? strtol(p, NULL, 10) : -1;
}

/* One daemon serves three groups of 3; a member of the second is SIGKILLed: that group moves to a
 * new epoch within KILL_BOUND_MS, the other two stay at epoch 1, and the daemon's status lists all
 * three with their epochs. */
Test(ctl_daemon, three_groups_kill_one_member)
{
	static const char *const names[3] = { "daemon-a", "daemon-b", "daemon-c" };
	const uint32_t live = bit(0) | bit(2);
	char status[16384];
	double hi;
	int64_t t;

	cr_assert_eq(ctl_group_daemon_start(&dmn, 5000), 0, "no daemon");
	for (int k = 0; k < 3; k++) {
		struct ctl_group_opts o = { .coordinator = dmn.spec };

		cr_assert_eq(ctl_group_start(&grp[k], names[k], 3, &o), 0);
	}
	for (int k = 0; k < 3; k++) {
		cr_assert_eq(ctl_group_wait_view(&grp[k], ids_all(3), ids_all(3), 1, FORM_MS), 0,
			     "group %s did not form:\n%s", grp[k].name, describe(&grp[k]));
		expect_newest(&grp[k], ids_all(3), ids_all(3), CTL_NO_MEMBER);
	}
	t = chaos_now_ns();
	ctl_group_kill(&grp[1], 1);
	ctl_group_wait_view(&grp[1], live, live, 2, KILL_BOUND_MS + GRACE_MS);
	hi = ctl_group_report(&grp[1], "daemon, 3 groups of 3: SIGKILL member 1 of one", t, live,
			      live, 2, NULL);
	cr_assert_geq(hi, 0, "the group did not move on:\n%s", describe(&grp[1]));
	cr_expect_leq(hi, KILL_BOUND_MS, "new epoch after %.1f ms", hi);
	expect_newest(&grp[1], live, live, CTL_NO_MEMBER);
	expect_quiet(&grp[0], ids_all(3));
	expect_quiet(&grp[2], ids_all(3));
	for (int k = 0; k < 3; k++) {
		expect_agree(&grp[k], k == 1 ? live : ids_all(3));
		for (int i = 0; i < 3; i++) {
			const struct ctl_group_epoch *e = ctl_group_newest(&grp[k], i);

			if (k != 1)
				cr_expect_eq(e->epoch, 1, "group %s member %d at epoch %llu",
					     grp[k].name, i, (unsigned long long)e->epoch);
		}
	}
	cr_assert_gt(ctl_group_daemon_status(&dmn, status, sizeof(status), 2000), 0,
		     "the daemon gave no status");
	memcpy(text, status, sizeof(status));
	for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n"))
		chaos_report("ctl: daemon status: %s", line);
	for (int k = 0; k < 3; k++) {
		long want = (long)ctl_group_newest(&grp[k], 0)->epoch;

		cr_expect_eq(status_epoch(status, grp[k].name), want,
			     "status does not show group %s at epoch %ld:\n%s", grp[k].name, want,
			     status);
	}
	/* The removed member is listed, with its epoch and its reason. */
	cr_expect(strstr(status, "removed 1 incarnation") && strstr(status, "at epoch 2"),
		  "status does not list the removed member:\n%s", status);
}

/* The daemon is a single point of failure for the groups it serves, within a bound: killed, its
 * members keep the committed epoch, look for it every heartbeat, and end LOST (saying why) after
 * three failure timeouts; none of them hangs. The README says so. */
Test(ctl_daemon, daemon_killed_members_end_lost_in_bound)
{
	struct ctl_group_state st;
	int64_t t;

	cr_assert_eq(ctl_group_daemon_start(&dmn, 5000), 0, "no daemon");
	{
		struct ctl_group_opts o = { .coordinator = dmn.spec };

		cr_assert_eq(ctl_group_start(&grp[0], "daemon-dies", 3, &o), 0);
	}
	cr_assert_eq(ctl_group_wait_view(&grp[0], ids_all(3), ids_all(3), 1, FORM_MS), 0,
		     "the group did not form:\n%s", describe(&grp[0]));
	t = chaos_now_ns();
	chaos_kill(dmn.pid);
	for (int i = 0; i < 3; i++) {
		int final = ctl_group_wait_final(&grp[0], i, RESUME_BOUND_MS + GRACE_MS);
		double ms;

		cr_expect_eq(final, CTL_M_LOST, "member %d: state %d after the daemon died:\n%s", i,
			     final, describe(&grp[0]));
		ctl_group_state(&grp[0], i, &st);
		/* When the member itself got there, not when this process noticed. */
		ms = chaos_ms(t, st.t_ns);
		chaos_report("ctl: daemon killed: member %d LOST after %.0f ms: %s", i, ms,
			     st.reason);
		cr_expect_leq(ms, RESUME_BOUND_MS, "member %d ended after %.0f ms", i, ms);
		cr_expect(strstr(st.reason, "(the daemon)") != NULL,
			  "member %d: the reason does not name the daemon: \"%s\"", i, st.reason);
	}
}
