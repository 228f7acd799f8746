/* SPDX-License-Identifier: BSD-3-Clause */
/* The point-to-point layer's progress thread: it follows the membership (peers that leave take
 * their requests with them), posts every frame due on its own data plane, and mends what a
 * broken link lost (p2p_int.h). The data plane belongs to this thread alone.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/ctl_sm.h"
#include "ftcc/le.h"
#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "p2p_int.h"

static void drain_peer(struct p2p *p, struct p2p_peer *pe);
static void nap(struct p2p *p, int ms);

int p2p_create(struct ftcc_comm *c, uint64_t group_id, const char *bind_host, struct p2p **out)
{
	struct dp_cfg dc = { 0 };
	pthread_condattr_t ca;
	struct p2p *p = calloc(1, sizeof(*p));
	int rc;

	if (!p)
		return -ENOMEM;
	p->c = c;
	dc.bind_host = bind_host;
	dc.group_id = group_id ^ P2P_GROUP_SALT;
	dc.self_id = c->rank;
	dc.incarnation = c->incarnation;
	dc.failure_ms = c->timeout_ms;
	dc.either_connects = 1; /* connections only with the members messages go between */
	rc = dp_create(&dc, &p->dp);
	if (rc) {
		free(p);
		return rc;
	}
	pthread_mutex_init(&p->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&p->cv, &ca);
	pthread_condattr_destroy(&ca);
	p->sends_tail = &p->sends;
	p->in_tail = &p->in;
	*out = p;
	return 0;
}

const char *p2p_addr(const struct p2p *p)
{
	return dp_addr(p->dp);
}

int p2p_start(struct p2p *p)
{
	pthread_mutex_lock(&p->mu);
	p->running = 1;
	pthread_mutex_unlock(&p->mu);
	if (pthread_create(&p->thread, NULL, p2p_main, p)) {
		p->running = 0;
		return -EAGAIN;
	}
	p->started = 1;
	return 0;
}

void p2p_kick(struct p2p *p)
{
	if (p)
		dp_kick(p->dp);
}

/* Ends every request with @rc from now on (a final state). Under mu. */
static void fail_all(struct p2p *p, int rc)
{
	p->failed = rc;
	while (p->sends) {
		struct ftcc_request *r = p->sends;

		p->sends = r->pnext;
		p2p_end(p, r, rc);
	}
	p->sends_tail = &p->sends;
	while (p->npeers)
		p2p_peer_drop(p, p->peers[p->npeers - 1], rc);
	while (p->recvs)
		p2p_end(p, p->recvs, rc);
	while (p->in) {
		struct p2p_in *m = p->in;

		if (m->self)
			p2p_end(p, m->self, rc);
		p2p_in_free(p, m);
	}
	p2p_state_end(p, rc); /* every request of the library's has ended: freed */
}

void p2p_flush(struct p2p *p)
{
	int64_t end = p2p_now_ns() + (int64_t)P2P_FLUSH_MS * 1000000;

	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	for (;;) {
		int due = 0;

		for (uint32_t i = 0; i < p->npeers && !due; i++)
			due = p->peers[i]->ctl != NULL && p->peers[i]->addr[0];
		if (!due || !p->running || p2p_now_ns() >= end)
			break;
		pthread_mutex_unlock(&p->mu);
		dp_kick(p->dp);
		pthread_mutex_lock(&p->mu);
		nap(p, 2);
	}
	pthread_mutex_unlock(&p->mu);
}

void p2p_stop(struct p2p *p)
{
	if (!p)
		return;
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_mutex_unlock(&p->mu);
	dp_abort(p->dp);
	if (p->started) {
		pthread_join(p->thread, NULL);
		p->started = 0;
	}
	pthread_mutex_lock(&p->mu);
	p->running = 0;
	if (p->failed != FTCC_ERR_ABORTED)
		fail_all(p, FTCC_ERR_ABORTED);
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
}

void p2p_destroy(struct p2p *p)
{
	if (!p)
		return;
	p2p_stop(p);
	p2p_state_free(p);
	free(p->peers);
	free(p->x);
	free(p->xsrc);
	free(p->xbusy);
	dp_destroy(p->dp);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

void p2p_peer_drop(struct p2p *p, struct p2p_peer *pe, int rc)
{
	uint32_t i;

	while (pe->out) {
		struct p2p_out *o = pe->out;

		pe->out = o->next;
		if (o->req)
			p2p_end(p, o->req, rc);
		free(o);
	}
	while (pe->ctl) {
		struct p2p_ctl *f = pe->ctl;

		pe->ctl = f->next;
		free(f);
	}
	for (struct p2p_in *m = p->in, *next; m; m = next) {
		struct ftcc_request *r = m->req;

		next = m->next;
		if (m->from != pe->id || m->self)
			continue;
		p2p_unbind(p, m);
		p2p_in_free(p, m);
		if (r && r->peer == pe->id)
			p2p_end(p, r, rc);
		else if (r)
			r->rematch = 1; /* a receive from any source takes another, below */
	}
again: /* matching may take (and free) messages and end receives: from the start each time */
	for (struct ftcc_request *r = p->recvs; r; r = r->pnext) {
		if (r->rematch) {
			r->rematch = 0;
			p2p_match_recv(p, r);
			goto again;
		}
	}
	for (struct ftcc_request *r = p->recvs, *next; r; r = next) {
		next = r->pnext;
		if (r->peer == pe->id)
			p2p_end(p, r, rc);
	}
	for (i = 0; i < p->nrefuse;) { /* it will send nothing more */
		if (p->refuse[i].from == pe->id)
			p2p_refuse_del(p, i);
		else
			i++;
	}
	for (i = 0; i < p->npeers && p->peers[i] != pe; i++) {
	}
	if (i < p->npeers) {
		memmove(&p->peers[i], &p->peers[i + 1], (p->npeers - i - 1) * sizeof(*p->peers));
		p->npeers--;
	}
	free(pe->done);
	free(pe);
}

/* The p2p address member @m published after the engine's (comm.c), or "". */
static void addr_of(const struct ctl_member_rec *m, char *buf)
{
	const uint8_t *z = memchr(m->info, '\0', m->info_len);
	size_t off = z ? (size_t)(z - m->info) + 1 : m->info_len;
	const uint8_t *end = memchr(m->info + off, '\0', m->info_len - off);
	size_t len = end ? (size_t)(end - (m->info + off)) : m->info_len - off;

	if (len >= DP_ADDR_MAX)
		len = 0;
	memcpy(buf, m->info + off, len);
	buf[len] = '\0';
}

static int peer_cmp(const void *a, const void *b)
{
	uint32_t x = (*(struct p2p_peer *const *)a)->id, y = (*(struct p2p_peer *const *)b)->id;

	return (x > y) - (x < y);
}

static struct p2p_peer *peer_new(const struct ctl_member_rec *m)
{
	struct p2p_peer *pe = calloc(1, sizeof(*pe));

	if (!pe)
		return NULL;
	pe->id = m->id;
	pe->inc = m->incarnation;
	addr_of(m, pe->addr);
	pe->out_tail = &pe->out;
	pe->ctl_tail = &pe->ctl;
	return pe;
}

/* Follows the newest view: members gone (or back as another incarnation) are dropped with
 * their requests, new ones added, and the data plane told. Under mu. */
static void sync_members(struct p2p *p)
{
	unsigned gen = atomic_load(&p->c->ctl_gen);
	struct p2p_peer **np;
	struct dp_peer *dpp;
	struct ctl_view v;
	uint32_t n = 0;

	if (p->synced && gen == p->gen)
		return;
	ctl_member_view(p->c->ctl, &v);
	if (v.state == CTL_M_LOST || v.state == CTL_M_REMOVED || v.state == CTL_M_LEFT) {
		ctl_epoch_put(v.e);
		fail_all(p, FTCC_ERR_LOST);
		return;
	}
	if (!v.e)
		return;
	np = calloc(v.e->nmembers ? v.e->nmembers : 1, sizeof(*np));
	dpp = calloc(v.e->nmembers ? v.e->nmembers : 1, sizeof(*dpp));
	if (!np || !dpp) {
		free(np);
		free(dpp);
		ctl_epoch_put(v.e);
		return; /* tried again at the next look */
	}
	for (uint32_t i = p->npeers; i-- > 0;) {
		struct p2p_peer *pe = p->peers[i];
		const struct ctl_member_rec *m = NULL;

		for (uint32_t k = 0; k < v.e->nmembers && !m; k++)
			if (v.e->members[k].id == pe->id)
				m = &v.e->members[k];
		if (!m || m->incarnation != pe->inc) {
			drain_peer(p, pe);
			ftcc_info("p2p: member %u left the group; its requests end", pe->id);
			p2p_peer_drop(p, pe, FTCC_ERR_PEER_LOST);
		}
	}
	/* The members the data plane knows already first, then each new one, added to it one at
	 * a time: a member whose address it refuses is left without one (its requests fail with
	 * FTCC_ERR_INVALID), and the links to the others stay. */
	uint32_t k = 0, all = 1;

	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < v.e->nmembers; i++) {
			const struct ctl_member_rec *m = &v.e->members[i];
			struct p2p_peer *pe = m->id == p->c->rank ? NULL : p2p_peer_find(p, m->id);

			if (m->id == p->c->rank || !!pe != !pass)
				continue;
			if (!pe)
				pe = peer_new(m);
			if (!pe) {
				all = 0; /* out of memory: added at the next look */
				continue;
			}
			pe->flags = m->flags;
			if (pe->addr[0]) {
				dpp[k] = (struct dp_peer){ .id = pe->id, .incarnation = pe->inc };
				memcpy(dpp[k].addr, pe->addr, sizeof(pe->addr));
				int rc = pass ? dp_set_peers(p->dp, dpp, k + 1) : 0;

				if (rc == -EINVAL) {
					ftcc_warn(
						"p2p: member %u published an address the data plane "
						"cannot use (\"%s\"); no messages with it",
						pe->id, pe->addr);
					pe->addr[0] = '\0';
				} else if (rc) {
					all = 0; /* no memory: it is added at the next look */
					if (pe != p2p_peer_find(p, pe->id))
						free(pe);
					continue;
				} else {
					k++;
				}
			}
			np[n++] = pe;
		}
		if (!pass && dp_set_peers(p->dp, dpp, k)) {
			all = 0; /* no memory: the table stays as it was, tried again */
			break;
		}
	}
	qsort(np, n, sizeof(*np), peer_cmp); /* every old one is in the view: all taken */
	free(p->peers);
	p->peers = np;
	p->npeers = n;
	p->epoch = v.e->epoch;
	if (all) {
		p->synced = 1;
		p->gen = gen;
	}
	free(dpp);
	ctl_epoch_put(v.e);
	p->check_recvs = 1;
}

/* Sends not yet given to their peer, and receives from a named source: a member not in the
 * view ends them. Under mu. */
static void take_requests(struct p2p *p)
{
	while (p->sends) {
		struct ftcc_request *r = p->sends;
		struct p2p_peer *pe = p2p_peer_find(p, r->peer);
		struct p2p_out *o;

		if (!pe && !p->synced)
			break; /* the table is behind the view (no memory): the next look decides */
		p->sends = r->pnext;
		if (!p->sends)
			p->sends_tail = &p->sends;
		r->pnext = NULL;
		if (!pe || !pe->addr[0]) {
			if (pe)
				eng_set_error(p->c, "member %u has no point-to-point address",
					      r->peer);
			p2p_end(p, r, pe ? FTCC_ERR_INVALID : FTCC_ERR_PEER_LOST);
			continue;
		}
		o = calloc(1, sizeof(*o));
		if (!o) {
			p2p_end(p, r, FTCC_ERR_NOMEM);
			continue;
		}
		o->id = pe->next_id++;
		o->tag = r->tag;
		o->buf = r->sendbuf;
		o->len = r->count;
		o->req = r;
		o->announce = 1;
		r->pm = o;
		*pe->out_tail = o;
		pe->out_tail = &o->next;
	}
	if (!p->check_recvs || !p->synced)
		return;
	p->check_recvs = 0;
	for (struct ftcc_request *r = p->recvs, *next; r; r = next) {
		next = r->pnext;
		if (r->peer != FTCC_ANY_SOURCE && r->peer != p->c->rank &&
		    !p2p_peer_find(p, r->peer))
			p2p_end(p, r, FTCC_ERR_PEER_LOST);
	}
}

static int xroom(struct p2p *p, int n)
{
	if (n < p->xcap)
		return 0;
	int cap = p->xcap ? p->xcap * 2 : 64;
	struct dp_xfer *x = realloc(p->x, (size_t)cap * sizeof(*x));

	if (!x)
		return -ENOMEM;
	p->x = x;
	struct dp_xfer **s = realloc(p->xsrc, (size_t)cap * sizeof(*s));

	if (!s)
		return -ENOMEM;
	p->xsrc = s;
	struct ftcc_request **b = realloc(p->xbusy, (size_t)cap * sizeof(*b));

	if (!b)
		return -ENOMEM;
	p->xbusy = b;
	p->xcap = cap;
	return 0;
}

/* Adds @src to the call's transfers (a copy, written back after it); @busy: the request whose
 * buffer it moves. 0 or -ENOMEM. */
static int xadd(struct p2p *p, int *n, struct dp_xfer *src, struct ftcc_request *busy)
{
	if (xroom(p, *n))
		return -ENOMEM;
	p->x[*n] = *src;
	p->xsrc[(*n)++] = src;
	if (busy) {
		busy->busy = 1;
		p->xbusy[p->nbusy++] = busy;
	}
	return 0;
}

/* What is due to @pe: RTS and WD frames, data its CTS asked for. 0 or -ENOMEM. */
static int announce(struct p2p_peer *pe)
{
	int64_t now = p2p_now_ns();
	uint64_t low = pe->out ? pe->out->id : pe->next_id;

	for (struct p2p_out *o = pe->out; o; o = o->next) {
		uint8_t pl[24];

		if (!o->announce && !o->data_posted && !pe->ctl &&
		    now - o->ann_ns > P2P_REANNOUNCE_NS)
			o->announce = 2; /* quiet too long: a frame of it may have been dropped for
					  * want of memory at either end; the receiver answers again */
		if (o->announce) {
			/* a short message's data goes with its first RTS (it cannot be withdrawn
			 * then), and with those after a broken link */
			size_t inl = o->len <= P2P_EAGER && !o->withdrawn && o->announce == 1 ?
					     o->len :
					     0;

			le_put64(pl, o->tag);
			le_put64(pl + 8, o->len);
			le_put64(pl + 16, low);
			if (o->withdrawn ?
				    p2p_ctl_queue(pe, P2P_MINE, P2P_WD, o->id, NULL, 0, NULL, 0) :
				    p2p_ctl_queue(pe, P2P_MINE, P2P_RTS, o->id, pl, 24, o->buf,
						  inl))
				return -ENOMEM;
			o->announce = 0;
			o->ann_ns = now;
			o->data_ever |= inl > 0;
		}
		if (!o->withdrawn && !o->data_posted && o->want_gen > o->sent_gen) {
			o->dx = (struct dp_xfer){ .peer = pe->id,
						  .dir = DP_SEND,
						  .tag = { .seq = o->id,
							   .epoch = P2P_MINE,
							   .phase = P2P_DATA,
							   .step = o->want_gen },
						  .buf = (void *)o->buf,
						  .len = o->len };
			o->sent_gen = o->want_gen;
			o->data_posted = 1;
		}
	}
	return 0;
}

/* Adds @pe's transfers: the frame the last peek showed, a peek, control frames, data. */
static int build_peer(struct p2p *p, struct p2p_peer *pe, int *n)
{
	if (announce(pe))
		return -ENOMEM;
	if (pe->rx_frame && xadd(p, n, &pe->rx, pe->rx_in ? pe->rx_in->req : NULL))
		return -ENOMEM;
	if (pe->pk.dir != DP_PEEK) /* else posted again as it is: it may hold part of a frame */
		pe->pk = (struct dp_xfer){
			.peer = pe->id, .dir = DP_PEEK, .buf = pe->pkbuf, .len = sizeof(pe->pkbuf)
		};
	if (xadd(p, n, &pe->pk, NULL))
		return -ENOMEM;
	for (struct p2p_ctl *f = pe->ctl; f; f = f->next)
		if (xadd(p, n, &f->x, NULL))
			return -ENOMEM;
	for (struct p2p_out *o = pe->out; o; o = o->next)
		if (o->data_posted && xadd(p, n, &o->dx, o->req))
			return -ENOMEM;
	return 0;
}

/* Whether @pe is in the next progress call: this member has frames for it, or a connection with
 * it is made or being made (by either side). A member connects only to the peers it sends to,
 * and peeks only at those it has a connection with: a peer with a message for it connects. */
static int peer_wanted(struct p2p *p, const struct p2p_peer *pe)
{
	return pe->out || pe->ctl || pe->rx_frame || dp_linked(p->dp, pe->id);
}

/* The transfers of the next progress call. Their number, or -ENOMEM. */
static int build(struct p2p *p)
{
	int64_t now = p2p_now_ns();
	uint32_t linked = 0;
	int n = 0;

	p->nbusy = 0;
	for (uint32_t i = 0; i < p->npeers; i++) {
		struct p2p_peer *pe = p->peers[i];

		linked += (uint32_t)dp_linked(p->dp, pe->id);
		if (!pe->addr[0] || (pe->hold_ns && now < pe->hold_ns) || !peer_wanted(p, pe))
			continue;
		pe->hold_ns = 0;
		if (build_peer(p, pe, &n))
			return -ENOMEM;
	}
	p->nlinked = linked;
	return n;
}

uint32_t p2p_links(struct p2p *p)
{
	uint32_t n;

	pthread_mutex_lock(&p->mu);
	n = p->nlinked;
	pthread_mutex_unlock(&p->mu);
	return n;
}

static void unbusy(struct p2p *p)
{
	for (int k = 0; k < p->nbusy; k++)
		p->xbusy[k]->busy = 0;
	p->nbusy = 0;
}

/* One progress call of the @n transfers built, without the lock (the user's calls go on; none
 * of them frees or rewrites what the transfers point to, and a busy request's cancel waits for
 * this thread): dp_progress's result, the transfers written back. Under mu. */
static int progress_call(struct p2p *p, int n, int wait_ms, uint32_t *bad)
{
	int rc;

	pthread_mutex_unlock(&p->mu);
	rc = dp_progress(p->dp, p->x, n, wait_ms, bad);
	pthread_mutex_lock(&p->mu);
	for (int i = 0; i < n; i++)
		*p->xsrc[i] = p->x[i];
	unbusy(p);
	return rc;
}

/* @pe's transfers in the call are given up: dp forgets them. */
static void release_peer(struct p2p *p, struct p2p_peer *pe, int n)
{
	for (int i = 0; i < n; i++)
		if (p->x[i].peer == pe->id && !p->x[i].done)
			dp_release(p->dp, &p->x[i], 1);
}

/* The link to @pe broke: whatever was on it may be lost. Every message not acknowledged is
 * announced again, every control frame dropped (the peer asks again), the receive starts over
 * with a peek. */
static void resync(struct p2p *p, struct p2p_peer *pe, int n, int rc)
{
	release_peer(p, pe, n);
	while (pe->ctl) {
		struct p2p_ctl *f = pe->ctl;

		pe->ctl = f->next;
		free(f);
	}
	pe->ctl_tail = &pe->ctl;
	for (struct p2p_out *o = pe->out, *next; o; o = next) {
		next = o->next;
		if (o->data_posted && (o->dx.hdr_state || o->dx.off))
			o->data_ever = 1;
		o->data_posted = 0;
		o->announce = 1;
		o->want_gen = o->sent_gen = 0;
		if (o->acked) /* its ACK came while data was going out: no more is read */
			p2p_out_sent(p, pe, o); /* frees o */
	}
	pe->rx_frame = 0;
	pe->rx_in = NULL;
	pe->pk.dir = 0;
	pe->down = 1;
	ftcc_info("p2p: the link to member %u failed (%s); its messages go again", pe->id,
		  strerror(-rc));
}

/* What the call moved: frames in, frames out. */
static void completions(struct p2p *p)
{
	for (uint32_t i = 0; i < p->npeers; i++) {
		struct p2p_peer *pe = p->peers[i];

		while (pe->ctl && pe->ctl->x.done) {
			struct p2p_ctl *f = pe->ctl;

			pe->ctl = f->next;
			if (!pe->ctl)
				pe->ctl_tail = &pe->ctl;
			free(f);
		}
		for (struct p2p_out *o = pe->out, *next; o; o = next) {
			next = o->next;
			if (o->data_posted && o->dx.done)
				p2p_out_sent(p, pe, o); /* may free o */
		}
		if (pe->rx.done || pe->pk.done)
			pe->held_logged = pe->down = 0;
		/* in stream order: the frame the last peek showed, then the one this one did */
		if (pe->rx_frame && pe->rx.done)
			p2p_on_frame(p, pe);
		if (pe->pk.done) {
			pe->pk.done = 0;
			pe->pk.dir = 0; /* a fresh one next time */
			p2p_on_peek(p, pe);
		}
	}
}

/* Whether a send to @pe waits for its acknowledgement. */
static int acks_awaited(const struct p2p_peer *pe)
{
	for (const struct p2p_out *o = pe->out; o; o = o->next)
		if (o->req)
			return 1;
	return 0;
}

/* Before @pe is dropped: the frames it sent before it left (a member leaving on purpose
 * flushes the acknowledgements of what it took first) are read. While sends to it wait for
 * theirs, until its link ends (what it sent before is read by then) or P2P_FLUSH_MS; a link
 * that broke before (a crash) is read once. */
static void drain_peer(struct p2p *p, struct p2p_peer *pe)
{
	int64_t end = p2p_now_ns() + (int64_t)P2P_FLUSH_MS * 1000000;
	int n = 0;

	if (!dp_linked(p->dp, pe->id)) {
		uint32_t bad;

		/* a connection it made last (with its last acknowledgements) may wait to be
		 * taken: one call without transfers accepts it */
		if (progress_call(p, 0, 0, &bad) < 0 || !dp_linked(p->dp, pe->id))
			return; /* no connection: nothing of it to read */
	}
	for (int round = 0; pe->addr[0] && (round == 0 || (acks_awaited(pe) && !pe->down));
	     round++) {
		uint32_t bad;
		int rc;

		if (p2p_now_ns() >= end)
			break;
		n = 0;
		p->nbusy = 0;
		if (build_peer(p, pe, &n)) {
			unbusy(p);
			n = 0;
			break;
		}
		rc = progress_call(p, n, round ? 10 : 0, &bad);
		if (rc < 0)
			break;
		completions(p);
	}
	release_peer(p, pe, n);
}

/* Cancels the thread was asked to carry out (ftcc_cancel of a request whose buffer was in the
 * transfers). */
static void cancels(struct p2p *p)
{
	struct ftcc_request *r;

again: /* a cancel may end or move other requests: look from the start after each */
	for (r = p->recvs; r; r = r->pnext) {
		if (r->cancel) {
			p2p_cancel_now(p, r, 1);
			goto again;
		}
	}
	for (uint32_t i = 0; i < p->npeers; i++) {
		for (struct p2p_out *o = p->peers[i]->out; o; o = o->next) {
			if (o->req && o->req->cancel) {
				p2p_cancel_now(p, o->req, 1);
				goto again;
			}
		}
	}
	for (struct p2p_fetch *f = p->fetches; f; f = f->next) {
		if (f->req->cancel) {
			p2p_state_cancel(p, f->req);
			goto again;
		}
	}
	pthread_cond_broadcast(&p->cv);
}

static void nap(struct p2p *p, int ms)
{
	struct timespec ts;
	int64_t t = p2p_now_ns() + (int64_t)ms * 1000000;

	ts.tv_sec = t / 1000000000;
	ts.tv_nsec = t % 1000000000;
	pthread_cond_timedwait(&p->cv, &p->mu, &ts);
}

void *p2p_main(void *arg)
{
	struct p2p *p = arg;

	ftcc_thread_name("p2p");
	pthread_mutex_lock(&p->mu);
	while (!p->stop && !p->failed) {
		uint32_t bad = UINT32_MAX;
		struct p2p_peer *pe;
		int n, rc;

		sync_members(p);
		if (p->failed)
			break;
		p2p_state_step(p);
		take_requests(p);
		cancels(p);
		n = build(p);
		if (n < 0) {
			unbusy(p);
			nap(p, 10); /* out of memory */
			continue;
		}
		/* with nothing to move, the call waits for a peer's connection (or a kick) */
		rc = progress_call(p, n, P2P_WAIT_MS, &bad);
		if (rc == -ECANCELED)
			break;
		completions(p);
		if (rc >= 0)
			continue;
		pe = p2p_peer_find(p, bad);
		if (pe && (rc == -EPIPE || rc == -EPROTO || rc == -ENOMSG || rc == -EBADE)) {
			resync(p, pe, n, rc);
		} else if (pe && rc == -EHOSTUNREACH) {
			release_peer(p, pe, n);
			pe->hold_ns = p2p_now_ns() + (int64_t)P2P_HOLD_MS * 1000000;
			if (!pe->held_logged)
				ftcc_info("p2p: member %u cannot be reached; its requests wait "
					  "(the membership decides whether it is gone)",
					  pe->id);
			pe->held_logged = 1;
		} else if (rc == -EINVAL) {
			/* a transfer naming a member the data plane does not know: the tables
			 * went apart (a failed update); they are made again */
			ftcc_warn("p2p: the data plane does not know a member the view names; "
				  "following the view again");
			p->synced = 0;
			nap(p, 10);
		} else {
			/* a local failure (buffers, registration): no request can move any
			 * more */
			ftcc_warn("p2p: member %u: the point-to-point data plane failed (%s); "
				  "every point-to-point request ends",
				  p->c->rank, strerror(-rc));
			eng_set_error(p->c, "point-to-point data plane: %s", strerror(-rc));
			fail_all(p, rc == -ENOMEM ? FTCC_ERR_NOMEM : FTCC_ERR_SYSTEM);
		}
	}
	p->running = 0;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return NULL;
}
