/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf's view of the NCCL net plug-in: loading it the way NCCL does (dlopen, dlsym of
 * ncclNetPlugin_v11, per-communicator init) and connecting two ranks through it. Only the
 * plug-in modes include this; the rest of ftcc-perf never sees an NCCL type.
 */
#ifndef FTCC_PERF_PLUGIN_H
#define FTCC_PERF_PLUGIN_H

#include "perf.h"

#include "nccl/net_v11.h"

/* The fixed communicator id both ranks pass to init ("ftccperf"). */
#define PERF_COMM_ID 0x6674636370657266ull

/* One loaded plug-in and its per-communicator context. Owned by one rank process; the table
 * pointer and props.name point into the plug-in and live until perf_plugin_close(). */
struct perf_plugin {
	void *dl;
	const ncclNet_v11_t *net;
	void *ctx;
	int dev, ndev;
	ncclNetProperties_v11_t props;
};

/* dlopens @path, finds ncclNetPlugin_v11, calls init(ctx, PERF_COMM_ID, {trafficClass=-1},
 * logger, NULL), devices and getProperties(0). On failure prints why, unwinds and returns
 * -errno. @rank only labels log lines. */
int perf_plugin_open(struct perf_plugin *pl, const char *path, int rank);

/* Connects this rank with @peer through the plug-in, polling listen/connect/accept without
 * blocking for at most PERF_CONNECT_TIMEOUT_NS. @want_send: make *scomm (to the peer's
 * listener); @want_recv: listen, give the handle to the peer, make *rcomm. The peer calls it
 * with the two flags swapped. Handles travel over the bootstrap. 0 or -errno (printed). */
int perf_plugin_connect(struct perf_plugin *pl, struct perf_boot *b, int peer, int want_send,
			int want_recv, void **scomm, void **rcomm);

/* Turns a plug-in result into 0 or -EIO, printing "@what failed: ncclResult N" once. */
int perf_plugin_check(ncclResult_t res, const char *what);

/* finalize(ctx) and dlclose; comms must already be closed. Safe on a half-opened @pl. */
void perf_plugin_close(struct perf_plugin *pl);

#endif
