/* SPDX-License-Identifier: BSD-3-Clause */
/* ABI tests of the CollNet plug-in when a group comes apart or never forms, with node heads
 * (cn_heads.h): closing with requests in flight (bounded close calls, the others carry on without the
 * one that left), and connect's all-or-nothing answer when a head is absent, a handle is
 * corrupted, a head belongs to another communicator or runs other settings; an op the heads
 * post with different shapes.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "abi_fixture.h"
#include "chaos_proc.h"
#include "cn_heads.h"

/* Most a close call may take with requests in flight (DESIGN: abort is bounded). */
#define CLOSE_BOUND_MS 200.0
/* Most a connect may take to fail when nothing needs waiting for. */
#define FAIL_FAST_MS 1000.0

/* Each Criterion test runs in its own process, so file-scope state is per test. */
static struct cn_heads g;
static char msg[16384];

static void cn_fini(void)
{
	cn_heads_end(&g);
	chaos_proc_cleanup();
}

/* The state of every head and the end of each one's log, for assertion messages. */
static const char *explain(void)
{
	return cn_heads_explain(&g, 1200, msg, sizeof(msg));
}

/* Ops of 256 KiB to 1 MiB: eight in flight take a while. */
static const struct ft_spec mid[] = {
	{ 1 << 18, FTCC_FLOAT32, FTCC_SUM, 0 },	 { 1 << 16, FTCC_INT32, FTCC_MAX, 1 },
	{ 1 << 17, FTCC_BFLOAT16, FTCC_SUM, 0 }, { 1 << 15, FTCC_FLOAT64, FTCC_SUM, 1 },
	{ 100000, FTCC_FLOAT16, FTCC_MIN, 0 },	 { 1 << 17, FTCC_UINT64, FTCC_PROD, 0 },
};
#define NMID ((int)(sizeof(mid) / sizeof(mid[0])))

static const struct ft_spec one[] = { { 1024, FTCC_FLOAT32, FTCC_SUM, 0 } };

/* Copies the records of every op completed so far into @copy (a group that shares nothing with
 * the heads), for a check that must not see what completes later. Free copy->sh after. */
static void snapshot(struct cn_heads *copy)
{
	*copy = g;
	copy->sh = calloc(1, sizeof(*copy->sh));
	cr_assert_not_null(copy->sh);
	for (int i = 0; i < g.n; i++) {
		for (int s = 0; s < CN_MAX_OPS; s++) {
			const struct cn_op *from = &g.sh->head[i].ops[s];
			struct cn_op *to = &copy->sh->head[i].ops[s];

			if (atomic_load_explicit(&from->state, memory_order_acquire) != 2)
				continue;
			to->res = from->res;
			to->size = from->size;
			to->sum = from->sum;
			to->t_post = from->t_post;
			to->t_done = from->t_done;
			atomic_store(&to->state, 2);
		}
	}
}

/* Asserts that head @i closed with @depth requests in flight, each close call in bound. */
static void assert_closed_in_flight(int i, int depth)
{
	const struct cn_head *h = cn_heads_head(&g, i);
	static const char *const calls[CN_NCLOSE] = { "deregMr", "closeColl", "closeListen",
						      "finalize" };

	cr_assert_eq(atomic_load(&h->stage), CN_ST_CLOSED, "head %d: %s", i, explain());
	cr_assert_eq(h->inflight_at_close, depth, "head %d: %s", i, explain());
	for (int k = 0; k < CN_NCLOSE; k++) {
		double ms = chaos_ms(0, h->close_ns[k]);

		cr_assert_eq(h->close_res[k], ncclSuccess, "head %d %s: %s", i, calls[k],
			     explain());
		cr_assert_leq(ms, CLOSE_BOUND_MS, "head %d: %s took %.1f ms; its groups: %s", i,
			      calls[k], ms, explain());
	}
	chaos_report("collnet v%d: head %d closed with %d in flight: deregMr %.2f closeColl %.2f "
		     "closeListen %.2f finalize %.2f ms",
		     g.o.version, i, h->inflight_at_close, chaos_ms(0, h->close_ns[0]),
		     chaos_ms(0, h->close_ns[1]), chaos_ms(0, h->close_ns[2]),
		     chaos_ms(0, h->close_ns[3]));
}

/* Three heads run an open-ended script with 8 in flight; head 2 closes at once. Its close calls
 * are bounded, and heads 0 and 1 see it leave and go on completing ops (degraded: rescaled);
 * then they close at once too. Every result until then is exact (full or without head 2). */
static void close_in_flight(int version)
{
	struct cn_opts o = {
		.version = version, .depth = 8, .nops = -1, .script = mid, .nspec = NMID
	};
	struct cn_heads before_close;
	int64_t t_close, n0, n1, before;
	int full = 0, deg = 0, checked;
	char why[512], log[65536];

	/* the last head may complete its last ops alone: no minimum share of nodes */
	for (int i = 0; i < 3; i++)
		o.env[i] = "FTCC_COLLNET_MIN_PERCENT=0";
	cr_assert_eq(cn_heads_start(&g, 3, &o), 0);
	cr_assert_eq(cn_heads_wait_ops(&g, 7, 16, 30000), 0, "%s", explain());
	t_close = chaos_now_ns();
	cr_assert_eq(cn_heads_stop(&g, 1 << 2, 1, 3000), 0, "head 2 did not close: %s", explain());
	assert_closed_in_flight(2, 8);
	n0 = atomic_load(&cn_heads_head(&g, 0)->ndone);
	n1 = atomic_load(&cn_heads_head(&g, 1)->ndone);
	before = n0 > n1 ? n0 : n1;
	cr_assert_eq(cn_heads_wait_ops(&g, 3, before + 24, 30000), 0,
		     "heads 0 and 1 stopped completing ops after head 2 left: %s", explain());
	chaos_report("collnet v%d: heads 0 and 1 completed 24 more ops %.0f ms after head 2 closed",
		     version, chaos_ms(t_close, chaos_now_ns()));
	/* What heads 0 and 1 completed before they close: once one of them left, the other may
	 * complete its last ops with its input alone, a result the check does not expect. */
	snapshot(&before_close);
	cr_assert_eq(cn_heads_stop(&g, 3, 1, 3000), 0, "%s", explain());
	assert_closed_in_flight(0, 8);
	assert_closed_in_flight(1, 8);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(atomic_load(&cn_heads_head(&g, i)->err), 0, "head %d: %s", i,
			     explain());
	checked = cn_heads_check(&before_close, 7, 1 << 2, t_close, FTCC_DEGRADED_RESCALE, &full,
				 &deg, why, sizeof(why));
	free(before_close.sh);
	cr_assert_gt(checked, 0, "%s", checked < 0 ? why : explain());
	cr_assert_gt(deg, 0, "no op completed without head 2 (%d full)", full);
	cn_heads_log(&g, 0, log, sizeof(log));
	cr_assert(strstr(log, "node 2") && strstr(log, "lost"),
		  "head 0 did not log that node 2 left:\n%s", log);
	chaos_report("collnet v%d: %d ops checked, %d full, %d without head 2", version, checked,
		     full, deg);
}

Test(collnet_v11, close_in_flight, .init = abi_setup, .fini = cn_fini, .timeout = 90)
{
	close_in_flight(11);
}

Test(collnet_v8, close_in_flight, .init = abi_setup, .fini = cn_fini, .timeout = 90)
{
	close_in_flight(8);
}

/* ---- connect consistency --------------------------------------------------------------------- */

/* Heads @who all failed connect, with the same result, each within @max_ms. */
static void assert_all_failed(uint32_t who, double min_ms, double max_ms)
{
	int res0 = -1;

	cr_assert_eq(cn_heads_wait_stage(&g, who, CN_ST_FAILED, 30000), 0, "%s", explain());
	for (int i = 0; i < g.n; i++) {
		const struct cn_head *h = cn_heads_head(&g, i);
		double ms = chaos_ms(h->t_connect0, h->t_connect1);

		if (!(who >> i & 1))
			continue;
		cr_assert_neq(h->t_connect1, 0, "head %d never called connect: %s", i, explain());
		cr_assert_neq(h->connect_res, ncclSuccess, "head %d: %s", i, explain());
		if (res0 < 0)
			res0 = h->connect_res;
		cr_assert_eq(h->connect_res, res0, "heads fail connect differently: %s", explain());
		cr_assert(ms >= min_ms && ms <= max_ms,
			  "head %d: connect failed after %.1f ms, not in [%.0f, %.0f]: %s", i, ms,
			  min_ms, max_ms, explain());
		chaos_report("collnet v%d: head %d connect failed (%d) after %.1f ms", g.o.version,
			     i, h->connect_res, ms);
	}
}

/* Head 2 publishes its handle but never connects: the others' connect fails together once
 * FTCC_CONNECT_TIMEOUT_MS (1.5 s) is over, none succeeds. */
static void connect_absent(int version)
{
	struct cn_opts o = { .version = version,
			     .connect_timeout_ms = 1500,
			     .absent = 1 << 2,
			     .script = one,
			     .nspec = 1 };

	cr_assert_eq(cn_heads_start(&g, 3, &o), 0);
	assert_all_failed(3, 1000, 2500);
	cr_assert_eq(cn_heads_stop(&g, 1 << 2, 0, 3000), 0, "%s", explain());
}

Test(collnet_v11, connect_absent, .init = abi_setup, .fini = cn_fini, .timeout = 60)
{
	connect_absent(11);
}

Test(collnet_v8, connect_absent, .init = abi_setup, .fini = cn_fini, .timeout = 60)
{
	connect_absent(8);
}

/* Flips one byte (the comm id's) of head 1's handle. */
static void corrupt_head1(int head, char *handle)
{
	if (head == 1)
		handle[20] ^= 0x5a;
}

/* Gives head 2 the handle of another communicator: another comm id, a valid checksum (FNV-1a 32
 * of bytes 0..47 at 48, as include/ftcc/boot.h lays the handle out). */
static void foreign_head2(int head, char *handle)
{
	uint32_t h = 0x811c9dc5u;

	if (head != 2)
		return;
	handle[16] ^= 0x01;
	for (int i = 0; i < 48; i++)
		h = (h ^ (uint8_t)handle[i]) * 0x01000193u;
	for (int i = 0; i < 4; i++)
		handle[48 + i] = (char)(h >> (8 * i));
}

/* A handle set every head must reject at once (no timeout wait), all alike. */
static void connect_rejected(int version, void (*edit)(int, char *), const char *env1,
			     const char *needle)
{
	struct cn_opts o = { .version = version, .handle_edit = edit, .script = one, .nspec = 1 };
	char log[65536];

	o.env[1] = env1;
	cr_assert_eq(cn_heads_start(&g, 3, &o), 0);
	assert_all_failed(7, 0, FAIL_FAST_MS);
	for (int i = 0; i < 3; i++) {
		cn_heads_log(&g, i, log, sizeof(log));
		cr_assert(strstr(log, needle), "head %d does not say \"%s\":\n%s", i, needle, log);
	}
}

Test(collnet_v11, connect_corrupt_handle, .init = abi_setup, .fini = cn_fini, .timeout = 30)
{
	connect_rejected(11, corrupt_head1, NULL, "handle of node 1 is not an ftcc handle");
}

Test(collnet_v8, connect_corrupt_handle, .init = abi_setup, .fini = cn_fini, .timeout = 30)
{
	connect_rejected(8, corrupt_head1, NULL, "handle of node 1 is not an ftcc handle");
}

Test(collnet_v11, connect_foreign_comm, .init = abi_setup, .fini = cn_fini, .timeout = 30)
{
	connect_rejected(11, foreign_head2, NULL, "node 2 belongs to communicator");
}

Test(collnet_v11, connect_degraded_mismatch, .init = abi_setup, .fini = cn_fini, .timeout = 30)
{
	connect_rejected(11, NULL, "FTCC_DEGRADED=sum", "FTCC_DEGRADED");
}

Test(collnet_v8, connect_degraded_mismatch, .init = abi_setup, .fini = cn_fini, .timeout = 30)
{
	connect_rejected(8, NULL, "FTCC_DEGRADED=sum", "FTCC_DEGRADED");
}

/* Three heads post the same ops, except that head 1 posts op 3 with twice the count: op 3 ends
 * with ncclInvalidUsage on every head, at once and alike (nobody left, nothing hangs); the ops
 * before it are exact and equal everywhere. The heads close only once all of them have their
 * error (linger_err): a head that closes as soon as it decided would take its vote from the
 * one still deciding, whose control thread may then log a loss of quorum before its engine logs
 * the decision, and the check below reads each head's log up to that decision. */
static void op_shape_mismatch(int version)
{
	static const struct ft_spec base[5] = {
		{ 1024, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1024, FTCC_FLOAT32, FTCC_SUM, 1 },
		{ 1024, FTCC_FLOAT32, FTCC_SUM, 0 }, { 1024, FTCC_FLOAT32, FTCC_SUM, 0 },
		{ 1024, FTCC_FLOAT32, FTCC_SUM, 0 },
	};
	static struct ft_spec h1[5];
	struct cn_opts o = {
		.version = version, .depth = 1, .script = base, .nspec = 5, .linger_err = 1
	};
	char log[65536];

	memcpy(h1, base, sizeof(h1));
	h1[3].count = 2048;
	o.own_script[1] = h1;
	cr_assert_eq(cn_heads_start(&g, 3, &o), 0);
	cr_assert_eq(cn_heads_wait_ops(&g, 7, 4, 30000), 0, "%s", explain());
	for (int i = 0; i < 3; i++) {
		const struct cn_head *h = cn_heads_head(&g, i);

		cr_assert_eq(atomic_load(&h->err), ncclInvalidUsage, "head %d: %s", i, explain());
		cr_assert_eq(h->err_seq, 3, "head %d: %s", i, explain());
		for (int s = 0; s < 3; s++) {
			cr_assert_eq(h->ops[s].res, ncclSuccess, "head %d op %d: %s", i, s,
				     explain());
			cr_assert_eq(h->ops[s].sum, cn_heads_head(&g, 0)->ops[s].sum,
				     "head %d op %d differs from head 0's", i, s);
		}
		cn_heads_log(&g, i, log, sizeof(log));
		cr_assert(strstr(log, "1024 x float32 sum") && strstr(log, "2048 x float32 sum"),
			  "head %d does not name both shapes:\n%s", i, log);
		/* up to this head's decision, nobody was removed or lost for a fault: the only
		 * departures are closes of heads that decided first (a LEAVE). After it, all
		 * heads close at about the same time, which is not this test's matter. */
		char *at = strstr(log, "members called it with different shapes");

		cr_assert(at, "head %d: no mismatch line:\n%s", i, log);
		*at = '\0';
		for (char *line = strtok(log, "\n"); line; line = strtok(NULL, "\n")) {
			if (!strstr(line, "to be removed") &&
			    !(strstr(line, "control:") && strstr(line, " lost")))
				continue;
			cr_assert(strstr(line, "left the group") || strstr(line, "(it left"),
				  "head %d saw a node go for a fault: %s", i, line);
		}
	}
}

Test(collnet_v11, op_shape_mismatch, .init = abi_setup, .fini = cn_fini, .timeout = 60)
{
	op_shape_mismatch(11);
}

Test(collnet_v8, op_shape_mismatch, .init = abi_setup, .fini = cn_fini, .timeout = 60)
{
	op_shape_mismatch(8);
}

/* A head that cannot start (here: its stderr cannot be set up, so it never execs) is reported by
 * chaos_fork_exec() at once, with the child's errno, and reaped: not left to look alive until
 * the heads' timeouts. */
Test(cn_heads, start_failure_is_reported, .timeout = 30)
{
	int64_t t0;
	pid_t pid;

	close(1000); /* not open: the child's dup2 fails */
	t0 = chaos_now_ns();
	errno = 0;
	pid = chaos_fork_exec("FTCC_TEST_CN_HEAD", "0:0", -1, 1000);
	cr_assert_eq(pid, -1, "a child that did not exec was reported as started (%d)", (int)pid);
	cr_assert_eq(errno, EBADF, "errno %d, not the child's EBADF", errno);
	cr_assert_lt(chaos_ms(t0, chaos_now_ns()), 5000.0);
}
