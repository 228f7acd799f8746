/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messages: the calls (ftcc_isend, ftcc_irecv, ftcc_cancel, the waits), and
 * the posting of requests the library makes for itself (p2p_state.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftcc/log.h"
#include "p2p_int.h"

struct ftcc_request *p2p_req_new(struct ftcc_comm *c, enum eng_kind kind)
{
	struct ftcc_request *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	r->comm = c;
	r->kind = kind;
	pthread_mutex_lock(&c->mu);
	r->lnext = c->live;
	if (c->live)
		c->live->lprev = r;
	c->live = r;
	pthread_mutex_unlock(&c->mu);
	return r;
}

static int p2p_usable(struct ftcc_comm *c, uint32_t id, int any)
{
	if (!c || !c->p2p) {
		ftcc_warn("ftcc: point-to-point calls on a communicator without them");
		return 0;
	}
	if (id >= c->size && !(any && id == FTCC_ANY_SOURCE)) {
		ftcc_warn("ftcc: member %u is not an id of this group (size %u)", id, c->size);
		return 0;
	}
	return 1;
}

void p2p_post_send(struct p2p *p, struct ftcc_request *r)
{
	r->st = (struct ftcc_p2p_status){ .source = r->peer, .tag = r->tag, .bytes = r->count };
	if (p->failed) {
		p2p_end(p, r, p->failed);
	} else if (r->peer == p->c->rank) {
		struct p2p_in *m = calloc(1, sizeof(*m));

		if (!m) {
			p2p_end(p, r, FTCC_ERR_NOMEM);
		} else {
			*m = (struct p2p_in){
				.from = r->peer, .tag = r->tag, .len = r->count, .self = r
			};
			*p->in_tail = m;
			p->in_tail = &m->next;
			p2p_match_in(p, m);
		}
	} else {
		r->pnext = NULL;
		*p->sends_tail = r;
		p->sends_tail = &r->pnext;
	}
}

void p2p_post_recv(struct p2p *p, struct ftcc_request *r)
{
	struct ftcc_request **pp;

	if (p->failed) {
		p2p_end(p, r, p->failed);
		return;
	}
	for (pp = &p->recvs; *pp; pp = &(*pp)->pnext) {
	}
	*pp = r;
	if (r->peer != FTCC_ANY_SOURCE && r->peer != p->c->rank)
		p->check_recvs = 1;
	p2p_match_recv(p, r);
}

FTCC_API int ftcc_isend(ftcc_comm_t *c, const void *buf, size_t bytes, uint32_t dest, uint64_t tag,
			ftcc_request_t **req)
{
	struct ftcc_request *r;
	struct p2p *p;

	if (!req || (bytes && !buf) || tag > FTCC_TAG_MAX || !p2p_usable(c, dest, 0))
		return FTCC_ERR_INVALID;
	r = p2p_req_new(c, ENG_SEND);
	if (!r)
		return FTCC_ERR_NOMEM;
	r->sendbuf = buf;
	r->count = bytes;
	r->peer = dest;
	r->tag = tag;
	p = c->p2p;
	pthread_mutex_lock(&p->mu);
	p2p_post_send(p, r);
	pthread_mutex_unlock(&p->mu);
	p2p_kick(p);
	*req = r;
	return 0;
}

FTCC_API int ftcc_irecv(ftcc_comm_t *c, void *buf, size_t bytes, uint32_t source, uint64_t tag,
			ftcc_request_t **req)
{
	struct ftcc_request *r;
	struct p2p *p;

	if (!req || (bytes && !buf) || (tag > FTCC_TAG_MAX && tag != FTCC_ANY_TAG) ||
	    !p2p_usable(c, source, 1))
		return FTCC_ERR_INVALID;
	r = p2p_req_new(c, ENG_RECV);
	if (!r)
		return FTCC_ERR_NOMEM;
	r->recvbuf = buf;
	r->count = bytes;
	r->peer = source;
	r->tag = tag;
	p = c->p2p;
	pthread_mutex_lock(&p->mu);
	p2p_post_recv(p, r);
	pthread_mutex_unlock(&p->mu);
	p2p_kick(p);
	*req = r;
	return 0;
}

FTCC_API int ftcc_cancel(ftcc_request_t *r)
{
	struct p2p *p;
	int rc;

	if (!r || (r->kind != ENG_SEND && r->kind != ENG_RECV && r->kind != ENG_FETCH))
		return FTCC_ERR_INVALID;
	p = r->comm->p2p;
	pthread_mutex_lock(&p->mu);
	r->cancelling++; /* a wait in another thread does not free it under us */
	if ((!r->busy && r->kind != ENG_FETCH) || !p->running) {
		p2p_cancel_now(p, r, 0);
	} else {
		/* Its buffer is in the transfers the thread progresses: the thread takes it out
		 * (or the request ends first, which clears the flag too). */
		r->cancel = 1;
		pthread_mutex_unlock(&p->mu);
		p2p_kick(p);
		pthread_mutex_lock(&p->mu);
		while (r->cancel && !r->done && p->running)
			pthread_cond_wait(&p->cv, &p->mu);
		if (r->cancel && !r->done)
			p2p_cancel_now(p, r, 0);
		r->cancel = 0;
	}
	rc = r->cancel_rc;
	r->cancelling--;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	return rc;
}

/* Waits for @r until @deadline_ns (< 0: none). 1 when it ended. */
static int wait_end(struct p2p *p, struct ftcc_request *r, int64_t deadline_ns)
{
	pthread_mutex_lock(&p->mu);
	while (!r->done || r->cancelling) { /* ended, and no cancel still looks at it */
		struct timespec ts;
		int64_t now = p2p_now_ns(), until = now + 100000000;

		if (deadline_ns >= 0 && now >= deadline_ns && !r->done)
			break;
		if (deadline_ns >= 0 && deadline_ns < until)
			until = deadline_ns;
		ts.tv_sec = until / 1000000000;
		ts.tv_nsec = until % 1000000000;
		pthread_cond_timedwait(&p->cv, &p->mu, &ts);
	}
	pthread_mutex_unlock(&p->mu);
	return r->done;
}

int p2p_test(struct ftcc_request *r, int *done, struct ftcc_record *rec)
{
	struct p2p *p = r->comm->p2p;

	pthread_mutex_lock(&p->mu);
	*done = r->done && !r->cancelling;
	pthread_mutex_unlock(&p->mu);
	return *done ? eng_collect(r, rec) : 0;
}

int p2p_wait(struct ftcc_request *r, struct ftcc_record *rec)
{
	wait_end(r->comm->p2p, r, -1);
	return eng_collect(r, rec);
}

FTCC_API int ftcc_wait_p2p(ftcc_request_t *r, int64_t timeout_ms, struct ftcc_p2p_status *st)
{
	if (!r || (r->kind != ENG_SEND && r->kind != ENG_RECV && r->kind != ENG_FETCH))
		return FTCC_ERR_INVALID;
	if (!wait_end(r->comm->p2p, r, timeout_ms < 0 ? -1 : p2p_now_ns() + timeout_ms * 1000000))
		return FTCC_ERR_TIMEOUT;
	if (st)
		*st = r->st;
	return eng_collect(r, NULL);
}
