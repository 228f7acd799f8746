/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's ops table: devices and their properties, listen, connect and
 * accept over the engine (conn.c), memory registration through the MR cache, and close.
 * The data path is in data.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/le.h"
#include "ftcc/log.h"
#include "ib_int.h"

#define DIAL_MAGIC 0x4c41494442494346ull /* "FCIBDIAL": connect() scratch in the handle */
#define DIAL_OFF FTCC_HANDLE_SCRATCH_OFF

static int ib_init(void)
{
	return ib_engine_get();
}

static void ib_fini(void)
{
	ib_engine_put();
}

static int ib_devices(int *ndev)
{
	*ndev = ib_eng.ndev;
	return 0;
}

static int ib_get_properties(int dev, struct ftcc_dev_props *p)
{
	const struct ib_dev *d;

	if (dev < 0 || dev >= ib_eng.ndev)
		return -EINVAL;
	d = &ib_eng.devs[dev];
	memset(p, 0, sizeof(*p));
	p->name = d->name;
	p->pci_path = d->pci_path[0] ? d->pci_path : NULL;
	p->guid = d->guid;
	/* GPU memory where dma-buf or peer memory works on this host (gdr.c). */
	p->ptr_support = ib_gdr_ptr_support(d);
	p->speed_mbps = d->speed_mbps;
	p->port = d->port;
	p->latency_us = 0;
	p->max_comms = 65536;
	p->max_recvs = FTCC_MAX_RECVS;
	p->max_p2p_bytes = (size_t)1 << 31; /* one work request's length field */
	p->max_coll_bytes = (size_t)512 << 20;
	p->numa_node = d->numa_node;
	return 0;
}

static int ib_listen(const struct ftcc_tctx *ctx, int dev, void *handle, struct ftcc_listen **out)
{
	struct ib_listen *l;
	int rc;

	*out = NULL;
	if (dev < 0 || dev >= ib_eng.ndev)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->base.ops = &ib_ops;
	l->dev = dev;
	l->tctx = *ctx;
	rc = ib_eng.tcp->listen(ctx, 0, handle, &l->tcp);
	if (rc) {
		free(l);
		return rc;
	}
	memset((uint8_t *)handle + IB_HANDLE_TCP, 0, FTCC_HANDLE_SIZE - IB_HANDLE_TCP);
	ib_handle_stamp(handle);
	pthread_mutex_lock(&ib_eng.lock);
	l->next = ib_eng.listens;
	ib_eng.listens = l;
	pthread_mutex_unlock(&ib_eng.lock);
	*out = &l->base;
	return 0;
}

/* A connect in progress for @handle: its scratch names one of our connections. Engine lock
 * held. */
static struct ib_conn *dial_find(const uint8_t *handle)
{
	uint64_t id;

	if (le_get64(handle + DIAL_OFF) != DIAL_MAGIC)
		return NULL;
	id = le_get64(handle + DIAL_OFF + 8);
	for (struct ib_conn *c = ib_eng.conns; c && id; c = c->next) {
		/* the same listen endpoint too: a token copied into another handle is no use */
		if (c->is_send && c->dial_id == id &&
		    memcmp(c->tcp_handle, handle, IB_HANDLE_TCP) == 0)
			return c;
	}
	return NULL;
}

static void conn_unlink(struct ib_conn *c)
{
	for (struct ib_conn **pp = &ib_eng.conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			return;
		}
	}
}

static int ib_connect(const struct ftcc_tctx *ctx, int dev, void *handle, struct ftcc_conn **out)
{
	struct ib_conn *c;
	int rc = 0;

	*out = NULL;
	pthread_mutex_lock(&ib_eng.lock);
	c = dial_find(handle);
	if (c) {
		pthread_mutex_lock(&c->lock);
		if (c->state == IBC_READY)
			*out = &c->base;
		rc = atomic_load(&c->err);
		pthread_mutex_unlock(&c->lock);
		if (*out || rc) {
			memset((uint8_t *)handle + DIAL_OFF, 0, 16);
			c->dial_id = 0;
		}
		if (rc) {
			conn_unlink(c);
			ib_conn_free(c);
		}
		pthread_mutex_unlock(&ib_eng.lock);
		return rc;
	}
	pthread_mutex_unlock(&ib_eng.lock);
	rc = ib_handle_check(handle);
	if (rc) {
		ftcc_warn("ib: connect refused: not a handle of the ib transport%s",
			  rc == -EPROTO ? " of this version" : "");
		return -EINVAL;
	}
	if (dev < 0 || dev >= ib_eng.ndev)
		return -EINVAL;
	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->base.ops = &ib_ops;
	pthread_mutex_init(&c->lock, NULL);
	c->is_send = true;
	c->dev = &ib_eng.devs[dev];
	c->tctx = *ctx;
	c->state = IBC_DIAL;
	c->gen = 1;
	c->nqps = ib_eng.qps_per_conn;
	c->deadline_ns = ib_now_ns() + ib_eng.connect_ns;
	memcpy(c->tcp_handle, handle, IB_HANDLE_TCP);
	snprintf(c->peer_str, sizeof(c->peer_str), "(connecting)");
	pthread_mutex_lock(&ib_eng.lock);
	c->dial_id = ++ib_eng.next_id;
	c->next = ib_eng.conns;
	ib_eng.conns = c;
	pthread_mutex_unlock(&ib_eng.lock);
	le_put64((uint8_t *)handle + DIAL_OFF, DIAL_MAGIC);
	le_put64((uint8_t *)handle + DIAL_OFF + 8, c->dial_id);
	return 0;
}

static int ib_accept(struct ftcc_listen *base, struct ftcc_conn **out)
{
	struct ib_listen *l = (struct ib_listen *)base;

	*out = NULL;
	pthread_mutex_lock(&ib_eng.lock);
	if (l->nready > 0) {
		struct ib_conn *c = l->ready[0];

		memmove(l->ready, l->ready + 1, sizeof(l->ready[0]) * (size_t)--l->nready);
		pthread_mutex_lock(&c->lock);
		c->handed = true;
		c->listen = NULL;
		pthread_mutex_unlock(&c->lock);
		*out = &c->base;
	}
	pthread_mutex_unlock(&ib_eng.lock);
	return 0;
}

static int ib_reg_mr(struct ftcc_conn *base, void *data, size_t size, int type, void **mh)
{
	struct ib_conn *c = (struct ib_conn *)base;
	struct ibv_mr *mr;
	int rc;

	*mh = NULL;
	if (type != FTCC_PTR_HOST && type != FTCC_PTR_CUDA)
		return -EINVAL;
	if (type == FTCC_PTR_CUDA && !(ib_gdr_ptr_support(c->dev) & FTCC_PTR_CUDA))
		return -EOPNOTSUPP;
	rc = ib_mr_get(c->dev, data, size, type, &mr);
	if (!rc)
		*mh = mr;
	return rc;
}

static int ib_reg_mr_dmabuf(struct ftcc_conn *base, void *data, size_t size, int type,
			    uint64_t offset, int fd, void **mh)
{
	struct ib_conn *c = (struct ib_conn *)base;
	struct ibv_mr *mr;

	*mh = NULL;
	if (type != FTCC_PTR_HOST && type != FTCC_PTR_CUDA)
		return -EINVAL;
	if (!(c->dev->gpu & IB_GPU_DMABUF))
		return -EOPNOTSUPP;
	errno = 0;
	mr = ibv.reg_dmabuf_mr(c->dev->pd, offset, size, (uintptr_t)data, fd,
			       IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				       IBV_ACCESS_REMOTE_READ);
	if (!mr) {
		int rc = errno ? -errno : -EIO;

		ftcc_warn(
			"ib: ibv_reg_dmabuf_mr of %zu bytes (fd %d, offset %llu) on %s failed: %s",
			size, fd, (unsigned long long)offset, c->dev->name, strerror(-rc));
		return rc;
	}
	if (ib_mr_track(c->dev, mr, type)) {
		ibv.dereg_mr(mr);
		return -ENOMEM;
	}
	*mh = mr;
	return 0;
}

static int ib_dereg_mr(struct ftcc_conn *base, void *mh)
{
	struct ib_conn *c = (struct ib_conn *)base;

	if (mh)
		ib_mr_put(c->dev, mh);
	return 0;
}

static struct ib_req flushed = { .state = IBR_DONE };

/* NCCL flushes a receive into GPU memory before its kernel reads it: one read through the
 * HCA of the batch's last non-empty buffer (gdr.c). Host memory has nothing to flush. */
static int ib_iflush(struct ftcc_conn *base, int n, void **data, const int *sizes, void **mh,
		     struct ftcc_req **req)
{
	struct ib_conn *c = (struct ib_conn *)base;
	const struct ibv_mr *mr;
	struct ib_req *r = NULL;
	uint64_t id = 0;
	int last = -1, gpu, rc;

	*req = (struct ftcc_req *)&flushed;
	for (int i = 0; i < n; i++) {
		if (sizes[i] > 0 && mh && mh[i])
			last = i;
	}
	if (last < 0)
		return 0;
	mr = mh[last];
	gpu = ib_mr_is_gpu(c->dev, mr);
	if (gpu < 0 || (uintptr_t)data[last] < (uintptr_t)mr->addr ||
	    (uintptr_t)data[last] - (uintptr_t)mr->addr >= mr->length) {
		*req = NULL;
		return -EINVAL; /* not our registration, or not its buffer */
	}
	if (!gpu)
		return 0;
	/* A slot of this connection's, then the post without its lock: the flush's queue pair
	 * may be set up or repaired meanwhile, which the progress thread need not wait for. */
	pthread_mutex_lock(&c->lock);
	for (int i = 0; i < FTCC_MAX_REQUESTS && !r; i++) {
		if (c->flushes[i].state == IBR_FREE) {
			r = &c->flushes[i];
			*r = (struct ib_req){ .conn = c, .state = IBR_ACTIVE };
		}
	}
	pthread_mutex_unlock(&c->lock);
	/* NCCL keeps at most NCCL_STEPS flushes of a connection in flight */
	rc = r ? ib_gdr_flush_post(c->dev, data[last], mr, &id) : -ENOSPC;
	pthread_mutex_lock(&c->lock);
	if (rc && r)
		r->state = IBR_FREE;
	else if (r)
		r->flush_id = id;
	pthread_mutex_unlock(&c->lock);
	/* Never EOPNOTSUPP here: the plug-in would read it as "nothing to flush". */
	*req = rc ? NULL : (struct ftcc_req *)r;
	return rc;
}

static int ib_test_any(struct ftcc_req *base, int *done, size_t *sizes)
{
	struct ib_req *r = (struct ib_req *)base;

	if (base == (struct ftcc_req *)&flushed) {
		*done = 1;
		return 0;
	}
	if (r->flush_id) {
		int rc = ib_gdr_flush_test(r->conn->dev, r->flush_id, done);

		if (*done || rc) {
			pthread_mutex_lock(&r->conn->lock);
			r->state = IBR_FREE;
			pthread_mutex_unlock(&r->conn->lock);
		}
		return rc;
	}
	return ib_test(base, done, sizes);
}

static int ib_close_conn(struct ftcc_conn *base)
{
	struct ib_conn *c = (struct ib_conn *)base;

	pthread_mutex_lock(&ib_eng.lock);
	conn_unlink(c);
	pthread_mutex_unlock(&ib_eng.lock);
	ib_conn_free(c);
	return 0;
}

static int ib_close_listen(struct ftcc_listen *base)
{
	struct ib_listen *l = (struct ib_listen *)base;

	pthread_mutex_lock(&ib_eng.lock);
	for (struct ib_listen **pp = &ib_eng.listens; *pp; pp = &(*pp)->next) {
		if (*pp == l) {
			*pp = l->next;
			break;
		}
	}
	/* Connections accepted on it but never handed out die with it. */
	for (int i = 0; i < l->nready; i++) {
		conn_unlink(l->ready[i]);
		ib_conn_free(l->ready[i]);
	}
	for (struct ib_conn *c = ib_eng.conns; c; c = c->next) {
		if (c->listen != l)
			continue;
		pthread_mutex_lock(&c->lock);
		c->listen = NULL;
		c->state = IBC_FAILED; /* the engine frees it */
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&ib_eng.lock);
	ib_eng.tcp->close_listen(l->tcp);
	free(l);
	return 0;
}

static int ib_describe_peer(struct ftcc_conn *base, char *buf, size_t len)
{
	struct ib_conn *c = (struct ib_conn *)base;

	snprintf(buf, len, "%s (ib %s:%d)", c->peer_str, c->dev->name, c->dev->port);
	return 0;
}

const struct ftcc_transport_ops ib_ops = {
	.name = "ib",
	.init = ib_init,
	.fini = ib_fini,
	.devices = ib_devices,
	.get_properties = ib_get_properties,
	.listen = ib_listen,
	.connect = ib_connect,
	.accept = ib_accept,
	.reg_mr = ib_reg_mr,
	.reg_mr_dmabuf = ib_reg_mr_dmabuf,
	.dereg_mr = ib_dereg_mr,
	.isend = ib_isend,
	.irecv = ib_irecv,
	.iflush = ib_iflush,
	.test = ib_test_any,
	.close_conn = ib_close_conn,
	.close_listen = ib_close_listen,
	.describe_peer = ib_describe_peer,
};
