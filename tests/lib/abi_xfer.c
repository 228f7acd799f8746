/* SPDX-License-Identifier: BSD-3-Clause */
/* Connection set-up and the message-stream engine of the ABI tests: one thread plays both
 * NCCL proxy threads, polling every call non-blockingly until a deadline.
 */
#define _GNU_SOURCE
#include "abi_xfer.h"

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ABI_MAX_WINDOW 8

/* Formats @fmt into @err and returns -1, so failures read `return abi_fail(...)`. */
static int __attribute__((format(printf, 3, 4)))
abi_fail(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
	return -1;
}

int abi_connect_poll(struct abi_net *net, int dev, void *handle, void **scomm, int timeout_ms)
{
	int64_t deadline = abi_now_ms() + timeout_ms;

	*scomm = NULL;
	while (!*scomm) {
		if (abi_connect(net, dev, handle, scomm) != ncclSuccess)
			return -1;
		if (!*scomm && abi_now_ms() > deadline)
			return -1;
		if (!*scomm)
			sched_yield();
	}
	return 0;
}

int abi_accept_poll(struct abi_net *net, void *lcomm, void **rcomm, int timeout_ms)
{
	int64_t deadline = abi_now_ms() + timeout_ms;

	*rcomm = NULL;
	while (!*rcomm) {
		if (abi_accept(net, lcomm, rcomm) != ncclSuccess)
			return -1;
		if (!*rcomm && abi_now_ms() > deadline)
			return -1;
		if (!*rcomm)
			sched_yield();
	}
	return 0;
}

int abi_pair_open(struct abi_net *net, int dev, struct abi_pair *p, int timeout_ms, char *err,
		  size_t errlen)
{
	int64_t deadline = abi_now_ms() + timeout_ms;
	ncclResult_t res;

	memset(p, 0, sizeof(*p));
	p->net = net;
	res = abi_listen(net, dev, p->handle, &p->lcomm);
	if (res != ncclSuccess || !p->lcomm)
		return abi_fail(err, errlen, "listen: result %d, comm %p", res, p->lcomm);
	/* Both ends in one thread: neither call may wait for the other. */
	while (!p->scomm || !p->rcomm) {
		if (!p->scomm && (res = abi_connect(net, dev, p->handle, &p->scomm)) != ncclSuccess)
			return abi_fail(err, errlen, "connect: result %d", res);
		if (!p->rcomm && (res = abi_accept(net, p->lcomm, &p->rcomm)) != ncclSuccess)
			return abi_fail(err, errlen, "accept: result %d", res);
		if (abi_now_ms() > deadline)
			return abi_fail(err, errlen, "no connection after %d ms (send %p, recv %p)",
					timeout_ms, p->scomm, p->rcomm);
		sched_yield();
	}
	return 0;
}

ncclResult_t abi_pair_close(struct abi_pair *p)
{
	ncclResult_t first = ncclSuccess, res;

	if (p->scomm && (res = abi_close_send(p->net, p->scomm)) != ncclSuccess)
		first = res;
	if (p->rcomm && (res = abi_close_recv(p->net, p->rcomm)) != ncclSuccess && !first)
		first = res;
	if (p->lcomm && (res = abi_close_listen(p->net, p->lcomm)) != ncclSuccess && !first)
		first = res;
	p->scomm = p->rcomm = p->lcomm = NULL;
	return first;
}

ncclResult_t abi_wait(struct abi_net *net, void *req, int *size, int timeout_ms)
{
	int64_t deadline = abi_now_ms() + timeout_ms;
	int done = 0;

	for (;;) {
		ncclResult_t res = abi_test(net, req, &done, size);
		if (res != ncclSuccess || done)
			return res;
		if (abi_now_ms() > deadline)
			return ncclInProgress;
		sched_yield();
	}
}

int abi_xfer_one(struct abi_pair *p, void *tx, void *smh, void *rx, void *rmh, size_t size,
		 int timeout_ms, int *got, int64_t *wait_ms, char *err, size_t errlen)
{
	int64_t deadline = abi_now_ms() + timeout_ms, t0;
	void *sreq = NULL, *rreq = NULL;
	ncclResult_t res;

	*got = -1;
	while (!rreq || !sreq) {
		if (abi_now_ms() > deadline)
			return abi_fail(err, errlen, "isend/irecv of %zu bytes not accepted", size);
		if (!rreq && (res = abi_irecv(p->net, p->rcomm, rx, size, rmh, 0, &rreq)))
			return abi_fail(err, errlen, "irecv: result %d", res);
		if (!sreq && (res = abi_isend(p->net, p->scomm, tx, size, smh, &sreq)))
			return abi_fail(err, errlen, "isend: result %d", res);
	}
	t0 = abi_now_ms();
	if ((res = abi_wait(p->net, rreq, got, timeout_ms)) != ncclSuccess)
		return abi_fail(err, errlen, "receive of %zu bytes: result %d", size, res);
	if ((res = abi_wait(p->net, sreq, NULL, timeout_ms)) != ncclSuccess)
		return abi_fail(err, errlen, "send of %zu bytes: result %d", size, res);
	if (wait_ms)
		*wait_ms = abi_now_ms() - t0;
	return 0;
}

/* One direction's buffers and requests; message i uses slot i % window. */
struct abi_side {
	char *buf[ABI_MAX_WINDOW];
	void *mh[ABI_MAX_WINDOW];
	void *req[ABI_MAX_WINDOW];
	int posted;
	int done;
};

static void abi_side_free(struct abi_net *net, void *comm, struct abi_side *side, int window)
{
	for (int i = 0; i < window; i++) {
		if (side->mh[i])
			abi_dereg_mr(net, comm, side->mh[i]);
		free(side->buf[i]);
	}
}

static int abi_side_alloc(struct abi_net *net, void *comm, struct abi_side *side, int window,
			  size_t cap)
{
	for (int i = 0; i < window; i++) {
		side->buf[i] = malloc(cap);
		if (!side->buf[i] || abi_reg_mr(net, comm, side->buf[i], cap, &side->mh[i]))
			return -1;
	}
	return 0;
}

/* Posts sends while the window has room; a NULL request is retried on the next round. */
static int abi_post_sends(struct abi_pair *p, struct abi_stream *s, struct abi_side *tx, char *err,
			  size_t errlen)
{
	while (tx->posted < s->count && tx->posted - tx->done < s->window) {
		int slot = tx->posted % s->window;
		size_t size = s->sizes[tx->posted];
		for (size_t i = 0; i < size; i++)
			tx->buf[slot][i] = (char)abi_pattern((uint64_t)tx->posted, i);
		void *req = NULL;
		ncclResult_t res =
			abi_isend(p->net, p->scomm, tx->buf[slot], size, tx->mh[slot], &req);
		if (res != ncclSuccess)
			return abi_fail(err, errlen, "isend %d: result %d", tx->posted, res);
		if (!req) {
			s->send_retries++;
			return 0;
		}
		tx->req[slot] = req;
		tx->posted++;
	}
	return 0;
}

static int abi_post_recvs(struct abi_pair *p, struct abi_stream *s, struct abi_side *rx, size_t cap,
			  char *err, size_t errlen)
{
	while (rx->posted < s->count && rx->posted - rx->done < s->window) {
		int slot = rx->posted % s->window;
		size_t size = s->sizes[rx->posted] + s->recv_slack;
		void *req = NULL;
		memset(rx->buf[slot], 0, size < cap ? size : cap);
		ncclResult_t res = abi_irecv(p->net, p->rcomm, rx->buf[slot], size, rx->mh[slot],
					     rx->posted % 2, &req);
		if (res != ncclSuccess)
			return abi_fail(err, errlen, "irecv %d: result %d", rx->posted, res);
		if (req == (void *)(uintptr_t)NCCL_NET_OPTIONAL_RECV_COMPLETION)
			return abi_fail(err, errlen, "irecv %d returned the hint as request",
					rx->posted);
		if (!req) {
			s->recv_retries++;
			return 0;
		}
		rx->req[slot] = req;
		rx->posted++;
	}
	return 0;
}

/* Tests the oldest request of @side; 1 if it completed, 0 if not, -1 on failure. On a
 * receive, checks the reported size and every byte. */
static int abi_test_oldest(struct abi_pair *p, struct abi_stream *s, struct abi_side *side,
			   int is_recv, char *err, size_t errlen)
{
	if (side->done == side->posted)
		return 0;
	int slot = side->done % s->window, done = 0, size = -1;
	size_t want = s->sizes[side->done];
	ncclResult_t res = abi_test(p->net, side->req[slot], &done, &size);
	if (res != ncclSuccess)
		return abi_fail(err, errlen, "test %s %d: result %d", is_recv ? "recv" : "send",
				side->done, res);
	if (!done)
		return 0;
	if (is_recv && (size < 0 || (size_t)size != want))
		return abi_fail(err, errlen, "recv %d: size %d, sent %zu", side->done, size, want);
	for (size_t i = 0; is_recv && i < want; i++) {
		uint8_t got = (uint8_t)side->buf[slot][i];
		if (got != abi_pattern((uint64_t)side->done, i))
			return abi_fail(err, errlen, "recv %d (%zu bytes): byte %zu is %u, want %u",
					side->done, want, i, got,
					abi_pattern((uint64_t)side->done, i));
	}
	side->done++;
	return 1;
}

int abi_stream_run(struct abi_pair *p, struct abi_stream *s, char *err, size_t errlen)
{
	struct abi_side tx = { 0 }, rx = { 0 };
	size_t cap = 1;

	if (s->window < 1 || s->window > ABI_MAX_WINDOW)
		return abi_fail(err, errlen, "window %d out of range", s->window);
	for (int i = 0; i < s->count; i++)
		cap = s->sizes[i] + s->recv_slack > cap ? s->sizes[i] + s->recv_slack : cap;
	/* A side whose comm is NULL is played by another process: mark it finished. */
	if (!p->scomm)
		tx.posted = tx.done = s->count;
	if (!p->rcomm)
		rx.posted = rx.done = s->count;
	/* On failure the buffers are left allocated and registered on purpose: requests may
	 * still be in flight into them until the caller closes the comms. */
	if ((p->scomm && abi_side_alloc(p->net, p->scomm, &tx, s->window, cap)) ||
	    (p->rcomm && abi_side_alloc(p->net, p->rcomm, &rx, s->window, cap)))
		return abi_fail(err, errlen, "buffer allocation or regMr failed");
	int64_t deadline = abi_now_ms() + s->timeout_ms;
	while (tx.done < s->count || rx.done < s->count) {
		if (abi_post_recvs(p, s, &rx, cap, err, errlen) ||
		    abi_post_sends(p, s, &tx, err, errlen))
			return -1;
		int a = abi_test_oldest(p, s, &tx, 0, err, errlen);
		int b = abi_test_oldest(p, s, &rx, 1, err, errlen);
		if (a < 0 || b < 0)
			return -1;
		if (abi_now_ms() > deadline)
			return abi_fail(err, errlen, "deadline: sent %d/%d, received %d/%d",
					tx.done, s->count, rx.done, s->count);
		if (!a && !b)
			sched_yield();
	}
	if (p->scomm)
		abi_side_free(p->net, p->scomm, &tx, s->window);
	if (p->rcomm)
		abi_side_free(p->net, p->rcomm, &rx, s->window);
	return 0;
}
