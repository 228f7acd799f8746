/* SPDX-License-Identifier: BSD-3-Clause */
/* ABI tests of the net plug-in's life cycle: init and finalize (including finalize(NULL) and
 * a rejected setting), several v11 ctxs at once and concurrently, a connection between two
 * processes with the handle passed over a pipe, and many dlopen / init / finalize / dlclose
 * cycles that must leave no thread and no fd behind.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi_fixture.h"

#define TIMEOUT_MS 10000
/* How long threads and fds may take to disappear once the call that ends them returned. */
#define SETTLE_MS 500

static struct abi_net net;
static char err[512];

/* Waits up to SETTLE_MS for @counter to come back to @want; returns the last value. */
static int settle(int (*counter)(void), int want)
{
	int64_t deadline = abi_now_ms() + SETTLE_MS;
	int n;

	while ((n = counter()) != want && abi_now_ms() < deadline)
		usleep(5000);
	return n;
}

Test(net_v11, finalize_null, .init = abi_setup)
{
	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(net.t.v11->finalize(NULL), ncclSuccess, "finalize(NULL) before any init");
	setenv("FTCC_NSTREAMS", "0", 1); /* below its minimum */
	cr_assert_neq(abi_net_init(&net), ncclSuccess);
	cr_assert_null(net.ctx, "a failed init left a ctx");
	/* What NCCL does after a failed init. */
	cr_assert_eq(net.t.v11->finalize(NULL), ncclSuccess, "finalize(NULL) after failed init");
	abi_net_unload(&net);
}

/* A malformed FTCC_* value fails init with ncclInvalidUsage and a warning naming it; once
 * fixed, init works in the same process. */
static void bad_setting(int version)
{
	int ndev = 0;

	cr_assert_eq(abi_net_load(&net, version, err, sizeof(err)), 0, "%s", err);
	setenv("FTCC_NSTREAMS", "banana", 1);
	cr_assert_eq(abi_net_init(&net), ncclInvalidUsage);
	cr_assert(abi_log_warned("FTCC_NSTREAMS"), "no warning names FTCC_NSTREAMS");
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	unsetenv("FTCC_NSTREAMS");
	cr_assert_eq(abi_net_init(&net), ncclSuccess, "init after fixing the setting");
	cr_assert_eq(abi_devices(&net, &ndev), ncclSuccess);
	cr_assert_gt(ndev, 0);
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	abi_net_unload(&net);
}
ABI_ALL_VERSIONS(bad_setting)

/* The receiving process of two_process: listens, hands its handle to the parent over @fd,
 * accepts and checks @count messages. Returns an exit status (0 = all good). */
static int child_receive(int version, int fd, const size_t *sizes, int count)
{
	struct abi_pair p = { .net = &net };
	struct abi_stream s = {
		.sizes = sizes, .count = count, .window = 4, .timeout_ms = TIMEOUT_MS
	};
	int ndev = 0;

	if (abi_net_load(&net, version, err, sizeof(err)) || abi_net_init(&net) != ncclSuccess ||
	    abi_devices(&net, &ndev) != ncclSuccess || ndev < 1)
		return 2;
	if (abi_listen(&net, 0, p.handle, &p.lcomm) != ncclSuccess ||
	    write(fd, p.handle, sizeof(p.handle)) != (ssize_t)sizeof(p.handle))
		return 3;
	if (abi_accept_poll(&net, p.lcomm, &p.rcomm, TIMEOUT_MS))
		return 4;
	if (abi_stream_run(&p, &s, err, sizeof(err))) {
		fprintf(stderr, "child: %s\n", err);
		return 5;
	}
	if (abi_pair_close(&p) != ncclSuccess || abi_net_finalize(&net) != ncclSuccess)
		return 6;
	abi_net_unload(&net);
	return 0;
}

/* Waits for @pid up to @timeout_ms; kills it past that. Returns its wait status or -1. */
static int wait_child(pid_t pid, int timeout_ms)
{
	int64_t deadline = abi_now_ms() + timeout_ms;
	int status;

	while (waitpid(pid, &status, WNOHANG) == 0) {
		if (abi_now_ms() > deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, &status, 0);
			return -1;
		}
		usleep(2000);
	}
	return status;
}

/* Two processes, as two ranks are: the handle travels over a pipe, as NCCL ships it over its
 * bootstrap network. Forks before loading so each process has its own plug-in state. */
static void two_process(int version)
{
	enum { N = 200 };
	struct abi_pair p = { .net = &net };
	size_t sizes[N];
	int fds[2], ndev = 0;

	for (int i = 0; i < N; i++)
		sizes[i] = (size_t)(i * 7919) % 300000;
	cr_assert_eq(pipe(fds), 0);
	pid_t pid = fork();
	cr_assert_geq(pid, 0);
	if (pid == 0) {
		close(fds[0]);
		_exit(child_receive(version, fds[1], sizes, N));
	}
	close(fds[1]);
	struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, TIMEOUT_MS), 1, "no handle from the child");
	cr_assert_eq(read(fds[0], p.handle, sizeof(p.handle)), (ssize_t)sizeof(p.handle));
	close(fds[0]);
	cr_assert_eq(abi_net_load(&net, version, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_net_init(&net), ncclSuccess);
	cr_assert_eq(abi_devices(&net, &ndev), ncclSuccess);
	cr_assert_eq(abi_connect_poll(&net, 0, p.handle, &p.scomm, TIMEOUT_MS), 0, "connect");
	struct abi_stream s = { .sizes = sizes, .count = N, .window = 4, .timeout_ms = TIMEOUT_MS };
	cr_assert_eq(abi_stream_run(&p, &s, err, sizeof(err)), 0, "%s", err);
	/* Close only once the child has everything: our sends may complete before it reads. */
	int status = wait_child(pid, TIMEOUT_MS);
	cr_assert(status >= 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0,
		  "child failed: status 0x%x", status);
	cr_assert_eq(abi_pair_close(&p), ncclSuccess);
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	abi_net_unload(&net);
}
ABI_ALL_VERSIONS(two_process)

/* dlopen / init / connect / send / close / finalize / dlclose, many times: every cycle must
 * give back its threads and fds (NCCL dlcloses the plug-in with its last communicator). */
static void cycles(int version)
{
	static const size_t sizes[8] = { 0, 1, 4096, 65536, 100000, 1 << 20, 3, 77 };
	int threads0 = abi_thread_count(), fds0 = abi_fd_count();

	for (int c = 0; c < 20; c++) {
		struct abi_pair p;
		struct abi_stream s = {
			.sizes = sizes, .count = 8, .window = 8, .timeout_ms = TIMEOUT_MS
		};
		int ndev = 0;
		cr_assert_eq(abi_net_load(&net, version, err, sizeof(err)), 0, "%s", err);
		cr_assert_eq(abi_net_init(&net), ncclSuccess, "cycle %d", c);
		cr_assert_eq(abi_devices(&net, &ndev), ncclSuccess);
		cr_assert_eq(abi_pair_open(&net, 0, &p, TIMEOUT_MS, err, sizeof(err)), 0, "%s",
			     err);
		cr_assert_eq(abi_stream_run(&p, &s, err, sizeof(err)), 0, "cycle %d: %s", c, err);
		cr_assert_eq(abi_pair_close(&p), ncclSuccess);
		cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
		if (version == 11) {
			/* v11: the last finalize alone must stop every transport thread. */
			int n = settle(abi_thread_count, threads0);
			cr_assert_eq(n, threads0, "cycle %d: %d threads after finalize, %d before",
				     c, n, threads0);
		}
		abi_net_unload(&net);
		void *still = dlopen(FTCC_PLUGIN_PATH, RTLD_NOW | RTLD_NOLOAD);
		if (still) {
			cr_log_warn("cycle %d: the plug-in stays loaded after dlclose", c);
			dlclose(still);
		}
		int n = settle(abi_thread_count, threads0);
		cr_assert_eq(n, threads0, "cycle %d: %d threads after dlclose, %d before", c, n,
			     threads0);
		n = settle(abi_fd_count, fds0);
		cr_assert_eq(n, fds0, "cycle %d: %d fds after dlclose, %d before", c, n, fds0);
	}
}
ABI_ALL_VERSIONS(cycles)

/* Two communicators (two v11 ctxs) at once: ending one must not disturb the other. */
Test(net_v11, two_ctxs, .init = abi_setup, .timeout = 60)
{
	static const size_t sizes[4] = { 10, 20000, 0, 1 << 20 };
	struct abi_net other;
	struct abi_pair a, b;
	struct abi_stream s = { .sizes = sizes, .count = 4, .window = 2, .timeout_ms = TIMEOUT_MS };

	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_net_load(&other, 11, err, sizeof(err)), 0, "%s", err);
	other.comm_id ^= 0xffff;
	cr_assert_eq(abi_net_init(&net), ncclSuccess);
	cr_assert_eq(abi_net_init(&other), ncclSuccess);
	cr_assert_neq(net.ctx, other.ctx);
	cr_assert_eq(abi_pair_open(&net, 0, &a, TIMEOUT_MS, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_pair_open(&other, 0, &b, TIMEOUT_MS, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_stream_run(&b, &s, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_pair_close(&b), ncclSuccess);
	cr_assert_eq(abi_net_finalize(&other), ncclSuccess);
	abi_net_unload(&other);
	cr_assert_eq(abi_stream_run(&a, &s, err, sizeof(err)), 0, "after the other ctx: %s", err);
	cr_assert_eq(abi_pair_close(&a), ncclSuccess);
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	abi_net_unload(&net);
}

/* Communicators of several threads init and finalize at once (NCCL does this when an
 * application creates communicators from several threads). */
static void *init_storm(void *arg)
{
	const ncclNet_v11_t *t = arg;
	ncclNetCommConfig_v11_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

	for (int i = 0; i < 25; i++) {
		void *ctx = NULL;
		if (t->init(&ctx, (uint64_t)i, &config, abi_logger, NULL) != ncclSuccess || !ctx)
			return (void *)1;
		if (t->finalize(ctx) != ncclSuccess)
			return (void *)1;
	}
	return NULL;
}

Test(net_v11, concurrent_init, .init = abi_setup, .timeout = 60)
{
	enum { T = 4 };
	pthread_t th[T];
	int threads0 = abi_thread_count();

	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	for (int i = 0; i < T; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, init_storm, (void *)net.t.v11), 0);
	for (int i = 0; i < T; i++) {
		void *ret;
		cr_assert_eq(pthread_join(th[i], &ret), 0);
		cr_assert_null(ret, "thread %d: init or finalize failed", i);
	}
	int n = settle(abi_thread_count, threads0);
	cr_assert_eq(n, threads0, "%d threads left, %d before", n, threads0);
	abi_net_unload(&net);
}

/* NCCL_DEBUG=INFO must bring our INFO lines to NCCL's logger while a ctx lives; after the
 * last finalize nothing may reach it any more (NCCL may be unloaded next). */
Test(net_v11, log_forwarding, .init = abi_setup, .timeout = 30)
{
	ncclNetProperties_v11_t p;

	setenv("NCCL_DEBUG", "INFO", 1);
	setenv("FTCC_DEBUG", "INFO", 1); /* keeps INFO on once NCCL's logger is gone */
	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_net_init(&net), ncclSuccess);
	cr_assert_gt(abi_log_count(NCCL_LOG_INFO), 0, "no INFO line reached NCCL's logger");
	int before = abi_log_count(NCCL_LOG_INFO);
	cr_assert_neq(abi_props(&net, 1 << 20, &p), ncclSuccess, "getProperties(bad dev)");
	cr_assert_gt(abi_log_count(NCCL_LOG_INFO), before, "the failure was not logged");
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	before = abi_log_count(NCCL_LOG_INFO);
	int warns = abi_log_count(NCCL_LOG_WARN);
	cr_assert_neq(abi_props(&net, 1 << 20, &p), ncclSuccess);
	cr_assert_eq(abi_log_count(NCCL_LOG_INFO), before,
		     "logged to NCCL after the last finalize");
	cr_assert_eq(abi_log_count(NCCL_LOG_WARN), warns);
	abi_net_unload(&net);
}
