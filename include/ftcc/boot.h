/* SPDX-License-Identifier: BSD-3-Clause */
/* Bootstrap of an engine group from the listen handles NCCL exchanges (CollNet).
 *
 * Each node head's listen writes one handle: the control address its member will listen on,
 * the communicator id, a random nonce and a digest of the settings every member must share.
 * connect receives every node's handle in node order, so all nodes derive the same group name
 * and member addresses from the same bytes, and reject the same malformed or mismatched set:
 * a check that fails, fails on every node.
 *
 * Wire form (little-endian, BOOT_HANDLE_BYTES of the NCCL_NET_HANDLE_MAXSIZE bytes):
 *   0 magic "FTCN"   4 version   6 family (4 or 6)   8 port   10 reserved (0)
 *  12 settings digest   16 comm id   24 nonce   32 address (16 bytes; IPv4 in the first 4)
 *  48 checksum (FNV-1a 32 of bytes 0..47)
 */
#ifndef FTCC_BOOT_H
#define FTCC_BOOT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#define BOOT_HANDLE_MAGIC 0x4e435446u /* "FTCN" */
#define BOOT_HANDLE_VERSION 1
#define BOOT_HANDLE_BYTES 52

/* One node's handle, decoded. */
struct boot_handle {
	struct sockaddr_storage addr; /* control address (AF_INET or AF_INET6, port set) */
	uint32_t digest;	      /* boot_settings_digest() of the node */
	uint64_t comm_id;	      /* NCCL communicator id (0 for pre-v11 tables) */
	uint64_t nonce;		      /* random per listen */
};

/* Writes @h into @buf (BOOT_HANDLE_BYTES; the caller zeroes the rest of NCCL's handle).
 * 0, or -EAFNOSUPPORT for an address that is neither IPv4 nor IPv6. */
int boot_handle_encode(const struct boot_handle *h, void *buf);

/* Decodes @len bytes at @buf. 0; -EBADMSG (too short, wrong magic, checksum, family, port 0 or
 * a reserved field set); -EPROTO (another version). Never reads past @len. */
int boot_handle_decode(const void *buf, size_t len, struct boot_handle *h);

/* "1.2.3.4:567" or "[::1]:567" of @h's address into @buf. Returns @buf. */
char *boot_handle_addr(const struct boot_handle *h, char *buf, size_t len);

/* Checks the handles of a whole group (node order) and names it: every handle's comm id and
 * digest must equal the first one's, and no two may share an address or a nonce. On success
 * writes the group name ("nccl-" and 16 hex digits of a hash over all handles) into @name
 * (at least 22 bytes) and returns 0. Otherwise returns -EINVAL and says why in @why. */
int boot_group_check(const struct boot_handle *hs, uint32_t n, char *name, size_t name_len,
		     char *why, size_t why_len);

/* A digest of the settings every member of a group must share (FTCC_DEGRADED, FTCC_ALGO,
 * FTCC_RD_MAX_BYTES, FTCC_SEGMENT_BYTES, FTCC_LANES, FTCC_COORDINATOR, FTCC_COLLNET_MIN_NODES,
 * FTCC_COLLNET_MIN_PERCENT), as loaded. */
uint32_t boot_settings_digest(void);

#endif
