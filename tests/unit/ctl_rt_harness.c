/* SPDX-License-Identifier: BSD-3-Clause */
/* Harness of the membership runtime tests: log capture, groups of in-process members, bounded
 * waits for a member list, and raw sockets (see ctl_rt_harness.h).
 */
#define _GNU_SOURCE
#include "ctl_rt_harness.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/log.h"

/* ---- log capture -------------------------------------------------------------------------- */

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char log_text[1 << 18];
static size_t log_len;

static void log_sink(enum ftcc_log_level level, const char *file, int line, const char *msg)
{
	pthread_mutex_lock(&log_lock);
	size_t n = strlen(msg);
	if (log_len + n + 2 < sizeof(log_text)) {
		memcpy(log_text + log_len, msg, n);
		log_len += n;
		log_text[log_len++] = '\n';
		log_text[log_len] = '\0';
	}
	pthread_mutex_unlock(&log_lock);
}

void crt_log_start(void)
{
	ftcc_log_set_sink(log_sink);
	ftcc_log_set_level(FTCC_LOG_INFO);
}

void crt_log_reset(void)
{
	pthread_mutex_lock(&log_lock);
	log_len = 0;
	log_text[0] = '\0';
	pthread_mutex_unlock(&log_lock);
}

int crt_log_has(const char *needle)
{
	pthread_mutex_lock(&log_lock);
	int hit = strstr(log_text, needle) != NULL;
	pthread_mutex_unlock(&log_lock);
	return hit;
}

void crt_log_dump(void)
{
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "---- captured log ----\n%s----\n", log_text);
	pthread_mutex_unlock(&log_lock);
}

int64_t crt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- groups --------------------------------------------------------------------------------- */

/* Ports nobody listens on right now: bound to port 0 together, read back, released. */
void crt_free_ports(int n, int *ports)
{
	int fds[MAXN + 2];

	cr_assert_leq(n, MAXN + 2);
	for (int i = 0; i < n; i++) {
		struct sockaddr_in sa = { .sin_family = AF_INET,
					  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
		socklen_t len = sizeof(sa);

		fds[i] = socket(AF_INET, SOCK_STREAM, 0);
		cr_assert_geq(fds[i], 0);
		cr_assert_eq(bind(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
		cr_assert_eq(getsockname(fds[i], (struct sockaddr *)&sa, &len), 0);
		ports[i] = ntohs(sa.sin_port);
	}
	for (int i = 0; i < n; i++)
		close(fds[i]);
}

atomic_int crt_changes[MAXN];

static void on_change(void *arg)
{
	atomic_fetch_add(&crt_changes[(intptr_t)arg], 1);
}

/* Member i listens on 127.0.0.(@host0 + i), or 127.0.0.1 for all when @host0 is 0. */
void crt_grp_init_on(struct crt_grp *g, const char *name, int n, const char *coordinator, int host0)
{
	int ports[MAXN];

	memset(g, 0, sizeof(*g));
	g->n = n;
	g->coordinator = coordinator;
	snprintf(g->name, sizeof(g->name), "%s", name);
	crt_free_ports(n, ports);
	for (int i = 0; i < n; i++) {
		snprintf(g->addr[i], sizeof(g->addr[i]), "127.0.0.%d:%d", host0 ? host0 + i : 1,
			 ports[i]);
		g->addrs[i] = g->addr[i];
		snprintf(g->info[i], sizeof(g->info[i]), "info-%d", i);
	}
}

void crt_grp_init(struct crt_grp *g, const char *name, int n, const char *coordinator)
{
	crt_grp_init_on(g, name, n, coordinator, 0);
}

struct ctl_member_cfg crt_grp_cfg(struct crt_grp *g, int id)
{
	return (struct ctl_member_cfg){ .group = g->name,
					.id = (uint32_t)id,
					.expected = (uint32_t)g->n,
					.coordinator = g->coordinator ? g->coordinator : "",
					.addrs = g->coordinator ? NULL : g->addrs,
					.info = g->info[id],
					.info_len = strlen(g->info[id]) + 1,
					.timeout_ms = TIMEOUT_MS,
					.on_change = on_change,
					.on_change_arg = (void *)(intptr_t)id };
}

void crt_grp_start(struct crt_grp *g, int id, int join, int catchup)
{
	struct ctl_member_cfg cfg = crt_grp_cfg(g, id);

	cfg.join = join;
	cfg.catchup = catchup;
	cr_assert_eq(ctl_member_create(&cfg, &g->m[id]), 0, "member %d of %s", id, g->name);
	cr_assert_not_null(g->m[id]);
}

void crt_grp_stop(struct crt_grp *g, int id)
{
	ctl_member_destroy(g->m[id]);
	g->m[id] = NULL;
}

void crt_grp_destroy(struct crt_grp *g)
{
	for (int i = 0; i < g->n; i++)
		crt_grp_stop(g, i);
}

/* Epoch number of @m's current view (0 before the first). */
uint64_t crt_cur_epoch(struct ctl_member *m)
{
	struct ctl_view v;

	ctl_member_view(m, &v);
	uint64_t e = v.e ? v.e->epoch : 0;
	ctl_epoch_put(v.e);
	return e;
}

/* 1 when @e holds exactly the @n ids of @ids, in order. */
int crt_same_ids(const struct ctl_epoch *e, const uint32_t *ids, int n)
{
	if (!e || e->nmembers != (uint32_t)n)
		return 0;
	for (int i = 0; i < n; i++) {
		if (e->members[i].id != ids[i])
			return 0;
	}
	return 1;
}

/* Waits until @m is in an epoch newer than @after with exactly @ids. Returns that epoch, or 0
 * after @timeout_ms (with the log dumped). */
uint64_t crt_wait_members(struct ctl_member *m, uint64_t after, const uint32_t *ids, int n,
			  int timeout_ms)
{
	int64_t end = crt_now_ms() + timeout_ms;

	for (;;) {
		int64_t left = end - crt_now_ms();
		int rc = ctl_member_wait(m, after + 1, left > 0 ? (int)left : 0);
		struct ctl_view v;

		ctl_member_view(m, &v);
		if (rc == 0 && crt_same_ids(v.e, ids, n)) {
			uint64_t e = v.e->epoch;

			ctl_epoch_put(v.e);
			return e;
		}
		if (rc == 0 && v.e)
			after = v.e->epoch; /* an intermediate epoch: wait for the next */
		ctl_epoch_put(v.e);
		if (rc != 0 || crt_now_ms() >= end) {
			char st[4096];

			ctl_member_status(m, st, sizeof(st));
			fprintf(stderr, "crt_wait_members: rc %d, status:\n%s", rc, st);
			crt_log_dump();
			return 0;
		}
	}
}

/* ---- raw sockets ------------------------------------------------------------------------- */

int crt_raw_connect(int port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)port),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect %d: %s", port,
		     strerror(errno));
	return fd;
}

int crt_port_of(const char *addr)
{
	return atoi(strrchr(addr, ':') + 1);
}

/* Reads until the peer closes or @timeout_ms pass. Returns bytes read; *@closed = 1 when the
 * peer closed (EOF or reset). */
size_t crt_raw_read(int fd, void *buf, size_t cap, int timeout_ms, int *closed)
{
	int64_t end = crt_now_ms() + timeout_ms;
	size_t got = 0;

	*closed = 0;
	while (crt_now_ms() < end) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		if (poll(&pfd, 1, (int)(end - crt_now_ms())) <= 0)
			continue;
		ssize_t n = recv(fd, (char *)buf + got, cap - got, 0);
		if (n <= 0) {
			*closed = 1;
			break;
		}
		got += (size_t)n;
		if (got == cap)
			break;
	}
	return got;
}

static struct ctl_member_rec recs[CTL_MAX_MEMBERS];

/* Decodes the first frame of @buf (@len bytes) into @m. 0 or a negative errno. */
int crt_decode_first(const uint8_t *buf, size_t len, struct ctl_msg *m)
{
	size_t total = 0;
	int rc = ctl_frame_check(buf, len, &total);

	if (rc)
		return rc;
	if (total > len)
		return -EAGAIN;
	memset(m, 0, sizeof(*m));
	m->members = recs;
	m->members_cap = CTL_MAX_MEMBERS;
	return ctl_msg_decode(buf, total, m);
}

/* A HELLO of member @id of group @group into @buf. Returns its length. */
size_t crt_make_hello(uint8_t *buf, size_t cap, const char *group, uint32_t id, uint32_t expected,
		      uint32_t flags)
{
	struct ctl_msg h = { .type = CTL_HELLO,
			     .group_id = ctl_group_id(group),
			     .member = id,
			     .flags = flags,
			     .incarnation = 12345,
			     .expected = expected };

	snprintf(h.group, sizeof(h.group), "%s", group);
	ssize_t n = ctl_msg_encode(&h, buf, cap);
	cr_assert_gt(n, 0, "encode HELLO: %zd", n);
	return (size_t)n;
}

/* Sends @len bytes to @port and reads the answer until the runtime closes (bounded). Returns
 * the answer's length; fails the test if the connection stays open. */
size_t crt_exchange(int port, const void *out, size_t len, uint8_t *in, size_t cap)
{
	int fd = crt_raw_connect(port), closed = 0;

	cr_assert_eq(send(fd, out, len, MSG_NOSIGNAL), (ssize_t)len);
	size_t got = crt_raw_read(fd, in, cap, 2000, &closed);
	close(fd);
	cr_assert(closed, "the runtime closes a refused connection");
	return got;
}
