/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership state machines on a fake network, part four: joins (restarts with a new incarnation,
 * catch-up members, joins racing failures), leaving on purpose, and the op boundaries and fence of
 * each change.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "ctl_fakenet.h"

#define HB 100
#define TIMEOUT 1000

static struct fn *formed(uint32_t n)
{
	struct fn_cfg cfg = { .sizes = { n } };
	struct fn *fn = fn_new(&cfg);

	fn_form(fn, 2000);
	fn_run(fn, 300);
	return fn;
}

/* Index of member @id in @v, or -1. */
static int slot_of(const struct ctl_epoch_rec *v, uint32_t id)
{
	for (uint32_t i = 0; i < v->nmembers; i++) {
		if (v->members[i].id == id) {
			return (int)i;
		}
	}
	return -1;
}

Test(ctl_sm, kill_and_restart_rejoins_with_new_incarnation)
{
	struct fn *fn = formed(5);
	uint64_t old = fn_incarnation(fn, 3), e1, t;
	const struct ctl_epoch_rec *v;
	const struct fn_rec *r;
	uint32_t n;

	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	e1 = fn_view(fn, 0)->epoch;
	fn_run(fn, 500);
	t = fn_now(fn);
	fn_restart(fn, 3, 0);
	cr_assert_neq(fn_incarnation(fn, 3), old);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 3000, 0, 1, 2, 3, 4), 0);
	v = fn_view(fn, 0);
	cr_expect_gt(v->epoch, e1);
	cr_expect_eq(v->members[3].incarnation, fn_incarnation(fn, 3));
	cr_expect(v->members[3].flags & CTL_MF_CONTRIB);
	cr_expect_leq(fn_seen_all(fn, FN_ALL(5), v->epoch) - t, 1000, "joined after %llu ms",
		      (unsigned long long)(fn_seen_all(fn, FN_ALL(5), v->epoch) - t));
	r = fn_recs(fn, 3, &n);
	cr_assert_geq(n, 2);
	cr_expect_eq(r[n - 1].member_inc, fn_incarnation(fn, 3));
	cr_expect_eq(r[n - 1].epoch, v->epoch, "the new process's first epoch is %llu",
		     (unsigned long long)r[n - 1].epoch);
	cr_expect_eq(r[n - 2].member_inc, old);
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), v->epoch);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, immediate_restart_replaces_old_incarnation)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn);
	const struct ctl_epoch_rec *v;

	/* The new process says HELLO before anyone noticed the old one died. */
	fn_restart(fn, 2, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 3000, 0, 1, 2, 3, 4), 0);
	v = fn_view(fn, 4);
	cr_expect_gt(v->epoch, 1);
	cr_expect_eq(v->members[2].incarnation, fn_incarnation(fn, 2));
	cr_expect_leq(fn_seen_all(fn, FN_ALL(5), v->epoch) - t, 1000);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, restart_coordinator_host_rejoins_under_successor)
{
	struct fn *fn = formed(4);
	const struct ctl_epoch_rec *v;

	fn_kill(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xe, 3000, 1, 2, 3), 0);
	fn_run(fn, 500);
	fn_restart(fn, 0, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(4), 5000, 0, 1, 2, 3), 0);
	v = fn_view(fn, 0);
	cr_expect_eq(v->coord, 1, "coordinator %d after member 0 came back", (int)v->coord);
	cr_expect(fn_coord(fn, 0) == NULL || ctl_coord_state(fn_coord(fn, 0)) == CTL_C_STOPPED,
		  "the restarted member 0 runs a second coordinator");
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), v->epoch);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, join_racing_a_failure)
{
	struct fn *fn = formed(5);
	const struct ctl_epoch_rec *v;
	uint64_t t;

	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	fn_run(fn, 300);
	t = fn_now(fn);
	fn_restart(fn, 3, 0);
	fn_kill(fn, 1);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x1d, 4000, 0, 2, 3, 4), 0);
	v = fn_view(fn, 3);
	cr_expect_eq(v->members[slot_of(v, 3)].incarnation, fn_incarnation(fn, 3));
	cr_expect(v->members[slot_of(v, 3)].flags & CTL_MF_CONTRIB);
	cr_expect_leq(fn_seen_all(fn, 0x1d, v->epoch) - t, 1000, "settled after %llu ms",
		      (unsigned long long)(fn_seen_all(fn, 0x1d, v->epoch) - t));
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), v->epoch);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, join_racing_the_coordinator_death)
{
	struct fn *fn = formed(5);
	const struct ctl_epoch_rec *v;

	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	fn_run(fn, 300);
	fn_restart(fn, 3, 0);
	fn_kill(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x1e, 10000, 1, 2, 3, 4), 0);
	v = fn_view(fn, 3);
	cr_expect_eq(v->coord, 1);
	cr_expect_eq(v->members[slot_of(v, 3)].incarnation, fn_incarnation(fn, 3));
	FN_CHECK(fn);
	fn_free(fn);
}

static int contributes(struct fn *fn, void *arg)
{
	int k = *(int *)arg;
	const struct ctl_epoch_rec *v = fn_view(fn, k);
	int i = v ? slot_of(v, (uint32_t)k) : -1;

	return fn_state(fn, k) == CTL_M_ACTIVE && i >= 0 && (v->members[i].flags & CTL_MF_CONTRIB);
}

Test(ctl_sm, catchup_join_then_ready)
{
	struct fn *fn = formed(5);
	const struct ctl_epoch_rec *v;
	uint64_t ecatch;
	int k = 3;

	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	fn_restart(fn, 3, 1);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 3000, 0, 1, 2, 3, 4), 0);
	v = fn_view(fn, 0);
	ecatch = v->epoch;
	cr_expect_eq(v->members[3].flags & CTL_MF_CONTRIB, 0, "a catch-up member contributes");
	for (int i = 0; i < 5; i++) {
		if (i != 3) {
			cr_expect(v->members[i].flags & CTL_MF_CONTRIB,
				  "member %d stopped contributing", i);
		}
	}
	cr_expect_eq(fn_ready(fn, 1), -EINVAL, "ready accepted from a member that never caught up");
	fn_run(fn, 1000);
	cr_expect_eq(fn_max_epoch(fn, 0), ecatch, "the group changed before ready");

	cr_assert_eq(fn_ready(fn, 3), 0);
	cr_assert_eq(fn_run_until(fn, contributes, &k, 2000), 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 1000, 0, 1, 2, 3, 4), 0);
	v = fn_view(fn, 1);
	cr_expect_gt(v->epoch, ecatch);
	cr_expect(v->members[3].flags & CTL_MF_CONTRIB);
	cr_expect_eq(v->members[3].incarnation, fn_incarnation(fn, 3));
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, leave_removes_at_once)
{
	struct fn *fn = formed(5);
	uint64_t t = fn_now(fn);
	const struct fn_rec *r;
	uint32_t n;

	fn_leave(fn, 2);
	cr_expect_eq(fn_state(fn, 2), CTL_M_LEFT);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x1b, 2000, 0, 1, 3, 4), 0);
	cr_expect_eq(fn_view(fn, 0)->epoch, 2);
	cr_expect_leq(fn_seen_all(fn, 0x1b, 2) - t, HB + 50, "removed %llu ms after leaving",
		      (unsigned long long)(fn_seen_all(fn, 0x1b, 2) - t));
	fn_run(fn, 3000);
	cr_expect_eq(fn_state(fn, 2), CTL_M_LEFT);
	cr_expect_gt(strlen(fn_reason(fn, 2)), 0);
	r = fn_recs(fn, 2, &n);
	cr_expect_eq(r[n - 1].epoch, 1);
	cr_expect_eq(fn_max_epoch(fn, 0), 2);
	FN_CHECK(fn);
	fn_free(fn);
}

/* ---- boundaries and the fence ------------------------------------------------------------ */

Test(ctl_sm, boundary_when_removing)
{
	static const uint64_t next[5] = { 50, 47, 60, 55, 49 }, done[5] = { 40, 35, 52, 20, 44 };
	struct fn *fn = formed(5);
	const struct ctl_epoch_rec *v;
	int fenced;

	for (int k = 0; k < 5; k++) {
		fn_progress(fn, k, next[k], done[k]);
	}
	fn_run(fn, 300);
	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	v = fn_view(fn, 2);
	for (int k = 0; k < 5; k++) {
		if (k != 3) {
			cr_expect_leq(
				v->boundary, done[k], "boundary %llu past member %d's done op %llu",
				(unsigned long long)v->boundary, k, (unsigned long long)done[k]);
		}
	}
	cr_expect_eq(v->boundary, 35, "boundary %llu, lowest op not done by a survivor is 35",
		     (unsigned long long)v->boundary);
	for (int k = 0; k < 5; k++) {
		if (k != 3) {
			cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, k), 34, &fenced)->epoch, 1);
			cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, k), 35, &fenced)->epoch, 2);
			cr_expect_eq(fenced, 0);
			cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, k), 1000000, &fenced)->epoch, 2);
			cr_expect_eq(fenced, 0, "op far ahead fenced with no proposal open");
		}
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, boundary_when_adding)
{
	static const uint64_t next[5] = { 100, 120, 110, 0, 90 };
	struct fn *fn = formed(5);
	const struct ctl_epoch_rec *v;
	uint64_t e1, want = 120 + CTL_JOIN_SLACK;
	int fenced;

	fn_kill(fn, 3);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x17, 2000, 0, 1, 2, 4), 0);
	e1 = fn_view(fn, 0)->epoch;
	for (int k = 0; k < 5; k++) {
		if (k != 3) {
			fn_progress(fn, k, next[k], next[k] - 5);
		}
	}
	fn_run(fn, 300);
	fn_restart(fn, 3, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 3000, 0, 1, 2, 3, 4), 0);
	v = fn_view(fn, 0);
	cr_expect_gt(v->epoch, e1);
	cr_expect_geq(v->boundary, want, "boundary %llu below max next op + slack %llu",
		      (unsigned long long)v->boundary, (unsigned long long)want);
	for (int k = 0; k < 5; k++) {
		if (k == 3) {
			continue;
		}
		cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, k), v->boundary - 1, &fenced)->epoch, e1);
		cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, k), v->boundary, &fenced)->epoch,
			     v->epoch);
		cr_expect_eq(fenced, 0);
	}
	cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, 3), v->boundary, &fenced)->epoch, v->epoch);
	FN_CHECK(fn);
	fn_free(fn);
}

/* Member 2's ACK of a proposal, caught on the network. */
struct ack_seen {
	int node;
	int seen;
	uint64_t next_op;
};

static void catch_ack(void *arg, int from, int to, const struct ctl_msg *m)
{
	struct ack_seen *a = arg;

	if (from == a->node && m->type == CTL_ACK) {
		a->seen = 1;
		a->next_op = m->next_op;
	}
}

Test(ctl_sm, fence_while_a_join_is_proposed)
{
	struct fn *fn = formed(5);
	struct ack_seen ack = { .node = 2 };
	const struct ctl_epoch_rec *old, *r;
	uint64_t e1, fence;
	int fenced, windows = 0;

	fn_kill(fn, 4);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xf, 2000, 0, 1, 2, 3), 0);
	e1 = fn_view(fn, 2)->epoch;
	for (int k = 0; k < 4; k++) {
		fn_progress(fn, k, 200 + (uint64_t)k, 190);
	}
	fn_run(fn, 300);
	fn_set_watch(fn, catch_ack, &ack);
	fn_restart(fn, 4, 0);
	for (int i = 0; i < 300 && fn_view(fn, 2)->epoch == e1; i++) {
		fn_step(fn);
		if (!ack.seen || fn_view(fn, 2)->epoch != e1) {
			continue;
		}
		/* Member 2 ACKed and has no VIEW yet: the fence is up. */
		windows++;
		cr_expect_eq(ack.next_op, 202, "ACK reports next op %llu",
			     (unsigned long long)ack.next_op);
		fence = ack.next_op + CTL_JOIN_SLACK;
		old = fn_view(fn, 2);
		r = ctl_msm_op_epoch(fn_msm(fn, 2), fence - 1, &fenced);
		cr_expect_eq(fenced, 0, "op %llu below the fence is fenced",
			     (unsigned long long)(fence - 1));
		cr_expect_eq(r, old, "op below the fence not in the old epoch");
		ctl_msm_op_epoch(fn_msm(fn, 2), fence, &fenced);
		cr_expect_eq(fenced, 1, "op %llu at the fence not fenced",
			     (unsigned long long)fence);
		ctl_msm_op_epoch(fn_msm(fn, 2), fence + 1000, &fenced);
		cr_expect_eq(fenced, 1);
		ctl_msm_op_epoch(fn_msm(fn, 2), 195, &fenced);
		cr_expect_eq(fenced, 0);
	}
	cr_expect_gt(windows, 0, "never saw member 2 between its ACK and the VIEW");
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 2000, 0, 1, 2, 3, 4), 0);
	r = fn_view(fn, 2);
	cr_expect_geq(r->boundary, 203 + CTL_JOIN_SLACK);
	ctl_msm_op_epoch(fn_msm(fn, 2), r->boundary + 5, &fenced);
	cr_expect_eq(fenced, 0, "still fenced after the VIEW");
	cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, 2), r->boundary + 5, &fenced), r);
	FN_CHECK(fn);
	fn_free(fn);
}
