/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the allreduce algorithms (ring, recursive doubling) over real data planes on
 * 127.0.0.1, one thread per member: results bit-identical on every member and equal to a plain
 * reference, every chunk marked held, and bounded failure when a member aborts or is gone or
 * the epoch check stops the attempt. The pure functions (choice, chunking) come first.
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

#define MAXM 8
#define RUN_BOUND_NS (30ll * 1000000000) /* hang guard of every attempt */
/* After a member aborts, the epoch check says the epoch is over this much later: the control
 * plane, which learns of the abort from the member itself or from its silence. */
#define ABORT_NOTICE_NS (2ll * 1000000000)

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

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

/* ---- a group of members, one thread each ---------------------------------------------------- */

enum mode {
	M_RUN = 0,	  /* runs the attempt */
	M_ABORT_MIDWAY,	  /* runs it, and aborts its dp once data has arrived */
	M_ABSENT,	  /* never runs it (dp alive, silent) */
	M_ABSENT_DESTROY, /* destroys its dp instead of running */
};

struct grp;

struct member {
	struct grp *g;
	uint32_t idx;
	struct dp *dp;
	enum mode mode;
	void *in, *out, *scratch;
	uint8_t have[MAXM];
	struct algo_att a;
	int rc;
	int64_t t_end, t_abort;
	int aborted;
};

struct grp {
	uint32_t n;
	uint32_t ids[MAXM];
	struct member m[MAXM];
	uint64_t seq;
	int64_t deadline;
	_Atomic int64_t stale_at; /* check returns -ESTALE from then on (0: never) */
	int destroy_on_error;
};

static void grp_open(struct grp *g, uint32_t n)
{
	struct dp_peer peers[MAXM];

	memset(g, 0, sizeof(*g));
	g->n = n;
	for (uint32_t i = 0; i < n; i++) {
		/* Ids are not indexes: the algorithms must translate. */
		struct dp_cfg cfg = { .bind_host = "127.0.0.1",
				      .group_id = 0xa160,
				      .self_id = 3 * i + 2,
				      .incarnation = 7,
				      .failure_ms = 2000 };

		g->ids[i] = cfg.self_id;
		g->m[i].g = g;
		g->m[i].idx = i;
		cr_assert_eq(dp_create(&cfg, &g->m[i].dp), 0);
		peers[i] = (struct dp_peer){ .id = cfg.self_id, .incarnation = 7 };
		snprintf(peers[i].addr, sizeof(peers[i].addr), "%s", dp_addr(g->m[i].dp));
	}
	for (uint32_t i = 0; i < n; i++) {
		cr_assert_eq(dp_set_peers(g->m[i].dp, peers, n), 0);
	}
}

static void grp_close(struct grp *g)
{
	for (uint32_t i = 0; i < g->n; i++) {
		dp_destroy(g->m[i].dp);
		g->m[i].dp = NULL;
	}
}

static int member_check(void *arg)
{
	struct member *m = arg;
	int64_t now = now_ns();

	if (m->g->stale_at && now >= m->g->stale_at) {
		return -ESTALE;
	}
	if (now >= m->g->deadline) {
		return -ETIMEDOUT;
	}
	if (m->mode == M_ABORT_MIDWAY && !m->aborted) {
		/* The first reduce-scatter segment lands in chunk self - 1: data is flowing. */
		size_t off, len, esz = ftcc_dtype_size(m->a.dtype);
		uint8_t ones[8];

		algo_chunk_range(m->g->n, m->a.count, (m->idx + m->g->n - 1) % m->g->n, &off, &len);
		memset(ones, 0xff, sizeof(ones));
		if (memcmp((char *)m->out + off * esz, ones, esz) != 0) {
			m->aborted = 1;
			m->t_abort = now;
			m->g->stale_at = now + ABORT_NOTICE_NS;
			dp_abort(m->dp);
		}
	}
	return 0;
}

static void *member_main(void *arg)
{
	struct member *m = arg;
	enum algo_id id = (enum algo_id)(uintptr_t)m->a.check_arg;

	m->a.check_arg = m;
	if (m->mode == M_ABSENT) {
		return NULL;
	}
	if (m->mode == M_ABSENT_DESTROY) {
		dp_destroy(m->dp);
		m->dp = NULL;
		return NULL;
	}
	m->rc = algo_run(id, &m->a);
	m->t_end = now_ns();
	if (m->rc && m->g->destroy_on_error) {
		dp_destroy(m->dp);
		m->dp = NULL;
	}
	return NULL;
}

/* Runs one attempt of @id on every member; inputs, outputs and scratch already set. */
static void grp_run(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt,
		    enum ftcc_redop op)
{
	pthread_t th[MAXM];

	g->deadline = now_ns() + RUN_BOUND_NS;
	for (uint32_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];

		memset(m->have, 0, sizeof(m->have));
		m->rc = 1;
		m->aborted = 0;
		m->a = (struct algo_att){ .dp = m->dp,
					  .seq = g->seq,
					  .epoch = 1,
					  .n = g->n,
					  .ids = g->ids,
					  .self = i,
					  .input = m->in,
					  .out = m->out,
					  .count = count,
					  .dtype = dt,
					  .op = op,
					  .scratch = m->scratch,
					  .have = m->have,
					  .check = member_check,
					  .check_arg = (void *)(uintptr_t)id,
					  .bad_peer = UINT32_MAX };
	}
	for (uint32_t i = 0; i < g->n; i++) {
		cr_assert_eq(pthread_create(&th[i], NULL, member_main, &g->m[i]), 0);
	}
	for (uint32_t i = 0; i < g->n; i++) {
		pthread_join(th[i], NULL);
	}
	g->seq++;
}

/* ---- inputs and the plain reference -------------------------------------------------------- */

static int dt_signed(enum ftcc_dtype dt)
{
	return dt != FTCC_UINT8 && dt != FTCC_UINT32 && dt != FTCC_UINT64;
}

/* Input value of member @m at element @e: small integers, so sums and products are exact in
 * every tested type whatever the order. */
static int64_t gen(uint32_t m, size_t e, enum ftcc_redop op, enum ftcc_dtype dt)
{
	uint64_t h = (m + 1) * 0x9e3779b97f4a7c15ull ^ (e + 1) * 0xc2b2ae3d27d4eb4full;

	h ^= h >> 29;
	switch (op) {
	case FTCC_PROD:
		if (h % 7 == 0) {
			return 2;
		}
		return h % 5 == 0 && dt_signed(dt) ? -1 : 1;
	case FTCC_MAX:
	case FTCC_MIN:
		return (int64_t)(h % 201) - (dt_signed(dt) ? 100 : 0);
	default:
		return (int64_t)(h % 17) - (dt_signed(dt) ? 8 : 0);
	}
}

static void put(void *buf, enum ftcc_dtype dt, size_t i, double v)
{
	float f = (float)v;
	uint32_t bits;

	switch (dt) {
	case FTCC_INT8:
		((int8_t *)buf)[i] = (int8_t)(int64_t)v;
		break;
	case FTCC_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)(int64_t)v;
		break;
	case FTCC_INT32:
		((int32_t *)buf)[i] = (int32_t)(int64_t)v;
		break;
	case FTCC_UINT32:
		((uint32_t *)buf)[i] = (uint32_t)(int64_t)v;
		break;
	case FTCC_INT64:
		((int64_t *)buf)[i] = (int64_t)v;
		break;
	case FTCC_UINT64:
		((uint64_t *)buf)[i] = (uint64_t)(int64_t)v;
		break;
	case FTCC_FLOAT32:
		((float *)buf)[i] = f;
		break;
	case FTCC_FLOAT64:
		((double *)buf)[i] = v;
		break;
	case FTCC_BFLOAT16: /* the values used are exact in bfloat16: truncation is exact */
		memcpy(&bits, &f, 4);
		((uint16_t *)buf)[i] = (uint16_t)(bits >> 16);
		break;
	default:
		cr_assert_fail("untested type");
	}
}

static double get(const void *buf, enum ftcc_dtype dt, size_t i)
{
	uint32_t bits;
	float f;

	switch (dt) {
	case FTCC_INT8:
		return ((const int8_t *)buf)[i];
	case FTCC_UINT8:
		return ((const uint8_t *)buf)[i];
	case FTCC_INT32:
		return ((const int32_t *)buf)[i];
	case FTCC_UINT32:
		return ((const uint32_t *)buf)[i];
	case FTCC_INT64:
		return (double)((const int64_t *)buf)[i];
	case FTCC_UINT64:
		return (double)((const uint64_t *)buf)[i];
	case FTCC_FLOAT32:
		return ((const float *)buf)[i];
	case FTCC_FLOAT64:
		return ((const double *)buf)[i];
	case FTCC_BFLOAT16:
		bits = (uint32_t)((const uint16_t *)buf)[i] << 16;
		memcpy(&f, &bits, 4);
		return f;
	default:
		cr_assert_fail("untested type");
	}
	return 0;
}

/* Allocates every member's buffers for @count elements: inputs from gen(), out poisoned. */
static void grp_buffers(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt,
			enum ftcc_redop op)
{
	size_t esz = ftcc_dtype_size(dt),
	       sb = algo_scratch_bytes(id, g->n, count, dt, FTCC_CODEC_NONE);

	for (uint32_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];

		m->in = malloc(count * esz + 1);
		m->out = malloc(count * esz + 1);
		m->scratch = sb ? malloc(sb) : NULL;
		cr_assert(m->in && m->out && (m->scratch || !sb));
		for (size_t e = 0; e < count; e++) {
			put(m->in, dt, e, (double)gen(i, e, op, dt));
		}
		memset(m->out, 0xff, count * esz + 1);
	}
}

static void grp_free_buffers(struct grp *g)
{
	for (uint32_t i = 0; i < g->n; i++) {
		free(g->m[i].in);
		free(g->m[i].out);
		free(g->m[i].scratch);
		g->m[i].in = g->m[i].out = g->m[i].scratch = NULL;
	}
}

/* Every member succeeded, holds every chunk, and all outputs are the same bits as the plain
 * reference (exact: small integer inputs). */
static void grp_expect_exact(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt,
			     enum ftcc_redop op)
{
	size_t esz = ftcc_dtype_size(dt);
	uint8_t *ref = malloc(count * esz + 1);
	const char *what = ftcc_dtype_name(dt);

	cr_assert(ref);
	for (size_t e = 0; e < count; e++) {
		double acc = get(g->m[0].in, dt, e);

		for (uint32_t i = 1; i < g->n; i++) {
			double v = get(g->m[i].in, dt, e);

			switch (op) {
			case FTCC_PROD:
				acc *= v;
				break;
			case FTCC_MAX:
				acc = v > acc ? v : acc;
				break;
			case FTCC_MIN:
				acc = v < acc ? v : acc;
				break;
			default:
				acc += v;
				break;
			}
		}
		put(ref, dt, e, acc);
	}
	for (uint32_t i = 0; i < g->n; i++) {
		struct member *m = &g->m[i];

		cr_assert_eq(m->rc, 0, "n %u member %u %s %s count %zu: rc %d", g->n, i, what,
			     ftcc_redop_name(op), count, m->rc);
		for (uint32_t c = 0; c < algo_chunks(id, g->n); c++) {
			cr_assert(algo_have_get(m->have, c), "n %u member %u chunk %u not held",
				  g->n, i, c);
		}
		cr_assert_eq(memcmp(m->out, ref, count * esz), 0,
			     "n %u member %u %s %s count %zu: wrong result", g->n, i, what,
			     ftcc_redop_name(op), count);
		cr_assert_eq(((uint8_t *)m->out)[count * esz], 0xff, "wrote past the result");
	}
	free(ref);
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

/* ---- failures -------------------------------------------------------------------------------- */

/* Member @victim of @n aborts its data plane once data flows; every member returns an error
 * within a bound: the victim -ECANCELED; the member whose data reached it -EPIPE (from its link
 * to the victim, or to a member that gave up before); the others -EPIPE, -EHOSTUNREACH (one that
 * had to connect to a member whose data plane was gone by then), -ECANCELED, or -ESTALE from the
 * epoch check, which stands in for the control plane and says the epoch is over
 * ABORT_NOTICE_NS after the abort. A member waiting for the victim to connect to it (the lower
 * id connects) has no connection to see break: an attempt that ended before its answer is
 * dropped and awaited again, so the control plane's word ends that wait, as in the engine. A
 * member that saw -EPIPE or -EHOSTUNREACH names a member of the group. */
static void abort_midway(enum algo_id id, uint32_t n, uint32_t victim, size_t count)
{
	uint32_t upstream = (victim + n - 1) % n; /* the ring's sender to the victim */
	struct grp g;

	cr_assert_eq(ftcc_settings_set(FTCC_SET_SEGMENT_BYTES, "4096"), 0);
	grp_open(&g, n);
	g.destroy_on_error = 1;
	g.m[victim].mode = M_ABORT_MIDWAY;
	grp_buffers(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
	grp_run(&g, id, count, FTCC_FLOAT32, FTCC_SUM);
	cr_assert(g.m[victim].aborted, "the victim finished before aborting");
	cr_expect_eq(g.m[victim].rc, -ECANCELED);
	cr_expect_eq(g.m[upstream].rc, -EPIPE, "member %u, whose data reached the victim: rc %d",
		     upstream, g.m[upstream].rc);
	for (uint32_t i = 0; i < n; i++) {
		struct member *m = &g.m[i];

		cr_expect(m->rc == -EPIPE || m->rc == -EHOSTUNREACH || m->rc == -ECANCELED ||
				  m->rc == -ESTALE,
			  "member %u rc %d", i, m->rc);
		cr_expect(m->t_end - g.m[victim].t_abort < 5000000000ll,
			  "member %u took %lld ms after the abort", i,
			  (long long)(m->t_end - g.m[victim].t_abort) / 1000000);
		if (m->rc == -EPIPE || m->rc == -EHOSTUNREACH) {
			int known = 0;

			for (uint32_t j = 0; j < n; j++) {
				known |= m->a.bad_peer == g.ids[j] && j != i;
			}
			cr_expect(known, "member %u: bad peer %u", i, m->a.bad_peer);
		}
	}
	grp_free_buffers(&g);
	grp_close(&g);
}

Test(algo_ring, member_aborts_midway, .timeout = 60)
{
	abort_midway(ALGO_RING, 4, 2, (16u << 20) / 4);
}

Test(algo_ring, member_aborts_midway_two, .timeout = 60)
{
	abort_midway(ALGO_RING, 2, 0, (16u << 20) / 4);
}

/* Recursive doubling: a member whose data plane is gone before the op. A member that connects
 * to it (the lower id connects) sees -EHOSTUNREACH after half the failure timeout of refused
 * connects; one that waits for it to connect learns of the loss from the epoch check (standing
 * in for the control plane, which says so after 3 s here). Nobody claims the result. */
Test(algo_rd, member_gone, .timeout = 60)
{
	const uint32_t n = 5, victim = 3;
	int64_t t0 = now_ns();
	struct grp g;
	int epipe = 0;

	grp_open(&g, n);
	g.destroy_on_error = 1;
	g.m[victim].mode = M_ABSENT_DESTROY;
	g.stale_at = t0 + 3000000000ll;
	grp_buffers(&g, ALGO_RD, 1000, FTCC_INT64, FTCC_SUM);
	grp_run(&g, ALGO_RD, 1000, FTCC_INT64, FTCC_SUM);
	for (uint32_t i = 0; i < n; i++) {
		if (i == victim) {
			continue;
		}
		/* -EPIPE: a member that gave up first closed its data plane on this one */
		cr_expect(g.m[i].rc == -EHOSTUNREACH || g.m[i].rc == -ESTALE || g.m[i].rc == -EPIPE,
			  "member %u rc %d", i, g.m[i].rc);
		epipe += g.m[i].rc == -EHOSTUNREACH;
		cr_expect(g.m[i].t_end - t0 < 4000000000ll, "member %u took %lld ms", i,
			  (long long)(g.m[i].t_end - t0) / 1000000);
		cr_expect(!algo_have_get(g.m[i].have, 0), "member %u claims the result", i);
	}
	cr_expect(epipe > 0, "nobody saw the member gone");
	grp_free_buffers(&g);
	grp_close(&g);
}

/* The epoch check stops an attempt that cannot finish (a silent member) promptly, with its
 * own value. */
static void check_stops(enum algo_id id, uint32_t n, size_t count)
{
	struct grp g;
	int64_t t0;

	grp_open(&g, n);
	g.m[n - 1].mode = M_ABSENT;
	grp_buffers(&g, id, count, FTCC_UINT32, FTCC_MAX);
	t0 = now_ns();
	g.stale_at = t0 + 100000000;
	grp_run(&g, id, count, FTCC_UINT32, FTCC_MAX);
	for (uint32_t i = 0; i + 1 < n; i++) {
		cr_expect_eq(g.m[i].rc, -ESTALE, "member %u rc %d", i, g.m[i].rc);
		cr_expect(g.m[i].t_end - g.stale_at < 300000000ll,
			  "member %u stopped %lld ms after the check said so", i,
			  (long long)(g.m[i].t_end - g.stale_at) / 1000000);
	}
	grp_free_buffers(&g);
	grp_close(&g);
}

Test(algo_ring, check_stops_attempt, .timeout = 30)
{
	check_stops(ALGO_RING, 3, 100000);
}

Test(algo_rd, check_stops_attempt, .timeout = 30)
{
	check_stops(ALGO_RD, 4, 100);
}

/* Runs op 0 of @id among @n members in a forked child armed with @spec: 0 when the child
 * completed it, 3 when a fault point made it exit, -1 otherwise. */
static int fault_child(enum algo_id id, uint32_t n, const char *spec)
{
	struct timespec tick = { 0, 2000000 };
	pid_t pid = fork();
	int st = 0;

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		struct grp g;

		if (ftcc_settings_set(FTCC_SET_FAULT, spec) || ftcc_fault_load()) {
			_exit(10);
		}
		grp_open(&g, n);
		grp_buffers(&g, id, 5000, FTCC_INT32, FTCC_SUM);
		grp_run(&g, id, 5000, FTCC_INT32, FTCC_SUM);
		for (uint32_t i = 0; i < n; i++) {
			if (g.m[i].rc) {
				_exit(11);
			}
		}
		_exit(0);
	}
	for (int i = 0; i < 5000 && waitpid(pid, &st, WNOHANG) == 0; i++) {
		nanosleep(&tick, NULL);
	}
	if (waitpid(pid, &st, WNOHANG) == 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

Test(algo_fault, points_are_passed, .timeout = 60)
{
	cr_expect_eq(fault_child(ALGO_RING, 3, "rs:0:1:exit"), 3);
	cr_expect_eq(fault_child(ALGO_RING, 3, "ag:0:1:exit"), 3);
	cr_expect_eq(fault_child(ALGO_RING, 3, "ag:0:2:exit"), 0, "the ring has 2 allgather steps");
	cr_expect_eq(fault_child(ALGO_RING, 3, "rs:1:0:exit"), 0, "op 1 never runs");
	cr_expect_eq(fault_child(ALGO_RD, 3, "rd:0:0:exit"), 3);
	cr_expect_eq(fault_child(ALGO_RD, 3, "rd:0:2:exit"), 3);
	cr_expect_eq(fault_child(ALGO_RD, 3, "rd:0:3:exit"), 0, "3 members: rounds 0..2");
}

Test(algo_run, bad_arguments)
{
	struct grp g;
	struct algo_att a;
	uint8_t have = 0;
	int x = 1, y = 0;

	grp_open(&g, 2);
	a = (struct algo_att){ .dp = g.m[0].dp,
			       .n = 2,
			       .ids = g.ids,
			       .self = 2,
			       .input = &x,
			       .out = &y,
			       .count = 1,
			       .dtype = FTCC_INT32,
			       .have = &have };
	cr_expect_eq(algo_run(ALGO_RING, &a), -EINVAL);
	a.self = 0;
	a.out = &x;
	cr_expect_eq(algo_run(ALGO_RING, &a), -EINVAL, "out aliasing input");
	a.out = &y;
	cr_expect_eq(algo_run((enum algo_id)7, &a), -EINVAL);
	a.dtype = FTCC_DTYPE_COUNT;
	cr_expect_eq(algo_run(ALGO_RD, &a), -EINVAL);
	cr_expect_eq(have, 0);
	grp_close(&g);
}
