/* SPDX-License-Identifier: BSD-3-Clause */
/* The v8 net table (NCCL 2.20 to 2.23) over the v11 implementation, and the old-style entry
 * points that v8 introduced (within the versions we export) and v9 / v10 still use: the
 * global init, and listen / connect without a ctx, which run on the default ctx.
 *
 * v8 differs from v9 by int sizes in isend / irecv and by properties without forceFlush,
 * vProps and the size limits (NCCL then assumes 1 GiB per message).
 */
#include <errno.h>

#include "ftcc/transport.h"
#include "plugin.h"

ncclResult_t plugin_init_v8(ncclDebugLogger_t logger)
{
	return plugin_init_global(logger, NULL);
}

ncclResult_t plugin_listen_v8(int dev, void *handle, void **listen_comm)
{
	void *ctx = plugin_global_ctx();

	/* Only reachable if NCCL skipped init, or init failed and NCCL went on regardless. */
	if (!ctx)
		return plugin_result(-EINVAL, "listen");
	return plugin_listen(ctx, dev, handle, listen_comm);
}

ncclResult_t plugin_connect_v8(int dev, void *handle, void **send_comm,
			       ncclNetDeviceHandle_v8_t **send_dev_comm)
{
	void *ctx = plugin_global_ctx();

	if (!ctx)
		return plugin_result(-EINVAL, "connect");
	return plugin_connect(ctx, dev, handle, send_comm, send_dev_comm);
}

ncclResult_t plugin_get_properties_v8(int dev, ncclNetProperties_v8_t *props)
{
	ncclNetProperties_v11_t p;

	if (!props)
		return plugin_result(-EINVAL, "getProperties");
	ncclResult_t res = plugin_get_properties(dev, &p);
	if (res != ncclSuccess)
		return res;
	*props = (ncclNetProperties_v8_t){
		.name = p.name,
		.pciPath = p.pciPath,
		.guid = p.guid,
		.ptrSupport = p.ptrSupport,
		.regIsGlobal = p.regIsGlobal,
		.speed = p.speed,
		.port = p.port,
		.latency = p.latency,
		.maxComms = p.maxComms,
		.maxRecvs = p.maxRecvs,
		.netDeviceType = p.netDeviceType,
		.netDeviceVersion = p.netDeviceVersion,
	};
	return ncclSuccess;
}

static ncclResult_t plugin_isend_v8(void *send_comm, void *data, int size, int tag, void *mhandle,
				    void **request)
{
	if (size < 0) {
		if (request)
			*request = NULL;
		return plugin_result(-EINVAL, "isend");
	}
	return plugin_isend(send_comm, data, (size_t)size, tag, mhandle, NULL, request);
}

static ncclResult_t plugin_irecv_v8(void *recv_comm, int n, void **data, int *sizes, int *tags,
				    void **mhandles, void **request)
{
	size_t wide[FTCC_MAX_RECVS];

	if (n < 1 || n > FTCC_MAX_RECVS || !sizes) {
		if (request)
			*request = NULL;
		return plugin_result(-EINVAL, "irecv");
	}
	for (int i = 0; i < n; i++) {
		if (sizes[i] < 0) {
			if (request)
				*request = NULL;
			return plugin_result(-EINVAL, "irecv");
		}
		wide[i] = (size_t)sizes[i];
	}
	/* The transport copies what it needs while posting; wide[] may go out of scope. */
	return plugin_irecv(recv_comm, n, data, wide, tags, mhandles, NULL, request);
}

PLUGIN_EXPORT extern const ncclNet_v8_t ncclNetPlugin_v8;

PLUGIN_EXPORT const ncclNet_v8_t ncclNetPlugin_v8 = {
	.name = PLUGIN_NET_NAME,
	.init = plugin_init_v8,
	.devices = plugin_devices,
	.getProperties = plugin_get_properties_v8,
	.listen = plugin_listen_v8,
	.connect = plugin_connect_v8,
	.accept = plugin_accept,
	.regMr = plugin_reg_mr,
	.regMrDmaBuf = plugin_reg_mr_dmabuf,
	.deregMr = plugin_dereg_mr,
	.isend = plugin_isend_v8,
	.irecv = plugin_irecv_v8,
	.iflush = plugin_iflush,
	.test = plugin_test,
	.closeSend = plugin_close_send,
	.closeRecv = plugin_close_recv,
	.closeListen = plugin_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
};
