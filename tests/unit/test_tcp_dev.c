/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the TCP device layer: interface filter, discovery against this host's own
 * getifaddrs view, sysfs/hwloc topology agreement, hwloc unloading and thread binding.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ftcc/settings.h"
#include "ftcc/tcp_dev.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Sets FTCC_SOCKET_IFNAME (NULL unsets it) and reloads the settings. */
static void set_ifname(const char *value)
{
	if (value)
		cr_assert_eq(setenv("FTCC_SOCKET_IFNAME", value, 1), 0);
	else
		cr_assert_eq(unsetenv("FTCC_SOCKET_IFNAME"), 0);
	cr_assert_eq(ftcc_settings_load(), 0);
}

#define MATCH(f, n)                                                                                \
	cr_expect_eq(tcp_dev_filter_match((f), (n)), 1, "\"%s\" should pass \"%s\"", n, f)
#define NOMATCH(f, n)                                                                              \
	cr_expect_eq(tcp_dev_filter_match((f), (n)), 0, "\"%s\" should not pass \"%s\"", n, f)

Test(tcp_dev_filter, prefix)
{
	MATCH("eth", "eth0");
	MATCH("eth", "eth10");
	MATCH("eth", "eth");
	MATCH("eth0", "eth0");
	MATCH("eth0", "eth01");
	NOMATCH("eth", "veth0");
	NOMATCH("eth", "ib0");
	NOMATCH("eth0", "eth");
	NOMATCH("ETH", "eth0");
	MATCH("lo", "lo");
}

Test(tcp_dev_filter, exact)
{
	MATCH("=eth0", "eth0");
	NOMATCH("=eth0", "eth01");
	NOMATCH("=eth0", "eth");
	NOMATCH("=eth", "eth0");
	MATCH("=lo", "lo");
}

Test(tcp_dev_filter, exclude)
{
	NOMATCH("^eth", "eth0");
	NOMATCH("^eth", "eth");
	MATCH("^eth", "ib0");
	MATCH("^eth", "veth0");
	MATCH("^eth0", "eth1");
	NOMATCH("^eth0", "eth01");
}

Test(tcp_dev_filter, exclude_exact)
{
	NOMATCH("^=eth0", "eth0");
	MATCH("^=eth0", "eth01");
	MATCH("^=eth0", "eth");
	MATCH("^=eth0", "ib0");
	/* '=' before '^' is not the exclude marker: it is an exact name "^eth0". */
	MATCH("=^eth0", "^eth0");
	NOMATCH("=^eth0", "eth0");
}

Test(tcp_dev_filter, lists)
{
	MATCH("eth,ib", "eth0");
	MATCH("eth,ib", "ib3");
	NOMATCH("eth,ib", "lo");
	MATCH("=eth0,ib1", "eth0");
	MATCH("=eth0,ib1", "ib1");
	NOMATCH("=eth0,ib1", "ib10");
	NOMATCH("=eth0,ib1", "eth1");
	NOMATCH("^docker,lo", "lo");
	NOMATCH("^docker,lo", "docker0");
	MATCH("^docker,lo", "eth0");
	NOMATCH("^=eth0,ib1", "ib1");
	MATCH("^=eth0,ib1", "ib10");
}

Test(tcp_dev_filter, blanks_and_empty_entries)
{
	MATCH(" eth0 , ib ", "eth0");
	MATCH(" eth0 , ib ", "ib0");
	NOMATCH(" eth0 , ib ", "lo");
	MATCH("eth,,ib,", "ib0");
	MATCH(",eth", "eth2");
	NOMATCH("eth,,ib,", "lo");
	NOMATCH("^ eth ,lo", "eth0");
	MATCH("^ eth ,lo", "ib0");
	MATCH(" ^=eth0", "eth1");
	NOMATCH(" ^=eth0", "eth0");
}

Test(tcp_dev_filter, default_when_empty)
{
	const char *filters[] = { NULL, "", "   ", "\t" };

	for (size_t i = 0; i < sizeof(filters) / sizeof(filters[0]); i++) {
		const char *f = filters[i];

		cr_expect_eq(tcp_dev_filter_match(f, "lo"), 0);
		cr_expect_eq(tcp_dev_filter_match(f, "docker0"), 0);
		cr_expect_eq(tcp_dev_filter_match(f, "eth0"), 1);
		cr_expect_eq(tcp_dev_filter_match(f, "ib0"), 1);
		cr_expect_eq(tcp_dev_filter_match(f, "enp1s0f0"), 1);
	}
}

Test(tcp_dev_filter, no_names)
{
	MATCH("^", "lo");
	MATCH("^", "eth0");
	MATCH("^=", "eth0");
	NOMATCH("=", "eth0");
	NOMATCH(",", "eth0");
	NOMATCH(" , ", "lo");
}

/* Names of this host's interfaces that discovery may use, read independently of the code
 * under test: up, running (or loopback), with an IPv4 or non-link-local IPv6 address. */
struct name_set {
	char names[64][IF_NAMESIZE];
	int n;
};

static int name_set_has(const struct name_set *s, const char *name)
{
	for (int i = 0; i < s->n; i++) {
		if (strcmp(s->names[i], name) == 0)
			return 1;
	}
	return 0;
}

static void usable_names(struct name_set *s, int with_default_excluded)
{
	struct ifaddrs *ifs, *ifa;

	s->n = 0;
	cr_assert_eq(getifaddrs(&ifs), 0);
	for (ifa = ifs; ifa; ifa = ifa->ifa_next) {
		int fam = ifa->ifa_addr ? ifa->ifa_addr->sa_family : AF_UNSPEC;
		const struct sockaddr_in6 *s6 = (const void *)ifa->ifa_addr;
		int up = (ifa->ifa_flags & IFF_UP) &&
			 (ifa->ifa_flags & (IFF_RUNNING | IFF_LOOPBACK));

		if (!up || (fam != AF_INET && fam != AF_INET6))
			continue;
		if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr))
			continue;
		if (!with_default_excluded && (strncmp(ifa->ifa_name, "lo", 2) == 0 ||
					       strncmp(ifa->ifa_name, "docker", 6) == 0))
			continue;
		if (!name_set_has(s, ifa->ifa_name) && s->n < 64)
			snprintf(s->names[s->n++], IF_NAMESIZE, "%s", ifa->ifa_name);
	}
	freeifaddrs(ifs);
}

Test(tcp_dev_discover, lo_only)
{
	struct tcp_dev devs[TCP_DEV_MAX];
	const struct sockaddr_in *sin = (const struct sockaddr_in *)&devs[0].addr;
	int n;

	set_ifname("lo");
	n = tcp_dev_discover(devs, TCP_DEV_MAX);
	cr_assert_eq(n, 1);
	cr_assert_str_eq(devs[0].name, "lo");
	cr_assert_eq(devs[0].addr.ss_family, AF_INET);
	cr_assert_eq(devs[0].addr_len, sizeof(struct sockaddr_in));
	cr_assert_eq(sin->sin_addr.s_addr, htonl(INADDR_LOOPBACK));
	cr_assert_eq(sin->sin_port, 0);
	cr_assert_eq(devs[0].speed_mbps, 10000);
}

Test(tcp_dev_discover, default_filter)
{
	struct tcp_dev devs[TCP_DEV_MAX], again[TCP_DEV_MAX];
	struct name_set want;
	int n, expect;

	set_ifname(NULL);
	usable_names(&want, 0);
	n = tcp_dev_discover(devs, TCP_DEV_MAX);
	if (want.n == 0) {
		/* Nothing but lo is up: the NCCL-style fallback. */
		cr_assert_eq(n, 1);
		cr_assert_str_eq(devs[0].name, "lo");
		return;
	}
	expect = want.n < TCP_DEV_MAX ? want.n : TCP_DEV_MAX;
	cr_assert_eq(n, expect, "found %d, this host has %d usable non-lo interfaces", n, want.n);
	for (int i = 0; i < n; i++) {
		cr_expect(name_set_has(&want, devs[i].name), "unexpected %s", devs[i].name);
		cr_expect_neq(strcmp(devs[i].name, "lo"), 0);
		cr_expect_gt(devs[i].speed_mbps, 0);
		if (i > 0)
			cr_expect_lt(strcmp(devs[i - 1].name, devs[i].name), 0, "not sorted");
	}
	cr_assert_eq(tcp_dev_discover(again, TCP_DEV_MAX), n);
	for (int i = 0; i < n; i++)
		cr_expect_str_eq(again[i].name, devs[i].name, "order changed between calls");
}

Test(tcp_dev_discover, bogus_filter_finds_nothing)
{
	struct tcp_dev devs[TCP_DEV_MAX];

	set_ifname("nosuchif");
	cr_assert_eq(tcp_dev_discover(devs, TCP_DEV_MAX), 0);
	set_ifname("=lo0");
	cr_assert_eq(tcp_dev_discover(devs, TCP_DEV_MAX), 0);
}

Test(tcp_dev_discover, bounds)
{
	struct tcp_dev devs[TCP_DEV_MAX];

	set_ifname("^nosuchif");
	cr_assert_eq(tcp_dev_discover(NULL, TCP_DEV_MAX), -EINVAL);
	cr_assert_eq(tcp_dev_discover(devs, 0), -EINVAL);
	cr_assert_eq(tcp_dev_discover(devs, 1), 1);
}

Test(tcp_dev_topology, lo_is_virtual)
{
	struct tcp_dev d = { .name = "lo" };

	tcp_dev_fill_topology(&d);
	cr_assert_eq(d.speed_mbps, 10000);
	cr_assert_str_eq(d.pci_path, "");
	cr_assert_eq(d.numa_node, -1);
	cr_assert_str_eq(d.cpulist, "");
	cr_assert_eq(d.from_hwloc, 0);
}

Test(tcp_dev_topology, hwloc_agrees_with_sysfs)
{
	struct tcp_dev devs[TCP_DEV_MAX];
	int n, checked = 0;

	if (!tcp_dev_hwloc_available()) {
		struct tcp_dev d = { .name = "lo" };

		cr_assert_eq(tcp_dev_fill_topology_hwloc(&d), -ENOSYS);
		cr_skip_test("libhwloc not available: only the sysfs path is in use");
	}
	set_ifname("^nosuchif");
	n = tcp_dev_discover(devs, TCP_DEV_MAX);
	cr_assert_gt(n, 0);
	for (int i = 0; i < n; i++) {
		struct tcp_dev s = devs[i], h = devs[i];
		int err;

		tcp_dev_fill_topology_sysfs(&s);
		cr_assert_eq(s.from_hwloc, 0);
		err = tcp_dev_fill_topology_hwloc(&h);
		if (s.pci_path[0] == '\0') {
			cr_expect_eq(err, -ENOENT, "%s: hwloc knows a virtual device", s.name);
			continue;
		}
		cr_assert_eq(err, 0, "%s (%s): hwloc lookup failed", s.name, s.pci_path);
		cr_expect_eq(h.from_hwloc, 1);
		cr_expect_str_eq(h.pci_path, s.pci_path, "%s", s.name);
		cr_expect_eq(h.numa_node, s.numa_node, "%s", s.name);
		cr_expect_str_eq(h.pci_path, devs[i].pci_path, "discover did not use hwloc");
		checked++;
	}
	cr_log_info("compared %d PCI-backed devices", checked);
}

/* Whether this process maps libhwloc. */
static int hwloc_mapped(void)
{
	char line[512];
	int found = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	cr_assert_not_null(f);
	while (fgets(line, sizeof(line), f))
		found |= strstr(line, "libhwloc") != NULL;
	fclose(f);
	return found;
}

Test(tcp_dev_topology, release_unloads_hwloc)
{
	if (!tcp_dev_hwloc_available())
		cr_skip_test("libhwloc not available");
	cr_assert(hwloc_mapped());
	tcp_dev_release();
	cr_assert_not(hwloc_mapped(), "libhwloc still mapped after tcp_dev_release");
	cr_assert(tcp_dev_hwloc_available(), "hwloc does not load again after release");
	tcp_dev_release();
	tcp_dev_release();
	cr_assert_not(hwloc_mapped());
}

/* The calling thread's CPU set. */
static cpu_set_t current_affinity(void)
{
	cpu_set_t set;

	cr_assert_eq(pthread_getaffinity_np(pthread_self(), sizeof(set), &set), 0);
	return set;
}

Test(tcp_dev_bind, valid_lists)
{
	cpu_set_t orig = current_affinity(), now;
	char list[64];
	int cpu = 0;

	while (!CPU_ISSET(cpu, &orig))
		cpu++;
	snprintf(list, sizeof(list), "%d", cpu);
	cr_assert_eq(tcp_dev_bind_thread(list), 0);
	now = current_affinity();
	cr_assert_eq(CPU_COUNT(&now), 1);
	cr_assert(CPU_ISSET(cpu, &now));

	snprintf(list, sizeof(list), " %d-%d , %d\n", cpu, cpu, cpu);
	cr_assert_eq(tcp_dev_bind_thread(list), 0);
	now = current_affinity();
	cr_assert_eq(CPU_COUNT(&now), 1);

	snprintf(list, sizeof(list), "0-%d", CPU_SETSIZE - 1);
	cr_assert_eq(tcp_dev_bind_thread(list), 0);
	now = current_affinity();
	cr_assert(CPU_EQUAL(&now, &orig), "binding to every CPU should restore the full set");
}

Test(tcp_dev_bind, empty_is_noop)
{
	cpu_set_t orig = current_affinity(), now;

	cr_assert_eq(tcp_dev_bind_thread(""), 0);
	cr_assert_eq(tcp_dev_bind_thread(NULL), 0);
	cr_assert_eq(tcp_dev_bind_thread(" \n"), 0);
	now = current_affinity();
	cr_assert(CPU_EQUAL(&now, &orig));
}

Test(tcp_dev_bind, garbage_rejected)
{
	const char *bad[] = { "abc", "1-",  "-1",    "3-1",	 "1,,2", "1,", ",1",
			      "0x1", "1 2", "1-2-3", "99999999", "4096", "0;1" };
	cpu_set_t orig = current_affinity(), now;
	char none[32];

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_expect_eq(tcp_dev_bind_thread(bad[i]), -EINVAL, "\"%s\" accepted", bad[i]);
	/* Well formed, but no CPU of it is ours: the kernel refuses. */
	snprintf(none, sizeof(none), "%d", CPU_SETSIZE - 1);
	if (!CPU_ISSET(CPU_SETSIZE - 1, &orig))
		cr_expect_lt(tcp_dev_bind_thread(none), 0);
	now = current_affinity();
	cr_assert(CPU_EQUAL(&now, &orig), "a rejected list changed the affinity");
}
