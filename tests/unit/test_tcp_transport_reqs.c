/* SPDX-License-Identifier: BSD-3-Clause */
/* Request tests of the TCP transport, both ends in this process over lo: in-flight limits
 * (NULL request, never an error), small sends copied and done at once, closing with requests
 * in flight, and pending sends failing when the peer closes.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tcp_harness.h"

#define OPEN_MS 5000

TestSuite(tcp_reqs, .timeout = 60);

#define NRECV FTCC_MAX_REQUESTS
#define NSEND 256

/* Polls isend until it takes the message (a slot frees once its message is acknowledged). */
static struct ftcc_req *isend_retry(const struct ftcc_transport_ops *ops, struct ftcc_conn *c,
				    void *buf, size_t size, int tag)
{
	int64_t deadline = th_now_ms() + 5000;
	struct ftcc_req *r = NULL;

	while (!r && th_now_ms() < deadline)
		cr_assert_eq(ops->isend(c, buf, size, tag, NULL, &r), 0);
	return r;
}

/* 256 unacknowledged sends and 32 receives fit; one more of either gets a NULL request (rc
 * 0), and fits once the oldest completes. Sends go first, so none is acknowledged yet. */
static void request_limits(void)
{
	const struct ftcc_transport_ops *ops = ftcc_transport_get("tcp");
	static uint8_t sbuf[NSEND + 1], rbuf[NSEND + 1];
	struct ftcc_req *sr[NSEND + 1] = { 0 }, *rr[NSEND + 1] = { 0 };
	size_t cap = 1, got = 0;
	int tag = 5;
	struct th_pair p;

	cr_assert_eq(th_pair_open(&p, 11, OPEN_MS), 0);
	for (int i = 0; i <= NSEND; i++) {
		sbuf[i] = (uint8_t)(i * 7 + 1);
		cr_assert_eq(ops->isend(p.s, &sbuf[i], 1, tag, NULL, &sr[i]), 0);
		cr_assert_eq(sr[i] != NULL, i < NSEND, "send %d", i);
	}
	for (int i = 0; i <= NRECV; i++) {
		void *b = &rbuf[i];

		cr_assert_eq(ops->irecv(p.r, 1, &b, &cap, &tag, NULL, &rr[i]), 0);
		cr_assert_eq(rr[i] != NULL, i < NRECV, "receive %d", i);
	}
	/* Drain: each completed receive makes room for the next one. */
	for (int i = 0; i <= NSEND; i++) {
		void *b = &rbuf[i];

		if (i >= NRECV) {
			cr_assert_eq(ops->irecv(p.r, 1, &b, &cap, &tag, NULL, &rr[i]), 0);
			cr_assert_not_null(rr[i], "receive %d after one completed", i);
		}
		if (i == NSEND) {
			cr_assert_eq(th_wait(ops, sr[0], NULL, 5000), 0, "send 0");
			sr[i] = isend_retry(ops, p.s, &sbuf[i], 1, tag);
			cr_assert_not_null(sr[i], "no room after the oldest send completed");
		}
		cr_assert_eq(th_wait(ops, rr[i], &got, 5000), 0, "receive %d", i);
		cr_assert_eq(got, 1);
		cr_assert_eq(rbuf[i], sbuf[i], "message %d", i);
	}
	for (int k = 1; k <= NSEND; k++)
		cr_assert_eq(th_wait(ops, sr[k], NULL, 5000), 0, "send %d", k);
	th_pair_close(&p);
	th_stop();
}

Test(tcp_reqs, request_limits_eager)
{
	th_start(NULL);
	request_limits();
}

Test(tcp_reqs, request_limits_not_eager)
{
	th_start((const char *const[]){ "FTCC_EAGER_MAX_BYTES=0", NULL });
	request_limits();
}

/* A small send is copied: done at once without a receive, and the caller may reuse the
 * buffer; a large one completes only when the receiver has it. */
Test(tcp_reqs, small_sends_are_copied)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	static char small[100], big[256 << 10], rsmall[100], rbig[256 << 10];
	struct ftcc_req *ss = NULL, *sb = NULL, *rr = NULL;
	void *bufs[2] = { rsmall, rbig };
	size_t caps[2] = { sizeof(rsmall), sizeof(rbig) }, got[2];
	int tags[2] = { 0, 0 }, done = 0;
	struct th_pair p;

	cr_assert_eq(th_pair_open(&p, 14, OPEN_MS), 0);
	th_fill(small, sizeof(small), 1);
	th_fill(big, sizeof(big), 2);
	cr_assert_eq(ops->isend(p.s, small, sizeof(small), 0, NULL, &ss), 0);
	cr_assert_eq(ops->isend(p.s, big, sizeof(big), 0, NULL, &sb), 0);
	cr_assert(ss && sb);
	cr_assert_eq(ops->test(ss, &done, NULL), 0);
	cr_expect_eq(done, 1, "small send done before any receive");
	memset(small, 0, sizeof(small)); /* reused at once */
	usleep(50 * 1000);
	cr_assert_eq(ops->test(sb, &done, NULL), 0);
	cr_expect_eq(done, 0, "large send done with no receive posted");
	cr_assert_eq(ops->irecv(p.r, 2, bufs, caps, tags, NULL, &rr), 0);
	cr_assert_eq(th_wait(ops, rr, got, 5000), 0);
	cr_expect_eq(got[0], sizeof(small));
	cr_expect_eq(got[1], sizeof(big));
	cr_expect_eq(th_check(rsmall, sizeof(rsmall), 1), -1, "the copy was sent");
	cr_expect_eq(th_check(rbig, sizeof(rbig), 2), -1);
	cr_expect_eq(th_wait(ops, sb, NULL, 5000), 0);
	th_pair_close(&p);
	th_stop();
}

#define BIG (4u << 20)

/* Closing both sides with sends and receives in flight returns at once and frees them (ASan
 * builds check for leaks and late writes). */
Test(tcp_reqs, close_with_requests_in_flight)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	struct ftcc_req *req;
	struct th_pair p;
	void *bufs[6];
	size_t cap = BIG;
	int tag = 1;

	cr_assert_eq(th_pair_open(&p, 12, OPEN_MS), 0);
	for (int i = 0; i < 6; i++) {
		bufs[i] = calloc(1, BIG);
		cr_assert_not_null(bufs[i]);
	}
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(ops->irecv(p.r, 1, &bufs[i], &cap, &tag, NULL, &req), 0);
		cr_assert_not_null(req);
	}
	for (int i = 3; i < 6; i++) {
		cr_assert_eq(ops->isend(p.s, bufs[i], BIG, tag, NULL, &req), 0);
		cr_assert_not_null(req);
	}
	int64_t t0 = th_now_ms();

	cr_expect_eq(ops->close_conn(p.s), 0);
	cr_expect_eq(ops->close_conn(p.r), 0);
	cr_expect_lt(th_now_ms() - t0, 100, "close must not wait for the peer");
	cr_expect_eq(ops->close_listen(p.l), 0);
	for (int i = 0; i < 6; i++)
		free(bufs[i]);
	th_stop(); /* and checks that the requests and connections were freed */
}

/* The receiver closing is evidence the peer is gone: pending sends fail, they do not hang. */
Test(tcp_reqs, peer_close_fails_pending_sends)
{
	const struct ftcc_transport_ops *ops =
		th_start((const char *const[]){ "FTCC_FAILURE_TIMEOUT_MS=3000", NULL });
	static char buf[256 << 10]; /* above FTCC_EAGER_MAX_BYTES: completes only when received */
	struct ftcc_req *req = NULL, *more = NULL;
	struct th_pair p;

	cr_assert_eq(th_pair_open(&p, 13, OPEN_MS), 0);
	cr_assert_eq(ops->isend(p.s, buf, sizeof(buf), 0, NULL, &req), 0);
	cr_assert_not_null(req);
	cr_expect_eq(ops->close_conn(p.r), 0);
	p.r = NULL;
	int64_t t0 = th_now_ms();

	cr_expect_eq(th_wait(ops, req, NULL, 2000), -ECONNRESET);
	cr_expect_lt(th_now_ms() - t0, 1000, "a closed peer is not a silent one");
	cr_expect_eq(ops->isend(p.s, buf, 1, 0, NULL, &more), -ECONNRESET, "sticky");
	cr_expect_null(more);
	cr_expect_gt(th_log_count("closed the connection"), 0);
	th_pair_close(&p);
	th_stop();
}
