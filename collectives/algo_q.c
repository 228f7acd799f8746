/* SPDX-License-Identifier: BSD-3-Clause */
/* Quantized allreduce (a codec of include/ftcc/quant.h): member i owns chunk i of the result.
 *
 *   scatter  every member encodes each chunk of its input once and sends chunk j to member j;
 *   reduce   the owner decodes the n encodings of its chunk (its own included) and sums them in
 *            float32, in member order, then encodes the sum once;
 *   gather   the owner sends that encoding to every member; each (the owner too) decodes it
 *            into its result.
 *
 * So every element is quantized twice, once at its source and once after the sum, whatever the
 * group's size: the error does not grow with hops, and every member decodes the same bytes,
 * which makes the results bit-identical. The result is a function of the attempt's members and
 * their inputs only (the chunk partition, the member order), so a resumed op is the same on
 * every member too. Each member sends (n - 1) / n of its encoded input and as much again of
 * encoded results: the ring's volume at the codec's size.
 *
 * Chunks: the result's final chunks are the n owners' chunks; a member marks chunk j held once it
 * decoded it. Fault points: "qs" (before the scatter) and "qg" (before the gather), step 0.
 */
#include <errno.h>
#include <string.h>

#include "algo_int.h"
#include "ftcc/fault.h"
#include "ftcc/quant.h"
#include "ftcc/reduce.h"

enum { Q_STEP_SCATTER = 0, Q_STEP_GATHER = 1 };

#define Q_ALIGN(x) (((x) + 63) & ~(size_t)63)

/* Where everything of one attempt lives in the scratch. */
struct q_layout {
	size_t enc_off[FTCC_MAX_MEMBERS + 1]; /* chunk j's encoding in @enc: [enc_off[j], [j+1]) */
	uint8_t *enc; /* this member's input, chunk by chunk; then results */
	uint8_t *in;  /* n encodings of the own chunk, one per member */
	size_t in_stride;
	uint8_t *red; /* the own chunk's sum, encoded */
	float *acc;   /* the own chunk's sum */
	struct dp_xfer *x;
};

static size_t q_chunk_len(uint32_t n, size_t count, uint32_t c)
{
	size_t off, len;

	algo_range(ALGO_Q, n, count, c, &off, &len);
	return len;
}

/* Lays out the scratch at @base (or only measures it with @base NULL); its size. */
static size_t q_layout(struct q_layout *l, uint8_t *base, enum ftcc_codec codec, uint32_t n,
		       size_t count, uint32_t self)
{
	size_t at = 0, own = q_chunk_len(n, count, self), big = q_chunk_len(n, count, 0);

	l->enc_off[0] = 0;
	for (uint32_t j = 0; j < n; j++) {
		l->enc_off[j + 1] = l->enc_off[j] + ftcc_q_bytes(codec, q_chunk_len(n, count, j));
	}
	l->enc = base;
	at = Q_ALIGN(l->enc_off[n]);
	l->in_stride = Q_ALIGN(ftcc_q_bytes(codec, big));
	l->in = base ? base + at : NULL;
	at += l->in_stride * n;
	l->red = base ? base + at : NULL;
	at += Q_ALIGN(ftcc_q_bytes(codec, own));
	l->acc = base ? (float *)(void *)(base + at) : NULL;
	at += Q_ALIGN(big * sizeof(float));
	l->x = base ? (struct dp_xfer *)(void *)(base + at) : NULL;
	at += Q_ALIGN(2 * (size_t)n * sizeof(struct dp_xfer));
	return at;
}

size_t algo_q_scratch_bytes(enum ftcc_codec codec, uint32_t n, size_t count)
{
	struct q_layout l;

	if (n == 0 || n > FTCC_MAX_MEMBERS) {
		return 0;
	}
	/* The member owning chunk 0 has the largest own chunk: a bound for every member. */
	return q_layout(&l, NULL, codec, n, count, 0) + 64;
}

/* Encodes chunk @c of @src into @dst. */
static int q_encode_chunk(const struct algo_att *a, uint32_t c, uint8_t *dst)
{
	size_t off, len, esz = ftcc_dtype_size(a->dtype);

	algo_range(ALGO_Q, a->n, a->count, c, &off, &len);
	return ftcc_q_encode(a->codec, (const uint8_t *)a->input + off * esz, a->dtype, len, dst);
}

/* Decodes encoding @src of chunk @c into the result, and marks the chunk held. */
static int q_decode_chunk(struct algo_att *a, uint32_t c, const uint8_t *src)
{
	size_t off, len, esz = ftcc_dtype_size(a->dtype);
	int rc;

	algo_range(ALGO_Q, a->n, a->count, c, &off, &len);
	rc = ftcc_q_decode(a->codec, src, len, (uint8_t *)a->out + off * esz, a->dtype);
	if (rc == 0) {
		algo_have_set(a->have, c);
	}
	return rc;
}

/* The scatter: chunk j of the input to member j, and every member's encoding of our chunk. */
static int q_scatter(struct algo_att *a, struct q_layout *l)
{
	size_t own = ftcc_q_bytes(a->codec, q_chunk_len(a->n, a->count, a->self));
	int k = 0;

	for (uint32_t j = 0; j < a->n; j++) {
		int rc = q_encode_chunk(a, j, l->enc + l->enc_off[j]);

		if (rc) {
			return rc;
		}
	}
	memcpy(l->in + a->self * l->in_stride, l->enc + l->enc_off[a->self], own);
	ftcc_fault("qs", a->seq, 0);
	for (uint32_t j = 0; j < a->n; j++) {
		if (j == a->self) {
			continue;
		}
		algo_xfer_init(a, &l->x[k++], j, DP_SEND, Q_STEP_SCATTER, l->enc + l->enc_off[j],
			       l->enc_off[j + 1] - l->enc_off[j]);
		algo_xfer_init(a, &l->x[k++], j, DP_RECV, Q_STEP_SCATTER, l->in + j * l->in_stride,
			       own);
	}
	return algo_wait_all(a, l->x, k);
}

/* The sum of our chunk, in member order, encoded once; our result chunk decoded from it. */
static int q_reduce(struct algo_att *a, struct q_layout *l)
{
	size_t len = q_chunk_len(a->n, a->count, a->self);
	int rc = 0;

	memset(l->acc, 0, len * sizeof(float));
	for (uint32_t j = 0; j < a->n && rc == 0; j++) {
		rc = ftcc_q_decode_add(a->codec, l->in + j * l->in_stride, len, l->acc);
	}
	if (rc == 0) {
		rc = ftcc_q_encode(a->codec, l->acc, FTCC_FLOAT32, len, l->red);
	}
	return rc ? rc : q_decode_chunk(a, a->self, l->red);
}

/* The gather: our encoded sum to everyone, theirs into the places of our sent chunks. */
static int q_gather(struct algo_att *a, struct q_layout *l)
{
	size_t own = ftcc_q_bytes(a->codec, q_chunk_len(a->n, a->count, a->self));
	int k = 0, rc;

	ftcc_fault("qg", a->seq, 0);
	for (uint32_t j = 0; j < a->n; j++) {
		if (j == a->self) {
			continue;
		}
		algo_xfer_init(a, &l->x[k++], j, DP_SEND, Q_STEP_GATHER, l->red, own);
		algo_xfer_init(a, &l->x[k++], j, DP_RECV, Q_STEP_GATHER, l->enc + l->enc_off[j],
			       l->enc_off[j + 1] - l->enc_off[j]);
	}
	rc = algo_wait_all(a, l->x, k);
	for (uint32_t j = 0; j < a->n && rc == 0; j++) {
		if (j != a->self) {
			rc = q_decode_chunk(a, j, l->enc + l->enc_off[j]);
		}
	}
	return rc;
}

int algo_q_run(struct algo_att *a)
{
	struct q_layout l;
	uint8_t *base;
	int rc;

	if (!ftcc_q_supported(a->codec, a->dtype, FTCC_SUM) || a->op != FTCC_SUM) {
		return -EINVAL;
	}
	base = (uint8_t *)Q_ALIGN((uintptr_t)a->scratch);
	if (!a->scratch) {
		return -EINVAL;
	}
	q_layout(&l, base, a->codec, a->n, a->count, a->self);
	rc = q_scatter(a, &l);
	if (rc == 0) {
		rc = q_reduce(a, &l);
	}
	if (rc == 0 && a->n > 1) {
		rc = q_gather(a, &l);
	}
	return rc;
}
