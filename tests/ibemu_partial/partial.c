/* SPDX-License-Identifier: BSD-3-Clause */
/* A libibverbs.so.1 that lacks most verbs (an old or broken rdma-core): the ib transport must
 * refuse to use it, report no devices, and leave the plug-in serving TCP. Its one verb says
 * there is a device, so a loader that skipped the symbol checks would go on and crash. */
#include <infiniband/verbs.h>
#include <stdlib.h>

#undef ibv_get_device_list

__attribute__((visibility("default"))) struct ibv_device **ibv_get_device_list(int *num);

__attribute__((visibility("default"))) struct ibv_device **ibv_get_device_list(int *num)
{
	static struct ibv_device dev = { .name = "partial0" };
	struct ibv_device **list = calloc(2, sizeof(*list));

	if (list)
		list[0] = &dev;
	if (num)
		*num = list ? 1 : 0;
	return list;
}
