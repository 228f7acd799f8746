/* SPDX-License-Identifier: BSD-3-Clause */
/* Net and collnet plug-in ABI, version 8 (NCCL 2.20 to 2.23).
 *
 * Compared with v7: regMr's size became size_t and the properties gained regIsGlobal; collnet
 * gained iallgather / ireducescatter with scatter-gather lists. isend / irecv sizes are still
 * int. Field order and types are ABI: never reorder.
 */
#ifndef FTCC_PLUGIN_NCCL_NET_V8_H
#define FTCC_PLUGIN_NCCL_NET_V8_H

#include <stddef.h>
#include <stdint.h>

#include "net_const.h"
#include "net_device.h"
#include "types.h"

/* What getProperties reports for one device. Strings are owned by the plug-in. */
typedef struct {
	char *name;	 /* unique, used in logs and topology */
	char *pciPath;	 /* sysfs path of the PCI device, or NULL */
	uint64_t guid;	 /* identifies the NIC chip across its PCI functions */
	int ptrSupport;	 /* NCCL_PTR_* bits */
	int regIsGlobal; /* a registration is valid on every comm of the device */
	int speed;	 /* Mbit/s */
	int port;
	float latency; /* microseconds */
	int maxComms;
	int maxRecvs; /* most buffers in one grouped irecv */
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
} ncclNetProperties_v8_t;

/* The v8 net table. Calls return ncclSuccess with a NULL out-pointer for "not yet". */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(int dev, void *handle, void **sendComm,
				ncclNetDeviceHandle_v8_t **sendDevComm);
	ncclResult_t (*accept)(void *listenComm, void **recvComm,
			       ncclNetDeviceHandle_v8_t **recvDevComm);
	ncclResult_t (*regMr)(void *comm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *comm, void *data, size_t size, int type, uint64_t offset,
				    int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *comm, void *mhandle);
	ncclResult_t (*isend)(void *sendComm, void *data, int size, int tag, void *mhandle,
			      void **request);
	ncclResult_t (*irecv)(void *recvComm, int n, void **data, int *sizes, int *tags,
			      void **mhandles, void **request);
	ncclResult_t (*iflush)(void *recvComm, int n, void **data, int *sizes, void **mhandles,
			       void **request);
	ncclResult_t (*test)(void *request, int *done, int *sizes);
	ncclResult_t (*closeSend)(void *sendComm);
	ncclResult_t (*closeRecv)(void *recvComm);
	ncclResult_t (*closeListen)(void *listenComm);
	ncclResult_t (*getDeviceMr)(void *comm, void *mhandle, void **dptr_mhandle);
	ncclResult_t (*irecvConsumed)(void *recvComm, int n, void *request);
} ncclNet_v8_t;

/* One piece of a collnet scatter-gather list; v8's size is 32-bit. */
typedef struct {
	void *mhandle;
	void *address;
	uint32_t size;
} ncclNetSGE_v8_t;

/* The v8 collnet table. */
typedef struct {
	const char *name;
	ncclResult_t (*init)(ncclDebugLogger_t logFunction);
	ncclResult_t (*devices)(int *ndev);
	ncclResult_t (*getProperties)(int dev, ncclNetProperties_v8_t *props);
	ncclResult_t (*listen)(int dev, void *handle, void **listenComm);
	ncclResult_t (*connect)(void *handles[], int nranks, int rank, void *listenComm,
				void **collComm);
	ncclResult_t (*reduceSupport)(ncclDataType_t dataType, ncclRedOp_t redOp, int *supported);
	ncclResult_t (*regMr)(void *collComm, void *data, size_t size, int type, void **mhandle);
	ncclResult_t (*regMrDmaBuf)(void *collComm, void *data, size_t size, int type,
				    uint64_t offset, int fd, void **mhandle);
	ncclResult_t (*deregMr)(void *collComm, void *mhandle);
	ncclResult_t (*iallreduce)(void *collComm, void *sendData, void *recvData, int count,
				   ncclDataType_t dataType, ncclRedOp_t redOp, void *sendMhandle,
				   void *recvMhandle, void **request);
	ncclResult_t (*iallgather)(void *collComm, void *sendData, int nRecvParts,
				   ncclNetSGE_v8_t *recvParts, size_t bytesPerRank,
				   size_t windowOffset, size_t windowBytes, void *sendMhandle,
				   void **request);
	ncclResult_t (*ireducescatter)(void *collComm, int nSendParts, ncclNetSGE_v8_t *sendParts,
				       void *recvData, size_t bytesPerRank, size_t windowOffset,
				       size_t windowBytes, ncclDataType_t dataType,
				       ncclRedOp_t redOp, void *recvMhandle, void **request);
	ncclResult_t (*iflush)(void *collComm, void *data, int size, void *mhandle, void **request);
	ncclResult_t (*test)(void *request, int *done, int *size);
	ncclResult_t (*closeColl)(void *collComm);
	ncclResult_t (*closeListen)(void *listenComm);
} ncclCollNet_v8_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(offsetof(ncclNetProperties_v8_t, ptrSupport) == 24, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, speed) == 32, "v8 props layout");
_Static_assert(offsetof(ncclNetProperties_v8_t, netDeviceVersion) == 56, "v8 props layout");
_Static_assert(sizeof(ncclNetProperties_v8_t) == 64, "v8 props size");
_Static_assert(offsetof(ncclNet_v8_t, isend) == 10 * sizeof(void *), "v8 net table layout");
_Static_assert(sizeof(ncclNet_v8_t) == 19 * sizeof(void *), "v8 net table size");
_Static_assert(sizeof(ncclNetSGE_v8_t) == 24, "v8 SGE size");
_Static_assert(sizeof(ncclCollNet_v8_t) == 17 * sizeof(void *), "v8 collnet table size");
#endif

#endif
