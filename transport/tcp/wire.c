/* SPDX-License-Identifier: BSD-3-Clause */
/* TCP wire format: encoding and validating decoding of handles, hellos, control frames and
 * chunk headers. Pure functions, no I/O; every byte from the network is checked here.
 */
#define _GNU_SOURCE
#include "wire.h"
#include "ftcc/le.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Wire address: family(2) port(2) ip(16) = 20 bytes. */
static void addr_put(uint8_t *p, const struct tcp_wire_addr *a)
{
	le_put16(p, a->family);
	le_put16(p + 2, a->port);
	memcpy(p + 4, a->ip, 16);
}

static int addr_get(const uint8_t *p, struct tcp_wire_addr *a)
{
	a->family = le_get16(p);
	a->port = le_get16(p + 2);
	memcpy(a->ip, p + 4, 16);
	if (a->family != AF_INET && a->family != AF_INET6)
		return -EBADMSG;
	if (a->port == 0)
		return -EBADMSG;
	return 0;
}

/* Common prefix of handles and hellos: magic(4) version(2) kind(2). */
static int prefix_check(const uint8_t *buf, uint16_t kind)
{
	if (le_get32(buf) != TCP_WIRE_MAGIC)
		return -EBADMSG;
	if (le_get16(buf + 4) != TCP_WIRE_VERSION)
		return -EPROTO;
	if (le_get16(buf + 6) != kind)
		return -EBADMSG;
	return 0;
}

static void prefix_put(uint8_t *buf, uint16_t kind)
{
	le_put32(buf, TCP_WIRE_MAGIC);
	le_put16(buf + 4, TCP_WIRE_VERSION);
	le_put16(buf + 6, kind);
}

#define KIND_HANDLE 0x4844 /* "HD" */
#define KIND_HELLO 0x4c48  /* "HL" */

void tcp_handle_encode(const struct tcp_handle *h, uint8_t *buf)
{
	memset(buf, 0, TCP_HANDLE_WIRE_SIZE);
	prefix_put(buf, KIND_HANDLE);
	addr_put(buf + 8, &h->addr);
	le_put64(buf + 28, h->listen_id);
	le_put64(buf + 36, h->comm_id);
	le_put64(buf + 44, h->incarnation);
	/* bytes 52..63 reserved, zero */
}

int tcp_handle_decode(const uint8_t *buf, size_t len, struct tcp_handle *h)
{
	int rc;

	if (len < TCP_HANDLE_WIRE_SIZE)
		return -EBADMSG;
	rc = prefix_check(buf, KIND_HANDLE);
	if (rc)
		return rc;
	rc = addr_get(buf + 8, &h->addr);
	if (rc)
		return rc;
	h->listen_id = le_get64(buf + 28);
	h->comm_id = le_get64(buf + 36);
	h->incarnation = le_get64(buf + 44);
	if (h->listen_id == 0 || h->incarnation == 0)
		return -EBADMSG;
	for (int i = 52; i < TCP_HANDLE_WIRE_SIZE; i++)
		if (buf[i])
			return -EBADMSG;
	return 0;
}

void tcp_hello_encode(const struct tcp_hello *h, uint8_t *buf)
{
	memset(buf, 0, TCP_HELLO_WIRE_SIZE);
	prefix_put(buf, KIND_HELLO);
	le_put16(buf + 8, h->type);
	le_put16(buf + 10, h->stream);
	le_put16(buf + 12, h->nstreams);
	le_put32(buf + 14, h->gen);
	le_put64(buf + 18, h->listen_id);
	le_put64(buf + 26, h->comm_id);
	le_put64(buf + 34, h->listener_inc);
	le_put64(buf + 42, h->incarnation);
	le_put64(buf + 50, h->conn_id);
	addr_put(buf + 58, &h->self);
	/* bytes 78..79 reserved */
}

int tcp_hello_decode(const uint8_t *buf, size_t len, struct tcp_hello *h)
{
	int rc;

	if (len < TCP_HELLO_WIRE_SIZE)
		return -EBADMSG;
	rc = prefix_check(buf, KIND_HELLO);
	if (rc)
		return rc;
	h->type = le_get16(buf + 8);
	h->stream = le_get16(buf + 10);
	h->nstreams = le_get16(buf + 12);
	h->gen = le_get32(buf + 14);
	h->listen_id = le_get64(buf + 18);
	h->comm_id = le_get64(buf + 26);
	h->listener_inc = le_get64(buf + 34);
	h->incarnation = le_get64(buf + 42);
	h->conn_id = le_get64(buf + 50);
	rc = addr_get(buf + 58, &h->self);
	if (rc)
		return rc;
	if (buf[78] || buf[79])
		return -EBADMSG;
	switch (h->type) {
	case TCP_HELLO_CTRL:
		if (h->nstreams < 1 || h->nstreams > TCP_MAX_STREAMS || h->gen == 0)
			return -EBADMSG;
		break;
	case TCP_HELLO_DATA:
		if (h->stream >= TCP_MAX_STREAMS || h->gen == 0)
			return -EBADMSG;
		break;
	case TCP_HELLO_PROBE:
		return 0;
	default:
		return -EBADMSG;
	}
	if (h->conn_id == 0 || h->incarnation == 0 || h->listener_inc == 0)
		return -EBADMSG;
	return 0;
}

void tcp_chunk_encode(const struct tcp_chunk *c, uint8_t *buf)
{
	le_put32(buf, c->tag);
	le_put64(buf + 4, c->seq);
	le_put64(buf + 12, c->total);
	le_put64(buf + 20, c->offset);
	le_put32(buf + 28, 0x4b4e4843u); /* "CHNK" guard against a desynchronised stream */
	le_put64(buf + 32, c->len);
}

int tcp_chunk_decode(const uint8_t *buf, size_t len, struct tcp_chunk *c)
{
	if (len < TCP_CHUNK_WIRE_SIZE)
		return -EBADMSG;
	if (le_get32(buf + 28) != 0x4b4e4843u)
		return -EBADMSG;
	c->tag = le_get32(buf);
	c->seq = le_get64(buf + 4);
	c->total = le_get64(buf + 12);
	c->offset = le_get64(buf + 20);
	c->len = le_get64(buf + 32);
	/* 1 TiB bounds any single transfer (NCCL_MAX_NET_SIZE_BYTES). */
	if (c->total > (1ull << 40) || c->offset > c->total || c->len > c->total - c->offset)
		return -EBADMSG;
	return 0;
}

static size_t frame_payload_len(uint16_t type)
{
	switch (type) {
	case TCP_FRAME_HEARTBEAT:
	case TCP_FRAME_ACK:
		return 8;
	case TCP_FRAME_WELCOME:
		return 4 + 8 + TCP_RESUME_WINDOW / 8;
	case TCP_FRAME_CLOSE:
		return 0;
	default:
		return SIZE_MAX;
	}
}

/* Frame header: type(2) reserved(2) payload length(4). */
size_t tcp_frame_encode(const struct tcp_frame *f, uint8_t *buf)
{
	size_t plen = frame_payload_len(f->type);

	le_put16(buf, f->type);
	le_put16(buf + 2, 0);
	le_put32(buf + 4, (uint32_t)plen);
	switch (f->type) {
	case TCP_FRAME_HEARTBEAT:
	case TCP_FRAME_ACK:
		le_put64(buf + 8, f->value);
		break;
	case TCP_FRAME_WELCOME:
		le_put32(buf + 8, f->gen);
		le_put64(buf + 12, f->value);
		memcpy(buf + 20, f->done, sizeof(f->done));
		break;
	default:
		break;
	}
	return TCP_FRAME_HDR_SIZE + plen;
}

int tcp_frame_length(const uint8_t *buf, size_t len)
{
	size_t plen;

	if (len < TCP_FRAME_HDR_SIZE)
		return 0;
	plen = frame_payload_len(le_get16(buf));
	if (plen == SIZE_MAX || le_get16(buf + 2) != 0 || le_get32(buf + 4) != plen)
		return -EBADMSG;
	return (int)(TCP_FRAME_HDR_SIZE + plen);
}

int tcp_frame_decode(const uint8_t *buf, size_t len, struct tcp_frame *f)
{
	int flen = tcp_frame_length(buf, len);

	if (flen <= 0 || (size_t)flen != len)
		return -EBADMSG;
	memset(f, 0, sizeof(*f));
	f->type = le_get16(buf);
	switch (f->type) {
	case TCP_FRAME_HEARTBEAT:
	case TCP_FRAME_ACK:
		f->value = le_get64(buf + 8);
		break;
	case TCP_FRAME_WELCOME:
		f->gen = le_get32(buf + 8);
		f->value = le_get64(buf + 12);
		memcpy(f->done, buf + 20, sizeof(f->done));
		if (f->gen == 0)
			return -EBADMSG;
		break;
	default:
		break;
	}
	return 0;
}

int tcp_wire_addr_from_sa(struct tcp_wire_addr *w, const struct sockaddr *sa)
{
	memset(w, 0, sizeof(*w));
	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		w->family = AF_INET;
		w->port = ntohs(in->sin_port);
		memcpy(w->ip, &in->sin_addr, 4);
		return 0;
	}
	if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		w->family = AF_INET6;
		w->port = ntohs(in6->sin6_port);
		memcpy(w->ip, &in6->sin6_addr, 16);
		return 0;
	}
	return -EAFNOSUPPORT;
}

socklen_t tcp_wire_addr_to_sa(const struct tcp_wire_addr *w, struct sockaddr_storage *ss)
{
	memset(ss, 0, sizeof(*ss));
	if (w->family == AF_INET) {
		struct sockaddr_in *in = (struct sockaddr_in *)ss;

		in->sin_family = AF_INET;
		in->sin_port = htons(w->port);
		memcpy(&in->sin_addr, w->ip, 4);
		return sizeof(*in);
	}
	struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)ss;

	in6->sin6_family = AF_INET6;
	in6->sin6_port = htons(w->port);
	memcpy(&in6->sin6_addr, w->ip, 16);
	return sizeof(*in6);
}

void tcp_wire_addr_str(const struct tcp_wire_addr *w, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	inet_ntop(w->family == AF_INET ? AF_INET : AF_INET6, w->ip, ip, sizeof(ip));
	if (w->family == AF_INET)
		snprintf(buf, len, "%s:%u", ip, w->port);
	else
		snprintf(buf, len, "[%s]:%u", ip, w->port);
}
