/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the reduction kernels (collectives/reduce*.c): every type and operator against a
 * reference computed here independently (floats decoded and rounded by plain arithmetic in
 * float64, integers exactly), fp8 exhaustively, special values, vector tails and unaligned
 * buffers, the caller's floating-point environment, and the AVG steps reduce_div / reduce_scale.
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

#include "ftcc/reduce.h"
#include "../../collectives/reduce_fp.h"
#include "../../plugin/nccl/types.h"

_Static_assert(FTCC_INT8 == (int)ncclInt8 && FTCC_UINT8 == (int)ncclUint8, "dtype values");
_Static_assert(FTCC_INT32 == (int)ncclInt32 && FTCC_UINT32 == (int)ncclUint32, "dtype values");
_Static_assert(FTCC_INT64 == (int)ncclInt64 && FTCC_UINT64 == (int)ncclUint64, "dtype values");
_Static_assert(FTCC_FLOAT16 == (int)ncclFloat16 && FTCC_FLOAT32 == (int)ncclFloat32, "dtypes");
_Static_assert(FTCC_FLOAT64 == (int)ncclFloat64 && FTCC_BFLOAT16 == (int)ncclBfloat16, "dtypes");
_Static_assert(FTCC_FP8_E4M3 == (int)ncclFloat8e4m3 && FTCC_FP8_E5M2 == (int)ncclFloat8e5m2, "");
_Static_assert(FTCC_DTYPE_COUNT == (int)ncclNumTypes, "dtype count");
_Static_assert(FTCC_SUM == (int)ncclSum && FTCC_PROD == (int)ncclProd, "redop values");
_Static_assert(FTCC_MAX == (int)ncclMax && FTCC_MIN == (int)ncclMin, "redop values");
_Static_assert(FTCC_AVG == (int)ncclAvg && FTCC_REDOP_COUNT == (int)ncclNumOps, "redop values");

/* ---- reference model ------------------------------------------------------------------------ */

/* A narrow float format: bits, mantissa bits, bias; ieee: the top exponent holds inf/NaN (else
 * only all-ones is NaN, e4m3fn); sat: overflow saturates to the largest finite (NCCL's fp8). */
struct fmt {
	int width, m, bias, ieee, sat;
	uint64_t nan;
};

static const struct fmt fmts[FTCC_DTYPE_COUNT] = {
	[FTCC_FLOAT16] = { 16, 10, 15, 1, 0, 0x7fff },
	[FTCC_BFLOAT16] = { 16, 7, 127, 1, 0, 0x7fff },
	[FTCC_FLOAT32] = { 32, 23, 127, 1, 0, 0x7fffffff },
	[FTCC_FP8_E4M3] = { 8, 3, 7, 0, 1, 0x7f },
	[FTCC_FP8_E5M2] = { 8, 2, 15, 1, 1, 0x7f },
};

#define F64_NAN 0x7fffffffffffffffull

static double pow2(int k)
{
	double r = 1.0;

	for (; k > 0; k--) {
		r *= 2.0;
	}
	for (; k < 0; k++) {
		r *= 0.5;
	}
	return r;
}

static double f64_of(uint64_t v)
{
	double d;

	memcpy(&d, &v, sizeof(d));
	return d;
}

static uint64_t f64_bits(double d)
{
	uint64_t v;

	memcpy(&v, &d, sizeof(v));
	return v;
}

static double ref_decode(enum ftcc_dtype t, uint64_t v)
{
	const struct fmt *f = &fmts[t];

	if (t == FTCC_FLOAT64) {
		return f64_of(v);
	}
	int ebits = f->width - 1 - f->m, emax = (1 << ebits) - 1;
	int sign = (int)(v >> (f->width - 1)) & 1, e = (int)(v >> f->m) & emax;
	uint64_t man = v & ((1ull << f->m) - 1);
	double mag;

	if (f->ieee && e == emax) {
		mag = man ? NAN : INFINITY;
	} else if (!f->ieee && e == emax && man == (1ull << f->m) - 1) {
		mag = NAN;
	} else if (e == 0) {
		mag = (double)man * pow2(1 - f->bias - f->m);
	} else {
		mag = (double)((1ull << f->m) | man) * pow2(e - f->bias - f->m);
	}
	return sign ? -mag : mag;
}

/* Rounds @x (a double) to format @t, nearest even: find the quantum of x's binade (clamped to
 * the subnormal one), count quanta with an explicit tie rule, then lay out the fields. */
static uint64_t ref_encode(enum ftcc_dtype t, double x)
{
	const struct fmt *f = &fmts[t];
	uint64_t sign = signbit(x) ? 1ull << (f->width - 1) : 0;
	int emax = (1 << (f->width - 1 - f->m)) - 1;
	uint64_t top = (uint64_t)emax << f->m;
	uint64_t maxfin = f->ieee ? top - 1 : top + (1ull << f->m) - 2; /* e4m3fn: 0x7e */
	uint64_t over = f->sat ? maxfin : top, code;
	double a = x < 0 ? -x : x;

	if (isnan(x)) {
		return f->nan;
	}
	if (isinf(a)) {
		return sign | over;
	}
	if (a == 0) {
		return sign;
	}
	int e = 0;
	for (double s = a; s >= 2.0; s *= 0.5) {
		e++;
	}
	for (double s = a; s < 1.0; s *= 2.0) {
		e--;
	}
	if (e < 1 - f->bias) {
		e = 1 - f->bias;
	}
	double y = a / pow2(e - f->m); /* exact: a power-of-two scaling */
	uint64_t n = (uint64_t)y;
	double frac = y - (double)n;

	if (frac > 0.5 || (frac == 0.5 && (n & 1))) {
		n++;
	}
	if (n < (1ull << f->m)) {
		code = n; /* subnormal (e is the smallest exponent) */
	} else {
		if (n == (2ull << f->m)) {
			n >>= 1;
			e++;
		}
		code = ((uint64_t)(e + f->bias) << f->m) + (n - (1ull << f->m));
	}
	return sign | (code > maxfin ? over : code);
}

static double ref_minmax(double a, double b, int max)
{
	if (isnan(a) || isnan(b)) {
		return NAN;
	}
	if (a != b) {
		return (a > b) == max ? a : b;
	}
	/* equal: identical, or +0 and -0 where max takes +0 and min -0 */
	return (signbit(a) != 0) == max ? b : a;
}

static int is_signed(enum ftcc_dtype t)
{
	return t == FTCC_INT8 || t == FTCC_INT32 || t == FTCC_INT64;
}

static uint64_t type_mask(enum ftcc_dtype t)
{
	size_t w = ftcc_dtype_size(t) * 8;

	return w == 64 ? ~0ull : (1ull << w) - 1;
}

static int64_t sext(enum ftcc_dtype t, uint64_t v)
{
	int sh = 64 - (int)ftcc_dtype_size(t) * 8;

	return (int64_t)(v << sh) >> sh;
}

/* Rounds a float64 result to @t (float64 itself keeps it), canonical NaN everywhere. */
static uint64_t ref_round(enum ftcc_dtype t, double r)
{
	if (t == FTCC_FLOAT64) {
		return isnan(r) ? F64_NAN : f64_bits(r);
	}
	return ref_encode(t, r);
}

static uint64_t ref_op(enum ftcc_dtype t, enum ftcc_redop op, uint64_t va, uint64_t vb)
{
	if (!ftcc_dtype_is_float(t)) {
		int sg = is_signed(t);
		int64_t sa = sext(t, va), sb = sext(t, vb);
		int a_gt = sg ? sa > sb : va > vb;

		switch (op) {
		case FTCC_PROD:
			return (va * vb) & type_mask(t);
		case FTCC_MAX:
			return a_gt ? va : vb;
		case FTCC_MIN:
			return a_gt ? vb : va;
		default:
			return (va + vb) & type_mask(t);
		}
	}
	double a = ref_decode(t, va), b = ref_decode(t, vb), r;

	switch (op) {
	case FTCC_PROD:
		r = a * b;
		break;
	case FTCC_MAX:
	case FTCC_MIN:
		r = ref_minmax(a, b, op == FTCC_MAX);
		break;
	default:
		r = a + b;
		break;
	}
	return ref_round(t, r);
}

/* ---- buffers and inputs --------------------------------------------------------------------- */

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static uint64_t get(const void *buf, enum ftcc_dtype t, size_t i)
{
	uint64_t v = 0;

	memcpy(&v, (const uint8_t *)buf + i * ftcc_dtype_size(t), ftcc_dtype_size(t));
	return v;
}

static void put(void *buf, enum ftcc_dtype t, size_t i, uint64_t v)
{
	memcpy((uint8_t *)buf + i * ftcc_dtype_size(t), &v, ftcc_dtype_size(t));
}

/* A random value of @t. Floats mix raw bit patterns (NaN, inf, anything) with values of
 * nearby exponents (so sums cancel and round), subnormals and values near overflow. */
static uint64_t gen(enum ftcc_dtype t, uint64_t *rng)
{
	uint64_t r = rng_next(rng), k = r & 7, mask = type_mask(t);

	r >>= 3;
	if (!ftcc_dtype_is_float(t)) {
		static const int64_t edge[] = { 0, 1, -1, INT64_MIN, INT64_MAX, 127, -128, -3 };
		return (k == 0 ? (uint64_t)edge[r & 7] ^ (r & 1 ? mask >> 1 : 0) : r) & mask;
	}
	int w = (int)ftcc_dtype_size(t) * 8, m = t == FTCC_FLOAT64 ? 52 : fmts[t].m;
	int ebits = w - 1 - m;
	uint64_t emax = (1ull << ebits) - 1, bias = emax >> 1;
	uint64_t sign = (r & 1) << (w - 1), man = (r >> 1) & ((1ull << m) - 1);
	uint64_t e = (r >> 40) % 5;

	switch (k) {
	case 0:
	case 1:
		return r & mask;
	case 2:
		return sign | man; /* subnormal or zero */
	case 3:
		return sign | ((emax - 1 - (e & 1)) << m) | man; /* near overflow */
	default:
		return sign | ((bias - 2 + e) << m) | man; /* around 1.0 */
	}
}

/* The float kernels exist twice, portable and AVX2 + F16C (used where the CPU has them). Tests
 * reaching them run once per set: use_set(1) portable, use_set(0) the best; messages name it. */
static int set_portable;

static void use_set(int portable)
{
	set_portable = portable;
	reduce_fp_force_baseline(portable);
}

static const char *set_name(void)
{
	return set_portable ? "portable" : "best";
}

/* Runs ftcc_reduce on @n elements at byte offsets @doff / @soff and compares every element
 * with ref_op; also checks the bytes around dst and all of src are untouched. */
static void check_ops_once(enum ftcc_dtype t, enum ftcc_redop op, const uint64_t *a,
			   const uint64_t *b, size_t n, size_t doff, size_t soff)
{
	size_t sz = ftcc_dtype_size(t), bytes = n * sz + 32;
	uint8_t *dbuf = malloc(bytes + doff), *sbuf = malloc(bytes + soff);
	uint8_t *d = dbuf + doff, *s = sbuf + soff;
	size_t bad = 0;

	cr_assert(dbuf && sbuf);
	memset(dbuf, 0xa5, bytes + doff);
	memset(sbuf, 0x5a, bytes + soff);
	for (size_t i = 0; i < n; i++) {
		put(d, t, i, a[i]);
		put(s, t, i, b[i]);
	}
	cr_assert_eq(ftcc_reduce(n ? d : NULL, n ? s : NULL, n, t, op), 0);
	for (size_t i = 0; i < n; i++) {
		uint64_t want = ref_op(t, op, a[i], b[i]), got = get(d, t, i);

		if (got != want && bad++ < 5) {
			cr_log_error("%s %s [%zu] (%s): 0x%llx op 0x%llx = 0x%llx, want 0x%llx",
				     ftcc_dtype_name(t), ftcc_redop_name(op), i, set_name(),
				     (unsigned long long)a[i], (unsigned long long)b[i],
				     (unsigned long long)got, (unsigned long long)want);
		}
		cr_expect_eq(get(s, t, i), b[i], "src changed");
	}
	cr_expect_eq(bad, 0, "%zu of %zu wrong (%s %s, offsets %zu/%zu, %s kernels)", bad, n,
		     ftcc_dtype_name(t), ftcc_redop_name(op), doff, soff, set_name());
	for (size_t i = 0; i < doff; i++) {
		cr_expect_eq(dbuf[i], 0xa5, "wrote before dst");
	}
	for (size_t i = n * sz; i < n * sz + 32; i++) {
		cr_expect_eq(d[i], 0xa5, "wrote past dst end");
	}
	free(dbuf);
	free(sbuf);
}

/* check_ops_once with each kernel set. */
static void check_ops(enum ftcc_dtype t, enum ftcc_redop op, const uint64_t *a, const uint64_t *b,
		      size_t n, size_t doff, size_t soff)
{
	for (int portable = 1; portable >= 0; portable--) {
		use_set(portable);
		check_ops_once(t, op, a, b, n, doff, soff);
	}
}

static void gen_pair(enum ftcc_dtype t, uint64_t *a, uint64_t *b, size_t n, uint64_t seed)
{
	for (size_t i = 0; i < n; i++) {
		a[i] = gen(t, &seed);
		b[i] = gen(t, &seed);
	}
}

/* ---- reduce --------------------------------------------------------------------------------- */

Test(reduce, every_type_and_op_matches_reference)
{
	enum { N = 4099 }; /* several narrow-format blocks and a ragged vector tail */
	static uint64_t a[N], b[N];

	for (int t = 0; t < FTCC_DTYPE_COUNT; t++) {
		gen_pair((enum ftcc_dtype)t, a, b, N, 0x1234u + (uint64_t)t);
		for (int op = 0; op < FTCC_REDOP_COUNT; op++) {
			check_ops((enum ftcc_dtype)t, (enum ftcc_redop)op, a, b, N, 0, 0);
		}
	}
}

Test(reduce, fp8_every_pair)
{
	static uint64_t a[65536], b[65536];

	for (size_t i = 0; i < 65536; i++) {
		a[i] = i & 0xff;
		b[i] = i >> 8;
	}
	for (int op = 0; op < FTCC_AVG; op++) {
		check_ops(FTCC_FP8_E4M3, (enum ftcc_redop)op, a, b, 65536, 0, 0);
		check_ops(FTCC_FP8_E5M2, (enum ftcc_redop)op, a, b, 65536, 0, 0);
	}
}

/* Every 16-bit pattern against a few partners: covers widening and rounding of every value. */
Test(reduce, f16_bf16_every_value)
{
	static const uint64_t partners[] = { 0x0000, 0x8000, 0x0001, 0x3c00, 0xbc01, 0x7bff,
					     0x7c00, 0x7e00, 0x3f80, 0x0400, 0x1234 };
	static uint64_t a[65536], b[65536];

	for (size_t p = 0; p < sizeof(partners) / sizeof(partners[0]); p++) {
		for (size_t i = 0; i < 65536; i++) {
			a[i] = i;
			b[i] = partners[p];
		}
		for (int op = 0; op < FTCC_AVG; op++) {
			check_ops(FTCC_FLOAT16, (enum ftcc_redop)op, a, b, 65536, 0, 0);
			check_ops(FTCC_BFLOAT16, (enum ftcc_redop)op, a, b, 65536, 0, 0);
		}
	}
}

Test(reduce, odd_lengths_and_unaligned_buffers)
{
	static const size_t lens[] = { 0, 1, 7, 1023 };
	static const size_t offs[][2] = { { 0, 0 }, { 1, 3 }, { 3, 1 }, { 2, 6 } };
	static uint64_t a[1023], b[1023];

	for (int t = 0; t < FTCC_DTYPE_COUNT; t++) {
		gen_pair((enum ftcc_dtype)t, a, b, 1023, 99u + (uint64_t)t);
		for (size_t l = 0; l < 4; l++) {
			for (size_t o = 0; o < 4; o++) {
				for (int op = 0; op < FTCC_REDOP_COUNT; op++) {
					check_ops((enum ftcc_dtype)t, (enum ftcc_redop)op, a, b,
						  lens[l], offs[o][0], offs[o][1]);
				}
			}
		}
	}
}

Test(reduce, dst_equal_to_src)
{
	enum { N = 777 };
	static uint64_t a[N];
	static uint8_t buf[N * 8];

	for (int ti = 0; ti < FTCC_DTYPE_COUNT; ti++) {
		enum ftcc_dtype t = (enum ftcc_dtype)ti;
		uint64_t seed = 5;

		for (int k = 0; k < 2 * FTCC_REDOP_COUNT; k++) {
			enum ftcc_redop op = (enum ftcc_redop)(k / 2);

			use_set(k & 1);
			for (size_t i = 0; i < N; i++) {
				a[i] = gen(t, &seed);
				put(buf, t, i, a[i]);
			}
			cr_assert_eq(ftcc_reduce(buf, buf, N, t, op), 0);
			for (size_t i = 0; i < N; i++) {
				cr_expect_eq(get(buf, t, i), ref_op(t, op, a[i], a[i]),
					     "%s %s [%zu] (%s)", ftcc_dtype_name(t),
					     ftcc_redop_name(op), i, set_name());
			}
		}
	}
}

/* Hand-written expectations: they pin the documented semantics and check the reference too. */
struct special {
	enum ftcc_dtype t;
	enum ftcc_redop op;
	uint64_t a, b, want;
};

static const struct special specials[] = {
	{ FTCC_FLOAT32, FTCC_SUM, 0x7fc00001, 0x3f800000, 0x7fffffff }, /* NaN payload dropped */
	{ FTCC_FLOAT32, FTCC_SUM, 0x3f800000, 0xffc00000, 0x7fffffff }, /* either side */
	{ FTCC_FLOAT32, FTCC_SUM, 0x7f800000, 0xff800000, 0x7fffffff }, /* inf - inf */
	{ FTCC_FLOAT32, FTCC_SUM, 0x7f800000, 0x3f800000, 0x7f800000 },
	{ FTCC_FLOAT32, FTCC_SUM, 0x80000000, 0x80000000, 0x80000000 }, /* -0 + -0 */
	{ FTCC_FLOAT32, FTCC_SUM, 0x80000000, 0x00000000, 0x00000000 },
	{ FTCC_FLOAT32, FTCC_SUM, 0x7f7fffff, 0x7f7fffff, 0x7f800000 },	 /* overflow */
	{ FTCC_FLOAT32, FTCC_SUM, 0x00000001, 0x00000001, 0x00000002 },	 /* subnormals */
	{ FTCC_FLOAT32, FTCC_SUM, 0x3f800000, 0x33c00000, 0x3f800001 },	 /* 1 + 1.5ulp/2 */
	{ FTCC_FLOAT32, FTCC_PROD, 0x00000000, 0xbf800000, 0x80000000 }, /* 0 * -1 */
	{ FTCC_FLOAT32, FTCC_PROD, 0x7f800000, 0x00000000, 0x7fffffff }, /* inf * 0 */
	{ FTCC_FLOAT32, FTCC_MAX, 0x80000000, 0x00000000, 0x00000000 },
	{ FTCC_FLOAT32, FTCC_MAX, 0x00000000, 0x80000000, 0x00000000 },
	{ FTCC_FLOAT32, FTCC_MIN, 0x00000000, 0x80000000, 0x80000000 },
	{ FTCC_FLOAT32, FTCC_MIN, 0x80000000, 0x00000000, 0x80000000 },
	{ FTCC_FLOAT32, FTCC_MAX, 0x7fc00000, 0x3f800000, 0x7fffffff }, /* NaN propagates */
	{ FTCC_FLOAT32, FTCC_MIN, 0x3f800000, 0x7fc00000, 0x7fffffff },
	{ FTCC_FLOAT32, FTCC_MIN, 0xff800000, 0x3f800000, 0xff800000 },
	{ FTCC_FLOAT64, FTCC_SUM, 0x7ff8000000000001, 0, F64_NAN },
	{ FTCC_FLOAT64, FTCC_SUM, 0x0000000000000001, 0x0000000000000001, 2 },
	{ FTCC_FLOAT64, FTCC_MIN, 0x8000000000000000, 0, 0x8000000000000000 },
	{ FTCC_FLOAT64, FTCC_MAX, 0x8000000000000000, 0, 0 },
	{ FTCC_FLOAT64, FTCC_MAX, 0x3ff0000000000000, 0xfff8000000000000, F64_NAN },
	{ FTCC_FLOAT16, FTCC_SUM, 0x7bff, 0x7bff, 0x7c00 }, /* 65504 * 2 -> inf */
	{ FTCC_FLOAT16, FTCC_SUM, 0x7bff, 0x4b80, 0x7bff }, /* 65504 + 15 stays */
	{ FTCC_FLOAT16, FTCC_SUM, 0x0001, 0x0001, 0x0002 }, /* subnormals */
	{ FTCC_FLOAT16, FTCC_SUM, 0x03ff, 0x0001, 0x0400 }, /* into the normals */
	{ FTCC_FLOAT16, FTCC_SUM, 0x3c00, 0x1000, 0x3c00 }, /* 1 + ulp/2: tie, even */
	{ FTCC_FLOAT16, FTCC_SUM, 0x3c01, 0x1000, 0x3c02 }, /* tie, odd: up */
	{ FTCC_FLOAT16, FTCC_SUM, 0x7e00, 0x3c00, 0x7fff }, /* NaN canonical */
	{ FTCC_FLOAT16, FTCC_SUM, 0xfc00, 0x7c00, 0x7fff }, /* -inf + inf */
	{ FTCC_FLOAT16, FTCC_MAX, 0x8000, 0x0000, 0x0000 },
	{ FTCC_FLOAT16, FTCC_MIN, 0x0000, 0x8000, 0x8000 },
	{ FTCC_FLOAT16, FTCC_PROD, 0x0001, 0x3800, 0x0000 }, /* 2^-24 / 2: tie to 0 */
	{ FTCC_FLOAT16, FTCC_PROD, 0x0003, 0x3800, 0x0002 }, /* 1.5 quanta: tie, even */
	{ FTCC_BFLOAT16, FTCC_SUM, 0x7f7f, 0x7f7f, 0x7f80 }, /* overflow to inf */
	{ FTCC_BFLOAT16, FTCC_SUM, 0x3f80, 0x3b80, 0x3f80 }, /* 1 + 2^-8: tie, even */
	{ FTCC_BFLOAT16, FTCC_SUM, 0x3f81, 0x3b80, 0x3f82 }, /* tie, odd: up */
	{ FTCC_BFLOAT16, FTCC_SUM, 0x0001, 0x0001, 0x0002 }, /* subnormals */
	{ FTCC_BFLOAT16, FTCC_SUM, 0xffc1, 0x3f80, 0x7fff }, /* NaN canonical */
	{ FTCC_FP8_E4M3, FTCC_SUM, 0x7e, 0x7e, 0x7e },	     /* 448 + 448 saturates */
	{ FTCC_FP8_E4M3, FTCC_SUM, 0xfe, 0xfe, 0xfe },
	{ FTCC_FP8_E4M3, FTCC_SUM, 0x7e, 0x50, 0x7e }, /* 448 + 8 rounds down */
	{ FTCC_FP8_E4M3, FTCC_SUM, 0x7d, 0x60, 0x7e }, /* 416 + 32 = 448 */
	{ FTCC_FP8_E4M3, FTCC_PROD, 0x7e, 0x7e, 0x7e },
	{ FTCC_FP8_E4M3, FTCC_SUM, 0xff, 0x00, 0x7f }, /* NaN, sign dropped */
	{ FTCC_FP8_E4M3, FTCC_MAX, 0x7f, 0x00, 0x7f },
	{ FTCC_FP8_E4M3, FTCC_SUM, 0x01, 0x01, 0x02 },	/* subnormals */
	{ FTCC_FP8_E4M3, FTCC_SUM, 0x07, 0x01, 0x08 },	/* into the normals */
	{ FTCC_FP8_E4M3, FTCC_PROD, 0x81, 0x01, 0x80 }, /* underflow keeps sign */
	{ FTCC_FP8_E4M3, FTCC_SUM, 0x78, 0x70, 0x7c },	/* 256 + 128 = 384 */
	{ FTCC_FP8_E5M2, FTCC_SUM, 0x7b, 0x7b, 0x7b },	/* 57344 * 2 saturates */
	{ FTCC_FP8_E5M2, FTCC_SUM, 0x7c, 0x3c, 0x7b },	/* inf saturates too */
	{ FTCC_FP8_E5M2, FTCC_SUM, 0xfc, 0x00, 0xfb },
	{ FTCC_FP8_E5M2, FTCC_MAX, 0x7c, 0x00, 0x7b },
	{ FTCC_FP8_E5M2, FTCC_SUM, 0x7c, 0xfc, 0x7f }, /* inf - inf */
	{ FTCC_FP8_E5M2, FTCC_SUM, 0x7d, 0x00, 0x7f }, /* NaN canonical */
	{ FTCC_FP8_E5M2, FTCC_SUM, 0x01, 0x01, 0x02 },
	{ FTCC_FP8_E5M2, FTCC_SUM, 0x3c, 0x31, 0x3d }, /* 1 + 0.15625 -> 1.25 */
	{ FTCC_INT8, FTCC_SUM, 0x7f, 0x01, 0x80 },     /* wraps */
	{ FTCC_INT8, FTCC_MAX, 0x80, 0x7f, 0x7f },     /* signed compare */
	{ FTCC_UINT8, FTCC_MAX, 0x80, 0x7f, 0x80 },
	{ FTCC_INT32, FTCC_PROD, 0x80000000, 0xffffffff, 0x80000000 }, /* INT_MIN * -1 wraps */
	{ FTCC_INT64, FTCC_MIN, 0x8000000000000000, 0, 0x8000000000000000 },
	{ FTCC_UINT64, FTCC_SUM, ~0ull, 2, 1 },
};

Test(reduce, special_values)
{
	for (size_t k = 0; k < 2 * sizeof(specials) / sizeof(specials[0]); k++) {
		const struct special *c = &specials[k / 2];
		uint64_t d = c->a;

		use_set(k & 1);
		cr_expect_eq(ref_op(c->t, c->op, c->a, c->b), c->want, "reference, case %zu",
			     k / 2);
		cr_assert_eq(ftcc_reduce(&d, &c->b, 1, c->t, c->op), 0);
		cr_expect_eq(
			d & type_mask(c->t), c->want, "case %zu (%s): %s %s 0x%llx 0x%llx = 0x%llx",
			k / 2, set_name(), ftcc_dtype_name(c->t), ftcc_redop_name(c->op),
			(unsigned long long)c->a, (unsigned long long)c->b, (unsigned long long)d);
	}
}

Test(reduce, rejects_unknown_type_and_op)
{
	uint32_t d[4] = { 1, 2, 3, 4 }, s[4] = { 5, 6, 7, 8 };

	cr_expect_eq(ftcc_reduce(d, s, 4, FTCC_DTYPE_COUNT, FTCC_SUM), -EINVAL);
	cr_expect_eq(ftcc_reduce(d, s, 4, (enum ftcc_dtype) - 1, FTCC_SUM), -EINVAL);
	cr_expect_eq(ftcc_reduce(d, s, 4, FTCC_INT32, FTCC_REDOP_COUNT), -EINVAL);
	cr_expect_eq(ftcc_reduce(d, s, 0, FTCC_INT32, (enum ftcc_redop)99), -EINVAL);
	cr_expect_eq(d[0], 1);
	cr_expect_eq(d[3], 4);
	cr_expect_eq(ftcc_reduce_div(d, 4, FTCC_INT32, 0), -EINVAL);
	cr_expect_eq(ftcc_reduce_div(d, 4, FTCC_DTYPE_COUNT, 2), -EINVAL);
	cr_expect_eq(ftcc_reduce_scale(d, 4, FTCC_INT32, 0.5), -EINVAL);
	cr_expect_eq(ftcc_reduce_scale(d, 4, FTCC_DTYPE_COUNT, 0.5), -EINVAL);
	cr_expect_eq(d[1], 2);
	cr_expect_eq(ftcc_dtype_size(FTCC_DTYPE_COUNT), 0);
	cr_expect_str_eq(ftcc_dtype_name(FTCC_DTYPE_COUNT), "unknown");
	cr_expect_str_eq(ftcc_redop_name(FTCC_REDOP_COUNT), "unknown");
}

Test(reduce, names_and_sizes)
{
	static const size_t sizes[] = { 1, 1, 4, 4, 8, 8, 2, 4, 8, 2, 1, 1 };

	for (int t = 0; t < FTCC_DTYPE_COUNT; t++) {
		cr_expect_eq(ftcc_dtype_size((enum ftcc_dtype)t), sizes[t]);
		cr_expect_eq(ftcc_dtype_is_float((enum ftcc_dtype)t), t >= FTCC_FLOAT16);
	}
	cr_expect_str_eq(ftcc_dtype_name(FTCC_BFLOAT16), "bfloat16");
	cr_expect_str_eq(ftcc_dtype_name(FTCC_FP8_E4M3), "fp8_e4m3");
	cr_expect_str_eq(ftcc_redop_name(FTCC_MAX), "max");
	cr_expect_str_eq(ftcc_redop_name(FTCC_AVG), "avg");
}

/* ---- AVG finishing steps -------------------------------------------------------------------- */

Test(reduce, div_integers_truncate_toward_zero)
{
	static const uint64_t ns[] = { 1,	   2,	 3,    7,     10,
				       255,	   256,	 1000, 65537, 0x100000001ull,
				       1ull << 63, ~0ull };
	enum { N = 301 };
	static uint64_t a[N];
	static uint8_t buf[N * 8 + 8];

	for (int ti = 0; ti <= FTCC_UINT64; ti++) {
		enum ftcc_dtype t = (enum ftcc_dtype)ti;
		uint64_t seed = 77;

		for (size_t k = 0; k < sizeof(ns) / sizeof(ns[0]); k++) {
			for (size_t i = 0; i < N; i++) {
				a[i] = gen(t, &seed);
				put(buf + 1, t, i, a[i]);
			}
			cr_assert_eq(ftcc_reduce_div(buf + 1, N, t, ns[k]), 0);
			for (size_t i = 0; i < N; i++) {
				__int128 x =
					is_signed(t) ? (__int128)sext(t, a[i]) : (__int128)a[i];
				uint64_t want = (uint64_t)(x / (__int128)ns[k]) & type_mask(t);

				cr_expect_eq(get(buf + 1, t, i), want, "%s 0x%llx / %llu",
					     ftcc_dtype_name(t), (unsigned long long)a[i],
					     (unsigned long long)ns[k]);
			}
		}
	}
}

Test(reduce, div_floats_correctly_rounded)
{
	static const uint64_t ns[] = { 1, 2, 3, 5, 7, 10, 100, 1000, 4097, 8191 };
	enum { N = 1027 };
	static uint64_t a[N];
	static uint8_t buf[N * 8 + 8];

	for (int ti = FTCC_FLOAT16; ti < FTCC_DTYPE_COUNT; ti++) {
		enum ftcc_dtype t = (enum ftcc_dtype)ti;
		uint64_t seed = 31;

		for (size_t k = 0; k < 2 * sizeof(ns) / sizeof(ns[0]); k++) {
			uint64_t n = ns[k / 2];

			use_set(k & 1);
			for (size_t i = 0; i < N; i++) {
				a[i] = gen(t, &seed);
				put(buf + 3, t, i, a[i]);
			}
			cr_assert_eq(ftcc_reduce_div(buf + 3, N, t, n), 0);
			for (size_t i = 0; i < N; i++) {
				uint64_t want = ref_round(t, ref_decode(t, a[i]) / (double)n);

				cr_expect_eq(get(buf + 3, t, i), want, "%s 0x%llx / %llu (%s)",
					     ftcc_dtype_name(t), (unsigned long long)a[i],
					     (unsigned long long)n, set_name());
			}
		}
	}
}

/* As documented: float64 rounds once; narrower types round the float64 product to float32,
 * then to the type. */
static uint64_t ref_scale(enum ftcc_dtype t, uint64_t v, double factor)
{
	double p = ref_decode(t, v) * factor;

	if (t == FTCC_FLOAT64 || t == FTCC_FLOAT32) {
		return ref_round(t, p);
	}
	return ref_encode(t, ref_decode(FTCC_FLOAT32, ref_encode(FTCC_FLOAT32, p)));
}

Test(reduce, scale_floats)
{
	static const double factors[] = { 0.5, 0.125, 1.0 / 3, 3.0, -2.0, 1e-3, 1e30, 0.0, NAN };
	enum { N = 1029 };
	static uint64_t a[N];
	static uint8_t buf[N * 8 + 8];

	for (int ti = FTCC_FLOAT16; ti < FTCC_DTYPE_COUNT; ti++) {
		enum ftcc_dtype t = (enum ftcc_dtype)ti;
		uint64_t seed = 11;

		for (size_t k = 0; k < 2 * sizeof(factors) / sizeof(factors[0]); k++) {
			double f = factors[k / 2];

			use_set(k & 1);
			for (size_t i = 0; i < N; i++) {
				a[i] = gen(t, &seed);
				put(buf + 5, t, i, a[i]);
			}
			cr_assert_eq(ftcc_reduce_scale(buf + 5, N, t, f), 0);
			for (size_t i = 0; i < N; i++) {
				cr_expect_eq(get(buf + 5, t, i), ref_scale(t, a[i], f),
					     "%s 0x%llx * %g (%s)", ftcc_dtype_name(t),
					     (unsigned long long)a[i], f, set_name());
			}
		}
	}
}

Test(reduce, avg_is_sum_then_div)
{
	int32_t acc[5] = { 7, -7, 100, -100, 2147483647 };
	const int32_t in1[5] = { 1, -1, 1, -1, 0 }, in2[5] = { 2, -2, 2, -2, -2147483647 };
	const int32_t want[5] = { 3, -3, 34, -34, 0 }; /* truncation toward zero */
	float f[3] = { 1.0f, 2.0f, 0.1f };
	const float g[3] = { 2.0f, 2.0f, 0.2f };

	cr_assert_eq(ftcc_reduce(acc, in1, 5, FTCC_INT32, FTCC_AVG), 0);
	cr_assert_eq(ftcc_reduce(acc, in2, 5, FTCC_INT32, FTCC_AVG), 0);
	cr_assert_eq(ftcc_reduce_div(acc, 5, FTCC_INT32, 3), 0);
	cr_expect_arr_eq(acc, want, sizeof(want));
	cr_assert_eq(ftcc_reduce(f, g, 3, FTCC_FLOAT32, FTCC_AVG), 0);
	cr_assert_eq(ftcc_reduce_div(f, 3, FTCC_FLOAT32, 2), 0);
	cr_expect_eq(f[0], 1.5f);
	cr_expect_eq(f[1], 2.0f);
	cr_expect_eq(f[2], (0.1f + 0.2f) / 2);
}

/* ---- floating-point environment ------------------------------------------------------------- */

#if defined(__x86_64__) || defined(__i386__)
/* A caller running with flush-to-zero, denormals-are-zero and round-toward-zero gets the same
 * bits as one in the default environment, and gets its environment back. */
Test(reduce, ignores_callers_fp_environment)
{
	static const enum ftcc_dtype types[] = { FTCC_FLOAT32,	FTCC_FLOAT64,  FTCC_FLOAT16,
						 FTCC_BFLOAT16, FTCC_FP8_E4M3, FTCC_FP8_E5M2 };
	const unsigned int odd = 0x1f80u | 0x8000u | 0x0040u | 0x6000u; /* FTZ DAZ RZ */
	enum { N = 515 };
	static uint64_t a[N], b[N], want[3][N];
	static uint8_t d[N * 8], s[N * 8];

	for (size_t k = 0; k < 2 * sizeof(types) / sizeof(types[0]); k++) {
		enum ftcc_dtype t = types[k / 2];

		use_set(k & 1);
		gen_pair(t, a, b, N, 4242);
		for (size_t i = 0; i < N; i++) {
			want[0][i] = ref_op(t, FTCC_PROD, a[i], b[i]);
			want[1][i] = ref_round(t, ref_decode(t, a[i]) / 3.0);
			want[2][i] = ref_scale(t, a[i], 1.0 / 3);
			put(d, t, i, a[i]);
			put(s, t, i, b[i]);
		}
		_mm_setcsr(odd);
		int rc = ftcc_reduce(d, s, N, t, FTCC_PROD);
		unsigned int after = _mm_getcsr();
		_mm_setcsr(0x1f80u);

		cr_assert_eq(rc, 0);
		cr_expect_eq(after & ~0x3fu, odd, "environment not restored: 0x%x", after);
		for (size_t i = 0; i < N; i++) {
			cr_expect_eq(get(d, t, i), want[0][i], "%s prod [%zu] (%s)",
				     ftcc_dtype_name(t), i, set_name());
			put(d, t, i, a[i]);
		}
		_mm_setcsr(odd);
		rc = ftcc_reduce_div(d, N, t, 3);
		_mm_setcsr(0x1f80u);
		cr_assert_eq(rc, 0);
		for (size_t i = 0; i < N; i++) {
			cr_expect_eq(get(d, t, i), want[1][i], "%s div [%zu] (%s)",
				     ftcc_dtype_name(t), i, set_name());
			put(d, t, i, a[i]);
		}
		_mm_setcsr(odd);
		rc = ftcc_reduce_scale(d, N, t, 1.0 / 3);
		_mm_setcsr(0x1f80u);
		cr_assert_eq(rc, 0);
		for (size_t i = 0; i < N; i++) {
			cr_expect_eq(get(d, t, i), want[2][i], "%s scale [%zu] (%s)",
				     ftcc_dtype_name(t), i, set_name());
		}
	}
}
#endif
