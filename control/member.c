/* SPDX-License-Identifier: BSD-3-Clause */
/* The ctl_member_* API: configuration checks, creation and destruction of a member and its
 * control thread, the snapshots it publishes (state, newest epoch, op -> epoch lookups), and
 * the calls that feed the msm from the application's threads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/text.h"
#include "ftcc/settings.h"
#include "member.h"

#define DESTROY_FLUSH_MS 50 /* ctl_member_destroy() lets the thread flush LEAVE this long */

void member_prep(struct ctl_member *m)
{
	for (uint32_t t = 0; t < m->nstreams; t++) {
		ctl_msm_progress_s(m->msm, t,
				   atomic_load_explicit(&m->next_op[t], memory_order_relaxed),
				   atomic_load_explicit(&m->done_op[t], memory_order_relaxed));
	}
}

/* "0,1,3" for the members of @e (the first ones, then "+N": the text fits @len). */
static void member_ids_text(const struct ctl_epoch *e, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	for (uint32_t i = 0; i < e->nmembers; i++) {
		int k;

		if (at + 24 > len) {
			snprintf(buf + at, len - at, "+%u", e->nmembers - i);
			return;
		}
		k = snprintf(buf + at, len - at, "%s%u", i ? "," : "", e->members[i].id);
		at += k > 0 ? (size_t)k : 0;
	}
}

void member_publish(struct ctl_member *m)
{
	if (!m->dirty)
		return;
	m->dirty = false;

	const struct ctl_epoch_rec *r = ctl_msm_view(m->msm);
	if (r && (!m->cur || m->cur->epoch != r->epoch)) {
		const struct ctl_epoch *e = rt_epoch_cache_get(&m->cache, r, m->id, 0);

		if (e) {
			char ids[256];

			ctl_epoch_put(m->cur);
			m->cur = rt_epoch_get(e);
			member_ids_text(e, ids, sizeof(ids));
			ftcc_info("control: group \"%s\" member %u: epoch %" PRIu64
				  " (%u members {%s}, boundary %" PRIu64 ")",
				  m->group, m->id, e->epoch, e->nmembers, ids, e->boundary);
		} else {
			m->dirty = true; /* out of memory: try again on the next round */
		}
	}
	m->state = ctl_msm_state(m->msm);
	m->notify = true;
	pthread_cond_broadcast(&m->cond);
}

/* ---- configuration ------------------------------------------------------------------------ */

static int bad_cfg(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Logs why a configuration is refused; returns -EINVAL. */
static int bad_cfg(const char *fmt, ...)
{
	char text[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	ftcc_warn("control: bad member configuration: %s", text);
	return -EINVAL;
}

static int check_cfg(const struct ctl_member_cfg *cfg)
{
	size_t glen;

	if (!cfg)
		return bad_cfg("no cfg");
	glen = cfg->group ? strnlen(cfg->group, CTL_GROUP_MAX) : 0;
	if (glen == 0 || glen >= CTL_GROUP_MAX)
		return bad_cfg("group: name of 1..%d characters needed", CTL_GROUP_MAX - 1);
	for (size_t i = 0; i < glen; i++) {
		if (cfg->group[i] < 0x21 || cfg->group[i] > 0x7e)
			return bad_cfg("group: character %zu is not printable (or a blank)", i);
	}
	if (cfg->expected < 1 || cfg->expected > CTL_MAX_MEMBERS)
		return bad_cfg("expected: %u is not in 1..%d", cfg->expected, CTL_MAX_MEMBERS);
	if (cfg->id >= cfg->expected)
		return bad_cfg("id: %u is not below expected (%u)", cfg->id, cfg->expected);
	if (cfg->info_len > CTL_INFO_MAX || (cfg->info_len && !cfg->info))
		return bad_cfg("info_len: %zu (at most %d, with info)", cfg->info_len,
			       CTL_INFO_MAX);
	if (cfg->catchup && !cfg->join)
		return bad_cfg("catchup: only with join");
	if (cfg->nstreams > CTL_STREAMS_MAX)
		return bad_cfg("nstreams: %u is not in 1..%d", cfg->nstreams, CTL_STREAMS_MAX);
	if (cfg->timeout_ms < 0 || cfg->hb_ms < 0 || cfg->connect_timeout_ms < 0)
		return bad_cfg("timeout_ms, hb_ms, connect_timeout_ms: negative");
	return 0;
}

/* Parses the control addresses: every one for an embedded group, addrs[id] (the source of
 * outgoing links) for a daemon's. 0 or -EINVAL / -ENOMEM. */
static int member_addrs(struct ctl_member *m, const struct ctl_member_cfg *cfg)
{
	if (m->backend == RT_EMBEDDED && !cfg->addrs)
		return bad_cfg("addrs: the embedded backend needs every member's address");
	if (!cfg->addrs)
		return 0;
	if (m->backend == RT_EMBEDDED) {
		m->addrs = calloc(m->expected, sizeof(*m->addrs));
		m->addr_lens = calloc(m->expected, sizeof(*m->addr_lens));
		if (!m->addrs || !m->addr_lens)
			return -ENOMEM;
	}
	for (uint32_t i = 0; i < m->expected; i++) {
		struct sockaddr_storage ss;
		unsigned len = 0;

		if (m->backend != RT_EMBEDDED && i != m->id)
			continue;
		if (!cfg->addrs[i] || ctl_parse_addr(cfg->addrs[i], &ss, &len))
			return bad_cfg("addrs[%u]: \"%s\" is not host:port", i,
				       cfg->addrs[i] ? cfg->addrs[i] : "(null)");
		if (m->backend == RT_EMBEDDED) {
			if (((struct sockaddr_in *)&ss)->sin_port == 0)
				return bad_cfg("addrs[%u]: \"%s\" has port 0", i, cfg->addrs[i]);
			m->addrs[i] = ss;
			m->addr_lens[i] = len;
		}
		if (i == m->id) {
			m->src = ss;
			m->src_len = len;
		}
	}
	return 0;
}

size_t member_status_locked(struct ctl_member *m, char *buf, size_t len, uint64_t now)
{
	const struct ctl_epoch *e = m->cur;
	size_t n = 0;

	if (len)
		buf[0] = '\0';
	ftcc_appendf(buf, len, &n, "member %u of group \"%s\" (%s): %s", m->id, m->group,
		     m->backend == RT_EMBEDDED ? "embedded" : "daemon",
		     ctl_member_state_name(ctl_msm_state(m->msm)));
	if (e) {
		ftcc_appendf(buf, len, &n,
			     ", epoch %" PRIu64 " (boundary %" PRIu64 ", coordinator ", e->epoch,
			     e->boundary);
		if (e->coord == CTL_NO_MEMBER)
			ftcc_appendf(buf, len, &n, "daemon");
		else
			ftcc_appendf(buf, len, &n, "%u", e->coord);
		ftcc_appendf(buf, len, &n, "), %u members:", e->nmembers);
		for (uint32_t i = 0; i < e->nmembers; i++)
			ftcc_appendf(buf, len, &n, " %u", e->members[i].id);
	}
	ftcc_appendf(buf, len, &n, "; %s\n", ctl_msm_reason(m->msm));
	if (m->route.coord && n + 1 < len)
		n += ctl_coord_status(m->route.coord, buf + n, len - n, now);
	return n < len ? n : (len ? len - 1 : 0);
}

static struct rt_route *member_route(void *arg, const struct ctl_msg *hello, struct ctl_msg *refuse,
				     uint64_t now)
{
	struct ctl_member *m = arg;

	if (strcmp(hello->group, m->group) != 0) {
		refuse->code = CTL_REF_PROTOCOL;
		snprintf(refuse->text, sizeof(refuse->text), "wrong group \"%s\" (this is \"%s\")",
			 hello->group, m->group);
		return NULL;
	}
	if (m->route.coord && !(hello->flags & CTL_HELLO_PROBE))
		return &m->route;
	refuse->code = CTL_REF_NOT_COORD;
	refuse->hint = ctl_msm_coord(m->msm);
	snprintf(refuse->text, sizeof(refuse->text), "member %u does not coordinate", m->id);
	return NULL;
}

static size_t member_host_status(void *arg, char *buf, size_t len, uint64_t now)
{
	return member_status_locked(arg, buf, len, now);
}

struct rt_host_ops member_host_ops(struct ctl_member *m)
{
	return (struct rt_host_ops){ .arg = m,
				     .route = member_route,
				     .status = member_host_status };
}

/* ---- create / destroy ----------------------------------------------------------------------- */

/* Frees @m after its thread is gone (or was never started). */
static void member_free(struct ctl_member *m)
{
	member_close_all(m);
	if (m->msm)
		ctl_msm_destroy(m->msm);
	rt_route_paddr_free(&m->route);
	rt_epoch_cache_clear(&m->cache);
	ctl_epoch_put(m->cur);
	rt_pollset_free(&m->ps);
	rt_msg_free(&m->msg);
	if (m->wake_fd >= 0)
		close(m->wake_fd);
	pthread_cond_destroy(&m->cond);
	pthread_mutex_destroy(&m->lock);
	free(m->addrs);
	free(m->addr_lens);
	free(m);
}

/* Makes @m's msm configuration from @cfg. */
static void member_msm_cfg(const struct ctl_member *m, const struct ctl_member_cfg *cfg,
			   struct ctl_msm_cfg *sc)
{
	memset(sc, 0, sizeof(*sc));
	snprintf(sc->group, sizeof(sc->group), "%s", m->group);
	sc->id = m->id;
	sc->expected = m->expected;
	sc->incarnation = cfg->incarnation ? cfg->incarnation : rt_incarnation();
	sc->daemon = m->backend == RT_DAEMON;
	sc->join = cfg->join;
	sc->catchup = cfg->catchup;
	sc->timeout_ms = m->t.timeout_ms;
	sc->hb_ms = m->t.hb_ms;
	sc->connect_timeout_ms = m->t.connect_ms;
	sc->nstreams = m->nstreams;
	sc->info_len = (uint16_t)cfg->info_len;
	if (cfg->info_len)
		memcpy(sc->info, cfg->info, cfg->info_len);
}

/* Where a member of a daemon's group listens: its own address (addrs[id]) with port 0, or
 * any address of the daemon's family. Returns the length. */
static unsigned member_daemon_listen_addr(const struct ctl_member *m, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (m->src_len) {
		memcpy(ss, &m->src, m->src_len);
	} else {
		ss->ss_family = m->daemon_addr.ss_family;
	}
	if (ss->ss_family == AF_INET6) {
		((struct sockaddr_in6 *)ss)->sin6_port = 0;
		return sizeof(struct sockaddr_in6);
	}
	ss->ss_family = AF_INET;
	((struct sockaddr_in *)ss)->sin_port = 0;
	return sizeof(struct sockaddr_in);
}

/* Everything of create after the allocation; @m is freed by the caller on failure. */
static int member_start(struct ctl_member *m, const struct ctl_member_cfg *cfg)
{
	const char *spec =
		cfg->coordinator ? cfg->coordinator : ftcc_setting_str(FTCC_SET_COORDINATOR);
	struct ctl_msm_cfg sc;
	struct rt_host_ops hops = member_host_ops(m);
	struct ctl_msm_ops mops = member_msm_ops(m);
	int rc;

	snprintf(m->group, sizeof(m->group), "%s", cfg->group);
	m->id = cfg->id;
	m->expected = cfg->expected;
	m->nstreams = cfg->nstreams ? cfg->nstreams : 1;
	m->cache.cap = RT_EPOCH_CACHE_PER_STREAM * m->nstreams;
	m->on_change = cfg->on_change;
	m->on_change_arg = cfg->on_change_arg;
	m->route.host = &m->host;
	m->route.group = m->group;
	rt_times_fill(cfg->timeout_ms, cfg->hb_ms, cfg->connect_timeout_ms, &m->t);
	rc = rt_backend_parse(spec, &m->backend, &m->daemon_addr, &m->daemon_len);
	if (rc)
		return rc;
	rc = member_addrs(m, cfg);
	if (rc)
		return rc;
	if (rt_msg_alloc(&m->msg))
		return -ENOMEM;
	m->wake_fd = rt_wake_open();
	if (m->wake_fd < 0)
		return m->wake_fd;
	if (m->backend == RT_EMBEDDED) {
		rc = rt_host_init(&m->host, (struct sockaddr *)&m->addrs[m->id],
				  m->addr_lens[m->id], cfg->has_listen_fd ? cfg->listen_fd : -1,
				  &hops, &m->msg);
	} else {
		/* With a daemon a member takes connections too, on a port of its own: the daemon
		 * probes it when its control connection ends without a LEAVE. */
		struct sockaddr_storage any;
		unsigned alen = member_daemon_listen_addr(m, &any);

		rc = rt_host_init(&m->host, (struct sockaddr *)&any, alen, -1, &hops, &m->msg);
	}
	if (rc) {
		ftcc_warn("control: member %u of \"%s\" cannot listen on %s: %s", m->id, m->group,
			  cfg->addrs ? cfg->addrs[m->id] : "a port of its own", strerror(-rc));
		return rc;
	}
	m->host.probe_ms = m->t.timeout_ms / 2 > 100 ? m->t.timeout_ms / 2 : 100;
	if (m->backend == RT_EMBEDDED) {
		/* A coordinator hosted here probes members at their configured addresses. */
		if (rt_route_paddr_alloc(&m->route, m->expected))
			return -ENOMEM;
		for (uint32_t i = 0; i < m->expected; i++) {
			memcpy(&m->route.paddr[i].sa, &m->addrs[i], m->addr_lens[i]);
			m->route.paddr[i].len = m->addr_lens[i];
		}
		m->route.paddr_fixed = 1;
	}
	member_msm_cfg(m, cfg, &sc);
	sc.listen_port = (uint16_t)m->host.port;
	m->state = CTL_M_BOOT;
	m->msm = ctl_msm_create(&sc, &mops, rt_now_ms());
	if (!m->msm)
		return -ENOMEM;
	member_publish(m);
	rc = -pthread_create(&m->thread, NULL, member_thread, m);
	if (rc)
		return rc;
	m->thread_started = true;
	return 0;
}

int ctl_member_create(const struct ctl_member_cfg *cfg, struct ctl_member **out)
{
	struct ctl_member *m;
	pthread_condattr_t ca;
	int rc;

	*out = NULL;
	rt_settings_once();
	rc = check_cfg(cfg);
	if (rc)
		return rc;
	m = calloc(1, sizeof(*m));
	if (!m)
		return -ENOMEM;
	m->wake_fd = -1;
	m->link.c.fd = -1;
	m->host.lfd = -1;
	pthread_mutex_init(&m->lock, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&m->cond, &ca);
	pthread_condattr_destroy(&ca);
	rc = member_start(m, cfg);
	if (rc) {
		member_free(m);
		return rc;
	}
	ftcc_info("control: member %u of \"%s\" started (%s, %u expected%s)", m->id, m->group,
		  m->backend == RT_EMBEDDED ? "embedded" : "daemon", m->expected,
		  cfg->join ? ", joining" : "");
	*out = m;
	return 0;
}

void ctl_member_destroy(struct ctl_member *m)
{
	if (!m)
		return;
	pthread_mutex_lock(&m->lock);
	uint64_t now = rt_now_ms();
	m->stopping = true;
	m->stop_at = now + DESTROY_FLUSH_MS;
	member_prep(m);
	ctl_msm_leave(m->msm, "closed", now);
	member_publish(m);
	pthread_mutex_unlock(&m->lock);
	rt_wake(m->wake_fd);
	if (m->thread_started)
		pthread_join(m->thread, NULL);
	member_free(m);
}

/* ---- API ---------------------------------------------------------------------------------- */

/* The error a final state answers with; 0 when not final. */
static int final_error(enum ctl_member_state st)
{
	switch (st) {
	case CTL_M_LOST:
		return -ENOTCONN;
	case CTL_M_REMOVED:
		return -ESTALE;
	case CTL_M_LEFT:
		return -ESHUTDOWN;
	default:
		return 0;
	}
}

int ctl_member_wait(struct ctl_member *m, uint64_t min_epoch, int timeout_ms)
{
	struct timespec ts;
	int rc;

	if (!m || timeout_ms < 0)
		return -EINVAL;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += timeout_ms / 1000;
	ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&m->lock);
	for (;;) {
		rc = final_error(m->state);
		if (rc)
			break;
		if (m->cur && m->cur->epoch >= min_epoch)
			break;
		if (pthread_cond_timedwait(&m->cond, &m->lock, &ts) == ETIMEDOUT) {
			rc = final_error(m->state);
			if (!rc && !(m->cur && m->cur->epoch >= min_epoch))
				rc = -ETIMEDOUT;
			break;
		}
	}
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void ctl_member_view(struct ctl_member *m, struct ctl_view *v)
{
	ctl_member_view_s(m, 0, v);
}

void ctl_member_view_s(struct ctl_member *m, uint32_t stream, struct ctl_view *v)
{
	pthread_mutex_lock(&m->lock);
	v->state = m->state;
	v->self = m->id;
	v->e = m->cur ? rt_epoch_get(m->cur) : NULL;
	if (v->e && stream && stream < m->nstreams) {
		/* the newest epoch as that stream sees it (out of memory: no epoch, as before the
		 * first; the caller looks again at the next change) */
		const struct ctl_epoch_rec *r = ctl_msm_view(m->msm);
		const struct ctl_epoch *e =
			r ? rt_epoch_cache_get(&m->cache, r, m->id, stream) : NULL;

		ctl_epoch_put(v->e);
		v->e = e ? rt_epoch_get(e) : NULL;
	}
	snprintf(v->reason, sizeof(v->reason), "%s", ctl_msm_reason(m->msm));
	pthread_mutex_unlock(&m->lock);
}

int ctl_member_op_epoch(struct ctl_member *m, uint64_t seq, const struct ctl_epoch **out)
{
	return ctl_member_op_epoch_s(m, 0, seq, out);
}

int ctl_member_op_epoch_s(struct ctl_member *m, uint32_t stream, uint64_t seq,
			  const struct ctl_epoch **out)
{
	const struct ctl_epoch_rec *r;
	int fenced = 0, rc;

	*out = NULL;
	if (stream >= m->nstreams)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	rc = final_error(m->state);
	if (rc)
		goto unlock;
	r = ctl_msm_op_epoch_s(m->msm, stream, seq, &fenced);
	if (fenced) {
		rc = -EAGAIN;
	} else if (!r) {
		rc = ctl_msm_view(m->msm) ? -ERANGE : -EAGAIN;
	} else {
		const struct ctl_epoch *e = rt_epoch_cache_get(&m->cache, r, m->id, stream);

		if (e)
			*out = rt_epoch_get(e);
		else
			rc = -ENOMEM;
	}
unlock:
	pthread_mutex_unlock(&m->lock);
	return rc;
}

void ctl_member_issued_s(struct ctl_member *m, uint32_t stream, uint64_t next_op)
{
	if (stream >= m->nstreams)
		return;
	uint64_t cur = atomic_load_explicit(&m->next_op[stream], memory_order_relaxed);

	while (cur < next_op &&
	       !atomic_compare_exchange_weak_explicit(&m->next_op[stream], &cur, next_op,
						      memory_order_relaxed, memory_order_relaxed)) {
	}
}

void ctl_member_issued(struct ctl_member *m, uint64_t next_op)
{
	ctl_member_issued_s(m, 0, next_op);
}

void ctl_member_progress_s(struct ctl_member *m, uint32_t stream, uint64_t next_op,
			   uint64_t done_op)
{
	if (stream >= m->nstreams)
		return;
	ctl_member_issued_s(m, stream, next_op);
	atomic_store_explicit(&m->done_op[stream], done_op, memory_order_relaxed);
}

void ctl_member_progress(struct ctl_member *m, uint64_t next_op, uint64_t done_op)
{
	ctl_member_progress_s(m, 0, next_op, done_op);
}

int ctl_member_suspect(struct ctl_member *m, uint32_t peer, enum ctl_evidence ev, uint64_t seq)
{
	return ctl_member_suspect_s(m, peer, ev, 0, seq);
}

int ctl_member_suspect_s(struct ctl_member *m, uint32_t peer, enum ctl_evidence ev, uint32_t stream,
			 uint64_t seq)
{
	if (!m || peer >= m->expected || ev < CTL_EV_DEATH || ev > CTL_EV_MAX ||
	    stream >= m->nstreams)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	member_prep(m);
	ctl_msm_suspect_s(m->msm, peer, ev, stream, seq, rt_now_ms());
	member_publish(m);
	pthread_mutex_unlock(&m->lock);
	rt_wake(m->wake_fd);
	return 0;
}

int ctl_member_leave(struct ctl_member *m, const char *reason)
{
	if (!m)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	member_prep(m);
	ctl_msm_leave(m->msm, reason, rt_now_ms());
	member_publish(m);
	pthread_mutex_unlock(&m->lock);
	rt_wake(m->wake_fd);
	return 0;
}

uint64_t ctl_member_admitted_s(struct ctl_member *m, uint32_t stream)
{
	uint64_t a;

	pthread_mutex_lock(&m->lock);
	a = ctl_msm_admitted_s(m->msm, stream);
	pthread_mutex_unlock(&m->lock);
	return a;
}

uint64_t ctl_member_admitted(struct ctl_member *m)
{
	return ctl_member_admitted_s(m, 0);
}

int ctl_member_ready(struct ctl_member *m)
{
	int rc;

	if (!m)
		return -EINVAL;
	pthread_mutex_lock(&m->lock);
	member_prep(m);
	rc = ctl_msm_ready(m->msm, rt_now_ms());
	member_publish(m);
	pthread_mutex_unlock(&m->lock);
	rt_wake(m->wake_fd);
	return rc;
}

size_t ctl_member_status(struct ctl_member *m, char *buf, size_t len)
{
	size_t n;

	pthread_mutex_lock(&m->lock);
	n = member_status_locked(m, buf, len, rt_now_ms());
	pthread_mutex_unlock(&m->lock);
	return n;
}
