/* SPDX-License-Identifier: BSD-3-Clause */
/* Logging for every layer of ftcc.
 *
 * One sink for the whole library. By default messages at or above FTCC_DEBUG's
 * level go to stderr; the NCCL plug-in installs a sink that forwards to the
 * logger NCCL passes to init, so NCCL_DEBUG works.
 */
#ifndef FTCC_LOG_H
#define FTCC_LOG_H

#include <stdarg.h>

enum ftcc_log_level {
	FTCC_LOG_NONE = 0,
	FTCC_LOG_WARN = 1,
	FTCC_LOG_INFO = 2,
	FTCC_LOG_TRACE = 3,
};

/* A sink receives one formatted line (no trailing newline). Must be thread-safe. */
typedef void (*ftcc_log_sink_fn)(enum ftcc_log_level level, const char *file, int line,
				 const char *msg);

/* Installs @sink (NULL restores the stderr sink). Not thread-safe against concurrent logging;
 * call from init paths only. */
void ftcc_log_set_sink(ftcc_log_sink_fn sink);

/* Sets the level below which messages are dropped before formatting. */
void ftcc_log_set_level(enum ftcc_log_level level);
/* The level in effect: the higher of the set level and the floor. */
enum ftcc_log_level ftcc_log_get_level(void);
/* A level shown whatever ftcc_log_set_level() says later (the NCCL plug-in: NCCL_DEBUG while
 * NCCL's logger is attached, so that a settings reload does not hide what NCCL asked for).
 * FTCC_LOG_NONE: no floor. */
void ftcc_log_set_floor(enum ftcc_log_level level);

/* Formats and emits one line. Preserves errno. */
void ftcc_log_emit(enum ftcc_log_level level, const char *file, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#define ftcc_log(lvl, ...)                                                                         \
	do {                                                                                       \
		if ((lvl) <= ftcc_log_get_level())                                                 \
			ftcc_log_emit((lvl), __FILE__, __LINE__, __VA_ARGS__);                     \
	} while (0)
#define ftcc_warn(...) ftcc_log(FTCC_LOG_WARN, __VA_ARGS__)
#define ftcc_info(...) ftcc_log(FTCC_LOG_INFO, __VA_ARGS__)
#define ftcc_trace(...) ftcc_log(FTCC_LOG_TRACE, __VA_ARGS__)

#endif
