/* SPDX-License-Identifier: BSD-3-Clause */
/* Device-offload declarations of the net plug-in ABI (v7 and later): the offload type a
 * device advertises and the handle NCCL hands to connect/accept when it asks for offload.
 *
 * ftcc is a host plug-in: it always reports NCCL_NET_DEVICE_HOST and never fills a handle, but
 * the types are part of every table's signatures and of ncclNetProperties_vN_t.
 */
#ifndef FTCC_PLUGIN_NCCL_NET_DEVICE_H
#define FTCC_PLUGIN_NCCL_NET_DEVICE_H

#include <stddef.h>

/* netDeviceVersion of a device without offload. */
#define NCCL_NET_DEVICE_INVALID_VERSION 0x0
#define NCCL_NET_MTU_SIZE 4096
/* The one UNPACK version an NCCL build accepts; compared with getProperties' answer. */
#define NCCL_NET_DEVICE_UNPACK_VERSION 0x7

/* Who moves the data: the host proxy (HOST) or GPU code unpacking from bounce buffers. The
 * GIN values exist from NCCL 2.28 on; a net plug-in never reports them. */
typedef enum {
	NCCL_NET_DEVICE_HOST = 0,
	NCCL_NET_DEVICE_UNPACK = 1,
	NCCL_NET_DEVICE_GIN_PROXY = 2,
	NCCL_NET_DEVICE_GIN_GDAKI = 3,
} ncclNetDeviceType;

/* Offload handle; allocated by the plug-in when NCCL asks for offload. Unchanged since v7, so
 * every later version names the same struct. */
typedef struct {
	ncclNetDeviceType netDeviceType;
	int netDeviceVersion;
	void *handle;
	size_t size;
	int needsProxyProgress;
} ncclNetDeviceHandle_v7_t;

typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v8_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v9_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v10_t;
typedef ncclNetDeviceHandle_v7_t ncclNetDeviceHandle_v11_t;

#if defined(__x86_64__) || defined(__aarch64__)
_Static_assert(sizeof(ncclNetDeviceType) == 4, "ncclNetDeviceType is an int-sized enum");
_Static_assert(offsetof(ncclNetDeviceHandle_v7_t, handle) == 8, "v7 device handle layout");
_Static_assert(offsetof(ncclNetDeviceHandle_v7_t, size) == 16, "v7 device handle layout");
_Static_assert(offsetof(ncclNetDeviceHandle_v7_t, needsProxyProgress) == 24,
	       "v7 device handle layout");
_Static_assert(sizeof(ncclNetDeviceHandle_v7_t) == 32, "v7 device handle size");
#endif

#endif
