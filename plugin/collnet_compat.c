/* SPDX-License-Identifier: BSD-3-Clause */
/* The v10, v9 and v8 collnet tables (NCCL 2.20 to 2.27) over the v11 implementation.
 *
 * Compared with v11 they have one global init and no finalize, listen without a ctx and their
 * own properties layouts; v8's iallreduce count is an int. Everything else is the v11 call.
 */
#include <errno.h>

#include "collnet.h"

static ncclResult_t collnet_listen_global(int dev, void *handle, void **listen_comm)
{
	void *ctx = collnet_global_ctx();

	if (!ctx) {
		if (listen_comm)
			*listen_comm = NULL;
		return plugin_result(-EINVAL, "collnet listen (before init)");
	}
	return collnet_listen(ctx, dev, handle, listen_comm);
}

static ncclResult_t collnet_iallreduce_v8(void *coll_comm, void *send, void *recv, int count,
					  ncclDataType_t type, ncclRedOp_t op, void *send_mh,
					  void *recv_mh, void **request)
{
	if (count < 0) {
		if (request)
			*request = NULL;
		return plugin_result(-EINVAL, "collnet iallreduce");
	}
	return collnet_iallreduce(coll_comm, send, recv, (size_t)count, type, op, send_mh, recv_mh,
				  request);
}

PLUGIN_EXPORT extern const ncclCollNet_v10_t ncclCollNetPlugin_v10;
PLUGIN_EXPORT extern const ncclCollNet_v9_t ncclCollNetPlugin_v9;
PLUGIN_EXPORT extern const ncclCollNet_v8_t ncclCollNetPlugin_v8;

PLUGIN_EXPORT const ncclCollNet_v10_t ncclCollNetPlugin_v10 = {
	.name = PLUGIN_NET_NAME,
	.init = collnet_init_global,
	.devices = collnet_devices,
	.getProperties = plugin_get_properties_v10,
	.listen = collnet_listen_global,
	.connect = collnet_connect,
	.reduceSupport = collnet_reduce_support,
	.regMr = collnet_reg_mr,
	.regMrDmaBuf = collnet_reg_mr_dmabuf,
	.deregMr = collnet_dereg_mr,
	.iallreduce = collnet_iallreduce,
	.iallgather = NULL,
	.ireducescatter = NULL,
	.iflush = collnet_iflush,
	.test = collnet_test,
	.closeColl = collnet_close_coll,
	.closeListen = collnet_close_listen,
	.makeVDevice = NULL,
};

PLUGIN_EXPORT const ncclCollNet_v9_t ncclCollNetPlugin_v9 = {
	.name = PLUGIN_NET_NAME,
	.init = collnet_init_global,
	.devices = collnet_devices,
	.getProperties = plugin_get_properties_v9,
	.listen = collnet_listen_global,
	.connect = collnet_connect,
	.reduceSupport = collnet_reduce_support,
	.regMr = collnet_reg_mr,
	.regMrDmaBuf = collnet_reg_mr_dmabuf,
	.deregMr = collnet_dereg_mr,
	.iallreduce = collnet_iallreduce,
	.iallgather = NULL,
	.ireducescatter = NULL,
	.iflush = collnet_iflush,
	.test = collnet_test,
	.closeColl = collnet_close_coll,
	.closeListen = collnet_close_listen,
	.makeVDevice = NULL,
};

PLUGIN_EXPORT const ncclCollNet_v8_t ncclCollNetPlugin_v8 = {
	.name = PLUGIN_NET_NAME,
	.init = collnet_init_global,
	.devices = collnet_devices,
	.getProperties = plugin_get_properties_v8,
	.listen = collnet_listen_global,
	.connect = collnet_connect,
	.reduceSupport = collnet_reduce_support,
	.regMr = collnet_reg_mr,
	.regMrDmaBuf = collnet_reg_mr_dmabuf,
	.deregMr = collnet_dereg_mr,
	.iallreduce = collnet_iallreduce_v8,
	.iallgather = NULL,
	.ireducescatter = NULL,
	.iflush = collnet_iflush,
	.test = collnet_test,
	.closeColl = collnet_close_coll,
	.closeListen = collnet_close_listen,
};
