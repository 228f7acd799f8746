/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership state machines on a fake network, part three: partitions. The side with a quorum of
 * the epoch (more than half, or exactly half with the lowest id) goes on without the others; the
 * other side ends LOST and says why; healing changes nothing.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>

#include "ctl_fakenet.h"

#define HB 100
#define TIMEOUT 1000

/* A formed group of @n; @delays: partitions hold frames (TCP retransmits) instead of losing them
 * with the rest of their stream. */
static struct fn *formed(uint32_t n, int delays)
{
	struct fn_cfg cfg = { .sizes = { n }, .partition_delays = delays };
	struct fn *fn = fn_new(&cfg);

	fn_form(fn, 2000);
	fn_run(fn, 500);
	return fn;
}

/* Partitions @n members into @keep (goes on, members @ids, within @max_ms) and the rest (ends
 * LOST), checks the times, heals and checks nothing changes. */
static void partition_run(uint32_t n, uint64_t keep, const uint32_t *ids, uint32_t nids,
			  uint64_t max_ms, int delays)
{
	struct fn *fn = formed(n, delays);
	uint64_t lose = FN_ALL(n) & ~keep, t = fn_now(fn), e, dt, lost_at;

	fn_partition(fn, lose, 0);
	cr_assert_eq(fn_wait_view(fn, keep, ids, nids, TIMEOUT + 4000), 0, "frames %s",
		     delays ? "held" : "lost");
	e = fn_view(fn, ids[0])->epoch;
	cr_expect_gt(e, 1);
	dt = fn_seen_all(fn, keep, e) - t;
	cr_expect_geq(dt, TIMEOUT - HB, "majority moved on %llu ms after the split",
		      (unsigned long long)dt);
	cr_expect_leq(dt, max_ms, "majority moved on %llu ms after the split",
		      (unsigned long long)dt);

	cr_assert_eq(fn_wait_final(fn, lose, 30000), 0, "frames %s", delays ? "held" : "lost");
	lost_at = fn_now(fn) - t;
	for (uint32_t k = 0; k < n; k++) {
		if (!(lose & FN_BIT(k))) {
			continue;
		}
		cr_expect_eq(fn_state(fn, (int)k), CTL_M_LOST, "member %u ended %s: %s", k,
			     ctl_member_state_name(fn_state(fn, (int)k)), fn_reason(fn, (int)k));
		cr_expect(fn_reason_has(fn, (int)k, "quorum"), "member %u's reason: %s", k,
			  fn_reason(fn, (int)k));
		cr_expect_eq(fn_view(fn, (int)k)->epoch, 1, "cut-off member %u saw epoch %llu", k,
			     (unsigned long long)fn_view(fn, (int)k)->epoch);
	}
	cr_log_info("partition of %u (frames %s): majority at %llu ms, minority lost at %llu ms", n,
		    delays ? "held" : "lost", (unsigned long long)dt, (unsigned long long)lost_at);

	fn_heal(fn);
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), e, "epoch %llu after healing, %llu before",
		     (unsigned long long)fn_max_epoch(fn, 0), (unsigned long long)e);
	for (uint32_t k = 0; k < n; k++) {
		if (keep & FN_BIT(k)) {
			cr_expect_eq(fn_state(fn, (int)k), CTL_M_ACTIVE);
		} else {
			cr_expect_eq(fn_state(fn, (int)k), CTL_M_LOST);
		}
	}
	FN_CHECK(fn);
	fn_free(fn);
}

/* Both ways a partition can treat frames in flight. */
static void partition_case(uint32_t n, uint64_t keep, const uint32_t *ids, uint32_t nids,
			   uint64_t max_ms)
{
	partition_run(n, keep, ids, nids, max_ms, 0);
	partition_run(n, keep, ids, nids, max_ms, 1);
}

Test(ctl_sm, partition_3_2_of_5)
{
	partition_case(5, 0x7, (const uint32_t[]){ 0, 1, 2 }, 3, TIMEOUT + 1000);
}

Test(ctl_sm, partition_host_in_minority_of_5)
{
	/* Members 2, 3, 4 have the quorum; member 1 is cut off with 0, so 2 takes over once a
	 * connect to 1 failed: one more timeout allowed. */
	partition_case(5, 0x1c, (const uint32_t[]){ 2, 3, 4 }, 3, 2 * TIMEOUT + 1000);
}

Test(ctl_sm, partition_of_2_member_0_goes_on)
{
	partition_case(2, 0x1, (const uint32_t[]){ 0 }, 1, TIMEOUT + 1000);
}

Test(ctl_sm, partition_2_2_of_4_side_with_0_goes_on)
{
	partition_case(4, 0x3, (const uint32_t[]){ 0, 1 }, 2, TIMEOUT + 1000);
}

Test(ctl_sm, partition_2_2_of_4_without_host)
{
	/* {0, 3} keeps the lowest id: member 3 stays with the host, 1 and 2 are lost. */
	partition_case(4, 0x9, (const uint32_t[]){ 0, 3 }, 2, TIMEOUT + 1000);
}

Test(ctl_sm, short_partition_below_timeout_changes_nothing)
{
	/* TCP retransmits what a short partition held up: nothing is lost, nobody is removed. */
	struct fn *fn = formed(5, 1);

	fn_partition(fn, 0x18, 0);
	fn_run(fn, TIMEOUT / 2);
	fn_heal(fn);
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), 1);
	cr_expect_eq(fn_max_proposed(fn, 0), 0);
	for (int k = 0; k < 5; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, rejoined_member_counts_in_the_quorum)
{
	struct fn *fn = formed(2, 0);
	const struct ctl_epoch_rec *v;

	/* Member 0 leaves and comes back under member 1's coordinator; then the two are cut
	 * apart. The new 0 is a member like any other: the 2-member rule keeps 0's side, and 1
	 * must stop. */
	fn_leave(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_BIT(1), 3000, 1), 0);
	fn_run(fn, 300);
	fn_restart(fn, 0, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x3, 3000, 0, 1), 0);
	cr_assert_eq(fn_view(fn, 0)->coord, 1);
	fn_run(fn, 300);
	fn_partition(fn, FN_BIT(1), 0);
	cr_assert_eq(fn_wait_final(fn, FN_BIT(1), 10000), 0, "member 1 went on alone: %s",
		     fn_reason(fn, 1));
	cr_expect_eq(fn_state(fn, 1), CTL_M_LOST);
	cr_expect(fn_reason_has(fn, 1, "quorum"), "member 1's reason: %s", fn_reason(fn, 1));
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_BIT(0), 5000, 0), 0);
	v = fn_view(fn, 0);
	cr_expect_eq(v->coord, 0);
	fn_heal(fn);
	fn_run(fn, 3000);
	FN_CHECK(fn);
	fn_free(fn);
}
