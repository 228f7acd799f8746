/* SPDX-License-Identifier: BSD-3-Clause */
/* Private pieces shared by the allreduce algorithms (algo.c, algo_ring.c, algo_rd.c): the
 * progress loop that waits on the data plane with the attempt's epoch check, and the pieces of
 * an attempt every algorithm needs.
 */
#ifndef FTCC_ALGO_INT_H
#define FTCC_ALGO_INT_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc/algo.h"

/* How long one dp_progress() call may wait, and the longest gap between two calls of the
 * attempt's check callback while transfers keep completing. */
#define ALGO_WAIT_MS 10

/* A waiter: when the attempt's check callback last ran. Zeroed by algo_waiter_init(). */
struct algo_waiter {
	int64_t last_check_ns;
};

/* Starts a waiter for @a (the check's clock starts now). */
void algo_waiter_init(struct algo_waiter *w);

/* Progresses the @n transfers @x of attempt @a once (up to ALGO_WAIT_MS), running @a's check
 * when the wait made no progress or ALGO_WAIT_MS passed since it last ran. Returns 0 (the
 * caller looks at the done flags), the check's nonzero value, or dp's error (a->bad_peer set
 * for -EPIPE/-EPROTO). Blocks at most about ALGO_WAIT_MS plus the check's own time. */
int algo_progress(struct algo_att *a, struct algo_waiter *w, struct dp_xfer *x, int n);

/* Runs the @n transfers @x of @a to completion with algo_progress(). 0 or its error. Bounded by
 * the check: it returns as soon as the check does. */
int algo_wait_all(struct algo_att *a, struct dp_xfer *x, int n);

/* Fills a transfer of attempt @a with member index @peer (translated to its id), phase
 * DP_PH_DATA and @step. */
void algo_xfer_init(const struct algo_att *a, struct dp_xfer *x, uint32_t peer, enum dp_dir dir,
		    uint32_t step, void *buf, size_t len);

/* The operator as the kernels accumulate it: AVG as SUM. */
enum ftcc_redop algo_accum_op(enum ftcc_redop op);

/* Copies the input to out and marks all @nchunks chunks held: the one-member attempt. */
void algo_run_alone(struct algo_att *a, uint32_t nchunks);

#endif
