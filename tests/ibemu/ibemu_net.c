/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs emulator's wire: the agent thread, the links between agents (abstract unix
 * sockets named by LID), the responder's checks and placement, acknowledgements, go-back-N
 * after a lost link or an RNR NAK, the retry timer, and fault injection.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ibemu.h"

#define EXPORT __attribute__((visibility("default")))
#define IO_CHUNK (1u << 20)
#define REFUSED_RETRY_NS 10000000ull

static uint8_t scratch[IO_CHUNK];
/* IBEMU_INJECT="fault@N": @inj_fault after N data packets sent by this process. */
static char inj_fault[32];
static long inj_after = -1;
static long packets_sent;

uint64_t emu_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void emu_wake(void)
{
	if (emu.wake[1] >= 0 && write(emu.wake[1], "w", 1) < 0) {
		/* full pipe: the agent is awake anyway */
	}
}

static socklen_t emu_addr(struct sockaddr_un *sa, uint16_t lid)
{
	memset(sa, 0, sizeof(*sa));
	sa->sun_family = AF_UNIX;
	int n = snprintf(sa->sun_path + 1, sizeof(sa->sun_path) - 1, "ftcc-ibemu.%s.%u", emu.fabric,
			 lid);
	return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + (size_t)n);
}

int emu_listen(struct emu_ctx *c)
{
	for (int tries = 0; tries < 4096; tries++) {
		struct sockaddr_un sa;
		unsigned int r = 0;

		if (getrandom(&r, sizeof(r), 0) != sizeof(r))
			r = (unsigned int)getpid() + (unsigned int)tries * 7919u;
		uint16_t lid = (uint16_t)(1 + r % 0xbffe);
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			return -errno;
		if (bind(fd, (struct sockaddr *)&sa, emu_addr(&sa, lid)) == 0 &&
		    listen(fd, 64) == 0) {
			c->lid = lid;
			c->listen_fd = fd;
			return 0;
		}
		int err = errno;
		close(fd);
		if (err != EADDRINUSE)
			return -err;
	}
	return -EADDRINUSE;
}

static struct emu_link *link_new(struct emu_ctx *c, int fd, int outgoing, uint16_t lid)
{
	struct emu_link *l = calloc(1, sizeof(*l));

	if (!l)
		return NULL;
	l->ctx = c;
	l->fd = fd;
	l->outgoing = outgoing;
	l->peer_lid = lid;
	l->next = c->links;
	c->links = l;
	return l;
}

/* Closes @l's socket (the sweep frees it); what was in flight on it is sent again. */
static void link_drop(struct emu_link *l)
{
	if (l->fd >= 0)
		close(l->fd);
	l->fd = -1;
	l->dead = 1;
	l->out_active = 0;
	l->out_qp = NULL;
	l->in_qp = NULL;
	l->nacks = 0;
	if (!l->outgoing)
		return;
	for (struct emu_qp *q = l->ctx->qps; q; q = q->next) {
		if (q->dlid == l->peer_lid)
			q->nsent = 0; /* go back N: the responder drops what it already has */
	}
}

static void links_sweep(struct emu_ctx *c)
{
	struct emu_link **pp = &c->links;

	while (*pp) {
		struct emu_link *l = *pp;

		if (l->dead && (!l->outgoing || l->retry_ns <= emu_now_ns())) {
			*pp = l->next;
			free(l->acks);
			free(l);
		} else {
			pp = &l->next;
		}
	}
}

void emu_links_close(struct emu_ctx *c)
{
	for (struct emu_link *l = c->links; l; l = l->next)
		link_drop(l);
	for (struct emu_link *l = c->links; l; l = l->next)
		l->retry_ns = 0;
	links_sweep(c);
}

void emu_links_forget_qp(struct emu_qp *qp)
{
	struct emu_ctx *c = (struct emu_ctx *)qp->qp.context;

	for (struct emu_link *l = c->links; l; l = l->next) {
		if (l->out_qp == qp)
			link_drop(l);
		if (l->in_qp == qp) {
			l->in_qp = NULL;
			l->in_dst = NULL;
			l->in_status = -1;
		}
	}
}

static void queue_ack(struct emu_link *l, uint32_t qpn, uint32_t psn, int status)
{
	if (l->nacks == l->cap_acks) {
		int cap = l->cap_acks ? 2 * l->cap_acks : 16;
		struct emu_pkt *a = realloc(l->acks, sizeof(*a) * (size_t)cap);

		if (!a)
			return; /* the requester retries after its timeout */
		l->acks = a;
		l->cap_acks = cap;
	}
	l->acks[l->nacks++] = (struct emu_pkt){ .type = EMU_PKT_ACK,
						.dst_qpn = qpn,
						.psn = psn,
						.src_lid = l->ctx->lid,
						.status = (uint16_t)status };
}

/* Responder: a WRITE header arrived; decide where its payload goes and what to answer. */
static void on_write(struct emu_link *l)
{
	const struct emu_pkt *p = &l->in;
	struct emu_ctx *c = l->ctx;
	struct emu_qp *q;
	struct emu_mr *m;

	if (!l->outgoing)
		l->peer_lid = p->src_lid;
	l->in_dst = NULL;
	l->in_qp = NULL;
	l->in_status = -1; /* silent drop */
	l->in_left = p->len;
	q = emu_qp_by_num(c, p->dst_qpn);
	if (!c->port_up || !q || (q->qp.state != IBV_QPS_RTR && q->qp.state != IBV_QPS_RTS) ||
	    q->dlid != p->src_lid || q->dest_qpn != p->src_qpn)
		return;
	if (p->psn != q->rq_psn) {
		if (emu_psn_le(p->psn, (q->rq_psn - 1) & 0xffffff))
			l->in_status = EMU_ACK_OK; /* duplicate after go-back-N: ACK again */
		return;
	}
	if (p->has_imm && q->rcount == 0) {
		l->in_status = EMU_NAK_RNR;
		return;
	}
	if (p->len) {
		m = emu_mr_by_rkey(c, p->rkey);
		if (!m || m->mr.pd != q->qp.pd || !(m->access & IBV_ACCESS_REMOTE_WRITE) ||
		    !(q->access & IBV_ACCESS_REMOTE_WRITE) ||
		    p->raddr < (uint64_t)(uintptr_t)m->mr.addr ||
		    p->raddr + p->len > (uint64_t)(uintptr_t)m->mr.addr + m->mr.length) {
			/* The responder's QP goes to ERR too, with an async event. */
			l->in_status = EMU_NAK_ACCESS;
			emu_qp_fail(q, IBV_WC_SUCCESS);
			emu_ctx_async(c, IBV_EVENT_QP_ACCESS_ERR, NULL);
			return;
		}
		l->in_dst = (uint8_t *)(uintptr_t)(p->raddr + (uint64_t)m->shift);
	}
	l->in_qp = q;
	l->in_status = EMU_ACK_OK;
}

static void on_write_done(struct emu_link *l)
{
	const struct emu_pkt *p = &l->in;
	struct emu_qp *q = l->in_qp;

	if (q && l->in_status == EMU_ACK_OK) {
		q->rq_psn = (q->rq_psn + 1) & 0xffffff;
		if (p->has_imm) {
			struct ibv_wc wc = { .wr_id = q->rwr[q->rhead],
					     .status = IBV_WC_SUCCESS,
					     .opcode = IBV_WC_RECV_RDMA_WITH_IMM,
					     .byte_len = (uint32_t)p->len,
					     .imm_data = p->imm,
					     .wc_flags = IBV_WC_WITH_IMM,
					     .qp_num = q->qp.qp_num,
					     .src_qp = p->src_qpn };

			q->rhead = (q->rhead + 1) % (int)(q->cap.max_recv_wr + 1);
			q->rcount--;
			/* Visible on the agent's next round, after the ACK went out: a requester
			 * can complete before its responder does, as on an HCA. */
			emu_late_push(l->ctx, (struct emu_cq *)q->qp.recv_cq, &wc);
		}
	}
	if (l->in_status >= 0)
		queue_ack(l, p->src_qpn, p->psn, l->in_status);
	l->in_qp = NULL;
}

/* Requester: an acknowledgement for one of our packets. */
static void on_ack(struct emu_link *l)
{
	const struct emu_pkt *p = &l->in;
	struct emu_qp *q = emu_qp_by_num(l->ctx, p->dst_qpn);
	int i;

	if (!q || q->qp.state != IBV_QPS_RTS)
		return;
	if (p->status == EMU_ACK_OK) {
		emu_qp_ack(q, p->psn);
		return;
	}
	emu_qp_ack(q, (p->psn - 1) & 0xffffff);
	for (i = 0; i < q->nsent && q->swr[i].psn != p->psn; i++)
		;
	if (i == q->nsent)
		return; /* stale: already resent or acknowledged */
	if (p->status == EMU_NAK_RNR) {
		if (q->rnr_retry != 7 && --q->rnr_left < 0) {
			emu_qp_fail(q, IBV_WC_RNR_RETRY_EXC_ERR);
			return;
		}
		q->nsent = i;
		q->rnr_until_ns = emu_now_ns() + EMU_RNR_DELAY_NS;
		q->progress_ns = q->rnr_until_ns;
		return;
	}
	emu_qp_fail(q,
		    p->status == EMU_NAK_ACCESS ? IBV_WC_REM_ACCESS_ERR : IBV_WC_REM_INV_REQ_ERR);
}

static void link_read(struct emu_link *l)
{
	while (!l->dead) {
		ssize_t n;

		if (l->in_got < sizeof(l->in)) {
			n = read(l->fd, (char *)&l->in + l->in_got, sizeof(l->in) - l->in_got);
			if (n <= 0) {
				if (n == 0 || (errno != EAGAIN && errno != EINTR))
					link_drop(l);
				return;
			}
			l->in_got += (size_t)n;
			if (l->in_got < sizeof(l->in))
				continue;
			if (l->in.type == EMU_PKT_ACK) {
				on_ack(l);
				l->in_got = 0;
				continue;
			}
			if (l->in.type != EMU_PKT_WRITE) {
				link_drop(l);
				return;
			}
			on_write(l);
		}
		if (l->in_left) {
			size_t want = l->in_left < IO_CHUNK ? (size_t)l->in_left : IO_CHUNK;

			/* The region may have been deregistered since the header: look again. */
			if (l->in_dst) {
				struct emu_mr *m = emu_mr_by_rkey(l->ctx, l->in.rkey);
				if (!m || (uint64_t)(uintptr_t)l->in_dst + l->in_left >
						  (uint64_t)(uintptr_t)m->mr.addr +
							  (uint64_t)m->shift + m->mr.length) {
					l->in_dst = NULL;
					l->in_qp = NULL;
					l->in_status = EMU_NAK_ACCESS;
				}
			}
			n = read(l->fd, l->in_dst ? l->in_dst : scratch, want);
			if (n <= 0) {
				if (n == 0 || (errno != EAGAIN && errno != EINTR))
					link_drop(l);
				return;
			}
			l->in_left -= (uint64_t)n;
			if (l->in_dst)
				l->in_dst += n;
			if (l->in_left)
				continue;
		}
		on_write_done(l);
		l->in_got = 0;
	}
}

/* The next QP with a packet for @l's peer, round robin from the one after the last served
 * (QPs to one LID share the link: no QP's packets always go first). */
static struct emu_qp *pick_qp(struct emu_link *l, uint64_t now)
{
	struct emu_qp *start = NULL, *q;

	for (q = l->ctx->qps; q && q->qp.qp_num != l->last_qpn; q = q->next)
		;
	start = q && q->next ? q->next : l->ctx->qps;
	for (int pass = 0; pass < 2; pass++) {
		for (q = pass ? l->ctx->qps : start; q && (pass == 0 || q != start); q = q->next) {
			if (q->dlid != l->peer_lid || q->qp.state != IBV_QPS_RTS ||
			    q->nsent >= q->nswr || now < q->rnr_until_ns)
				continue;
			if (q->swr[q->nsent].bad_lkey) {
				if (q->nsent == 0) {
					emu_qp_fail(q, IBV_WC_LOC_PROT_ERR);
					return pick_qp(l, now);
				}
				continue;
			}
			l->last_qpn = q->qp.qp_num;
			return q;
		}
	}
	return NULL;
}

static struct emu_swr *swr_by_psn(struct emu_qp *q, uint32_t psn)
{
	for (int i = 0; i < q->nswr; i++) {
		if (q->swr[i].psn == psn)
			return &q->swr[i];
	}
	return NULL;
}

/* Bytes of l->out_qp's packet moved: its retry timer restarts, and so do the timers of the QPs
 * whose next packet waits behind it on the wire (a NIC would interleave them). A QP whose
 * packets all went out waits for its own acknowledgements only. */
static void mark_progress(struct emu_link *l, uint64_t now)
{
	for (struct emu_qp *q = l->ctx->qps; q; q = q->next) {
		if (q == l->out_qp || (q->dlid == l->peer_lid && q->nsent < q->nswr))
			q->progress_ns = now > q->progress_ns ? now : q->progress_ns;
	}
}

static void packet_sent(void)
{
	if (inj_after >= 0 && ++packets_sent == inj_after)
		emu_inject_locked(inj_fault);
}

/* Payload bytes of @w from offset @off: a pointer and how many are contiguous. */
static const uint8_t *swr_bytes(const struct emu_swr *w, uint64_t off, size_t *len)
{
	if (w->is_inline) {
		*len = (size_t)(w->len - off);
		return w->inline_buf + off;
	}
	for (int i = 0; i < w->nsge; i++) {
		if (off < w->sge[i].length) {
			*len = (size_t)(w->sge[i].length - off);
			return (const uint8_t *)(uintptr_t)(w->sge[i].addr + off);
		}
		off -= w->sge[i].length;
	}
	*len = 0;
	return NULL;
}

static void link_write(struct emu_link *l, uint64_t now)
{
	while (!l->dead) {
		if (!l->out_active) {
			struct emu_qp *q;

			if (l->nacks) {
				l->out = l->acks[0];
				memmove(l->acks, l->acks + 1,
					sizeof(*l->acks) * (size_t)--l->nacks);
				l->out_qp = NULL;
			} else if (l->outgoing && l->ctx->port_up && (q = pick_qp(l, now))) {
				const struct emu_swr *w = &q->swr[q->nsent++];

				l->out = (struct emu_pkt){ .type = EMU_PKT_WRITE,
							   .dst_qpn = q->dest_qpn,
							   .src_qpn = q->qp.qp_num,
							   .psn = w->psn,
							   .src_lid = l->ctx->lid,
							   .imm = w->imm,
							   .has_imm = w->opcode ==
								      IBV_WR_RDMA_WRITE_WITH_IMM,
							   .rkey = w->rkey,
							   .raddr = w->raddr,
							   .len = w->len };
				l->out_qp = q;
			} else {
				return;
			}
			l->out_active = 1;
			l->out_hdr_done = 0;
			l->out_done = 0;
		}
		ssize_t n;
		if (l->out_hdr_done < sizeof(l->out)) {
			n = send(l->fd, (char *)&l->out + l->out_hdr_done,
				 sizeof(l->out) - l->out_hdr_done, MSG_NOSIGNAL);
			if (n < 0) {
				if (errno != EAGAIN && errno != EINTR)
					link_drop(l);
				return;
			}
			l->out_hdr_done += (size_t)n;
			if (l->out_qp)
				mark_progress(l, now);
			continue;
		}
		if (l->out_qp && l->out_done < l->out.len) {
			const struct emu_swr *w = swr_by_psn(l->out_qp, l->out.psn);
			size_t len;
			const uint8_t *p;

			if (!w) {
				link_drop(l);
				return;
			}
			p = swr_bytes(w, l->out_done, &len);
			n = send(l->fd, p, len < IO_CHUNK ? len : IO_CHUNK, MSG_NOSIGNAL);
			if (n < 0) {
				if (errno != EAGAIN && errno != EINTR)
					link_drop(l);
				return;
			}
			l->out_done += (uint64_t)n;
			mark_progress(l, now);
			continue;
		}
		if (l->out_qp)
			packet_sent();
		l->out_active = 0;
		l->out_qp = NULL;
	}
}

/* Opens the outgoing link of @c to @lid if some QP has packets for it. */
static void links_connect(struct emu_ctx *c, uint64_t now)
{
	for (struct emu_qp *q = c->qps; q; q = q->next) {
		struct emu_link *l;

		if (q->qp.state != IBV_QPS_RTS || q->nsent >= q->nswr || !c->port_up)
			continue;
		for (l = c->links; l && !(l->outgoing && l->peer_lid == q->dlid); l = l->next)
			;
		if (l)
			continue;
		struct sockaddr_un sa;
		int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		if (fd < 0)
			continue;
		if (connect(fd, (struct sockaddr *)&sa, emu_addr(&sa, q->dlid)) < 0 &&
		    errno != EINPROGRESS && errno != EAGAIN) {
			close(fd);
			/* Nobody there: remember so as not to spin; the QP times out. */
			l = link_new(c, -1, 1, q->dlid);
			if (l) {
				l->dead = 1;
				l->retry_ns = now + REFUSED_RETRY_NS;
			}
			continue;
		}
		if (!link_new(c, fd, 1, q->dlid))
			close(fd);
	}
}

static void timers(struct emu_ctx *c, uint64_t now)
{
	for (struct emu_qp *q = c->qps; q; q = q->next) {
		if (q->qp.state != IBV_QPS_RTS || !q->nswr || !q->timeout)
			continue;
		uint64_t ref =
			q->swr[0].post_ns > q->progress_ns ? q->swr[0].post_ns : q->progress_ns;
		uint64_t limit = (4096ull << q->timeout) * (uint64_t)(q->retry_cnt + 1);

		if (now > ref + limit)
			emu_qp_fail(q, IBV_WC_RETRY_EXC_ERR);
	}
}

static int link_wants_out(const struct emu_link *l)
{
	if (l->out_active || l->nacks)
		return 1;
	if (!l->outgoing)
		return 0;
	for (struct emu_qp *q = l->ctx->qps; q; q = q->next) {
		if (q->dlid == l->peer_lid && q->qp.state == IBV_QPS_RTS && q->nsent < q->nswr)
			return 1;
	}
	return 0;
}

static void agent_accept(struct emu_ctx *c)
{
	for (;;) {
		int fd = accept4(c->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd < 0)
			return;
		if (!link_new(c, fd, 0, 0))
			close(fd);
	}
}

static void agent_round(struct pollfd *pfd, int npfd, uint64_t now)
{
	(void)pfd;
	(void)npfd;
	for (struct emu_ctx *c = emu.ctxs; c; c = c->next) {
		agent_accept(c); /* non-blocking: nothing pending is one failed call */
		for (struct emu_link *l = c->links; l; l = l->next) {
			if (!l->dead)
				link_read(l);
		}
		links_connect(c, now);
		for (struct emu_link *l = c->links; l; l = l->next) {
			if (!l->dead && !emu_link_cut(l, now))
				link_write(l, now);
		}
	}
}

static void *agent_main(void *arg)
{
	unsigned long gen = (unsigned long)(uintptr_t)arg;
	struct pollfd *pfd = NULL;
	int cap = 0;

	(void)pthread_setname_np(pthread_self(), "ibemu-agent"); /* the tests' thread watch */
	pthread_mutex_lock(&emu.lock);
	while (emu.agent_gen == gen) {
		uint64_t now = emu_now_ns();
		int n = 0, busy = 0, blackout;

		emu_cut_check(now);
		blackout = now < emu.blackout_until_ns;
		int want = 1;

		for (struct emu_ctx *c = emu.ctxs; c; c = c->next) {
			want++;
			for (struct emu_link *l = c->links; l; l = l->next)
				want++;
			for (struct emu_qp *q = c->qps; q; q = q->next)
				busy |= q->nswr > 0 || q->rnr_until_ns > now;
			busy |= c->nlate > 0;
		}
		if (want > cap) {
			struct pollfd *np = realloc(pfd, sizeof(*pfd) * (size_t)want * 2);
			if (np) {
				pfd = np;
				cap = want * 2;
			}
		}
		pfd[n++] = (struct pollfd){ .fd = emu.wake[0], .events = POLLIN };
		for (struct emu_ctx *c = emu.ctxs; c && !blackout && n < cap; c = c->next) {
			pfd[n++] = (struct pollfd){ .fd = c->listen_fd, .events = POLLIN };
			for (struct emu_link *l = c->links; l && n < cap; l = l->next) {
				if (l->dead)
					continue;
				short ev =
					(short)(POLLIN |
						(link_wants_out(l) && !l->cut_out ? POLLOUT : 0));
				pfd[n++] = (struct pollfd){ .fd = l->fd, .events = ev };
			}
		}
		pthread_mutex_unlock(&emu.lock);
		poll(pfd, (nfds_t)n, busy || blackout ? 1 : 100);
		pthread_mutex_lock(&emu.lock);
		while (read(emu.wake[0], scratch, 64) > 0)
			;
		now = emu_now_ns();
		/* Receive completions of the last round become visible (their ACKs went out
		 * then), whatever the wire does now. */
		for (struct emu_ctx *c = emu.ctxs; c; c = c->next)
			emu_late_flush(c);
		if (!blackout && now >= emu.blackout_until_ns)
			agent_round(pfd, n, now);
		for (struct emu_ctx *c = emu.ctxs; c; c = c->next) {
			timers(c, now);
			links_sweep(c);
		}
	}
	pthread_mutex_unlock(&emu.lock);
	free(pfd);
	return NULL;
}

void emu_agent_stop_if_idle(void)
{
	pthread_t t;

	pthread_mutex_lock(&emu.lock);
	if (!emu.agent_running || emu.ctxs) {
		pthread_mutex_unlock(&emu.lock);
		return;
	}
	emu.agent_gen++; /* the running agent sees it is not current and leaves */
	emu.agent_running = 0;
	t = emu.agent;
	pthread_mutex_unlock(&emu.lock);
	emu_wake();
	pthread_join(t, NULL);
	/* Nothing of ours stays open while no device is (tests count descriptors). */
	pthread_mutex_lock(&emu.lock);
	if (!emu.agent_running && emu.wake[0] >= 0) {
		close(emu.wake[0]);
		close(emu.wake[1]);
		emu.wake[0] = emu.wake[1] = -1;
	}
	pthread_mutex_unlock(&emu.lock);
}

static void atfork_prepare(void)
{
	pthread_mutex_lock(&emu.lock);
}

static void atfork_parent(void)
{
	pthread_mutex_unlock(&emu.lock);
}

/* A forked child has no agent and its parent's sockets: it starts over (what it inherited
 * is unusable, as with a real device context after fork). */
static void atfork_child(void)
{
	for (struct emu_ctx *c = emu.ctxs; c; c = c->next) {
		for (struct emu_link *l = c->links; l; l = l->next) {
			if (l->fd >= 0)
				close(l->fd);
			l->fd = -1;
		}
		close(c->listen_fd);
		c->listen_fd = -1;
	}
	if (emu.wake[0] >= 0) {
		close(emu.wake[0]);
		close(emu.wake[1]);
		emu.wake[0] = emu.wake[1] = -1;
	}
	emu.agent_running = 0;
	emu.ctxs = NULL;
	pthread_mutex_unlock(&emu.lock);
}

int emu_agent_start(void)
{
	static int atfork_done;
	const char *inj = getenv("IBEMU_INJECT");

	if (emu.agent_running)
		return 0;
	if (!atfork_done) {
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
		atfork_done = 1;
	}
	if (emu.wake[0] < 0 && pipe2(emu.wake, O_NONBLOCK | O_CLOEXEC) < 0)
		return -errno;
	if (inj && *inj) {
		const char *at = strrchr(inj, '@');
		snprintf(inj_fault, sizeof(inj_fault), "%.*s", at ? (int)(at - inj) : 31, inj);
		inj_after = at ? atol(at + 1) : 1;
	}
	int err = pthread_create(&emu.agent, NULL, agent_main, (void *)(uintptr_t)++emu.agent_gen);
	if (err)
		return -err;
	emu.agent_running = 1;
	return 0;
}
