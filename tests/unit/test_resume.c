/* SPDX-License-Identifier: BSD-3-Clause */
/* The resume decision (collectives/resume.c): which attempt a reopened op finishes from, who
 * provides each missing chunk, when it runs again, and the reports' wire form.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "ftcc/resume.h"

#define SEQ 41
#define SHAPE 0x3e8000701ull /* 1000 float32 sum, as the engine packs it */

/* A report of member @id holding the chunks in @held (bit i = chunk i) of attempt @ep, whose
 * contributors are members 0.. @ncontrib - 1. */
static struct rs_report rep(uint32_t id, uint64_t ep, uint32_t nchunks, uint32_t held,
			    uint32_t ncontrib)
{
	struct rs_report r;

	memset(&r, 0, sizeof(r));
	r.id = id;
	r.seq = SEQ;
	r.shape = SHAPE;
	if (ep) {
		r.flags = RS_F_ATTEMPT;
		r.att_epoch = ep;
		r.att_algo = 1;
		r.nchunks = nchunks;
		r.ncontrib = ncontrib;
		for (uint32_t c = 0; c < 32; c++) {
			if (held >> c & 1) {
				r.have[c / 8] |= (uint8_t)(1u << (c % 8));
			}
		}
		for (uint32_t m = 0; m < ncontrib; m++) {
			r.contrib[m / 8] |= (uint8_t)(1u << (m % 8));
		}
	}
	return r;
}

static struct rs_report none(uint32_t id)
{
	return rep(id, 0, 0, 0, 0);
}

Test(resume, nothing_reported_runs_again)
{
	struct rs_report r[3] = { none(0), none(1), none(2) };
	struct rs_decision d;

	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_RUN);
}

Test(resume, covered_attempt_finishes_with_its_contributors)
{
	/* Attempt of epoch 4 among 4 members (member 3 died): survivors hold chunks 0,1 / 2 / 3. */
	struct rs_report r[3] = { rep(0, 4, 4, 0x3, 4), rep(1, 4, 4, 0x4, 4),
				  rep(2, 4, 4, 0x9, 4) };
	struct rs_decision d;

	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_FINISH);
	cr_expect_eq(d.att_epoch, 4);
	cr_expect_eq(d.ncontrib, 4, "the dead member's input stays counted");
	cr_expect_eq(d.provider[0], 0);
	cr_expect_eq(d.provider[1], 0);
	cr_expect_eq(d.provider[2], 1);
	cr_expect_eq(d.provider[3], 2, "lowest holder of chunk 3 is member index 2");
}

Test(resume, uncovered_attempt_runs_again)
{
	/* Chunk 3 was only at the dead member. */
	struct rs_report r[3] = { rep(0, 4, 4, 0x1, 4), rep(1, 4, 4, 0x2, 4),
				  rep(2, 4, 4, 0x4, 4) };
	struct rs_decision d;

	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_RUN);
}

Test(resume, completed_report_means_done)
{
	struct rs_report r[3] = { rep(0, 4, 4, 0xf, 4), rep(1, 4, 4, 0xf, 4),
				  rep(2, 4, 4, 0xf, 4) };
	struct rs_decision d;

	r[1].flags |= RS_F_COMPLETED;
	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_DONE);
	cr_expect_eq(d.att_epoch, 4);
}

Test(resume, completed_wins_over_an_older_covered_attempt)
{
	/* An older covered attempt alongside a completed newer one. The completed one is the
	 * answer: its holder serves the member that lacks it when it kept a copy (FINISH from
	 * member 0); without a copy nobody can, and the reports are refused, never taken silently.
	 */
	struct rs_report r[2] = { rep(0, 6, 2, 0x3, 2), rep(1, 3, 2, 0x3, 3) };
	struct rs_decision d;

	r[0].flags |= RS_F_COMPLETED | RS_F_SERVE;
	cr_assert_eq(resume_decide(r, 2, &d), 0);
	cr_expect_eq(d.kind, RS_FINISH);
	cr_expect_eq(d.att_epoch, 6);
	cr_expect_eq(d.provider[0], 0);
	cr_expect_eq(d.provider[1], 0);
	r[0].flags &= ~(uint32_t)RS_F_SERVE;
	cr_expect_eq(resume_decide(r, 2, &d), -EPROTO);
}

/* Two members, recursive doubling (one chunk): member 1 returned the op after it got member 0's
 * data, but its own frame to member 0 was lost on a broken link. It kept a copy (SERVE): member
 * 0 gets the chunk from it. Had member 0 received it, nothing moves (DONE). */
Test(resume, pair_completed_member_serves_its_copy)
{
	struct rs_report r[2] = { rep(0, 2, 1, 0x0, 2), rep(1, 2, 1, 0x1, 2) };
	struct rs_decision d;

	r[1].flags |= RS_F_COMPLETED | RS_F_SERVE;
	cr_assert_eq(resume_decide(r, 2, &d), 0);
	cr_expect_eq(d.kind, RS_FINISH);
	cr_expect_eq(d.provider[0], 1);
	cr_expect_eq(d.ncontrib, 2, "both inputs are in the result");
	r[0] = rep(0, 2, 1, 0x1, 2);
	cr_assert_eq(resume_decide(r, 2, &d), 0);
	cr_expect_eq(d.kind, RS_DONE);
	/* SERVE only with COMPLETED */
	r[0].flags |= RS_F_SERVE;
	cr_expect_eq(resume_decide(r, 2, &d), -EPROTO);
}

Test(resume, oldest_covered_attempt_is_taken)
{
	/* Member 2 was still in attempt 3 when the others began attempt 5, and holds all of
	 * attempt 3: that one is covered, and older. */
	struct rs_report r[3] = { rep(0, 5, 3, 0x1, 3), rep(1, 5, 3, 0x6, 3),
				  rep(2, 3, 4, 0xf, 4) };
	struct rs_decision d;

	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_FINISH);
	cr_expect_eq(d.att_epoch, 3);
	cr_expect_eq(d.provider[0], 2);
}

Test(resume, newer_attempt_when_the_older_is_not_covered)
{
	struct rs_report r[3] = { rep(0, 5, 3, 0x1, 3), rep(1, 5, 3, 0x6, 3),
				  rep(2, 3, 4, 0x7, 4) };
	struct rs_decision d;

	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_FINISH);
	cr_expect_eq(d.att_epoch, 5);
	cr_expect_eq(d.ncontrib, 3);
	cr_expect_eq(d.provider[1], 1);
}

Test(resume, joiner_without_state_is_served)
{
	struct rs_report r[3] = { rep(0, 4, 2, 0x3, 2), rep(1, 4, 2, 0x2, 2), none(2) };
	struct rs_decision d;

	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_FINISH);
	cr_expect_eq(d.provider[0], 0);
	cr_expect_eq(d.provider[1], 0);
}

Test(resume, contradictions_are_refused)
{
	struct rs_report r[2] = { rep(0, 4, 2, 0x1, 2), rep(1, 4, 3, 0x6, 2) };
	struct rs_report q[2] = { rep(0, 4, 2, 0x3, 2), rep(1, 6, 2, 0x3, 2) };
	struct rs_decision d;

	cr_expect_eq(resume_decide(r, 2, &d), -EPROTO, "one attempt, two shapes");
	q[0].flags |= RS_F_COMPLETED;
	q[1].flags |= RS_F_COMPLETED;
	cr_expect_eq(resume_decide(q, 2, &d), -EPROTO, "two attempts both returned");
	q[1] = rep(1, 4, 2, 0x3, 2);
	q[1].contrib[0] = 0x5; /* count says 2, bits say 2 but a different set */
	cr_expect_eq(resume_decide(q, 2, &d), -EPROTO, "one attempt, two contributor sets");
	q[1] = rep(1, 4, 2, 0x3, 2);
	q[1].seq = SEQ + 1;
	cr_expect_eq(resume_decide(q, 2, &d), -EPROTO, "reports on different ops");
	cr_expect_eq(resume_decide(q, 0, &d), -EPROTO);
}

Test(resume, wire_round_trip_and_bad_fields)
{
	struct rs_report a = rep(7, 9, 5, 0x15, 5), b;
	uint8_t buf[RS_WIRE_SIZE];

	resume_encode(&a, buf);
	cr_assert_eq(resume_decode(buf, &b), 0);
	cr_expect_eq(memcmp(&a, &b, sizeof(a)), 0);
	buf[4] = 0x80; /* unknown flag */
	cr_expect_eq(resume_decode(buf, &b), -EPROTO);
	resume_encode(&a, buf);
	buf[28] = 0; /* zero chunks */
	cr_expect_eq(resume_decode(buf, &b), -EPROTO);
	resume_encode(&a, buf);
	buf[32] = 4; /* contributor count disagrees with the set */
	cr_expect_eq(resume_decode(buf, &b), -EPROTO);
	resume_encode(&a, buf);
	buf[1] = 0x10; /* member id 4103 */
	cr_expect_eq(resume_decode(buf, &b), -EPROTO);
	resume_encode(&a, buf);
	memset(buf + 40, 0, 8); /* no shape */
	cr_expect_eq(resume_decode(buf, &b), -EPROTO);
	a.flags |= RS_F_MISMATCH; /* a mismatch report with an attempt's data */
	a.mm_id = 1;
	a.mm_shape = SHAPE + 1;
	resume_encode(&a, buf);
	cr_expect_eq(resume_decode(buf, &b), -EPROTO);
	a = none(3);
	a.flags = RS_F_MISMATCH;
	a.mm_id = 9;
	a.mm_shape = SHAPE + 1;
	resume_encode(&a, buf);
	cr_assert_eq(resume_decode(buf, &b), 0);
	cr_expect_eq(memcmp(&a, &b, sizeof(a)), 0);
	a.mm_shape = SHAPE; /* names its own shape as the other */
	resume_encode(&a, buf);
	cr_expect_eq(resume_decode(buf, &b), -EPROTO);
	a = none(3);
	a.mm_id = 2; /* a mismatch field without the flag */
	resume_encode(&a, buf);
	cr_expect_eq(resume_decode(buf, &b), -EPROTO);
}

/* Members that called the op with different shapes: whatever they hold of it, every member
 * decides the mismatch, naming the first member and the first whose shape differs. */
Test(resume, different_shapes_are_a_mismatch_everywhere)
{
	struct rs_report r[3] = { rep(0, 4, 3, 0x1, 3), rep(1, 4, 3, 0x2, 3), none(2) };
	struct rs_decision d;

	r[2].shape = SHAPE + (1ull << 24); /* one more element */
	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_MISMATCH);
	cr_expect_eq(d.mm_id[0], 0);
	cr_expect_eq(d.mm_shape[0], SHAPE);
	cr_expect_eq(d.mm_id[1], 2);
	cr_expect_eq(d.mm_shape[1], SHAPE + (1ull << 24));
	/* the same shapes otherwise: the covered attempt finishes (no mismatch by accident) */
	r[2] = rep(2, 4, 3, 0x4, 3);
	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_FINISH);
}

/* A member that ended the op with a mismatch in an earlier epoch says so: the others, whose
 * reports agree now (the member with the other shape left since), end it the same way. */
Test(resume, an_earlier_mismatch_decision_is_kept)
{
	struct rs_report r[3] = { rep(0, 4, 3, 0x7, 3), none(1), none(2) };
	struct rs_decision d;

	r[1].flags = RS_F_MISMATCH;
	r[1].mm_id = 4;
	r[1].mm_shape = SHAPE ^ 0x200;
	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_MISMATCH);
	cr_expect_eq(d.mm_id[0], 1);
	cr_expect_eq(d.mm_shape[0], SHAPE);
	cr_expect_eq(d.mm_id[1], 4, "the member it named, gone since");
	cr_expect_eq(d.mm_shape[1], SHAPE ^ 0x200);
}

/* A member returned the mismatch in an earlier epoch (MISMATCH|COMPLETED): the others decide it
 * too, and are told that nobody waits for have notices any more. A mismatch decided but not
 * returned says nothing of the kind. */
Test(resume, a_returned_mismatch_needs_no_more_notices)
{
	struct rs_report r[3] = { none(0), none(1), none(2) };
	struct rs_decision d;

	r[1].flags = RS_F_MISMATCH;
	r[1].mm_id = 2;
	r[1].mm_shape = SHAPE + 5;
	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_MISMATCH);
	cr_expect_eq(d.mm_ended, 0);
	r[2].flags = RS_F_MISMATCH | RS_F_COMPLETED;
	r[2].mm_id = 4;
	r[2].mm_shape = SHAPE + 5;
	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_MISMATCH);
	cr_expect_eq(d.mm_ended, 1);
	cr_expect_eq(d.mm_id[0], 1, "the first flagged report names the pair");
}

/* A completed report beside another shape: no member can have returned such an op. */
Test(resume, completed_beside_a_mismatch_is_refused)
{
	struct rs_report r[2] = { rep(0, 4, 1, 0x1, 2), rep(1, 4, 1, 0x1, 2) };
	struct rs_decision d;

	r[0].flags |= RS_F_COMPLETED;
	r[1].shape = SHAPE ^ 0x100; /* another operator */
	cr_expect_eq(resume_decide(r, 2, &d), -EPROTO);
}

/* A reduce-scatter's attempt (ALGO_RSC, 6): each member needs, and holds, its own slot only. */
static struct rs_report rsc(uint32_t id, uint32_t held, uint32_t flags)
{
	struct rs_report r = rep(id, 4, 4, held, 4);

	r.att_algo = 6;
	r.flags |= flags;
	return r;
}

Test(resume, reduce_scatter_needs_only_the_own_slots)
{
	/* Member 3 died; each survivor holds its own slot: finished from the data, member 3's
	 * slot nobody's, nothing filled. */
	struct rs_report r[3] = { rsc(0, 0x1, 0), rsc(1, 0x2, 0), rsc(2, 0x4, 0) };
	struct rs_decision d;

	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_FINISH);
	cr_expect_eq(d.ncontrib, 4, "the dead member's input stays counted");
	for (uint32_t c = 0; c < 4; c++)
		cr_expect_eq(d.provider[c], UINT32_MAX, "slot %u filled from %u", c, d.provider[c]);
	/* A survivor without its own slot: nobody else can have it, the op runs again. */
	r[1] = rsc(1, 0x1, 0);
	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_RUN);
	/* One returned it: done everywhere. */
	r[1] = rsc(1, 0x2, 0);
	r[0] = rsc(0, 0xf, RS_F_COMPLETED);
	cr_assert_eq(resume_decide(r, 3, &d), 0);
	cr_expect_eq(d.kind, RS_DONE);
	/* A returned op beside a survivor lacking its slot cannot be. */
	r[2] = rsc(2, 0x8, 0);
	cr_expect_eq(resume_decide(r, 3, &d), -EPROTO);
}
