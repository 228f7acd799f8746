/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the TCP wire format, part one: listen handles, hellos and socket addresses
 * (round trips, every validation rule, IPv4 and IPv6 conversions and their string forms).
 * Chunk headers and control frames are in test_tcp_wire_frames.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>
#include <sys/un.h>

#include "../../transport/tcp/wire.h"

static struct tcp_wire_addr addr4(const char *ip, uint16_t port)
{
	struct tcp_wire_addr a = { .family = AF_INET, .port = port };

	cr_assert_eq(inet_pton(AF_INET, ip, a.ip), 1);
	return a;
}

static struct tcp_wire_addr addr6(const char *ip, uint16_t port)
{
	struct tcp_wire_addr a = { .family = AF_INET6, .port = port };

	cr_assert_eq(inet_pton(AF_INET6, ip, a.ip), 1);
	return a;
}

static struct tcp_handle sample_handle(void)
{
	return (struct tcp_handle){ .addr = addr4("10.1.2.3", 40000),
				    .listen_id = 0x1122334455667788ull,
				    .comm_id = 0x99aabbccddeeff00ull,
				    .incarnation = 0x0123456789abcdefull };
}

static struct tcp_hello sample_hello(uint16_t type)
{
	return (struct tcp_hello){ .type = type,
				   .stream = 3,
				   .nstreams = 4,
				   .gen = 7,
				   .listen_id = 11,
				   .comm_id = 12,
				   .listener_inc = 13,
				   .incarnation = 14,
				   .conn_id = 15,
				   .self = addr6("2001:db8::42", 4242) };
}

static void expect_addr_eq(const struct tcp_wire_addr *a, const struct tcp_wire_addr *b)
{
	cr_expect_eq(a->family, b->family);
	cr_expect_eq(a->port, b->port);
	cr_expect_arr_eq(a->ip, b->ip, 16);
}

Test(tcp_wire_handle, round_trip_ipv4_and_ipv6)
{
	struct tcp_handle h = sample_handle(), out;
	uint8_t buf[TCP_HANDLE_WIRE_SIZE + 8];

	for (int v6 = 0; v6 < 2; v6++) {
		if (v6)
			h.addr = addr6("fe80::1", 65535);
		memset(buf, 0xa5, sizeof(buf));
		tcp_handle_encode(&h, buf);
		cr_expect_eq(buf[TCP_HANDLE_WIRE_SIZE], 0xa5, "encoder wrote past its size");
		for (int i = 52; i < TCP_HANDLE_WIRE_SIZE; i++)
			cr_expect_eq(buf[i], 0, "reserved byte %d", i);
		cr_assert_eq(tcp_handle_decode(buf, TCP_HANDLE_WIRE_SIZE, &out), 0);
		expect_addr_eq(&out.addr, &h.addr);
		cr_expect_eq(out.listen_id, h.listen_id);
		cr_expect_eq(out.comm_id, h.comm_id);
		cr_expect_eq(out.incarnation, h.incarnation);
	}
}

/* Encodes @h, flips the bits @x of byte @at (none when @at < 0), and decodes @len bytes. */
static int handle_rc(const struct tcp_handle *h, int at, uint8_t x, size_t len)
{
	uint8_t buf[TCP_HANDLE_WIRE_SIZE];
	struct tcp_handle out;

	tcp_handle_encode(h, buf);
	if (at >= 0)
		buf[at] ^= x;
	return tcp_handle_decode(buf, len, &out);
}

Test(tcp_wire_handle, every_rule_rejects)
{
	const struct tcp_handle ok = sample_handle();
	struct tcp_handle h = ok;

	cr_expect_eq(handle_rc(&h, -1, 0, TCP_HANDLE_WIRE_SIZE), 0);
	cr_expect_eq(handle_rc(&h, -1, 0, TCP_HANDLE_WIRE_SIZE - 1), -EBADMSG, "short");
	cr_expect_eq(handle_rc(&h, -1, 0, 0), -EBADMSG, "empty");
	cr_expect_eq(handle_rc(&h, 0, 0x01, TCP_HANDLE_WIRE_SIZE), -EBADMSG, "magic");
	cr_expect_eq(handle_rc(&h, 3, 0x80, TCP_HANDLE_WIRE_SIZE), -EBADMSG, "magic");
	cr_expect_eq(handle_rc(&h, 4, 0x03, TCP_HANDLE_WIRE_SIZE), -EPROTO, "version 2");
	cr_expect_eq(handle_rc(&h, 5, 0x01, TCP_HANDLE_WIRE_SIZE), -EPROTO, "version 257");
	cr_expect_eq(handle_rc(&h, 6, 0x20, TCP_HANDLE_WIRE_SIZE), -EBADMSG, "kind");
	h.addr.family = AF_UNIX;
	cr_expect_eq(handle_rc(&h, -1, 0, TCP_HANDLE_WIRE_SIZE), -EBADMSG, "family");
	h = ok;
	h.addr.port = 0;
	cr_expect_eq(handle_rc(&h, -1, 0, TCP_HANDLE_WIRE_SIZE), -EBADMSG, "port 0");
	h = ok;
	h.listen_id = 0;
	cr_expect_eq(handle_rc(&h, -1, 0, TCP_HANDLE_WIRE_SIZE), -EBADMSG, "listen id 0");
	h = ok;
	h.incarnation = 0;
	cr_expect_eq(handle_rc(&h, -1, 0, TCP_HANDLE_WIRE_SIZE), -EBADMSG, "incarnation 0");
}

Test(tcp_wire_handle, comm_id_zero_is_allowed_and_reserved_bytes_are_not)
{
	struct tcp_handle h = sample_handle(), out;
	uint8_t buf[TCP_HANDLE_WIRE_SIZE];

	h.comm_id = 0; /* old ABIs do not know the communicator */
	tcp_handle_encode(&h, buf);
	cr_expect_eq(tcp_handle_decode(buf, sizeof(buf), &out), 0);
	for (int i = 52; i < TCP_HANDLE_WIRE_SIZE; i++) {
		tcp_handle_encode(&h, buf);
		buf[i] = 1;
		cr_expect_eq(tcp_handle_decode(buf, sizeof(buf), &out), -EBADMSG, "byte %d", i);
	}
}

Test(tcp_wire_handle, hello_is_not_a_handle)
{
	struct tcp_hello he = sample_hello(TCP_HELLO_CTRL);
	uint8_t buf[TCP_HELLO_WIRE_SIZE];
	struct tcp_handle h;
	struct tcp_hello hout;

	tcp_hello_encode(&he, buf);
	cr_expect_eq(tcp_handle_decode(buf, sizeof(buf), &h), -EBADMSG);
	tcp_handle_encode(&(struct tcp_handle){ 0 }, buf);
	cr_expect_eq(tcp_hello_decode(buf, sizeof(buf), &hout), -EBADMSG);
}

static int hello_decode_of(const struct tcp_hello *h)
{
	uint8_t buf[TCP_HELLO_WIRE_SIZE];
	struct tcp_hello out;

	tcp_hello_encode(h, buf);
	return tcp_hello_decode(buf, sizeof(buf), &out);
}

Test(tcp_wire_hello, round_trip_every_type)
{
	static const uint16_t types[] = { TCP_HELLO_CTRL, TCP_HELLO_DATA, TCP_HELLO_PROBE };
	uint8_t buf[TCP_HELLO_WIRE_SIZE + 4];

	for (size_t t = 0; t < sizeof(types) / sizeof(types[0]); t++) {
		struct tcp_hello h = sample_hello(types[t]), out;

		memset(buf, 0x5a, sizeof(buf));
		tcp_hello_encode(&h, buf);
		cr_expect_eq(buf[TCP_HELLO_WIRE_SIZE], 0x5a, "encoder wrote past its size");
		cr_expect_eq(buf[78] | buf[79], 0, "reserved bytes");
		cr_assert_eq(tcp_hello_decode(buf, TCP_HELLO_WIRE_SIZE, &out), 0, "type %u",
			     types[t]);
		cr_expect_eq(out.type, h.type);
		cr_expect_eq(out.stream, h.stream);
		cr_expect_eq(out.nstreams, h.nstreams);
		cr_expect_eq(out.gen, h.gen);
		cr_expect_eq(out.listen_id, h.listen_id);
		cr_expect_eq(out.comm_id, h.comm_id);
		cr_expect_eq(out.listener_inc, h.listener_inc);
		cr_expect_eq(out.incarnation, h.incarnation);
		cr_expect_eq(out.conn_id, h.conn_id);
		expect_addr_eq(&out.self, &h.self);
	}
}

Test(tcp_wire_hello, header_rules)
{
	struct tcp_hello h = sample_hello(TCP_HELLO_CTRL), out;
	uint8_t buf[TCP_HELLO_WIRE_SIZE];

	tcp_hello_encode(&h, buf);
	cr_expect_eq(tcp_hello_decode(buf, TCP_HELLO_WIRE_SIZE - 1, &out), -EBADMSG);
	buf[3] ^= 0x80;
	cr_expect_eq(tcp_hello_decode(buf, sizeof(buf), &out), -EBADMSG, "magic");
	tcp_hello_encode(&h, buf);
	buf[4] = 0;
	buf[5] = 1; /* version 256 */
	cr_expect_eq(tcp_hello_decode(buf, sizeof(buf), &out), -EPROTO, "foreign version");
	for (int i = 78; i < 80; i++) {
		tcp_hello_encode(&h, buf);
		buf[i] = 0xff;
		cr_expect_eq(tcp_hello_decode(buf, sizeof(buf), &out), -EBADMSG, "byte %d", i);
	}
	h.self.port = 0;
	cr_expect_eq(hello_decode_of(&h), -EBADMSG, "port 0");
	h = sample_hello(TCP_HELLO_CTRL);
	h.self.family = 0;
	cr_expect_eq(hello_decode_of(&h), -EBADMSG, "family 0");
}

Test(tcp_wire_hello, field_rules)
{
	struct tcp_hello h;

	for (uint16_t type = 0; type < 8; type++) {
		h = sample_hello(type);
		cr_expect_eq(hello_decode_of(&h), type >= 1 && type <= 3 ? 0 : -EBADMSG, "%u",
			     type);
	}
	h = sample_hello(TCP_HELLO_CTRL);
	h.nstreams = 0;
	cr_expect_eq(hello_decode_of(&h), -EBADMSG, "nstreams 0");
	h.nstreams = TCP_MAX_STREAMS + 1;
	cr_expect_eq(hello_decode_of(&h), -EBADMSG, "nstreams 17");
	h.nstreams = TCP_MAX_STREAMS;
	cr_expect_eq(hello_decode_of(&h), 0, "nstreams 16");
	h.nstreams = 1;
	cr_expect_eq(hello_decode_of(&h), 0, "nstreams 1");
	h.gen = 0;
	cr_expect_eq(hello_decode_of(&h), -EBADMSG, "ctrl gen 0");
	h = sample_hello(TCP_HELLO_DATA);
	h.gen = 0;
	cr_expect_eq(hello_decode_of(&h), -EBADMSG, "data gen 0");
	h.gen = 1;
	h.stream = TCP_MAX_STREAMS;
	cr_expect_eq(hello_decode_of(&h), -EBADMSG, "stream 16");
	h.stream = TCP_MAX_STREAMS - 1;
	cr_expect_eq(hello_decode_of(&h), 0, "stream 15");
	h.nstreams = 0; /* only CTRL carries nstreams */
	cr_expect_eq(hello_decode_of(&h), 0, "data ignores nstreams");
}

Test(tcp_wire_hello, zero_ids_rejected_except_for_probes)
{
	static const uint16_t types[] = { TCP_HELLO_CTRL, TCP_HELLO_DATA };

	for (int t = 0; t < 2; t++) {
		struct tcp_hello h = sample_hello(types[t]);

		h.conn_id = 0;
		cr_expect_eq(hello_decode_of(&h), -EBADMSG, "type %u conn_id 0", types[t]);
		h = sample_hello(types[t]);
		h.incarnation = 0;
		cr_expect_eq(hello_decode_of(&h), -EBADMSG, "type %u incarnation 0", types[t]);
		h = sample_hello(types[t]);
		h.listener_inc = 0;
		cr_expect_eq(hello_decode_of(&h), -EBADMSG, "type %u listener_inc 0", types[t]);
	}
	struct tcp_hello p = { .type = TCP_HELLO_PROBE, .self = addr4("127.0.0.1", 1) };

	cr_expect_eq(hello_decode_of(&p), 0, "a probe needs no ids");
}

Test(tcp_wire_addr, ipv4_conversions)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons(4000) };
	struct sockaddr_storage ss;
	struct tcp_wire_addr w;
	char str[64];

	inet_pton(AF_INET, "192.168.10.254", &in.sin_addr);
	cr_assert_eq(tcp_wire_addr_from_sa(&w, (struct sockaddr *)&in), 0);
	cr_expect_eq(w.family, AF_INET);
	cr_expect_eq(w.port, 4000);
	cr_expect_arr_eq(w.ip, &in.sin_addr, 4);
	for (int i = 4; i < 16; i++)
		cr_expect_eq(w.ip[i], 0, "unused ip byte %d", i);
	cr_expect_eq(tcp_wire_addr_to_sa(&w, &ss), sizeof(struct sockaddr_in));
	cr_expect_eq(memcmp(&ss, &in, sizeof(in)), 0);
	tcp_wire_addr_str(&w, str, sizeof(str));
	cr_expect_str_eq(str, "192.168.10.254:4000");
	tcp_wire_addr_str(&w, str, 8);
	cr_expect_str_eq(str, "192.168", "truncated and terminated");
}

Test(tcp_wire_addr, ipv6_conversions)
{
	struct sockaddr_in6 in6 = { .sin6_family = AF_INET6, .sin6_port = htons(65535) };
	struct sockaddr_storage ss;
	struct tcp_wire_addr w;
	char str[64];

	inet_pton(AF_INET6, "2001:db8::7:1", &in6.sin6_addr);
	cr_assert_eq(tcp_wire_addr_from_sa(&w, (struct sockaddr *)&in6), 0);
	cr_expect_eq(w.family, AF_INET6);
	cr_expect_eq(w.port, 65535);
	cr_expect_arr_eq(w.ip, &in6.sin6_addr, 16);
	cr_expect_eq(tcp_wire_addr_to_sa(&w, &ss), sizeof(struct sockaddr_in6));
	cr_expect_eq(memcmp(&ss, &in6, sizeof(in6)), 0);
	tcp_wire_addr_str(&w, str, sizeof(str));
	cr_expect_str_eq(str, "[2001:db8::7:1]:65535");
	w = addr6("::1", 567);
	tcp_wire_addr_str(&w, str, sizeof(str));
	cr_expect_str_eq(str, "[::1]:567");
	w = addr6("::ffff:1.2.3.4", 80);
	tcp_wire_addr_str(&w, str, sizeof(str));
	cr_expect_str_eq(str, "[::ffff:1.2.3.4]:80");
	w = addr4("1.2.3.4", 567);
	tcp_wire_addr_str(&w, str, sizeof(str));
	cr_expect_str_eq(str, "1.2.3.4:567");
}

Test(tcp_wire_addr, other_families_refused)
{
	struct sockaddr_un un = { .sun_family = AF_UNIX };
	struct tcp_wire_addr w;

	memset(&w, 0xee, sizeof(w));
	cr_expect_eq(tcp_wire_addr_from_sa(&w, (struct sockaddr *)&un), -EAFNOSUPPORT);
	cr_expect_eq(w.family, 0, "cleared on refusal");
}

Test(tcp_wire_addr, handle_carries_the_address)
{
	struct tcp_handle h = sample_handle(), out;
	uint8_t buf[TCP_HANDLE_WIRE_SIZE];
	struct sockaddr_storage ss;
	struct tcp_wire_addr back;

	h.addr = addr6("fd00::abcd", 1234);
	tcp_handle_encode(&h, buf);
	cr_assert_eq(tcp_handle_decode(buf, sizeof(buf), &out), 0);
	tcp_wire_addr_to_sa(&out.addr, &ss);
	cr_assert_eq(tcp_wire_addr_from_sa(&back, (struct sockaddr *)&ss), 0);
	expect_addr_eq(&back, &h.addr);
}
