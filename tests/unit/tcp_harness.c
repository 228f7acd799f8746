/* SPDX-License-Identifier: BSD-3-Clause */
/* Harness of the in-process TCP transport tests: set-up, bounded polling, log capture and
 * message contents. The message-stream driver is in tcp_harness_stream.c.
 */
#define _GNU_SOURCE
#include "tcp_harness.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"

#define LOG_CAP (1 << 20)

static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;
static char *log_text; /* captured lines, '\n' separated */
static size_t log_len;
static int64_t log_t0; /* th_start time: lines carry milliseconds since then */
static int th_refs;    /* references th_start took and th_stop has not dropped yet */

static void capture_sink(enum ftcc_log_level level, const char *file, int line, const char *msg)
{
	static const char *const names[] = { "NONE", "WARN", "INFO", "TRACE" };
	char one[512];
	int n = snprintf(one, sizeof(one), "%6lld %s %s\n", (long long)(th_now_ms() - log_t0),
			 names[level & 3], msg);

	if (n < 0)
		return;
	if ((size_t)n >= sizeof(one))
		n = sizeof(one) - 1;
	pthread_mutex_lock(&log_lock);
	if (!log_text)
		log_text = calloc(1, LOG_CAP);
	if (log_text && log_len + (size_t)n < LOG_CAP) {
		memcpy(log_text + log_len, one, (size_t)n);
		log_len += (size_t)n;
		log_text[log_len] = '\0';
	}
	pthread_mutex_unlock(&log_lock);
}

int th_log_count(const char *needle)
{
	int count = 0;

	pthread_mutex_lock(&log_lock);
	for (char *p = log_text; p && *p;) {
		char *eol = strchr(p, '\n');
		char *hit = strstr(p, needle);

		if (hit && (!eol || hit < eol))
			count++;
		p = eol ? eol + 1 : p + strlen(p);
	}
	pthread_mutex_unlock(&log_lock);
	return count;
}

void th_log_reset(void)
{
	pthread_mutex_lock(&log_lock);
	log_len = 0;
	if (log_text)
		log_text[0] = '\0';
	pthread_mutex_unlock(&log_lock);
}

void th_log_dump(void)
{
	pthread_mutex_lock(&log_lock);
	fprintf(stderr, "---- captured log ----\n%s----\n", log_text ? log_text : "");
	pthread_mutex_unlock(&log_lock);
}

const struct ftcc_transport_ops *th_start(const char *const *env)
{
	const struct ftcc_transport_ops *ops = ftcc_transport_get("tcp");

	cr_assert_not_null(ops);
	cr_assert_eq(setenv("FTCC_SOCKET_IFNAME", "lo", 1), 0);
	cr_assert_eq(setenv("FTCC_DEBUG", "INFO", 1), 0);
	for (int i = 0; env && env[i]; i++) {
		char kv[256];
		char *eq;

		snprintf(kv, sizeof(kv), "%s", env[i]);
		eq = strchr(kv, '=');
		cr_assert_not_null(eq, "%s", env[i]);
		*eq = '\0';
		cr_assert_eq(setenv(kv, eq + 1, 1), 0, "%s", env[i]);
	}
	cr_assert_eq(ftcc_settings_load(), 0);
	ftcc_log_set_sink(capture_sink);
	th_log_reset();
	log_t0 = th_now_ms();
	cr_assert_eq(ops->init(), 0);
	th_refs++;
	return ops;
}

void th_stop(void)
{
	ftcc_transport_get("tcp")->fini();
	if (--th_refs == 0)
		cr_expect_eq(th_leak_check(), 0, "memory leaked after the last fini");
}

int __lsan_do_recoverable_leak_check(void) __attribute__((weak));

int th_leak_check(void)
{
	return __lsan_do_recoverable_leak_check ? __lsan_do_recoverable_leak_check() : 0;
}

int64_t th_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int th_threads(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;

	cr_assert_not_null(d);
	while ((e = readdir(d)))
		if (e->d_name[0] != '.')
			n++;
	closedir(d);
	return n;
}

int th_pair_open(struct th_pair *p, uint64_t comm_id, int timeout_ms)
{
	int64_t deadline = th_now_ms() + timeout_ms;
	int rc;

	memset(p, 0, sizeof(*p));
	p->ops = ftcc_transport_get("tcp");
	p->ctx = (struct ftcc_tctx){ .comm_id = comm_id, .incarnation = 0x1000 + comm_id };
	rc = p->ops->listen(&p->ctx, 0, p->handle, &p->l);
	if (rc)
		return rc;
	/* Both ends in one thread: neither call may wait for the other. */
	while (!p->s || !p->r) {
		if (!p->s && (rc = p->ops->connect(&p->ctx, 0, p->handle, &p->s)))
			return rc;
		if (!p->r && (rc = p->ops->accept(p->l, &p->r)))
			return rc;
		if (th_now_ms() > deadline)
			return -ETIMEDOUT;
		sched_yield();
	}
	return 0;
}

void th_pair_close(struct th_pair *p)
{
	if (p->s)
		cr_expect_eq(p->ops->close_conn(p->s), 0);
	if (p->r)
		cr_expect_eq(p->ops->close_conn(p->r), 0);
	if (p->l)
		cr_expect_eq(p->ops->close_listen(p->l), 0);
	p->s = p->r = NULL;
	p->l = NULL;
}

int th_wait(const struct ftcc_transport_ops *ops, struct ftcc_req *r, size_t *sizes, int timeout_ms)
{
	int64_t deadline = th_now_ms() + timeout_ms;
	int done = 0;

	for (;;) {
		int rc = ops->test(r, &done, sizes);

		if (rc)
			return rc;
		if (done)
			return 0;
		if (th_now_ms() > deadline)
			return -ETIME;
		sched_yield();
	}
}

/* splitmix64: cheap, and every word of every message differs. */
static uint64_t mix(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ull;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

static uint64_t word_at(uint64_t seed, size_t w)
{
	return mix(seed * 0x100000001b3ull + w);
}

void th_fill(void *buf, size_t size, uint64_t seed)
{
	uint8_t *b = buf;
	size_t w;

	for (w = 0; (w + 1) * 8 <= size; w++) {
		uint64_t v = word_at(seed, w);

		memcpy(b + w * 8, &v, 8);
	}
	if (w * 8 < size) {
		uint64_t v = word_at(seed, w);

		memcpy(b + w * 8, &v, size - w * 8);
	}
}

long th_check(const void *buf, size_t size, uint64_t seed)
{
	const uint8_t *b = buf;

	for (size_t w = 0; w * 8 < size; w++) {
		uint64_t v = word_at(seed, w);
		size_t n = size - w * 8 < 8 ? size - w * 8 : 8;

		if (memcmp(b + w * 8, &v, n)) {
			for (size_t k = 0; k < n; k++)
				if (b[w * 8 + k] != ((uint8_t *)&v)[k])
					return (long)(w * 8 + k);
		}
	}
	return -1;
}
