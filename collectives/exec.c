/* SPDX-License-Identifier: BSD-3-Clause */
/* Who runs ops: the lanes, their queues, the gate, and the requests' start, test and wait.
 *
 * Op seq runs on lane seq % nlanes. A lane runs its ops one at a time in sequence order, by
 * whichever thread holds its executor role: a caller blocked in ftcc_wait()/ftcc_allreduce()
 * runs its op's lane itself (no thread hand-off on the latency path), and the lane's own thread
 * runs ops started asynchronously that nobody waits for, and reports completed ops that a new
 * epoch reopens while the lane is idle. Lanes run side by side on data planes of their own, so
 * consecutive ops overlap on the wire and in the reduction; the gate (an op starts once every op
 * nlanes below it completed here) keeps the ops in flight to nlanes consecutive ones.
 */
#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "ftcc/reduce.h"
#include "p2p.h"

static void deadline_in(struct timespec *ts, int ms)
{
	clock_gettime(CLOCK_MONOTONIC, ts);
	ts->tv_nsec += (long)ms * 1000000L;
	ts->tv_sec += ts->tv_nsec / 1000000000L;
	ts->tv_nsec %= 1000000000L;
}

uint64_t eng_done_below(const struct ftcc_comm *c)
{
	uint64_t low = UINT64_MAX;

	for (uint32_t i = 0; i < c->nlanes; i++) {
		low = c->lane[i].exec_seq < low ? c->lane[i].exec_seq : low;
	}
	return low;
}

/* The blob's fields: @k-th NUL-separated string into [*off, *off + *len). 0 or -1. */
static int info_field(const uint8_t *info, size_t len, unsigned k, size_t *off, size_t *flen)
{
	size_t o = 0;

	for (unsigned i = 0; i < k; i++) {
		const uint8_t *z = memchr(info + o, '\0', len - o);

		if (!z) {
			return -1;
		}
		o = (size_t)(z - info) + 1;
	}
	const uint8_t *z = memchr(info + o, '\0', len - o);

	*off = o;
	*flen = z ? (size_t)(z - (info + o)) : len - o;
	return 0;
}

uint32_t eng_info_lanes(const uint8_t *info, size_t len)
{
	size_t off, flen;
	uint32_t n = 1;

	if (info_field(info, len, 2, &off, &flen) || flen == 0) {
		return 1;
	}
	for (size_t i = 0; i < flen; i++) {
		n += info[off + i] == ',';
	}
	return n + 1;
}

int eng_lane_addr(const uint8_t *info, size_t len, uint32_t idx, uint32_t nlanes, char *out)
{
	size_t off, flen, a0;
	uint32_t have = eng_info_lanes(info, len), i = 0;
	const char *host_end;
	char ports[CTL_INFO_MAX + 1], addr[DP_ADDR_MAX], *p, *save = NULL;
	unsigned long port = 0;

	out[0] = '\0';
	if (info_field(info, len, 0, &off, &a0) || a0 >= DP_ADDR_MAX) {
		return -EPROTO;
	}
	memcpy(out, info, a0);
	out[a0] = '\0';
	ports[0] = '\0';
	if (info_field(info, len, 2, &off, &flen) == 0) {
		memcpy(ports, info + off, flen);
		ports[flen] = '\0';
	}
	if (have != nlanes) {
		return -EPROTO;
	}
	if (idx == 0) {
		return 0;
	}
	for (p = strtok_r(ports, ",", &save); p; p = strtok_r(NULL, ",", &save)) {
		if (++i == idx) {
			port = strtoul(p, NULL, 10);
			break;
		}
	}
	host_end = strrchr(out, ':');
	if (!port || port > 65535 || !host_end ||
	    snprintf(addr, sizeof(addr), "%.*s:%lu", (int)(host_end - out), out, port) >=
		    (int)sizeof(addr)) {
		return -EPROTO; /* @out keeps lane 0's address */
	}
	memcpy(out, addr, sizeof(addr));
	return 0;
}

/* Whether op @seq may start: every op up to seq - nlanes completed here. Open for every op once
 * the member gave up or the comm is aborted (they end at once with that error). Under c->mu. */
static int gate_open(struct ftcc_comm *c, uint64_t seq)
{
	return c->failed || atomic_load(&c->aborted) || seq < eng_done_below(c) + c->nlanes;
}

/* Whether lane @l has an op it may run now. Under c->mu. */
static int runnable(struct eng_lane *l)
{
	return l->qhead && gate_open(l->c, l->qhead->seq);
}

/* Whether an op's error leaves this member unable to take part in the next ops: it must leave
 * the group then, or the others would wait for it in those ops. */
static int gives_up(int rc)
{
	return rc == FTCC_ERR_NOMEM || rc == FTCC_ERR_TIMEOUT || rc == FTCC_ERR_LOST ||
	       rc == FTCC_ERR_SYSTEM || rc == FTCC_ERR_INVALID;
}

/* Whether anyone sleeping on c->cv needs the news that an op of lane @l ended, or that @l's
 * executor stopped: a caller in ftcc_wait(), another lane's gate, the shutdown, or, after a
 * caller ran its own op (@caller), the lane's thread for the ops queued behind it. A wake-up
 * for nothing costs the sleeping lane thread a context switch per op, which with more threads
 * than cores delays the next op. Under c->mu. */
static int wake_needed(struct eng_lane *l, int caller)
{
	struct ftcc_comm *c = l->c;

	if (c->nlanes > 1 || c->stop || atomic_load(&c->aborted)) {
		return 1;
	}
	if (l->waiters) {
		return 1;
	}
	return caller && (l->qhead || atomic_load(&c->ctl_gen) != l->sync_gen);
}

/* Runs lane @l's queued ops in order while the gate lets them, until @until is done (NULL: until
 * none can run). Called with c->mu held and l->executing set by the caller; returns the same
 * way. */
static void execute(struct eng_lane *l, struct ftcc_request *until)
{
	struct ftcc_comm *c = l->c;

	while (runnable(l) && !(until && until->done)) {
		struct ftcc_request *r = l->qhead;

		l->qhead = r->next;
		if (!l->qhead) {
			l->qtail = NULL;
		}
		pthread_mutex_unlock(&c->mu);
		if (atomic_load(&c->aborted)) {
			r->result = FTCC_ERR_ABORTED;
		} else if (c->failed) {
			r->result = FTCC_ERR_LOST; /* this member left the group */
		} else {
			eng_run_op(l, r);
			eng_coll_finish(l, r);
			if (gives_up(r->result)) {
				char why[320];

				pthread_mutex_lock(&c->mu);
				snprintf(why, sizeof(why), "op %llu failed here (%s): %s",
					 (unsigned long long)r->seq, ftcc_strerror(r->result),
					 c->last_error);
				pthread_mutex_unlock(&c->mu);
				eng_give_up(c, r->result, why);
			}
		}
		pthread_mutex_lock(&c->mu);
		if (r->result != FTCC_ERR_ABORTED && r->result != FTCC_ERR_LOST &&
		    r->result != FTCC_ERR_TIMEOUT) {
			l->exec_seq = r->seq + c->nlanes;
			/* how far this member got: an atomic store, safe under the lock */
			if (c->ctl) {
				ctl_member_progress_s(c->ctl, c->stream, c->next_seq,
						      eng_done_below(c));
			}
		}
		r->done = 1;
		if (wake_needed(l, until != NULL)) {
			pthread_cond_broadcast(&c->cv); /* its waiter, the gates of other lanes */
		}
	}
	if (!atomic_load(&c->aborted)) {
		pthread_mutex_unlock(&c->mu);
		eng_sync_done(l);
		pthread_mutex_lock(&c->mu);
	}
}

static void *lane_main(void *arg)
{
	struct eng_lane *l = arg;
	struct ftcc_comm *c = l->c;
	struct timespec ts;

	ftcc_thread_name("lane%u", l->idx);
	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		if (!l->executing && (runnable(l) || atomic_load(&c->ctl_gen) != l->sync_gen) &&
		    !atomic_load(&c->aborted)) {
			l->executing = 1;
			execute(l, NULL);
			l->executing = 0;
			pthread_cond_broadcast(&c->cv);
			continue;
		}
		if (!l->executing && !atomic_load(&c->aborted)) {
			/* between ops: a peer that reconnects now gets its answer */
			l->executing = 1;
			pthread_mutex_unlock(&c->mu);
			eng_serve(l);
			pthread_mutex_lock(&c->mu);
			l->executing = 0;
			/* Only a caller waiting to run this lane needs to know: waking the other
			 * lanes' threads here would have them serve and wake this one in turn, a
			 * storm of wake-ups between idle lanes. */
			if (l->waiters) {
				pthread_cond_broadcast(&c->cv);
			}
			/* An op enqueued (or an epoch committed) while the lock was dropped signalled
			 * nobody: look again before sleeping. */
			if (runnable(l) || atomic_load(&c->ctl_gen) != l->sync_gen) {
				continue;
			}
		}
		deadline_in(&ts, 20);
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

int eng_lanes_start(struct ftcc_comm *c, uint64_t first)
{
	for (uint32_t i = 0; i < c->nlanes; i++) {
		struct eng_lane *l = &c->lane[i];

		/* the lane's first op at or after @first */
		l->exec_seq = first + (i + c->nlanes - first % c->nlanes) % c->nlanes;
	}
	for (uint32_t i = 0; i < c->nlanes; i++) {
		if (pthread_create(&c->lane[i].thread, NULL, lane_main, &c->lane[i])) {
			return FTCC_ERR_SYSTEM;
		}
		c->lane[i].thread_started = 1;
	}
	return 0;
}

int eng_lanes_busy(struct ftcc_comm *c)
{
	for (uint32_t i = 0; i < c->nlanes; i++) {
		if (c->lane[i].executing) {
			return 1;
		}
	}
	return 0;
}

void eng_lanes_abort_queued(struct ftcc_comm *c)
{
	for (uint32_t i = 0; i < c->nlanes; i++) {
		struct eng_lane *l = &c->lane[i];

		while (l->qhead) {
			struct ftcc_request *r = l->qhead;

			l->qhead = r->next;
			r->result = FTCC_ERR_ABORTED;
			r->done = 1;
		}
		l->qtail = NULL;
	}
	pthread_cond_broadcast(&c->cv);
}

void eng_lanes_join(struct ftcc_comm *c)
{
	for (uint32_t i = 0; i < c->nlanes; i++) {
		if (c->lane[i].thread_started) {
			pthread_join(c->lane[i].thread, NULL);
			c->lane[i].thread_started = 0;
		}
	}
}

/* The checks of eng_start() before anything is allocated. */
static int start_check(struct ftcc_comm *c, const struct eng_op *d, ftcc_request_t **req)
{
	size_t bytes = d->count * ftcc_dtype_size(d->dtype);
	const char *s = d->sendbuf, *r = d->recvbuf;

	if (!c || !req || (unsigned)d->dtype >= FTCC_DTYPE_COUNT ||
	    (unsigned)d->op >= FTCC_REDOP_COUNT || (unsigned)d->codec >= FTCC_CODEC_COUNT ||
	    (d->count && (!s || (!r && d->kind != ENG_REDUCE_SCATTER))) ||
	    d->count > FTCC_MAX_COUNT) {
		return FTCC_ERR_INVALID;
	}
	if (r && s != r && d->count && s < r + bytes && r < s + bytes) {
		return FTCC_ERR_INVALID; /* overlapping but not in place */
	}
	if (atomic_load(&c->aborted)) {
		return FTCC_ERR_ABORTED;
	}
	pthread_mutex_lock(&c->mu);
	if (c->failed) {
		pthread_mutex_unlock(&c->mu);
		return FTCC_ERR_LOST; /* it left the group: ftcc_comm_last_error() says why */
	}
	pthread_mutex_unlock(&c->mu);
	return 0;
}

int eng_start(struct ftcc_comm *c, const struct eng_op *d, int wake, ftcc_request_t **req)
{
	struct ftcc_request *r;
	struct eng_lane *l;
	int rc = start_check(c, d, req);

	r = rc ? NULL : calloc(1, sizeof(*r));
	if (!r) {
		free(d->tmp);
		return rc ? rc : FTCC_ERR_NOMEM;
	}
	r->comm = c;
	r->sendbuf = d->sendbuf;
	r->recvbuf = d->recvbuf;
	r->count = d->count;
	r->dtype = d->dtype;
	r->op = d->op;
	r->codec = d->codec;
	r->kind = d->kind;
	r->param = d->param;
	r->tmp = d->tmp;
	r->dst = d->dst;
	r->dst_off = d->dst_off;
	r->dst_len = d->dst_len;
	pthread_mutex_lock(&c->mu);
	if (c->stop || c->next_seq - eng_done_below(c) >= FTCC_MAX_INFLIGHT) {
		/* stopped since the check: nothing would run or end it */
		rc = c->stop ? FTCC_ERR_ABORTED : FTCC_ERR_BUSY;
		pthread_mutex_unlock(&c->mu);
		free(r->tmp);
		free(r);
		return rc;
	}
	r->seq = c->next_seq++;
	r->lnext = c->live;
	if (c->live) {
		c->live->lprev = r;
	}
	c->live = r;
	l = eng_lane_of(c, r->seq);
	if (l->qtail) {
		l->qtail->next = r;
	} else {
		l->qhead = r;
	}
	l->qtail = r;
	/* an op nobody waits for yet: its lane's thread runs it (a blocking call runs its op
	 * itself, no hand-off) */
	if (wake) {
		pthread_cond_broadcast(&c->cv);
	}
	/* the others take a member that has not issued an op they wait in for a straggler */
	if (c->ctl) {
		ctl_member_issued_s(c->ctl, c->stream, r->seq + 1);
	}
	pthread_mutex_unlock(&c->mu);
	*req = r;
	return 0;
}

int eng_collect(struct ftcc_request *r, struct ftcc_record *rec)
{
	struct ftcc_comm *c = r->comm;
	int rc = r->result;

	if (rec) {
		*rec = r->rec;
	}
	pthread_mutex_lock(&c->mu);
	if (r->lprev) {
		r->lprev->lnext = r->lnext;
	} else {
		c->live = r->lnext;
	}
	if (r->lnext) {
		r->lnext->lprev = r->lprev;
	}
	pthread_mutex_unlock(&c->mu);
	free(r->tmp);
	free(r);
	return rc;
}

FTCC_API int ftcc_test(ftcc_request_t *r, int *done, struct ftcc_record *rec)
{
	struct ftcc_comm *c;
	int fin;

	if (!r || !done) {
		return FTCC_ERR_INVALID;
	}
	if (r->kind == ENG_SEND || r->kind == ENG_RECV || r->kind == ENG_FETCH) {
		return p2p_test(r, done, rec);
	}
	c = r->comm;
	pthread_mutex_lock(&c->mu);
	if (!r->done && !eng_lane_of(c, r->seq)->executing) {
		pthread_cond_broadcast(&c->cv); /* the lane's thread runs it; test never blocks */
	}
	fin = r->done;
	pthread_mutex_unlock(&c->mu);
	*done = fin;
	return fin ? eng_collect(r, rec) : 0;
}

FTCC_API int ftcc_wait(ftcc_request_t *r, struct ftcc_record *rec)
{
	struct ftcc_comm *c;
	struct eng_lane *l;
	struct timespec ts;

	if (!r) {
		return FTCC_ERR_INVALID;
	}
	if (r->kind == ENG_SEND || r->kind == ENG_RECV || r->kind == ENG_FETCH) {
		return p2p_wait(r, rec);
	}
	c = r->comm;
	l = eng_lane_of(c, r->seq);
	pthread_mutex_lock(&c->mu);
	while (!r->done) {
		if (!l->executing && !atomic_load(&c->aborted) && runnable(l)) {
			l->executing = 1;
			execute(l, r);
			l->executing = 0;
			if (wake_needed(l, 1)) {
				pthread_cond_broadcast(&c->cv);
			}
			continue;
		}
		if (atomic_load(&c->aborted) && !l->executing) {
			/* Nobody will run it any more. */
			struct ftcc_request **pp = &l->qhead, *prev = NULL;

			while (*pp && *pp != r) {
				prev = *pp;
				pp = &(*pp)->next;
			}
			if (*pp) {
				*pp = r->next;
				if (l->qtail == r) {
					l->qtail = prev;
				}
			}
			r->result = FTCC_ERR_ABORTED;
			r->done = 1;
			break;
		}
		deadline_in(&ts, 10);
		l->waiters++;
		pthread_cond_timedwait(&c->cv, &c->mu, &ts);
		l->waiters--;
	}
	pthread_mutex_unlock(&c->mu);
	return eng_collect(r, rec);
}
