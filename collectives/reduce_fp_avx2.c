/* SPDX-License-Identifier: BSD-3-Clause */
/* The floating-point kernels (reduce_fp_kern.h) compiled for AVX2 + F16C: the same C, twice
 * as wide, plus F16C's float16 conversions. Only called after a CPU check (reduce_fp.c); off
 * x86 it forwards to the portable set so the dispatcher links everywhere.
 */
#if defined(__x86_64__) || defined(__i386__)
/* Headers first, so only the kernels below get the wider target. */
#include <immintrin.h>
#include <string.h>

#include "reduce_fp.h"

#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2,f16c"))), apply_to = function)
#else
#pragma GCC target("avx2,f16c")
#endif
#define REDUCE_FP_ISA avx2
#define REDUCE_FP_F16C 1
#include "reduce_fp_kern.h"
#if defined(__clang__)
#pragma clang attribute pop
#endif

#else
#include "reduce_fp.h"

void reduce_fp_apply_avx2(void *dst, const void *src, size_t count, enum ftcc_dtype dtype,
			  enum ftcc_redop op)
{
	reduce_fp_apply_base(dst, src, count, dtype, op);
}

void reduce_fp_div_avx2(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t n)
{
	reduce_fp_div_base(buf, count, dtype, n);
}

void reduce_fp_scale_avx2(void *buf, size_t count, enum ftcc_dtype dtype, double factor)
{
	reduce_fp_scale_base(buf, count, dtype, factor);
}
#endif
