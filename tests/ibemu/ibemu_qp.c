/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs emulator's queue pairs: creation limits, the RC state machine with the required
 * and optional attribute masks of ibv_modify_qp(3), address checks at RTR, posting (with the
 * send-queue accounting of selective signalling), completion on acknowledgement and the
 * error state with its flush.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ibemu.h"

#define EXPORT __attribute__((visibility("default")))
#define EMU_MAX_WR 16384
/* What a WC carries in fields that are undefined on error (ibv_poll_cq(3)): garbage. */
#define EMU_GARBAGE_OPCODE 0x5a

struct emu_qp *emu_qp_by_num(struct emu_ctx *c, uint32_t qpn)
{
	for (struct emu_qp *q = c->qps; q; q = q->next) {
		if (q->qp.qp_num == qpn)
			return q;
	}
	return NULL;
}

EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *ia)
{
	struct emu_ctx *c = (struct emu_ctx *)pd->context;
	struct emu_qp *q;

	if (ia->qp_type != IBV_QPT_RC || ia->srq) {
		errno = EOPNOTSUPP;
		return NULL;
	}
	if (!ia->send_cq || !ia->recv_cq || ia->send_cq->context != pd->context ||
	    ia->recv_cq->context != pd->context || ia->cap.max_send_wr > EMU_MAX_WR ||
	    ia->cap.max_recv_wr > EMU_MAX_WR || ia->cap.max_send_sge > EMU_MAX_SGE ||
	    ia->cap.max_recv_sge > EMU_MAX_SGE || ia->cap.max_inline_data > EMU_MAX_INLINE) {
		errno = EINVAL;
		return NULL;
	}
	q = calloc(1, sizeof(*q));
	if (q) {
		q->swr = calloc(ia->cap.max_send_wr + 1, sizeof(*q->swr));
		q->rwr = calloc(ia->cap.max_recv_wr + 1, sizeof(*q->rwr));
	}
	if (!q || !q->swr || !q->rwr) {
		if (q) {
			free(q->swr);
			free(q->rwr);
		}
		free(q);
		errno = ENOMEM;
		return NULL;
	}
	q->qp.context = pd->context;
	q->qp.qp_context = ia->qp_context;
	q->qp.pd = pd;
	q->qp.send_cq = ia->send_cq;
	q->qp.recv_cq = ia->recv_cq;
	q->qp.state = IBV_QPS_RESET;
	q->qp.qp_type = IBV_QPT_RC;
	q->cap = ia->cap;
	q->sq_sig_all = ia->sq_sig_all;
	pthread_mutex_lock(&emu.lock);
	do {
		q->qp.qp_num = c->next_qpn++ & 0xffffff;
	} while (q->qp.qp_num < 2 || emu_qp_by_num(c, q->qp.qp_num));
	q->next = c->qps;
	c->qps = q;
	pthread_mutex_unlock(&emu.lock);
	return &q->qp;
}

EXPORT int ibv_destroy_qp(struct ibv_qp *qp)
{
	struct emu_ctx *c = (struct emu_ctx *)qp->context;
	struct emu_qp *q = (struct emu_qp *)qp, **pp;

	pthread_mutex_lock(&emu.lock);
	for (pp = &c->qps; *pp && *pp != q; pp = &(*pp)->next)
		;
	if (!*pp) {
		pthread_mutex_unlock(&emu.lock);
		return EINVAL;
	}
	*pp = q->next;
	emu_links_forget_qp(q);
	emu_late_forget(c, NULL, q->qp.qp_num);
	pthread_mutex_unlock(&emu.lock);
	free(q->swr);
	free(q->rwr);
	free(q);
	return 0;
}

/* Required and optional mask bits of an RC transition (ibv_modify_qp(3)); 0 when the
 * transition does not exist. */
static int rc_masks(enum ibv_qp_state cur, enum ibv_qp_state next, int *req, int *opt)
{
	*req = IBV_QP_STATE;
	*opt = 0;
	if (next == IBV_QPS_RESET || next == IBV_QPS_ERR) {
		*opt = IBV_QP_CUR_STATE;
		return 1;
	}
	if (cur == IBV_QPS_RESET && next == IBV_QPS_INIT) {
		*req |= IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 1;
	}
	if (cur == IBV_QPS_INIT && next == IBV_QPS_INIT) {
		*opt = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
		return 1;
	}
	if (cur == IBV_QPS_INIT && next == IBV_QPS_RTR) {
		*req |= IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
		*opt = IBV_QP_ALT_PATH | IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
		return 1;
	}
	if ((cur == IBV_QPS_RTR || cur == IBV_QPS_RTS) && next == IBV_QPS_RTS) {
		if (cur == IBV_QPS_RTR)
			*req |= IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC;
		*opt = IBV_QP_CUR_STATE | IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER |
		       IBV_QP_ALT_PATH | IBV_QP_PATH_MIG_STATE;
		return 1;
	}
	return 0;
}

/* IBEMU_RTR_FAILS=N, IBEMU_RTR_FAILS_AFTER=K: after K moves to RTR that succeed, N fail. */
static int rtr_fail_once(void)
{
	static int left = -1, skip = 0;

	if (left < 0) {
		const char *v = getenv("IBEMU_RTR_FAILS");
		const char *k = getenv("IBEMU_RTR_FAILS_AFTER");

		left = v ? atoi(v) : 0;
		skip = k ? atoi(k) : 0;
	}
	if (left <= 0)
		return 0;
	if (skip > 0) {
		skip--;
		return 0;
	}
	left--;
	return 1;
}

static int gid_nonzero(const union ibv_gid *g)
{
	return g->global.subnet_prefix || g->global.interface_id;
}

/* The address vector of INIT->RTR: where packets of this QP go. */
static int check_av(struct emu_qp *q, const struct ibv_ah_attr *ah, int mtu)
{
	struct emu_ctx *c = (struct emu_ctx *)q->qp.context;
	struct ibv_port_attr pa;
	union ibv_gid sgid;

	if (ah->port_num != 1)
		return EINVAL;
	emu_port_attr(c, &pa);
	if (mtu < IBV_MTU_256 || mtu > (int)pa.active_mtu)
		return EINVAL;
	if (ah->is_global || c->edev->roce) {
		if (!ah->is_global || !gid_nonzero(&ah->grh.dgid) ||
		    ibv_query_gid(&c->ctx, 1, ah->grh.sgid_index, &sgid) || !gid_nonzero(&sgid))
			return EINVAL;
	}
	if (c->edev->roce) {
		q->dlid = (uint16_t)(ah->grh.dgid.raw[14] << 8 | ah->grh.dgid.raw[15]);
		return 0;
	}
	if (!ah->dlid)
		return EINVAL;
	q->dlid = ah->dlid;
	return 0;
}

static void qp_reset(struct emu_qp *q)
{
	q->nswr = q->nsent = q->unsig_acked = 0;
	q->rcount = q->rhead = 0;
}

EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask)
{
	struct emu_qp *q = (struct emu_qp *)qp;
	enum ibv_qp_state cur, next;
	int req, opt, err = 0;

	pthread_mutex_lock(&emu.lock);
	cur = q->qp.state;
	next = (mask & IBV_QP_STATE) ? a->qp_state : cur;
	if (!(mask & IBV_QP_STATE) || !rc_masks(cur, next, &req, &opt) || (mask & req) != req ||
	    (mask & ~(req | opt)) || ((mask & IBV_QP_CUR_STATE) && a->cur_qp_state != cur)) {
		err = EINVAL;
		goto out;
	}
	if (((mask & IBV_QP_PORT) && a->port_num != 1) ||
	    ((mask & IBV_QP_PKEY_INDEX) && a->pkey_index != 0) ||
	    ((mask & IBV_QP_TIMEOUT) && a->timeout > 31) ||
	    ((mask & IBV_QP_RETRY_CNT) && a->retry_cnt > 7) ||
	    ((mask & IBV_QP_RNR_RETRY) && a->rnr_retry > 7) ||
	    ((mask & IBV_QP_MIN_RNR_TIMER) && a->min_rnr_timer > 31) ||
	    ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && a->max_dest_rd_atomic > 16) ||
	    ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && a->max_rd_atomic > 16) ||
	    ((mask & IBV_QP_DEST_QPN) && a->dest_qp_num > 0xffffff) ||
	    ((mask & IBV_QP_RQ_PSN) && a->rq_psn > 0xffffff) ||
	    ((mask & IBV_QP_SQ_PSN) && a->sq_psn > 0xffffff)) {
		err = EINVAL;
		goto out;
	}
	if ((mask & IBV_QP_AV) && (err = check_av(q, &a->ah_attr, (int)a->path_mtu)))
		goto out;
	/* IBEMU_RTR_FAILS=N: the first N moves to RTR time out, as RoCE's address resolution
	 * can while a neighbour entry is missing; nothing changes (all or nothing). */
	if (next == IBV_QPS_RTR && cur == IBV_QPS_INIT && rtr_fail_once()) {
		err = ETIMEDOUT;
		goto out;
	}
	/* Valid: apply (ibv_modify_qp(3): all or nothing). */
	if (mask & IBV_QP_ACCESS_FLAGS)
		q->access = (int)a->qp_access_flags;
	if (mask & IBV_QP_PATH_MTU)
		q->path_mtu = (int)a->path_mtu;
	if (mask & IBV_QP_MAX_QP_RD_ATOMIC)
		q->max_rd_atomic = a->max_rd_atomic;
	if (mask & IBV_QP_DEST_QPN)
		q->dest_qpn = a->dest_qp_num;
	if (mask & IBV_QP_RQ_PSN)
		q->rq_psn = a->rq_psn;
	if (mask & IBV_QP_SQ_PSN)
		q->sq_psn = q->next_psn = a->sq_psn;
	if (mask & IBV_QP_TIMEOUT)
		q->timeout = a->timeout;
	if (mask & IBV_QP_RETRY_CNT)
		q->retry_cnt = a->retry_cnt;
	if (mask & IBV_QP_RNR_RETRY)
		q->rnr_retry = q->rnr_left = a->rnr_retry;
	if (mask & IBV_QP_MIN_RNR_TIMER)
		q->min_rnr_timer = a->min_rnr_timer;
	if (next == IBV_QPS_ERR && cur != IBV_QPS_ERR)
		emu_qp_fail(q, IBV_WC_SUCCESS);
	if (next == IBV_QPS_RESET) {
		emu_links_forget_qp(q);
		qp_reset(q);
	}
	q->qp.state = next;
	if (next == IBV_QPS_RTS && cur == IBV_QPS_RTR)
		q->progress_ns = emu_now_ns();
out:
	pthread_mutex_unlock(&emu.lock);
	return err;
}

EXPORT int ibv_query_qp(struct ibv_qp *qp, struct ibv_qp_attr *a, int mask,
			struct ibv_qp_init_attr *ia)
{
	struct emu_qp *q = (struct emu_qp *)qp;

	(void)mask;
	memset(a, 0, sizeof(*a));
	pthread_mutex_lock(&emu.lock);
	a->qp_state = a->cur_qp_state = q->qp.state;
	a->dest_qp_num = q->dest_qpn;
	a->timeout = (uint8_t)q->timeout;
	a->retry_cnt = (uint8_t)q->retry_cnt;
	a->cap = q->cap;
	pthread_mutex_unlock(&emu.lock);
	if (ia) {
		memset(ia, 0, sizeof(*ia));
		ia->cap = q->cap;
		ia->qp_type = IBV_QPT_RC;
	}
	return 0;
}

static void swr_complete(struct emu_qp *q, const struct emu_swr *w, enum ibv_wc_status st,
			 int vendor)
{
	struct ibv_wc wc = { .wr_id = w->wr_id, .status = st, .qp_num = q->qp.qp_num };

	if (st == IBV_WC_SUCCESS) {
		wc.opcode = IBV_WC_RDMA_WRITE;
	} else {
		wc.opcode = (enum ibv_wc_opcode)EMU_GARBAGE_OPCODE;
		wc.byte_len = 0xdeadbeef;
		wc.vendor_err = (uint32_t)vendor;
	}
	emu_cq_push((struct emu_cq *)q->qp.send_cq, &wc);
}

void emu_qp_fail(struct emu_qp *q, enum ibv_wc_status head)
{
	/* Receive completions come in order: those already generated go before the flushes. */
	emu_late_flush_qp((struct emu_ctx *)q->qp.context, q->qp.qp_num);
	emu_links_forget_qp(q);
	for (int i = 0; i < q->nswr; i++) {
		enum ibv_wc_status st =
			(i == 0 && head != IBV_WC_SUCCESS) ? head : IBV_WC_WR_FLUSH_ERR;

		swr_complete(q, &q->swr[i], st, i == 0 ? 0x81 : 0xf9);
	}
	for (int i = 0; i < q->rcount; i++) {
		struct ibv_wc wc = { .wr_id = q->rwr[(q->rhead + i) % (q->cap.max_recv_wr + 1)],
				     .status = IBV_WC_WR_FLUSH_ERR,
				     .opcode = (enum ibv_wc_opcode)EMU_GARBAGE_OPCODE,
				     .qp_num = q->qp.qp_num };

		emu_cq_push((struct emu_cq *)q->qp.recv_cq, &wc);
	}
	q->nswr = q->nsent = q->unsig_acked = 0;
	q->rcount = q->rhead = 0;
	q->qp.state = IBV_QPS_ERR;
}

void emu_qp_ack(struct emu_qp *q, uint32_t psn)
{
	int n = 0;

	while (n < q->nsent && emu_psn_le(q->swr[n].psn, psn)) {
		if (q->swr[n].signaled) {
			swr_complete(q, &q->swr[n], IBV_WC_SUCCESS, 0);
			q->unsig_acked = 0;
		} else {
			/* Its send-queue slot frees only with a later signalled completion. */
			q->unsig_acked++;
		}
		n++;
	}
	if (!n)
		return;
	memmove(q->swr, q->swr + n, sizeof(*q->swr) * (size_t)(q->nswr - n));
	q->nswr -= n;
	q->nsent -= n;
	q->progress_ns = emu_now_ns();
	q->rnr_left = q->rnr_retry;
}

/* Checks one WR's gather list against the MR table; 0 or EINVAL/EOPNOTSUPP/ENOMEM. */
static int swr_fill(struct emu_qp *q, const struct ibv_send_wr *wr, struct emu_swr *w)
{
	struct emu_ctx *c = (struct emu_ctx *)q->qp.context;

	if (wr->opcode != IBV_WR_RDMA_WRITE && wr->opcode != IBV_WR_RDMA_WRITE_WITH_IMM)
		return EOPNOTSUPP;
	if (wr->num_sge < 0 || wr->num_sge > (int)q->cap.max_send_sge)
		return EINVAL;
	if (wr->send_flags & ~(unsigned int)(IBV_SEND_SIGNALED | IBV_SEND_INLINE | IBV_SEND_FENCE |
					     IBV_SEND_SOLICITED))
		return EINVAL;
	if (q->nswr + q->unsig_acked >= (int)q->cap.max_send_wr)
		return ENOMEM;
	memset(w, 0, sizeof(*w));
	w->wr_id = wr->wr_id;
	w->opcode = wr->opcode;
	w->signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	w->raddr = wr->wr.rdma.remote_addr;
	w->rkey = wr->wr.rdma.rkey;
	w->imm = wr->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? wr->imm_data : 0;
	w->nsge = wr->num_sge;
	w->is_inline = !!(wr->send_flags & IBV_SEND_INLINE);
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];

		w->sge[i] = *s;
		w->len += s->length;
		if (w->is_inline)
			continue;
		struct emu_mr *m = emu_mr_by_lkey(c, s->lkey);
		if (!m || m->mr.pd != q->qp.pd || s->addr < (uint64_t)(uintptr_t)m->mr.addr ||
		    s->addr + s->length > (uint64_t)(uintptr_t)m->mr.addr + m->mr.length)
			w->bad_lkey = 1;
		else
			w->sge[i].addr += (uint64_t)m->shift; /* where the bytes are read from */
	}
	if (w->len > (1ull << 31))
		return EINVAL;
	if (w->is_inline) {
		if (w->len > q->cap.max_inline_data)
			return EINVAL;
		uint64_t off = 0;
		for (int i = 0; i < wr->num_sge; i++) {
			memcpy(w->inline_buf + off, (void *)(uintptr_t)w->sge[i].addr,
			       w->sge[i].length);
			off += w->sge[i].length;
		}
	}
	w->post_ns = emu_now_ns();
	return 0;
}

static unsigned long reads_done; /* under emu.lock */

EXPORT unsigned long ftcc_ibemu_reads(void)
{
	pthread_mutex_lock(&emu.lock);
	unsigned long n = reads_done;
	pthread_mutex_unlock(&emu.lock);
	return n;
}

/* Whether [@addr, @addr + @len) lies in @m (addresses as the MR's). */
static int mr_covers(const struct emu_mr *m, uint64_t addr, uint64_t len)
{
	uint64_t base = (uint64_t)(uintptr_t)m->mr.addr;

	return addr >= base && len <= m->mr.length && addr - base <= m->mr.length - len;
}

/* An RDMA read on a queue pair connected to itself, with nothing else in flight: carried out
 * at once, with the checks of both ends (the responder's QP and MR allow remote read; the
 * requester's MR allows local write, as the target of a read must). A read to another queue
 * pair is not emulated. Caller holds emu.lock. */
static int read_loopback(struct emu_qp *q, const struct ibv_send_wr *wr)
{
	struct emu_ctx *c = (struct emu_ctx *)q->qp.context;
	struct ibv_wc wc = { .wr_id = wr->wr_id, .qp_num = q->qp.qp_num };
	int signaled = q->sq_sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
	uint64_t len = 0, raddr = wr->wr.rdma.remote_addr;
	struct emu_mr *rm = emu_mr_by_rkey(c, wr->wr.rdma.rkey);

	if (q->dest_qpn != q->qp.qp_num || q->dlid != c->lid || q->nswr)
		return EOPNOTSUPP;
	if (wr->num_sge < 0 || wr->num_sge > (int)q->cap.max_send_sge || q->max_rd_atomic < 1 ||
	    (wr->send_flags & ~(unsigned int)(IBV_SEND_SIGNALED | IBV_SEND_FENCE)))
		return EINVAL;
	if (q->unsig_acked + 1 >= (int)q->cap.max_send_wr && !signaled)
		return ENOMEM;
	wc.status = IBV_WC_SUCCESS;
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];
		struct emu_mr *m = emu_mr_by_lkey(c, s->lkey);

		len += s->length;
		if (!m || m->mr.pd != q->qp.pd || !(m->access & IBV_ACCESS_LOCAL_WRITE) ||
		    !mr_covers(m, s->addr, s->length))
			wc.status = IBV_WC_LOC_PROT_ERR;
	}
	if (wc.status == IBV_WC_SUCCESS &&
	    (!rm || rm->mr.pd != q->qp.pd || !(rm->access & IBV_ACCESS_REMOTE_READ) ||
	     !(q->access & IBV_ACCESS_REMOTE_READ) || !mr_covers(rm, raddr, len)))
		wc.status = IBV_WC_REM_ACCESS_ERR;
	if (!c->port_up)
		wc.status = IBV_WC_RETRY_EXC_ERR; /* nothing leaves or loops back through it */
	if (q->qp.state == IBV_QPS_ERR)
		wc.status = IBV_WC_WR_FLUSH_ERR;
	if (wc.status != IBV_WC_SUCCESS) {
		wc.opcode = (enum ibv_wc_opcode)EMU_GARBAGE_OPCODE;
		emu_cq_push((struct emu_cq *)q->qp.send_cq, &wc);
		if (q->qp.state != IBV_QPS_ERR)
			emu_qp_fail(q, IBV_WC_SUCCESS);
		return 0;
	}
	for (int i = 0; i < wr->num_sge; i++) {
		const struct ibv_sge *s = &wr->sg_list[i];
		struct emu_mr *m = emu_mr_by_lkey(c, s->lkey);

		memmove((void *)(uintptr_t)(s->addr + (uint64_t)m->shift),
			(const void *)(uintptr_t)(raddr + (uint64_t)rm->shift), s->length);
		raddr += s->length;
	}
	reads_done++;
	if (signaled) {
		wc.opcode = IBV_WC_RDMA_READ;
		wc.byte_len = (uint32_t)len;
		emu_cq_push((struct emu_cq *)q->qp.send_cq, &wc);
		q->unsig_acked = 0;
	} else {
		q->unsig_acked++;
	}
	q->progress_ns = emu_now_ns();
	return 0;
}

int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad)
{
	struct emu_qp *q = (struct emu_qp *)qp;
	int err = 0;

	pthread_mutex_lock(&emu.lock);
	if (q->qp.state != IBV_QPS_RTS && q->qp.state != IBV_QPS_ERR)
		err = EINVAL;
	for (; wr && !err; wr = wr->next) {
		struct emu_swr w;

		if (wr->opcode == IBV_WR_RDMA_READ) {
			err = read_loopback(q, wr);
			if (err)
				break;
			continue;
		}
		err = swr_fill(q, wr, &w);
		if (err)
			break;
		if (q->qp.state == IBV_QPS_ERR) {
			swr_complete(q, &w, IBV_WC_WR_FLUSH_ERR, 0xf9);
			continue;
		}
		w.psn = q->next_psn;
		q->next_psn = (q->next_psn + 1) & 0xffffff;
		q->swr[q->nswr++] = w;
	}
	if (err && bad)
		*bad = wr;
	pthread_mutex_unlock(&emu.lock);
	emu_wake();
	return err;
}

int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad)
{
	struct emu_qp *q = (struct emu_qp *)qp;
	int err = 0;

	pthread_mutex_lock(&emu.lock);
	if (q->qp.state == IBV_QPS_RESET)
		err = EINVAL;
	for (; wr && !err; wr = wr->next) {
		if (wr->num_sge < 0 || wr->num_sge > (int)q->cap.max_recv_sge) {
			err = EINVAL;
			break;
		}
		if (q->rcount >= (int)q->cap.max_recv_wr) {
			err = ENOMEM;
			break;
		}
		if (q->qp.state == IBV_QPS_ERR) {
			struct ibv_wc wc = { .wr_id = wr->wr_id,
					     .status = IBV_WC_WR_FLUSH_ERR,
					     .qp_num = q->qp.qp_num };
			emu_cq_push((struct emu_cq *)q->qp.recv_cq, &wc);
			continue;
		}
		q->rwr[(q->rhead + q->rcount++) % (q->cap.max_recv_wr + 1)] = wr->wr_id;
	}
	if (err && bad)
		*bad = wr;
	pthread_mutex_unlock(&emu.lock);
	emu_wake();
	return err;
}
