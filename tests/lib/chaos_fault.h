/* SPDX-License-Identifier: BSD-3-Clause */
/* Network faults for the chaos tests, through the system's own tools: nftables rules that
 * drop or reset loopback flows, and `ss` to list a process's TCP connections and destroy one.
 *
 * Needs root (CAP_NET_ADMIN) and a kernel with nf_tables and INET_DIAG_DESTROY. Every nft
 * table made here is named ftcc_test_<pid of the test> and remembered until it is deleted;
 * chaos_fault_cleanup(), called from each test's teardown, deletes whatever is left. One test
 * thread drives it.
 */
#ifndef FTCC_TESTS_CHAOS_FAULT_H
#define FTCC_TESTS_CHAOS_FAULT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* One established TCP socket as `ss -tnpi` reports it. */
struct chaos_flow {
	uint16_t lport, rport; /* local and peer port */
	int fd;		       /* in the owning process */
	uint64_t bytes_sent, bytes_received;
};

/* Established TCP sockets owned by @pid whose peer port is @rport (any when 0), up to @max
 * into @out. Returns how many, or -1 when ss failed. */
int chaos_flows(pid_t pid, uint16_t rport, struct chaos_flow *out, int max);
/* Destroys the loopback socket whose local port is @lport and peer port @rport (`ss -K`); the
 * kernel resets its peer. 0 when ss reported it destroyed, -1 otherwise. */
int chaos_flow_kill(uint16_t lport, uint16_t rport);

/* Destroys (`ss -K`) every established loopback TCP socket whose source address is @src_ip and,
 * when @dst_ip is not NULL, whose peer address is @dst_ip, except those with a local or peer port
 * in @keep (@nkeep entries: control connections, say). Each destroyed socket's peer is reset.
 * Returns how many it destroyed, or -1 when ss failed. */
int chaos_kill_flows(const char *src_ip, const char *dst_ip, const uint16_t *keep, int nkeep);
/* Adds a rule with @verdict ("drop", "reject with tcp reset") for every TCP packet from @src_ip
 * to @dst_ip with neither port in @keep. Handle or -1. */
long chaos_nft_between(const char *table, const char *src_ip, const char *dst_ip,
		       const uint16_t *keep, int nkeep, const char *verdict);

/* Whether nft works here (root, nf_tables); when not, *why says so. */
int chaos_nft_usable(char *why, size_t len);
/* Deletes ftcc_test_<pid> tables whose test process is gone (a crashed earlier run). */
void chaos_nft_sweep(void);
/* Creates this test's table, named into @name (at least 32 bytes), with one chain on the
 * output hook (loopback packets pass it once, in each direction). Deletes a leftover of the
 * same name first. 0 or -1. */
int chaos_nft_table(char *name, size_t len);
/* Adds rules dropping every TCP packet to or from port @port (they go with the table). 0 or
 * -1. */
int chaos_nft_drop_port(const char *table, uint16_t port);
/* Adds a rule answering every TCP packet from source port @port with a reset. Handle or -1. */
long chaos_nft_reset_sport(const char *table, uint16_t port);
/* Adds, in one nft transaction, rules dropping every TCP packet between the IPv4 address @ip and
 * any other address, both directions; its traffic to itself still passes. 0 or -1. */
int chaos_nft_isolate_ip(const char *table, const char *ip);
/* Deletes one rule. 0 or -1. */
int chaos_nft_del_rule(const char *table, long handle);
/* Deletes the table (and forgets it). 0 or -1. */
int chaos_nft_delete(const char *table);
/* 1 if the table exists. */
int chaos_nft_exists(const char *table);
/* Deletes every table this process made and has not deleted yet. */
void chaos_fault_cleanup(void);

#endif
