/* SPDX-License-Identifier: BSD-3-Clause */
/* Probes of members' listening ports, for coordinators served by a host: a coordinator whose
 * member's control connection ended without a LEAVE asks whether a process still answers where
 * that member takes connections. The probe connects and says HELLO with CTL_HELLO_PROBE; a
 * running process answers (any frame: it refuses probes), and lives. A refused connect, or the
 * connection closed before an answer, says the process is gone (a process that is exiting may
 * still accept, for an instant, then resets what it accepted). No answer in time (a stopped
 * process's kernel accepts, but nothing reads) says nothing. The answer reaches the coordinator
 * from the host's own poll round or timers, never from inside a coordinator call.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "rt.h"

/* One probe in flight, or decided and waiting to be delivered (@res set, connection closed). */
struct rt_probe {
	struct rt_conn c;
	int open;		   /* connected: HELLO queued, waiting for the answer */
	enum ctl_probe_result res; /* 0 while undecided */
	struct rt_route *route;
	uint32_t id;
	uint64_t inc;
	uint64_t deadline;
	struct rt_probe *next;
};

int rt_route_paddr_alloc(struct rt_route *r, uint32_t n)
{
	r->paddr = calloc(n ? n : 1, sizeof(*r->paddr));
	if (!r->paddr)
		return -ENOMEM;
	r->npaddr = n;
	return 0;
}

void rt_route_paddr_free(struct rt_route *r)
{
	free(r->paddr);
	r->paddr = NULL;
	r->npaddr = 0;
}

void rt_route_note_hello(struct rt_route *r, const struct ctl_msg *hello,
			 const struct sockaddr_storage *peer)
{
	struct rt_probe_addr *pa;

	if (!r->paddr || r->paddr_fixed || hello->member >= r->npaddr || !hello->listen_port ||
	    (peer->ss_family != AF_INET && peer->ss_family != AF_INET6))
		return;
	pa = &r->paddr[hello->member];
	memcpy(&pa->sa, peer, sizeof(*peer));
	pa->inc = hello->incarnation;
	if (peer->ss_family == AF_INET) {
		((struct sockaddr_in *)&pa->sa)->sin_port = htons(hello->listen_port);
		pa->len = sizeof(struct sockaddr_in);
	} else {
		((struct sockaddr_in6 *)&pa->sa)->sin6_port = htons(hello->listen_port);
		pa->len = sizeof(struct sockaddr_in6);
	}
}

static void probe_decide(struct rt_probe *p, enum ctl_probe_result res)
{
	rt_conn_close(&p->c);
	p->res = res;
}

/* The connect is done: says HELLO (a probe), answered by any running process. */
static void probe_hello(struct rt_probe *p)
{
	struct ctl_msg m = { .type = CTL_HELLO,
			     .flags = CTL_HELLO_PROBE,
			     .member = p->id,
			     .expected = p->route->npaddr ? p->route->npaddr : 1 };

	snprintf(m.group, sizeof(m.group), "%s", p->route->group);
	m.group_id = ctl_group_id(m.group);
	p->open = 1;
	p->c.connecting = 0;
	if (rt_conn_send(&p->c, &m))
		probe_decide(p, p->c.death ? CTL_PROBE_REFUSED : CTL_PROBE_UNKNOWN);
}

/* A connect that ended with @rc (0 or -errno): refused, or reset before it was done (the
 * listener of an exiting process took the SYN, then went), says the process is gone. */
static void probe_connected(struct rt_probe *p, int rc)
{
	if (rc == 0)
		probe_hello(p);
	else
		probe_decide(p, rc == -ECONNREFUSED || rc == -ECONNRESET || rc == -EPIPE ?
					CTL_PROBE_REFUSED :
					CTL_PROBE_UNKNOWN);
}

void rt_route_probe(void *arg, uint32_t id, uint64_t incarnation)
{
	struct rt_route *r = arg;
	struct rt_host *h = r->host;
	struct rt_probe *p = calloc(1, sizeof(*p));
	int fd = -1, rc;

	if (!p) {
		ftcc_warn("control: out of memory for a probe of member %u", id);
		return; /* silence decides */
	}
	rt_conn_init(&p->c, -1, "probe");
	p->route = r;
	p->id = id;
	p->inc = incarnation;
	p->deadline = rt_now_ms() + (h->probe_ms ? h->probe_ms : 1000);
	p->next = h->probes;
	h->probes = p;
	if (!r->paddr || id >= r->npaddr || !r->paddr[id].len ||
	    (!r->paddr_fixed && r->paddr[id].inc != incarnation)) {
		/* nowhere to probe, or the address is another incarnation's (a refusal there
		 * would prove nothing about this one) */
		p->res = CTL_PROBE_UNKNOWN;
		return;
	}
	rc = rt_connect_start((const struct sockaddr *)&r->paddr[id].sa, r->paddr[id].len, NULL, 0,
			      &fd);
	p->c.fd = rc == 0 || rc == -EINPROGRESS ? fd : -1;
	if (rc == -EINPROGRESS) {
		p->c.connecting = 1;
		return;
	}
	probe_connected(p, rc);
}

void rt_probe_drop_route(struct rt_host *h, struct rt_route *r)
{
	for (struct rt_probe **pp = &h->probes; *pp;) {
		struct rt_probe *p = *pp;

		if (p->route == r) {
			*pp = p->next;
			rt_conn_close(&p->c);
			free(p);
			continue;
		}
		pp = &p->next;
	}
}

int rt_probe_poll_add(struct rt_host *h, struct rt_pollset *ps)
{
	for (struct rt_probe *p = h->probes; p; p = p->next) {
		short ev = p->open ? POLLIN : POLLOUT;

		if (p->open && rt_conn_pending(&p->c))
			ev |= POLLOUT;
		if (!p->res && p->c.fd >= 0 && rt_pollset_add(ps, p->c.fd, ev, RT_POLL_PROBE, p))
			return -ENOMEM;
	}
	return 0;
}

/* Delivers @p's answer to its coordinator. */
static void probe_deliver(struct rt_probe *p, uint64_t now)
{
	if (p->route && p->route->coord)
		ctl_coord_on_probe(p->route->coord, p->id, p->inc, p->res, now);
}

void rt_probe_on_poll(struct rt_host *h, struct rt_probe *p, short revents, uint64_t now)
{
	struct ctl_msg m = { .members = h->msg->members, .members_cap = h->msg->members_cap };

	(void)now;
	/* Decided here, delivered by the timers of this round (the entry stays valid until
	 * then: only rt_probe_timers() frees). */
	if (p->res || p->c.fd < 0)
		return;
	if (!p->open) {
		if (revents & (POLLOUT | POLLERR | POLLHUP))
			probe_connected(p, rt_connect_result(p->c.fd));
		return;
	}
	if (revents & POLLOUT)
		rt_conn_flush(&p->c);
	if (revents & (POLLIN | POLLHUP | POLLERR))
		rt_conn_fill(&p->c);
	if (p->c.rlen > p->c.roff && rt_conn_next(&p->c, &m) != 0) {
		probe_decide(p, CTL_PROBE_ALIVE); /* it said something (even garbage): it runs */
		return;
	}
	if (p->c.err) /* closed or reset before any answer: the process is exiting or gone */
		probe_decide(p, p->c.death ? CTL_PROBE_REFUSED : CTL_PROBE_UNKNOWN);
}

uint64_t rt_probe_timers(struct rt_host *h, uint64_t now)
{
	uint64_t next = UINT64_MAX;

	for (struct rt_probe **pp = &h->probes; *pp;) {
		struct rt_probe *p = *pp;

		if (!p->res && now >= p->deadline)
			probe_decide(p, CTL_PROBE_UNKNOWN);
		if (p->res) {
			*pp = p->next;
			probe_deliver(p, now);
			free(p);
			/* the coordinator may have started new probes at the head: start over */
			pp = &h->probes;
			continue;
		}
		if (p->deadline < next)
			next = p->deadline;
		pp = &p->next;
	}
	return next;
}

void rt_probe_fini(struct rt_host *h)
{
	while (h->probes) {
		struct rt_probe *p = h->probes;

		h->probes = p->next;
		rt_conn_close(&p->c);
		free(p);
	}
}
