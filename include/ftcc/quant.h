/* SPDX-License-Identifier: BSD-3-Clause */
/* Block codecs of the quantized allreduce (enum ftcc_codec in ftcc.h): float32 or bfloat16
 * values cut into blocks of FTCC_CODEC_BLOCK elements, each block sent as one float32 scale and
 * one small code per element. The allreduce (collectives/algo_q.c) encodes each member's input
 * once, sums the decoded values in float32, and encodes the sum once more.
 *
 * Encoding of @count elements: ceil(count / FTCC_CODEC_BLOCK) scales (float32, little-endian),
 * then the codes: one byte per element for int8 and fp8, two per byte for int4 (element 2i in
 * the low nibble of byte i). A block's scale is s = m / Q where m is the largest magnitude in
 * the block and Q the code's largest value (127, 448, 7); an element x becomes
 *   int8, int4  q = x / s rounded to nearest even, in [-Q, Q]; decoded q * s;
 *   fp8 e4m3    x / s rounded to e4m3 (OCP "fn": 3 mantissa bits, subnormals, saturating at
 *               448); decoded e4m3(x / s) * s.
 * (The scale is raised by ulps where m / s would exceed Q after rounding, and is at least the
 * smallest subnormal.) Special blocks: all zeros has scale 0 and decodes to +0; a block holding a
 * NaN or an infinity has a NaN scale and decodes to NaN everywhere (a non-finite input poisons
 * its block, never a neighbouring one; so does a float32 sum that overflows).
 *
 * Error of one round trip, for a block of largest magnitude m (s = m / Q, the float32 scale in
 * use being within a relative 2^-21 of it, which the bounds below take in), per element:
 *   int8  |x - dec(enc(x))| <= s / 2 = m / 254
 *   int4  |x - dec(enc(x))| <= s / 2 = m / 14
 *   fp8   |x - dec(enc(x))| <= |x| / 16 + s / 1024
 * plus 2^-149, which matters only for blocks of m below Q * 2^-126 (subnormal scales), and the
 * float32 rounding of the product (within 2^-23 of the decoded value). The functions run in the
 * default floating-point environment whatever the caller's (no contraction; on x86 a caller's
 * MXCSR is set aside, elsewhere the default environment is assumed), so every machine gets the
 * same bits.
 */
#ifndef FTCC_QUANT_H
#define FTCC_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc.h"

/* Bytes of the encoding of @count elements, 0 for FTCC_CODEC_NONE or an unknown codec. */
size_t ftcc_q_bytes(enum ftcc_codec codec, size_t count);

/* Lower-case name ("int8", "fp8_e4m3", "int4", "none"), "unknown" otherwise. Static. */
const char *ftcc_q_name(enum ftcc_codec codec);

/* Whether an allreduce of @dtype and @op may use @codec: a known codec other than NONE, float32
 * or bfloat16, SUM or AVG. */
int ftcc_q_supported(enum ftcc_codec codec, enum ftcc_dtype dtype, enum ftcc_redop op);

/* Encodes @count elements of @src (@dtype float32 or bfloat16) into @dst
 * (ftcc_q_bytes(codec, count) bytes). 0 or -EINVAL. */
int ftcc_q_encode(enum ftcc_codec codec, const void *src, enum ftcc_dtype dtype, size_t count,
		  uint8_t *dst);

/* acc[i] += decoded element i, for i < @count (float32 additions, round to nearest even). */
int ftcc_q_decode_add(enum ftcc_codec codec, const uint8_t *src, size_t count, float *acc);

/* Writes the @count decoded elements of @src into @dst as @dtype (float32, or bfloat16 rounded
 * to nearest even, NaN as 0x7fff). */
int ftcc_q_decode(enum ftcc_codec codec, const uint8_t *src, size_t count, void *dst,
		  enum ftcc_dtype dtype);

/* The documented bound on |x - dec(enc(x))| for element @x of a block whose largest magnitude
 * is @m (both finite), without the final float32 rounding: for tests and callers that budget
 * error. */
double ftcc_q_bound(enum ftcc_codec codec, double x, double m);

#endif
