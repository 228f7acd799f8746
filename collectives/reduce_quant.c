/* SPDX-License-Identifier: BSD-3-Clause */
/* Block codecs of the quantized allreduce (include/ftcc/quant.h). Rounding is done on integers or
 * by exact float32 operations, never by the FPU's current mode, and this file is built without
 * contraction (CMakeLists.txt, reduce*.c), so the bits are the same on every machine.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

#include "ftcc/quant.h"
#include "ftcc/reduce.h"

#define B FTCC_CODEC_BLOCK

/* The code's largest value Q: the block's largest magnitude maps to it. */
static float q_max(enum ftcc_codec codec)
{
	switch (codec) {
	case FTCC_CODEC_INT8:
		return 127.0f;
	case FTCC_CODEC_FP8_E4M3:
		return 448.0f;
	case FTCC_CODEC_INT4:
		return 7.0f;
	default:
		return 0.0f;
	}
}

static size_t q_code_bytes(enum ftcc_codec codec, size_t count)
{
	return codec == FTCC_CODEC_INT4 ? (count + 1) / 2 : count;
}

size_t ftcc_q_bytes(enum ftcc_codec codec, size_t count)
{
	if (q_max(codec) == 0.0f) {
		return 0;
	}
	return (count + B - 1) / B * 4 + q_code_bytes(codec, count);
}

const char *ftcc_q_name(enum ftcc_codec codec)
{
	static const char *const names[FTCC_CODEC_COUNT] = { "none", "int8", "fp8_e4m3", "int4" };

	return (unsigned)codec < FTCC_CODEC_COUNT ? names[codec] : "unknown";
}

int ftcc_q_supported(enum ftcc_codec codec, enum ftcc_dtype dtype, enum ftcc_redop op)
{
	return q_max(codec) != 0.0f && (dtype == FTCC_FLOAT32 || dtype == FTCC_BFLOAT16) &&
	       (op == FTCC_SUM || op == FTCC_AVG);
}

static float f32_of_bits(uint32_t u)
{
	float f;

	memcpy(&f, &u, sizeof(f));
	return f;
}

static uint32_t bits_of_f32(float f)
{
	uint32_t u;

	memcpy(&u, &f, sizeof(u));
	return u;
}

/* Rounds |v| <= 2^22 to the nearest integer, ties to even: adding and taking away 1.5 * 2^23
 * leaves no fraction bits (the kernels run in the default environment: round to nearest). */
static inline float q_rint(float v)
{
	const float magic = 12582912.0f;

	return (v + magic) - magic;
}

/* e4m3 "fn" code of @y, |y| <= about 448 (larger saturates to 448), finite. */
static inline uint8_t q_e4m3(float y)
{
	uint32_t u = bits_of_f32(y), a = u & 0x7fffffffu, sign = u >> 24 & 0x80u, r, e, m;

	if (a >= 0x43e00000u) { /* 448 */
		return (uint8_t)(sign | 0x7eu);
	}
	if (a < 0x3c800000u) { /* below 2^-6: subnormal codes, steps of 2^-9 (a * 512 exact) */
		return (uint8_t)(sign | (uint32_t)q_rint(f32_of_bits(a) * 512.0f)); /* 8: 2^-6 */
	}
	/* Normal: keep 3 of float32's 23 mantissa bits, ties to even; a carry bumps the exponent. */
	r = (a + 0x7ffffu + (a >> 20 & 1u)) & ~0xfffffu;
	e = (r >> 23) - 127u + 7u;
	m = r >> 20 & 7u;
	if (e > 15u || (e == 15u && m > 6u)) {
		return (uint8_t)(sign | 0x7eu);
	}
	return (uint8_t)(sign | e << 3 | m);
}

/* Value of e4m3 code @c (never NaN: the encoder does not make 0x7f). */
static float q_e4m3_value(uint8_t c)
{
	uint32_t e = c >> 3 & 15u, m = c & 7u, sign = (uint32_t)(c & 0x80u) << 24;

	if (e == 0) { /* subnormal: m * 2^-9, exact */
		return f32_of_bits(bits_of_f32((float)m * 0x1p-9f) | sign);
	}
	return f32_of_bits(sign | (e - 7u + 127u) << 23 | m << 20);
}

static float e4m3_table[256];
static pthread_once_t e4m3_once = PTHREAD_ONCE_INIT;

static void e4m3_init(void)
{
	for (unsigned c = 0; c < 256; c++) {
		e4m3_table[c] = q_e4m3_value((uint8_t)c);
	}
}

/* The scale of a block: NaN when an element is not finite, 0 for all zeros, else m / Q, raised
 * by ulps until m / s <= Q (a rounded scale, subnormal ones above all, must not push a code
 * past Q), and at least the smallest subnormal. */
static float q_scale(const float *x, size_t len, float qmax)
{
	float m = 0.0f, s;
	int bad = 0;

	for (size_t i = 0; i < len; i++) {
		float a = fabsf(x[i]);

		bad |= !(a <= 3.4028234664e38f); /* NaN or infinity */
		m = a > m ? a : m;
	}
	if (bad || m == 0.0f) {
		return bad ? NAN : 0.0f;
	}
	s = m / qmax;
	s = s > 0.0f ? s : f32_of_bits(1);
	while (m / s > qmax) {
		s = f32_of_bits(bits_of_f32(s) + 1);
	}
	return s;
}

/* Codes of one block of @len float32 values with scale @s > 0 into @codes (int4: the block's
 * half bytes, @len even except at the end). */
static void q_encode_block(enum ftcc_codec codec, const float *x, size_t len, float s,
			   uint8_t *codes)
{
	float qmax = q_max(codec);

	if (codec == FTCC_CODEC_FP8_E4M3) {
		for (size_t i = 0; i < len; i++) {
			codes[i] = q_e4m3(x[i] / s);
		}
		return;
	}
	if (codec == FTCC_CODEC_INT8) {
		for (size_t i = 0; i < len; i++) {
			float q = q_rint(x[i] / s);

			q = q > qmax ? qmax : q < -qmax ? -qmax : q;
			codes[i] = (uint8_t)(int8_t)q;
		}
		return;
	}
	for (size_t i = 0; i < len; i += 2) {
		float q0 = q_rint(x[i] / s), q1 = i + 1 < len ? q_rint(x[i + 1] / s) : 0.0f;

		q0 = q0 > qmax ? qmax : q0 < -qmax ? -qmax : q0;
		q1 = q1 > qmax ? qmax : q1 < -qmax ? -qmax : q1;
		codes[i / 2] = (uint8_t)(((int)q0 & 15) | ((int)q1 & 15) << 4);
	}
}

/* The entry points run these in the default floating-point environment (ftcc_fpenv_enter());
 * kept out of their callers (noipa: not inlined, nor analysed across the call), so that no float
 * operation moves across the switch. */
#if defined(__clang__)
#define Q_KERNEL __attribute__((noinline)) static
#else
#define Q_KERNEL __attribute__((noipa)) static
#endif

Q_KERNEL void q_encode(enum ftcc_codec codec, const void *src, enum ftcc_dtype dtype, size_t count,
		       uint8_t *dst)
{
	size_t nblk = (count + B - 1) / B;
	uint8_t *codes = dst + nblk * 4;
	float wide[B];

	for (size_t b = 0; b < nblk; b++) {
		size_t off = b * B, len = count - off < B ? count - off : B;
		const float *x = (const float *)src + off;
		uint8_t *c = codec == FTCC_CODEC_INT4 ? codes + off / 2 : codes + off;
		uint32_t su;
		float s;

		if (dtype == FTCC_BFLOAT16) {
			const uint8_t *h = (const uint8_t *)src + 2 * off;

			for (size_t i = 0; i < len; i++) {
				uint16_t v;

				memcpy(&v, h + 2 * i, 2);
				wide[i] = f32_of_bits((uint32_t)v << 16);
			}
			x = wide;
		} else if ((uintptr_t)src % sizeof(float)) { /* a caller's buffer at any address */
			memcpy(wide, (const uint8_t *)src + 4 * off, len * sizeof(float));
			x = wide;
		}
		s = q_scale(x, len, q_max(codec));
		su = bits_of_f32(s);
		memcpy(dst + b * 4, &su, 4);
		if (s > 0.0f) {
			q_encode_block(codec, x, len, s, c);
		} else {
			memset(c, 0, q_code_bytes(codec, len));
		}
	}
}

/* The @len decoded values of one block (codes at @c, scale @s) into @v. */
static void q_decode_block(enum ftcc_codec codec, const uint8_t *c, size_t len, float s, float *v)
{
	if (s != s) {
		for (size_t i = 0; i < len; i++) {
			v[i] = NAN;
		}
	} else if (codec == FTCC_CODEC_INT8) {
		for (size_t i = 0; i < len; i++) {
			v[i] = (float)(int8_t)c[i] * s;
		}
	} else if (codec == FTCC_CODEC_FP8_E4M3) {
		for (size_t i = 0; i < len; i++) {
			v[i] = e4m3_table[c[i]] * s;
		}
	} else {
		for (size_t i = 0; i < len; i++) {
			int q = c[i / 2] >> (i % 2 * 4) & 15;

			v[i] = (float)(q >= 8 ? q - 16 : q) * s;
		}
	}
}

/* Calls BODY(v, off, len) with each block's decoded values. */
#define Q_EACH_BLOCK(codec, src, count, BODY)                                                      \
	do {                                                                                       \
		size_t nblk_ = ((count) + B - 1) / B;                                              \
		const uint8_t *codes_ = (src) + nblk_ * 4;                                         \
		float v[B];                                                                        \
		for (size_t b_ = 0; b_ < nblk_; b_++) {                                            \
			size_t off = b_ * B, len = (count)-off < B ? (count)-off : B;              \
			uint32_t su_;                                                              \
			memcpy(&su_, (src) + b_ * 4, 4);                                           \
			q_decode_block(codec,                                                      \
				       (codec) == FTCC_CODEC_INT4 ? codes_ + off / 2 :             \
								    codes_ + off,                  \
				       len, f32_of_bits(su_), v);                                  \
			BODY;                                                                      \
		}                                                                                  \
	} while (0)

Q_KERNEL void q_decode_add(enum ftcc_codec codec, const uint8_t *src, size_t count, float *acc)
{
	Q_EACH_BLOCK(codec, src, count, {
		for (size_t i = 0; i < len; i++) {
			acc[off + i] += v[i];
		}
	});
}

/* bfloat16 of @v, nearest even, NaN as 0x7fff. */
static uint16_t q_bf16(float v)
{
	uint32_t u = bits_of_f32(v);

	if ((u & 0x7fffffffu) > 0x7f800000u) {
		return 0x7fff;
	}
	return (uint16_t)((u + 0x7fffu + (u >> 16 & 1u)) >> 16);
}

Q_KERNEL void q_decode(enum ftcc_codec codec, const uint8_t *src, size_t count, void *dst,
		       enum ftcc_dtype dtype)
{
	Q_EACH_BLOCK(codec, src, count, {
		if (dtype == FTCC_FLOAT32) {
			memcpy((float *)dst + off, v, len * sizeof(float));
		} else {
			for (size_t i = 0; i < len; i++) {
				uint16_t h = q_bf16(v[i]);

				memcpy((uint8_t *)dst + 2 * (off + i), &h, 2);
			}
		}
	});
}

int ftcc_q_encode(enum ftcc_codec codec, const void *src, enum ftcc_dtype dtype, size_t count,
		  uint8_t *dst)
{
	unsigned int env;

	if (q_max(codec) == 0.0f || (dtype != FTCC_FLOAT32 && dtype != FTCC_BFLOAT16)) {
		return -EINVAL;
	}
	env = ftcc_fpenv_enter();
	q_encode(codec, src, dtype, count, dst);
	ftcc_fpenv_leave(env);
	return 0;
}

int ftcc_q_decode_add(enum ftcc_codec codec, const uint8_t *src, size_t count, float *acc)
{
	unsigned int env;

	if (q_max(codec) == 0.0f) {
		return -EINVAL;
	}
	pthread_once(&e4m3_once, e4m3_init);
	env = ftcc_fpenv_enter();
	q_decode_add(codec, src, count, acc);
	ftcc_fpenv_leave(env);
	return 0;
}

int ftcc_q_decode(enum ftcc_codec codec, const uint8_t *src, size_t count, void *dst,
		  enum ftcc_dtype dtype)
{
	unsigned int env;

	if (q_max(codec) == 0.0f || (dtype != FTCC_FLOAT32 && dtype != FTCC_BFLOAT16)) {
		return -EINVAL;
	}
	pthread_once(&e4m3_once, e4m3_init);
	env = ftcc_fpenv_enter();
	q_decode(codec, src, count, dst, dtype);
	ftcc_fpenv_leave(env);
	return 0;
}

double ftcc_q_bound(enum ftcc_codec codec, double x, double m)
{
	/* the float32 scale in use: m / Q rounded, maybe raised by an ulp or two */
	double s = m / (double)q_max(codec) * (1.0 + 0x1p-21);

	if (codec == FTCC_CODEC_FP8_E4M3) {
		return fabs(x) / 16.0 + s / 1024.0 + 0x1p-149;
	}
	return s / 2.0 + 0x1p-149;
}
