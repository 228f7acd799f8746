/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP devices: interface filter, discovery, sysfs topology and thread binding.
 *
 * Owns the NCCL_SOCKET_IFNAME-style filter and the sysfs side of topology; the hwloc side
 * lives in hwloc_dl.c.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ftcc/tcp_dev.h"

#include "ftcc/log.h"
#include "ftcc/settings.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* NCCL's speed for a link that does not report one. */
#define DEV_DEFAULT_SPEED 10000
/* What an empty FTCC_SOCKET_IFNAME means (NCCL's default minus its "ib" preference). */
#define DEV_DEFAULT_FILTER "^lo,docker"

/* Whether @name matches entry [@ent, @ent+@len) of a filter list. */
static int dev_entry_match(const char *ent, size_t len, const char *name, int exact)
{
	if (exact)
		return strlen(name) == len && strncmp(name, ent, len) == 0;
	return strncmp(name, ent, len) == 0;
}

int tcp_dev_filter_match(const char *filter, const char *ifname)
{
	int exclude = 0, exact = 0, hit = 0;
	const char *p;

	while (filter && isspace((unsigned char)*filter))
		filter++;
	if (!filter || !*filter)
		filter = DEV_DEFAULT_FILTER;
	if (*filter == '^') {
		exclude = 1;
		filter++;
	}
	if (*filter == '=') {
		exact = 1;
		filter++;
	}
	for (p = filter; *p && !hit;) {
		const char *end;

		while (isspace((unsigned char)*p))
			p++;
		end = p + strcspn(p, ",");
		/* Trim trailing blanks; an empty entry (",,", a final ",") names nothing. */
		const char *last = end;
		while (last > p && isspace((unsigned char)last[-1]))
			last--;
		if (last > p)
			hit = dev_entry_match(p, (size_t)(last - p), ifname, exact);
		p = *end ? end + 1 : end;
	}
	return hit != exclude;
}

/* Reads the first line of @path into @buf without its newline. 0, or -1 when the file is
 * unreadable, empty or longer than @len - 1 (a cut value would mislead). */
static int dev_read_line(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");
	size_t n;

	if (!f)
		return -1;
	if (!fgets(buf, (int)len, f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	n = strcspn(buf, "\n");
	if (n == strlen(buf) && n == len - 1) {
		buf[0] = '\0';
		return -1;
	}
	buf[n] = '\0';
	return n ? 0 : -1;
}

/* Parses a whole decimal int; @def when @s is not one. */
static int dev_parse_int(const char *s, int def)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(s, &end, 10);
	if (errno || end == s || *end || v < INT_MIN || v > INT_MAX)
		return def;
	return (int)v;
}

/* Reads an integer file; @def when unreadable or not a number. */
static int dev_read_int(const char *path, int def)
{
	char buf[32];

	return dev_read_line(path, buf, sizeof(buf)) ? def : dev_parse_int(buf, def);
}

/* The only online NUMA node, or -1 when there are several (or sysfs says nothing). */
static int dev_single_numa_node(void)
{
	char buf[64];

	if (dev_read_line("/sys/devices/system/node/online", buf, sizeof(buf)) ||
	    strpbrk(buf, "-,"))
		return -1;
	return dev_parse_int(buf, -1);
}

/* Fills numa_node and cpulist from the nearest directory at or above @devpath that has a
 * numa_node file: a virtio NIC's "device" is a virtio node whose PCI parent holds them. */
static void dev_sysfs_locality(struct tcp_dev *dev, const char *devpath)
{
	char dir[PATH_MAX], file[PATH_MAX + 32], *slash;

	snprintf(dir, sizeof(dir), "%s", devpath);
	while (strncmp(dir, "/sys/devices/", 13) == 0) {
		snprintf(file, sizeof(file), "%s/numa_node", dir);
		if (access(file, R_OK) == 0)
			break;
		slash = strrchr(dir, '/');
		*slash = '\0';
	}
	if (strncmp(dir, "/sys/devices/", 13) != 0)
		return;
	dev->numa_node = dev_read_int(file, -1);
	/* -1 on a one-node machine still means that node, as hwloc reports it. */
	if (dev->numa_node < 0)
		dev->numa_node = dev_single_numa_node();
	snprintf(file, sizeof(file), "%s/local_cpulist", dir);
	if (dev_read_line(file, dev->cpulist, sizeof(dev->cpulist)))
		dev->cpulist[0] = '\0';
}

/* Link speed in Mb/s from sysfs; NCCL's 10000 when unknown. */
static int dev_sysfs_speed(const char *name)
{
	char path[128];
	int speed;

	snprintf(path, sizeof(path), "/sys/class/net/%s/speed", name);
	speed = dev_read_int(path, -1);
	return speed > 0 ? speed : DEV_DEFAULT_SPEED;
}

void tcp_dev_fill_topology_sysfs(struct tcp_dev *dev)
{
	char path[128], *real;

	dev->speed_mbps = dev_sysfs_speed(dev->name);
	dev->pci_path[0] = '\0';
	dev->numa_node = -1;
	dev->cpulist[0] = '\0';
	dev->from_hwloc = 0;
	snprintf(path, sizeof(path), "/sys/class/net/%s/device", dev->name);
	real = realpath(path, NULL);
	if (!real)
		return; /* virtual interface */
	if (strlen(real) < sizeof(dev->pci_path))
		strcpy(dev->pci_path, real);
	else
		ftcc_warn("tcp: %s: device path too long: %s", dev->name, real);
	dev_sysfs_locality(dev, real);
	free(real);
}

void tcp_dev_fill_topology(struct tcp_dev *dev)
{
	if (tcp_dev_fill_topology_hwloc(dev) == 0)
		dev->speed_mbps = dev_sysfs_speed(dev->name);
	else
		tcp_dev_fill_topology_sysfs(dev);
}

/* One interface found while scanning, before the filter's survivors are sorted. */
struct dev_cand {
	char name[sizeof(((struct tcp_dev *)0)->name)];
	struct sockaddr_storage addr;
	socklen_t addr_len;
};

/* The address length of @ifa when it is usable: up, running (loopback need not say so), and
 * IPv4 or non-link-local IPv6. 0 otherwise. */
static socklen_t dev_usable_addr(const struct ifaddrs *ifa)
{
	const struct sockaddr_in6 *s6;

	if (!ifa->ifa_addr || !ifa->ifa_name || !(ifa->ifa_flags & IFF_UP))
		return 0;
	if (!(ifa->ifa_flags & (IFF_RUNNING | IFF_LOOPBACK)))
		return 0;
	if (ifa->ifa_addr->sa_family == AF_INET)
		return sizeof(struct sockaddr_in);
	if (ifa->ifa_addr->sa_family != AF_INET6)
		return 0;
	s6 = (const struct sockaddr_in6 *)(const void *)ifa->ifa_addr;
	return IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr) ? 0 : sizeof(struct sockaddr_in6);
}

/* Records @ifa in @c[0..*n): a new name is appended; a known one keeps its first IPv4
 * address, and trades an IPv6 one for the first IPv4 one. */
static void dev_cand_add(struct dev_cand *c, int *n, const struct ifaddrs *ifa, socklen_t len)
{
	int i = 0;

	while (i < *n && strcmp(c[i].name, ifa->ifa_name) != 0)
		i++;
	if (i < *n) {
		if (c[i].addr.ss_family == AF_INET || ifa->ifa_addr->sa_family != AF_INET)
			return;
	} else {
		if (strlen(ifa->ifa_name) >= sizeof(c[i].name))
			return;
		strcpy(c[i].name, ifa->ifa_name);
		(*n)++;
	}
	memset(&c[i].addr, 0, sizeof(c[i].addr));
	memcpy(&c[i].addr, ifa->ifa_addr, len);
	c[i].addr_len = len;
	if (len == sizeof(struct sockaddr_in))
		((struct sockaddr_in *)&c[i].addr)->sin_port = 0;
	else
		((struct sockaddr_in6 *)&c[i].addr)->sin6_port = 0;
}

static int dev_cand_cmp(const void *a, const void *b)
{
	return strcmp(((const struct dev_cand *)a)->name, ((const struct dev_cand *)b)->name);
}

/* Lists the usable interfaces passing @filter, sorted by name, into *@out (malloc'd, the
 * caller frees). Returns the count or a negative errno. */
static int dev_scan(const char *filter, struct dev_cand **out)
{
	struct ifaddrs *ifs, *ifa;
	struct dev_cand *c;
	int n = 0, total = 0;
	socklen_t len;

	if (getifaddrs(&ifs)) {
		int err = errno;

		ftcc_warn("tcp: getifaddrs: %s", strerror(err));
		return -err;
	}
	for (ifa = ifs; ifa; ifa = ifa->ifa_next)
		total++;
	c = calloc(total ? (size_t)total : 1, sizeof(*c));
	if (!c) {
		freeifaddrs(ifs);
		return -ENOMEM;
	}
	for (ifa = ifs; ifa; ifa = ifa->ifa_next) {
		len = dev_usable_addr(ifa);
		if (len && tcp_dev_filter_match(filter, ifa->ifa_name))
			dev_cand_add(c, &n, ifa, len);
	}
	freeifaddrs(ifs);
	qsort(c, (size_t)n, sizeof(*c), dev_cand_cmp);
	*out = c;
	return n;
}

/* Logs one discovered device at INFO. */
static void dev_log(int idx, const struct tcp_dev *d)
{
	char host[INET6_ADDRSTRLEN] = "?";
	const void *a = d->addr.ss_family == AF_INET ?
				(const void *)&((const struct sockaddr_in *)&d->addr)->sin_addr :
				(const void *)&((const struct sockaddr_in6 *)&d->addr)->sin6_addr;

	inet_ntop(d->addr.ss_family, a, host, sizeof(host));
	ftcc_info("tcp: dev %d %s %s speed %d numa %d cpus \"%s\" pci \"%s\" (%s)", idx, d->name,
		  host, d->speed_mbps, d->numa_node, d->cpulist, d->pci_path,
		  d->from_hwloc ? "hwloc" : "sysfs");
}

int tcp_dev_discover(struct tcp_dev *devs, int max)
{
	const char *filter = ftcc_setting_str(FTCC_SET_SOCKET_IFNAME);
	struct dev_cand *c = NULL;
	int n, i;

	if (!devs || max <= 0)
		return -EINVAL;
	if (max > TCP_DEV_MAX)
		max = TCP_DEV_MAX;
	n = dev_scan(filter, &c);
	if (n == 0 && (!filter || strspn(filter, " \t") == strlen(filter))) {
		free(c);
		c = NULL;
		ftcc_info("tcp: no interface passes the default filter; trying lo");
		n = dev_scan("=lo", &c);
	}
	if (n <= 0) {
		free(c);
		if (n == 0)
			ftcc_warn("tcp: no usable interface (FTCC_SOCKET_IFNAME=\"%s\")",
				  filter ? filter : "");
		return n;
	}
	if (n > max)
		n = max;
	for (i = 0; i < n; i++) {
		memset(&devs[i], 0, sizeof(devs[i]));
		memcpy(devs[i].name, c[i].name, sizeof(devs[i].name));
		devs[i].addr = c[i].addr;
		devs[i].addr_len = c[i].addr_len;
		tcp_dev_fill_topology(&devs[i]);
		dev_log(i, &devs[i]);
	}
	free(c);
	return n;
}

/* Parses cpulist @s ("0-3,8", blanks allowed around entries) into @set. 0 or -EINVAL. */
static int dev_parse_cpulist(const char *s, cpu_set_t *set)
{
	unsigned long lo, hi, cpu;
	char *end;

	CPU_ZERO(set);
	for (;;) {
		while (isspace((unsigned char)*s))
			s++;
		if (!isdigit((unsigned char)*s))
			return -EINVAL;
		lo = hi = strtoul(s, &end, 10);
		if (*end == '-') {
			if (!isdigit((unsigned char)end[1]))
				return -EINVAL;
			hi = strtoul(end + 1, &end, 10);
		}
		if (lo > hi || hi >= CPU_SETSIZE)
			return -EINVAL;
		for (cpu = lo; cpu <= hi; cpu++)
			CPU_SET(cpu, set);
		for (s = end; isspace((unsigned char)*s);)
			s++;
		if (!*s)
			return 0;
		if (*s++ != ',')
			return -EINVAL;
	}
}

int tcp_dev_bind_thread(const char *cpulist)
{
	cpu_set_t set;
	int err;

	if (!cpulist || strspn(cpulist, " \t\n") == strlen(cpulist))
		return 0;
	if (dev_parse_cpulist(cpulist, &set)) {
		ftcc_warn("tcp: malformed cpu list \"%s\"", cpulist);
		return -EINVAL;
	}
	err = pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
	if (err) {
		ftcc_warn("tcp: binding thread to cpus \"%s\": %s", cpulist, strerror(err));
		return -err;
	}
	ftcc_info("tcp: thread bound to cpus %s", cpulist);
	return 0;
}
