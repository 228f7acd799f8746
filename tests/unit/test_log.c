/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the logger: level filtering, what a sink receives, the stderr line format,
 * errno preservation and whole lines under concurrent logging.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc/log.h"

/* What the capture sink saw last; each Criterion test runs in its own process. */
static struct {
	int calls;
	enum ftcc_log_level level;
	char file[256];
	int line;
	char msg[2048];
} seen;

static void capture_sink(enum ftcc_log_level level, const char *file, int line, const char *msg)
{
	seen.calls++;
	seen.level = level;
	snprintf(seen.file, sizeof(seen.file), "%s", file);
	seen.line = line;
	snprintf(seen.msg, sizeof(seen.msg), "%s", msg);
	errno = EBADF; /* a careless sink; the caller's errno must survive it */
}

static void setup(void)
{
	memset(&seen, 0, sizeof(seen));
	ftcc_log_set_sink(capture_sink);
	ftcc_log_set_level(FTCC_LOG_WARN);
}

TestSuite(log, .init = setup);

Test(log, level_filtering)
{
	ftcc_info("dropped");
	ftcc_trace("dropped");
	cr_assert_eq(seen.calls, 0);
	ftcc_warn("kept");
	cr_assert_eq(seen.calls, 1);
	cr_assert_eq(seen.level, FTCC_LOG_WARN);

	ftcc_log_set_level(FTCC_LOG_TRACE);
	ftcc_trace("now kept");
	cr_assert_eq(seen.calls, 2);
	cr_assert_eq(seen.level, FTCC_LOG_TRACE);

	ftcc_log_set_level(FTCC_LOG_NONE);
	ftcc_warn("dropped");
	cr_assert_eq(seen.calls, 2);
	/* Calling emit directly filters the same way as the macros. */
	ftcc_log_emit(FTCC_LOG_WARN, __FILE__, __LINE__, "dropped");
	ftcc_log_set_level(FTCC_LOG_TRACE);
	ftcc_log_emit(FTCC_LOG_NONE, __FILE__, __LINE__, "never");
	cr_assert_eq(seen.calls, 2);
}

Test(log, level_clamped)
{
	ftcc_log_set_level((enum ftcc_log_level)42);
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_TRACE);
	ftcc_log_set_level((enum ftcc_log_level) - 3);
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_NONE);
}

/* A floor (NCCL_DEBUG behind NCCL's logger) holds whatever level is set later (a communicator
 * reloading FTCC_DEBUG), and a higher set level still wins. */
Test(log, floor_holds_against_a_lower_level)
{
	ftcc_log_set_floor(FTCC_LOG_INFO);
	ftcc_log_set_level(FTCC_LOG_WARN);
	cr_expect_eq(ftcc_log_get_level(), FTCC_LOG_INFO);
	ftcc_info("kept");
	cr_expect_eq(seen.calls, 1);
	ftcc_log_set_level(FTCC_LOG_TRACE);
	cr_expect_eq(ftcc_log_get_level(), FTCC_LOG_TRACE);
	ftcc_log_set_level(FTCC_LOG_WARN);
	ftcc_log_set_floor(FTCC_LOG_NONE);
	cr_expect_eq(ftcc_log_get_level(), FTCC_LOG_WARN);
	ftcc_info("dropped");
	cr_expect_eq(seen.calls, 1);
	ftcc_log_set_floor((enum ftcc_log_level)42);
	cr_expect_eq(ftcc_log_get_level(), FTCC_LOG_TRACE);
	ftcc_log_set_floor(FTCC_LOG_NONE);
}

Test(log, sink_gets_formatted_text)
{
	int line = __LINE__ + 1;
	ftcc_warn("peer %s lost after %d ms", "node7", 2000);
	cr_assert_eq(seen.calls, 1);
	cr_assert_str_eq(seen.msg, "peer node7 lost after 2000 ms");
	cr_assert_str_eq(seen.file, "test_log.c"); /* base name, never the build path */
	cr_assert_eq(seen.line, line);

	ftcc_warn("one newline is dropped\n");
	cr_assert_str_eq(seen.msg, "one newline is dropped");
}

Test(log, long_message_truncated)
{
	char big[4000];
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	ftcc_warn("%s", big);
	size_t len = strlen(seen.msg);
	cr_assert(len > 512 && len < sizeof(big) - 1, "len %zu", len);
	cr_assert_str_eq(seen.msg + len - 3, "...");
}

Test(log, errno_preserved)
{
	errno = ETIMEDOUT;
	ftcc_warn("with sink");
	cr_assert_eq(errno, ETIMEDOUT);
	errno = ECONNRESET;
	ftcc_info("filtered");
	cr_assert_eq(errno, ECONNRESET);

	errno = ENOENT;
	ftcc_warn("error: %m");
	cr_assert_eq(errno, ENOENT);
	cr_assert(strstr(seen.msg, strerror(ENOENT)), "%s", seen.msg);
}

/* Points fd 2 at a fresh temporary file; returns the file to read back. */
static FILE *capture_stderr(void)
{
	FILE *f = tmpfile();
	cr_assert_not_null(f);
	fflush(stderr);
	cr_assert_geq(dup2(fileno(f), STDERR_FILENO), 0);
	return f;
}

static char *read_all(FILE *f)
{
	static char buf[1 << 20];
	size_t n;

	fflush(f);
	rewind(f);
	n = fread(buf, 1, sizeof(buf) - 1, f);
	buf[n] = '\0';
	return buf;
}

Test(log, stderr_format)
{
	FILE *f = capture_stderr();
	char host[64], want[256];

	ftcc_log_set_sink(NULL);
	gethostname(host, sizeof(host));
	host[sizeof(host) - 1] = '\0';
	char *dot = strchr(host, '.');
	if (dot)
		*dot = '\0';
	int line = __LINE__ + 1;
	ftcc_warn("hello %d", 42);

	snprintf(want, sizeof(want), "%s:%d:%d ftcc WARN test_log.c:%d hello 42\n", host,
		 (int)getpid(), (int)gettid(), line);
	cr_assert_str_eq(read_all(f), want);
	cr_assert_eq(seen.calls, 0);
}

#define LOG_THREADS 4
#define LOG_LINES 500

static void *log_worker(void *arg)
{
	long id = (long)arg;
	for (int i = 0; i < LOG_LINES; i++)
		ftcc_warn("worker %ld line %d %s", id, i, "padding-padding-padding-padding");
	return NULL;
}

/* Lines written at the same time by several threads come out whole. */
Test(log, concurrent_lines_whole)
{
	FILE *f = capture_stderr();
	pthread_t th[LOG_THREADS];

	ftcc_log_set_sink(NULL);
	for (long i = 0; i < LOG_THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, log_worker, (void *)i), 0);
	for (int i = 0; i < LOG_THREADS; i++)
		pthread_join(th[i], NULL);

	int lines = 0;
	for (char *save, *l = strtok_r(read_all(f), "\n", &save); l;
	     l = strtok_r(NULL, "\n", &save)) {
		long id;
		int n;
		const char *body = strstr(l, " ftcc WARN test_log.c:");
		cr_assert_not_null(body, "%s", l);
		body = strstr(body, " worker ");
		cr_assert_not_null(body, "%s", l);
		cr_assert_eq(sscanf(body, " worker %ld line %d padding-padding-padding-padding",
				    &id, &n),
			     2, "%s", l);
		lines++;
	}
	cr_assert_eq(lines, LOG_THREADS * LOG_LINES);
}
