/* SPDX-License-Identifier: BSD-3-Clause */
/* Veth pairs in the root network namespace for the chaos tests: each gives one process its own
 * IPv4 address (and interface name for FTCC_SOCKET_IFNAME), so that an nftables rule can cut that
 * process off by address. Traffic between two such local addresses goes over lo, where the
 * output-hook rules of chaos_fault.h see it.
 *
 * Needs root (CAP_NET_ADMIN) and the veth driver. Interface i of the test process P is named
 * "ftv<P>x<i>" (its peer gets a "p" more) and remembered until deleted; chaos_veth_cleanup(),
 * called from each test's teardown, deletes whatever is left, and chaos_veth_sweep() removes the
 * leftovers of a run that crashed. One test thread drives it.
 */
#ifndef FTCC_TESTS_CHAOS_VETH_H
#define FTCC_TESTS_CHAOS_VETH_H

#include <stddef.h>

#define CHAOS_VETH_MAX 8       /* pairs one process has at once */
#define CHAOS_VETH_NAME_LEN 16 /* IFNAMSIZ */
#define CHAOS_VETH_IP_LEN 16   /* "10.251.255.255" and its NUL */

/* Creates veth pair @i (0 .. CHAOS_VETH_MAX - 1) of this process: the interface named into @name
 * (CHAOS_VETH_NAME_LEN bytes) gets a free address 10.251.x.y/32, written into @ip
 * (CHAOS_VETH_IP_LEN bytes); both ends are brought up and the call waits (bounded, 2 s) until
 * the interface is running. A leftover pair of the same name is deleted first. Blocks on `ip`.
 * 0, or -1 with a line on stderr (what was made is left for chaos_veth_cleanup()). */
int chaos_veth_create(int i, char *name, char *ip);
/* Deletes the pair @name (its peer goes with it) and forgets it. 0 or -1. */
int chaos_veth_delete(const char *name);
/* Deletes every pair this process made and has not deleted yet. */
void chaos_veth_cleanup(void);
/* Deletes the pairs "ftv<P>x<i>" whose process P is gone (a crashed earlier run). */
void chaos_veth_sweep(void);

#endif
