/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf collnet mode: the allreduce sweep (perf_ar_run) driven through the CollNet plug-in
 * as NCCL loads and calls it: dlopen, dlsym("ncclCollNetPlugin_v11"), init, listen on device
 * 0, the 128-byte handles of all ranks exchanged out of band, blocking connect, regMr of the
 * buffers, then per op iallreduce (retried while it hands back no request) and test polled.
 */
#include "perf.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "nccl/net_v11.h"

/* Base of the commId every rank passes to init; NCCL passes the communicator's hash. */
#define CN_COMM_ID 0x6674636370657263ull /* "ftccperc" */

/* One rank's plug-in, collComm and registrations. Owned by the rank; the table points into
 * the plug-in and lives until dlclose. */
struct cn_bench {
	int rank, yield;
	const char *path;
	void *dl;
	const ncclCollNet_v11_t *cn;
	void *ctx, *listen, *coll;
	void *smh, *rmh; /* regMr of the send and receive buffers */
};

/* One op in flight and its arguments (what iallreduce is retried with). */
struct cn_op {
	struct cn_bench *x;
	void *src, *dst;
	size_t count;
	int dtype, redop;
	void *req;
};

static int cn_log_rank;
static int cn_log_level = NCCL_LOG_WARN;

/* The logger given to init: WARN always (stderr), INFO and TRACE when NCCL_DEBUG asks. */
static void cn_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	(void)flags;
	if (level == NCCL_LOG_NONE || (int)level > cn_log_level) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "ftcc-perf rank %d: COLLNET %d %s:%d %s\n", cn_log_rank, (int)level,
		file ? file : "?", line, msg);
}

static void cn_log_setup(int rank)
{
	const char *dbg = getenv("NCCL_DEBUG");

	cn_log_rank = rank;
	if (dbg && !strcasecmp(dbg, "INFO")) {
		cn_log_level = NCCL_LOG_INFO;
	} else if (dbg && !strcasecmp(dbg, "TRACE")) {
		cn_log_level = NCCL_LOG_TRACE;
	}
}

/* 0 for ncclSuccess, else prints "@what failed" and returns -EIO. */
static int cn_check(const struct cn_bench *x, ncclResult_t res, const char *what)
{
	if (res == ncclSuccess) {
		return 0;
	}
	fprintf(stderr, "ftcc-perf rank %d: collnet %s failed: ncclResult %d\n", x->rank, what,
		(int)res);
	return -EIO;
}

/* dlopen, dlsym, init(ctx, commId, logger), devices. 0 or -errno (printed). */
static int cn_load(struct cn_bench *x, const struct perf_boot *b)
{
	/* The same on every rank, different for concurrent runs. */
	uint64_t comm_id = CN_COMM_ID ^ b->run_id;
	int ndev = 0, rc;

	x->dl = dlopen(x->path, RTLD_NOW | RTLD_LOCAL);
	if (!x->dl) {
		fprintf(stderr, "ftcc-perf rank %d: dlopen %s: %s\n", x->rank, x->path, dlerror());
		return -ENOENT;
	}
	x->cn = dlsym(x->dl, "ncclCollNetPlugin_v11");
	if (!x->cn) {
		fprintf(stderr, "ftcc-perf rank %d: %s has no ncclCollNetPlugin_v11\n", x->rank,
			x->path);
		dlclose(x->dl);
		return -ENOENT;
	}
	rc = cn_check(x, x->cn->init(&x->ctx, comm_id, cn_log), "init");
	rc = rc ? rc : cn_check(x, x->cn->devices(&ndev), "devices");
	if (!rc && ndev <= 0) {
		fprintf(stderr, "ftcc-perf rank %d: collnet reports %d devices\n", x->rank, ndev);
		rc = -ENODEV;
	}
	if (rc) {
		x->cn->finalize(x->ctx); /* NCCL finalizes after a failed init too */
		dlclose(x->dl);
	}
	return rc;
}

/* Every rank's handle into @all (rank order), through rank 0. */
static int cn_allgather(struct perf_boot *b, const char *mine, char (*all)[NCCL_NET_HANDLE_MAXSIZE])
{
	size_t len = (size_t)b->nranks * NCCL_NET_HANDLE_MAXSIZE;
	int i, rc = 0;

	if (b->rank != 0) {
		rc = perf_boot_send(b, 0, mine, NCCL_NET_HANDLE_MAXSIZE);
		return rc ? rc : perf_boot_recv(b, 0, all, len);
	}
	memcpy(all[0], mine, NCCL_NET_HANDLE_MAXSIZE);
	for (i = 1; i < b->nranks && !rc; i++) {
		rc = perf_boot_recv(b, i, all[i], NCCL_NET_HANDLE_MAXSIZE);
	}
	for (i = 1; i < b->nranks && !rc; i++) {
		rc = perf_boot_send(b, i, all, len);
	}
	return rc;
}

/* listen on device 0, the handle exchange, connect (blocking, bounded by the plug-in's
 * FTCC_CONNECT_TIMEOUT_MS), regMr of both buffers. */
static int cn_open(void *t, struct perf_boot *b, void *sbuf, void *rbuf, size_t bytes)
{
	struct cn_bench *x = t;
	char mine[NCCL_NET_HANDLE_MAXSIZE] = { 0 }, all[PERF_MAX_RANKS][NCCL_NET_HANDLE_MAXSIZE];
	void *ptrs[PERF_MAX_RANKS];
	int i, rc;

	cn_log_setup(b->rank);
	rc = cn_load(x, b);
	if (rc) {
		return rc;
	}
	rc = cn_check(x, x->cn->listen(x->ctx, 0, mine, &x->listen), "listen");
	if (rc) {
		goto finalize;
	}
	rc = cn_allgather(b, mine, all);
	if (rc) {
		fprintf(stderr, "ftcc-perf rank %d: handle exchange: %s\n", b->rank, strerror(-rc));
		goto close_listen;
	}
	for (i = 0; i < b->nranks; i++) {
		ptrs[i] = all[i];
	}
	rc = cn_check(x, x->cn->connect(ptrs, b->nranks, b->rank, x->listen, &x->coll), "connect");
	if (rc) {
		goto close_listen;
	}
	rc = cn_check(x, x->cn->regMr(x->coll, sbuf, bytes, NCCL_PTR_HOST, &x->smh), "regMr");
	if (rc) {
		goto close_coll;
	}
	rc = cn_check(x, x->cn->regMr(x->coll, rbuf, bytes, NCCL_PTR_HOST, &x->rmh), "regMr");
	if (rc) {
		goto dereg_send;
	}
	return 0;

dereg_send:
	x->cn->deregMr(x->coll, x->smh);
close_coll:
	x->cn->closeColl(x->coll);
close_listen:
	x->cn->closeListen(x->listen);
finalize:
	x->cn->finalize(x->ctx);
	dlclose(x->dl);
	return rc;
}

/* As NCCL's teardown: deregMr, closeColl, closeListen, then finalize (none of them blocks). */
static void cn_close(void *t)
{
	struct cn_bench *x = t;

	cn_check(x, x->cn->deregMr(x->coll, x->rmh), "deregMr");
	cn_check(x, x->cn->deregMr(x->coll, x->smh), "deregMr");
	cn_check(x, x->cn->closeColl(x->coll), "closeColl");
	cn_check(x, x->cn->closeListen(x->listen), "closeListen");
	cn_check(x, x->cn->finalize(x->ctx), "finalize");
	dlclose(x->dl);
}

/* Posts the op; "done" once the plug-in handed back a request (NULL: retry later). */
static int cn_post(void *arg, int *done)
{
	struct cn_op *p = arg;
	struct cn_bench *x = p->x;
	void *rmh = x->rmh, *smh = p->src == p->dst ? rmh : x->smh;
	int rc = cn_check(x,
			  x->cn->iallreduce(x->coll, p->src, p->dst, p->count,
					    (ncclDataType_t)p->dtype, (ncclRedOp_t)p->redop, smh,
					    rmh, &p->req),
			  "iallreduce");

	*done = p->req != NULL;
	return rc;
}

static int cn_test(void *arg, int *done)
{
	struct cn_op *p = arg;
	int size = 0;

	return cn_check(p->x, p->x->cn->test(p->req, done, &size), "test");
}

static int cn_op(void *t, const void *src, void *dst, size_t count, int dtype, int redop,
		 struct ftcc_record *rec)
{
	struct cn_op p = { .x = t,
			   .src = (void *)src,
			   .dst = dst,
			   .count = count,
			   .dtype = dtype,
			   .redop = redop };
	int rc;

	(void)rec; /* the plug-in gives NCCL no record; the check expects every rank */
	rc = perf_ar_poll(cn_post, &p, p.x->yield, "collnet iallreduce");
	return rc ? rc : perf_ar_poll(cn_test, &p, p.x->yield, "collnet test");
}

static const struct perf_ar_driver cn_driver = {
	.name = "collnet",
	.what = "ncclCollNetPlugin_v11 iallreduce + test polled (dlopened plug-in, device 0)",
	.close_what = "deregMr, closeColl, closeListen, finalize",
	.open = cn_open,
	.op = cn_op,
	.close = cn_close,
};

int perf_collnet_run(const struct perf_opts *o, struct perf_boot *b)
{
	struct cn_bench x = { .rank = b->rank, .yield = o->yield, .path = o->plugin_path };

	return perf_ar_run(o, b, &cn_driver, &x);
}
