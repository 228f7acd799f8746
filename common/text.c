/* SPDX-License-Identifier: BSD-3-Clause */
/* Building text in a fixed buffer (include/ftcc/text.h). */
#include "ftcc/text.h"

#include <stdarg.h>
#include <stdio.h>

void ftcc_appendf(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (len == 0 || *at + 1 >= len)
		return;
	va_start(ap, fmt);
	n = vsnprintf(buf + *at, len - *at, fmt, ap);
	va_end(ap);
	if (n > 0)
		*at = *at + (size_t)n < len ? *at + (size_t)n : len - 1;
}
