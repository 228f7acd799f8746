/* SPDX-License-Identifier: BSD-3-Clause */
/* State healing over point-to-point messages: a member offers named state (ftcc_state_offer),
 * which its progress thread serves to any member that asks, without the application; a member
 * that joined fetches it (ftcc_state_ifetch) from a contributing member the library picks (the
 * lowest id not tried yet), and from the next one when a source is lost, leaves or does not
 * offer it. The library's messages use tags above FTCC_TAG_MAX (p2p_int.h), which no caller's
 * receive takes.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/ctl_wire.h"
#include "ftcc/le.h"
#include "ftcc/log.h"
#include "p2p_int.h"

/* A request of the library's own, posted (under mu). NULL when out of memory. */
static struct ftcc_request *own(struct p2p *p, enum eng_kind kind, void *buf, size_t len,
				uint32_t peer, uint64_t tag)
{
	struct ftcc_request *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->comm = p->c;
	r->kind = kind;
	r->internal = 1;
	r->peer = peer;
	r->tag = tag;
	r->count = len;
	if (kind == ENG_SEND) {
		r->sendbuf = buf;
		p2p_post_send(p, r);
	} else {
		r->recvbuf = buf;
		p2p_post_recv(p, r);
	}
	return r;
}

/* Gives up the library's request @r: cancelled if it has not ended, freed once it has. */
static void drop(struct p2p *p, struct ftcc_request *r)
{
	if (!r)
		return;
	p2p_cancel_now(p, r, 1);
	if (r->done) {
		free(r);
		return;
	}
	if (p->norphans == p->orphans_cap) { /* a send whose data left: it ends on its own */
		uint32_t cap = p->orphans_cap ? p->orphans_cap * 2 : 8;
		struct ftcc_request **o = realloc(p->orphans, cap * sizeof(*o));

		if (!o) {
			ftcc_warn("p2p: no memory to keep a request of the library's; it leaks");
			return;
		}
		p->orphans = o;
		p->orphans_cap = cap;
	}
	p->orphans[p->norphans++] = r;
}

static struct p2p_offer *offer_find(struct p2p *p, const char *name)
{
	for (struct p2p_offer *o = p->offers; o; o = o->next)
		if (!o->gone && !strcmp(o->name, name))
			return o;
	return NULL;
}

/* A REQ from member @from: the state it names, or NO. */
static void serve(struct p2p *p, uint32_t from, const uint8_t *req)
{
	uint64_t nonce = le_get64(req), bytes = le_get64(req + 8);
	char name[P2P_NAME_MAX];
	struct p2p_serve *s = calloc(1, sizeof(*s));
	struct p2p_offer *o;

	memcpy(name, req + 16, sizeof(name));
	name[sizeof(name) - 1] = '\0';
	o = offer_find(p, name);
	if (!s)
		return; /* the fetcher's next source, or its own bound, takes over */
	if (o && o->bytes == bytes) {
		ftcc_info("p2p: member %u fetches \"%s\" (%zu bytes) from this member", from, name,
			  o->bytes);
		s->offer = o;
		o->inflight++;
		s->send = own(p, ENG_SEND, (void *)o->buf, o->bytes, from, P2P_TAG_OK(nonce));
	} else {
		ftcc_info("p2p: member %u asks for \"%s\" of %llu bytes, which this member does "
			  "not offer",
			  from, name, (unsigned long long)bytes);
		s->send = own(p, ENG_SEND, &s->no, sizeof(s->no), from, P2P_TAG_NO(nonce));
	}
	if (!s->send) {
		if (s->offer)
			s->offer->inflight--;
		free(s);
		return;
	}
	s->next = p->serving;
	p->serving = s;
}

static void serve_step(struct p2p *p)
{
	if (p->srv_req && p->srv_req->done) {
		struct ftcc_request *r = p->srv_req;

		p->srv_req = NULL;
		if (r->result == 0 && r->st.bytes == P2P_REQ_BYTES)
			serve(p, r->st.source, p->srv_buf);
		free(r);
	}
	if (!p->srv_req && !p->failed) /* a member that offers nothing says so too */
		p->srv_req = own(p, ENG_RECV, p->srv_buf, sizeof(p->srv_buf), FTCC_ANY_SOURCE,
				 P2P_TAG_REQ);
	for (struct p2p_serve **pp = &p->serving; *pp;) {
		struct p2p_serve *s = *pp;

		if (!s->send->done) {
			pp = &s->next;
			continue;
		}
		if (s->offer) {
			s->offer->inflight--;
			pthread_cond_broadcast(&p->cv); /* a withdraw may wait for it */
		}
		*pp = s->next;
		free(s->send);
		free(s);
	}
	for (uint32_t i = 0; i < p->norphans;) {
		if (p->orphans[i]->done) {
			free(p->orphans[i]);
			p->orphans[i] = p->orphans[--p->norphans];
		} else {
			i++;
		}
	}
}

/* Ends fetch @f with @rc (the caller's request) and frees it. */
static void finish(struct p2p *p, struct p2p_fetch *f, int rc)
{
	if (rc == FTCC_ERR_CANCELED && f->src != UINT32_MAX) { /* its answer is not wanted */
		p2p_refuse(p, f->src, P2P_TAG_OK(f->nonce));
		p2p_refuse(p, f->src, P2P_TAG_NO(f->nonce));
	}
	drop(p, f->ok);
	drop(p, f->no);
	drop(p, f->ask);
	f->req->st =
		(struct ftcc_p2p_status){ .source = f->src, .bytes = rc == 0 ? f->req->count : 0 };
	f->req->pm = NULL;
	p2p_end(p, f->req, rc);
	for (struct p2p_fetch **pp = &p->fetches; *pp; pp = &(*pp)->next) {
		if (*pp == f) {
			*pp = f->next;
			break;
		}
	}
	free(f);
}

/* Asks the next source for @f's state: the lowest contributing member not tried yet. */
static void ask_next(struct p2p *p, struct p2p_fetch *f)
{
	struct p2p_peer *pe = NULL;

	drop(p, f->ok);
	drop(p, f->no);
	drop(p, f->ask);
	f->ok = f->no = f->ask = NULL;
	for (uint32_t i = 0; i < p->npeers && !pe; i++) {
		struct p2p_peer *q = p->peers[i];

		if (q->addr[0] && (q->flags & CTL_MF_CONTRIB) && q->id < FTCC_MAX_MEMBERS &&
		    !(f->tried[q->id / 8] >> (q->id % 8) & 1))
			pe = q;
	}
	if (!pe) {
		finish(p, f, f->refused ? FTCC_ERR_INVALID : FTCC_ERR_PEER_LOST);
		return;
	}
	f->tried[pe->id / 8] |= (uint8_t)(1u << (pe->id % 8));
	if (f->src != UINT32_MAX)
		ftcc_info("p2p: fetching \"%s\" from member %u now (member %u did not give it)",
			  f->name, pe->id, f->src);
	f->src = pe->id;
	f->nonce = ++p->nonce;
	le_put64(f->askbuf, f->nonce);
	le_put64(f->askbuf + 8, f->req->count);
	memcpy(f->askbuf + 16, f->name, P2P_NAME_MAX);
	f->ok = own(p, ENG_RECV, f->req->recvbuf, f->req->count, pe->id, P2P_TAG_OK(f->nonce));
	f->no = own(p, ENG_RECV, &f->nobuf, sizeof(f->nobuf), pe->id, P2P_TAG_NO(f->nonce));
	f->ask = own(p, ENG_SEND, f->askbuf, sizeof(f->askbuf), pe->id, P2P_TAG_REQ);
	if (!f->ok || !f->no || !f->ask)
		finish(p, f, FTCC_ERR_NOMEM);
}

void p2p_state_step(struct p2p *p)
{
	struct p2p_fetch *f, *next;

	serve_step(p);
	for (f = p->fetches; f; f = next) {
		next = f->next;
		if (f->src == UINT32_MAX)
			ask_next(p, f);
		else if (f->ok->done && f->ok->result == 0)
			finish(p, f, 0);
		else if (f->no->done && f->no->result == 0)
			f->refused = 1, ask_next(p, f);
		else if (f->ok->done || f->no->done || (f->ask->done && f->ask->result))
			ask_next(p, f); /* lost, left, or could not be asked */
	}
}

void p2p_state_cancel(struct p2p *p, struct ftcc_request *r)
{
	r->cancel = 0;
	r->cancel_rc = 0;
	if (!r->done && r->pm)
		finish(p, r->pm, FTCC_ERR_CANCELED);
}

void p2p_state_end(struct p2p *p, int rc)
{
	while (p->fetches)
		finish(p, p->fetches, rc);
	if (p->srv_req) {
		p2p_end(p, p->srv_req, rc); /* its receive is off the list already, or is now */
		free(p->srv_req);
		p->srv_req = NULL;
	}
	while (p->serving) {
		struct p2p_serve *s = p->serving;

		p->serving = s->next;
		if (s->offer)
			s->offer->inflight--;
		p2p_end(p, s->send, rc);
		free(s->send);
		free(s);
	}
	for (uint32_t i = 0; i < p->norphans; i++) {
		p2p_end(p, p->orphans[i], rc);
		free(p->orphans[i]);
	}
	p->norphans = 0;
	pthread_cond_broadcast(&p->cv);
}

void p2p_state_free(struct p2p *p)
{
	while (p->offers) {
		struct p2p_offer *o = p->offers;

		p->offers = o->next;
		free(o);
	}
	free(p->orphans);
	p->orphans = NULL;
}

static int name_ok(const char *name)
{
	return name && name[0] && strlen(name) < P2P_NAME_MAX;
}

FTCC_API int ftcc_state_offer(ftcc_comm_t *c, const char *name, const void *buf, size_t bytes)
{
	struct p2p_offer *o;
	struct p2p *p;

	if (!c || !c->p2p || !name_ok(name) || (bytes && !buf))
		return FTCC_ERR_INVALID;
	p = c->p2p;
	o = calloc(1, sizeof(*o));
	if (!o)
		return FTCC_ERR_NOMEM;
	strcpy(o->name, name);
	o->buf = buf;
	o->bytes = bytes;
	pthread_mutex_lock(&p->mu);
	if (offer_find(p, name)) {
		pthread_mutex_unlock(&p->mu);
		free(o);
		ftcc_warn("ftcc_state_offer: \"%s\" is offered already (withdraw it first)", name);
		return FTCC_ERR_INVALID;
	}
	o->next = p->offers;
	p->offers = o;
	pthread_mutex_unlock(&p->mu);
	p2p_kick(p);
	return 0;
}

FTCC_API int ftcc_state_withdraw(ftcc_comm_t *c, const char *name)
{
	int64_t end;
	struct p2p_offer *o, **pp;
	struct p2p *p;
	int rc = 0;

	if (!c || !c->p2p || !name_ok(name))
		return FTCC_ERR_INVALID;
	p = c->p2p;
	/* sends of it end when their fetcher has it, refuses it, or leaves the group: within
	 * the failure detection's bound */
	end = p2p_now_ns() + (4 * c->timeout_ms + 2000) * 1000000;
	pthread_mutex_lock(&p->mu);
	o = offer_find(p, name);
	if (!o) {
		pthread_mutex_unlock(&p->mu);
		return FTCC_ERR_INVALID;
	}
	o->gone = 1;
	while (o->inflight && p->running && p2p_now_ns() < end) {
		struct timespec ts;
		int64_t t = p2p_now_ns() + 20000000;

		ts.tv_sec = t / 1000000000;
		ts.tv_nsec = t % 1000000000;
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	}
	if (o->inflight && p->running) {
		rc = FTCC_ERR_BUSY; /* still read: it stays withdrawn, and is freed later */
	} else {
		for (pp = &p->offers; *pp != o; pp = &(*pp)->next) {
		}
		*pp = o->next;
		free(o);
	}
	pthread_mutex_unlock(&p->mu);
	return rc;
}

FTCC_API int ftcc_state_ifetch(ftcc_comm_t *c, const char *name, void *buf, size_t bytes,
			       ftcc_request_t **req)
{
	struct ftcc_request *r;
	struct p2p_fetch *f;
	struct p2p *p;

	if (!c || !c->p2p || !req || !name_ok(name) || (bytes && !buf))
		return FTCC_ERR_INVALID;
	p = c->p2p;
	f = calloc(1, sizeof(*f));
	r = f ? p2p_req_new(c, ENG_FETCH) : NULL;
	if (!r) {
		free(f);
		return FTCC_ERR_NOMEM;
	}
	strcpy(f->name, name);
	f->src = UINT32_MAX;
	f->req = r;
	r->recvbuf = buf;
	r->count = bytes;
	r->pm = f;
	pthread_mutex_lock(&p->mu);
	if (p->failed) {
		r->pm = NULL;
		p2p_end(p, r, p->failed);
		free(f);
	} else {
		f->next = p->fetches;
		p->fetches = f;
	}
	pthread_mutex_unlock(&p->mu);
	p2p_kick(p);
	*req = r;
	return 0;
}
