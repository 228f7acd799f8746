/* SPDX-License-Identifier: BSD-3-Clause */
/* Node heads for the CollNet tests (cn_heads.h): the parent's control of running heads: bounded
 * waits for their stages and ops, kill, freeze, stop. cn_heads.c starts and ends them;
 * cn_heads_check.c reads back what they recorded.
 */
#define _GNU_SOURCE
#include "cn_heads.h"

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "chaos_proc.h"

/* Whether head @h reached @stage (a FAILED head reached only FAILED). */
static int cn_reached(const struct cn_head *h, enum cn_stage stage)
{
	int st = atomic_load(&h->stage);

	return st == CN_ST_FAILED ? stage == CN_ST_FAILED : st >= (int)stage;
}

int cn_heads_wait_stage(const struct cn_heads *g, uint32_t who, enum cn_stage stage, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;

	if (!g->sh)
		return -1;
	for (;;) {
		int all = 1, settled = 1;

		for (int i = 0; i < g->n; i++) {
			const struct cn_head *h = &g->sh->head[i];

			if (!(who >> i & 1))
				continue;
			all &= cn_reached(h, stage);
			settled &= cn_reached(h, stage) || atomic_load(&h->stage) == CN_ST_FAILED;
		}
		if (settled)
			return all ? 0 : -1;
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(1);
	}
}

int cn_heads_wait_ops(const struct cn_heads *g, uint32_t who, int64_t nops, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;

	if (!g->sh)
		return -1;
	for (;;) {
		int all = 1, got = 1;

		for (int i = 0; i < g->n; i++) {
			const struct cn_head *h = &g->sh->head[i];

			if (!(who >> i & 1) || atomic_load(&h->ndone) >= nops)
				continue;
			got = 0;
			all &= atomic_load(&h->stage) >= CN_ST_RAN;
		}
		if (all)
			return got ? 0 : -1;
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(1);
	}
}

int64_t cn_heads_kill(struct cn_heads *g, int i)
{
	int64_t t = chaos_now_ns();

	if (!g->sh || i < 0 || i >= g->n || g->exit_status[i] != -1)
		return t;
	chaos_kill(g->sh->head[i].pid);
	g->exit_status[i] = SIGKILL; /* as a wait status: killed by SIGKILL */
	g->frozen[i] = 0;
	return t;
}

int64_t cn_heads_freeze(struct cn_heads *g, int i)
{
	int64_t t = chaos_now_ns(), deadline = t + 2000000000;
	pid_t pid;

	if (!g->sh || i < 0 || i >= g->n || g->exit_status[i] != -1)
		return 0;
	pid = g->sh->head[i].pid;
	if (kill(pid, SIGSTOP) < 0)
		return 0;
	g->frozen[i] = 1;
	while (chaos_now_ns() < deadline) {
		siginfo_t si = { 0 };

		if (waitid(P_PID, (id_t)pid, &si, WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == pid) {
			return t;
		}
		chaos_sleep_ms(1);
	}
	return 0;
}

int cn_heads_stop(struct cn_heads *g, uint32_t who, int close_now, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	int bad = 0;

	if (!g->sh)
		return -1;
	for (int i = 0; i < g->n; i++) {
		if (who >> i & 1)
			atomic_store(close_now ? &g->sh->head[i].close_now : &g->sh->head[i].stop,
				     1);
	}
	for (int i = 0; i < g->n; i++) {
		int64_t left = (deadline - chaos_now_ns()) / 1000000;
		int st = -1, stage;

		if (!(who >> i & 1))
			continue;
		if (g->exit_status[i] == -1 && !g->frozen[i] &&
		    chaos_wait_exit(g->sh->head[i].pid, left > 0 ? (int)left : 0, &st) == 0) {
			g->exit_status[i] = st;
		}
		stage = atomic_load(&g->sh->head[i].stage);
		if (g->exit_status[i] == -1 || (stage != CN_ST_CLOSED && stage != CN_ST_FAILED))
			bad = 1;
	}
	return bad ? -1 : 0;
}

const struct cn_head *cn_heads_head(const struct cn_heads *g, int i)
{
	if (!g->sh || i < 0 || i >= g->n)
		return NULL;
	return &g->sh->head[i];
}
