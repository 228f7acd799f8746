/* SPDX-License-Identifier: BSD-3-Clause */
/* The v9 net table (NCCL 2.24 and 2.25) over the v11 implementation.
 *
 * v9 is v10 without the profiler: init takes only the logger, connect has no config, and
 * isend / irecv carry no profiler handles. Sizes are already size_t.
 */
#include <errno.h>

#include "plugin.h"

ncclResult_t plugin_get_properties_v9(int dev, ncclNetProperties_v9_t *props)
{
	ncclNetProperties_v11_t p;

	if (!props)
		return plugin_result(-EINVAL, "getProperties");
	ncclResult_t res = plugin_get_properties(dev, &p);
	if (res != ncclSuccess)
		return res;
	*props = (ncclNetProperties_v9_t){
		.name = p.name,
		.pciPath = p.pciPath,
		.guid = p.guid,
		.ptrSupport = p.ptrSupport,
		.regIsGlobal = p.regIsGlobal,
		.forceFlush = p.forceFlush,
		.speed = p.speed,
		.port = p.port,
		.latency = p.latency,
		.maxComms = p.maxComms,
		.maxRecvs = p.maxRecvs,
		.netDeviceType = p.netDeviceType,
		.netDeviceVersion = p.netDeviceVersion,
		.vProps = { .ndevs = p.vProps.ndevs },
		.maxP2pBytes = p.maxP2pBytes,
		.maxCollBytes = p.maxCollBytes,
	};
	for (int i = 0; i < NCCL_NET_MAX_DEVS_PER_NIC; i++)
		props->vProps.devs[i] = p.vProps.devs[i];
	return ncclSuccess;
}

static ncclResult_t plugin_isend_v9(void *send_comm, void *data, size_t size, int tag,
				    void *mhandle, void **request)
{
	return plugin_isend(send_comm, data, size, tag, mhandle, NULL, request);
}

static ncclResult_t plugin_irecv_v9(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
				    void **mhandles, void **request)
{
	return plugin_irecv(recv_comm, n, data, sizes, tags, mhandles, NULL, request);
}

PLUGIN_EXPORT extern const ncclNet_v9_t ncclNetPlugin_v9;

PLUGIN_EXPORT const ncclNet_v9_t ncclNetPlugin_v9 = {
	.name = PLUGIN_NET_NAME,
	.init = plugin_init_v8,
	.devices = plugin_devices,
	.getProperties = plugin_get_properties_v9,
	.listen = plugin_listen_v8,
	.connect = plugin_connect_v8,
	.accept = plugin_accept,
	.regMr = plugin_reg_mr,
	.regMrDmaBuf = plugin_reg_mr_dmabuf,
	.deregMr = plugin_dereg_mr,
	.isend = plugin_isend_v9,
	.irecv = plugin_irecv_v9,
	.iflush = plugin_iflush,
	.test = plugin_test,
	.closeSend = plugin_close_send,
	.closeRecv = plugin_close_recv,
	.closeListen = plugin_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
};
