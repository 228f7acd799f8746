/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's wire: the 128-byte handle's own bytes and the control messages the
 * two sides exchange over the side channel, little-endian with explicit offsets, versioned,
 * and decoded with every count checked.
 */
#include <errno.h>
#include <string.h>

#include "ftcc/ib.h"
#include "ftcc/le.h"

#define MSG_MAGIC 0x43424946u /* "FIBC" */
#define MSG_VERSION 1
#define HANDLE_MAGIC 0x3148424943435446ull /* "FTCCIBH1" */
#define HANDLE_VERSION 1
#define HANDLE_OFF IB_HANDLE_TCP

/* Layout: magic 4, version 2, type 2, gen 4, status 4, addr 8, rkey 4, done_seq 8 (36),
 * back handle 64 (100), port: lid 2, link layer 1, mtu 1, gid 16, nqps 1 (121), then nqps x
 * (qpn 4, psn 4). */
#define OFF_PORT 100
#define OFF_QPS 121

size_t ib_msg_encode(const struct ib_msg *m, uint8_t *buf)
{
	uint8_t *q;
	int n = m->port.nqps > IB_MAX_QPS ? IB_MAX_QPS : m->port.nqps;

	memset(buf, 0, OFF_QPS);
	le_put32(buf, MSG_MAGIC);
	le_put16(buf + 4, MSG_VERSION);
	le_put16(buf + 6, m->type);
	le_put32(buf + 8, m->gen);
	le_put32(buf + 12, (uint32_t)m->status);
	le_put64(buf + 16, m->addr);
	le_put32(buf + 24, m->rkey);
	le_put64(buf + 28, m->done_seq);
	memcpy(buf + 36, m->back_handle, IB_HANDLE_TCP);
	le_put16(buf + OFF_PORT, m->port.lid);
	buf[OFF_PORT + 2] = m->port.link_layer;
	buf[OFF_PORT + 3] = m->port.mtu;
	memcpy(buf + OFF_PORT + 4, m->port.gid, 16);
	buf[OFF_PORT + 20] = (uint8_t)n;
	q = buf + OFF_QPS;
	for (int i = 0; i < n; i++, q += 8) {
		le_put32(q, m->port.qpn[i]);
		le_put32(q + 4, m->port.psn[i]);
	}
	return (size_t)(q - buf);
}

int ib_msg_decode(const uint8_t *buf, size_t len, struct ib_msg *m)
{
	const uint8_t *q;
	int n;

	memset(m, 0, sizeof(*m));
	if (len < OFF_QPS || le_get32(buf) != MSG_MAGIC)
		return -EBADMSG;
	if (le_get16(buf + 4) != MSG_VERSION)
		return -EPROTO;
	m->type = le_get16(buf + 6);
	if (m->type < IB_MSG_HELLO || m->type > IB_MSG_ERROR)
		return -EBADMSG;
	m->gen = le_get32(buf + 8);
	m->status = (int32_t)le_get32(buf + 12);
	m->addr = le_get64(buf + 16);
	m->rkey = le_get32(buf + 24);
	m->done_seq = le_get64(buf + 28);
	memcpy(m->back_handle, buf + 36, IB_HANDLE_TCP);
	m->port.lid = le_get16(buf + OFF_PORT);
	m->port.link_layer = buf[OFF_PORT + 2];
	m->port.mtu = buf[OFF_PORT + 3];
	memcpy(m->port.gid, buf + OFF_PORT + 4, 16);
	n = buf[OFF_PORT + 20];
	if (n > IB_MAX_QPS || len != OFF_QPS + (size_t)n * 8)
		return -EBADMSG;
	m->port.nqps = (uint8_t)n;
	q = buf + OFF_QPS;
	for (int i = 0; i < n; i++, q += 8) {
		m->port.qpn[i] = le_get32(q) & 0xffffff;
		m->port.psn[i] = le_get32(q + 4) & 0xffffff;
	}
	return 0;
}

void ib_handle_stamp(uint8_t *handle)
{
	le_put64(handle + HANDLE_OFF, HANDLE_MAGIC);
	le_put32(handle + HANDLE_OFF + 8, HANDLE_VERSION);
}

int ib_handle_check(const uint8_t *handle)
{
	if (le_get64(handle + HANDLE_OFF) != HANDLE_MAGIC)
		return -EINVAL;
	if (le_get32(handle + HANDLE_OFF + 8) != HANDLE_VERSION)
		return -EPROTO;
	return 0;
}
