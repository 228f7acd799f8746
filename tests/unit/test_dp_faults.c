/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the data plane under faults: a peer's dp destroyed mid-transfer, dp_abort from
 * another thread, strangers and refused HELLOs, members not yet in the epoch, peers not yet
 * listening or never, a HELLO answered late or never, new incarnations.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <stdlib.h>
#include <string.h>

#include "../../collectives/dp_int.h"
#include "dp_harness.h"

/* Same suite as test_dp.c (declared there); each test states its own bound too. */

/* The peer's dp goes away in the middle of a large transfer: -EPIPE naming it, both when
 * receiving from it and when sending to it. */
Test(dp, peer_destroyed_mid_transfer, .timeout = 60)
{
	uint32_t ids[3] = { 1, 2, 3 };
	uint64_t incs[3] = { 1, 1, 1 };
	struct dp *d[3] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0), dph_mk(3, 1, 0) };
	uint8_t *b1 = calloc(1, DPH_BIG), *b2 = calloc(1, DPH_BIG), *b3 = calloc(1, DPH_BIG);
	struct dph_job j1 = { .dp = d[0] };
	uint32_t bp;

	dph_mesh(d, ids, incs, 3);
	/* member 1 receives 64 MiB from 2 and sends 64 MiB to 3; 2 and 3 stop half way */
	j1.x[0] = dph_xf(2, DP_RECV, dph_tag(1, 0), b1, DPH_BIG);
	j1.n = 1;
	dph_job_start(&j1);
	struct dp_xfer x = dph_xf(1, DP_SEND, dph_tag(1, 0), b2, DPH_BIG);
	int64_t deadline = dph_now_ms() + DPH_BOUND_MS;

	while (x.off == 0 && dph_now_ms() < deadline)
		cr_assert_geq(dp_progress(d[1], &x, 1, 10, &bp), 0);
	cr_assert(x.off > 0 && !x.done);
	dp_destroy(d[1]);
	dph_job_join(&j1);
	cr_expect_eq(j1.rc, -EPIPE, "%d", j1.rc);
	cr_expect_eq(j1.bad, 2);

	j1 = (struct dph_job){ .dp = d[0] };
	j1.x[0] = dph_xf(3, DP_SEND, dph_tag(2, 0), b1, DPH_BIG);
	j1.n = 1;
	dph_job_start(&j1);
	x = dph_xf(1, DP_RECV, dph_tag(2, 0), b3, DPH_BIG);
	while (x.off == 0 && dph_now_ms() < deadline)
		cr_assert_geq(dp_progress(d[2], &x, 1, 0, &bp), 0);
	cr_assert(x.off > 0 && !x.done);
	dp_destroy(d[2]);
	dph_job_join(&j1);
	cr_expect_eq(j1.rc, -EPIPE, "%d", j1.rc);
	cr_expect_eq(j1.bad, 3);
	dp_destroy(d[0]);
	free(b1);
	free(b2);
	free(b3);
}

struct abort_job {
	struct dp *dp;
	atomic_int tid;
	int rc;
	int64_t done_us;
};

static int64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static void *abort_main(void *arg)
{
	struct abort_job *j = arg;
	uint8_t buf[8];
	struct dp_xfer x = dph_xf(2, DP_RECV, dph_tag(1, 0), buf, sizeof(buf));
	uint32_t bp;

	atomic_store(&j->tid, (int)syscall(SYS_gettid));
	j->rc = dp_progress(j->dp, &x, 1, 20000, &bp);
	j->done_us = now_us();
	return NULL;
}

/* Whether thread @tid of this process is asleep (state S in its stat). */
static int thread_sleeping(int tid)
{
	char path[64], buf[256];
	FILE *f;
	char *p;

	snprintf(path, sizeof(path), "/proc/self/task/%d/stat", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	p = fgets(buf, sizeof(buf), f);
	fclose(f);
	p = p ? strrchr(buf, ')') : NULL;
	return p && p[1] == ' ' && p[2] == 'S';
}

Test(dp, abort_from_another_thread, .timeout = 60)
{
	uint32_t ids[2] = { 1, 2 };
	uint64_t incs[2] = { 1, 1 };
	struct dp *d[2] = { dph_mk(1, 1, 0), dph_mk(2, 1, 0) };
	struct abort_job j = { .dp = d[0] };
	pthread_t th;
	int64_t deadline = dph_now_ms() + 5000, t0;

	dph_mesh(d, ids, incs, 2);
	cr_assert_eq(pthread_create(&th, NULL, abort_main, &j), 0);
	/* wait (bounded) until it sleeps in poll(): member 2 never sends */
	while (dph_now_ms() < deadline && !(atomic_load(&j.tid) && thread_sleeping(j.tid)))
		sched_yield();
	t0 = now_us();
	dp_abort(d[0]);
	pthread_join(th, NULL);
	cr_expect_eq(j.rc, -ECANCELED);
	cr_expect_lt(j.done_us - t0, 10000, "returned %lld us after the abort",
		     (long long)(j.done_us - t0));
	uint32_t bp;

	cr_expect_eq(dp_progress(d[0], NULL, 0, 1000, &bp), -ECANCELED, "sticky");
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* Strangers, garbage, other groups and versions, stale incarnations and HELLOs addressed to
 * someone else are refused, one warning each, while the real peer works. */
Test(dp, strangers_refused_peer_unharmed, .timeout = 60)
{
	uint32_t ids[2] = { 1, 5 };
	uint64_t incs[2] = { 4, 6 };
	struct dp *d[2] = { dph_mk(1, 4, 0), dph_mk(5, 6, 0) };
	uint8_t h[DP_HELLO_SIZE];
	const char *junk = "GET / HTTP/1.0\r\n\r\n this is not a HELLO at all...";
	int fds[7], nf = 0;

	ftcc_log_set_sink(dph_count_sink);
	dph_mesh(d, ids, incs, 2);
	fds[nf++] = dph_raw_connect(d[1], junk, strlen(junk));
	dph_raw_hello(h, DP_HELLO_VERSION, DPH_GROUP + 1, 1, 4, 5, 6);
	fds[nf++] = dph_raw_connect(d[1], h, sizeof(h)); /* another group */
	dph_raw_hello(h, DP_HELLO_VERSION + 1, DPH_GROUP, 1, 4, 5, 6);
	fds[nf++] = dph_raw_connect(d[1], h, sizeof(h)); /* foreign version */
	dph_raw_hello(h, DP_HELLO_VERSION, DPH_GROUP, 1, 3, 5, 6);
	fds[nf++] = dph_raw_connect(d[1], h, sizeof(h)); /* stale incarnation of member 1 */
	dph_raw_hello(h, DP_HELLO_VERSION, DPH_GROUP, 1, 4, 5, 5);
	fds[nf++] = dph_raw_connect(d[1], h, sizeof(h)); /* to an old incarnation of member 5 */
	dph_raw_hello(h, DP_HELLO_VERSION, DPH_GROUP, 7, 1, 5, 6);
	fds[nf++] = dph_raw_connect(d[1], h, sizeof(h)); /* higher id must not connect */
	fds[nf++] = dph_raw_connect(d[1], h, 10);	 /* a truncated HELLO, then close */
	shutdown(fds[nf - 1], SHUT_WR);

	for (int i = 0; i < nf; i++)
		cr_expect_eq(dph_raw_wait(d[1], fds[i], NULL, 0, 3000), 1, "stranger %d closed", i);
	cr_expect_eq(atomic_load(&dph_warn_lines), nf, "one warning each (last: %s)",
		     dph_last_warn);

	uint8_t s[2][1000], r[2][1000];
	struct dph_job j[2] = { { .dp = d[0] }, { .dp = d[1] } };

	for (int i = 0; i < 2; i++) {
		dph_fill(s[i], sizeof(s[i]), (uint32_t)i);
		j[i].x[0] = dph_xf(ids[1 - i], DP_SEND, dph_tag(1, 0), s[i], sizeof(s[i]));
		j[i].x[1] = dph_xf(ids[1 - i], DP_RECV, dph_tag(1, 0), r[i], sizeof(r[i]));
		j[i].n = 2;
		dph_job_start(&j[i]);
	}
	for (int i = 0; i < 2; i++) {
		dph_job_join(&j[i]);
		cr_expect_eq(j[i].rc, 0);
		cr_expect_arr_eq(r[i], s[1 - i], sizeof(s[i]));
	}
	for (int i = 0; i < nf; i++)
		close(fds[i]);
	dp_destroy(d[0]);
	dp_destroy(d[1]);
}

/* A valid HELLO from a member the epoch does not name yet is held, then adopted when
 * dp_set_peers() names it: the reply comes, and frames flow (written by hand here). */
Test(dp, unknown_member_held_then_adopted, .timeout = 60)
{
	struct dp *d = dph_mk(5, 6, 0), *other = dph_mk(3, 9, 0);
	uint8_t h[DP_HELLO_SIZE], reply[DP_HELLO_SIZE], expect[DP_HELLO_SIZE];
	uint8_t frame[DP_FRAME_HDR + 16], got[16];
	struct dp_peer p3 = dph_peer_of(other, 3, 9);
	uint32_t bp;

	dph_raw_hello(h, DP_HELLO_VERSION, DPH_GROUP, 3, 9, 5, 6);
	int fd = dph_raw_connect(d, h, sizeof(h));

	cr_expect_eq(dph_raw_wait(d, fd, reply, sizeof(reply), 300), 0, "held: no reply, no close");
	cr_assert_eq(dp_set_peers(d, &p3, 1), 0);
	cr_assert_eq(dph_raw_wait(d, fd, reply, sizeof(reply), 3000), 2, "reply after adoption");
	dph_raw_hello(expect, DP_HELLO_VERSION, DPH_GROUP, 5, 6, 3, 9);
	cr_expect_arr_eq(reply, expect, sizeof(expect));

	dph_raw_frame_hdr(frame, dph_tag(4, 2), 16);
	memset(frame + DP_FRAME_HDR, 0xab, 16);
	cr_assert_eq(send(fd, frame, sizeof(frame), MSG_NOSIGNAL), (ssize_t)sizeof(frame));
	struct dp_xfer x = dph_xf(3, DP_RECV, dph_tag(4, 2), got, sizeof(got));

	cr_assert_eq(dph_run(d, &x, 1, &bp), 0);
	cr_expect_arr_eq(got, frame + DP_FRAME_HDR, 16);

	/* garbage where a frame header belongs: -EPROTO naming member 3 */
	memset(frame, 0x5a, DP_FRAME_HDR);
	cr_assert_eq(send(fd, frame, DP_FRAME_HDR, MSG_NOSIGNAL), DP_FRAME_HDR);
	x = dph_xf(3, DP_RECV, dph_tag(4, 3), got, sizeof(got));
	bp = 0;
	cr_expect_eq(dph_run(d, &x, 1, &bp), -EPROTO);
	cr_expect_eq(bp, 3);
	close(fd);
	dp_destroy(other);
	dp_destroy(d);
}

/* The peer is not listening yet when the connect starts: refused, retried, then served by a
 * listener that appears on that port later (a hand-written acceptor). */
Test(dp, connect_retried_until_peer_listens, .timeout = 60)
{
	struct dp *d = dph_mk(1, 1, 5000);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct dp_peer p = { .id = 2, .incarnation = 3 };
	uint8_t h[DP_HELLO_SIZE], expect[DP_HELLO_SIZE], payload[8] = "abcdefg", got[8];
	struct dph_job j = { .dp = d };

	ftcc_log_set_sink(dph_count_sink);
	ftcc_log_set_level(FTCC_LOG_TRACE);
	/* reserve a port, then stop listening on it */
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	close(lfd);
	snprintf(p.addr, sizeof(p.addr), "127.0.0.1:%d", ntohs(sa.sin_port));
	cr_assert_eq(dp_set_peers(d, &p, 1), 0);
	j.x[0] = dph_xf(2, DP_RECV, dph_tag(1, 0), got, sizeof(got));
	j.n = 1;
	dph_job_start(&j);
	/* wait (bounded) until it was refused twice */
	int64_t deadline = dph_now_ms() + 5000;

	while (atomic_load(&dph_retry_lines) < 2 && dph_now_ms() < deadline)
		sched_yield();
	cr_assert_geq(atomic_load(&dph_retry_lines), 2, "refused and retried");
	lfd = socket(AF_INET, SOCK_STREAM, 0);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(lfd, 4), 0);
	struct pollfd pfd = { .fd = lfd, .events = POLLIN };

	cr_assert_eq(poll(&pfd, 1, 3000), 1, "it retried");
	int fd = accept(lfd, NULL, NULL);

	cr_assert_geq(fd, 0);
	cr_assert_eq(recv(fd, h, sizeof(h), MSG_WAITALL), (ssize_t)sizeof(h));
	dph_raw_hello(expect, DP_HELLO_VERSION, DPH_GROUP, 1, 1, 2, 3);
	cr_expect_arr_eq(h, expect, sizeof(h));
	dph_raw_hello(h, DP_HELLO_VERSION, DPH_GROUP, 2, 3, 1, 1);
	uint8_t frame[DP_FRAME_HDR + 8];

	dph_raw_frame_hdr(frame, dph_tag(1, 0), 8);
	memcpy(frame + DP_FRAME_HDR, payload, 8);
	cr_assert_eq(send(fd, h, sizeof(h), 0), (ssize_t)sizeof(h));
	cr_assert_eq(send(fd, frame, sizeof(frame), 0), (ssize_t)sizeof(frame));
	dph_job_join(&j);
	cr_expect_eq(j.rc, 0, "%d", j.rc);
	cr_expect_arr_eq(got, payload, 8);
	close(fd);
	close(lfd);
	dp_destroy(d);
}

/* Nobody ever listens: -EHOSTUNREACH naming the peer after half the failure timeout of refused
 * connects; the attempts go on, and a later call says so again at once. */
Test(dp, refused_connects_are_unreachable, .timeout = 60)
{
	struct dp *d = dph_mk(1, 1, 300);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	struct dp_peer p = { .id = 2, .incarnation = 3 };
	uint8_t got[8];
	uint32_t bp = 0;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	close(lfd);
	snprintf(p.addr, sizeof(p.addr), "127.0.0.1:%d", ntohs(sa.sin_port));
	cr_assert_eq(dp_set_peers(d, &p, 1), 0);
	struct dp_xfer x = dph_xf(2, DP_RECV, dph_tag(1, 0), got, sizeof(got));
	int64_t t0 = dph_now_ms();

	cr_expect_eq(dph_run(d, &x, 1, &bp), -EHOSTUNREACH);
	cr_expect_eq(bp, 2);
	cr_expect_geq(dph_now_ms() - t0, 140);
	cr_expect_lt(dph_now_ms() - t0, 3000);
	bp = 0;
	t0 = dph_now_ms();
	cr_expect_eq(dph_run(d, &x, 1, &bp), -EHOSTUNREACH, "still down");
	cr_expect_eq(bp, 2);
	cr_expect_lt(dph_now_ms() - t0, 100);
	/* Nobody wanted it for longer than a NOP interval: that time does not count, and the
	 * next call waits the whole bound again before it says so. */
	usleep(400 * 1000);
	bp = 0;
	t0 = dph_now_ms();
	cr_expect_eq(dph_run(d, &x, 1, &bp), -EHOSTUNREACH, "down after a pause");
	cr_expect_eq(bp, 2);
	cr_expect_geq(dph_now_ms() - t0, 140, "the idle time counted as unreachable");
	dp_destroy(d);
}

/* A listener the kernel answers for (the TCP connection comes up) but whose process does not
 * answer the HELLO: a starved or stalled process, which the membership's failure timeout judges.
 * The attempt waits twice the failure timeout for the answer (it used to give up after half of
 * it and report the peer unreachable): an answer after 400 ms (failure timeout 300 ms) is taken,
 * and one that never comes makes the peer unreachable after 600 ms. */
Test(dp, slow_hello_answer_is_not_unreachable, .timeout = 60)
{
	struct dp *d = dph_mk(1, 1, 300);
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int one = 1, lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	struct dp_peer p = { .id = 2, .incarnation = 3 };
	uint8_t h[DP_HELLO_SIZE], payload[8] = "abcdefg", got[8], frame[DP_FRAME_HDR + 8];
	struct dph_job j = { .dp = d };
	struct pollfd pfd = { .events = POLLIN };
	uint32_t bp = 0;
	int64_t t0;

	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
	cr_assert_eq(listen(lfd, 4), 0);
	snprintf(p.addr, sizeof(p.addr), "127.0.0.1:%d", ntohs(sa.sin_port));
	cr_assert_eq(dp_set_peers(d, &p, 1), 0);
	j.x[0] = dph_xf(2, DP_RECV, dph_tag(1, 0), got, sizeof(got));
	j.n = 1;
	dph_job_start(&j);
	pfd.fd = lfd;
	cr_assert_eq(poll(&pfd, 1, 3000), 1, "it connected");
	fd = accept(lfd, NULL, NULL);
	cr_assert_geq(fd, 0);
	cr_assert_eq(recv(fd, h, sizeof(h), MSG_WAITALL), (ssize_t)sizeof(h));
	usleep(400 * 1000);
	dph_raw_hello(h, DP_HELLO_VERSION, DPH_GROUP, 2, 3, 1, 1);
	dph_raw_frame_hdr(frame, dph_tag(1, 0), 8);
	memcpy(frame + DP_FRAME_HDR, payload, 8);
	/* (MSG_NOSIGNAL: a connector that gave up has closed its end) */
	cr_expect_eq(send(fd, h, sizeof(h), MSG_NOSIGNAL), (ssize_t)sizeof(h));
	cr_expect_eq(send(fd, frame, sizeof(frame), MSG_NOSIGNAL), (ssize_t)sizeof(frame));
	dph_job_join(&j);
	cr_expect_eq(j.rc, 0, "the late answer was not taken: %d", j.rc);
	cr_expect_arr_eq(got, payload, 8);
	close(fd);
	dp_destroy(d);

	/* the same listener never answers (the kernel still takes the connection) */
	d = dph_mk(1, 1, 300);
	cr_assert_eq(dp_set_peers(d, &p, 1), 0);
	struct dp_xfer x = dph_xf(2, DP_RECV, dph_tag(1, 0), got, sizeof(got));

	t0 = dph_now_ms();
	cr_expect_eq(dph_run(d, &x, 1, &bp), -EHOSTUNREACH);
	cr_expect_eq(bp, 2);
	cr_expect_geq(dph_now_ms() - t0, 590, "unreachable before twice the failure timeout");
	cr_expect_lt(dph_now_ms() - t0, 3000);
	dp_destroy(d);
	close(lfd);
}

/* A member restarts with a new incarnation (both directions of the connection rule): the
 * survivors' dp_set_peers() closes the old connection, and the new one works. */
Test(dp, reconnect_after_new_incarnation, .timeout = 60)
{
	struct dp *a = dph_mk(2, 1, 0), *lo = dph_mk(1, 1, 0), *hi = dph_mk(3, 1, 0);
	struct dp_peer pa = dph_peer_of(a, 2, 1), pl = dph_peer_of(lo, 1, 1),
		       ph = dph_peer_of(hi, 3, 1);
	struct dp_peer all[3] = { pa, pl, ph };

	cr_assert_eq(dp_set_peers(a, all, 3), 0);
	cr_assert_eq(dp_set_peers(lo, all, 3), 0);
	cr_assert_eq(dp_set_peers(hi, all, 3), 0);
	dph_ping(a, 2, lo, 1, 1);
	dph_ping(a, 2, hi, 3, 1);

	/* both restart with incarnation 2 */
	dp_destroy(lo);
	dp_destroy(hi);
	lo = dph_mk(1, 2, 0);
	hi = dph_mk(3, 2, 0);
	all[1] = dph_peer_of(lo, 1, 2);
	all[2] = dph_peer_of(hi, 3, 2);
	cr_assert_eq(dp_set_peers(lo, all, 3), 0);
	cr_assert_eq(dp_set_peers(hi, all, 3), 0);

	/* the new member 1 connects before member 2 knows it: held, then adopted */
	struct dph_job j = { .dp = lo };
	uint8_t buf[16] = "hello again", got[16];

	j.x[0] = dph_xf(2, DP_SEND, dph_tag(2, 0), buf, sizeof(buf));
	j.n = 1;
	dph_job_start(&j);
	uint32_t bp;

	/* drive member 2 (no transfers) until the new member 1's HELLO is held */
	int64_t deadline = dph_now_ms() + 3000;

	while (dph_now_ms() < deadline) {
		cr_assert_eq(dp_progress(a, NULL, 0, 0, &bp), 0);
		if (a->npending == 1 && a->pending[0]->state == DPC_UNKNOWN)
			break;
		sched_yield();
	}
	cr_assert_eq(a->npending, 1, "held");
	cr_assert_eq(dp_set_peers(a, all, 3), 0);
	struct dp_xfer x = dph_xf(1, DP_RECV, dph_tag(2, 0), got, sizeof(got));

	cr_assert_eq(dph_run(a, &x, 1, &bp), 0);
	cr_expect_arr_eq(got, buf, sizeof(buf));
	dph_job_join(&j);
	cr_expect_eq(j.rc, 0);
	dph_ping(a, 2, lo, 1, 3);
	dph_ping(a, 2, hi, 3, 3);
	dp_destroy(a);
	dp_destroy(lo);
	dp_destroy(hi);
}

/* More members on this host than cores: the spin before poll() yields the core. Peers at
 * loopback addresses (any of 127/8) count as this host, others do not. */
Test(dp, spin_yields_when_members_outnumber_cores, .timeout = 10)
{
	struct dp *a = dph_mk(1, 1, 0);
	cpu_set_t cores;
	struct dp_peer p[CPU_SETSIZE + 1];
	uint32_t k;

	CPU_ZERO(&cores);
	cr_assert_eq(sched_getaffinity(0, sizeof(cores), &cores), 0);
	k = (uint32_t)CPU_COUNT(&cores);
	for (uint32_t i = 0; i < k; i++) {
		p[i] = (struct dp_peer){ .id = 10 + i, .incarnation = 1 };
		snprintf(p[i].addr, sizeof(p[i].addr), "127.0.%u.%u:%u", i / 250, 2 + i % 250,
			 1000 + i);
	}
	cr_assert_eq(dp_set_peers(a, p, k - 1), 0);
	cr_expect_eq(a->spin_yield, 0, "%u members on %u cores", k, k);
	cr_assert_eq(dp_set_peers(a, p, k), 0);
	cr_expect_eq(a->spin_yield, 1, "%u members on %u cores", k + 1, k);
	for (uint32_t i = 0; i < k; i++)
		snprintf(p[i].addr, sizeof(p[i].addr), "192.0.2.%u:%u", 1 + i % 250, 1000 + i);
	cr_assert_eq(dp_set_peers(a, p, k), 0);
	cr_expect_eq(a->spin_yield, 0, "peers elsewhere");
	dp_destroy(a);
}
