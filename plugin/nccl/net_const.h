/* SPDX-License-Identifier: BSD-3-Clause */
/* Constants shared by every net / collnet plug-in ABI version (values from NCCL's
 * nccl_net.h; they have not changed between v8 and v11).
 */
#ifndef FTCC_PLUGIN_NCCL_NET_CONST_H
#define FTCC_PLUGIN_NCCL_NET_CONST_H

/* Largest listen handle NCCL ships to the peer over its bootstrap network. */
#define NCCL_NET_HANDLE_MAXSIZE 128

/* Largest maxP2pBytes / maxCollBytes NCCL accepts from getProperties (1 TiB). */
#define NCCL_MAX_NET_SIZE_BYTES (1024LL * 1024 * 1024 * 1024)
/* What NCCL assumes for pre-v9 plug-ins, which cannot report a limit. */
#define NCCL_MAX_NET_SIZE (1024LL * 1024 * 1024)
#define NCCL_MAX_COLLNET_SIZE (512LL * 1024 * 1024)

/* Value NCCL may preset in irecv's *request: a hint that it does not need to test() this
 * receive (LL/LL128 completion is seen in GPU memory). Input only; see plugin/net.c. */
#define NCCL_NET_OPTIONAL_RECV_COMPLETION 0x1
/* Flag of the multi-request API added in v11 (maxMultiRequestSize > 1). */
#define NCCL_NET_MULTI_REQUEST 0x2

/* ptrSupport bits and regMr's type argument. */
#define NCCL_PTR_HOST 0x1
#define NCCL_PTR_CUDA 0x2
#define NCCL_PTR_DMABUF 0x4

/* Most requests NCCL keeps in flight on one comm (it uses at most NCCL_STEPS = 8). */
#define NCCL_NET_MAX_REQUESTS 32

/* Devices one virtual NIC may fuse (vProps.devs[]); 4 up to v11, 8 from v12. */
#define NCCL_NET_MAX_DEVS_PER_NIC 4

/* trafficClass of ncclNetCommConfig_vN_t when the application set none. */
#define NCCL_NET_TRAFFIC_CLASS_UNDEF -1

#endif
