/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messages: the calls, their requests, matching, and what each frame of the
 * protocol (p2p_int.h) does. The progress thread (p2p_run.c) moves the frames.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftcc/le.h"
#include "ftcc/log.h"
#include "p2p_int.h"

int64_t p2p_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

struct p2p_peer *p2p_peer_find(struct p2p *p, uint32_t id)
{
	uint32_t lo = 0, hi = p->npeers;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (p->peers[mid]->id == id)
			return p->peers[mid];
		if (p->peers[mid]->id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static void recvs_unlink(struct p2p *p, struct ftcc_request *r)
{
	for (struct ftcc_request **pp = &p->recvs; *pp; pp = &(*pp)->pnext) {
		if (*pp == r) {
			*pp = r->pnext;
			break;
		}
	}
	r->pnext = NULL;
}

void p2p_end(struct p2p *p, struct ftcc_request *r, int rc)
{
	struct ftcc_comm *c = p->c;

	if (r->done)
		return;
	if (r->kind == ENG_RECV)
		recvs_unlink(p, r);
	r->pm = NULL;
	r->result = rc;
	memset(&r->rec, 0, sizeof(r->rec));
	r->rec.size = c->size;
	r->rec.epoch = p->epoch;
	r->rec.attempts = 1;
	r->rec.scale = 1.0;
	if (rc == 0 && r->st.source < FTCC_MAX_MEMBERS) {
		r->rec.ncontrib = 1;
		r->rec.contrib[r->st.source / 8] |= (uint8_t)(1u << (r->st.source % 8));
	}
	r->done = 1;
	r->cancel = 0; /* a cancel waiting on the thread: the request ended first */
	pthread_cond_broadcast(&p->cv);
}

int p2p_ctl_queue(struct p2p_peer *pe, uint64_t epoch, uint32_t phase, uint64_t id,
		  const uint8_t *pl, size_t len, const void *pl2, size_t len2)
{
	struct p2p_ctl *f = calloc(1, sizeof(*f) + len + len2);

	if (!f)
		return -ENOMEM;
	if (len)
		memcpy(f->pl, pl, len);
	if (len2)
		memcpy(f->pl + len, pl2, len2);
	f->x.peer = pe->id;
	f->x.dir = DP_SEND;
	f->x.tag = (struct dp_tag){ .seq = id, .epoch = epoch, .phase = phase, .step = pe->ctr++ };
	f->x.buf = f->pl;
	f->x.len = len + len2;
	*pe->ctl_tail = f;
	pe->ctl_tail = &f->next;
	return 0;
}

static void done_add(struct p2p_peer *pe, uint64_t id, uint32_t flags);

static void queue_ack(struct p2p *p, struct p2p_peer *pe, uint64_t id, uint32_t flags)
{
	uint8_t pl[4];

	le_put32(pl, flags);
	if (p2p_ctl_queue(pe, P2P_YOURS, P2P_ACK, id, pl, sizeof(pl), NULL, 0))
		ftcc_warn(
			"p2p: no memory for an ACK to member %u (answered again when it is announced again)",
			pe->id);
}

static void queue_cts(struct p2p *p, struct p2p_in *m)
{
	struct p2p_peer *pe = p2p_peer_find(p, m->from);
	uint8_t pl[4];

	if (!pe)
		return;
	le_put32(pl, m->gen);
	if (p2p_ctl_queue(pe, P2P_YOURS, P2P_CTS, m->id, pl, sizeof(pl), NULL, 0))
		ftcc_warn(
			"p2p: no memory for a CTS to member %u (answered again when it is announced again)",
			pe->id);
}

static int takes(const struct ftcc_request *r, const struct p2p_in *m)
{
	return !r->pm && (r->peer == FTCC_ANY_SOURCE || r->peer == m->from) &&
	       (r->tag == FTCC_ANY_TAG ? m->tag <= FTCC_TAG_MAX : r->tag == m->tag);
}

void p2p_in_free(struct p2p *p, struct p2p_in *m)
{
	for (struct p2p_in **pp = &p->in; *pp; pp = &(*pp)->next) {
		if (*pp == m) {
			*pp = m->next;
			if (p->in_tail == &m->next)
				p->in_tail = pp;
			break;
		}
	}
	if (m->eager) {
		p->eager_bytes -= m->len;
		free(m->eager);
	}
	free(m);
}

/* Message @m from @pe is in receive @r's buffer (copied from @src when not NULL): the receive
 * ends, the sender hears of it. */
static void deliver(struct p2p *p, struct p2p_peer *pe, struct p2p_in *m, const void *src)
{
	struct ftcc_request *r = m->req;

	if (src && m->len)
		memcpy(r->recvbuf, src, m->len);
	done_add(pe, m->id, 0);
	queue_ack(p, pe, m->id, 0);
	p2p_in_free(p, m);
	p2p_end(p, r, 0);
}

/* Receive @r takes message @m (r fits it). A message to self, or one whose data came with its
 * RTS (@data, or kept), is copied at once and @m is gone; otherwise a CTS asks for its data. */
static void bind(struct p2p *p, struct ftcc_request *r, struct p2p_in *m, const void *data)
{
	r->pm = m;
	m->req = r;
	r->st = (struct ftcc_p2p_status){ .source = m->from, .tag = m->tag, .bytes = m->len };
	if (data || m->eager) {
		struct p2p_peer *pe = p2p_peer_find(p, m->from);

		if (pe) {
			deliver(p, pe, m, data ? data : m->eager);
			return;
		}
	}
	if (m->self) {
		struct ftcc_request *s = m->self;

		if (m->len)
			memcpy(r->recvbuf, s->sendbuf, m->len);
		p2p_end(p, s, 0);
		p2p_end(p, r, 0);
		p2p_in_free(p, m);
		return;
	}
	m->gen++;
	queue_cts(p, m);
}

/* A receive of @bytes cannot take @m: it ends so (the message waits for another). */
static void too_long(struct p2p *p, struct ftcc_request *r, const struct p2p_in *m)
{
	eng_set_error(p->c,
		      "receive of %zu bytes (source %u, tag %llu): member %u's message of %llu "
		      "bytes is longer",
		      r->count, r->peer, (unsigned long long)r->tag, m->from,
		      (unsigned long long)m->len);
	p2p_end(p, r, FTCC_ERR_INVALID);
}

/* The first receive that takes @m, ending those it is too long for; or NULL. */
static struct ftcc_request *taker(struct p2p *p, const struct p2p_in *m)
{
	struct ftcc_request *r = p->recvs, *next;

	for (; r; r = next) {
		next = r->pnext;
		if (!takes(r, m))
			continue;
		if (m->len <= r->count)
			return r;
		too_long(p, r, m);
	}
	return NULL;
}

void p2p_match_in(struct p2p *p, struct p2p_in *m)
{
	struct ftcc_request *r = taker(p, m);

	if (r)
		bind(p, r, m, NULL);
}

void p2p_match_recv(struct p2p *p, struct ftcc_request *r)
{
	for (struct p2p_in *m = p->in; m; m = m->next) {
		if (m->req || !takes(r, m))
			continue;
		if (m->len > r->count)
			too_long(p, r, m);
		else
			bind(p, r, m, NULL);
		return;
	}
}

void p2p_unbind(struct p2p *p, struct p2p_in *m)
{
	struct ftcc_request *r = m->req;
	struct p2p_peer *pe = p2p_peer_find(p, m->from);

	if (pe && pe->rx_in == m) {
		/* Its frame, shown by the peek and not yet being read (the thread released one
		 * being read), is dropped instead. */
		pe->rx_in = NULL;
		if (pe->rx_frame)
			pe->rx.buf = NULL;
	}
	m->req = NULL;
	m->gen++; /* data sent for the old one is dropped */
	if (r)
		r->pm = NULL;
}

/* The sender's lowest open id is @low: ids below it will never be announced again. */
static void advance_low(struct p2p_peer *pe, uint64_t low)
{
	uint32_t k = 0;

	if (low <= pe->rx_low)
		return;
	pe->rx_low = low;
	for (uint32_t i = 0; i < pe->ndone; i++)
		if (pe->done[i].id >= low)
			pe->done[k++] = pe->done[i];
	pe->ndone = k;
}

static const struct p2p_done *done_find(const struct p2p_peer *pe, uint64_t id)
{
	for (uint32_t i = 0; i < pe->ndone; i++)
		if (pe->done[i].id == id)
			return &pe->done[i];
	return NULL;
}

static void done_add(struct p2p_peer *pe, uint64_t id, uint32_t flags)
{
	if (id < pe->rx_low || done_find(pe, id))
		return;
	if (pe->ndone == pe->done_cap) {
		uint32_t cap = pe->done_cap ? pe->done_cap * 2 : 16;
		struct p2p_done *d = realloc(pe->done, cap * sizeof(*d));

		if (!d) {
			/* Without the note, a repeated RTS would be taken for a new message:
			 * better a broken promise logged than a silent duplicate. */
			ftcc_warn("p2p: no memory to note message %llu of member %u as delivered",
				  (unsigned long long)id, pe->id);
			return;
		}
		pe->done = d;
		pe->done_cap = cap;
	}
	pe->done[pe->ndone++] = (struct p2p_done){ .id = id, .flags = flags };
}

static struct p2p_in *in_find(struct p2p *p, uint32_t from, uint64_t id)
{
	for (struct p2p_in *m = p->in; m; m = m->next)
		if (m->from == from && m->id == id && !m->self)
			return m;
	return NULL;
}

static struct p2p_out *out_find(struct p2p_peer *pe, uint64_t id)
{
	for (struct p2p_out *o = pe->out; o; o = o->next)
		if (o->id == id)
			return o;
	return NULL;
}

static void out_remove(struct p2p *p, struct p2p_peer *pe, struct p2p_out *o)
{
	for (struct p2p_out **pp = &pe->out; *pp; pp = &(*pp)->next) {
		if (*pp == o) {
			*pp = o->next;
			if (pe->out_tail == &o->next)
				pe->out_tail = pp;
			break;
		}
	}
	if (o->data_posted)
		dp_release(p->dp, &o->dx, 1);
	if (o->req)
		o->req->pm = NULL;
	free(o);
}

/* Message @m from @pe will never be taken: its sender's send ends (FTCC_ERR_CANCELED). */
static void refuse_msg(struct p2p *p, struct p2p_peer *pe, struct p2p_in *m)
{
	done_add(pe, m->id, P2P_ACK_REFUSED);
	queue_ack(p, pe, m->id, P2P_ACK_REFUSED);
	p2p_in_free(p, m);
}

void p2p_refuse_del(struct p2p *p, uint32_t i)
{
	memmove(&p->refuse[i], &p->refuse[i + 1], (--p->nrefuse - i) * sizeof(p->refuse[0]));
}

void p2p_refuse(struct p2p *p, uint32_t from, uint64_t a, uint64_t b)
{
	struct p2p_peer *pe = p2p_peer_find(p, from);

	if (!pe)
		return; /* gone: it sends nothing more */
	for (struct p2p_in *m = p->in; m; m = m->next) {
		if (m->from == from && (m->tag == a || m->tag == b) && !m->self && !m->req) {
			refuse_msg(p, pe, m);
			return;
		}
	}
	if (p->nrefuse == P2P_REFUSE_MAX) /* the oldest: its sender most likely left */
		p2p_refuse_del(p, 0);
	p->refuse[p->nrefuse++] = (struct p2p_refuse){ .from = from, .tag = { a, b } };
}

/* Whether message @m is one to refuse (its entry is then used up). */
static int refused(struct p2p *p, const struct p2p_in *m)
{
	for (uint32_t i = 0; i < p->nrefuse; i++) {
		if (p->refuse[i].from == m->from &&
		    (p->refuse[i].tag[0] == m->tag || p->refuse[i].tag[1] == m->tag)) {
			p2p_refuse_del(p, i);
			return 1;
		}
	}
	return 0;
}

static void on_rts(struct p2p *p, struct p2p_peer *pe, uint64_t id, const uint8_t *pl, size_t len)
{
	const struct p2p_done *d;
	struct ftcc_request *r;
	struct p2p_in *m;
	const uint8_t *data = NULL;

	advance_low(pe, le_get64(pl + 16));
	d = id < pe->rx_low ? NULL : done_find(pe, id);
	if (d || id < pe->rx_low) {
		queue_ack(p, pe, id, d ? d->flags : 0); /* it was delivered: the ACK was lost */
		return;
	}
	m = in_find(p, pe->id, id);
	if (m && !m->req && p->nrefuse && refused(p, m)) {
		refuse_msg(p, pe, m); /* announced again, after it was given up */
		return;
	}
	if (m) {
		if (m->req) /* taken, and the CTS or the data may have been lost: ask again, for
			     * the same gen (a sender that sent its data for it already does not
			     * send it again; one that announced again after a broken link does) */
			queue_cts(p, m);
		return;
	}
	m = calloc(1, sizeof(*m));
	if (!m) {
		/* The sender announces it again after the next broken link; until then it waits. */
		ftcc_warn("p2p: no memory for message %llu of member %u", (unsigned long long)id,
			  pe->id);
		return;
	}
	m->from = pe->id;
	m->id = id;
	m->tag = le_get64(pl);
	m->len = le_get64(pl + 8);
	if (len > P2P_CTL_MAX && len - P2P_CTL_MAX == m->len)
		data = pl + P2P_CTL_MAX; /* the data came with it */
	*p->in_tail = m;
	p->in_tail = &m->next;
	if (refused(p, m)) {
		refuse_msg(p, pe, m);
		return;
	}
	r = taker(p, m);
	if (r) {
		bind(p, r, m, data);
		return;
	}
	if (data && m->len && p->eager_bytes + m->len <= P2P_EAGER_CAP) {
		m->eager = malloc(m->len); /* else its data is asked for, as a large one's is */
		if (m->eager) {
			memcpy(m->eager, data, m->len);
			p->eager_bytes += m->len;
		}
	}
}

static void on_wd(struct p2p *p, struct p2p_peer *pe, uint64_t id)
{
	struct p2p_in *m = id < pe->rx_low ? NULL : in_find(p, pe->id, id);
	const struct p2p_done *d = done_find(pe, id);

	if (d) {
		queue_ack(p, pe, id, d->flags);
		return;
	}
	if (m) {
		struct ftcc_request *r = m->req;

		p2p_unbind(p, m);
		p2p_in_free(p, m);
		if (r)
			p2p_match_recv(p, r);
	}
	done_add(pe, id, P2P_ACK_WD);
	queue_ack(p, pe, id, P2P_ACK_WD);
}

static void on_ack(struct p2p *p, struct p2p_peer *pe, uint64_t id, uint32_t flags)
{
	struct p2p_out *o = out_find(pe, id);

	if (!o)
		return;
	if (o->data_posted) {
		/* Data still going out (sent again after a reset, or refused while it moved): the
		 * send ends once its buffer is no longer read (p2p_out_sent()). */
		o->acked = 1;
		o->ack_flags = flags;
		return;
	}
	if (o->req) {
		o->req->st = (struct ftcc_p2p_status){ .source = pe->id,
						       .tag = o->tag,
						       .bytes = o->len };
		p2p_end(p, o->req, flags & (P2P_ACK_WD | P2P_ACK_REFUSED) ? FTCC_ERR_CANCELED : 0);
	}
	out_remove(p, pe, o);
}

void p2p_out_sent(struct p2p *p, struct p2p_peer *pe, struct p2p_out *o)
{
	o->data_posted = 0;
	o->data_ever = 1;
	if (o->acked)
		on_ack(p, pe, o->id, o->ack_flags);
}

/* The message whose DATA frame @t is, when a receive waits for exactly that frame. */
static struct p2p_in *data_for(struct p2p *p, struct p2p_peer *pe, const struct dp_tag *t,
			       size_t len)
{
	struct p2p_in *m = in_find(p, pe->id, t->seq);

	return m && m->req && m->gen == t->step && m->len == len ? m : NULL;
}

/* A frame read whole (by the peek): @len bytes at @pl. */
static void on_frame(struct p2p *p, struct p2p_peer *pe, const struct dp_tag *t, const uint8_t *pl,
		     size_t len)
{
	struct p2p_in *m;

	if (t->epoch == P2P_MINE && t->phase == P2P_RTS && len >= P2P_CTL_MAX) {
		on_rts(p, pe, t->seq, pl, len);
	} else if (t->epoch == P2P_MINE && t->phase == P2P_WD && len == 0) {
		on_wd(p, pe, t->seq);
	} else if (t->epoch == P2P_MINE && t->phase == P2P_DATA) {
		m = data_for(p, pe, t, len);
		if (m)
			deliver(p, pe, m, pl); /* else data of an older gen: dropped */
	} else if (t->epoch == P2P_YOURS && t->phase == P2P_CTS && len == 4) {
		struct p2p_out *o = out_find(pe, t->seq);
		uint32_t gen = le_get32(pl);

		if (o && !o->withdrawn && gen > o->want_gen)
			o->want_gen = gen;
	} else if (t->epoch == P2P_YOURS && t->phase == P2P_ACK && len == 4) {
		on_ack(p, pe, t->seq, le_get32(pl));
	} else {
		ftcc_warn("p2p: member %u sent an unknown frame (kind %u/%llu, %zu bytes): dropped",
			  pe->id, t->phase, (unsigned long long)t->epoch, len);
	}
}

void p2p_on_peek(struct p2p *p, struct p2p_peer *pe)
{
	const struct dp_tag *t = &pe->pk.tag;
	size_t len = pe->pk.len;
	void *buf = NULL;

	if (pe->pk.off == len) { /* read whole */
		on_frame(p, pe, t, pe->pkbuf, len);
		return;
	}
	pe->rx_in = NULL;
	if (t->epoch == P2P_MINE && t->phase == P2P_DATA) {
		pe->rx_in = data_for(p, pe, t, len);
		buf = pe->rx_in ? pe->rx_in->req->recvbuf : NULL;
	} else {
		ftcc_warn("p2p: member %u sent a control frame of %zu bytes: dropped", pe->id, len);
	}
	pe->rx = (struct dp_xfer){
		.peer = pe->id, .dir = DP_RECV, .tag = *t, .buf = buf, .len = len
	};
	pe->rx_frame = 1;
}

void p2p_on_frame(struct p2p *p, struct p2p_peer *pe)
{
	struct p2p_in *m = pe->rx_in;

	pe->rx_frame = 0;
	pe->rx.done = 0;
	pe->rx_in = NULL;
	if (m && m->req) /* else dropped */
		deliver(p, pe, m, NULL);
}

void p2p_cancel_now(struct p2p *p, struct ftcc_request *r, int in_thread)
{
	r->cancel = 0;
	r->cancel_rc = 0;
	if (r->done)
		return;
	if (r->kind == ENG_FETCH) {
		/* from the thread, or with no thread running (ftcc_cancel): its parts are the
		 * caller's to cancel */
		(void)in_thread;
		p2p_state_cancel(p, r);
		return;
	}
	if (r->kind == ENG_RECV) {
		struct p2p_in *m = r->pm;

		if (m) {
			struct p2p_peer *pe = p2p_peer_find(p, m->from);

			if (in_thread && pe && pe->rx_frame && pe->rx_in == m) {
				/* the rest of its frame is drained */
				dp_release(p->dp, &pe->rx, 1);
				pe->rx_frame = 0;
				ftcc_trace("p2p: a receive from member %u cancelled while its data "
					   "came (%zu of %zu bytes in)",
					   pe->id, pe->rx.off, pe->rx.len);
			}
			p2p_unbind(p, m);
		}
		p2p_end(p, r, FTCC_ERR_CANCELED);
		if (m)
			p2p_match_in(p, m); /* the message waits for the next receive */
		return;
	}
	if (!r->pm) { /* not given to its peer yet, or a message to self not taken */
		for (struct ftcc_request **pp = &p->sends; *pp; pp = &(*pp)->pnext) {
			if (*pp == r) {
				*pp = r->pnext;
				if (p->sends_tail == &r->pnext)
					p->sends_tail = pp;
				break;
			}
		}
		for (struct p2p_in *m = p->in; m; m = m->next) {
			if (m->self == r) {
				p2p_in_free(p, m);
				break;
			}
		}
		p2p_end(p, r, FTCC_ERR_CANCELED);
		return;
	}
	struct p2p_out *o = r->pm;

	if (o->data_posted && o->dx.hdr_state == 0 && o->dx.off == 0 && !o->dx.done) {
		/* Not begun: dropped (outside the thread the send is in no running call, and dp
		 * holds nothing of a send it never began). */
		if (in_thread)
			dp_release(p->dp, &o->dx, 1);
		o->data_posted = 0;
		if (o->acked) { /* its ACK came meanwhile: it ends as that says */
			struct p2p_peer *pe = p2p_peer_find(p, r->peer);

			if (pe)
				on_ack(p, pe, o->id, o->ack_flags);
			return;
		}
	}
	if (o->data_ever || o->data_posted) {
		r->cancel_rc = FTCC_ERR_BUSY;
		return;
	}
	o->withdrawn = 1;
	o->announce = 1;
	o->req = NULL;
	p2p_end(p, r, FTCC_ERR_CANCELED);
}
