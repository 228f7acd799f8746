/* SPDX-License-Identifier: BSD-3-Clause */
/* The CollNet plug-in, v11 implementation: NCCL's cross-node allreduce as ops of the ftcc
 * engine (include/ftcc.h), one engine group per collComm.
 *
 * listen binds the control port of this node's member and hands it out in the handle (boot.h);
 * connect forms the group from every node's handle and confirms it with one allreduce that
 * must count every node, so that it succeeds or fails on all nodes together; iallreduce starts
 * one engine op (NCCL issues them in the same order on every node, so the engine's sequence
 * numbers match); test polls it and never blocks. A dead node never makes an op fail: the
 * survivors finish it under FTCC_DEGRADED and a WARN names the node once. Only a group that
 * can no longer make progress (a minority partition, fewer inputs than FTCC_COLLNET_MIN_NODES or
 * FTCC_COLLNET_MIN_PERCENT of the nodes,
 * FTCC_DEGRADED=fail) turns into ncclRemoteError. An op the nodes called with different counts,
 * types or operators fails on every node with ncclInvalidUsage, and the group goes on. Close
 * and finalize never wait for a peer.
 */
#define _GNU_SOURCE
#include "collnet.h"
#include "collnet_comm.h"

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ftcc.h"
#include "ftcc/boot.h"
#include "ftcc/comm_ext.h"
#include "ftcc/log.h"
#include "ftcc/ports.h"
#include "ftcc/reduce.h"
#include "ftcc/settings.h"
#include "ftcc/tcp_dev.h"

#define CN_CTX_MAGIC 0x7843434eu    /* "NCCx" */
#define CN_LISTEN_MAGIC 0x6c43434eu /* "NCCl" */
#define CN_COMM_MAGIC 0x6343434eu   /* "NCCc" */
#define CN_REQ_MAGIC 0x7243434eu    /* "NCCr" */
#define CN_MR_MAGIC 0x6d43434eu	    /* "NCCm" */

/* Polling period of connect's confirmation op. */
#define CN_CONFIRM_POLL_NS 200000
/* The least time the confirmation op gets, whatever is left of the connect bound. */
#define CN_CONFIRM_MIN_NS 2000000000LL
/* Lanes of a CollNet communicator when FTCC_LANES is 0 (its default): NCCL keeps up to 8 ops in
 * flight per channel, and under NCCL four lanes ran the allreduce 2 to 4 times faster than one
 * from 2 MiB up (perf/gpu/RESULTS.md), for 4 threads and 4 sets of connections per node. */
#define CN_AUTO_LANES 4

struct cn_ctx {
	uint32_t magic;
	uint64_t comm_id;
	void *net_ctx; /* the net plug-in ctx holding the transport (devices, properties) */
	int owned;     /* 1: ours to finalize (v11); 0: the pre-v11 default ctx */
};

struct cn_listen {
	uint32_t magic;
	int fd; /* the control port, listening; the member listens on a duplicate */
	int dev;
	struct boot_handle self;
};

struct cn_mr {
	uint32_t magic;
	void *data;
	size_t size;
};

/* Every ctx, listen comm, collComm and memory handle handed to NCCL, so that a second close,
 * deregMr or finalize of the same pointer is refused instead of touching freed memory. Only
 * the cold calls (close, dereg, finalize) consult it; the data path checks magics. */
struct cn_live {
	const void *p;
	struct cn_live *next;
};
static pthread_mutex_t cn_live_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cn_live *cn_live_head;

static int cn_live_add(const void *p)
{
	struct cn_live *e = malloc(sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->p = p;
	pthread_mutex_lock(&cn_live_lock);
	e->next = cn_live_head;
	cn_live_head = e;
	pthread_mutex_unlock(&cn_live_lock);
	return 0;
}

/* Forgets @p: 1 when it was live, 0 when it never was or is already gone. */
static int cn_live_take(const void *p)
{
	struct cn_live **pp, *e = NULL;

	pthread_mutex_lock(&cn_live_lock);
	for (pp = &cn_live_head; *pp; pp = &(*pp)->next) {
		if ((*pp)->p == p) {
			e = *pp;
			*pp = e->next;
			break;
		}
	}
	pthread_mutex_unlock(&cn_live_lock);
	free(e);
	return e != NULL;
}

static int64_t cn_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t cn_random64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
		v = (uint64_t)cn_now_ns() ^ ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)&v;
	return v ? v : 1;
}

/* ---- life cycle ------------------------------------------------------------------------ */

ncclResult_t collnet_init(void **ctx, uint64_t comm_id, ncclDebugLogger_t logger)
{
	struct cn_ctx *c;
	void *net = NULL;
	ncclResult_t res;

	if (!ctx)
		return plugin_result(-EINVAL, "collnet init");
	*ctx = NULL;
	/* A net ctx of our own: the transport reference (devices, properties), the settings,
	 * NCCL's logger. */
	res = plugin_init(&net, comm_id, NULL, logger, NULL);
	if (res != ncclSuccess)
		return res;
	c = calloc(1, sizeof(*c));
	if (!c) {
		plugin_finalize(net);
		return plugin_result(-ENOMEM, "collnet init");
	}
	*c = (struct cn_ctx){
		.magic = CN_CTX_MAGIC, .comm_id = comm_id, .net_ctx = net, .owned = 1
	};
	if (cn_live_add(c)) {
		free(c);
		plugin_finalize(net);
		return plugin_result(-ENOMEM, "collnet init");
	}
	*ctx = c;
	return ncclSuccess;
}

ncclResult_t collnet_finalize(void *ctx)
{
	struct cn_ctx *c = ctx;

	if (!c)
		return ncclSuccess; /* NCCL finalizes the ctx of a failed init too */
	if (!cn_live_take(c) || c->magic != CN_CTX_MAGIC)
		return plugin_result(-EINVAL, "collnet finalize");
	c->magic = 0;
	if (c->owned)
		plugin_finalize(c->net_ctx);
	free(c);
	return ncclSuccess;
}

/* The pre-v11 tables' ctx: one for the library, over the net plug-in's default ctx. */
static pthread_mutex_t cn_global_lock = PTHREAD_MUTEX_INITIALIZER;
static struct cn_ctx cn_global;

ncclResult_t collnet_init_global(ncclDebugLogger_t logger)
{
	ncclResult_t res = plugin_init_global(logger, NULL);

	if (res != ncclSuccess)
		return res;
	pthread_mutex_lock(&cn_global_lock);
	if (cn_global.magic != CN_CTX_MAGIC) {
		cn_global =
			(struct cn_ctx){ .magic = CN_CTX_MAGIC, .net_ctx = plugin_global_ctx() };
	}
	pthread_mutex_unlock(&cn_global_lock);
	return ncclSuccess;
}

void *collnet_global_ctx(void)
{
	void *c;

	pthread_mutex_lock(&cn_global_lock);
	c = cn_global.magic == CN_CTX_MAGIC ? &cn_global : NULL;
	pthread_mutex_unlock(&cn_global_lock);
	return c;
}

ncclResult_t collnet_devices(int *ndev)
{
	return plugin_devices(ndev);
}

ncclResult_t collnet_get_properties(int dev, ncclNetProperties_v11_t *props)
{
	/* The same devices as the net plug-in, with the same names: NCCL puts a net device and
	 * the collnet device of the same name on one topology node. The transport's answer
	 * already fits collnet: host memory, 512 MiB per call. */
	return plugin_get_properties(dev, props);
}

/* ---- listen ---------------------------------------------------------------------------- */

/* The address of device @dev, port 0, into @ss: the interface of the same name (tcp), else the
 * one on the same PCI device (an HCA's IPoIB or RoCE netdev), else the first interface
 * FTCC_SOCKET_IFNAME lets through (an HCA whose netdev the filter leaves out: the rendezvous
 * then runs there, as NCCL's bootstrap does). 0 or -errno. */
static int cn_dev_addr(int dev, struct sockaddr_storage *ss, socklen_t *len)
{
	struct tcp_dev devs[TCP_DEV_MAX];
	ncclNetProperties_v11_t p;
	int n, pick = -1;

	if (plugin_get_properties(dev, &p) != ncclSuccess || !p.name)
		return -EINVAL;
	n = tcp_dev_discover(devs, TCP_DEV_MAX);
	for (int i = 0; i < n && pick < 0; i++) {
		if (strcmp(devs[i].name, p.name) == 0)
			pick = i;
	}
	const struct ftcc_transport_ops *t = plugin_transport();
	int hca = t && strcmp(t->name, "tcp") != 0; /* a tcp device that vanished has no stand-in */

	for (int i = 0; i < n && pick < 0 && hca && p.pciPath && p.pciPath[0]; i++) {
		if (strcmp(devs[i].pci_path, p.pciPath) == 0)
			pick = i;
	}
	if (pick < 0 && n > 0 && hca) {
		pick = 0;
		ftcc_info("CollNet listen: device %d (%s) has no interface of its own; using %s",
			  dev, p.name, devs[0].name);
	}
	if (pick < 0) {
		ftcc_warn("CollNet listen: device %d (%s) has no address any more", dev, p.name);
		return n < 0 ? n : -ENODEV;
	}
	*ss = devs[pick].addr;
	*len = devs[pick].addr_len;
	return 0;
}

ncclResult_t collnet_listen(void *ctx, int dev, void *handle, void **listen_comm)
{
	struct cn_ctx *c = ctx;
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	struct cn_listen *l;
	int one = 1, err;

	if (listen_comm)
		*listen_comm = NULL;
	if (!c || c->magic != CN_CTX_MAGIC || !handle || !listen_comm)
		return plugin_result(-EINVAL, "collnet listen");
	err = cn_dev_addr(dev, &ss, &len);
	if (err)
		return plugin_result(err, "collnet listen");
	l = calloc(1, sizeof(*l));
	if (!l)
		return plugin_result(-ENOMEM, "collnet listen");
	l->fd = socket(ss.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (l->fd < 0) {
		err = -errno;
		goto free_l;
	}
	setsockopt(l->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	err = ftcc_bind_listener(l->fd, (struct sockaddr *)&ss, len);
	if (err == 0 &&
	    (listen(l->fd, 128) < 0 || getsockname(l->fd, (struct sockaddr *)&l->self.addr,
						   &(socklen_t){ sizeof(l->self.addr) }) < 0))
		err = -errno;
	if (err)
		goto close_fd;
	l->magic = CN_LISTEN_MAGIC;
	l->dev = dev;
	l->self.comm_id = c->comm_id;
	l->self.nonce = cn_random64();
	l->self.digest = boot_settings_digest();
	memset(handle, 0, NCCL_NET_HANDLE_MAXSIZE);
	err = boot_handle_encode(&l->self, handle);
	if (!err)
		err = cn_live_add(l);
	if (err)
		goto close_fd;
	char a[64];
	ftcc_info("CollNet: listening on %s (device %d, comm 0x%016" PRIx64 ")",
		  boot_handle_addr(&l->self, a, sizeof(a)), dev, c->comm_id);
	*listen_comm = l;
	return ncclSuccess;

close_fd:
	close(l->fd);
free_l:
	free(l);
	return plugin_result(err, "collnet listen");
}

ncclResult_t collnet_close_listen(void *listen_comm)
{
	struct cn_listen *l = listen_comm;

	if (!l || !cn_live_take(l) || l->magic != CN_LISTEN_MAGIC)
		return plugin_result(-EINVAL, "collnet closeListen");
	l->magic = 0;
	close(l->fd);
	free(l);
	return ncclSuccess;
}

/* ---- connect --------------------------------------------------------------------------- */

static void cn_comm_free(struct cn_comm *cc)
{
	pthread_mutex_destroy(&cc->mu);
	pthread_mutex_destroy(&cc->status_mu);
	free(cc->status_pending);
	free(cc->addrs);
	free(cc->alive);
	free(cc->members);
	free(cc->lost_epoch);
	free(cc->lost_ms);
	free(cc);
}

static struct cn_comm *cn_comm_alloc(uint32_t n)
{
	struct cn_comm *cc = calloc(1, sizeof(*cc));

	if (!cc)
		return NULL;
	pthread_mutex_init(&cc->mu, NULL);
	pthread_mutex_init(&cc->status_mu, NULL);
	cc->addrs = calloc(n, sizeof(*cc->addrs));
	cc->alive = calloc(n, 1);
	cc->members = calloc(n, sizeof(*cc->members));
	cc->lost_epoch = calloc(n, sizeof(*cc->lost_epoch));
	cc->lost_ms = calloc(n, sizeof(*cc->lost_ms));
	if (!cc->addrs || !cc->alive || !cc->members || !cc->lost_epoch || !cc->lost_ms) {
		cn_comm_free(cc);
		return NULL;
	}
	cc->nnodes = n;
	for (int i = 0; i < CN_MAX_REQS; i++)
		cc->reqs[i].next_free = i + 1 < CN_MAX_REQS ? i + 1 : -1;
	return cc;
}

/* Runs the confirmation ops, one per lane (each lane's first op, so that every lane's
 * connections are made here): every node contributes 1 to each, and the group stands only if
 * every result counts all @n of them. A lane that cannot connect or allocate thus fails connect
 * on every node alike instead of a training op later. Bounded by @deadline_ns. 0, or
 * -ETIMEDOUT / -ENOTCONN with @why. */
static int cn_confirm(struct cn_comm *cc, uint32_t n, int64_t deadline_ns, uint64_t *epoch,
		      char *why, size_t why_len)
{
	struct timespec pause = { 0, CN_CONFIRM_POLL_NS };
	ftcc_comm_t *comm = cc->comm;
	uint32_t nl = ftcc_comm_lanes(comm);
	/* The ops' buffers live in @cc: on an early return the ops still in flight may write
	 * them until the caller's ftcc_comm_destroy() has stopped the lanes. */
	const int32_t *one = &cc->confirm_one;
	int32_t *sum = cc->confirm_sum;
	struct ftcc_record rec[CN_MAX_LANES];
	ftcc_request_t *req[CN_MAX_LANES] = { NULL };
	int done[CN_MAX_LANES] = { 0 }, rcs[CN_MAX_LANES] = { 0 };
	uint32_t left;
	int rc;

	if (nl < 1 || nl > CN_MAX_LANES) {
		snprintf(why, why_len, "%u lanes (at most %d)", nl, CN_MAX_LANES);
		return -ENOTCONN;
	}
	cc->confirm_one = 1;
	memset(cc->confirm_sum, 0, sizeof(cc->confirm_sum));
	for (uint32_t i = 0; i < nl; i++) {
		rc = ftcc_iallreduce(comm, one, &sum[i], 1, FTCC_INT32, FTCC_SUM, &req[i]);
		if (rc) {
			/* The requests already started go with the communicator. */
			snprintf(why, why_len, "cannot start confirmation op %u: %s", i,
				 ftcc_strerror(rc));
			return -ENOTCONN;
		}
	}
	for (left = nl;;) {
		for (uint32_t i = 0; i < nl; i++) {
			if (!done[i]) {
				rcs[i] = ftcc_test(req[i], &done[i], &rec[i]);
				left -= done[i] ? 1 : 0;
			}
		}
		if (!left)
			break;
		if (cn_now_ns() > deadline_ns) {
			snprintf(why, why_len, "the group did not confirm in time");
			return -ETIMEDOUT;
		}
		nanosleep(&pause, NULL);
	}
	for (uint32_t i = 0; i < nl; i++) {
		int bad = rcs[i] && rcs[i] != FTCC_ERR_DEGRADED;

		if (bad || rec[i].ncontrib != n || sum[i] != (int32_t)n) {
			snprintf(why, why_len,
				 "confirmation op %u (lane %u) counted %u of %u nodes (%s)", i, i,
				 bad ? 0 : rec[i].ncontrib, n,
				 rcs[i] ? ftcc_strerror(rcs[i]) : "a node failed meanwhile");
			return -ENOTCONN;
		}
	}
	*epoch = 0;
	for (uint32_t i = 0; i < nl; i++)
		*epoch = rec[i].epoch > *epoch ? rec[i].epoch : *epoch;
	return 0;
}

/* Decodes and checks all handles, then forms and confirms the group. 0 or -errno, with
 * @why saying what went wrong. */
static int cn_connect(void *handles[], uint32_t n, uint32_t rank, struct cn_listen *l,
		      struct cn_comm *cc, char *why, size_t why_len)
{
	struct boot_handle *hs = calloc(n, sizeof(*hs));
	const char **addrs = calloc(n, sizeof(*addrs));
	struct ftcc_create_ext ext = {
		.has_listen_fd = 1, .listen_fd = l->fd, .no_p2p = 1, .auto_lanes = CN_AUTO_LANES
	};
	struct ftcc_config cfg;
	int64_t bound_ms = ftcc_setting_int(FTCC_SET_CONNECT_TIMEOUT_MS);
	int64_t deadline = cn_now_ns() + bound_ms * 1000000;
	uint64_t epoch = 0;
	int rc = -EINVAL;

	if (!hs || !addrs) {
		snprintf(why, why_len, "out of memory");
		rc = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < n; i++) {
		int err = handles[i] ?
				  boot_handle_decode(handles[i], NCCL_NET_HANDLE_MAXSIZE, &hs[i]) :
				  -EBADMSG;
		if (err) {
			snprintf(why, why_len, "the handle of node %u is %s", i,
				 err == -EPROTO ? "of another ftcc version" : "not an ftcc handle");
			goto out;
		}
		addrs[i] = boot_handle_addr(&hs[i], cc->addrs[i], sizeof(cc->addrs[i]));
	}
	if (hs[rank].nonce != l->self.nonce) {
		snprintf(why, why_len, "handles[%u] is not the handle this node's listen made",
			 rank);
		goto out;
	}
	if (boot_group_check(hs, n, cc->group, sizeof(cc->group), why, why_len))
		goto out;
	ftcc_config_init(&cfg);
	cfg.group = cc->group;
	cfg.rank = rank;
	cfg.size = n;
	cfg.addrs = addrs;
	cfg.connect_timeout_ms = bound_ms;
	rc = ftcc_comm_create_ext(&cfg, &ext, &cc->comm);
	if (rc) {
		snprintf(why, why_len, "the group did not form: %s", ftcc_strerror(rc));
		rc = rc == FTCC_ERR_TIMEOUT ? -ETIMEDOUT : -ENOTCONN;
		cc->comm = NULL;
		goto out;
	}
	/* Formation commits on every node at once; a node that formed at the end of the bound
	 * still gets a moment to confirm rather than fail where the others succeed. */
	if (deadline < cn_now_ns() + CN_CONFIRM_MIN_NS)
		deadline = cn_now_ns() + CN_CONFIRM_MIN_NS;
	rc = cn_confirm(cc, n, deadline, &epoch, why, why_len);
	if (rc) {
		ftcc_comm_destroy(cc->comm);
		cc->comm = NULL;
		goto out;
	}
	cc->seen_epoch = epoch;
	memset(cc->alive, 1, n);
out:
	free(hs);
	free(addrs);
	return rc;
}

ncclResult_t collnet_connect(void *handles[], int nranks, int rank, void *listen_comm,
			     void **coll_comm)
{
	struct cn_listen *l = listen_comm;
	struct cn_comm *cc;
	char why[320] = "";
	int64_t t0 = cn_now_ns();
	int err;

	if (!coll_comm)
		return plugin_result(-EINVAL, "collnet connect");
	*coll_comm = NULL;
	if (!handles || !l || l->magic != CN_LISTEN_MAGIC || nranks < 1 ||
	    nranks > FTCC_MAX_MEMBERS || rank < 0 || rank >= nranks) {
		ftcc_warn("CollNet connect: bad arguments (%d nodes, node %d)", nranks, rank);
		return plugin_result(-EINVAL, "collnet connect");
	}
	cc = cn_comm_alloc((uint32_t)nranks);
	if (!cc)
		return plugin_result(-ENOMEM, "collnet connect");
	cc->rank = (uint32_t)rank;
	cc->min_nodes = ftcc_setting_int(FTCC_SET_COLLNET_MIN_NODES);
	cc->min_percent = ftcc_setting_int(FTCC_SET_COLLNET_MIN_PERCENT);
	err = cn_connect(handles, (uint32_t)nranks, (uint32_t)rank, l, cc, why, sizeof(why));
	if (err) {
		ftcc_warn("CollNet connect: node %d of %d: %s; no CollNet for this communicator",
			  rank, nranks, why);
		cn_comm_free(cc);
		return plugin_result(err, "collnet connect");
	}
	if (cn_live_add(cc)) {
		ftcc_comm_destroy(cc->comm);
		cn_comm_free(cc);
		return plugin_result(-ENOMEM, "collnet connect");
	}
	cc->magic = CN_COMM_MAGIC;
	cn_status_mark(cc, "running");
	cn_status_flush(cc);
	ftcc_info("CollNet: node %d of %d in group %s (epoch %" PRIu64 ", %u lanes), connected in "
		  "%.1f ms",
		  rank, nranks, cc->group, cc->seen_epoch, ftcc_comm_lanes(cc->comm),
		  (double)(cn_now_ns() - t0) / 1e6);
	*coll_comm = cc;
	return ncclSuccess;
}

ncclResult_t collnet_close_coll(void *coll_comm)
{
	struct cn_comm *cc = coll_comm;
	int64_t t0 = cn_now_ns();

	if (!cc || !cn_live_take(cc) || cc->magic != CN_COMM_MAGIC)
		return plugin_result(-EINVAL, "collnet closeColl");
	cc->magic = 0;
	/* Bounded whatever the peers do; frees the requests NCCL will never test again. */
	ftcc_comm_destroy(cc->comm);
	cn_status_mark(cc, cc->failed ? "failed" : "closed");
	cn_status_flush(cc);
	ftcc_info("CollNet: node %u left group %s (closed in %.1f ms)", cc->rank, cc->group,
		  (double)(cn_now_ns() - t0) / 1e6);
	cn_comm_free(cc);
	return ncclSuccess;
}

/* ---- what the engine reduces ----------------------------------------------------------- */

ncclResult_t collnet_reduce_support(ncclDataType_t type, ncclRedOp_t op, int *supported)
{
	if (!supported)
		return plugin_result(-EINVAL, "collnet reduceSupport");
	/* The engine's kernels cover every type and built-in operator, bit-reproducibly (the
	 * same answer on every node, since it depends on nothing else). User-defined operators
	 * (ncclNumOps and up) are not ours to apply. */
	*supported = (unsigned)type < FTCC_DTYPE_COUNT && (unsigned)op < FTCC_REDOP_COUNT;
	return ncclSuccess;
}

/* ---- memory registration --------------------------------------------------------------- */

ncclResult_t collnet_reg_mr(void *coll_comm, void *data, size_t size, int type, void **mhandle)
{
	struct cn_comm *cc = coll_comm;
	struct cn_mr *mr;

	if (mhandle)
		*mhandle = NULL;
	if (!cc || cc->magic != CN_COMM_MAGIC || !mhandle)
		return plugin_result(-EINVAL, "collnet regMr");
	if (type != NCCL_PTR_HOST) {
		/* Our properties say host memory only; the CPU reduces. */
		ftcc_warn("CollNet regMr: memory type %d; only host memory (NCCL_PTR_HOST) is "
			  "supported",
			  type);
		return ncclInternalError;
	}
	mr = malloc(sizeof(*mr));
	if (!mr)
		return plugin_result(-ENOMEM, "collnet regMr");
	*mr = (struct cn_mr){ .magic = CN_MR_MAGIC, .data = data, .size = size };
	if (cn_live_add(mr)) {
		free(mr);
		return plugin_result(-ENOMEM, "collnet regMr");
	}
	*mhandle = mr;
	return ncclSuccess;
}

ncclResult_t collnet_reg_mr_dmabuf(void *coll_comm, void *data, size_t size, int type,
				   uint64_t offset, int fd, void **mhandle)
{
	(void)offset;
	(void)fd;
	return collnet_reg_mr(coll_comm, data, size, type, mhandle);
}

ncclResult_t collnet_dereg_mr(void *coll_comm, void *mhandle)
{
	struct cn_mr *mr = mhandle;

	(void)coll_comm; /* may already be closing; the handle stands alone */
	if (!mr || !cn_live_take(mr) || mr->magic != CN_MR_MAGIC)
		return plugin_result(-EINVAL, "collnet deregMr");
	mr->magic = 0;
	free(mr);
	return ncclSuccess;
}

/* ---- the data path --------------------------------------------------------------------- */

ncclResult_t collnet_iallreduce(void *coll_comm, void *send, void *recv, size_t count,
				ncclDataType_t type, ncclRedOp_t op, void *send_mh, void *recv_mh,
				void **request)
{
	struct cn_comm *cc = coll_comm;
	ftcc_request_t *r = NULL;
	struct cn_req *q;
	int64_t t0;
	int slot, rc;

	(void)send_mh;
	(void)recv_mh;
	if (!request)
		return plugin_result(-EINVAL, "collnet iallreduce");
	*request = NULL;
	if (!cc || cc->magic != CN_COMM_MAGIC || (unsigned)type >= FTCC_DTYPE_COUNT ||
	    (unsigned)op >= FTCC_REDOP_COUNT || (count && (!send || !recv))) {
		ftcc_warn("CollNet iallreduce: bad arguments (type %d, op %d, count %zu)",
			  (int)type, (int)op, count);
		return plugin_result(-EINVAL, "collnet iallreduce");
	}
	pthread_mutex_lock(&cc->mu);
	if (cc->failed) {
		ncclResult_t failed = cc->failed;

		pthread_mutex_unlock(&cc->mu);
		return failed;
	}
	slot = cc->free_head;
	if (slot >= 0)
		cc->free_head = cc->reqs[slot].next_free;
	pthread_mutex_unlock(&cc->mu);
	if (slot < 0)
		return ncclSuccess; /* every slot in flight: NCCL retries */
	/* TRACE (NCCL_DEBUG=TRACE or FTCC_DEBUG=TRACE): one line per op posted and completed. */
	t0 = ftcc_log_get_level() >= FTCC_LOG_TRACE ? cn_now_ns() : 0;
	rc = ftcc_iallreduce(cc->comm, send, recv, count, (enum ftcc_dtype)type,
			     (enum ftcc_redop)op, &r);
	if (rc) {
		pthread_mutex_lock(&cc->mu);
		cc->reqs[slot].next_free = cc->free_head;
		cc->free_head = slot;
		pthread_mutex_unlock(&cc->mu);
		if (rc == FTCC_ERR_BUSY)
			return ncclSuccess;
		/* This node cannot start an op the others will start: it leaves the group now
		 * (they finish it without it), and stays failed for NCCL. */
		ftcc_warn("CollNet iallreduce: group %s: %s; node %u leaves the group", cc->group,
			  ftcc_strerror(rc), cc->rank);
		ftcc_comm_abort(cc->comm);
		pthread_mutex_lock(&cc->mu);
		cc->failed = rc == FTCC_ERR_NOMEM ? ncclSystemError : ncclRemoteError;
		snprintf(cc->fail_why, sizeof(cc->fail_why), "could not start an op: %s",
			 ftcc_strerror(rc));
		cn_status_mark(cc, "failed");
		pthread_mutex_unlock(&cc->mu);
		cn_status_flush(cc);
		return rc == FTCC_ERR_NOMEM ? ncclSystemError : ncclRemoteError;
	}
	q = &cc->reqs[slot];
	q->cc = cc;
	q->r = r;
	q->bytes = count * ftcc_dtype_size((enum ftcc_dtype)type);
	q->magic = CN_REQ_MAGIC;
	q->t_post_ns = t0;
	if (t0) {
		int now = atomic_fetch_add(&cc->in_flight, 1) + 1;

		ftcc_trace("CollNet group %s: op of %zu bytes posted at %.3f ms, %d in flight",
			   cc->group, q->bytes, (double)t0 / 1e6, now);
	}
	*request = q;
	return ncclSuccess;
}

ncclResult_t collnet_test(void *request, int *done, int *size)
{
	struct cn_req *q = request;
	struct cn_comm *cc;
	struct ftcc_record rec;
	ncclResult_t res;
	size_t bytes;
	int fin = 0, rc;

	if (!q || q->magic != CN_REQ_MAGIC || !done)
		return plugin_result(-EINVAL, "collnet test");
	cc = q->cc;
	rc = ftcc_test(q->r, &fin, &rec);
	*done = fin;
	if (!fin)
		return ncclSuccess;
	bytes = q->bytes;
	if (q->t_post_ns) {
		int64_t t = cn_now_ns();
		int left = atomic_fetch_sub(&cc->in_flight, 1) - 1;

		ftcc_trace("CollNet group %s: op %" PRIu64 " of %zu bytes seen done at %.3f ms, "
			   "%.3f ms after its post (%s), %d in flight",
			   cc->group, rc == 0 || rc == FTCC_ERR_DEGRADED ? rec.seq : 0, bytes,
			   (double)t / 1e6, (double)(t - q->t_post_ns) / 1e6, ftcc_strerror(rc),
			   left);
	}
	pthread_mutex_lock(&cc->mu);
	q->magic = 0;
	q->r = NULL;
	q->next_free = cc->free_head;
	cc->free_head = (int)(q - cc->reqs);
	res = cn_settle(cc, rc, &rec);
	pthread_mutex_unlock(&cc->mu);
	cn_status_flush(cc);
	if (size)
		*size = bytes > INT32_MAX ? INT32_MAX : (int)bytes;
	return res;
}

ncclResult_t collnet_iflush(void *coll_comm, void *data, int size, void *mhandle, void **request)
{
	(void)coll_comm;
	(void)data;
	(void)size;
	(void)mhandle;
	if (!request)
		return plugin_result(-EINVAL, "collnet iflush");
	/* Host memory: nothing to flush; NCCL reads a NULL request as done. */
	*request = NULL;
	return ncclSuccess;
}

PLUGIN_EXPORT extern const ncclCollNet_v11_t ncclCollNetPlugin_v11;

PLUGIN_EXPORT const ncclCollNet_v11_t ncclCollNetPlugin_v11 = {
	.name = PLUGIN_NET_NAME,
	.init = collnet_init,
	.devices = collnet_devices,
	.getProperties = collnet_get_properties,
	.listen = collnet_listen,
	.connect = collnet_connect,
	.reduceSupport = collnet_reduce_support,
	.regMr = collnet_reg_mr,
	.regMrDmaBuf = collnet_reg_mr_dmabuf,
	.deregMr = collnet_dereg_mr,
	.iallreduce = collnet_iallreduce,
	.iallgather = NULL,	/* NCCL then keeps AllGather off CollNet */
	.ireducescatter = NULL, /* likewise ReduceScatter */
	.iflush = collnet_iflush,
	.test = collnet_test,
	.closeColl = collnet_close_coll,
	.closeListen = collnet_close_listen,
	.makeVDevice = NULL,
	.finalize = collnet_finalize,
};
