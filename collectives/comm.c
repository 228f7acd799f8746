/* SPDX-License-Identifier: BSD-3-Clause */
/* The public C API (include/ftcc.h): communicator life cycle, the op queue, and who runs ops.
 *
 * Who runs the ops (the lanes) is in exec.c.
 */
#include "engine.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/comm_ext.h"
#include "ftcc/fault.h"
#include "ftcc/log.h"
#include "ftcc/quant.h"
#include "ftcc/reduce.h"
#include "ftcc/settings.h"
#include "ftcc/sys.h"
#include "p2p.h"

/* Ops started and not yet completed, at most. */
/* How long abort waits for the executor to let go. */
#define ENG_ABORT_WAIT_MS 60

FTCC_API int ftcc_version(void)
{
	return FTCC_VERSION;
}

FTCC_API const char *ftcc_strerror(int err)
{
	switch (err) {
	case FTCC_OK:
		return "success";
	case FTCC_ERR_INVALID:
		return "invalid argument";
	case FTCC_ERR_NOMEM:
		return "out of memory";
	case FTCC_ERR_SYSTEM:
		return "system error";
	case FTCC_ERR_TIMEOUT:
		return "timed out";
	case FTCC_ERR_LOST:
		return "lost the group";
	case FTCC_ERR_DEGRADED:
		return "completed without some members (degraded policy fail)";
	case FTCC_ERR_ABORTED:
		return "aborted";
	case FTCC_ERR_BUSY:
		return "too many ops in flight";
	case FTCC_ERR_MISMATCH:
		return "members called the op with different shapes";
	case FTCC_ERR_PEER_LOST:
		return "the member the op depended on was lost";
	case FTCC_ERR_CANCELED:
		return "cancelled";
	default:
		return "unknown error";
	}
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void deadline_in(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_nsec += (long)ms * 1000000L;
	ts->tv_sec += ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

static void on_change(void *arg)
{
	struct ftcc_comm *c0 = arg;

	/* every generation first: a thread woken below looks at its own */
	for (uint32_t t = 0; t < c0->nstreams; t++) {
		atomic_fetch_add(&c0->streams[t]->ctl_gen, 1);
	}
	p2p_kick(c0->p2p);
	for (uint32_t t = 0; t < c0->nstreams; t++) {
		struct ftcc_comm *c = c0->streams[t];

		pthread_mutex_lock(&c->mu);
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
	}
}

/* "host" of "host:port" / "[v6]:port" into @out. */
static int host_of(const char *addr, char *out, size_t len)
{
	const char *end;

	if (addr[0] == '[') {
		end = strchr(addr, ']');
		if (!end || (size_t)(end - addr - 1) >= len) {
			return -EINVAL;
		}
		memcpy(out, addr + 1, (size_t)(end - addr - 1));
		out[end - addr - 1] = '\0';
		return 0;
	}
	end = strrchr(addr, ':');
	if (!end || (size_t)(end - addr) >= len) {
		return -EINVAL;
	}
	memcpy(out, addr, (size_t)(end - addr));
	out[end - addr] = '\0';
	return 0;
}

static int policy_of(enum ftcc_degraded d, enum ftcc_degraded *out)
{
	const char *s;

	if (d != FTCC_DEGRADED_DEFAULT) {
		if (d < FTCC_DEGRADED_RESCALE || d > FTCC_DEGRADED_FAIL) {
			return -EINVAL;
		}
		*out = d;
		return 0;
	}
	s = ftcc_setting_str(FTCC_SET_DEGRADED);
	if (!strcmp(s, "rescale")) {
		*out = FTCC_DEGRADED_RESCALE;
	} else if (!strcmp(s, "sum")) {
		*out = FTCC_DEGRADED_SUM;
	} else if (!strcmp(s, "fail")) {
		*out = FTCC_DEGRADED_FAIL;
	} else {
		ftcc_warn("FTCC_DEGRADED=%s: expected rescale, sum or fail", s);
		return -EINVAL;
	}
	return 0;
}

static void comm_free(struct ftcc_comm *c)
{
	/* stream 0 frees the others (which own nothing of stream 0's) */
	for (uint32_t t = 1; c->stream == 0 && t < c->nstreams; t++) {
		if (c->streams[t]) {
			comm_free(c->streams[t]);
		}
	}
	p2p_destroy(c->p2p);
	for (uint32_t i = 0; i < ENG_LANES_MAX; i++) {
		struct eng_lane *l = &c->lane[i];

		dp_destroy(l->dp);
		free(l->scratch);
		free(l->keep);
		free(l->ident);
		free(l->rsbuf);
		free(l->opv);
		free(l->copybuf[0]);
		free(l->copybuf[1]);
		free(l->reports);
	}
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

/* Sets up stream @stream's comm @c (its lanes' data planes; stream 0's also the point-to-point
 * plane, with @p2p); a stream other than 0 takes stream 0's incarnation @inc, which the others'
 * data planes check against the membership's. */
static int comm_init(struct ftcc_comm *c, const struct ftcc_config *cfg, int p2p,
		     uint32_t auto_lanes, uint32_t stream, uint64_t inc)
{
	struct dp_cfg dc = { 0 };
	char host[DP_ADDR_MAX];
	pthread_condattr_t ca;

	snprintf(c->group, sizeof(c->group), "%s", cfg->group);
	c->rank = cfg->rank;
	c->size = cfg->size;
	c->timeout_ms =
		cfg->timeout_ms ? cfg->timeout_ms : ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS);
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->nlanes = (uint32_t)ftcc_setting_int(FTCC_SET_LANES);
	if (!c->nlanes) /* FTCC_LANES=0, the default: the caller's choice */
		c->nlanes = auto_lanes >= 1 && auto_lanes <= ENG_LANES_MAX ? auto_lanes : 1;
	c->no_have = (int)ftcc_setting_int(FTCC_SET_MEASURE_NO_HAVE);
	if (c->no_have)
		ftcc_warn(
			"member %u of group %s: FTCC_MEASURE_NO_HAVE=1: ops return without the "
			"have round, for measurement only; a failure can stop the group (a resume "
			"may lack chunks only a returned member held)",
			cfg->rank, cfg->group);
	for (uint32_t i = 0; i < c->nlanes; i++) {
		struct eng_lane *l = &c->lane[i];

		l->c = c;
		l->idx = i;
		for (int k = 0; k < ENG_DONE_RING; k++) {
			l->done[k].seq = UINT64_MAX;
		}
		l->reports = calloc(FTCC_MAX_MEMBERS, sizeof(*l->reports));
		if (!l->reports) {
			return FTCC_ERR_NOMEM;
		}
	}
	c->stream = stream;
	if (inc) {
		c->incarnation = inc;
	} else if (getrandom(&c->incarnation, sizeof(c->incarnation), GRND_NONBLOCK) !=
		   (ssize_t)sizeof(c->incarnation)) {
		c->incarnation = (uint64_t)now_ms() ^ ((uint64_t)getpid() << 32);
	}
	c->incarnation |= 1;
	dc.group_id = ctl_group_id(cfg->group);
	dc.self_id = cfg->rank;
	dc.incarnation = c->incarnation;
	dc.failure_ms = c->timeout_ms;
	if (cfg->addrs && cfg->addrs[cfg->rank]) {
		if (host_of(cfg->addrs[cfg->rank], host, sizeof(host))) {
			ftcc_warn("ftcc: addrs[%u] = \"%s\" is not host:port", cfg->rank,
				  cfg->addrs[cfg->rank]);
			return FTCC_ERR_INVALID;
		}
		dc.bind_host = host;
	}
	for (uint32_t i = 0; i < c->nlanes; i++) {
		struct dp_cfg lc = dc;
		uint64_t g = (uint64_t)stream * c->nlanes + i;

		/* stream 0's lane 0 is the engine's data plane as it always was; every other
		 * lane of every stream has HELLOs of its own */
		lc.group_id = g ? dc.group_id ^ (ENG_LANE_SALT + g) : dc.group_id;
		if (dp_create(&lc, &c->lane[i].dp)) {
			return FTCC_ERR_SYSTEM;
		}
	}
	if (p2p && stream == 0 && p2p_create(c, dc.group_id, dc.bind_host, &c->p2p)) {
		return FTCC_ERR_SYSTEM;
	}
	return 0;
}

/* The control listener of a member of the embedded backend, bound before the data plane asks
 * the kernel for a port of its own on the same address: the kernel could otherwise hand the data
 * plane the configured control port, free a moment before. -1 when there is none to bind here
 * (a daemon, a port the caller listens on already, an address that does not parse or bind: the
 * member reports those itself). */
static int pre_listen(const struct ftcc_config *cfg, const struct ftcc_create_ext *ext)
{
	const char *spec = cfg->coordinator && cfg->coordinator[0] ?
				   cfg->coordinator :
				   ftcc_setting_str(FTCC_SET_COORDINATOR);
	struct sockaddr_storage ss;
	unsigned len;
	int one = 1, fd;

	if ((ext && ext->has_listen_fd) || (spec && spec[0]) || !cfg->addrs ||
	    !cfg->addrs[cfg->rank] || ctl_parse_addr(cfg->addrs[cfg->rank], &ss, &len)) {
		return -1;
	}
	fd = ftcc_sys_socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return -1;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ftcc_sys_bind(fd, (struct sockaddr *)&ss, len) < 0 || ftcc_sys_listen(fd, 128) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

/* This member's blob for the control plane (eng_lane_addr() reads it): lane 0's address, NUL,
 * the point-to-point address or nothing, and with more lanes NUL and their ports. Its length,
 * or 0 when it does not fit. */
static size_t info_of(struct ftcc_comm *c, char *info)
{
	size_t len;

	uint32_t total = c->nlanes * c->nstreams;

	snprintf(info, CTL_INFO_MAX, "%s", dp_addr(c->lane[0].dp));
	len = strlen(info);
	if (c->p2p || total > 1) {
		snprintf(info + len + 1, CTL_INFO_MAX - len - 1, "%s",
			 c->p2p ? p2p_addr(c->p2p) : "");
		len += 1 + strlen(info + len + 1);
	}
	if (total > 1) {
		char ports[CTL_INFO_MAX];
		size_t off = 0;

		/* every stream's lanes in a row (eng_lane_addr()): lane i of stream t is
		 * t * nlanes + i */
		ports[0] = '\0';
		for (uint32_t g = 1; g < total && off < sizeof(ports); g++) {
			const struct eng_lane *l = &c->streams[g / c->nlanes]->lane[g % c->nlanes];
			const char *a = dp_addr(l->dp), *port = strrchr(a, ':');

			off += (size_t)snprintf(ports + off, sizeof(ports) - off, "%s%s",
						g > 1 ? "," : "", port ? port + 1 : "0");
		}
		snprintf(info + len + 1, CTL_INFO_MAX - len - 1, "%s", ports);
		len += 1 + strlen(info + len + 1);
		if (off >= sizeof(ports) || len + 1 >= CTL_INFO_MAX) {
			return 0; /* cut short: the others would read a wrong port */
		}
	}
	return len;
}

#define ENG_ALL_LANES (ENG_LANES_MAX * FTCC_STREAMS_MAX)

/* Whether this member runs another number of lanes (FTCC_LANES, in all its streams) than the
 * group: the number most members of the view run, ties going to the lowest id's; a joiner counts
 * only the members already in (they never check it). It cannot take part then, and says why. */
static int lanes_differ(struct ftcc_comm *c, int join)
{
	uint32_t votes[ENG_ALL_LANES + 1] = { 0 }, low[ENG_ALL_LANES + 1], best = 0;
	struct ctl_view v;

	ctl_member_view(c->ctl, &v);
	for (uint32_t i = 0; v.e && i < v.e->nmembers; i++) {
		const struct ctl_member_rec *m = &v.e->members[i];
		uint32_t k = eng_info_lanes(m->info, m->info_len);

		if (k > ENG_ALL_LANES || (join && m->id == c->rank)) {
			continue;
		}
		if (!votes[k] || m->id < low[k]) {
			low[k] = m->id;
		}
		votes[k]++;
	}
	ctl_epoch_put(v.e);
	for (uint32_t k = 1; k <= ENG_ALL_LANES; k++) {
		if (votes[k] && (!best || votes[k] > votes[best] ||
				 (votes[k] == votes[best] && low[k] < low[best]))) {
			best = k;
		}
	}
	if (best && best != c->nlanes * c->nstreams) {
		ftcc_warn("ftcc_comm_create: member %u of group %s runs %u lanes in all, the group "
			  "%u: FTCC_LANES (and nstreams) must be the same on every member",
			  c->rank, c->group, c->nlanes * c->nstreams, best);
		return 1;
	}
	return 0;
}

int ftcc_comm_create_ext(const struct ftcc_config *cfg, const struct ftcc_create_ext *ext,
			 ftcc_comm_t **out)
{
	int lfd;
	struct ctl_member_cfg mc = { 0 };
	char info[CTL_INFO_MAX];
	size_t info_len;
	struct ftcc_comm *c;
	struct ctl_view v;
	int64_t wait_ms;
	uint32_t nstreams;
	int rc;

	if (!out) {
		return FTCC_ERR_INVALID;
	}
	*out = NULL;
	/* (a struct of a header older than nstreams: the size up to it, and one stream) */
	if (cfg && ((cfg->struct_size != sizeof(*cfg) &&
		     cfg->struct_size != offsetof(struct ftcc_config, nstreams)) ||
		    cfg->version / 10000 != FTCC_VERSION_MAJOR)) {
		ftcc_warn(
			"ftcc_comm_create: struct ftcc_config was not set up by ftcc_config_init() "
			"of this library's major version (size %u, version %u; this library's: "
			"size %zu, version %d)",
			cfg->struct_size, cfg->version, sizeof(*cfg), FTCC_VERSION);
		return FTCC_ERR_INVALID;
	}
	nstreams = cfg && cfg->struct_size == sizeof(*cfg) && cfg->nstreams ? cfg->nstreams : 1;
	if (!cfg || !cfg->group || !cfg->group[0] || strlen(cfg->group) > 63 || cfg->size == 0 ||
	    cfg->size > FTCC_MAX_MEMBERS || cfg->rank >= cfg->size || cfg->timeout_ms < 0 ||
	    cfg->connect_timeout_ms < 0 || (cfg->catchup && !cfg->join) ||
	    nstreams > FTCC_STREAMS_MAX || (nstreams > 1 && ext && ext->no_p2p)) {
		ftcc_warn(
			"ftcc_comm_create: bad configuration (group name 1..63 bytes, 0 < size <= "
			"%d, rank < size, timeouts >= 0, catchup only with join, nstreams <= %d)",
			FTCC_MAX_MEMBERS, FTCC_STREAMS_MAX);
		return FTCC_ERR_INVALID;
	}
	if (ftcc_settings_load() || ftcc_fault_load()) {
		return FTCC_ERR_INVALID;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		return FTCC_ERR_NOMEM;
	}
	if (policy_of(cfg->degraded, &c->degraded)) {
		free(c);
		return FTCC_ERR_INVALID;
	}
	c->owner = c;
	c->nstreams = nstreams;
	c->streams[0] = c;
	lfd = pre_listen(cfg, ext);
	rc = comm_init(c, cfg, !(ext && ext->no_p2p), ext ? ext->auto_lanes : 0, 0, 0);
	for (uint32_t t = 1; !rc && t < nstreams; t++) {
		struct ftcc_comm *s = calloc(1, sizeof(*s));

		c->streams[t] = s;
		if (!s) {
			rc = FTCC_ERR_NOMEM;
			break;
		}
		s->owner = c;
		s->nstreams = nstreams;
		s->degraded = c->degraded;
		rc = comm_init(s, cfg, 0, ext ? ext->auto_lanes : 0, t, c->incarnation);
	}
	if (rc) {
		if (lfd >= 0) {
			close(lfd);
		}
		comm_free(c);
		return rc;
	}
	/* The engine's data plane address, then the point-to-point one after its NUL. */
	info_len = info_of(c, info);
	if (!info_len) {
		ftcc_warn("ftcc_comm_create: member %u: the addresses of %u lanes do not fit in %d "
			  "bytes (FTCC_LANES times nstreams)",
			  cfg->rank, c->nlanes * nstreams, CTL_INFO_MAX);
		if (lfd >= 0) {
			close(lfd);
		}
		comm_free(c);
		return FTCC_ERR_INVALID;
	}
	mc.group = cfg->group;
	mc.id = cfg->rank;
	mc.expected = cfg->size;
	mc.coordinator = cfg->coordinator;
	mc.addrs = cfg->addrs;
	mc.join = cfg->join;
	mc.catchup = cfg->catchup;
	mc.info = info;
	mc.info_len = info_len;
	mc.timeout_ms = cfg->timeout_ms;
	mc.connect_timeout_ms = cfg->connect_timeout_ms;
	mc.incarnation = c->incarnation;
	mc.nstreams = nstreams;
	mc.on_change = on_change;
	mc.on_change_arg = c;
	if (ext && ext->has_listen_fd) {
		mc.has_listen_fd = 1;
		mc.listen_fd = ext->listen_fd;
	} else if (lfd >= 0) {
		mc.has_listen_fd = 1; /* the member listens on a duplicate */
		mc.listen_fd = lfd;
	}
	rc = ctl_member_create(&mc, &c->ctl);
	if (lfd >= 0) {
		close(lfd);
	}
	if (rc) {
		comm_free(c);
		return rc == -ENOMEM			       ? FTCC_ERR_NOMEM :
		       rc == -EINVAL || rc == -EPROTONOSUPPORT ? FTCC_ERR_INVALID :
								 FTCC_ERR_SYSTEM;
	}
	ftcc_fault("connect", 0, 0);
	wait_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms :
					    ftcc_setting_int(FTCC_SET_CONNECT_TIMEOUT_MS);
	rc = ctl_member_wait(c->ctl, 1, (int)(wait_ms > 0x7fffffff ? 0x7fffffff : wait_ms));
	if (rc) {
		ctl_member_view(c->ctl, &v);
		ftcc_warn("ftcc_comm_create: member %u of group %s: %s", cfg->rank, cfg->group,
			  rc == -ETIMEDOUT ? "the group did not form in time" : v.reason);
		ctl_epoch_put(v.e);
		ctl_member_destroy(c->ctl);
		comm_free(c);
		return rc == -ETIMEDOUT ? FTCC_ERR_TIMEOUT : FTCC_ERR_LOST;
	}
	if (lanes_differ(c, cfg->join)) {
		ctl_member_destroy(c->ctl);
		comm_free(c);
		return FTCC_ERR_INVALID;
	}
	rc = c->p2p ? p2p_start(c->p2p) : 0;
	for (uint32_t t = 0; t < nstreams; t++) {
		struct ftcc_comm *s = c->streams[t];

		s->ctl = c->ctl;
		s->next_seq = cfg->join ? ctl_member_admitted_s(c->ctl, t) : 0;
		if (cfg->join && t == 0) {
			ftcc_fault("join", c->next_seq, 0);
		}
		ctl_member_progress_s(c->ctl, t, s->next_seq, s->next_seq);
		rc = rc ? rc : eng_lanes_start(s, s->next_seq);
	}
	if (rc) {
		for (uint32_t t = 0; t < nstreams; t++) {
			struct ftcc_comm *s = c->streams[t];

			pthread_mutex_lock(&s->mu);
			s->stop = 1;
			pthread_cond_broadcast(&s->cv);
			pthread_mutex_unlock(&s->mu);
			eng_lanes_join(s);
		}
		p2p_stop(c->p2p);
		ctl_member_destroy(c->ctl);
		comm_free(c);
		return FTCC_ERR_SYSTEM;
	}
	*out = c;
	return 0;
}

FTCC_API int ftcc_comm_create(const struct ftcc_config *cfg, ftcc_comm_t **out)
{
	return ftcc_comm_create_ext(cfg, NULL, out);
}

/* Stops everything that could touch the peers: every stream's data planes and executors, the
 * membership (the others see a LEAVE). Bounded by about ENG_ABORT_WAIT_MS + 100 ms. */
static void comm_stop(struct ftcc_comm *c0, int graceful)
{
	struct timespec ts;
	int64_t deadline = now_ms() + ENG_ABORT_WAIT_MS;
	struct ctl_member *ctl = c0->ctl;
	int idle = 1;
	uint32_t t;

	/* Point-to-point first: its thread looks at the membership. Leaving gracefully, the
	 * acknowledgements of messages taken go out before the others hear this member left. */
	if (graceful) {
		p2p_flush(c0->p2p);
	}
	p2p_stop(c0->p2p);
	for (t = 0; t < c0->nstreams; t++) {
		struct ftcc_comm *c = c0->streams[t];

		atomic_store(&c->aborted, 1);
		for (uint32_t i = 0; i < c->nlanes; i++) {
			dp_abort(c->lane[i].dp);
		}
		pthread_mutex_lock(&c->mu);
		c->stop = 1;
		/* No lane runs a queued op any more: they end now (one running ends by itself). */
		eng_lanes_abort_queued(c);
		pthread_mutex_unlock(&c->mu);
	}
	for (t = 0; t < c0->nstreams; t++) {
		struct ftcc_comm *c = c0->streams[t];

		pthread_mutex_lock(&c->mu);
		while (eng_lanes_busy(c) && now_ms() < deadline) {
			deadline_in(&ts, 5);
			pthread_cond_timedwait(&c->cv, &c->mu, &ts);
		}
		idle &= !eng_lanes_busy(c);
		pthread_mutex_unlock(&c->mu);
	}
	for (t = 0; idle && t < c0->nstreams; t++) {
		struct ftcc_comm *c = c0->streams[t];

		pthread_mutex_lock(&c->mu);
		c->ctl = NULL; /* under mu: an op being issued meanwhile no longer reaches it */
		pthread_mutex_unlock(&c->mu);
	}
	if (!ctl) {
		return;
	}
	if (idle) {
		ctl_member_destroy(ctl);
	} else {
		/* The executor still holds the membership; the others must not wait for it. */
		ftcc_warn("ftcc: member %u: an op is still running %d ms after the abort; leaving "
			  "the group now",
			  c0->rank, ENG_ABORT_WAIT_MS);
		ctl_member_leave(ctl, "aborted while an op was running");
	}
}

/* A stream's handle where the communicator itself is asked for (destroy, abort). */
static int not_a_stream(const struct ftcc_comm *c, const char *call)
{
	if (c->stream) {
		ftcc_warn("%s: the handle of stream %u, not its communicator", call, c->stream);
		return 0;
	}
	return 1;
}

FTCC_API int ftcc_comm_abort(ftcc_comm_t *c)
{
	if (!c || !not_a_stream(c, "ftcc_comm_abort")) {
		return FTCC_ERR_INVALID;
	}
	if (!atomic_load(&c->aborted)) {
		comm_stop(c, 0);
	}
	return 0;
}

FTCC_API int ftcc_comm_destroy(ftcc_comm_t *c)
{
	struct ftcc_request *r, *next;

	if (!c || !not_a_stream(c, "ftcc_comm_destroy")) {
		return FTCC_ERR_INVALID;
	}
	if (!atomic_load(&c->aborted)) {
		comm_stop(c, 1);
	}
	/* An op still running after the abort bound left the group already (comm_stop); the
	 * executors end with it, then the membership goes. */
	for (uint32_t t = 0; t < c->nstreams; t++) {
		eng_lanes_join(c->streams[t]);
	}
	if (c->ctl) {
		ctl_member_destroy(c->ctl);
	}
	/* Queued, done and untested: every request not collected yet goes with the comm. */
	for (uint32_t t = 0; t < c->nstreams; t++) {
		for (r = c->streams[t]->live; r; r = next) {
			next = r->lnext;
			free(r->tmp);
			free(r);
		}
	}
	comm_free(c);
	return 0;
}

FTCC_API int ftcc_comm_stream(ftcc_comm_t *c, uint32_t stream, ftcc_comm_t **out)
{
	if (out) {
		*out = NULL;
	}
	if (!c || !out || stream >= c->owner->nstreams) {
		return FTCC_ERR_INVALID;
	}
	*out = c->owner->streams[stream];
	return 0;
}

FTCC_API int ftcc_comm_view(ftcc_comm_t *c, struct ftcc_view *view, uint32_t *members, uint32_t cap)
{
	struct ctl_view v;

	if (!c || !view || (cap && !members)) {
		return FTCC_ERR_INVALID;
	}
	memset(view, 0, sizeof(*view));
	view->self_index = -1;
	pthread_mutex_lock(&c->mu);
	view->next_seq = c->next_seq;
	pthread_mutex_unlock(&c->mu);
	if (atomic_load(&c->aborted) || !c->ctl) {
		view->state = FTCC_ERR_ABORTED;
		return 0;
	}
	ctl_member_view_s(c->ctl, c->stream, &v);
	if (v.e) {
		view->epoch = v.e->epoch;
		view->boundary = v.e->boundary;
		view->nmembers = v.e->nmembers;
		view->self_index = v.e->self_index;
		view->coordinator = v.e->coord;
		if (v.e->self_index >= 0) {
			view->contributor =
				!!(v.e->members[v.e->self_index].flags & CTL_MF_CONTRIB);
		}
		for (uint32_t i = 0; i < v.e->nmembers && i < cap; i++) {
			members[i] = v.e->members[i].id;
		}
	}
	if (v.state == CTL_M_LOST || v.state == CTL_M_REMOVED || v.state == CTL_M_LEFT) {
		view->state = FTCC_ERR_LOST;
	}
	ctl_epoch_put(v.e);
	return 0;
}

FTCC_API int ftcc_comm_ready(ftcc_comm_t *c)
{
	if (!c || atomic_load(&c->aborted)) {
		return FTCC_ERR_INVALID;
	}
	return ctl_member_ready(c->ctl) ? FTCC_ERR_INVALID : 0;
}

FTCC_API const char *ftcc_comm_last_error(ftcc_comm_t *c)
{
	return c ? c->last_error : "";
}

uint32_t ftcc_comm_lanes(const ftcc_comm_t *c)
{
	return c ? c->nlanes : 0;
}
