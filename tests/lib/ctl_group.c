/* SPDX-License-Identifier: BSD-3-Clause */
/* Test groups of membership members in forked processes: the member process loop that records
 * every epoch and state it sees, starting, killing, freezing and stopping those processes, the
 * parent's waits, and a daemon run by its own process. Owns each group's shared page.
 */
#define _GNU_SOURCE
#include "ctl_group.h"
#include "ft_group.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "chaos_proc.h"

/* A member process wakes at least this often to look at its view. */
#define CTL_GROUP_POLL_MS 5

/* What a forked member process needs; lives on the parent's stack, copied by fork. */
struct ctl_group_child_arg {
	const struct ctl_group *g;
	int run;
};

/* The runtime's change callback (control thread) wakes the member process loop through it. */
static int ctl_group_wake_fd = -1;

static void ctl_group_on_change(void *arg)
{
	uint64_t one = 1;

	(void)arg;
	if (write(ctl_group_wake_fd, &one, sizeof(one)) < 0) {
		/* EAGAIN: already signalled. */
	}
}

static void ctl_group_info(int member, char *buf, size_t len)
{
	snprintf(buf, len, "member %d", member);
}

/* Records one epoch of @e into the next free entry of @r (child). */
static void ctl_group_note_epoch(struct ctl_group_run *r, const struct ctl_epoch *e, int64_t now)
{
	uint32_t n = atomic_load_explicit(&r->nepochs, memory_order_relaxed);
	struct ctl_group_epoch *x;

	r->last_epoch = e->epoch;
	if (n >= CTL_GROUP_MAX_EPOCHS) {
		atomic_fetch_add(&r->dropped, 1);
		return;
	}
	x = &r->epochs[n];
	memset(x, 0, sizeof(*x));
	x->epoch = e->epoch;
	x->boundary = e->boundary;
	x->coord = e->coord;
	x->nmembers = e->nmembers;
	x->self_index = e->self_index;
	x->t_ns = now;
	for (uint32_t k = 0; k < e->nmembers; k++) {
		const struct ctl_member_rec *rec = &e->members[k];
		char want[32];

		ctl_group_info((int)rec->id, want, sizeof(want));
		if (rec->info_len != strlen(want) || memcmp(rec->info, want, rec->info_len) != 0)
			x->bad_info++;
		if (rec->id < 32)
			x->mask |= 1u << rec->id;
		if (k < CTL_GROUP_MAX_N) {
			x->m[k].id = rec->id;
			x->m[k].flags = rec->flags;
			x->m[k].incarnation = rec->incarnation;
		}
	}
	atomic_store_explicit(&r->nepochs, n + 1, memory_order_release);
}

/* Records what changed in @v since the last poll (child). */
static void ctl_group_note(struct ctl_group_run *r, const struct ctl_view *v)
{
	int64_t now = chaos_now_ns();
	size_t rlen = strnlen(v->reason, sizeof(v->reason) - 1);

	if (v->e && v->e->epoch != r->last_epoch)
		ctl_group_note_epoch(r, v->e, now);
	if (v->e && v->e->self_index >= 0 && (uint32_t)v->e->self_index < v->e->nmembers)
		atomic_store(&r->incarnation, v->e->members[v->e->self_index].incarnation);
	if ((int)v->state == r->state && strlen(r->reason) == rlen &&
	    memcmp(r->reason, v->reason, rlen) == 0) {
		return;
	}
	atomic_fetch_add_explicit(&r->seq, 1, memory_order_acq_rel);
	atomic_thread_fence(memory_order_release);
	if ((int)v->state != r->state)
		r->t_state_ns = now;
	r->state = (int)v->state;
	memcpy(r->reason, v->reason, rlen);
	r->reason[rlen] = '\0';
	atomic_fetch_add_explicit(&r->seq, 1, memory_order_release);
}

/* Waits for a change signal or @ms (child). */
static void ctl_group_nap(int ms)
{
	struct pollfd p = { .fd = ctl_group_wake_fd, .events = POLLIN };
	uint64_t v;

	if (poll(&p, 1, ms) > 0 && read(ctl_group_wake_fd, &v, sizeof(v)) < 0) {
		/* EAGAIN: someone else drained it. */
	}
}

/* Body of a member process: create, record until told to stop, destroy. */
static int ctl_group_child(void *arg)
{
	const struct ctl_group_child_arg *a = arg;
	const struct ctl_group *g = a->g;
	struct ctl_group_run *r = &g->sh->run[a->run];
	const char *addrs[CTL_GROUP_MAX_N];
	struct ctl_member_cfg cfg = { 0 };
	struct ctl_member *m = NULL;
	char info[32];
	int64_t t;
	int rc;

	/* The runtime's log goes to the captured stderr, read when a check fails. */
	setenv("FTCC_DEBUG", getenv("CTL_GROUP_DEBUG") ? getenv("CTL_GROUP_DEBUG") : "INFO", 1);
	ctl_group_wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (ctl_group_wake_fd < 0)
		return 2;
	for (int i = 0; i < g->n; i++)
		addrs[i] = g->addr[i];
	ctl_group_info(r->member, info, sizeof(info));
	cfg.group = g->name;
	cfg.id = (uint32_t)r->member;
	cfg.expected = (uint32_t)g->n;
	cfg.coordinator = g->coordinator[0] ? g->coordinator : "embedded";
	cfg.addrs = g->coordinator[0] ? NULL : addrs;
	cfg.join = r->join;
	cfg.info = info;
	cfg.info_len = strlen(info);
	cfg.timeout_ms = g->timeout_ms;
	cfg.connect_timeout_ms = g->connect_timeout_ms;
	cfg.on_change = ctl_group_on_change;
	rc = ctl_member_create(&cfg, &m);
	if (rc) {
		fprintf(stderr, "ctl_group: member %d: ctl_member_create: %s\n", r->member,
			strerror(-rc));
		atomic_store(&r->created, rc < 0 ? rc : -EINVAL);
		return 3;
	}
	atomic_store(&r->created, 1);
	while (!atomic_load(&r->stop)) {
		struct ctl_view v;

		ctl_member_view(m, &v);
		ctl_group_note(r, &v);
		ctl_epoch_put(v.e);
		ctl_group_nap(CTL_GROUP_POLL_MS);
	}
	t = chaos_now_ns();
	ctl_member_destroy(m);
	atomic_store(&r->destroy_ns, chaos_now_ns() - t > 0 ? chaos_now_ns() - t : 1);
	return 0;
}

/* A port nobody listens on at @ip now, outside the ephemeral range (ft_group_free_port()). */
static uint16_t ctl_group_free_port(const char *ip)
{
	return ft_group_free_port(ip);
}

int ctl_group_start(struct ctl_group *g, const char *test, int n, const struct ctl_group_opts *o)
{
	memset(g, 0, sizeof(*g));
	if (n < 1 || n > CTL_GROUP_MAX_N)
		return -1;
	g->t0_ns = chaos_now_ns();
	g->n = n;
	g->timeout_ms = o && o->timeout_ms ? o->timeout_ms : 1000;
	g->connect_timeout_ms =
		o && o->connect_timeout_ms ? o->connect_timeout_ms : 2 * g->timeout_ms;
	if (o && o->coordinator)
		snprintf(g->coordinator, sizeof(g->coordinator), "%s", o->coordinator);
	snprintf(g->name, sizeof(g->name), "%.40s-%d", test, (int)getpid());
	for (int i = 0; i < CTL_GROUP_MAX_RUNS; i++) {
		g->errfd[i] = -1;
		g->exit_status[i] = -1;
	}
	for (int i = 0; i < CTL_GROUP_MAX_N; i++)
		g->run[i] = -1;
	g->sh = mmap(NULL, sizeof(*g->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		     0);
	if (g->sh == MAP_FAILED) {
		g->sh = NULL;
		fprintf(stderr, "ctl_group: mmap: %s\n", strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		uint16_t port;

		snprintf(g->ip[i], sizeof(g->ip[i]), "127.0.0.%d", CTL_GROUP_IP_BASE + i);
		port = ctl_group_free_port(g->ip[i]);
		if (!port) {
			fprintf(stderr, "ctl_group: no free port on %s\n", g->ip[i]);
			return -1;
		}
		snprintf(g->addr[i], sizeof(g->addr[i]), "%s:%u", g->ip[i], port);
	}
	for (int i = 0; i < n; i++)
		if (ctl_group_spawn(g, i, 0))
			return -1;
	return 0;
}

int ctl_group_spawn(struct ctl_group *g, int i, int join)
{
	struct ctl_group_child_arg a = { .g = g, .run = g->nruns };
	struct ctl_group_run *r;
	char name[32];
	pid_t pid;

	if (!g->sh || i < 0 || i >= g->n || g->nruns >= CTL_GROUP_MAX_RUNS ||
	    (g->run[i] >= 0 && chaos_alive(g->sh->run[g->run[i]].pid))) {
		fprintf(stderr, "ctl_group: cannot start member %d\n", i);
		return -1;
	}
	r = &g->sh->run[a.run];
	memset(r, 0, sizeof(*r));
	r->member = i;
	r->join = join;
	snprintf(name, sizeof(name), "ctl-member-%d", i);
	g->errfd[a.run] = chaos_capture_open(name);
	pid = chaos_fork(ctl_group_child, &a, g->errfd[a.run]);
	if (pid < 0) {
		fprintf(stderr, "ctl_group: fork: %s\n", strerror(errno));
		return -1;
	}
	r->pid = pid;
	g->run[i] = g->nruns++;
	g->frozen[i] = 0;
	return 0;
}

const struct ctl_group_run *ctl_group_cur(const struct ctl_group *g, int i)
{
	if (!g->sh || i < 0 || i >= g->n || g->run[i] < 0)
		return NULL;
	return &g->sh->run[g->run[i]];
}

void ctl_group_kill(struct ctl_group *g, int i)
{
	const struct ctl_group_run *r = ctl_group_cur(g, i);

	if (!r)
		return;
	chaos_kill(r->pid);
	g->exit_status[g->run[i]] = SIGKILL; /* as a wait status: killed by SIGKILL */
	g->frozen[i] = 0;
}

int ctl_group_freeze(struct ctl_group *g, int i)
{
	const struct ctl_group_run *r = ctl_group_cur(g, i);
	int64_t deadline = chaos_now_ns() + 2000000000;

	if (!r || kill(r->pid, SIGSTOP) < 0)
		return -1;
	g->frozen[i] = 1;
	while (chaos_now_ns() < deadline) {
		siginfo_t si = { 0 };

		if (waitid(P_PID, (id_t)r->pid, &si, WSTOPPED | WNOHANG | WNOWAIT) == 0 &&
		    si.si_pid == r->pid) {
			return 0;
		}
		chaos_sleep_ms(1);
	}
	return -1;
}

void ctl_group_thaw(struct ctl_group *g, int i)
{
	const struct ctl_group_run *r = ctl_group_cur(g, i);

	if (!r)
		return;
	kill(r->pid, SIGCONT);
	g->frozen[i] = 0;
}

const struct ctl_group_epoch *ctl_group_newest(const struct ctl_group *g, int i)
{
	const struct ctl_group_run *r = ctl_group_cur(g, i);
	uint32_t n;

	if (!r)
		return NULL;
	n = atomic_load_explicit(&r->nepochs, memory_order_acquire);
	return n ? &r->epochs[n - 1] : NULL;
}

int ctl_group_run_state(const struct ctl_group_run *r, struct ctl_group_state *st)
{
	for (int tries = 0; tries < 10000; tries++) {
		uint32_t s1 = atomic_load_explicit(&r->seq, memory_order_acquire), s2;

		if (s1 & 1) {
			continue;
		}
		st->state = r->state;
		st->t_ns = r->t_state_ns;
		memcpy(st->reason, r->reason, sizeof(st->reason));
		atomic_thread_fence(memory_order_acquire);
		s2 = atomic_load_explicit(&r->seq, memory_order_relaxed);
		if (s1 == s2)
			break;
	}
	st->reason[sizeof(st->reason) - 1] = '\0';
	return st->state;
}

int ctl_group_state(const struct ctl_group *g, int i, struct ctl_group_state *st)
{
	const struct ctl_group_run *r = ctl_group_cur(g, i);

	memset(st, 0, sizeof(*st));
	return r ? ctl_group_run_state(r, st) : 0;
}

const struct ctl_group_epoch *ctl_group_find(const struct ctl_group_run *r, uint32_t mask,
					     uint64_t min)
{
	uint32_t n = atomic_load_explicit(&r->nepochs, memory_order_acquire);

	for (uint32_t k = 0; k < n; k++)
		if (r->epochs[k].epoch >= min && r->epochs[k].mask == mask)
			return &r->epochs[k];
	return NULL;
}

int64_t ctl_group_seen(const struct ctl_group *g, int i, uint32_t mask, uint64_t min_epoch)
{
	const struct ctl_group_run *r = ctl_group_cur(g, i);
	const struct ctl_group_epoch *e = r ? ctl_group_find(r, mask, min_epoch) : NULL;

	return e ? e->t_ns : 0;
}

int ctl_group_wait_view(const struct ctl_group *g, uint32_t who, uint32_t mask, uint64_t min_epoch,
			int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;

	for (;;) {
		int all = 1;

		for (int i = 0; i < g->n; i++)
			if ((who & (1u << i)) && !ctl_group_seen(g, i, mask, min_epoch))
				all = 0;
		if (all)
			return 0;
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(1);
	}
}

static int ctl_group_final(int state)
{
	return state == CTL_M_LOST || state == CTL_M_REMOVED || state == CTL_M_LEFT;
}

int ctl_group_wait_final(const struct ctl_group *g, int i, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	struct ctl_group_state st;

	for (;;) {
		if (ctl_group_final(ctl_group_state(g, i, &st)))
			return st.state;
		if (chaos_now_ns() > deadline)
			return 0;
		chaos_sleep_ms(1);
	}
}

int ctl_group_end(struct ctl_group *g, int timeout_ms, double *max_destroy_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	int asked[CTL_GROUP_MAX_RUNS] = { 0 };
	double worst = 0;
	int bad = 0;

	if (max_destroy_ms)
		*max_destroy_ms = 0;
	if (!g->sh)
		return 0;
	for (int i = 0; i < g->n; i++) {
		int ri = g->run[i];

		if (ri < 0 || g->exit_status[ri] != -1)
			continue;
		if (g->frozen[i]) {
			ctl_group_kill(g, i);
			continue;
		}
		atomic_store(&g->sh->run[ri].stop, 1);
		asked[ri] = 1;
	}
	for (int ri = 0; ri < g->nruns; ri++) {
		int st = -1;
		int64_t left = (deadline - chaos_now_ns()) / 1000000;

		if (!asked[ri])
			continue;
		if (chaos_wait_exit(g->sh->run[ri].pid, left > 0 ? (int)left : 0, &st) ||
		    !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			bad++;
		}
		if (atomic_load(&g->sh->run[ri].destroy_ns)) {
			double ms = chaos_ms(0, atomic_load(&g->sh->run[ri].destroy_ns));

			worst = ms > worst ? ms : worst;
		}
	}
	for (int ri = 0; ri < g->nruns; ri++) {
		chaos_kill(g->sh->run[ri].pid);
		if (g->errfd[ri] >= 0)
			close(g->errfd[ri]);
	}
	munmap(g->sh, sizeof(*g->sh));
	memset(g, 0, sizeof(*g));
	if (max_destroy_ms)
		*max_destroy_ms = worst;
	return bad;
}

/* ---- daemon process -------------------------------------------------------------------------- */

static int ctl_group_daemon_child(void *arg)
{
	struct ctl_group_daemon_page *pg = arg;
	struct ctl_daemon *d = NULL;
	int rc;

	setenv("FTCC_DEBUG", getenv("CTL_GROUP_DEBUG") ? getenv("CTL_GROUP_DEBUG") : "INFO", 1);
	rc = ctl_daemon_start("127.0.0.1:0", &d);
	if (rc) {
		fprintf(stderr, "ctl_group: ctl_daemon_start: %s\n", strerror(-rc));
		atomic_store(&pg->port, rc < 0 ? rc : -EINVAL);
		return 3;
	}
	atomic_store(&pg->port, ctl_daemon_port(d));
	while (!atomic_load(&pg->stop)) {
		uint32_t req = atomic_load(&pg->req);

		if (req != atomic_load(&pg->ack)) {
			ctl_daemon_status(d, pg->status, sizeof(pg->status));
			pg->status[sizeof(pg->status) - 1] = '\0';
			atomic_store(&pg->ack, req);
		}
		chaos_sleep_ms(2);
	}
	ctl_daemon_stop(d);
	return 0;
}

int ctl_group_daemon_start(struct ctl_group_daemon *d, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;

	memset(d, 0, sizeof(*d));
	d->errfd = -1;
	d->pg = mmap(NULL, sizeof(*d->pg), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		     0);
	if (d->pg == MAP_FAILED) {
		d->pg = NULL;
		return -1;
	}
	d->errfd = chaos_capture_open("ctl-daemon");
	d->pid = chaos_fork(ctl_group_daemon_child, d->pg, d->errfd);
	if (d->pid < 0)
		return -1;
	while (atomic_load(&d->pg->port) == 0 && chaos_now_ns() < deadline)
		chaos_sleep_ms(1);
	if (atomic_load(&d->pg->port) <= 0) {
		fprintf(stderr, "ctl_group: daemon did not start: %d\n", atomic_load(&d->pg->port));
		return -1;
	}
	snprintf(d->spec, sizeof(d->spec), "127.0.0.1:%d", atomic_load(&d->pg->port));
	return 0;
}

size_t ctl_group_daemon_status(struct ctl_group_daemon *d, char *buf, size_t len, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	uint32_t req;

	if (len)
		buf[0] = '\0';
	if (!d->pg || len == 0)
		return 0;
	req = atomic_fetch_add(&d->pg->req, 1) + 1;
	while (atomic_load(&d->pg->ack) != req) {
		if (chaos_now_ns() > deadline)
			return 0;
		chaos_sleep_ms(1);
	}
	snprintf(buf, len, "%s", d->pg->status);
	return strlen(buf);
}

int ctl_group_daemon_end(struct ctl_group_daemon *d, int timeout_ms)
{
	int st = -1, rc = 0;

	if (!d->pg)
		return 0;
	atomic_store(&d->pg->stop, 1);
	if (d->pid > 0 &&
	    (chaos_wait_exit(d->pid, timeout_ms, &st) || !WIFEXITED(st) || WEXITSTATUS(st) != 0)) {
		rc = -1;
	}
	if (d->pid > 0)
		chaos_kill(d->pid);
	if (d->errfd >= 0)
		close(d->errfd);
	munmap(d->pg, sizeof(*d->pg));
	memset(d, 0, sizeof(*d));
	return rc;
}
