/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU memory through the net plug-in's ib transport, on a machine with a GPU: CUDA's dma-buf of
 * a cuMemAlloc'd range, the plug-in's properties, its registration of that memory
 * (regMr NCCL_PTR_CUDA), a message into it checked through cuMemcpyDtoH, and the flush.
 * Without an HCA it runs over the verbs emulator (FTCC_IBVERBS_LIB), which maps the dma-buf fd
 * it is given: a GPU's fd may not be mappable, and the check then says how far it got.
 *
 *   gcc -Iplugin perf/gpu/gdr_check.c -ldl -lpthread -o gdr_check
 *   FTCC_TRANSPORT=ib FTCC_IBVERBS_LIB=.../libibverbs.so.1 ./gdr_check libnccl-net-ftcc.so
 * Prints one line per step; exit status 0 when every step ran and passed.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "nccl/net_v11.h"

#define SIZE ((size_t)4 << 20)
#define MSG ((size_t)1 << 20)

static struct {
	int (*init)(unsigned int);
	int (*driver_version)(int *);
	int (*device_get)(int *, int);
	int (*attr)(int *, int, int);
	int (*ctx_retain)(void **, int);
	int (*ctx_set)(void *);
	int (*alloc)(unsigned long long *, size_t);
	int (*dtoh)(void *, unsigned long long, size_t);
	int (*get_handle)(void *, unsigned long long, size_t, int, unsigned long long);
} cu;

static void logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		   const char *fmt, ...)
{
	va_list ap;

	(void)flags, (void)file, (void)line;
	if (level > NCCL_LOG_INFO)
		return;
	va_start(ap, fmt);
	printf("  plug-in: ");
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
}

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_req(const ncclNet_v11_t *net, void *req, int *size)
{
	int done = 0;
	int64_t end = now_ms() + 10000;

	while (!done && now_ms() < end) {
		if (net->test(req, &done, size) != ncclSuccess)
			return -1;
	}
	return done ? 0 : -1;
}

#define STEP(ok, ...)                                                                              \
	do {                                                                                       \
		printf("%s: ", (ok) ? "ok  " : "FAIL");                                            \
		printf(__VA_ARGS__);                                                               \
		printf("\n");                                                                      \
		if (!(ok))                                                                         \
			return 1;                                                                  \
	} while (0)

int main(int argc, char **argv)
{
	void *lib = dlopen("libcuda.so.1", RTLD_NOW), *plug, *ctx = NULL, *cuctx = NULL;
	unsigned long long dptr = 0;
	int dev = 0, ver = 0, dmabuf = 0, fd = -1, r, ndev = 0;

	if (argc < 2 || !lib)
		return fprintf(stderr, "usage: %s PLUGIN.so (needs libcuda.so.1)\n", argv[0]), 2;
	*(void **)&cu.init = dlsym(lib, "cuInit");
	*(void **)&cu.driver_version = dlsym(lib, "cuDriverGetVersion");
	*(void **)&cu.device_get = dlsym(lib, "cuDeviceGet");
	*(void **)&cu.attr = dlsym(lib, "cuDeviceGetAttribute");
	*(void **)&cu.ctx_retain = dlsym(lib, "cuDevicePrimaryCtxRetain");
	*(void **)&cu.ctx_set = dlsym(lib, "cuCtxSetCurrent");
	*(void **)&cu.alloc = dlsym(lib, "cuMemAlloc_v2");
	*(void **)&cu.dtoh = dlsym(lib, "cuMemcpyDtoH_v2");
	*(void **)&cu.get_handle = dlsym(lib, "cuMemGetHandleForAddressRange");
	r = cu.init(0) || cu.driver_version(&ver) || cu.device_get(&dev, 0) ||
	    cu.attr(&dmabuf, 124 /* CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED */, dev) ||
	    cu.ctx_retain(&cuctx, dev) || cu.ctx_set(cuctx) || cu.alloc(&dptr, SIZE);
	STEP(!r, "CUDA driver %d, device 0, %zu MiB at %#llx, dma-buf supported: %d", ver,
	     SIZE >> 20, dptr, dmabuf);

	r = cu.get_handle(&fd, dptr, SIZE, 1 /* DMA_BUF_FD */, 0);
	STEP(r == 0 && fd >= 0, "cuMemGetHandleForAddressRange: result %d, fd %d", r, fd);
	void *map = mmap(NULL, SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	printf("info: mmap of that fd by the CPU: %s\n",
	       map == MAP_FAILED ? strerror(errno) : "mapped (the emulator can place data)");
	if (map != MAP_FAILED)
		munmap(map, SIZE);
	close(fd);

	plug = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	const ncclNet_v11_t *net = plug ? dlsym(plug, "ncclNetPlugin_v11") : NULL;
	STEP(net, "plug-in %s loaded", argv[1]);
	ncclNetProperties_v11_t p;
	r = net->init(&ctx, 1, NULL, logger, NULL) || net->devices(&ndev) || ndev < 1 ||
	    net->getProperties(0, &p);
	STEP(!r, "init, %d device(s); device 0 %s: ptrSupport %#x (host 1, CUDA 2, dma-buf 4)",
	     ndev, ndev ? p.name : "-", ndev ? p.ptrSupport : 0);
	STEP(p.ptrSupport & NCCL_PTR_CUDA, "GPU memory offered");

	char handle[NCCL_NET_HANDLE_MAXSIZE];
	void *lc = NULL, *sc = NULL, *rc = NULL;
	int64_t end = now_ms() + 10000;
	r = net->listen(ctx, 0, handle, &lc);
	while (!r && (!sc || !rc) && now_ms() < end) {
		r = (!sc && net->connect(ctx, 0, handle, &sc, NULL)) ||
		    (!rc && net->accept(lc, &rc, NULL));
		sched_yield();
	}
	STEP(!r && sc && rc, "connected over device 0");

	void *gmh = NULL, *hmh = NULL;
	uint8_t *h = malloc(MSG), *back = malloc(MSG);
	for (size_t i = 0; i < MSG; i++)
		h[i] = (uint8_t)(i * 7 + 3);
	r = net->regMr(rc, (void *)(uintptr_t)dptr, SIZE, NCCL_PTR_CUDA, &gmh);
	STEP(r == ncclSuccess, "regMr(NCCL_PTR_CUDA) of the %zu MiB: result %d", SIZE >> 20, r);
	STEP(net->regMr(sc, h, MSG, NCCL_PTR_HOST, &hmh) == ncclSuccess, "regMr of host memory");

	void *dst = (void *)(uintptr_t)(dptr + 4096), *sreq = NULL, *rreq = NULL;
	size_t sz = MSG;
	int tag = 0, got = 0;
	end = now_ms() + 10000;
	while ((!sreq || !rreq) && now_ms() < end) {
		if (!rreq && net->irecv(rc, 1, &dst, &sz, &tag, &gmh, NULL, &rreq))
			break;
		if (!sreq && net->isend(sc, h, MSG, 0, hmh, NULL, &sreq))
			break;
	}
	r = !sreq || !rreq || wait_req(net, rreq, &got) || wait_req(net, sreq, NULL);
	STEP(!r && got == (int)MSG, "1 MiB from host memory into GPU memory (got %d)", got);
	int isz = (int)MSG;
	void *freq = NULL;
	r = net->iflush(rc, 1, &dst, &isz, &gmh, &freq);
	STEP(r == ncclSuccess && freq && wait_req(net, freq, NULL) == 0, "iflush completed");
	r = cu.dtoh(back, dptr + 4096, MSG);
	STEP(!r && memcmp(back, h, MSG) == 0, "the GPU holds the bytes sent (cuMemcpyDtoH)");
	net->deregMr(rc, gmh);
	net->deregMr(sc, hmh);
	net->closeSend(sc);
	net->closeRecv(rc);
	net->closeListen(lc);
	net->finalize(ctx);
	printf("PASS\n");
	return 0;
}
