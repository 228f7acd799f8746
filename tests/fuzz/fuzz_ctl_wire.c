/* SPDX-License-Identifier: BSD-3-Clause */
/* Fuzz target for the membership wire codec (control/wire.c): the input decoded as one frame,
 * as a body behind a valid header, and as a stream of frames fed in pieces (as a control
 * connection's reader sees it). Every accepted frame must re-encode to the same bytes and obey
 * every rule of the header; violations abort().
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/ctl_wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond)                                                                                \
	do {                                                                                       \
		if (!(cond))                                                                       \
			abort();                                                                   \
	} while (0)

#define MAX_FRAMES 4096
#define MAX_PIECE 251

/* Scratch space, fully rewritten before each use: nothing carries over between inputs. */
static struct ctl_member_rec recs[CTL_MAX_MEMBERS], recs2[CTL_MAX_MEMBERS];
static uint8_t enc[CTL_FRAME_MAX];
static uint8_t framed[CTL_FRAME_MAX];
static uint8_t rbuf[CTL_FRAME_MAX + MAX_PIECE];

static int carries_members(unsigned type)
{
	return type == CTL_HELLO || type == CTL_VIEW || type == CTL_PROPOSE;
}

/* What a successful decode promises about @m. */
static void check_decoded(const struct ctl_msg *m)
{
	size_t n;

	CHECK(m->type >= 1 && m->type <= CTL_TYPE_MAX);
	n = strnlen(m->group, CTL_GROUP_MAX);
	CHECK(n < CTL_GROUP_MAX);
	if (m->type == CTL_HELLO) {
		CHECK((m->flags & ~(uint32_t)CTL_HELLO_FLAGS) == 0);
		CHECK(m->expected >= 1 && m->expected <= CTL_MAX_MEMBERS);
		CHECK(n >= 1);
		for (size_t i = 0; i < n; i++) {
			CHECK(m->group[i] >= 0x21 && m->group[i] <= 0x7e);
		}
	} else {
		CHECK(n == 0 && m->flags == 0 && m->expected == 0 && m->member == 0 &&
		      m->listen_port == 0);
	}
	CHECK(strnlen(m->text, CTL_TEXT_MAX) < CTL_TEXT_MAX);
	/* REFUSE and LEAVE carry a text; REFUSE alone a code and a hint */
	CHECK(m->type == CTL_REFUSE || m->type == CTL_LEAVE || m->text[0] == '\0');
	CHECK(m->type == CTL_REFUSE || (m->code == 0 && m->hint == 0));
	if (m->type == CTL_REFUSE) {
		CHECK(m->code >= 1 && m->code <= CTL_REF_MAX);
	}
	if (m->type == CTL_SUSPECT) {
		CHECK(m->evidence >= 1 && m->evidence <= CTL_EV_MAX);
	} else {
		CHECK(m->evidence == 0 && m->peer == 0 && m->seq == 0);
	}
	CHECK(carries_members(m->type) || m->nmembers == 0);
	/* streams: a tail only where a type carries one, and a stream only in a SUSPECT */
	CHECK(m->nstreams >= 1 && m->nstreams <= CTL_STREAMS_MAX);
	CHECK(carries_members(m->type) || m->type == CTL_ACK || m->type == CTL_HB ||
	      m->nstreams == 1);
	CHECK(m->type == CTL_SUSPECT ? m->stream < CTL_STREAMS_MAX : m->stream == 0);
	CHECK(m->nmembers <= CTL_MAX_MEMBERS && m->nmembers <= m->members_cap);
	for (uint32_t i = 0; i < m->nmembers; i++) {
		const struct ctl_member_rec *r = &m->members[i];

		CHECK(r->id != CTL_NO_MEMBER && (i == 0 || r->id > m->members[i - 1].id));
		CHECK((r->flags & ~(uint32_t)CTL_MF_FLAGS) == 0 && r->info_len <= CTL_INFO_MAX);
		for (size_t k = r->info_len; k < CTL_INFO_MAX; k++) {
			CHECK(r->info[k] == 0);
		}
	}
}

static int rec_equal(const struct ctl_member_rec *a, const struct ctl_member_rec *b)
{
	return a->id == b->id && a->flags == b->flags && a->incarnation == b->incarnation &&
	       a->done == b->done && a->start == b->start && a->info_len == b->info_len &&
	       !memcmp(a->info, b->info, CTL_INFO_MAX) &&
	       !memcmp(a->xstart, b->xstart, sizeof(a->xstart));
}

static int msg_equal(const struct ctl_msg *a, const struct ctl_msg *b)
{
	if (a->type != b->type || a->group_id != b->group_id || a->epoch != b->epoch ||
	    a->member != b->member || a->flags != b->flags || a->incarnation != b->incarnation ||
	    a->expected != b->expected || a->max_epoch != b->max_epoch ||
	    a->listen_port != b->listen_port || a->seq != b->seq || strcmp(a->group, b->group) ||
	    a->next_op != b->next_op || a->done_op != b->done_op || a->boundary != b->boundary ||
	    a->coord != b->coord || a->peer != b->peer || a->evidence != b->evidence ||
	    a->code != b->code || a->hint != b->hint || strcmp(a->text, b->text) ||
	    a->nmembers != b->nmembers || a->nstreams != b->nstreams || a->stream != b->stream ||
	    memcmp(a->xnext, b->xnext, sizeof(a->xnext)) ||
	    memcmp(a->xdone, b->xdone, sizeof(a->xdone)) ||
	    memcmp(a->xboundary, b->xboundary, sizeof(a->xboundary))) {
		return 0;
	}
	for (uint32_t i = 0; i < a->nmembers; i++) {
		if (!rec_equal(&a->members[i], &b->members[i])) {
			return 0;
		}
	}
	return 1;
}

/* One candidate frame of @len bytes at @p: header check and decode must agree; an accepted
 * frame round-trips byte for byte. Returns its type, or 0 when refused. */
static uint16_t check_frame(const uint8_t *p, size_t len)
{
	struct ctl_msg m = { .members = recs, .members_cap = CTL_MAX_MEMBERS };
	struct ctl_msg m2 = { .members = recs2, .members_cap = CTL_MAX_MEMBERS };
	size_t total = 0;
	int fc = ctl_frame_check(p, len, &total);
	int rc = ctl_msg_decode(p, len, &m);

	CHECK(fc == 0 || fc == -EAGAIN || fc == -EPROTO || fc == -EPROTONOSUPPORT);
	CHECK((fc == -EAGAIN) == (len < CTL_HDR_SIZE));
	CHECK(fc != 0 || (total >= CTL_HDR_SIZE && total <= CTL_FRAME_MAX));
	CHECK(rc == 0 || rc == -EPROTO || rc == -EPROTONOSUPPORT);
	CHECK(m.members == recs && m.members_cap == CTL_MAX_MEMBERS);
	/* The header verdict carries over: decode never accepts what frame_check refused. */
	CHECK((fc == -EPROTONOSUPPORT) == (rc == -EPROTONOSUPPORT));
	CHECK(fc == 0 || rc != 0);
	if (rc) {
		CHECK(m.nmembers == 0);
		return 0;
	}
	CHECK(total == len);
	check_decoded(&m);

	CHECK(ctl_msg_encode(&m, enc, len) == (ssize_t)len);
	CHECK(!memcmp(enc, p, len));
	CHECK(ctl_msg_encode(&m, enc, len - 1) == -EMSGSIZE);
	CHECK(ctl_msg_decode(enc, len, &m2) == 0);
	CHECK(msg_equal(&m, &m2));
	/* A frame is exactly its length, and its members need their room. */
	CHECK(ctl_msg_decode(p, len - 1, &m2) == -EPROTO);
	if (m.nmembers) {
		m2.members_cap = m.nmembers - 1;
		CHECK(ctl_msg_decode(p, len, &m2) == -EMSGSIZE);
	}
	return m.type;
}

/* The input after its first byte as the body of a frame whose type the first byte picks, so
 * that arbitrary bytes reach the body decoders without first guessing a header. */
static void fuzz_body(const uint8_t *data, size_t size)
{
	size_t body;

	if (size < 1) {
		return;
	}
	body = size - 1;
	if (body > CTL_FRAME_MAX - CTL_HDR_SIZE) {
		body = CTL_FRAME_MAX - CTL_HDR_SIZE;
	}
	memset(framed, 0, CTL_HDR_SIZE);
	framed[0] = (uint8_t)CTL_WIRE_MAGIC;
	framed[1] = (uint8_t)(CTL_WIRE_MAGIC >> 8);
	framed[2] = (uint8_t)(CTL_WIRE_MAGIC >> 16);
	framed[3] = (uint8_t)(CTL_WIRE_MAGIC >> 24);
	framed[4] = CTL_WIRE_VERSION;
	framed[6] = (uint8_t)(data[0] % CTL_TYPE_MAX + 1);
	framed[8] = (uint8_t)(CTL_HDR_SIZE + body);
	framed[9] = (uint8_t)((CTL_HDR_SIZE + body) >> 8);
	framed[10] = (uint8_t)((CTL_HDR_SIZE + body) >> 16);
	memcpy(framed + CTL_HDR_SIZE, data + 1, body);
	check_frame(framed, CTL_HDR_SIZE + body);
}

/* Parses @len bytes as a stream of frames, as a reader does. Records each frame's type in
 * @types; returns how many, in *@used how many bytes they took, and sets *@bad when it stopped
 * at a refused frame (where the reader fails the connection). */
static size_t parse_frames(const uint8_t *buf, size_t len, uint16_t *types, size_t *used, int *bad)
{
	size_t off = 0, n = 0, total;

	*bad = 0;
	for (;;) {
		int rc = ctl_frame_check(buf + off, len - off, &total);

		if (rc == -EAGAIN) {
			break;
		}
		if (rc) {
			*bad = 1;
			break;
		}
		if (total > len - off) {
			break;
		}
		types[n] = check_frame(buf + off, total);
		if (!types[n]) {
			*bad = 1;
			break;
		}
		off += total;
		n++;
	}
	*used = off;
	return n;
}

/* Feeds @data to a reader in pieces whose sizes come from the input itself; it must see the
 * frames of the one-shot parse, and stop where that one stopped. */
static void fuzz_stream(const uint8_t *data, size_t size)
{
	static uint16_t whole[MAX_FRAMES], pieces[MAX_FRAMES];
	size_t nwhole, npieces = 0, wused, used, got = 0, pos = 0, k = 0;
	int wbad, bad = 0;

	if (size / CTL_HDR_SIZE >= MAX_FRAMES) {
		size = (MAX_FRAMES - 1) * CTL_HDR_SIZE;
	}
	nwhole = parse_frames(data, size, whole, &wused, &wbad);
	CHECK(wused <= size);
	while (pos < size && !bad) {
		size_t want = (size_t)data[k++ % size] % MAX_PIECE + 1;

		if (want > size - pos) {
			want = size - pos;
		}
		/* What is left over is part of one frame, shorter than CTL_FRAME_MAX. */
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
	check_frame(data, size);
	fuzz_body(data, size);
	fuzz_stream(data, size);
	return 0;
}
