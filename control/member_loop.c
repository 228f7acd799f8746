/* SPDX-License-Identifier: BSD-3-Clause */
/* A member's control thread: one poll() over its wakeup eventfd, its listener and hosted
 * coordinator's connections (the host), and its one coordinator link; the msm's ops (connect,
 * send, disconnect, host, changed) and the ticks of the msm and the hosted coordinator.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "member.h"

#define READ_ROUNDS 8
#define LINK_EVENTS_MAX 8 /* link failures delivered per round (a refused connect may repeat) */

enum { POLL_WAKE = RT_POLL_OWNER, POLL_LINK };

/* ---- the coordinator link ------------------------------------------------------------------ */

/* Drops the link without telling the msm: flushed by the host when it is healthy. */
static void link_drop(struct ctl_member *m, uint64_t now)
{
	struct member_link *l = &m->link;

	if (l->state == LINK_NONE)
		return;
	if (l->c.err || l->c.fd < 0)
		rt_conn_close(&l->c);
	else
		rt_host_adopt(&m->host, &l->c, now);
	l->state = LINK_NONE;
	l->gen++;
}

static void op_connect(void *arg, uint32_t target)
{
	struct ctl_member *m = arg;
	struct member_link *l = &m->link;
	uint64_t now = rt_now_ms();
	const struct sockaddr *dst = NULL;
	unsigned dlen = 0;
	char peer[RT_PEER_MAX] = "?";
	int fd = -1, rc = -EINVAL;

	link_drop(m, now);
	if (target == CTL_NO_MEMBER && m->backend == RT_DAEMON) {
		dst = (const struct sockaddr *)&m->daemon_addr;
		dlen = m->daemon_len;
	} else if (target != CTL_NO_MEMBER && m->addrs && target < m->expected) {
		dst = (const struct sockaddr *)&m->addrs[target];
		dlen = m->addr_lens[target];
	}
	if (dst) {
		rt_addr_text(dst, peer, sizeof(peer));
		rc = rt_connect_start(dst, dlen, m->src_len ? (struct sockaddr *)&m->src : NULL,
				      m->src_len, &fd);
		if (rc == -EADDRNOTAVAIL && m->src_len) {
			/* addrs[id] is not an address of this host (NAT, a name for a VIP): its
			 * links go out from wherever the kernel routes them. */
			char src[RT_PEER_MAX];

			rt_addr_text((struct sockaddr *)&m->src, src, sizeof(src));
			ftcc_warn("control: member %u: %s is not a local address; outgoing "
				  "control links are not bound to it",
				  m->id, src);
			m->src_len = 0;
			rc = rt_connect_start(dst, dlen, NULL, 0, &fd);
		}
	} else {
		ftcc_warn("control: member %u: no address for member %u", m->id, target);
	}
	rt_conn_init(&l->c, fd, peer);
	l->state = LINK_CONNECTING;
	l->target = target;
	l->gen++;
	/* A dropped SYN is retried by the kernel after 1 s, then 3 s: allow the first retry even
	 * with a short failure timeout (an accept queue that was full under load is not a dead
	 * peer). */
	uint64_t ct = m->t.timeout_ms > 3000 ? m->t.timeout_ms : 3000;

	l->deadline = now + (ct < m->t.connect_ms ? ct : m->t.connect_ms);
	if (rc == 0 || rc == -EINPROGRESS) {
		l->c.connecting = 1; /* completion (or failure) shows as POLLOUT */
	} else {
		l->c.err = rc; /* delivered by link_check(): no call back into the msm from here */
		if (rc != -ECONNREFUSED)
			ftcc_info("control: member %u: connect to %s failed: %s", m->id, peer,
				  strerror(-rc));
	}
}

static void op_send(void *arg, const struct ctl_msg *msg)
{
	struct ctl_member *m = arg;

	if (m->link.state != LINK_NONE && m->link.c.fd >= 0)
		rt_conn_send(&m->link.c, msg); /* a failure is delivered by link_check() */
}

static void op_disconnect(void *arg)
{
	struct ctl_member *m = arg;

	link_drop(m, rt_now_ms());
}

/* Shuts down and frees the hosted coordinator, if any. @leaving: this member leaves the group
 * (the members hear REFUSE(LEFT), proof that their coordinator's host is out); otherwise another
 * member coordinates now (REFUSE(CLOSED)). */
static void member_unhost(struct ctl_member *m, bool leaving, uint64_t now)
{
	struct ctl_coord *c = m->route.coord;

	if (!c)
		return;
	if (leaving)
		ctl_coord_host_left(c, ctl_msm_reason(m->msm), now);
	else
		ctl_coord_shutdown(c, now);
	rt_host_unroute(&m->host, &m->route);
	m->route.coord = NULL;
	ctl_coord_destroy(c);
}

static void op_host(void *arg, const struct ctl_coord_cfg *cfg)
{
	struct ctl_member *m = arg;
	uint64_t now = rt_now_ms();
	struct ctl_coord_cfg c;
	struct ctl_coord_ops ops = rt_route_coord_ops(&m->route);

	if (!cfg) {
		/* a takeover started here lost the race to another member's */
		member_unhost(m, false, now);
		return;
	}
	c = *cfg;
	if (m->backend != RT_EMBEDDED) {
		ftcc_warn("control: member %u: asked to host a coordinator with a daemon; ignored",
			  m->id);
		return;
	}
	if (!c.timeout_ms)
		c.timeout_ms = m->t.timeout_ms;
	if (!c.hb_ms)
		c.hb_ms = m->t.hb_ms;
	if (!c.form_timeout_ms)
		c.form_timeout_ms = m->t.connect_ms;
	member_unhost(m, false, now);
	m->route.coord = ctl_coord_create(&c, &ops, now);
	if (!m->route.coord) {
		ftcc_warn("control: member %u: out of memory for the coordinator of \"%s\"", m->id,
			  m->group);
		return;
	}
	ftcc_info("control: member %u hosts the coordinator of \"%s\"%s", m->id, m->group,
		  c.takeover ? " (takeover)" : "");
	m->next_tick = now;
}

static void op_changed(void *arg)
{
	struct ctl_member *m = arg;

	m->dirty = true;
}

struct ctl_msm_ops member_msm_ops(struct ctl_member *m)
{
	return (struct ctl_msm_ops){ .arg = m,
				     .connect = op_connect,
				     .send = op_send,
				     .disconnect = op_disconnect,
				     .host = op_host,
				     .changed = op_changed };
}

/* Delivers the link's failure (and a connect timeout) to the msm, which may connect again. */
static void link_check(struct ctl_member *m, uint64_t now)
{
	struct member_link *l = &m->link;

	for (int i = 0; i < LINK_EVENTS_MAX; i++) {
		if (l->state == LINK_CONNECTING && !l->c.err && now >= l->deadline) {
			ftcc_info("control: member %u: connect to %s timed out", m->id, l->c.peer);
			l->c.err = -ETIMEDOUT;
		}
		if (l->state == LINK_NONE || !l->c.err)
			return;
		int refused = l->state == LINK_CONNECTING && l->c.err == -ECONNREFUSED;
		int death = l->state == LINK_OPEN && l->c.death;
		if (l->state == LINK_OPEN && l->c.err != -EPROTO) /* -EPROTO: logged already */
			ftcc_info("control: member %u: link to %s ended: %s%s", m->id, l->c.peer,
				  strerror(-l->c.err), death ? " (closed by the peer)" : "");
		rt_conn_close(&l->c);
		l->state = LINK_NONE;
		l->gen++;
		member_prep(m);
		ctl_msm_on_close(m->msm, refused, death, now);
	}
}

static void link_on_poll(struct ctl_member *m, short revents, uint64_t now)
{
	struct member_link *l = &m->link;
	uint32_t gen = l->gen;

	if (l->state == LINK_CONNECTING) {
		if (!(revents & (POLLOUT | POLLERR | POLLHUP)))
			return;
		int rc = rt_connect_result(l->c.fd);
		if (rc) {
			l->c.err = rc;
			return;
		}
		l->c.connecting = 0;
		l->state = LINK_OPEN;
		member_prep(m);
		ctl_msm_on_connected(m->msm, now);
		if (l->gen == gen)
			rt_conn_flush(&l->c);
		return;
	}
	if (revents & POLLOUT)
		rt_conn_flush(&l->c);
	if (!(revents & (POLLIN | POLLHUP | POLLERR)))
		return;
	for (int i = 0; i < READ_ROUNDS && !l->c.err; i++) {
		ssize_t n = rt_conn_fill(&l->c);
		int rc;

		while ((rc = rt_conn_next(&l->c, &m->msg)) > 0) {
			member_prep(m);
			ctl_msm_on_msg(m->msm, &m->msg, now);
			if (l->gen != gen)
				return; /* the msm dropped or replaced this link */
		}
		if (rc < 0) {
			char why[64];

			rt_conn_head_text(&l->c, rc, why, sizeof(why));
			ftcc_warn("control: member %u: %s from coordinator %s; closing", m->id, why,
				  l->c.peer);
			l->c.err = -EPROTO;
			l->c.death = 0;
			return;
		}
		if (n <= 0)
			break;
	}
}

/* ---- the thread ------------------------------------------------------------------------ */

/* Ticks, deadlines and deferred events. Returns when the thread must look again. */
static uint64_t member_timers(struct ctl_member *m, uint64_t now)
{
	uint64_t half = m->t.hb_ms / 2 ? m->t.hb_ms / 2 : 1;

	link_check(m, now);
	if (now >= m->next_tick) {
		if (m->route.coord)
			ctl_coord_tick(m->route.coord, now);
		member_prep(m);
		ctl_msm_tick(m->msm, now);
		m->next_tick = now + half;
	} else if (now >= ctl_msm_next_deadline(m->msm)) {
		member_prep(m);
		ctl_msm_tick(m->msm, now);
	}
	link_check(m, now);

	uint64_t next = rt_host_timers(&m->host, now);
	uint64_t msm_next = ctl_msm_next_deadline(m->msm);

	member_publish(m);
	if (msm_next <= now)
		msm_next = now + 1; /* just ticked: never spin on a deadline that did not move */
	if (m->next_tick < next)
		next = m->next_tick;
	if (msm_next < next)
		next = msm_next;
	if (m->link.state == LINK_CONNECTING && m->link.deadline < next)
		next = m->link.deadline;
	if (m->link.state != LINK_NONE && m->link.c.err)
		next = now;
	if (m->stopping && m->stop_at < next)
		next = m->stop_at;
	return next;
}

static void member_poll_build(struct ctl_member *m)
{
	struct member_link *l = &m->link;
	int rc;

	rt_pollset_reset(&m->ps);
	rc = rt_pollset_add(&m->ps, m->wake_fd, POLLIN, POLL_WAKE, NULL);
	if (!rc)
		rc = rt_host_poll_add(&m->host, &m->ps);
	if (!rc && l->state != LINK_NONE && l->c.fd >= 0 && !l->c.err) {
		short ev = POLLIN;

		if (l->c.connecting || rt_conn_pending(&l->c))
			ev |= POLLOUT;
		rc = rt_pollset_add(&m->ps, l->c.fd, ev, POLL_LINK, (void *)(uintptr_t)l->gen);
	}
	if (rc)
		ftcc_warn("control: member %u: out of memory for the poll set", m->id);
}

static void member_dispatch(struct ctl_member *m, uint64_t now)
{
	for (unsigned i = 0; i < m->ps.n; i++) {
		short rev = m->ps.pfd[i].revents;
		const struct rt_pollref *ref = &m->ps.ref[i];

		if (!rev)
			continue;
		if (ref->kind == POLL_WAKE) {
			rt_wake_clear(m->wake_fd);
		} else if (ref->kind == POLL_LINK) {
			/* The link may have been replaced while the thread polled unlocked. */
			if ((uint32_t)(uintptr_t)ref->ptr == m->link.gen &&
			    m->link.c.fd == m->ps.pfd[i].fd)
				link_on_poll(m, rev, now);
		} else {
			rt_host_on_poll(&m->host, ref, rev, now);
		}
	}
}

void *member_thread(void *arg)
{
	struct ctl_member *m = arg;

	ftcc_thread_name("ctl%u", m->id);
	pthread_mutex_lock(&m->lock);
	for (;;) {
		uint64_t now = rt_now_ms();
		uint64_t next = member_timers(m, now);

		if (m->stopping &&
		    (now >= m->stop_at || (m->host.nlinger == 0 && m->link.state == LINK_NONE)))
			break;
		member_poll_build(m);

		bool notify = m->notify;
		m->notify = false;
		pthread_mutex_unlock(&m->lock);
		if (notify && m->on_change)
			m->on_change(m->on_change_arg);
		rt_pollset_wait(&m->ps, next > now ? next - now : 0);
		pthread_mutex_lock(&m->lock);
		member_dispatch(m, rt_now_ms());
	}
	/* Leaving: the members we coordinate hear REFUSE(LEFT), proof that we are out. */
	member_unhost(m, true, rt_now_ms());
	rt_host_flush_all(&m->host);
	pthread_mutex_unlock(&m->lock);
	return NULL;
}

void member_close_all(struct ctl_member *m)
{
	rt_conn_close(&m->link.c);
	m->link.state = LINK_NONE;
	if (m->route.coord) {
		ctl_coord_destroy(m->route.coord);
		m->route.coord = NULL;
	}
	rt_host_fini(&m->host);
}
