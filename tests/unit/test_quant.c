/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the block codecs of the quantized allreduce (collectives/reduce_quant.c): sizes,
 * round trips against a float64 reference within the documented bound, exact codes, e4m3's
 * rounding (ties to even, subnormals, saturation) against values worked out by hand, NaN and
 * infinity poisoning only their block, all-zero blocks, odd lengths and int4's half bytes,
 * bfloat16 in and out, accumulation, subnormal scales, the quantized allreduce's block-aligned
 * partition, and the caller's floating-point environment.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

#include "ftcc/algo.h"
#include "ftcc/quant.h"

static const enum ftcc_codec codecs[] = { FTCC_CODEC_INT8, FTCC_CODEC_FP8_E4M3, FTCC_CODEC_INT4 };
#define NCODECS 3

static double dmax(double a, double b)
{
	return a > b ? a : b;
}

/* A reproducible pseudo-random float in [-1, 1). */
static float rnd(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return (float)((double)(*s >> 11) / (double)(1ull << 53) * 2.0 - 1.0);
}

/* @n values: uniform, with every 7th element scaled to a wide dynamic range. */
static void fill(float *x, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		x[i] = rnd(&seed) * (i % 7 == 3 ? 1e3f : 1.0f) * (i % 11 == 5 ? 1e-4f : 1.0f);
	}
}

static uint8_t *enc_alloc(enum ftcc_codec c, size_t n)
{
	uint8_t *p = malloc(ftcc_q_bytes(c, n) + 1);

	cr_assert(p);
	return p;
}

/* Asserts that @y (decoded) is within the documented bound of @x, block by block. */
static void expect_within(enum ftcc_codec c, const float *x, const float *y, size_t n)
{
	for (size_t b = 0; b * FTCC_CODEC_BLOCK < n; b++) {
		size_t off = b * FTCC_CODEC_BLOCK;
		size_t len = n - off < FTCC_CODEC_BLOCK ? n - off : FTCC_CODEC_BLOCK;
		double m = 0;

		for (size_t i = 0; i < len; i++) {
			m = dmax(m, fabs(x[off + i]));
		}
		for (size_t i = 0; i < len; i++) {
			double e = fabs((double)y[off + i] - (double)x[off + i]);
			double bound = ftcc_q_bound(c, x[off + i], m) + fabs(y[off + i]) * 0x1p-23;

			cr_expect(e <= bound,
				  "%s: element %zu: %.9g decoded as %.9g (error %.3g > %.3g)",
				  ftcc_q_name(c), off + i, (double)x[off + i], (double)y[off + i],
				  e, bound);
		}
	}
}

Test(quant, sizes_and_names)
{
	cr_expect_eq(ftcc_q_bytes(FTCC_CODEC_NONE, 100), 0);
	cr_expect_eq(ftcc_q_bytes((enum ftcc_codec)9, 100), 0);
	cr_expect_eq(ftcc_q_bytes(FTCC_CODEC_INT8, 0), 0);
	cr_expect_eq(ftcc_q_bytes(FTCC_CODEC_INT8, 1), 5);
	cr_expect_eq(ftcc_q_bytes(FTCC_CODEC_INT8, 256), 260);
	cr_expect_eq(ftcc_q_bytes(FTCC_CODEC_INT8, 257), 265);
	cr_expect_eq(ftcc_q_bytes(FTCC_CODEC_FP8_E4M3, 512), 520);
	cr_expect_eq(ftcc_q_bytes(FTCC_CODEC_INT4, 1), 5);
	cr_expect_eq(ftcc_q_bytes(FTCC_CODEC_INT4, 257), 8 + 129);
	/* the advertised savings against float32 */
	cr_expect(4.0 * 1048576 / (double)ftcc_q_bytes(FTCC_CODEC_INT8, 1048576) > 3.9);
	cr_expect(4.0 * 1048576 / (double)ftcc_q_bytes(FTCC_CODEC_INT4, 1048576) > 7.5);
	cr_expect_str_eq(ftcc_q_name(FTCC_CODEC_INT4), "int4");
	cr_expect_str_eq(ftcc_q_name((enum ftcc_codec)9), "unknown");
	cr_expect(ftcc_q_supported(FTCC_CODEC_INT8, FTCC_BFLOAT16, FTCC_AVG));
	cr_expect(!ftcc_q_supported(FTCC_CODEC_INT8, FTCC_FLOAT64, FTCC_SUM));
	cr_expect(!ftcc_q_supported(FTCC_CODEC_INT8, FTCC_FLOAT32, FTCC_MAX));
	cr_expect(!ftcc_q_supported(FTCC_CODEC_NONE, FTCC_FLOAT32, FTCC_SUM));
	cr_expect_eq(ftcc_q_encode(FTCC_CODEC_NONE, "", FTCC_FLOAT32, 0, NULL), -EINVAL);
	cr_expect_eq(ftcc_q_encode(FTCC_CODEC_INT8, "", FTCC_INT32, 0, NULL), -EINVAL);
	cr_expect_eq(ftcc_q_decode(FTCC_CODEC_INT8, NULL, 0, NULL, FTCC_FLOAT16), -EINVAL);
	cr_expect_eq(ftcc_q_decode_add((enum ftcc_codec)7, NULL, 0, NULL), -EINVAL);
}

/* Round trips of odd and even lengths, float32 in and out, within the bound. */
Test(quant, round_trip_bounds)
{
	static const size_t lens[] = { 1, 2, 7, 255, 256, 257, 1001, 4096 };

	for (int k = 0; k < NCODECS; k++) {
		for (size_t t = 0; t < sizeof(lens) / sizeof(lens[0]); t++) {
			size_t n = lens[t];
			float *x = malloc(n * 4), *y = malloc(n * 4);
			uint8_t *e = enc_alloc(codecs[k], n);

			cr_assert(x && y);
			fill(x, n, 7 + t);
			e[ftcc_q_bytes(codecs[k], n)] = 0xa5; /* a canary past the end */
			cr_assert_eq(ftcc_q_encode(codecs[k], x, FTCC_FLOAT32, n, e), 0);
			cr_expect_eq(e[ftcc_q_bytes(codecs[k], n)], 0xa5, "wrote past the end");
			cr_assert_eq(ftcc_q_decode(codecs[k], e, n, y, FTCC_FLOAT32), 0);
			expect_within(codecs[k], x, y, n);
			free(x);
			free(y);
			free(e);
		}
	}
}

/* The int codes hit their grid exactly, int4's halves included (odd length, negatives). */
Test(quant, exact_codes)
{
	float x[15], y[15];
	uint8_t e[64];

	for (int i = 0; i < 15; i++) {
		x[i] = (float)(i - 7); /* -7 .. 7: block maximum 7 */
	}
	cr_assert_eq(ftcc_q_encode(FTCC_CODEC_INT4, x, FTCC_FLOAT32, 15, e), 0);
	cr_assert_eq(ftcc_q_decode(FTCC_CODEC_INT4, e, 15, y, FTCC_FLOAT32), 0);
	cr_expect_arr_eq(x, y, sizeof(x));
	cr_expect_eq(e[4] & 15, 9, "element 0 (-7) is 0x9 in the low nibble");
	cr_expect_eq(e[4] >> 4, 10, "element 1 (-6) is 0xa in the high nibble");
	for (int i = 0; i < 15; i++) {
		x[i] = (float)(i * 18 - 127); /* -127 .. 125 */
	}
	x[14] = 127;
	cr_assert_eq(ftcc_q_encode(FTCC_CODEC_INT8, x, FTCC_FLOAT32, 15, e), 0);
	cr_assert_eq(ftcc_q_decode(FTCC_CODEC_INT8, e, 15, y, FTCC_FLOAT32), 0);
	cr_expect_arr_eq(x, y, sizeof(x));
}

/* e4m3 of y = x / s with s = 1 (block maximum 448), against values worked out by hand. */
Test(quant, e4m3_rounding)
{
	static const float in[] = { 448,      1.0625f,	 1.1875f,   -1.1875f, 0x1.8p-9f, 0x1.4p-9f,
				    0x1p-10f, 0x1.fp-7f, 0x1.cp-7f, 240,      232,	 0 };
	static const float want[] = { 448, 1.0f,    1.25f,     -1.25f, 0x1p-8f, 0x1p-9f,
				      0,   0x1p-6f, 0x1.cp-7f, 240,    224,	0 };
	size_t n = sizeof(in) / sizeof(in[0]);
	float y[16];
	uint8_t e[64];

	cr_assert_eq(ftcc_q_encode(FTCC_CODEC_FP8_E4M3, in, FTCC_FLOAT32, n, e), 0);
	cr_assert_eq(ftcc_q_decode(FTCC_CODEC_FP8_E4M3, e, n, y, FTCC_FLOAT32), 0);
	for (size_t i = 0; i < n; i++) {
		cr_expect_eq(y[i], want[i], "e4m3(%a) = %a, want %a", (double)in[i], (double)y[i],
			     (double)want[i]);
	}
	cr_expect_eq(e[4], 0x7e, "448 is the largest finite code");
}

/* A NaN or an infinity poisons its own block only; an all-zero block decodes to +0. */
Test(quant, specials_stay_in_their_block)
{
	size_t n = 4 * FTCC_CODEC_BLOCK + 3;
	float *x = calloc(n, 4), *y = malloc(n * 4);

	cr_assert(x && y);
	for (int k = 0; k < NCODECS; k++) {
		uint8_t *e = enc_alloc(codecs[k], n);

		fill(x, FTCC_CODEC_BLOCK, 3);			       /* block 0 */
		memset(x + FTCC_CODEC_BLOCK, 0, FTCC_CODEC_BLOCK * 4); /* block 1: zeros */
		fill(x + 2 * FTCC_CODEC_BLOCK, 2 * FTCC_CODEC_BLOCK + 3, 4);
		x[2 * FTCC_CODEC_BLOCK + 17] = NAN;	 /* block 2 */
		x[3 * FTCC_CODEC_BLOCK + 5] = -INFINITY; /* block 3 */
		cr_assert_eq(ftcc_q_encode(codecs[k], x, FTCC_FLOAT32, n, e), 0);
		cr_assert_eq(ftcc_q_decode(codecs[k], e, n, y, FTCC_FLOAT32), 0);
		expect_within(codecs[k], x, y, FTCC_CODEC_BLOCK);
		for (size_t i = FTCC_CODEC_BLOCK; i < 2 * FTCC_CODEC_BLOCK; i++) {
			cr_expect(y[i] == 0 && !signbit(y[i]), "%s: zero block element %zu: %g",
				  ftcc_q_name(codecs[k]), i, (double)y[i]);
		}
		for (size_t i = 2 * FTCC_CODEC_BLOCK; i < 4 * FTCC_CODEC_BLOCK; i++) {
			cr_expect(isnan(y[i]), "%s: element %zu of a poisoned block: %g",
				  ftcc_q_name(codecs[k]), i, (double)y[i]);
		}
		expect_within(codecs[k], x + 4 * FTCC_CODEC_BLOCK, y + 4 * FTCC_CODEC_BLOCK, 3);
		free(e);
	}
	free(x);
	free(y);
}

/* bfloat16 in: the same codes as its float32 widening; bfloat16 out: the float32 decoding
 * rounded to nearest even. */
Test(quant, bfloat16)
{
	size_t n = 777;
	float *x = malloc(n * 4), *y = malloc(n * 4);
	uint16_t *h = malloc(n * 2), *hy = malloc(n * 2);

	cr_assert(x && y && h && hy);
	fill(x, n, 11);
	for (size_t i = 0; i < n; i++) {
		uint32_t u;

		memcpy(&u, &x[i], 4);
		h[i] = (uint16_t)(u >> 16);
		u = (uint32_t)h[i] << 16;
		memcpy(&x[i], &u, 4); /* x is now h widened */
	}
	for (int k = 0; k < NCODECS; k++) {
		uint8_t *e1 = enc_alloc(codecs[k], n), *e2 = enc_alloc(codecs[k], n);

		cr_assert_eq(ftcc_q_encode(codecs[k], h, FTCC_BFLOAT16, n, e1), 0);
		cr_assert_eq(ftcc_q_encode(codecs[k], x, FTCC_FLOAT32, n, e2), 0);
		cr_expect_arr_eq(e1, e2, ftcc_q_bytes(codecs[k], n));
		cr_assert_eq(ftcc_q_decode(codecs[k], e1, n, y, FTCC_FLOAT32), 0);
		cr_assert_eq(ftcc_q_decode(codecs[k], e1, n, hy, FTCC_BFLOAT16), 0);
		for (size_t i = 0; i < n; i++) {
			uint32_t u;

			memcpy(&u, &y[i], 4);
			cr_expect_eq(hy[i], (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16),
				     "element %zu", i);
		}
		free(e1);
		free(e2);
	}
	free(x);
	free(y);
	free(h);
	free(hy);
}

/* decode_add adds the decoded values to what the accumulator holds. */
Test(quant, decode_add_accumulates)
{
	size_t n = 300;
	float x[300], y[300], acc[300];
	uint8_t e[400];

	fill(x, n, 5);
	for (int k = 0; k < NCODECS; k++) {
		cr_assert_eq(ftcc_q_encode(codecs[k], x, FTCC_FLOAT32, n, e), 0);
		cr_assert_eq(ftcc_q_decode(codecs[k], e, n, y, FTCC_FLOAT32), 0);
		for (size_t i = 0; i < n; i++) {
			acc[i] = (float)i;
		}
		cr_assert_eq(ftcc_q_decode_add(codecs[k], e, n, acc), 0);
		for (size_t i = 0; i < n; i++) {
			cr_expect_eq(acc[i], (float)i + y[i], "element %zu", i);
		}
	}
}

#if defined(__x86_64__) || defined(__i386__)
/* A caller running with flush-to-zero and rounding toward +inf gets the same bytes. */
Test(quant, callers_fp_environment)
{
	size_t n = 1000;
	float x[1000], y1[1000], y2[1000];
	uint8_t e1[1100], e2[1100];
	unsigned int old = _mm_getcsr();

	fill(x, n, 9);
	x[3] = 0x1p-140f;		/* subnormal input */
	for (int i = 512; i < 768; i++) /* a block of maximum ~1e-37: FTZ/DAZ would change it */
		x[i] = (float)(i - 600) * 1e-39f;
	for (int k = 0; k < NCODECS; k++) {
		cr_assert_eq(ftcc_q_encode(codecs[k], x, FTCC_FLOAT32, n, e1), 0);
		cr_assert_eq(ftcc_q_decode(codecs[k], e1, n, y1, FTCC_FLOAT32), 0);
		_mm_setcsr((old & ~0x6000u) | 0x4000u | 0x8040u); /* up, FTZ, DAZ */
		cr_assert_eq(ftcc_q_encode(codecs[k], x, FTCC_FLOAT32, n, e2), 0);
		cr_assert_eq(ftcc_q_decode(codecs[k], e2, n, y2, FTCC_FLOAT32), 0);
		_mm_setcsr(old);
		cr_expect_arr_eq(e1, e2, ftcc_q_bytes(codecs[k], n), "%s", ftcc_q_name(codecs[k]));
		cr_expect_arr_eq(y1, y2, sizeof(y1), "%s", ftcc_q_name(codecs[k]));
	}
}
#endif

/* Blocks of tiny magnitude (subnormal scales) stay within the bound plus 2^-149. */
Test(quant, subnormal_scales)
{
	static const float maxes[] = { 0x1.64p-142f, 0x1p-140f, 0x1p-130f, 1e-37f, 0x1p-149f };
	float x[256], y[256];
	uint8_t e[300];

	for (int k = 0; k < NCODECS; k++) {
		for (size_t t = 0; t < sizeof(maxes) / sizeof(maxes[0]); t++) {
			for (int i = 0; i < 256; i++) {
				x[i] = maxes[t] * (float)(i - 128) / 128.0f;
			}
			x[0] = -maxes[t];
			cr_assert_eq(ftcc_q_encode(codecs[k], x, FTCC_FLOAT32, 256, e), 0);
			cr_assert_eq(ftcc_q_decode(codecs[k], e, 256, y, FTCC_FLOAT32), 0);
			expect_within(codecs[k], x, y, 256);
		}
	}
}

/* The quantized allreduce's chunks are whole blocks, cover the buffer in order, and give chunk 0
 * the most elements (its owner's scratch bound). */
Test(quant, block_aligned_partition)
{
	static const size_t counts[] = { 0, 1, 255, 256, 257, 70000, 1000003 };
	static const uint32_t ns[] = { 1, 2, 3, 5, 64, 1024 };
	size_t off_ring, len_ring;

	for (size_t a = 0; a < sizeof(counts) / sizeof(counts[0]); a++) {
		for (size_t b = 0; b < sizeof(ns) / sizeof(ns[0]); b++) {
			size_t next = 0, off, len, first = 0;

			for (uint32_t c = 0; c < ns[b]; c++) {
				algo_range(ALGO_Q, ns[b], counts[a], c, &off, &len);
				cr_expect_eq(off, next, "count %zu n %u chunk %u", counts[a], ns[b],
					     c);
				cr_expect(off % FTCC_CODEC_BLOCK == 0 || len == 0);
				cr_expect(c == 0 || len <= first);
				first = c == 0 ? len : first;
				next = off + len;
			}
			cr_expect_eq(next, counts[a], "count %zu n %u", counts[a], ns[b]);
		}
	}
	algo_range(ALGO_RING, 3, 70000, 1, &off_ring, &len_ring);
	cr_expect_eq(off_ring, 23334, "the ring's partition is the plain one");
}

/* The error of a whole quantized sum: n members' inputs each encoded once, summed in float32,
 * the sum encoded once more (what algo_q.c does), within the sum of the bounds. */
Test(quant, sum_of_members_within_bound)
{
	enum { N = 5, LEN = 1024 };
	static float x[N][LEN], acc[LEN], y[LEN];
	static uint8_t e[N][LEN + 64], er[LEN + 64];

	for (int k = 0; k < NCODECS; k++) {
		memset(acc, 0, sizeof(acc));
		for (int m = 0; m < N; m++) {
			fill(x[m], LEN, 100 + (uint64_t)m);
			cr_assert_eq(ftcc_q_encode(codecs[k], x[m], FTCC_FLOAT32, LEN, e[m]), 0);
			cr_assert_eq(ftcc_q_decode_add(codecs[k], e[m], LEN, acc), 0);
		}
		cr_assert_eq(ftcc_q_encode(codecs[k], acc, FTCC_FLOAT32, LEN, er), 0);
		cr_assert_eq(ftcc_q_decode(codecs[k], er, LEN, y, FTCC_FLOAT32), 0);
		for (size_t b = 0; b < LEN / FTCC_CODEC_BLOCK; b++) {
			double mm[N] = { 0 }, ms = 0;
			size_t off = b * FTCC_CODEC_BLOCK;

			for (size_t i = off; i < off + FTCC_CODEC_BLOCK; i++) {
				for (int m = 0; m < N; m++) {
					mm[m] = dmax(mm[m], fabs(x[m][i]));
				}
				ms = dmax(ms, fabs(acc[i]));
			}
			for (size_t i = off; i < off + FTCC_CODEC_BLOCK; i++) {
				double exact = 0, bound = 0, mag = 0;

				for (int m = 0; m < N; m++) {
					exact += x[m][i];
					mag += fabs(x[m][i]) +
					       ftcc_q_bound(codecs[k], x[m][i], mm[m]);
					bound += ftcc_q_bound(codecs[k], x[m][i], mm[m]);
				}
				/* float32 additions, then the second encoding */
				bound += mag * N * 0x1p-24 + ftcc_q_bound(codecs[k], acc[i], ms) +
					 ms * 0x1p-23;
				cr_expect(fabs(y[i] - exact) <= bound,
					  "%s: element %zu: %.9g against %.9g (bound %.3g)",
					  ftcc_q_name(codecs[k]), i, (double)y[i], exact, bound);
			}
		}
	}
}
