/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messages (ftcc_isend, ftcc_irecv, ftcc_cancel) across processes: every pair of
 * 2 to 5 members, sizes from 0 bytes to over a MiB, named and any source, self included, mixed
 * with allreduce; the order of one sender's messages; a receive cancelled before its message
 * came, and one cancelled while its data moved (its buffer unmapped at once: a late byte would
 * kill the receiver); cancels racing the data's arrival; a withdrawn send, and a short one too
 * late to withdraw; a message longer than a receive; connections made only between members
 * that exchange messages, one per pair even when both send first. Faults:
 * test_mproc_p2p_faults.c.
 *
 * Each member runs a scenario in its own process (tests/lib/p2p_group.h); the parent checks
 * across members that every send that ended with 0 was received exactly once, with its tag,
 * length and content. No root needed. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdlib.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../collectives/p2p.h"
#include "chaos_proc.h"
#include "fd_count.h"
#include "p2p_group.h"

TestSuite(ft_mproc_p2p, .fini = pg_teardown, .timeout = 90);

/* ---- every pair, many sizes ---------------------------------------------------------------- */

static const size_t sizes[] = { 0, 1, 3000, 65536 + 5, (1u << 20) + 3 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void sc_pairs(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	int n = S_->n;
	ftcc_request_t *rq[PG_NMAX * NSIZES], *sq[PG_NMAX * NSIZES];
	uint8_t *rb[PG_NMAX * NSIZES], *sb[PG_NMAX * NSIZES];
	float x = 1.0f + (float)me;
	struct ftcc_record rec;
	int rc;

	/* receives first for odd sizes, sends first for even ones: both orders meet */
	for (int pass = 0; pass < 2; pass++) {
		for (int s = 0; s < n; s++) {
			for (size_t k = 0; k < NSIZES; k++) {
				int i = s * (int)NSIZES + (int)k;
				uint64_t rtag = (uint64_t)s * 16 + k, stag = (uint64_t)me * 16 + k;

				if ((int)(k % 2) == pass) {
					rb[i] = malloc(sizes[k] + 1);
					rc = ftcc_irecv(c, rb[i], sizes[k],
							k % 3 ? (uint32_t)s : FTCC_ANY_SOURCE, rtag,
							&rq[i]);
					PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
				} else {
					sb[i] = malloc(sizes[k] + 1);
					pg_fill(sb[i], sizes[k], (uint32_t)me, stag);
					rc = ftcc_isend(c, sb[i], sizes[k], (uint32_t)s, stag,
							&sq[i]);
					PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
				}
			}
		}
		if (pass == 0) {
			rc = ftcc_allreduce(c, &x, &x, 1, FTCC_FLOAT32, FTCC_SUM, &rec);
			PG_FAIL_IF(rc || rec.ncontrib != (uint32_t)n, "allreduce: %s",
				   ftcc_strerror(rc));
		}
	}
	for (int s = 0; s < n; s++) {
		for (size_t k = 0; k < NSIZES; k++) {
			int i = s * (int)NSIZES + (int)k;
			struct ftcc_p2p_status st;
			uint64_t rtag = (uint64_t)s * 16 + k, stag = (uint64_t)me * 16 + k;
			long bad;

			rc = ftcc_wait_p2p(sq[i], 30000, &st);
			pg_note(pg->m[me].tx, &pg->m[me].ntx, (uint32_t)s, stag, sb[i], sizes[k],
				rc);
			PG_FAIL_IF(rc, "send to %d of %zu bytes: %s", s, sizes[k],
				   ftcc_strerror(rc));
			rc = ftcc_wait_p2p(rq[i], 30000, &st);
			pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, rb[i], st.bytes,
				rc);
			PG_FAIL_IF(rc, "receive from %d of %zu bytes: %s", s, sizes[k],
				   ftcc_strerror(rc));
			PG_FAIL_IF(st.source != (uint32_t)s || st.tag != rtag ||
					   st.bytes != sizes[k],
				   "receive %d/%zu: status %u/%llu/%zu", s, k, st.source,
				   (unsigned long long)st.tag, st.bytes);
			bad = pg_check(rb[i], sizes[k], (uint32_t)s, rtag);
			PG_FAIL_IF(bad >= 0, "message from %d of %zu bytes differs at %ld", s,
				   sizes[k], bad);
			free(rb[i]);
			free(sb[i]);
		}
	}
	rc = ftcc_allreduce(c, &x, &x, 1, FTCC_FLOAT32, FTCC_SUM, &rec);
	PG_FAIL_IF(rc || rec.ncontrib != (uint32_t)n, "allreduce after: %s", ftcc_strerror(rc));
}

Test(ft_mproc_p2p, every_pair_many_sizes)
{
	for (int n = 2; n <= PG_NMAX; n += 3) {
		pg_run("pairs", n, sc_pairs, 60000, 0);
		pg_exactly_once(n, (1u << n) - 1);
		cr_expect_eq(pg->m[0].nrx, n * (int)NSIZES);
		pg_teardown();
	}
}

/* ---- order, withdraw, too long -------------------------------------------------------------- */

#define NORDER 40
#define WD_BYTES 8192 /* longer than a message whose data goes with its announcement */

static void sc_order(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	static uint8_t b[NORDER][64];
	ftcc_request_t *q[NORDER];
	struct ftcc_p2p_status st;
	int rc;

	(void)S_;
	if (me == 0) {
		static uint8_t x[WD_BYTES], y[WD_BYTES], e[64];
		ftcc_request_t *w;

		for (int i = 0; i < NORDER; i++) {
			pg_fill(b[i], sizeof(b[i]), 0, (uint64_t)i);
			rc = ftcc_isend(c, b[i], sizeof(b[i]), 1, 9 + (uint64_t)(i % 2), &q[i]);
			PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		}
		for (int i = 0; i < NORDER; i++) {
			rc = ftcc_wait_p2p(q[i], 30000, &st);
			pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, 9 + (uint64_t)(i % 2), b[i], 64,
				rc);
			PG_FAIL_IF(rc, "send %d: %s", i, ftcc_strerror(rc));
		}
		/* short: its data left with its announcement, too late to withdraw */
		pg_fill(e, sizeof(e), 0, 11);
		rc = ftcc_isend(c, e, sizeof(e), 1, 11, &w);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		usleep(100000);
		rc = ftcc_cancel(w);
		atomic_store(&pg->flag[2], 1);
		PG_FAIL_IF(rc != FTCC_ERR_BUSY, "cancel of a short send that left: %s",
			   ftcc_strerror(rc));
		rc = ftcc_wait_p2p(w, 30000, NULL);
		pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, 11, e, sizeof(e), rc);
		PG_FAIL_IF(rc, "short send after its cancel: %s", ftcc_strerror(rc));
		/* withdrawn: never seen by member 1 */
		pg_fill(x, sizeof(x), 0, 4);
		rc = ftcc_isend(c, x, sizeof(x), 1, 4, &w);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		usleep(100000);
		rc = ftcc_cancel(w);
		PG_FAIL_IF(rc, "cancel of a send nobody took: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(w, 0, NULL);
		PG_FAIL_IF(rc != FTCC_ERR_CANCELED, "withdrawn send ended with %s",
			   ftcc_strerror(rc));
		atomic_store(&pg->flag[1], 1);
		pg_fill(y, sizeof(y), 0, 5);
		rc = ftcc_isend(c, y, sizeof(y), 1, 4, &w);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(w, 30000, NULL);
		pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, 4, y, sizeof(y), rc);
		PG_FAIL_IF(rc, "second send of tag 4: %s", ftcc_strerror(rc));
		/* too long for the first receive */
		static uint8_t big[1000];

		pg_fill(big, sizeof(big), 0, 8);
		rc = ftcc_isend(c, big, sizeof(big), 1, 8, &w);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		atomic_store(&pg->flag[0], 1);
		rc = ftcc_wait_p2p(w, 30000, NULL);
		pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, 8, big, sizeof(big), rc);
		PG_FAIL_IF(rc, "send of 1000 bytes: %s", ftcc_strerror(rc));
		return;
	}
	usleep(300000);			       /* the messages wait at this member, unexpected */
	for (int i = 0; i < NORDER / 2; i++) { /* tag 10 first: each tag in its own order */
		rc = ftcc_irecv(c, b[i], sizeof(b[i]), 0, 10, &q[i]);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	}
	for (int i = NORDER / 2; i < NORDER; i++) {
		rc = ftcc_irecv(c, b[i], sizeof(b[i]), FTCC_ANY_SOURCE, 9, &q[i]);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	}
	for (int i = 0; i < NORDER; i++) {
		uint64_t want = i < NORDER / 2 ? (uint64_t)(2 * i + 1) : (uint64_t)(2 * (i - 20));

		rc = ftcc_wait_p2p(q[i], 30000, &st);
		pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, b[i], 64, rc);
		PG_FAIL_IF(rc, "receive %d: %s", i, ftcc_strerror(rc));
		PG_FAIL_IF(pg_check(b[i], 64, 0, want) >= 0,
			   "receive %d (tag %llu) holds another "
			   "message than the %llu-th sent",
			   i, (unsigned long long)st.tag, (unsigned long long)want);
	}
	{
		static uint8_t x[WD_BYTES], small[500], big[1000];
		ftcc_request_t *r;

		pg_wait_flag(2, 1); /* taken only once its sender tried to cancel it */
		rc = ftcc_irecv(c, x, 64, 0, 11, &r);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, &st);
		pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, x, st.bytes, rc);
		PG_FAIL_IF(rc || pg_check(x, 64, 0, 11) >= 0, "tag 11: %s", ftcc_strerror(rc));
		pg_wait_flag(1, 1); /* its first message of tag 4 was withdrawn */
		rc = ftcc_irecv(c, x, sizeof(x), 0, 4, &r);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, &st);
		pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, x, st.bytes, rc);
		PG_FAIL_IF(rc || pg_check(x, WD_BYTES, 0, 5) >= 0,
			   "tag 4: %s, or the withdrawn message", ftcc_strerror(rc));
		rc = ftcc_irecv(c, x, sizeof(x), 0, 4, &r);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 300, &st);
		PG_FAIL_IF(rc != FTCC_ERR_TIMEOUT, "a third message of tag 4: %s",
			   ftcc_strerror(rc));
		PG_FAIL_IF(ftcc_cancel(r), "cancel");
		PG_FAIL_IF(ftcc_wait_p2p(r, 0, NULL) != FTCC_ERR_CANCELED, "cancelled receive");
		pg_wait_flag(0, 1);
		rc = ftcc_irecv(c, small, sizeof(small), 0, 8, &r);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, NULL);
		PG_FAIL_IF(rc != FTCC_ERR_INVALID, "a 1000-byte message into 500 bytes: %s",
			   ftcc_strerror(rc));
		rc = ftcc_irecv(c, big, sizeof(big), 0, 8, &r);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, &st);
		pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, big, st.bytes, rc);
		PG_FAIL_IF(rc || st.bytes != 1000 || pg_check(big, 1000, 0, 8) >= 0,
			   "the 1000-byte message after: %s", ftcc_strerror(rc));
	}
}

Test(ft_mproc_p2p, order_withdraw_too_long)
{
	pg_run("order", 2, sc_order, 60000, 0);
	pg_exactly_once(2, 3);
	cr_expect_eq(pg->m[1].nrx, NORDER + 3);
}

/* ---- cancel: before the message, and while its data moves ------------------------------------ */

#define CANCEL_BIG (64u << 20)

static void sc_cancel(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	struct ftcc_p2p_status st;
	ftcc_request_t *r;
	int rc;

	(void)S_;
	if (me == 0) {
		uint8_t *a = malloc(1 << 20), *big = malloc(CANCEL_BIG);

		pg_wait_flag(0, 1);
		pg_fill(a, 1 << 20, 0, 5);
		rc = ftcc_isend(c, a, 1 << 20, 1, 5, &r);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, NULL);
		pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, 5, a, 1 << 20, rc);
		PG_FAIL_IF(rc, "send of tag 5: %s", ftcc_strerror(rc));
		pg_fill(big, CANCEL_BIG, 0, 6);
		rc = ftcc_isend(c, big, CANCEL_BIG, 1, 6, &r);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 60000, NULL);
		pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, 6, big, CANCEL_BIG, rc);
		PG_FAIL_IF(rc, "send of 64 MiB: %s", ftcc_strerror(rc));
		free(a);
		free(big);
		return;
	}
	/* cancelled before its message is sent; the buffer is gone at once */
	uint8_t *gone =
		mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = malloc(CANCEL_BIG);

	PG_FAIL_IF(gone == MAP_FAILED || !b, "no memory");
	rc = ftcc_irecv(c, gone, 1 << 20, 0, 5, &r);
	PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	PG_FAIL_IF(ftcc_cancel(r), "cancel");
	munmap(gone, 1 << 20);
	rc = ftcc_wait_p2p(r, 0, NULL);
	PG_FAIL_IF(rc != FTCC_ERR_CANCELED, "cancelled receive ended with %s", ftcc_strerror(rc));
	atomic_store(&pg->flag[0], 1);
	usleep(200000); /* its message waits here, taken by no one */
	rc = ftcc_irecv(c, b, 1 << 20, 0, 5, &r);
	PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	rc = ftcc_wait_p2p(r, 30000, &st);
	pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, b, st.bytes, rc);
	PG_FAIL_IF(rc || pg_check(b, 1 << 20, 0, 5) >= 0, "tag 5 after the cancel: %s",
		   ftcc_strerror(rc));

	/* cancelled while its data moves: the sender is stopped half way, the receive cancelled,
	 * its buffer unmapped; then the message goes again, whole, to another receive */
	gone = mmap(NULL, CANCEL_BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	PG_FAIL_IF(gone == MAP_FAILED, "no memory");
	memset(gone, 0xaa, CANCEL_BIG);
	rc = ftcc_irecv(c, gone, CANCEL_BIG, 0, 6, &r);
	PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	{
		int64_t end = chaos_now_ns() + 30000000000ll;

		while (*(volatile uint8_t *)gone == 0xaa && chaos_now_ns() < end) {
		}
	}
	kill(pg->m[0].pid, SIGSTOP);
	pg->m[me].t_ns[0] = chaos_now_ns();
	rc = ftcc_wait_p2p(r, 0, NULL);
	PG_FAIL_IF(rc != FTCC_ERR_TIMEOUT, "the 64 MiB receive ended before the cancel: %s",
		   ftcc_strerror(rc));
	PG_FAIL_IF(ftcc_cancel(r), "cancel while data moves");
	munmap(gone, CANCEL_BIG);
	rc = ftcc_wait_p2p(r, 0, NULL);
	usleep(50000);
	kill(pg->m[0].pid, SIGCONT);
	PG_FAIL_IF(rc != FTCC_ERR_CANCELED, "receive cancelled mid-data ended with %s",
		   ftcc_strerror(rc));
	rc = ftcc_irecv(c, b, CANCEL_BIG, 0, 6, &r);
	PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	rc = ftcc_wait_p2p(r, 60000, &st);
	pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, b, st.bytes, rc);
	PG_FAIL_IF(rc || st.bytes != CANCEL_BIG, "64 MiB after the cancel: %s", ftcc_strerror(rc));
	PG_FAIL_IF(pg_check(b, CANCEL_BIG, 0, 6) >= 0, "64 MiB after the cancel: content differs");
	free(b);
}

Test(ft_mproc_p2p, cancel_before_and_during_data)
{
	pg_run("cancel", 2, sc_cancel, 80000, 0);
	pg_exactly_once(2, 3);
	cr_expect_eq(pg->m[1].nrx, 2);
}

/* ---- cancels racing the data's arrival --------------------------------------------------------- */

#define NRACE 120
#define RACE_BYTES (4u << 20)

static void sc_race(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	static uint8_t b[RACE_BYTES];
	ftcc_request_t *r;
	int rc, cancelled = 0;

	(void)S_;
	for (int i = 0; i < NRACE; i++) {
		if (me == 0) {
			pg_fill(b, RACE_BYTES, 0, (uint64_t)i);
			rc = ftcc_isend(c, b, RACE_BYTES, 1, (uint64_t)i, &r);
			PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
			rc = ftcc_wait_p2p(r, 30000, NULL);
			pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, (uint64_t)i, b, RACE_BYTES, rc);
			PG_FAIL_IF(rc, "send %d: %s", i, ftcc_strerror(rc));
			continue;
		}
		struct ftcc_p2p_status st;
		int crc;

		memset(b, 0, RACE_BYTES);
		rc = ftcc_irecv(c, b, RACE_BYTES, 0, (uint64_t)i, &r);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		/* at some point of the data's arrival: before, during (the progress thread writes
		 * the buffer, the cancel waits for it), or after (the request ended first) */
		usleep((useconds_t)((i * 97) % 3000));
		crc = ftcc_cancel(r);
		rc = ftcc_wait_p2p(r, 30000, &st);
		PG_FAIL_IF(crc, "cancel %d: %s", i, ftcc_strerror(crc));
		PG_FAIL_IF(rc && rc != FTCC_ERR_CANCELED, "receive %d: %s", i, ftcc_strerror(rc));
		if (rc == FTCC_ERR_CANCELED) { /* the message waits for the next receive */
			cancelled++;
			memset(b, 0, RACE_BYTES);
			rc = ftcc_irecv(c, b, RACE_BYTES, 0, (uint64_t)i, &r);
			PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
			rc = ftcc_wait_p2p(r, 30000, &st);
		}
		pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, b, st.bytes, rc);
		PG_FAIL_IF(rc || pg_check(b, RACE_BYTES, 0, (uint64_t)i) >= 0, "message %d: %s", i,
			   ftcc_strerror(rc));
	}
	if (me == 1)
		chaos_report("p2p: %d of %d receives cancelled, their message taken by the next",
			     cancelled, NRACE);
}

Test(ft_mproc_p2p, cancels_racing_the_data)
{
	pg_run("race", 2, sc_race, 80000, 0);
	pg_exactly_once(2, 3);
	cr_expect_eq(pg->m[1].nrx, NRACE);
}

/* ---- connections only where messages go ------------------------------------------------------ */

#define LZ_N 6
#define LZ_RING 5 /* members 0..4 send around a ring; member 5 only takes part in step 2 */
#define LZ_MSGS 3

/* Waits (15 s at most) until the point-to-point layer of @c holds connections with @want
 * members and, over TCP, this process holds @base + @want sockets (over the verbs emulator a
 * connection is more sockets than one); *@links and the socket count then. A connection
 * refused while a crossing one was taken may take a moment to close. */
static int links_settle(ftcc_comm_t *c, int base, int want, int *links)
{
	const char *t = getenv("FTCC_TEST_TRANSPORT");
	int tcp = !t || !t[0] || strcmp(t, "tcp") == 0;
	int64_t end = chaos_now_ns() + 15000000000ll;
	int n;

	for (;;) {
		*links = (int)p2p_links(c->p2p);
		n = fdc_sockets();
		if ((*links == want && (!tcp || n == base + want)) || chaos_now_ns() >= end)
			break;
		usleep(2000);
	}
	return tcp ? n : base + *links;
}

/* Sends @LZ_MSGS messages to @to and takes as many from @from (-1: none). */
static void lz_exchange(int me, ftcc_comm_t *c, int to, int from, uint64_t tag0)
{
	static uint8_t sb[LZ_MSGS][3000], rb[LZ_MSGS][3000];
	ftcc_request_t *rq[LZ_MSGS], *sq[LZ_MSGS];
	struct ftcc_p2p_status st;
	int rc;

	for (int k = 0; k < LZ_MSGS && from >= 0; k++) {
		rc = ftcc_irecv(c, rb[k], sizeof(rb[k]), (uint32_t)from, tag0 + (uint64_t)k,
				&rq[k]);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	}
	for (int k = 0; k < LZ_MSGS && to >= 0; k++) {
		pg_fill(sb[k], sizeof(sb[k]), (uint32_t)me, tag0 + 100 + (uint64_t)k);
		rc = ftcc_isend(c, sb[k], sizeof(sb[k]), (uint32_t)to, tag0 + (uint64_t)k, &sq[k]);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
	}
	for (int k = 0; k < LZ_MSGS && to >= 0; k++) {
		rc = ftcc_wait_p2p(sq[k], 30000, NULL);
		pg_note(pg->m[me].tx, &pg->m[me].ntx, (uint32_t)to, tag0 + (uint64_t)k, sb[k],
			sizeof(sb[k]), rc);
		PG_FAIL_IF(rc, "send %d to %d: %s", k, to, ftcc_strerror(rc));
	}
	for (int k = 0; k < LZ_MSGS && from >= 0; k++) {
		rc = ftcc_wait_p2p(rq[k], 30000, &st);
		pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, rb[k], st.bytes, rc);
		PG_FAIL_IF(rc, "receive %d from %d: %s", k, from, ftcc_strerror(rc));
	}
}

static void sc_lazy(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	int n = S_->n, base, got, links;
	float x = 1.0f;
	struct ftcc_record rec;
	int rc = ftcc_allreduce(c, &x, &x, 1, FTCC_FLOAT32, FTCC_SUM, &rec);

	PG_FAIL_IF(rc || rec.ncontrib != (uint32_t)n, "allreduce: %s", ftcc_strerror(rc));
	/* a while for connections made before any message (there should be none) */
	usleep(300000);
	base = fdc_sockets();
	PG_FAIL_IF(p2p_links(c->p2p) != 0, "%u point-to-point connections before any message",
		   p2p_links(c->p2p));
	atomic_fetch_add(&pg->flag[0], 1);
	pg_wait_flag(0, n);

	/* step 1: a ring of members 0..4, one way (member 4 sends to 0: the higher connects) */
	if (me < LZ_RING)
		lz_exchange(me, c, (me + 1) % LZ_RING, (me + LZ_RING - 1) % LZ_RING, 10);
	atomic_fetch_add(&pg->flag[1], 1);
	pg_wait_flag(1, n);
	got = links_settle(c, base, me < LZ_RING ? 2 : 0, &links);
	PG_FAIL_IF(links != (me < LZ_RING ? 2 : 0) || got != base + links,
		   "after the ring: %d point-to-point connections, %d sockets more than before "
		   "any message, want %d",
		   links, got - base, me < LZ_RING ? 2 : 0);
	atomic_fetch_add(&pg->flag[2], 1);
	pg_wait_flag(2, n);

	/* step 2: members 0 and 5 send to each other at the same time (attempts cross) */
	if (me == 0 || me == LZ_N - 1)
		lz_exchange(me, c, LZ_N - 1 - me, LZ_N - 1 - me, 20);
	atomic_fetch_add(&pg->flag[3], 1);
	pg_wait_flag(3, n);
	int want = (me < LZ_RING ? 2 : 0) + (me == 0 || me == LZ_N - 1);

	got = links_settle(c, base, want, &links);
	PG_FAIL_IF(links != want || got != base + links,
		   "after the crossing pair: %d point-to-point connections, %d sockets more than "
		   "before any message, want %d",
		   links, got - base, want);
	if (me == 0)
		chaos_report("p2p: member 0 holds %d point-to-point connections (3 peers it "
			     "exchanged with) of %d members",
			     got - base, n);
	rc = ftcc_allreduce(c, &x, &x, 1, FTCC_FLOAT32, FTCC_SUM, &rec);
	PG_FAIL_IF(rc || rec.ncontrib != (uint32_t)n, "allreduce after: %s", ftcc_strerror(rc));
}

Test(ft_mproc_p2p, connections_only_where_messages_go)
{
	pg_run("lazy", LZ_N, sc_lazy, 60000, 0);
	pg_exactly_once(LZ_N, (1u << LZ_N) - 1);
	cr_expect_eq(pg->m[0].nrx, 2 * LZ_MSGS);
}
