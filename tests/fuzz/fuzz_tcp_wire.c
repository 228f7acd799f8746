/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target for the TCP wire format: every decoder of transport/tcp/wire.c on the same input,
 * the control-frame stream parsed whole and in pieces (as the control reader sees it), and the
 * round-trip properties of each accepted value, checked with abort().
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../transport/tcp/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

#define READER_BUF 1024 /* size of the control reader's input buffer */
#define MAX_FRAMES 4096

static int addr_equal(const struct tcp_wire_addr *a, const struct tcp_wire_addr *b)
{
	return a->family == b->family && a->port == b->port && !memcmp(a->ip, b->ip, 16);
}

/* The address survives sockaddr and back; its string form fits and is terminated. */
static void check_addr(const struct tcp_wire_addr *a)
{
	struct sockaddr_storage ss;
	struct tcp_wire_addr back;
	char str[64];

	CHECK(tcp_wire_addr_to_sa(a, &ss) > 0);
	CHECK(tcp_wire_addr_from_sa(&back, (const struct sockaddr *)&ss) == 0);
	CHECK(back.family == a->family && back.port == a->port);
	CHECK(!memcmp(back.ip, a->ip, a->family == AF_INET ? 4 : 16));
	tcp_wire_addr_str(a, str, sizeof(str));
	CHECK(memchr(str, '\0', sizeof(str)) != NULL);
	tcp_wire_addr_str(a, str, 7); /* truncated, still terminated */
	CHECK(memchr(str, '\0', 7) != NULL);
}

static void fuzz_handle(const uint8_t *data, size_t size)
{
	struct tcp_handle h, h2;
	uint8_t enc[TCP_HANDLE_WIRE_SIZE];
	int rc = tcp_handle_decode(data, size, &h);

	CHECK(rc == 0 || rc == -EBADMSG || rc == -EPROTO);
	if (rc)
		return;
	CHECK(size >= TCP_HANDLE_WIRE_SIZE);
	CHECK(h.listen_id != 0 && h.incarnation != 0 && h.addr.port != 0);
	check_addr(&h.addr);
	/* Every byte of a handle is canonical: re-encoding gives the input back. */
	tcp_handle_encode(&h, enc);
	CHECK(!memcmp(enc, data, TCP_HANDLE_WIRE_SIZE));
	CHECK(tcp_handle_decode(enc, sizeof(enc), &h2) == 0);
	CHECK(addr_equal(&h.addr, &h2.addr) && h.listen_id == h2.listen_id &&
	      h.comm_id == h2.comm_id && h.incarnation == h2.incarnation);
}

static int hello_equal(const struct tcp_hello *a, const struct tcp_hello *b)
{
	return a->type == b->type && a->stream == b->stream && a->nstreams == b->nstreams &&
	       a->gen == b->gen && a->listen_id == b->listen_id && a->comm_id == b->comm_id &&
	       a->listener_inc == b->listener_inc && a->incarnation == b->incarnation &&
	       a->conn_id == b->conn_id && addr_equal(&a->self, &b->self);
}

static void fuzz_hello(const uint8_t *data, size_t size)
{
	struct tcp_hello h, h2;
	uint8_t enc[TCP_HELLO_WIRE_SIZE];
	int rc = tcp_hello_decode(data, size, &h);

	CHECK(rc == 0 || rc == -EBADMSG || rc == -EPROTO);
	if (rc)
		return;
	CHECK(size >= TCP_HELLO_WIRE_SIZE);
	CHECK(h.type >= TCP_HELLO_CTRL && h.type <= TCP_HELLO_PROBE);
	if (h.type == TCP_HELLO_CTRL)
		CHECK(h.nstreams >= 1 && h.nstreams <= TCP_MAX_STREAMS && h.gen);
	if (h.type == TCP_HELLO_DATA)
		CHECK(h.stream < TCP_MAX_STREAMS && h.gen);
	if (h.type != TCP_HELLO_PROBE)
		CHECK(h.conn_id && h.incarnation && h.listener_inc);
	check_addr(&h.self);
	tcp_hello_encode(&h, enc);
	CHECK(!memcmp(enc, data, TCP_HELLO_WIRE_SIZE));
	CHECK(tcp_hello_decode(enc, sizeof(enc), &h2) == 0);
	CHECK(hello_equal(&h, &h2));
}

static void fuzz_chunk(const uint8_t *data, size_t size)
{
	struct tcp_chunk c, c2;
	uint8_t enc[TCP_CHUNK_WIRE_SIZE];
	int rc = tcp_chunk_decode(data, size, &c);

	CHECK(rc == 0 || rc == -EBADMSG);
	if (rc)
		return;
	CHECK(c.total <= (1ull << 40) && c.offset <= c.total && c.len <= c.total - c.offset);
	tcp_chunk_encode(&c, enc);
	CHECK(!memcmp(enc, data, TCP_CHUNK_WIRE_SIZE));
	CHECK(tcp_chunk_decode(enc, sizeof(enc), &c2) == 0);
	CHECK(c.tag == c2.tag && c.seq == c2.seq && c.total == c2.total && c.offset == c2.offset &&
	      c.len == c2.len);
}

/* One whole frame of @len bytes at @p: decode, check, re-encode. Returns its type. */
static uint16_t check_frame(const uint8_t *p, size_t len)
{
	struct tcp_frame f, f2;
	uint8_t enc[TCP_FRAME_HDR_SIZE + TCP_FRAME_MAX_PAYLOAD];
	int rc = tcp_frame_decode(p, len, &f);

	CHECK(rc == 0 || rc == -EBADMSG);
	if (rc)
		return 0;
	CHECK(f.type >= TCP_FRAME_HEARTBEAT && f.type <= TCP_FRAME_CLOSE);
	CHECK(f.type != TCP_FRAME_WELCOME || f.gen != 0);
	CHECK(tcp_frame_encode(&f, enc) == len);
	CHECK(!memcmp(enc, p, len));
	CHECK(tcp_frame_decode(enc, len, &f2) == 0);
	CHECK(f.type == f2.type && f.value == f2.value && f.gen == f2.gen &&
	      !memcmp(f.done, f2.done, sizeof(f.done)));
	/* A frame is exactly its length: one byte less or more is refused. */
	CHECK(tcp_frame_decode(p, len - 1, &f2) == -EBADMSG);
	return f.type;
}

/* Parses @len bytes as a stream of frames, the way the control reader does. Records each
 * frame's type in @types; returns how many, in *@used how many bytes they took, and sets
 * *@bad when it stopped at garbage (where the reader fails the connection). */
static size_t parse_frames(const uint8_t *buf, size_t len, uint16_t *types, size_t *used, int *bad)
{
	size_t off = 0, n = 0;

	*bad = 0;
	for (;;) {
		int flen = tcp_frame_length(buf + off, len - off);

		CHECK(flen <= 0 || flen == 8 || flen == 16 || flen == 52);
		CHECK(flen != 0 || len - off < TCP_FRAME_HDR_SIZE);
		CHECK(flen >= 0 || flen == -EBADMSG);
		if (flen < 0 || (flen > 0 && (size_t)flen <= len - off &&
				 (types[n] = check_frame(buf + off, (size_t)flen)) == 0)) {
			*bad = 1;
			break;
		}
		if (flen == 0 || (size_t)flen > len - off)
			break;
		off += (size_t)flen;
		n++;
	}
	*used = off;
	return n;
}

/* Feeds @data to a reader with a READER_BUF buffer in pieces whose sizes come from the input
 * itself; it must see the frames of the one-shot parse, and stop where that one stopped. */
static void fuzz_frame_stream(const uint8_t *data, size_t size)
{
	uint16_t whole[MAX_FRAMES], pieces[MAX_FRAMES];
	uint8_t rbuf[READER_BUF];
	size_t nwhole, npieces = 0, wused, used, got = 0, pos = 0, k = 0;
	int wbad, bad = 0;

	if (size / TCP_FRAME_HDR_SIZE >= MAX_FRAMES)
		size = (MAX_FRAMES - 1) * TCP_FRAME_HDR_SIZE;
	nwhole = parse_frames(data, size, whole, &wused, &wbad);
	CHECK(wused <= size);
	while (pos < size && !bad) {
		size_t want = (size_t)data[k++ % size] % 61 + 1;

		if (want > size - pos)
			want = size - pos;
		/* A frame is at most 72 bytes: what is left over never fills the buffer. */
		CHECK(want <= sizeof(rbuf) - got);
		memcpy(rbuf + got, data + pos, want);
		got += want;
		pos += want;
		npieces += parse_frames(rbuf, got, pieces + npieces, &used, &bad);
		memmove(rbuf, rbuf + used, got - used);
		got -= used;
	}
	CHECK(npieces == nwhole && bad == wbad);
	CHECK(!memcmp(pieces, whole, npieces * sizeof(pieces[0])));
	CHECK(bad || pos - got == wused);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fuzz_handle(data, size);
	fuzz_hello(data, size);
	fuzz_chunk(data, size);
	fuzz_frame_stream(data, size);
	/* Past an 8-byte prefix too, so one input can be a frame stream after junk. */
	if (size > 8) {
		fuzz_chunk(data + 8, size - 8);
		fuzz_frame_stream(data + 8, size - 8);
	}
	return 0;
}
