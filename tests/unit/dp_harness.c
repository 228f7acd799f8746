/* SPDX-License-Identifier: BSD-3-Clause */
/* Harness of the data plane tests: members on 127.0.0.1, jobs in threads, payload patterns
 * and the hand-written wire (see dp_harness.h).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "../../collectives/dp_int.h"
#include "dp_harness.h"

int64_t dph_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

atomic_int dph_warn_lines, dph_retry_lines;
char dph_last_warn[512];

void dph_count_sink(enum ftcc_log_level level, const char *file, int line, const char *msg)
{
	(void)file;
	(void)line;
	if (strstr(msg, "retrying"))
		atomic_fetch_add(&dph_retry_lines, 1);
	if (level == FTCC_LOG_WARN) {
		atomic_fetch_add(&dph_warn_lines, 1);
		snprintf(dph_last_warn, sizeof(dph_last_warn), "%s", msg);
	}
}

struct dp *dph_mk(uint32_t id, uint64_t inc, int64_t failure_ms)
{
	return dph_mk_cfg(id, inc, failure_ms, 0);
}

struct dp *dph_mk_cfg(uint32_t id, uint64_t inc, int64_t failure_ms, int either)
{
	struct dp_cfg cfg = { .bind_host = "127.0.0.1",
			      .group_id = DPH_GROUP,
			      .self_id = id,
			      .incarnation = inc,
			      .failure_ms = failure_ms,
			      .either_connects = either };
	struct dp *dp = NULL;

	cr_assert_eq(dp_create(&cfg, &dp), 0);
	return dp;
}

struct dp_peer dph_peer_of(struct dp *dp, uint32_t id, uint64_t inc)
{
	struct dp_peer p = { .id = id, .incarnation = inc };

	snprintf(p.addr, sizeof(p.addr), "%s", dp_addr(dp));
	return p;
}

/* Tells every one of @n members about all (self included, which dp ignores). */
void dph_mesh(struct dp **dps, const uint32_t *ids, const uint64_t *incs, int n)
{
	struct dp_peer peers[8];

	for (int i = 0; i < n; i++)
		peers[i] = dph_peer_of(dps[i], ids[i], incs[i]);
	for (int i = 0; i < n; i++)
		cr_assert_eq(dp_set_peers(dps[i], peers, (uint32_t)n), 0);
}

struct dp_tag dph_tag(uint64_t seq, uint32_t step)
{
	return (struct dp_tag){ .seq = seq, .epoch = 1, .phase = DP_PH_TEST, .step = step };
}

struct dp_xfer dph_xf(uint32_t peer, enum dp_dir dir, struct dp_tag t, void *buf, size_t len)
{
	return (struct dp_xfer){ .peer = peer, .dir = dir, .tag = t, .buf = buf, .len = len };
}

int dph_past_deadline(void *arg)
{
	return dph_now_ms() > *(int64_t *)arg ? -ETIMEDOUT : 0;
}

/* Runs @x to completion within DPH_BOUND_MS. */
int dph_run(struct dp *dp, struct dp_xfer *x, int n, uint32_t *bad)
{
	int64_t deadline = dph_now_ms() + DPH_BOUND_MS;

	return dp_run(dp, x, n, dph_past_deadline, &deadline, 10, bad);
}

void *dph_job_main(void *arg)
{
	struct dph_job *j = arg;

	j->bad = UINT32_MAX;
	j->rc = dph_run(j->dp, j->x, j->n, &j->bad);
	return NULL;
}

void dph_job_start(struct dph_job *j)
{
	cr_assert_eq(pthread_create(&j->th, NULL, dph_job_main, j), 0);
}

void dph_job_join(struct dph_job *j)
{
	pthread_join(j->th, NULL);
}

void dph_fill(uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t v = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		v = v * 1664525u + 1013904223u;
		p[i] = (uint8_t)(v >> 24);
	}
}

int dph_check_fill(const uint8_t *p, size_t len, uint32_t seed)
{
	uint32_t v = seed * 2654435761u + 1;

	for (size_t i = 0; i < len; i++) {
		v = v * 1664525u + 1013904223u;
		if (p[i] != (uint8_t)(v >> 24))
			return 0;
	}
	return 1;
}

static void dph_le(uint8_t *p, uint64_t v, int bytes)
{
	for (int i = 0; i < bytes; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

/* A HELLO as the wire defines it (dp_int.h). */
void dph_raw_hello(uint8_t *p, uint16_t version, uint64_t group, uint32_t from, uint64_t from_inc,
		   uint32_t to, uint64_t to_inc)
{
	memset(p, 0, DP_HELLO_SIZE);
	dph_le(p, DP_HELLO_MAGIC, 4);
	dph_le(p + 4, version, 2);
	dph_le(p + 8, group, 8);
	dph_le(p + 16, from, 4);
	dph_le(p + 20, to, 4);
	dph_le(p + 24, from_inc, 8);
	dph_le(p + 32, to_inc, 8);
}

void dph_raw_frame_hdr(uint8_t *p, struct dp_tag t, uint64_t len)
{
	memset(p, 0, DP_FRAME_HDR);
	dph_le(p, DP_FRAME_MAGIC, 4);
	dph_le(p + 4, t.phase, 4);
	dph_le(p + 8, t.seq, 8);
	dph_le(p + 16, t.epoch, 8);
	dph_le(p + 24, t.step, 4);
	dph_le(p + 32, len, 8);
}

/* A blocking client socket connected to @dp, having sent @len bytes of @data. */
int dph_raw_connect(struct dp *dp, const void *data, size_t len)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_geq(fd, 0);
	sa.sin_port = htons((uint16_t)atoi(strrchr(dp_addr(dp), ':') + 1));
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	if (len)
		cr_assert_eq(send(fd, data, len, MSG_NOSIGNAL), (ssize_t)len);
	return fd;
}

/* Reads from @fd while driving @dp, until EOF/reset (returns 1), @want bytes arrive (returns
 * 2, bytes in @buf) or @ms pass (0). */
int dph_raw_wait(struct dp *dp, int fd, uint8_t *buf, size_t want, int ms)
{
	int64_t deadline = dph_now_ms() + ms;
	size_t got = 0;
	uint32_t bp;

	while (dph_now_ms() < deadline) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };

		cr_assert_eq(dp_progress(dp, NULL, 0, 0, &bp), 0);
		if (poll(&pfd, 1, 5) <= 0)
			continue;
		uint8_t tmp[64];
		ssize_t n = recv(fd, want ? buf + got : tmp, want ? want - got : sizeof(tmp), 0);

		if (n <= 0)
			return 1;
		got += (size_t)n;
		if (want && got == want)
			return 2;
	}
	return 0;
}

/* Exchanges one small frame each way between @a (id @ia) and @b (id @ib); tag seq @seq. */
void dph_ping(struct dp *a, uint32_t ia, struct dp *b, uint32_t ib, uint64_t seq)
{
	uint8_t s[2][256], r[2][256];
	struct dph_job j[2] = { { .dp = a }, { .dp = b } };
	uint32_t id[2] = { ia, ib };

	for (int i = 0; i < 2; i++) {
		dph_fill(s[i], sizeof(s[i]), (uint32_t)(seq * 2 + (uint64_t)i));
		j[i].x[0] = dph_xf(id[1 - i], DP_SEND, dph_tag(seq, 0), s[i], sizeof(s[i]));
		j[i].x[1] = dph_xf(id[1 - i], DP_RECV, dph_tag(seq, 0), r[i], sizeof(r[i]));
		j[i].n = 2;
		dph_job_start(&j[i]);
	}
	for (int i = 0; i < 2; i++) {
		dph_job_join(&j[i]);
		cr_assert_eq(j[i].rc, 0, "seq %llu member %u: %d", (unsigned long long)seq, id[i],
			     j[i].rc);
		cr_assert_arr_eq(r[i], s[1 - i], sizeof(s[i]));
	}
}
