/* SPDX-License-Identifier: BSD-3-Clause */
/* Reduction entry points: argument checks, the type and operator tables, the integer kernels
 * and the floating-point environment the float kernels (reduce_fp.c) run in.
 * Compiled with -O3 -ffp-contract=off (CMakeLists.txt): plain loops the compiler vectorizes.
 */
#include "ftcc/reduce.h"

#include <errno.h>
#include <string.h>

#include "reduce_fp.h"

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

typedef int8_t reduce_s8 __attribute__((may_alias));
typedef int32_t reduce_s32 __attribute__((aligned(1), may_alias));
typedef int64_t reduce_s64 __attribute__((aligned(1), may_alias));

/* One element type: its size and name. */
struct reduce_dtype_desc {
	size_t size;
	const char *name;
	int is_float;
};

static const struct reduce_dtype_desc dtype_desc[FTCC_DTYPE_COUNT] = {
	[FTCC_INT8] = { 1, "int8", 0 },		[FTCC_UINT8] = { 1, "uint8", 0 },
	[FTCC_INT32] = { 4, "int32", 0 },	[FTCC_UINT32] = { 4, "uint32", 0 },
	[FTCC_INT64] = { 8, "int64", 0 },	[FTCC_UINT64] = { 8, "uint64", 0 },
	[FTCC_FLOAT16] = { 2, "float16", 1 },	[FTCC_FLOAT32] = { 4, "float32", 1 },
	[FTCC_FLOAT64] = { 8, "float64", 1 },	[FTCC_BFLOAT16] = { 2, "bfloat16", 1 },
	[FTCC_FP8_E4M3] = { 1, "fp8_e4m3", 1 }, [FTCC_FP8_E5M2] = { 1, "fp8_e5m2", 1 },
};

static const char *const redop_names[FTCC_REDOP_COUNT] = {
	[FTCC_SUM] = "sum", [FTCC_PROD] = "prod", [FTCC_MAX] = "max",
	[FTCC_MIN] = "min", [FTCC_AVG] = "avg",
};

static int dtype_ok(enum ftcc_dtype dtype)
{
	return (unsigned)dtype < FTCC_DTYPE_COUNT;
}

size_t ftcc_dtype_size(enum ftcc_dtype dtype)
{
	return dtype_ok(dtype) ? dtype_desc[dtype].size : 0;
}

const char *ftcc_dtype_name(enum ftcc_dtype dtype)
{
	return dtype_ok(dtype) ? dtype_desc[dtype].name : "unknown";
}

const char *ftcc_redop_name(enum ftcc_redop op)
{
	return (unsigned)op < FTCC_REDOP_COUNT ? redop_names[op] : "unknown";
}

int ftcc_dtype_is_float(enum ftcc_dtype dtype)
{
	return dtype_ok(dtype) && dtype_desc[dtype].is_float;
}

/* ---- integer kernels ------------------------------------------------------------------------
 * SUM and PROD use the unsigned type U (wrapping, no undefined overflow), MIN and MAX the type
 * T itself (signed or unsigned compare). Narrow types promote to int, which cannot overflow.
 */
typedef void (*reduce_int_fn)(void *dst, const void *src, size_t n);

#define REDUCE_INT_KERNELS(tag, U, T)                                                              \
	static void tag##_sum(void *dst, const void *src, size_t n)                                \
	{                                                                                          \
		U *d = dst;                                                                        \
		const U *s = src;                                                                  \
		for (size_t i = 0; i < n; i++) {                                                   \
			d[i] = (U)(d[i] + s[i]);                                                   \
		}                                                                                  \
	}                                                                                          \
	static void tag##_prod(void *dst, const void *src, size_t n)                               \
	{                                                                                          \
		U *d = dst;                                                                        \
		const U *s = src;                                                                  \
		for (size_t i = 0; i < n; i++) {                                                   \
			d[i] = (U)(d[i] * s[i]);                                                   \
		}                                                                                  \
	}                                                                                          \
	static void tag##_max(void *dst, const void *src, size_t n)                                \
	{                                                                                          \
		T *d = dst;                                                                        \
		const T *s = src;                                                                  \
		for (size_t i = 0; i < n; i++) {                                                   \
			d[i] = d[i] > s[i] ? d[i] : s[i];                                          \
		}                                                                                  \
	}                                                                                          \
	static void tag##_min(void *dst, const void *src, size_t n)                                \
	{                                                                                          \
		T *d = dst;                                                                        \
		const T *s = src;                                                                  \
		for (size_t i = 0; i < n; i++) {                                                   \
			d[i] = d[i] < s[i] ? d[i] : s[i];                                          \
		}                                                                                  \
	}

REDUCE_INT_KERNELS(i8, reduce_u8, reduce_s8)
REDUCE_INT_KERNELS(u8, reduce_u8, reduce_u8)
REDUCE_INT_KERNELS(i32, reduce_u32, reduce_s32)
REDUCE_INT_KERNELS(u32, reduce_u32, reduce_u32)
REDUCE_INT_KERNELS(i64, reduce_u64, reduce_s64)
REDUCE_INT_KERNELS(u64, reduce_u64, reduce_u64)

#define REDUCE_INT_ROW(tag)                                                                        \
	{                                                                                          \
		[FTCC_SUM] = tag##_sum, [FTCC_PROD] = tag##_prod, [FTCC_MAX] = tag##_max,          \
		[FTCC_MIN] = tag##_min, [FTCC_AVG] = tag##_sum                                     \
	}

static const reduce_int_fn int_kernels[FTCC_UINT64 + 1][FTCC_REDOP_COUNT] = {
	[FTCC_INT8] = REDUCE_INT_ROW(i8),   [FTCC_UINT8] = REDUCE_INT_ROW(u8),
	[FTCC_INT32] = REDUCE_INT_ROW(i32), [FTCC_UINT32] = REDUCE_INT_ROW(u32),
	[FTCC_INT64] = REDUCE_INT_ROW(i64), [FTCC_UINT64] = REDUCE_INT_ROW(u64),
};

/* Integer average: NCCL divides the magnitude and restores the sign (truncation toward zero).
 * A 32-bit divisor keeps the narrow types on the cheaper 32-bit division; a divisor beyond
 * their range leaves 0, which is what the division gives. */
#define REDUCE_SIGNED_DIV(tag, U, T, W)                                                            \
	static void tag##_div(void *buf, size_t count, W n)                                        \
	{                                                                                          \
		U *b = buf;                                                                        \
		for (size_t i = 0; i < count; i++) {                                               \
			int neg = (T)b[i] < 0;                                                     \
			W mag = neg ? (W)0 - (W)(T)b[i] : (W)b[i];                                 \
			W q = mag / n;                                                             \
			b[i] = (U)(neg ? (W)0 - q : q);                                            \
		}                                                                                  \
	}
#define REDUCE_UNSIGNED_DIV(tag, U, W)                                                             \
	static void tag##_div(void *buf, size_t count, W n)                                        \
	{                                                                                          \
		U *b = buf;                                                                        \
		for (size_t i = 0; i < count; i++) {                                               \
			b[i] = (U)((W)b[i] / n);                                                   \
		}                                                                                  \
	}

REDUCE_SIGNED_DIV(i8, reduce_u8, reduce_s8, uint32_t)
REDUCE_UNSIGNED_DIV(u8, reduce_u8, uint32_t)
REDUCE_SIGNED_DIV(i32, reduce_u32, reduce_s32, uint32_t)
REDUCE_UNSIGNED_DIV(u32, reduce_u32, uint32_t)
REDUCE_SIGNED_DIV(i64, reduce_u64, reduce_s64, uint64_t)
REDUCE_UNSIGNED_DIV(u64, reduce_u64, uint64_t)

static void int_div(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t n)
{
	if (dtype != FTCC_INT64 && dtype != FTCC_UINT64 && n > UINT32_MAX) {
		memset(buf, 0, count * ftcc_dtype_size(dtype));
		return;
	}
	switch (dtype) {
	case FTCC_INT8:
		i8_div(buf, count, (uint32_t)n);
		break;
	case FTCC_UINT8:
		u8_div(buf, count, (uint32_t)n);
		break;
	case FTCC_INT32:
		i32_div(buf, count, (uint32_t)n);
		break;
	case FTCC_UINT32:
		u32_div(buf, count, (uint32_t)n);
		break;
	case FTCC_INT64:
		i64_div(buf, count, n);
		break;
	default:
		u64_div(buf, count, n);
		break;
	}
}

/* ---- floating-point environment -------------------------------------------------------------
 * The float kernels assume round-to-nearest-even with subnormals honoured. A caller may run
 * with flush-to-zero or denormals-are-zero (some frameworks set them for speed) or another
 * rounding mode, and threads inherit it; on x86 we install the default MXCSR for the call.
 * The kernels live in another translation unit and are called through non-inlined functions,
 * so no float operation is moved across the switch. Other architectures are assumed to run in
 * their default environment.
 */
#if defined(__x86_64__) || defined(__i386__)
#define REDUCE_MXCSR_DEFAULT 0x1f80u /* all exceptions masked, nearest, no FTZ/DAZ */
#define REDUCE_MXCSR_FLAGS 0x3fu     /* sticky exception flags: not part of the mode */

unsigned int ftcc_fpenv_enter(void)
{
	unsigned int old = _mm_getcsr();

	if ((old & ~REDUCE_MXCSR_FLAGS) != REDUCE_MXCSR_DEFAULT) {
		_mm_setcsr(REDUCE_MXCSR_DEFAULT);
	}
	return old;
}

void ftcc_fpenv_leave(unsigned int old)
{
	if ((old & ~REDUCE_MXCSR_FLAGS) != REDUCE_MXCSR_DEFAULT) {
		_mm_setcsr(old);
	}
}
#else
unsigned int ftcc_fpenv_enter(void)
{
	return 0;
}

void ftcc_fpenv_leave(unsigned int old)
{
}
#endif

/* ---- entry points ------------------------------------------------------------------------- */

int ftcc_reduce(void *dst, const void *src, size_t count, enum ftcc_dtype dtype, enum ftcc_redop op)
{
	if (!dtype_ok(dtype) || (unsigned)op >= FTCC_REDOP_COUNT) {
		return -EINVAL;
	}
	if (count == 0) {
		return 0;
	}
	if (!dtype_desc[dtype].is_float) {
		int_kernels[dtype][op](dst, src, count);
		return 0;
	}
	unsigned int env = ftcc_fpenv_enter();
	reduce_fp_apply(dst, src, count, dtype, op == FTCC_AVG ? FTCC_SUM : op);
	ftcc_fpenv_leave(env);
	return 0;
}

int ftcc_reduce_div(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t n)
{
	if (!dtype_ok(dtype) || n == 0) {
		return -EINVAL;
	}
	if (count == 0 || (n == 1 && !dtype_desc[dtype].is_float)) {
		return 0;
	}
	if (!dtype_desc[dtype].is_float) {
		int_div(buf, count, dtype, n);
		return 0;
	}
	unsigned int env = ftcc_fpenv_enter();
	reduce_fp_div(buf, count, dtype, n);
	ftcc_fpenv_leave(env);
	return 0;
}

int ftcc_reduce_scale(void *buf, size_t count, enum ftcc_dtype dtype, double factor)
{
	if (!ftcc_dtype_is_float(dtype)) {
		return -EINVAL;
	}
	if (count == 0) {
		return 0;
	}
	unsigned int env = ftcc_fpenv_enter();
	reduce_fp_scale(buf, count, dtype, factor);
	ftcc_fpenv_leave(env);
	return 0;
}
