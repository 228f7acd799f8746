/* SPDX-License-Identifier: BSD-3-Clause */
/* Listening ports from FTCC_PORT_RANGE (common/ports.c): the range's syntax, ports taken only
 * from it, a full range refused with EADDRINUSE, a malformed one with EINVAL, an address that
 * names its port left alone, and the engine's data plane publishing a port of the range.
 */
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ftcc/dp.h"
#include "ftcc/ports.h"
#include "ftcc/settings.h"

static void reset(void)
{
	ftcc_settings_set(FTCC_SET_PORT_RANGE, "");
}

TestSuite(ports, .fini = reset);

/* A free block of @n ports on 127.0.0.1: its first port (probed by binding each once). Below
 * the kernel's ephemeral range: a port in it may be handed to another test's connect() between
 * the probe and the listener (seen: the block taken in an ASan run with two test jobs). */
static int free_block(int n)
{
	unsigned lo = 32768, hi = 0;
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
	int start;

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	cr_assert_gt(lo, 12000u, "no room below the ephemeral range (%u)", lo);
	start = 10000 + (int)((unsigned)getpid() * 97u % (lo - 11000));
	for (int k = 0, base = start; k < 400; k++, base += 97) {
		int ok = 1;

		if (base + n >= (int)lo - 100)
			base = 10000 + base % 1000;
		for (int p = base; p < base + n && ok; p++) {
			struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons(p) };
			int fd = socket(AF_INET, SOCK_STREAM, 0);

			inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
			ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
			if (fd >= 0)
				close(fd);
		}
		if (ok)
			return base;
	}
	cr_assert_fail("no free block of %d ports below %u", n, lo);
	return -1;
}

static int listener(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM, 0), rc;

	cr_assert_geq(fd, 0);
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	rc = ftcc_bind_listener(fd, (struct sockaddr *)&sa, sizeof(sa));
	if (rc) {
		close(fd);
		return rc;
	}
	cr_assert_eq(listen(fd, 4), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

Test(ports, range_syntax)
{
	int lo, hi;

	cr_expect_eq(ftcc_port_range_parse("", &lo, &hi), 0);
	cr_expect_eq(lo | hi, 0);
	cr_expect_eq(ftcc_port_range_parse("30000-30010", &lo, &hi), 0);
	cr_expect_eq(lo, 30000);
	cr_expect_eq(hi, 30010);
	cr_expect_eq(ftcc_port_range_parse("5-5", &lo, &hi), 0);
	static const char *const bad[] = { "30000", "30010-30000", "0-10",   "1-65536", "a-b",
					   "10-",   "-10",	   "10-20x", " 10-20" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(ftcc_port_range_parse(bad[i], &lo, &hi), -EINVAL, "\"%s\"", bad[i]);
}

/* Three listeners take the three ports of a three-port range, in some order; a fourth gets
 * EADDRINUSE; once one closes, its port is free for the next. */
Test(ports, listeners_take_only_ports_of_the_range)
{
	int base = free_block(3), fd[4], port[4], seen = 0;
	char range[32];

	snprintf(range, sizeof(range), "%d-%d", base, base + 2);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_PORT_RANGE, range), 0);
	for (int i = 0; i < 3; i++) {
		fd[i] = listener(&port[i]);
		cr_assert_geq(fd[i], 0, "listener %d: %s", i, strerror(-fd[i]));
		cr_expect(port[i] >= base && port[i] <= base + 2, "port %d outside %s", port[i],
			  range);
		seen |= 1 << (port[i] - base);
	}
	cr_expect_eq(seen, 7, "the three ports, each once");
	cr_expect_eq(listener(&port[3]), -EADDRINUSE);
	close(fd[1]);
	fd[3] = listener(&port[3]);
	cr_assert_geq(fd[3], 0);
	cr_expect_eq(port[3], port[1]);
	close(fd[0]);
	close(fd[2]);
	close(fd[3]);
}

Test(ports, malformed_range_refused_and_a_given_port_kept)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd = socket(AF_INET, SOCK_STREAM, 0), port, base = free_block(1);

	/* a malformed range is refused where the settings load (ftcc_settings_set) */
	cr_expect_eq(ftcc_settings_set(FTCC_SET_PORT_RANGE, "9-3"), -EINVAL);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_PORT_RANGE, "2000-2001"), 0);
	(void)port;
	/* an address with its own port binds that port, whatever the range */
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	sa.sin_port = htons((uint16_t)base);
	cr_expect_eq(ftcc_bind_listener(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(fd);
}

Test(ports, data_plane_publishes_a_port_of_the_range)
{
	int base = free_block(4);
	char range[32];
	struct dp_cfg cfg = {
		.bind_host = "127.0.0.1", .group_id = 1, .self_id = 0, .incarnation = 1
	};
	struct dp *dp = NULL;
	int port;

	snprintf(range, sizeof(range), "%d-%d", base, base + 3);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_PORT_RANGE, range), 0);
	cr_assert_eq(dp_create(&cfg, &dp), 0);
	port = atoi(strrchr(dp_addr(dp), ':') + 1);
	cr_expect(port >= base && port <= base + 3, "published %s, range %s", dp_addr(dp), range);
	dp_destroy(dp);
}
