/* SPDX-License-Identifier: BSD-3-Clause */
/* The CollNet plug-in under faults in the middle of long iallreduce sequences: node heads
 * (cn_heads.h) run long paced scripts while one head is killed (head 0 too, the host of the
 * embedded coordinator), frozen, cut off by nftables, closes its collComm or fails an op
 * locally, and two kills one after the other. Every survivor must finish every op of the script,
 * exactly, and log the loss once; the stall each fault causes is measured and printed ("collnet:
 * stall ..." lines). Where the group cannot go on (FTCC_DEGRADED=fail, FTCC_COLLNET_MIN_NODES):
 * test_chaos_collnet_stop.c. Needs root (nftables, veth); run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "abi_net.h"
#include "chaos_fault.h"
#include "chaos_proc.h"
#include "chaos_veth.h"
#include "collnet_chaos.h"

static char veth_name[CN_MAX_HEADS][CHAOS_VETH_NAME_LEN];
static char veth_ip[CN_MAX_HEADS][CHAOS_VETH_IP_LEN];
static char veth_filter[CN_MAX_HEADS][CHAOS_VETH_NAME_LEN + 1];

/* The stall a fault caused, over the survivors. */
struct stall {
	double gap_ms;	   /* longest time between two completions around the fault (max) */
	double gap_at_ms;  /* when that gap began, from the fault */
	double first_ms;   /* from the fault to the first completion after it (max) */
	double recover_ms; /* from the fault to the first op without the lost heads (max; -1 none) */
	double inflight_ms; /* from the fault until the ops in flight at it completed (max) */
	int open;	    /* ops in flight at the fault that never completed (sum) */
	int after;	    /* ops completed after the fault (min) */
};

TestSuite(collnet_chaos, .fini = cc_teardown);

static int cmp_i64(const void *a, const void *b)
{
	int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;

	return x < y ? -1 : x > y;
}

/* The completion time of the first op (by number) head @i completed at or after @t_fault whose
 * result is not the one over the heads of @before: the first op without the lost heads. -1 when
 * none. */
static int64_t first_without(int i, int64_t t_fault, uint32_t before)
{
	const struct cn_head *h = cn_heads_head(&cc_heads, i);

	for (int s = 0; s < CN_MAX_OPS; s++) {
		const struct cn_op *op = &h->ops[s];
		const struct ft_spec *spec = &cc_script[s % cc_nspec];

		if (atomic_load_explicit(&op->state, memory_order_acquire) != 2 ||
		    op->res != ncclSuccess || op->t_done < t_fault) {
			continue;
		}
		if (op->sum != ft_expect(spec, (uint64_t)s, before, (uint32_t)cc_heads.n,
					 FTCC_DEGRADED_SUM, cc_acc, cc_tmp, NULL)) {
			return op->t_done;
		}
	}
	return -1;
}

/* The stall of head @i around a fault at @t_fault (completions up to @t_until count for the
 * gap), in which it went on without some of @before; accumulated into @st. */
static void stall_of(int i, int64_t t_fault, int64_t t_until, uint32_t before, struct stall *st)
{
	static int64_t t[CN_MAX_OPS];
	const struct cn_head *h = cn_heads_head(&cc_heads, i);
	int64_t from = t_fault - (int64_t)GAP_BEFORE_MS * 1000000, first = -1, rec;
	int64_t to = t_fault + (int64_t)GAP_AFTER_MS * 1000000;
	int n = 0, after = 0;

	for (int s = 0; s < CN_MAX_OPS; s++) {
		const struct cn_op *op = &h->ops[s];
		int state = atomic_load_explicit(&op->state, memory_order_acquire);

		if (state == 1 && op->t_post <= t_fault) {
			st->open++;
		}
		if (state != 2) {
			continue;
		}
		if (op->t_post <= t_fault && op->t_done > t_fault) {
			double ms = chaos_ms(t_fault, op->t_done);

			st->inflight_ms = ms > st->inflight_ms ? ms : st->inflight_ms;
		}
		if (op->t_done >= t_fault) {
			after++;
			first = first < 0 || op->t_done < first ? op->t_done : first;
		}
		if (op->t_done >= from && op->t_done <= to && op->t_done <= t_until) {
			t[n++] = op->t_done;
		}
	}
	qsort(t, (size_t)n, sizeof(t[0]), cmp_i64);
	for (int k = 1; k < n; k++) {
		double gap = chaos_ms(t[k - 1], t[k]);

		if (gap > st->gap_ms) {
			st->gap_ms = gap;
			st->gap_at_ms = chaos_ms(t_fault, t[k - 1]);
		}
	}
	if (first >= 0 && chaos_ms(t_fault, first) > st->first_ms) {
		st->first_ms = chaos_ms(t_fault, first);
	}
	st->after = after < st->after ? after : st->after;
	rec = first_without(i, t_fault, before);
	if (rec < 0 || st->recover_ms < 0) {
		st->recover_ms = -1;
	} else if (chaos_ms(t_fault, rec) > st->recover_ms) {
		st->recover_ms = chaos_ms(t_fault, rec);
	}
}

/* The stall of the heads of @live around a fault at @t_fault (see stall_of()). */
static struct stall stall_over(uint32_t live, int64_t t_fault, int64_t t_until, uint32_t before)
{
	struct stall st = { .after = CN_MAX_OPS };

	for (int i = 0; i < cc_heads.n; i++) {
		if (live >> i & 1) {
			stall_of(i, t_fault, t_until, before, &st);
		}
	}
	return st;
}

/* Prints @st as one line for @kind, and checks it against @bound_ms: the ops in flight at the
 * fault and the first op without the lost heads completed within it, and each survivor
 * completed AFTER_OPS ops after the fault. */
static void expect_stall(const char *kind, const struct stall *st, double bound_ms)
{
	chaos_report(
		"collnet: stall %s: gap %.1f ms (from %+.1f ms), first completion %.1f ms, first op without "
		"the lost heads %.1f ms, in flight at the fault done %.1f ms; %d ops after it",
		kind, st->gap_ms, st->gap_at_ms, st->first_ms, st->recover_ms, st->inflight_ms,
		st->after);
	cr_expect_eq(st->open, 0, "%s: %d ops in flight at the fault never completed", kind,
		     st->open);
	cr_expect_leq(st->inflight_ms, bound_ms,
		      "%s: the op in flight took %.1f ms after the fault", kind, st->inflight_ms);
	cr_expect(st->recover_ms >= 0 && st->recover_ms <= bound_ms,
		  "%s: the first op without the lost heads completed %.1f ms after the fault", kind,
		  st->recover_ms);
	cr_expect_geq(st->after, AFTER_OPS, "%s: only %d ops after the fault", kind, st->after);
}

/* Every head of @live completed every op of the script with ncclSuccess. */
static void expect_all_success(uint32_t live)
{
	for (int i = 0; i < cc_heads.n; i++) {
		const struct cn_head *h = cn_heads_head(&cc_heads, i);
		int64_t first_bad = -1;
		int bad = 0;

		if (!(live >> i & 1)) {
			continue;
		}
		for (int s = 0; s < cc_heads.o.nops; s++) {
			const struct cn_op *op = &h->ops[s];

			if (atomic_load_explicit(&op->state, memory_order_acquire) != 2 ||
			    op->res != ncclSuccess) {
				first_bad = first_bad < 0 ? s : first_bad;
				bad++;
			}
		}
		cr_expect_eq(bad, 0,
			     "survivor %d: %d of %d ops did not complete with success "
			     "(first: op %lld)\n%s",
			     i, bad, cc_heads.o.nops, (long long)first_bad, cc_describe());
		cr_expect_eq(atomic_load(&h->err), 0, "survivor %d: error %d at op %lld\n%s", i,
			     atomic_load(&h->err), (long long)h->err_seq, cc_describe());
	}
}

/* The common end of a fault at @t_fault after which @live go on without @lost: the survivors
 * finish the script and close; every op succeeded with the exact result; the stall is within
 * @bound_ms; each survivor logged the loss once. */
static struct stall expect_survived(const char *kind, uint32_t live, uint32_t lost, int64_t t_fault,
				    enum ftcc_degraded policy, double bound_ms)
{
	struct stall st;
	int ndeg;

	cr_assert_eq(cn_heads_wait_ops(&cc_heads, live, cc_heads.o.nops, RUN_MS), 0,
		     "%s: the survivors did not finish the script\n%s", kind, cc_describe());
	cr_expect_eq(cn_heads_stop(&cc_heads, live, 0, STOP_MS), 0,
		     "%s: the survivors did not close\n%s", kind, cc_describe());
	cc_expect_clean(live);
	expect_all_success(live);
	ndeg = cc_expect_exact(lost, t_fault, policy);
	cc_expect_epochs(2); /* the first epoch and the one without @lost, at least */
	cr_expect_geq(ndeg, AFTER_OPS, "%s: only %d ops without the lost heads\n%s", kind, ndeg,
		      cc_describe());
	st = stall_over(live, t_fault, INT64_MAX, cc_all_of(cc_heads.n));
	expect_stall(kind, &st, bound_ms);
	cc_expect_lost_warns(live, lost);
	return st;
}

/* ---- kills ----------------------------------------------------------------------------------- */

/* SIGKILLs head @victim of @n mid-sequence under FTCC_DEGRADED=@degraded. */
static void kill_one(const char *kind, int n, int victim, const char *degraded,
		     enum ftcc_degraded policy)
{
	struct cn_opts o = cc_base_opts();
	double bound;
	int64_t t;

	o.degraded = degraded;
	cc_start(n, &o);
	cc_wait_inflight(cc_all_of(n));
	t = cc_kill_head(victim, &bound);
	expect_survived(kind, cc_all_of(n) & ~cc_bit(victim), cc_bit(victim), t, policy, bound);
}

Test(collnet_chaos, kill_head2_of_4_rescale, .timeout = 30)
{
	kill_one("SIGKILL head 2 of 4 (rescale)", 4, 2, "rescale", FTCC_DEGRADED_RESCALE);
}

Test(collnet_chaos, kill_head0_of_3_sum, .timeout = 30)
{
	kill_one("SIGKILL head 0 of 3 (sum)", 3, 0, "sum", FTCC_DEGRADED_SUM);
}

/* cn_heads_check() allows one set of lost heads only: the ops of the two-kill test are checked
 * here, against the sets all, all but 2, {1, 3} in that order, each only after its kill (@t1,
 * @t2). */
static void expect_exact_two(int64_t t1, int64_t t2)
{
	const uint32_t sets[3] = { cc_all_of(4), cc_all_of(4) & ~cc_bit(2), cc_bit(1) | cc_bit(3) };
	int at = 0, counts[3] = { 0 }, first[3] = { 0, -1, -1 };

	for (int s = 0; s < cc_heads.o.nops; s++) {
		const struct ft_spec *spec = &cc_script[s % cc_nspec];
		const struct cn_op *ref = NULL;
		int found = -1;

		for (int i = 0; i < 4; i++) {
			const struct cn_op *op = &cn_heads_head(&cc_heads, i)->ops[s];

			if (atomic_load_explicit(&op->state, memory_order_acquire) != 2 ||
			    op->res != ncclSuccess) {
				continue;
			}
			if (!ref) {
				ref = op;
			} else if (op->sum != ref->sum || op->size != ref->size) {
				cr_expect_fail("op %d: heads disagree\n%s", s, cc_describe());
				return;
			}
		}
		if (!ref) {
			continue;
		}
		/* The set of the ops before or a later one, not before its kill; or, as ops on
		 * other lanes complete in any order, an earlier set for an op up to CN_LANES - 1
		 * after the first op over the next set. Max and min may fit several sets. */
		for (int j = 0; j < 3 && found < 0; j++) {
			int k = (at + j) % 3;

			int next = k + 1 < 3 && first[k + 1] >= 0 ? first[k + 1] : first[at];

			if ((k < at && s - next >= CN_LANES) || (k >= 1 && ref->t_done < t1) ||
			    (k == 2 && ref->t_done < t2))
				continue;
			if (ft_expect(spec, (uint64_t)s, sets[k], 4, FTCC_DEGRADED_RESCALE, cc_acc,
				      cc_tmp, NULL) == ref->sum)
				found = k;
		}
		if (found < 0) {
			cr_expect_fail(
				"op %d (%zu x %s): not over the set %d or a later one (after its "
				"kill), nor, as an op beside op %d, over an earlier one; done %.1f "
				"ms after the first kill and %.1f ms after the second\n%s",
				s, spec->count, ftcc_dtype_name(spec->dtype), at, first[at],
				chaos_ms(t1, ref->t_done), chaos_ms(t2, ref->t_done),
				cc_describe());
			return;
		}
		if (found > at) {
			at = found;
			first[at] = s;
		}
		counts[found]++;
	}
	chaos_report("collnet: two kills: ops over 4 heads %d, over 3 %d, over 2 %d", counts[0],
		     counts[1], counts[2]);
	cr_expect_geq(counts[1], AFTER_OPS / 2, "only %d ops over 3 heads", counts[1]);
	cr_expect_geq(counts[2], AFTER_OPS, "only %d ops over 2 heads", counts[2]);
}

/* Heads 2 and then 0 of 4 killed, AFTER_OPS ops apart: the last two go on (each loss leaves a
 * majority of the epoch it happens in). */
Test(collnet_chaos, kill_head2_then_head0_of_4, .timeout = 30)
{
	struct cn_opts o = cc_base_opts();
	uint32_t live1 = cc_all_of(4) & ~cc_bit(2), live = cc_bit(1) | cc_bit(3);
	struct stall s1, s2;
	int64_t t1, t2, base = 0;
	double b1, b2;

	o.nops = NOPS_TWO;
	cc_start(4, &o);
	cc_wait_inflight(cc_all_of(4));
	t1 = cc_kill_head(2, &b1);
	for (int i = 0; i < 4; i++) {
		int64_t nd =
			(live1 >> i & 1) ? atomic_load(&cn_heads_head(&cc_heads, i)->ndone) : 0;

		base = nd > base ? nd : base;
	}
	cr_assert_eq(cn_heads_wait_ops(&cc_heads, live1, base + AFTER_OPS, RUN_MS), 0,
		     "the first kill: no %d more ops\n%s", AFTER_OPS, cc_describe());
	cc_wait_inflight(live1);
	t2 = cc_kill_head(0, &b2);
	cr_assert_eq(cn_heads_wait_ops(&cc_heads, live, cc_heads.o.nops, RUN_MS), 0,
		     "the survivors did not finish the script\n%s", cc_describe());
	cr_expect_eq(cn_heads_stop(&cc_heads, live, 0, STOP_MS), 0,
		     "the survivors did not close\n%s", cc_describe());
	cc_expect_clean(live);
	expect_all_success(live);
	expect_exact_two(t1, t2);
	cc_expect_epochs(3);
	s1 = stall_over(live, t1, t2, cc_all_of(4));
	s2 = stall_over(live, t2, INT64_MAX, cc_all_of(4) & ~cc_bit(2));
	expect_stall("SIGKILL head 2 of 4, first of two", &s1, b1);
	expect_stall("SIGKILL head 0 of 4, second of two", &s2, b2);
	cc_expect_lost_warns(live, cc_bit(0) | cc_bit(2));
}

/* ---- silence --------------------------------------------------------------------------------- */

/* SIGSTOP of head 0 of 3 (the coordinator's host): it stays frozen; the others go on after the
 * failure timeout. */
Test(collnet_chaos, sigstop_head0_of_3, .timeout = 30)
{
	struct cn_opts o = cc_base_opts();
	struct stall st;
	int64_t t;

	cc_start(3, &o);
	cc_wait_inflight(cc_all_of(3));
	t = cn_heads_freeze(&cc_heads, 0);
	cr_assert_neq(t, 0, "could not freeze head 0");
	st = expect_survived("SIGSTOP head 0 of 3", cc_bit(1) | cc_bit(2), cc_bit(0), t,
			     FTCC_DEGRADED_RESCALE, SILENT_BOUND_MS);
	/* A frozen head is only silent: dropping it long before the timeout would be a bug. */
	cr_expect_geq(st.recover_ms, TIMEOUT_MS / 2, "a frozen head was dropped after %.1f ms",
		      st.recover_ms);
}

static void need_nft_veth(int n)
{
	char why[256];

	if (!chaos_nft_usable(why, sizeof(why))) {
		cr_skip_test("nftables not usable: %s", why);
	}
	chaos_nft_sweep();
	chaos_veth_sweep();
	for (int i = 0; i < n; i++) {
		if (chaos_veth_create(i, veth_name[i], veth_ip[i])) {
			cr_skip_test("no veth pair %d (see stderr)", i);
		}
		snprintf(veth_filter[i], sizeof(veth_filter[i]), "=%s", veth_name[i]);
	}
}

/* Head 2 of 3 cut off by nftables (by its veth address): the majority goes on within twice the
 * failure timeout; the cut head's test() ends with ncclRemoteError within LOST_BOUND_MS. */
Test(collnet_chaos, cut_head2_of_3, .timeout = 30)
{
	struct cn_opts o = cc_base_opts();
	const struct cn_head *h;
	char table[32];
	int64_t t, t_in;
	double lost_ms;
	int err;

	need_nft_veth(3);
	for (int i = 0; i < 3; i++) {
		o.ifname[i] = veth_filter[i];
	}
	cr_assert_eq(chaos_nft_table(table, sizeof(table)), 0, "nft table");
	cc_start(3, &o);
	for (int i = 0; i < 3; i++) {
		cn_heads_log(&cc_heads, i, cc_logbuf, sizeof(cc_logbuf));
		cr_assert(strstr(cc_logbuf, veth_ip[i]), "head %d does not listen on %s (%s)\n%s",
			  i, veth_ip[i], veth_name[i], cc_describe());
	}
	cc_wait_inflight(cc_all_of(3));
	t = chaos_now_ns();
	cr_assert_eq(chaos_nft_isolate_ip(table, veth_ip[2]), 0, "nft rules");
	/* over ib, its port leaves the emulated fabric too */
	cr_assert_eq(test_fabric_cut(cn_heads_head(&cc_heads, 2)->pid, 1), 0, "fabric cut");
	t_in = chaos_now_ns();
	expect_survived("nft cut of head 2 of 3", cc_bit(0) | cc_bit(1), cc_bit(2), t,
			FTCC_DEGRADED_RESCALE, SILENT_BOUND_MS);
	h = cn_heads_head(&cc_heads, 2);
	cn_heads_wait_stage(&cc_heads, cc_bit(2), CN_ST_RAN, LOST_BOUND_MS + 3000);
	err = atomic_load(&h->err);
	lost_ms = err ? chaos_ms(t, h->t_err) : -1;
	chaos_report("collnet: nft cut of head 2 of 3 (rules in %.1f ms): the cut head's test() "
		     "returned %d after %.1f ms at op %lld",
		     chaos_ms(t, t_in), err, lost_ms, (long long)h->err_seq);
	cr_expect_eq(err, ncclRemoteError, "the cut head ended with %d, not ncclRemoteError\n%s",
		     err, cc_describe());
	cr_expect(lost_ms >= 0 && lost_ms <= LOST_BOUND_MS, "the cut head failed after %.1f ms",
		  lost_ms);
	cr_expect_eq(cn_heads_wait_stage(&cc_heads, cc_bit(2), CN_ST_CLOSED, STOP_MS), 0,
		     "the cut head did not close\n%s", cc_describe());
	cr_expect_eq(chaos_nft_delete(table), 0, "nft delete table %s", table);
}

/* ---- leaving --------------------------------------------------------------------------------- */

/* Head 1 of 4 closes its collComm with ops in flight (NCCL's ncclCommAbort path): closeColl is
 * bounded and the others go on as after a kill. */
Test(collnet_chaos, close_head1_of_4, .timeout = 30)
{
	struct cn_opts o = cc_base_opts();
	const struct cn_head *h;
	double close_ms;
	int64_t t;

	cc_start(4, &o);
	cc_wait_inflight(cc_all_of(4));
	t = chaos_now_ns();
	cr_expect_eq(cn_heads_stop(&cc_heads, cc_bit(1), 1, STOP_MS), 0, "head 1 did not close\n%s",
		     cc_describe());
	h = cn_heads_head(&cc_heads, 1);
	close_ms = chaos_ms(0, h->close_ns[CN_CLOSE_COLL]);
	chaos_report("collnet: head 1 closed with %d in flight: closeColl %.1f ms",
		     h->inflight_at_close, close_ms);
	cr_expect_eq(h->close_res[CN_CLOSE_COLL], ncclSuccess, "closeColl returned %d",
		     h->close_res[CN_CLOSE_COLL]);
	cr_expect_leq(close_ms, CLOSE_BOUND_MS, "closeColl took %.1f ms", close_ms);
	expect_survived("closeColl of head 1 of 4", cc_all_of(4) & ~cc_bit(1), cc_bit(1), t,
			FTCC_DEGRADED_RESCALE, KILL_BOUND_MS);
}

/* Head 2 of 3 fails an op locally (out of memory, FTCC_FAULT): it leaves the group and its
 * test() returns an error (it stays failed); the other two finish every op without it, as
 * quickly as after a kill, never waiting for it. With lanes, the ops beside the failed one (up
 * to CN_LANES - 1 before and after it) may end either way on head 2: the ones before were in
 * flight when it left, the ones after may have run before the failed op started. */
Test(collnet_chaos, local_failure_head2_of_3, .timeout = 30)
{
	struct cn_opts o = cc_base_opts();
	const struct cn_head *h;
	const struct cn_op *fop;
	uint32_t live = cc_bit(0) | cc_bit(1);
	char fault[64];

	unsetenv("FTCC_LANES"); /* the heads run the default, CN_LANES */
	snprintf(fault, sizeof(fault), "FTCC_FAULT=input:%d:0:fail", WARM_OPS + 20 + CN_LANES);
	o.env[2] = fault;
	cc_start(3, &o);
	h = cn_heads_head(&cc_heads, 2);
	cr_assert_eq(cn_heads_wait_stage(&cc_heads, cc_bit(2), CN_ST_RAN, RUN_MS), 0,
		     "head 2 did not fail\n%s", cc_describe());
	/* The failed op ends with ncclSystemError. The head may see a later op's error first:
	 * once it has left, an op it posts fails at once (ncclRemoteError), possibly before its
	 * test() of the failed op; and the others may finish the failed op without it before
	 * either. So the fault counts from the failed op's post. */
	fop = &h->ops[WARM_OPS + 20];
	cr_assert_eq(atomic_load_explicit(&fop->state, memory_order_acquire), 2,
		     "head 2 did not complete op %d\n%s", WARM_OPS + 20, cc_describe());
	cr_expect_eq(fop->res, ncclSystemError, "head 2's op %d ended with %d", WARM_OPS + 20,
		     fop->res);
	cr_expect_neq(atomic_load(&h->err), 0, "head 2's test() never failed");
	cr_expect_geq(h->err_seq, WARM_OPS + 20 - (CN_LANES - 1),
		      "head 2 failed op %lld before the fault", (long long)h->err_seq);
	for (int s = WARM_OPS + 20 + CN_LANES; s < CN_MAX_OPS; s++) {
		const struct cn_op *op = &h->ops[s];

		cr_expect(atomic_load_explicit(&op->state, memory_order_acquire) != 2 ||
				  op->res != ncclSuccess,
			  "head 2 completed op %d after it left", s);
	}
	expect_survived("local failure of head 2 of 3", live, cc_bit(2), fop->t_post,
			FTCC_DEGRADED_RESCALE, KILL_BOUND_MS);
}
