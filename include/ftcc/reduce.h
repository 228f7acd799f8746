/* SPDX-License-Identifier: BSD-3-Clause */
/* Reduction kernels of the allreduce engine: dst[i] = dst[i] OP src[i] on host memory, for every
 * NCCL element type and built-in operator, bit-reproducible across machines and builds.
 *
 * Semantics (the same inputs in the same order give the same bits everywhere):
 *  - Integers wrap (two's complement); MIN/MAX compare signed or unsigned as the type says.
 *  - float32/float64: one IEEE operation, round to nearest even, no contraction. The kernels run
 *    in the default floating-point environment whatever the caller's is: on x86 a caller's
 *    MXCSR with flush-to-zero, denormals-are-zero or another rounding mode is set aside for the
 *    call and restored after it.
 *  - float16, bfloat16, fp8: both operands are widened exactly to float32, the operation is
 *    done once in float32 and the result rounded to nearest even. float32's 24 bits are at
 *    least 2p + 2 for each type's p bits, so that double rounding is innocuous: SUM and PROD
 *    equal the correctly rounded operation in the narrow type (and NCCL's results on GPUs).
 *  - fp8 e4m3 is OCP "e4m3fn": no infinities, largest finite 448, NaN 0x7f/0xff. Both fp8 types
 *    saturate as NCCL does (CUDA's __NV_SATFINITE conversion): a result beyond the largest
 *    finite value, infinities included, becomes +-448 (e4m3) or +-57344 (e5m2). So e5m2 inputs
 *    may hold infinities but results never do.
 *  - NaN: any NaN operand gives NaN, for MIN and MAX too (NCCL's fminf/fmaxf would drop it).
 *    Every NaN produced is the one canonical, positive pattern with all mantissa bits set
 *    (0x7fff for float16 and bfloat16, 0x7fffffff, 0x7fffffffffffffff, 0x7f for fp8), what
 *    CUDA GPUs produce, so payloads never depend on operand order or instruction selection.
 *  - MIN/MAX order -0.0 below +0.0.
 * The kernels are plain C the compiler vectorizes for x86-64 baseline (SSE2); where the CPU has
 * AVX2 and F16C a second build of the same code (plus F16C's float16 conversions) runs
 * instead. Both give the same bits, and the tests check both.
 */
#ifndef FTCC_REDUCE_H
#define FTCC_REDUCE_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc.h"

/* enum ftcc_dtype and enum ftcc_redop are public: ftcc.h. */

/* Bytes per element of @dtype; 0 for an unknown type. */
size_t ftcc_dtype_size(enum ftcc_dtype dtype);

/* Lower-case name of @dtype ("float32", "fp8_e4m3"...), "unknown" for an unknown type. The
 * string is static. */
const char *ftcc_dtype_name(enum ftcc_dtype dtype);

/* Lower-case name of @op ("sum", "avg"...), "unknown" for an unknown operator. Static. */
const char *ftcc_redop_name(enum ftcc_redop op);

/* Returns 1 when @dtype is a floating-point type (float16 ... fp8), 0 otherwise. */
int ftcc_dtype_is_float(enum ftcc_dtype dtype);

/* Accumulates in place: dst[i] = dst[i] OP src[i] for i < @count. FTCC_AVG accumulates as
 * FTCC_SUM; the caller finishes with ftcc_reduce_div() once every contribution is in.
 * @dst and @src are caller-owned, may sit at any byte address (no alignment needed) and must
 * not overlap unless equal; with @count 0 they are not touched (NULL is fine). Thread-safe,
 * never blocks.
 * Returns 0, or -EINVAL for an unknown @dtype or @op (nothing written). */
int ftcc_reduce(void *dst, const void *src, size_t count, enum ftcc_dtype dtype,
		enum ftcc_redop op);

/* Divides each of the @count elements of @buf by @n in place: the finishing step of FTCC_AVG.
 * Integers: truncation toward zero, as NCCL's integer average (a signed value's magnitude is
 * divided). float32/float64: the correctly rounded quotient for n < 2^28. Narrower floats:
 * the quotient rounded to float32 then to the type, which is the correctly rounded quotient
 * for n < 8192 (deterministic for every n). NaN stays (canonical) NaN; fp8 saturates.
 * Returns 0, or -EINVAL for an unknown @dtype or @n == 0. Thread-safe, never blocks. */
int ftcc_reduce_div(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t n);

/* Multiplies each of the @count elements of @buf by @factor in place (AVG by 1/n, or the
 * "rescale" degraded policy). Floating-point types only. float64: one rounding. Narrower
 * types: the product is formed in float64, rounded to float32, then to the type: exact when
 * @factor is a power of two, deterministic always. NaN in @factor makes every element NaN.
 * Returns 0, or -EINVAL for an integer or unknown @dtype. Thread-safe, never blocks. */
int ftcc_reduce_scale(void *buf, size_t count, enum ftcc_dtype dtype, double factor);

/* Installs the default floating-point environment of the kernels' semantics above for the
 * calling thread (on x86: MXCSR round to nearest, no FTZ/DAZ) and returns what to restore with
 * ftcc_fpenv_leave(). Float work between the two must sit in functions that are not inlined into
 * the caller, so that the compiler cannot move it across the switch. */
unsigned int ftcc_fpenv_enter(void);
void ftcc_fpenv_leave(unsigned int old);

#endif
