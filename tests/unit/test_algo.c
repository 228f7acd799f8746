/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the allreduce algorithms (ring, recursive doubling) over real data planes on
 * 127.0.0.1, one thread per member: results bit-identical on every member and equal to a plain
 * reference, every chunk marked held, and bounded failure when a member aborts or is gone or
 * the epoch check stops the attempt (test_algo_fail.c). The pure functions (choice, chunking)
 * come first.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/algo.h"
#include "ftcc/dp.h"
#include "ftcc/fault.h"
#include "ftcc/reduce.h"
#include "ftcc/settings.h"

#include "algo_grp.h"

/* ---- pure functions ------------------------------------------------------------------------- */

Test(algo_choose, by_size_and_setting)
{
	int64_t lim = ftcc_setting_int(FTCC_SET_RD_MAX_BYTES);

	cr_assert_eq(ftcc_settings_set(FTCC_SET_ALGO, "auto"), 0);
	cr_expect_eq(algo_choose((size_t)lim, 4), ALGO_RD);
	cr_expect_eq(algo_choose((size_t)lim + 1, 4), ALGO_RING);
	cr_expect_eq(algo_choose(0, 4), ALGO_RD);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_RD_MAX_BYTES, "100"), 0);
	cr_expect_eq(algo_choose(101, 3), ALGO_RING);
	cr_expect_eq(algo_choose(100, 3), ALGO_RD);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_ALGO, "ring"), 0);
	cr_expect_eq(algo_choose(1, 3), ALGO_RING);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_ALGO, "rd"), 0);
	cr_expect_eq(algo_choose(1 << 30, 3), ALGO_RD);
	/* An unknown name is refused when the settings load; empty means auto. */
	cr_expect_eq(ftcc_settings_set(FTCC_SET_ALGO, "tree"), -EINVAL);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_ALGO, ""), 0);
	cr_expect_eq(algo_choose(101, 3), ALGO_RING);
	cr_expect_eq(algo_choose(100, 3), ALGO_RD);
}

Test(algo_chunks, counts_and_scratch)
{
	cr_expect_eq(algo_chunks(ALGO_RING, 5), 5);
	cr_expect_eq(algo_chunks(ALGO_RING, 1), 1);
	cr_expect_eq(algo_chunks(ALGO_RD, 5), 1);
	cr_expect_eq(algo_scratch_bytes(ALGO_RD, 4, 100, FTCC_FLOAT64, FTCC_CODEC_NONE), 800);
	cr_expect_eq(algo_scratch_bytes(ALGO_RD, 1, 100, FTCC_FLOAT64, FTCC_CODEC_NONE), 0);
	cr_expect_eq(algo_scratch_bytes(ALGO_RING, 4, 100, FTCC_FLOAT64, FTCC_CODEC_NONE), 0);
	cr_expect_eq(algo_chunks(ALGO_BC, 5), BC_CHUNKS);
	cr_expect_eq(algo_scratch_bytes(ALGO_BC, 4, 1000, FTCC_UINT8, FTCC_CODEC_NONE), 0);
}

/* A broadcast's segments: whole pages, at least 16 of them up to FTCC_SEGMENT_BYTES each. */
Test(algo_chunks, broadcast_segments)
{
	cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "1048576"), 0);
	cr_expect_eq(algo_bc_seg(1), 4096);
	cr_expect_eq(algo_bc_seg(1u << 20), 65536);
	cr_expect_eq(algo_bc_seg((1u << 20) + 1), 65536); /* 17 segments */
	cr_expect_eq(algo_bc_seg(64u << 20), 1u << 20);
	cr_expect_eq(algo_bc_seg((size_t)1 << 40), 1u << 20);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "4096"), 0);
	cr_expect_eq(algo_bc_seg(64u << 20), 4096);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "1048576"), 0);
}

Test(algo_chunks, partition_is_even_and_complete)
{
	static const size_t counts[] = { 0, 1, 2, 7, 8, 9, 1000, 1001 };

	for (uint32_t nc = 1; nc <= 9; nc++) {
		for (size_t i = 0; i < sizeof(counts) / sizeof(counts[0]); i++) {
			size_t count = counts[i], next = 0;

			for (uint32_t c = 0; c < nc; c++) {
				size_t off, len;

				algo_chunk_range(nc, count, c, &off, &len);
				cr_assert_eq(off, next, "nc %u count %zu chunk %u", nc, count, c);
				cr_assert_eq(len, count / nc + (c < count % nc),
					     "nc %u count %zu chunk %u", nc, count, c);
				next = off + len;
			}
			cr_assert_eq(next, count);
		}
	}
}

static const enum ftcc_dtype all_types[] = { FTCC_INT8,	   FTCC_UINT8,	 FTCC_INT32,
					     FTCC_UINT32,  FTCC_INT64,	 FTCC_UINT64,
					     FTCC_FLOAT32, FTCC_FLOAT64, FTCC_BFLOAT16 };
static const enum ftcc_redop all_ops[] = { FTCC_SUM, FTCC_PROD, FTCC_MAX, FTCC_MIN, FTCC_AVG };
static const uint32_t group_sizes[] = { 1, 2, 3, 4, 5, 8 };

/* Every size class, type and operator on groups of 1..5 and 8 members. */
static void exact_matrix(enum algo_id id)
{
	for (size_t gi = 0; gi < sizeof(group_sizes) / sizeof(group_sizes[0]); gi++) {
		uint32_t n = group_sizes[gi];
		size_t counts[] = { 0, 1, 7, n - 1, 1000 };
		struct grp g;

		grp_open(&g, n);
		for (size_t ci = 0; ci < sizeof(counts) / sizeof(counts[0]); ci++) {
			for (size_t ti = 0; ti < sizeof(all_types) / sizeof(all_types[0]); ti++) {
				for (size_t oi = 0; oi < sizeof(all_ops) / sizeof(all_ops[0]);
				     oi++) {
					enum ftcc_dtype dt = all_types[ti];
					enum ftcc_redop op = all_ops[oi];

					grp_buffers(&g, id, counts[ci], dt, op);
					grp_run(&g, id, counts[ci], dt, op);
					grp_expect_exact(&g, id, counts[ci], dt, op);
					grp_free_buffers(&g);
				}
			}
		}
		grp_close(&g);
	}
}

Test(algo_ring, exact_every_size_type_op, .timeout = 120)
{
	exact_matrix(ALGO_RING);
}

Test(algo_rd, exact_every_size_type_op, .timeout = 120)
{
	exact_matrix(ALGO_RD);
}

/* 3 MiB of float32 in 4 KiB segments: many segments per ring step, windows refilled. */
static void large_exact(enum algo_id id, const uint32_t *sizes, size_t nsizes)
{
	size_t count = (3u << 20) / 4;

	cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "4096"), 0);
	for (size_t gi = 0; gi < nsizes; gi++) {
		struct grp g;

		grp_open(&g, sizes[gi]);
		grp_buffers(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
		grp_run(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
		grp_expect_exact(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
		/* A segment size that is not a whole number of elements, and an odd count. */
		grp_free_buffers(&g);
		grp_buffers(&g, id, count - 3, FTCC_FLOAT64, FTCC_MAX);
		cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "4100"), 0);
		grp_run(&g, id, count - 3, FTCC_FLOAT64, FTCC_MAX);
		grp_expect_exact(&g, id, count - 3, FTCC_FLOAT64, FTCC_MAX);
		cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "4096"), 0);
		grp_free_buffers(&g);
		grp_close(&g);
	}
}

Test(algo_ring, segmented_3mib, .timeout = 120)
{
	static const uint32_t sizes[] = { 2, 3, 5, 8 };

	large_exact(ALGO_RING, sizes, 4);
}

Test(algo_rd, large_3mib, .timeout = 120)
{
	static const uint32_t sizes[] = { 3, 4 };

	large_exact(ALGO_RD, sizes, 2);
}

/* Random float32 inputs: the same bits on every member and on every run, and within rounding
 * of the float64 sum. */
static void random_floats(enum algo_id id, uint32_t n)
{
	size_t count = 100003;
	struct grp g;
	float *first = malloc(count * sizeof(float));
	uint64_t s = 12345;

	cr_assert(first);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "4096"), 0);
	grp_open(&g, n);
	grp_buffers(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
	for (uint32_t i = 0; i < n; i++) {
		for (size_t e = 0; e < count; e++) {
			s = s * 6364136223846793005ull + 1442695040888963407ull;
			((float *)g.m[i].in)[e] =
				(float)((double)(s >> 11) / 9007199254740992.0 * 2.0 - 1.0) *
				(float)(1 << (s % 16));
		}
	}
	for (int run = 0; run < 2; run++) {
		grp_run(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
		for (uint32_t i = 0; i < n; i++) {
			cr_assert_eq(g.m[i].rc, 0, "member %u rc %d", i, g.m[i].rc);
			cr_assert_eq(memcmp(g.m[i].out, g.m[0].out, count * sizeof(float)), 0,
				     "member %u differs from member 0", i);
		}
		if (run == 0) {
			memcpy(first, g.m[0].out, count * sizeof(float));
		} else {
			cr_assert_eq(memcmp(first, g.m[0].out, count * sizeof(float)), 0,
				     "a second run gave other bits");
		}
	}
	for (size_t e = 0; e < count; e++) {
		double sum = 0, mag = 0;

		for (uint32_t i = 0; i < n; i++) {
			sum += ((float *)g.m[i].in)[e];
			mag += fabs(((float *)g.m[i].in)[e]);
		}
		cr_assert(fabs(((float *)g.m[0].out)[e] - sum) <= mag * n * 0x1p-23,
			  "element %zu: %g, float64 sum %g", e, ((float *)g.m[0].out)[e], sum);
	}
	grp_free_buffers(&g);
	grp_close(&g);
	free(first);
}

Test(algo_ring, random_floats_deterministic, .timeout = 60)
{
	random_floats(ALGO_RING, 5);
}

Test(algo_rd, random_floats_deterministic, .timeout = 60)
{
	random_floats(ALGO_RD, 6);
}

/* Several ops back to back on one group, the algorithms mixed: tags keep them apart. */
Test(algo_ring, consecutive_ops_mixed, .timeout = 60)
{
	struct grp g;

	grp_open(&g, 4);
	for (int k = 0; k < 12; k++) {
		enum algo_id id = k % 3 ? ALGO_RING : ALGO_RD;
		size_t count = 1 + (size_t)k * 997;

		grp_buffers(&g, id, count, FTCC_INT32, FTCC_SUM);
		grp_run(&g, id, count, FTCC_INT32, FTCC_SUM);
		grp_expect_exact(&g, id, count, FTCC_INT32, FTCC_SUM);
		grp_free_buffers(&g);
	}
	grp_close(&g);
}
