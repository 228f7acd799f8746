/* SPDX-License-Identifier: BSD-3-Clause */
/* Net and collnet plug-in ABI, version 9 (NCCL 2.24 and 2.25).
 *
 * Compared with v8: isend / irecv sizes became size_t; the properties gained forceFlush, the
 * virtual-NIC description vProps and the per-operation size limits; makeVDevice (NIC fusion)
 * appeared; collnet's iallreduce count became size_t and its SGE size size_t. Field order
 * and types are ABI: never reorder.
 */
#ifndef FTCC_PLUGIN_NCCL_NET_V9_H
#define FTCC_PLUGIN_NCCL_NET_V9_H

#include <stddef.h>
#include <stdint.h>

#include "net_const.h"
#include "net_device.h"
#include "types.h"

/* The physical devices a (virtual) NIC is made of. */
typedef struct {
	int ndevs;
	int devs[NCCL_NET_MAX_DEVS_PER_NIC];
} ncclNetVDeviceProps_v9_t;

/* What getProperties reports for one device. Strings are owned by the plug-in. */
typedef struct {
	char *name;
	char *pciPath;
	uint64_t guid;
	int ptrSupport;
	int regIsGlobal;
	int forceFlush; /* NCCL must iflush every receive */
	int speed;	/* Mbit/s */
	int port;
	float latency; /* microseconds */
	int maxComms;
	int maxRecvs;
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	ncclNetVDeviceProps_v9_t vProps;
	size_t maxP2pBytes;  /* largest single send/recv */
	size_t maxCollBytes; /* largest single collnet operation */
} ncclNetProperties_v9_t;

/* The v9 net table. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_v9_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v9_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, size_t size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, size_t *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclNet_v9_t;

/* One piece of a collnet scatter-gather list. */
typedef struct {
	void *mhandle;
	void *address;
	size_t size;
} ncclNetSGE_v9_t;

/* The v9 collnet table. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v9_t *props);
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
				   ncclNetSGE_v9_t *recvParts, size_t bytesPerRank,
				   size_t windowOffset, size_t windowBytes, void *sendMhandle,
				   void **request);
	ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v9_t *sendParts,
				       void *recvData, size_t bytesPerRank, size_t windowOffset,
				       size_t windowBytes, ncclDataType_t dataType,
				       ncclRedOp_t redOp, void *recvMhandle, void **request);
	ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
	ncclResult_t (*test)(void *request, int *done, int *size);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*makeVDevice)(int *d, ncclNetVDeviceProps_v9_t *props);
} ncclCollNet_v9_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(ncclNetVDeviceProps_v9_t) == 20, "v9 vProps size");
_Static_assert(offsetof(ncclNetProperties_v9_t, forceFlush) == 32, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, netDeviceVersion) == 60, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, vProps) == 64, "v9 props layout");
_Static_assert(offsetof(ncclNetProperties_v9_t, maxP2pBytes) == 88, "v9 props layout");
_Static_assert(sizeof(ncclNetProperties_v9_t) == 104, "v9 props size");
_Static_assert(sizeof(ncclNet_v9_t) == 20 * sizeof(void *), "v9 net table size");
_Static_assert(sizeof(ncclNetSGE_v9_t) == 24, "v9 SGE size");
_Static_assert(sizeof(ncclCollNet_v9_t) == 18 * sizeof(void *), "v9 collnet table size");
#endif

#endif
