/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messages under faults, across processes: link resets between live members
 * inside a stream (every message delivered exactly once, in order, nobody removed); a peer
 * killed or frozen with requests open (they end with FTCC_ERR_PEER_LOST, a receive from any
 * source waits on, the communicator goes on, collectives too); one member alone: messages to
 * itself and bad arguments.
 *
 * Members run in their own processes (tests/lib/p2p_group.h). No root needed. Run with
 * --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "chaos_proc.h"
#include "ftcc/sys.h"
#include "p2p_group.h"

TestSuite(ft_mproc_p2p_faults, .fini = pg_teardown, .timeout = 90);

/* ---- link resets between live members --------------------------------------------------------- */

#define NSTREAM 300
#define STREAM_BYTES (256u << 10)
#define WINDOW 8

static void sc_stream(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	static uint8_t b[WINDOW][STREAM_BYTES];
	ftcc_request_t *q[WINDOW];
	struct ftcc_view v;
	int rc;

	(void)S_;
	for (int i = 0; i < NSTREAM + WINDOW; i++) {
		int k = i % WINDOW;

		if (i >= WINDOW) { /* the message WINDOW back */
			struct ftcc_p2p_status st;
			uint64_t t = (uint64_t)(i - WINDOW);

			rc = ftcc_wait_p2p(q[k], 60000, &st);
			if (me == 0) {
				pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, t, b[k], STREAM_BYTES, rc);
			} else {
				pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, b[k],
					st.bytes, rc);
				PG_FAIL_IF(!rc && st.tag != t, "message %llu came as the %llu-th",
					   (unsigned long long)st.tag, (unsigned long long)t);
			}
			PG_FAIL_IF(rc, "message %llu: %s", (unsigned long long)t,
				   ftcc_strerror(rc));
		}
		if (i >= NSTREAM)
			continue;
		/* resets of the link, from each side in turn */
		if (i % 60 == 30 && (i / 60) % 2 == me)
			ftcc_sys_inject_arm("sendv", 1);
		if (me == 0) {
			pg_fill(b[k], STREAM_BYTES, 0, (uint64_t)i);
			rc = ftcc_isend(c, b[k], STREAM_BYTES, 1, (uint64_t)i, &q[k]);
		} else {
			rc = ftcc_irecv(c, b[k], STREAM_BYTES, 0, FTCC_ANY_TAG, &q[k]);
		}
		PG_FAIL_IF(rc, "post: %s", ftcc_strerror(rc));
	}
	rc = ftcc_comm_view(c, &v, NULL, 0);
	atomic_fetch_add(&pg->flag[3], 1);
	pg_wait_flag(3, 2); /* neither leaves before both looked */
	PG_FAIL_IF(rc || v.nmembers != 2 || v.epoch != 1,
		   "the group after the resets: %u members, "
		   "epoch %llu",
		   v.nmembers, (unsigned long long)v.epoch);
}

Test(ft_mproc_p2p_faults, resets_between_live_members)
{
	pg_run("reset", 2, sc_stream, 80000, 0);
	pg_exactly_once(2, 3);
	cr_expect_eq(pg->m[1].nrx, NSTREAM);
	for (int j = 0; j < pg->m[1].nrx; j++)
		cr_expect_eq(pg->m[1].rx[j].sum, pg->m[0].tx[j].sum, "message %d differs", j);
}

/* ---- a peer lost with requests open ---------------------------------------------------------- */

static void sc_lost(struct pg_shared *S_, int me, ftcc_comm_t *c, int sig)
{
	static uint8_t big[1 << 20];
	uint8_t x[16], y[16];
	ftcc_request_t *s2, *r2, *rany;
	struct ftcc_p2p_status st;
	struct ftcc_record rec;
	float f = 1.0f;
	int rc;

	(void)S_;
	if (me == 2) {
		pg_wait_flag(1, 1);
		raise(sig);
		return;
	}
	if (me == 0) {
		pg_wait_flag(2, 1);
		pg_fill(x, sizeof(x), 0, 3);
		rc = ftcc_isend(c, x, sizeof(x), 1, 3, &s2);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(s2, 30000, NULL);
		pg_note(pg->m[me].tx, &pg->m[me].ntx, 1, 3, x, sizeof(x), rc);
		PG_FAIL_IF(rc, "send to member 1 after the loss: %s", ftcc_strerror(rc));
	} else {
		rc = ftcc_isend(c, big, sizeof(big), 2, 1, &s2);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_irecv(c, y, sizeof(y), 2, 2, &r2);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_irecv(c, y, sizeof(y), FTCC_ANY_SOURCE, 3, &rany);
		PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		usleep(100000);
		pg->m[me].t_ns[0] = chaos_now_ns();
		atomic_store(&pg->flag[1], 1);
		rc = ftcc_wait_p2p(s2, 30000, NULL);
		PG_FAIL_IF(rc != FTCC_ERR_PEER_LOST, "send to the lost member: %s",
			   ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r2, 30000, NULL);
		PG_FAIL_IF(rc != FTCC_ERR_PEER_LOST, "receive from the lost member: %s",
			   ftcc_strerror(rc));
		pg->m[me].t_ns[1] = chaos_now_ns();
		rc = ftcc_isend(c, big, 8, 2, 1, &s2);
		PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(s2, 30000, NULL);
		PG_FAIL_IF(rc != FTCC_ERR_PEER_LOST, "a send to it after: %s", ftcc_strerror(rc));
		atomic_store(&pg->flag[2], 1);
		rc = ftcc_wait_p2p(rany, 30000, &st);
		pg_note(pg->m[me].rx, &pg->m[me].nrx, st.source, st.tag, y, st.bytes, rc);
		PG_FAIL_IF(rc || st.source != 0, "receive from any source: %s from %u",
			   ftcc_strerror(rc), st.source);
	}
	rc = ftcc_allreduce(c, &f, &f, 1, FTCC_FLOAT32, FTCC_SUM, &rec);
	PG_FAIL_IF(rc || rec.ncontrib != 2, "allreduce after the loss: %s over %u",
		   ftcc_strerror(rc), rec.ncontrib);
}

static void sc_killed(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	sc_lost(S_, me, c, SIGKILL);
}

static void sc_frozen(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	sc_lost(S_, me, c, SIGSTOP);
}

static void lost_checks(void)
{
	double ms = chaos_ms(pg->m[1].t_ns[0], pg->m[1].t_ns[1]);

	pg_exactly_once(3, 3);
	chaos_report("p2p: requests with the lost member ended %.0f ms after it was lost", ms);
	/* detection (the failure timeout) and a new epoch, on a loaded machine */
	cr_expect(ms < 6 * PG_TIMEOUT_MS, "requests ended %.0f ms after the loss", ms);
}

Test(ft_mproc_p2p_faults, peer_killed_with_requests_open)
{
	pg_run("killed", 3, sc_killed, 60000, 1u << 2);
	lost_checks();
}

Test(ft_mproc_p2p_faults, peer_frozen_with_requests_open)
{
	pg_run("frozen", 3, sc_frozen, 60000, 1u << 2);
	lost_checks();
}

/* ---- one member: self, bad arguments ---------------------------------------------------------- */

static void sc_alone(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	uint8_t a[100], b[100];
	ftcc_request_t *s, *r;
	struct ftcc_p2p_status st;
	float f = 2.0f;
	int rc;

	(void)S_;
	pg_fill(a, sizeof(a), 0, 1);
	PG_FAIL_IF(ftcc_isend(c, a, 10, 1, 0, &s) != FTCC_ERR_INVALID, "send to member 1 of 1");
	PG_FAIL_IF(ftcc_isend(c, NULL, 10, 0, 0, &s) != FTCC_ERR_INVALID, "NULL buffer");
	PG_FAIL_IF(ftcc_isend(c, a, 10, 0, FTCC_ANY_TAG, &s) != FTCC_ERR_INVALID, "any tag sent");
	PG_FAIL_IF(ftcc_irecv(c, b, 10, 7, 0, &r) != FTCC_ERR_INVALID, "receive from member 7");
	PG_FAIL_IF(ftcc_isend(c, a, 10, 0, 0, NULL) != FTCC_ERR_INVALID, "NULL request");
	PG_FAIL_IF(ftcc_cancel(NULL) != FTCC_ERR_INVALID, "cancel NULL");
	PG_FAIL_IF(ftcc_wait_p2p(NULL, 0, NULL) != FTCC_ERR_INVALID, "wait NULL");
	rc = ftcc_iallreduce(c, &f, &f, 1, FTCC_FLOAT32, FTCC_SUM, &r);
	PG_FAIL_IF(rc, "iallreduce: %s", ftcc_strerror(rc));
	PG_FAIL_IF(ftcc_cancel(r) != FTCC_ERR_INVALID, "cancel of an allreduce");
	PG_FAIL_IF(ftcc_wait_p2p(r, 0, NULL) != FTCC_ERR_INVALID, "wait_p2p of an allreduce");
	PG_FAIL_IF(ftcc_wait(r, NULL), "allreduce");
	/* to self: sent first, received after; a send to self withdrawn */
	rc = ftcc_isend(c, a, sizeof(a), 0, 1, &s);
	PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
	rc = ftcc_irecv(c, b, sizeof(b), FTCC_ANY_SOURCE, FTCC_ANY_TAG, &r);
	PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	PG_FAIL_IF(ftcc_wait_p2p(r, 1000, &st) || st.source != 0 || st.bytes != 100 ||
			   pg_check(b, sizeof(b), 0, 1) >= 0,
		   "self message");
	PG_FAIL_IF(ftcc_wait(s, NULL), "self send");
	rc = ftcc_isend(c, a, sizeof(a), 0, 2, &s);
	PG_FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
	PG_FAIL_IF(ftcc_cancel(s), "cancel self send");
	PG_FAIL_IF(ftcc_wait_p2p(s, 0, NULL) != FTCC_ERR_CANCELED, "withdrawn self send");
	rc = ftcc_irecv(c, b, sizeof(b), 0, 2, &r);
	PG_FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	PG_FAIL_IF(ftcc_wait_p2p(r, 100, NULL) != FTCC_ERR_TIMEOUT, "a withdrawn message came");
	PG_FAIL_IF(ftcc_cancel(r), "cancel");
	{
		int done = 0;
		struct ftcc_record rec;

		PG_FAIL_IF(ftcc_test(r, &done, &rec) != FTCC_ERR_CANCELED || !done, "test");
	}
}

Test(ft_mproc_p2p_faults, one_member_self_and_bad_arguments)
{
	pg_run("alone", 1, sc_alone, 30000, 0);
}
