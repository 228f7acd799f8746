/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the TCP wire format, part two: data chunk headers and control frames (round
 * trips, bounds, unknown types, wrong lengths, partial headers, and a stream of frames parsed
 * the way the control reader parses it).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "../../transport/tcp/wire.h"

#define TIB (1ull << 40)

static int chunk_rc(const struct tcp_chunk *c)
{
	uint8_t buf[TCP_CHUNK_WIRE_SIZE];
	struct tcp_chunk out;

	tcp_chunk_encode(c, buf);
	return tcp_chunk_decode(buf, sizeof(buf), &out);
}

Test(tcp_wire_chunk, round_trip)
{
	struct tcp_chunk c = { .tag = 0xfeedbeef,
			       .seq = 0x0102030405060708ull,
			       .total = TIB,
			       .offset = TIB / 2,
			       .len = TIB / 2 },
			 out;
	uint8_t buf[TCP_CHUNK_WIRE_SIZE + 4];

	memset(buf, 0x77, sizeof(buf));
	tcp_chunk_encode(&c, buf);
	cr_expect_eq(buf[TCP_CHUNK_WIRE_SIZE], 0x77, "encoder wrote past its size");
	cr_assert_eq(tcp_chunk_decode(buf, TCP_CHUNK_WIRE_SIZE, &out), 0);
	cr_expect_eq(out.tag, c.tag);
	cr_expect_eq(out.seq, c.seq);
	cr_expect_eq(out.total, c.total);
	cr_expect_eq(out.offset, c.offset);
	cr_expect_eq(out.len, c.len);
	cr_expect_eq(tcp_chunk_decode(buf, TCP_CHUNK_WIRE_SIZE - 1, &out), -EBADMSG, "short");
}

Test(tcp_wire_chunk, bounds)
{
	struct tcp_chunk c = { .tag = 1, .seq = 2 };

	cr_expect_eq(chunk_rc(&c), 0, "empty message");
	c.total = TIB + 1;
	c.len = 1;
	cr_expect_eq(chunk_rc(&c), -EBADMSG, "total > 1 TiB");
	c.total = 100;
	c.offset = 101;
	c.len = 0;
	cr_expect_eq(chunk_rc(&c), -EBADMSG, "offset beyond total");
	c.offset = 100;
	cr_expect_eq(chunk_rc(&c), 0, "empty piece at the end");
	c.offset = 60;
	c.len = 41;
	cr_expect_eq(chunk_rc(&c), -EBADMSG, "offset + len beyond total");
	c.len = 40;
	cr_expect_eq(chunk_rc(&c), 0, "offset + len == total");
	c.offset = 1;
	c.len = UINT64_MAX;
	cr_expect_eq(chunk_rc(&c), -EBADMSG, "len wrapping around");
	c.offset = UINT64_MAX;
	c.len = 2;
	cr_expect_eq(chunk_rc(&c), -EBADMSG, "offset wrapping around");
}

Test(tcp_wire_chunk, guard_word)
{
	struct tcp_chunk c = { .tag = 1, .seq = 2, .total = 3, .offset = 0, .len = 3 }, out;
	uint8_t buf[TCP_CHUNK_WIRE_SIZE];

	for (int i = 28; i < 32; i++) {
		tcp_chunk_encode(&c, buf);
		buf[i] ^= 0x10;
		cr_expect_eq(tcp_chunk_decode(buf, sizeof(buf), &out), -EBADMSG, "byte %d", i);
	}
}

Test(tcp_wire_frame, round_trip_every_type)
{
	struct tcp_frame in[4] = {
		{ .type = TCP_FRAME_HEARTBEAT, .value = 17 },
		{ .type = TCP_FRAME_ACK, .value = 0xfffffffffffffffeull },
		{ .type = TCP_FRAME_WELCOME, .value = 12345, .gen = 9 },
		{ .type = TCP_FRAME_CLOSE },
	};
	static const size_t lens[4] = { 16, 16, 52, 8 };
	uint8_t buf[TCP_FRAME_HDR_SIZE + TCP_FRAME_MAX_PAYLOAD];

	for (int i = 0; i < (int)sizeof(in[2].done); i++)
		in[2].done[i] = (uint8_t)(i * 29 + 1);
	for (int i = 0; i < 4; i++) {
		struct tcp_frame out;

		cr_assert_eq(tcp_frame_encode(&in[i], buf), lens[i], "type %u", in[i].type);
		cr_expect_eq(tcp_frame_length(buf, lens[i]), (int)lens[i]);
		cr_expect_eq(tcp_frame_length(buf, TCP_FRAME_HDR_SIZE), (int)lens[i],
			     "length known from the header alone");
		cr_assert_eq(tcp_frame_decode(buf, lens[i], &out), 0, "type %u", in[i].type);
		cr_expect_eq(out.type, in[i].type);
		cr_expect_eq(out.value, in[i].value);
		cr_expect_eq(out.gen, in[i].gen);
		cr_expect_arr_eq(out.done, in[i].done, sizeof(out.done));
	}
}

Test(tcp_wire_frame, partial_header_needs_more)
{
	struct tcp_frame f = { .type = TCP_FRAME_ACK, .value = 3 };
	uint8_t buf[TCP_FRAME_HDR_SIZE + TCP_FRAME_MAX_PAYLOAD];

	tcp_frame_encode(&f, buf);
	for (size_t len = 0; len < TCP_FRAME_HDR_SIZE; len++)
		cr_expect_eq(tcp_frame_length(buf, len), 0, "%zu bytes", len);
	memset(buf, 0xff, sizeof(buf)); /* even garbage needs a whole header to be judged */
	for (size_t len = 0; len < TCP_FRAME_HDR_SIZE; len++)
		cr_expect_eq(tcp_frame_length(buf, len), 0, "%zu bytes", len);
	cr_expect_eq(tcp_frame_length(buf, TCP_FRAME_HDR_SIZE), -EBADMSG);
}

Test(tcp_wire_frame, unknown_types_refused)
{
	static const uint16_t bad[] = { 0, 5, 6, 0x100, 0xffff };
	uint8_t buf[TCP_FRAME_HDR_SIZE + 8] = { 0 };
	struct tcp_frame out;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		for (uint32_t plen = 0; plen <= 8; plen += 8) {
			buf[0] = (uint8_t)bad[i];
			buf[1] = (uint8_t)(bad[i] >> 8);
			buf[4] = (uint8_t)plen;
			cr_expect_eq(tcp_frame_length(buf, sizeof(buf)), -EBADMSG, "type %u",
				     bad[i]);
			cr_expect_eq(tcp_frame_decode(buf, TCP_FRAME_HDR_SIZE + plen, &out),
				     -EBADMSG, "type %u", bad[i]);
		}
	}
}

Test(tcp_wire_frame, wrong_payload_length_refused)
{
	static const uint16_t types[] = { TCP_FRAME_HEARTBEAT, TCP_FRAME_ACK, TCP_FRAME_WELCOME,
					  TCP_FRAME_CLOSE };
	uint8_t buf[TCP_FRAME_HDR_SIZE + TCP_FRAME_MAX_PAYLOAD];
	struct tcp_frame out;

	for (int t = 0; t < 4; t++) {
		struct tcp_frame f = { .type = types[t], .value = 1, .gen = 1 };
		size_t len = tcp_frame_encode(&f, buf);

		for (int delta = -1; delta <= 1; delta += 2) {
			tcp_frame_encode(&f, buf);
			buf[4] = (uint8_t)(buf[4] + delta);
			cr_expect_eq(tcp_frame_length(buf, len), -EBADMSG, "type %u", types[t]);
		}
		tcp_frame_encode(&f, buf);
		buf[7] = 1; /* payload length 2^24 + n */
		cr_expect_eq(tcp_frame_length(buf, len), -EBADMSG, "type %u", types[t]);
		tcp_frame_encode(&f, buf);
		buf[2] = 1; /* reserved header bytes */
		cr_expect_eq(tcp_frame_length(buf, len), -EBADMSG, "type %u", types[t]);
		tcp_frame_encode(&f, buf);
		cr_expect_eq(tcp_frame_decode(buf, len - 1, &out), -EBADMSG, "short");
		cr_expect_eq(tcp_frame_decode(buf, len + 1, &out), -EBADMSG, "long");
	}
}

Test(tcp_wire_frame, welcome_needs_a_generation)
{
	struct tcp_frame f = { .type = TCP_FRAME_WELCOME, .value = 5, .gen = 0 }, out;
	uint8_t buf[TCP_FRAME_HDR_SIZE + TCP_FRAME_MAX_PAYLOAD];
	size_t len = tcp_frame_encode(&f, buf);

	cr_expect_eq(tcp_frame_length(buf, len), (int)len, "well framed");
	cr_expect_eq(tcp_frame_decode(buf, len, &out), -EBADMSG, "but generation 0");
}

/* Parses @len bytes as the control reader does; fills @types. Returns the count of whole
 * frames, or -1 at garbage. */
static int parse_stream(const uint8_t *buf, size_t len, uint16_t *types, size_t *used)
{
	size_t off = 0;
	int n = 0;

	for (;;) {
		struct tcp_frame f;
		int flen = tcp_frame_length(buf + off, len - off);

		if (flen == 0 || (flen > 0 && (size_t)flen > len - off))
			break;
		if (flen < 0 || tcp_frame_decode(buf + off, (size_t)flen, &f))
			return -1;
		types[n++] = f.type;
		off += (size_t)flen;
	}
	*used = off;
	return n;
}

Test(tcp_wire_frame, stream_of_frames)
{
	struct tcp_frame fs[5] = {
		{ .type = TCP_FRAME_WELCOME, .gen = 1 },
		{ .type = TCP_FRAME_HEARTBEAT, .value = 4 },
		{ .type = TCP_FRAME_ACK, .value = 10 },
		{ .type = TCP_FRAME_ACK, .value = 11 },
		{ .type = TCP_FRAME_CLOSE },
	};
	uint8_t buf[5 * (TCP_FRAME_HDR_SIZE + TCP_FRAME_MAX_PAYLOAD)];
	uint16_t types[8];
	size_t len = 0, used = 0;

	for (int i = 0; i < 5; i++)
		len += tcp_frame_encode(&fs[i], buf + len);
	cr_assert_eq(parse_stream(buf, len, types, &used), 5);
	cr_expect_eq(used, len);
	for (int i = 0; i < 5; i++)
		cr_expect_eq(types[i], fs[i].type);
	/* Cut anywhere: the whole frames before the cut parse, the rest waits. */
	for (size_t cut = 0; cut < len; cut++) {
		int n = parse_stream(buf, cut, types, &used);

		cr_expect_geq(n, 0);
		cr_expect_leq(used, cut);
		cr_expect_lt(cut - used, (size_t)52, "a whole frame was left unparsed at %zu", cut);
	}
	buf[52 + 16] = 0x7f; /* the third frame's type: garbage mid-stream */
	cr_expect_eq(parse_stream(buf, len, types, &used), -1);
}
