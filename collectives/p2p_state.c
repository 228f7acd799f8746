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

static void own_free(struct ftcc_request *r)
{
	free(r->tmp); /* a payload of its own (a REQ's) */
	free(r);
}

/* Gives up the library's request @r: cancelled if it has not ended, freed once it has. 1 when
 * this cancel ended it (a send withdrawn: its receiver never sees it). */
static int drop(struct p2p *p, struct ftcc_request *r)
{
	int cancelled;

	if (!r)
		return 0;
	cancelled = !r->done;
	p2p_cancel_now(p, r, 1);
	cancelled = cancelled && r->done && r->result == FTCC_ERR_CANCELED;
	if (r->done) {
		own_free(r);
		return cancelled;
	}
	if (p->norphans == p->orphans_cap) { /* a send whose data left: it ends on its own */
		uint32_t cap = p->orphans_cap ? p->orphans_cap * 2 : 8;
		struct ftcc_request **o = realloc(p->orphans, cap * sizeof(*o));

		if (!o) {
			ftcc_warn("p2p: no memory to keep a request of the library's; it leaks");
			return 0;
		}
		p->orphans = o;
		p->orphans_cap = cap;
	}
	p->orphans[p->norphans++] = r;
	return 0;
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
	for (int k = 0; k < 64 && !p->failed; k++) { /* the REQs waiting, a bounded lot a pass */
		struct ftcc_request *r = p->srv_req;

		if (r && !r->done)
			break;
		p->srv_req = NULL;
		if (r && r->result == 0 && r->st.bytes == P2P_REQ_BYTES)
			serve(p, r->st.source, p->srv_buf);
		if (r)
			own_free(r);
		/* every member answers, one that offers nothing too */
		p->srv_req = own(p, ENG_RECV, p->srv_buf, sizeof(p->srv_buf), FTCC_ANY_SOURCE,
				 P2P_TAG_REQ);
		if (!p->srv_req)
			break;
	}
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
		own_free(s->send);
		free(s);
	}
	for (uint32_t i = 0; i < p->norphans;) {
		if (p->orphans[i]->done) {
			own_free(p->orphans[i]);
			p->orphans[i] = p->orphans[--p->norphans];
		} else {
			i++;
		}
	}
}

/* @f gives up its current source. Unless that source answered NO, its answer (if it comes: the
 * source got the REQ) is refused, so that its send ends and its offer is free again. */
static void leave_source(struct p2p *p, struct p2p_fetch *f)
{
	int answered = f->no && f->no->done && f->no->result == 0;
	int withdrawn;

	drop(p, f->ok);
	drop(p, f->no);
	withdrawn = drop(p, f->ask);
	f->ok = f->no = f->ask = NULL;
	if (f->src != UINT32_MAX && !answered && !withdrawn)
		p2p_refuse(p, f->src, P2P_TAG_OK(f->nonce), P2P_TAG_NO(f->nonce));
}

/* Ends fetch @f with @rc (the caller's request) and frees it. */
static void finish(struct p2p *p, struct p2p_fetch *f, int rc)
{
	if (rc) /* a success received its answer whole: nothing to refuse */
		leave_source(p, f);
	else {
		drop(p, f->ok);
		drop(p, f->no);
		drop(p, f->ask);
	}
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
	uint8_t *req;

	leave_source(p, f);
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
	f->asked_ns = p2p_now_ns();
	req = malloc(P2P_REQ_BYTES); /* the REQ's own: it may outlive this fetch, or this ask */
	if (req) {
		le_put64(req, f->nonce);
		le_put64(req + 8, f->req->count);
		memcpy(req + 16, f->name, P2P_NAME_MAX);
	}
	f->ok = own(p, ENG_RECV, f->req->recvbuf, f->req->count, pe->id, P2P_TAG_OK(f->nonce));
	f->no = own(p, ENG_RECV, &f->nobuf, sizeof(f->nobuf), pe->id, P2P_TAG_NO(f->nonce));
	f->ask = req ? own(p, ENG_SEND, req, P2P_REQ_BYTES, pe->id, P2P_TAG_REQ) : NULL;
	if (f->ask)
		f->ask->tmp = req;
	else
		free(req);
	if (!f->ok || !f->no || !f->ask)
		finish(p, f, FTCC_ERR_NOMEM);
}

void p2p_state_step(struct p2p *p)
{
	/* a source that does not answer within the failure detection's bound (its thread
	 * failed, or it could not take the REQ) is given up for the next one */
	int64_t now = p2p_now_ns(), bound = (4 * p->c->timeout_ms + 2000) * 1000000;
	struct p2p_fetch *f, *next;

	serve_step(p);
	for (f = p->fetches; f; f = next) {
		next = f->next;
		if (f->src == UINT32_MAX) {
			ask_next(p, f);
		} else if (f->ok->done && f->ok->result == 0) {
			finish(p, f, 0);
		} else if (f->no->done && f->no->result == 0) {
			f->refused = 1;
			ask_next(p, f);
		} else if (f->ok->done || f->no->done || (f->ask->done && f->ask->result)) {
			ask_next(p, f); /* lost, left, or could not be asked */
		} else if (!f->ok->pm && now - f->asked_ns > bound) {
			ftcc_info("p2p: member %u did not answer a fetch of \"%s\" in %lld ms",
				  f->src, f->name, (long long)(bound / 1000000));
			ask_next(p, f);
		}
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
		own_free(p->srv_req);
		p->srv_req = NULL;
	}
	while (p->serving) {
		struct p2p_serve *s = p->serving;

		p->serving = s->next;
		if (s->offer)
			s->offer->inflight--;
		p2p_end(p, s->send, rc);
		own_free(s->send);
		free(s);
	}
	for (uint32_t i = 0; i < p->norphans; i++) {
		p2p_end(p, p->orphans[i], rc);
		own_free(p->orphans[i]);
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

/* Offers named @name (withdrawn ones too) still read by a send. */
static uint32_t name_inflight(const struct p2p *p, const char *name)
{
	uint32_t n = 0;

	for (const struct p2p_offer *o = p->offers; o; o = o->next)
		if (!strcmp(o->name, name))
			n += o->inflight;
	return n;
}

FTCC_API int ftcc_state_withdraw(ftcc_comm_t *c, const char *name)
{
	int64_t end;
	struct p2p_offer **pp;
	struct p2p *p;
	int found = 0, rc = 0;

	if (!c || !c->p2p || !name_ok(name))
		return FTCC_ERR_INVALID;
	p = c->p2p;
	/* sends of it end when their fetcher has it, refuses it, or leaves the group: within
	 * the failure detection's bound */
	end = p2p_now_ns() + (4 * c->timeout_ms + 2000) * 1000000;
	pthread_mutex_lock(&p->mu);
	for (struct p2p_offer *o = p->offers; o; o = o->next) {
		if (!strcmp(o->name, name)) {
			o->gone = 1; /* a withdraw that said BUSY before is tried again */
			found = 1;
		}
	}
	if (!found) {
		pthread_mutex_unlock(&p->mu);
		return FTCC_ERR_INVALID;
	}
	while (name_inflight(p, name) && p->running && p2p_now_ns() < end) {
		struct timespec ts;
		int64_t t = p2p_now_ns() + 20000000;

		ts.tv_sec = t / 1000000000;
		ts.tv_nsec = t % 1000000000;
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	}
	if (name_inflight(p, name) && p->running) {
		rc = FTCC_ERR_BUSY; /* still read: it stays withdrawn; call again */
	} else {
		/* no thread: its sends ended with it (p2p_stop); none refers to the offer now */
		for (struct p2p_serve *sv = p->serving; sv; sv = sv->next)
			if (sv->offer && !strcmp(sv->offer->name, name))
				sv->offer = NULL;
		for (pp = &p->offers; *pp;) {
			struct p2p_offer *o = *pp;

			if (!strcmp(o->name, name)) {
				*pp = o->next;
				free(o);
			} else {
				pp = &o->next;
			}
		}
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
