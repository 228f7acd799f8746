/* SPDX-License-Identifier: BSD-3-Clause */
/* Net and collnet plug-in ABI, version 11 (NCCL 2.28 and 2.29; 2.30 loads it through its
 * v11 shim).
 *
 * Compared with v10: a context per communicator. init(ctx, commId, config, ...) replaces the
 * global init, listen and connect take that ctx (the traffic class moved from connect into
 * init's config), finalize(ctx) ends it, setNetAttr passes application hints, and the
 * properties gained maxMultiRequestSize. Collnet's init, listen and finalize take a ctx too.
 * Field order and types are ABI: never reorder.
 */
#ifndef FTCC_PLUGIN_NCCL_NET_V11_H
#define FTCC_PLUGIN_NCCL_NET_V11_H

#include <stddef.h>
#include <stdint.h>

#include "net_const.h"
#include "net_device.h"
#include "types.h"

/* The physical devices a (virtual) NIC is made of. */
typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v11_t;

/* Per-communicator settings handed to init. */
typedef struct {
	int trafficClass; /* plug-in specific; NCCL_NET_TRAFFIC_CLASS_UNDEF when unset */
} ncclNetCommConfig_v11_t;

/* What getProperties reports for one device. Strings are owned by the plug-in. */
typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush;
	int speed; /* Mbit/s */
	int port;
	float latency; /* microseconds */
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v11_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
	int maxMultiRequestSize; /* requests one multi-request may carry; 1 = no multi-request */
} ncclNetProperties_v11_t;

/* Unset value of every ncclNetAttr_v11_t field. */
#define NCCL_NET_ATTR_UNDEF -1

/* Expected traffic shape of one direction of a communicator. */
typedef struct {
	int32_t maxConcurrentPeers;
	int32_t minConcurrentPeers;
	int32_t maxFlowsPerPeer;
	int32_t minFlowsPerPeer;
} ncclNetCommAttr_v11_t;

/* Application hints given to setNetAttr before a batch of operations. */
typedef struct {
	ncclNetCommAttr_v11_t sendCommAttr;
	ncclNetCommAttr_v11_t recvCommAttr;
	uint32_t op;
	uint32_t algo;
	uint32_t proto;
} ncclNetAttr_v11_t;

/* The v11 net table. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclNetCommConfig_v11_t *config,
			     ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *ctx, int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_v11_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v11_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void *phandle, void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **phandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
	ncclResult_t (*finalize)(void *ctx);
	ncclResult_t (*setNetAttr)(void *ctx, ncclNetAttr_v11_t *netAttr);
} ncclNet_v11_t;

/* One piece of a collnet scatter-gather list. */
typedef struct {
	void *mhandle;
	void *address;
	size_t size;
} ncclNetSGE_v11_t;

/* The v11 collnet table. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(void **ctx, uint64_t commId, ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v11_t *props);
	ncclResult_t (*listen)(void *ctx, int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm,
				void **collComm);
	ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
	ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *collComm, void *mhandle);
	ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, size_t count,
				   ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
				   void *recvMhandle, void **request);
	ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
				   ncclNetSGE_v11_t *recvParts, size_t bytesPerRank,
				   size_t windowOffset, size_t windowBytes, void *sendMhandle,
				   void **request);
	ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v11_t *sendParts,
				       void *recvData, size_t bytesPerRank, size_t windowOffset,
				       size_t windowBytes, ncclDataType_t dataType,
				       ncclRedOp_t redOp, void *recvMhandle, void **request);
	ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
	ncclResult_t (*test)(void *request, int *done, int *size);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v11_t *props);
	ncclResult_t (*finalize)(void *ctx);
} ncclCollNet_v11_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(ncclNetVDeviceProps_v11_t) == 20, "v11 vProps size");
_Static_assert(offsetof(ncclNetProperties_v11_t, vProps) == 64, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxP2pBytes) == 88, "v11 props layout");
_Static_assert(offsetof(ncclNetProperties_v11_t, maxMultiRequestSize) == 104, "v11 props layout");
_Static_assert(sizeof(ncclNetProperties_v11_t) == 112, "v11 props size");
_Static_assert(sizeof(ncclNetAttr_v11_t) == 44, "v11 net attr size");
_Static_assert(offsetof(ncclNet_v11_t, finalize) == 20 * sizeof(void *), "v11 table layout");
_Static_assert(sizeof(ncclNet_v11_t) == 22 * sizeof(void *), "v11 net table size");
_Static_assert(sizeof(ncclCollNet_v11_t) == 19 * sizeof(void *), "v11 collnet table size");
#endif

#endif
