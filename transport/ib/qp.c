/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's queue pairs: one completion queue and nqps RC QPs per connection,
 * their INIT/RTR/RTS transitions, the receiver's posted receives, and the rebuild of the
 * whole set after a QP error while both sides live (a new generation, new QP numbers and
 * PSNs, agreed over the side channel).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "ftcc/log.h"
#include "ib_int.h"

#define DRAIN_NS 200000000ull /* how long a torn-down set may take to flush its receives */

static uint32_t random_psn(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != sizeof(v))
		v = (uint32_t)ib_now_ns();
	return v & 0xffffff;
}

int ib_qps_create(struct ib_conn *c)
{
	struct ib_dev *d = c->dev;
	int cqe = c->nqps * (IB_SQ_DEPTH + IB_RQ_DEPTH) + 64;

	c->cq = ibv.create_cq(d->ctx, cqe, NULL, NULL, 0);
	if (!c->cq) {
		ftcc_info("ib: ibv_create_cq(%d) on %s failed: %s", cqe, d->name, strerror(errno));
		return -ENOMEM;
	}
	for (int q = 0; q < c->nqps; q++) {
		struct ibv_qp_init_attr ia = { .send_cq = c->cq,
					       .recv_cq = c->cq,
					       .cap = { .max_send_wr = IB_SQ_DEPTH,
							.max_recv_wr = IB_RQ_DEPTH,
							.max_send_sge = 1,
							.max_recv_sge = 1 },
					       .qp_type = IBV_QPT_RC };
		struct ib_qp_params p = { .port = d->port };
		struct ibv_qp_attr a;
		int mask, rc;

		c->qp[q] = ibv.create_qp(d->pd, &ia);
		if (!c->qp[q]) {
			ftcc_info("ib: ibv_create_qp on %s failed: %s", d->name, strerror(errno));
			return -ENOMEM;
		}
		mask = ib_qp_init_attr(&p, &a);
		rc = ibv.modify_qp(c->qp[q], &a, mask);
		if (rc) {
			ftcc_info("ib: QP to INIT on %s failed: %s", d->name, strerror(rc));
			return -rc;
		}
		c->psn[q] = random_psn();
		c->recv_posted[q] = 0;
		c->qp_state[q] = IBV_QPS_INIT;
	}
	return 0;
}

/* What we tell the peer about the current set. */
void ib_port_fill(const struct ib_conn *c, struct ib_port_info *pi)
{
	memset(pi, 0, sizeof(*pi));
	pi->lid = c->dev->lid;
	pi->link_layer = (uint8_t)c->dev->link_layer;
	pi->mtu = (uint8_t)c->dev->mtu;
	memcpy(pi->gid, c->dev->gid, 16);
	pi->nqps = (uint8_t)c->nqps;
	for (int q = 0; q < c->nqps; q++) {
		pi->qpn[q] = c->qp[q]->qp_num;
		pi->psn[q] = c->psn[q];
	}
}

int ib_recv_post(struct ib_conn *c, int q, int n)
{
	for (int i = 0; i < n; i++) {
		struct ibv_recv_wr wr = { .wr_id = IB_WR(c->gen, IB_WR_RECV, q) }, *bad;
		int rc = c->qp[q]->context->ops.post_recv(c->qp[q], &wr, &bad);

		if (rc)
			return -rc;
		c->recv_posted[q]++;
	}
	return 0;
}

int ib_qps_connect(struct ib_conn *c)
{
	const struct ib_port_info *peer = &c->peer;
	struct ib_dev *d = c->dev;

	if (peer->nqps != c->nqps || peer->link_layer != d->link_layer)
		return -EPROTO;
	for (int q = 0; q < c->nqps; q++) {
		struct ib_qp_params p = { .port = d->port,
					  .link_layer = d->link_layer,
					  .local_mtu = d->mtu,
					  .remote_mtu = peer->mtu,
					  .remote_lid = peer->lid,
					  .gid_index = d->gid_index,
					  .remote_qpn = peer->qpn[q],
					  .local_psn = c->psn[q],
					  .remote_psn = peer->psn[q],
					  .sl = ib_eng.sl,
					  .tc = ib_eng.tc,
					  .timeout = ib_eng.timeout,
					  .retry_cnt = ib_eng.retry_cnt };
		struct ibv_qp_attr a;
		int mask, rc;

		memcpy(p.local_gid, d->gid, 16);
		memcpy(p.remote_gid, peer->gid, 16);
		/* Resumable: a transition that failed (RoCE's RTR resolves the neighbour and can
		 * time out while a link flaps) is tried again on the next call. */
		rc = 0;
		if (c->qp_state[q] < IBV_QPS_RTR) {
			mask = ib_qp_rtr_attr(&p, &a);
			rc = ibv.modify_qp(c->qp[q], &a, mask);
			if (!rc)
				c->qp_state[q] = IBV_QPS_RTR;
		}
		if (!rc && c->qp_state[q] < IBV_QPS_RTS) {
			mask = ib_qp_rts_attr(&p, &a);
			rc = ibv.modify_qp(c->qp[q], &a, mask);
			if (!rc)
				c->qp_state[q] = IBV_QPS_RTS;
		}
		if (rc) {
			ftcc_trace("ib: QP to RTR/RTS on %s failed: %s", d->name, strerror(rc));
			return -rc;
		}
		if (!c->is_send) {
			rc = ib_recv_post(c, q, IB_RQ_DEPTH - c->recv_posted[q]);
			if (rc)
				return rc;
		}
	}
	return 0;
}

/* Moves the set to ERR and takes every completion out of the CQ: successes count (a receive
 * that landed is kept), flushes are dropped. A receive side waits until each posted receive
 * came back, so nothing that arrived is lost with the CQ. */
static int qps_drain(struct ib_conn *c)
{
	int pending = 0;
	struct ibv_qp_attr a = { .qp_state = IBV_QPS_ERR };
	uint64_t until = ib_now_ns() + DRAIN_NS;

	for (int q = 0; q < c->nqps; q++) {
		if (c->qp[q])
			ibv.modify_qp(c->qp[q], &a, IBV_QP_STATE);
	}
	while (c->cq) {
		struct ibv_wc wc[16];
		int n = c->cq->context->ops.poll_cq(c->cq, 16, wc);

		if (n < 0)
			break;
		for (int i = 0; i < n; i++)
			ib_handle_wc(c, &wc[i], true);
		pending = 0;
		for (int q = 0; q < c->nqps; q++)
			pending += c->qp[q] ? c->recv_posted[q] : 0;
		if (n == 0 && (c->is_send || pending <= 0 || ib_now_ns() > until))
			break;
	}
	c->rebuild_why[0] = '\0';
	return c->is_send ? 0 : pending;
}

int ib_qps_destroy(struct ib_conn *c)
{
	int lost = qps_drain(c);

	for (int q = 0; q < c->nqps; q++) {
		if (c->qp[q])
			ibv.destroy_qp(c->qp[q]);
		c->qp[q] = NULL;
		c->recv_posted[q] = 0;
	}
	if (c->cq)
		ibv.destroy_cq(c->cq);
	c->cq = NULL;
	c->qps_ready = false;
	c->own_rts = false;
	return lost ? -EIO : 0;
}

void ib_rebuild_start(struct ib_conn *c, const char *why)
{
	if (c->state == IBC_FAILED)
		return;
	/* A receive whose completion never came back from the old set may have landed: its
	 * sender may count it delivered, so it cannot be asked again. */
	if (ib_qps_destroy(c)) {
		ib_conn_fail(c, -EIO, "receives of the old queue pairs never completed");
		return;
	}
	ib_data_forget_partial(c);
	c->gen++;
	c->peer_rebuilt = false;
	c->need_create = true;
	if (!c->rebuild_ns)
		c->rebuild_ns = ib_now_ns();
	c->rebuilds++;
	ftcc_info("ib: connection with %s: %s; rebuilding its queue pairs (generation %u)",
		  c->peer_str, why, c->gen);
	ib_rebuild_step(c);
}

/* One WARN per generation for a rebuild step that keeps failing (it is retried every tick
 * until the deadline). */
static void rebuild_warn_once(struct ib_conn *c, const char *what, int rc)
{
	if (c->warned_gen == c->gen)
		return;
	c->warned_gen = c->gen;
	ftcc_warn("ib: connection with %s: %s (%s); retrying until the failure timeout",
		  c->peer_str, what, strerror(-rc));
}

void ib_rebuild_step(struct ib_conn *c)
{
	int rc;

	if (c->state != IBC_READY)
		return;
	if (c->need_create) {
		/* A port that went down is waited for (until the rebuild's deadline). */
		if (atomic_load(&c->dev->port_down))
			return;
		rc = ib_qps_create(c);
		if (rc) {
			ib_qps_destroy(c); /* what was made; tried again on the next tick */
			rebuild_warn_once(c, "cannot make its queue pairs", rc);
			return;
		}
		c->need_create = false;
		struct ib_msg m = { .type = IB_MSG_REBUILD, .gen = c->gen };
		ib_port_fill(c, &m.port);
		ib_ctl_send(c, &m);
		if (c->state != IBC_READY)
			return;
	}
	if (c->own_rts || c->peer_gen != c->gen)
		return;
	rc = ib_qps_connect(c);
	if (rc) {
		rebuild_warn_once(c, "cannot connect its queue pairs", rc);
		return; /* again on the next tick */
	}
	c->own_rts = true;
	ib_ctl_send(c, &(struct ib_msg){ .type = IB_MSG_REBUILT,
					 .gen = c->gen,
					 .done_seq = c->is_send ? 0 : c->done_seq });
	if (c->state == IBC_READY && c->peer_rebuilt)
		ib_rebuild_finish(c);
}
