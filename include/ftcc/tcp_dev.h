/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP devices: the host's usable network interfaces.
 *
 * Discovery honours FTCC_SOCKET_IFNAME (NCCL_SOCKET_IFNAME syntax). PCI path, NUMA node and
 * local CPUs come from hwloc, loaded at run time with dlopen (the .so must load without it),
 * with a sysfs fallback; link speed always comes from sysfs.
 */
#ifndef FTCC_TCP_DEV_H
#define FTCC_TCP_DEV_H

#include <netinet/in.h>
#include <stdint.h>
#include <sys/socket.h>

#define TCP_DEV_MAX 16

/* One usable interface. Owned by the device table. */
struct tcp_dev {
	char name[64];		      /* interface name, e.g. "eth0" */
	struct sockaddr_storage addr; /* its first IPv4 (else IPv6) address, port 0 */
	socklen_t addr_len;
	char pci_path[256]; /* realpath of /sys/class/net/IF/device, or "" (virtual) */
	int speed_mbps;	    /* link speed; 10000 when unknown (as NCCL) */
	int numa_node;	    /* -1 when unknown */
	char cpulist[256];  /* CPUs local to the NIC, "0-3,8" form, or "" */
	int from_hwloc;	    /* 1 when hwloc supplied pci/numa/cpus (speed: sysfs) */
};

/* Parses an NCCL_SOCKET_IFNAME-style filter and tells whether @ifname passes it (1 or 0).
 * Syntax: comma-separated prefixes; leading '^' excludes; leading '=' means exact match
 * (the two may combine as "^="). Blanks around names and empty entries are ignored; a list
 * with no names includes nothing ("=") or excludes nothing ("^"). NULL or blank filter:
 * everything except "lo*" and "docker*". Pure function. */
int tcp_dev_filter_match(const char *filter, const char *ifname);

/* Discovers devices into @devs (caller-owned, at most min(@max, TCP_DEV_MAX) entries): up
 * (and running, loopback aside) interfaces with an address that pass FTCC_SOCKET_IFNAME, one
 * per name, sorted by name. If the default filter finds none, falls back to "lo". Returns the
 * count (>= 0), or -EINVAL for bad arguments, or the negative errno of getifaddrs. Blocks
 * briefly (sysfs, and hwloc's scan on first use). Thread-safe. */
int tcp_dev_discover(struct tcp_dev *devs, int max);

/* Fills speed, pci_path, numa_node and cpulist of @dev from hwloc when available, else
 * sysfs. Never fails: unknown values keep their defaults. */
void tcp_dev_fill_topology(struct tcp_dev *dev);

/* Binds the calling thread to @cpulist ("0-3,8"). NULL or "" is a no-op returning 0. A
 * malformed list gives -EINVAL; a refused affinity gives pthread's error, negated. Errors
 * are logged. */
int tcp_dev_bind_thread(const char *cpulist);

/* Whether libhwloc could be loaded and its topology built (for tests and logs). Loads it on
 * first use (blocks while hwloc scans the machine). Thread-safe. */
int tcp_dev_hwloc_available(void);

/* Fills pci_path, numa_node and cpulist of @dev (by name) from hwloc and sets from_hwloc;
 * speed is left alone. pci_path is the realpath of /sys/class/net/IF/device, checked against
 * the bus id of hwloc's PCI parent. 0, -ENOSYS without hwloc, or -ENOENT when hwloc does not
 * know the interface or disagrees with sysfs (@dev is then unchanged). Thread-safe. */
int tcp_dev_fill_topology_hwloc(struct tcp_dev *dev);

/* Fills speed, pci_path, numa_node and cpulist of @dev (by name) from sysfs only and clears
 * from_hwloc. A virtual interface gets "", -1 and "". Thread-safe; exposed for tests. */
void tcp_dev_fill_topology_sysfs(struct tcp_dev *dev);

/* Destroys the hwloc topology and unloads libhwloc, so nothing of it remains after the
 * plug-in's last finalize. A later call that needs hwloc loads it again. Thread-safe. */
void tcp_dev_release(void);

#endif
