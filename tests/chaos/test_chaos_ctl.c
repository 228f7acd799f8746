/* SPDX-License-Identifier: BSD-3-Clause */
/* The membership service under network partitions: one member of a group is cut off by nftables
 * (every TCP packet between its address and any other dropped, both ways; its traffic to itself
 * passes), with every process alive. Silence is all anyone sees, so the side with a quorum must
 * form an epoch without the cut member within the failure timeout + 1 s, and the cut member, alone
 * and without a quorum, must stop (LOST) with a reason and form nothing.
 *
 * Members run in their own processes (tests/lib/ctl_group.h), each on its own loopback address.
 * Needs root. Lines "chaos: ctl: ..." carry the measurements. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "chaos_fault.h"
#include "chaos_proc.h"
#include "ctl_group.h"

#define TIMEOUT_MS 1000
#define CUT_BOUND_MS (TIMEOUT_MS + 1000)
#define FORM_MS 10000
/* The cut member gives up: the failure timeout of silence, then a search for a successor that
 * reaches nobody, bounded by 3 failure timeouts (ctl_sm.h: LOST when no coordinator is found within
 * the bound), then 1 s of slack. */
#define LOST_BOUND_MS (TIMEOUT_MS + 3 * TIMEOUT_MS + 1000)
#define GRACE_MS 3000

static struct ctl_group grp;
static char text[1 << 16];

static void cut_teardown(void)
{
	ctl_group_end(&grp, 2000, NULL);
	chaos_fault_cleanup();
	chaos_proc_cleanup();
}

TestSuite(ctl_cut, .fini = cut_teardown, .timeout = 30);

static void need_nft(void)
{
	char why[256];

	if (!chaos_nft_usable(why, sizeof(why)))
		cr_skip_test("nftables not usable: %s", why);
	chaos_nft_sweep();
}

static const char *describe(void)
{
	size_t at = ctl_group_describe(&grp, text, sizeof(text));

	/* The tail of each member's log (the runtime's own account of what happened). */
	for (int i = 0; i < grp.n && at + 1 < sizeof(text); i++) {
		char log[4096];
		int k;

		ctl_group_log(&grp, i, log, sizeof(log));
		k = snprintf(text + at, sizeof(text) - at, "--- member %d, end of its log:\n%s\n",
			     i, log);
		at = k < 0 ? at : at + (size_t)k < sizeof(text) ? at + (size_t)k : sizeof(text) - 1;
	}
	return text;
}

/* Forms a group of @n, cuts member @k off, and checks both sides. */
static void cut_member(const char *name, int n, int k)
{
	const uint32_t live = ((1u << n) - 1) & ~(1u << k);
	const uint32_t coord = (uint32_t)__builtin_ctz(live);
	struct ctl_group_state st;
	const struct ctl_group_epoch *e;
	char table[32], what[64], why[512];
	int64_t t_before, t_after;
	double hi, lo;
	int fin;

	need_nft();
	cr_assert_eq(ctl_group_start(&grp, name, n, NULL), 0, "could not start %d members", n);
	cr_assert_eq(ctl_group_wait_view(&grp, (1u << n) - 1, (1u << n) - 1, 1, FORM_MS), 0,
		     "%d members did not form:\n%s", n, describe());
	cr_assert_eq(chaos_nft_table(table, sizeof(table)), 0, "nft table");

	snprintf(what, sizeof(what), "cut member %d of %d off", k, n);
	t_before = chaos_now_ns();
	cr_assert_eq(chaos_nft_isolate_ip(table, grp.ip[k]), 0, "nft rules");
	t_after = chaos_now_ns();

	/* The quorum side: an epoch of exactly the others. */
	ctl_group_wait_view(&grp, live, live, 2, CUT_BOUND_MS + GRACE_MS);
	hi = ctl_group_report(&grp, what, t_before, live, live, 2, &lo);
	chaos_report("ctl: %s: the rules took %.1f ms to install", what,
		     chaos_ms(t_before, t_after));
	cr_assert_geq(hi, 0, "%s: the others did not move on:\n%s", what, describe());
	cr_expect_leq(hi, CUT_BOUND_MS, "%s: new epoch after %.1f ms\n%s", what, hi, describe());
	lo -= chaos_ms(t_before, t_after); /* counted from when the cut was surely in place */
	cr_expect_geq(lo, TIMEOUT_MS / 2, "%s: removed after only %.1f ms of silence", what, lo);
	for (int i = 0; i < n; i++) {
		if (!(live & (1u << i)))
			continue;
		e = ctl_group_newest(&grp, i);
		cr_expect_eq(e->mask, live, "member %d: newest epoch %llu is not the others\n%s", i,
			     (unsigned long long)e->epoch, describe());
		cr_expect_eq(e->coord, coord, "member %d: epoch %llu coordinated by %d, not %d\n%s",
			     i, (unsigned long long)e->epoch, (int)e->coord, (int)coord,
			     describe());
	}

	/* The cut member: LOST, with a reason, and it formed nothing of its own. */
	fin = ctl_group_wait_final(&grp, k, LOST_BOUND_MS + GRACE_MS);
	ctl_group_state(&grp, k, &st);
	chaos_report("ctl: %s: it reached %s after %.1f ms: \"%s\"", what,
		     fin ? ctl_member_state_name((enum ctl_member_state)fin) : "no final state",
		     fin ? chaos_ms(t_before, st.t_ns) : -1.0, st.reason);
	cr_expect_eq(fin, CTL_M_LOST, "cut member %d did not end LOST\n%s", k, describe());
	if (fin) {
		cr_expect_leq(chaos_ms(t_before, st.t_ns), LOST_BOUND_MS,
			      "cut member %d LOST after %.1f ms", k, chaos_ms(t_before, st.t_ns));
	}
	cr_expect_neq(st.reason[0], '\0', "cut member %d gives no reason", k);
	e = ctl_group_newest(&grp, k);
	cr_expect(e && e->epoch == 1, "cut member %d saw epoch %llu\n%s", k,
		  e ? (unsigned long long)e->epoch : 0ull, describe());
	cr_expect_eq(ctl_group_agree(&grp, live, why, sizeof(why)), 0, "disagreement: %s\n%s", why,
		     describe());

	cr_expect_eq(chaos_nft_delete(table), 0, "nft delete table %s", table);
	cr_expect_eq(chaos_nft_exists(table), 0, "table %s still there", table);
}

Test(ctl_cut, cut_member_2_of_3)
{
	cut_member("cut2of3", 3, 2);
}

Test(ctl_cut, cut_member_3_of_5)
{
	cut_member("cut3of5", 5, 3);
}

/* The coordinator's host is cut off: the other two take over. */
Test(ctl_cut, cut_coordinator_of_3)
{
	cut_member("cutc3", 3, 0);
}

/* 2 members, member 1 cut off: member 0 (half, with the lowest id) goes on alone. */
Test(ctl_cut, pair_cut_member_1)
{
	cut_member("paircut1", 2, 1);
}
