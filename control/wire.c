/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership wire codec: encoding and validating decoding of the control-plane frames declared
 * in ctl_wire.h. Pure functions, no I/O, no allocation; bytes from the network are checked
 * here, and encode refuses a struct that decode would refuse, with the same rules.
 *
 * Layout. Integers little-endian, no padding, no alignment. Offsets in bytes; body offsets
 * count from the end of the header. Every byte is canonical: encode(decode(x)) == x.
 *
 *   Header (every frame, 32 bytes)
 *     0  u32  magic        CTL_WIRE_MAGIC
 *     4  u16  version      CTL_WIRE_VERSION (else -EPROTONOSUPPORT)
 *     6  u16  type         enum ctl_type, 1 .. CTL_TYPE_MAX
 *     8  u32  total        whole frame, header included, 32 .. CTL_FRAME_MAX
 *    12  u32  reserved     0
 *    16  u64  group_id     ctl_group_id(group name)
 *    24  u64  epoch
 *
 *   HELLO (47 + group_len + members list)
 *     0  u32  member
 *     4  u32  flags        CTL_HELLO_* bits only
 *     8  u64  incarnation
 *    16  u64  max_epoch
 *    24  u64  next_op
 *    32  u64  done_op
 *    40  u32  expected     1 .. CTL_MAX_MEMBERS
 *    44  u16  listen_port  any (0: the sender takes no connections)
 *    46  u8   group_len    1 .. CTL_GROUP_MAX - 1
 *    47  group_len bytes   group name, each byte 0x21 .. 0x7e (no NUL, no terminator)
 *    47 + group_len        members list
 *
 *   VIEW, PROPOSE (12 + members list)
 *     0  u64  boundary
 *     8  u32  coord        any (CTL_NO_MEMBER for a daemon)
 *    12  members list
 *
 *   ACK, HB (16)
 *     0  u64  next_op
 *     8  u64  done_op
 *
 *   SUSPECT (16)
 *     0  u32  peer
 *     4  u32  evidence     1 .. CTL_EV_MAX
 *     8  u64  seq
 *
 *   LEAVE (2 + text_len)
 *     0  u16  text_len     0 .. CTL_TEXT_MAX - 1: the reason
 *     2  text_len bytes    no NUL (decoded NUL-terminated)
 *
 *   READY (0)
 *
 *   REFUSE (10 + text_len)
 *     0  u32  code         1 .. CTL_REF_MAX
 *     4  u32  hint
 *     8  u16  text_len     0 .. CTL_TEXT_MAX - 1
 *    10  text_len bytes    no NUL (decoded NUL-terminated)
 *
 *   Stream tail (HELLO, ACK, HB, VIEW, PROPOSE; only when the sender has ns > 1 streams,
 *   after everything above; ns = 1 is no tail)
 *     0  u8   ns           2 .. CTL_STREAMS_MAX
 *     HELLO, ACK, HB:  (ns - 1) x { u64 next_op, u64 done_op } of streams 1 ..
 *     VIEW, PROPOSE:   (ns - 1) x u64 boundary of streams 1 ..
 *     HELLO, VIEW, PROPOSE: then, for each record of the members list in order,
 *                      (ns - 1) x u64 start of streams 1 ..
 *   SUSPECT tail (only for an op of stream s > 0)
 *     0  u32  stream       1 .. CTL_STREAMS_MAX - 1
 *
 *   Members list (4 + count records)
 *     0  u32  count        0 .. CTL_MAX_MEMBERS
 *     4  records, each 34 + info_len:
 *          0  u32  id           != CTL_NO_MEMBER, strictly increasing along the list
 *          4  u32  flags        CTL_MF_* bits only
 *          8  u64  incarnation
 *         16  u64  done
 *         24  u64  start
 *         32  u16  info_len     0 .. CTL_INFO_MAX
 *         34  info_len bytes    opaque
 *
 * The largest frame (HELLO, 63-byte group, CTL_MAX_MEMBERS records of CTL_INFO_MAX bytes, 8
 * streams) is 32 + 47 + 63 + 4 + 1024 * 226 + 1 + 7 * 16 + 1024 * 7 * 8 = 289027 bytes, within
 * CTL_FRAME_MAX.
 */
#include "ftcc/ctl_wire.h"
#include "ftcc/le.h"

#include <errno.h>
#include <string.h>

#define HELLO_FIXED 47 /* HELLO body before the group bytes */
#define VIEW_FIXED 12  /* VIEW/PROPOSE body before the members list */
#define REC_FIXED 34   /* member record before its info bytes */
#define REFUSE_FIXED 10
#define LEAVE_FIXED 2

/* Bounds-checked reader over one frame's body. Reading past the end sets @bad and yields
 * zeros, so a decoder reads all fields first and tests @bad once before trusting them. */
struct rd {
	const uint8_t *p;
	size_t len;
	size_t off;
	int bad;
};

/* Pointer to the next @n bytes, or NULL (and @bad set) when fewer are left. */
static const uint8_t *rd_take(struct rd *r, size_t n)
{
	const uint8_t *p;

	if (r->bad || n > r->len - r->off) {
		r->bad = 1;
		return NULL;
	}
	p = r->p + r->off;
	r->off += n;
	return p;
}

static uint8_t rd_u8(struct rd *r)
{
	const uint8_t *p = rd_take(r, 1);

	return p ? p[0] : 0;
}

static uint16_t rd_u16(struct rd *r)
{
	const uint8_t *p = rd_take(r, 2);

	return p ? le_get16(p) : 0;
}

static uint32_t rd_u32(struct rd *r)
{
	const uint8_t *p = rd_take(r, 4);

	return p ? le_get32(p) : 0;
}

static uint64_t rd_u64(struct rd *r)
{
	const uint8_t *p = rd_take(r, 8);

	return p ? le_get64(p) : 0;
}

/* Writer; the encoder sized the buffer before writing, so it never checks. */
struct wr {
	uint8_t *p;
};

static void wr_u8(struct wr *w, uint8_t v)
{
	*w->p++ = v;
}

static void wr_u16(struct wr *w, uint16_t v)
{
	le_put16(w->p, v);
	w->p += 2;
}

static void wr_u32(struct wr *w, uint32_t v)
{
	le_put32(w->p, v);
	w->p += 4;
}

static void wr_u64(struct wr *w, uint64_t v)
{
	le_put64(w->p, v);
	w->p += 8;
}

static void wr_bytes(struct wr *w, const void *src, size_t n)
{
	if (n) {
		memcpy(w->p, src, n);
	}
	w->p += n;
}

/* ---- rules shared by encode and decode ------------------------------------------------------ */

static int type_carries_members(unsigned type)
{
	return type == CTL_HELLO || type == CTL_VIEW || type == CTL_PROPOSE;
}

/* Types with a stream tail (progress, boundaries); SUSPECT's is its own. */
static int type_carries_streams(unsigned type)
{
	return type_carries_members(type) || type == CTL_ACK || type == CTL_HB;
}

/* The stream tail's size for @m (0: none), or SIZE_MAX when @m->nstreams is out of range. */
static size_t streams_size(const struct ctl_msg *m)
{
	size_t ns = m->nstreams ? m->nstreams : 1, size = 0;

	if (m->type == CTL_SUSPECT) {
		return m->stream >= CTL_STREAMS_MAX ? SIZE_MAX : m->stream ? 4 : 0;
	}
	if (!type_carries_streams(m->type)) {
		return 0; /* like every field a type does not carry: ignored */
	}
	if (ns > CTL_STREAMS_MAX) {
		return SIZE_MAX;
	}
	if (ns == 1) {
		return 0;
	}
	size = 1 + (ns - 1) * (m->type == CTL_VIEW || m->type == CTL_PROPOSE ? 8 : 16);
	if (type_carries_members(m->type)) {
		size += (size_t)m->nmembers * (ns - 1) * 8;
	}
	return size;
}

/* Group name bytes: 1 .. CTL_GROUP_MAX - 1 of them, each printable and not a space. */
static int group_ok(const uint8_t *s, size_t n)
{
	if (n < 1 || n > CTL_GROUP_MAX - 1) {
		return 0;
	}
	for (size_t i = 0; i < n; i++) {
		if (s[i] < 0x21 || s[i] > 0x7e) {
			return 0;
		}
	}
	return 1;
}

/* REFUSE and LEAVE text: shorter than CTL_TEXT_MAX, no NUL inside. */
static int text_ok(const uint8_t *s, size_t n)
{
	return n < CTL_TEXT_MAX && memchr(s, 0, n) == NULL;
}

/* One member record whose predecessor in the list has id @prev (the first: @first set). */
static int rec_ok(const struct ctl_member_rec *r, uint32_t prev, int first)
{
	if (r->id == CTL_NO_MEMBER || (!first && r->id <= prev)) {
		return 0;
	}
	return (r->flags & ~(uint32_t)CTL_MF_FLAGS) == 0 && r->info_len <= CTL_INFO_MAX;
}

/* The scalar fields @m's type carries (strings and members are checked where they are read). */
static int scalars_ok(const struct ctl_msg *m)
{
	switch (m->type) {
	case CTL_HELLO:
		return (m->flags & ~(uint32_t)CTL_HELLO_FLAGS) == 0 && m->expected >= 1 &&
		       m->expected <= CTL_MAX_MEMBERS;
	case CTL_SUSPECT:
		return m->evidence >= 1 && m->evidence <= CTL_EV_MAX;
	case CTL_REFUSE:
		return m->code >= 1 && m->code <= CTL_REF_MAX;
	case CTL_VIEW:
	case CTL_PROPOSE:
	case CTL_ACK:
	case CTL_HB:
	case CTL_LEAVE:
	case CTL_READY:
		return 1;
	default:
		return 0;
	}
}

/* ---- public --------------------------------------------------------------------------------- */

uint64_t ctl_group_id(const char *name)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
		h ^= *p;
		h *= 0x100000001b3ull;
	}
	return h;
}

int ctl_frame_check(const void *buf, size_t have, size_t *total)
{
	const uint8_t *p = buf;
	uint16_t type;
	uint32_t len;

	if (have < CTL_HDR_SIZE) {
		return -EAGAIN;
	}
	if (le_get32(p) != CTL_WIRE_MAGIC) {
		return -EPROTO;
	}
	/* A foreign version may lay out the rest of its header differently: judge nothing else. */
	if (le_get16(p + 4) != CTL_WIRE_VERSION) {
		return -EPROTONOSUPPORT;
	}
	type = le_get16(p + 6);
	len = le_get32(p + 8);
	if (type < 1 || type > CTL_TYPE_MAX || len < CTL_HDR_SIZE || len > CTL_FRAME_MAX ||
	    le_get32(p + 12) != 0) {
		return -EPROTO;
	}
	*total = len;
	return 0;
}

/* Reads a members list into @m. More records than members_cap is -EMSGSIZE, but only once the
 * whole list proved well formed: a malformed frame is -EPROTO whatever the caller's storage. */
static int members_decode(struct rd *r, struct ctl_msg *m, uint32_t *countp)
{
	/* No storage at all is a capacity of zero, whatever members_cap says. */
	uint32_t cap = m->members ? m->members_cap : 0;
	uint32_t count = rd_u32(r), prev = 0;

	if (r->bad || count > CTL_MAX_MEMBERS) {
		return -EPROTO;
	}
	*countp = count;
	for (uint32_t i = 0; i < count; i++) {
		struct ctl_member_rec tmp;
		struct ctl_member_rec *rec = i < cap ? &m->members[i] : &tmp;
		const uint8_t *info;

		rec->id = rd_u32(r);
		rec->flags = rd_u32(r);
		rec->incarnation = rd_u64(r);
		rec->done = rd_u64(r);
		rec->start = rd_u64(r);
		rec->info_len = rd_u16(r);
		if (r->bad || !rec_ok(rec, prev, i == 0)) {
			return -EPROTO;
		}
		info = rd_take(r, rec->info_len);
		if (!info) {
			return -EPROTO;
		}
		memcpy(rec->info, info, rec->info_len);
		memset(rec->info + rec->info_len, 0, CTL_INFO_MAX - rec->info_len);
		memset(rec->xstart, 0, sizeof(rec->xstart));
		prev = rec->id;
	}
	if (count > cap) {
		return -EMSGSIZE;
	}
	m->nmembers = count;
	return 0;
}

/* Reads the body of @m->type from @r into @m (header already taken); *@count: the members
 * list's length. */
static int body_decode(struct rd *r, struct ctl_msg *m, uint32_t *count)
{
	const uint8_t *s;
	size_t n;

	switch (m->type) {
	case CTL_HELLO:
		m->member = rd_u32(r);
		m->flags = rd_u32(r);
		m->incarnation = rd_u64(r);
		m->max_epoch = rd_u64(r);
		m->next_op = rd_u64(r);
		m->done_op = rd_u64(r);
		m->expected = rd_u32(r);
		m->listen_port = rd_u16(r);
		n = rd_u8(r);
		s = rd_take(r, n);
		if (!s || !group_ok(s, n)) {
			return -EPROTO;
		}
		memcpy(m->group, s, n);
		m->group[n] = '\0';
		break;
	case CTL_VIEW:
	case CTL_PROPOSE:
		m->boundary = rd_u64(r);
		m->coord = rd_u32(r);
		break;
	case CTL_ACK:
	case CTL_HB:
		m->next_op = rd_u64(r);
		m->done_op = rd_u64(r);
		break;
	case CTL_SUSPECT:
		m->peer = rd_u32(r);
		m->evidence = rd_u32(r);
		m->seq = rd_u64(r);
		break;
	case CTL_REFUSE:
	case CTL_LEAVE:
		if (m->type == CTL_REFUSE) {
			m->code = rd_u32(r);
			m->hint = rd_u32(r);
		}
		n = rd_u16(r);
		s = rd_take(r, n);
		if (!s || !text_ok(s, n)) {
			return -EPROTO;
		}
		memcpy(m->text, s, n);
		m->text[n] = '\0';
		break;
	default: /* READY: empty */
		break;
	}
	if (r->bad || !scalars_ok(m)) {
		return -EPROTO;
	}
	m->nstreams = 1;
	return type_carries_members(m->type) ? members_decode(r, m, count) : 0;
}

/* Reads the stream tail, if any, of a frame whose body @r read so far (members decoded into
 * @m, or too many for its storage: @m->nmembers is 0 then and @count says how many). */
static int streams_decode(struct rd *r, struct ctl_msg *m, uint32_t count)
{
	uint32_t ns, cap = m->members ? m->members_cap : 0;

	if (r->off == r->len) {
		return 0;
	}
	if (m->type == CTL_SUSPECT) {
		m->stream = rd_u32(r);
		return !r->bad && m->stream >= 1 && m->stream < CTL_STREAMS_MAX ? 0 : -EPROTO;
	}
	if (!type_carries_streams(m->type)) {
		return -EPROTO;
	}
	ns = rd_u8(r);
	if (r->bad || ns < 2 || ns > CTL_STREAMS_MAX) {
		return -EPROTO;
	}
	m->nstreams = ns;
	for (uint32_t t = 1; t < ns; t++) {
		if (m->type == CTL_VIEW || m->type == CTL_PROPOSE) {
			*ctl_msg_boundary(m, t) = rd_u64(r);
		} else {
			*ctl_msg_next(m, t) = rd_u64(r);
			*ctl_msg_done(m, t) = rd_u64(r);
		}
	}
	if (type_carries_members(m->type)) {
		for (uint32_t i = 0; i < count; i++) {
			for (uint32_t t = 1; t < ns; t++) {
				uint64_t v = rd_u64(r);

				if (i < cap) {
					*ctl_rec_start(&m->members[i], t) = v;
				}
			}
		}
	}
	return r->bad ? -EPROTO : 0;
}

int ctl_msg_decode(const void *buf, size_t len, struct ctl_msg *m)
{
	struct ctl_member_rec *members = m->members;
	uint32_t cap = m->members_cap, count = 0;
	const uint8_t *p = buf;
	struct rd r;
	size_t total;
	int rc;

	memset(m, 0, sizeof(*m));
	m->members = members;
	m->members_cap = cap;
	rc = ctl_frame_check(buf, len, &total);
	if (rc) {
		return rc == -EAGAIN ? -EPROTO : rc;
	}
	if (total != len) {
		return -EPROTO;
	}
	m->type = le_get16(p + 6);
	m->group_id = le_get64(p + 16);
	m->epoch = le_get64(p + 24);
	r = (struct rd){ .p = p + CTL_HDR_SIZE, .len = len - CTL_HDR_SIZE };
	rc = body_decode(&r, m, &count);
	if (rc == 0 || rc == -EMSGSIZE) {
		/* a list too large for @m's storage still has its starts in the tail */
		int trc = streams_decode(&r, m, count);

		if (trc || r.off != r.len) {
			rc = -EPROTO; /* a bad tail or trailing bytes: malformed beats too large */
		}
	}
	if (rc) {
		m->nmembers = 0;
	}
	return rc;
}

/* Validates the members list of @m; returns its encoded size, or 0 when invalid. */
static size_t members_size(const struct ctl_msg *m)
{
	size_t size = 4;

	if (m->nmembers > CTL_MAX_MEMBERS || (m->nmembers && !m->members)) {
		return 0;
	}
	for (uint32_t i = 0; i < m->nmembers; i++) {
		const struct ctl_member_rec *rec = &m->members[i];

		if (!rec_ok(rec, i ? m->members[i - 1].id : 0, i == 0)) {
			return 0;
		}
		size += REC_FIXED + rec->info_len;
	}
	return size;
}

/* Validates @m; returns the whole frame's size, or 0 when a field is out of range. */
static size_t frame_size(const struct ctl_msg *m)
{
	size_t body, n, list;

	if (!scalars_ok(m)) {
		return 0;
	}
	switch (m->type) {
	case CTL_HELLO:
		n = strnlen(m->group, CTL_GROUP_MAX);
		if (!group_ok((const uint8_t *)m->group, n)) {
			return 0;
		}
		body = HELLO_FIXED + n;
		break;
	case CTL_VIEW:
	case CTL_PROPOSE:
		body = VIEW_FIXED;
		break;
	case CTL_ACK:
	case CTL_HB:
		body = 16;
		break;
	case CTL_SUSPECT:
		body = 16;
		break;
	case CTL_REFUSE:
	case CTL_LEAVE:
		n = strnlen(m->text, CTL_TEXT_MAX);
		if (!text_ok((const uint8_t *)m->text, n)) {
			return 0;
		}
		body = (m->type == CTL_REFUSE ? REFUSE_FIXED : LEAVE_FIXED) + n;
		break;
	default: /* READY */
		body = 0;
		break;
	}
	if (type_carries_members(m->type)) {
		list = members_size(m);
		if (!list) {
			return 0;
		}
		body += list;
	}
	list = streams_size(m);
	if (list == SIZE_MAX) {
		return 0;
	}
	return CTL_HDR_SIZE + body + list;
}

static void streams_encode(struct wr *w, const struct ctl_msg *m)
{
	uint32_t ns = m->nstreams ? m->nstreams : 1;

	if (m->type == CTL_SUSPECT) {
		if (m->stream) {
			wr_u32(w, m->stream);
		}
		return;
	}
	if (ns == 1 || !type_carries_streams(m->type)) {
		return;
	}
	wr_u8(w, (uint8_t)ns);
	for (uint32_t t = 1; t < ns; t++) {
		if (m->type == CTL_VIEW || m->type == CTL_PROPOSE) {
			wr_u64(w, m->xboundary[t - 1]);
		} else {
			wr_u64(w, m->xnext[t - 1]);
			wr_u64(w, m->xdone[t - 1]);
		}
	}
	if (type_carries_members(m->type)) {
		for (uint32_t i = 0; i < m->nmembers; i++) {
			for (uint32_t t = 1; t < ns; t++) {
				wr_u64(w, m->members[i].xstart[t - 1]);
			}
		}
	}
}

static void members_encode(struct wr *w, const struct ctl_msg *m)
{
	wr_u32(w, m->nmembers);
	for (uint32_t i = 0; i < m->nmembers; i++) {
		const struct ctl_member_rec *rec = &m->members[i];

		wr_u32(w, rec->id);
		wr_u32(w, rec->flags);
		wr_u64(w, rec->incarnation);
		wr_u64(w, rec->done);
		wr_u64(w, rec->start);
		wr_u16(w, rec->info_len);
		wr_bytes(w, rec->info, rec->info_len);
	}
}

ssize_t ctl_msg_encode(const struct ctl_msg *m, void *buf, size_t cap)
{
	size_t size = frame_size(m), n;
	struct wr w = { .p = buf };

	if (!size) {
		return -EINVAL;
	}
	if (size > cap) {
		return -EMSGSIZE;
	}
	wr_u32(&w, CTL_WIRE_MAGIC);
	wr_u16(&w, CTL_WIRE_VERSION);
	wr_u16(&w, m->type);
	wr_u32(&w, (uint32_t)size);
	wr_u32(&w, 0);
	wr_u64(&w, m->group_id);
	wr_u64(&w, m->epoch);
	switch (m->type) {
	case CTL_HELLO:
		n = strnlen(m->group, CTL_GROUP_MAX);
		wr_u32(&w, m->member);
		wr_u32(&w, m->flags);
		wr_u64(&w, m->incarnation);
		wr_u64(&w, m->max_epoch);
		wr_u64(&w, m->next_op);
		wr_u64(&w, m->done_op);
		wr_u32(&w, m->expected);
		wr_u16(&w, m->listen_port);
		wr_u8(&w, (uint8_t)n);
		wr_bytes(&w, m->group, n);
		break;
	case CTL_VIEW:
	case CTL_PROPOSE:
		wr_u64(&w, m->boundary);
		wr_u32(&w, m->coord);
		break;
	case CTL_ACK:
	case CTL_HB:
		wr_u64(&w, m->next_op);
		wr_u64(&w, m->done_op);
		break;
	case CTL_SUSPECT:
		wr_u32(&w, m->peer);
		wr_u32(&w, m->evidence);
		wr_u64(&w, m->seq);
		break;
	case CTL_REFUSE:
	case CTL_LEAVE:
		n = strnlen(m->text, CTL_TEXT_MAX);
		if (m->type == CTL_REFUSE) {
			wr_u32(&w, m->code);
			wr_u32(&w, m->hint);
		}
		wr_u16(&w, (uint16_t)n);
		wr_bytes(&w, m->text, n);
		break;
	default:
		break;
	}
	if (type_carries_members(m->type)) {
		members_encode(&w, m);
	}
	streams_encode(&w, m);
	return (ssize_t)size;
}

const char *ctl_type_name(unsigned type)
{
	static const char *const names[] = {
		[CTL_HELLO] = "hello", [CTL_VIEW] = "view",   [CTL_PROPOSE] = "propose",
		[CTL_ACK] = "ack",     [CTL_HB] = "hb",	      [CTL_SUSPECT] = "suspect",
		[CTL_LEAVE] = "leave", [CTL_READY] = "ready", [CTL_REFUSE] = "refuse",
	};

	return type >= 1 && type <= CTL_TYPE_MAX ? names[type] : "unknown";
}

const char *ctl_refuse_name(unsigned code)
{
	static const char *const names[] = {
		[CTL_REF_PROTOCOL] = "protocol",   [CTL_REF_STALE] = "stale",
		[CTL_REF_NOT_COORD] = "not_coord", [CTL_REF_NO_QUORUM] = "no_quorum",
		[CTL_REF_FULL] = "full",	   [CTL_REF_CLOSED] = "closed",
		[CTL_REF_LEFT] = "left",
	};

	return code >= 1 && code <= CTL_REF_MAX ? names[code] : "unknown";
}

const char *ctl_evidence_name(unsigned ev)
{
	static const char *const names[] = {
		[CTL_EV_DEATH] = "death", [CTL_EV_SILENCE] = "silence", [CTL_EV_LINK] = "link",
		[CTL_EV_CUT] = "cut",	  [CTL_EV_SHAPE] = "shape",
	};

	return ev >= 1 && ev <= CTL_EV_MAX ? names[ev] : "unknown";
}
