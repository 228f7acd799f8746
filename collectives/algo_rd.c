/* SPDX-License-Identifier: BSD-3-Clause */
/* Recursive doubling allreduce for small messages: every member ends with the whole vector
 * after log2(p) pairwise exchanges among p = 2^floor(log2 n) participants; with n not a power
 * of two, the first 2(n - p) members pair up, the even one folding its vector into the odd one
 * first (round 0) and getting the result back at the end.
 */
#include <errno.h>
#include <string.h>

#include "algo_int.h"
#include "ftcc/fault.h"
#include "ftcc/reduce.h"

/* Fault point numbering: round 0 is the fold-in (only with n not a power of two), 1..log2(p)
 * the exchanges, log2(p) + 1 the result sent back to the folded-in members. Every member
 * passes every round's point in order, also the rounds it sits out. */

/* Round 0: the even member of a leading pair sends its input to the odd one, which folds it in
 * (out = own OP other). Others have nothing to do. */
static int rd_fold_in(struct algo_att *a, uint32_t r, size_t bytes)
{
	struct dp_xfer x;
	int rc;

	ftcc_fault("rd", a->seq, 0);
	if (a->self >= 2 * r) {
		return 0;
	}
	if (a->self % 2 == 0) {
		algo_xfer_init(a, &x, a->self + 1, DP_SEND, 0, (void *)a->input, bytes);
		return algo_wait_all(a, &x, 1);
	}
	algo_xfer_init(a, &x, a->self - 1, DP_RECV, 0, a->scratch, bytes);
	rc = algo_wait_all(a, &x, 1);
	if (rc) {
		return rc;
	}
	return ftcc_reduce(a->out, a->scratch, a->count, a->dtype, algo_accum_op(a->op));
}

/* Rounds 1..@rounds among the participants: exchange whole vectors with the partner whose
 * participant index differs in bit round - 1, and both compute out = out OP other: the same
 * bits on both sides, every operator being commutative. */
static int rd_exchange(struct algo_att *a, uint32_t r, uint32_t rounds, size_t bytes)
{
	int sits_out = a->self < 2 * r && a->self % 2 == 0;
	uint32_t v = a->self < 2 * r ? a->self / 2 : a->self - r;

	for (uint32_t k = 1; k <= rounds; k++) {
		struct dp_xfer x[2];
		uint32_t pv, peer;
		int rc;

		ftcc_fault("rd", a->seq, k);
		if (sits_out) {
			continue;
		}
		pv = v ^ (1u << (k - 1));
		peer = pv < r ? 2 * pv + 1 : pv + r;
		algo_xfer_init(a, &x[0], peer, DP_SEND, k, a->out, bytes);
		algo_xfer_init(a, &x[1], peer, DP_RECV, k, a->scratch, bytes);
		rc = algo_wait_all(a, x, 2);
		if (rc) {
			return rc;
		}
		rc = ftcc_reduce(a->out, a->scratch, a->count, a->dtype, algo_accum_op(a->op));
		if (rc) {
			return rc;
		}
	}
	return 0;
}

/* The last round: the odd member of a leading pair sends the result to the even one, which
 * receives it straight into its result. */
static int rd_hand_back(struct algo_att *a, uint32_t r, uint32_t round, size_t bytes)
{
	struct dp_xfer x;

	ftcc_fault("rd", a->seq, round);
	if (a->self >= 2 * r) {
		return 0;
	}
	if (a->self % 2 == 0) {
		algo_xfer_init(a, &x, a->self + 1, DP_RECV, round, a->out, bytes);
	} else {
		algo_xfer_init(a, &x, a->self - 1, DP_SEND, round, a->out, bytes);
	}
	return algo_wait_all(a, &x, 1);
}

int algo_rd_run(struct algo_att *a)
{
	size_t bytes = a->count * ftcc_dtype_size(a->dtype);
	uint32_t p = 1, r, rounds = 0;
	int rc;

	/* An op of no elements still exchanges (empty frames): its shape is checked like any
	 * other's, so a member that called it with another count is told, not left waiting. */
	if (a->n == 1) {
		algo_run_alone(a, 1);
		return 0;
	}
	if (!a->scratch && bytes) {
		return -EINVAL;
	}
	while (p * 2 <= a->n) {
		p *= 2;
		rounds++;
	}
	r = a->n - p;
	if (bytes) {
		memcpy(a->out, a->input, bytes);
	}
	if (r) {
		rc = rd_fold_in(a, r, bytes);
		if (rc) {
			return rc;
		}
	}
	rc = rd_exchange(a, r, rounds, bytes);
	if (rc) {
		return rc;
	}
	if (r) {
		rc = rd_hand_back(a, r, rounds + 1, bytes);
		if (rc) {
			return rc;
		}
	}
	algo_have_set(a->have, 0);
	return 0;
}
