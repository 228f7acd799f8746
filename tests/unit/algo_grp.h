/* SPDX-License-Identifier: BSD-3-Clause */
/* The algorithm tests' group (test_algo*.c): members of one process, one thread each, each with
 * its own data plane on 127.0.0.1, running one attempt of an algorithm together; their inputs
 * and the plain reference their results must equal.
 */
#ifndef FTCC_TESTS_ALGO_GRP_H
#define FTCC_TESTS_ALGO_GRP_H

#include <stdint.h>

#include "ftcc/algo.h"
#include "ftcc/dp.h"
#include "ftcc/reduce.h"

#define MAXM 8
#define RUN_BOUND_NS (30ll * 1000000000) /* hang guard of every attempt */
/* After a member aborts, the epoch check says the epoch is over this much later: the control
 * plane, which learns of the abort from the member itself or from its silence. */
#define ABORT_NOTICE_NS (2ll * 1000000000)

enum mode {
	M_RUN = 0,	  /* runs the attempt */
	M_ABORT_MIDWAY,	  /* runs it, and aborts its dp once data has arrived */
	M_ABSENT,	  /* never runs it (dp alive, silent) */
	M_ABSENT_DESTROY, /* destroys its dp instead of running */
};

struct grp;

struct member {
	struct grp *g;
	uint32_t idx;
	struct dp *dp;
	enum mode mode;
	void *in, *out, *scratch;
	uint8_t have[MAXM];
	struct algo_att a;
	int rc;
	int64_t t_end, t_abort;
	int aborted;
};

struct grp {
	uint32_t n;
	uint32_t ids[MAXM];
	struct member m[MAXM];
	uint64_t seq;
	int64_t deadline;
	_Atomic int64_t stale_at; /* check returns -ESTALE from then on (0: never) */
	int destroy_on_error;
};

int64_t now_ns(void);
/* Opens @n members, their data planes connected to each other (ids are not indexes). */
void grp_open(struct grp *g, uint32_t n);
void grp_close(struct grp *g);
/* Runs one attempt of @id on every member; inputs, outputs and scratch already set. */
void grp_run(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt, enum ftcc_redop op);
/* Allocates every member's buffers for @count elements: inputs from gen(), out poisoned. */
void grp_buffers(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt,
		 enum ftcc_redop op);
void grp_free_buffers(struct grp *g);
/* Every member succeeded, holds every chunk, and all outputs are the same bits as the plain
 * reference (exact: small integer inputs). */
void grp_expect_exact(struct grp *g, enum algo_id id, size_t count, enum ftcc_dtype dt,
		      enum ftcc_redop op);

#endif
