/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU memory over the ib transport, as NCCL drives it with GPUDirect RDMA, against the verbs
 * emulator and tests/fakecuda (a libcuda.so.1 whose "device memory" is a memfd the emulator maps
 * from the dma-buf fd it is given, so bytes land where the fd says or the test sees them
 * missing):
 * "Device memory" cannot be touched by the CPU at its device address (the emulator must place
 * data through its mapping of the dma-buf); the tests look at it through fakecuda_host.
 * - getProperties offers NCCL_PTR_CUDA|NCCL_PTR_DMABUF only where dma-buf works (the HCA takes
 *   it and CUDA's driver loads), and host memory alone otherwise;
 * - regMr(NCCL_PTR_CUDA) registers through a dma-buf fd from CUDA's driver; data goes into and
 *   out of such memory;
 * - regMrDmaBuf with NCCL's own fd and an offset;
 * - iflush of a receive into GPU memory reads through the HCA (an RDMA read on a queue pair
 *   connected to itself) and completes through test; a receive into host memory needs none.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "abi_fixture.h"

#if defined(FTCC_IBEMU_PATH) && defined(FTCC_FAKECUDA_PATH)

#define MIB ((size_t)1 << 20)

static struct abi_net net;
static struct abi_pair pair;
static char err[512];
static void *cuda, *emu;
static void *(*dev_alloc)(size_t);
static void *(*dev_host)(void *); /* the CPU's view of device memory */
static int (*dev_fd)(void *);
static int (*dma_bufs)(void);
static unsigned long (*emu_reads)(void);

static void gpu_setup(void)
{
	setenv("FTCC_SOCKET_IFNAME", "lo", 1);
	setenv("FTCC_TRANSPORT", "ib", 1);
	setenv("FTCC_IBVERBS_LIB", FTCC_IBEMU_PATH, 1);
	setenv("FTCC_CUDA_LIB", FTCC_FAKECUDA_PATH, 1);
}

TestSuite(net_gpu, .init = gpu_setup, .timeout = 120);

/* The plug-in loads the same two libraries from the same paths: one copy each. */
static void open_libs(void)
{
	cuda = dlopen(FTCC_FAKECUDA_PATH, RTLD_NOW | RTLD_LOCAL);
	emu = dlopen(FTCC_IBEMU_PATH, RTLD_NOW | RTLD_LOCAL);
	cr_assert(cuda && emu, "%s", dlerror());
	*(void **)&dev_alloc = dlsym(cuda, "fakecuda_alloc");
	*(void **)&dev_host = dlsym(cuda, "fakecuda_host");
	*(void **)&dev_fd = dlsym(cuda, "fakecuda_fd");
	*(void **)&dma_bufs = dlsym(cuda, "fakecuda_handles");
	*(void **)&emu_reads = dlsym(emu, "ftcc_ibemu_reads");
	cr_assert(dev_alloc && dev_host && dev_fd && dma_bufs && emu_reads);
}

static void open_net(int dev)
{
	int ndev = 0;

	open_libs();
	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_net_init(&net), ncclSuccess);
	cr_assert_eq(abi_devices(&net, &ndev), ncclSuccess);
	cr_assert_eq(ndev, 2);
	if (dev >= 0)
		cr_assert_eq(abi_pair_open(&net, dev, &pair, 5000, err, sizeof(err)), 0, "%s", err);
}

static void close_net(int paired)
{
	if (paired)
		cr_assert_eq(abi_pair_close(&pair), ncclSuccess);
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	abi_net_unload(&net);
}

/* What the CPU sees at device address @p. */
static uint8_t *H(void *p)
{
	return dev_host(p);
}

static int peermem_here(void)
{
	return access("/sys/module/nvidia_peermem/version", F_OK) == 0 ||
	       access("/sys/kernel/mm/memory_peers/nv_mem/version", F_OK) == 0 ||
	       access("/sys/kernel/mm/memory_peers/nv_mem_nc/version", F_OK) == 0;
}

Test(net_gpu, offered_where_dmabuf_works)
{
	ncclNetProperties_v11_t p;

	open_net(-1);
	for (int dev = 0; dev < 2; dev++) {
		cr_assert_eq(abi_props(&net, dev, &p), ncclSuccess);
		cr_expect_eq(p.ptrSupport, NCCL_PTR_HOST | NCCL_PTR_CUDA | NCCL_PTR_DMABUF,
			     "device %d: %#x", dev, p.ptrSupport);
	}
	close_net(0);
}

/* Without dma-buf (an old kernel or driver, or FTCC_IB_DMABUF=0), or without CUDA's driver, GPU
 * memory is offered only through a peer-memory client, and registering it fails cleanly. */
static void host_only(int dmabuf_works)
{
	const int want = NCCL_PTR_HOST | (peermem_here() ? NCCL_PTR_CUDA : 0);
	ncclNetProperties_v11_t p;
	void *mh = NULL;

	open_net(0);
	cr_assert_eq(abi_props(&net, 0, &p), ncclSuccess);
	cr_expect_eq(p.ptrSupport, want, "%#x", p.ptrSupport);
	void *g = dev_alloc(MIB);
	cr_assert(g);
	if (!peermem_here())
		cr_expect_neq(net.t.v11->regMr(pair.rcomm, g, MIB, NCCL_PTR_CUDA, &mh),
			      ncclSuccess);
	if (!dmabuf_works)
		cr_expect_neq(net.t.v11->regMrDmaBuf(pair.rcomm, g, MIB, NCCL_PTR_CUDA, 0,
						     dev_fd(g), &mh),
			      ncclSuccess);
	cr_expect_eq(dma_bufs(), 0);
	close_net(1);
}

Test(net_gpu, no_dmabuf_in_the_driver)
{
	setenv("IBEMU_DMABUF", "0", 1);
	host_only(0);
}

Test(net_gpu, dmabuf_turned_off)
{
	setenv("FTCC_IB_DMABUF", "0", 1);
	host_only(0);
}

Test(net_gpu, no_cuda_driver)
{
	/* The HCA would still take NCCL's own fds; NCCL has none to give without CUDA. */
	setenv("FTCC_CUDA_LIB", "/nonexistent/libcuda.so.1", 1);
	host_only(1);
}

/* One message of @size from @tx (registered as @smh) into @rx (@rmh); the receive's size. */
static int xfer(void *tx, void *smh, void *rx, void *rmh, size_t size)
{
	int got = -1;

	cr_assert_eq(
		abi_xfer_one(&pair, tx, smh, rx, rmh, size, 20000, &got, NULL, err, sizeof(err)), 0,
		"%s", err);
	return got;
}

static void fill(uint8_t *p, size_t n, uint64_t seq)
{
	for (size_t i = 0; i < n; i++)
		p[i] = abi_pattern(seq, i);
}

static void check(const uint8_t *p, size_t n, uint64_t seq)
{
	for (size_t i = 0; i < n; i++) {
		if (p[i] != abi_pattern(seq, i))
			cr_assert_fail("byte %zu of message %llu: %#x", i, (unsigned long long)seq,
				       p[i]);
	}
}

/* iflush of the receive into @rx (registered as @rmh); waits for it. */
static void flush(void *rx, int size, void *rmh)
{
	void *req = NULL;

	cr_assert_eq(net.t.v11->iflush(pair.rcomm, 1, &rx, &size, &rmh, &req), ncclSuccess);
	cr_assert_not_null(req, "a receive into GPU memory is flushed");
	cr_assert_eq(abi_wait(&net, req, NULL, 10000), ncclSuccess);
}

static void into_and_out_of_gpu_memory(int dev)
{
	const size_t size = MIB + 333;
	void *gmh, *hmh, *omh;

	open_net(dev);
	uint8_t *g = dev_alloc(2 * MIB), *h = malloc(size), *out = malloc(size);
	cr_assert(g && h && out);
	cr_assert_eq(net.t.v11->regMr(pair.rcomm, g, 2 * MIB, NCCL_PTR_CUDA, &gmh), ncclSuccess);
	cr_expect_eq(dma_bufs(), 1, "registered through a dma-buf fd from CUDA's driver");
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, h, size, &hmh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, out, size, &omh), ncclSuccess);

	/* Into GPU memory at an odd offset, then flushed through the HCA. */
	fill(h, size, 1);
	cr_assert_eq(xfer(h, hmh, g + 4096 + 7, gmh, size), (int)size);
	check(H(g + 4096 + 7), size, 1);
	unsigned long reads = emu_reads();
	flush(g + 4096 + 7, (int)size, gmh);
	cr_expect_eq(emu_reads(), reads + 1, "one RDMA read per flush");
	/* A receive into host memory has nothing to flush. */
	void *req = (void *)1;
	int sz = (int)size;
	cr_assert_eq(net.t.v11->iflush(pair.rcomm, 1, (void **)&out, &sz, &omh, &req), ncclSuccess);
	if (req)
		cr_assert_eq(abi_wait(&net, req, NULL, 1000), ncclSuccess);
	cr_expect_eq(emu_reads(), reads + 1);
	cr_assert_eq(net.t.v11->deregMr(pair.rcomm, gmh), ncclSuccess);

	/* Out of GPU memory: the sender's registration goes the same way. */
	void *smh;
	fill(H(g + 100), size, 2);
	cr_assert_eq(net.t.v11->regMr(pair.scomm, g, 2 * MIB, NCCL_PTR_CUDA, &smh), ncclSuccess);
	cr_assert_eq(xfer(g + 100, smh, out, omh, size), (int)size);
	check(out, size, 2);
	cr_assert_eq(net.t.v11->deregMr(pair.scomm, smh), ncclSuccess);
	cr_assert_eq(abi_dereg_mr(&net, pair.scomm, hmh), ncclSuccess);
	cr_assert_eq(abi_dereg_mr(&net, pair.rcomm, omh), ncclSuccess);
	close_net(1);
	free(h);
	free(out);
}

Test(net_gpu, into_and_out_of_gpu_memory_ib)
{
	into_and_out_of_gpu_memory(0);
}

Test(net_gpu, into_and_out_of_gpu_memory_roce)
{
	into_and_out_of_gpu_memory(1);
}

/* NCCL exports the fd itself and passes an offset into it. */
Test(net_gpu, reg_dmabuf_with_offset)
{
	const size_t off = 3 * 4096, size = 200000;
	void *hmh, *gmh;

	open_net(0);
	uint8_t *g = dev_alloc(MIB), *h = malloc(size);
	cr_assert(g && h);
	cr_assert_eq(net.t.v11->regMrDmaBuf(pair.rcomm, g + off, size, NCCL_PTR_CUDA, off,
					    dev_fd(g), &gmh),
		     ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, h, size, &hmh), ncclSuccess);
	fill(h, size, 3);
	cr_assert_eq(xfer(h, hmh, g + off, gmh, size), (int)size);
	check(H(g + off), size, 3);
	for (size_t i = 0; i < off; i++)
		cr_assert_eq(H(g)[i], 0, "byte %zu before the region was written", i);
	flush(g + off, (int)size, gmh);
	/* The fd is NCCL's to close: the registration holds its own reference. */
	cr_assert_eq(net.t.v11->deregMr(pair.rcomm, gmh), ncclSuccess);
	cr_assert_eq(abi_dereg_mr(&net, pair.scomm, hmh), ncclSuccess);
	close_net(1);
	free(h);
}

/* A queue pair error while the device lives (a link flap) breaks the flush's loopback queue
 * pair too: the flush reads again on a new one and succeeds; the data path repairs itself as
 * always. */
Test(net_gpu, flush_repaired_after_qp_error)
{
	const size_t size = 300000;
	int (*inject)(const char *);
	void *gmh, *hmh;

	open_net(0);
	*(void **)&inject = dlsym(emu, "ftcc_ibemu_inject");
	cr_assert(inject);
	uint8_t *g = dev_alloc(MIB), *h = malloc(size);
	cr_assert(g && h);
	cr_assert_eq(net.t.v11->regMr(pair.rcomm, g, MIB, NCCL_PTR_CUDA, &gmh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, h, size, &hmh), ncclSuccess);
	fill(h, size, 4);
	cr_assert_eq(xfer(h, hmh, g, gmh, size), (int)size);
	flush(g, (int)size, gmh);
	unsigned long reads = emu_reads();
	cr_assert_eq(inject("qp_error"), 0);
	fill(h, size, 5);
	cr_assert_eq(xfer(h, hmh, g, gmh, size), (int)size);
	check(H(g), size, 5);
	/* Three flushes at once: the first meets the broken queue pair, the others wait for the
	 * repair, which reads all three again, in order. */
	void *req[3] = { 0 }, *rx = g;
	int isz = (int)size;
	for (int k = 0; k < 3; k++)
		cr_assert_eq(net.t.v11->iflush(pair.rcomm, 1, &rx, &isz, &gmh, &req[k]),
			     ncclSuccess);
	for (int k = 0; k < 3; k++) {
		cr_assert_not_null(req[k]);
		cr_assert_eq(abi_wait(&net, req[k], NULL, 10000), ncclSuccess, "flush %d", k);
	}
	cr_expect_eq(emu_reads(), reads + 3, "read again on a new queue pair");
	cr_expect(abi_log_warned("reading again"), "no warning about the flush's queue pair");
	flush(g, (int)size, gmh);
	cr_expect_eq(emu_reads(), reads + 4);
	cr_assert_eq(net.t.v11->deregMr(pair.rcomm, gmh), ncclSuccess);
	cr_assert_eq(abi_dereg_mr(&net, pair.scomm, hmh), ncclSuccess);
	close_net(1);
	free(h);
}

/* A flush whose buffer was deregistered before its read could run (NCCL's abort order, while
 * the flush's queue pair was being repaired) fails, alone: no repair loop over it, and the next
 * flush of a registered buffer works. */
Test(net_gpu, flush_of_a_deregistered_buffer_fails_alone)
{
	int (*inject)(const char *);
	void *m1, *m2, *req[2] = { 0 };
	int isz = 4096;

	open_net(0);
	*(void **)&inject = dlsym(emu, "ftcc_ibemu_inject");
	cr_assert(inject);
	uint8_t *g1 = dev_alloc(MIB), *g2 = dev_alloc(MIB);
	void *rx = g1;
	cr_assert(g1 && g2);
	cr_assert_eq(net.t.v11->regMr(pair.rcomm, g1, MIB, NCCL_PTR_CUDA, &m1), ncclSuccess);
	cr_assert_eq(net.t.v11->regMr(pair.rcomm, g2, MIB, NCCL_PTR_CUDA, &m2), ncclSuccess);
	flush(g2, isz, m2);
	cr_assert_eq(inject("qp_error"), 0);
	for (int k = 0; k < 2; k++)
		cr_assert_eq(net.t.v11->iflush(pair.rcomm, 1, &rx, &isz, &m1, &req[k]),
			     ncclSuccess);
	cr_assert_eq(net.t.v11->deregMr(pair.rcomm, m1), ncclSuccess);
	for (int k = 0; k < 2; k++) {
		cr_assert_not_null(req[k]);
		cr_expect_neq(abi_wait(&net, req[k], NULL, 5000), ncclSuccess,
			      "flush %d of a deregistered buffer did not fail", k);
	}
	cr_expect(abi_log_warned("not registered any more"), "no warning about the buffer");
	unsigned long reads = emu_reads();
	flush(g2, isz, m2);
	cr_expect_eq(emu_reads(), reads + 1, "the device's flush is not usable any more");
	cr_assert_eq(net.t.v11->deregMr(pair.rcomm, m2), ncclSuccess);
	close_net(1);
}

/* A flush that cannot complete fails: at once on a device that died, after the failure
 * timeout on a port that stays down; it never hangs and never reports success. */
static void flush_fails(const char *fault, int64_t min_ms)
{
	const size_t size = 4096;
	int (*inject)(const char *);
	void *gmh, *hmh, *req = NULL, *rx;
	int isz = (int)size, done = 0;
	ncclResult_t res = ncclSuccess;

	setenv("FTCC_FAILURE_TIMEOUT_MS", "1000", 1);
	open_net(0);
	*(void **)&inject = dlsym(emu, "ftcc_ibemu_inject");
	cr_assert(inject);
	uint8_t *g = dev_alloc(MIB), *h = calloc(1, size);
	cr_assert(g && h);
	cr_assert_eq(net.t.v11->regMr(pair.rcomm, g, MIB, NCCL_PTR_CUDA, &gmh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, h, size, &hmh), ncclSuccess);
	cr_assert_eq(xfer(h, hmh, g, gmh, size), (int)size);
	flush(g, isz, gmh);
	cr_assert_eq(inject(fault), 0);
	rx = g;
	int64_t t0 = abi_now_ms();
	res = net.t.v11->iflush(pair.rcomm, 1, &rx, &isz, &gmh, &req);
	while (res == ncclSuccess && req && !done && abi_now_ms() < t0 + 10000)
		res = net.t.v11->test(req, &done, NULL);
	cr_expect_neq(res, ncclSuccess, "the flush on a dead device did not fail (done %d)", done);
	int64_t took = abi_now_ms() - t0;
	cr_expect(took >= min_ms && took < 5000, "the flush took %lld ms to fail", (long long)took);
	net.t.v11->deregMr(pair.rcomm, gmh);
	net.t.v11->deregMr(pair.scomm, hmh);
	abi_pair_close(&pair);
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	abi_net_unload(&net);
	free(h);
}

Test(net_gpu, flush_fails_on_a_fatal_device)
{
	flush_fails("device_fatal", 0);
}

Test(net_gpu, flush_fails_on_a_port_that_stays_down)
{
	flush_fails("port_down", 900);
}

#endif
