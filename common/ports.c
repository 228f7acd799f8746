/* SPDX-License-Identifier: BSD-3-Clause */
/* Listening ports from FTCC_PORT_RANGE (include/ftcc/ports.h). */
#define _GNU_SOURCE
#include "ftcc/ports.h"

#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ftcc/sys.h"

int ftcc_port_range_parse(const char *text, int *lo, int *hi)
{
	char *end;
	long a, b;

	*lo = *hi = 0;
	if (!text || !*text) {
		return 0;
	}
	errno = 0;
	if (!isdigit((unsigned char)text[0])) {
		return -EINVAL;
	}
	a = strtol(text, &end, 10);
	if (errno || *end != '-' || !isdigit((unsigned char)end[1])) {
		return -EINVAL;
	}
	text = end + 1;
	b = strtol(text, &end, 10);
	if (errno || *end || a < 1 || b > 65535 || a > b) {
		return -EINVAL;
	}
	*lo = (int)a;
	*hi = (int)b;
	return 0;
}

/* The port of @sa, and a copy of @sa with port @port in @out. */
static int port_of(const struct sockaddr *sa, socklen_t len)
{
	if (sa->sa_family == AF_INET && len >= sizeof(struct sockaddr_in)) {
		return ntohs(((const struct sockaddr_in *)sa)->sin_port);
	}
	if (sa->sa_family == AF_INET6 && len >= sizeof(struct sockaddr_in6)) {
		return ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
	}
	return -1;
}

static void set_port(struct sockaddr_storage *ss, int port)
{
	if (ss->ss_family == AF_INET) {
		((struct sockaddr_in *)ss)->sin_port = htons((uint16_t)port);
	} else {
		((struct sockaddr_in6 *)ss)->sin6_port = htons((uint16_t)port);
	}
}

int ftcc_bind_listener(int fd, const struct sockaddr *sa, socklen_t len)
{
	static atomic_int warned;
	const char *range = ftcc_setting_str(FTCC_SET_PORT_RANGE);
	struct sockaddr_storage ss;
	unsigned start = 0;
	int lo, hi;

	if (port_of(sa, len) != 0 || !range[0] || len > sizeof(ss)) {
		return ftcc_sys_bind(fd, sa, len) < 0 ? -errno : 0;
	}
	if (ftcc_port_range_parse(range, &lo, &hi)) {
		if (!atomic_exchange(&warned, 1)) {
			ftcc_warn("FTCC_PORT_RANGE=%s is not LO-HI with 1 <= LO <= HI <= 65535",
				  range);
		}
		return -EINVAL;
	}
	memcpy(&ss, sa, len);
	if (getrandom(&start, sizeof(start), GRND_NONBLOCK) != sizeof(start)) {
		start = 0;
	}
	for (int k = 0; k <= hi - lo; k++) {
		int port = lo + (int)((start + (unsigned)k) % (unsigned)(hi - lo + 1));

		set_port(&ss, port);
		if (ftcc_sys_bind(fd, (struct sockaddr *)&ss, len) == 0) {
			return 0;
		}
		if (errno != EADDRINUSE && errno != EACCES) {
			return -errno;
		}
	}
	ftcc_warn("FTCC_PORT_RANGE=%s: every port is taken", range);
	return -EADDRINUSE;
}
