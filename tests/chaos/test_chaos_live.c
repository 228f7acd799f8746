/* SPDX-License-Identifier: BSD-3-Clause */
/* Faults between members that are both alive, each kind for groups of 2, 3, 4 and 8, checked
 * with the invariants over every process's records (one member list per epoch number, one result
 * and one contributor set per op, exact; a member never faulted in every contributor set and never
 * out of the group), who leaves the group, and the stall of the others:
 *  - a data connection reset (ss -K, an nftables reject with tcp reset, FTCC_FAULT reset), every
 *    connection of one member reset (a NIC flap), a slow member (SIGSTOP well under the timeout,
 *    CPU hogs): nobody leaves;
 *  - a one-way cut between two members that both still reach the coordinator, a member whose
 *    every data-plane send fails: exactly one member leaves, by the cut rule (the one with the
 *    most broken links, ties the higher id);
 *  - a local failure (an allocation, injected or under RLIMIT_AS): that member leaves, at once;
 *  - a failure inside a joiner's admission window, the coordinator's host killed during an
 *    accusation: the survivors go on, nobody hangs; a group of two never goes on on both sides;
 *  - a reset, a one-way cut and a member that cannot send with three streams' ops in flight, as
 *    above.
 * Members run in their own processes on 127.0.0.(10 + i) (tests/lib/ft_group.h). Lines
 * "chaos: live: ..." carry the measurements. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_net.h"
#include "chaos_fault.h"
#include "chaos_proc.h"
#include "ft_chaos.h"

TestSuite(live, .fini = chaos_teardown, .timeout = 90);

/* Ops per run, and the op every member completes before the fault. */
#define LIVE_OPS 48
#define LIVE_AT 10
/* A reset, a flap, a slow member: a retry epoch at most, nobody removed. */
#define LIVE_RESET_BOUND_MS 1500
/* A link that stays broken: detection (half the timeout of no acknowledgement or no connection),
 * a quarter for the reports, the retries, a commit. */
#define LIVE_CUT_BOUND_MS (3 * TIMEOUT_MS + 2000)
/* The coordinator's host dies during an accusation: the above plus a takeover. */
#define LIVE_TAKEOVER_BOUND_MS (6 * TIMEOUT_MS + 2000)

/* Op s is live_script[s % 3]: recursive doubling, a small in-place op, the ring in place. */
static const struct ft_spec live_script[] = {
	{ 8, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 1000, FTCC_INT32, FTCC_MAX, 1 },
	{ 65536, FTCC_FLOAT32, FTCC_SUM, 1 },
};

static char nft_table[32];

/* Streams of the case (ft_group_opts.nstreams), 0: one. With streams each member keeps ops of
 * every stream in flight, each stream's on data planes of its own. */
static int live_streams;

static void live_opts(struct ft_group_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->timeout_ms = TIMEOUT_MS;
	o->degraded = FTCC_DEGRADED_SUM;
	o->limit = LIVE_OPS;
	o->pace_us = PACE_US;
	o->script = live_script;
	o->nspec = 3;
	if (live_streams) {
		uint64_t period = 2 * (uint64_t)live_streams - 1;

		o->nstreams = live_streams;
		o->depth = 2 * live_streams;
		o->limit = (LIVE_OPS + period - 1) / period * period; /* whole periods */
	}
}

static void live_start(const char *name, int n, const struct ft_group_opts *o)
{
	cr_assert_eq(ft_group_start(&grp, name, n, o), 0, "could not start");
	cr_assert_eq(ft_group_wait_created(&grp, ids_all(n), FORM_MS), 0, "no group\n%s",
		     describe());
}

/* The control listeners' ports of the group: faults on the data plane leave them alone. */
static int ctl_ports(uint16_t *ports)
{
	for (int i = 0; i < grp.n; i++)
		ports[i] = (uint16_t)atoi(strrchr(grp.addr[i], ':') + 1);
	return grp.n;
}

/* Waits until every member in @who completed op @seq; returns the time then. */
static int64_t live_at(uint32_t who, uint64_t seq)
{
	cr_assert_eq(ft_group_wait_op(&grp, who, seq, RUN_MS), 0, "op %llu not reached\n%s",
		     (unsigned long long)seq, describe());
	return chaos_now_ns();
}

static void nft_open(void)
{
	char why[128];

	cr_assert(chaos_nft_usable(why, sizeof(why)), "nft: %s", why);
	cr_assert_eq(chaos_nft_table(nft_table, sizeof(nft_table)), 0);
}

/* Starts group @name of @n with the live options, runs it to op LIVE_AT, then adds an nftables
 * rule with @verdict to every data packet from member @a to member @b (control ports spared).
 * Returns the time of the fault; *@handle (may be NULL) gets the rule's handle. */
static int64_t live_cut(const char *name, int n, int a, int b, const char *verdict, long *handle)
{
	struct ft_group_opts o;
	uint16_t keep[FT_GROUP_MAX_N];
	int64_t t;
	long h;

	live_opts(&o);
	nft_open();
	live_start(name, n, &o);
	t = live_at(ids_all(n), LIVE_AT);
	h = chaos_nft_between(nft_table, grp.ip[a], grp.ip[b], keep, ctl_ports(keep), verdict);
	cr_assert_geq(h, 0);
	if (strcmp(verdict, "drop") == 0) /* over ib, the emulated fabric drops them as well */
		cr_assert_eq(test_fabric_cut_way(ft_group_cur(&grp, a)->pid,
						 ft_group_cur(&grp, b)->pid, 1),
			     0, "fabric cut");
	if (handle)
		*handle = h;
	return t;
}

/* The end of every case: the members of @live finish the script; the invariants hold with
 * @steady never faulted; the others' stall after @t_fault stays within @bound_ms. */
static double live_finish(const char *what, uint32_t live, uint32_t steady, int64_t t_fault,
			  int bound_ms)
{
	char why[1024];
	double hi;
	int checked;

	cr_assert_eq(ft_group_wait_ended(&grp, live, RUN_MS), 0, "%s: no finish\n%s", what,
		     describe());
	expect_finished(live, grp.o.limit);
	checked = ft_group_invariants(&grp, steady, why, sizeof(why));
	cr_expect_geq(checked, 0, "%s: %s\n%s", what, why, describe());
	hi = ft_group_stall(&grp, live, t_fault, NULL, NULL);
	chaos_report("live: %s: the others' next op done %.1f ms after the fault; %s went on; "
		     "%d ops checked",
		     what, hi, ids(live, 0), checked);
	cr_expect(hi >= 0 && hi <= bound_ms, "%s: stalled %.1f ms (bound %d)\n%s", what, hi,
		  bound_ms, describe());
	return hi;
}

/* The pair a fault between two members hits: the first and the last member. */
static void pair_of(int n, int *a, int *b)
{
	*a = 0;
	*b = n - 1;
}

/* ---- nobody leaves -------------------------------------------------------------------------- */

/* The data connections between two members are destroyed (ss -K): the kernel resets them. */
static void reset_ss(int n)
{
	struct ft_group_opts o;
	uint16_t keep[FT_GROUP_MAX_N];
	char what[64];
	int a, b, killed;
	int64_t t;

	live_opts(&o);
	pair_of(n, &a, &b);
	snprintf(what, sizeof(what), "ss -K of the data links %d-%d of %d", a, b, n);
	live_start("reset-ss", n, &o);
	t = live_at(ids_all(n), LIVE_AT);
	killed = chaos_kill_flows(grp.ip[a], grp.ip[b], keep, ctl_ports(keep));
	cr_expect_geq(killed, 1, "no data connection between %d and %d to reset", a, b);
	live_finish(what, ids_all(n), ids_all(n), t, LIVE_RESET_BOUND_MS);
	end_group();
}

/* A firewall answers one member's data packets to another with resets for 200 ms. */
static void reset_nft(int n)
{
	char what[64];
	long h;
	int a, b;
	int64_t t;

	pair_of(n, &a, &b);
	snprintf(what, sizeof(what), "nft reject %d->%d for 200 ms of %d", a, b, n);
	t = live_cut("reset-nft", n, a, b, "reject with tcp reset", &h);
	chaos_sleep_ms(200);
	cr_expect_eq(chaos_nft_del_rule(nft_table, h), 0);
	live_finish(what, ids_all(n), ids_all(n), t, LIVE_RESET_BOUND_MS + 200);
	end_group();
}

/* A member's data-plane send fails with ECONNRESET in the middle of a ring op (FTCC_FAULT
 * reset): it closes that connection, as a reset does. */
static void reset_inject(int n)
{
	struct ft_group_opts o;
	char what[64];
	int a, b;
	const struct ft_op *op;

	live_opts(&o);
	pair_of(n, &a, &b);
	/* op 11 is the ring (11 % 3 == 2) */
	o.fault[b] = "rs:11:0:reset";
	snprintf(what, sizeof(what), "injected reset at member %d of %d", b, n);
	live_start("reset-inject", n, &o);
	live_at(ids_all(n), 11);
	op = ft_group_op(&grp, b, 11);
	cr_assert_not_null(op);
	live_finish(what, ids_all(n), ids_all(n), op->t_start, LIVE_RESET_BOUND_MS);
	end_group();
}

/* Every connection of the coordinator's host is destroyed at once, control ones included (a
 * NIC flap): it connects again, nobody leaves. */
static void flap(int n)
{
	struct ft_group_opts o;
	char what[64];
	int64_t t;

	live_opts(&o);
	snprintf(what, sizeof(what), "every connection of member 0 of %d reset", n);
	live_start("flap", n, &o);
	t = live_at(ids_all(n), LIVE_AT);
	cr_expect_geq(chaos_kill_flows(grp.ip[0], NULL, NULL, 0), 1);
	live_finish(what, ids_all(n), ids_all(n), t, 2 * LIVE_RESET_BOUND_MS);
	end_group();
}

/* The last member is stopped for a third of the failure timeout: slow, not dead. */
static void slow_stop(int n)
{
	struct ft_group_opts o;
	char what[64];
	int64_t t;

	live_opts(&o);
	snprintf(what, sizeof(what), "member %d of %d stopped %d ms", n - 1, n, TIMEOUT_MS / 3);
	live_start("slow-stop", n, &o);
	t = live_at(ids_all(n), LIVE_AT);
	cr_assert_neq(ft_group_freeze(&grp, n - 1), 0);
	chaos_sleep_ms(TIMEOUT_MS / 3);
	kill(ft_group_cur(&grp, n - 1)->pid, SIGCONT);
	grp.frozen[n - 1] = 0;
	live_finish(what, ids_all(n), ids_all(n), t, TIMEOUT_MS / 3 + LIVE_RESET_BOUND_MS);
	end_group();
}

/* A member sits between ops (it issues op LIVE_AT 1.5 timeouts late, as a trainer saving a
 * checkpoint would) while its data links to another member are reset: the others, waiting for
 * it in that op, cannot connect again until it issues the op (nobody answers a connection
 * between ops). That is a straggler, not a cut: they wait, nobody leaves. */
static void straggler_reset(int n)
{
	struct ft_group_opts o;
	uint16_t keep[FT_GROUP_MAX_N];
	char what[96];
	int a, b, killed;
	int64_t t;

	live_opts(&o);
	b = n - 1;
	a = n >= 4 ? n - 2 :
		     0; /* its partner in the first step of op LIVE_AT (recursive doubling) */
	o.late_seq[b] = 1 + LIVE_AT;
	o.late_ms = 3 * TIMEOUT_MS / 2;
	snprintf(what, sizeof(what), "member %d of %d between ops for %d ms, links to %d reset", b,
		 n, o.late_ms, a);
	live_start("straggler", n, &o);
	live_at(ids_all(n), LIVE_AT - 1);
	chaos_sleep_ms(200); /* the others are in op LIVE_AT, waiting for it */
	t = chaos_now_ns();
	killed = chaos_kill_flows(grp.ip[a], grp.ip[b], keep, ctl_ports(keep));
	cr_expect_geq(killed, 1, "no data connection between %d and %d to reset", a, b);
	live_finish(what, ids_all(n), ids_all(n), t, o.late_ms + LIVE_RESET_BOUND_MS);
	end_group();
}

/* Four processes spin on the two cores for 1.5 s while the group runs. */
static void slow_hogs(int n)
{
	struct ft_group_opts o;
	pid_t hogs[4];
	char what[64];
	int64_t t;

	live_opts(&o);
	snprintf(what, sizeof(what), "4 CPU hogs for 1.5 s, %d members", n);
	live_start("slow-hogs", n, &o);
	t = live_at(ids_all(n), LIVE_AT);
	cr_assert_eq(chaos_hogs_start(4, hogs), 0);
	chaos_sleep_ms(1500);
	for (int i = 0; i < 4; i++)
		chaos_kill(hogs[i]);
	live_finish(what, ids_all(n), ids_all(n), t, 2500);
	end_group();
}

/* ---- exactly one leaves ----------------------------------------------------------------------- */

/* Of members @a and @b, exactly one went on (finished every op) and the other ended with an
 * error (removed or lost). Returns the one that went on. */
static int one_of(int a, int b)
{
	const struct ft_run *ra = ft_group_cur(&grp, a), *rb = ft_group_cur(&grp, b);
	int ok_a, ok_b;

	cr_assert_eq(ft_group_wait_ended(&grp, bit(a) | bit(b), RUN_MS), 0, "no end\n%s",
		     describe());
	ok_a = atomic_load(&ra->end_rc) == 0;
	ok_b = atomic_load(&rb->end_rc) == 0;
	cr_expect(ok_a != ok_b, "members %d and %d: %s and %s, expected exactly one out\n%s", a, b,
		  ok_a ? "in" : "out", ok_b ? "in" : "out", describe());
	return ok_a ? a : b;
}

/* One member's data packets to another are dropped for the rest of the run; both reach the
 * coordinator. One of the two leaves: with one broken link each, the higher id. */
static void cut(int n)
{
	char what[64];
	int a = n > 2 ? 1 : 0, b = n - 1, kept;
	int64_t t;

	snprintf(what, sizeof(what), "data %d->%d dropped for good, %d members", a, b, n);
	t = live_cut("cut", n, a, b, "drop", NULL);
	kept = one_of(a, b);
	cr_expect_eq(kept, a, "the cut rule keeps the lower id of a pair");
	live_finish(what, ids_all(n) & ~bit(b), ids_all(n) & ~(bit(a) | bit(b)), t,
		    LIVE_CUT_BOUND_MS);
	end_group();
}

/* Every data-plane send of member @f fails (a bad NIC) from the start: it has a broken link to
 * everyone, and goes alone. In a group of two the rule cannot tell which end is at fault: the
 * lower id stays, faulty or not. */
static void sendfail(int n, int f)
{
	struct ft_group_opts o;
	char what[64];
	int out = n == 2 ? 1 : f;
	int64_t t;

	live_opts(&o);
	o.inject[f] = "sendv:100000000";
	snprintf(what, sizeof(what), "every send of member %d of %d fails", f, n);
	t = chaos_now_ns();
	live_start("sendfail", n, &o);
	live_finish(what, ids_all(n) & ~bit(out), ids_all(n) & ~(bit(f) | bit(out)), t,
		    LIVE_CUT_BOUND_MS + FORM_MS);
	cr_expect_neq(atomic_load(&ft_group_cur(&grp, out)->end_rc), 0, "member %d went on\n%s",
		      out, describe());
	end_group();
}

/* ---- the one that fails leaves ---------------------------------------------------------------- */

/* Member @v's op 11 fails locally (out of memory, injected): it leaves; the others finish op 11
 * without it, at once. */
static void local_inject(int n, int v)
{
	struct ft_group_opts o;
	const struct ft_run *r;
	char what[64];

	live_opts(&o);
	o.fault[v] = "input:11:0:fail";
	snprintf(what, sizeof(what), "member %d of %d fails op 11 (no memory)", v, n);
	live_start("local-inject", n, &o);
	cr_assert_eq(ft_group_wait_ended(&grp, bit(v), RUN_MS), 0, "member %d goes on\n%s", v,
		     describe());
	r = ft_group_cur(&grp, v);
	cr_expect_eq(r->ops[11].rc, FTCC_ERR_NOMEM, "its op 11 returned %s",
		     ftcc_strerror(r->ops[11].rc));
	live_finish(what, ids_all(n) & ~bit(v), ids_all(n) & ~bit(v), r->ops[11].t_start,
		    LIVE_RESET_BOUND_MS);
	end_group();
}

/* The same, for real: member @v's address space is capped before op 11, a 96 MiB in-place op
 * whose input the engine must keep. Larger than a malloc arena's heap (64 MiB): glibc may carve
 * a smaller block out of the unused reserve of a thread's arena, which the cap counted already,
 * and the op would then succeed now and then. */
static const struct ft_spec rlimit_script[] = {
	{ 8, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1000, FTCC_INT32, FTCC_MAX, 1 },
	{ 8, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1000, FTCC_INT32, FTCC_MAX, 1 },
	{ 8, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1000, FTCC_INT32, FTCC_MAX, 1 },
	{ 8, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1000, FTCC_INT32, FTCC_MAX, 1 },
	{ 8, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1000, FTCC_INT32, FTCC_MAX, 1 },
	{ 8, FTCC_FLOAT32, FTCC_SUM, 0 }, { 24u << 20, FTCC_FLOAT32, FTCC_SUM, 1 },
};

static void local_rlimit(int n)
{
	struct ft_group_opts o;
	const struct ft_run *r;
	char what[64];
	int v = n - 1;
	int64_t cost = 0, t_last = 0;

	live_opts(&o);
	o.script = rlimit_script;
	o.nspec = 12;
	o.limit = 24;
	o.as_limit_seq[v] = 12; /* capped before op 11 */
	snprintf(what, sizeof(what), "member %d of %d out of address space at op 11", v, n);
	live_start("local-rlimit", n, &o);
	cr_assert_eq(ft_group_wait_ended(&grp, bit(v), RUN_MS), 0, "member %d goes on\n%s", v,
		     describe());
	r = ft_group_cur(&grp, v);
	cr_expect_eq(r->ops[11].rc, FTCC_ERR_NOMEM, "its op 11 returned %s",
		     ftcc_strerror(r->ops[11].rc));
	/* The survivors' op 11 is itself 96 MiB: the bound adds what the same op costs them
	 * without a fault (op 23), measured in this run, twice. And it cannot end before every
	 * member started it: filling eight 96 MiB inputs on two cores takes seconds, and member v
	 * may fail first; the stall counts from the last start. */
	cr_assert_eq(ft_group_wait_ended(&grp, ids_all(n) & ~bit(v), RUN_MS), 0, "%s", describe());
	for (int i = 0; i < n; i++) {
		const struct ft_op *op = i == v ? NULL : ft_group_op(&grp, i, 23);
		const struct ft_op *op11 = i == v ? &r->ops[11] : ft_group_op(&grp, i, 11);

		if (op && op->t_done - op->t_start > cost)
			cost = op->t_done - op->t_start;
		if (op11 && op11->t_start > t_last)
			t_last = op11->t_start;
	}
	live_finish(what, ids_all(n) & ~bit(v), ids_all(n) & ~bit(v), t_last,
		    LIVE_RESET_BOUND_MS + 2 * (int)(cost / 1000000));
	end_group();
}

/* ---- failures around a join and a takeover ---------------------------------------------------- */

/* The last member dies and comes back; right after it is admitted (its first op some 16 ops
 * ahead), another member dies: the epoch that follows reopens ops below the joiner's first op,
 * which run without it, and it takes part from its first op on. Nobody hangs. In a group of two
 * the other member is the coordinator's host: the joiner alone is no quorum, and stops. */
static void join_window(int n)
{
	struct ft_group_opts o;
	int v = n - 1, w = n > 2 ? n - 2 : 0;
	uint32_t live = ids_all(n) & ~bit(w);
	char what[80];
	int64_t t;

	live_opts(&o);
	/* Three times the usual script: the restarted member must be admitted while the others
	 * still run (its start took longer than 34 paced ops on a loaded machine, and the others
	 * ended their script first). */
	o.limit = 3 * LIVE_OPS;
	snprintf(what, sizeof(what),
		 "member %d killed inside member %d's admission window, %d "
		 "members",
		 w, v, n);
	live_start("join-window", n, &o);
	live_at(ids_all(n), LIVE_AT);
	ft_group_kill(&grp, v);
	if (n > 2)
		live_at(ids_all(n) & ~bit(v), LIVE_AT + 4);
	else
		chaos_sleep_ms(100);
	cr_assert_eq(ft_group_spawn(&grp, v, 1, 0, NULL), 0);
	cr_assert_eq(ft_group_wait_created(&grp, bit(v), FORM_MS), 0, "not admitted\n%s",
		     describe());
	cr_assert_lt(ft_group_cur(&grp, v)->view0.next_seq, o.limit,
		     "the others ended their script before the restarted member was admitted\n%s",
		     describe());
	t = ft_group_kill(&grp, w);
	if (n == 2) {
		const struct ft_run *r = ft_group_cur(&grp, v);
		char why[1024];

		cr_assert_eq(ft_group_wait_ended(&grp, bit(v), RUN_MS), 0, "the joiner hangs\n%s",
			     describe());
		cr_expect_eq(atomic_load(&r->end_rc), FTCC_ERR_LOST, "the joiner ended with %s\n%s",
			     ftcc_strerror(atomic_load(&r->end_rc)), describe());
		cr_expect_geq(ft_group_invariants(&grp, 0, why, sizeof(why)), 0, "%s\n%s", why,
			      describe());
		chaos_report("live: %s: the joiner stopped %.1f ms after: %s", what,
			     chaos_ms(t, atomic_load(&r->t_end)), r->last_error);
		end_group();
		return;
	}
	cr_expect_gt(ft_group_cur(&grp, v)->view0.next_seq, LIVE_AT + 4);
	live_finish(what, live, live & ~bit(v), t, LIVE_CUT_BOUND_MS);
	end_group();
}

/* Member 1's data packets to the last member are dropped; half a timeout later, while the
 * accusation is under way, the coordinator's host (member 0) is killed. The others take over and
 * settle the cut. A group of two: member 1 alone is no quorum, it stops (never a group of its
 * own). */
static void coord_killed_during_accusation(int n)
{
	int a = n > 2 ? 1 : 0, b = n - 1;
	char what[80];
	int64_t t;

	snprintf(what, sizeof(what), "cut %d->%d, then member 0 killed, %d members", a, b, n);
	t = live_cut("coord-accused", n, a, b, "drop", NULL);
	chaos_sleep_ms(TIMEOUT_MS / 2);
	ft_group_kill(&grp, 0);
	if (n == 2) {
		const struct ft_run *r = ft_group_cur(&grp, 1);
		char why[1024];

		cr_assert_eq(ft_group_wait_ended(&grp, bit(1), RUN_MS), 0, "member 1 hangs\n%s",
			     describe());
		cr_expect_eq(atomic_load(&r->end_rc), FTCC_ERR_LOST, "member 1 ended with %s\n%s",
			     ftcc_strerror(atomic_load(&r->end_rc)), describe());
		cr_expect_geq(ft_group_invariants(&grp, 0, why, sizeof(why)), 0, "%s\n%s", why,
			      describe());
		chaos_report("live: %s: member 1 stopped %.1f ms after the cut: %s", what,
			     chaos_ms(t, atomic_load(&r->t_end)), r->last_error);
		end_group();
		return;
	}
	one_of(a, b);
	{
		uint32_t gone =
			bit(0) | (atomic_load(&ft_group_cur(&grp, a)->end_rc) ? bit(a) : bit(b));

		live_finish(what, ids_all(n) & ~gone, ids_all(n) & ~(bit(0) | bit(a) | bit(b)), t,
			    LIVE_TAKEOVER_BOUND_MS);
	}
	end_group();
}

/* The coordinator's host (member 0) stops for good; member 2 stops with it for 700 ms, a thread
 * a loaded host did not run. Member 2 restarts its silence timer when it runs again and notices
 * the loss some 700 ms after members 1 and 3, who alone are half of the group, no quorum. The
 * takeover must wait for it and go on with {1, 2, 3}: a slow member never ends the group. */
Test(live, takeover_waits_for_a_stalled_member_of_4)
{
	struct ft_group_opts o;
	int64_t t;

	live_opts(&o);
	live_start("stalled-reporter", 4, &o);
	t = live_at(ids_all(4), LIVE_AT);
	cr_assert_neq(ft_group_freeze(&grp, 0), 0);
	cr_assert_neq(ft_group_freeze(&grp, 2), 0);
	chaos_sleep_ms(700);
	kill(ft_group_cur(&grp, 2)->pid, SIGCONT);
	grp.frozen[2] = 0;
	live_finish("member 0 stopped, member 2 stopped 700 ms with it, 4 members", 0xe, 0xe, t,
		    LIVE_TAKEOVER_BOUND_MS);
	end_group();
}

/* ---- the matrix ------------------------------------------------------------------------------- */

#define FOR_SIZES(kind, fn)                                                                        \
	Test(live, kind##_of_2)                                                                    \
	{                                                                                          \
		fn(2);                                                                             \
	}                                                                                          \
	Test(live, kind##_of_3)                                                                    \
	{                                                                                          \
		fn(3);                                                                             \
	}                                                                                          \
	Test(live, kind##_of_4)                                                                    \
	{                                                                                          \
		fn(4);                                                                             \
	}                                                                                          \
	Test(live, kind##_of_8)                                                                    \
	{                                                                                          \
		fn(8);                                                                             \
	}

static void sendfail_coordinator(int n)
{
	sendfail(n, 0);
}

static void sendfail_last(int n)
{
	sendfail(n, n - 1);
}

static void local_inject_last(int n)
{
	local_inject(n, n - 1);
}

FOR_SIZES(reset_ss, reset_ss)
FOR_SIZES(reset_nft, reset_nft)
FOR_SIZES(reset_inject, reset_inject)
FOR_SIZES(flap_coordinator_host, flap)
FOR_SIZES(slow_stop, slow_stop)
FOR_SIZES(slow_hogs, slow_hogs)
FOR_SIZES(straggler_reset, straggler_reset)
FOR_SIZES(cut_one_way, cut)
FOR_SIZES(sendfail_coordinator_host, sendfail_coordinator)
FOR_SIZES(sendfail_last, sendfail_last)
FOR_SIZES(local_nomem, local_inject_last)
FOR_SIZES(local_rlimit, local_rlimit)
FOR_SIZES(join_window, join_window)
FOR_SIZES(coordinator_killed_during_accusation, coord_killed_during_accusation)

/* The faults between live members above with three streams, ops of every stream in flight: the
 * fault meets each stream's data planes, and the membership takes the evidence that every stream
 * brings of one link as one link's (a reset retried, nobody out; a cut or a member that cannot
 * send: exactly the one the cut rule picks out). */
Test(live, reset_nft_three_streams_of_4)
{
	live_streams = 3;
	reset_nft(4);
}

Test(live, cut_one_way_three_streams_of_4)
{
	live_streams = 3;
	cut(4);
}

Test(live, sendfail_last_three_streams_of_4)
{
	live_streams = 3;
	sendfail(4, 3);
}

/* In a group of two, the coordinator's host fails locally: its LEAVE is proof, member 1 goes on
 * alone (a 2-member group continues on one side only, and here it may be the higher id). */
Test(live, local_nomem_coordinator_host_of_2)
{
	local_inject(2, 0);
}

/* ---- soak ---------------------------------------------------------------------------------- */

/* xorshift64: the soak's choices, from a seed it prints. */
static uint32_t soak_pick(uint64_t *x, uint32_t below)
{
	*x ^= *x << 13;
	*x ^= *x >> 7;
	*x ^= *x << 17;
	return (uint32_t)(*x >> 32) % below;
}

/* The soak's seed, named in its failure messages. */
static uint64_t soak_seed;

/* Waits until every member in @who completed 3 more ops than anyone had; fails the test after
 * RUN_MS. Returns the stall since @t (the slowest member's next op after @t), in ms. The
 * message ends with the round (what a truncated log keeps). */
static double soak_progress(uint32_t who, int64_t t, int round, const char *what, int v)
{
	cr_assert_eq(ft_group_wait_op(&grp, who, (uint64_t)ft_group_max_seq(&grp) + 3, RUN_MS), 0,
		     "%s\nround %d (%s of member %d): %s stopped (FTCC_TEST_SEED=%llu)", describe(),
		     round, what, v, ids(who, 0), (unsigned long long)soak_seed);
	return ft_group_stall(&grp, who, t, NULL, NULL);
}

/* Member @v's process is gone or out of the group: a new one joins. */
static void soak_rejoin(int v, int round)
{
	ft_group_kill(&grp, v);
	cr_assert_eq(ft_group_spawn(&grp, v, 1, 0, NULL), 0);
	cr_assert_eq(ft_group_wait_created(&grp, bit(v), FORM_MS), 0,
		     "%s\nround %d: member %d not admitted again (FTCC_TEST_SEED=%llu)", describe(),
		     round, v, (unsigned long long)soak_seed);
}

/* 4 members for FTCC_TEST_LIVE_SOAK_SECONDS (default 60, at most 300): every 0.5 to 1.5 s one
 * fault, at random: a SIGKILL (then a rejoin), a freeze shorter than the failure timeout (nobody
 * leaves), a freeze longer than it (removed; a new process rejoins), a reset of the data links
 * between two members, a reset of every connection of one member. After each, the members still
 * in the group make progress within the bound, and the members a short fault hit are still in.
 * At the end the invariants are checked over every process. FTCC_TEST_SEED repeats a run. */
Test(live, soak_mixed_faults_of_4, .timeout = 400)
{
	static const char *const kinds[] = { "kill", "short freeze", "long freeze", "reset",
					     "flap" };
	const int n = 4;
	const char *env = getenv("FTCC_TEST_LIVE_SOAK_SECONDS");
	int secs = env && atoi(env) > 0 ? atoi(env) : 60, round = 0, count[5] = { 0 };
	uint64_t seed = getenv("FTCC_TEST_SEED") ? strtoull(getenv("FTCC_TEST_SEED"), NULL, 0) :
						   (uint64_t)chaos_now_ns();
	uint64_t x = seed | 1;
	double worst[5] = { 0 };
	struct ft_group_opts o;
	uint16_t keep[FT_GROUP_MAX_N];
	char why[1024];
	int64_t end, last;
	int checked;

	secs = secs > 300 ? 300 : secs;
	soak_seed = seed;
	chaos_report("live: soak: %d s, FTCC_TEST_SEED=%llu", secs, (unsigned long long)seed);
	live_opts(&o);
	o.degraded = FTCC_DEGRADED_RESCALE;
	o.limit = FT_GROUP_MAX_SEQ - 1;
	/* about 6000 ops whatever the length: the records hold FT_GROUP_MAX_SEQ */
	o.pace_us = secs * 1000000 / 6000 > PACE_US ? secs * 1000000 / 6000 : PACE_US;
	live_start("soak", n, &o);
	ctl_ports(keep);
	end = chaos_now_ns() + (int64_t)secs * 1000000000;
	while (chaos_now_ns() < end && grp.nruns < FT_GROUP_MAX_RUNS - 2 &&
	       ft_group_max_seq(&grp) < FT_GROUP_MAX_SEQ - 800) {
		int kind = (int)soak_pick(&x, 5), v = (int)soak_pick(&x, (uint32_t)n);
		int w = (v + 1 + (int)soak_pick(&x, (uint32_t)n - 1)) % n;
		uint32_t all = ids_all(n);
		double stall = 0;
		int64_t t;

		round++;
		chaos_sleep_ms(500 + (int)soak_pick(&x, 1000));
		t = chaos_now_ns();
		switch (kind) {
		case 0:
			ft_group_kill(&grp, v);
			stall = soak_progress(all & ~bit(v), t, round, kinds[kind], v);
			soak_rejoin(v, round);
			break;
		case 1:
			cr_assert_neq(ft_group_freeze(&grp, v), 0);
			chaos_sleep_ms(100 + (int)soak_pick(&x, TIMEOUT_MS / 3));
			kill(ft_group_cur(&grp, v)->pid, SIGCONT);
			grp.frozen[v] = 0;
			stall = soak_progress(all, t, round, kinds[kind], v);
			break;
		case 2:
			cr_assert_neq(ft_group_freeze(&grp, v), 0);
			stall = soak_progress(all & ~bit(v), t, round, kinds[kind], v);
			kill(ft_group_cur(&grp, v)->pid, SIGCONT);
			grp.frozen[v] = 0;
			soak_rejoin(v, round);
			break;
		case 3:
			chaos_kill_flows(grp.ip[v], grp.ip[w], keep, n);
			stall = soak_progress(all, t, round, kinds[kind], v);
			break;
		default:
			chaos_kill_flows(grp.ip[v], NULL, NULL, 0);
			stall = soak_progress(all, t, round, kinds[kind], v);
			break;
		}
		if (kind != 0 && kind != 2) {
			/* a short fault: the member it hit is still in, with the same process */
			const struct ft_run *r = ft_group_cur(&grp, v);

			cr_expect(
				!atomic_load(&r->ended),
				"%s\nround %d (%s of member %d): it left: %s (FTCC_TEST_SEED=%llu)",
				describe(), round, kinds[kind], v, r->last_error,
				(unsigned long long)seed);
		}
		count[kind]++;
		worst[kind] = stall > worst[kind] ? stall : worst[kind];
		chaos_report(
			"live: soak: round %d: %s of member %d%s%s: the group's next op %.1f ms "
			"after",
			round, kinds[kind], v, kind == 3 ? " and " : "",
			kind == 3 ? ids(bit(w), 0) : "", stall);
	}
	last = ft_group_settle(&grp, ids_all(n), RUN_MS);
	cr_expect_geq(last, 0, "%s\nthe members did not settle (FTCC_TEST_SEED=%llu)", describe(),
		      (unsigned long long)seed);
	checked = ft_group_invariants(&grp, 0, why, sizeof(why));
	cr_expect_geq(checked, 0, "%s\n%s (FTCC_TEST_SEED=%llu)", describe(), why,
		      (unsigned long long)seed);
	chaos_report("live: soak: %d s, %d rounds (%d kills, %d short freezes, %d long freezes, %d "
		     "resets, %d flaps), %d processes; worst next op after each kind %.1f / %.1f / "
		     "%.1f / %.1f / %.1f ms; %d ops checked",
		     secs, round, count[0], count[1], count[2], count[3], count[4], grp.nruns,
		     worst[0], worst[1], worst[2], worst[3], worst[4], checked);
	end_group();
}
