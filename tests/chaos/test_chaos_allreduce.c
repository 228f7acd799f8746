/* The fault-tolerant allreduce (ftcc.h) under failures: a member dies at each named phase of the
 * engine (FTCC_FAULT), is SIGKILLed, frozen or cut off by nftables while ops run, aborts, or dies
 * and comes back (with and without catch-up); the degraded policies; and a randomized soak of kills
 * and restarts. After each, every survivor must have completed every op within the bound, with
 * bit-identical results and contributor sets everywhere, exactly the reduction over that set, and
 * only the failed left out.
 *
 * Members run in their own processes (tests/lib/ft_group.h), on 127.0.0.(10 + i). Needs root for
 * the nftables cut (skipped otherwise). Lines "chaos: ft: ..." carry the measurements: the stall,
 * from the failure to the op in flight completing at the survivors. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "chaos_fault.h"
#include "chaos_proc.h"
#include "ft_group.h"

#define TIMEOUT_MS 1000
/* A SIGKILL closes the member's connections: the op in flight completes within this. */
#define KILL_BOUND_MS 1000
/* Silence needs the failure timeout. */
#define FREEZE_BOUND_MS (TIMEOUT_MS + 1000)
/* The cut member gives up: the failure timeout of silence, a search for a successor bounded by 3
 * failure timeouts (ctl_sm.h), then 1 s of slack. */
#define LOST_BOUND_MS (TIMEOUT_MS + 3 * TIMEOUT_MS + 1000)
/* A join must not stall the others longer than this. */
#define JOIN_GAP_MS 1000
/* ftcc.h: abort returns within 100 ms. */
#define ABORT_BOUND_MS 100
#define FORM_MS 10000
#define RUN_MS 30000
/* Waits run this much past a bound so that a late event is measured, not just missed. */
#define GRACE_MS 3000
/* ftcc.h: destroy is bounded like abort; slack for a loaded machine. */
#define DESTROY_BOUND_MS 500
/* A fixed script has K ops; faults hit op SEQ. */
#define K 12
#define SEQ 5
/* Open-ended scripts: one op per member every PACE_US at most. */
#define PACE_US 20000
/* Cut tests: slow enough that ops are still due after op 5 when the rules are in, even when
 * forming the group took a while (the pace counts from the group start). */
#define CUT_PACE_US 50000

static struct ft_group grp;
static char text[1 << 17];

static const char *describe(void);

static void chaos_teardown(void)
{
	/* FT_GROUP_VERBOSE=1: every record and log, also when the test passed. */
	if (getenv("FT_GROUP_VERBOSE") && grp.sh)
		printf("%s\n", describe());
	ft_group_end(&grp, 2000, NULL);
	chaos_fault_cleanup();
	chaos_proc_cleanup();
}

TestSuite(ft_kill, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_freeze, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_cut, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_join, .fini = chaos_teardown, .timeout = 90);
TestSuite(ft_degraded, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_abort, .fini = chaos_teardown, .timeout = 60);
TestSuite(ft_soak, .fini = chaos_teardown, .timeout = 240);

/* 1 MiB of float32: the ring (above FTCC_RD_MAX_BYTES), long enough to die in. */
static const struct ft_spec big[] = { { 262144, FTCC_FLOAT32, FTCC_SUM, 0 } };
/* 8 elements: recursive doubling. */
static const struct ft_spec small[] = { { 8, FTCC_FLOAT32, FTCC_SUM, 0 },
					{ 8, FTCC_INT32, FTCC_MAX, 1 } };
/* Open-ended scripts (thousands of ops, each checked at the end): 256 KiB for the ring. */
static const struct ft_spec paced[] = {
	{ 65536, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 8, FTCC_INT32, FTCC_SUM, 1 },
	{ 1000, FTCC_FLOAT32, FTCC_AVG, 1 },
	{ 4099, FTCC_BFLOAT16, FTCC_MAX, 0 },
};
/* Both algorithms, several types. */
static const struct ft_spec mixed[] = {
	{ 262144, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 8, FTCC_INT32, FTCC_SUM, 1 },
	{ 1000, FTCC_FLOAT32, FTCC_AVG, 1 },
	{ 65537, FTCC_BFLOAT16, FTCC_MAX, 0 },
};

static uint32_t ids_all(int n)
{
	return (1u << n) - 1;
}

static uint32_t bit(int i)
{
	return 1u << i;
}

/* "{0,2}" for a set of ids; the static buffer of slot @k (0..3). */
static const char *ids(uint32_t mask, int k)
{
	static char buf[4][64];
	size_t at = 0;

	buf[k][at++] = '{';
	for (int i = 0; i < 32 && at + 4 < sizeof(buf[k]); i++)
		if (mask >> i & 1)
			at += (size_t)snprintf(buf[k] + at, sizeof(buf[k]) - at, "%s%d",
					       at > 1 ? "," : "", i);
	snprintf(buf[k] + at, sizeof(buf[k]) - at, "}");
	return buf[k];
}

static const char *describe(void)
{
	size_t at = ft_group_describe(&grp, 6, text, sizeof(text));

	for (int i = 0; i < grp.n && at + 1 < sizeof(text); i++) {
		char log[3072];
		int k;

		ft_group_log(&grp, i, log, sizeof(log));
		k = snprintf(text + at, sizeof(text) - at, "--- member %d, end of its log:\n%s\n",
			     i, log);
		at = k < 0 ? at : at + (size_t)k < sizeof(text) ? at + (size_t)k : sizeof(text) - 1;
	}
	return text;
}

/* Agreement and exact results over every record; returns the number of ops checked. */
static int expect_agree(void)
{
	char why[1024];
	int checked = ft_group_check(&grp, why, sizeof(why));

	cr_expect_geq(checked, 0, "%s\n%s", why, describe());
	return checked;
}

/* Ends the group: every process still running destroys its communicator, in time, and exits 0. */
static void end_group(void)
{
	double ms;

	cr_expect_eq(ft_group_end(&grp, 5000, &ms), 0, "members did not exit cleanly");
	cr_expect_leq(ms, DESTROY_BOUND_MS, "ftcc_comm_destroy took %.1f ms", ms);
}

/* Every member of @live ended its script without an error, at op @limit. */
static void expect_finished(uint32_t live, uint64_t limit)
{
	for (int i = 0; i < grp.n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		if (!(live >> i & 1))
			continue;
		cr_expect_eq(atomic_load(&r->end_rc), 0, "survivor %d ended with %s (\"%s\")\n%s",
			     i, ftcc_strerror(atomic_load(&r->end_rc)), r->last_error, describe());
		cr_expect_eq(r->view1.next_seq, limit, "survivor %d stopped at op %llu of %llu", i,
			     (unsigned long long)r->view1.next_seq, (unsigned long long)limit);
	}
}

/* The first op from @from on whose contributor set lacks one of @gone (-1 if none below @to), and
 * checks that every op from @from to @to - 1 was completed by all of @live, that the sets before it
 * are @before and from it on exactly @live. */
static int64_t expect_transition(uint32_t live, uint32_t gone, uint32_t before, uint64_t from,
				 uint64_t to)
{
	int64_t first = -1;

	for (uint64_t s = from; s < to; s++) {
		struct ft_seq_info in;

		ft_group_seq(&grp, s, &in);
		cr_expect_eq(in.done_by & live, live, "op %llu: done by %s only, not %s\n%s",
			     (unsigned long long)s, ids(in.done_by, 0), ids(live, 1), describe());
		if (first < 0 && (in.mask & gone) != gone)
			first = (int64_t)s;
		if (first < 0)
			cr_expect_eq(in.mask, before, "op %llu: set %s, expected %s",
				     (unsigned long long)s, ids(in.mask, 0), ids(before, 1));
		else
			cr_expect_eq(in.mask, live,
				     "op %llu: set %s after the failure, expected %s",
				     (unsigned long long)s, ids(in.mask, 0), ids(live, 1));
	}
	return first;
}

/* ---- a member dies at a named phase of the engine -------------------------------------------- */

/* One test: @fault[i] arms member i; the members in @may_survive need not reach their point. */
struct fault_case {
	const char *name;
	int n;
	const char *fault[FT_GROUP_MAX_N];
	uint32_t may_survive;
	const struct ft_spec *script;
	int nspec;
	const char *algo;
	int resume_ok; /* op SEQ may be finished from the data, with the dead in its set */
	int bound_ms;  /* op SEQ completes at the survivors within this after the first death */
};

static void fault_kill(const struct fault_case *c)
{
	struct ft_group_opts o = {
		.timeout_ms = TIMEOUT_MS,
		.degraded = FTCC_DEGRADED_SUM,
		.limit = K,
		.script = c->script,
		.nspec = c->nspec,
		.algo = c->algo,
	};
	uint32_t all = ids_all(c->n), dead = 0, armed = 0;
	int64_t t_dead = 0;
	struct ft_seq_info in;
	double hi = -1, lo = -1, window = 0;
	char died[256] = "";
	int checked;

	for (int i = 0; i < c->n; i++) {
		o.fault[i] = c->fault[i];
		armed |= c->fault[i] ? bit(i) : 0;
	}
	cr_assert_eq(ft_group_start(&grp, c->name, c->n, &o), 0, "could not start");
	cr_assert_eq(ft_group_wait_created(&grp, all, FORM_MS), 0, "no group\n%s", describe());

	/* Every armed member dies by its own SIGKILL at its point, or may survive and finish its
	 * script. Polled together, so that each death is timed within a millisecond. */
	for (int64_t deadline = chaos_now_ns() + (int64_t)RUN_MS * 1000000; armed;) {
		for (int i = 0; i < c->n; i++) {
			const struct ft_run *r = ft_group_cur(&grp, i);
			int st = -1;
			int64_t t;

			if (!(armed >> i & 1))
				continue;
			t = ft_group_wait_exit(&grp, i, 0, &st);
			if (!t && (c->may_survive >> i & 1) && atomic_load(&r->ended)) {
				snprintf(died + strlen(died), sizeof(died) - strlen(died),
					 " member %d did not reach %s;", i, c->fault[i]);
				armed &= ~bit(i);
			}
			if (!t)
				continue;
			cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
				  "member %d ended with status %#x, not by SIGKILL at %s\n%s", i,
				  st, c->fault[i], describe());
			armed &= ~bit(i);
			dead |= bit(i);
			t_dead = !t_dead || t < t_dead ? t : t_dead;
			snprintf(died + strlen(died), sizeof(died) - strlen(died),
				 " member %d died at %s;", i, c->fault[i]);
		}
		cr_assert(!armed || chaos_now_ns() < deadline, "%s did not die at their points\n%s",
			  ids(armed, 0), describe());
		chaos_sleep_ms(1);
	}
	cr_assert_eq(ft_group_wait_ended(&grp, all & ~dead, RUN_MS), 0,
		     "the survivors did not finish\n%s", describe());
	expect_finished(all & ~dead, K);
	checked = expect_agree();

	/* Ops before SEQ have everyone; SEQ the survivors (or, resumed, more); after it the
	 * survivors. */
	for (uint64_t s = 0; s < K; s++) {
		uint32_t live = all & ~dead;

		ft_group_seq(&grp, s, &in);
		cr_expect_eq(in.done_by & live, live, "op %llu: done by %s only\n%s",
			     (unsigned long long)s, ids(in.done_by, 0), describe());
		if (s < SEQ) {
			cr_expect_eq(in.mask, all, "op %llu before the fault: set %s",
				     (unsigned long long)s, ids(in.mask, 0));
		} else if (s > SEQ) {
			cr_expect_eq(in.mask, live, "op %llu after the fault: set %s, expected %s",
				     (unsigned long long)s, ids(in.mask, 0), ids(live, 1));
		} else if (in.mask != live) {
			cr_expect(c->resume_ok && (in.mask & live) == live && in.resumed,
				  "op %d: set %s (resumed %d), expected %s%s\n%s", SEQ,
				  ids(in.mask, 0), in.resumed, ids(live, 1),
				  c->resume_ok ? " or a resumed superset" : "", describe());
		}
	}
	/* Each death is seen by the test within about 1 ms; it came after the victim started op
	 * SEQ. */
	for (int i = 0; i < c->n; i++) {
		const struct ft_run *r = (dead >> i & 1) ? ft_group_cur(&grp, i) : NULL;

		if (r && r->ops[SEQ].t_start && chaos_ms(r->ops[SEQ].t_start, t_dead) > window)
			window = chaos_ms(r->ops[SEQ].t_start, t_dead);
	}
	ft_group_seq(&grp, SEQ, &in);
	for (int i = 0; i < c->n && dead; i++) {
		const struct ft_op *op = ft_group_op(&grp, i, SEQ);
		double ms;

		if ((dead >> i & 1) || !op)
			continue;
		ms = chaos_ms(t_dead, op->t_done);

		hi = hi < 0 || ms > hi ? ms : hi;
		lo = lo < 0 || ms < lo ? ms : lo;
	}
	chaos_report(
		"ft: %s:%s op %d done at the survivors %.1f ms (max) %.1f (min) after the "
		"death was seen (%.1f ms after the victim started op %d), set %s (%s, attempts "
		"%u, epoch %llu); %d ops checked",
		c->name, died, SEQ, hi, lo, window, SEQ, ids(in.mask, 0),
		in.resumed ? "resumed" : "redone", in.attempts_max, (unsigned long long)in.epoch,
		checked);
	if (dead)
		cr_expect_leq(hi, c->bound_ms ? c->bound_ms : KILL_BOUND_MS,
			      "op %d done %.1f ms after the death\n%s", SEQ, hi, describe());
	end_group();
}

/* One victim of @nn members armed with @spec, on the ring (1 MiB) or recursive doubling (8). */
#define RING(nm, nn, victim, spec, resume)                                                         \
	fault_kill(&(struct fault_case){ .name = nm,                                               \
					 .n = nn,                                                  \
					 .fault = { [victim] = spec },                             \
					 .script = big,                                            \
					 .nspec = 1,                                               \
					 .algo = "ring",                                           \
					 .resume_ok = resume })
#define RD(nm, nn, victim, spec)                                                                   \
	fault_kill(&(struct fault_case){ .name = nm,                                               \
					 .n = nn,                                                  \
					 .fault = { [victim] = spec },                             \
					 .script = small,                                          \
					 .nspec = 2,                                               \
					 .algo = "rd",                                             \
					 .resume_ok = 1 })

/* Reduce-scatter: the victim's input is in no chunk the survivors finished: redone without it. */
Test(ft_kill, rs_step0_member1)
{
	RING("rs0m1", 3, 1, "rs:5:0", 0);
}

Test(ft_kill, rs_step1_member1)
{
	RING("rs1m1", 3, 1, "rs:5:1", 0);
}

Test(ft_kill, rs_step0_member0)
{
	RING("rs0m0", 3, 0, "rs:5:0", 0);
}

Test(ft_kill, rs_step1_member0)
{
	RING("rs1m0", 3, 0, "rs:5:1", 0);
}

/* Allgather: the survivors may hold every reduced chunk but the victim's (finish from the data) or
 * redo; either, as long as they agree. */
Test(ft_kill, ag_step0_member1)
{
	RING("ag0m1", 3, 1, "ag:5:0", 1);
}

Test(ft_kill, ag_step1_member1)
{
	RING("ag1m1", 3, 1, "ag:5:1", 1);
}

Test(ft_kill, ag_step0_member0)
{
	RING("ag0m0", 3, 0, "ag:5:0", 1);
}

Test(ft_kill, ag_step1_member0)
{
	RING("ag1m0", 3, 0, "ag:5:1", 1);
}

Test(ft_kill, ag_step1_member2_of_5)
{
	RING("ag1m2of5", 5, 2, "ag:5:1", 1);
}

/* Recursive doubling, 3 members (one folds in) and 4 (a round after the first exchange). */
Test(ft_kill, rd_member1)
{
	RD("rdm1", 3, 1, "rd:5");
}

Test(ft_kill, rd_member0)
{
	RD("rdm0", 3, 0, "rd:5");
}

Test(ft_kill, rd_round1_member2_of_4)
{
	RD("rd1m2of4", 4, 2, "rd:5:1");
}

/* Two members die at the same point of one op: the three others finish it. */
Test(ft_kill, two_in_one_op_of_5)
{
	fault_kill(&(struct fault_case){ .name = "two5",
					 .n = 5,
					 .fault = { [1] = "rs:5:0", [3] = "rs:5:0" },
					 .script = big,
					 .nspec = 1,
					 .algo = "ring",
					 .bound_ms = 2 * KILL_BOUND_MS });
}

/* A second member dies while the survivors of the first failure settle op SEQ: at the new epoch,
 * before the resume reports, after the decision, before filling missing chunks, before the have
 * notices. The last two happen only when the op is finished from the data. */
static void second_failure(const char *name, int n, const char *first, const char *second,
			   int may_skip)
{
	struct fault_case c = { .name = name,
				.n = n,
				.may_survive = may_skip ? bit(1) : 0,
				.script = big,
				.nspec = 1,
				.algo = "ring",
				.resume_ok = 1,
				.bound_ms = 2 * KILL_BOUND_MS };

	c.fault[n - 1] = first;
	c.fault[1] = second;
	fault_kill(&c);
}

Test(ft_kill, second_at_epoch)
{
	second_failure("epoch4", 4, "rs:5:0", "epoch:5", 0);
}

Test(ft_kill, second_at_report)
{
	second_failure("report5", 5, "ag:5:1", "report:5", 0);
}

Test(ft_kill, second_at_decide)
{
	second_failure("decide5", 5, "ag:5:1", "decide:5", 0);
}

Test(ft_kill, second_at_fill)
{
	second_failure("fill5", 5, "ag:5:1", "fill:5", 1);
}

Test(ft_kill, second_at_have)
{
	second_failure("have5", 5, "ag:5:1", "have:5", 1);
}

/* A member dies as its communicator is created, before the group forms: the others either form
 * without it and run every op, or give up within the connect bound; never hang. */
static void connect_kill(const char *name, int victim)
{
	const int n = 3, connect_ms = 3000;
	struct ft_group_opts o = { .timeout_ms = TIMEOUT_MS,
				   .connect_timeout_ms = connect_ms,
				   .degraded = FTCC_DEGRADED_SUM,
				   .limit = K,
				   .script = mixed,
				   .nspec = 4 };
	uint32_t live = ids_all(n) & ~bit(victim);
	int64_t t0 = chaos_now_ns(), t_dead;
	int st = -1, formed = 0, failed = 0, why = 0;
	double created_ms = 0;

	o.fault[victim] = "connect:0";
	cr_assert_eq(ft_group_start(&grp, name, n, &o), 0);
	t_dead = ft_group_wait_exit(&grp, victim, FORM_MS, &st);
	cr_assert(t_dead && WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
		  "member %d did not die at connect (status %#x)\n%s", victim, st, describe());
	ft_group_wait_created(&grp, live, connect_ms + GRACE_MS);
	for (int i = 0; i < n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);
		int c = atomic_load(&r->created);

		if (!(live >> i & 1))
			continue;
		cr_assert_neq(c, 0, "member %d: ftcc_comm_create still waiting after %d ms\n%s", i,
			      connect_ms + GRACE_MS, describe());
		formed += c == 1;
		failed += c < 0;
		why = c < 0 ? c : why;
		if (chaos_ms(t0, atomic_load(&r->t_created)) > created_ms)
			created_ms = chaos_ms(t0, atomic_load(&r->t_created));
	}
	if (formed) {
		cr_assert_eq(ft_group_wait_ended(&grp, live, RUN_MS), 0, "no progress\n%s",
			     describe());
		expect_finished(live, K);
		for (uint64_t s = 0; s < K; s++) {
			struct ft_seq_info in;

			ft_group_seq(&grp, s, &in);
			cr_expect_eq(in.mask, live, "op %llu: set %s", (unsigned long long)s,
				     ids(in.mask, 0));
		}
	}
	for (int i = 0; failed && i < n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		if (live >> i & 1)
			cr_expect_leq(chaos_ms(t0, atomic_load(&r->t_created)),
				      connect_ms + GRACE_MS, "member %d gave up after %.1f ms", i,
				      chaos_ms(t0, atomic_load(&r->t_created)));
	}
	expect_agree();
	chaos_report("ft: %s: member %d died at connect; %d survivors formed, %d gave up (%s), "
		     "last create returned %.1f ms after the start",
		     name, victim, formed, failed, failed ? ftcc_strerror(why) : "-", created_ms);
	cr_expect(formed == 0 || failed == 0, "%d formed and %d gave up\n%s", formed, failed,
		  describe());
}

Test(ft_kill, connect_member1)
{
	connect_kill("conn1", 1);
}

Test(ft_kill, connect_member0)
{
	connect_kill("conn0", 0);
}

/* The test SIGKILLs a member at no chosen phase, right after it completed op 5 of 20. */
static void kill_mid(const char *name, int n, int victim)
{
	struct ft_group_opts o = { .timeout_ms = TIMEOUT_MS,
				   .degraded = FTCC_DEGRADED_SUM,
				   .limit = 20,
				   .pace_us = PACE_US,
				   .script = mixed,
				   .nspec = 4 };
	uint32_t all = ids_all(n), live = all & ~bit(victim);
	int64_t t_kill, first;
	uint64_t at = 0;
	double hi, lo;

	cr_assert_eq(ft_group_start(&grp, name, n, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, all, FORM_MS), 0, "no group\n%s", describe());
	cr_assert_eq(ft_group_wait_op(&grp, bit(victim), 5, RUN_MS), 0, "no op 5\n%s", describe());
	t_kill = ft_group_kill(&grp, victim);
	cr_assert_eq(ft_group_wait_ended(&grp, live, RUN_MS), 0, "the survivors did not finish\n%s",
		     describe());
	expect_finished(live, 20);
	first = expect_transition(live, bit(victim), all, 0, 20);
	cr_expect_geq(first, 6, "op %lld lacks the victim, which completed op 5", (long long)first);
	hi = ft_group_stall(&grp, live, t_kill, &lo, &at);
	chaos_report("ft: %s: member %d SIGKILLed after op 5: the survivors' next op done %.1f ms "
		     "(max) %.1f (min) after; first op without it %lld; %d ops checked",
		     name, victim, hi, lo, (long long)first, expect_agree());
	cr_expect(hi >= 0 && hi <= KILL_BOUND_MS, "op %llu done %.1f ms after the kill\n%s",
		  (unsigned long long)at, hi, describe());
	end_group();
}

Test(ft_kill, sigkill_mid_run_member1)
{
	kill_mid("mid1", 3, 1);
}

Test(ft_kill, sigkill_mid_run_member0)
{
	kill_mid("mid0", 3, 0);
}

Test(ft_kill, sigkill_mid_run_member3_of_4)
{
	kill_mid("mid3of4", 4, 3);
}

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
