/* SPDX-License-Identifier: BSD-3-Clause */
/* The public C API (include/ftcc.h): communicator life cycle, the op queue, and who runs ops.
 *
 * Ops run one at a time in sequence order, by whichever thread holds the executor role: a
 * caller blocked in ftcc_wait()/ftcc_allreduce() runs the queue itself (no thread hand-off on
 * the latency path), and the communicator's own thread runs ops started asynchronously that
 * nobody waits for, and reports completed ops that a new epoch reopens while the caller is idle.
 */
#include "engine.h"

#include <errno.h>
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
	struct ftcc_comm *c = arg;

	atomic_fetch_add(&c->ctl_gen, 1);
	p2p_kick(c->p2p);
	pthread_mutex_lock(&c->mu);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

/* Tells the membership how far this member got. */
static void report_progress(struct ftcc_comm *c)
{
	uint64_t next;

	pthread_mutex_lock(&c->mu);
	next = c->next_seq;
	pthread_mutex_unlock(&c->mu);
	ctl_member_progress(c->ctl, next, c->exec_seq);
}

/* Whether an op's error leaves this member unable to take part in the next ops: it must leave
 * the group then, or the others would wait for it in those ops. */
static int gives_up(int rc)
{
	return rc == FTCC_ERR_NOMEM || rc == FTCC_ERR_TIMEOUT || rc == FTCC_ERR_LOST ||
	       rc == FTCC_ERR_SYSTEM || rc == FTCC_ERR_INVALID;
}

/* Runs queued ops in order until @until is done (NULL: until the queue is empty). Called with
 * c->mu held and c->executing set by the caller; returns the same way. */
static void execute(struct ftcc_comm *c, struct ftcc_request *until)
{
	while (c->qhead && !(until && until->done)) {
		struct ftcc_request *r = c->qhead;

		c->qhead = r->next;
		if (!c->qhead) {
			c->qtail = NULL;
		}
		pthread_mutex_unlock(&c->mu);
		if (atomic_load(&c->aborted)) {
			r->result = FTCC_ERR_ABORTED;
		} else if (c->failed) {
			r->result = FTCC_ERR_LOST; /* this member left the group */
		} else {
			eng_run_op(c, r);
			eng_coll_finish(c, r);
			if (gives_up(r->result)) {
				char why[320];

				pthread_mutex_lock(&c->mu);
				snprintf(why, sizeof(why), "op %llu failed here (%s): %s",
					 (unsigned long long)r->seq, ftcc_strerror(r->result),
					 c->last_error);
				pthread_mutex_unlock(&c->mu);
				eng_give_up(c, r->result, why);
			}
		}
		if (r->result != FTCC_ERR_ABORTED && r->result != FTCC_ERR_LOST &&
		    r->result != FTCC_ERR_TIMEOUT) {
			c->exec_seq = r->seq + 1;
			report_progress(c);
		}
		pthread_mutex_lock(&c->mu);
		r->done = 1;
		pthread_cond_broadcast(&c->cv);
	}
	if (!atomic_load(&c->aborted)) {
		pthread_mutex_unlock(&c->mu);
		eng_sync_done(c);
		pthread_mutex_lock(&c->mu);
	}
}

static void *executor_main(void *arg)
{
	struct ftcc_comm *c = arg;
	struct timespec ts;

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		if (!c->executing && (c->qhead || atomic_load(&c->ctl_gen) != c->sync_gen) &&
		    !atomic_load(&c->aborted)) {
			c->executing = 1;
			execute(c, NULL);
			c->executing = 0;
			pthread_cond_broadcast(&c->cv);
			continue;
		}
		if (!c->executing && !atomic_load(&c->aborted)) {
			/* between ops: a peer that reconnects now gets its answer */
			c->executing = 1;
			pthread_mutex_unlock(&c->mu);
			eng_serve(c);
			pthread_mutex_lock(&c->mu);
			c->executing = 0;
			pthread_cond_broadcast(&c->cv);
			/* An op enqueued (or an epoch committed) while the lock was dropped signalled
			 * nobody: look again before sleeping. */
			if (c->qhead || atomic_load(&c->ctl_gen) != c->sync_gen) {
				continue;
			}
		}
		deadline_in(&ts, 20);
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
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
	p2p_destroy(c->p2p);
	dp_destroy(c->dp);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c->scratch);
	free(c->keep);
	free(c->ident);
	free(c->opv);
	free(c->copybuf[0]);
	free(c->copybuf[1]);
	free(c->reports);
	free(c);
}

static int comm_init(struct ftcc_comm *c, const struct ftcc_config *cfg, int p2p)
{
	struct dp_cfg dc = { 0 };
	char host[DP_ADDR_MAX];
	pthread_condattr_t ca;

	snprintf(c->group, sizeof(c->group), "%s", cfg->group);
	c->rank = cfg->rank;
	c->size = cfg->size;
	c->timeout_ms =
		cfg->timeout_ms ? cfg->timeout_ms : ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS);
	for (int i = 0; i < ENG_DONE_RING; i++) {
		c->done[i].seq = UINT64_MAX;
	}
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->reports = calloc(FTCC_MAX_MEMBERS, sizeof(*c->reports));
	if (!c->reports) {
		return FTCC_ERR_NOMEM;
	}
	if (getrandom(&c->incarnation, sizeof(c->incarnation), GRND_NONBLOCK) !=
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
	if (dp_create(&dc, &c->dp)) {
		return FTCC_ERR_SYSTEM;
	}
	if (p2p && p2p_create(c, dc.group_id, dc.bind_host, &c->p2p)) {
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
	int rc;

	if (!out) {
		return FTCC_ERR_INVALID;
	}
	*out = NULL;
	if (cfg &&
	    (cfg->struct_size != sizeof(*cfg) || cfg->version / 10000 != FTCC_VERSION_MAJOR)) {
		ftcc_warn(
			"ftcc_comm_create: struct ftcc_config was not set up by ftcc_config_init() "
			"of this library's major version (size %u, version %u; this library's: "
			"size %zu, version %d)",
			cfg->struct_size, cfg->version, sizeof(*cfg), FTCC_VERSION);
		return FTCC_ERR_INVALID;
	}
	if (!cfg || !cfg->group || !cfg->group[0] || strlen(cfg->group) > 63 || cfg->size == 0 ||
	    cfg->size > FTCC_MAX_MEMBERS || cfg->rank >= cfg->size || cfg->timeout_ms < 0 ||
	    cfg->connect_timeout_ms < 0 || (cfg->catchup && !cfg->join)) {
		ftcc_warn(
			"ftcc_comm_create: bad configuration (group name 1..63 bytes, 0 < size <= "
			"%d, rank < size, timeouts >= 0, catchup only with join)",
			FTCC_MAX_MEMBERS);
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
	lfd = pre_listen(cfg, ext);
	rc = comm_init(c, cfg, !(ext && ext->no_p2p));
	if (rc) {
		if (lfd >= 0) {
			close(lfd);
		}
		comm_free(c);
		return rc;
	}
	/* The engine's data plane address, then the point-to-point one after its NUL. */
	snprintf(info, sizeof(info), "%s", dp_addr(c->dp));
	info_len = strlen(info);
	if (c->p2p) {
		snprintf(info + info_len + 1, sizeof(info) - info_len - 1, "%s", p2p_addr(c->p2p));
		info_len += 1 + strlen(info + info_len + 1);
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
	c->next_seq = c->exec_seq = cfg->join ? ctl_member_admitted(c->ctl) : 0;
	if (cfg->join) {
		ftcc_fault("join", c->next_seq, 0);
	}
	ctl_member_progress(c->ctl, c->next_seq, c->exec_seq);
	if ((c->p2p && p2p_start(c->p2p)) || pthread_create(&c->thread, NULL, executor_main, c)) {
		p2p_stop(c->p2p);
		ctl_member_destroy(c->ctl);
		comm_free(c);
		return FTCC_ERR_SYSTEM;
	}
	c->thread_started = 1;
	*out = c;
	return 0;
}

FTCC_API int ftcc_comm_create(const struct ftcc_config *cfg, ftcc_comm_t **out)
{
	return ftcc_comm_create_ext(cfg, NULL, out);
}

/* Stops everything that could touch the peers: the data plane, the executor, the
 * membership (the others see a LEAVE). Bounded by about ENG_ABORT_WAIT_MS + 100 ms. */
static void comm_stop(struct ftcc_comm *c, int graceful)
{
	struct timespec ts;
	int64_t deadline = now_ms() + ENG_ABORT_WAIT_MS;
	struct ctl_member *ctl;
	int idle;

	/* Point-to-point first: its thread looks at the membership. Leaving gracefully, the
	 * acknowledgements of messages taken go out before the others hear this member left. */
	if (graceful) {
		p2p_flush(c->p2p);
	}
	p2p_stop(c->p2p);
	atomic_store(&c->aborted, 1);
	dp_abort(c->dp);
	pthread_mutex_lock(&c->mu);
	c->stop = 1;
	pthread_cond_broadcast(&c->cv);
	while (c->executing && now_ms() < deadline) {
		deadline_in(&ts, 5);
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
	idle = !c->executing;
	ctl = idle ? c->ctl : NULL;
	if (idle) {
		c->ctl = NULL; /* under mu: an op being issued meanwhile no longer reaches it */
	}
	pthread_mutex_unlock(&c->mu);
	if (ctl) {
		ctl_member_destroy(ctl);
	} else if (c->ctl) {
		/* The executor still holds the membership; the others must not wait for it. */
		ftcc_warn("ftcc: member %u: an op is still running %d ms after the abort; leaving "
			  "the group now",
			  c->rank, ENG_ABORT_WAIT_MS);
		ctl_member_leave(c->ctl, "aborted while an op was running");
	}
}

FTCC_API int ftcc_comm_abort(ftcc_comm_t *c)
{
	if (!c) {
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

	if (!c) {
		return FTCC_ERR_INVALID;
	}
	if (!atomic_load(&c->aborted)) {
		comm_stop(c, 1);
	}
	/* An op still running after the abort bound left the group already (comm_stop); the
	 * executor ends with it, then the membership goes. */
	if (c->thread_started) {
		pthread_join(c->thread, NULL);
	}
	if (c->ctl) {
		ctl_member_destroy(c->ctl);
	}
	/* Queued, done and untested: every request not collected yet goes with the comm. */
	for (r = c->live; r; r = next) {
		next = r->lnext;
		free(r->tmp);
		free(r);
	}
	comm_free(c);
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
	ctl_member_view(c->ctl, &v);
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

/* The checks of eng_start() before anything is allocated. */
static int start_check(struct ftcc_comm *c, const struct eng_op *d, ftcc_request_t **req)
{
	size_t bytes = d->count * ftcc_dtype_size(d->dtype);
	const char *s = d->sendbuf, *r = d->recvbuf;

	if (!c || !req || (unsigned)d->dtype >= FTCC_DTYPE_COUNT ||
	    (unsigned)d->op >= FTCC_REDOP_COUNT || (unsigned)d->codec >= FTCC_CODEC_COUNT ||
	    (d->count && (!s || !r)) || d->count > FTCC_MAX_COUNT) {
		return FTCC_ERR_INVALID;
	}
	if (s != r && d->count && s < r + bytes && r < s + bytes) {
		return FTCC_ERR_INVALID; /* overlapping but not in place */
	}
	if (atomic_load(&c->aborted)) {
		return FTCC_ERR_ABORTED;
	}
	pthread_mutex_lock(&c->mu);
	if (c->failed) {
		pthread_mutex_unlock(&c->mu);
		return FTCC_ERR_LOST; /* it left the group: ftcc_comm_last_error() says why */
	}
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int eng_start(struct ftcc_comm *c, const struct eng_op *d, int wake, ftcc_request_t **req)
{
	struct ftcc_request *r;
	int rc = start_check(c, d, req);

	r = rc ? NULL : calloc(1, sizeof(*r));
	if (!r) {
		free(d->tmp);
		return rc ? rc : FTCC_ERR_NOMEM;
	}
	r->comm = c;
	r->sendbuf = d->sendbuf;
	r->recvbuf = d->recvbuf;
	r->count = d->count;
	r->dtype = d->dtype;
	r->op = d->op;
	r->codec = d->codec;
	r->kind = d->kind;
	r->param = d->param;
	r->tmp = d->tmp;
	r->dst = d->dst;
	r->dst_off = d->dst_off;
	r->dst_len = d->dst_len;
	pthread_mutex_lock(&c->mu);
	if (c->next_seq - c->exec_seq >= FTCC_MAX_INFLIGHT) {
		pthread_mutex_unlock(&c->mu);
		free(r->tmp);
		free(r);
		return FTCC_ERR_BUSY;
	}
	r->seq = c->next_seq++;
	r->lnext = c->live;
	if (c->live) {
		c->live->lprev = r;
	}
	c->live = r;
	if (c->qtail) {
		c->qtail->next = r;
	} else {
		c->qhead = r;
	}
	c->qtail = r;
	if (wake) {
		pthread_cond_broadcast(&c->cv);
	}
	/* the others take a member that has not issued an op they wait in for a straggler */
	if (c->ctl) {
		ctl_member_issued(c->ctl, r->seq + 1);
	}
	pthread_mutex_unlock(&c->mu);
	*req = r;
	return 0;
}

int eng_collect(struct ftcc_request *r, struct ftcc_record *rec)
{
	struct ftcc_comm *c = r->comm;
	int rc = r->result;

	if (rec) {
		*rec = r->rec;
	}
	pthread_mutex_lock(&c->mu);
	if (r->lprev) {
		r->lprev->lnext = r->lnext;
	} else {
		c->live = r->lnext;
	}
	if (r->lnext) {
		r->lnext->lprev = r->lprev;
	}
	pthread_mutex_unlock(&c->mu);
	free(r->tmp);
	free(r);
	return rc;
}

FTCC_API int ftcc_test(ftcc_request_t *r, int *done, struct ftcc_record *rec)
{
	struct ftcc_comm *c;
	int fin;

	if (!r || !done) {
		return FTCC_ERR_INVALID;
	}
	if (r->kind == ENG_SEND || r->kind == ENG_RECV || r->kind == ENG_FETCH) {
		return p2p_test(r, done, rec);
	}
	c = r->comm;
	pthread_mutex_lock(&c->mu);
	if (!r->done && !c->executing) {
		pthread_cond_broadcast(&c->cv); /* the executor thread runs it; test never blocks */
	}
	fin = r->done;
	pthread_mutex_unlock(&c->mu);
	*done = fin;
	return fin ? eng_collect(r, rec) : 0;
}

FTCC_API int ftcc_wait(ftcc_request_t *r, struct ftcc_record *rec)
{
	struct ftcc_comm *c;
	struct timespec ts;

	if (!r) {
		return FTCC_ERR_INVALID;
	}
	if (r->kind == ENG_SEND || r->kind == ENG_RECV || r->kind == ENG_FETCH) {
		return p2p_wait(r, rec);
	}
	c = r->comm;
	pthread_mutex_lock(&c->mu);
	while (!r->done) {
		if (!c->executing && !atomic_load(&c->aborted)) {
			c->executing = 1;
			execute(c, r);
			c->executing = 0;
			pthread_cond_broadcast(&c->cv);
			continue;
		}
		if (atomic_load(&c->aborted) && !c->executing) {
			/* Nobody will run it any more. */
			struct ftcc_request **pp = &c->qhead, *prev = NULL;

			while (*pp && *pp != r) {
				prev = *pp;
				pp = &(*pp)->next;
			}
			if (*pp) {
				*pp = r->next;
				if (c->qtail == r) {
					c->qtail = prev;
				}
			}
			r->result = FTCC_ERR_ABORTED;
			r->done = 1;
			break;
		}
		deadline_in(&ts, 10);
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
	pthread_mutex_unlock(&c->mu);
	return eng_collect(r, rec);
}
