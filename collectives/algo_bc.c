/* SPDX-License-Identifier: BSD-3-Clause */
/* Broadcast (enum eng_kind ENG_BROADCAST) of a->count bytes from member id a->root: a chain
 * in id order from the root, pipelined in segments. The root sends each segment of its input to
 * the member after it, which receives it straight into its result and passes it on as soon as
 * it is whole, while the next segments are on the wire; the last member only receives. Each
 * member receives the data once and sends it at most once, where an allreduce of the root's
 * data and everyone's zeros moves 2(n - 1)/n of it each way and adds it up.
 *
 * The result is the root's data, final wherever it is held: the root holds every chunk from the
 * start, another member a chunk once every segment of it arrived, and a survivor's chunks
 * finish an attempt the root left as the allgather's slots do. Without the root in the attempt
 * (it left) the result is zeros, held everywhere at once; a root catching up sends its input,
 * the identity, zeros. Either way the root's data is not in the record, and the engine reports
 * the op so on every member.
 *
 * Chunks: BC_CHUNKS of the plain partition (algo_range(ALGO_BC, ...)). Segments: the buffer cut
 * at multiples of algo_bc_seg() bytes, numbered from 0, the tags' step. Fault point "bc", step
 * = segment, passed as this member first posts a transfer of that segment.
 */
#include <errno.h>
#include <string.h>

#include "algo_int.h"
#include "ftcc/fault.h"
#include "ftcc/reduce.h"
#include "ftcc/settings.h"

/* Segments in flight per direction. */
#define BC_WINDOW 4

enum { BC_SEND = 0, BC_RECV = 1 };

struct bc {
	struct algo_att *a;
	size_t seg, nseg;
	uint32_t prev, next; /* attempt indices; n when none (the root, the last member) */
	size_t posted[2];    /* segments posted per direction */
	size_t retired[2];   /* and completed, in order */
	size_t fired;	     /* fault points passed for segments < fired */
	uint32_t held;	     /* chunks below are held */
	struct dp_xfer x[2 * BC_WINDOW];
};

size_t algo_bc_seg(size_t bytes)
{
	int64_t max = ftcc_setting_int(FTCC_SET_SEGMENT_BYTES);
	/* At least 16 segments, so that the chain's fill (a segment per hop) stays small; whole
	 * pages; and few enough that a segment number fits a tag's step. */
	size_t seg = (bytes / 16 + 4095) / 4096 * 4096;

	if (seg > (size_t)max) {
		seg = (size_t)max;
	}
	if (seg < 4096) {
		seg = 4096;
	}
	if (bytes / seg >= UINT32_MAX) {
		seg = bytes / (UINT32_MAX - 1) + 1;
	}
	return seg;
}

static void bc_fire(struct bc *b, size_t s)
{
	for (; b->fired <= s && b->fired < b->nseg; b->fired++) {
		ftcc_fault("bc", b->a->seq, (uint32_t)b->fired);
	}
}

static void bc_range(const struct bc *b, size_t s, size_t *off, size_t *len)
{
	*off = s * b->seg;
	*len = b->a->count - *off < b->seg ? b->a->count - *off : b->seg;
}

/* Marks the chunks whose every byte arrived (the first @bytes of the buffer). */
static void bc_hold(struct bc *b, size_t bytes)
{
	for (; b->held < BC_CHUNKS; b->held++) {
		size_t off, len;

		algo_range(ALGO_BC, BC_CHUNKS, b->a->count, b->held, &off, &len);
		if (off + len > bytes) {
			break;
		}
		algo_have_set(b->a->have, b->held);
	}
}

/* Posts what the windows allow: a receive while a slot is free; a send of a segment this member
 * holds (the root: all). */
static void bc_post(struct bc *b)
{
	struct algo_att *a = b->a;
	size_t off, len;

	for (int dir = BC_RECV; dir >= BC_SEND; dir--) {
		uint32_t peer = dir == BC_SEND ? b->next : b->prev;

		if (peer == a->n) {
			continue;
		}
		while (b->posted[dir] < b->nseg && b->posted[dir] - b->retired[dir] < BC_WINDOW &&
		       (dir == BC_RECV || b->prev == a->n ||
			b->posted[dir] < b->retired[BC_RECV])) {
			size_t s = b->posted[dir];
			struct dp_xfer *x = &b->x[dir * BC_WINDOW + s % BC_WINDOW];
			const char *base = dir == BC_SEND && b->prev == a->n ? a->input : a->out;

			bc_fire(b, s);
			bc_range(b, s, &off, &len);
			algo_xfer_init(a, x, peer, dir == BC_SEND ? DP_SEND : DP_RECV, (uint32_t)s,
				       (void *)(base + off), len);
			b->posted[dir]++;
		}
	}
}

/* An idle slot: a completed empty transfer (to a peer the data plane knows). */
static void bc_idle(const struct algo_att *a, struct dp_xfer *x)
{
	algo_xfer_init(a, x, (a->self + 1) % a->n, DP_SEND, 0, NULL, 0);
	x->done = 1;
}

/* Retires the completed transfers at the head of each direction, in order. */
static void bc_retire(struct bc *b)
{
	for (int dir = BC_SEND; dir <= BC_RECV; dir++) {
		while (b->retired[dir] < b->posted[dir]) {
			struct dp_xfer *x = &b->x[dir * BC_WINDOW + b->retired[dir] % BC_WINDOW];

			if (!x->done) {
				break;
			}
			b->retired[dir]++;
			bc_idle(b->a, x);
		}
	}
	if (b->prev != b->a->n) {
		size_t off, len;

		if (b->retired[BC_RECV] == b->nseg) {
			bc_hold(b, b->a->count);
		} else if (b->retired[BC_RECV]) {
			bc_range(b, b->retired[BC_RECV] - 1, &off, &len);
			bc_hold(b, off + len);
		}
	}
}

int algo_bc_run(struct algo_att *a)
{
	struct algo_waiter w;
	uint32_t r = a->n, pos;
	struct bc b;
	int rc;

	if (ftcc_dtype_size(a->dtype) != 1) {
		return -EINVAL;
	}
	for (uint32_t i = 0; i < a->n; i++) {
		if (a->ids[i] == a->root) {
			r = i;
		}
	}
	if (r == a->n || (a->n == 1 && !a->input)) {
		/* Without the root: the others' input, zeros. */
		if (a->count) {
			memset(a->out, 0, a->count);
		}
		for (uint32_t c = 0; c < BC_CHUNKS; c++) {
			algo_have_set(a->have, c);
		}
		return 0;
	}
	memset(&b, 0, sizeof(b));
	b.a = a;
	b.seg = algo_bc_seg(a->count);
	b.nseg = (a->count + b.seg - 1) / b.seg;
	pos = (a->self + a->n - r) % a->n;
	b.prev = pos == 0 ? a->n : (a->self + a->n - 1) % a->n;
	b.next = pos == a->n - 1 ? a->n : (a->self + 1) % a->n;
	for (uint32_t i = 0; i < 2 * BC_WINDOW; i++) {
		bc_idle(a, &b.x[i]);
	}
	if (b.prev == a->n) {
		if (a->count && !a->out_holds_input) {
			memcpy(a->out, a->input, a->count);
		}
		bc_hold(&b, a->count);
		if (a->n == 1) {
			return 0; /* alone */
		}
	} else {
		bc_hold(&b, 0); /* chunks of no bytes */
	}
	algo_waiter_init(&w);
	for (;;) {
		bc_retire(&b);
		bc_post(&b);
		if (b.retired[BC_SEND] == b.posted[BC_SEND] &&
		    b.retired[BC_RECV] == b.posted[BC_RECV]) {
			break; /* nothing in flight, and nothing could be posted: done */
		}
		rc = algo_progress(a, &w, b.x, 2 * BC_WINDOW);
		if (rc) {
			return rc;
		}
	}
	bc_fire(&b, b.nseg);
	return 0;
}
