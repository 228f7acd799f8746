/* SPDX-License-Identifier: BSD-3-Clause */
/* Allreduce algorithm selection, the chunk partition every algorithm reports its progress in,
 * and the progress loop the algorithms share (dp waits interleaved with the epoch check).
 * The algorithms themselves: algo_ring.c, algo_rd.c, algo_q.c, algo_ag.c, algo_bc.c.
 */
#include "ftcc/algo.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <time.h>

#include "algo_int.h"
#include "ftcc/log.h"
#include "ftcc/reduce.h"
#include "ftcc/settings.h"

static int64_t algo_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

enum algo_id algo_choose(size_t bytes, uint32_t n)
{
	static atomic_int warned;
	const char *name = ftcc_setting_str(FTCC_SET_ALGO);

	if (strcmp(name, "ring") == 0) {
		return ALGO_RING;
	}
	if (strcmp(name, "rd") == 0) {
		return ALGO_RD;
	}
	if (strcmp(name, "auto") != 0 && name[0] != '\0' && !atomic_exchange(&warned, 1)) {
		ftcc_warn("FTCC_ALGO=%s is not auto, ring or rd; choosing by size", name);
	}
	/* One member moves nothing: either algorithm just copies. */
	if (n <= 1 || bytes <= (uint64_t)ftcc_setting_int(FTCC_SET_RD_MAX_BYTES)) {
		return ALGO_RD;
	}
	return ALGO_RING;
}

uint32_t algo_chunks(enum algo_id id, uint32_t n)
{
	/* (ALGO_AG's and ALGO_RSC's chunks are the group's slots: the engine counts them) */
	if (id == ALGO_RING || id == ALGO_Q) {
		return n ? n : 1;
	}
	return id == ALGO_BC ? BC_CHUNKS : 1;
}

void algo_chunk_range(uint32_t nchunks, size_t count, uint32_t c, size_t *off, size_t *len)
{
	size_t base, rem;

	if (nchunks == 0 || c >= nchunks) {
		*off = count;
		*len = 0;
		return;
	}
	base = count / nchunks;
	rem = count % nchunks;
	*off = (size_t)c * base + (c < rem ? c : rem);
	*len = base + (c < rem ? 1 : 0);
}

void algo_range(enum algo_id id, uint32_t nchunks, size_t count, uint32_t c, size_t *off,
		size_t *len)
{
	size_t nblk = (count + FTCC_CODEC_BLOCK - 1) / FTCC_CODEC_BLOCK, first, end;

	if (id != ALGO_Q || nchunks == 0 || c >= nchunks) {
		algo_chunk_range(nchunks, count, c, off, len);
		return;
	}
	algo_chunk_range(nchunks, nblk, c, &first, &end); /* blocks [first, first + end) */
	end = (first + end) * FTCC_CODEC_BLOCK;
	*off = first * FTCC_CODEC_BLOCK < count ? first * FTCC_CODEC_BLOCK : count;
	*len = (end < count ? end : count) - *off;
}

size_t algo_scratch_bytes(enum algo_id id, uint32_t n, size_t count, enum ftcc_dtype dtype,
			  enum ftcc_codec codec)
{
	if (id == ALGO_Q) {
		return algo_q_scratch_bytes(codec, n, count);
	}
	/* The ring receives straight into the result (each chunk's place is free until its
	 * segment arrives); recursive doubling stages the partner's whole vector. */
	if (id == ALGO_RD && n > 1) {
		return count * ftcc_dtype_size(dtype);
	}
	return 0;
}

int algo_run(enum algo_id id, struct algo_att *a)
{
	if (!a || !a->dp || a->n == 0 || a->self >= a->n || !a->ids || !a->have ||
	    ftcc_dtype_size(a->dtype) == 0 || (unsigned)a->op >= FTCC_REDOP_COUNT) {
		return -EINVAL;
	}
	if (a->count && ((!a->input && id != ALGO_BC) || !a->out || a->input == a->out)) {
		return -EINVAL;
	}
	switch (id) {
	case ALGO_RING:
		return algo_ring_run(a);
	case ALGO_RD:
		return algo_rd_run(a);
	case ALGO_Q:
		return algo_q_run(a);
	case ALGO_AG:
		return algo_ag_run(a);
	case ALGO_BC:
		return algo_bc_run(a);
	case ALGO_RSC:
		return algo_rsc_run(a);
	}
	return -EINVAL;
}

void algo_waiter_init(struct algo_waiter *w)
{
	w->last_check_ns = algo_now_ns();
}

int algo_progress(struct algo_att *a, struct algo_waiter *w, struct dp_xfer *x, int n)
{
	uint32_t bad = UINT32_MAX;
	int64_t now;
	int rc;

	rc = dp_progress(a->dp, x, n, ALGO_WAIT_MS, &bad);
	if (rc < 0) {
		if (rc == -EPIPE || rc == -EPROTO || rc == -EHOSTUNREACH || rc == -EBADE ||
		    rc == -ENOMSG) {
			a->bad_peer = bad;
		}
		if (rc != -ECANCELED) {
			/* The attempt is given up: its half-written frames are finished from
			 * copies, so no connection to a live member is closed. */
			dp_release(a->dp, x, n);
		}
		return rc;
	}
	now = algo_now_ns();
	if (a->check && (rc == 0 || now - w->last_check_ns >= (int64_t)ALGO_WAIT_MS * 1000000)) {
		w->last_check_ns = now;
		rc = a->check(a->check_arg);
		if (rc && rc != -ECANCELED) {
			dp_release(a->dp, x, n);
		}
		return rc;
	}
	return 0;
}

int algo_wait_all(struct algo_att *a, struct dp_xfer *x, int n)
{
	struct algo_waiter w;

	algo_waiter_init(&w);
	for (;;) {
		int pending = 0, rc;

		for (int i = 0; i < n; i++) {
			pending += !x[i].done;
		}
		if (!pending) {
			return 0;
		}
		rc = algo_progress(a, &w, x, n);
		if (rc) {
			return rc;
		}
	}
}

void algo_xfer_init(const struct algo_att *a, struct dp_xfer *x, uint32_t peer, enum dp_dir dir,
		    uint32_t step, void *buf, size_t len)
{
	memset(x, 0, sizeof(*x));
	x->peer = a->ids[peer];
	x->dir = dir;
	x->tag = (struct dp_tag){
		.seq = a->seq, .epoch = a->epoch, .phase = DP_PH_DATA, .step = step
	};
	x->buf = buf;
	x->len = len;
	x->shape = a->shape;
}

enum ftcc_redop algo_accum_op(enum ftcc_redop op)
{
	return op == FTCC_AVG ? FTCC_SUM : op;
}

void algo_run_alone(struct algo_att *a, uint32_t nchunks)
{
	if (a->count) {
		memcpy(a->out, a->input, a->count * ftcc_dtype_size(a->dtype));
	}
	for (uint32_t c = 0; c < nchunks; c++) {
		algo_have_set(a->have, c);
	}
}
