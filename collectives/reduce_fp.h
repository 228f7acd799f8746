/* SPDX-License-Identifier: BSD-3-Clause */
/* Floating-point reduction kernels (reduce_fp_kern.h, built per instruction set by reduce_fp.c
 * and reduce_fp_avx2.c), called by the entry points in reduce.c once the arguments are checked
 * and the default floating-point environment is in force.
 */
#ifndef FTCC_COLLECTIVES_REDUCE_FP_H
#define FTCC_COLLECTIVES_REDUCE_FP_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc/reduce.h"

/* Unaligned, aliasing views of the element storage: the caller's buffers may sit at any byte
 * address and hold floats, which the kernels read as integers. */
typedef uint8_t reduce_u8 __attribute__((may_alias));
typedef uint16_t reduce_u16 __attribute__((aligned(1), may_alias));
typedef uint32_t reduce_u32 __attribute__((aligned(1), may_alias));
typedef uint64_t reduce_u64 __attribute__((aligned(1), may_alias));

/* dst[i] = dst[i] @op src[i] for a floating-point @dtype; @op is SUM, PROD, MIN or MAX (AVG is
 * mapped to SUM by the caller). Arguments already validated, @count > 0. Runs the best kernel
 * set the CPU has (see reduce_fp_force_baseline). */
void reduce_fp_apply(void *dst, const void *src, size_t count, enum ftcc_dtype dtype,
		     enum ftcc_redop op);

/* buf[i] = buf[i] / @n for a floating-point @dtype; @n > 0. */
void reduce_fp_div(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t n);

/* buf[i] = buf[i] * @factor for a floating-point @dtype. */
void reduce_fp_scale(void *buf, size_t count, enum ftcc_dtype dtype, double factor);

/* With @on, the portable (x86-64 baseline: SSE2) kernels run even where AVX2 and F16C are
 * present; off, the best set again. Both give the same bits: tests and the benchmark use this
 * to exercise each. Applies to calls that start afterwards; thread-safe. */
void reduce_fp_force_baseline(int on);

/* The kernel sets (reduce_fp_kern.h instantiated): portable, and AVX2 + F16C on x86. */
void reduce_fp_apply_base(void *dst, const void *src, size_t count, enum ftcc_dtype dtype,
			  enum ftcc_redop op);
void reduce_fp_div_base(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t n);
void reduce_fp_scale_base(void *buf, size_t count, enum ftcc_dtype dtype, double factor);
void reduce_fp_apply_avx2(void *dst, const void *src, size_t count, enum ftcc_dtype dtype,
			  enum ftcc_redop op);
void reduce_fp_div_avx2(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t n);
void reduce_fp_scale_avx2(void *buf, size_t count, enum ftcc_dtype dtype, double factor);

#endif
