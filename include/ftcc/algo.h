/* SPDX-License-Identifier: BSD-3-Clause */
/* Allreduce algorithms of the engine, one per file, over the data plane (dp.h).
 *
 * An attempt runs one algorithm among the members of one epoch. Every member runs the same
 * algorithm with the same parameters (the engine chooses it from the size and the member count,
 * identically everywhere), so the results are bit-identical on every member: each element of
 * the result is reduced once, by one member, or by both members of a pair with the same
 * commutative operation, and then copied.
 *
 * Chunks: the algorithm declares how many final chunks the result is cut into (algo_chunks())
 * and marks in @have each chunk whose final value it holds in @out. The engine uses that after a
 * failure to finish from the survivors' data (resume). algo_chunk_range() is the partition.
 */
#ifndef FTCC_ALGO_H
#define FTCC_ALGO_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc.h"
#include "ftcc/dp.h"

enum algo_id {
	ALGO_RING = 1, /* reduce-scatter then allgather around the ring, pipelined in segments */
	ALGO_RD = 2,   /* recursive doubling (non powers of two: the extra members fold in first) */
	ALGO_Q = 3,    /* quantized: scatter encoded chunks to their owners, gather encoded sums */
	ALGO_AG = 4,   /* allgather: each member's slot is final at its owner; a ring passes them */
	ALGO_BC = 5,   /* broadcast: a pipelined chain from the root (bytes) */
	ALGO_RSC = 6,  /* reduce-scatter: the ring's first half; each member's slot final at it */
};

/* ALGO_BC's chunks, whatever the group's size. */
#define BC_CHUNKS 64

struct algo_att {
	struct dp *dp;
	uint64_t seq;	     /* op */
	uint64_t epoch;	     /* epoch of the attempt: tags carry it */
	uint32_t n;	     /* members taking part */
	const uint32_t *ids; /* their member ids, increasing; the ring follows this order */
	uint32_t self;	     /* this member's index in ids */
	const void *input;   /* this member's input (never written but with @keep_fill) */
	void *out;	     /* result; may not alias @input */
	size_t count;	     /* elements */
	enum ftcc_dtype dtype;
	enum ftcc_redop op;    /* AVG is reduced as SUM; the engine divides afterwards */
	enum ftcc_codec codec; /* ALGO_Q's codec */
	uint32_t slots;	       /* ALGO_AG, ALGO_RSC: slots (the group's size), member id i's is
				* slot i */
	uint32_t root;	       /* ALGO_BC: the root's member id (maybe not in ids) */
	int out_holds_input;   /* ALGO_BC: @out already holds @input (not copied again) */
	uint64_t shape;	       /* the op's shape, carried by every data frame (dp.h) */
	void *scratch;	       /* algo_scratch_bytes() bytes, engine-owned */
	uint8_t *have;	       /* bitmap of algo_chunks() bits, cleared by the engine */
	/* ALGO_RING: @out holds the input and @input is where it is to be kept (an in-place op's
	 * preserved input): the ring copies each range of @out there just before its first
	 * receive overwrites it (or its first send reads it), and on an error the ranges it had
	 * not reached, so that @input holds the whole input when the attempt returns; it then
	 * clears @keep_fill. Still set on return: nothing ran, @out is untouched and @input was
	 * not written. The copy spread over the op instead of made before it. */
	int keep_fill;
	/* Called whenever the data plane waited without progress, and at least every 10 ms: a
	 * nonzero value aborts the attempt and is returned (the epoch changed). */
	int (*check)(void *arg);
	void *check_arg;
	uint32_t bad_peer; /* set with -EPIPE/-EPROTO/-EHOSTUNREACH/-EBADE */
};

/* The algorithm for @bytes among @n members (FTCC_ALGO, FTCC_RD_MAX_BYTES). */
enum algo_id algo_choose(size_t bytes, uint32_t n);
/* Final chunks of the result. */
uint32_t algo_chunks(enum algo_id id, uint32_t n);
/* Element range [*off, *off + *len) of chunk @c of @nchunks over @count elements. */
void algo_chunk_range(uint32_t nchunks, size_t count, uint32_t c, size_t *off, size_t *len);
/* The same for algorithm @id: ALGO_Q cuts at multiples of FTCC_CODEC_BLOCK elements (its
 * blocks are the buffer's, whatever the group's size), the others as algo_chunk_range(). */
void algo_range(enum algo_id id, uint32_t nchunks, size_t count, uint32_t c, size_t *off,
		size_t *len);
/* Scratch bytes the algorithm needs (@codec: ALGO_Q's). */
size_t algo_scratch_bytes(enum algo_id id, uint32_t n, size_t count, enum ftcc_dtype dtype,
			  enum ftcc_codec codec);
/* Scratch bytes of a quantized attempt with @codec among @n members (algo_q.c). */
size_t algo_q_scratch_bytes(enum ftcc_codec codec, uint32_t n, size_t count);

/* Runs the attempt. 0 when @out holds the whole result (every @have bit set); otherwise the
 * error: dp's (-EPIPE with bad_peer, -ECANCELED, -EPROTO) or @check's. Fault points: "rs" and
 * "ag" (ring, step = ring step), "rd" (step = round). */
int algo_ring_run(struct algo_att *a);
int algo_rd_run(struct algo_att *a);
/* ALGO_Q (collectives/algo_q.c): float32 or bfloat16 SUM with a->codec. Fault points "qs"
 * (before the scatter) and "qg" (before the gather), step 0. */
int algo_q_run(struct algo_att *a);
/* ALGO_AG (collectives/algo_ag.c): a->slots equal slots of a->count bytes in all (uint8), the
 * input holding this member's own and zeros; chunks are the slots. Fault point "ag", step =
 * ring step. */
int algo_ag_run(struct algo_att *a);
/* ALGO_RSC (collectives/algo_ring.c): the ring's reduce-scatter over a->slots equal slots of
 * a->count elements in all; chunks are the slots, and this member holds only its own at the end
 * (the one it needs). Fault point "rs", step = ring step. */
int algo_rsc_run(struct algo_att *a);
/* ALGO_BC (collectives/algo_bc.c): a->count bytes (uint8) from member id a->root, whose input
 * holds them; the others' input is not read (it may be NULL): theirs is zeros. Fault point "bc",
 * step = segment. */
int algo_bc_run(struct algo_att *a);
/* The bytes of one segment of a broadcast of @bytes. */
size_t algo_bc_seg(size_t bytes);
int algo_run(enum algo_id id, struct algo_att *a);

static inline void algo_have_set(uint8_t *have, uint32_t c)
{
	have[c / 8] |= (uint8_t)(1u << (c % 8));
}
static inline int algo_have_get(const uint8_t *have, uint32_t c)
{
	return have[c / 8] >> (c % 8) & 1;
}

#endif
