/* SPDX-License-Identifier: BSD-3-Clause */
/* The message-stream driver of the TCP transport tests: one thread posts sends and grouped
 * receives with bounded windows, tests both until every message arrived, and checks that
 * each one landed exactly once, in its tag's buffer, with its size and content.
 */
#define _GNU_SOURCE
#include "tcp_harness.h"

#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEED_BASE 0x5eedull
#define MAX_WINDOW 256

/* A send in flight, or ready to post. */
struct th_send {
	int msg;
	void *buf;
	struct ftcc_req *req;
};

/* A receive group in flight: buffer t expects message want[t]. */
struct th_group {
	int first;
	void *bufs[FTCC_MAX_RECVS];
	size_t caps[FTCC_MAX_RECVS];
	int tags[FTCC_MAX_RECVS];
	int want[FTCC_MAX_RECVS];
	struct ftcc_req *req;
};

struct th_run {
	struct th_pair *p;
	const struct th_stream *o;
	struct th_send sends[MAX_WINDOW];
	struct th_group groups[MAX_WINDOW];
	int next_send, sends_done;   /* messages posted / completed on the send side */
	int next_group, groups_done; /* groups posted / completed */
	int at_done;		     /* o->at called for messages below this */
	char *err;
	size_t errlen;
};

static int __attribute__((format(printf, 2, 3))) run_fail(struct th_run *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, r->errlen, fmt, ap);
	va_end(ap);
	return -1;
}

/* Tag of message @i: groups are sent in an order of tags that differs from the buffers'. */
static int msg_tag(const struct th_stream *o, int i)
{
	int n = o->recv_n, j = i % n, k = i / n;

	return o->same_tags ? 7 : 100 + (n - 1 - j + k) % n;
}

static int post_sends(struct th_run *r)
{
	const struct th_stream *o = r->o;

	while (r->next_send < o->nmsg && r->next_send - r->sends_done < o->window) {
		struct th_send *s = &r->sends[r->next_send % MAX_WINDOW];
		int i = r->next_send, rc;
		size_t size = o->size_of(i);

		if (r->at_done <= i) {
			if (o->at)
				o->at(i, o->arg);
			r->at_done = i + 1;
			s->msg = i;
			s->buf = malloc(size ? size : 1);
			if (!s->buf)
				return run_fail(r, "out of memory");
			th_fill(s->buf, size, SEED_BASE + (uint64_t)i);
		}
		rc = r->p->ops->isend(r->p->s, s->buf, size, msg_tag(o, i), NULL, &s->req);
		if (rc)
			return run_fail(r, "isend of message %d: %d (%s)", i, rc, strerror(-rc));
		if (!s->req)
			return 0; /* not now: retried on the next pass */
		r->next_send++;
	}
	return 0;
}

/* Fills group @k: buffer t has tag t's message (or, with same_tags, message first + t). */
static int group_prepare(struct th_run *r, struct th_group *g, int k)
{
	const struct th_stream *o = r->o;

	memset(g, 0, sizeof(*g));
	g->first = k * o->recv_n;
	for (int j = 0; j < o->recv_n; j++) {
		int i = g->first + j;
		int t = o->same_tags ? j : msg_tag(o, i) - 100;

		g->want[t] = i;
		g->tags[t] = msg_tag(o, i);
	}
	for (int t = 0; t < o->recv_n; t++) {
		g->caps[t] = o->size_of(g->want[t]) + o->extra_cap;
		g->bufs[t] = malloc(g->caps[t] ? g->caps[t] : 1);
		if (!g->bufs[t])
			return run_fail(r, "out of memory");
		memset(g->bufs[t], 0xee, g->caps[t]);
	}
	return 0;
}

static int post_recvs(struct th_run *r)
{
	const struct th_stream *o = r->o;
	int ngroups = o->nmsg / o->recv_n;
	int gwin = o->window / o->recv_n > 0 ? o->window / o->recv_n : 1;

	while (r->next_group < ngroups && r->next_group - r->groups_done < gwin) {
		struct th_group *g = &r->groups[r->next_group % MAX_WINDOW];
		int rc;

		if (!g->bufs[0] && group_prepare(r, g, r->next_group))
			return -1;
		rc = r->p->ops->irecv(r->p->r, o->recv_n, g->bufs, g->caps, g->tags, NULL, &g->req);
		if (rc)
			return run_fail(r, "irecv of group %d: %d (%s)", r->next_group, rc,
					strerror(-rc));
		if (!g->req)
			return 0;
		r->next_group++;
	}
	return 0;
}

static int test_sends(struct th_run *r)
{
	for (int k = r->sends_done; k < r->next_send; k++) {
		struct th_send *s = &r->sends[k % MAX_WINDOW];
		size_t size = 0;
		int done = 0, rc;

		if (!s->req)
			continue;
		rc = r->p->ops->test(s->req, &done, &size);
		if (rc)
			return run_fail(r, "send of message %d failed: %d (%s)", s->msg, rc,
					strerror(-rc));
		if (!done)
			continue;
		if (size != r->o->size_of(s->msg))
			return run_fail(r, "send %d reports %zu bytes", s->msg, size);
		free(s->buf);
		s->buf = NULL;
		s->req = NULL;
	}
	while (r->sends_done < r->next_send && !r->sends[r->sends_done % MAX_WINDOW].req)
		r->sends_done++;
	return 0;
}

static int group_check(struct th_run *r, struct th_group *g, const size_t *sizes)
{
	for (int t = 0; t < r->o->recv_n; t++) {
		int i = g->want[t];
		size_t size = r->o->size_of(i);
		long bad;

		if (sizes[t] != size)
			return run_fail(
				r, "message %d (buffer %d of group at %d): %zu bytes, sent %zu", i,
				t, g->first, sizes[t], size);
		bad = th_check(g->bufs[t], size, SEED_BASE + (uint64_t)i);
		if (bad >= 0)
			return run_fail(r, "message %d (%zu bytes): wrong byte at offset %ld", i,
					size, bad);
		for (size_t k = size; k < g->caps[t]; k++)
			if (((uint8_t *)g->bufs[t])[k] != 0xee)
				return run_fail(r, "message %d: byte %zu past its end written", i,
						k);
		free(g->bufs[t]);
		g->bufs[t] = NULL;
	}
	return 0;
}

static int test_recvs(struct th_run *r)
{
	for (int k = r->groups_done; k < r->next_group; k++) {
		struct th_group *g = &r->groups[k % MAX_WINDOW];
		size_t sizes[FTCC_MAX_RECVS];
		int done = 0, rc;

		if (!g->req)
			continue;
		rc = r->p->ops->test(g->req, &done, sizes);
		if (rc)
			return run_fail(r, "receive of group %d failed: %d (%s)", k, rc,
					strerror(-rc));
		if (!done)
			continue;
		g->req = NULL;
		if (group_check(r, g, sizes))
			return -1;
	}
	while (r->groups_done < r->next_group && !r->groups[r->groups_done % MAX_WINDOW].req)
		r->groups_done++;
	return 0;
}

int th_stream_run(struct th_pair *p, const struct th_stream *o, char *err, size_t errlen)
{
	struct th_run *r = calloc(1, sizeof(*r));
	int64_t deadline = th_now_ms() + o->timeout_ms;
	int rc = 0;

	err[0] = '\0';
	if (!r || o->recv_n < 1 || o->recv_n > FTCC_MAX_RECVS || o->nmsg % o->recv_n ||
	    o->window < 1 || o->window > MAX_WINDOW) {
		snprintf(err, errlen, "bad stream parameters");
		free(r);
		return -1;
	}
	*r = (struct th_run){ .p = p, .o = o, .err = err, .errlen = errlen };
	while (rc == 0 && (r->groups_done * o->recv_n < o->nmsg || r->sends_done < o->nmsg)) {
		rc = post_recvs(r);
		if (rc == 0)
			rc = post_sends(r);
		if (rc == 0)
			rc = test_sends(r);
		if (rc == 0)
			rc = test_recvs(r);
		if (rc == 0 && th_now_ms() > deadline)
			rc = run_fail(r, "timeout: %d/%d sends done, %d/%d groups received",
				      r->sends_done, o->nmsg, r->groups_done, o->nmsg / o->recv_n);
		sched_yield();
	}
	/* On success every buffer was freed as its request completed. On failure the buffers
	 * still in flight stay allocated: the transport may write them until the test closes
	 * the connection. */
	free(r);
	return rc;
}
