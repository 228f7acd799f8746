/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the membership wire codec (control/wire.c): round trips of every frame type,
 * every header and body rule on decode, truncation and trailing bytes, member capacity, the
 * same rules on encode (group ids and names: test_ctl_wire_names.c).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/ctl_wire.h"

#define BODY CTL_HDR_SIZE /* body offset */
#define NREC 3		  /* members in the sample frames */

/* Criterion runs each test in its own process, so these are per test. */
static struct ctl_member_rec g_in[CTL_MAX_MEMBERS + 1];
static struct ctl_member_rec g_out[CTL_MAX_MEMBERS];
static uint8_t g_buf[CTL_FRAME_MAX + 64];
static uint8_t g_buf2[CTL_FRAME_MAX + 64];

static void put16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

static void put32(uint8_t *p, uint32_t v)
{
	put16(p, (uint16_t)v);
	put16(p + 2, (uint16_t)(v >> 16));
}

static uint32_t get32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Three member records with ids 2, 5, 9 and info blobs of 0, 7 and CTL_INFO_MAX bytes. */
static void sample_members(struct ctl_member_rec *r)
{
	static const uint32_t ids[NREC] = { 2, 5, 9 };
	static const uint16_t lens[NREC] = { 0, 7, CTL_INFO_MAX };

	memset(r, 0, NREC * sizeof(*r));
	for (int i = 0; i < NREC; i++) {
		r[i].id = ids[i];
		r[i].flags = (uint32_t)i & CTL_MF_FLAGS;
		r[i].incarnation = 0x1000000000000001ull * (uint64_t)(i + 1);
		r[i].done = 0xfedcba9876543210ull - (uint64_t)i;
		r[i].start = 0x0123456789abcdefull + (uint64_t)i;
		r[i].info_len = lens[i];
		for (int k = 0; k < lens[i]; k++) {
			r[i].info[k] = (uint8_t)(k * 31 + i);
		}
	}
}

/* A message of @type with every field of the struct set to a valid, nonzero value, whether the
 * type carries it or not (encode must ignore the others). */
static struct ctl_msg sample(unsigned type)
{
	struct ctl_msg m = {
		.type = (uint16_t)type,
		.group_id = 0x0102030405060708ull,
		.epoch = 0x1112131415161718ull,
		.member = 7,
		.flags = CTL_HELLO_JOIN | CTL_HELLO_CATCHUP,
		.incarnation = 0x2122232425262728ull,
		.expected = 12,
		.max_epoch = 0x3132333435363738ull,
		.listen_port = 0x4321,
		.next_op = 0x4142434445464748ull,
		.done_op = 0x5152535455565758ull,
		.boundary = 0x6162636465666768ull,
		.coord = CTL_NO_MEMBER,
		.peer = 3,
		.evidence = CTL_EV_SILENCE,
		.seq = 0x7172737475767778ull,
		.code = CTL_REF_NOT_COORD,
		.hint = 4,
		.nmembers = NREC,
		.members_cap = NREC,
		.members = g_in,
	};

	strcpy(m.group, "job-42_a.b:c~!");
	strcpy(m.text, "coordinator is member 4");
	sample_members(g_in);
	return m;
}

/* The decoded form of sample(@type): the fields the type does not carry are zero. */
static struct ctl_msg projected(const struct ctl_msg *s)
{
	struct ctl_msg m = *s;
	unsigned t = s->type;
	int hello = t == CTL_HELLO, view = t == CTL_VIEW || t == CTL_PROPOSE;

	if (!hello) {
		m.member = m.flags = m.expected = 0;
		m.incarnation = m.max_epoch = 0;
		m.listen_port = 0;
		m.group[0] = '\0';
	}
	if (!hello && t != CTL_ACK && t != CTL_HB) {
		m.next_op = m.done_op = 0;
	}
	if (!view) {
		m.boundary = m.coord = 0;
	}
	if (t != CTL_SUSPECT) {
		m.peer = m.evidence = 0;
		m.seq = 0;
	}
	if (t != CTL_REFUSE) {
		m.code = m.hint = 0;
	}
	if (t != CTL_REFUSE && t != CTL_LEAVE) {
		m.text[0] = '\0';
	}
	if (!hello && !view) {
		m.nmembers = 0;
	}
	return m;
}

static void expect_msg_eq(const struct ctl_msg *a, const struct ctl_msg *b)
{
	cr_expect_eq(a->type, b->type);
	cr_expect_eq(a->group_id, b->group_id);
	cr_expect_eq(a->epoch, b->epoch);
	cr_expect_eq(a->member, b->member);
	cr_expect_eq(a->flags, b->flags);
	cr_expect_eq(a->incarnation, b->incarnation);
	cr_expect_eq(a->expected, b->expected);
	cr_expect_eq(a->max_epoch, b->max_epoch);
	cr_expect_eq(a->listen_port, b->listen_port);
	cr_expect_str_eq(a->group, b->group);
	cr_expect_eq(a->next_op, b->next_op);
	cr_expect_eq(a->done_op, b->done_op);
	cr_expect_eq(a->boundary, b->boundary);
	cr_expect_eq(a->coord, b->coord);
	cr_expect_eq(a->peer, b->peer);
	cr_expect_eq(a->evidence, b->evidence);
	cr_expect_eq(a->seq, b->seq);
	cr_expect_eq(a->code, b->code);
	cr_expect_eq(a->hint, b->hint);
	cr_expect_str_eq(a->text, b->text);
	cr_assert_eq(a->nmembers, b->nmembers);
	for (uint32_t i = 0; i < a->nmembers; i++) {
		const struct ctl_member_rec *x = &a->members[i], *y = &b->members[i];

		cr_expect_eq(x->id, y->id, "record %u", i);
		cr_expect_eq(x->flags, y->flags, "record %u", i);
		cr_expect_eq(x->incarnation, y->incarnation, "record %u", i);
		cr_expect_eq(x->done, y->done, "record %u", i);
		cr_expect_eq(x->start, y->start, "record %u", i);
		cr_assert_eq(x->info_len, y->info_len, "record %u", i);
		cr_expect_arr_eq(x->info, y->info, x->info_len, "record %u", i);
	}
}

/* Encoded length of sample(@type), from the layout table in control/wire.c. */
static size_t sample_len(unsigned type)
{
	size_t list = 4 + NREC * 34 + 0 + 7 + CTL_INFO_MAX;

	switch (type) {
	case CTL_HELLO:
		return BODY + 47 + strlen("job-42_a.b:c~!") + list;
	case CTL_VIEW:
	case CTL_PROPOSE:
		return BODY + 12 + list;
	case CTL_ACK:
	case CTL_HB:
		return BODY + 16;
	case CTL_SUSPECT:
		return BODY + 16;
	case CTL_REFUSE:
		return BODY + 10 + strlen("coordinator is member 4");
	case CTL_LEAVE:
		return BODY + 2 + strlen("coordinator is member 4");
	default:
		return BODY;
	}
}

/* A decode target with @cap records of storage, its other fields set to junk. */
static struct ctl_msg out_msg(uint32_t cap)
{
	struct ctl_msg m;

	memset(&m, 0xee, sizeof(m));
	m.members = g_out;
	m.members_cap = cap;
	return m;
}

/* Encodes @m into g_buf; asserts success and returns the length. */
static size_t enc(const struct ctl_msg *m)
{
	ssize_t n = ctl_msg_encode(m, g_buf, sizeof(g_buf));

	cr_assert_gt(n, 0, "encode of %s: %zd", ctl_type_name(m->type), n);
	return (size_t)n;
}

/* Decodes @len bytes of @buf with room for every member; returns the result. */
static int dec(const uint8_t *buf, size_t len)
{
	struct ctl_msg m = out_msg(CTL_MAX_MEMBERS);

	return ctl_msg_decode(buf, len, &m);
}

Test(ctl_wire, round_trip_every_type)
{
	for (unsigned t = 1; t <= CTL_TYPE_MAX; t++) {
		struct ctl_msg m = sample(t), out = out_msg(CTL_MAX_MEMBERS), want;
		size_t len;

		memset(g_buf, 0xa5, sizeof(g_buf));
		len = enc(&m);
		cr_assert_eq(len, sample_len(t), "%s length", ctl_type_name(t));
		cr_expect_eq(g_buf[len], 0xa5, "encoder wrote past the frame");
		cr_expect_arr_eq(g_buf, "FTCM", 4, "magic bytes");
		cr_expect_eq(g_buf[4] | g_buf[5] << 8, CTL_WIRE_VERSION);
		cr_expect_eq((unsigned)(g_buf[6] | g_buf[7] << 8), t);
		cr_expect_eq(get32(g_buf + 8), len, "total");
		cr_expect_eq(get32(g_buf + 12), 0, "reserved");
		cr_expect_eq(g_buf[16], 0x08, "group id, little-endian");
		cr_expect_eq(g_buf[24], 0x18, "epoch, little-endian");

		cr_assert_eq(ctl_msg_decode(g_buf, len, &out), 0, "%s", ctl_type_name(t));
		cr_expect_eq(out.members, g_out, "members pointer kept");
		cr_expect_eq(out.members_cap, CTL_MAX_MEMBERS, "members_cap kept");
		want = projected(&m);
		expect_msg_eq(&out, &want);

		/* Byte for byte the same frame again. */
		cr_assert_eq(ctl_msg_encode(&out, g_buf2, len), (ssize_t)len);
		cr_expect_arr_eq(g_buf2, g_buf, len, "%s re-encoded", ctl_type_name(t));
	}
}

/* round_trip_every_type shows that decode zeroes the fields a type does not carry. */
Test(ctl_wire, decode_zeroes_info_past_its_length)
{
	struct ctl_msg m = sample(CTL_VIEW), out = out_msg(NREC);
	size_t len = enc(&m);

	memset(g_out, 0xcc, sizeof(g_out));
	cr_assert_eq(ctl_msg_decode(g_buf, len, &out), 0);
	for (int k = 7; k < CTL_INFO_MAX; k++) {
		cr_expect_eq(g_out[1].info[k], 0, "info byte %d", k);
	}
}

Test(ctl_wire, empty_lists_and_limits_round_trip)
{
	struct ctl_msg m = sample(CTL_HELLO), out = out_msg(CTL_MAX_MEMBERS);
	size_t len;

	m.nmembers = 0;
	m.members = NULL;
	m.expected = 1;
	m.flags = CTL_HELLO_FLAGS;
	strcpy(m.group, "x");
	len = enc(&m);
	cr_expect_eq(len, BODY + 47 + 1 + 4);
	cr_assert_eq(ctl_msg_decode(g_buf, len, &out), 0);
	cr_expect_eq(out.nmembers, 0);
	cr_expect_str_eq(out.group, "x");
	cr_expect_eq(out.flags, CTL_HELLO_FLAGS);

	/* The largest frame there is: full group name, every member, full info blobs. */
	m = sample(CTL_HELLO);
	m.expected = CTL_MAX_MEMBERS;
	memset(m.group, '~', CTL_GROUP_MAX - 1);
	m.group[CTL_GROUP_MAX - 1] = '\0';
	m.nmembers = CTL_MAX_MEMBERS;
	for (uint32_t i = 0; i < CTL_MAX_MEMBERS; i++) {
		g_in[i] = (struct ctl_member_rec){ .id = i * 3 + 1,
						   .flags = CTL_MF_FLAGS,
						   .incarnation = ~(uint64_t)i,
						   .done = i,
						   .info_len = CTL_INFO_MAX };
		memset(g_in[i].info, (int)i, CTL_INFO_MAX);
	}
	g_in[CTL_MAX_MEMBERS - 1].id = CTL_NO_MEMBER - 1;
	len = enc(&m);
	cr_expect_eq(len, BODY + 47 + 63 + 4 + CTL_MAX_MEMBERS * (34 + CTL_INFO_MAX));
	cr_expect_leq(len, CTL_FRAME_MAX);
	out = out_msg(CTL_MAX_MEMBERS);
	cr_assert_eq(ctl_msg_decode(g_buf, len, &out), 0);
	struct ctl_msg want = projected(&m);
	expect_msg_eq(&out, &want);
}

/* ---- header ------------------------------------------------------------------------------- */

Test(ctl_wire, frame_check_header_rules)
{
	struct ctl_msg m = sample(CTL_VIEW);
	size_t len = enc(&m), total = 12345;
	uint8_t h[BODY];

	for (size_t have = 0; have < BODY; have++) {
		cr_expect_eq(ctl_frame_check(g_buf, have, &total), -EAGAIN, "have %zu", have);
	}
	cr_expect_eq(total, 12345, "total untouched on -EAGAIN");
	cr_expect_eq(ctl_frame_check(g_buf, BODY, &total), 0, "a header is enough");
	cr_expect_eq(total, len);

	memcpy(h, g_buf, BODY);
	h[0] ^= 1;
	cr_expect_eq(ctl_frame_check(h, BODY, &total), -EPROTO, "magic");
	h[4] = 2;
	cr_expect_eq(ctl_frame_check(h, BODY, &total), -EPROTO, "bad magic beats version");

	static const uint16_t versions[] = { 0, 1, 2, CTL_WIRE_VERSION + 1, 0x0101, 0xffff };
	for (size_t i = 0; i < sizeof(versions) / sizeof(versions[0]); i++) {
		memcpy(h, g_buf, BODY);
		put16(h + 4, versions[i]);
		put16(h + 6, 0xffff); /* the rest of a foreign header means nothing to us */
		cr_expect_eq(ctl_frame_check(h, BODY, &total), -EPROTONOSUPPORT, "v%u",
			     versions[i]);
	}

	static const uint16_t types[] = { 0, CTL_TYPE_MAX + 1, 0x100, 0xffff };
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		memcpy(h, g_buf, BODY);
		put16(h + 6, types[i]);
		cr_expect_eq(ctl_frame_check(h, BODY, &total), -EPROTO, "type %u", types[i]);
	}
	for (unsigned t = 1; t <= CTL_TYPE_MAX; t++) {
		put16(h + 6, (uint16_t)t);
		cr_expect_eq(ctl_frame_check(h, BODY, &total), 0, "type %u", t);
	}

	static const struct {
		uint32_t total;
		int rc;
	} lens[] = {
		{ 0, -EPROTO },	      { BODY - 1, -EPROTO },	      { BODY, 0 },
		{ CTL_FRAME_MAX, 0 }, { CTL_FRAME_MAX + 1, -EPROTO }, { UINT32_MAX, -EPROTO }
	};
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		memcpy(h, g_buf, BODY);
		put32(h + 8, lens[i].total);
		total = 0;
		cr_expect_eq(ctl_frame_check(h, BODY, &total), lens[i].rc, "total %u",
			     lens[i].total);
		if (lens[i].rc == 0) {
			cr_expect_eq(total, lens[i].total);
		}
	}

	for (int i = 12; i < 16; i++) {
		memcpy(h, g_buf, BODY);
		h[i] = 0x10;
		cr_expect_eq(ctl_frame_check(h, BODY, &total), -EPROTO, "reserved byte %d", i);
	}
}

Test(ctl_wire, decode_refuses_bad_headers)
{
	struct ctl_msg m = sample(CTL_ACK);
	size_t len = enc(&m);

	/* Decode judges the header with ctl_frame_check(); its errors pass through. */
	g_buf[2] ^= 0x40;
	cr_expect_eq(dec(g_buf, len), -EPROTO, "magic");
	g_buf[2] ^= 0x40;
	put16(g_buf + 4, CTL_WIRE_VERSION + 1);
	cr_expect_eq(dec(g_buf, len), -EPROTONOSUPPORT, "foreign version");
	put16(g_buf + 4, CTL_WIRE_VERSION);
	/* Another type's header over this body: the body length no longer fits. */
	put16(g_buf + 6, CTL_SUSPECT);
	cr_expect_eq(dec(g_buf, len), -EPROTO, "ACK body as SUSPECT");
	put16(g_buf + 6, CTL_LEAVE);
	cr_expect_eq(dec(g_buf, len), -EPROTO, "ACK body as LEAVE");
}

/* ---- framing ------------------------------------------------------------------------------ */

Test(ctl_wire, truncation_at_every_length)
{
	for (unsigned t = 1; t <= CTL_TYPE_MAX; t++) {
		struct ctl_msg m = sample(t);
		size_t len = enc(&m);

		for (size_t l = 0; l < len; l++) {
			/* As received: the header still claims the whole frame. */
			cr_expect_eq(dec(g_buf, l), -EPROTO, "%s cut at %zu", ctl_type_name(t), l);
			/* As sent by a broken peer: the header agrees with the short frame. */
			if (l >= BODY) {
				memcpy(g_buf2, g_buf, l);
				put32(g_buf2 + 8, (uint32_t)l);
				cr_expect_eq(dec(g_buf2, l), -EPROTO, "%s of %zu bytes",
					     ctl_type_name(t), l);
			}
		}
		cr_expect_eq(dec(g_buf, len), 0, "%s whole", ctl_type_name(t));
	}
}

Test(ctl_wire, trailing_bytes)
{
	for (unsigned t = 1; t <= CTL_TYPE_MAX; t++) {
		struct ctl_msg m = sample(t);
		size_t len = enc(&m);

		g_buf[len] = 0;
		cr_expect_eq(dec(g_buf, len + 1), -EPROTO, "%s + 1, total not updated",
			     ctl_type_name(t));
		put32(g_buf + 8, (uint32_t)len + 1);
		cr_expect_eq(dec(g_buf, len + 1), -EPROTO, "%s + 1 byte", ctl_type_name(t));
		g_buf[len + 1] = 0;
		put32(g_buf + 8, (uint32_t)len + 2);
		cr_expect_eq(dec(g_buf, len + 2), -EPROTO, "%s + 2 bytes", ctl_type_name(t));
	}
}

/* ---- body rules on decode ----------------------------------------------------------------- */

/* Encodes @m, writes the @width-byte value @v at @off, and decodes. */
static int patched(const struct ctl_msg *m, size_t off, int width, uint32_t v)
{
	size_t len = enc(m);

	cr_assert_leq(off + (size_t)width, len);
	if (width == 1) {
		g_buf[off] = (uint8_t)v;
	} else if (width == 2) {
		put16(g_buf + off, (uint16_t)v);
	} else {
		put32(g_buf + off, v);
	}
	return dec(g_buf, len);
}

#define HELLO_LIST (BODY + 47 + 14)   /* members list in sample(CTL_HELLO) */
#define VIEW_LIST (BODY + 12)	      /* members list in sample(CTL_VIEW) */
#define REC1 (VIEW_LIST + 4 + 34)     /* second record of sample(CTL_VIEW) */
#define REC2 (VIEW_LIST + 4 + 68 + 7) /* third record */

Test(ctl_wire, hello_field_rules)
{
	struct ctl_msg m = sample(CTL_HELLO);

	cr_assert_eq(strlen(m.group), 14);
	cr_expect_eq(patched(&m, BODY + 4, 4, CTL_HELLO_FLAGS), 0, "every flag");
	cr_expect_eq(patched(&m, BODY + 4, 4, 0x8), -EPROTO, "unknown flag");
	cr_expect_eq(patched(&m, BODY + 4, 4, 0x80000000u), -EPROTO, "unknown flag");
	cr_expect_eq(patched(&m, BODY + 40, 4, 1), 0, "expected 1");
	cr_expect_eq(patched(&m, BODY + 40, 4, CTL_MAX_MEMBERS), 0, "expected max");
	cr_expect_eq(patched(&m, BODY + 40, 4, 0), -EPROTO, "expected 0");
	cr_expect_eq(patched(&m, BODY + 40, 4, CTL_MAX_MEMBERS + 1), -EPROTO, "expected max + 1");
	cr_expect_eq(patched(&m, BODY + 44, 2, 0), 0, "listen port 0");
	cr_expect_eq(patched(&m, BODY + 44, 2, 0xffff), 0, "listen port 65535");
	cr_expect_eq(patched(&m, BODY + 47, 1, 0x21), 0, "group '!'");
	cr_expect_eq(patched(&m, BODY + 60, 1, 0x7e), 0, "group '~'");
	cr_expect_eq(patched(&m, BODY + 47, 1, 0x20), -EPROTO, "group space");
	cr_expect_eq(patched(&m, BODY + 52, 1, 0x00), -EPROTO, "group NUL inside");
	cr_expect_eq(patched(&m, BODY + 60, 1, 0x00), -EPROTO, "group NUL at the end");
	cr_expect_eq(patched(&m, BODY + 47, 1, 0x7f), -EPROTO, "group DEL");
	cr_expect_eq(patched(&m, BODY + 47, 1, 0xc3), -EPROTO, "group non-ASCII");
	/* A group length that disagrees with the bytes: the rest no longer parses. */
	cr_expect_eq(patched(&m, BODY + 46, 1, 13), -EPROTO, "group length - 1");
	cr_expect_eq(patched(&m, BODY + 46, 1, 0xff), -EPROTO, "group length 255");
	/* HELLO member and incarnation take any value (a probe need not know its id). */
	cr_expect_eq(patched(&m, BODY + 0, 4, CTL_NO_MEMBER), 0, "member none");
}

/* Builds a HELLO by hand whose group has @glen bytes of @c, with an empty members list. */
static size_t hello_with_group(size_t glen, uint8_t c)
{
	struct ctl_msg m = sample(CTL_HELLO);
	size_t len;

	m.nmembers = 0;
	len = enc(&m); /* group "job-42_a.b:c~!" (14 bytes) */
	g_buf[BODY + 46] = (uint8_t)glen;
	memset(g_buf + BODY + 47, c, glen);
	put32(g_buf + BODY + 47 + glen, 0); /* member count */
	len = BODY + 47 + glen + 4;
	put32(g_buf + 8, (uint32_t)len);
	return len;
}

Test(ctl_wire, hello_group_length)
{
	struct ctl_msg out = out_msg(CTL_MAX_MEMBERS);
	size_t len;

	len = hello_with_group(CTL_GROUP_MAX - 1, 'g');
	cr_assert_eq(ctl_msg_decode(g_buf, len, &out), 0, "63 bytes");
	cr_expect_eq(strlen(out.group), CTL_GROUP_MAX - 1);
	len = hello_with_group(1, 'g');
	cr_expect_eq(dec(g_buf, len), 0, "1 byte");
	len = hello_with_group(0, 'g');
	cr_expect_eq(dec(g_buf, len), -EPROTO, "empty group");
	len = hello_with_group(CTL_GROUP_MAX, 'g');
	cr_expect_eq(dec(g_buf, len), -EPROTO, "64 bytes: no room for the NUL");
	len = hello_with_group(200, 'g');
	cr_expect_eq(dec(g_buf, len), -EPROTO, "200 bytes");
}

Test(ctl_wire, member_list_rules)
{
	struct ctl_msg m = sample(CTL_VIEW);

	cr_expect_eq(patched(&m, VIEW_LIST, 4, NREC), 0, "as encoded");
	cr_expect_eq(patched(&m, REC1, 4, 3), 0, "ids 2 3 9");
	cr_expect_eq(patched(&m, REC1, 4, 8), 0, "ids 2 8 9");
	cr_expect_eq(patched(&m, REC1, 4, 2), -EPROTO, "ids 2 2 9: repeated");
	cr_expect_eq(patched(&m, REC1, 4, 1), -EPROTO, "ids 2 1 9: decreasing");
	cr_expect_eq(patched(&m, REC1, 4, 9), -EPROTO, "ids 2 9 9: repeated");
	cr_expect_eq(patched(&m, REC1, 4, 10), -EPROTO, "ids 2 10 9: decreasing");
	cr_expect_eq(patched(&m, REC2, 4, CTL_NO_MEMBER - 1), 0, "largest id");
	cr_expect_eq(patched(&m, REC2, 4, CTL_NO_MEMBER), -EPROTO, "id CTL_NO_MEMBER");
	cr_expect_eq(patched(&m, VIEW_LIST + 4, 4, 0), 0, "id 0 first");
	cr_expect_eq(patched(&m, REC1 + 4, 4, CTL_MF_FLAGS), 0, "every member flag");
	cr_expect_eq(patched(&m, REC1 + 4, 4, 0x10), -EPROTO, "unknown member flag");
	cr_expect_eq(patched(&m, REC1 + 4, 4, 0x100), -EPROTO, "unknown member flag");
	cr_expect_eq(patched(&m, VIEW_LIST, 4, NREC - 1), -EPROTO, "count short: trailing bytes");
	cr_expect_eq(patched(&m, VIEW_LIST, 4, NREC + 1), -EPROTO, "count long: truncated");
	cr_expect_eq(patched(&m, VIEW_LIST, 4, CTL_MAX_MEMBERS + 1), -EPROTO, "count > max");
	cr_expect_eq(patched(&m, VIEW_LIST, 4, UINT32_MAX), -EPROTO, "count huge");
	cr_expect_eq(patched(&m, REC1 + 32, 2, 6), -EPROTO, "info length - 1");

	/* The same rules in HELLO's list. */
	m = sample(CTL_HELLO);
	cr_expect_eq(patched(&m, HELLO_LIST + 4 + 34, 4, 2), -EPROTO, "HELLO: repeated id");
	cr_expect_eq(patched(&m, HELLO_LIST + 4 + 4, 4, 0x10), -EPROTO, "HELLO: member flag");
}

Test(ctl_wire, info_length_limit)
{
	struct ctl_msg m = sample(CTL_PROPOSE);
	size_t len;

	/* Last record: info_len CTL_INFO_MAX + 1 with the bytes present, total updated. */
	len = enc(&m);
	cr_assert_eq(g_buf[len - CTL_INFO_MAX - 2], CTL_INFO_MAX);
	put16(g_buf + len - CTL_INFO_MAX - 2, CTL_INFO_MAX + 1);
	g_buf[len] = 0x55;
	put32(g_buf + 8, (uint32_t)len + 1);
	cr_expect_eq(dec(g_buf, len + 1), -EPROTO, "info %d bytes", CTL_INFO_MAX + 1);
	put16(g_buf + len - CTL_INFO_MAX - 2, 0xffff);
	cr_expect_eq(dec(g_buf, len + 1), -EPROTO, "info 65535 bytes");
}

Test(ctl_wire, suspect_and_refuse_rules)
{
	struct ctl_msg m = sample(CTL_SUSPECT);

	cr_expect_eq(patched(&m, BODY + 4, 4, CTL_EV_DEATH), 0, "death");
	cr_expect_eq(patched(&m, BODY + 4, 4, CTL_EV_SILENCE), 0, "silence");
	cr_expect_eq(patched(&m, BODY + 4, 4, CTL_EV_LINK), 0, "link");
	cr_expect_eq(patched(&m, BODY + 4, 4, CTL_EV_CUT), 0, "cut");
	cr_expect_eq(patched(&m, BODY + 4, 4, 0), -EPROTO, "evidence 0");
	cr_expect_eq(patched(&m, BODY + 4, 4, CTL_EV_MAX + 1), -EPROTO, "evidence max + 1");

	/* LEAVE carries its reason like REFUSE's text. */
	m = sample(CTL_LEAVE);
	cr_expect_eq(patched(&m, BODY + 2, 1, 0), -EPROTO, "LEAVE: NUL first in text");
	cr_expect_eq(patched(&m, BODY + 2, 1, 0xff), 0, "LEAVE: any other byte");
	cr_expect_eq(patched(&m, BODY, 2, 22), -EPROTO, "LEAVE: text length - 1");
	cr_expect_eq(patched(&m, BODY, 2, 24), -EPROTO, "LEAVE: text length + 1");

	m = sample(CTL_REFUSE);
	cr_expect_eq(patched(&m, BODY, 4, 1), 0, "code 1");
	cr_expect_eq(patched(&m, BODY, 4, CTL_REF_MAX), 0, "code max");
	cr_expect_eq(patched(&m, BODY, 4, 0), -EPROTO, "code 0");
	cr_expect_eq(patched(&m, BODY, 4, CTL_REF_MAX + 1), -EPROTO, "code max + 1");
	cr_expect_eq(patched(&m, BODY + 4, 4, CTL_NO_MEMBER), 0, "hint none");
	cr_expect_eq(patched(&m, BODY + 10, 1, 0), -EPROTO, "NUL first in text");
	cr_expect_eq(patched(&m, BODY + 20, 1, 0), -EPROTO, "NUL inside text");
	cr_expect_eq(patched(&m, BODY + 10, 1, 0xff), 0, "any other byte");
	cr_expect_eq(patched(&m, BODY + 8, 2, 22), -EPROTO, "text length - 1");
	cr_expect_eq(patched(&m, BODY + 8, 2, 24), -EPROTO, "text length + 1");
}

/* A REFUSE whose text is @n bytes of 'x', built by hand. */
static size_t refuse_with_text(size_t n)
{
	struct ctl_msg m = sample(CTL_REFUSE);
	size_t len;

	m.text[0] = '\0';
	len = enc(&m);
	cr_assert_eq(len, BODY + 10);
	put16(g_buf + BODY + 8, (uint16_t)n);
	memset(g_buf + BODY + 10, 'x', n);
	len = BODY + 10 + n;
	put32(g_buf + 8, (uint32_t)len);
	return len;
}

Test(ctl_wire, refuse_text_length)
{
	struct ctl_msg out = out_msg(0);
	size_t len;

	len = refuse_with_text(0);
	cr_assert_eq(ctl_msg_decode(g_buf, len, &out), 0, "empty text");
	cr_expect_str_eq(out.text, "");
	len = refuse_with_text(CTL_TEXT_MAX - 1);
	cr_assert_eq(ctl_msg_decode(g_buf, len, &out), 0, "255 bytes");
	cr_expect_eq(strlen(out.text), CTL_TEXT_MAX - 1);
	len = refuse_with_text(CTL_TEXT_MAX);
	cr_expect_eq(dec(g_buf, len), -EPROTO, "256 bytes: no room for the NUL");
	len = refuse_with_text(1000);
	cr_expect_eq(dec(g_buf, len), -EPROTO, "1000 bytes");
}

/* ---- capacity ----------------------------------------------------------------------------- */

Test(ctl_wire, more_members_than_cap)
{
	for (unsigned t = CTL_HELLO; t <= CTL_PROPOSE; t++) {
		struct ctl_msg m = sample(t), out;
		size_t len = enc(&m);

		out = out_msg(NREC);
		cr_expect_eq(ctl_msg_decode(g_buf, len, &out), 0, "%s: exact cap",
			     ctl_type_name(t));
		cr_expect_eq(out.nmembers, NREC);
		out = out_msg(NREC - 1);
		cr_expect_eq(ctl_msg_decode(g_buf, len, &out), -EMSGSIZE, "%s: cap - 1",
			     ctl_type_name(t));
		cr_expect_eq(out.members, g_out);
		cr_expect_eq(out.members_cap, NREC - 1);
		cr_expect_eq(out.nmembers, 0);
		out = out_msg(0);
		cr_expect_eq(ctl_msg_decode(g_buf, len, &out), -EMSGSIZE, "%s: cap 0",
			     ctl_type_name(t));
		/* No storage at all: nothing is written through the NULL pointer. */
		out = out_msg(NREC);
		out.members = NULL;
		cr_expect_eq(ctl_msg_decode(g_buf, len, &out), -EMSGSIZE, "%s: no storage",
			     ctl_type_name(t));

		/* A malformed frame is malformed, whatever the caller's storage. */
		put32(g_buf + len - CTL_INFO_MAX - 2 - 32 + 4, 0x10); /* last record's flags */
		out = out_msg(1);
		cr_expect_eq(ctl_msg_decode(g_buf, len, &out), -EPROTO, "%s: bad record past cap",
			     ctl_type_name(t));
		len = enc(&m);
		g_buf[len] = 0;
		put32(g_buf + 8, (uint32_t)len + 1);
		out = out_msg(1);
		cr_expect_eq(ctl_msg_decode(g_buf, len + 1, &out), -EPROTO,
			     "%s: trailing byte past cap", ctl_type_name(t));
	}
	/* Frames without members need no storage. */
	struct ctl_msg m = sample(CTL_HB), out = out_msg(0);
	size_t len = enc(&m);

	out.members = NULL;
	cr_expect_eq(ctl_msg_decode(g_buf, len, &out), 0);
}

/* ---- encode ------------------------------------------------------------------------------- */

static ssize_t enc_rc(const struct ctl_msg *m)
{
	return ctl_msg_encode(m, g_buf, sizeof(g_buf));
}

Test(ctl_wire, encode_rejects_out_of_range_fields)
{
	struct ctl_msg m;

	m = sample(CTL_HELLO);
	m.type = 0;
	cr_expect_eq(enc_rc(&m), -EINVAL, "type 0");
	m.type = CTL_TYPE_MAX + 1;
	cr_expect_eq(enc_rc(&m), -EINVAL, "type max + 1");

	m = sample(CTL_HELLO);
	m.flags = 0x8;
	cr_expect_eq(enc_rc(&m), -EINVAL, "hello flag");
	m = sample(CTL_HELLO);
	m.expected = 0;
	cr_expect_eq(enc_rc(&m), -EINVAL, "expected 0");
	m.expected = CTL_MAX_MEMBERS + 1;
	cr_expect_eq(enc_rc(&m), -EINVAL, "expected max + 1");
	m = sample(CTL_HELLO);
	m.group[0] = '\0';
	cr_expect_eq(enc_rc(&m), -EINVAL, "empty group");
	strcpy(m.group, "a b");
	cr_expect_eq(enc_rc(&m), -EINVAL, "space in group");
	strcpy(m.group, "a\x7f");
	cr_expect_eq(enc_rc(&m), -EINVAL, "DEL in group");
	strcpy(m.group, "\xc3\xa9t\xc3\xa9");
	cr_expect_eq(enc_rc(&m), -EINVAL, "UTF-8 in group");
	memset(m.group, 'a', CTL_GROUP_MAX);
	cr_expect_eq(enc_rc(&m), -EINVAL, "unterminated group");

	m = sample(CTL_VIEW);
	m.nmembers = CTL_MAX_MEMBERS + 1;
	cr_expect_eq(enc_rc(&m), -EINVAL, "too many members");
	m = sample(CTL_VIEW);
	m.members = NULL;
	cr_expect_eq(enc_rc(&m), -EINVAL, "members without storage");
	m = sample(CTL_VIEW);
	g_in[1].id = g_in[0].id;
	cr_expect_eq(enc_rc(&m), -EINVAL, "repeated id");
	m = sample(CTL_VIEW);
	g_in[2].id = 1;
	cr_expect_eq(enc_rc(&m), -EINVAL, "decreasing id");
	m = sample(CTL_PROPOSE);
	g_in[2].id = CTL_NO_MEMBER;
	cr_expect_eq(enc_rc(&m), -EINVAL, "id CTL_NO_MEMBER");
	m = sample(CTL_PROPOSE);
	g_in[0].flags = 0x10;
	cr_expect_eq(enc_rc(&m), -EINVAL, "member flag");
	m = sample(CTL_HELLO);
	g_in[1].info_len = CTL_INFO_MAX + 1;
	cr_expect_eq(enc_rc(&m), -EINVAL, "info too long");

	m = sample(CTL_SUSPECT);
	m.evidence = 0;
	cr_expect_eq(enc_rc(&m), -EINVAL, "evidence 0");
	m.evidence = CTL_EV_MAX + 1;
	cr_expect_eq(enc_rc(&m), -EINVAL, "evidence max + 1");
	m = sample(CTL_LEAVE);
	memset(m.text, 'x', CTL_TEXT_MAX);
	cr_expect_eq(enc_rc(&m), -EINVAL, "LEAVE: unterminated text");

	m = sample(CTL_REFUSE);
	m.code = 0;
	cr_expect_eq(enc_rc(&m), -EINVAL, "code 0");
	m.code = CTL_REF_MAX + 1;
	cr_expect_eq(enc_rc(&m), -EINVAL, "code max + 1");
	m = sample(CTL_REFUSE);
	memset(m.text, 'x', CTL_TEXT_MAX);
	cr_expect_eq(enc_rc(&m), -EINVAL, "unterminated text");
}

Test(ctl_wire, encode_ignores_fields_the_type_does_not_carry)
{
	/* sample() sets every field; a type that does not carry one is not judged by it. */
	struct ctl_msg m = sample(CTL_HB);

	m.flags = 0xffffffff;
	m.expected = 0;
	memset(m.group, 0, sizeof(m.group));
	m.evidence = 77;
	m.code = 0;
	memset(m.text, 'x', sizeof(m.text));
	m.members = NULL;
	m.nmembers = 5000;
	cr_expect_eq(enc_rc(&m), BODY + 16);
	m.type = CTL_READY;
	cr_expect_eq(enc_rc(&m), BODY);
}

Test(ctl_wire, encode_needs_room)
{
	for (unsigned t = 1; t <= CTL_TYPE_MAX; t++) {
		struct ctl_msg m = sample(t);
		size_t len = sample_len(t);

		for (size_t cap = 0; cap < len; cap++) {
			memset(g_buf2, 0x3c, len);
			cr_expect_eq(ctl_msg_encode(&m, g_buf2, cap), -EMSGSIZE, "%s in %zu",
				     ctl_type_name(t), cap);
			size_t k = 0;

			while (k < len && g_buf2[k] == 0x3c) {
				k++;
			}
			cr_expect_eq(k, len, "%s: encode into %zu wrote byte %zu", ctl_type_name(t),
				     cap, k);
		}
		cr_expect_eq(ctl_msg_encode(&m, g_buf2, len), (ssize_t)len, "%s", ctl_type_name(t));
	}
	/* Invalid beats small. */
	struct ctl_msg m = sample(CTL_SUSPECT);

	m.evidence = 0;
	cr_expect_eq(ctl_msg_encode(&m, g_buf, 4), -EINVAL);
}
