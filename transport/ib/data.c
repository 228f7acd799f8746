/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's data path: clear-to-send entries written by the receiver, sends
 * matched to them and written striped over the QPs with a closing write-with-immediate per
 * QP, completions, and the resume after a rebuild (what the receiver has is done, the rest is
 * written again: the buffers are still the caller's, so writing twice is harmless).
 */
#define _GNU_SOURCE
#include <endian.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ftcc/log.h"
#include "ib_int.h"

const char *ib_wc_status_str(enum ibv_wc_status st)
{
	switch (st) {
	case IBV_WC_RETRY_EXC_ERR:
		return "transport retries exceeded";
	case IBV_WC_WR_FLUSH_ERR:
		return "flushed";
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return "receiver-not-ready retries exceeded";
	case IBV_WC_REM_ACCESS_ERR:
		return "remote access error";
	case IBV_WC_REM_INV_REQ_ERR:
		return "remote invalid request";
	case IBV_WC_LOC_PROT_ERR:
		return "local protection error";
	case IBV_WC_LOC_LEN_ERR:
		return "local length error";
	default:
		return "error";
	}
}

static struct ib_req *req_alloc(struct ib_conn *c, bool is_send)
{
	for (int i = 0; i < FTCC_MAX_REQUESTS; i++) {
		struct ib_req *r = &c->reqs[i];

		if (r->state == IBR_FREE) {
			memset(r, 0, sizeof(*r));
			r->conn = c;
			r->state = IBR_ACTIVE;
			r->is_send = is_send;
			return r;
		}
	}
	return NULL;
}

static void recv_complete(struct ib_conn *c, struct ib_slot *s)
{
	struct ib_req *r = s->req[0];
	int idx = (int)(s->seq % IB_NSLOTS);

	for (int i = 0; i < r->n; i++) {
		uint64_t got = c->sizes[idx][i];

		if (got > s->cts[i].size) {
			ib_conn_fail(c, -EPROTO, "sent %llu bytes into a %llu-byte receive",
				     (unsigned long long)got, (unsigned long long)s->cts[i].size);
			return;
		}
		r->sizes[i] = (size_t)got;
	}
	r->state = IBR_DONE;
	s->active = false;
	c->misuse_errs = 0;
	/* In order: the first slot not complete. */
	while (c->done_seq < c->head) {
		const struct ib_slot *d = &c->slots[c->done_seq % IB_NSLOTS];

		if (d->active && d->seq == c->done_seq)
			break;
		c->done_seq++;
	}
}

/* Whether a fully matched send is waiting for its completions. */
static bool send_in_flight(const struct ib_conn *c)
{
	for (int i = 0; i < IB_NSLOTS; i++) {
		if (c->slots[i].active && c->slots[i].posted)
			return true;
	}
	return false;
}

/* A closing completion of slot @s from QP @q; a second one from the same QP in one generation
 * is a protocol error. Returns 1 when every QP's has come. */
static int slot_closed_by(struct ib_conn *c, struct ib_slot *s, uint32_t q)
{
	uint32_t bit = 1u << q;

	if (q >= (uint32_t)c->nqps || (s->imm_mask & bit)) {
		ib_conn_fail(c, -EPROTO, "a second closing completion of slot %llu from QP %u",
			     (unsigned long long)s->seq, q);
		return 0;
	}
	s->imm_mask |= bit;
	return s->imm_mask == (1u << c->nqps) - 1;
}

void ib_handle_wc(struct ib_conn *c, const struct ibv_wc *wc, bool draining)
{
	uint64_t w = wc->wr_id;
	struct ib_slot *s;

	if (IB_WR_GEN(w) != (c->gen & 0xffffff))
		return;
	if (IB_WR_KIND(w) == IB_WR_RECV && IB_WR_VAL(w) < (uint32_t)c->nqps)
		c->recv_posted[IB_WR_VAL(w)]--; /* a posted receive came back, however */
	if (wc->status != IBV_WC_SUCCESS) {
		/* Only wr_id and status mean anything in an error completion (ibv_poll_cq(3)).
		 * A bad key, address or length is misuse (ours or the peer's), or a peer that
		 * deregistered while closing: one rebuild gives the side channel time to tell of
		 * the close; the same error again, with nothing delivered in between, is misuse. */
		if (!draining &&
		    (wc->status == IBV_WC_LOC_PROT_ERR || wc->status == IBV_WC_LOC_LEN_ERR ||
		     wc->status == IBV_WC_REM_ACCESS_ERR || wc->status == IBV_WC_REM_INV_REQ_ERR) &&
		    c->misuse_errs++ > 0) {
			ib_conn_fail(c, -EINVAL, "work request failed again (%s)",
				     ib_wc_status_str(wc->status));
			return;
		}
		/* The rebuild waits for the end of the batch: what else it holds still counts. */
		if (!draining && !c->rebuild_why[0])
			snprintf(c->rebuild_why, sizeof(c->rebuild_why),
				 "work request failed (%s, vendor error 0x%x)",
				 ib_wc_status_str(wc->status), wc->vendor_err);
		return;
	}
	/* Something of this generation got through. On the receive side that ends the
	 * rebuild's deadline (whether data comes is the sender's to know); on the send side only
	 * a completed message does, or any completion when nothing is in flight: a path that
	 * carries small writes but drops full ones must not reset the deadline forever. */
	if (!c->is_send || !send_in_flight(c))
		c->rebuild_ns = 0;
	switch (IB_WR_KIND(w)) {
	case IB_WR_RECV:
		s = &c->slots[be32toh(wc->imm_data) % IB_NSLOTS];
		if (wc->opcode != IBV_WC_RECV_RDMA_WITH_IMM || !s->active ||
		    (uint32_t)s->seq != be32toh(wc->imm_data)) {
			ib_conn_fail(c, -EPROTO, "unexpected immediate %u", be32toh(wc->imm_data));
			return;
		}
		if (!draining && IB_WR_VAL(w) < (uint32_t)c->nqps)
			ib_recv_post(c, (int)IB_WR_VAL(w), 1);
		/* The immediate rides on the QP the receive was posted on. */
		if (slot_closed_by(c, s, IB_WR_VAL(w)))
			recv_complete(c, s);
		break;
	case IB_WR_IMM:
		s = &c->slots[(IB_WR_VAL(w) >> 8) % IB_NSLOTS];
		if (!s->active || (uint32_t)(s->seq & 0xffffff) != (IB_WR_VAL(w) >> 8))
			return;
		if (slot_closed_by(c, s, IB_WR_VAL(w) & 0xff)) {
			for (int i = 0; i < s->nreqs; i++)
				s->req[i]->state = IBR_DONE;
			s->active = false;
			c->rebuild_ns = 0; /* a whole message went through */
			c->misuse_errs = 0;
		}
		break;
	default:
		break;
	}
}

int ib_poll(struct ib_conn *c)
{
	if (atomic_load(&c->dev->fatal)) {
		ib_conn_fail(c, -EIO, "device %s failed", c->dev->name);
		return atomic_load(&c->err);
	}
	/* What completed before the end still counts: a peer that closes right after taking
	 * our last message leaves its acknowledgement in our CQ. */
	while (c->cq && c->state == IBC_FAILED) {
		struct ibv_wc wc[16];
		int n = c->cq->context->ops.poll_cq(c->cq, 16, wc);

		for (int i = 0; i < n; i++)
			ib_handle_wc(c, &wc[i], true);
		if (n < 16)
			break;
	}
	while (c->cq && c->state == IBC_READY) {
		struct ibv_cq *cq = c->cq;
		struct ibv_wc wc[16];
		int n = cq->context->ops.poll_cq(cq, 16, wc);

		if (n < 0) {
			ib_rebuild_start(c, "completion queue error");
			break;
		}
		for (int i = 0; i < n && c->cq == cq && c->state == IBC_READY; i++)
			ib_handle_wc(c, &wc[i], false);
		if (c->rebuild_why[0] && c->state == IBC_READY) {
			char why[sizeof(c->rebuild_why)];

			memcpy(why, c->rebuild_why, sizeof(why));
			c->rebuild_why[0] = '\0';
			ib_rebuild_start(c, why);
			break;
		}
		if (n < 16 || c->cq != cq)
			break;
	}
	/* The side channel can tell of a peer's close before our NIC tells of the
	 * acknowledgement that came first: for a short grace the end is not reported (a test()
	 * is not done yet, a post is not accepted yet), so a last send the peer took completes. */
	if (c->state == IBC_FAILED && c->side_err && ib_now_ns() < c->fail_ns + IB_END_GRACE_NS)
		return 0;
	return atomic_load(&c->err);
}

static int post_chain(struct ibv_qp *qp, struct ibv_send_wr *wrs, int n)
{
	struct ibv_send_wr *bad;

	for (int i = 0; i < n; i++)
		wrs[i].next = i + 1 < n ? &wrs[i + 1] : NULL;
	return qp->context->ops.post_send(qp, wrs, &bad);
}

int ib_slot_post(struct ib_conn *c, struct ib_slot *s)
{
	int idx = (int)(s->seq % IB_NSLOTS);

	for (int q = 0; q < c->nqps; q++) {
		struct ibv_send_wr wrs[FTCC_MAX_RECVS + 2];
		struct ibv_sge sges[FTCC_MAX_RECVS + 1];
		int k = 0, rc;

		memset(wrs, 0, sizeof(wrs));
		for (int i = 0; i < s->nreqs; i++) {
			struct ib_req *r = s->req[i];
			/* Each QP carries a 128-byte-aligned share: LL128 lines are never split. */
			size_t chunk = ((r->size + (size_t)c->nqps - 1) / (size_t)c->nqps + 127) &
				       ~(size_t)127;
			size_t off = (size_t)q * chunk;

			if (off >= r->size)
				continue;
			sges[k] = (struct ibv_sge){
				.addr = (uintptr_t)r->data + off,
				.length = (uint32_t)(r->size - off < chunk ? r->size - off : chunk),
				.lkey = r->lkey
			};
			wrs[k] = (struct ibv_send_wr){ .wr_id = IB_WR(c->gen, IB_WR_DATA, s->seq),
						       .sg_list = &sges[k],
						       .num_sge = 1,
						       .opcode = IBV_WR_RDMA_WRITE };
			wrs[k].wr.rdma.remote_addr = s->cts[i].addr + off;
			wrs[k].wr.rdma.rkey = s->cts[i].rkey;
			k++;
		}
		if (q == 0) {
			for (int i = 0; i < s->nreqs; i++)
				c->sizes[idx][i] = s->req[i]->size;
			sges[k] = (struct ibv_sge){ .addr = (uintptr_t)c->sizes[idx],
						    .length = (uint32_t)(sizeof(uint64_t) *
									 (size_t)s->nreqs),
						    .lkey = c->sizes_mr->lkey };
			wrs[k] = (struct ibv_send_wr){ .wr_id = IB_WR(c->gen, IB_WR_SIZES, s->seq),
						       .sg_list = &sges[k],
						       .num_sge = 1,
						       .opcode = IBV_WR_RDMA_WRITE };
			wrs[k].wr.rdma.remote_addr =
				c->remote_addr + (uint64_t)idx * sizeof(c->sizes[0]);
			wrs[k].wr.rdma.rkey = c->remote_rkey;
			k++;
		}
		wrs[k] = (struct ibv_send_wr){
			.wr_id = IB_WR(c->gen, IB_WR_IMM, ((s->seq & 0xffffff) << 8) | (uint64_t)q),
			.opcode = IBV_WR_RDMA_WRITE_WITH_IMM,
			.send_flags = IBV_SEND_SIGNALED,
			.imm_data = htobe32((uint32_t)s->seq)
		};
		wrs[k].wr.rdma.remote_addr = c->remote_addr;
		wrs[k].wr.rdma.rkey = c->remote_rkey;
		k++;
		rc = post_chain(c->qp[q], wrs, k);
		if (rc)
			return -rc;
	}
	return 0;
}

int ib_cts_post(struct ib_conn *c, struct ib_slot *s)
{
	int idx = (int)(s->seq % IB_NSLOTS);
	struct ib_cts *src = &c->fifo[idx * FTCC_MAX_RECVS];
	struct ibv_sge sge = { .addr = (uintptr_t)src,
			       .length = (uint32_t)(sizeof(*src) * (size_t)s->nreqs),
			       .lkey = c->fifo_mr->lkey };
	struct ibv_send_wr wr = { .wr_id = IB_WR(c->gen, IB_WR_CTS, s->seq),
				  .sg_list = &sge,
				  .num_sge = 1,
				  .opcode = IBV_WR_RDMA_WRITE,
				  .send_flags = IBV_SEND_SIGNALED };

	wr.wr.rdma.remote_addr = c->remote_addr + (uint64_t)idx * FTCC_MAX_RECVS * sizeof(*src);
	wr.wr.rdma.rkey = c->remote_rkey;
	return -post_chain(c->qp[0], &wr, 1);
}

void ib_data_forget_partial(struct ib_conn *c)
{
	for (int i = 0; i < IB_NSLOTS; i++)
		c->slots[i].imm_mask = 0;
}

/* A zero-byte signalled write on each QP: its completion says the new set carries traffic,
 * which ends the rebuild's deadline even when no message is in flight. */
static int probe_post(struct ib_conn *c)
{
	for (int q = 0; q < c->nqps; q++) {
		struct ibv_send_wr wr = { .wr_id = IB_WR(c->gen, IB_WR_PROBE, q),
					  .opcode = IBV_WR_RDMA_WRITE,
					  .send_flags = IBV_SEND_SIGNALED };
		int rc;

		wr.wr.rdma.remote_addr = c->remote_addr;
		wr.wr.rdma.rkey = c->remote_rkey;
		rc = post_chain(c->qp[q], &wr, 1);
		if (rc)
			return -rc;
	}
	return 0;
}

void ib_data_resume(struct ib_conn *c)
{
	uint64_t first = c->head > IB_NSLOTS ? c->head - IB_NSLOTS : 0;
	int rc;

	c->qps_ready = true;
	rc = probe_post(c);
	/* In sequence order, as they were first posted: the receiver completes in order. */
	for (uint64_t seq = c->is_send ? first : c->done_seq; seq < c->head && !rc; seq++) {
		struct ib_slot *s = &c->slots[seq % IB_NSLOTS];

		if (!s->active || s->seq != seq)
			continue;
		if (!c->is_send) {
			rc = ib_cts_post(c, s);
			continue;
		}
		if (!s->posted)
			continue; /* still being matched: it goes when its last send comes */
		if (s->seq < c->peer_done) {
			/* The receiver has it: only our completion was lost with the old QPs. */
			for (int k = 0; k < s->nreqs; k++)
				s->req[k]->state = IBR_DONE;
			s->active = false;
			continue;
		}
		rc = ib_slot_post(c, s);
	}
	if (rc)
		ib_rebuild_start(c, "posting after the rebuild failed");
}

int ib_isend(struct ftcc_conn *base, void *data, size_t size, int tag, void *mh,
	     struct ftcc_req **out)
{
	struct ib_conn *c = (struct ib_conn *)base;
	struct ib_slot *s;
	struct ib_req *r;
	int idx, rc, i;

	*out = NULL;
	if (!c->is_send || (size && !mh))
		return -EINVAL;
	pthread_mutex_lock(&c->lock);
	rc = ib_poll(c);
	if (rc || !c->qps_ready)
		goto out;
	idx = (int)(c->head % IB_NSLOTS);
	s = &c->slots[idx];
	if (s->active && s->seq != c->head)
		goto out; /* the slot's previous use has not completed here yet */
	volatile struct ib_cts *e = &c->fifo[idx * FTCC_MAX_RECVS];
	if (e[0].seq != c->head + 1)
		goto out;
	/* The entry's fields only after its sequence number says it is this slot's. */
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	int nreqs = (int)e[0].nreqs;
	if (nreqs < 1 || nreqs > FTCC_MAX_RECVS) {
		ib_conn_fail(c, -EPROTO, "clear-to-send with %d receives", nreqs);
		rc = -EPROTO;
		goto out;
	}
	for (i = 1; i < nreqs; i++) {
		if (e[i].seq != c->head + 1)
			goto out; /* not all of the slot has landed */
	}
	__atomic_thread_fence(__ATOMIC_ACQUIRE);
	if (!s->active) {
		memset(s, 0, sizeof(*s));
		s->seq = c->head;
		s->active = true;
		s->nreqs = nreqs;
		for (i = 0; i < nreqs; i++)
			s->cts[i] = *(const struct ib_cts *)&e[i];
	}
	for (i = 0; i < s->nreqs && (s->req[i] || s->cts[i].tag != tag); i++)
		;
	if (i == s->nreqs) {
		ftcc_warn("ib: send with tag %d to %s matches no receive of slot %llu", tag,
			  c->peer_str, (unsigned long long)c->head);
		rc = -EINVAL;
		goto out;
	}
	if (size > s->cts[i].size) {
		/* Misuse, like a truncated message on NCCL's socket transport: both sides fail,
		 * the receiver told over the side channel, nothing is written. */
		ib_conn_fail(c, -EMSGSIZE, "a send of %zu bytes is larger than its receive (%llu)",
			     size, (unsigned long long)s->cts[i].size);
		rc = -EMSGSIZE;
		goto out;
	}
	r = req_alloc(c, true);
	if (!r)
		goto out;
	r->seq = c->head;
	r->data = data;
	r->size = size;
	r->lkey = mh ? ((struct ibv_mr *)mh)->lkey : 0;
	s->req[i] = r;
	if (++s->matched == s->nreqs) {
		s->posted = true; /* from now on a rebuild posts it again */
		rc = ib_slot_post(c, s);
		c->head++;
		if (rc) {
			ib_rebuild_start(c, "posting a send failed");
			rc = 0;
		}
	}
	*out = (struct ftcc_req *)r;
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ib_irecv(struct ftcc_conn *base, int n, void **data, const size_t *sizes, const int *tags,
	     void **mh, struct ftcc_req **out)
{
	struct ib_conn *c = (struct ib_conn *)base;
	struct ib_slot *s;
	struct ib_req *r;
	int rc;

	*out = NULL;
	if (c->is_send || n < 1 || n > FTCC_MAX_RECVS)
		return -EINVAL;
	for (int i = 0; i < n; i++) {
		if (sizes[i] && !mh[i])
			return -EINVAL;
	}
	pthread_mutex_lock(&c->lock);
	rc = ib_poll(c);
	if (rc || c->state == IBC_FAILED || c->head - c->done_seq >= IB_NSLOTS)
		goto out;
	r = req_alloc(c, false);
	if (!r)
		goto out;
	r->seq = c->head;
	r->n = n;
	s = &c->slots[c->head % IB_NSLOTS];
	memset(s, 0, sizeof(*s));
	s->seq = c->head;
	s->active = true;
	s->nreqs = n;
	s->req[0] = r;
	struct ib_cts *e = &c->fifo[(c->head % IB_NSLOTS) * FTCC_MAX_RECVS];
	for (int i = 0; i < n; i++) {
		e[i] = (struct ib_cts){ .addr = (uintptr_t)data[i],
					.size = sizes[i],
					.rkey = mh[i] ? ((struct ibv_mr *)mh[i])->rkey : 0,
					.tag = tags[i],
					.nreqs = (uint32_t)n,
					.seq = c->head + 1 };
		s->cts[i] = e[i];
	}
	c->head++;
	if (c->qps_ready && ib_cts_post(c, s))
		ib_rebuild_start(c, "posting a clear-to-send failed");
	*out = (struct ftcc_req *)r;
out:
	pthread_mutex_unlock(&c->lock);
	return rc;
}

int ib_test(struct ftcc_req *base, int *done, size_t *sizes)
{
	struct ib_req *r = (struct ib_req *)base;
	struct ib_conn *c = r->conn;
	int rc = 0;

	*done = 0;
	pthread_mutex_lock(&c->lock);
	if (r->state != IBR_DONE)
		rc = ib_poll(c);

	if (r->state == IBR_DONE) {
		if (sizes) {
			if (r->is_send)
				sizes[0] = r->size;
			else
				memcpy(sizes, r->sizes, sizeof(size_t) * (size_t)r->n);
		}
		r->state = IBR_FREE;
		*done = 1;
		rc = 0;
	}
	pthread_mutex_unlock(&c->lock);
	return rc;
}
