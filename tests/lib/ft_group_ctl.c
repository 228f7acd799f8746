/* SPDX-License-Identifier: BSD-3-Clause */
/* The parent's side of a test group (tests/lib/ft_group.h) once it runs: each member's current
 * process and records, its control (kill, freeze, abort, ready, stop, the op limit) and the
 * bounded waits on the group; and the ports the members' control planes listen on.
 */
#define _GNU_SOURCE
#include "ft_group.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "chaos_proc.h"

/* Whether @port is free at @ip now (a bind succeeds). */
static int ft_port_free(const char *ip, uint16_t port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(port) };
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), ok;

	if (fd < 0)
		return 0;
	ok = inet_pton(AF_INET, ip, &sa.sin_addr) == 1 &&
	     bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

uint16_t ft_group_free_port(const char *ip)
{
	/* Below the kernel's ephemeral range: a port the kernel handed out for port 0 and took
	 * back would be handed out again, to a member's own data-plane listener or to a
	 * connection, between this pick and the member's bind (seen as EADDRINUSE). The ports
	 * given out lately by this process are skipped: the members' ports are picked before any
	 * of them binds. */
	static uint16_t recent[64];
	static unsigned nrecent;
	unsigned lo = 32768, hi = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	uint64_t x = (uint64_t)chaos_now_ns() ^ ((uint64_t)getpid() << 20);

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	for (int tries = 0; lo > 12000 && tries < 256; tries++) {
		uint16_t port;
		unsigned k;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		port = (uint16_t)(10000 + (x >> 33) % (lo - 11000));
		for (k = 0; k < 64 && recent[k] != port; k++) {
		}
		if (k < 64 || !ft_port_free(ip, port))
			continue;
		recent[nrecent++ % 64] = port;
		return port;
	}
	return 0;
}

const struct ft_run *ft_group_cur(const struct ft_group *g, int i)
{
	if (!g->sh || i < 0 || i >= g->n || g->run[i] < 0)
		return NULL;
	return &g->sh->run[g->run[i]];
}

const struct ft_op *ft_group_op(const struct ft_group *g, int i, uint64_t seq)
{
	const struct ft_run *r = ft_group_cur(g, i);

	if (!r || seq >= FT_GROUP_MAX_SEQ ||
	    atomic_load_explicit(&r->ops[seq].state, memory_order_acquire) != FT_OP_DONE) {
		return NULL;
	}
	return &r->ops[seq];
}

int64_t ft_group_kill(struct ft_group *g, int i)
{
	const struct ft_run *r = ft_group_cur(g, i);
	int64_t t = chaos_now_ns();

	if (!r || g->exit_status[g->run[i]] != -1)
		return t;
	chaos_kill(r->pid);
	g->exit_status[g->run[i]] = SIGKILL; /* as a wait status: killed by SIGKILL */
	g->t_exit[g->run[i]] = t;
	g->frozen[i] = 0;
	return t;
}

int64_t ft_group_freeze(struct ft_group *g, int i)
{
	const struct ft_run *r = ft_group_cur(g, i);
	int64_t t = chaos_now_ns(), deadline = t + 2000000000;

	if (!r || kill(r->pid, SIGSTOP) < 0)
		return 0;
	g->frozen[i] = 1;
	while (chaos_now_ns() < deadline) {
		siginfo_t si = { 0 };

		if (waitid(P_PID, (id_t)r->pid, &si, WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == r->pid) {
			return t;
		}
		chaos_sleep_ms(1);
	}
	return 0;
}

int64_t ft_group_wait_exit(struct ft_group *g, int i, int timeout_ms, int *status)
{
	const struct ft_run *r = ft_group_cur(g, i);
	int st = -1;

	if (status)
		*status = -1;
	if (!r)
		return 0;
	if (g->exit_status[g->run[i]] != -1) {
		if (status)
			*status = g->exit_status[g->run[i]];
		return g->t_exit[g->run[i]];
	}
	if (chaos_wait_exit(r->pid, timeout_ms, &st))
		return 0;
	g->exit_status[g->run[i]] = st;
	g->t_exit[g->run[i]] = chaos_now_ns();
	if (status)
		*status = st;
	return g->t_exit[g->run[i]];
}

int64_t ft_group_abort(struct ft_group *g, int i, int timeout_ms)
{
	struct ft_run *r = g->sh && g->run[i] >= 0 ? &g->sh->run[g->run[i]] : NULL;
	int64_t t = chaos_now_ns(), deadline = t + (int64_t)timeout_ms * 1000000;

	if (!r)
		return 0;
	atomic_store(&r->abort, 1);
	while (!atomic_load(&r->abort_ns)) {
		if (chaos_now_ns() > deadline)
			return 0;
		chaos_sleep_ms(1);
	}
	return t;
}

void ft_group_ready(struct ft_group *g, int i)
{
	if (g->sh && i >= 0 && i < g->n && g->run[i] >= 0)
		atomic_store(&g->sh->run[g->run[i]].ready, 1);
}

void ft_group_set_limit(struct ft_group *g, uint64_t limit)
{
	uint64_t cur;

	if (!g->sh)
		return;
	cur = atomic_load(&g->sh->limit);
	while (cur < limit && !atomic_compare_exchange_weak(&g->sh->limit, &cur, limit)) {
	}
}

int64_t ft_group_settle(struct ft_group *g, uint32_t who, int timeout_ms)
{
	int64_t last = ft_group_max_seq(g) + 64;

	if (!g->sh)
		return -1;
	last = last < FT_GROUP_MAX_SEQ ? last : FT_GROUP_MAX_SEQ - 1;
	atomic_store(&g->sh->limit, (uint64_t)last + 1);
	ft_group_wait_op(g, who, (uint64_t)last, timeout_ms);
	/* Settled: each member did the last op, or its loop ended (lost, aborted). */
	for (int i = 0; i < g->n; i++) {
		const struct ft_run *r = ft_group_cur(g, i);

		if ((who >> i & 1) && !ft_group_op(g, i, (uint64_t)last) &&
		    !(r && atomic_load(&r->ended))) {
			return -1;
		}
	}
	return last;
}

void ft_group_stop(struct ft_group *g, int i)
{
	if (g->sh && i >= 0 && i < g->n && g->run[i] >= 0)
		atomic_store(&g->sh->run[g->run[i]].stop, 1);
}

int ft_group_wait_created(const struct ft_group *g, uint32_t who, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;

	for (;;) {
		int all = 1, bad = 0;

		for (int i = 0; i < g->n; i++) {
			const struct ft_run *r = ft_group_cur(g, i);
			int c = r ? atomic_load(&r->created) : -1;

			if (!(who >> i & 1))
				continue;
			all &= c != 0;
			bad |= c != 1;
		}
		if (all)
			return bad ? -1 : 0;
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(1);
	}
}

int ft_group_wait_op(const struct ft_group *g, uint32_t who, uint64_t seq, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;

	for (;;) {
		int all = 1, got = 1;

		for (int i = 0; i < g->n; i++) {
			const struct ft_run *r = ft_group_cur(g, i);

			if (!(who >> i & 1))
				continue;
			if (ft_group_op(g, i, seq))
				continue;
			got = 0;
			if (!r || !(atomic_load(&r->ended) || atomic_load(&r->created) < 0))
				all = 0;
		}
		if (all)
			return got ? 0 : -1;
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(1);
	}
}

int ft_group_wait_ended(const struct ft_group *g, uint32_t who, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;

	for (;;) {
		int all = 1;

		for (int i = 0; i < g->n; i++) {
			const struct ft_run *r = ft_group_cur(g, i);

			if ((who >> i & 1) &&
			    !(r && (atomic_load(&r->ended) || atomic_load(&r->created) < 0))) {
				all = 0;
			}
		}
		if (all)
			return 0;
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(1);
	}
}
