/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal interface of the NCCL plug-in (plugin/ only).
 *
 * One implementation of the net plug-in with v11 signatures lives in net.c; the older tables
 * (net_v10.c, net_v9.c, net_v8.c) are thin adapters over it. Error translation (err.c) is the
 * only place where a negative errno becomes an ncclResult_t. Nothing here is exported: the
 * shared object exports only the const tables named in exports.map.
 */
#ifndef FTCC_PLUGIN_PLUGIN_H
#define FTCC_PLUGIN_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc/transport.h"
#include "nccl/net_v10.h"
#include "nccl/net_v11.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"

#define PLUGIN_HIDDEN __attribute__((visibility("hidden")))

/* Translates 0 or a negative errno into an ncclResult_t: peer loss is ncclRemoteError, misuse
 * ncclInvalidUsage, an unsupported call ncclInternalError, the rest ncclSystemError. When the
 * result is not ncclSuccess, logs one INFO line naming @op (a static string such as "isend")
 * and the errno. Thread-safe. */
PLUGIN_HIDDEN ncclResult_t plugin_result(int err, const char *op);

/* The name NCCL matches NCCL_NET against (strcasecmp). */
#define PLUGIN_NET_NAME "ftcc"

/* Marks the exported ABI tables; everything else stays hidden. */
#define PLUGIN_EXPORT __attribute__((visibility("default")))

/* One NCCL communicator's view of the plug-in (the void *ctx of v11), or the library-wide
 * default ctx of the pre-v11 tables. Allocated by init, freed by finalize (the default one by
 * the unload destructor). The transport borrows @tctx for every listen and connect made with
 * this ctx, so a ctx outlives its listens and connections (NCCL closes them first). */
struct plugin_ctx {
	struct ftcc_tctx tctx;
	const struct ftcc_transport_ops *ops; /* holds one reference (ops->init) */
	int traffic_class;		      /* kept for when the transport can mark traffic */
};

/* Attaches NCCL's logger: ftcc's log sink forwards to the last non-NULL @logger given here.
 * Reference-counted together with plugin_log_release(); the last release puts back the stderr
 * sink so nothing points into NCCL once it unloads us. Call from init paths only (holds the
 * plug-in lock); collnet shares it. */
PLUGIN_HIDDEN void plugin_log_acquire(ncclDebugLogger_t logger);
PLUGIN_HIDDEN void plugin_log_release(void);

/* The v11 implementation, used directly by the tables whose signatures did not change.
 * @ctx is what init returned; comms are struct ftcc_listen * / struct ftcc_conn *; requests
 * are struct ftcc_req *. None of them blocks. */
PLUGIN_HIDDEN ncclResult_t plugin_init(void **ctx, uint64_t comm_id,
				       ncclNetCommConfig_v11_t *config, ncclDebugLogger_t logger,
				       ncclProfilerCallback_t prof);
PLUGIN_HIDDEN ncclResult_t plugin_finalize(void *ctx);
PLUGIN_HIDDEN ncclResult_t plugin_devices(int *ndev);
PLUGIN_HIDDEN ncclResult_t plugin_get_properties(int dev, ncclNetProperties_v11_t *props);
PLUGIN_HIDDEN ncclResult_t plugin_listen(void *ctx, int dev, void *handle, void **listen_comm);
PLUGIN_HIDDEN ncclResult_t plugin_connect(void *ctx, int dev, void *handle, void **send_comm,
					  ncclNetDeviceHandle_v11_t **send_dev_comm);
PLUGIN_HIDDEN ncclResult_t plugin_accept(void *listen_comm, void **recv_comm,
					 ncclNetDeviceHandle_v11_t **recv_dev_comm);
PLUGIN_HIDDEN ncclResult_t plugin_reg_mr(void *comm, void *data, size_t size, int type,
					 void **mhandle);
PLUGIN_HIDDEN ncclResult_t plugin_reg_mr_dmabuf(void *comm, void *data, size_t size, int type,
						uint64_t offset, int fd, void **mhandle);
PLUGIN_HIDDEN ncclResult_t plugin_dereg_mr(void *comm, void *mhandle);
PLUGIN_HIDDEN ncclResult_t plugin_isend(void *send_comm, void *data, size_t size, int tag,
					void *mhandle, void *phandle, void **request);
PLUGIN_HIDDEN ncclResult_t plugin_irecv(void *recv_comm, int n, void **data, size_t *sizes,
					int *tags, void **mhandles, void **phandles,
					void **request);
PLUGIN_HIDDEN ncclResult_t plugin_iflush(void *recv_comm, int n, void **data, int *sizes,
					 void **mhandles, void **request);
PLUGIN_HIDDEN ncclResult_t plugin_test(void *request, int *done, int *sizes);
PLUGIN_HIDDEN ncclResult_t plugin_close_send(void *send_comm);
PLUGIN_HIDDEN ncclResult_t plugin_close_recv(void *recv_comm);
PLUGIN_HIDDEN ncclResult_t plugin_close_listen(void *listen_comm);

/* Pre-v11 tables have one global init and no finalize. The first call creates a library-wide
 * default ctx (comm id 0) used by every old-style listen and connect; later calls only attach
 * @logger. The ctx lives until the library is unloaded (a destructor in net.c releases it and
 * the transport). Thread-safe. */
PLUGIN_HIDDEN ncclResult_t plugin_init_global(ncclDebugLogger_t logger,
					      ncclProfilerCallback_t prof);
/* The default ctx, or NULL before a successful plugin_init_global(). */
PLUGIN_HIDDEN void *plugin_global_ctx(void);

/* The transport of the first ctx ever created, or NULL before any init. A static table that
 * stays valid for the life of the library. */
PLUGIN_HIDDEN const struct ftcc_transport_ops *plugin_transport(void);

/* Old-style listen / connect over the default ctx; shared by v8, v9 and v10, whose listen
 * has not changed and whose connect differs only by v10's config argument. */
PLUGIN_HIDDEN ncclResult_t plugin_listen_v8(int dev, void *handle, void **listen_comm);
PLUGIN_HIDDEN ncclResult_t plugin_connect_v8(int dev, void *handle, void **send_comm,
					     ncclNetDeviceHandle_v8_t **send_dev_comm);
/* The global init without a profiler callback (v8, v9). */
PLUGIN_HIDDEN ncclResult_t plugin_init_v8(ncclDebugLogger_t logger);

/* getProperties of the older tables: the v11 answer in the older layout. Collnet reports the
 * same devices with the same properties, so both plug-in kinds use these. */
PLUGIN_HIDDEN ncclResult_t plugin_get_properties_v10(int dev, ncclNetProperties_v10_t *props);
PLUGIN_HIDDEN ncclResult_t plugin_get_properties_v9(int dev, ncclNetProperties_v9_t *props);
PLUGIN_HIDDEN ncclResult_t plugin_get_properties_v8(int dev, ncclNetProperties_v8_t *props);

#endif
