/* SPDX-License-Identifier: BSD-3-Clause */
/* The library's one log sink and level.
 *
 * Owns the current level, the installed sink and the default stderr sink, which prints
 * "host:pid:tid ftcc LEVEL file:line message" so lines interleave readably with NCCL's own.
 */
#define _GNU_SOURCE
#include "ftcc/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* Longest message handed to a sink; longer ones are cut and end in "...". */
#define LOG_MSG_MAX 1024
#define LOG_HOST_MAX 64

static _Atomic int log_level = FTCC_LOG_WARN;
static _Atomic int log_floor = FTCC_LOG_NONE;
static _Atomic(ftcc_log_sink_fn) log_sink;

static pthread_once_t log_host_once = PTHREAD_ONCE_INIT;
static char log_host[LOG_HOST_MAX];

static const char *const log_level_names[] = {
	[FTCC_LOG_NONE] = "NONE",
	[FTCC_LOG_WARN] = "WARN",
	[FTCC_LOG_INFO] = "INFO",
	[FTCC_LOG_TRACE] = "TRACE",
};

/* Short host name (up to the first dot), as NCCL prints it. */
static void log_host_init(void)
{
	if (gethostname(log_host, sizeof(log_host)) != 0) {
		snprintf(log_host, sizeof(log_host), "unknown");
		return;
	}
	log_host[sizeof(log_host) - 1] = '\0';
	char *dot = strchr(log_host, '.');
	if (dot)
		*dot = '\0';
}

static const char *log_level_name(enum ftcc_log_level level)
{
	if ((int)level < FTCC_LOG_NONE || level > FTCC_LOG_TRACE)
		return "?";
	return log_level_names[level];
}

/* Writes all of @len bytes of @buf to fd 2 in as few write() calls as the kernel allows, so
 * that concurrent lines from several threads or processes do not interleave mid-line. */
static void log_write_all(const char *buf, size_t len)
{
	while (len > 0) {
		ssize_t n = write(STDERR_FILENO, buf, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		buf += n;
		len -= (size_t)n;
	}
}

/* The default sink. Pid is read on every call because ranks are often forked after the first
 * log line. */
static void log_stderr_sink(enum ftcc_log_level level, const char *file, int line, const char *msg)
{
	char out[LOG_MSG_MAX + LOG_HOST_MAX + 128];

	pthread_once(&log_host_once, log_host_init);
	int n = snprintf(out, sizeof(out), "%s:%d:%d ftcc %s %s:%d %s\n", log_host, (int)getpid(),
			 (int)gettid(), log_level_name(level), file, line, msg);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(out)) {
		n = (int)sizeof(out) - 1;
		out[n - 1] = '\n';
	}
	log_write_all(out, (size_t)n);
}

void ftcc_log_set_sink(ftcc_log_sink_fn sink)
{
	atomic_store_explicit(&log_sink, sink, memory_order_release);
}

void ftcc_log_set_level(enum ftcc_log_level level)
{
	if ((int)level < FTCC_LOG_NONE)
		level = FTCC_LOG_NONE;
	if (level > FTCC_LOG_TRACE)
		level = FTCC_LOG_TRACE;
	atomic_store_explicit(&log_level, (int)level, memory_order_relaxed);
}

void ftcc_log_set_floor(enum ftcc_log_level level)
{
	if ((int)level < FTCC_LOG_NONE)
		level = FTCC_LOG_NONE;
	if (level > FTCC_LOG_TRACE)
		level = FTCC_LOG_TRACE;
	atomic_store_explicit(&log_floor, (int)level, memory_order_relaxed);
}

enum ftcc_log_level ftcc_log_get_level(void)
{
	int level = atomic_load_explicit(&log_level, memory_order_relaxed);
	int floor = atomic_load_explicit(&log_floor, memory_order_relaxed);

	return (enum ftcc_log_level)(level > floor ? level : floor);
}

/* __FILE__ may be an absolute build path; the base name is what a reader needs. */
static const char *log_basename(const char *file)
{
	if (!file)
		return "?";
	const char *slash = strrchr(file, '/');
	return slash ? slash + 1 : file;
}

void ftcc_log_emit(enum ftcc_log_level level, const char *file, int line, const char *fmt, ...)
{
	int saved_errno = errno;
	char msg[LOG_MSG_MAX];
	va_list ap;

	if (level == FTCC_LOG_NONE || level > ftcc_log_get_level())
		goto out;

	va_start(ap, fmt);
	int n = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (n < 0)
		goto out;
	if ((size_t)n >= sizeof(msg))
		memcpy(msg + sizeof(msg) - 4, "...", 4);
	/* Drop one trailing newline so sinks always get a bare line. */
	size_t len = strlen(msg);
	if (len > 0 && msg[len - 1] == '\n')
		msg[len - 1] = '\0';

	ftcc_log_sink_fn sink = atomic_load_explicit(&log_sink, memory_order_acquire);
	if (!sink)
		sink = log_stderr_sink;
	/* Restore errno before the sink too, so a sink that formats %m sees the caller's error. */
	errno = saved_errno;
	sink(level, log_basename(file), line, msg);
out:
	errno = saved_errno;
}
