/* SPDX-License-Identifier: BSD-3-Clause */
/* The net plug-in's connection and data path (v11 signatures) and the exported
 * ncclNetPlugin_v11 table.
 *
 * Each entry point is one transport op: the void * comms NCCL passes around are the
 * transport's struct ftcc_listen * / struct ftcc_conn * (whose base carries the ops table) and
 * its requests are struct ftcc_req *. Errors are translated once, by plugin_result().
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "ftcc/log.h"
#include "ftcc/transport.h"
#include "plugin.h"

/* Marks the entries of test()'s size array that the transport did not write (no buffer is
 * that large), so that we copy back exactly the count the request had. */
#define PLUGIN_SIZE_UNSET SIZE_MAX

/* Values the plug-in passes through unchanged (handles, ptrSupport bits, regMr types). */
_Static_assert(FTCC_HANDLE_SIZE <= NCCL_NET_HANDLE_MAXSIZE, "listen handle too large for NCCL");
_Static_assert(FTCC_PTR_HOST == NCCL_PTR_HOST && FTCC_PTR_CUDA == NCCL_PTR_CUDA &&
		       FTCC_PTR_DMABUF == NCCL_PTR_DMABUF,
	       "FTCC_PTR_* must equal NCCL_PTR_*");
_Static_assert(FTCC_MAX_REQUESTS >= NCCL_NET_MAX_REQUESTS, "NCCL keeps up to 32 requests");

/* NCCL's socket transport reports this when a link's speed is unknown; a 0 would make NCCL's
 * topology treat the NIC as useless. */
#define PLUGIN_DEFAULT_SPEED_MBPS 10000

/* NCCL never writes through the name strings; its struct merely lacks the const. */
static char *plugin_unconst(const char *s)
{
	return (char *)(uintptr_t)s;
}

/* A size limit NCCL accepts: 0 (no limit given) becomes @fallback, and nothing above 1 TiB. */
static size_t plugin_size_limit(size_t v, size_t fallback)
{
	if (v == 0)
		return fallback;
	return v > (size_t)NCCL_MAX_NET_SIZE_BYTES ? (size_t)NCCL_MAX_NET_SIZE_BYTES : v;
}

ncclResult_t plugin_devices(int *ndev)
{
	const struct ftcc_transport_ops *ops = plugin_transport();

	if (!ndev || !ops)
		return plugin_result(-EINVAL, "devices");
	*ndev = 0;
	return plugin_result(ops->devices(ndev), "devices");
}

ncclResult_t plugin_get_properties(int dev, ncclNetProperties_v11_t *props)
{
	const struct ftcc_transport_ops *ops = plugin_transport();
	struct ftcc_dev_props dp;

	if (!props || !ops)
		return plugin_result(-EINVAL, "getProperties");
	memset(&dp, 0, sizeof(dp));
	int err = ops->get_properties(dev, &dp);
	if (err)
		return plugin_result(err, "getProperties");
	int max_recvs = dp.max_recvs < 1 ? 1 : dp.max_recvs;
	*props = (ncclNetProperties_v11_t){
		.name = plugin_unconst(dp.name ? dp.name : PLUGIN_NET_NAME),
		.pciPath = plugin_unconst(dp.pci_path),
		.guid = dp.guid,
		.ptrSupport = dp.ptr_support,
		.regIsGlobal = dp.reg_is_global,
		.forceFlush = dp.force_flush,
		.speed = dp.speed_mbps > 0 ? dp.speed_mbps : PLUGIN_DEFAULT_SPEED_MBPS,
		.port = dp.port,
		.latency = dp.latency_us,
		.maxComms = dp.max_comms,
		.maxRecvs = max_recvs > FTCC_MAX_RECVS ? FTCC_MAX_RECVS : max_recvs,
		/* A host plug-in: the proxy thread moves the data, nothing runs on the GPU. */
		.netDeviceType = NCCL_NET_DEVICE_HOST,
		.netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION,
		/* Every device is physical: no NIC fusion (makeVDevice is NULL). */
		.vProps = { .ndevs = 1, .devs = { dev } },
		.maxP2pBytes = plugin_size_limit(dp.max_p2p_bytes, NCCL_MAX_NET_SIZE),
		.maxCollBytes = plugin_size_limit(dp.max_coll_bytes, NCCL_MAX_COLLNET_SIZE),
		.maxMultiRequestSize = 1,
	};
	return ncclSuccess;
}

/* One TRACE line naming the peer of a new connection; costs nothing below TRACE. */
static void plugin_trace_peer(struct ftcc_conn *conn, const char *what)
{
	char peer[128];

	if (ftcc_log_get_level() < FTCC_LOG_TRACE)
		return;
	if (conn->ops->describe_peer(conn, peer, sizeof(peer)) != 0)
		snprintf(peer, sizeof(peer), "?");
	ftcc_trace("%s %s (comm %p)", what, peer, (void *)conn);
}

ncclResult_t plugin_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	struct plugin_ctx *c = ctx;
	struct ftcc_listen *l = NULL;

	if (!c || !handle || !listen_comm)
		return plugin_result(-EINVAL, "listen");
	int err = c->ops->listen(&c->tctx, dev, handle, &l);
	*listen_comm = err ? NULL : l;
	return plugin_result(err, "listen");
}

ncclResult_t plugin_connect(void *ctx, int dev, void *handle, void **send_comm,
			    ncclNetDeviceHandle_v11_t **send_dev_comm)
{
	struct plugin_ctx *c = ctx;
	struct ftcc_conn *conn = NULL;

	/* We report NCCL_NET_DEVICE_HOST, so NCCL never asks for offload: nothing to fill. */
	(void)send_dev_comm;
	if (!c || !handle || !send_comm)
		return plugin_result(-EINVAL, "connect");
	int err = c->ops->connect(&c->tctx, dev, handle, &conn);
	*send_comm = err ? NULL : conn;
	if (err)
		return plugin_result(err, "connect");
	if (conn)
		plugin_trace_peer(conn, "connected to");
	return ncclSuccess;
}

ncclResult_t plugin_accept(void *listen_comm, void **recv_comm,
			   ncclNetDeviceHandle_v11_t **recv_dev_comm)
{
	struct ftcc_listen *l = listen_comm;
	struct ftcc_conn *conn = NULL;

	(void)recv_dev_comm;
	if (!l || !recv_comm)
		return plugin_result(-EINVAL, "accept");
	int err = l->ops->accept(l, &conn);
	*recv_comm = err ? NULL : conn;
	if (err)
		return plugin_result(err, "accept");
	if (conn)
		plugin_trace_peer(conn, "accepted from");
	return ncclSuccess;
}

ncclResult_t plugin_reg_mr(void *comm, void *data, size_t size, int type, void **mhandle)
{
	struct ftcc_conn *conn = comm;

	if (!conn || !mhandle)
		return plugin_result(-EINVAL, "regMr");
	return plugin_result(conn->ops->reg_mr(conn, data, size, type, mhandle), "regMr");
}

/* Non-NULL in every table: the tables are const and properties are per device. A transport
 * or device without dma-buf answers -EOPNOTSUPP (ncclInternalError); NCCL calls it only where
 * getProperties offered NCCL_PTR_DMABUF. */
ncclResult_t plugin_reg_mr_dmabuf(void *comm, void *data, size_t size, int type, uint64_t offset,
				  int fd, void **mhandle)
{
	struct ftcc_conn *conn = comm;

	if (!conn || !mhandle)
		return plugin_result(-EINVAL, "regMrDmaBuf");
	return plugin_result(conn->ops->reg_mr_dmabuf(conn, data, size, type, offset, fd, mhandle),
			     "regMrDmaBuf");
}

ncclResult_t plugin_dereg_mr(void *comm, void *mhandle)
{
	struct ftcc_conn *conn = comm;

	if (!conn)
		return plugin_result(-EINVAL, "deregMr");
	return plugin_result(conn->ops->dereg_mr(conn, mhandle), "deregMr");
}

ncclResult_t plugin_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
			  void *phandle, void **request)
{
	struct ftcc_conn *conn = send_comm;
	struct ftcc_req *r = NULL;

	(void)phandle; /* no profiler events yet */
	if (!conn || !request)
		return plugin_result(-EINVAL, "isend");
	int err = conn->ops->isend(conn, data, size, tag, mhandle, &r);
	*request = err ? NULL : r;
	return plugin_result(err, "isend");
}

ncclResult_t plugin_irecv(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
			  void **mhandles, void **phandles, void **request)
{
	struct ftcc_conn *conn = recv_comm;
	struct ftcc_req *r = NULL;

	(void)phandles;
	if (!conn || !request || n < 1 || n > FTCC_MAX_RECVS)
		return plugin_result(-EINVAL, "irecv");
	/* NCCL may preset *request to NCCL_NET_OPTIONAL_RECV_COMPLETION (LL/LL128 receives whose
	 * completion it can see in GPU memory). We take it as a hint only and always hand back
	 * a real request to test, or NULL to retry: never the hint value itself. */
	int err = conn->ops->irecv(conn, n, data, sizes, tags, mhandles, &r);
	*request = err ? NULL : r;
	return plugin_result(err, "irecv");
}

ncclResult_t plugin_iflush(void *recv_comm, int n, void **data, int *sizes, void **mhandles,
			   void **request)
{
	struct ftcc_conn *conn = recv_comm;
	struct ftcc_req *r = NULL;

	if (!conn || !request)
		return plugin_result(-EINVAL, "iflush");
	int err = conn->ops->iflush(conn, n, data, sizes, mhandles, &r);
	if (err == -EOPNOTSUPP) {
		/* A host-memory transport has nothing to flush; for iflush (unlike isend) NCCL
		 * reads a NULL request as "done", as with NCCL's own IB transport. */
		*request = NULL;
		return ncclSuccess;
	}
	*request = err ? NULL : r;
	return plugin_result(err, "iflush");
}

/* Contract with the transport's test op: on done it writes exactly one size per buffer of
 * the request (one for a send, n for an n-buffer receive) and leaves the rest of the
 * FTCC_MAX_RECVS-entry array untouched. NCCL's array is sized for the request (a single int
 * for a send), so we must not copy more. */
ncclResult_t plugin_test(void *request, int *done, int *sizes)
{
	const struct ftcc_transport_ops *ops = plugin_transport();
	size_t got[FTCC_MAX_RECVS];

	if (!request || !done || !ops)
		return plugin_result(-EINVAL, "test");
	if (sizes) {
		for (int i = 0; i < FTCC_MAX_RECVS; i++)
			got[i] = PLUGIN_SIZE_UNSET;
	}
	*done = 0;
	int err = ops->test(request, done, sizes ? got : NULL);
	if (err)
		return plugin_result(err, "test");
	if (*done && sizes) {
		/* maxP2pBytes may exceed INT_MAX, but NCCL's sizes are int; it never posts a
		 * single buffer that large, so saturating is only a guard. */
		for (int i = 0; i < FTCC_MAX_RECVS && got[i] != PLUGIN_SIZE_UNSET; i++)
			sizes[i] = got[i] > (size_t)INT_MAX ? INT_MAX : (int)got[i];
	}
	return ncclSuccess;
}

/* Close calls come with requests in flight and possibly a dead peer (NCCL's abort path); the
 * transport frees what is pending and never waits. NULL is tolerated for symmetry with
 * finalize. */
ncclResult_t plugin_close_send(void *send_comm)
{
	struct ftcc_conn *conn = send_comm;

	return conn ? plugin_result(conn->ops->close_conn(conn), "closeSend") : ncclSuccess;
}

ncclResult_t plugin_close_recv(void *recv_comm)
{
	struct ftcc_conn *conn = recv_comm;

	return conn ? plugin_result(conn->ops->close_conn(conn), "closeRecv") : ncclSuccess;
}

ncclResult_t plugin_close_listen(void *listen_comm)
{
	struct ftcc_listen *l = listen_comm;

	return l ? plugin_result(l->ops->close_listen(l), "closeListen") : ncclSuccess;
}

/* Application hints (NCCL 2.28's "app-aware" plug-ins); accepted and only logged for now. */
static ncclResult_t plugin_set_net_attr(void *ctx, ncclNetAttr_v11_t *attr)
{
	if (attr)
		ftcc_trace("setNetAttr ctx %p: op %u algo %u proto %u, send peers %d..%d", ctx,
			   attr->op, attr->algo, attr->proto, attr->sendCommAttr.minConcurrentPeers,
			   attr->sendCommAttr.maxConcurrentPeers);
	return ncclSuccess;
}

PLUGIN_EXPORT extern const ncclNet_v11_t ncclNetPlugin_v11;

PLUGIN_EXPORT const ncclNet_v11_t ncclNetPlugin_v11 = {
	.name = PLUGIN_NET_NAME,
	.init = plugin_init,
	.devices = plugin_devices,
	.getProperties = plugin_get_properties,
	.listen = plugin_listen,
	.connect = plugin_connect,
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
	.getDeviceMr = NULL,   /* no device offload */
	.irecvConsumed = NULL, /* only used with device offload */
	.makeVDevice = NULL,   /* no NIC fusion */
	.finalize = plugin_finalize,
	.setNetAttr = plugin_set_net_attr,
};
