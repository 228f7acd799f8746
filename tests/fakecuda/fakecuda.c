/* SPDX-License-Identifier: BSD-3-Clause */
/* A libcuda.so.1 for tests on machines without a GPU: the two driver calls the ib transport
 * makes for the dma-buf of GPU memory (cuInit, cuMemGetHandleForAddressRange), over "device
 * memory" that tests allocate here (fakecuda_alloc): a memfd, so the verbs emulator can map
 * its pages from the fd it is given. As a GPU's, the device address cannot be touched by the
 * CPU (a PROT_NONE reservation: code that uses it as a host address crashes); the test reaches
 * the bytes through a host mapping of the same pages (fakecuda_host). Also the few calls with which
 * perf/gpu/gdr_check.c allocates and reads back device memory, so that check can be tried here
 * before it runs on a GPU.
 *
 * As strict as CUDA where the transport could go wrong: the range must be page-aligned, lie in
 * one allocation and be asked for as a dma-buf fd; the fd's first byte is the range's first
 * byte. It is stricter in one way: a range must start at its allocation's base (a memfd cannot
 * stand for a sub-range), which the transport's page-aligned registrations of whole buffers
 * meet. Loaded through FTCC_CUDA_LIB.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define CUDA_SUCCESS 0
#define CUDA_ERROR_INVALID_VALUE 1
#define CUDA_ERROR_NOT_INITIALIZED 3
#define CUDA_ERROR_NOT_SUPPORTED 801
#define DMA_BUF_FD 1
#define MAX_ALLOCS 64

EXPORT int cuInit(unsigned int flags);
EXPORT int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size,
					 int type, unsigned long long flags);
EXPORT int cuDriverGetVersion(int *v);
EXPORT int cuDeviceGet(int *dev, int ordinal);
EXPORT int cuDeviceGetAttribute(int *value, int attr, int dev);
EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev);
EXPORT int cuCtxSetCurrent(void *ctx);
EXPORT int cuMemAlloc_v2(unsigned long long *dptr, size_t size);
EXPORT int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t size);
EXPORT void *fakecuda_alloc(size_t len);
EXPORT void *fakecuda_host(void *p);
EXPORT void fakecuda_free(void *p);
EXPORT int fakecuda_fd(void *p);
EXPORT int fakecuda_handles(void);

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
	uintptr_t base; /* the device address */
	uint8_t *host;	/* the same pages, for the test */
	size_t len;
	int fd;
} allocs[MAX_ALLOCS];
static int initialized;
static int handles; /* fds handed out so far, for tests */

EXPORT int cuInit(unsigned int flags)
{
	if (flags)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&lock);
	initialized = 1;
	pthread_mutex_unlock(&lock);
	return CUDA_SUCCESS;
}

EXPORT int cuMemGetHandleForAddressRange(void *handle, unsigned long long dptr, size_t size,
					 int type, unsigned long long flags)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	int rc = CUDA_ERROR_INVALID_VALUE;

	pthread_mutex_lock(&lock);
	if (!initialized) {
		rc = CUDA_ERROR_NOT_INITIALIZED;
	} else if (handle && type == DMA_BUF_FD && flags == 0 && size && dptr % page == 0 &&
		   size % page == 0) {
		rc = CUDA_ERROR_NOT_SUPPORTED;
		for (int i = 0; i < MAX_ALLOCS; i++) {
			if (allocs[i].len && allocs[i].base == dptr && size <= allocs[i].len) {
				int fd = dup(allocs[i].fd);

				rc = fd < 0 ? CUDA_ERROR_INVALID_VALUE : CUDA_SUCCESS;
				*(int *)handle = fd;
				handles += fd >= 0;
				break;
			}
		}
	}
	pthread_mutex_unlock(&lock);
	return rc;
}

EXPORT int cuDriverGetVersion(int *v)
{
	*v = 13000;
	return CUDA_SUCCESS;
}

EXPORT int cuDeviceGet(int *dev, int ordinal)
{
	*dev = ordinal;
	return ordinal == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuDeviceGetAttribute(int *value, int attr, int dev)
{
	*value = attr == 124 && dev == 0; /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */
	return CUDA_SUCCESS;
}

EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
	static int primary;

	*ctx = &primary;
	return dev == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

EXPORT int cuCtxSetCurrent(void *ctx)
{
	(void)ctx;
	return CUDA_SUCCESS;
}

EXPORT int cuMemAlloc_v2(unsigned long long *dptr, size_t size)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *p = fakecuda_alloc((size + page - 1) / page * page);

	*dptr = (uintptr_t)p;
	return p ? CUDA_SUCCESS : 2 /* CUDA_ERROR_OUT_OF_MEMORY */;
}

EXPORT int cuMemcpyDtoH_v2(void *dst, unsigned long long src, size_t size)
{
	const uint8_t *h = fakecuda_host((void *)(uintptr_t)src);

	if (!h)
		return CUDA_ERROR_INVALID_VALUE;
	memcpy(dst, h, size);
	return CUDA_SUCCESS;
}

/* Test hooks (not CUDA): "device memory" of @len bytes (a whole number of pages), or NULL. */
EXPORT void *fakecuda_alloc(size_t len)
{
	int fd = memfd_create("fakecuda", MFD_CLOEXEC);
	void *p = MAP_FAILED, *h = MAP_FAILED;

	if (fd < 0)
		return NULL;
	if (ftruncate(fd, (off_t)len) ||
	    (p = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)) == MAP_FAILED ||
	    (h = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED)
		goto fail;
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (!allocs[i].len) {
			allocs[i].base = (uintptr_t)p;
			allocs[i].host = h;
			allocs[i].len = len;
			allocs[i].fd = fd;
			pthread_mutex_unlock(&lock);
			return p;
		}
	}
	pthread_mutex_unlock(&lock);
fail:
	if (p != MAP_FAILED)
		munmap(p, len);
	if (h != MAP_FAILED)
		munmap(h, len);
	close(fd);
	return NULL;
}

/* The host address of device address @p (inside an allocation), or NULL. */
EXPORT void *fakecuda_host(void *p)
{
	uint8_t *h = NULL;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (allocs[i].len && (uintptr_t)p >= allocs[i].base &&
		    (uintptr_t)p - allocs[i].base < allocs[i].len)
			h = allocs[i].host + ((uintptr_t)p - allocs[i].base);
	}
	pthread_mutex_unlock(&lock);
	return h;
}

EXPORT void fakecuda_free(void *p)
{
	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (allocs[i].len && allocs[i].base == (uintptr_t)p) {
			munmap(p, allocs[i].len);
			munmap(allocs[i].host, allocs[i].len);
			close(allocs[i].fd);
			allocs[i].len = 0;
		}
	}
	pthread_mutex_unlock(&lock);
}

/* The memfd behind the allocation at @p (for a test's own regMrDmaBuf), or -1. */
EXPORT int fakecuda_fd(void *p)
{
	int fd = -1;

	pthread_mutex_lock(&lock);
	for (int i = 0; i < MAX_ALLOCS; i++) {
		if (allocs[i].len && allocs[i].base == (uintptr_t)p)
			fd = allocs[i].fd;
	}
	pthread_mutex_unlock(&lock);
	return fd;
}

EXPORT int fakecuda_handles(void)
{
	pthread_mutex_lock(&lock);
	int n = handles;
	pthread_mutex_unlock(&lock);
	return n;
}
