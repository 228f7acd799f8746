/* SPDX-License-Identifier: BSD-3-Clause */
/* The sockets a test process holds (/proc/self/fd), for tests that count connections. Header
 * only: the unit tests, which link no test library, use it too.
 */
#ifndef FTCC_TESTS_FD_COUNT_H
#define FTCC_TESTS_FD_COUNT_H

#include <dirent.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* How many of this process's descriptors are sockets; -1 when /proc cannot be read. */
static inline int fdc_sockets(void)
{
	DIR *d = opendir("/proc/self/fd");
	struct dirent *e;
	char path[300], link[64];
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d))) {
		ssize_t len;

		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
		len = readlink(path, link, sizeof(link) - 1);
		if (len > 0) {
			link[len] = '\0';
			n += strncmp(link, "socket:", 7) == 0;
		}
	}
	closedir(d);
	return n;
}

#endif
