/* SPDX-License-Identifier: BSD-3-Clause */
/* The net plug-in over the ib transport, beyond what every ABI test checks over both: the
 * emulator's two devices (IB and RoCE) with their properties, data striped over several
 * queue pairs on each, FTCC_IB_HCA, and the choice of transport when libibverbs is missing,
 * has no devices, or is forced without any: the .so loads and serves TCP, or fails loudly.
 *
 * These tests set FTCC_TRANSPORT and FTCC_IBVERBS_LIB themselves, whatever
 * FTCC_TEST_TRANSPORT says.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include "abi_fixture.h"

#ifdef FTCC_IBEMU_PATH

static struct abi_net net;
static char err[512];

static void ib_setup(void)
{
	setenv("FTCC_SOCKET_IFNAME", "lo", 1);
	setenv("FTCC_TRANSPORT", "ib", 1);
	setenv("FTCC_IBVERBS_LIB", FTCC_IBEMU_PATH, 1);
	setenv("FTCC_CUDA_LIB", "/nonexistent/libcuda.so.1", 1); /* GPU memory: net_gpu */
}

TestSuite(net_ib, .init = ib_setup, .timeout = 120);

static int init_devices(void)
{
	int ndev = -1;

	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_net_init(&net), ncclSuccess);
	cr_assert_eq(abi_devices(&net, &ndev), ncclSuccess);
	return ndev;
}

static void fini(void)
{
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	abi_net_unload(&net);
}

Test(net_ib, properties_of_both_link_layers)
{
	ncclNetProperties_v11_t p;

	cr_assert_eq(init_devices(), 2);
	cr_assert_eq(abi_props(&net, 0, &p), ncclSuccess);
	cr_expect_str_eq(p.name, "mlx5_0");
	cr_expect_eq(p.port, 1);
	cr_expect_eq(p.speed, 100000, "4x EDR");
	cr_expect_eq(p.ptrSupport, NCCL_PTR_HOST, "no CUDA driver: host memory only");
	cr_expect_eq(p.maxRecvs, 8);
	cr_expect_eq(p.maxP2pBytes, (size_t)1 << 31);
	cr_assert_eq(abi_props(&net, 1, &p), ncclSuccess);
	cr_expect_str_eq(p.name, "mlx5_1");
	fini();
}

/* Messages of awkward sizes, single and grouped, on device @dev with @qps queue pairs. */
static void striped_sizes(int dev, const char *qps)
{
	static const size_t sizes[] = { 0,	  1,	 127,
					128,	  129,	 4095,
					4096,	  65537, (1u << 20) + 3,
					8u << 20, 3,	 (2u << 20) + 128 };
	struct abi_stream s = { .sizes = sizes,
				.count = (int)(sizeof(sizes) / sizeof(sizes[0])),
				.window = 8,
				.recv_slack = 77,
				.timeout_ms = 30000 };
	struct abi_pair pair;

	setenv("FTCC_IB_QPS_PER_CONN", qps, 1);
	cr_assert_eq(init_devices(), 2);
	cr_assert_eq(abi_pair_open(&net, dev, &pair, 5000, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_stream_run(&pair, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_pair_close(&pair), ncclSuccess);
	fini();
}

Test(net_ib, ib_three_qps)
{
	striped_sizes(0, "3");
}

Test(net_ib, roce_four_qps)
{
	striped_sizes(1, "4");
}

Test(net_ib, roce_one_qp)
{
	striped_sizes(1, "1");
}

/* RoCE's move to RTR times out a few times (a neighbour entry not resolved yet): the
 * handshake tries again within its deadline instead of failing the connection. */
Test(net_ib, rtr_timeouts_retried)
{
	setenv("IBEMU_RTR_FAILS", "5", 1);
	striped_sizes(1, "2");
}

/* The same on the connector's side: the acceptor's two QPs reach RTR, then the connector's
 * time out. */
Test(net_ib, rtr_timeouts_retried_by_connector)
{
	setenv("IBEMU_RTR_FAILS", "5", 1);
	setenv("IBEMU_RTR_FAILS_AFTER", "2", 1);
	striped_sizes(1, "2");
}

Test(net_ib, hca_filter)
{
	ncclNetProperties_v11_t p;

	setenv("FTCC_IB_HCA", "=mlx5_1", 1);
	cr_assert_eq(init_devices(), 1);
	cr_assert_eq(abi_props(&net, 0, &p), ncclSuccess);
	cr_expect_str_eq(p.name, "mlx5_1");
	fini();
	setenv("FTCC_IB_HCA", "^mlx5_1", 1);
	cr_assert_eq(init_devices(), 1);
	cr_assert_eq(abi_props(&net, 0, &p), ncclSuccess);
	cr_expect_str_eq(p.name, "mlx5_0");
	fini();
}

/* A device that dies under a pending receive: the receive fails within a second with a
 * system error (our side broke, not the peer), one warning says so, and closing still works. */
Test(net_ib, device_fatal_fails_fast)
{
	static char rx[4096];
	void *lib, *mh, *req = NULL;
	int (*inject)(const char *);
	struct abi_pair pair;
	ncclResult_t res;

	cr_assert_eq(init_devices(), 2);
	cr_assert_eq(abi_pair_open(&net, 0, &pair, 5000, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, sizeof(rx), &mh), ncclSuccess);
	while (!req)
		cr_assert_eq(abi_irecv(&net, pair.rcomm, rx, sizeof(rx), mh, 0, &req), ncclSuccess);
	lib = dlopen(FTCC_IBEMU_PATH, RTLD_NOW | RTLD_NOLOAD);
	cr_assert(lib, "the emulator is not loaded");
	*(void **)&inject = dlsym(lib, "ftcc_ibemu_inject");
	cr_assert(inject);
	int64_t t0 = abi_now_ms();
	cr_assert_eq(inject("device_fatal"), 0);
	res = abi_wait(&net, req, NULL, 3000);
	int64_t ms = abi_now_ms() - t0;
	cr_expect_eq(res, ncclSystemError, "pending receive: result %d after %lld ms", res,
		     (long long)ms);
	cr_expect_leq(ms, 1000, "failed only after %lld ms", (long long)ms);
	cr_expect(abi_log_warned("fatal device error"), "no warning about the device");
	dlclose(lib);
	abi_dereg_mr(&net, pair.rcomm, mh);
	int64_t t1 = abi_now_ms();
	cr_expect_eq(abi_pair_close(&pair), ncclSuccess);
	cr_expect_leq(abi_now_ms() - t1, 1000);
	fini();
}

/* A receive is pending when every QP fails (both processes live): the QPs are rebuilt, and
 * the connection then stays idle for three failure timeouts; the receive must still be there,
 * and the message that comes afterwards must complete it intact. */
Test(net_ib, idle_after_rebuild)
{
	static char tx[300000], rx[300000];
	void *lib, *smh, *rmh, *sreq = NULL, *rreq = NULL;
	int (*inject)(const char *), done = 0, size = -1;
	struct abi_pair pair;

	setenv("FTCC_FAILURE_TIMEOUT_MS", "500", 1);
	setenv("FTCC_IB_QPS_PER_CONN", "2", 1);
	for (size_t i = 0; i < sizeof(tx); i++)
		tx[i] = (char)(i * 131 + 7);
	cr_assert_eq(init_devices(), 2);
	cr_assert_eq(abi_pair_open(&net, 0, &pair, 5000, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, tx, sizeof(tx), &smh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, sizeof(rx), &rmh), ncclSuccess);
	while (!rreq)
		cr_assert_eq(abi_irecv(&net, pair.rcomm, rx, sizeof(rx), rmh, 0, &rreq),
			     ncclSuccess);
	lib = dlopen(FTCC_IBEMU_PATH, RTLD_NOW | RTLD_NOLOAD);
	cr_assert(lib, "the emulator is not loaded");
	*(void **)&inject = dlsym(lib, "ftcc_ibemu_inject");
	cr_assert(inject);
	cr_assert_eq(inject("qp_error"), 0);
	for (int64_t end = abi_now_ms() + 1500; abi_now_ms() < end;) {
		cr_assert_eq(abi_test(&net, rreq, &done, &size), ncclSuccess,
			     "an idle, repaired connection failed");
		cr_assert_eq(done, 0, "a receive completed with nothing sent");
	}
	while (!sreq)
		cr_assert_eq(abi_isend(&net, pair.scomm, tx, sizeof(tx), smh, &sreq), ncclSuccess);
	cr_assert_eq(abi_wait(&net, rreq, &size, 5000), ncclSuccess);
	cr_assert_eq(abi_wait(&net, sreq, NULL, 5000), ncclSuccess);
	cr_assert_eq(size, (int)sizeof(tx));
	cr_assert_eq(memcmp(tx, rx, sizeof(tx)), 0, "the message arrived damaged");
	cr_expect_eq(abi_log_count(NCCL_LOG_WARN), 0, "a repaired fault warned");
	dlclose(lib);
	abi_dereg_mr(&net, pair.scomm, smh);
	abi_dereg_mr(&net, pair.rcomm, rmh);
	cr_assert_eq(abi_pair_close(&pair), ncclSuccess);
	fini();
}

/* auto with no usable HCA serves TCP on the loopback interface; forced ib fails init with one
 * warning that says why. */
static void falls_back(void)
{
	ncclNetProperties_v11_t p;

	setenv("FTCC_TRANSPORT", "auto", 1);
	cr_assert_eq(init_devices(), 1);
	cr_assert_eq(abi_props(&net, 0, &p), ncclSuccess);
	cr_expect_str_eq(p.name, "lo", "auto without HCAs must serve TCP");
	fini();
	setenv("FTCC_TRANSPORT", "ib", 1);
	abi_log_reset();
	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	cr_expect_neq(abi_net_init(&net), ncclSuccess, "forced ib without an HCA must fail");
	cr_expect(abi_log_warned("FTCC_TRANSPORT=ib"), "no warning names the setting");
	abi_net_finalize(&net);
	abi_net_unload(&net);
}

Test(net_ib, no_libibverbs)
{
	setenv("FTCC_IBVERBS_LIB", "/nonexistent/libibverbs.so.1", 1);
	falls_back();
}

/* A libibverbs that lacks verbs (here all but ibv_get_device_list, which claims a device). */
Test(net_ib, libibverbs_missing_verbs)
{
	setenv("FTCC_IBVERBS_LIB", FTCC_IBEMU_PARTIAL_PATH, 1);
	falls_back();
}

Test(net_ib, kernel_without_rdma)
{
	setenv("IBEMU_DEVICES", "none", 1); /* ibv_get_device_list: NULL, ENOSYS */
	falls_back();
}

Test(net_ib, every_port_excluded)
{
	setenv("FTCC_IB_HCA", "mlx5_0:2", 1);
	falls_back();
}

Test(net_ib, bad_transport_setting)
{
	setenv("FTCC_TRANSPORT", "verbs", 1);
	abi_log_reset();
	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	cr_expect_neq(abi_net_init(&net), ncclSuccess);
	cr_expect(abi_log_warned("FTCC_TRANSPORT"), "no warning names the setting");
	abi_net_finalize(&net);
	abi_net_unload(&net);
}

#endif
