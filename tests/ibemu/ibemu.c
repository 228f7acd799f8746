/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs emulator's objects: devices, contexts, protection domains, memory regions,
 * completion queues and queue pairs with the state machine and attribute masks of
 * ibv_modify_qp(3), and the posting verbs reached through ibv_context.ops. The wire and the
 * agent thread are in ibemu_net.c. See ibemu.h for the model.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <unistd.h>

#include "ibemu.h"

#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define EXPORT __attribute__((visibility("default")))

struct emu_state emu = { .lock = PTHREAD_MUTEX_INITIALIZER, .wake = { -1, -1 } };

static int emu_rand(void)
{
	unsigned int v = 0;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (unsigned int)getpid() * 2654435761u + (unsigned int)emu_now_ns();
	return (int)(v & 0x7fffffff);
}

/* IBEMU_DEVICES: "name:ib|roce,..." (default "mlx5_0:ib,mlx5_1:roce"); "none" makes
 * ibv_get_device_list fail with ENOSYS, as libibverbs does on a kernel without RDMA. */
static int emu_devices_init(void)
{
	const char *spec = getenv("IBEMU_DEVICES");
	char buf[256], *save = NULL;

	if (emu.ndev)
		return 0;
	if (!spec || !*spec)
		spec = "mlx5_0:ib,mlx5_1:roce";
	if (strcmp(spec, "none") == 0)
		return -ENOSYS;
	snprintf(buf, sizeof(buf), "%s", spec);
	for (char *t = strtok_r(buf, ",", &save); t && emu.ndev < 4;
	     t = strtok_r(NULL, ",", &save)) {
		struct emu_device *d = &emu.devs[emu.ndev];
		char *colon = strchr(t, ':');

		if (colon)
			*colon++ = '\0';
		d->roce = colon && strcmp(colon, "roce") == 0;
		d->dev.node_type = IBV_NODE_CA;
		d->dev.transport_type = IBV_TRANSPORT_IB;
		snprintf(d->dev.name, sizeof(d->dev.name), "%s", t);
		snprintf(d->dev.dev_name, sizeof(d->dev.dev_name), "uverbs%d", emu.ndev);
		snprintf(d->dev.dev_path, sizeof(d->dev.dev_path),
			 "/sys/class/infiniband_verbs/uverbs%d", emu.ndev);
		snprintf(d->dev.ibdev_path, sizeof(d->dev.ibdev_path), "/sys/class/infiniband/%s",
			 t);
		emu.list[emu.ndev++] = &d->dev;
	}
	const char *fab = getenv("IBEMU_FABRIC");
	snprintf(emu.fabric, sizeof(emu.fabric), "%s", fab && *fab ? fab : "0");
	return 0;
}

EXPORT struct ibv_device **ibv_get_device_list(int *num)
{
	struct ibv_device **out;
	int err;

	pthread_mutex_lock(&emu.lock);
	err = emu_devices_init();
	pthread_mutex_unlock(&emu.lock);
	if (num)
		*num = 0;
	if (err) {
		errno = -err;
		return NULL;
	}
	out = calloc((size_t)emu.ndev + 1, sizeof(*out));
	if (!out) {
		errno = ENOMEM;
		return NULL;
	}
	memcpy(out, emu.list, sizeof(*out) * (size_t)emu.ndev);
	if (num)
		*num = emu.ndev;
	return out;
}

EXPORT void ibv_free_device_list(struct ibv_device **list)
{
	free(list);
}

EXPORT const char *ibv_get_device_name(struct ibv_device *dev)
{
	return dev ? dev->name : NULL;
}

EXPORT __be64 ibv_get_device_guid(struct ibv_device *dev)
{
	return htobe64(0x0002c90300000000ull | (uint64_t)(dev - emu.list[0]));
}

static int emu_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc);
static int emu_req_notify_cq(struct ibv_cq *cq, int solicited)
{
	(void)cq;
	(void)solicited;
	return EOPNOTSUPP; /* no completion channels */
}

EXPORT struct ibv_context *ibv_open_device(struct ibv_device *dev)
{
	struct emu_ctx *c = calloc(1, sizeof(*c));

	if (!c) {
		errno = ENOMEM;
		return NULL;
	}
	c->edev = (struct emu_device *)dev;
	c->ctx.device = dev;
	c->ctx.ops.post_send = emu_post_send;
	c->ctx.ops.post_recv = emu_post_recv;
	c->ctx.ops.poll_cq = emu_poll_cq;
	c->ctx.ops.req_notify_cq = emu_req_notify_cq;
	c->ctx.cmd_fd = -1;
	c->ctx.num_comp_vectors = 1;
	pthread_mutex_init(&c->ctx.mutex, NULL);
	c->port_up = 1;
	c->next_qpn = 0x100 + (uint32_t)(emu_rand() & 0xfff);
	if (pipe2(c->async_pipe, O_CLOEXEC) < 0)
		goto free_ctx;
	c->ctx.async_fd = c->async_pipe[0];
	pthread_mutex_lock(&emu.lock);
	int err = emu_listen(c);
	if (!err)
		err = emu_agent_start();
	if (err) {
		pthread_mutex_unlock(&emu.lock);
		close(c->async_pipe[0]);
		close(c->async_pipe[1]);
		errno = -err;
		goto free_ctx;
	}
	c->next = emu.ctxs;
	emu.ctxs = c;
	pthread_mutex_unlock(&emu.lock);
	emu_wake();
	return &c->ctx;

free_ctx:
	free(c);
	return NULL;
}

EXPORT int ibv_close_device(struct ibv_context *ctx)
{
	struct emu_ctx *c = (struct emu_ctx *)ctx, **pp;

	pthread_mutex_lock(&emu.lock);
	if (c->qps || c->mrs) {
		pthread_mutex_unlock(&emu.lock);
		return EBUSY;
	}
	for (pp = &emu.ctxs; *pp && *pp != c; pp = &(*pp)->next)
		;
	if (*pp)
		*pp = c->next;
	emu_links_close(c);
	close(c->listen_fd);
	while (c->dead) {
		struct emu_dead *d = c->dead;

		c->dead = d->next;
		munmap(d->map, d->len);
		free(d);
	}
	pthread_mutex_unlock(&emu.lock);
	/* The last context takes the agent with it: no thread outlives the device. */
	emu_agent_stop_if_idle();
	close(c->async_pipe[0]);
	close(c->async_pipe[1]);
	free(c->late);
	free(c);
	return 0;
}

EXPORT int ibv_fork_init(void)
{
	return 0;
}

EXPORT int ibv_query_device(struct ibv_context *ctx, struct ibv_device_attr *a)
{
	memset(a, 0, sizeof(*a));
	snprintf(a->fw_ver, sizeof(a->fw_ver), "ftcc-ibemu");
	a->node_guid = ibv_get_device_guid(ctx->device);
	a->max_mr_size = 1ull << 40;
	a->page_size_cap = 4096;
	a->max_qp = 4096;
	a->max_qp_wr = 16384;
	a->max_sge = EMU_MAX_SGE;
	a->max_cq = 4096;
	a->max_cqe = 65536;
	a->max_mr = 65536;
	a->max_pd = 1024;
	a->max_qp_rd_atom = 16;
	a->max_qp_init_rd_atom = 16;
	a->local_ca_ack_delay = 16;
	a->phys_port_cnt = 1;
	return 0;
}

/* The exported symbol takes the compat struct (verbs.h), a prefix of ibv_port_attr that
 * this version of the header makes the whole of it. */
EXPORT int ibv_query_port(struct ibv_context *ctx, uint8_t port,
			  struct _compat_ibv_port_attr *compat)
{
	struct ibv_port_attr *a = (struct ibv_port_attr *)compat;

	if (port != 1)
		return EINVAL;
	pthread_mutex_lock(&emu.lock);
	emu_port_attr((struct emu_ctx *)ctx, a);
	pthread_mutex_unlock(&emu.lock);
	return 0;
}

void emu_port_attr(struct emu_ctx *c, struct ibv_port_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->state = c->port_up ? IBV_PORT_ACTIVE : IBV_PORT_DOWN;
	a->max_mtu = IBV_MTU_4096;
	a->active_mtu = c->edev->roce ? IBV_MTU_1024 : IBV_MTU_4096;
	a->gid_tbl_len = EMU_GID_TBL;
	a->max_msg_sz = 1u << 31;
	a->pkey_tbl_len = 1;
	a->lid = c->edev->roce ? 0 : c->lid;
	a->active_width = 2;  /* 4x */
	a->active_speed = 32; /* EDR, 25 Gb/s per lane */
	a->phys_state = 5;    /* LinkUp */
	a->link_layer = c->edev->roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
}

/* GID @idx of @c and its type. IB: index 0 is the port GID, the rest zero. RoCE: fe80::lid as
 * v1 and v2, then ::ffff:10.F.x.y (IPv4-mapped, the LID in the last two bytes) as v1 and v2.
 * Every non-zero GID ends in the LID, which is how packets find their port. */
static int emu_gid(struct emu_ctx *c, int idx, union ibv_gid *gid, uint32_t *type)
{
	if (idx < 0 || idx >= EMU_GID_TBL)
		return EINVAL;
	memset(gid, 0, sizeof(*gid));
	*type = IBV_GID_TYPE_IB;
	if (!c->edev->roce) {
		if (idx == 0) {
			gid->raw[0] = 0xfe;
			gid->raw[1] = 0x80;
			gid->raw[8] = 0x02;
			gid->raw[14] = (uint8_t)(c->lid >> 8);
			gid->raw[15] = (uint8_t)c->lid;
		}
		return 0;
	}
	if (idx < 2) {
		gid->raw[0] = 0xfe;
		gid->raw[1] = 0x80;
	} else {
		gid->raw[10] = 0xff;
		gid->raw[11] = 0xff;
		gid->raw[12] = 10;
		gid->raw[13] = (uint8_t)atoi(emu.fabric);
	}
	gid->raw[14] = (uint8_t)(c->lid >> 8);
	gid->raw[15] = (uint8_t)c->lid;
	*type = (idx & 1) ? IBV_GID_TYPE_ROCE_V2 : IBV_GID_TYPE_ROCE_V1;
	return 0;
}

EXPORT int ibv_query_gid(struct ibv_context *ctx, uint8_t port, int idx, union ibv_gid *gid)
{
	uint32_t type;

	if (port != 1)
		return -1;
	return emu_gid((struct emu_ctx *)ctx, idx, gid, &type) ? -1 : 0;
}

EXPORT int _ibv_query_gid_ex(struct ibv_context *ctx, uint32_t port, uint32_t idx,
			     struct ibv_gid_entry *e, uint32_t flags, size_t size)
{
	if (port != 1 || flags || size < sizeof(*e))
		return EINVAL;
	memset(e, 0, sizeof(*e));
	e->gid_index = idx;
	e->port_num = port;
	if (emu_gid((struct emu_ctx *)ctx, (int)idx, &e->gid, &e->gid_type))
		return EINVAL;
	if (!e->gid.global.interface_id && !e->gid.global.subnet_prefix)
		return ENODATA; /* an empty entry, as libibverbs reports it */
	return 0;
}

EXPORT int ibv_get_async_event(struct ibv_context *ctx, struct ibv_async_event *ev)
{
	struct emu_ctx *c = (struct emu_ctx *)ctx;
	char b;

	if (read(c->async_pipe[0], &b, 1) != 1)
		return -1; /* errno: EAGAIN on a non-blocking async_fd */
	pthread_mutex_lock(&emu.lock);
	memset(ev, 0, sizeof(*ev));
	if (c->nevents > 0) {
		ev->event_type = c->events[0].type;
		ev->element.port_num = 1;
		if (c->events[0].type == IBV_EVENT_CQ_ERR)
			ev->element.cq = c->events[0].elem;
		memmove(c->events, c->events + 1, sizeof(c->events[0]) * (size_t)--c->nevents);
	}
	pthread_mutex_unlock(&emu.lock);
	return 0;
}

EXPORT void ibv_ack_async_event(struct ibv_async_event *ev)
{
	(void)ev;
}

EXPORT const char *ibv_event_type_str(enum ibv_event_type t)
{
	switch (t) {
	case IBV_EVENT_PORT_ERR:
		return "port error";
	case IBV_EVENT_PORT_ACTIVE:
		return "port active";
	case IBV_EVENT_CQ_ERR:
		return "CQ error";
	case IBV_EVENT_DEVICE_FATAL:
		return "local catastrophic error";
	default:
		return "unknown";
	}
}

EXPORT const char *ibv_wc_status_str(enum ibv_wc_status s)
{
	static char buf[32];

	snprintf(buf, sizeof(buf), "status %d", (int)s);
	return buf;
}

void emu_ctx_async(struct emu_ctx *c, enum ibv_event_type type, void *elem)
{
	if (c->nevents == (int)(sizeof(c->events) / sizeof(c->events[0])))
		return;
	c->events[c->nevents].type = type;
	c->events[c->nevents++].elem = elem;
	if (write(c->async_pipe[1], "e", 1) != 1)
		c->nevents--;
}

EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *ctx)
{
	struct emu_pd *p = calloc(1, sizeof(*p));

	if (!p) {
		errno = ENOMEM;
		return NULL;
	}
	p->pd.context = ctx;
	return &p->pd;
}

EXPORT int ibv_dealloc_pd(struct ibv_pd *pd)
{
	struct emu_ctx *c = (struct emu_ctx *)pd->context;

	pthread_mutex_lock(&emu.lock);
	for (struct emu_mr *m = c->mrs; m; m = m->next) {
		if (m->mr.pd == pd) {
			pthread_mutex_unlock(&emu.lock);
			return EBUSY;
		}
	}
	for (struct emu_qp *q = c->qps; q; q = q->next) {
		if (q->qp.pd == pd) {
			pthread_mutex_unlock(&emu.lock);
			return EBUSY;
		}
	}
	pthread_mutex_unlock(&emu.lock);
	free(pd);
	return 0;
}

struct emu_mr *emu_mr_by_rkey(struct emu_ctx *c, uint32_t rkey)
{
	for (struct emu_mr *m = c->mrs; m; m = m->next) {
		if (m->mr.rkey == rkey)
			return m;
	}
	return NULL;
}

struct emu_mr *emu_mr_by_lkey(struct emu_ctx *c, uint32_t lkey)
{
	for (struct emu_mr *m = c->mrs; m; m = m->next) {
		if (m->mr.lkey == lkey)
			return m;
	}
	return NULL;
}

EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t len, uint64_t iova,
				       unsigned int access)
{
	const unsigned int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				   IBV_ACCESS_OPTIONAL_RANGE;
	struct emu_ctx *c = (struct emu_ctx *)pd->context;
	struct emu_mr *m;

	/* ibv_reg_mr(3): remote write or atomic access needs local write. */
	if ((access & ~known) || (iova != (uint64_t)(uintptr_t)addr) || !addr || !len ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE))) {
		errno = EINVAL;
		return NULL;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		errno = ENOMEM;
		return NULL;
	}
	m->mr.context = pd->context;
	m->mr.pd = pd;
	m->mr.addr = addr;
	m->mr.length = len;
	m->access = (int)(access & ~IBV_ACCESS_OPTIONAL_RANGE);
	pthread_mutex_lock(&emu.lock);
	do {
		m->mr.lkey = (uint32_t)emu_rand();
	} while (!m->mr.lkey || emu_mr_by_lkey(c, m->mr.lkey) || emu_mr_by_rkey(c, m->mr.lkey));
	m->mr.rkey = m->mr.lkey;
	m->next = c->mrs;
	c->mrs = m;
	pthread_mutex_unlock(&emu.lock);
	return &m->mr;
}

EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t len, int access)
{
	if (access & IBV_ACCESS_OPTIONAL_RANGE) {
		errno = EINVAL; /* only ibv_reg_mr_iova2 takes optional flags */
		return NULL;
	}
	return ibv_reg_mr_iova2(pd, addr, len, (uint64_t)(uintptr_t)addr, (unsigned int)access);
}

/* A dma-buf region: bytes [@off, @off + @len) of @fd, addressed from @iova. The emulator maps
 * the fd itself (tests pass a memfd where a GPU driver would give a dma-buf), so what lands in
 * the region is what the fd's owner sees. ibv_reg_mr(3): @off and @iova have the same page
 * offset; only local write, remote write, read and atomic, and relaxed ordering are allowed.
 * IBEMU_DMABUF=0 is a kernel or driver without dma-buf (EOPNOTSUPP, as the probe with fd -1
 * sees it). */
EXPORT struct ibv_mr *ibv_reg_dmabuf_mr(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
					int fd, int access)
{
	const unsigned int known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE |
				   IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_ATOMIC |
				   IBV_ACCESS_RELAXED_ORDERING;
	const char *env = getenv("IBEMU_DMABUF");
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), head = off % page;
	struct ibv_mr *mr;
	void *map;

	if (env && strcmp(env, "0") == 0) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (fd < 0) {
		errno = EBADF;
		return NULL;
	}
	if (((unsigned int)access & ~known) || !len || head != iova % page || !iova ||
	    ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) &&
	     !(access & IBV_ACCESS_LOCAL_WRITE))) {
		errno = EINVAL;
		return NULL;
	}
	map = mmap(NULL, len + head, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)(off - head));
	if (map == MAP_FAILED)
		return NULL; /* errno from mmap: EBADF, ENODEV (not mappable), EACCES... */
	mr = ibv_reg_mr_iova2(pd, (uint8_t *)map + head, len, (uint64_t)(uintptr_t)map + head,
			      (unsigned int)access & ~IBV_ACCESS_RELAXED_ORDERING);
	if (!mr) {
		munmap(map, len + head);
		return NULL;
	}
	struct emu_mr *m = (struct emu_mr *)mr;

	pthread_mutex_lock(&emu.lock);
	m->shift = (intptr_t)((uint8_t *)map + head) - (intptr_t)iova;
	m->map = map;
	m->map_len = len + head;
	mr->addr = (void *)(uintptr_t)iova;
	pthread_mutex_unlock(&emu.lock);
	return mr;
}

/* Once this returns, no packet lands in the region (the agent holds the lock while it writes
 * and looks the key up again for every chunk). */
EXPORT int ibv_dereg_mr(struct ibv_mr *mr)
{
	struct emu_ctx *c = (struct emu_ctx *)mr->context;
	struct emu_mr **pp;

	pthread_mutex_lock(&emu.lock);
	for (pp = &c->mrs; *pp && &(*pp)->mr != mr; pp = &(*pp)->next)
		;
	if (!*pp) {
		pthread_mutex_unlock(&emu.lock);
		return EINVAL;
	}
	struct emu_mr *m = *pp;
	struct emu_dead *d = m->map ? malloc(sizeof(*d)) : NULL;

	*pp = m->next;
	if (d) {
		*d = (struct emu_dead){ .map = m->map, .len = m->map_len, .next = c->dead };
		c->dead = d;
	}
	pthread_mutex_unlock(&emu.lock);
	if (m->map && !d)
		munmap(m->map, m->map_len);
	free(m);
	return 0;
}

EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *ctx, int cqe, void *user,
				    struct ibv_comp_channel *ch, int vec)
{
	struct emu_cq *q;

	if (cqe < 1 || cqe > 65536 || ch || vec) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (q)
		q->ring = calloc((size_t)cqe, sizeof(*q->ring));
	if (!q || !q->ring) {
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->cq.context = ctx;
	q->cq.cq_context = user;
	q->cq.cqe = cqe;
	q->cap = cqe;
	return &q->cq;
}

EXPORT int ibv_destroy_cq(struct ibv_cq *cq)
{
	struct emu_ctx *c = (struct emu_ctx *)cq->context;
	struct emu_cq *q = (struct emu_cq *)cq;

	pthread_mutex_lock(&emu.lock);
	for (struct emu_qp *p = c->qps; p; p = p->next) {
		if (p->qp.send_cq == cq || p->qp.recv_cq == cq) {
			pthread_mutex_unlock(&emu.lock);
			return EBUSY;
		}
	}
	emu_late_forget(c, q, 0);
	pthread_mutex_unlock(&emu.lock);
	free(q->ring);
	free(q);
	return 0;
}

void emu_cq_push(struct emu_cq *q, const struct ibv_wc *wc)
{
	if (q->broken)
		return;
	if (q->count == q->cap) {
		q->broken = 1;
		emu_ctx_async((struct emu_ctx *)q->cq.context, IBV_EVENT_CQ_ERR, &q->cq);
		return;
	}
	q->ring[(q->head + q->count++) % q->cap] = *wc;
}

void emu_late_push(struct emu_ctx *c, struct emu_cq *cq, const struct ibv_wc *wc)
{
	if (c->nlate == c->cap_late) {
		int cap = c->cap_late ? 2 * c->cap_late : 64;
		void *p = realloc(c->late, sizeof(*c->late) * (size_t)cap);

		if (!p) {
			emu_cq_push(cq, wc); /* no room to wait: visible at once */
			return;
		}
		c->late = p;
		c->cap_late = cap;
	}
	c->late[c->nlate].cq = cq;
	c->late[c->nlate++].wc = *wc;
}

void emu_late_flush(struct emu_ctx *c)
{
	for (int i = 0; i < c->nlate; i++)
		emu_cq_push(c->late[i].cq, &c->late[i].wc);
	c->nlate = 0;
}

void emu_late_flush_qp(struct emu_ctx *c, uint32_t qpn)
{
	int k = 0;

	for (int i = 0; i < c->nlate; i++) {
		if (c->late[i].wc.qp_num == qpn)
			emu_cq_push(c->late[i].cq, &c->late[i].wc);
		else
			c->late[k++] = c->late[i];
	}
	c->nlate = k;
}

void emu_late_forget(struct emu_ctx *c, const struct emu_cq *cq, uint32_t qpn)
{
	int k = 0;

	for (int i = 0; i < c->nlate; i++) {
		if (c->late[i].cq == cq || (qpn && c->late[i].wc.qp_num == qpn))
			continue;
		c->late[k++] = c->late[i];
	}
	c->nlate = k;
}

static int emu_poll_cq(struct ibv_cq *cq, int n, struct ibv_wc *wc)
{
	struct emu_cq *q = (struct emu_cq *)cq;
	int got = 0;

	pthread_mutex_lock(&emu.lock);
	if (q->broken) {
		pthread_mutex_unlock(&emu.lock);
		return -1;
	}
	while (got < n && q->count > 0) {
		wc[got++] = q->ring[q->head];
		q->head = (q->head + 1) % q->cap;
		q->count--;
	}
	pthread_mutex_unlock(&emu.lock);
	return got;
}
