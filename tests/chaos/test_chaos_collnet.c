/* SPDX-License-Identifier: BSD-3-Clause */
/* The CollNet plug-in under faults in the middle of long iallreduce sequences: node heads
 * (cn_heads.h) run long paced scripts while one head is killed (head 0 too, the host of the
 * embedded coordinator), frozen, cut off by nftables, or closes its collComm; then the degraded
 * policies, FTCC_COLLNET_MIN_NODES, and two kills one after the other. Every survivor must finish
 * every op of the script, exactly, and log the loss once; the stall each fault causes is measured
 * and printed ("collnet: stall ..." lines). Needs root (nftables, veth); run with --jobs 1.
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
#include "cn_heads.h"
#include "ftcc/reduce.h"

#define TIMEOUT_MS 1000
/* From when a killed head's sockets closed: the op in flight completes well within this. The
 * kernel closes them only after it has torn down the process's memory, seen to take a second
 * under ASan on a loaded 2-core machine; until then the head is, to its peers, a frozen one.
 * kill_head() gives each kill its bound. */
#define KILL_BOUND_MS 1000
/* Silence (SIGSTOP, a cut) needs the failure timeout. */
#define SILENT_BOUND_MS (2 * TIMEOUT_MS)
/* The cut head gives up: the failure timeout of silence, a search for a successor bounded by 3
 * failure timeouts, then 1 s of slack. */
#define LOST_BOUND_MS (TIMEOUT_MS + 3 * TIMEOUT_MS + 1000)
/* closeColl is ncclCommAbort's path: bounded like abort (100 ms), with slack for 2 cores. */
#define CLOSE_BOUND_MS 500
#define FORM_MS 15000
#define RUN_MS 20000
#define STOP_MS 5000
/* Ops every head completes before the fault, and each survivor at least after it. */
#define WARM_OPS 60
/* Lanes of the heads' plug-in (FTCC_LANES unset). Connect runs a confirmation op per lane: NCCL's
 * op k is the engine's op k + CN_LANES. Up to CN_LANES ops run side by side, done in any order. */
#define CN_LANES 4
#define AFTER_OPS 100
/* Ops of a script: about 1.6 s at the pace, the fault lands near op WARM_OPS. Every head posts
 * the same ops, as NCCL's proxies do: an open-ended script stopped by the parent would end at a
 * different op on each survivor, and the one that went further would finish its last ops with
 * the others gone. */
#define NOPS 400
#define NOPS_TWO 600 /* two faults, AFTER_OPS apart */
/* One op per head every PACE_US at most: ~250 ops/s. */
#define PACE_US 4000
#define DEPTH 8
/* Completions this far before and after the fault count for the longest gap around it (the
 * longest stall the fault may cause, and some more). */
#define GAP_BEFORE_MS 500
#define GAP_AFTER_MS (SILENT_BOUND_MS + 500)
/* The largest op of the script, for rebuilding expected results. */
#define MAX_BYTES (1 << 20)

static struct cn_heads g;
static char text[1 << 18];
static char logbuf[1 << 20];
static char acc[MAX_BYTES], tmp[MAX_BYTES];
static char veth_name[CN_MAX_HEADS][CHAOS_VETH_NAME_LEN];
static char veth_ip[CN_MAX_HEADS][CHAOS_VETH_IP_LEN];
static char veth_filter[CN_MAX_HEADS][CHAOS_VETH_NAME_LEN + 1];

/* float32 SUM, 4 KiB to 1 MiB, with int32 and bfloat16 entries. */
static const struct ft_spec script[] = {
	{ 1024, FTCC_FLOAT32, FTCC_SUM, 0 },  { 16384, FTCC_FLOAT32, FTCC_SUM, 1 },
	{ 4096, FTCC_INT32, FTCC_SUM, 0 },    { 262144, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 2048, FTCC_BFLOAT16, FTCC_SUM, 0 }, { 65536, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 8192, FTCC_INT32, FTCC_MAX, 1 },    { 32768, FTCC_BFLOAT16, FTCC_SUM, 1 },
};

#define NSPEC ((int)(sizeof(script) / sizeof(script[0])))

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

static void teardown(void)
{
	cn_heads_end(&g);
	chaos_fault_cleanup();
	chaos_veth_cleanup();
	chaos_proc_cleanup();
	test_fabric_cut_clear();
}

TestSuite(collnet_chaos, .fini = teardown);

static uint32_t bit(int i)
{
	return 1u << i;
}

static uint32_t all_of(int n)
{
	return (1u << n) - 1;
}

/* SIGKILLs head @i and reaps it; returns the time of the kill. *@bound_ms gets the stall its
 * survivors may see from then: KILL_BOUND_MS after its death could be seen (the reap is later
 * than its sockets' close), and never more than SILENT_BOUND_MS, the bound of a frozen head. */
static int64_t kill_head(int i, double *bound_ms)
{
	int64_t t = cn_heads_kill(&g, i);
	double reap_ms = chaos_ms(t, chaos_now_ns());

	*bound_ms = KILL_BOUND_MS + reap_ms;
	if (*bound_ms > SILENT_BOUND_MS) {
		*bound_ms = SILENT_BOUND_MS;
	}
	if (reap_ms > 100) {
		chaos_report(
			"collnet: head %d was reaped %.1f ms after SIGKILL (its sockets stayed "
			"open until then): its survivors' bound is %.1f ms",
			i, reap_ms, *bound_ms);
	}
	return t;
}

/* Every head's records and the end of its log, for failure messages. */
static const char *describe(void)
{
	return cn_heads_explain(&g, 4096 * 8, text, sizeof(text));
}

/* Options every test starts from: NOPS paced ops, depth 8, the failure timeout. */
static struct cn_opts base_opts(void)
{
	struct cn_opts o = { .depth = DEPTH,
			     .nops = NOPS,
			     .pace_us = PACE_US,
			     .timeout_ms = TIMEOUT_MS,
			     .script = script,
			     .nspec = NSPEC };

	return o;
}

/* Starts @n heads with @o and waits until all connected and completed WARM_OPS ops. */
static void start(int n, const struct cn_opts *o)
{
	cr_assert_eq(cn_heads_start(&g, n, o), 0, "cn_heads_start");
	cr_assert_eq(cn_heads_wait_stage(&g, all_of(n), CN_ST_CONNECTED, FORM_MS), 0,
		     "the heads did not connect\n%s", describe());
	cr_assert_eq(cn_heads_wait_ops(&g, all_of(n), WARM_OPS, RUN_MS), 0,
		     "the heads did not run %d ops\n%s", WARM_OPS, describe());
	for (int i = 0; i < n; i++) {
		cr_assert_eq(atomic_load(&cn_heads_head(&g, i)->err), 0,
			     "head %d failed before the fault\n%s", i, describe());
	}
}

/* Polls (bounded) until every head of @who has an op posted and not completed, so that the fault
 * that follows hits ops in flight rather than a pause between two paced ops. */
static void wait_inflight(uint32_t who)
{
	int64_t deadline = chaos_now_ns() + (int64_t)FORM_MS * 1000000;

	for (;;) {
		int all = 1;

		for (int i = 0; i < g.n && all; i++) {
			const struct cn_head *h = cn_heads_head(&g, i);
			int64_t next = atomic_load(&h->ndone);

			all = !(who >> i & 1) || (next < CN_MAX_OPS &&
						  atomic_load_explicit(&h->ops[next].state,
								       memory_order_acquire) == 1);
		}
		if (all) {
			return;
		}
		cr_assert_leq(chaos_now_ns(), deadline, "no op in flight on every head\n%s",
			      describe());
		sched_yield();
	}
}

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
	const struct cn_head *h = cn_heads_head(&g, i);

	for (int s = 0; s < CN_MAX_OPS; s++) {
		const struct cn_op *op = &h->ops[s];
		const struct ft_spec *spec = &script[s % NSPEC];

		if (atomic_load_explicit(&op->state, memory_order_acquire) != 2 ||
		    op->res != ncclSuccess || op->t_done < t_fault) {
			continue;
		}
		if (op->sum != ft_expect(spec, (uint64_t)s, before, (uint32_t)g.n,
					 FTCC_DEGRADED_SUM, acc, tmp, NULL)) {
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
	const struct cn_head *h = cn_heads_head(&g, i);
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

	for (int i = 0; i < g.n; i++) {
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

/* WARN lines in head @i's log that contain @a and (when not NULL) @b. */
static int warn_lines(int i, const char *a, const char *b)
{
	int count = 0;

	cn_heads_log(&g, i, logbuf, sizeof(logbuf));
	for (char *line = strtok(logbuf, "\n"); line; line = strtok(NULL, "\n")) {
		count += strstr(line, " WARN ") && strstr(line, a) && (!b || strstr(line, b));
	}
	return count;
}

/* Each head of @live logged exactly one WARN naming each head of @lost as lost. */
static void expect_lost_warns(uint32_t live, uint32_t lost)
{
	for (int i = 0; i < g.n; i++) {
		for (int v = 0; v < g.n; v++) {
			char name[24];
			int k;

			if (!(live >> i & 1) || !(lost >> v & 1)) {
				continue;
			}
			snprintf(name, sizeof(name), "node %d (", v);
			k = warn_lines(i, name, " lost;");
			cr_expect_eq(k, 1,
				     "head %d logged %d WARN lines saying node %d was lost\n%s", i,
				     k, v, describe());
		}
	}
}

/* Each head of @live exited 0 once closed, and no head's log holds a sanitizer report (the heads'
 * stderr is captured, so a report there would otherwise go unseen). */
static void expect_clean(uint32_t live)
{
	for (int i = 0; i < g.n; i++) {
		int st = g.exit_status[i];

		if (live >> i & 1) {
			cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
				  "head %d: wait status %#x\n%s", i, (unsigned)st, describe());
		}
		cn_heads_log(&g, i, logbuf, sizeof(logbuf));
		cr_expect(!strstr(logbuf, "runtime error:") && !strstr(logbuf, "Sanitizer"),
			  "head %d: a sanitizer report in its log:\n%s", i, logbuf);
	}
}

/* Every head of @live completed every op of the script with ncclSuccess. */
static void expect_all_success(uint32_t live)
{
	for (int i = 0; i < g.n; i++) {
		const struct cn_head *h = cn_heads_head(&g, i);
		int64_t first_bad = -1;
		int bad = 0;

		if (!(live >> i & 1)) {
			continue;
		}
		for (int s = 0; s < g.o.nops; s++) {
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
			     i, bad, g.o.nops, (long long)first_bad, describe());
		cr_expect_eq(atomic_load(&h->err), 0, "survivor %d: error %d at op %lld\n%s", i,
			     atomic_load(&h->err), (long long)h->err_seq, describe());
	}
}

/* The exact results of every op of every head (the victims' included), under @policy, with
 * the heads of @lost counted until @t_fault. Returns the number of degraded ops. */
static int expect_exact(uint32_t lost, int64_t t_fault, enum ftcc_degraded policy)
{
	char why[1024];
	int nfull = 0, ndeg = 0;
	int n = cn_heads_check(&g, all_of(g.n), lost, t_fault, policy, &nfull, &ndeg, why,
			       sizeof(why));

	cr_expect_geq(n, 0, "%s\n%s", why, describe());
	return ndeg;
}

/* One member list per epoch number across every head's log, and at least @min epochs named. */
static void expect_epochs(int min)
{
	char why[512];
	int n = cn_heads_epochs(&g, why, sizeof(why));

	chaos_report("collnet: %d epoch numbers named in the heads' logs, one member list each", n);
	cr_expect_geq(n, min, "%s: %d epochs in the heads' logs\n%s", n < 0 ? why : "", n,
		      describe());
}

/* The common end of a fault at @t_fault after which @live go on without @lost: the survivors
 * finish the script and close; every op succeeded with the exact result; the stall is within
 * @bound_ms; each survivor logged the loss once. */
static struct stall expect_survived(const char *kind, uint32_t live, uint32_t lost, int64_t t_fault,
				    enum ftcc_degraded policy, double bound_ms)
{
	struct stall st;
	int ndeg;

	cr_assert_eq(cn_heads_wait_ops(&g, live, g.o.nops, RUN_MS), 0,
		     "%s: the survivors did not finish the script\n%s", kind, describe());
	cr_expect_eq(cn_heads_stop(&g, live, 0, STOP_MS), 0, "%s: the survivors did not close\n%s",
		     kind, describe());
	expect_clean(live);
	expect_all_success(live);
	ndeg = expect_exact(lost, t_fault, policy);
	expect_epochs(2); /* the first epoch and the one without @lost, at least */
	cr_expect_geq(ndeg, AFTER_OPS, "%s: only %d ops without the lost heads\n%s", kind, ndeg,
		      describe());
	st = stall_over(live, t_fault, INT64_MAX, all_of(g.n));
	expect_stall(kind, &st, bound_ms);
	expect_lost_warns(live, lost);
	return st;
}

/* ---- kills ----------------------------------------------------------------------------------- */

/* SIGKILLs head @victim of @n mid-sequence under FTCC_DEGRADED=@degraded. */
static void kill_one(const char *kind, int n, int victim, const char *degraded,
		     enum ftcc_degraded policy)
{
	struct cn_opts o = base_opts();
	double bound;
	int64_t t;

	o.degraded = degraded;
	start(n, &o);
	wait_inflight(all_of(n));
	t = kill_head(victim, &bound);
	expect_survived(kind, all_of(n) & ~bit(victim), bit(victim), t, policy, bound);
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
	const uint32_t sets[3] = { all_of(4), all_of(4) & ~bit(2), bit(1) | bit(3) };
	int at = 0, counts[3] = { 0 }, first[3] = { 0, -1, -1 };

	for (int s = 0; s < g.o.nops; s++) {
		const struct ft_spec *spec = &script[s % NSPEC];
		const struct cn_op *ref = NULL;
		int found = -1;

		for (int i = 0; i < 4; i++) {
			const struct cn_op *op = &cn_heads_head(&g, i)->ops[s];

			if (atomic_load_explicit(&op->state, memory_order_acquire) != 2 ||
			    op->res != ncclSuccess) {
				continue;
			}
			if (!ref) {
				ref = op;
			} else if (op->sum != ref->sum || op->size != ref->size) {
				cr_expect_fail("op %d: heads disagree\n%s", s, describe());
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
			if (ft_expect(spec, (uint64_t)s, sets[k], 4, FTCC_DEGRADED_RESCALE, acc,
				      tmp, NULL) == ref->sum)
				found = k;
		}
		if (found < 0) {
			cr_expect_fail(
				"op %d (%zu x %s): not over the set %d or a later one (after its "
				"kill), nor, as an op beside op %d, over an earlier one; done %.1f "
				"ms after the first kill and %.1f ms after the second\n%s",
				s, spec->count, ftcc_dtype_name(spec->dtype), at, first[at],
				chaos_ms(t1, ref->t_done), chaos_ms(t2, ref->t_done), describe());
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
	struct cn_opts o = base_opts();
	uint32_t live1 = all_of(4) & ~bit(2), live = bit(1) | bit(3);
	struct stall s1, s2;
	int64_t t1, t2, base = 0;
	double b1, b2;

	o.nops = NOPS_TWO;
	start(4, &o);
	wait_inflight(all_of(4));
	t1 = kill_head(2, &b1);
	for (int i = 0; i < 4; i++) {
		int64_t nd = (live1 >> i & 1) ? atomic_load(&cn_heads_head(&g, i)->ndone) : 0;

		base = nd > base ? nd : base;
	}
	cr_assert_eq(cn_heads_wait_ops(&g, live1, base + AFTER_OPS, RUN_MS), 0,
		     "the first kill: no %d more ops\n%s", AFTER_OPS, describe());
	wait_inflight(live1);
	t2 = kill_head(0, &b2);
	cr_assert_eq(cn_heads_wait_ops(&g, live, g.o.nops, RUN_MS), 0,
		     "the survivors did not finish the script\n%s", describe());
	cr_expect_eq(cn_heads_stop(&g, live, 0, STOP_MS), 0, "the survivors did not close\n%s",
		     describe());
	expect_clean(live);
	expect_all_success(live);
	expect_exact_two(t1, t2);
	expect_epochs(3);
	s1 = stall_over(live, t1, t2, all_of(4));
	s2 = stall_over(live, t2, INT64_MAX, all_of(4) & ~bit(2));
	expect_stall("SIGKILL head 2 of 4, first of two", &s1, b1);
	expect_stall("SIGKILL head 0 of 4, second of two", &s2, b2);
	expect_lost_warns(live, bit(0) | bit(2));
}

/* ---- silence --------------------------------------------------------------------------------- */

/* SIGSTOP of head 0 of 3 (the coordinator's host): it stays frozen; the others go on after the
 * failure timeout. */
Test(collnet_chaos, sigstop_head0_of_3, .timeout = 30)
{
	struct cn_opts o = base_opts();
	struct stall st;
	int64_t t;

	start(3, &o);
	wait_inflight(all_of(3));
	t = cn_heads_freeze(&g, 0);
	cr_assert_neq(t, 0, "could not freeze head 0");
	st = expect_survived("SIGSTOP head 0 of 3", bit(1) | bit(2), bit(0), t,
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
	struct cn_opts o = base_opts();
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
	start(3, &o);
	for (int i = 0; i < 3; i++) {
		cn_heads_log(&g, i, logbuf, sizeof(logbuf));
		cr_assert(strstr(logbuf, veth_ip[i]), "head %d does not listen on %s (%s)\n%s", i,
			  veth_ip[i], veth_name[i], describe());
	}
	wait_inflight(all_of(3));
	t = chaos_now_ns();
	cr_assert_eq(chaos_nft_isolate_ip(table, veth_ip[2]), 0, "nft rules");
	/* over ib, its port leaves the emulated fabric too */
	cr_assert_eq(test_fabric_cut(cn_heads_head(&g, 2)->pid, 1), 0, "fabric cut");
	t_in = chaos_now_ns();
	expect_survived("nft cut of head 2 of 3", bit(0) | bit(1), bit(2), t, FTCC_DEGRADED_RESCALE,
			SILENT_BOUND_MS);
	h = cn_heads_head(&g, 2);
	cn_heads_wait_stage(&g, bit(2), CN_ST_RAN, LOST_BOUND_MS + 3000);
	err = atomic_load(&h->err);
	lost_ms = err ? chaos_ms(t, h->t_err) : -1;
	chaos_report("collnet: nft cut of head 2 of 3 (rules in %.1f ms): the cut head's test() "
		     "returned %d after %.1f ms at op %lld",
		     chaos_ms(t, t_in), err, lost_ms, (long long)h->err_seq);
	cr_expect_eq(err, ncclRemoteError, "the cut head ended with %d, not ncclRemoteError\n%s",
		     err, describe());
	cr_expect(lost_ms >= 0 && lost_ms <= LOST_BOUND_MS, "the cut head failed after %.1f ms",
		  lost_ms);
	cr_expect_eq(cn_heads_wait_stage(&g, bit(2), CN_ST_CLOSED, STOP_MS), 0,
		     "the cut head did not close\n%s", describe());
	cr_expect_eq(chaos_nft_delete(table), 0, "nft delete table %s", table);
}

/* ---- leaving --------------------------------------------------------------------------------- */

/* Head 1 of 4 closes its collComm with ops in flight (NCCL's ncclCommAbort path): closeColl is
 * bounded and the others go on as after a kill. */
Test(collnet_chaos, close_head1_of_4, .timeout = 30)
{
	struct cn_opts o = base_opts();
	const struct cn_head *h;
	double close_ms;
	int64_t t;

	start(4, &o);
	wait_inflight(all_of(4));
	t = chaos_now_ns();
	cr_expect_eq(cn_heads_stop(&g, bit(1), 1, STOP_MS), 0, "head 1 did not close\n%s",
		     describe());
	h = cn_heads_head(&g, 1);
	close_ms = chaos_ms(0, h->close_ns[CN_CLOSE_COLL]);
	chaos_report("collnet: head 1 closed with %d in flight: closeColl %.1f ms",
		     h->inflight_at_close, close_ms);
	cr_expect_eq(h->close_res[CN_CLOSE_COLL], ncclSuccess, "closeColl returned %d",
		     h->close_res[CN_CLOSE_COLL]);
	cr_expect_leq(close_ms, CLOSE_BOUND_MS, "closeColl took %.1f ms", close_ms);
	expect_survived("closeColl of head 1 of 4", all_of(4) & ~bit(1), bit(1), t,
			FTCC_DEGRADED_RESCALE, KILL_BOUND_MS);
}

/* ---- the group cannot go on ------------------------------------------------------------------ */

/* The lowest op head @i completed with an error (the heads test their requests in slot order, so
 * a later op may return its error first); -1 when none. Every op below it must have succeeded. */
static int64_t first_failed(int i, const char *kind)
{
	const struct cn_head *h = cn_heads_head(&g, i);
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
		     i, bad, describe());
	return f;
}

/* After a kill at @t each head of @live stops by itself: its first error (ncclRemoteError from
 * test()) came within @bound_ms (kill_head()), the lowest op that failed is the same op on every survivor
 * and completed after the kill, every op below it succeeded, and each logged a WARN containing
 * @needle. */
static void expect_stops(const char *kind, uint32_t live, int64_t t, double bound_ms,
			 const char *needle)
{
	int64_t f0 = -2;

	cr_assert_eq(cn_heads_wait_stage(&g, live, CN_ST_CLOSED, (int)bound_ms + STOP_MS), 0,
		     "%s: the survivors did not stop and close by themselves\n%s", kind,
		     describe());
	cr_expect_eq(cn_heads_stop(&g, live, 0, STOP_MS), 0, "%s: the survivors did not exit\n%s",
		     kind, describe());
	expect_clean(live);
	for (int i = 0; i < g.n; i++) {
		const struct cn_head *h = cn_heads_head(&g, i);
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
			     describe());
		cr_expect(ms >= 0 && ms <= bound_ms, "%s: head %d failed %.1f ms after the kill",
			  kind, i, ms);
		cr_expect(f >= 0 && h->ops[f].res == ncclRemoteError && h->ops[f].t_done >= t,
			  "%s: head %d: op %lld is not an error after the kill\n%s", kind, i,
			  (long long)f, describe());
		cr_expect(f0 == -2 || f0 == f,
			  "%s: the survivors' lowest failed ops are %lld and "
			  "%lld\n%s",
			  kind, (long long)f0, (long long)f, describe());
		f0 = f;
		cr_expect_geq(warn_lines(i, needle, NULL), 1,
			      "%s: head %d logged no WARN with %s\n%s", kind, i, needle,
			      describe());
	}
}

/* FTCC_DEGRADED=fail: the first op without head 2 of 3 is ncclRemoteError on both survivors; every
 * op before it succeeded over all three. */
Test(collnet_chaos, degraded_fail_kill_head2_of_3, .timeout = 30)
{
	struct cn_opts o = base_opts();
	uint32_t live = bit(0) | bit(1);
	double bound;
	int64_t t;
	int ndeg;

	o.degraded = "fail";
	start(3, &o);
	wait_inflight(all_of(3));
	t = kill_head(2, &bound);
	expect_stops("FTCC_DEGRADED=fail", live, t, bound, "FTCC_DEGRADED=fail");
	ndeg = expect_exact(bit(2), t, FTCC_DEGRADED_FAIL);
	cr_expect_eq(ndeg, 0, "%d ops succeeded without head 2 under FTCC_DEGRADED=fail", ndeg);
	expect_lost_warns(live, bit(2));
}

/* Head 2 of 3 fails an op locally (out of memory, FTCC_FAULT): it leaves the group and its
 * test() returns an error (it stays failed); the other two finish every op without it, as
 * quickly as after a kill, never waiting for it. With lanes, the ops beside the failed one (up
 * to CN_LANES - 1 before and after it) may end either way on head 2: the ones before were in
 * flight when it left, the ones after may have run before the failed op started. */
Test(collnet_chaos, local_failure_head2_of_3, .timeout = 30)
{
	struct cn_opts o = base_opts();
	const struct cn_head *h;
	const struct cn_op *fop;
	uint32_t live = bit(0) | bit(1);
	char fault[64];

	unsetenv("FTCC_LANES"); /* the heads run the default, CN_LANES */
	snprintf(fault, sizeof(fault), "FTCC_FAULT=input:%d:0:fail", WARM_OPS + 20 + CN_LANES);
	o.env[2] = fault;
	start(3, &o);
	h = cn_heads_head(&g, 2);
	cr_assert_eq(cn_heads_wait_stage(&g, bit(2), CN_ST_RAN, RUN_MS), 0,
		     "head 2 did not fail\n%s", describe());
	/* The failed op ends with ncclSystemError. The head may see a later op's error first:
	 * once it has left, an op it posts fails at once (ncclRemoteError), possibly before its
	 * test() of the failed op; and the others may finish the failed op without it before
	 * either. So the fault counts from the failed op's post. */
	fop = &h->ops[WARM_OPS + 20];
	cr_assert_eq(atomic_load_explicit(&fop->state, memory_order_acquire), 2,
		     "head 2 did not complete op %d\n%s", WARM_OPS + 20, describe());
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
	expect_survived("local failure of head 2 of 3", live, bit(2), fop->t_post,
			FTCC_DEGRADED_RESCALE, KILL_BOUND_MS);
}

/* FTCC_COLLNET_MIN_NODES=3 with 3 heads: one kill leaves too few inputs; the survivors stop
 * with ncclRemoteError and a WARN naming the setting. */
Test(collnet_chaos, min_nodes3_kill_head2_of_3, .timeout = 30)
{
	struct cn_opts o = base_opts();
	uint32_t live = bit(0) | bit(1);
	double bound;
	int64_t t;

	o.min_nodes = 3;
	start(3, &o);
	wait_inflight(all_of(3));
	t = kill_head(2, &bound);
	expect_stops("FTCC_COLLNET_MIN_NODES=3", live, t, bound, "FTCC_COLLNET_MIN_NODES=3");
	expect_lost_warns(live, bit(2));
}
