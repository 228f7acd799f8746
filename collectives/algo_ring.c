/* SPDX-License-Identifier: BSD-3-Clause */
/* Ring allreduce for large messages: reduce-scatter then allgather around the members in id
 * order, each ring step's chunk moving in segments so that a segment received, reduced and
 * forwarded overlaps with the next one on the wire.
 *
 * A reduce-scatter (ALGO_RSC) runs the first half alone over the group's slots: the chunks are
 * the slots of the members taking part (member id i's at i * slot elements), and ring chunk
 * k is the slot of the member before k, so that each member ends with its own slot, final; that
 * slot is the one chunk it needs (the resume decision counts no other: resume.c).
 */
#include <errno.h>
#include <string.h>

#include "algo_int.h"
#include "ftcc/fault.h"
#include "ftcc/reduce.h"
#include "ftcc/settings.h"

/* Segments in flight per direction. */
#define RING_WINDOW 4

/* Tag steps: bit 31 the phase (0 reduce-scatter, 1 allgather), bits 21..30 the ring step
 * (n - 1 <= 1023), bits 0..20 the segment: unique and increasing in protocol order. */
#define RING_SEG_BITS 21
#define RING_SEG_MAX ((1u << RING_SEG_BITS) - 1)

enum { RING_SEND = 0, RING_RECV = 1 };

/* A position in one direction's stream of segments: stage t (reduce-scatter steps 0..n-2,
 * then allgather steps as n-1..2n-3), segment k of that stage's chunk. */
struct ring_pos {
	uint32_t t, k;
};

/* One attempt's ring: the transfers in flight, per direction a FIFO of RING_WINDOW slots
 * retired in order; an idle slot is a completed empty transfer. Lives on the caller's stack. */
struct ring {
	struct algo_att *a;
	int rs_only;	 /* ALGO_RSC: the reduce-scatter half over the slots */
	size_t slot;	 /* ALGO_RSC: elements per slot */
	size_t esz, seg; /* element bytes; elements per segment */
	uint32_t n, nst; /* members; stages, 2(n - 1) */
	enum ftcc_redop op;
	uint32_t fired; /* fault points passed for stages < fired */
	struct ring_pos next[2];
	uint32_t head[2], used[2];
	struct dp_xfer x[2 * RING_WINDOW];
	struct ring_pos at[2 * RING_WINDOW];
};

static int ring_lt(struct ring_pos a, struct ring_pos b)
{
	return a.t < b.t || (a.t == b.t && a.k < b.k);
}

/* The chunk stage @t sends (RING_SEND) or receives: member i sends chunk i - t and receives
 * chunk i - t - 1, so what stage t receives is what stage t + 1 sends, and after the
 * reduce-scatter member i holds the final value of chunk i + 1. */
static uint32_t ring_chunk(const struct ring *r, uint32_t t, int dir)
{
	return (r->a->self + 2 * r->n - t - (dir == RING_RECV)) % r->n;
}

/* Element range of ring chunk @c. */
static void ring_chunk_range(const struct ring *r, uint32_t c, size_t *off, size_t *len)
{
	if (r->rs_only) {
		*off = r->a->ids[(c + r->n - 1) % r->n] * r->slot;
		*len = r->slot;
		return;
	}
	algo_chunk_range(r->n, r->a->count, c, off, len);
}

static size_t ring_nseg(const struct ring *r, uint32_t c)
{
	size_t off, len;

	ring_chunk_range(r, c, &off, &len);
	return (len + r->seg - 1) / r->seg;
}

/* Moves @p past stages that have no segment in direction @dir. */
static void ring_norm(const struct ring *r, struct ring_pos *p, int dir)
{
	while (p->t < r->nst && p->k >= ring_nseg(r, ring_chunk(r, p->t, dir))) {
		p->t++;
		p->k = 0;
	}
}

/* The oldest position of @dir not yet retired. */
static struct ring_pos ring_front(const struct ring *r, int dir)
{
	if (r->used[dir]) {
		return r->at[dir * RING_WINDOW + r->head[dir]];
	}
	return r->next[dir];
}

/* A send may go once the segment it forwards was received and reduced; a receive of the
 * allgather may land once the reduce-scatter send that read the same place has finished. With
 * keep_fill the allgather's first receive, into this member's own chunk, also waits until the
 * first stage's send of the same segment was posted: ring_keep() kept that range then. */
static int ring_ready(const struct ring *r, int dir, struct ring_pos p)
{
	if (dir == RING_SEND) {
		return p.t == 0 ||
		       ring_lt((struct ring_pos){ p.t - 1, p.k }, ring_front(r, RING_RECV));
	}
	if (p.t >= r->n) {
		return ring_lt((struct ring_pos){ p.t - r->n + 1, p.k }, ring_front(r, RING_SEND));
	}
	return p.t < r->n - 1 || !r->a->keep_fill ||
	       ring_lt((struct ring_pos){ 0, p.k }, r->next[RING_SEND]);
}

/* Passes the fault points of every stage up to @t. */
static void ring_fire(struct ring *r, uint32_t t)
{
	for (; r->fired <= t && r->fired < r->nst; r->fired++) {
		if (r->fired < r->n - 1) {
			ftcc_fault("rs", r->a->seq, r->fired);
		} else {
			ftcc_fault("ag", r->a->seq, r->fired - (r->n - 1));
		}
	}
}

/* Element range of position @p in direction @dir. */
static void ring_range(const struct ring *r, int dir, struct ring_pos p, size_t *off, size_t *len)
{
	size_t coff, clen;

	ring_chunk_range(r, ring_chunk(r, p.t, dir), &coff, &clen);
	*off = coff + p.k * r->seg;
	*len = clen - p.k * r->seg < r->seg ? clen - p.k * r->seg : r->seg;
}

/* keep_fill: whether position @p of direction @dir is the first to touch its range of @out:
 * the first stage's sends (this member's own chunk, which only the allgather's first receive
 * writes, later) and the reduce-scatter's receives (every other chunk, once each). */
static int ring_keeps(const struct ring *r, int dir, struct ring_pos p)
{
	return r->a->keep_fill && (dir == RING_SEND ? p.t == 0 : p.t < r->n - 1);
}

/* keep_fill: copies the range of position @p from @out, which holds the input there still, to
 * @input, where the input is kept. */
static void ring_keep(const struct ring *r, int dir, struct ring_pos p)
{
	size_t off, len;

	ring_range(r, dir, p, &off, &len);
	memcpy((char *)r->a->input + off * r->esz, (const char *)r->a->out + off * r->esz,
	       len * r->esz);
}

/* keep_fill, the attempt ending early: keeps the ranges not reached yet, which nothing wrote
 * (posted receives land in ranges already kept), so that @input holds the whole input. */
static void ring_keep_rest(struct ring *r)
{
	for (int dir = RING_SEND; dir <= RING_RECV; dir++) {
		struct ring_pos p = r->next[dir];

		for (; p.t < r->nst && ring_keeps(r, dir, p); ring_norm(r, &p, dir)) {
			ring_keep(r, dir, p);
			p.k++;
		}
	}
}

static void ring_idle_slot(struct ring *r, struct dp_xfer *x)
{
	algo_xfer_init(r->a, x, (r->a->self + 1) % r->n, DP_SEND, 0, NULL, 0);
	x->done = 1;
}

/* Posts what the windows and the dependencies allow, receives first. */
static void ring_post(struct ring *r)
{
	struct algo_att *a = r->a;

	for (int dir = RING_RECV; dir >= RING_SEND; dir--) {
		while (r->used[dir] < RING_WINDOW && r->next[dir].t < r->nst &&
		       ring_ready(r, dir, r->next[dir])) {
			struct ring_pos p = r->next[dir];
			uint32_t slot =
				dir * RING_WINDOW + (r->head[dir] + r->used[dir]) % RING_WINDOW;
			uint32_t ag = p.t >= r->n - 1;
			uint32_t step = ag << 31 | (p.t - ag * (r->n - 1)) << RING_SEG_BITS | p.k;
			const char *base = p.t == 0 && dir == RING_SEND ? a->input : a->out;
			size_t off, len;

			if (ring_keeps(r, dir, p)) {
				ring_keep(r, dir, p);
			}
			ring_fire(r, p.t);
			ring_range(r, dir, p, &off, &len);
			algo_xfer_init(a, &r->x[slot],
				       dir == RING_SEND ? (a->self + 1) % r->n :
							  (a->self + r->n - 1) % r->n,
				       dir == RING_SEND ? DP_SEND : DP_RECV, step,
				       (void *)(base + off * r->esz), len * r->esz);
			r->at[slot] = p;
			r->used[dir]++;
			r->next[dir].k++;
			ring_norm(r, &r->next[dir], dir);
		}
	}
}

/* A received segment: reduce-scatter folds this member's input in (out = received OP input,
 * commutative, so the chunk's owner computes the same bits whoever started it); the last
 * segment of a chunk whose final value is now here sets its bit. */
static int ring_arrived(struct ring *r, struct ring_pos p)
{
	struct algo_att *a = r->a;
	uint32_t c = ring_chunk(r, p.t, RING_RECV);
	size_t off, len;
	int rc;

	if (p.t < r->n - 1) {
		ring_range(r, RING_RECV, p, &off, &len);
		rc = ftcc_reduce((char *)a->out + off * r->esz,
				 (const char *)a->input + off * r->esz, len, a->dtype, r->op);
		if (rc) {
			return rc;
		}
	}
	if (p.t >= r->n - 2 && p.k + 1 == ring_nseg(r, c)) {
		/* the reduce-scatter's last stage leaves this member's own slot final */
		algo_have_set(a->have, r->rs_only ? a->ids[a->self] : c);
	}
	return 0;
}

/* Retires completed transfers at the head of each FIFO, in order. */
static int ring_retire(struct ring *r)
{
	for (int dir = RING_SEND; dir <= RING_RECV; dir++) {
		while (r->used[dir]) {
			uint32_t slot = dir * RING_WINDOW + r->head[dir];
			int rc;

			if (!r->x[slot].done) {
				break;
			}
			if (dir == RING_RECV) {
				rc = ring_arrived(r, r->at[slot]);
				if (rc) {
					return rc;
				}
			}
			ring_idle_slot(r, &r->x[slot]);
			r->head[dir] = (r->head[dir] + 1) % RING_WINDOW;
			r->used[dir]--;
		}
	}
	return 0;
}

static int ring_init(struct ring *r, struct algo_att *a, int rs_only)
{
	int64_t seg_bytes = ftcc_setting_int(FTCC_SET_SEGMENT_BYTES);
	size_t max_chunk = (a->count + a->n - 1) / a->n;

	memset(r, 0, sizeof(*r));
	if (a->n > 1024) {
		return -EINVAL;
	}
	r->a = a;
	r->n = a->n;
	r->rs_only = rs_only;
	r->nst = rs_only ? a->n - 1 : 2 * (a->n - 1);
	if (rs_only) {
		r->slot = max_chunk = a->count / a->slots;
	}
	r->esz = ftcc_dtype_size(a->dtype);
	r->op = algo_accum_op(a->op);
	r->seg = seg_bytes > 0 ? (size_t)seg_bytes / r->esz : 1;
	if (r->seg == 0) {
		r->seg = 1;
	}
	/* Segment numbers must fit their tag bits: larger segments for huge chunks. */
	if (max_chunk / r->seg >= RING_SEG_MAX) {
		r->seg = (max_chunk + RING_SEG_MAX - 1) / RING_SEG_MAX;
	}
	for (uint32_t i = 0; i < 2 * RING_WINDOW; i++) {
		ring_idle_slot(r, &r->x[i]);
	}
	for (int dir = RING_SEND; dir <= RING_RECV; dir++) {
		ring_norm(r, &r->next[dir], dir);
	}
	/* A chunk with no element is final from the start. */
	for (uint32_t c = 0; c < r->n; c++) {
		if (ring_nseg(r, c) == 0) {
			algo_have_set(a->have, rs_only ? a->ids[(c + r->n - 1) % r->n] : c);
		}
	}
	return 0;
}

static int ring_run(struct algo_att *a, int rs_only)
{
	struct algo_waiter w;
	struct ring r;
	int rc;

	if (a->keep_fill && a->n == 1) {
		/* alone: kept whole first */
		memcpy((void *)a->input, a->out, a->count * ftcc_dtype_size(a->dtype));
		a->keep_fill = 0;
	}
	if (rs_only && (a->slots == 0 || a->count % a->slots)) {
		return -EINVAL;
	}
	for (uint32_t i = 0; rs_only && i < a->n; i++) {
		if (a->ids[i] >= a->slots) {
			return -EINVAL;
		}
	}
	if (a->n == 1) {
		algo_run_alone(a, 1);
		if (rs_only) { /* its own slot is the one chunk it holds */
			a->have[0] = 0;
			algo_have_set(a->have, a->ids[0]);
		}
		return 0;
	}
	rc = ring_init(&r, a, rs_only);
	if (rc) {
		return rc; /* @out untouched, the input not kept: keep_fill stays set (algo.h) */
	}
	algo_waiter_init(&w);
	for (;;) {
		rc = ring_retire(&r);
		if (rc) {
			dp_release(a->dp, r.x, 2 * RING_WINDOW); /* the other slots' half frames */
			break;
		}
		ring_post(&r);
		if (!r.used[RING_SEND] && !r.used[RING_RECV]) {
			if (r.next[RING_SEND].t < r.nst || r.next[RING_RECV].t < r.nst) {
				rc = -EPROTO; /* cannot happen: something is always ready */
			}
			break;
		}
		rc = algo_progress(a, &w, r.x, 2 * RING_WINDOW);
		if (rc) {
			break;
		}
	}
	ring_keep_rest(&r);
	a->keep_fill = 0; /* kept whole: said to the caller (algo.h) */
	if (rc == 0) {
		ring_fire(&r, r.nst);
	}
	return rc;
}

int algo_ring_run(struct algo_att *a)
{
	return ring_run(a, 0);
}

int algo_rsc_run(struct algo_att *a)
{
	return ring_run(a, 1);
}
