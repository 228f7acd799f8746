/* SPDX-License-Identifier: BSD-3-Clause */
/* The CollNet plug-in where the group cannot go on after a head's loss: FTCC_DEGRADED=fail and
 * FTCC_COLLNET_MIN_NODES. The survivors stop by themselves, at the same op, within the bound of
 * the kill, each with a WARN naming the setting. Needs root; run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "chaos_proc.h"
#include "collnet_chaos.h"

TestSuite(collnet_stop, .fini = cc_teardown);

/* The lowest op head @i completed with an error (the heads test their requests in slot order, so
 * a later op may return its error first); -1 when none. Every op below it must have succeeded. */
static int64_t first_failed(int i, const char *kind)
{
	const struct cn_head *h = cn_heads_head(&cc_heads, i);
	int64_t f = -1;
	int bad = 0;

	for (int64_t s = 0; s < CN_MAX_OPS && f < 0; s++) {
		const struct cn_op *op = &h->ops[s];
		int state = atomic_load_explicit(&op->state, memory_order_acquire);

		if (state == 2 && op->res != ncclSuccess) {
			f = s;
		} else if (state != 2) {
			bad += s < h->err_seq;
		}
	}
	cr_expect_eq(bad, 0, "%s: head %d: %d ops below its first error never completed\n%s", kind,
		     i, bad, cc_describe());
	return f;
}

/* After a kill at @t each head of @live stops by itself: its first error (ncclRemoteError from
 * test()) came within @bound_ms (cc_kill_head()), the lowest op that failed is the same op on every survivor
 * and completed after the kill, every op below it succeeded, and each logged a WARN containing
 * @needle. */
static void expect_stops(const char *kind, uint32_t live, int64_t t, double bound_ms,
			 const char *needle)
{
	int64_t f0 = -2;

	cr_assert_eq(cn_heads_wait_stage(&cc_heads, live, CN_ST_CLOSED, (int)bound_ms + STOP_MS), 0,
		     "%s: the survivors did not stop and close by themselves\n%s", kind,
		     cc_describe());
	cr_expect_eq(cn_heads_stop(&cc_heads, live, 0, STOP_MS), 0,
		     "%s: the survivors did not exit\n%s", kind, cc_describe());
	cc_expect_clean(live);
	for (int i = 0; i < cc_heads.n; i++) {
		const struct cn_head *h = cn_heads_head(&cc_heads, i);
		int err = atomic_load(&h->err);
		int64_t f;
		double ms;

		if (!(live >> i & 1)) {
			continue;
		}
		ms = chaos_ms(t, h->t_err);
		f = first_failed(i, kind);
		chaos_report(
			"collnet: %s: head %d: test() returned %d (op %lld, the lowest failed: "
			"op %lld) %.1f ms after the kill",
			kind, i, err, (long long)h->err_seq, (long long)f, ms);
		cr_expect_eq(err, ncclRemoteError, "%s: head %d ended with %d\n%s", kind, i, err,
			     cc_describe());
		cr_expect(ms >= 0 && ms <= bound_ms, "%s: head %d failed %.1f ms after the kill",
			  kind, i, ms);
		cr_expect(f >= 0 && h->ops[f].res == ncclRemoteError && h->ops[f].t_done >= t,
			  "%s: head %d: op %lld is not an error after the kill\n%s", kind, i,
			  (long long)f, cc_describe());
		cr_expect(f0 == -2 || f0 == f,
			  "%s: the survivors' lowest failed ops are %lld and "
			  "%lld\n%s",
			  kind, (long long)f0, (long long)f, cc_describe());
		f0 = f;
		cr_expect_geq(cc_warn_lines(i, needle, NULL), 1,
			      "%s: head %d logged no WARN with %s\n%s", kind, i, needle,
			      cc_describe());
	}
}

/* FTCC_DEGRADED=fail: the first op without head 2 of 3 is ncclRemoteError on both survivors; every
 * op before it succeeded over all three. */
Test(collnet_stop, degraded_fail_kill_head2_of_3, .timeout = 30)
{
	struct cn_opts o = cc_base_opts();
	uint32_t live = cc_bit(0) | cc_bit(1);
	double bound;
	int64_t t;
	int ndeg;

	o.degraded = "fail";
	cc_start(3, &o);
	cc_wait_inflight(cc_all_of(3));
	t = cc_kill_head(2, &bound);
	expect_stops("FTCC_DEGRADED=fail", live, t, bound, "FTCC_DEGRADED=fail");
	ndeg = cc_expect_exact(cc_bit(2), t, FTCC_DEGRADED_FAIL);
	cr_expect_eq(ndeg, 0, "%d ops succeeded without head 2 under FTCC_DEGRADED=fail", ndeg);
	cc_expect_lost_warns(live, cc_bit(2));
}

/* FTCC_COLLNET_MIN_NODES=3 with 3 heads: one kill leaves too few inputs; the survivors stop
 * with ncclRemoteError and a WARN naming the setting. */
Test(collnet_stop, min_nodes3_kill_head2_of_3, .timeout = 30)
{
	struct cn_opts o = cc_base_opts();
	uint32_t live = cc_bit(0) | cc_bit(1);
	double bound;
	int64_t t;

	o.min_nodes = 3;
	cc_start(3, &o);
	cc_wait_inflight(cc_all_of(3));
	t = cc_kill_head(2, &bound);
	expect_stops("FTCC_COLLNET_MIN_NODES=3", live, t, bound, "FTCC_COLLNET_MIN_NODES=3");
	cc_expect_lost_warns(live, cc_bit(2));
}
