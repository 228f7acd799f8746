/* SPDX-License-Identifier: BSD-3-Clause */
/* Floating-point reductions: the portable kernel set (x86-64 baseline, SSE2) and the choice,
 * made once, between it and the AVX2 + F16C set (reduce_fp_avx2.c) when the CPU has those.
 * The kernels themselves are in reduce_fp_kern.h.
 */
#define REDUCE_FP_ISA base
#include "reduce_fp_kern.h"

#include <stdatomic.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

/* 0 unknown, 1 portable, 2 AVX2 + F16C; forced_base overrides (tests). */
static _Atomic int best_isa;
static _Atomic int forced_base;

static int detect_isa(void)
{
#if defined(__x86_64__) || defined(__i386__)
	unsigned int eax, ebx, ecx, edx;

	/* avx2 includes the check that the OS saves the wide registers; every AVX2 CPU has F16C,
	 * but it is a separate bit (and not every compiler's __builtin_cpu_supports knows it). */
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) &&
	    (ecx & bit_F16C)) {
		return 2;
	}
#endif
	return 1;
}

/* Racing first callers detect the same answer; the store is idempotent. */
static int use_avx2(void)
{
	int isa = atomic_load_explicit(&best_isa, memory_order_relaxed);

	if (isa == 0) {
		isa = detect_isa();
		atomic_store_explicit(&best_isa, isa, memory_order_relaxed);
	}
	return isa == 2 && !atomic_load_explicit(&forced_base, memory_order_relaxed);
}

void reduce_fp_force_baseline(int on)
{
	atomic_store(&forced_base, on != 0);
}

/* noinline: reduce.c switches the floating-point environment around these calls, and no float
 * operation may move across that switch. */
__attribute__((noinline)) void reduce_fp_apply(void *dst, const void *src, size_t count,
					       enum ftcc_dtype dtype, enum ftcc_redop op)
{
	if (use_avx2()) {
		reduce_fp_apply_avx2(dst, src, count, dtype, op);
	} else {
		reduce_fp_apply_base(dst, src, count, dtype, op);
	}
}

__attribute__((noinline)) void reduce_fp_div(void *buf, size_t count, enum ftcc_dtype dtype,
					     uint64_t n)
{
	if (use_avx2()) {
		reduce_fp_div_avx2(buf, count, dtype, n);
	} else {
		reduce_fp_div_base(buf, count, dtype, n);
	}
}

__attribute__((noinline)) void reduce_fp_scale(void *buf, size_t count, enum ftcc_dtype dtype,
					       double factor)
{
	if (use_avx2()) {
		reduce_fp_scale_avx2(buf, count, dtype, factor);
	} else {
		reduce_fp_scale_base(buf, count, dtype, factor);
	}
}
