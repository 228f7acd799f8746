/* SPDX-License-Identifier: BSD-3-Clause */
/* Criterion fixtures shared by the ABI test files: the environment every test runs in, one
 * test per exported table from a single body, and the open / close of a connected pair.
 *
 * Header-only (static inline) because it uses Criterion's assertions, which belong in test
 * translation units.
 */
#ifndef FTCC_TESTS_ABI_FIXTURE_H
#define FTCC_TESTS_ABI_FIXTURE_H

#include <criterion/criterion.h>
#include <stdlib.h>

#include "abi_net.h"
#include "abi_xfer.h"

#define ABI_CONNECT_TIMEOUT_MS 5000
#define ABI_STREAM_TIMEOUT_MS 30000

/* Criterion .init of every ABI test: loopback only, so tests need no network. */
static inline void abi_setup(void)
{
	setenv("FTCC_SOCKET_IFNAME", "lo", 1);
	test_transport_env();
}

/* Generates one Criterion test per exported table (suites net_v11 .. net_v8) from
 * `static void body(int version)`. */
#define ABI_ALL_VERSIONS(body)                                                                     \
	Test(net_v11, body, .init = abi_setup, .timeout = 120)                                     \
	{                                                                                          \
		body(11);                                                                          \
	}                                                                                          \
	Test(net_v10, body, .init = abi_setup, .timeout = 120)                                     \
	{                                                                                          \
		body(10);                                                                          \
	}                                                                                          \
	Test(net_v9, body, .init = abi_setup, .timeout = 120)                                      \
	{                                                                                          \
		body(9);                                                                           \
	}                                                                                          \
	Test(net_v8, body, .init = abi_setup, .timeout = 120)                                      \
	{                                                                                          \
		body(8);                                                                           \
	}

/* Loads and initialises table v@version into @net and connects @pair on device 0. */
static inline void abi_open_pair(struct abi_net *net, struct abi_pair *pair, int version)
{
	char err[512];
	int ndev = 0;

	cr_assert_eq(abi_net_load(net, version, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_net_init(net), ncclSuccess, "init v%d", version);
	cr_assert_eq(abi_devices(net, &ndev), ncclSuccess);
	cr_assert_gt(ndev, 0, "no device on lo");
	cr_assert_eq(abi_pair_open(net, 0, pair, ABI_CONNECT_TIMEOUT_MS, err, sizeof(err)), 0, "%s",
		     err);
}

/* Closes @pair, finalizes and unloads @net, asserting each step. */
static inline void abi_close_pair(struct abi_net *net, struct abi_pair *pair)
{
	cr_assert_eq(abi_pair_close(pair), ncclSuccess);
	cr_assert_eq(abi_net_finalize(net), ncclSuccess);
	abi_net_unload(net);
}

#endif
