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
	cr_expect_eq(p.ptrSupport, NCCL_PTR_HOST, "GPU memory is not offered unverified");
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
