/* SPDX-License-Identifier: BSD-3-Clause */
/* The algorithm tests' group (algo_grp.h). */
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

int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void grp_open(struct grp *g, uint32_t n)
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

void grp_close(struct grp *g)
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
void grp_run(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt, enum ftcc_redop op)
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
void grp_buffers(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt,
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

void grp_free_buffers(struct grp *g)
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
void grp_expect_exact(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt,
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
