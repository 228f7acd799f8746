/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the data plane (collectives/dp*.c), 2 to 4 members in this process over 127.0.0.1,
 * one thread each: tags, addresses, exchanges small and large, many tags posted late, stale and
 * abandoned frames, dp_run's check. Failures are in test_dp_faults.c.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dp_harness.h"

TestSuite(dp, .timeout = 60);

Test(dp, tag_order)
{
	struct dp_tag a = { 1, 2, 3, 4 }, b = a;

	cr_expect_eq(dp_tag_cmp(&a, &b), 0);
	b.step = 5;
	cr_expect_lt(dp_tag_cmp(&a, &b), 0);
	b = a;
	b.phase = 2;
	b.step = 100;
	cr_expect_gt(dp_tag_cmp(&a, &b), 0, "phase outranks step");
	b = a;
	b.epoch = 3;
	b.phase = 0;
	cr_expect_lt(dp_tag_cmp(&a, &b), 0, "epoch outranks phase");
	b = a;
	b.seq = 99;
	b.epoch = 1;
	cr_expect_gt(dp_tag_cmp(&a, &b), 0, "epoch outranks seq: a reopened op follows later ops");
}

Test(dp, create_addresses_and_misuse)
{
	struct dp *a = dph_mk(1, 1, 0), *v6 = NULL;
	struct dp_cfg cfg6 = { .bind_host = "::1", .group_id = DPH_GROUP, .self_id = 2 };
	struct dp_peer bad = { .id = 2, .incarnation = 1 };
	uint8_t buf[4];
	struct dp_xfer x = dph_xf(1, DP_SEND, dph_tag(1, 0), buf, sizeof(buf));
	uint32_t bp;

	cr_expect_eq(strncmp(dp_addr(a), "127.0.0.1:", 10), 0, "%s", dp_addr(a));
	cr_expect_gt(atoi(dp_addr(a) + 10), 0);
	if (dp_create(&cfg6, &v6) == 0) { /* hosts without IPv6 on lo skip this part */
		cr_expect_eq(strncmp(dp_addr(v6), "[::1]:", 6), 0, "%s", dp_addr(v6));
		struct dp_peer p6 = dph_peer_of(v6, 2, 0);

		cr_expect_eq(dp_set_peers(a, &p6, 1), 0, "bracketed IPv6 parses");
		dp_destroy(v6);
	}
	snprintf(bad.addr, sizeof(bad.addr), "127.0.0.1");
	cr_expect_eq(dp_set_peers(a, &bad, 1), -EINVAL, "no port");
	snprintf(bad.addr, sizeof(bad.addr), "::1:80");
	cr_expect_eq(dp_set_peers(a, &bad, 1), -EINVAL, "unbracketed IPv6");
	snprintf(bad.addr, sizeof(bad.addr), "not-a-host:80");
	cr_expect_eq(dp_set_peers(a, &bad, 1), -EINVAL, "names are not resolved");
	cr_expect_eq(dp_progress(a, &x, 1, 0, &bp), -EINVAL, "self is no peer");
	x.peer = 7;
	cr_expect_eq(dp_progress(a, &x, 1, 0, &bp), -EINVAL, "unknown peer");
	cr_expect_eq(dp_progress(a, NULL, 0, 0, &bp), 0, "nothing to do");
	dp_destroy(a);
}

/* Both members send a small and a large payload to each other at once. */
Test(dp, exchange_small_and_large_both_ways)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 11, 22 };
	struct dp *d[2] = { dph_mk(1, 11, 0), dph_mk(2, 22, 0) };
	struct dph_job j[2] = { { .dp = d[0] }, { .dp = d[1] } };
	uint8_t *sbig[2], *rbig[2], ssmall[2][100], rsmall[2][100];

	dph_mesh(d, ids, incs, 2);
	for (int i = 0; i < 2; i++) {
		uint32_t other = ids[1 - i];

		sbig[i] = malloc(DPH_BIG);
		rbig[i] = malloc(DPH_BIG);
		cr_assert(sbig[i] && rbig[i]);
		dph_fill(sbig[i], DPH_BIG, ids[i]);
		dph_fill(ssmall[i], 100, 100 + ids[i]);
		j[i].x[0] = dph_xf(other, DP_RECV, dph_tag(1, 1), rbig[i], DPH_BIG);
		j[i].x[1] = dph_xf(other, DP_SEND, dph_tag(1, 0), ssmall[i], 100);
		j[i].x[2] = dph_xf(other, DP_SEND, dph_tag(1, 1), sbig[i], DPH_BIG);
		j[i].x[3] = dph_xf(other, DP_RECV, dph_tag(1, 0), rsmall[i], 100);
		j[i].x[4] = dph_xf(other, DP_SEND, dph_tag(1, 2), NULL, 0);
		j[i].x[5] = dph_xf(other, DP_RECV, dph_tag(1, 2), NULL, 0);
		j[i].n = 6;
	}
	int64_t t0 = dph_now_ms();

	dph_job_start(&j[0]);
	dph_job_start(&j[1]);
	dph_job_join(&j[0]);
	dph_job_join(&j[1]);
	int64_t ms = dph_now_ms() - t0;

	for (int i = 0; i < 2; i++) {
		cr_assert_eq(j[i].rc, 0, "member %d: %d", i, j[i].rc);
		for (int k = 0; k < j[i].n; k++)
			cr_expect(j[i].x[k].done);
		cr_expect(dph_check_fill(rbig[i], DPH_BIG, ids[1 - i]), "large payload intact");
		cr_expect(dph_check_fill(rsmall[i], 100, 100 + ids[1 - i]), "small payload intact");
		free(sbig[i]);
		free(rbig[i]);
		dp_destroy(d[i]);
	}
	cr_log_info("64 MiB each way in %lld ms", (long long)ms);
}

/* Four members, every pair exchanging 16 tagged frames; each receiver posts its receives in
 * reverse order, only after the senders finished, so every frame waits for its receive. */
Test(dp, four_members_many_tags_posted_late)
{
	enum { N = 4, T = 16, LEN = 3000 };
	uint32_t ids[N] = { 3, 5, 8, 9 };
	uint64_t incs[N] = { 1, 1, 1, 1 };
	struct dp *d[N];
	static struct dph_job js[N], jr[N];
	static uint8_t sb[N][N][T][LEN], rb[N][N][T][LEN];

	for (int i = 0; i < N; i++)
		d[i] = dph_mk(ids[i], 1, 0);
	dph_mesh(d, ids, incs, N);
	for (int i = 0; i < N; i++) {
		js[i] = (struct dph_job){ .dp = d[i] };
		jr[i] = (struct dph_job){ .dp = d[i] };
		for (int p = 0; p < N; p++) {
			if (p == i)
				continue;
			for (int t = 0; t < T; t++) {
				dph_fill(sb[i][p][t], LEN, (uint32_t)(i * 1000 + p * 100 + t));
				js[i].x[js[i].n++] = dph_xf(
					ids[p], DP_SEND, dph_tag(7, (uint32_t)t), sb[i][p][t], LEN);
				jr[i].x[jr[i].n++] =
					dph_xf(ids[p], DP_RECV, dph_tag(7, (uint32_t)(T - 1 - t)),
					       rb[i][p][T - 1 - t], LEN);
			}
		}
	}
	/* Sends complete once written to the socket: connections are made by the sends of
	 * the lower ids and the accepting side's receives, so run both phases per member in
	 * one thread: first all sends (with every member doing the same at once), then
	 * receives. */
	for (int i = 0; i < N; i++)
		dph_job_start(&js[i]);
	for (int i = 0; i < N; i++)
		dph_job_join(&js[i]);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(js[i].rc, 0, "sends of member %d: %d", i, js[i].rc);
		dph_job_start(&jr[i]);
	}
	for (int i = 0; i < N; i++)
		dph_job_join(&jr[i]);
	for (int i = 0; i < N; i++) {
		cr_assert_eq(jr[i].rc, 0, "receives of member %d: %d", i, jr[i].rc);
		for (int p = 0; p < N; p++) {
			for (int t = 0; p != i && t < T; t++)
				cr_expect(dph_check_fill(rb[i][p][t], LEN,
							 (uint32_t)(p * 1000 + i * 100 + t)),
					  "member %d from %d tag %d", i, p, t);
		}
	}
	for (int i = 0; i < N; i++)
		dp_destroy(d[i]);
}

/* A frame older than every posted receive is dropped, payload and all (even one bigger than
 * the drain buffer), and the stream stays in step. */
Test(dp, stale_frames_dropped)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	size_t old_len = 1u << 20;
	uint8_t *old = calloc(1, old_len), small[64], got[64], got2[64];
	struct dph_job a = { .dp = d[0] }, b = { .dp = d[1] };

	dph_mesh(d, ids, incs, 2);
	dph_fill(small, sizeof(small), 5);
	/* member 1 sends an old (seq 1) frame, a small stale one (seq 2 step 0), then seq 3 */
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(1, 0), old, old_len);
	a.x[1] = dph_xf(2, DP_SEND, dph_tag(2, 0), small, 10);
	a.x[2] = dph_xf(2, DP_SEND, dph_tag(3, 0), small, sizeof(small));
	a.x[3] = dph_xf(2, DP_SEND, dph_tag(3, 1), small, sizeof(small));
	a.n = 4;
	b.x[0] = dph_xf(1, DP_RECV, dph_tag(3, 0), got, sizeof(got));
	b.n = 1;
	dph_job_start(&a);
	dph_job_start(&b);
	dph_job_join(&b);
	cr_assert_eq(b.rc, 0, "%d", b.rc);
	cr_expect_arr_eq(got, small, sizeof(small));
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(3, 1), got2, sizeof(got2));

	cr_expect_eq(dph_run(d[1], &x, 1, NULL), 0, "next frame in step");
	cr_expect_arr_eq(got2, small, sizeof(small));
	dph_job_join(&a);
	cr_expect_eq(a.rc, 0);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
	free(old);
}

/* A frame of a later op arrives while a receive of an earlier op from the same peer is posted:
 * the awaited frame was sent before and lost, so the call fails with -ENOMSG naming the peer;
 * the link stays, and the later frame is there, whole, for the receive that wants it. A frame
 * of the same op and a later step is no such proof: the call goes on waiting. */
Test(dp, later_op_first_is_enomsg_and_the_link_stays)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	uint8_t s1[64], r1[64], r2[64];
	struct dph_job a = { .dp = d[0] };
	uint32_t bp = 0;
	int rc = 0;

	dph_mesh(d, ids, incs, 2);
	dph_fill(s1, sizeof(s1), 4);
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(5, 1), s1, sizeof(s1)); /* op 5, step 1 */
	a.x[1] = dph_xf(2, DP_SEND, dph_tag(6, 0), s1, sizeof(s1)); /* then op 6 */
	a.n = 2;
	dph_job_start(&a);
	/* waiting for op 5 step 0, never sent: op 5 step 1 is no proof, the call waits */
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(5, 0), r1, sizeof(r1));

	for (int64_t end = dph_now_ms() + 200; rc == 0 && dph_now_ms() < end;)
		rc = dp_progress(d[1], &x, 1, 10, &bp);
	cr_expect_eq(rc, 0, "a later step of the same op: %d", rc);
	dp_release(d[1], &x, 1);
	x = dph_xf(1, DP_RECV, dph_tag(5, 1), r2, sizeof(r2));
	cr_assert_eq(dph_run(d[1], &x, 1, &bp), 0);
	/* now waiting for op 5 step 2, never sent: the frame of op 6 proves it lost */
	x = dph_xf(1, DP_RECV, dph_tag(5, 2), r1, sizeof(r1));
	rc = 0;
	for (int64_t end = dph_now_ms() + DPH_BOUND_MS; rc == 0 && dph_now_ms() < end;)
		rc = dp_progress(d[1], &x, 1, 10, &bp);
	cr_expect_eq(rc, -ENOMSG, "%d", rc);
	cr_expect_eq(bp, 1);
	cr_expect_eq(x.done, 0);
	dp_release(d[1], &x, 1);
	memset(r2, 0, sizeof(r2));
	x = dph_xf(1, DP_RECV, dph_tag(6, 0), r2, sizeof(r2));
	cr_expect_eq(dph_run(d[1], &x, 1, &bp), 0, "the link and the later frame stayed");
	cr_expect(dph_check_fill(r2, sizeof(r2), 4));
	dph_job_join(&a);
	cr_expect_eq(a.rc, 0);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* A receive abandoned half way (the caller moved on to a newer tag) has its rest drained. */
Test(dp, abandoned_receive_drained)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	uint8_t *big = malloc(DPH_BIG), *sink = malloc(DPH_BIG), small[32], got[32];
	struct dph_job a = { .dp = d[0] };
	uint32_t bp;

	dph_mesh(d, ids, incs, 2);
	dph_fill(small, sizeof(small), 9);
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(1, 0), big, DPH_BIG);
	a.x[1] = dph_xf(2, DP_SEND, dph_tag(2, 0), small, sizeof(small));
	a.n = 2;
	dph_job_start(&a);
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(1, 0), sink, DPH_BIG);
	int64_t deadline = dph_now_ms() + DPH_BOUND_MS;

	while (x.off == 0 && dph_now_ms() < deadline)
		cr_assert_geq(dp_progress(d[1], &x, 1, 10, &bp), 0);
	cr_assert_gt(x.off, 0, "part of the payload arrived");
	cr_assert_eq(x.done, 0);
	x = dph_xf(1, DP_RECV, dph_tag(2, 0), got, sizeof(got));
	cr_assert_eq(dph_run(d[1], &x, 1, &bp), 0);
	cr_expect_arr_eq(got, small, sizeof(small));
	dph_job_join(&a);
	cr_expect_eq(a.rc, 0);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
	free(big);
	free(sink);
}

Test(dp, length_mismatch_is_eproto)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	uint8_t buf[200] = { 0 };
	struct dph_job a = { .dp = d[0] };
	uint32_t bp = 0;

	dph_mesh(d, ids, incs, 2);
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(1, 0), buf, 100);
	a.n = 1;
	dph_job_start(&a);
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(1, 0), buf, 200);

	cr_expect_eq(dph_run(d[1], &x, 1, &bp), -EPROTO);
	cr_expect_eq(bp, 1);
	dph_job_join(&a);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* A frame whose op (seq) a transfer of the call has with another shape is dropped, payload and
 * all, and the call fails with -EBADE naming the sender; the connection stays (the next
 * exchange on it works). A receive of the right shape takes the frame. */
Test(dp, shape_mismatch_is_ebade_and_the_link_stays)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 }, seq = 0, theirs = 0, ours = 0;
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	uint8_t s1[100], r1[100];
	struct dph_job a = { .dp = d[0] };
	uint32_t bp = 0, peer = 0;

	dph_mesh(d, ids, incs, 2);
	cr_expect_eq(dp_mismatch(d[1], &seq, &peer, &theirs, &ours), -ENOENT);
	dph_fill(s1, sizeof(s1), 7);
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(1, 0), s1, sizeof(s1));
	a.x[0].shape = 0x111;
	a.x[1] = dph_xf(2, DP_SEND, dph_tag(2, 0), s1, sizeof(s1));
	a.x[1].shape = 0x222;
	a.n = 2;
	dph_job_start(&a);
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(1, 0), r1, sizeof(r1));

	x.shape = 0x999;
	memset(r1, 0, sizeof(r1));
	cr_expect_eq(dph_run(d[1], &x, 1, &bp), -EBADE);
	cr_expect_eq(bp, 1);
	cr_expect_eq(x.done, 0);
	cr_expect_eq(r1[0] | r1[99], 0, "the dropped payload went nowhere");
	cr_assert_eq(dp_mismatch(d[1], &seq, &peer, &theirs, &ours), 0);
	cr_expect_eq(seq, 1);
	cr_expect_eq(peer, 1);
	cr_expect_eq(theirs, 0x111);
	cr_expect_eq(ours, 0x999);
	/* the next frame on the same connection, of the shape the receiver has */
	x = dph_xf(1, DP_RECV, dph_tag(2, 0), r1, sizeof(r1));
	x.shape = 0x222;
	cr_expect_eq(dph_run(d[1], &x, 1, &bp), 0);
	cr_expect(dph_check_fill(r1, sizeof(r1), 7));
	dph_job_join(&a);
	cr_expect_eq(a.rc, 0);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* Member 2 waits on member 3 only, for op 1; member 1, whom the call has nothing with, sends a
 * frame of op 1 of another shape (it chose another algorithm for its count). Member 2 reads that
 * frame's header while it waits and fails with -EBADE naming member 1. */
Test(dp, shape_mismatch_seen_from_a_member_outside_the_call)
{
	uint32_t ids[3] = { 1, 2, 3 };
	uint64_t incs[3] = { 1, 1, 1 }, seq = 0, theirs = 0, ours = 0;
	struct dp *d[3] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0), dph_mk(3, 1, 0) };
	uint8_t s1[64] = { 1 }, r3[64];
	struct dph_job a = { .dp = d[0] };
	uint32_t bp = 0, peer = 0;
	int64_t t0;

	dph_mesh(d, ids, incs, 3);
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(1, 5), s1, sizeof(s1));
	a.x[0].shape = 0x5;
	a.n = 1;
	dph_job_start(&a);
	struct dp_xfer x = dph_xf(3, DP_RECV, dph_tag(1, 0), r3, sizeof(r3));

	x.shape = 0x6;
	t0 = dph_now_ms();
	cr_expect_eq(dph_run(d[1], &x, 1, &bp), -EBADE);
	cr_expect_lt(dph_now_ms() - t0, DPH_BOUND_MS / 2);
	cr_expect_eq(bp, 1);
	dph_job_join(&a);
	cr_expect_eq(a.rc, 0, "the frame went out");
	cr_assert_eq(dp_mismatch(d[1], &seq, &peer, &theirs, &ours), 0);
	cr_expect_eq(peer, 1);
	cr_expect_eq(theirs, 0x5);
	for (int i = 0; i < 3; i++)
		dp_destroy(d[i]);
}

struct stop_when {
	const struct dp_xfer *x;
	int calls;
	atomic_int *go; /* set when the check stops the run */
};

static int stop_after_10(void *arg)
{
	struct stop_when *s = arg;

	return ++s->calls == 10 ? 42 : 0;
}

/* dp_run check: stops the run (42) once @x has moved some bytes, letting the receiver go. */
static int stop_when_moving(void *arg)
{
	struct stop_when *s = arg;

	s->calls++;
	if (s->x->off == 0)
		return 0;
	atomic_store(s->go, 1);
	return 42;
}

struct late_recv {
	struct dph_job j;
	atomic_int go;
};

static void *late_recv_main(void *arg)
{
	struct late_recv *l = arg;
	int64_t deadline = dph_now_ms() + DPH_BOUND_MS;

	while (!atomic_load(&l->go) && dph_now_ms() < deadline)
		sched_yield();
	return dph_job_main(&l->j);
}

/* Calls dp_progress() with no transfers on @dp (its tails go out) until @j's receive is done,
 * bounded. */
static void drive_until_received(struct dp *dp, struct dph_job *j)
{
	int64_t deadline = dph_now_ms() + DPH_BOUND_MS;
	uint32_t bp = 0;

	while (!__atomic_load_n(&j->x[0].done, __ATOMIC_ACQUIRE) && dph_now_ms() < deadline)
		cr_assert_geq(dp_progress(dp, NULL, 0, 10, &bp), 0);
}

/* dp_run() calls its check while it waits and returns what the check says; a frame it left
 * half written is handed to dp (copied), and finished by the sender's next calls however slowly
 * the peer reads, so the peer (still receiving it) gets it whole and the connection survives
 * for the next exchange. */
Test(dp, run_check_stops_and_finishes_half_frame)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	size_t len = 24u << 20; /* more than loopback buffers hold */
	uint8_t *s = malloc(len), *r = malloc(len), quiet[4];
	static struct late_recv b;
	uint32_t bp = 0;

	dph_mesh(d, ids, incs, 2);
	dph_ping(d[0], 1, d[1], 2, 1);
	/* nothing arrives: the check runs about every check_ms and its value is returned */
	struct dp_xfer idle = dph_xf(2, DP_RECV, dph_tag(1, 1), quiet, sizeof(quiet));
	struct stop_when sw = { .x = &idle };
	int64_t t0 = dph_now_ms();

	cr_expect_eq(dp_run(d[0], &idle, 1, stop_after_10, &sw, 10, &bp), 42);
	cr_expect_eq(sw.calls, 10);
	cr_expect_geq(dph_now_ms() - t0, 80, "about check_ms between checks");
	cr_expect_lt(dph_now_ms() - t0, 1000);

	/* member 2 starts reading only when member 1's check stops its run half way */
	dph_fill(s, len, 77);
	b.j = (struct dph_job){ .dp = d[1], .n = 1 };
	b.j.x[0] = dph_xf(1, DP_RECV, dph_tag(2, 0), r, len);
	cr_assert_eq(pthread_create(&b.j.th, NULL, late_recv_main, &b), 0);
	struct dp_xfer big = dph_xf(2, DP_SEND, dph_tag(2, 0), s, len);

	sw = (struct stop_when){ .x = &big, .go = &b.go };
	cr_expect_eq(dp_run(d[0], &big, 1, stop_when_moving, &sw, 1, &bp), 42);
	cr_expect_eq(big.done, 0, "stopped half way");
	memset(s, 0xee, len); /* the buffer is the caller's again: dp sends its copy */
	drive_until_received(d[0], &b.j);
	dph_job_join(&b.j);
	cr_assert_eq(b.j.rc, 0, "the receiver got the frame whole: %d", b.j.rc);
	cr_expect(dph_check_fill(r, len, 77));
	dph_ping(d[0], 1, d[1], 2, 3);
	free(s);
	free(r);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* A frame abandoned half written through dp_progress() without dp_release() (a caller's bug:
 * dp cannot know the rest) costs the connection: the peer gets -EPIPE once, and the next
 * transfers reconnect. */
Test(dp, abandoned_half_frame_closes_connection)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	uint8_t *s = malloc(DPH_BIG), small[32], got[32];
	uint32_t bp = 0;

	dph_mesh(d, ids, incs, 2);
	dph_ping(d[0], 1, d[1], 2, 1);
	struct dp_xfer big = dph_xf(2, DP_SEND, dph_tag(2, 0), s, DPH_BIG);
	int64_t deadline = dph_now_ms() + DPH_BOUND_MS;

	while (big.off == 0 && dph_now_ms() < deadline)
		cr_assert_geq(dp_progress(d[0], &big, 1, 0, &bp), 0);
	cr_assert(big.off > 0 && !big.done, "half written (member 2 is not reading)");

	struct dph_job a = { .dp = d[0] };

	dph_fill(small, sizeof(small), 3);
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(3, 0), small, sizeof(small));
	a.n = 1;
	dph_job_start(&a);
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(3, 0), got, sizeof(got));

	cr_expect_eq(dph_run(d[1], &x, 1, &bp), -EPIPE);
	cr_expect_eq(bp, 1);
	x = dph_xf(1, DP_RECV, dph_tag(3, 0), got, sizeof(got));
	cr_expect_eq(dph_run(d[1], &x, 1, &bp), 0, "over the new connection");
	cr_expect_arr_eq(got, small, sizeof(small));
	dph_job_join(&a);
	cr_expect_eq(a.rc, 0);
	free(s);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* The same, but the sender releases its transfer before moving on: the half frame is finished
 * from a copy (the peer takes it whole, the caller's buffer is free at once) and the connection
 * survives. */
Test(dp, release_finishes_half_frame)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	uint8_t *s = malloc(DPH_BIG), *r = malloc(DPH_BIG);
	struct dph_job b = { .dp = d[1] };
	uint32_t bp = 0;

	dph_mesh(d, ids, incs, 2);
	dph_ping(d[0], 1, d[1], 2, 1);
	dph_fill(s, DPH_BIG, 21);
	struct dp_xfer big = dph_xf(2, DP_SEND, dph_tag(2, 0), s, DPH_BIG);
	int64_t deadline = dph_now_ms() + DPH_BOUND_MS;

	while (big.off == 0 && dph_now_ms() < deadline)
		cr_assert_geq(dp_progress(d[0], &big, 1, 0, &bp), 0);
	cr_assert(big.off > 0 && !big.done, "half written (member 2 is not reading)");
	b.x[0] = dph_xf(1, DP_RECV, dph_tag(2, 0), r, DPH_BIG);
	b.n = 1;
	dp_release(d[0], &big, 1);
	memset(s, 0xee, DPH_BIG);
	dph_job_start(&b);
	drive_until_received(d[0], &b);
	dph_job_join(&b);
	cr_assert_eq(b.rc, 0, "%d", b.rc);
	cr_expect(dph_check_fill(r, DPH_BIG, 21));
	dph_ping(d[0], 1, d[1], 2, 3); /* no -EPIPE: same connection */
	free(s);
	free(r);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}
