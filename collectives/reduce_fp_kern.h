/* SPDX-License-Identifier: BSD-3-Clause */
/* The floating-point kernels, instantiated once per instruction set: a file defines
 * REDUCE_FP_ISA (a suffix), may switch the target and define REDUCE_FP_F16C (float16
 * conversions by F16C instructions), then includes this.
 *
 * float32 and float64 are reduced directly; float16, bfloat16 and fp8 are widened exactly to
 * float32 a block at a time, reduced by the float32 kernels and rounded back to nearest even.
 * Everything is branch-free bit manipulation on plain loops the compiler vectorizes for any
 * target, so every instantiation, and scalar and vector code within one, give the same bits.
 */
#ifndef FTCC_COLLECTIVES_REDUCE_FP_KERN_H
#define FTCC_COLLECTIVES_REDUCE_FP_KERN_H

#ifndef REDUCE_FP_ISA
#error "define REDUCE_FP_ISA before including reduce_fp_kern.h"
#endif

#include <string.h>

#ifdef REDUCE_FP_F16C /* the including file has enabled AVX and F16C */
#include <immintrin.h>
#endif

#include "reduce_fp.h"

#define REDUCE_FP_CAT2(a, b) a##_##b
#define REDUCE_FP_CAT(a, b) REDUCE_FP_CAT2(a, b)
#define REDUCE_FP_ISA_NAME(name) REDUCE_FP_CAT(name, REDUCE_FP_ISA)

#define F32_NAN 0x7fffffffu /* canonical NaN, what CUDA GPUs produce */
#define F64_NAN 0x7fffffffffffffffull
#define NARROW_NAN16 0x7fffu /* float16 and bfloat16 */
#define NARROW_NAN8 0x7fu    /* both fp8 types */
#define NARROW_BLOCK 512     /* elements widened at a time: 2 x 2 KiB of stack */

#define REDUCE_INLINE static inline __attribute__((always_inline))

typedef void (*reduce_fp_fn)(void *dst, const void *src, size_t n);
typedef void (*reduce_fp_unary_fn)(void *buf, size_t n, double arg);

REDUCE_INLINE float f32_of(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

REDUCE_INLINE uint32_t f32_bits(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

REDUCE_INLINE double f64_of(uint64_t u)
{
	double f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

REDUCE_INLINE uint64_t f64_bits(double f)
{
	uint64_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* ---- one operation on two values, as bit patterns -------------------------------------------
 * MAX: the larger; equal values are identical or +-0, where AND of the bits picks +0. MIN: the
 * smaller; OR picks -0. A NaN on either side, or produced, gives the canonical NaN. (Written
 * so GCC 12 if-converts and vectorizes the 64-bit variant on SSE2; other spellings of the same
 * selects defeat it.)
 */
#define REDUCE_FP_OPS(F, U, NAN_BITS)                                                              \
	REDUCE_INLINE U F##_sum1(U ua, U ub)                                                       \
	{                                                                                          \
		__typeof__(F##_of(0)) r = F##_of(ua) + F##_of(ub);                                 \
		return r != r ? (U)NAN_BITS : F##_bits(r);                                         \
	}                                                                                          \
	REDUCE_INLINE U F##_prod1(U ua, U ub)                                                      \
	{                                                                                          \
		__typeof__(F##_of(0)) r = F##_of(ua) * F##_of(ub);                                 \
		return r != r ? (U)NAN_BITS : F##_bits(r);                                         \
	}                                                                                          \
	REDUCE_INLINE U F##_max1(U ua, U ub)                                                       \
	{                                                                                          \
		__typeof__(F##_of(0)) a = F##_of(ua), b = F##_of(ub);                              \
		U r = a < b ? ub : (ua & ub);                                                      \
		r = a > b ? ua : r;                                                                \
		r = a != a ? (U)NAN_BITS : r;                                                      \
		return b != b ? (U)NAN_BITS : r;                                                   \
	}                                                                                          \
	REDUCE_INLINE U F##_min1(U ua, U ub)                                                       \
	{                                                                                          \
		__typeof__(F##_of(0)) a = F##_of(ua), b = F##_of(ub);                              \
		U r = a > b ? ub : (ua | ub);                                                      \
		r = a < b ? ua : r;                                                                \
		r = a != a ? (U)NAN_BITS : r;                                                      \
		return b != b ? (U)NAN_BITS : r;                                                   \
	}

REDUCE_FP_OPS(f32, uint32_t, F32_NAN)
REDUCE_FP_OPS(f64, uint64_t, F64_NAN)

#define REDUCE_FP_KERNEL(name, P, op1)                                                             \
	static void name(void *dst, const void *src, size_t n)                                     \
	{                                                                                          \
		P *d = dst;                                                                        \
		const P *s = src;                                                                  \
		for (size_t i = 0; i < n; i++) {                                                   \
			d[i] = op1(d[i], s[i]);                                                    \
		}                                                                                  \
	}

REDUCE_FP_KERNEL(f32_sum, reduce_u32, f32_sum1)
REDUCE_FP_KERNEL(f32_prod, reduce_u32, f32_prod1)
REDUCE_FP_KERNEL(f32_max, reduce_u32, f32_max1)
REDUCE_FP_KERNEL(f32_min, reduce_u32, f32_min1)
REDUCE_FP_KERNEL(f64_sum, reduce_u64, f64_sum1)
REDUCE_FP_KERNEL(f64_prod, reduce_u64, f64_prod1)
REDUCE_FP_KERNEL(f64_max, reduce_u64, f64_max1)
REDUCE_FP_KERNEL(f64_min, reduce_u64, f64_min1)

static const reduce_fp_fn f32_kernels[FTCC_REDOP_COUNT] = {
	[FTCC_SUM] = f32_sum, [FTCC_PROD] = f32_prod, [FTCC_MAX] = f32_max,
	[FTCC_MIN] = f32_min, [FTCC_AVG] = f32_sum,
};

static const reduce_fp_fn f64_kernels[FTCC_REDOP_COUNT] = {
	[FTCC_SUM] = f64_sum, [FTCC_PROD] = f64_prod, [FTCC_MAX] = f64_max,
	[FTCC_MIN] = f64_min, [FTCC_AVG] = f64_sum,
};

/* float32 x / n and x * factor, formed in float64 and rounded once more to float32: for
 * n < 2^28 that double rounding is innocuous (float64 carries more than 2 x 24 + 2 bits past
 * any float32 midpoint a quotient can come near), so x / n is correctly rounded. */
static void f32_div(void *buf, size_t n, double d)
{
	reduce_u32 *b = buf;

	for (size_t i = 0; i < n; i++) {
		float q = (float)((double)f32_of(b[i]) / d);
		b[i] = q != q ? F32_NAN : f32_bits(q);
	}
}

static void f32_scale(void *buf, size_t n, double factor)
{
	reduce_u32 *b = buf;

	for (size_t i = 0; i < n; i++) {
		float q = (float)((double)f32_of(b[i]) * factor);
		b[i] = q != q ? F32_NAN : f32_bits(q);
	}
}

static void f64_div(void *buf, size_t n, double d)
{
	reduce_u64 *b = buf;

	for (size_t i = 0; i < n; i++) {
		double q = f64_of(b[i]) / d;
		b[i] = q != q ? F64_NAN : f64_bits(q);
	}
}

static void f64_scale(void *buf, size_t n, double factor)
{
	reduce_u64 *b = buf;

	for (size_t i = 0; i < n; i++) {
		double q = f64_of(b[i]) * factor;
		b[i] = q != q ? F64_NAN : f64_bits(q);
	}
}

/* ---- narrow formats <-> float32 ----------------------------------------------------------- */

/* The conversions below are selects between integer results and a float32 one. GCC will not
 * if-convert a select whose arm alone holds a float operation (it might trap, under the default
 * -ftrapping-math), so each condition is written on the float result itself: the operation is
 * then unconditional and the loops vectorize. */

/* float16 (or fp8 e5m2 shifted left 8) to float32 bits, exactly. A subnormal is its integer
 * mantissa times 2^-24 (exact), so sub < 2^-14 exactly when the input is subnormal. */
REDUCE_INLINE uint32_t f16_widen1(uint32_t h)
{
	uint32_t sign = (h & 0x8000u) << 16;
	int32_t em = (int32_t)(h & 0x7fffu);
	float sub = (float)em * 0x1p-24f;
	uint32_t nrm = ((uint32_t)em << 13) + ((127u - 15u) << 23);
	uint32_t r = sub < 0x1p-14f ? f32_bits(sub) : nrm;

	/* em >= 0x7c00: infinity or NaN, exponent 31 -> 255 */
	r = sub >= 0x7c00 * 0x1p-24f ? nrm + ((255u - 31u - (127u - 15u)) << 23) : r;
	return sign | r;
}

/* fp8 e4m3fn to float32 bits: bias 7, 3 mantissa bits, 0x7f/0xff NaN, no infinities. The
 * subnormal value em * 2^-9 also identifies the class: < 2^-6 subnormal, 127 * 2^-9 NaN. */
REDUCE_INLINE uint32_t e4m3_widen1(uint32_t v)
{
	uint32_t sign = (v & 0x80u) << 24;
	int32_t em = (int32_t)(v & 0x7fu);
	float sub = (float)em * 0x1p-9f;
	uint32_t nrm = ((uint32_t)em << 20) + ((127u - 7u) << 23);
	uint32_t r = sub < 0x1p-6f ? f32_bits(sub) : nrm;

	return sub == 0x7f * 0x1p-9f ? F32_NAN : sign | r;
}

/* float32 bits to a narrow format with @m mantissa bits and exponent bias @bias, rounding to
 * nearest even; codes beyond @maxcode (infinity for float16, the largest finite value for the
 * saturating fp8 types) become @maxcode; NaN becomes @nancode; @width is the format's bits.
 * Normal results round by integer addition on the float32 bits (a carry moves into the
 * exponent as it should). Subnormal ones by adding @magic, a power of two whose ulp is the
 * format's smallest subnormal, which the float32 adder rounds to nearest even (the default
 * environment is in force): the bits above @magic's are then the code. That code is monotonic
 * in the input and reaches 1 << m (the smallest normal, where both paths agree) exactly at the
 * subnormal boundary, so it also selects the path. */
REDUCE_INLINE uint32_t narrow_round(uint32_t u, int m, int bias, int32_t maxcode, uint32_t nancode,
				    int width)
{
	const int sh = 23 - m;
	const uint32_t magic = (uint32_t)(127 - bias + sh + 1) << 23;
	uint32_t sign = (u >> 31) << (width - 1);
	uint32_t a = u & 0x7fffffffu;
	int32_t nrm = (int32_t)((a - ((uint32_t)(127 - bias) << 23) + ((1u << (sh - 1)) - 1) +
				 ((a >> sh) & 1)) >>
				sh);
	int32_t sub = (int32_t)(f32_bits(f32_of(a) + f32_of(magic)) - magic);
	int32_t code = sub <= (1 << m) ? sub : nrm;

	code = code > maxcode ? maxcode : code;
	return (int32_t)a > 0x7f800000 ? nancode : sign | (uint32_t)code;
}

#ifdef REDUCE_FP_F16C
/* F16C converts 8 elements per instruction: exactly (widening), and to nearest even given the
 * rounding in the immediate (narrowing; the input NaN is already the canonical 0x7fffffff,
 * which it truncates to 0x7fff). Same bits as the portable code, which takes the tails. */
static void f16_widen(uint32_t *out, const void *in, size_t n)
{
	const reduce_u16 *p = in;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m128i h = _mm_loadu_si128((const __m128i *)(const void *)(p + i));

		_mm256_storeu_ps((float *)(void *)(out + i), _mm256_cvtph_ps(h));
	}
	for (; i < n; i++) {
		out[i] = f16_widen1(p[i]);
	}
}

static void f16_narrow(void *out, const uint32_t *in, size_t n)
{
	reduce_u16 *p = out;
	size_t i = 0;

	for (; i + 8 <= n; i += 8) {
		__m256 f = _mm256_loadu_ps((const float *)(const void *)(in + i));

		_mm_storeu_si128((__m128i *)(void *)(p + i),
				 _mm256_cvtps_ph(f, _MM_FROUND_TO_NEAREST_INT));
	}
	for (; i < n; i++) {
		p[i] = (uint16_t)narrow_round(in[i], 10, 15, 0x7c00, NARROW_NAN16, 16);
	}
}
#else
static void f16_widen(uint32_t *out, const void *in, size_t n)
{
	const reduce_u16 *p = in;

	for (size_t i = 0; i < n; i++) {
		out[i] = f16_widen1(p[i]);
	}
}

static void f16_narrow(void *out, const uint32_t *in, size_t n)
{
	reduce_u16 *p = out;

	for (size_t i = 0; i < n; i++) {
		p[i] = (uint16_t)narrow_round(in[i], 10, 15, 0x7c00, NARROW_NAN16, 16);
	}
}
#endif

static void bf16_widen(uint32_t *out, const void *in, size_t n)
{
	const reduce_u16 *p = in;

	for (size_t i = 0; i < n; i++) {
		out[i] = (uint32_t)p[i] << 16;
	}
}

/* bfloat16 shares float32's exponent, so integer rounding of the top half covers subnormals,
 * and overflow carries into the infinity pattern. */
REDUCE_INLINE uint32_t bf16_round1(uint32_t u)
{
	uint32_t r = (u + 0x7fffu + ((u >> 16) & 1)) >> 16;

	return (u & 0x7fffffffu) > 0x7f800000u ? NARROW_NAN16 : r;
}

static void bf16_narrow(void *out, const uint32_t *in, size_t n)
{
	reduce_u16 *p = out;

	for (size_t i = 0; i < n; i++) {
		p[i] = (uint16_t)bf16_round1(in[i]);
	}
}

/* Widening bfloat16 is a shift, cheap enough to fuse widen, operate and round in one loop
 * (which the compiler still vectorizes) instead of going through blocks. */
#define REDUCE_BF16_KERNEL(name, op1)                                                              \
	static void name(void *dst, const void *src, size_t n)                                     \
	{                                                                                          \
		reduce_u16 *d = dst;                                                               \
		const reduce_u16 *s = src;                                                         \
		for (size_t i = 0; i < n; i++) {                                                   \
			d[i] = (uint16_t)bf16_round1(                                              \
				op1((uint32_t)d[i] << 16, (uint32_t)s[i] << 16));                  \
		}                                                                                  \
	}

REDUCE_BF16_KERNEL(bf16_sum, f32_sum1)
REDUCE_BF16_KERNEL(bf16_prod, f32_prod1)
REDUCE_BF16_KERNEL(bf16_max, f32_max1)
REDUCE_BF16_KERNEL(bf16_min, f32_min1)

static const reduce_fp_fn bf16_kernels[FTCC_REDOP_COUNT] = {
	[FTCC_SUM] = bf16_sum, [FTCC_PROD] = bf16_prod, [FTCC_MAX] = bf16_max,
	[FTCC_MIN] = bf16_min, [FTCC_AVG] = bf16_sum,
};

static void e4m3_widen(uint32_t *out, const void *in, size_t n)
{
	const reduce_u8 *p = in;

	for (size_t i = 0; i < n; i++) {
		out[i] = e4m3_widen1(p[i]);
	}
}

/* NCCL converts with CUDA's __NV_SATFINITE: beyond +-448 (infinity included) saturates. */
static void e4m3_narrow(void *out, const uint32_t *in, size_t n)
{
	reduce_u8 *p = out;

	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)narrow_round(in[i], 3, 7, 0x7e, NARROW_NAN8, 8);
	}
}

static void e5m2_widen(uint32_t *out, const void *in, size_t n)
{
	const reduce_u8 *p = in;

	for (size_t i = 0; i < n; i++) {
		out[i] = f16_widen1((uint32_t)p[i] << 8);
	}
}

/* Saturating like e4m3 (NCCL's __NV_SATFINITE): +-57344 (0x7b) is the largest result. */
static void e5m2_narrow(void *out, const uint32_t *in, size_t n)
{
	reduce_u8 *p = out;

	for (size_t i = 0; i < n; i++) {
		p[i] = (uint8_t)narrow_round(in[i], 2, 15, 0x7b, NARROW_NAN8, 8);
	}
}

/* A narrow storage format: element size and its exact widening / rounding conversions. */
struct narrow_fmt {
	size_t size;
	void (*widen)(uint32_t *out, const void *in, size_t n);
	void (*narrow)(void *out, const uint32_t *in, size_t n);
};

static const struct narrow_fmt narrow_fmts[FTCC_DTYPE_COUNT] = {
	[FTCC_FLOAT16] = { 2, f16_widen, f16_narrow },
	[FTCC_BFLOAT16] = { 2, bf16_widen, bf16_narrow },
	[FTCC_FP8_E4M3] = { 1, e4m3_widen, e4m3_narrow },
	[FTCC_FP8_E5M2] = { 1, e5m2_widen, e5m2_narrow },
};

/* Both blocks are widened before the result is written, so @dst == @src is fine. */
static void narrow_apply(const struct narrow_fmt *fmt, reduce_fp_fn op, void *dst, const void *src,
			 size_t n)
{
	uint32_t a[NARROW_BLOCK], b[NARROW_BLOCK];
	reduce_u8 *d = dst;
	const reduce_u8 *s = src;

	for (size_t i = 0; i < n; i += NARROW_BLOCK) {
		size_t k = n - i < NARROW_BLOCK ? n - i : NARROW_BLOCK;

		fmt->widen(a, d + i * fmt->size, k);
		fmt->widen(b, s + i * fmt->size, k);
		op(a, b, k);
		fmt->narrow(d + i * fmt->size, a, k);
	}
}

static void narrow_unary(const struct narrow_fmt *fmt, reduce_fp_unary_fn op, void *buf, size_t n,
			 double arg)
{
	uint32_t a[NARROW_BLOCK];
	reduce_u8 *d = buf;

	for (size_t i = 0; i < n; i += NARROW_BLOCK) {
		size_t k = n - i < NARROW_BLOCK ? n - i : NARROW_BLOCK;

		fmt->widen(a, d + i * fmt->size, k);
		op(a, k, arg);
		fmt->narrow(d + i * fmt->size, a, k);
	}
}

/* ---- entry points, one set per instruction set (reduce_fp.c dispatches) ------------------- */

void REDUCE_FP_ISA_NAME(reduce_fp_apply)(void *dst, const void *src, size_t count,
					 enum ftcc_dtype dtype, enum ftcc_redop op)
{
	if (dtype == FTCC_FLOAT32) {
		f32_kernels[op](dst, src, count);
	} else if (dtype == FTCC_FLOAT64) {
		f64_kernels[op](dst, src, count);
	} else if (dtype == FTCC_BFLOAT16) {
		bf16_kernels[op](dst, src, count);
	} else {
		narrow_apply(&narrow_fmts[dtype], f32_kernels[op], dst, src, count);
	}
}

void REDUCE_FP_ISA_NAME(reduce_fp_div)(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t n)
{
	if (dtype == FTCC_FLOAT64) {
		f64_div(buf, count, (double)n);
	} else if (dtype == FTCC_FLOAT32) {
		f32_div(buf, count, (double)n);
	} else {
		narrow_unary(&narrow_fmts[dtype], f32_div, buf, count, (double)n);
	}
}

void REDUCE_FP_ISA_NAME(reduce_fp_scale)(void *buf, size_t count, enum ftcc_dtype dtype,
					 double factor)
{
	if (dtype == FTCC_FLOAT64) {
		f64_scale(buf, count, factor);
	} else if (dtype == FTCC_FLOAT32) {
		f32_scale(buf, count, factor);
	} else {
		narrow_unary(&narrow_fmts[dtype], f32_scale, buf, count, factor);
	}
}

#endif
