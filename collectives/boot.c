/* SPDX-License-Identifier: BSD-3-Clause */
/* Bootstrap handles of CollNet groups: wire form, checks and group naming (include/ftcc/boot.h).
 * Pure functions apart from boot_settings_digest(), which reads the loaded settings.
 */
#include "ftcc/boot.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

#include "ftcc/le.h"
#include "ftcc/settings.h"

#define FNV32_BASIS 0x811c9dc5u
#define FNV32_PRIME 0x01000193u
#define FNV64_BASIS 0xcbf29ce484222325ull
#define FNV64_PRIME 0x100000001b3ull

static uint32_t fnv32(uint32_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h = (h ^ b[i]) * FNV32_PRIME;
	}
	return h;
}

static uint64_t fnv64(uint64_t h, const void *p, size_t n)
{
	const uint8_t *b = p;

	for (size_t i = 0; i < n; i++) {
		h = (h ^ b[i]) * FNV64_PRIME;
	}
	return h;
}

int boot_handle_encode(const struct boot_handle *h, void *buf)
{
	uint8_t *p = buf;

	memset(p, 0, BOOT_HANDLE_BYTES);
	le_put32(p, BOOT_HANDLE_MAGIC);
	le_put16(p + 4, BOOT_HANDLE_VERSION);
	if (h->addr.ss_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&h->addr;

		le_put16(p + 6, 4);
		le_put16(p + 8, ntohs(in->sin_port));
		memcpy(p + 32, &in->sin_addr, 4);
	} else if (h->addr.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&h->addr;

		le_put16(p + 6, 6);
		le_put16(p + 8, ntohs(in6->sin6_port));
		memcpy(p + 32, &in6->sin6_addr, 16);
	} else {
		return -EAFNOSUPPORT;
	}
	le_put32(p + 12, h->digest);
	le_put64(p + 16, h->comm_id);
	le_put64(p + 24, h->nonce);
	le_put32(p + 48, fnv32(FNV32_BASIS, p, 48));
	return 0;
}

int boot_handle_decode(const void *buf, size_t len, struct boot_handle *h)
{
	const uint8_t *p = buf;
	uint16_t family, port;

	if (!buf || len < BOOT_HANDLE_BYTES || le_get32(p) != BOOT_HANDLE_MAGIC) {
		return -EBADMSG;
	}
	if (le_get16(p + 4) != BOOT_HANDLE_VERSION) {
		return -EPROTO;
	}
	if (le_get32(p + 48) != fnv32(FNV32_BASIS, p, 48)) {
		return -EBADMSG;
	}
	family = le_get16(p + 6);
	port = le_get16(p + 8);
	if ((family != 4 && family != 6) || port == 0 || le_get16(p + 10) != 0) {
		return -EBADMSG;
	}
	for (int i = 4; family == 4 && i < 16; i++) {
		if (p[32 + i]) {
			return -EBADMSG;
		}
	}
	memset(h, 0, sizeof(*h));
	if (family == 4) {
		struct sockaddr_in *in = (struct sockaddr_in *)&h->addr;

		in->sin_family = AF_INET;
		in->sin_port = htons(port);
		memcpy(&in->sin_addr, p + 32, 4);
	} else {
		struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&h->addr;

		in6->sin6_family = AF_INET6;
		in6->sin6_port = htons(port);
		memcpy(&in6->sin6_addr, p + 32, 16);
	}
	h->digest = le_get32(p + 12);
	h->comm_id = le_get64(p + 16);
	h->nonce = le_get64(p + 24);
	return 0;
}

char *boot_handle_addr(const struct boot_handle *h, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (h->addr.ss_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)&h->addr;

		inet_ntop(AF_INET6, &in6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(in6->sin6_port));
	} else {
		const struct sockaddr_in *in = (const struct sockaddr_in *)&h->addr;

		inet_ntop(AF_INET, &in->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(in->sin_port));
	}
	return buf;
}

static int same_addr(const struct boot_handle *a, const struct boot_handle *b)
{
	if (a->addr.ss_family != b->addr.ss_family) {
		return 0;
	}
	if (a->addr.ss_family == AF_INET) {
		const struct sockaddr_in *x = (const struct sockaddr_in *)&a->addr;
		const struct sockaddr_in *y = (const struct sockaddr_in *)&b->addr;

		return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
	}
	const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)&a->addr;
	const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)&b->addr;

	return x->sin6_port == y->sin6_port && !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

int boot_group_check(const struct boot_handle *hs, uint32_t n, char *name, size_t name_len,
		     char *why, size_t why_len)
{
	uint8_t wire[BOOT_HANDLE_BYTES];
	uint64_t hash = FNV64_BASIS;
	char a[64], b[64];

	if (n == 0) {
		snprintf(why, why_len, "no handles");
		return -EINVAL;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (hs[i].comm_id != hs[0].comm_id) {
			snprintf(why, why_len,
				 "node %u belongs to communicator 0x%016" PRIx64
				 ", node 0 to 0x%016" PRIx64,
				 i, hs[i].comm_id, hs[0].comm_id);
			return -EINVAL;
		}
		if (hs[i].digest != hs[0].digest) {
			snprintf(why, why_len,
				 "node %u (%s) runs with other FTCC_DEGRADED / FTCC_ALGO / "
				 "FTCC_RD_MAX_BYTES / FTCC_SEGMENT_BYTES / FTCC_LANES / "
				 "FTCC_COORDINATOR / "
				 "FTCC_COLLNET_MIN_NODES / FTCC_COLLNET_MIN_PERCENT settings than "
				 "node 0 (%s)",
				 i, boot_handle_addr(&hs[i], a, sizeof(a)),
				 boot_handle_addr(&hs[0], b, sizeof(b)));
			return -EINVAL;
		}
		for (uint32_t j = 0; j < i; j++) {
			if (hs[i].nonce == hs[j].nonce || same_addr(&hs[i], &hs[j])) {
				snprintf(why, why_len, "nodes %u and %u gave the same handle (%s)",
					 j, i, boot_handle_addr(&hs[i], a, sizeof(a)));
				return -EINVAL;
			}
		}
		if (boot_handle_encode(&hs[i], wire)) {
			snprintf(why, why_len, "node %u: address family %d", i,
				 hs[i].addr.ss_family);
			return -EINVAL;
		}
		hash = fnv64(hash, wire, sizeof(wire));
	}
	if (snprintf(name, name_len, "nccl-%016" PRIx64, hash) >= (int)name_len) {
		snprintf(why, why_len, "group name buffer too small");
		return -EINVAL;
	}
	return 0;
}

uint32_t boot_settings_digest(void)
{
	static const enum ftcc_setting_id ids[] = {
		FTCC_SET_DEGRADED,
		FTCC_SET_ALGO,
		FTCC_SET_RD_MAX_BYTES,
		FTCC_SET_SEGMENT_BYTES,
		FTCC_SET_LANES,
		FTCC_SET_COORDINATOR,
		FTCC_SET_COLLNET_MIN_NODES,
		FTCC_SET_COLLNET_MIN_PERCENT,
	};
	uint32_t h = FNV32_BASIS;

	for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
		const struct ftcc_setting_desc *d = &ftcc_settings_table()[ids[i]];
		char text[32];
		const char *v = text;

		if (d->type == FTCC_SETTING_INT) {
			snprintf(text, sizeof(text), "%" PRId64, ftcc_setting_int(ids[i]));
		} else {
			v = ftcc_setting_str(ids[i]);
		}
		h = fnv32(h, d->name, strlen(d->name) + 1);
		h = fnv32(h, v, strlen(v) + 1);
	}
	return h;
}
