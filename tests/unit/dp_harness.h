/* SPDX-License-Identifier: BSD-3-Clause */
/* Harness of the data plane tests (test_dp.c, test_dp_faults.c): members on 127.0.0.1 with
 * one thread each, payload patterns, and hand-written HELLOs and frames for the wire tests.
 */
#ifndef FTCC_TEST_DP_HARNESS_H
#define FTCC_TEST_DP_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ftcc/dp.h"
#include "ftcc/log.h"

#define DPH_GROUP 0x5eed0001ull
#define DPH_BOUND_MS 10000 /* every dp_run here gives up after this */
#define DPH_BIG (64u << 20)

/* One member's work in a thread: its transfers, and what dp_run said. */
struct dph_job {
	struct dp *dp;
	struct dp_xfer x[64];
	int n;
	int rc;
	uint32_t bad;
	pthread_t th;
};

/* Monotonic clock in ms. */
int64_t dph_now_ms(void);

/* Log sink counting warnings (last one kept) and "retrying" lines. Install with
 * ftcc_log_set_sink() before threads start. */
extern atomic_int dph_warn_lines, dph_retry_lines;
extern char dph_last_warn[512];
void dph_count_sink(enum ftcc_log_level level, const char *file, int line, const char *msg);

/* A dp for member @id on 127.0.0.1 (asserts); @failure_ms 0: the setting. */
struct dp *dph_mk(uint32_t id, uint64_t inc, int64_t failure_ms);
/* The same with dp_cfg.either_connects = @either. */
struct dp *dph_mk_cfg(uint32_t id, uint64_t inc, int64_t failure_ms, int either);
/* @dp's published address as member @id/@inc. */
struct dp_peer dph_peer_of(struct dp *dp, uint32_t id, uint64_t inc);
/* Tells every one of @n members about all (self included, which dp ignores). */
void dph_mesh(struct dp **dps, const uint32_t *ids, const uint64_t *incs, int n);
/* Test tag (epoch 1, DP_PH_TEST). */
struct dp_tag dph_tag(uint64_t seq, uint32_t step);
/* A fresh transfer. */
struct dp_xfer dph_xf(uint32_t peer, enum dp_dir dir, struct dp_tag t, void *buf, size_t len);
/* dp_run check: -ETIMEDOUT once the ms deadline at *@arg passed. */
int dph_past_deadline(void *arg);
/* Runs @x to completion within DPH_BOUND_MS. */
int dph_run(struct dp *dp, struct dp_xfer *x, int n, uint32_t *bad);
/* Runs a job's transfers in its thread (dph_run). */
void *dph_job_main(void *arg);
void dph_job_start(struct dph_job *j);
void dph_job_join(struct dph_job *j);
/* Pseudo-random payload of @seed, and its check (1 when intact). */
void dph_fill(uint8_t *p, size_t len, uint32_t seed);
int dph_check_fill(const uint8_t *p, size_t len, uint32_t seed);
/* Hand-written wire: HELLO and frame header as dp_int.h defines them. */
void dph_raw_hello(uint8_t *p, uint16_t version, uint64_t group, uint32_t from, uint64_t from_inc,
		   uint32_t to, uint64_t to_inc);
void dph_raw_frame_hdr(uint8_t *p, struct dp_tag t, uint64_t len);
/* A blocking client socket connected to @dp, having sent @len bytes of @data. */
int dph_raw_connect(struct dp *dp, const void *data, size_t len);
/* Reads from @fd while driving @dp, until EOF/reset (returns 1), @want bytes arrive (returns
 * 2, bytes in @buf) or @ms pass (0). */
int dph_raw_wait(struct dp *dp, int fd, uint8_t *buf, size_t want, int ms);
/* Exchanges one small frame each way between @a (id @ia) and @b (id @ib); tag seq @seq. */
void dph_ping(struct dp *a, uint32_t ia, struct dp *b, uint32_t ib, uint64_t seq);

#endif
