/* SPDX-License-Identifier: BSD-3-Clause */
/* The data plane's peeks (DP_PEEK), dropping receives and dp_kick(), which the point-to-point
 * layer builds on: frames arrive in any tag order and none is stale while a peek is posted; a
 * small frame is read whole by the peek, a larger one waits for the receive of its tag; a
 * receive without a buffer drops its frame and the next one is intact; a kick ends a wait.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "dp_harness.h"

TestSuite(dp_peek, .timeout = 60);

/* Runs one peek of peer @from on @dp until it completes (bounded). */
static struct dp_xfer peek(struct dp *dp, uint32_t from, void *buf, size_t cap)
{
	struct dp_xfer x = dph_xf(from, DP_PEEK, dph_tag(0, 0), buf, cap);
	int64_t end = dph_now_ms() + DPH_BOUND_MS;
	uint32_t bad = 0;
	int rc = 0;

	while (!x.done && rc >= 0 && dph_now_ms() < end)
		rc = dp_progress(dp, &x, 1, 10, &bad);
	cr_assert_eq(rc >= 0 && x.done, 1, "peek: %d", rc);
	return x;
}

/* Runs receive @r of peer @from on @dp with a peek beside it, as the point-to-point layer posts
 * them, until both complete (bounded); returns the peek. */
static struct dp_xfer recv_peek(struct dp *dp, uint32_t from, struct dp_xfer r, void *buf,
				size_t cap)
{
	struct dp_xfer x[2] = { r, dph_xf(from, DP_PEEK, dph_tag(0, 0), buf, cap) };
	int64_t end = dph_now_ms() + DPH_BOUND_MS;
	uint32_t bad = 0;
	int rc = 0;

	while ((!x[0].done || !x[1].done) && rc >= 0 && dph_now_ms() < end)
		rc = dp_progress(dp, x, 2, 10, &bad);
	cr_assert_eq(rc >= 0 && x[0].done && x[1].done, 1, "receive and peek: %d", rc);
	return x[1];
}

Test(dp_peek, any_tag_order_small_whole_large_waits_dropped_frames)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	size_t big_len = 3u << 20;
	uint8_t *big = malloc(big_len), *got = malloc(big_len), small[16], pk[32];
	struct dph_job a = { .dp = d[0] };
	struct dp_xfer x;

	cr_assert(big && got);
	dph_mesh(d, ids, incs, 2);
	dph_fill(big, big_len, 7);
	dph_fill(small, sizeof(small), 8);
	/* tags falling, then rising: with peeks nothing is stale */
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(9, 0), small, sizeof(small));
	a.x[1] = dph_xf(2, DP_SEND, dph_tag(3, 0), big, big_len); /* dropped by the receiver */
	a.x[2] = dph_xf(2, DP_SEND, dph_tag(1, 0), small, 0);	  /* empty */
	a.x[3] = dph_xf(2, DP_SEND, dph_tag(2, 0), big, big_len); /* taken */
	a.x[4] = dph_xf(2, DP_SEND, dph_tag(0, 5), small, sizeof(small));
	a.n = 5;
	dph_job_start(&a);

	x = peek(d[1], 1, pk, sizeof(pk)); /* fits: read whole */
	cr_expect_eq(x.tag.seq, 9);
	cr_expect_eq(x.len, sizeof(small));
	cr_expect_eq(x.off, sizeof(small));
	cr_expect_arr_eq(pk, small, sizeof(small));

	x = peek(d[1], 1, pk, sizeof(pk)); /* too large: its header only */
	cr_expect_eq(x.tag.seq, 3);
	cr_expect_eq(x.len, big_len);
	cr_expect_eq(x.off, 0);
	x = recv_peek(d[1], 1, dph_xf(1, DP_RECV, x.tag, NULL, big_len), pk, sizeof(pk));
	cr_expect_eq(x.tag.seq, 1, "the frame after the dropped one: %llu",
		     (unsigned long long)x.tag.seq);
	cr_expect_eq(x.len, 0);
	cr_expect_eq(x.off, 0);

	x = peek(d[1], 1, pk, sizeof(pk));
	cr_expect_eq(x.tag.seq, 2);
	x = recv_peek(d[1], 1, dph_xf(1, DP_RECV, x.tag, got, big_len), pk, sizeof(pk));
	cr_expect(dph_check_fill(got, big_len, 7), "the large frame after the dropped one");
	cr_expect_eq(x.tag.seq, 0, "a lower tag after a receive is no stale frame");
	cr_expect_eq(x.tag.step, 5);
	cr_expect_arr_eq(pk, small, sizeof(small));

	dph_job_join(&a);
	cr_expect_eq(a.rc, 0);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
	free(big);
	free(got);
}

/* A receive and a peek of the same peer in one call: the receive takes its frame, the peek the
 * next one, whatever their tags, as soon as the receive's frame is in. */
Test(dp_peek, receive_then_peek_in_one_call)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	uint8_t a1[100], a2[8], got[100], pk[64];
	struct dph_job a = { .dp = d[0] };
	struct dp_xfer x[2];
	uint32_t bad = 0;
	int64_t end = dph_now_ms() + DPH_BOUND_MS;
	int rc = 0;

	dph_mesh(d, ids, incs, 2);
	dph_fill(a1, sizeof(a1), 1);
	dph_fill(a2, sizeof(a2), 2);
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(7, 0), a1, sizeof(a1));
	a.x[1] = dph_xf(2, DP_SEND, dph_tag(4, 0), a2, sizeof(a2)); /* lower than the first */
	a.n = 2;
	dph_job_start(&a);
	x[0] = peek(d[1], 1, pk, 16); /* the first, header only */
	cr_assert_eq(x[0].tag.seq, 7);
	x[0] = dph_xf(1, DP_RECV, x[0].tag, got, sizeof(got));
	x[1] = dph_xf(1, DP_PEEK, dph_tag(0, 0), pk, sizeof(pk));
	while ((!x[0].done || !x[1].done) && rc >= 0 && dph_now_ms() < end)
		rc = dp_progress(d[1], x, 2, 10, &bad);
	cr_expect_eq(rc >= 0 && x[0].done && x[1].done, 1, "rc %d", rc);
	cr_expect(dph_check_fill(got, sizeof(got), 1));
	cr_expect_eq(x[1].tag.seq, 4, "a lower tag after a receive is no stale frame");
	cr_expect_arr_eq(pk, a2, sizeof(a2));
	dph_job_join(&a);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* dp_kick() ends the wait of a call that has nothing to complete. */
Test(dp_peek, kick_ends_a_wait)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	uint8_t pk[16];
	struct dp_xfer x = dph_xf(1, DP_PEEK, dph_tag(0, 0), pk, sizeof(pk));
	int64_t t0;
	int rc;

	dph_mesh(d, ids, incs, 2);
	dp_kick(d[1]);
	t0 = dph_now_ms();
	rc = dp_progress(d[1], &x, 1, 5000, NULL);
	cr_expect_eq(rc, 0);
	cr_expect_lt(dph_now_ms() - t0, 4000, "a kick before the call ends its wait");
	rc = dp_progress(d[1], &x, 1, 50, NULL);
	cr_expect_eq(rc, 0, "and only that one");
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}
