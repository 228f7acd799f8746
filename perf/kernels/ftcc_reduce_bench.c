/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-reduce-bench: throughput of the host reduction kernels (ftcc_reduce) per element type,
 * against memcpy of the same size timed in the same run, interleaved run by run.
 *
 *   ftcc-reduce-bench [-n RUNS] [--portable] [SIZE...]
 *
 * SIZE in bytes with K/M/G suffixes (default 64M 1M); --portable runs the x86-64 baseline
 * kernels even where the AVX2 + F16C ones would be chosen.
 *
 * One line per type and size: GB/s is bytes of dst reduced (or copied) per second, from the
 * median of RUNS timed runs after one warm-up; ratio = reduce GB/s / memcpy GB/s. SUM for every
 * type, MAX for float32 too. Numbers only mean something next to the memcpy column: the
 * machine's caches and neighbours decide both.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftcc/reduce.h"
#include "../../collectives/reduce_fp.h"

#define MAX_RUNS 1000
#define MAX_SIZES 16

/* memcpy through a volatile pointer, so the copies are not elided. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Fills @buf with @count values of @dtype: random integers, or floats in [1, 2) so repeated
 * sums stay finite and normal (no subnormal slow paths in the timing). */
static void fill(void *buf, size_t count, enum ftcc_dtype dtype, uint64_t seed)
{
	uint8_t *p = buf;
	size_t size = ftcc_dtype_size(dtype);

	for (size_t i = 0; i < count; i++) {
		uint64_t r = rng_next(&seed), v;

		switch (dtype) {
		case FTCC_FLOAT16:
			v = 0x3c00u | (r & 0x3ffu);
			break;
		case FTCC_BFLOAT16:
			v = 0x3f80u | (r & 0x7fu);
			break;
		case FTCC_FLOAT32:
			v = 0x3f800000u | (r & 0x7fffffu);
			break;
		case FTCC_FLOAT64:
			v = 0x3ff0000000000000ull | (r & 0xfffffffffffffull);
			break;
		case FTCC_FP8_E4M3:
			v = 0x38u | (r & 0x7u);
			break;
		case FTCC_FP8_E5M2:
			v = 0x3cu | (r & 0x3u);
			break;
		default:
			v = r;
			break;
		}
		memcpy(p + i * size, &v, size); /* little-endian: the low bytes */
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static double gbps(size_t bytes, uint64_t ns)
{
	return ns ? (double)bytes / (double)ns : 0.0;
}

/* Times @runs interleaved pairs (memcpy, reduce) of @bytes and prints one line. */
static int bench_one(void *dst, void *src, void *copy_dst, size_t bytes, enum ftcc_dtype dtype,
		     enum ftcc_redop op, int runs)
{
	size_t count = bytes / ftcc_dtype_size(dtype);
	uint64_t t_red[MAX_RUNS], t_cpy[MAX_RUNS];

	bytes = count * ftcc_dtype_size(dtype);
	fill(dst, count, dtype, 1);
	fill(src, count, dtype, 2);
	copy_fn(copy_dst, src, bytes); /* warm-up: fault in and touch everything once */
	if (ftcc_reduce(dst, src, count, dtype, op) != 0) {
		fprintf(stderr, "ftcc_reduce(%s, %s) failed\n", ftcc_dtype_name(dtype),
			ftcc_redop_name(op));
		return -1;
	}
	for (int i = 0; i < runs; i++) {
		uint64_t t0 = now_ns();

		copy_fn(copy_dst, src, bytes);
		uint64_t t1 = now_ns();

		ftcc_reduce(dst, src, count, dtype, op);
		uint64_t t2 = now_ns();

		t_cpy[i] = t1 - t0;
		t_red[i] = t2 - t1;
	}
	qsort(t_red, (size_t)runs, sizeof(t_red[0]), cmp_u64);
	qsort(t_cpy, (size_t)runs, sizeof(t_cpy[0]), cmp_u64);

	double red = gbps(bytes, t_red[runs / 2]), cpy = gbps(bytes, t_cpy[runs / 2]);

	printf("%12zu %12zu %9s %5s %10.2f %10.2f %7.2f %10.3f %10.3f %10.3f\n", bytes, count,
	       ftcc_dtype_name(dtype), ftcc_redop_name(op), red, cpy, cpy > 0 ? red / cpy : 0.0,
	       (double)t_red[0] / 1e6, (double)t_red[runs / 2] / 1e6,
	       (double)t_red[runs - 1] / 1e6);
	return 0;
}

static int parse_size(const char *s, size_t *out)
{
	char *end;
	unsigned long long v;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s) {
		return -EINVAL;
	}
	switch (*end) {
	case 'G':
	case 'g':
		v <<= 10;
		/* fall through */
	case 'M':
	case 'm':
		v <<= 10;
		/* fall through */
	case 'K':
	case 'k':
		v <<= 10;
		end++;
		break;
	default:
		break;
	}
	if (*end != '\0' || v < 8) {
		return -EINVAL;
	}
	*out = (size_t)v;
	return 0;
}

int main(int argc, char **argv)
{
	size_t sizes[MAX_SIZES] = { 64u << 20, 1u << 20 }, nsizes = 2, max_size = 0;
	int runs = 10, nset = 0, portable = 0;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-n") == 0 && i + 1 < argc) {
			runs = atoi(argv[++i]);
			if (runs < 1 || runs > MAX_RUNS) {
				fprintf(stderr, "-n: 1..%d\n", MAX_RUNS);
				return 2;
			}
		} else if (strcmp(argv[i], "--portable") == 0) {
			reduce_fp_force_baseline(1);
			portable = 1;
		} else if (nset < MAX_SIZES && parse_size(argv[i], &sizes[nset]) == 0) {
			nsizes = (size_t)++nset;
		} else {
			fprintf(stderr, "usage: %s [-n RUNS] [--portable] [SIZE[K|M|G]...]\n",
				argv[0]);
			return 2;
		}
	}
	for (size_t i = 0; i < nsizes; i++) {
		max_size = sizes[i] > max_size ? sizes[i] : max_size;
	}

	size_t alloc = (max_size + 63) & ~(size_t)63;
	void *dst = aligned_alloc(64, alloc), *src = aligned_alloc(64, alloc);
	void *copy_dst = aligned_alloc(64, alloc);

	if (!dst || !src || !copy_dst) {
		fprintf(stderr, "out of memory for 3 x %zu bytes\n", alloc);
		return 1;
	}
	printf("# ftcc_reduce vs memcpy, median of %d runs, %s kernels; GB/s = bytes of dst per ns\n",
	       runs, portable ? "portable" : "best");
	printf("# %10s %12s %9s %5s %10s %10s %7s %10s %10s %10s\n", "bytes", "count", "type",
	       "redop", "GB/s", "memcpyGB/s", "ratio", "min_ms", "median_ms", "max_ms");
	for (size_t s = 0; s < nsizes; s++) {
		for (int t = 0; t < FTCC_DTYPE_COUNT; t++) {
			if (bench_one(dst, src, copy_dst, sizes[s], (enum ftcc_dtype)t, FTCC_SUM,
				      runs)) {
				return 1;
			}
			if (t == FTCC_FLOAT32 &&
			    bench_one(dst, src, copy_dst, sizes[s], FTCC_FLOAT32, FTCC_MAX, runs)) {
				return 1;
			}
		}
	}
	free(copy_dst);
	free(src);
	free(dst);
	return 0;
}
