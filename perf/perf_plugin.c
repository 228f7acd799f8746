/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf plug-in loading and connection set-up, done the way NCCL 2.28 does it: dlopen the
 * .so, dlsym("ncclNetPlugin_v11"), one init per communicator, then listen / connect / accept
 * polled until they hand back a comm (they must never block).
 */
#include "perf_plugin.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static int perf_log_rank;
static int perf_log_level = NCCL_LOG_WARN;

/* The logger given to init: WARN lines always (stderr), INFO and TRACE when NCCL_DEBUG asks. */
static void perf_log(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		     const char *fmt, ...)
{
	static const char *names[] = { "NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE" };
	char msg[1024];
	va_list ap;

	(void)flags;
	if (level == NCCL_LOG_NONE || (int)level > perf_log_level) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	fprintf(stderr, "ftcc-perf rank %d: NET %s %s:%d %s\n", perf_log_rank,
		(unsigned)level < 6 ? names[level] : "?", file ? file : "?", line, msg);
}

int perf_plugin_check(ncclResult_t res, const char *what)
{
	if (res == ncclSuccess) {
		return 0;
	}
	fprintf(stderr, "ftcc-perf rank %d: %s failed: ncclResult %d\n", perf_log_rank, what,
		(int)res);
	return -EIO;
}

static void perf_log_setup(int rank)
{
	const char *dbg = getenv("NCCL_DEBUG");

	perf_log_rank = rank;
	if (dbg && !strcasecmp(dbg, "INFO")) {
		perf_log_level = NCCL_LOG_INFO;
	} else if (dbg && !strcasecmp(dbg, "TRACE")) {
		perf_log_level = NCCL_LOG_TRACE;
	}
}

int perf_plugin_open(struct perf_plugin *pl, const char *path, int rank)
{
	ncclNetCommConfig_v11_t cfg = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	int rc;

	memset(pl, 0, sizeof(*pl));
	perf_log_setup(rank);
	pl->dl = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!pl->dl) {
		fprintf(stderr, "ftcc-perf rank %d: dlopen %s: %s\n", rank, path, dlerror());
		return -ENOENT;
	}
	pl->net = dlsym(pl->dl, "ncclNetPlugin_v11");
	if (!pl->net) {
		fprintf(stderr, "ftcc-perf rank %d: %s has no ncclNetPlugin_v11\n", rank, path);
		rc = -ENOENT;
		goto close_dl;
	}
	rc = perf_plugin_check(pl->net->init(&pl->ctx, PERF_COMM_ID, &cfg, perf_log, NULL), "init");
	if (rc) {
		goto finalize; /* NCCL calls finalize after a failed init too */
	}
	rc = perf_plugin_check(pl->net->devices(&pl->ndev), "devices");
	if (!rc && pl->ndev <= 0) {
		fprintf(stderr, "ftcc-perf rank %d: plug-in reports %d devices\n", rank, pl->ndev);
		rc = -ENODEV;
	}
	if (!rc) {
		rc = perf_plugin_check(pl->net->getProperties(pl->dev, &pl->props),
				       "getProperties");
	}
	if (rc) {
		goto finalize;
	}
	return 0;

finalize:
	pl->net->finalize(pl->ctx);
	pl->net = NULL;
close_dl:
	dlclose(pl->dl);
	pl->dl = NULL;
	return rc;
}

void perf_plugin_close(struct perf_plugin *pl)
{
	if (pl->net) {
		perf_plugin_check(pl->net->finalize(pl->ctx), "finalize");
		pl->net = NULL;
	}
	if (pl->dl) {
		dlclose(pl->dl);
		pl->dl = NULL;
	}
}

/* Exchanges listen handles: sends ours (if @lhandle) and receives the peer's (if @phandle). */
static int swap_handles(struct perf_boot *b, int peer, const char *lhandle, char *phandle)
{
	int rc = 0;

	if (lhandle) {
		rc = perf_boot_send(b, peer, lhandle, NCCL_NET_HANDLE_MAXSIZE);
	}
	if (!rc && phandle) {
		rc = perf_boot_recv(b, peer, phandle, NCCL_NET_HANDLE_MAXSIZE);
	}
	if (rc) {
		fprintf(stderr, "ftcc-perf rank %d: handle exchange with rank %d: %s\n", b->rank,
			peer, strerror(-rc));
	}
	return rc;
}

/* For the timeout message: whether a wanted comm was made. */
static const char *comm_state(const void *wanted, const void *comm)
{
	if (!wanted) {
		return "unused";
	}
	return comm ? "done" : "pending";
}

/* Polls connect and/or accept until both wanted comms exist or the deadline passes. */
static int poll_comms(struct perf_plugin *pl, char *phandle, void *lcomm, void **scomm,
		      void **rcomm)
{
	ncclNetDeviceHandle_v11_t *sdev = NULL, *rdev = NULL;
	uint64_t deadline = perf_now_ns() + PERF_CONNECT_TIMEOUT_NS;
	int rc = 0;

	while (!rc && ((phandle && !*scomm) || (lcomm && !*rcomm))) {
		if (perf_now_ns() > deadline) {
			fprintf(stderr,
				"ftcc-perf rank %d: connection not established within %llu s "
				"(connect %s, accept %s)\n",
				perf_log_rank, PERF_CONNECT_TIMEOUT_NS / 1000000000ull,
				comm_state(phandle, *scomm), comm_state(lcomm, *rcomm));
			return -ETIMEDOUT;
		}
		if (phandle && !*scomm) {
			rc = perf_plugin_check(
				pl->net->connect(pl->ctx, pl->dev, phandle, scomm, &sdev),
				"connect");
		}
		if (!rc && lcomm && !*rcomm) {
			rc = perf_plugin_check(pl->net->accept(lcomm, rcomm, &rdev), "accept");
		}
		nanosleep(&(struct timespec){ .tv_nsec = 100 * 1000 }, NULL);
	}
	return rc;
}

int perf_plugin_connect(struct perf_plugin *pl, struct perf_boot *b, int peer, int want_send,
			int want_recv, void **scomm, void **rcomm)
{
	char lhandle[NCCL_NET_HANDLE_MAXSIZE] = { 0 }, phandle[NCCL_NET_HANDLE_MAXSIZE];
	void *lcomm = NULL;
	int rc;

	*scomm = *rcomm = NULL;
	if (want_recv) {
		rc = perf_plugin_check(pl->net->listen(pl->ctx, pl->dev, lhandle, &lcomm),
				       "listen");
		if (rc) {
			return rc;
		}
	}
	rc = swap_handles(b, peer, want_recv ? lhandle : NULL, want_send ? phandle : NULL);
	if (!rc) {
		rc = poll_comms(pl, want_send ? phandle : NULL, lcomm, scomm, rcomm);
	}
	/* NCCL closes the listener right after accept; so do we, and on every error path. */
	if (lcomm) {
		perf_plugin_check(pl->net->closeListen(lcomm), "closeListen");
	}
	if (rc && *scomm) {
		pl->net->closeSend(*scomm);
		*scomm = NULL;
	}
	if (rc && *rcomm) {
		pl->net->closeRecv(*rcomm);
		*rcomm = NULL;
	}
	return rc;
}
