/* SPDX-License-Identifier: BSD-3-Clause */
/* The data plane with either side connecting (dp_cfg.either_connects, the point-to-point
 * layer's): the higher member connects to a lower one that wants nothing of it, and a call
 * without transfers takes the connection and returns; attempts that cross, in many timings, end
 * in one connection that carries frames both ways; a connection that broke on one side only is
 * made again once the other side sees the break.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../collectives/dp_int.h"
#include "../lib/fd_count.h"
#include "dp_harness.h"

TestSuite(dp_either, .timeout = 120);

Test(dp_either, the_higher_member_connects_and_an_idle_call_takes_it)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk_cfg(1, 1, 10000, 1), dph_mk_cfg(2, 1, 10000, 1) };
	uint8_t s[3000], r[3000];
	struct dph_job h = { .dp = d[1] };
	uint32_t bad = UINT32_MAX;
	int64_t t0;
	int rc;

	dph_mesh(d, ids, incs, 2);
	dph_fill(s, sizeof(s), 5);
	cr_assert_eq(dp_linked(d[0], 2), 0);
	h.x[0] = dph_xf(1, DP_SEND, dph_tag(1, 0), s, sizeof(s));
	h.n = 1;
	dph_job_start(&h);
	/* member 1 has no transfers: its call waits for connections and returns once it took
	 * member 2's, long before its bound */
	t0 = dph_now_ms();
	rc = dp_progress(d[0], NULL, 0, 30000, &bad);
	cr_assert_eq(rc, 0, "%d", rc);
	cr_assert_eq(dp_linked(d[0], 2), 1, "the idle call returned after %lld ms without it",
		     (long long)(dph_now_ms() - t0));
	cr_assert_lt(dph_now_ms() - t0, 30000);
	struct dp_xfer x = dph_xf(2, DP_RECV, dph_tag(1, 0), r, sizeof(r));

	cr_assert_eq(dph_run(d[0], &x, 1, &bad), 0);
	dph_job_join(&h);
	cr_assert_eq(h.rc, 0, "%d", h.rc);
	cr_assert_arr_eq(r, s, sizeof(s));
	/* the lower member's later sends use the same connection */
	dph_ping(d[0], 1, d[1], 2, 2);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* Both members send to each other at once with no connection yet, at many offsets: one
 * connection (two sockets in this process beside the listeners) carries every frame. */
Test(dp_either, crossing_attempts_end_in_one_connection)
{
	uint32_t ids[2] = { 3, 7 };
	uint64_t incs[2] = { 1, 1 };

	for (int round = 0; round < 40; round++) {
		int before = fdc_sockets();
		struct dp *d[2] = { dph_mk_cfg(3, 1, 10000, 1), dph_mk_cfg(7, 1, 10000, 1) };
		uint8_t s[2][512], r[2][512];
		struct dph_job j[2] = { { .dp = d[0] }, { .dp = d[1] } };

		dph_mesh(d, ids, incs, 2);
		for (int i = 0; i < 2; i++) {
			dph_fill(s[i], sizeof(s[i]), (uint32_t)(round * 2 + i));
			j[i].x[0] = dph_xf(ids[1 - i], DP_SEND, dph_tag(1, 0), s[i], sizeof(s[i]));
			j[i].x[1] = dph_xf(ids[1 - i], DP_RECV, dph_tag(1, 0), r[i], sizeof(r[i]));
			j[i].n = 2;
		}
		/* the higher member starts first, at the same time, or later */
		dph_job_start(&j[round % 2 ? 1 : 0]);
		usleep((useconds_t)((round * 137) % 700));
		dph_job_start(&j[round % 2 ? 0 : 1]);
		for (int i = 0; i < 2; i++) {
			dph_job_join(&j[i]);
			cr_assert_eq(j[i].rc, 0, "round %d member %u: %d", round, ids[i], j[i].rc);
			cr_assert_arr_eq(r[i], s[1 - i], sizeof(s[i]));
		}
		for (uint64_t k = 2; k < 5; k++)
			dph_ping(d[0], 3, d[1], 7, k);
		cr_assert_eq(fdc_sockets() - before, 4,
			     "round %d: %d sockets beside the two "
			     "listeners (one connection has two)",
			     round, fdc_sockets() - before - 2);
		cr_assert(dp_linked(d[0], 7) && dp_linked(d[1], 3));
		dp_destroy(d[0]);
		dp_destroy(d[1]);
	}
}

/* The lower member's connection broke on the higher member's side only (closed there): the
 * higher one, with a frame to send, connects; the lower one refuses that while it still holds
 * its own, sees the close when it reads (its receive's call fails once with -EPIPE), and one
 * connection is made again (the higher member's attempt, or the lower one's for its receive,
 * whichever goes first). Nothing is reported unreachable. */
Test(dp_either, a_connection_broken_on_one_side_is_made_again)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk_cfg(1, 1, 10000, 1), dph_mk_cfg(2, 1, 10000, 1) };
	uint8_t s[4096], r[4096];
	struct dph_job h = { .dp = d[1] };
	int64_t end;
	uint32_t bad = UINT32_MAX;
	int rc = 0, epipe = 0;

	dph_mesh(d, ids, incs, 2);
	/* member 1 connects: its attempt has a socket before member 2 wants anything (member 2's
	 * receive then makes an attempt too, which member 1 refuses) */
	struct dp_xfer x = dph_xf(2, DP_SEND, dph_tag(1, 0), s, 64);
	struct dph_job rj = { .dp = d[1] };

	end = dph_now_ms() + DPH_BOUND_MS;
	while (!dp_linked(d[0], 2) && dph_now_ms() < end)
		cr_assert_geq(dp_progress(d[0], &x, 1, 0, &bad), 0);
	cr_assert(dp_linked(d[0], 2));
	rj.x[0] = dph_xf(1, DP_RECV, dph_tag(1, 0), r, 64);
	rj.n = 1;
	dph_job_start(&rj);
	cr_assert_eq(dph_run(d[0], &x, 1, &bad), 0);
	dph_job_join(&rj);
	cr_assert_eq(rj.rc, 0);
	cr_assert_eq(dp_peer_find(d[0], 2)->conn->mine, 1);
	cr_assert_eq(dp_peer_find(d[1], 1)->conn->mine, 0);

	/* member 2 loses its side */
	dp_conn_broken(d[1], dp_peer_find(d[1], 1), "closed by the test");
	cr_assert_eq(dp_linked(d[1], 1), 0);
	dph_fill(s, sizeof(s), 9);
	h.x[0] = dph_xf(1, DP_SEND, dph_tag(2, 0), s, sizeof(s));
	h.n = 1;
	dph_job_start(&h);
	/* member 1 waits for the frame with a peek beside its receive, as the point-to-point
	 * layer does: the old connection's end shows (-EPIPE, once), then member 2's new one
	 * is taken */
	uint8_t pk[16];
	struct dp_xfer y[2] = { dph_xf(2, DP_RECV, dph_tag(2, 0), r, sizeof(r)),
				dph_xf(2, DP_PEEK, dph_tag(0, 0), pk, sizeof(pk)) };

	end = dph_now_ms() + DPH_BOUND_MS;
	while (!y[0].done && dph_now_ms() < end) {
		rc = dp_progress(d[0], y, 2, 10, &bad);
		if (rc == -EPIPE) {
			epipe++;
			cr_assert_eq(bad, 2);
			y[1] = dph_xf(2, DP_PEEK, dph_tag(0, 0), pk, sizeof(pk)); /* afresh */
			continue;
		}
		cr_assert_geq(rc, 0, "%d", rc);
		cr_assert_eq(y[1].done, 0, "the peek showed a frame no receive took");
	}
	cr_assert(y[0].done, "no frame within %d ms (%d)", DPH_BOUND_MS, rc);
	cr_assert_leq(epipe, 1);
	dph_job_join(&h);
	cr_assert_eq(h.rc, 0, "member 2's send: %d", h.rc);
	cr_assert_arr_eq(r, s, sizeof(s));
	cr_assert(dp_linked(d[0], 2) && dp_linked(d[1], 1));
	dph_ping(d[0], 1, d[1], 2, 3);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}
