/* SPDX-License-Identifier: BSD-3-Clause */
/* Version dispatch for the ABI tests: one switch per call, so that every test body runs
 * unchanged against each exported table; plus the capturing logger and process counters.
 */
#define _GNU_SOURCE
#include "abi_net.h"

#include <dirent.h>
#include <errno.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#ifndef FTCC_PLUGIN_PATH
#error "FTCC_PLUGIN_PATH must name the built libnccl-net-ftcc.so"
#endif

int abi_net_load(struct abi_net *net, int version, char *err, size_t errlen)
{
	char sym[32];

	memset(net, 0, sizeof(*net));
	net->version = version;
	net->comm_id = 0x5eed000000000000ull | (uint64_t)version;
	net->lib = dlopen(FTCC_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!net->lib) {
		snprintf(err, errlen, "dlopen: %s", dlerror());
		return -1;
	}
	snprintf(sym, sizeof(sym), "ncclNetPlugin_v%d", version);
	net->t.any = dlsym(net->lib, sym);
	if (!net->t.any) {
		snprintf(err, errlen, "dlsym %s: %s", sym, dlerror());
		dlclose(net->lib);
		net->lib = NULL;
		return -1;
	}
	return 0;
}

void abi_net_unload(struct abi_net *net)
{
	if (net->lib)
		dlclose(net->lib);
	net->lib = NULL;
	net->t.any = NULL;
}

ncclResult_t abi_net_init(struct abi_net *net)
{
	ncclNetCommConfig_v11_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };

	switch (net->version) {
	case 11:
		return net->t.v11->init(&net->ctx, net->comm_id, &config, abi_logger, NULL);
	case 10:
		return net->t.v10->init(abi_logger, NULL);
	case 9:
		return net->t.v9->init(abi_logger);
	default:
		return net->t.v8->init(abi_logger);
	}
}

ncclResult_t abi_net_finalize(struct abi_net *net)
{
	if (net->version != 11)
		return ncclSuccess;
	ncclResult_t res = net->t.v11->finalize(net->ctx);
	net->ctx = NULL;
	return res;
}

/* Every table starts with the same members up to closeListen; the macro picks the table of
 * the loaded version for calls whose signature is identical in all of them. */
#define ABI_SAME(net, member, ...)                                                                 \
	((net)->version == 11 ? (net)->t.v11->member(__VA_ARGS__) :                                \
	 (net)->version == 10 ? (net)->t.v10->member(__VA_ARGS__) :                                \
	 (net)->version == 9  ? (net)->t.v9->member(__VA_ARGS__) :                                 \
				(net)->t.v8->member(__VA_ARGS__))

ncclResult_t abi_devices(struct abi_net *net, int *ndev)
{
	return ABI_SAME(net, devices, ndev);
}

/* Copies the members v8 .. v10 share with v11. */
#define ABI_WIDEN_COMMON(dst, src)                                                                 \
	do {                                                                                       \
		(dst)->name = (src).name;                                                          \
		(dst)->pciPath = (src).pciPath;                                                    \
		(dst)->guid = (src).guid;                                                          \
		(dst)->ptrSupport = (src).ptrSupport;                                              \
		(dst)->regIsGlobal = (src).regIsGlobal;                                            \
		(dst)->speed = (src).speed;                                                        \
		(dst)->port = (src).port;                                                          \
		(dst)->latency = (src).latency;                                                    \
		(dst)->maxComms = (src).maxComms;                                                  \
		(dst)->maxRecvs = (src).maxRecvs;                                                  \
		(dst)->netDeviceType = (src).netDeviceType;                                        \
		(dst)->netDeviceVersion = (src).netDeviceVersion;                                  \
	} while (0)

/* Copies what v9 added (v10 has the same members). */
#define ABI_WIDEN_V9(dst, src)                                                                     \
	do {                                                                                       \
		(dst)->forceFlush = (src).forceFlush;                                              \
		(dst)->vProps.ndevs = (src).vProps.ndevs;                                          \
		memcpy((dst)->vProps.devs, (src).vProps.devs, sizeof((dst)->vProps.devs));         \
		(dst)->maxP2pBytes = (src).maxP2pBytes;                                            \
		(dst)->maxCollBytes = (src).maxCollBytes;                                          \
	} while (0)

ncclResult_t abi_props(struct abi_net *net, int dev, ncclNetProperties_v11_t *props)
{
	ncclResult_t res;

	memset(props, 0, sizeof(*props));
	if (net->version == 11)
		return net->t.v11->getProperties(dev, props);
	if (net->version == 10) {
		ncclNetProperties_v10_t p;
		res = net->t.v10->getProperties(dev, &p);
		ABI_WIDEN_COMMON(props, p);
		ABI_WIDEN_V9(props, p);
	} else if (net->version == 9) {
		ncclNetProperties_v9_t p;
		res = net->t.v9->getProperties(dev, &p);
		ABI_WIDEN_COMMON(props, p);
		ABI_WIDEN_V9(props, p);
	} else {
		ncclNetProperties_v8_t p;
		res = net->t.v8->getProperties(dev, &p);
		ABI_WIDEN_COMMON(props, p);
	}
	return res;
}

ncclResult_t abi_listen(struct abi_net *net, int dev, void *handle, void **lcomm)
{
	switch (net->version) {
	case 11:
		return net->t.v11->listen(net->ctx, dev, handle, lcomm);
	case 10:
		return net->t.v10->listen(dev, handle, lcomm);
	case 9:
		return net->t.v9->listen(dev, handle, lcomm);
	default:
		return net->t.v8->listen(dev, handle, lcomm);
	}
}

ncclResult_t abi_connect(struct abi_net *net, int dev, void *handle, void **scomm)
{
	ncclNetCommConfig_v10_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	/* NCCL passes the address of a NULL device handle when it does not want offload. */
	ncclNetDeviceHandle_v11_t *dev_handle = NULL;

	switch (net->version) {
	case 11:
		return net->t.v11->connect(net->ctx, dev, handle, scomm, &dev_handle);
	case 10:
		return net->t.v10->connect(dev, &config, handle, scomm, &dev_handle);
	case 9:
		return net->t.v9->connect(dev, handle, scomm, &dev_handle);
	default:
		return net->t.v8->connect(dev, handle, scomm, &dev_handle);
	}
}

ncclResult_t abi_accept(struct abi_net *net, void *lcomm, void **rcomm)
{
	ncclNetDeviceHandle_v11_t *dev_handle = NULL;

	return ABI_SAME(net, accept, lcomm, rcomm, &dev_handle);
}

ncclResult_t abi_reg_mr(struct abi_net *net, void *comm, void *data, size_t size, void **mh)
{
	return ABI_SAME(net, regMr, comm, data, size, NCCL_PTR_HOST, mh);
}

ncclResult_t abi_dereg_mr(struct abi_net *net, void *comm, void *mh)
{
	return ABI_SAME(net, deregMr, comm, mh);
}

ncclResult_t abi_isend_tag(struct abi_net *net, void *scomm, void *data, size_t size, int tag,
			   void *mh, void **req)
{
	switch (net->version) {
	case 11:
		return net->t.v11->isend(scomm, data, size, tag, mh, NULL, req);
	case 10:
		return net->t.v10->isend(scomm, data, size, tag, mh, NULL, req);
	case 9:
		return net->t.v9->isend(scomm, data, size, tag, mh, req);
	default:
		return net->t.v8->isend(scomm, data, (int)size, tag, mh, req);
	}
}

ncclResult_t abi_isend(struct abi_net *net, void *scomm, void *data, size_t size, void *mh,
		       void **req)
{
	return abi_isend_tag(net, scomm, data, size, 0, mh, req);
}

ncclResult_t abi_irecvn(struct abi_net *net, void *rcomm, int n, void **data, const size_t *sizes,
			int *tags, void **mhs, int hint, void **req)
{
	size_t wide[8];
	int narrow[8];
	void *phandles[8] = { 0 };

	if (n < 1 || n > 8)
		return ncclInvalidArgument;
	for (int i = 0; i < n; i++) {
		wide[i] = sizes[i];
		narrow[i] = (int)sizes[i];
	}
	*req = hint ? (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION : NULL;
	switch (net->version) {
	case 11:
		return net->t.v11->irecv(rcomm, n, data, wide, tags, mhs, phandles, req);
	case 10:
		return net->t.v10->irecv(rcomm, n, data, wide, tags, mhs, phandles, req);
	case 9:
		return net->t.v9->irecv(rcomm, n, data, wide, tags, mhs, req);
	default:
		return net->t.v8->irecv(rcomm, n, data, narrow, tags, mhs, req);
	}
}

ncclResult_t abi_irecv(struct abi_net *net, void *rcomm, void *data, size_t size, void *mh,
		       int hint, void **req)
{
	int tag = 0;

	return abi_irecvn(net, rcomm, 1, &data, &size, &tag, &mh, hint, req);
}

ncclResult_t abi_test(struct abi_net *net, void *req, int *done, int *size)
{
	return ABI_SAME(net, test, req, done, size);
}

ncclResult_t abi_close_send(struct abi_net *net, void *scomm)
{
	return ABI_SAME(net, closeSend, scomm);
}

ncclResult_t abi_close_recv(struct abi_net *net, void *rcomm)
{
	return ABI_SAME(net, closeRecv, rcomm);
}

ncclResult_t abi_close_listen(struct abi_net *net, void *lcomm)
{
	return ABI_SAME(net, closeListen, lcomm);
}

static pthread_mutex_t abi_log_lock = PTHREAD_MUTEX_INITIALIZER;
static int abi_log_counts[NCCL_LOG_TRACE + 1];
static char abi_log_warnings[8192];

void abi_logger(ncclDebugLogLevel level, unsigned long flags, const char *file, int line,
		const char *fmt, ...)
{
	char msg[1024];
	va_list ap;

	(void)flags;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	pthread_mutex_lock(&abi_log_lock);
	if ((int)level >= 0 && level <= NCCL_LOG_TRACE)
		abi_log_counts[level]++;
	if (level == NCCL_LOG_WARN) {
		size_t used = strlen(abi_log_warnings);
		snprintf(abi_log_warnings + used, sizeof(abi_log_warnings) - used, "%s\n", msg);
	}
	pthread_mutex_unlock(&abi_log_lock);
	if (getenv("FTCC_TEST_VERBOSE"))
		fprintf(stderr, "nccl-log %d %s:%d %s\n", (int)level, file, line, msg);
}

int abi_log_count(ncclDebugLogLevel level)
{
	pthread_mutex_lock(&abi_log_lock);
	int n = ((int)level >= 0 && level <= NCCL_LOG_TRACE) ? abi_log_counts[level] : 0;
	pthread_mutex_unlock(&abi_log_lock);
	return n;
}

int abi_log_warned(const char *needle)
{
	pthread_mutex_lock(&abi_log_lock);
	int found = strstr(abi_log_warnings, needle) != NULL;
	pthread_mutex_unlock(&abi_log_lock);
	return found;
}

void abi_log_reset(void)
{
	pthread_mutex_lock(&abi_log_lock);
	memset(abi_log_counts, 0, sizeof(abi_log_counts));
	abi_log_warnings[0] = '\0';
	pthread_mutex_unlock(&abi_log_lock);
}

int64_t abi_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int abi_transport_is_ib(void)
{
	const char *t = getenv("FTCC_TRANSPORT");

	return t && strcmp(t, "ib") == 0;
}

void test_transport_set(const char *want)
{
	unsetenv("FTCC_TRANSPORT");
	unsetenv("FTCC_IBVERBS_LIB");
	unsetenv("IBEMU_RTR_FAILS");
	if (want && strcmp(want, "ib-no-rtr") == 0) {
		/* An HCA whose queue pairs never reach RTR: no ib connection ever comes up. */
		setenv("IBEMU_RTR_FAILS", "1000000000", 1);
		want = "ib";
	}
	if (want && strcmp(want, "no-verbs") == 0) {
		/* A machine without rdma-core: the default (auto) must load and serve TCP. */
		setenv("FTCC_IBVERBS_LIB", "/nonexistent/libibverbs.so.1", 1);
		return;
	}
	if (want && strcmp(want, "tcp") == 0) {
		setenv("FTCC_TRANSPORT", "tcp", 1);
		return;
	}
	if (!want || strcmp(want, "ib") != 0)
		return;
#ifdef FTCC_IBEMU_PATH
	setenv("FTCC_TRANSPORT", "ib", 1);
	setenv("FTCC_IBVERBS_LIB", FTCC_IBEMU_PATH, 1);
#else
	/* Asked for ib in a build without it: fail loudly rather than test tcp twice. */
	setenv("FTCC_TRANSPORT", "ib", 1);
	setenv("FTCC_IBVERBS_LIB", "/nonexistent/libibverbs.so.1", 1);
#endif
}

void test_transport_env(void)
{
	test_transport_set(getenv("FTCC_TEST_TRANSPORT"));
}

static int fabric_cut_on(void)
{
	const char *t = getenv("FTCC_TEST_TRANSPORT");

	return t && strcmp(t, "ib") == 0;
}

static void fabric_cut_dir(char *buf, size_t len)
{
	snprintf(buf, len, "/tmp/ftcc-ibemu-cut.%d", (int)getpid());
}

void test_fabric_cut_clear(void)
{
	char dir[64], path[320];
	DIR *d;
	struct dirent *e;

	if (!fabric_cut_on())
		return;
	fabric_cut_dir(dir, sizeof(dir));
	d = opendir(dir);
	if (!d)
		return;
	while ((e = readdir(d)) != NULL) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

void test_fabric_cut_env(void)
{
	char dir[64];

	if (!fabric_cut_on())
		return;
	test_fabric_cut_clear(); /* a cut a failed test left behind */
	fabric_cut_dir(dir, sizeof(dir));
	setenv("IBEMU_CUT_DIR", dir, 1);
}

const char *test_log_transport(const char *log, const char *want)
{
	int want_ib;

	if (!want)
		want = getenv("FTCC_TEST_TRANSPORT");
	want_ib = want && (strcmp(want, "ib") == 0 || strcmp(want, "ib-no-rtr") == 0);
	if (!strstr(log, "listening on"))
		return NULL; /* no data plane started, or its line scrolled out */
	if (want_ib != (strstr(log, "frames over ib") != NULL))
		return want_ib ? "tcp, not ib" : "ib, not tcp";
	return NULL;
}

/* Creates (@on) or removes the cut file @name in this test process's directory. */
static int fabric_cut_file(const char *name, int on)
{
	char dir[64], path[320];
	FILE *f;

	if (!fabric_cut_on())
		return 0;
	fabric_cut_dir(dir, sizeof(dir));
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	if (!on)
		return unlink(path) == 0 ? 0 : -errno;
	if (mkdir(dir, 0700) != 0 && errno != EEXIST)
		return -errno;
	f = fopen(path, "w");
	if (!f)
		return -errno;
	fclose(f);
	return 0;
}

int test_fabric_cut(int pid, int on)
{
	char name[32];

	snprintf(name, sizeof(name), "%d", pid);
	return fabric_cut_file(name, on);
}

int test_fabric_cut_way(int from, int to, int on)
{
	char name[32];

	snprintf(name, sizeof(name), "%d-%d", from, to);
	return fabric_cut_file(name, on);
}

/* Entries of @path other than "." and "..". For /proc/self/fd the count includes the fd of
 * the directory stream itself, the same on every call, so before/after counts compare. */
static int abi_count_dir(const char *path)
{
	DIR *d = opendir(path);
	struct dirent *e;
	int n = 0;

	if (!d)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
			n++;
	}
	closedir(d);
	return n;
}

int abi_thread_count(void)
{
	return abi_count_dir("/proc/self/task");
}

int abi_fd_count(void)
{
	return abi_count_dir("/proc/self/fd");
}
