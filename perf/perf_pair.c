/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf two-rank transfer benchmark: the size sweep, warm-up, timed iterations, data
 * check and report shared by every mode that moves bytes from rank 0 to rank 1 (p2p over the
 * plug-in, sock over plain TCP). The transport is a perf_pair_ops table.
 */
#include "perf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

/* What rank 0 tells rank 1 before each size, so both run exactly the same iterations. */
struct pair_plan {
	uint64_t size;
	int32_t iters, warmup, check, roundtrip, last;
};

/* One benchmark run of a pair: the transport, the buffers and this rank's bootstrap end. */
struct pair_run {
	const struct perf_pair_ops *ops;
	void *t;
	void *sbuf, *rbuf;
	struct perf_boot *b;
};

/* One iteration of @p; stores its time in @ns and adds wrong bytes to @wrong. With the check
 * on, the fill and the verification stay outside the timed region and a barrier separates
 * iterations, so neither side's pattern work is counted in the other's time. */
static int pair_iter(struct pair_run *r, const struct pair_plan *p, int64_t iter, uint64_t *ns,
		     uint64_t *wrong)
{
	int rank = r->b->rank, rc;
	size_t size = (size_t)p->size;
	uint64_t t0;

	if (p->check) {
		if (rank == 0) {
			perf_pattern_fill(r->sbuf, size, (uint64_t)iter);
		}
		rc = perf_boot_barrier(r->b);
		if (rc) {
			return rc;
		}
	}
	t0 = perf_now_ns();
	if (p->roundtrip) {
		rc = r->ops->pingpong(r->t, rank, r->sbuf, r->rbuf, size);
	} else if (rank == 0) {
		rc = r->ops->send(r->t, r->sbuf, size);
	} else {
		rc = r->ops->recv(r->t, r->rbuf, size);
	}
	*ns = perf_now_ns() - t0;
	if (!rc && p->check && (rank == 1 || p->roundtrip)) {
		*wrong += perf_pattern_wrong(r->rbuf, size, (uint64_t)iter);
	}
	return rc;
}

/* Runs one size on both ranks; rank 0 reports. */
static int pair_size(struct pair_run *r, const struct perf_opts *o, const struct pair_plan *p)
{
	struct perf_result res = { 0 };
	uint64_t *times, wrong = 0, scratch = 0, ignore;
	int i, rc = 0;

	times = calloc((size_t)p->iters, sizeof(*times));
	if (!times) {
		return -ENOMEM;
	}
	/* Warm-up iterations use negative pattern indices and are never counted. */
	for (i = 0; i < p->warmup && !rc; i++) {
		rc = pair_iter(r, p, -1 - (int64_t)i, &ignore, &scratch);
	}
	for (i = 0; i < p->iters && !rc; i++) {
		rc = pair_iter(r, p, i, &times[i], &wrong);
	}
	if (!rc) {
		rc = perf_collect(r->b, times, p->iters, wrong,
				  p->roundtrip ? PERF_TIME_RANK0 : PERF_TIME_MAX, &res);
	}
	if (!rc && r->b->rank == 0) {
		res.size = res.count = (size_t)p->size;
		res.type = "uint8";
		res.redop = "none";
		/* A round trip moves the message twice. */
		perf_result_bw(&res, (p->roundtrip ? 2.0 : 1.0) * (double)p->size, 1.0);
		perf_report_row(o, &res);
	}
	free(times);
	return rc;
}

/* Next size of the sweep, like nccl-tests -f: multiply, but always grow. 0 ends the sweep. */
static size_t pair_next_size(const struct perf_opts *o, size_t size)
{
	double next = (double)size * o->step_factor;

	if (size >= o->max_bytes || next > (double)o->max_bytes) {
		return 0;
	}
	return (size_t)next > size ? (size_t)next : size + 1;
}

int perf_pair_run(const struct perf_opts *o, struct perf_boot *b, const struct perf_pair_ops *ops,
		  void *t, void *sbuf, void *rbuf, const char *notes)
{
	struct pair_run r = { .ops = ops, .t = t, .sbuf = sbuf, .rbuf = rbuf, .b = b };
	struct pair_plan p = { 0 };
	size_t size = o->min_bytes;
	int rc = 0;

	if (b->rank == 0) {
		perf_report_header(o, notes);
	}
	while (!rc && !p.last) {
		if (b->rank == 0) {
			size_t next = pair_next_size(o, size);

			p = (struct pair_plan){ .size = size,
						.iters = o->iters,
						.warmup = o->warmup,
						.check = o->check,
						.roundtrip = o->roundtrip,
						.last = next == 0 };
			size = next;
			rc = perf_boot_send(b, 1, &p, sizeof(p));
		} else {
			rc = perf_boot_recv(b, 0, &p, sizeof(p));
		}
		if (!rc) {
			rc = pair_size(&r, o, &p);
		}
	}
	if (rc == -EPIPE) {
		fprintf(stderr, "ftcc-perf: rank %d: peer rank exited during the benchmark\n",
			b->rank);
	}
	return rc;
}
