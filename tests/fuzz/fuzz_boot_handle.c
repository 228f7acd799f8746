/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target for the CollNet bootstrap handles (collectives/boot.c): the decoder on the raw
 * input, on 52-byte pieces of it with the magic, version and checksum repaired (so random input
 * reaches the field checks), and boot_group_check on the handles those give, each checked with
 * abort() against the rules of include/ftcc/boot.h.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/boot.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond)) {                                                                     \
			abort();                                                                   \
		}                                                                                  \
	} while (0)

#define MAX_GROUP 8

static uint16_t get16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)get16(p) | (uint32_t)get16(p + 2) << 16;
}

static uint64_t get64(const uint8_t *p)
{
	return (uint64_t)get32(p) | (uint64_t)get32(p + 4) << 32;
}

/* FNV-1a 32 of bytes 0..47, as the header describes the checksum. */
static uint32_t checksum(const uint8_t *p)
{
	uint32_t h = 0x811c9dc5u;

	for (int i = 0; i < 48; i++) {
		h = (h ^ p[i]) * 0x01000193u;
	}
	return h;
}

static uint16_t port_of(const struct boot_handle *h)
{
	return ntohs(((const struct sockaddr_in *)&h->addr)->sin_port); /* same offset in v6 */
}

/* The rules of the header, applied to @w (at least BOOT_HANDLE_BYTES): what decode must
 * return. */
static int expected_rc(const uint8_t *w)
{
	uint16_t family = get16(w + 6);

	if (get32(w) != BOOT_HANDLE_MAGIC) {
		return -EBADMSG;
	}
	if (get16(w + 4) != BOOT_HANDLE_VERSION) {
		return -EPROTO;
	}
	if (get32(w + 48) != checksum(w) || (family != 4 && family != 6) || get16(w + 8) == 0 ||
	    get16(w + 10) != 0) {
		return -EBADMSG;
	}
	for (int i = 36; family == 4 && i < 48; i++) {
		if (w[i]) {
			return -EBADMSG;
		}
	}
	return 0;
}

/* boot_handle_addr gives a terminated string of the expected form, and a terminated prefix of
 * it in every shorter buffer. */
static void check_addr_string(const struct boot_handle *h)
{
	char full[64], part[64];
	size_t n;

	CHECK(boot_handle_addr(h, full, sizeof(full)) == full);
	n = strnlen(full, sizeof(full));
	CHECK(n < sizeof(full) && n >= 6); /* "[::]:1" */
	if (h->addr.ss_family == AF_INET6) {
		CHECK(full[0] == '[' && strstr(full, "]:") != NULL);
	} else {
		CHECK(full[0] >= '0' && full[0] <= '9' && strchr(full, '[') == NULL);
	}
	for (size_t len = 1; len <= n; len++) {
		memset(part, 'x', sizeof(part));
		boot_handle_addr(h, part, len);
		CHECK(part[len - 1] == '\0' && !memcmp(part, full, len - 1) && part[len] == 'x');
	}
}

/* An accepted handle: its fields are the wire's, it encodes back to the same bytes, and a
 * copy one byte shorter is refused. */
static void check_accepted(const uint8_t *w, const struct boot_handle *h)
{
	uint8_t enc[BOOT_HANDLE_BYTES];
	uint8_t *shorter;
	struct boot_handle h2;

	CHECK(h->addr.ss_family == (get16(w + 6) == 4 ? AF_INET : AF_INET6));
	CHECK(port_of(h) == get16(w + 8) && port_of(h) != 0);
	CHECK(h->digest == get32(w + 12) && h->comm_id == get64(w + 16) &&
	      h->nonce == get64(w + 24));
	CHECK(boot_handle_encode(h, enc) == 0);
	CHECK(!memcmp(enc, w, BOOT_HANDLE_BYTES));
	CHECK(boot_handle_decode(enc, sizeof(enc), &h2) == 0);
	CHECK(!memcmp(&h2, h, sizeof(h2)));
	check_addr_string(h);

	/* An exact-size block, so that ASan sees a read past the length. */
	shorter = malloc(BOOT_HANDLE_BYTES - 1);
	CHECK(shorter != NULL);
	memcpy(shorter, w, BOOT_HANDLE_BYTES - 1);
	CHECK(boot_handle_decode(shorter, BOOT_HANDLE_BYTES - 1, &h2) == -EBADMSG);
	free(shorter);
}

/* Decodes @len bytes at @p (the input itself, so any read past it is seen). Returns rc. */
static int fuzz_decode(const uint8_t *p, size_t len, struct boot_handle *h)
{
	int rc = boot_handle_decode(p, len, h);

	CHECK(rc == 0 || rc == -EBADMSG || rc == -EPROTO);
	CHECK(rc == (len < BOOT_HANDLE_BYTES ? -EBADMSG : expected_rc(p)));
	if (rc == 0) {
		check_accepted(p, h);
	}
	return rc;
}

/* Piece @p (BOOT_HANDLE_BYTES) with magic, version and checksum made right. The bits of @mode
 * also make one more field right each (family, reserved, the tail of an IPv4 address), so that
 * some pieces are accepted and each field check is reached with the others passing. */
static int fuzz_repaired(const uint8_t *p, unsigned mode, struct boot_handle *h)
{
	uint8_t w[BOOT_HANDLE_BYTES];
	uint32_t sum;

	memcpy(w, p, sizeof(w));
	memcpy(w, "FTCN", 4);
	w[4] = BOOT_HANDLE_VERSION;
	w[5] = 0;
	if (mode & 1) {
		w[6] = (w[6] & 1) ? 6 : 4;
		w[7] = 0;
	}
	if (mode & 2) {
		w[10] = 0;
		w[11] = 0;
	}
	if (mode & 4) {
		memset(w + 36, 0, 12);
	}
	sum = checksum(w);
	for (int i = 0; i < 4; i++) {
		w[48 + i] = (uint8_t)(sum >> (8 * i));
	}
	return fuzz_decode(w, sizeof(w), h);
}

static int is_hex_name(const char *name)
{
	if (strlen(name) != 21 || strncmp(name, "nccl-", 5) != 0) {
		return 0;
	}
	for (int i = 5; i < 21; i++) {
		if (!strchr("0123456789abcdef", name[i])) {
			return 0;
		}
	}
	return 1;
}

static int same_addr(const struct boot_handle *a, const struct boot_handle *b)
{
	const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)&a->addr;
	const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)&b->addr;
	const struct sockaddr_in *x4 = (const struct sockaddr_in *)&a->addr;
	const struct sockaddr_in *y4 = (const struct sockaddr_in *)&b->addr;

	if (a->addr.ss_family != b->addr.ss_family || port_of(a) != port_of(b)) {
		return 0;
	}
	if (a->addr.ss_family == AF_INET) {
		return x4->sin_addr.s_addr == y4->sin_addr.s_addr;
	}
	return !memcmp(&x->sin6_addr, &y->sin6_addr, 16);
}

/* The header's rule for a group: what boot_group_check must return. */
static int group_ok(const struct boot_handle *hs, uint32_t n)
{
	if (n == 0) {
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (hs[i].comm_id != hs[0].comm_id || hs[i].digest != hs[0].digest) {
			return 0;
		}
		for (uint32_t j = 0; j < i; j++) {
			if (hs[i].nonce == hs[j].nonce || same_addr(&hs[i], &hs[j])) {
				return 0;
			}
		}
	}
	return 1;
}

static void fuzz_group(const struct boot_handle *hs, uint32_t n)
{
	struct boot_handle swapped[MAX_GROUP + 1];
	char name[32], again[32], why[128];
	int rc;

	memset(why, 0, sizeof(why));
	rc = boot_group_check(hs, n, name, sizeof(name), why, sizeof(why));
	CHECK(rc == 0 || rc == -EINVAL);
	CHECK(rc == (group_ok(hs, n) ? 0 : -EINVAL));
	if (rc) {
		CHECK(why[0] != '\0' && memchr(why, '\0', sizeof(why)) != NULL);
		return;
	}
	CHECK(is_hex_name(name));
	/* Deterministic, and the buffer size is only a limit: 22 bytes fit, 21 do not. */
	CHECK(boot_group_check(hs, n, again, 22, why, sizeof(why)) == 0);
	CHECK(!strcmp(again, name));
	CHECK(boot_group_check(hs, n, again, 21, why, sizeof(why)) == -EINVAL);
	if (n < 2) {
		return;
	}
	/* Node order is part of the group: the first and last swapped (distinct handles, as the
	 * check passed) are another group, short of a 64-bit hash collision. */
	memcpy(swapped, hs, n * sizeof(hs[0]));
	swapped[0] = hs[n - 1];
	swapped[n - 1] = hs[0];
	CHECK(boot_group_check(swapped, n, again, sizeof(again), why, sizeof(why)) == 0);
	CHECK(strcmp(again, name) != 0);
}

/* Group checks on @hs (@n accepted handles): as they are; with the comm ids made equal, so the
 * digest check decides; with the digests equal too, so the duplicate checks are reached; and
 * with one handle listed twice, which must fail. */
static void fuzz_groups(struct boot_handle *hs, uint32_t n, uint8_t pick)
{
	struct boot_handle dup[MAX_GROUP + 1];

	fuzz_group(hs, n);
	for (uint32_t i = 1; i < n; i++) {
		hs[i].comm_id = hs[0].comm_id;
	}
	fuzz_group(hs, n);
	for (uint32_t i = 1; i < n; i++) {
		hs[i].digest = hs[0].digest;
	}
	fuzz_group(hs, n);
	if (n == 0) {
		return;
	}
	memcpy(dup, hs, n * sizeof(hs[0]));
	dup[n] = hs[pick % n];
	CHECK(!group_ok(dup, n + 1));
	fuzz_group(dup, n + 1);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct boot_handle raw[MAX_GROUP], fixed[MAX_GROUP], h;
	uint32_t nraw = 0, nfixed = 0;
	size_t pieces = size / BOOT_HANDLE_BYTES;

	fuzz_decode(data, size, &h);
	if (pieces > MAX_GROUP) {
		pieces = MAX_GROUP;
	}
	for (size_t i = 0; i < pieces; i++) {
		const uint8_t *p = data + i * BOOT_HANDLE_BYTES;

		/* The piece as it is, with only the exact length it has. */
		if (fuzz_decode(p, BOOT_HANDLE_BYTES, &raw[nraw]) == 0) {
			nraw++;
		}
		if (fuzz_repaired(p, (unsigned)size & 7, &fixed[nfixed]) == 0) {
			nfixed++;
		}
	}
	fuzz_groups(raw, nraw, size ? data[0] : 0);
	fuzz_groups(fixed, nfixed, size ? data[size - 1] : 0);
	return 0;
}
