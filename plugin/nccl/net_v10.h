/* SPDX-License-Identifier: BSD-3-Clause */
/* Net and collnet plug-in ABI, version 10 (NCCL 2.26 and 2.27).
 *
 * Compared with v9: init receives the profiler callback; connect receives a per-communicator
 * config (traffic class); isend gets the profiler handle of the step and irecv one per
 * buffer. Properties and collnet are unchanged apart from the type names. Field order and
 * types are ABI: never reorder.
 */
#ifndef FTCC_PLUGIN_NCCL_NET_V10_H
#define FTCC_PLUGIN_NCCL_NET_V10_H

#include <stddef.h>
#include <stdint.h>

#include "net_const.h"
#include "net_device.h"
#include "types.h"

/* The physical devices a (virtual) NIC is made of. */
typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v10_t;

/* Per-communicator settings handed to connect. */
typedef struct {
	int trafficClass; /* plug-in specific; NCCL_NET_TRAFFIC_CLASS_UNDEF when unset */
} ncclNetCommConfig_v10_t;

/* What getProperties reports for one device; same layout as v9. */
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
	ncclNetVDeviceProps_v10_t vProps;
	size_t maxP2pBytes;
	size_t maxCollBytes;
} ncclNetProperties_v10_t;

/* The v10 net table. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction, ncclProfilerCallback_t profFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, ncclNetCommConfig_v10_t *config, void *handle,
				void **sendComm, ncclNetDeviceHandle_v10_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v10_t **recvDevComm);
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
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v10_t *props);
} ncclNet_v10_t;

/* One piece of a collnet scatter-gather list. */
typedef struct {
	void *mhandle;
	void *address;
	size_t size;
} ncclNetSGE_v10_t;

/* The v10 collnet table. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v10_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
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
				   ncclNetSGE_v10_t *recvParts, size_t bytesPerRank,
				   size_t windowOffset, size_t windowBytes, void *sendMhandle,
				   void **request);
	ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v10_t *sendParts,
				       void *recvData, size_t bytesPerRank, size_t windowOffset,
				       size_t windowBytes, ncclDataType_t dataType,
				       ncclRedOp_t redOp, void *recvMhandle, void **request);
	ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
	ncclResult_t (*test)(void *request, int *done, int *size);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v10_t *props);
} ncclCollNet_v10_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(ncclNetVDeviceProps_v10_t) == 20, "v10 vProps size");
_Static_assert(offsetof(ncclNetProperties_v10_t, vProps) == 64, "v10 props layout");
_Static_assert(offsetof(ncclNetProperties_v10_t, maxCollBytes) == 96, "v10 props layout");
_Static_assert(sizeof(ncclNetProperties_v10_t) == 104, "v10 props size");
_Static_assert(sizeof(ncclNetCommConfig_v10_t) == 4, "v10 comm config size");
_Static_assert(sizeof(ncclNet_v10_t) == 20 * sizeof(void *), "v10 net table size");
_Static_assert(sizeof(ncclCollNet_v10_t) == 18 * sizeof(void *), "v10 collnet table size");
#endif

#endif
