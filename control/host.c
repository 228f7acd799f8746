/* SPDX-License-Identifier: BSD-3-Clause */
/* The host: a control listener and the connections it accepted, shared by a member (which may
 * host its group's coordinator) and the daemon (many groups). It answers STATUS requests,
 * refuses garbage, routes each HELLO to a coordinator and carries out that coordinator's
 * send/close ops; it also flushes and closes a member's former links.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "rt.h"

#define STATUS_REQ "STATUS"
#define ACCEPT_BURST 64
#define READ_ROUNDS 8

enum hconn_state {
	HC_FIRST = 1, /* accepted, nothing decided yet */
	HC_ROUTED,    /* said HELLO; its frames go to route->coord */
	HC_CLOSING,   /* flushing what is queued, then closed (by RT_CLOSE_MS at the latest) */
	HC_DEAD,      /* to be freed by the next rt_host_timers() */
};

/* One connection of a host. Owned by the host; freed only in rt_host_timers(), so pointers
 * taken for one poll round stay valid through it. */
struct rt_hconn {
	struct rt_conn c;
	struct rt_hconn *next;	/* host->conns */
	struct rt_hconn *hnext; /* host->byid bucket (id != 0 only) */
	uint32_t id;		/* the coordinator's handle; 0 for adopted links */
	enum hconn_state state;
	int adopted;			 /* counted in host->nlinger */
	struct rt_route *route;		 /* HC_ROUTED only */
	uint64_t deadline;		 /* HC_FIRST: first frame; HC_CLOSING: drop */
	struct sockaddr_storage peer_sa; /* accepted connections: where it comes from */
};

/* Connection ids are never reused in a process, so a stale id can never hit a new conn. */
static atomic_uint_least32_t host_next_id = 1;

static struct rt_hconn **host_bucket(struct rt_host *h, uint32_t id)
{
	return &h->byid[id & 255u];
}

static struct rt_hconn *host_find(struct rt_host *h, uint32_t id)
{
	for (struct rt_hconn *hc = *host_bucket(h, id); hc; hc = hc->hnext) {
		if (hc->id == id)
			return hc;
	}
	return NULL;
}

static struct rt_hconn *hconn_new(struct rt_host *h, int fd, const char *peer, uint32_t id)
{
	struct rt_hconn *hc = calloc(1, sizeof(*hc));

	if (!hc)
		return NULL;
	rt_conn_init(&hc->c, fd, peer);
	hc->id = id;
	hc->next = h->conns;
	h->conns = hc;
	if (id) {
		struct rt_hconn **b = host_bucket(h, id);

		hc->hnext = *b;
		*b = hc;
	}
	return hc;
}

/* Leaves the route (the coordinator is not told: it asked, or is going). */
static void hconn_unroute(struct rt_hconn *hc)
{
	if (hc->state == HC_ROUTED && hc->route) {
		hc->route->nconns--;
		hc->route = NULL;
	}
}

/* Flush, then close; dropped at RT_CLOSE_MS if the peer does not read. */
static void hconn_close(struct rt_hconn *hc, uint64_t now)
{
	if (hc->state == HC_DEAD || hc->state == HC_CLOSING)
		return;
	hconn_unroute(hc);
	hc->state = HC_CLOSING;
	hc->deadline = now + RT_CLOSE_MS;
	rt_conn_flush(&hc->c);
	if (hc->c.err || rt_conn_pending(&hc->c) == 0)
		hc->state = HC_DEAD;
}

/* The connection ended (its sticky error is set): tells its coordinator, if any. */
static void hconn_ended(struct rt_hconn *hc, uint64_t now)
{
	if (hc->state == HC_ROUTED) {
		struct rt_route *r = hc->route;

		ftcc_info("control: connection %u from %s ended (%s%s)", hc->id, hc->c.peer,
			  strerror(-hc->c.err), hc->c.death ? ", closed by the peer" : "");
		hconn_unroute(hc);
		hc->state = HC_DEAD;
		if (r && r->coord)
			ctl_coord_on_close(r->coord, hc->id, hc->c.death, now);
		return;
	}
	hc->state = HC_DEAD;
}

/* Answers @hc with REFUSE(@code, text) and closes it. */
static void hconn_refuse(struct rt_hconn *hc, uint64_t group_id, uint32_t code, uint32_t hint,
			 const char *text, uint64_t now)
{
	struct ctl_msg r = { .type = CTL_REFUSE, .group_id = group_id, .code = code, .hint = hint };

	snprintf(r.text, sizeof(r.text), "%s", text);
	rt_conn_send(&hc->c, &r);
	hconn_close(hc, now);
}

static void route_send(void *arg, uint32_t conn, const struct ctl_msg *m)
{
	struct rt_route *r = arg;
	struct rt_hconn *hc = host_find(r->host, conn);

	if (hc && hc->state == HC_ROUTED && hc->route == r)
		rt_conn_send(&hc->c, m); /* a failure is reported by rt_host_timers() */
}

static void route_close(void *arg, uint32_t conn)
{
	struct rt_route *r = arg;
	struct rt_hconn *hc = host_find(r->host, conn);

	if (hc && hc->state == HC_ROUTED && hc->route == r)
		hconn_close(hc, rt_now_ms());
}

struct ctl_coord_ops rt_route_coord_ops(struct rt_route *r)
{
	return (struct ctl_coord_ops){
		.arg = r, .send = route_send, .close = route_close, .probe = rt_route_probe
	};
}

/* Takes a duplicate of the caller's listening socket @fd, which must be bound to @sa. */
static int host_adopt(struct rt_host *h, int fd, const struct sockaddr *sa)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	int on = 0, flags, rc;
	socklen_t olen = sizeof(on);

	if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &on, &olen) < 0 || !on ||
	    getsockname(fd, (struct sockaddr *)&ss, &sslen) < 0 || ss.ss_family != sa->sa_family)
		return -EBADF;
	h->port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
						   ((struct sockaddr_in *)&ss)->sin_port);
	if (h->port != ntohs(sa->sa_family == AF_INET6 ?
				     ((const struct sockaddr_in6 *)sa)->sin6_port :
				     ((const struct sockaddr_in *)sa)->sin_port))
		return -EADDRNOTAVAIL;
	h->lfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (h->lfd < 0)
		return -errno;
	flags = fcntl(h->lfd, F_GETFL);
	if (flags < 0 || fcntl(h->lfd, F_SETFL, flags | O_NONBLOCK) < 0) {
		rc = -errno;
		close(h->lfd);
		h->lfd = -1;
		return rc;
	}
	return 0;
}

int rt_host_init(struct rt_host *h, const struct sockaddr *sa, socklen_t len, int adopt_fd,
		 const struct rt_host_ops *ops, struct ctl_msg *msg)
{
	memset(h, 0, sizeof(*h));
	h->lfd = -1;
	h->ops = *ops;
	h->msg = msg;
	if (!sa)
		return 0;
	if (adopt_fd >= 0)
		return host_adopt(h, adopt_fd, sa);
	return rt_listen(sa, len, &h->lfd, &h->port);
}

void rt_host_fini(struct rt_host *h)
{
	while (h->conns) {
		struct rt_hconn *hc = h->conns;

		h->conns = hc->next;
		rt_conn_close(&hc->c);
		free(hc);
	}
	memset(h->byid, 0, sizeof(h->byid));
	h->nlinger = 0;
	rt_probe_fini(h);
	if (h->lfd >= 0)
		close(h->lfd);
	h->lfd = -1;
}

void rt_host_unroute(struct rt_host *h, struct rt_route *r)
{
	uint64_t now = rt_now_ms();

	rt_probe_drop_route(h, r);
	for (struct rt_hconn *hc = h->conns; hc; hc = hc->next) {
		if (hc->state == HC_ROUTED && hc->route == r)
			hconn_close(hc, now);
	}
}

void rt_host_adopt(struct rt_host *h, struct rt_conn *c, uint64_t now)
{
	struct rt_hconn *hc = calloc(1, sizeof(*hc));

	if (!hc) {
		rt_conn_close(c); /* out of memory: what was queued is lost, like a dropped link */
		return;
	}
	hc->c = *c;
	c->fd = -1;
	c->rbuf = c->wbuf = NULL;
	rt_conn_close(c);
	hc->next = h->conns;
	h->conns = hc;
	hc->adopted = 1;
	h->nlinger++;
	hc->state = HC_CLOSING;
	hc->deadline = now + RT_CLOSE_MS;
	if (hc->c.err || (!hc->c.connecting && rt_conn_pending(&hc->c) == 0))
		hc->state = HC_DEAD;
}

int rt_host_poll_add(struct rt_host *h, struct rt_pollset *ps)
{
	if (h->lfd >= 0 && rt_pollset_add(ps, h->lfd, POLLIN, RT_POLL_LISTEN, NULL))
		return -ENOMEM;
	for (struct rt_hconn *hc = h->conns; hc; hc = hc->next) {
		short ev = POLLIN;

		if (hc->state == HC_DEAD || hc->c.fd < 0)
			continue;
		if (rt_conn_pending(&hc->c) || hc->c.connecting)
			ev |= POLLOUT;
		if (rt_pollset_add(ps, hc->c.fd, ev, RT_POLL_HCONN, hc))
			return -ENOMEM;
	}
	return rt_probe_poll_add(h, ps);
}

static void host_accept(struct rt_host *h, uint64_t now)
{
	for (int i = 0; i < ACCEPT_BURST; i++) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		char peer[RT_PEER_MAX];
		int one = 1;
		int fd = ftcc_sys_accept(h->lfd, (struct sockaddr *)&ss, &len);

		if (fd < 0)
			return; /* EAGAIN, or logged by the wrapper (EMFILE: retried next round) */
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		rt_addr_text((struct sockaddr *)&ss, peer, sizeof(peer));
		uint32_t id = (uint32_t)atomic_fetch_add(&host_next_id, 1);

		if (id == 0) /* after 2^32 connections: 0 means "no id" */
			id = (uint32_t)atomic_fetch_add(&host_next_id, 1);
		struct rt_hconn *hc = hconn_new(h, fd, peer, id);
		if (!hc) {
			close(fd);
			return;
		}
		hc->state = HC_FIRST;
		hc->deadline = now + RT_FIRST_FRAME_MS;
		hc->peer_sa = ss;
	}
}

/* A "STATUS" request: answers the status text and closes. 1 when handled (or still
 * incomplete), 0 when the input is not a status request. */
static int hconn_status(struct rt_host *h, struct rt_hconn *hc, uint64_t now)
{
	size_t have = hc->c.rlen - hc->c.roff;
	size_t cmp = have < strlen(STATUS_REQ) ? have : strlen(STATUS_REQ);

	if (memcmp(hc->c.rbuf + hc->c.roff, STATUS_REQ, cmp) != 0)
		return 0;
	if (cmp < strlen(STATUS_REQ))
		return 1;
	char *text = malloc(RT_STATUS_MAX);
	if (text) {
		size_t n = h->ops.status(h->ops.arg, text, RT_STATUS_MAX, now);

		rt_conn_send_raw(&hc->c, text, n);
		free(text);
	}
	ftcc_info("control: status requested by %s", hc->c.peer);
	hconn_close(hc, now);
	return 1;
}

/* The first frame of @hc is in h->msg: route it or refuse it. */
static void hconn_hello(struct rt_host *h, struct rt_hconn *hc, uint64_t now)
{
	const struct ctl_msg *m = h->msg;
	char text[CTL_TEXT_MAX];

	if (m->type != CTL_HELLO) {
		ftcc_warn("control: refused %s: %s before HELLO", hc->c.peer,
			  ctl_type_name(m->type));
		hconn_refuse(hc, m->group_id, CTL_REF_PROTOCOL, CTL_NO_MEMBER, "expected HELLO",
			     now);
		return;
	}
	if (m->group_id != ctl_group_id(m->group)) {
		ftcc_warn("control: refused %s: group id does not match group \"%s\"", hc->c.peer,
			  m->group);
		snprintf(text, sizeof(text), "wrong group id for group \"%s\"", m->group);
		hconn_refuse(hc, m->group_id, CTL_REF_PROTOCOL, CTL_NO_MEMBER, text, now);
		return;
	}

	struct ctl_msg refuse = { .type = CTL_REFUSE, .hint = CTL_NO_MEMBER };
	struct rt_route *r = h->ops.route(h->ops.arg, m, &refuse, now);
	if (!r || !r->coord) {
		if (refuse.code == CTL_REF_PROTOCOL)
			ftcc_warn("control: refused %s (member %u): %s", hc->c.peer, m->member,
				  refuse.text);
		hconn_refuse(hc, m->group_id, refuse.code ? refuse.code : CTL_REF_NOT_COORD,
			     refuse.hint, refuse.text, now);
		return;
	}
	hc->state = HC_ROUTED;
	hc->route = r;
	r->nconns++;
	rt_route_note_hello(r, m, &hc->peer_sa);
	ctl_coord_on_msg(r->coord, hc->id, m, now);
}

/* A frame that cannot be decoded: logged, REFUSEd when the header was sound, closed. */
static void hconn_garbage(struct rt_hconn *hc, int err, uint64_t now)
{
	char why[64];

	rt_conn_head_text(&hc->c, err, why, sizeof(why));
	ftcc_warn("control: refused %s: %s", hc->c.peer, why);
	if (hc->state == HC_ROUTED) {
		struct rt_route *r = hc->route;

		hconn_unroute(hc);
		hc->state = HC_FIRST; /* neither routed nor closing, for hconn_close below */
		if (r && r->coord)
			ctl_coord_on_close(r->coord, hc->id, 0, now);
	}
	if (err == -EBADMSG) {
		hconn_refuse(hc, 0, CTL_REF_PROTOCOL, CTL_NO_MEMBER, "malformed frame", now);
		return;
	}
	hc->state = HC_DEAD; /* nothing we could say would be understood */
}

/* Decodes and dispatches what @hc has buffered. */
static void hconn_input(struct rt_host *h, struct rt_hconn *hc, uint64_t now)
{
	while (hc->state == HC_FIRST || hc->state == HC_ROUTED) {
		if (hc->state == HC_FIRST && hc->c.rlen > hc->c.roff &&
		    hc->c.rbuf[hc->c.roff] == STATUS_REQ[0] && hconn_status(h, hc, now))
			return;

		int rc = rt_conn_next(&hc->c, h->msg);
		if (rc == 0)
			return;
		if (rc < 0) {
			hconn_garbage(hc, rc, now);
			return;
		}
		if (hc->state == HC_FIRST)
			hconn_hello(h, hc, now);
		else if (hc->route && hc->route->coord)
			ctl_coord_on_msg(hc->route->coord, hc->id, h->msg, now);
	}
}

static void hconn_on_poll(struct rt_host *h, struct rt_hconn *hc, short revents, uint64_t now)
{
	if (hc->state == HC_DEAD)
		return;
	if (hc->c.connecting && (revents & (POLLOUT | POLLERR | POLLHUP))) {
		/* An adopted link that was still connecting: it may deliver what it holds. */
		int rc = rt_connect_result(hc->c.fd);

		hc->c.connecting = 0;
		if (rc)
			hc->c.err = rc;
	}
	if (revents & POLLOUT)
		rt_conn_flush(&hc->c);
	if (revents & (POLLIN | POLLHUP | POLLERR)) {
		for (int i = 0; i < READ_ROUNDS && !hc->c.err; i++) {
			ssize_t n = rt_conn_fill(&hc->c);

			if (hc->state == HC_CLOSING)
				hc->c.roff = hc->c.rlen = 0; /* closing: input is dropped */
			else
				hconn_input(h, hc, now);
			if (n <= 0 || hc->state == HC_DEAD)
				break;
		}
	}
	if (hc->state == HC_CLOSING && (hc->c.err || rt_conn_pending(&hc->c) == 0))
		hc->state = HC_DEAD;
	if (hc->c.err && (hc->state == HC_FIRST || hc->state == HC_ROUTED))
		hconn_ended(hc, now);
}

void rt_host_on_poll(struct rt_host *h, const struct rt_pollref *ref, short revents, uint64_t now)
{
	if (ref->kind == RT_POLL_LISTEN)
		host_accept(h, now);
	else if (ref->kind == RT_POLL_HCONN)
		hconn_on_poll(h, ref->ptr, revents, now);
	else if (ref->kind == RT_POLL_PROBE)
		rt_probe_on_poll(h, ref->ptr, revents, now);
}

/* Unlinks and frees @hc (state HC_DEAD). */
static void hconn_free(struct rt_host *h, struct rt_hconn *hc)
{
	if (hc->id) {
		for (struct rt_hconn **p = host_bucket(h, hc->id); *p; p = &(*p)->hnext) {
			if (*p == hc) {
				*p = hc->hnext;
				break;
			}
		}
	}
	if (hc->adopted)
		h->nlinger--;
	rt_conn_close(&hc->c);
	free(hc);
}

uint64_t rt_host_timers(struct rt_host *h, uint64_t now)
{
	uint64_t next = rt_probe_timers(h, now);

	for (struct rt_hconn *hc = h->conns; hc; hc = hc->next) {
		if (hc->state == HC_FIRST && now >= hc->deadline) {
			ftcc_warn("control: closed %s: no HELLO within %d s", hc->c.peer,
				  RT_FIRST_FRAME_MS / 1000);
			hc->state = HC_DEAD;
		} else if (hc->state == HC_CLOSING) {
			rt_conn_flush(&hc->c);
			if (hc->c.err || rt_conn_pending(&hc->c) == 0)
				hc->state = HC_DEAD;
			else if (now >= hc->deadline) {
				ftcc_info("control: dropped %s: %zu bytes not read within %d ms",
					  hc->c.peer, rt_conn_pending(&hc->c), RT_CLOSE_MS);
				hc->state = HC_DEAD;
			}
		} else if (hc->c.err && hc->state != HC_DEAD) {
			hconn_ended(hc, now);
		}
		if ((hc->state == HC_FIRST || hc->state == HC_CLOSING) && hc->deadline < next)
			next = hc->deadline;
	}
	for (struct rt_hconn **p = &h->conns; *p;) {
		struct rt_hconn *hc = *p;

		if (hc->state == HC_DEAD) {
			*p = hc->next;
			hconn_free(h, hc);
		} else {
			p = &hc->next;
		}
	}
	return next;
}

void rt_host_flush_all(struct rt_host *h)
{
	for (struct rt_hconn *hc = h->conns; hc; hc = hc->next) {
		if (hc->state != HC_DEAD && !hc->c.connecting)
			rt_conn_flush(&hc->c);
	}
}
