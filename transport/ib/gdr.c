/* SPDX-License-Identifier: BSD-3-Clause */
/* GPU memory on the HCA (NCCL_PTR_CUDA): which registrations work on this host, the
 * registration itself, and the flush.
 *
 * - dma-buf first: the HCA's driver takes ibv_reg_dmabuf_mr (probed once per device with fd -1,
 *   as NCCL does: EOPNOTSUPP or EPROTONOSUPPORT mean no), and the dma-buf fd of a CUDA range
 *   comes from cuMemGetHandleForAddressRange in CUDA's driver, loaded at run time
 *   (FTCC_CUDA_LIB). NCCL exports its own fds and calls regMrDmaBuf; this file serves
 *   regMr(NCCL_PTR_CUDA). FTCC_IB_DMABUF=0 turns dma-buf off.
 * - else peer memory: with nvidia-peermem (or the older nv_peer_mem) loaded, ibv_reg_mr takes a
 *   device pointer as it is.
 * - the flush: the HCA's writes into GPU memory may still be in flight on PCIe when their
 *   completion arrives; a read through the same HCA orders them. iflush posts a one-byte RDMA
 *   read from the received buffer into host memory on a queue pair connected to itself (one
 *   per device, made at the first flush), completed through test.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ib_int.h"

#define CU_DMA_BUF_FD 1		      /* CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD */
#define IB_FLUSH_QP_DEPTH 256	      /* reads on the queue pair at once */
#define IB_FLUSH_RETRY_NS 10000000ull /* between attempts to repair the flush */

/* CUDA's driver API, the two calls used (cuda.h's types: CUresult is an int, CUdeviceptr a
 * 64-bit integer). */
static struct {
	int (*init)(unsigned int flags);
	int (*get_handle)(void *handle, unsigned long long dptr, size_t size, int type,
			  unsigned long long flags);
} cu;
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

static void cu_load(void)
{
	const char *path = ftcc_setting_str(FTCC_SET_CUDA_LIB);
	void *lib;

	if (!path || !*path)
		path = "libcuda.so.1";
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		ftcc_info("ib: %s not loaded (%s): no dma-buf of GPU memory", path, dlerror());
		return;
	}
	*(void **)&cu.init = dlsym(lib, "cuInit");
	*(void **)&cu.get_handle = dlsym(lib, "cuMemGetHandleForAddressRange");
	if (!cu.init || !cu.get_handle || cu.init(0) != 0) {
		ftcc_info(
			"ib: %s has no usable cuMemGetHandleForAddressRange (CUDA 11.7 or later): "
			"no dma-buf of GPU memory",
			path);
		memset(&cu, 0, sizeof(cu));
	}
	/* Never dlclose: NCCL holds the same driver. */
}

static int cuda_loaded(void)
{
	pthread_once(&cu_once, cu_load);
	return cu.get_handle != NULL;
}

void ib_gdr_probe(struct ib_dev *d)
{
	d->gpu = 0;
	if (ib_gdr_peermem_at(NULL))
		d->gpu |= IB_GPU_PEERMEM;
	if (ibv.reg_dmabuf_mr && ftcc_setting_int(FTCC_SET_IB_DMABUF)) {
		errno = 0;
		struct ibv_mr *mr = ibv.reg_dmabuf_mr(d->pd, 0, 0, 0, -1, 0);

		if (mr)
			ibv.dereg_mr(mr); /* no driver takes fd -1; never keep it */
		else if (errno != EOPNOTSUPP && errno != EPROTONOSUPPORT)
			d->gpu |= IB_GPU_DMABUF;
	}
	pthread_mutex_init(&d->flush_lock, NULL);
}

int ib_gdr_ptr_support(const struct ib_dev *d)
{
	int s = FTCC_PTR_HOST;

	/* dma-buf serves regMr(CUDA) only through CUDA's driver; a process without it has no
	 * GPU memory to offer anyway. */
	if ((d->gpu & IB_GPU_DMABUF) && cuda_loaded())
		s |= FTCC_PTR_CUDA | FTCC_PTR_DMABUF;
	if (d->gpu & IB_GPU_PEERMEM)
		s |= FTCC_PTR_CUDA;
	return s;
}

struct ibv_mr *ib_gdr_reg(struct ib_dev *d, uintptr_t start, size_t len, int access)
{
	struct ibv_mr *mr = NULL;
	int fd = -1, err = EOPNOTSUPP;

	if ((d->gpu & IB_GPU_DMABUF) && cuda_loaded()) {
		int r = cu.get_handle(&fd, start, len, CU_DMA_BUF_FD, 0);

		if (r == 0) {
			/* The fd's first byte is @start: offset 0, iova @start (same page offset). */
			mr = ibv.reg_dmabuf_mr(d->pd, 0, len, start, fd, access);
			err = mr ? 0 : errno;
			close(fd); /* the MR holds its own reference to the dma-buf */
			if (mr)
				return mr;
			ftcc_info("ib: ibv_reg_dmabuf_mr of %zu bytes of GPU memory on %s: %s", len,
				  d->name, strerror(err));
		} else {
			ftcc_info(
				"ib: no dma-buf for %zu bytes of GPU memory at %#lx (CUDA error %d)",
				len, (unsigned long)start, r);
			err = EINVAL;
		}
	}
	if (d->gpu & IB_GPU_PEERMEM)
		return ibv.reg_mr(d->pd, (void *)start, len, access);
	errno = err;
	return NULL;
}

/* Destroys the flush's queue pair and CQ (the host page and its MR stay). */
static void flush_drop_qp(struct ib_dev *d)
{
	if (d->flush_qp)
		ibv.destroy_qp(d->flush_qp);
	if (d->flush_cq)
		ibv.destroy_cq(d->flush_cq);
	d->flush_qp = NULL;
	d->flush_cq = NULL;
}

/* The loopback queue pair: INIT with remote read allowed, then RTR and RTS towards itself.
 * Caller holds d->flush_lock. 0 or -errno. */
static int flush_open(struct ib_dev *d)
{
	struct ibv_qp_init_attr ia = { .qp_type = IBV_QPT_RC,
				       .cap = { .max_send_wr = IB_FLUSH_QP_DEPTH,
						.max_recv_wr = 1,
						.max_send_sge = 1,
						.max_recv_sge = 1 } };
	struct ib_qp_params p = { .port = d->port,
				  .link_layer = d->link_layer,
				  .local_mtu = d->mtu,
				  .remote_mtu = d->mtu,
				  .remote_lid = d->lid,
				  .gid_index = d->gid_index,
				  .local_psn = 0x123,
				  .remote_psn = 0x123,
				  .sl = ib_eng.sl,
				  .tc = ib_eng.tc,
				  .timeout = ib_eng.timeout,
				  .retry_cnt = ib_eng.retry_cnt };
	long page = sysconf(_SC_PAGESIZE);
	struct ibv_qp_attr a;
	int rc = ENOMEM;

	/* Registered pages are kept from a forked child (ibv_fork_init): nothing else on it. */
	if (!d->flush_host && posix_memalign(&d->flush_host, page > 0 ? (size_t)page : 4096,
					     page > 0 ? (size_t)page : 4096)) {
		d->flush_host = NULL;
		goto fail;
	}
	errno = 0;
	d->flush_cq = ibv.create_cq(d->ctx, IB_FLUSH_QP_DEPTH, NULL, NULL, 0);
	if (!d->flush_cq)
		goto fail_errno;
	ia.send_cq = ia.recv_cq = d->flush_cq;
	d->flush_qp = ibv.create_qp(d->pd, &ia);
	if (!d->flush_qp)
		goto fail_errno;
	if (!d->flush_mr)
		d->flush_mr = ibv.reg_mr(d->pd, d->flush_host, 8, IBV_ACCESS_LOCAL_WRITE);
	if (!d->flush_mr)
		goto fail_errno;
	memcpy(p.local_gid, d->gid, 16);
	memcpy(p.remote_gid, d->gid, 16);
	p.remote_qpn = d->flush_qp->qp_num;
	int mask = ib_qp_init_attr(&p, &a);
	a.qp_access_flags |= IBV_ACCESS_REMOTE_READ;
	if ((rc = ibv.modify_qp(d->flush_qp, &a, mask)))
		goto fail;
	mask = ib_qp_rtr_attr(&p, &a);
	if ((rc = ibv.modify_qp(d->flush_qp, &a, mask)))
		goto fail;
	mask = ib_qp_rts_attr(&p, &a);
	if ((rc = ibv.modify_qp(d->flush_qp, &a, mask)))
		goto fail;
	return 0;
fail_errno:
	rc = errno ? errno : EIO;
fail:
	flush_drop_qp(d);
	return -rc;
}

void ib_gdr_close(struct ib_dev *d)
{
	flush_drop_qp(d);
	if (d->flush_mr)
		ibv.dereg_mr(d->flush_mr);
	free(d->flush_host);
	free(d->flush_ring);
	d->flush_mr = NULL;
	d->flush_host = NULL;
	d->flush_ring = NULL;
	d->flush_cap = 0;
}

/* Posts read @id (its target in the ring) on the queue pair. 0 or -errno. */
static int flush_send(struct ib_dev *d, uint64_t id)
{
	const struct ib_flush_target *t = &d->flush_ring[id & (d->flush_cap - 1)];
	struct ibv_sge sge = { .addr = (uintptr_t)d->flush_host,
			       .length = 1,
			       .lkey = d->flush_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = id,
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_READ,
				  .send_flags = IBV_SEND_SIGNALED },
			   *bad;

	wr.wr.rdma.remote_addr = t->addr;
	wr.wr.rdma.rkey = t->rkey;
	return -d->flush_qp->context->ops.post_send(d->flush_qp, &wr, &bad);
}

/* Reads [@lo, @hi] failed: their tests say so (the last IB_FLUSH_FAILED ranges are kept). */
static void flush_fail(struct ib_dev *d, uint64_t lo, uint64_t hi)
{
	if (lo > hi)
		return;
	d->flush_failed[d->flush_nfailed++ % IB_FLUSH_FAILED] = (struct ib_flush_range){ lo, hi };
	if (d->flush_done < hi)
		d->flush_done = hi;
	if (d->flush_sent < hi)
		d->flush_sent = hi;
}

/* The queue pair broke (@why): it goes; the reads not done are read again on a new one after
 * IB_FLUSH_RETRY_NS, until the failure timeout since the first error has passed (or at once on a
 * fatal device). Then the reads outstanding fail, and the next flush starts afresh. Caller holds
 * d->flush_lock. */
static void flush_broke(struct ib_dev *d, const char *why)
{
	uint64_t now = ib_now_ns();

	flush_drop_qp(d);
	d->flush_sent = d->flush_done;
	d->flush_retry_ns = now + IB_FLUSH_RETRY_NS;
	if (!d->flush_broken_ns)
		d->flush_broken_ns = now;
	if (!atomic_load(&d->fatal) && now - d->flush_broken_ns <= ib_eng.rebuild_ns)
		return;
	ftcc_warn("ib: the flush of GPU memory on %s cannot be repaired (%s): the %llu flushes "
		  "outstanding fail",
		  d->name, why, (unsigned long long)(d->flush_posted - d->flush_done));
	flush_fail(d, d->flush_done + 1, d->flush_posted);
	d->flush_broken_ns = 0;
}

/* Puts the reads not yet on the queue pair there, as far as it has room. */
static void flush_pump(struct ib_dev *d)
{
	while (d->flush_qp && d->flush_sent < d->flush_posted &&
	       d->flush_sent - d->flush_done < IB_FLUSH_QP_DEPTH) {
		int rc = flush_send(d, d->flush_sent + 1);

		if (rc) {
			flush_broke(d, strerror(-rc));
			return;
		}
		d->flush_sent++;
	}
}

/* Takes the completions in; repairs a broken queue pair when its time has come. Caller holds
 * d->flush_lock. */
static void flush_poll(struct ib_dev *d)
{
	struct ibv_wc wc[16];
	int n = 16;

	while (d->flush_cq && n == 16) {
		const char *why = "completion queue error";

		n = d->flush_cq->context->ops.poll_cq(d->flush_cq, 16, wc);
		for (int i = 0; i < n; i++) {
			enum ibv_wc_status st = wc[i].status;

			if (st == IBV_WC_SUCCESS) {
				d->flush_done = wc[i].wr_id; /* one queue pair: in order */
				d->flush_broken_ns = 0;
				continue;
			}
			why = ib_wc_status_str(st);
			if (st == IBV_WC_REM_ACCESS_ERR || st == IBV_WC_LOC_PROT_ERR) {
				/* Its memory is no longer registered: that flush fails, no other. */
				ftcc_warn(
					"ib: a flush of GPU memory on %s failed (%s): its buffer is "
					"not registered any more",
					d->name, why);
				flush_fail(d, wc[i].wr_id, wc[i].wr_id);
			} else if (!d->flush_broken_ns) {
				ftcc_warn(
					"ib: a flush of GPU memory on %s failed (%s); reading again "
					"on a new queue pair",
					d->name, why);
			}
			n = -1;
			break;
		}
		if (n < 0)
			flush_broke(d, why);
	}
	if (!d->flush_qp && d->flush_sent < d->flush_posted && ib_now_ns() >= d->flush_retry_ns) {
		int rc = atomic_load(&d->fatal) ? -EIO : flush_open(d);

		if (rc)
			flush_broke(d,
				    atomic_load(&d->fatal) ? "fatal device error" : strerror(-rc));
	}
	flush_pump(d);
}

int ib_gdr_flush_post(struct ib_dev *d, void *data, const struct ibv_mr *mr, uint64_t *id)
{
	int rc = 0;

	pthread_mutex_lock(&d->flush_lock);
	if (d->flush_posted - d->flush_done >= d->flush_cap) {
		/* Never "not now": NCCL reads no request as nothing to flush. */
		size_t cap = d->flush_cap ? 2 * d->flush_cap : IB_FLUSH_QP_DEPTH;
		struct ib_flush_target *r = malloc(cap * sizeof(*r));

		if (!r) {
			rc = -ENOMEM;
			goto out;
		}
		for (uint64_t k = d->flush_done + 1; k <= d->flush_posted; k++)
			r[k & (cap - 1)] = d->flush_ring[k & (d->flush_cap - 1)];
		free(d->flush_ring);
		d->flush_ring = r;
		d->flush_cap = cap;
	}
	*id = ++d->flush_posted;
	d->flush_ring[*id & (d->flush_cap - 1)] =
		(struct ib_flush_target){ .addr = (uintptr_t)data, .rkey = mr->rkey };
	flush_poll(d); /* opens the queue pair at the first flush, as a repair */
out:
	pthread_mutex_unlock(&d->flush_lock);
	return rc;
}

int ib_gdr_flush_test(struct ib_dev *d, uint64_t id, int *done)
{
	int rc = 0;

	pthread_mutex_lock(&d->flush_lock);
	flush_poll(d);
	for (int i = 0; i < IB_FLUSH_FAILED; i++) {
		if (id >= d->flush_failed[i].lo && id <= d->flush_failed[i].hi)
			rc = -EIO;
	}
	*done = !rc && d->flush_done >= id;
	pthread_mutex_unlock(&d->flush_lock);
	return rc;
}
