/* SPDX-License-Identifier: BSD-3-Clause */
/* Drives one exported net table of the built plug-in (v11, v10, v9 or v8) through
 * version-neutral calls, the way NCCL's proxy threads do, for the ABI tests.
 *
 * The plug-in is dlopen'ed from FTCC_PLUGIN_PATH (a compile definition the build provides)
 * with RTLD_NOW | RTLD_LOCAL, as NCCL loads it. Only the ABI declarations of plugin/nccl are
 * used: the tests see exactly what NCCL sees.
 */
#ifndef FTCC_TESTS_ABI_NET_H
#define FTCC_TESTS_ABI_NET_H

#include <stddef.h>
#include <stdint.h>

#include "../../plugin/nccl/net_v10.h"
#include "../../plugin/nccl/net_v11.h"
#include "../../plugin/nccl/net_v8.h"
#include "../../plugin/nccl/net_v9.h"

/* One loaded table. Owned by the test; abi_net_unload() releases it. */
struct abi_net {
	int version; /* 11, 10, 9 or 8 */
	void *lib;   /* dlopen handle */
	union {
		const void *any;
		const ncclNet_v11_t *v11;
		const ncclNet_v10_t *v10;
		const ncclNet_v9_t *v9;
		const ncclNet_v8_t *v8;
	} t;
	void *ctx; /* v11 only: what init returned */
	uint64_t comm_id;
};

/* dlopens the plug-in and looks up ncclNetPlugin_v@version. 0, or -1 with the dlerror text
 * in @err. Does not call init. */
int abi_net_load(struct abi_net *net, int version, char *err, size_t errlen);
/* dlcloses the library (after abi_net_finalize for v11). */
void abi_net_unload(struct abi_net *net);

/* init with the capturing logger below (v11: comm id net->comm_id, traffic class unset). */
ncclResult_t abi_net_init(struct abi_net *net);
/* v11: finalize(ctx) (ctx may be NULL); older versions have no finalize: ncclSuccess. */
ncclResult_t abi_net_finalize(struct abi_net *net);

ncclResult_t abi_devices(struct abi_net *net, int *ndev);
/* getProperties, widened to the v11 struct (fields a version lacks are zero). */
ncclResult_t abi_props(struct abi_net *net, int dev, ncclNetProperties_v11_t *props);
ncclResult_t abi_listen(struct abi_net *net, int dev, void *handle, void **lcomm);
ncclResult_t abi_connect(struct abi_net *net, int dev, void *handle, void **scomm);
ncclResult_t abi_accept(struct abi_net *net, void *lcomm, void **rcomm);
ncclResult_t abi_reg_mr(struct abi_net *net, void *comm, void *data, size_t size, void **mh);
ncclResult_t abi_dereg_mr(struct abi_net *net, void *comm, void *mh);
/* isend with tag 0 / with @tag. */
ncclResult_t abi_isend(struct abi_net *net, void *scomm, void *data, size_t size, void *mh,
		       void **req);
ncclResult_t abi_isend_tag(struct abi_net *net, void *scomm, void *data, size_t size, int tag,
			   void *mh, void **req);
/* One-buffer irecv (tag 0). With @hint, *req is preset to NCCL_NET_OPTIONAL_RECV_COMPLETION
 * first, as NCCL does for LL/LL128 receives. */
ncclResult_t abi_irecv(struct abi_net *net, void *rcomm, void *data, size_t size, void *mh,
		       int hint, void **req);
/* Grouped irecv of @n (1..8) buffers matched by tag, as NCCL posts when maxRecvs > 1. */
ncclResult_t abi_irecvn(struct abi_net *net, void *rcomm, int n, void **data, const size_t *sizes,
			int *tags, void **mhs, int hint, void **req);
ncclResult_t abi_test(struct abi_net *net, void *req, int *done, int *size);
ncclResult_t abi_close_send(struct abi_net *net, void *scomm);
ncclResult_t abi_close_recv(struct abi_net *net, void *rcomm);
ncclResult_t abi_close_listen(struct abi_net *net, void *lcomm);

/* The logger every abi_net_init passes: counts lines per level and keeps the warnings (all
 * of them, concatenated, up to a few KiB) for assertions. Prints them to stderr as well when
 * FTCC_TEST_VERBOSE is set. Thread-safe. */
void abi_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Number of lines logged at @level so far. */
int abi_log_count(ncclDebugLogLevel level);
/* 1 if some warning so far contains @needle. */
int abi_log_warned(const char *needle);
/* Forgets every captured line. */
void abi_log_reset(void);

/* Monotonic milliseconds. */
int64_t abi_now_ms(void);
/* Whether the tests run over the ib transport (FTCC_TRANSPORT=ib, the verbs emulator). */
int abi_transport_is_ib(void);
/* Sets FTCC_TRANSPORT and FTCC_IBVERBS_LIB for the transport FTCC_TEST_TRANSPORT names: "ib"
 * runs the plug-in over the verbs emulator built in the tree; "no-verbs", the default (auto)
 * with libibverbs missing; anything else, the default. */
void test_transport_env(void);
/* The same for the transport @want names ("ib", "tcp", "no-verbs"; "ib-no-rtr": ib on an
 * emulated HCA whose connections never come up; NULL: the default). */
void test_transport_set(const char *want);
/* Whether a process's log shows its engine data plane on the transport @want names (NULL: the
 * one FTCC_TEST_TRANSPORT names): "frames over ib" under ib, and not otherwise. NULL when it does
 * or says nothing, else what it used ("tcp, not ib"). A run that fell back quietly would test
 * TCP twice. */
const char *test_log_transport(const char *log, const char *want);
/* Cutting one process off the emulated fabric (the verbs emulator's IBEMU_CUT_DIR), where a
 * test cuts its IP with nftables: the emulator's wire is not IP, so nftables alone would cut the
 * control plane and leave the data path up. test_fabric_cut_env() names this test process's
 * directory (emptied) for the processes it forks next; test_fabric_cut() cuts @pid (@on 1) or
 * mends it (0); test_fabric_cut_clear() removes the directory. 0 or -errno; no-ops outside ib. */
void test_fabric_cut_env(void);
int test_fabric_cut(int pid, int on);
/* The same one way, from process @from to process @to: the emulator at @from writes nothing to
 * @to (RC needs both ways: the QPs at both ends time out), as nftables drops @from's packets. */
int test_fabric_cut_way(int from, int to, int on);
void test_fabric_cut_clear(void);
/* Entries of /proc/self/task and /proc/self/fd: threads and open fds of this process. */
int abi_thread_count(void);
int abi_fd_count(void);

#endif
