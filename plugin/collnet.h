/* SPDX-License-Identifier: BSD-3-Clause */
/* The CollNet plug-in's v11 implementation (collnet.c), which the older tables
 * (collnet_compat.c) adapt. plugin/ only.
 *
 * Objects: a ctx per NCCL communicator (v11) or one for the library (pre-v11); a listen comm
 * per listen, owning the control port its handle names; a collComm per connect, owning one
 * engine communicator (a member of the group of node heads); requests from a fixed pool of the
 * collComm. None of the calls below blocks, except connect (bounded by
 * FTCC_CONNECT_TIMEOUT_MS); close and finalize never wait for a peer.
 */
#ifndef FTCC_PLUGIN_COLLNET_H
#define FTCC_PLUGIN_COLLNET_H

#include "plugin.h"

PLUGIN_HIDDEN ncclResult_t collnet_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger);
PLUGIN_HIDDEN ncclResult_t collnet_finalize(void *ctx);
PLUGIN_HIDDEN ncclResult_t collnet_devices(int *ndev);
PLUGIN_HIDDEN ncclResult_t collnet_get_properties(int dev, ncclNetProperties_v11_t *props);
PLUGIN_HIDDEN ncclResult_t collnet_listen(void *ctx, int dev, void *handle, void **listen_comm);
PLUGIN_HIDDEN ncclResult_t collnet_connect(void *handles[], int nranks, int rank, void *listen_comm,
					   void **coll_comm);
PLUGIN_HIDDEN ncclResult_t collnet_reduce_support(ncclDataType_t type, ncclRedOp_t op,
						  int *supported);
PLUGIN_HIDDEN ncclResult_t collnet_reg_mr(void *coll_comm, void *data, size_t size, int type,
					  void **mhandle);
PLUGIN_HIDDEN ncclResult_t collnet_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type,
						 uint64_t offset, int fd, void **mhandle);
PLUGIN_HIDDEN ncclResult_t collnet_dereg_mr(void *coll_comm, void *mhandle);
PLUGIN_HIDDEN ncclResult_t collnet_iallreduce(void *coll_comm, void *send, void *recv, size_t count,
					      ncclDataType_t type, ncclRedOp_t op, void *send_mh,
					      void *recv_mh, void **request);
PLUGIN_HIDDEN ncclResult_t collnet_iflush(void *coll_comm, void *data, int size, void *mhandle,
					  void **request);
PLUGIN_HIDDEN ncclResult_t collnet_test(void *request, int *done, int *size);
PLUGIN_HIDDEN ncclResult_t collnet_close_coll(void *coll_comm);
PLUGIN_HIDDEN ncclResult_t collnet_close_listen(void *listen_comm);

/* Pre-v11: one global init (over the net plug-in's default ctx; repeated calls only attach
 * the logger), and the ctx every old-style listen uses (NULL before a successful init). */
PLUGIN_HIDDEN ncclResult_t collnet_init_global(ncclDebugLogger_t logger);
PLUGIN_HIDDEN void *collnet_global_ctx(void);

#endif
