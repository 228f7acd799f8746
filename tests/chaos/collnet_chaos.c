/* SPDX-License-Identifier: BSD-3-Clause */
/* What the CollNet chaos tests share (collnet_chaos.h): the heads, the script, starting the
 * heads and waiting for ops in flight, kills with their bounds, and the checks every test ends
 * with (exit status, exact results, the loss logged once).
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

struct cn_heads cc_heads;
char cc_logbuf[1 << 20];
char cc_acc[MAX_BYTES], cc_tmp[MAX_BYTES];
static char text[1 << 18];

const struct ft_spec cc_script[] = {
	{ 1024, FTCC_FLOAT32, FTCC_SUM, 0 },  { 16384, FTCC_FLOAT32, FTCC_SUM, 1 },
	{ 4096, FTCC_INT32, FTCC_SUM, 0 },    { 262144, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 2048, FTCC_BFLOAT16, FTCC_SUM, 0 }, { 65536, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 8192, FTCC_INT32, FTCC_MAX, 1 },    { 32768, FTCC_BFLOAT16, FTCC_SUM, 1 },
};

const int cc_nspec = (int)(sizeof(cc_script) / sizeof(cc_script[0]));

void cc_teardown(void)
{
	cn_heads_end(&cc_heads);
	chaos_fault_cleanup();
	chaos_veth_cleanup();
	chaos_proc_cleanup();
	test_fabric_cut_clear();
}

/* SIGKILLs head @i and reaps it; returns the time of the kill. *@bound_ms gets the stall its
 * survivors may see from then: KILL_BOUND_MS after its death could be seen (the reap is later
 * than its sockets' close), and never more than SILENT_BOUND_MS, the bound of a frozen head. */
int64_t cc_kill_head(int i, double *bound_ms)
{
	int64_t t = cn_heads_kill(&cc_heads, i);
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
const char *cc_describe(void)
{
	return cn_heads_explain(&cc_heads, 4096 * 8, text, sizeof(text));
}

/* Options every test starts from: NOPS paced ops, depth 8, the failure timeout. */
struct cn_opts cc_base_opts(void)
{
	struct cn_opts o = { .depth = DEPTH,
			     .nops = NOPS,
			     .pace_us = PACE_US,
			     .timeout_ms = TIMEOUT_MS,
			     .script = cc_script,
			     .nspec = cc_nspec };

	return o;
}

/* Starts @n heads with @o and waits until all connected and completed WARM_OPS ops. */
void cc_start(int n, const struct cn_opts *o)
{
	cr_assert_eq(cn_heads_start(&cc_heads, n, o), 0, "cn_heads_start");
	cr_assert_eq(cn_heads_wait_stage(&cc_heads, cc_all_of(n), CN_ST_CONNECTED, FORM_MS), 0,
		     "the heads did not connect\n%s", cc_describe());
	cr_assert_eq(cn_heads_wait_ops(&cc_heads, cc_all_of(n), WARM_OPS, RUN_MS), 0,
		     "the heads did not run %d ops\n%s", WARM_OPS, cc_describe());
	for (int i = 0; i < n; i++) {
		cr_assert_eq(atomic_load(&cn_heads_head(&cc_heads, i)->err), 0,
			     "head %d failed before the fault\n%s", i, cc_describe());
	}
}

/* Polls (bounded) until every head of @who has an op posted and not completed, so that the fault
 * that follows hits ops in flight rather than a pause between two paced ops. */
void cc_wait_inflight(uint32_t who)
{
	int64_t deadline = chaos_now_ns() + (int64_t)FORM_MS * 1000000;

	for (;;) {
		int all = 1;

		for (int i = 0; i < cc_heads.n && all; i++) {
			const struct cn_head *h = cn_heads_head(&cc_heads, i);
			int64_t next = atomic_load(&h->ndone);

			all = !(who >> i & 1) || (next < CN_MAX_OPS &&
						  atomic_load_explicit(&h->ops[next].state,
								       memory_order_acquire) == 1);
		}
		if (all) {
			return;
		}
		cr_assert_leq(chaos_now_ns(), deadline, "no op in flight on every head\n%s",
			      cc_describe());
		sched_yield();
	}
}

/* WARN lines in head @i's log that contain @a and (when not NULL) @b. */
int cc_warn_lines(int i, const char *a, const char *b)
{
	int count = 0;

	cn_heads_log(&cc_heads, i, cc_logbuf, sizeof(cc_logbuf));
	for (char *line = strtok(cc_logbuf, "\n"); line; line = strtok(NULL, "\n")) {
		count += strstr(line, " WARN ") && strstr(line, a) && (!b || strstr(line, b));
	}
	return count;
}

/* Each head of @live logged exactly one WARN naming each head of @lost as lost. */
void cc_expect_lost_warns(uint32_t live, uint32_t lost)
{
	for (int i = 0; i < cc_heads.n; i++) {
		for (int v = 0; v < cc_heads.n; v++) {
			char name[24];
			int k;

			if (!(live >> i & 1) || !(lost >> v & 1)) {
				continue;
			}
			snprintf(name, sizeof(name), "node %d (", v);
			k = cc_warn_lines(i, name, " lost;");
			cr_expect_eq(k, 1,
				     "head %d logged %d WARN lines saying node %d was lost\n%s", i,
				     k, v, cc_describe());
		}
	}
}

/* Each head of @live exited 0 once closed, and no head's log holds a sanitizer report (the heads'
 * stderr is captured, so a report there would otherwise go unseen). */
void cc_expect_clean(uint32_t live)
{
	for (int i = 0; i < cc_heads.n; i++) {
		int st = cc_heads.exit_status[i];

		if (live >> i & 1) {
			cr_expect(st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0,
				  "head %d: wait status %#x\n%s", i, (unsigned)st, cc_describe());
		}
		cn_heads_log(&cc_heads, i, cc_logbuf, sizeof(cc_logbuf));
		cr_expect(!strstr(cc_logbuf, "runtime error:") && !strstr(cc_logbuf, "Sanitizer"),
			  "head %d: a sanitizer report in its log:\n%s", i, cc_logbuf);
	}
}

/* The exact results of every op of every head (the victims' included), under @policy, with
 * the heads of @lost counted until @t_fault. Returns the number of degraded ops. */
int cc_expect_exact(uint32_t lost, int64_t t_fault, enum ftcc_degraded policy)
{
	char why[1024];
	int nfull = 0, ndeg = 0;
	int n = cn_heads_check(&cc_heads, cc_all_of(cc_heads.n), lost, t_fault, policy, &nfull,
			       &ndeg, why, sizeof(why));

	cr_expect_geq(n, 0, "%s\n%s", why, cc_describe());
	return ndeg;
}

/* One member list per epoch number across every head's log, and at least @min epochs named. */
void cc_expect_epochs(int min)
{
	char why[512];
	int n = cn_heads_epochs(&cc_heads, why, sizeof(why));

	chaos_report("collnet: %d epoch numbers named in the heads' logs, one member list each", n);
	cr_expect_geq(n, min, "%s: %d epochs in the heads' logs\n%s", n < 0 ? why : "", n,
		      cc_describe());
}
