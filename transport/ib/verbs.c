/* SPDX-License-Identifier: BSD-3-Clause */
/* Loads libibverbs at run time (never linked, so the plug-in loads on machines without
 * rdma-core) and resolves each verb at the symbol version rdma-core exports it under.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ib_int.h"

struct ib_verbs ibv;

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int load_result = 1; /* 1: not tried yet */

#define REQUIRED(field, sym)                                                                       \
	do {                                                                                       \
		*(void **)&ibv.field = dlvsym(lib, sym, "IBVERBS_1.1");                            \
		if (!ibv.field) {                                                                  \
			missing = sym;                                                             \
			goto fail;                                                                 \
		}                                                                                  \
	} while (0)

static int load(void)
{
	const char *path = ftcc_setting_str(FTCC_SET_IBVERBS_LIB);
	const char *missing = NULL;
	void *lib;

	if (!path || !*path)
		path = "libibverbs.so.1";
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		ftcc_info("ib: %s not loaded (%s): no InfiniBand devices", path, dlerror());
		return -ENOENT;
	}
	REQUIRED(get_device_list, "ibv_get_device_list");
	REQUIRED(free_device_list, "ibv_free_device_list");
	REQUIRED(get_device_name, "ibv_get_device_name");
	REQUIRED(open_device, "ibv_open_device");
	REQUIRED(close_device, "ibv_close_device");
	REQUIRED(query_device, "ibv_query_device");
	/* The exported ibv_query_port takes the compat struct, a prefix of ibv_port_attr that
	 * the caller zeroes first (verbs.h's ___ibv_query_port does the same). */
	REQUIRED(query_port, "ibv_query_port");
	REQUIRED(query_gid, "ibv_query_gid");
	REQUIRED(get_async_event, "ibv_get_async_event");
	REQUIRED(ack_async_event, "ibv_ack_async_event");
	REQUIRED(event_type_str, "ibv_event_type_str");
	REQUIRED(alloc_pd, "ibv_alloc_pd");
	REQUIRED(dealloc_pd, "ibv_dealloc_pd");
	REQUIRED(reg_mr, "ibv_reg_mr");
	REQUIRED(dereg_mr, "ibv_dereg_mr");
	REQUIRED(create_cq, "ibv_create_cq");
	REQUIRED(destroy_cq, "ibv_destroy_cq");
	REQUIRED(create_qp, "ibv_create_qp");
	REQUIRED(modify_qp, "ibv_modify_qp");
	REQUIRED(destroy_qp, "ibv_destroy_qp");
	REQUIRED(fork_init, "ibv_fork_init");
	*(void **)&ibv.query_gid_ex = dlvsym(lib, "_ibv_query_gid_ex", "IBVERBS_1.11");
	*(void **)&ibv.reg_dmabuf_mr = dlvsym(lib, "ibv_reg_dmabuf_mr", "IBVERBS_1.12");
	/* Registered pages must not be shared copy-on-write with a child (PyTorch's data
	 * loaders fork): before the first registration. */
	int rc = ibv.fork_init();
	if (rc)
		ftcc_info("ib: ibv_fork_init failed (%s); registered memory is not fork-safe",
			  strerror(rc));
	/* Never dlclose: a provider may keep threads, and NCCL does the same. */
	return 0;

fail:
	ftcc_info("ib: %s lacks %s@IBVERBS_1.1: no InfiniBand devices", path, missing);
	memset(&ibv, 0, sizeof(ibv));
	dlclose(lib);
	return -ENOSYS;
}

int ib_verbs_load(void)
{
	pthread_mutex_lock(&load_lock);
	if (load_result == 1)
		load_result = load();
	int rc = load_result;
	pthread_mutex_unlock(&load_lock);
	return rc;
}
