/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the CollNet bootstrap handles (collectives/boot.c): the 52-byte wire form and
 * every rule of its decoder, address strings, the group checks and name, and the digest of the
 * settings every node of a group must share.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "ftcc/boot.h"
#include "ftcc/settings.h"

#define NCCL_HANDLE_BYTES 128 /* NCCL_NET_HANDLE_MAXSIZE: the buffer a handle is written into */

static struct boot_handle handle4(const char *ip, uint16_t port, uint64_t nonce)
{
	struct boot_handle h = { .digest = 0xa1b2c3d4u,
				 .comm_id = 0x8877665544332211ull,
				 .nonce = nonce };
	struct sockaddr_in *in = (struct sockaddr_in *)&h.addr;

	in->sin_family = AF_INET;
	in->sin_port = htons(port);
	cr_assert_eq(inet_pton(AF_INET, ip, &in->sin_addr), 1, "%s", ip);
	return h;
}

static struct boot_handle handle6(const char *ip, uint16_t port, uint64_t nonce)
{
	struct boot_handle h = { .digest = 0x01020304u,
				 .comm_id = 0xfedcba9876543210ull,
				 .nonce = nonce };
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&h.addr;

	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(port);
	cr_assert_eq(inet_pton(AF_INET6, ip, &in6->sin6_addr), 1, "%s", ip);
	return h;
}

/* FNV-1a 32 of bytes 0..47, written here from the header's description of the wire form, so a
 * test can change a field and still present a correct checksum. */
static void fix_checksum(uint8_t *p)
{
	uint32_t h = 0x811c9dc5u;

	for (int i = 0; i < 48; i++) {
		h = (h ^ p[i]) * 0x01000193u;
	}
	for (int i = 0; i < 4; i++) {
		p[48 + i] = (uint8_t)(h >> (8 * i));
	}
}

/* Decodes exactly @len bytes of @wire from a heap block of that size, so that a read past
 * @len is caught under ASan. */
static int decode_exact(const uint8_t *wire, size_t len, struct boot_handle *out)
{
	uint8_t *copy = malloc(len ? len : 1);
	int rc;

	cr_assert_not_null(copy);
	memcpy(copy, wire, len);
	rc = boot_handle_decode(copy, len, out);
	free(copy);
	return rc;
}

/* The fields of @a and @b that travel on the wire are equal. */
static void expect_same_handle(const struct boot_handle *a, const struct boot_handle *b)
{
	cr_assert_eq(a->addr.ss_family, b->addr.ss_family);
	if (a->addr.ss_family == AF_INET) {
		const struct sockaddr_in *x = (const struct sockaddr_in *)&a->addr;
		const struct sockaddr_in *y = (const struct sockaddr_in *)&b->addr;

		cr_expect_eq(x->sin_port, y->sin_port);
		cr_expect_eq(x->sin_addr.s_addr, y->sin_addr.s_addr);
	} else {
		const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)&a->addr;
		const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)&b->addr;

		cr_expect_eq(x->sin6_port, y->sin6_port);
		cr_expect_arr_eq(&x->sin6_addr, &y->sin6_addr, 16);
	}
	cr_expect_eq(a->digest, b->digest);
	cr_expect_eq(a->comm_id, b->comm_id);
	cr_expect_eq(a->nonce, b->nonce);
}

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

/* Every field sits where the header's wire diagram says, little-endian. */
static void expect_layout(const uint8_t *w, const struct boot_handle *h, uint16_t family,
			  uint16_t port)
{
	cr_expect_arr_eq(w, "FTCN", 4);
	cr_expect_eq(get16(w + 4), BOOT_HANDLE_VERSION);
	cr_expect_eq(get16(w + 6), family);
	cr_expect_eq(get16(w + 8), port);
	cr_expect_eq(get16(w + 10), 0);
	cr_expect_eq(get32(w + 12), h->digest);
	cr_expect_eq(get64(w + 16), h->comm_id);
	cr_expect_eq(get64(w + 24), h->nonce);
}

Test(boot, round_trip_ipv4)
{
	struct boot_handle h = handle4("192.168.10.250", 65535, 0xffffffffffffffffull), out;
	uint8_t buf[NCCL_HANDLE_BYTES], want[4] = { 192, 168, 10, 250 };

	memset(buf, 0xa5, sizeof(buf));
	cr_assert_eq(boot_handle_encode(&h, buf), 0);
	for (size_t i = BOOT_HANDLE_BYTES; i < sizeof(buf); i++) {
		cr_assert_eq(buf[i], 0xa5, "encode wrote byte %zu", i);
	}
	expect_layout(buf, &h, 4, 65535);
	cr_expect_arr_eq(buf + 32, want, 4);
	for (int i = 36; i < 48; i++) {
		cr_expect_eq(buf[i], 0, "IPv4 address byte %d", i - 32);
	}
	/* The plug-in hands the decoder NCCL's whole buffer; the tail is not looked at. */
	memset(&out, 0x5a, sizeof(out));
	cr_assert_eq(boot_handle_decode(buf, sizeof(buf), &out), 0);
	expect_same_handle(&out, &h);
	memset(&out, 0x5a, sizeof(out));
	cr_assert_eq(decode_exact(buf, BOOT_HANDLE_BYTES, &out), 0);
	expect_same_handle(&out, &h);
}

Test(boot, round_trip_ipv6)
{
	struct boot_handle h = handle6("2001:db8:1:2:3:4:5:6", 1, 0), out;
	uint8_t buf[NCCL_HANDLE_BYTES], again[BOOT_HANDLE_BYTES];

	/* Nonce and comm id 0 are legal values (pre-v11 tables have no communicator id). */
	h.comm_id = 0;
	h.digest = 0xffffffffu;
	memset(buf, 0xa5, sizeof(buf));
	cr_assert_eq(boot_handle_encode(&h, buf), 0);
	cr_expect_eq(buf[BOOT_HANDLE_BYTES], 0xa5, "encode wrote past its size");
	expect_layout(buf, &h, 6, 1);
	cr_expect_arr_eq(buf + 32, &((struct sockaddr_in6 *)&h.addr)->sin6_addr, 16);
	cr_assert_eq(decode_exact(buf, BOOT_HANDLE_BYTES, &out), 0);
	expect_same_handle(&out, &h);
	/* Encoding is a function of the fields: the decoded handle encodes to the same bytes. */
	cr_assert_eq(boot_handle_encode(&out, again), 0);
	cr_expect_arr_eq(again, buf, BOOT_HANDLE_BYTES);
}

/* Each field alone, set to a value that differs in every byte from the others, comes back. */
Test(boot, every_field_survives)
{
	static const uint64_t vals[] = {
		1, 0x80, 0x0100, 0xdeadbeef, 0x0123456789abcdefull, 0x8000000000000000ull
	};
	struct boot_handle base = handle4("10.0.0.1", 40000, 7), h, out;
	uint8_t buf[BOOT_HANDLE_BYTES];

	for (size_t i = 0; i < sizeof(vals) / sizeof(vals[0]); i++) {
		for (int field = 0; field < 3; field++) {
			h = base;
			if (field == 0) {
				h.digest = (uint32_t)vals[i];
			} else if (field == 1) {
				h.comm_id = vals[i];
			} else {
				h.nonce = vals[i];
			}
			cr_assert_eq(boot_handle_encode(&h, buf), 0);
			cr_assert_eq(decode_exact(buf, sizeof(buf), &out), 0, "field %d", field);
			expect_same_handle(&out, &h);
		}
	}
	for (unsigned port = 1; port <= 65535; port = port * 3 + 1) {
		h = handle6("fe80::1:2", (uint16_t)port, 9);
		cr_assert_eq(boot_handle_encode(&h, buf), 0);
		cr_assert_eq(decode_exact(buf, sizeof(buf), &out), 0, "port %u", port);
		expect_same_handle(&out, &h);
	}
}

Test(boot, decode_rejects_every_short_length)
{
	struct boot_handle h = handle4("1.2.3.4", 567, 1), out;
	uint8_t buf[BOOT_HANDLE_BYTES];

	cr_assert_eq(boot_handle_encode(&h, buf), 0);
	for (size_t len = 0; len < BOOT_HANDLE_BYTES; len++) {
		cr_expect_eq(decode_exact(buf, len, &out), -EBADMSG, "len %zu", len);
	}
	cr_expect_eq(boot_handle_decode(NULL, BOOT_HANDLE_BYTES, &out), -EBADMSG);
	cr_expect_eq(decode_exact(buf, BOOT_HANDLE_BYTES, &out), 0);
}

/* The magic is checked for itself, not only through the checksum. */
Test(boot, decode_rejects_wrong_magic)
{
	struct boot_handle h = handle4("1.2.3.4", 567, 1), out;
	uint8_t buf[BOOT_HANDLE_BYTES];

	for (int i = 0; i < 4; i++) {
		cr_assert_eq(boot_handle_encode(&h, buf), 0);
		buf[i] ^= 0x20; /* "ftcn", "FtCN", ...: case matters */
		fix_checksum(buf);
		cr_expect_eq(decode_exact(buf, sizeof(buf), &out), -EBADMSG, "byte %d", i);
	}
	cr_assert_eq(boot_handle_encode(&h, buf), 0);
	memcpy(buf, "NCTF", 4); /* the magic in the wrong byte order */
	fix_checksum(buf);
	cr_expect_eq(decode_exact(buf, sizeof(buf), &out), -EBADMSG);
}

/* No single-bit error anywhere in the handle is accepted: flips in the version read as another
 * version, all others as a malformed handle. */
Test(boot, decode_rejects_every_single_bit_flip)
{
	const struct boot_handle hs[2] = { handle4("10.1.2.3", 40000, 0x1122334455667788ull),
					   handle6("2001:db8::42", 4242, 0x99aabbccddeeff00ull) };
	uint8_t good[BOOT_HANDLE_BYTES], buf[BOOT_HANDLE_BYTES];
	struct boot_handle out;
	int protos = 0;

	for (int k = 0; k < 2; k++) {
		cr_assert_eq(boot_handle_encode(&hs[k], good), 0);
		for (int bit = 0; bit < BOOT_HANDLE_BYTES * 8; bit++) {
			int rc;

			memcpy(buf, good, sizeof(buf));
			buf[bit / 8] ^= (uint8_t)(1u << (bit % 8));
			rc = decode_exact(buf, sizeof(buf), &out);
			cr_assert(rc == -EBADMSG || rc == -EPROTO, "handle %d bit %d: rc %d", k,
				  bit, rc);
			if (bit / 8 == 4 || bit / 8 == 5) {
				cr_expect_eq(rc, -EPROTO, "handle %d bit %d", k, bit);
				protos++;
			} else {
				cr_expect_eq(rc, -EBADMSG, "handle %d bit %d", k, bit);
			}
		}
	}
	cr_expect_eq(protos, 2 * 16);
}

/* A handle of another version is -EPROTO whatever follows the version: its layout and checksum
 * may differ, and connect must say "another ftcc version", not "not an ftcc handle". */
Test(boot, decode_other_version_is_eproto)
{
	static const uint16_t versions[] = { 0, 2, 3, 0x0100, 0xffff };
	struct boot_handle h = handle6("::1", 567, 3), out;
	uint8_t buf[BOOT_HANDLE_BYTES];

	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		cr_assert_eq(boot_handle_encode(&h, buf), 0);
		buf[4] = (uint8_t)versions[i];
		buf[5] = (uint8_t)(versions[i] >> 8);
		fix_checksum(buf);
		cr_expect_eq(decode_exact(buf, sizeof(buf), &out), -EPROTO, "version %u",
			     versions[i]);
		memset(buf + 6, 0xee, sizeof(buf) - 6);
		cr_expect_eq(decode_exact(buf, sizeof(buf), &out), -EPROTO, "version %u, junk",
			     versions[i]);
	}
}

/* Sets byte @at of a fresh encoding of @h to @v, fixes the checksum and decodes. */
static int decode_with_byte(const struct boot_handle *h, int at, uint8_t v)
{
	uint8_t buf[BOOT_HANDLE_BYTES];
	struct boot_handle out;

	cr_assert_eq(boot_handle_encode(h, buf), 0);
	buf[at] = v;
	fix_checksum(buf);
	return decode_exact(buf, sizeof(buf), &out);
}

Test(boot, decode_checks_fields_behind_a_good_checksum)
{
	const struct boot_handle h4 = handle4("1.2.3.4", 567, 1), h6 = handle6("::1", 567, 2);
	static const uint16_t families[] = { 0, 1, 2, 3, 5, 7, 10, 0x0400, 0x0600, 0xffff };
	uint8_t buf[BOOT_HANDLE_BYTES];
	struct boot_handle out, zero = h4;

	cr_expect_eq(decode_with_byte(&h4, 0, 'F'), 0, "the fixture itself decodes");
	/* Port 0 on the wire (the encoder writes it; only the decoder refuses). */
	((struct sockaddr_in *)&zero.addr)->sin_port = 0;
	cr_assert_eq(boot_handle_encode(&zero, buf), 0);
	cr_expect_eq(decode_exact(buf, sizeof(buf), &out), -EBADMSG, "port 0");
	for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++) {
		cr_assert_eq(boot_handle_encode(&h4, buf), 0);
		buf[6] = (uint8_t)families[i];
		buf[7] = (uint8_t)(families[i] >> 8);
		fix_checksum(buf);
		cr_expect_eq(decode_exact(buf, sizeof(buf), &out), -EBADMSG, "family %u",
			     families[i]);
	}
	for (int at = 10; at < 12; at++) {
		cr_expect_eq(decode_with_byte(&h4, at, 1), -EBADMSG, "reserved byte %d", at);
		cr_expect_eq(decode_with_byte(&h6, at, 0x80), -EBADMSG, "reserved byte %d", at);
	}
	/* An IPv4 address is 4 bytes and 12 zeros; in an IPv6 one every byte is address. */
	for (int at = 36; at < 48; at++) {
		cr_expect_eq(decode_with_byte(&h4, at, 1), -EBADMSG, "IPv4, address byte %d",
			     at - 32);
		cr_expect_eq(decode_with_byte(&h6, at, 0xff), 0, "IPv6, address byte %d", at - 32);
	}
	/* An IPv6 handle relabelled as IPv4 carries junk in bytes 4..15 of its address. */
	cr_assert_eq(boot_handle_encode(&h6, buf), 0);
	buf[6] = 4;
	fix_checksum(buf);
	cr_expect_eq(decode_exact(buf, sizeof(buf), &out), -EBADMSG, "::1 as IPv4");
}

Test(boot, encode_refuses_other_families)
{
	struct boot_handle h = handle4("1.2.3.4", 567, 1);
	struct sockaddr_un *un = (struct sockaddr_un *)&h.addr;
	uint8_t buf[BOOT_HANDLE_BYTES];

	memset(&h.addr, 0, sizeof(h.addr));
	un->sun_family = AF_UNIX;
	strcpy(un->sun_path, "ftcc.sock");
	cr_expect_eq(boot_handle_encode(&h, buf), -EAFNOSUPPORT);
	h.addr.ss_family = AF_UNSPEC;
	cr_expect_eq(boot_handle_encode(&h, buf), -EAFNOSUPPORT);
}

Test(boot, addr_strings)
{
	struct boot_handle h4 = handle4("1.2.3.4", 567, 1), h6 = handle6("::1", 567, 2);
	char buf[64];

	cr_expect_eq(boot_handle_addr(&h4, buf, sizeof(buf)), buf);
	cr_expect_str_eq(buf, "1.2.3.4:567");
	cr_expect_eq(boot_handle_addr(&h6, buf, sizeof(buf)), buf);
	cr_expect_str_eq(buf, "[::1]:567");
	h4 = handle4("255.255.255.255", 65535, 1);
	cr_expect_str_eq(boot_handle_addr(&h4, buf, sizeof(buf)), "255.255.255.255:65535");
	h6 = handle6("ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff", 65535, 2);
	cr_expect_str_eq(boot_handle_addr(&h6, buf, sizeof(buf)),
			 "[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535");
	h6 = handle6("::ffff:10.0.0.1", 80, 2);
	cr_expect_str_eq(boot_handle_addr(&h6, buf, sizeof(buf)), "[::ffff:10.0.0.1]:80");
	/* A short buffer gets a terminated prefix, and nothing past its length is written. */
	memset(buf, 'x', sizeof(buf));
	boot_handle_addr(&h6, buf, 6);
	cr_expect_str_eq(buf, "[::ff");
	cr_expect_eq(buf[6], 'x');
}

/* Group fixture: @n IPv4 handles on one host with distinct ports and nonces. */
static void group(struct boot_handle *hs, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++) {
		hs[i] = handle4("127.0.0.1", (uint16_t)(30000 + i), 0x1000 + i);
	}
}

static void expect_name_form(const char *name)
{
	cr_assert_eq(strlen(name), 21, "%s", name);
	cr_expect_eq(strncmp(name, "nccl-", 5), 0, "%s", name);
	for (int i = 5; i < 21; i++) {
		cr_expect(strchr("0123456789abcdef", name[i]) != NULL, "%s", name);
	}
}

static int check(const struct boot_handle *hs, uint32_t n, char *name, char *why)
{
	return boot_group_check(hs, n, name, 32, why, 256);
}

Test(boot, group_name_depends_on_order)
{
	struct boot_handle hs[4], swapped[4];
	char name[32], again[32], other[32], why[256] = "";

	group(hs, 4);
	cr_assert_eq(check(hs, 4, name, why), 0, "%s", why);
	expect_name_form(name);
	cr_assert_eq(check(hs, 4, again, why), 0, "%s", why);
	cr_expect_str_eq(again, name, "same handles, same order: same name");

	/* The same handles in another node order are another group. */
	memcpy(swapped, hs, sizeof(hs));
	swapped[1] = hs[2];
	swapped[2] = hs[1];
	cr_assert_eq(check(swapped, 4, other, why), 0, "%s", why);
	expect_name_form(other);
	cr_expect_str_neq(other, name);

	/* A group with one node more or one less, or a new nonce (a relisten), is another one. */
	cr_assert_eq(check(hs, 3, other, why), 0, "%s", why);
	cr_expect_str_neq(other, name);
	hs[3].nonce++;
	cr_assert_eq(check(hs, 4, other, why), 0, "%s", why);
	cr_expect_str_neq(other, name);
	cr_assert_eq(check(hs, 1, other, why), 0, "one node is a group: %s", why);
	expect_name_form(other);
}

/* The name is a function of the bytes: a copy of the handles made through the wire (as every
 * node gets them from NCCL) gives the same name. */
Test(boot, group_name_is_the_same_after_the_wire)
{
	struct boot_handle hs[3], back[3];
	uint8_t wire[BOOT_HANDLE_BYTES];
	char name[32], other[32], why[256] = "";

	group(hs, 3);
	hs[1] = handle6("fd00::7", 30001, 0x1001);
	hs[1].comm_id = hs[0].comm_id;
	hs[1].digest = hs[0].digest;
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(boot_handle_encode(&hs[i], wire), 0);
		memset(&back[i], 0x77, sizeof(back[i]));
		cr_assert_eq(boot_handle_decode(wire, sizeof(wire), &back[i]), 0);
	}
	cr_assert_eq(check(hs, 3, name, why), 0, "%s", why);
	cr_assert_eq(check(back, 3, other, why), 0, "%s", why);
	cr_expect_str_eq(other, name);
}

Test(boot, group_rejects_comm_id_mismatch)
{
	struct boot_handle hs[5];
	char name[32], why[256] = "";

	group(hs, 5);
	hs[4].comm_id ^= 1;
	cr_expect_eq(check(hs, 5, name, why), -EINVAL);
	cr_expect(strstr(why, "node 4") && strstr(why, "communicator"), "%s", why);
	group(hs, 5);
	hs[0].comm_id = 0; /* a pre-v11 node among v11 ones */
	why[0] = '\0';
	cr_expect_eq(check(hs, 5, name, why), -EINVAL);
	cr_expect(strstr(why, "node 1"), "%s", why);
}

Test(boot, group_rejects_digest_mismatch)
{
	struct boot_handle hs[3];
	char name[32], why[256] = "";

	group(hs, 3);
	hs[2].digest++;
	cr_expect_eq(check(hs, 3, name, why), -EINVAL);
	cr_expect(strstr(why, "node 2") && strstr(why, "FTCC_DEGRADED") &&
			  strstr(why, "127.0.0.1:30002"),
		  "%s", why);
}

Test(boot, group_rejects_duplicate_nonce)
{
	struct boot_handle hs[4];
	char name[32], why[256] = "";

	group(hs, 4);
	hs[3].nonce = hs[1].nonce; /* another address, same listen */
	cr_expect_eq(check(hs, 4, name, why), -EINVAL);
	cr_expect(strstr(why, "nodes 1 and 3"), "%s", why);
}

Test(boot, group_rejects_duplicate_address)
{
	struct boot_handle hs[4];
	char name[32], why[256] = "";

	group(hs, 4);
	hs[2] = handle4("127.0.0.1", 30000, 0x5555); /* node 0's address, another nonce */
	cr_expect_eq(check(hs, 4, name, why), -EINVAL);
	cr_expect(strstr(why, "nodes 0 and 2") && strstr(why, "127.0.0.1:30000"), "%s", why);

	group(hs, 2);
	hs[0] = handle6("fd00::1", 5000, 1);
	hs[1] = handle6("fd00::1", 5000, 2);
	cr_expect_eq(check(hs, 2, name, why), -EINVAL, "IPv6 duplicate");

	/* Same IP with another port, or the same port on another IP, is another address. */
	hs[1] = handle6("fd00::1", 5001, 2);
	cr_expect_eq(check(hs, 2, name, why), 0, "%s", why);
	hs[1] = handle6("fd00::2", 5000, 2);
	cr_expect_eq(check(hs, 2, name, why), 0, "%s", why);
}

Test(boot, group_rejects_empty_and_small_name_buffer)
{
	struct boot_handle hs[2];
	char name[32], why[256] = "";

	group(hs, 2);
	cr_expect_eq(boot_group_check(hs, 0, name, sizeof(name), why, sizeof(why)), -EINVAL);
	cr_expect(why[0] != '\0', "no reason given for n == 0");

	/* "nccl-" + 16 digits + NUL is 22 bytes: 21 is too small, 22 fits. */
	why[0] = '\0';
	cr_expect_eq(boot_group_check(hs, 2, name, 21, why, sizeof(why)), -EINVAL);
	cr_expect(strstr(why, "too small"), "%s", why);
	cr_expect_eq(boot_group_check(hs, 2, name, 1, why, sizeof(why)), -EINVAL);
	cr_expect_eq(boot_group_check(hs, 2, name, 22, why, sizeof(why)), 0, "%s", why);
	expect_name_form(name);
	/* A failure with no room for a reason still fails. */
	hs[1].digest++;
	cr_expect_eq(boot_group_check(hs, 2, name, sizeof(name), NULL, 0), -EINVAL);
}

/* Puts every setting back to its environment value (none: the suite clears them). */
static void settings_clean(void)
{
	const struct ftcc_setting_desc *t = ftcc_settings_table();

	for (int i = 0; i < FTCC_SET_COUNT; i++) {
		unsetenv(t[i].name);
	}
	cr_assert_eq(ftcc_settings_load(), 0);
}

Test(boot, settings_digest_follows_shared_settings, .init = settings_clean)
{
	static const struct {
		enum ftcc_setting_id id;
		const char *value;
	} shared[] = {
		{ FTCC_SET_DEGRADED, "sum" },
		{ FTCC_SET_DEGRADED, "fail" },
		{ FTCC_SET_ALGO, "ring" },
		{ FTCC_SET_ALGO, "rd" },
		{ FTCC_SET_COLLNET_MIN_NODES, "2" },
		{ FTCC_SET_COLLNET_MIN_NODES, "1024" },
		{ FTCC_SET_RD_MAX_BYTES, "0" },
		{ FTCC_SET_SEGMENT_BYTES, "4096" },
		{ FTCC_SET_COORDINATOR, "10.0.0.1:7000" },
	};
	const uint32_t base = boot_settings_digest();

	cr_expect_eq(boot_settings_digest(), base, "stable between calls");
	for (size_t i = 0; i < sizeof(shared) / sizeof(shared[0]); i++) {
		const char *name = ftcc_settings_table()[shared[i].id].name;

		cr_assert_eq(ftcc_settings_set(shared[i].id, shared[i].value), 0);
		cr_expect_neq(boot_settings_digest(), base, "%s=%s", name, shared[i].value);
		cr_assert_eq(ftcc_settings_load(), 0);
		cr_expect_eq(boot_settings_digest(), base, "after restoring %s", name);
	}
	/* Two settings changed at once differ from either alone. */
	cr_assert_eq(ftcc_settings_set(FTCC_SET_ALGO, "ring"), 0);
	uint32_t ring = boot_settings_digest();
	cr_assert_eq(ftcc_settings_set(FTCC_SET_DEGRADED, "fail"), 0);
	cr_expect_neq(boot_settings_digest(), ring);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_expect_eq(boot_settings_digest(), base);
}

Test(boot, settings_digest_ignores_local_settings, .init = settings_clean)
{
	static const struct {
		enum ftcc_setting_id id;
		const char *value;
	} local[] = {
		{ FTCC_SET_FAILURE_TIMEOUT_MS, "500" }, { FTCC_SET_NSTREAMS, "8" },
		{ FTCC_SET_SOCKET_IFNAME, "lo" },	{ FTCC_SET_CONNECT_TIMEOUT_MS, "1000" },
		{ FTCC_SET_EAGER_MAX_BYTES, "0" },	{ FTCC_SET_DEBUG, "NONE" },
	};
	const uint32_t base = boot_settings_digest();

	for (size_t i = 0; i < sizeof(local) / sizeof(local[0]); i++) {
		cr_assert_eq(ftcc_settings_set(local[i].id, local[i].value), 0);
		cr_expect_eq(boot_settings_digest(), base, "%s=%s",
			     ftcc_settings_table()[local[i].id].name, local[i].value);
	}
	/* Setting a shared value to its default is no change. */
	cr_assert_eq(ftcc_settings_set(FTCC_SET_DEGRADED, "rescale"), 0);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_COLLNET_MIN_NODES, "1"), 0);
	cr_expect_eq(boot_settings_digest(), base);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_expect_eq(boot_settings_digest(), base);
}

/* The digest is of the values as loaded, whether they came from the environment or not. */
Test(boot, settings_digest_from_environment, .init = settings_clean)
{
	const uint32_t base = boot_settings_digest();
	uint32_t env;

	setenv("FTCC_ALGO", "ring", 1);
	cr_assert_eq(ftcc_settings_load(), 0);
	env = boot_settings_digest();
	cr_expect_neq(env, base);
	unsetenv("FTCC_ALGO");
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_ALGO, "ring"), 0);
	cr_expect_eq(boot_settings_digest(), env);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_expect_eq(boot_settings_digest(), base);
}
