/* SPDX-License-Identifier: BSD-3-Clause */
/* Building text in a fixed buffer: status pages, log details, test descriptions. */
#ifndef FTCC_TEXT_H
#define FTCC_TEXT_H

#include <stddef.h>

/* Appends printf text to @buf at *@at, never past @len - 1 bytes, always NUL-terminated (when
 * @len > 0); *@at moves to the end of what fits. Text that does not fit is cut. */
void ftcc_appendf(char *buf, size_t len, size_t *at, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

#endif
