/* SPDX-License-Identifier: BSD-3-Clause */
/* ABI tests of the net plug-in's data path: dlopen the built libnccl-net-ftcc.so and drive
 * every exported table (v11, v10, v9, v8) the way NCCL's proxy threads do: properties,
 * non-blocking connection set-up, windows of requests, ordering and content of hundreds of
 * mixed-size messages, 0-byte and 1 GiB messages, truncation, and closing with requests in
 * flight. Flow control is in test_net_abi_flow.c, life cycle in test_net_abi_life.c.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "abi_fixture.h"

/* Most a close call may take, with requests in flight (DESIGN: abort is bounded). */
#define CLOSE_BOUND_MS 100
#define CONNECT_TIMEOUT_MS ABI_CONNECT_TIMEOUT_MS
#define STREAM_TIMEOUT_MS ABI_STREAM_TIMEOUT_MS

/* Each Criterion test runs in its own process, so file-scope state is per test. */
static struct abi_net net;
static struct abi_pair pair;
static char err[512];

static void open_pair(int version)
{
	abi_open_pair(&net, &pair, version);
}

static void close_pair(void)
{
	abi_close_pair(&net, &pair);
}

/* Runs @count messages of the given sizes through the pair and asserts success. */
static void stream(const size_t *sizes, int count, int window, size_t slack)
{
	struct abi_stream s = {
		.sizes = sizes,
		.count = count,
		.window = window,
		.recv_slack = slack,
		.timeout_ms = STREAM_TIMEOUT_MS,
	};

	cr_assert_eq(abi_stream_run(&pair, &s, err, sizeof(err)), 0, "%s", err);
	cr_log_info("v%d: %d messages, %ld isend and %ld irecv retries", net.version, count,
		    s.send_retries, s.recv_retries);
}

static void properties(int version)
{
	int ndev = 0;

	cr_assert_eq(abi_net_load(&net, version, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_net_init(&net), ncclSuccess);
	cr_assert_eq(abi_devices(&net, &ndev), ncclSuccess);
	cr_assert(ndev > 0 && ndev < 1024, "ndev %d", ndev);
	for (int d = 0; d < ndev; d++) {
		ncclNetProperties_v11_t p;
		cr_assert_eq(abi_props(&net, d, &p), ncclSuccess, "getProperties(%d)", d);
		cr_assert(p.name && p.name[0], "device %d has no name", d);
		for (int e = 0; e < d; e++) {
			ncclNetProperties_v11_t q;
			cr_assert_eq(abi_props(&net, e, &q), ncclSuccess);
			cr_assert_str_neq(p.name, q.name, "devices %d and %d share a name", d, e);
		}
		cr_assert(p.ptrSupport & NCCL_PTR_HOST, "device %d: no host memory", d);
		cr_assert_gt(p.speed, 0);
		cr_assert_gt(p.maxComms, 0);
		cr_assert(p.maxRecvs >= 1 && p.maxRecvs <= 8, "maxRecvs %d", p.maxRecvs);
		cr_assert_eq(p.netDeviceType, NCCL_NET_DEVICE_HOST);
		cr_assert_geq(p.latency, 0.0f);
		if (version >= 9) {
			cr_assert_eq(p.vProps.ndevs, 1);
			cr_assert_eq(p.vProps.devs[0], d);
			cr_assert(p.maxP2pBytes > 0 &&
				  p.maxP2pBytes <= (size_t)NCCL_MAX_NET_SIZE_BYTES);
			cr_assert(p.maxCollBytes > 0 &&
				  p.maxCollBytes <= (size_t)NCCL_MAX_NET_SIZE_BYTES);
		}
		if (version == 11)
			cr_assert_eq(p.maxMultiRequestSize, 1);
	}
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	abi_net_unload(&net);
}
ABI_ALL_VERSIONS(properties)

static void basic(int version)
{
	size_t sizes[16];

	for (int i = 0; i < 16; i++)
		sizes[i] = 1024;
	open_pair(version);
	stream(sizes, 16, 1, 0);
	close_pair();
}
ABI_ALL_VERSIONS(basic)

/* Hundreds of messages of sizes that straddle every likely boundary (inline data, pages,
 * chunking across data streams), 8 in flight per side as NCCL_STEPS allows. */
static void mixed_sizes(int version)
{
	static const size_t menu[] = { 0,	   1,	   7,	    128,	   129,
				       4095,	   4096,   4097,    65535,	   65536,
				       131072 + 3, 262144, 1 << 20, (1 << 20) + 1, 3 << 20,
				       4 << 20 };
	enum { N = 400 };
	size_t sizes[N];
	unsigned seed = 12345;

	for (int i = 0; i < N; i++)
		sizes[i] = menu[rand_r(&seed) % (sizeof(menu) / sizeof(menu[0]))];
	open_pair(version);
	stream(sizes, N, 8, 0);
	close_pair();
}
ABI_ALL_VERSIONS(mixed_sizes)

/* Receives post more room than arrives; the size reported must be what was sent. */
static void larger_receives(int version)
{
	enum { N = 120 };
	size_t sizes[N];

	for (int i = 0; i < N; i++)
		sizes[i] = (size_t)(i * 997) % 70000;
	open_pair(version);
	stream(sizes, N, 8, 4096);
	stream(sizes, 8, 4, 1 << 20);
	close_pair();
}
ABI_ALL_VERSIONS(larger_receives)

static void zero_bytes(int version)
{
	size_t sizes[64] = { 0 };

	open_pair(version);
	stream(sizes, 64, 8, 0);
	stream(sizes, 4, 1, 100);
	close_pair();
}
ABI_ALL_VERSIONS(zero_bytes)

/* 1 GiB in one message (NCCL's per-message ceiling before v9). Buffers are anonymous mmaps
 * and only a sparse pattern is written, so the sender's untouched pages stay the shared zero
 * page and the check reads a few thousand points. */
static void one_gib(int version)
{
	const size_t size = (size_t)1 << 30, stride = (size_t)1 << 20;
	void *smh, *rmh;
	int64_t ms = 0;
	int got = -1;

	char *tx = mmap(NULL, size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	char *rx = mmap(NULL, size, PROT_READ | PROT_WRITE,
			MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	cr_assert(tx != MAP_FAILED && rx != MAP_FAILED);
	for (size_t off = 0; off < size; off += stride)
		tx[off] = (char)abi_pattern(off / stride, off);
	tx[size - 1] = 0x5a;
	open_pair(version);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, tx, size, &smh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, size, &rmh), ncclSuccess);
	cr_assert_eq(abi_xfer_one(&pair, tx, smh, rx, rmh, size, STREAM_TIMEOUT_MS, &got, &ms, err,
				  sizeof(err)),
		     0, "%s", err);
	cr_log_info("v%d: 1 GiB in %lld ms", version, (long long)ms);
	cr_assert_eq((size_t)got, size);
	for (size_t off = 0; off < size; off += stride) {
		cr_assert_eq(rx[off], (char)abi_pattern(off / stride, off), "byte %zu", off);
		cr_assert_eq(rx[off + stride / 2], 0, "byte %zu", off + stride / 2);
	}
	cr_assert_eq(rx[size - 1], 0x5a);
	cr_assert_eq(abi_dereg_mr(&net, pair.scomm, smh), ncclSuccess);
	cr_assert_eq(abi_dereg_mr(&net, pair.rcomm, rmh), ncclSuccess);
	close_pair();
	munmap(tx, size);
	munmap(rx, size);
}
ABI_ALL_VERSIONS(one_gib)

/* A message larger than the posted receive is misuse (NCCL's socket transport reports the
 * same as "message truncated"): the receive must fail with ncclInvalidUsage, not overflow. */
static void truncation(int version)
{
	static char tx[4096], rx[1024 + 64];
	void *smh, *rmh, *sreq = NULL, *rreq = NULL;
	ncclResult_t res = ncclSuccess;
	int done = 0, size;

	memset(rx, 0x77, sizeof(rx));
	open_pair(version);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, tx, sizeof(tx), &smh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, sizeof(rx), &rmh), ncclSuccess);
	int64_t deadline = abi_now_ms() + CONNECT_TIMEOUT_MS;
	while (res == ncclSuccess && !done) {
		cr_assert_lt(abi_now_ms(), deadline, "truncated receive neither failed nor ended");
		if (!rreq)
			res = abi_irecv(&net, pair.rcomm, rx, 1024, rmh, 0, &rreq);
		if (!sreq)
			abi_isend(&net, pair.scomm, tx, sizeof(tx), smh, &sreq);
		if (res == ncclSuccess && rreq)
			res = abi_test(&net, rreq, &done, &size);
	}
	cr_assert_eq(res, ncclInvalidUsage, "truncated receive: result %d, done %d, size %d", res,
		     done, done ? size : -1);
	for (size_t i = 1024; i < sizeof(rx); i++)
		cr_assert_eq(rx[i], 0x77, "byte %zu past the posted receive was written", i);
	/* The comms are broken now; closing them must still work and not wait. */
	close_pair();
}
ABI_ALL_VERSIONS(truncation)

/* Times one close call; asserts success and the bound. */
#define TIMED_CLOSE(call)                                                                          \
	do {                                                                                       \
		int64_t t0_ = abi_now_ms();                                                        \
		cr_assert_eq((call), ncclSuccess, #call);                                          \
		int64_t dt_ = abi_now_ms() - t0_;                                                  \
		cr_assert_leq(dt_, CLOSE_BOUND_MS, #call " took %lld ms", (long long)dt_);         \
	} while (0)

/* NCCL's abort path: deregMr, closeSend, closeRecv, closeListen and finalize with requests
 * still in flight. Pair 1 has 8 receives posted and nothing sent; pair 2 has 8 large sends
 * posted (more than the socket buffers hold) and no receive. Over ib a send is only accepted
 * against a posted receive (the receiver's clear-to-send carries the address), so pair 2 gets
 * its 8 receives too and none of them is ever tested. */
static void close_in_flight(int version)
{
	enum { N = 8, BIG = 8 << 20 };
	struct abi_pair idle;
	char *tx = malloc((size_t)N * BIG), *rx = malloc((size_t)N * 4096);
	void *smh, *rmh, *req;
	int nsend = 0, nrecv = 0;

	cr_assert(tx && rx);
	memset(tx, 1, (size_t)N * BIG);
	open_pair(version);
	cr_assert_eq(abi_pair_open(&net, 0, &idle, CONNECT_TIMEOUT_MS, err, sizeof(err)), 0, "%s",
		     err);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, (size_t)N * 4096, &rmh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, idle.scomm, tx, (size_t)N * BIG, &smh), ncclSuccess);
	char *sink = NULL;
	void *sinkmh = NULL;
	if (abi_transport_is_ib()) {
		sink = malloc((size_t)N * BIG);
		cr_assert(sink);
		cr_assert_eq(abi_reg_mr(&net, idle.rcomm, sink, (size_t)N * BIG, &sinkmh),
			     ncclSuccess);
		for (int i = 0; i < N; i++) {
			void *r = NULL;
			while (!r)
				cr_assert_eq(abi_irecv(&net, idle.rcomm, sink + (size_t)i * BIG,
						       BIG, sinkmh, 0, &r),
					     ncclSuccess);
		}
	}
	int64_t stop = abi_now_ms() + 300;
	while ((nsend < N || nrecv < N) && abi_now_ms() < stop) {
		if (nrecv < N &&
		    abi_irecv(&net, pair.rcomm, rx + nrecv * 4096, 4096, rmh, 0, &req) ==
			    ncclSuccess &&
		    req)
			nrecv++;
		if (nsend < N &&
		    abi_isend(&net, idle.scomm, tx + (size_t)nsend * BIG, BIG, smh, &req) ==
			    ncclSuccess &&
		    req)
			nsend++;
	}
	cr_log_info("v%d: closing with %d sends and %d receives in flight", version, nsend, nrecv);
	cr_assert_gt(nrecv, 0, "no receive was accepted");
	cr_assert_gt(nsend, 0, "no send was accepted");
	TIMED_CLOSE(abi_dereg_mr(&net, pair.rcomm, rmh));
	TIMED_CLOSE(abi_dereg_mr(&net, idle.scomm, smh));
	if (sinkmh)
		TIMED_CLOSE(abi_dereg_mr(&net, idle.rcomm, sinkmh));
	TIMED_CLOSE(abi_close_recv(&net, pair.rcomm));
	TIMED_CLOSE(abi_close_send(&net, idle.scomm));
	/* The other ends now see their peer gone, with a receive or data pending. */
	TIMED_CLOSE(abi_close_send(&net, pair.scomm));
	TIMED_CLOSE(abi_close_recv(&net, idle.rcomm));
	TIMED_CLOSE(abi_close_listen(&net, pair.lcomm));
	TIMED_CLOSE(abi_close_listen(&net, idle.lcomm));
	TIMED_CLOSE(abi_net_finalize(&net));
	abi_net_unload(&net);
	free(tx);
	free(rx);
	free(sink);
}
ABI_ALL_VERSIONS(close_in_flight)
