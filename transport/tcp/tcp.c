/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCP transport's ops table: listen, connect, accept, post, test and close, over the
 * engine (engine.c), the connection lifecycle (conn.c) and the data path (data.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/log.h"
#include "tcp.h"

#define DIAL_MAGIC 0x4c41494443435446ull /* "FTCCDIAL": connect() scratch in the handle */
#define DIAL_OFF FTCC_HANDLE_SCRATCH_OFF

static int tcp_init(void)
{
	return tcp_engine_get();
}

static void tcp_fini(void)
{
	tcp_engine_put();
}

static int tcp_devices(int *ndev)
{
	*ndev = tcp_eng.ndev;
	return 0;
}

static int tcp_get_properties(int dev, struct ftcc_dev_props *p)
{
	const struct tcp_dev *d;

	if (dev < 0 || dev >= tcp_eng.ndev)
		return -EINVAL;
	d = &tcp_eng.devs[dev];
	memset(p, 0, sizeof(*p));
	p->name = d->name;
	p->pci_path = d->pci_path[0] ? d->pci_path : NULL;
	p->guid = (uint64_t)dev;
	p->ptr_support = FTCC_PTR_HOST;
	p->speed_mbps = d->speed_mbps;
	p->max_comms = 65536;
	p->max_recvs = FTCC_MAX_RECVS;
	p->max_p2p_bytes = 1ull << 40;
	p->max_coll_bytes = 512ull << 20;
	p->numa_node = d->numa_node;
	return 0;
}

static int tcp_listen(const struct ftcc_tctx *ctx, int dev, void *handle, struct ftcc_listen **out)
{
	struct tcp_handle h;
	struct tcp_listen *l;

	*out = NULL;
	if (dev < 0 || dev >= tcp_eng.ndev)
		return -EINVAL;
	l = calloc(1, sizeof(*l));
	if (!l)
		return -ENOMEM;
	l->base.ops = &tcp_ops;
	l->id = tcp_engine_new_id();
	l->dev = dev;
	l->comm_id = ctx->comm_id;
	l->incarnation = ctx->incarnation;
	l->failure_ns = ctx->failure_ns;
	l->quiet_loss = ctx->quiet_loss;
	h = (struct tcp_handle){ .addr = tcp_eng.listen_addr[dev],
				 .listen_id = l->id,
				 .comm_id = l->comm_id,
				 .incarnation = l->incarnation };
	memset(handle, 0, FTCC_HANDLE_SIZE);
	tcp_handle_encode(&h, handle);
	pthread_mutex_lock(&tcp_eng.lock);
	l->next = tcp_eng.listens;
	tcp_eng.listens = l;
	pthread_mutex_unlock(&tcp_eng.lock);
	*out = &l->base;
	return 0;
}

/* Unlinks @c from the live list and queues it for the engine thread to free. */
static void conn_retire(struct tcp_conn *c)
{
	pthread_mutex_lock(&tcp_eng.lock);
	for (struct tcp_conn **pp = &tcp_eng.conns; *pp; pp = &(*pp)->next) {
		if (*pp == c) {
			*pp = c->next;
			break;
		}
	}
	c->closing = true;
	c->next = tcp_eng.dead;
	tcp_eng.dead = c;
	pthread_mutex_unlock(&tcp_eng.lock);
	tcp_engine_wake();
}

static uint64_t get_u64(const uint8_t *p)
{
	uint64_t v;

	memcpy(&v, p, sizeof(v));
	return v;
}

static void put_u64(uint8_t *p, uint64_t v)
{
	memcpy(p, &v, sizeof(v));
}

/* A dial in progress for this handle, if its scratch names one of ours. */
static struct tcp_conn *dial_find(const uint8_t *handle)
{
	struct tcp_conn *found = NULL;
	struct tcp_handle h;
	uint64_t id;

	if (get_u64(handle + DIAL_OFF) != DIAL_MAGIC ||
	    tcp_handle_decode(handle, FTCC_HANDLE_SIZE, &h) != 0)
		return NULL;
	id = get_u64(handle + DIAL_OFF + 8);
	pthread_mutex_lock(&tcp_eng.lock);
	/* the same listen endpoint too: a token copied into another handle is no use */
	for (struct tcp_conn *c = tcp_eng.conns; c && id; c = c->next)
		if (c->is_send && c->dial_id == id && c->listen_id == h.listen_id &&
		    c->comm_id == h.comm_id)
			found = c;
	pthread_mutex_unlock(&tcp_eng.lock);
	return found;
}

static int dial_poll(struct tcp_conn *c, uint8_t *handle, struct ftcc_conn **out)
{
	int err = 0;

	pthread_mutex_lock(&c->lock);
	if (c->state == CS_READY) {
		c->dial_id = 0;
		*out = &c->base;
	} else if (c->state == CS_FAILED) {
		err = c->err;
	} else {
		tcp_conn_progress(c);
	}
	pthread_mutex_unlock(&c->lock);
	if (*out || err)
		memset(handle + DIAL_OFF, 0, 16);
	if (err)
		conn_retire(c);
	return err;
}

static int tcp_connect(const struct ftcc_tctx *ctx, int dev, void *handle, struct ftcc_conn **out)
{
	struct tcp_conn *c = dial_find(handle);
	struct tcp_handle h;
	int rc;

	*out = NULL;
	if (c)
		return dial_poll(c, handle, out);
	rc = tcp_handle_decode(handle, FTCC_HANDLE_SIZE, &h);
	if (rc) {
		ftcc_warn("tcp: connect refused: malformed connection handle");
		return -EINVAL;
	}
	if (h.comm_id != ctx->comm_id) {
		ftcc_warn("tcp: connect refused: handle of communicator %016llx, ours %016llx",
			  (unsigned long long)h.comm_id, (unsigned long long)ctx->comm_id);
		return -EINVAL;
	}
	if (dev < 0 || dev >= tcp_eng.ndev)
		return -EINVAL;
	c = tcp_conn_alloc(true, dev);
	if (!c)
		return -ENOMEM;
	c->conn_id = tcp_engine_new_id();
	c->dial_id = tcp_engine_new_id();
	c->comm_id = ctx->comm_id;
	c->failure_ns = ctx->failure_ns;
	c->quiet_loss = ctx->quiet_loss;
	c->listen_id = h.listen_id;
	c->local_inc = ctx->incarnation;
	c->peer_inc = h.incarnation;
	c->peer_addr = h.addr;
	tcp_wire_addr_str(&h.addr, c->peer_str, sizeof(c->peer_str));
	c->deadline_ns = tcp_now_ns() + tcp_eng.connect_ns;
	pthread_mutex_lock(&c->lock);
	rc = tcp_conn_dial_start(c);
	pthread_mutex_unlock(&c->lock);
	if (rc) {
		ftcc_warn("tcp: connect to %s failed: %s", c->peer_str, strerror(-rc));
		tcp_conn_free(c);
		return rc;
	}
	put_u64((uint8_t *)handle + DIAL_OFF, DIAL_MAGIC);
	put_u64((uint8_t *)handle + DIAL_OFF + 8, c->dial_id);
	tcp_engine_track(c);
	return 0;
}

static int tcp_accept(struct ftcc_listen *base, struct ftcc_conn **out)
{
	struct tcp_listen *l = (struct tcp_listen *)base;

	*out = NULL;
	pthread_mutex_lock(&tcp_eng.lock);
	for (struct tcp_conn *c = tcp_eng.conns; c; c = c->next) {
		if (c->is_send || c->accepted || c->listen != l)
			continue;
		pthread_mutex_lock(&c->lock);
		if (c->state == CS_READY) {
			c->accepted = true;
			c->listen = NULL;
			*out = &c->base;
		}
		pthread_mutex_unlock(&c->lock);
		if (*out)
			break;
	}
	pthread_mutex_unlock(&tcp_eng.lock);
	return 0;
}

static int tcp_close_listen(struct ftcc_listen *base)
{
	struct tcp_listen *l = (struct tcp_listen *)base;
	struct tcp_conn **pp;

	pthread_mutex_lock(&tcp_eng.lock);
	for (struct tcp_listen **lp = &tcp_eng.listens; *lp; lp = &(*lp)->next) {
		if (*lp == l) {
			*lp = l->next;
			break;
		}
	}
	/* Connections that completed their handshake but were never accepted go too. */
	for (pp = &tcp_eng.conns; *pp;) {
		struct tcp_conn *c = *pp;

		if (!c->is_send && !c->accepted && c->listen == l) {
			*pp = c->next;
			c->closing = true;
			c->next = tcp_eng.dead;
			tcp_eng.dead = c;
		} else {
			pp = &c->next;
		}
	}
	pthread_mutex_unlock(&tcp_eng.lock);
	free(l);
	tcp_engine_wake();
	return 0;
}

/* TCP moves bytes with the CPU: host memory needs no registration. */
static const int tcp_mr_token;

static int tcp_reg_mr(struct ftcc_conn *c, void *data, size_t size, int type, void **mh)
{
	if (type != FTCC_PTR_HOST) {
		ftcc_warn("tcp: cannot register memory of type %d: host memory only", type);
		return -EINVAL;
	}
	*mh = (void *)&tcp_mr_token;
	return 0;
}

static int tcp_dereg_mr(struct ftcc_conn *c, void *mh)
{
	return mh == &tcp_mr_token ? 0 : -EINVAL;
}

static int conn_usable(struct tcp_conn *c)
{
	if (c->err)
		return c->err;
	if (c->closing)
		return -EINVAL;
	return 0;
}

static int tcp_isend(struct ftcc_conn *base, void *data, size_t size, int tag, void *mh,
		     struct ftcc_req **req)
{
	struct tcp_conn *c = (struct tcp_conn *)base;
	struct tcp_req *r;
	int rc;

	*req = NULL;
	pthread_mutex_lock(&c->lock);
	rc = c->is_send ? conn_usable(c) : -EINVAL;
	r = &c->sreq[c->s_next % TCP_SEND_RING];
	if (rc == 0 && !r->busy &&
	    atomic_load_explicit(&r->state, memory_order_acquire) == REQ_FREE) {
		void *copy = NULL;

		/* A small message is copied so its buffer is free at once (as a socket send
		 * would be); the copy stays until acknowledged, for resending after a reset. */
		if (size > 0 && size <= tcp_eng.eager_max)
			copy = malloc(size);
		if (copy)
			memcpy(copy, data, size);
		r->data = copy ? copy : data;
		r->eager = copy != NULL;
		r->size = size;
		r->tag = (uint32_t)tag;
		r->seq = c->s_next++;
		r->acked = false;
		r->busy = true;
		atomic_store_explicit(&r->state, copy ? REQ_DONE : REQ_ACTIVE,
				      memory_order_release);
		tcp_conn_progress(c);
		*req = (struct ftcc_req *)r;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

static int tcp_irecv(struct ftcc_conn *base, int n, void **data, const size_t *sizes,
		     const int *tags, void **mh, struct ftcc_req **req)
{
	struct tcp_conn *c = (struct tcp_conn *)base;
	struct tcp_req *g;
	int rc;

	*req = NULL;
	if (n < 1 || n > FTCC_MAX_RECVS)
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	rc = c->is_send ? -EINVAL : conn_usable(c);
	g = &c->rreq[c->r_posted_groups % TCP_RECV_RING];
	if (rc == 0 && atomic_load_explicit(&g->state, memory_order_acquire) == REQ_FREE) {
		g->n = n;
		g->ndone = 0;
		for (int k = 0; k < n; k++) {
			g->bufs[k] = data[k];
			g->caps[k] = sizes[k];
			g->tags[k] = tags[k];
			g->sizes[k] = 0;
			g->slot_used[k] = false;
		}
		g->base_seq = c->r_post_seq;
		c->r_post_seq += (uint64_t)n;
		c->r_posted_groups++;
		atomic_store_explicit(&g->state, REQ_ACTIVE, memory_order_relaxed);
		tcp_conn_progress(c);
		*req = (struct ftcc_req *)g;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}

/* Host memory written by the CPU is visible at once: a flush completes immediately. */
static int tcp_iflush(struct ftcc_conn *base, int n, void **data, const int *sizes, void **mh,
		      struct ftcc_req **req)
{
	static struct tcp_req flushed = { .state = REQ_DONE, .kind = REQ_FLUSH };

	*req = (struct ftcc_req *)&flushed;
	return 0;
}

static void req_finish(struct tcp_req *r, int *done, size_t *sizes)
{
	*done = 1;
	if (r->kind == REQ_FLUSH)
		return;
	if (sizes) {
		if (r->kind == REQ_SEND)
			sizes[0] = r->size;
		else
			for (int k = 0; k < r->n; k++)
				sizes[k] = r->sizes[k];
	}
	atomic_store_explicit(&r->state, REQ_FREE, memory_order_release);
}

static int tcp_test(struct ftcc_req *req, int *done, size_t *sizes)
{
	struct tcp_req *r = (struct tcp_req *)req;
	struct tcp_conn *c = r->conn;
	int state = atomic_load_explicit(&r->state, memory_order_acquire);
	int err = 0;

	*done = 0;
	if (state == REQ_FREE)
		return -EINVAL; /* never posted, or already reported done */
	if (state == REQ_ACTIVE) {
		/* Progress inline when the engine thread is not on it: saves a wake-up. */
		atomic_store_explicit(&c->app_poll_ns, tcp_now_ns(), memory_order_relaxed);
		if (pthread_mutex_trylock(&c->lock) == 0) {
			tcp_conn_progress(c);
			err = c->err;
			pthread_mutex_unlock(&c->lock);
		} else {
			err = __atomic_load_n(&c->err, __ATOMIC_ACQUIRE);
		}
		state = atomic_load_explicit(&r->state, memory_order_acquire);
	}
	if (state == REQ_DONE) {
		req_finish(r, done, sizes);
		return 0;
	}
	return err;
}

static int tcp_close_conn(struct ftcc_conn *base)
{
	struct tcp_conn *c = (struct tcp_conn *)base;

	pthread_mutex_lock(&c->lock);
	if (c->state == CS_READY && c->ctrl.fd >= 0) {
		struct tcp_frame f = { .type = TCP_FRAME_CLOSE };

		tcp_ctrl_queue(c, &f);
		tcp_conn_progress(c); /* best effort, never waits */
	}
	c->closing = true;
	pthread_mutex_unlock(&c->lock);
	conn_retire(c);
	return 0;
}

static int tcp_describe_peer(struct ftcc_conn *base, char *buf, size_t len)
{
	struct tcp_conn *c = (struct tcp_conn *)base;

	pthread_mutex_lock(&c->lock);
	if (c->peer_rank >= 0)
		snprintf(buf, len, "%s rank %d", c->peer_str, c->peer_rank);
	else
		snprintf(buf, len, "%s", c->peer_str);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

const struct ftcc_transport_ops tcp_ops = {
	.name = "tcp",
	.init = tcp_init,
	.fini = tcp_fini,
	.devices = tcp_devices,
	.get_properties = tcp_get_properties,
	.listen = tcp_listen,
	.connect = tcp_connect,
	.accept = tcp_accept,
	.reg_mr = tcp_reg_mr,
	.dereg_mr = tcp_dereg_mr,
	.isend = tcp_isend,
	.irecv = tcp_irecv,
	.iflush = tcp_iflush,
	.test = tcp_test,
	.close_conn = tcp_close_conn,
	.close_listen = tcp_close_listen,
	.describe_peer = tcp_describe_peer,
};
