/* SPDX-License-Identifier: BSD-3-Clause */
/* The data plane's read-ahead (dp_io_recv()): a frame header's read takes up to DP_RBUF bytes
 * from the socket, so the frames behind a small one may sit in the connection's buffer, where
 * poll() cannot see them. Frames come out whole and in order across calls, from the buffer and
 * then the socket; a call that waits for one already read ahead does not sleep on it; a frame of
 * another shape read ahead from a member outside the call is still seen.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "../../collectives/dp_int.h"
#include "dp_harness.h"

/* Same suite as test_dp.c (declared there). */

/* Waits (bounded) until the kernel holds at least @bytes for @dp from peer @id. */
static void wait_inq(struct dp *dp, uint32_t id, int bytes)
{
	struct dp_peer_ent *pe = dp_peer_find(dp, id);
	int64_t end = dph_now_ms() + DPH_BOUND_MS;
	int n = 0;

	cr_assert(pe && pe->conn && pe->conn->fd >= 0);
	while ((ioctl(pe->conn->fd, FIONREAD, &n) != 0 || n < bytes) && dph_now_ms() < end)
		usleep(1000);
	cr_assert_geq(n, bytes, "only %d bytes arrived", n);
}

/* Whether @dp holds bytes of peer @id read ahead. */
static int buffered(struct dp *dp, uint32_t id)
{
	struct dp_peer_ent *pe = dp_peer_find(dp, id);

	return pe && dp_conn_buffered(pe->conn);
}

/* Member 1 sends three small frames and a large one in one call while member 2 reads nothing;
 * member 2 then takes them one call each. The first call's header read takes the next frames
 * with it; each later call completes from the buffer at once (the sender's dp sits idle, so no
 * new byte would wake a poll()), the large frame's head from the buffer and its rest from the
 * socket, intact. */
Test(dp, frames_read_ahead_come_out_whole_and_in_order)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	size_t big = 1u << 20;
	uint8_t small[3][40], got[3][40], *bs = malloc(big), *br = malloc(big);
	struct dph_job a = { .dp = d[0] };

	cr_assert(bs && br);
	dph_mesh(d, ids, incs, 2);
	dph_ping(d[0], 1, d[1], 2, 100); /* connected: the sends below need no answer */
	for (int i = 0; i < 3; i++) {
		dph_fill(small[i], sizeof(small[i]), (uint32_t)i + 1);
		a.x[i] = dph_xf(2, DP_SEND, dph_tag(101 + (uint64_t)i, 0), small[i],
				sizeof(small[i]));
	}
	dph_fill(bs, big, 9);
	a.x[3] = dph_xf(2, DP_SEND, dph_tag(104, 0), bs, big);
	a.n = 4;
	dph_job_start(&a);
	wait_inq(d[1], 1, 3 * (DP_FRAME_HDR + (int)sizeof(small[0])));
	for (int i = 0; i < 3; i++) {
		struct dp_xfer x =
			dph_xf(1, DP_RECV, dph_tag(101 + (uint64_t)i, 0), got[i], sizeof(got[i]));
		int64_t t0 = dph_now_ms();

		cr_assert_eq(dph_run(d[1], &x, 1, NULL), 0, "frame %d", i);
		cr_expect_arr_eq(got[i], small[i], sizeof(small[i]), "frame %d", i);
		cr_expect_lt(dph_now_ms() - t0, DPH_BOUND_MS / 2, "frame %d", i);
		if (i == 0) {
			/* 3 x (48 + 40) bytes were in the socket before the first read: the next
			 * frames came with the first header */
			cr_expect(buffered(d[1], 1), "nothing was read ahead");
		}
	}
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(104, 0), br, big);

	cr_assert_eq(dph_run(d[1], &x, 1, NULL), 0);
	cr_expect(dph_check_fill(br, big, 9), "the large frame is not intact");
	dph_job_join(&a);
	cr_expect_eq(a.rc, 0);
	cr_expect(!buffered(d[1], 1));
	dp_destroy(d[0]);
	dp_destroy(d[1]);
	free(bs);
	free(br);
}

/* Member 1 sends a frame member 2 receives, and right behind it a frame of another shape for
 * the next op, read ahead with the first. Member 2's next call waits only for member 3 (silent):
 * member 1 is outside it and its socket has nothing new, yet the call sees the frame in the
 * buffer and ends at once with -EBADE naming member 1. */
Test(dp, shape_mismatch_read_ahead_from_a_member_outside_the_call)
{
	uint32_t ids[3] = { 1, 2, 3 }, bp = 0, peer = 0;
	uint64_t incs[3] = { 1, 1, 1 }, seq = 0, theirs = 0, ours = 0;
	struct dp *d[3] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0), dph_mk(3, 1, 0) };
	uint8_t s[2][32] = { { 1 }, { 2 } }, r[32], r3[32];
	struct dph_job a = { .dp = d[0] };
	int64_t t0;

	dph_mesh(d, ids, incs, 3);
	dph_ping(d[0], 1, d[1], 2, 100);
	dph_ping(d[2], 3, d[1], 2, 100);
	a.x[0] = dph_xf(2, DP_SEND, dph_tag(1, 0), s[0], sizeof(s[0]));
	a.x[0].shape = 0x5;
	a.x[1] = dph_xf(2, DP_SEND, dph_tag(2, 0), s[1], sizeof(s[1]));
	a.x[1].shape = 0x5;
	a.n = 2;
	dph_job_start(&a);
	dph_job_join(&a);
	cr_assert_eq(a.rc, 0, "both frames went out");
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(1, 0), r, sizeof(r));

	x.shape = 0x5;
	cr_assert_eq(dph_run(d[1], &x, 1, NULL), 0);
	cr_expect_arr_eq(r, s[0], sizeof(r));
	cr_assert(buffered(d[1], 1), "the second frame was not read ahead");
	x = dph_xf(3, DP_RECV, dph_tag(2, 0), r3, sizeof(r3));
	x.shape = 0x6;
	t0 = dph_now_ms();
	cr_expect_eq(dph_run(d[1], &x, 1, &bp), -EBADE);
	cr_expect_lt(dph_now_ms() - t0, 1000, "the mismatch took %lld ms",
		     (long long)(dph_now_ms() - t0));
	cr_expect_eq(bp, 1);
	cr_assert_eq(dp_mismatch(d[1], &seq, &peer, &theirs, &ours), 0);
	cr_expect_eq(peer, 1);
	cr_expect_eq(seq, 2);
	cr_expect_eq(theirs, 0x5);
	for (int i = 0; i < 3; i++)
		dp_destroy(d[i]);
}
