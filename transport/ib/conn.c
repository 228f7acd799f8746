/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's connections and engine: the side channel (two TCP-transport
 * connections, one each way) and its messages, the handshake of both sides, the rebuild
 * protocol after a QP error, the failure verdicts, and the progress thread that drives all of
 * it every millisecond.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "ftcc/settings.h"
#include "ftcc/tcp_dev.h"
#include "ib_int.h"

#define TICK_NS 1000000L

struct ib_engine ib_eng = { .lock = PTHREAD_MUTEX_INITIALIZER };
static pthread_cond_t eng_cond = PTHREAD_COND_INITIALIZER;

uint64_t ib_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void ib_conn_fail(struct ib_conn *c, int err, const char *fmt, ...)
{
	char why[160];
	va_list ap;

	if (c->state == IBC_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (c->side_err)
		/* The TCP transport under the side channel logged the verdict (a WARN for a
		 * lost peer, INFO for a close). */
		ftcc_info("ib: connection with %s ends: %s (%s)", c->peer_str, why, strerror(-err));
	else if (err == -ECONNRESET || err == -ETIMEDOUT)
		ftcc_log(c->tctx.quiet_loss ? FTCC_LOG_INFO : FTCC_LOG_WARN, "ib: peer %s lost: %s",
			 c->peer_str, why);
	else
		ftcc_warn("ib: connection with %s failed: %s (%s)", c->peer_str, why,
			  strerror(-err));
	c->state = IBC_FAILED;
	c->qps_ready = false;
	c->fail_ns = ib_now_ns();
	atomic_store(&c->err, err);
	/* Our side ended it: the peer must stop writing into buffers whose caller saw the error
	 * here, and learn why instead of timing out on a live member. When the side channel
	 * ended it, the QPs stay as they are: an acknowledgement still on its way must complete
	 * the send the peer took (the end grace). */
	if (c->side_err)
		return;
	for (int q = 0; q < c->nqps; q++) {
		struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };

		if (c->qp[q])
			ibv.modify_qp(c->qp[q], &a, IBV_QP_STATE);
	}
	if (!c->no_tell && c->out)
		ib_ctl_send(c, &(struct ib_msg){ .type = IB_MSG_ERROR, .status = err });
}

void ib_ctl_send(struct ib_conn *c, const struct ib_msg *m)
{
	for (int i = 0; i < IB_OUTBOX; i++) {
		struct ib_outmsg *o = &c->outbox[i];

		if (!o->queued && !o->req) {
			o->len = ib_msg_encode(m, o->buf);
			o->queued = true;
			o->seq = ++c->out_seq;
			return;
		}
	}
	if (c->state != IBC_FAILED) {
		c->no_tell = true; /* there is no room to say it */
		ib_conn_fail(c, -ENOBUFS, "side channel backlog full");
	}
}

static int ctl_alloc_memory(struct ib_conn *c)
{
	size_t fsz = sizeof(struct ib_cts) * IB_NSLOTS * FTCC_MAX_RECVS;
	size_t ssz = sizeof(uint64_t) * IB_NSLOTS * FTCC_MAX_RECVS;
	int access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;

	if (posix_memalign((void **)&c->fifo, 4096, fsz) ||
	    posix_memalign((void **)&c->sizes, 4096, ssz))
		return -ENOMEM;
	memset(c->fifo, 0, fsz);
	memset(c->sizes, 0, ssz);
	c->fifo_mr = ibv.reg_mr(c->dev->pd, c->fifo, fsz, access);
	c->sizes_mr = ibv.reg_mr(c->dev->pd, c->sizes, ssz, access);
	if (!c->fifo_mr || !c->sizes_mr) {
		ftcc_warn("ib: registering connection memory on %s failed: %s", c->dev->name,
			  strerror(errno));
		return -ENOMEM;
	}
	return 0;
}

void ib_conn_free(struct ib_conn *c)
{
	const struct ftcc_transport_ops *tcp = ib_eng.tcp;

	ib_qps_destroy(c);
	if (c->fifo_mr)
		ibv.dereg_mr(c->fifo_mr);
	if (c->sizes_mr)
		ibv.dereg_mr(c->sizes_mr);
	free(c->fifo);
	free(c->sizes);
	if (c->out)
		tcp->close_conn(c->out);
	if (c->in)
		tcp->close_conn(c->in);
	if (c->back_listen)
		tcp->close_listen(c->back_listen);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

/* Our QPs of c->gen are RTS and the peer's are too: data may flow again. The rebuild's
 * deadline ends with the first completion of the new set (data, or the probe every QP
 * sends). */
void ib_rebuild_finish(struct ib_conn *c)
{
	uint32_t gen = c->gen;

	ib_data_resume(c);
	if (c->state == IBC_READY && c->gen == gen)
		ftcc_info("ib: connection with %s restored (generation %u)", c->peer_str, gen);
}

static void on_rebuild(struct ib_conn *c, const struct ib_msg *m)
{
	if (m->gen == c->gen + 1)
		ib_rebuild_start(c, "the peer saw a queue-pair error");
	if (c->state == IBC_FAILED || m->gen != c->gen)
		return; /* an older generation's: ours is newer and the peer will follow */
	if (m->port.nqps != c->nqps || m->port.link_layer != c->dev->link_layer) {
		ib_conn_fail(c, -EPROTO, "rebuilt with %d QPs on link layer %d, ours %d on %d",
			     m->port.nqps, m->port.link_layer, c->nqps, c->dev->link_layer);
		return;
	}
	c->peer = m->port;
	c->peer_gen = m->gen;
	ib_rebuild_step(c);
}

/* RTR/RTS of the handshake, with the receives posted: 0, -EAGAIN for a transient failure
 * (RoCE's RTR resolves the neighbour and can time out for a while: tried again every tick
 * within the connection deadline, one INFO line), or the error that ends the handshake. */
static int handshake_connect(struct ib_conn *c)
{
	int rc = ib_qps_connect(c);

	if (rc != -ETIMEDOUT && rc != -EAGAIN)
		return rc;
	if (!c->warned_gen) {
		c->warned_gen = c->gen;
		ftcc_info("ib: connection with %s: queue pairs not connected yet (%s); retrying "
			  "until the connection deadline",
			  c->peer_str, strerror(-rc));
	}
	return -EAGAIN;
}

static void on_hello(struct ib_conn *c, const struct ib_msg *m)
{
	int rc = 0;

	if (m->port.link_layer != c->dev->link_layer || m->port.nqps < 1) {
		ftcc_warn("ib: refusing %s: link layer %d and %d QPs, ours %d", c->peer_str,
			  m->port.link_layer, m->port.nqps, c->dev->link_layer);
		c->refuse = -EPROTO;
	}
	memcpy(c->tcp_handle, m->back_handle, IB_HANDLE_TCP);
	c->state = IBC_BACK;
	if (c->refuse)
		return;
	c->nqps = m->port.nqps;
	c->peer = m->port;
	c->peer_gen = c->gen;
	c->remote_addr = m->addr;
	c->remote_rkey = m->rkey;
	rc = ctl_alloc_memory(c);
	if (!rc)
		rc = ib_qps_create(c);
	if (!rc)
		rc = handshake_connect(c);
	if (rc && rc != -EAGAIN) /* -EAGAIN: back_step tries again */
		c->refuse = rc;
}

/* Connector: WELCOME known; RTR/RTS (again) and, once done, READY. */
static void welcome_step(struct ib_conn *c)
{
	int rc = handshake_connect(c);

	if (rc == -EAGAIN)
		return; /* again on the next tick, until the connection deadline */
	if (rc) {
		ib_conn_fail(c, rc, "cannot connect the queue pairs");
		return;
	}
	ib_ctl_send(c, &(struct ib_msg){ .type = IB_MSG_READY, .gen = c->gen });
	c->qps_ready = c->own_rts = c->peer_rebuilt = true;
	c->state = IBC_READY;
}

static void on_msg(struct ib_conn *c, const uint8_t *buf, size_t len)
{
	struct ib_msg m;
	int rc = ib_msg_decode(buf, len, &m);

	if (rc) {
		ib_conn_fail(c, rc, "malformed side-channel message");
		return;
	}
	switch (m.type) {
	case IB_MSG_HELLO:
		if (c->state != IBC_HELLO_WAIT || c->is_send)
			break;
		on_hello(c, &m);
		return;
	case IB_MSG_WELCOME:
		if (c->state != IBC_WELCOME_WAIT)
			break;
		if (c->welcomed)
			break;
		if (m.port.nqps != c->nqps || m.port.link_layer != c->dev->link_layer) {
			ib_conn_fail(c, -EPROTO, "welcome with %d QPs on link layer %d",
				     m.port.nqps, m.port.link_layer);
			return;
		}
		c->welcomed = true;
		c->peer = m.port;
		c->peer_gen = c->gen;
		c->remote_addr = m.addr;
		c->remote_rkey = m.rkey;
		welcome_step(c);
		return;
	case IB_MSG_READY:
		if (c->state != IBC_READY_WAIT)
			break;
		c->qps_ready = c->own_rts = c->peer_rebuilt = true;
		c->state = IBC_READY;
		return;
	case IB_MSG_REFUSE:
		c->no_tell = true;
		ib_conn_fail(c, m.status < 0 ? m.status : -ECONNREFUSED, "refused by the peer");
		return;
	case IB_MSG_ERROR:
		c->no_tell = true;
		ib_conn_fail(c, m.status < 0 ? m.status : -EPROTO, "failed on the peer's side");
		return;
	case IB_MSG_REBUILD:
		if (c->state == IBC_READY)
			on_rebuild(c, &m);
		return;
	case IB_MSG_REBUILT:
		if (c->state == IBC_READY && m.gen == c->gen && !c->peer_rebuilt) {
			c->peer_rebuilt = true;
			c->peer_done = m.done_seq;
			if (c->own_rts)
				ib_rebuild_finish(c);
		}
		return;
	default:
		break;
	}
	ib_conn_fail(c, -EPROTO, "side-channel message %u out of place", m.type);
}

static void side_fail(struct ib_conn *c, int rc)
{
	c->side_err = true;
	ib_conn_fail(c, rc, "side channel");
}

/* Moves the side channel: posts queued messages in order, completes sent ones, reads one. */
static void ctl_progress(struct ib_conn *c)
{
	const struct ftcc_transport_ops *tcp = ib_eng.tcp;
	int rc, done;

	/* A connection that failed on our side still tells the peer why (IB_MSG_ERROR). */
	for (int pass = 0; pass < IB_OUTBOX && c->out && !c->side_err; pass++) {
		struct ib_outmsg *o = NULL;

		for (int i = 0; i < IB_OUTBOX; i++) {
			struct ib_outmsg *x = &c->outbox[i];
			if (x->queued && (!o || x->seq < o->seq))
				o = x;
		}
		if (!o)
			break;
		rc = tcp->isend(c->out, o->buf, o->len, 0, NULL, &o->req);
		if (rc) {
			side_fail(c, rc);
			return;
		}
		if (!o->req)
			break;
		o->queued = false;
	}
	for (int i = 0; i < IB_OUTBOX && !c->side_err; i++) {
		struct ib_outmsg *o = &c->outbox[i];

		if (!o->req)
			continue;
		rc = tcp->test(o->req, &done, NULL);
		if (rc) {
			o->req = NULL;
			side_fail(c, rc);
			return;
		}
		if (done)
			o->req = NULL;
	}
	while (c->in && c->state != IBC_FAILED) {
		size_t got = 0;

		if (!c->rreq) {
			void *d = c->rbuf;
			size_t sz = sizeof(c->rbuf);
			int tag = 0;
			void *mh = NULL;

			rc = tcp->irecv(c->in, 1, &d, &sz, &tag, &mh, &c->rreq);
			if (rc) {
				side_fail(c, rc);
				return;
			}
			if (!c->rreq)
				return;
		}
		rc = tcp->test(c->rreq, &done, &got);
		if (rc) {
			c->rreq = NULL;
			side_fail(c, rc);
			return;
		}
		if (!done)
			return;
		c->rreq = NULL;
		on_msg(c, c->rbuf, got);
	}
}

static void dial_step(struct ib_conn *c)
{
	const struct ftcc_transport_ops *tcp = ib_eng.tcp;
	struct ib_msg m = { .type = IB_MSG_HELLO };
	uint8_t back[FTCC_HANDLE_SIZE];
	int rc;

	rc = tcp->connect(&c->tctx, 0, c->tcp_handle, &c->out);
	if (rc) {
		ib_conn_fail(c, rc, "side channel not established");
		return;
	}
	if (!c->out)
		return;
	tcp->describe_peer(c->out, c->peer_str, sizeof(c->peer_str));
	rc = tcp->listen(&c->tctx, 0, back, &c->back_listen);
	if (!rc)
		rc = ctl_alloc_memory(c);
	if (!rc)
		rc = ib_qps_create(c);
	if (rc) {
		ib_conn_fail(c, rc, "cannot set up the queue pairs");
		return;
	}
	memcpy(m.back_handle, back, IB_HANDLE_TCP);
	ib_port_fill(c, &m.port);
	m.addr = (uintptr_t)c->fifo;
	m.rkey = c->fifo_mr->rkey;
	ib_ctl_send(c, &m);
	c->state = IBC_WELCOME_WAIT;
}

static void back_step(struct ib_conn *c)
{
	const struct ftcc_transport_ops *tcp = ib_eng.tcp;
	struct ib_msg m = { .type = IB_MSG_WELCOME };

	if (!c->out) {
		int rc = tcp->connect(&c->tctx, 0, c->tcp_handle, &c->out);

		if (rc) {
			ib_conn_fail(c, rc, "side channel back leg not established");
			return;
		}
		if (!c->out)
			return;
	}
	if (c->refuse) {
		ib_ctl_send(c, &(struct ib_msg){ .type = IB_MSG_REFUSE, .status = c->refuse });
		c->state = IBC_READY_WAIT; /* the connector closes; we fail then */
		return;
	}
	/* Idempotent once done (RTS QPs are skipped, receives topped up). */
	int rc = handshake_connect(c);
	if (rc == -EAGAIN)
		return; /* again on the next tick, until the connection deadline */
	if (rc) {
		c->refuse = rc;
		ib_ctl_send(c, &(struct ib_msg){ .type = IB_MSG_REFUSE, .status = rc });
		c->state = IBC_READY_WAIT;
		return;
	}
	ib_port_fill(c, &m.port);
	m.addr = (uintptr_t)c->sizes;
	m.rkey = c->sizes_mr->rkey;
	ib_ctl_send(c, &m);
	c->state = IBC_READY_WAIT;
}

void ib_conn_progress(struct ib_conn *c)
{
	uint64_t now = ib_now_ns();

	if (c->state == IBC_FAILED) {
		ctl_progress(c); /* the last word (IB_MSG_ERROR) may still be queued */
		return;
	}
	if (c->state == IBC_DIAL)
		dial_step(c);
	if (c->state == IBC_WELCOME_WAIT && c->welcomed)
		welcome_step(c);
	if (c->state == IBC_WELCOME_WAIT && !c->in) {
		int rc = ib_eng.tcp->accept(c->back_listen, &c->in);
		if (rc)
			ib_conn_fail(c, rc, "side channel back leg not accepted");
	}
	if (c->state == IBC_BACK)
		back_step(c);
	ctl_progress(c);
	if (c->state == IBC_READY) {
		if (c->need_create || (c->peer_gen == c->gen && !c->own_rts))
			ib_rebuild_step(c);
		ib_poll(c);
		if (c->state == IBC_READY && c->rebuild_ns &&
		    now > c->rebuild_ns + ib_eng.rebuild_ns)
			ib_conn_fail(c, -ETIMEDOUT, "queue pairs not restored in %llu ms",
				     (unsigned long long)(ib_eng.rebuild_ns / 1000000));
	} else if (c->state != IBC_FAILED && now > c->deadline_ns) {
		ib_conn_fail(c, -ETIMEDOUT, "connection not established in %llu ms",
			     (unsigned long long)(ib_eng.connect_ns / 1000000));
	}
}

/* A side channel accepted on @l: the receive side of a new connection. Engine lock held. */
static void conn_accepted(struct ib_listen *l, struct ftcc_conn *in)
{
	struct ib_conn *c = calloc(1, sizeof(*c));

	if (!c) {
		ib_eng.tcp->close_conn(in);
		return;
	}
	c->base.ops = &ib_ops;
	pthread_mutex_init(&c->lock, NULL);
	c->dev = &ib_eng.devs[l->dev];
	c->tctx = l->tctx;
	c->listen = l;
	c->in = in;
	c->state = IBC_HELLO_WAIT;
	c->gen = 1;
	c->deadline_ns = ib_now_ns() + ib_eng.connect_ns;
	ib_eng.tcp->describe_peer(in, c->peer_str, sizeof(c->peer_str));
	c->next = ib_eng.conns;
	ib_eng.conns = c;
}

static void engine_round(void)
{
	for (struct ib_listen *l = ib_eng.listens; l; l = l->next) {
		struct ftcc_conn *in = NULL;

		while (ib_eng.tcp->accept(l->tcp, &in) == 0 && in) {
			conn_accepted(l, in);
			in = NULL;
		}
	}
	for (struct ib_conn **pp = &ib_eng.conns; *pp;) {
		struct ib_conn *c = *pp;

		pthread_mutex_lock(&c->lock);
		ib_conn_progress(c);
		/* A receive side nobody accepted yet is the engine's: ready, it waits in its
		 * listen; failed, it is freed here. */
		bool orphan = !c->is_send && !c->handed && c->state == IBC_FAILED;
		struct ib_listen *l = c->listen;
		if (l && !c->in_ready && c->state == IBC_READY && l->nready < 64) {
			l->ready[l->nready++] = c;
			c->in_ready = true;
		}
		pthread_mutex_unlock(&c->lock);
		if (orphan) {
			for (int i = 0; l && c->in_ready && i < l->nready; i++) {
				if (l->ready[i] == c) {
					l->ready[i] = l->ready[--l->nready];
					break;
				}
			}
			*pp = c->next;
			ib_conn_free(c);
			continue;
		}
		pp = &c->next;
	}
	for (int d = 0; d < ib_eng.ndev; d++)
		ib_dev_poll_events(&ib_eng.devs[d]);
}

/* FTCC_NUMA_BIND: the progress thread runs on the CPUs of the first device's NUMA node. */
static void engine_bind(void)
{
	char path[96], list[256] = "";
	int node = ib_eng.ndev ? ib_eng.devs[0].numa_node : -1;
	FILE *f;

	if (!ftcc_setting_int(FTCC_SET_NUMA_BIND) || node < 0)
		return;
	snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
	f = fopen(path, "r");
	if (!f)
		return;
	if (fgets(list, sizeof(list), f))
		list[strcspn(list, "\n")] = '\0';
	fclose(f);
	tcp_dev_bind_thread(list);
}

static void *engine_main(void *arg)
{
	(void)arg;
	ftcc_thread_name("ib");
	engine_bind();
	pthread_mutex_lock(&ib_eng.lock);
	while (!ib_eng.stop) {
		struct timespec ts;

		engine_round();
		clock_gettime(CLOCK_REALTIME, &ts);
		ts.tv_nsec += TICK_NS;
		if (ts.tv_nsec >= 1000000000L) {
			ts.tv_sec++;
			ts.tv_nsec -= 1000000000L;
		}
		pthread_cond_timedwait(&eng_cond, &ib_eng.lock, &ts);
	}
	pthread_mutex_unlock(&ib_eng.lock);
	return NULL;
}

static int engine_start(void)
{
	int rc;

	ib_eng.tcp = ftcc_transport_get("tcp");
	rc = ib_eng.tcp->init();
	if (rc)
		return rc;
	ib_eng.qps_per_conn = (int)ftcc_setting_int(FTCC_SET_IB_QPS_PER_CONN);
	ib_eng.retry_cnt = (int)ftcc_setting_int(FTCC_SET_IB_RETRY_CNT);
	ib_eng.timeout = (int)ftcc_setting_int(FTCC_SET_IB_TIMEOUT);
	if (!ib_eng.timeout) {
		/* Every try of a work request within a quarter of the failure timeout: a link
		 * that stops acknowledging starts its rebuild long before the deadline. */
		uint64_t budget_ns = (uint64_t)ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS) *
				     1000000ull / 4 / (uint64_t)(ib_eng.retry_cnt + 1);

		ib_eng.timeout = 12;
		while (ib_eng.timeout < 20 && (4096ull << (ib_eng.timeout + 1)) <= budget_ns)
			ib_eng.timeout++;
	}
	ib_eng.sl = (int)ftcc_setting_int(FTCC_SET_IB_SL);
	ib_eng.tc = (int)ftcc_setting_int(FTCC_SET_IB_TC);
	ib_eng.connect_ns = (uint64_t)ftcc_setting_int(FTCC_SET_CONNECT_TIMEOUT_MS) * 1000000ull;
	ib_eng.rebuild_ns = (uint64_t)ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS) * 1000000ull;
	ib_eng.ndev = 0;
	if (ib_verbs_load() == 0) {
		rc = ib_dev_discover(ib_eng.devs, IB_DEV_MAX);
		ib_eng.ndev = rc > 0 ? rc : 0;
	}
	ib_eng.stop = false;
	rc = pthread_create(&ib_eng.thread, NULL, engine_main, NULL);
	if (rc) {
		for (int d = 0; d < ib_eng.ndev; d++)
			ib_dev_close(&ib_eng.devs[d]);
		ib_eng.tcp->fini();
		return -rc;
	}
	return 0;
}

/* Serialises the engine's start and teardown (taken before ib_eng.lock). */
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;

int ib_engine_get(void)
{
	int rc = 0;

	pthread_mutex_lock(&life_lock);
	pthread_mutex_lock(&ib_eng.lock);
	if (ib_eng.refs == 0)
		rc = engine_start();
	if (!rc)
		ib_eng.refs++;
	pthread_mutex_unlock(&ib_eng.lock);
	pthread_mutex_unlock(&life_lock);
	return rc;
}

static void engine_teardown(void);

void ib_engine_put(void)
{
	pthread_mutex_lock(&life_lock);
	engine_teardown();
	pthread_mutex_unlock(&life_lock);
}

static void engine_teardown(void)
{
	pthread_mutex_lock(&ib_eng.lock);
	if (ib_eng.refs == 0 || --ib_eng.refs > 0) {
		pthread_mutex_unlock(&ib_eng.lock);
		return;
	}
	ib_eng.stop = true;
	pthread_cond_signal(&eng_cond);
	pthread_mutex_unlock(&ib_eng.lock);
	pthread_join(ib_eng.thread, NULL);
	/* Whatever the caller never closed goes now: nothing may outlive the devices. */
	while (ib_eng.conns) {
		struct ib_conn *c = ib_eng.conns;
		ib_eng.conns = c->next;
		ib_conn_free(c);
	}
	while (ib_eng.listens) {
		struct ib_listen *l = ib_eng.listens;
		ib_eng.listens = l->next;
		ib_eng.tcp->close_listen(l->tcp);
		free(l);
	}
	for (int d = 0; d < ib_eng.ndev; d++)
		ib_dev_close(&ib_eng.devs[d]);
	ib_eng.ndev = 0;
	ib_eng.tcp->fini();
}
