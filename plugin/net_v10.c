/* SPDX-License-Identifier: BSD-3-Clause */
/* The v10 net table (NCCL 2.26 and 2.27) over the v11 implementation.
 *
 * v10 has one global init (with the profiler callback) and no finalize, listen and connect
 * without a ctx, a per-connection config on connect, and properties without
 * maxMultiRequestSize. isend / irecv already have the v11 signatures and are reused as is.
 */
#include <errno.h>

#include "plugin.h"

ncclResult_t plugin_get_properties_v10(int dev, ncclNetProperties_v10_t *props)
{
	ncclNetProperties_v11_t p;

	if (!props)
		return plugin_result(-EINVAL, "getProperties");
	ncclResult_t res = plugin_get_properties(dev, &p);
	if (res != ncclSuccess)
		return res;
	*props = (ncclNetProperties_v10_t){
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

/* v10 connect carries the communicator's config (traffic class) per connection. All
 * old-style connections share the default ctx, so the class is not applied yet. */
static ncclResult_t plugin_connect_v10(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				       void **send_comm, ncclNetDeviceHandle_v10_t **send_dev_comm)
{
	(void)config;
	return plugin_connect_v8(dev, handle, send_comm, send_dev_comm);
}

PLUGIN_EXPORT extern const ncclNet_v10_t ncclNetPlugin_v10;

PLUGIN_EXPORT const ncclNet_v10_t ncclNetPlugin_v10 = {
	.name = PLUGIN_NET_NAME,
	.init = plugin_init_global,
	.devices = plugin_devices,
	.getProperties = plugin_get_properties_v10,
	.listen = plugin_listen_v8,
	.connect = plugin_connect_v10,
	.accept = plugin_accept,
	.regMr = plugin_reg_mr,
	.regMrDmaBuf = plugin_reg_mr_dmabuf,
	.deregMr = plugin_dereg_mr,
	.isend = plugin_isend,
	.irecv = plugin_irecv,
	.iflush = plugin_iflush,
	.test = plugin_test,
	.closeSend = plugin_close_send,
	.closeRecv = plugin_close_recv,
	.closeListen = plugin_close_listen,
	.getDeviceMr = NULL,
	.irecvConsumed = NULL,
	.makeVDevice = NULL,
};
