/* SPDX-License-Identifier: BSD-3-Clause */
/* The broadcast, allgather and reduce_scatter modes: the ranks form a C API group (embedded
 * coordinator) and time the blocking ftcc_broadcast (root 0), ftcc_allgather and
 * ftcc_reduce_scatter, sized as nccl-tests sizes them: the broadcast's buffer, the allgather's
 * whole output (nranks slots), the reduce-scatter's whole input (nranks slots), rounded down to
 * whole elements per slot. Bus bandwidth as nccl-tests: broadcast = algbw, allgather and
 * reduce_scatter = algbw * (n - 1) / n. With -c 1 every result is checked (-t is float32 sum
 * here: the reduce-scatter's inputs are small integers, exact in float32).
 */
#include "perf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc.h"

enum coll_kind { COLL_BCAST, COLL_ALLGATHER, COLL_RS };

/* Rank @r's input element @i of iteration @it (a small integer). */
static float coll_in(int r, size_t i, int it)
{
	return (float)((r + 1) + (int)((i + (size_t)it) % 7));
}

/* One op of @kind on @n floats per slot (broadcast: @n in all). */
static int coll_op(ftcc_comm_t *c, enum coll_kind kind, float *sbuf, float *rbuf, size_t n)
{
	switch (kind) {
	case COLL_BCAST:
		return ftcc_broadcast(c, rbuf, n, FTCC_FLOAT32, 0, NULL);
	case COLL_ALLGATHER:
		return ftcc_allgather(c, sbuf, rbuf, n, FTCC_FLOAT32, NULL);
	case COLL_RS:
		return ftcc_reduce_scatter(c, sbuf, rbuf, n, FTCC_FLOAT32, FTCC_SUM, NULL);
	}
	return FTCC_ERR_INVALID;
}

/* Fills the inputs of iteration @it on rank @r. */
static void coll_fill(enum coll_kind kind, int r, int nranks, float *sbuf, float *rbuf, size_t n,
		      int it)
{
	switch (kind) {
	case COLL_BCAST:
		for (size_t i = 0; i < n; i++) {
			rbuf[i] = r == 0 ? coll_in(0, i, it) : -1.0f;
		}
		break;
	case COLL_ALLGATHER:
		for (size_t i = 0; i < n; i++) {
			sbuf[i] = coll_in(r, i, it);
		}
		memset(rbuf, 0xa5, n * (size_t)nranks * sizeof(float));
		break;
	case COLL_RS:
		for (size_t i = 0; i < n * (size_t)nranks; i++) {
			sbuf[i] = coll_in(r, i, it);
		}
		memset(rbuf, 0xa5, n * sizeof(float));
		break;
	}
}

/* Elements of rank @r's result of iteration @it that are wrong. */
static uint64_t coll_wrong(enum coll_kind kind, int r, int nranks, const float *rbuf, size_t n,
			   int it)
{
	uint64_t wrong = 0;

	switch (kind) {
	case COLL_BCAST:
		for (size_t i = 0; i < n; i++) {
			wrong += rbuf[i] != coll_in(0, i, it);
		}
		break;
	case COLL_ALLGATHER:
		for (int k = 0; k < nranks; k++) {
			for (size_t i = 0; i < n; i++) {
				wrong += rbuf[(size_t)k * n + i] != coll_in(k, i, it);
			}
		}
		break;
	case COLL_RS:
		for (size_t i = 0; i < n; i++) {
			float want = 0;

			for (int k = 0; k < nranks; k++) {
				want += coll_in(k, (size_t)r * n + i, it);
			}
			wrong += rbuf[i] != want;
		}
		break;
	}
	return wrong;
}

int perf_colls_run(const struct perf_opts *o, struct perf_boot *b)
{
	enum coll_kind kind = !strcmp(o->mode, "broadcast") ? COLL_BCAST :
			      !strcmp(o->mode, "allgather") ? COLL_ALLGATHER :
							      COLL_RS;
	int nr = b->nranks, rc;
	size_t slots = kind == COLL_BCAST ? 1 : (size_t)nr, cap = o->max_bytes / sizeof(float) + 1;
	float *sbuf = perf_buf_alloc(cap * sizeof(float)),
	      *rbuf = perf_buf_alloc(cap * sizeof(float));
	uint64_t *times = calloc((size_t)o->iters, sizeof(*times));
	ftcc_comm_t *comm = NULL;

	if (!sbuf || !rbuf || !times) {
		rc = -ENOMEM;
		goto out;
	}
	if (strcmp(o->dtype, "float32") || strcmp(o->redop, "sum") || o->inplace || o->poll ||
	    o->codec) {
		fprintf(stderr, "ftcc-perf: mode %s: float32 sum, out of place, blocking only\n",
			o->mode);
		rc = -EINVAL;
		goto out;
	}
	rc = perf_capi_comm(b, FTCC_DEGRADED_SUM, &comm);
	if (rc) {
		goto out;
	}
	if (b->rank == 0) {
		char notes[160];

		snprintf(notes, sizeof(notes),
			 "# %d ranks, blocking ftcc_%s%s (embedded coordinator); size = %s\n", nr,
			 o->mode, kind == COLL_BCAST ? " from rank 0" : "",
			 kind == COLL_BCAST ? "the buffer" : "all ranks' slots");
		perf_report_header(o, notes);
	}
	for (size_t size = o->min_bytes; size <= o->max_bytes && !rc;) {
		size_t n = size / sizeof(float) / slots;
		struct perf_result res = { .size = n * slots * sizeof(float),
					   .count = n * slots,
					   .type = "float32",
					   .redop = kind == COLL_RS ? "sum" : "none" };
		uint64_t wrong = 0;
		int orc = 0;

		if (n == 0) { /* less than an element per slot: the next size */
			size = (size_t)((double)size * o->step_factor) + 1;
			continue;
		}
		coll_fill(kind, b->rank, nr, sbuf, rbuf, n, 0);
		for (int it = 0; it < o->warmup && !orc; it++) {
			orc = coll_op(comm, kind, sbuf, rbuf, n);
		}
		rc = orc ? 0 : perf_boot_barrier(b);
		for (int it = 0; it < o->iters && !orc && !rc; it++) {
			uint64_t t0;

			if (o->check) {
				coll_fill(kind, b->rank, nr, sbuf, rbuf, n, it);
			}
			t0 = perf_now_ns();
			orc = coll_op(comm, kind, sbuf, rbuf, n);
			times[it] = perf_now_ns() - t0;
			if (!orc && o->check) {
				wrong += coll_wrong(kind, b->rank, nr, rbuf, n, it);
			}
		}
		if (orc) {
			fprintf(stderr, "ftcc-perf rank %d: ftcc_%s of %zu B: %s (%s)\n", b->rank,
				o->mode, res.size, ftcc_strerror(orc), ftcc_comm_last_error(comm));
			rc = -EIO;
			break;
		}
		rc = rc ? rc : perf_collect(b, times, o->iters, wrong, PERF_TIME_MAX, &res);
		if (!rc && b->rank == 0) {
			perf_result_bw(&res, (double)res.size,
				       kind == COLL_BCAST ? 1.0 : (double)(nr - 1) / nr);
			perf_report_row(o, &res);
		}
		if (size > o->max_bytes / o->step_factor) {
			break;
		}
		size = (size_t)((double)size * o->step_factor);
	}
	if (!rc) {
		rc = perf_boot_barrier(b); /* nobody leaves while a peer still finishes an op */
	}
out:
	if (comm) {
		ftcc_comm_destroy(comm);
	}
	free(times);
	free(rbuf);
	free(sbuf);
	return rc;
}
