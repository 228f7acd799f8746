/* SPDX-License-Identifier: BSD-3-Clause */
/* The coordinator daemon (ctl_daemon_*): a host on its own thread serving any number of
 * groups, each with its own coordinator created on its first HELLO and freed once it has been
 * stopped and unconnected for a while. ftcc-coordinator is a thin main around it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "rt.h"

#define GROUP_IDLE_MS 10000 /* a stopped group with no connections is freed after this */

enum { POLL_WAKE = RT_POLL_OWNER };

/* One group the daemon serves. Owned by the daemon. */
struct daemon_group {
	struct rt_route route; /* route.coord: the group's coordinator */
	char name[CTL_GROUP_MAX];
	uint64_t idle_since; /* stopped and unconnected since then; 0 = in use */
	struct daemon_group *next;
};

/* The daemon: @lock protects everything below it; the thread holds it except in poll(). */
struct ctl_daemon {
	pthread_mutex_t lock;
	pthread_t thread;
	int wake_fd;
	int port;
	bool stop;
	struct rt_times t;
	struct rt_host host;
	struct ctl_msg msg;
	struct rt_pollset ps;
	struct daemon_group *groups;
	uint32_t ngroups;
	uint64_t next_tick;
};

static size_t daemon_status_locked(struct ctl_daemon *d, char *buf, size_t len, uint64_t now)
{
	size_t n;
	int w;

	if (len == 0)
		return 0;
	w = snprintf(buf, len, "ftcc-coordinator on port %d: %u group%s\n", d->port, d->ngroups,
		     d->ngroups == 1 ? "" : "s");
	n = w < 0 ? 0 : ((size_t)w < len ? (size_t)w : len - 1);
	for (struct daemon_group *g = d->groups; g && n + 1 < len; g = g->next)
		n += ctl_coord_status(g->route.coord, buf + n, len - n, now);
	return n;
}

static size_t daemon_host_status(void *arg, char *buf, size_t len, uint64_t now)
{
	return daemon_status_locked(arg, buf, len, now);
}

static struct daemon_group *daemon_group_new(struct ctl_daemon *d, const struct ctl_msg *hello,
					     uint64_t now)
{
	struct daemon_group *g = calloc(1, sizeof(*g));
	struct ctl_coord_cfg cfg = { .expected = hello->expected,
				     .nstreams = hello->nstreams, /* the first member's */
				     .host = CTL_NO_MEMBER,
				     .timeout_ms = d->t.timeout_ms,
				     .hb_ms = d->t.hb_ms,
				     .form_timeout_ms = d->t.connect_ms };

	if (!g)
		return NULL;
	/* Members name their probe ports in their HELLOs. */
	if (rt_route_paddr_alloc(&g->route, cfg.expected)) {
		free(g);
		return NULL;
	}
	snprintf(g->name, sizeof(g->name), "%s", hello->group);
	snprintf(cfg.group, sizeof(cfg.group), "%s", hello->group);
	g->route.group = g->name;
	g->route.host = &d->host;

	struct ctl_coord_ops ops = rt_route_coord_ops(&g->route);
	g->route.coord = ctl_coord_create(&cfg, &ops, now);
	if (!g->route.coord) {
		rt_route_paddr_free(&g->route);
		free(g);
		return NULL;
	}
	g->next = d->groups;
	d->groups = g;
	d->ngroups++;
	ftcc_info("control: daemon serves group \"%s\" (%u members expected)", g->name,
		  cfg.expected);
	return g;
}

static struct rt_route *daemon_route(void *arg, const struct ctl_msg *hello, struct ctl_msg *refuse,
				     uint64_t now)
{
	struct ctl_daemon *d = arg;
	struct daemon_group *g;

	for (g = d->groups; g; g = g->next) {
		if (strcmp(g->name, hello->group) == 0)
			break;
	}
	if (hello->flags & CTL_HELLO_PROBE) {
		refuse->code = CTL_REF_NOT_COORD;
		refuse->hint = CTL_NO_MEMBER;
		snprintf(refuse->text, sizeof(refuse->text), "the daemon coordinates \"%s\"",
			 hello->group);
		return NULL;
	}
	if (g)
		return &g->route;
	if (hello->expected < 1 || hello->expected > CTL_MAX_MEMBERS ||
	    hello->member >= hello->expected) {
		refuse->code = CTL_REF_PROTOCOL;
		snprintf(refuse->text, sizeof(refuse->text),
			 "member %u of %u is not a valid first member of a group", hello->member,
			 hello->expected);
		return NULL;
	}
	g = daemon_group_new(d, hello, now);
	if (!g) {
		refuse->code = CTL_REF_CLOSED;
		snprintf(refuse->text, sizeof(refuse->text), "daemon out of memory");
		return NULL;
	}
	return &g->route;
}

/* Coordinator ticks every hb/2; frees groups stopped and unconnected for GROUP_IDLE_MS. */
static void daemon_groups_tick(struct ctl_daemon *d, uint64_t now)
{
	bool tick = now >= d->next_tick;

	if (tick)
		d->next_tick = now + (d->t.hb_ms / 2 ? d->t.hb_ms / 2 : 1);
	for (struct daemon_group **p = &d->groups; *p;) {
		struct daemon_group *g = *p;

		if (tick)
			ctl_coord_tick(g->route.coord, now);
		if (ctl_coord_state(g->route.coord) != CTL_C_STOPPED || g->route.nconns) {
			g->idle_since = 0;
		} else if (!g->idle_since) {
			g->idle_since = now;
		} else if (now - g->idle_since >= GROUP_IDLE_MS) {
			ftcc_info("control: daemon forgets stopped group \"%s\"", g->name);
			*p = g->next;
			d->ngroups--;
			rt_host_unroute(&d->host, &g->route);
			ctl_coord_destroy(g->route.coord);
			rt_route_paddr_free(&g->route);
			free(g);
			continue;
		}
		p = &g->next;
	}
}

static void *daemon_thread(void *arg)
{
	struct ctl_daemon *d = arg;

	ftcc_thread_name("coordd");
	pthread_mutex_lock(&d->lock);
	while (!d->stop) {
		uint64_t now = rt_now_ms();
		uint64_t next;

		daemon_groups_tick(d, now);
		next = rt_host_timers(&d->host, now);
		if (d->next_tick < next)
			next = d->next_tick;
		rt_pollset_reset(&d->ps);
		if (rt_pollset_add(&d->ps, d->wake_fd, POLLIN, POLL_WAKE, NULL) ||
		    rt_host_poll_add(&d->host, &d->ps))
			ftcc_warn("control: daemon out of memory for the poll set");
		pthread_mutex_unlock(&d->lock);
		rt_pollset_wait(&d->ps, next > now ? next - now : 0);
		pthread_mutex_lock(&d->lock);
		now = rt_now_ms();
		for (unsigned i = 0; i < d->ps.n; i++) {
			short rev = d->ps.pfd[i].revents;

			if (!rev)
				continue;
			if (d->ps.ref[i].kind == POLL_WAKE)
				rt_wake_clear(d->wake_fd);
			else
				rt_host_on_poll(&d->host, &d->ps.ref[i], rev, now);
		}
	}
	/* Every member hears REFUSE(CLOSED) before the sockets go. */
	for (struct daemon_group *g = d->groups; g; g = g->next)
		ctl_coord_shutdown(g->route.coord, rt_now_ms());
	rt_host_flush_all(&d->host);
	pthread_mutex_unlock(&d->lock);
	return NULL;
}

static void daemon_free(struct ctl_daemon *d)
{
	rt_host_fini(&d->host);
	while (d->groups) {
		struct daemon_group *g = d->groups;

		d->groups = g->next;
		ctl_coord_destroy(g->route.coord);
		rt_route_paddr_free(&g->route);
		free(g);
	}
	rt_pollset_free(&d->ps);
	rt_msg_free(&d->msg);
	if (d->wake_fd >= 0)
		close(d->wake_fd);
	pthread_mutex_destroy(&d->lock);
	free(d);
}

int ctl_daemon_start(const char *addr, struct ctl_daemon **out)
{
	struct rt_host_ops ops = { .route = daemon_route, .status = daemon_host_status };
	struct sockaddr_storage ss;
	unsigned len = 0;
	struct ctl_daemon *d;
	int rc;

	*out = NULL;
	rt_settings_once();
	if (!addr || ctl_parse_addr(addr, &ss, &len)) {
		ftcc_warn("control: daemon: bad listen address \"%s\" (expected host:port)",
			  addr ? addr : "(null)");
		return -EINVAL;
	}
	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	pthread_mutex_init(&d->lock, NULL);
	d->host.lfd = -1;
	ops.arg = d;
	rt_times_fill(0, 0, 0, &d->t);
	d->wake_fd = rt_wake_open();
	rc = d->wake_fd < 0 ? d->wake_fd : rt_msg_alloc(&d->msg);
	if (!rc) {
		rc = rt_host_init(&d->host, (struct sockaddr *)&ss, len, -1, &ops, &d->msg);
		if (rc)
			ftcc_warn("control: daemon cannot listen on %s: %s", addr, strerror(-rc));
	}
	if (!rc) {
		d->port = d->host.port;
		d->host.probe_ms = d->t.timeout_ms / 2 > 100 ? d->t.timeout_ms / 2 : 100;
		rc = -pthread_create(&d->thread, NULL, daemon_thread, d);
	}
	if (rc) {
		daemon_free(d);
		return rc;
	}
	ftcc_info("control: daemon listening on %s (port %d)", addr, d->port);
	*out = d;
	return 0;
}

int ctl_daemon_port(const struct ctl_daemon *d)
{
	return d->port;
}

size_t ctl_daemon_status(struct ctl_daemon *d, char *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&d->lock);
	n = daemon_status_locked(d, buf, len, rt_now_ms());
	pthread_mutex_unlock(&d->lock);
	return n;
}

void ctl_daemon_stop(struct ctl_daemon *d)
{
	if (!d)
		return;
	pthread_mutex_lock(&d->lock);
	d->stop = true;
	pthread_mutex_unlock(&d->lock);
	rt_wake(d->wake_fd);
	pthread_join(d->thread, NULL);
	daemon_free(d);
}
