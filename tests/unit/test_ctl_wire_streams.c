/* SPDX-License-Identifier: BSD-3-Clause */
/* The stream tail of the membership wire codec (control/wire.c): each stream's progress in
 * HELLO, ACK and HB, boundaries and each record's starts in VIEW and PROPOSE (and the records of
 * a HELLO), a SUSPECT's stream; round trips, byte for byte; the frames of a one-stream member
 * unchanged; and every malformed tail refused.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ftcc/ctl_wire.h"

#define NREC 3

static struct ctl_member_rec g_in[NREC + 1], g_out[NREC + 1];
static uint8_t g_buf[CTL_FRAME_MAX], g_buf2[CTL_FRAME_MAX];

static struct ctl_msg with_streams(unsigned type, uint32_t ns)
{
	struct ctl_msg m = { .type = (uint16_t)type,
			     .group_id = 0x0102030405060708ull,
			     .epoch = 9,
			     .member = 2,
			     .incarnation = 0x77,
			     .expected = 12,
			     .max_epoch = 11,
			     .next_op = 100,
			     .done_op = 90,
			     .boundary = 80,
			     .coord = 0,
			     .nstreams = ns };

	snprintf(m.group, sizeof(m.group), "grp");
	memset(g_in, 0, sizeof(g_in));
	for (uint32_t i = 0; i < NREC; i++) {
		g_in[i].id = 2 + 3 * i;
		g_in[i].incarnation = 0x100 + i;
		g_in[i].start = 10 * i;
		g_in[i].info_len = (uint16_t)(5 * i);
		memset(g_in[i].info, 'a' + (int)i, g_in[i].info_len);
		for (uint32_t t = 1; t < CTL_STREAMS_MAX; t++) {
			g_in[i].xstart[t - 1] = t < ns ? 1000 * t + i : 0;
		}
	}
	if (type == CTL_HELLO || type == CTL_VIEW || type == CTL_PROPOSE) {
		m.members = g_in;
		m.nmembers = NREC;
	}
	for (uint32_t t = 1; t < ns; t++) {
		*ctl_msg_next(&m, t) = 5000 + t;
		*ctl_msg_done(&m, t) = 4000 + t;
		*ctl_msg_boundary(&m, t) = 3000 + t;
	}
	return m;
}

static ssize_t decode(const uint8_t *buf, size_t len, struct ctl_msg *out, uint32_t cap)
{
	memset(g_out, 0xee, sizeof(g_out));
	out->members = g_out;
	out->members_cap = cap;
	return ctl_msg_decode(buf, len, out);
}

/* Sets the header's total length of the frame in @buf to @len. */
static void set_total(uint8_t *buf, uint32_t len)
{
	buf[8] = (uint8_t)len;
	buf[9] = (uint8_t)(len >> 8);
	buf[10] = (uint8_t)(len >> 16);
	buf[11] = (uint8_t)(len >> 24);
}

Test(ctl_wire_streams, round_trip_of_every_type_that_carries_streams)
{
	static const unsigned types[] = { CTL_HELLO, CTL_VIEW, CTL_PROPOSE, CTL_ACK, CTL_HB };

	for (uint32_t ns = 2; ns <= CTL_STREAMS_MAX; ns += 3) {
		for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
			struct ctl_msg m = with_streams(types[k], ns), d;
			ssize_t len = ctl_msg_encode(&m, g_buf, sizeof(g_buf)), len2;
			int view = types[k] == CTL_VIEW || types[k] == CTL_PROPOSE;

			cr_assert_gt(len, 0, "type %u ns %u: encode %zd", types[k], ns, len);
			cr_assert_eq(decode(g_buf, (size_t)len, &d, NREC), 0, "type %u ns %u",
				     types[k], ns);
			cr_expect_eq(d.nstreams, ns);
			for (uint32_t t = 1; t < ns; t++) {
				if (view) {
					cr_expect_eq(*ctl_msg_boundary(&d, t), 3000 + t);
				} else {
					cr_expect_eq(*ctl_msg_next(&d, t), 5000 + t);
					cr_expect_eq(*ctl_msg_done(&d, t), 4000 + t);
				}
			}
			for (uint32_t i = 0; i < d.nmembers; i++) {
				for (uint32_t t = 1; t < CTL_STREAMS_MAX; t++) {
					cr_expect_eq(*ctl_rec_start(&g_out[i], t),
						     t < ns ? 1000 * t + i : 0,
						     "type %u record %u stream %u", types[k], i, t);
				}
			}
			cr_expect_eq(d.nmembers, view || types[k] == CTL_HELLO ? NREC : 0);
			len2 = ctl_msg_encode(&d, g_buf2, sizeof(g_buf2));
			cr_assert_eq(len2, len);
			cr_expect_eq(memcmp(g_buf, g_buf2, (size_t)len), 0,
				     "type %u: not the same bytes again", types[k]);
		}
	}
}

Test(ctl_wire_streams, one_stream_is_no_tail)
{
	struct ctl_msg one = with_streams(CTL_VIEW, 1), zero = with_streams(CTL_VIEW, 0), d;
	struct ctl_msg two = with_streams(CTL_VIEW, 2);
	ssize_t l1 = ctl_msg_encode(&one, g_buf, sizeof(g_buf));
	ssize_t l0 = ctl_msg_encode(&zero, g_buf2, sizeof(g_buf2));
	ssize_t l2;

	cr_assert_gt(l1, 0);
	cr_assert_eq(l0, l1);
	cr_expect_eq(memcmp(g_buf, g_buf2, (size_t)l1), 0);
	cr_assert_eq(decode(g_buf, (size_t)l1, &d, NREC), 0);
	cr_expect_eq(d.nstreams, 1);
	l2 = ctl_msg_encode(&two, g_buf2, sizeof(g_buf2));
	/* 1 byte of count, one boundary, one start per record */
	cr_expect_eq(l2, l1 + 1 + 8 + NREC * 8);
}

Test(ctl_wire_streams, suspect_names_its_stream)
{
	struct ctl_msg m = { .type = CTL_SUSPECT, .peer = 4, .evidence = CTL_EV_LINK, .seq = 77 },
		       d;
	ssize_t l0 = ctl_msg_encode(&m, g_buf, sizeof(g_buf)), l;

	cr_assert_eq(l0, CTL_HDR_SIZE + 16);
	m.stream = 5;
	l = ctl_msg_encode(&m, g_buf, sizeof(g_buf));
	cr_assert_eq(l, l0 + 4);
	cr_assert_eq(decode(g_buf, (size_t)l, &d, 0), 0);
	cr_expect_eq(d.stream, 5);
	cr_expect_eq(d.seq, 77);
	/* stream 0 in a tail is not canonical; a stream past the last is not one */
	g_buf[l - 4] = 0;
	cr_expect_eq(decode(g_buf, (size_t)l, &d, 0), -EPROTO);
	g_buf[l - 4] = CTL_STREAMS_MAX;
	cr_expect_eq(decode(g_buf, (size_t)l, &d, 0), -EPROTO);
	m.stream = CTL_STREAMS_MAX;
	cr_expect_eq(ctl_msg_encode(&m, g_buf, sizeof(g_buf)), -EINVAL);
}

Test(ctl_wire_streams, malformed_tails_are_refused)
{
	struct ctl_msg m = with_streams(CTL_HB, 3), d;
	ssize_t l = ctl_msg_encode(&m, g_buf, sizeof(g_buf));
	size_t at = CTL_HDR_SIZE + 16; /* the count byte */

	cr_assert_gt(l, 0);
	cr_assert_eq(g_buf[at], 3);
	for (unsigned bad = 0; bad <= 255; bad++) {
		if (bad == 3) {
			continue;
		}
		g_buf[at] = (uint8_t)bad;
		cr_expect_eq(decode(g_buf, (size_t)l, &d, 0), -EPROTO, "count %u", bad);
	}
	g_buf[at] = 3;
	/* cut short, and one byte too many */
	set_total(g_buf, (uint32_t)l - 1);
	cr_expect_eq(decode(g_buf, (size_t)l - 1, &d, 0), -EPROTO);
	set_total(g_buf, (uint32_t)l + 1);
	g_buf[l] = 0;
	cr_expect_eq(decode(g_buf, (size_t)l + 1, &d, 0), -EPROTO);
	set_total(g_buf, (uint32_t)l);
	cr_expect_eq(decode(g_buf, (size_t)l, &d, 0), 0);
	/* too many streams to encode */
	m.nstreams = CTL_STREAMS_MAX + 1;
	cr_expect_eq(ctl_msg_encode(&m, g_buf, sizeof(g_buf)), -EINVAL);
}

Test(ctl_wire_streams, types_without_streams_take_no_tail)
{
	static const unsigned types[] = { CTL_LEAVE, CTL_READY, CTL_REFUSE };

	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		struct ctl_msg m = { .type = (uint16_t)types[k],
				     .code = CTL_REF_CLOSED,
				     .nstreams = 4 },
			       d;
		ssize_t l = ctl_msg_encode(&m, g_buf, sizeof(g_buf));

		cr_assert_gt(l, 0, "type %u: streams are ignored where not carried", types[k]);
		cr_assert_eq(decode(g_buf, (size_t)l, &d, 0), 0);
		cr_expect_eq(d.nstreams, 1);
		/* what a tail would look like there */
		g_buf[l] = 2;
		memset(g_buf + l + 1, 0, 16);
		set_total(g_buf, (uint32_t)l + 17);
		cr_expect_eq(decode(g_buf, (size_t)l + 17, &d, 0), -EPROTO, "type %u", types[k]);
	}
}

/* A members list larger than the caller's storage is -EMSGSIZE once the whole frame, tail
 * included, proved well formed; a bad tail is -EPROTO whatever the storage. */
Test(ctl_wire_streams, capacity_and_tail)
{
	static const unsigned types[] = { CTL_VIEW, CTL_HELLO };

	for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
		struct ctl_msg m = with_streams(types[k], 4), d;
		ssize_t l = ctl_msg_encode(&m, g_buf, sizeof(g_buf));

		cr_assert_gt(l, 0);
		cr_expect_eq(decode(g_buf, (size_t)l, &d, NREC - 1), -EMSGSIZE, "type %u",
			     types[k]);
		/* the last start cut off (the header says so too) */
		set_total(g_buf, (uint32_t)l - 8);
		cr_expect_eq(decode(g_buf, (size_t)l - 8, &d, NREC - 1), -EPROTO, "type %u",
			     types[k]);
		cr_expect_eq(decode(g_buf, (size_t)l - 8, &d, NREC), -EPROTO, "type %u", types[k]);
	}
}
