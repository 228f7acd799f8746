/* SPDX-License-Identifier: BSD-3-Clause */
/* The resume decision: after an epoch change interrupts op s, what the members of the new epoch
 * do with it. Pure logic, no I/O; every member computes it from the same reports (one from each
 * member of the new epoch, exchanged over the data plane), so all decide alike.
 *
 * Each member reports, for op s, the newest attempt it took part in and the final chunks of it
 * whose values it holds, or that it completed the op (returned it to the caller). An attempt is
 * named by the epoch it ran in. Rules:
 *  - an attempt is covered when the union of the chunks the reporters hold is all of its
 *    chunks; the oldest covered attempt is finished from that data (FINISH), keeping its
 *    contributor set (a member that failed after its input was folded in stays counted);
 *  - a completed report (a member already returned the result) makes that attempt the answer;
 *    a member returns only once every member of the attempt held all of it (the have notices),
 *    except in a group of two running recursive doubling, where the member that returned keeps a
 *    copy and says so (RS_F_SERVE): a peer whose last frame was lost on a broken link gets the
 *    missing chunks from it (FINISH); otherwise nobody needs data (DONE);
 *  - otherwise the op runs again in the new epoch from the preserved inputs (RUN);
 *  - before all of that: when two reports carry different shapes of op s (the members called
 *    it with another count, type or operator), or one says it decided so in an earlier epoch,
 *    the op ends with a mismatch on every member (MISMATCH). No member can have returned a
 *    result of such an op: every result needs every member's frames, and a frame of another
 *    shape is never taken (dp.h). A member returns the mismatch only after every member of
 *    its epoch decided it (the have notices); its later reports say so (MISMATCH|COMPLETED),
 *    and then nobody waits for notices again (d.mm_ended).
 * A covered attempt can only be the oldest one reported: a newer attempt exists only because the
 * older was not covered when it was decided, and chunks of an abandoned attempt never grow.
 */
#ifndef FTCC_RESUME_H
#define FTCC_RESUME_H

#include <stdint.h>

#include "ftcc.h"

#define RS_CHUNKS_MAX FTCC_MAX_MEMBERS

enum {
	RS_F_ATTEMPT = 0x1,   /* att_* describe an attempt this member holds chunks of */
	RS_F_COMPLETED = 0x2, /* it returned the op */
	RS_F_SERVE = 0x4, /* completed, and kept a copy of the result: it can provide any chunk */
	RS_F_MISMATCH = 0x8, /* it decided the op ends with a shape mismatch (in an earlier epoch);
			      * with COMPLETED: it returned it so */
};

/* One member's report on op @seq. Sent as a fixed-size little-endian record (resume_encode). */
struct rs_report {
	uint32_t id;	    /* reporting member */
	uint32_t flags;	    /* RS_F_* */
	uint64_t seq;	    /* op */
	uint64_t att_epoch; /* attempt (its epoch) */
	uint32_t att_algo;  /* enum algo_id of the attempt */
	uint32_t nchunks;   /* final chunks of the attempt (1..RS_CHUNKS_MAX) */
	uint32_t ncontrib;  /* contributors of the attempt */
	uint32_t mm_id;	    /* MISMATCH: a member that called the op otherwise (else 0) */
	uint64_t shape;	    /* the op's shape as this member called it (nonzero) */
	uint64_t mm_shape;  /* MISMATCH: that member's shape (else 0) */
	uint8_t have[RS_CHUNKS_MAX / 8];       /* chunks held (completed: all) */
	uint8_t contrib[FTCC_MAX_MEMBERS / 8]; /* the attempt's contributor set */
};

#define RS_WIRE_SIZE (56 + RS_CHUNKS_MAX / 8 + FTCC_MAX_MEMBERS / 8)

enum rs_kind {
	RS_RUN = 1,	 /* run op s afresh in the new epoch */
	RS_FINISH = 2,	 /* finish attempt att_epoch: fill missing chunks, then the have notices */
	RS_DONE = 3,	 /* attempt att_epoch is complete everywhere: return it */
	RS_MISMATCH = 4, /* the members called the op differently: it fails on every member */
};

struct rs_decision {
	enum rs_kind kind;
	uint64_t att_epoch;
	uint32_t att_algo;
	uint32_t nchunks;
	uint32_t ncontrib;
	uint8_t contrib[FTCC_MAX_MEMBERS / 8];
	/* MISMATCH: two members (ids) whose shapes differ, and their shapes: the first reporter
	 * and the first whose shape differs from its, else what a report that says the op ended
	 * so names. */
	uint32_t mm_id[2];
	uint64_t mm_shape[2];
	int mm_ended; /* a member returned the mismatch already: every member decided it */
	/* FINISH: provider[c] = index (into the reports) of the member that sends chunk c to
	 * whoever lacks it: the lowest index holding it that has not completed, else the lowest
	 * completed one that serves from a copy (UINT32_MAX: nobody lacks it). */
	uint32_t provider[RS_CHUNKS_MAX];
};

/* Decides from the @n reports @r (one per member of the new epoch, in member order). 0, or
 * -EPROTO when the reports contradict each other (two reports of one attempt disagreeing on its
 * shape or contributors, a chunk some member lacks that only members holding no copy have, a
 * completed report beside a shape mismatch, a bad field). */
int resume_decide(const struct rs_report *r, uint32_t n, struct rs_decision *d);

/* Wire form of a report: RS_WIRE_SIZE bytes. decode: 0 or -EPROTO (bad field). */
void resume_encode(const struct rs_report *r, uint8_t *buf);
int resume_decode(const uint8_t *buf, struct rs_report *r);

#endif
