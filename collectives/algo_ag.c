/* SPDX-License-Identifier: BSD-3-Clause */
/* Allgather (enum eng_kind ENG_ALLGATHER): the result is a->slots slots of equal size, one per
 * member id of the group; each member's input holds its own slot and zeros. The sum of those
 * inputs is each slot's owner's bytes, so every slot is final where it starts: a member holds
 * its own slot, and everyone holds the (zero) slots of ids that take no part in the attempt.
 * What is left is the allgather half of a ring: in n - 1 steps, member i passes on the slot it
 * received in the step before (its own first) to member i + 1, straight into the result. Each
 * member sends n - 1 slots, the least an allgather can.
 *
 * Chunks: the a->slots slots (algo_range(ALGO_AG, ...) is the plain partition of size x slot).
 * Fault point "ag", step = ring step, as the ring's allgather.
 */
#include <errno.h>
#include <string.h>

#include "algo_int.h"
#include "ftcc/fault.h"
#include "ftcc/reduce.h"

/* Slot of attempt member index @i. */
static uint32_t ag_slot(const struct algo_att *a, uint32_t i)
{
	return a->ids[i];
}

int algo_ag_run(struct algo_att *a)
{
	size_t off, len;
	uint32_t n = a->n, t, taken[FTCC_MAX_MEMBERS / 32] = { 0 };

	if (a->slots == 0 || a->count % a->slots || ftcc_dtype_size(a->dtype) != 1 ||
	    (a->count && (!a->input || !a->out))) {
		return -EINVAL;
	}
	if (a->count) {
		memcpy(a->out, a->input, a->count);
	}
	for (uint32_t i = 0; i < n; i++) {
		if (ag_slot(a, i) >= a->slots) {
			return -EINVAL;
		}
		taken[ag_slot(a, i) / 32] |= 1u << (ag_slot(a, i) % 32);
	}
	/* held from the start: the own slot, and those of ids outside the attempt (zero) */
	for (uint32_t s = 0; s < a->slots; s++) {
		if (!(taken[s / 32] >> (s % 32) & 1) || s == ag_slot(a, a->self)) {
			algo_have_set(a->have, s);
		}
	}
	for (t = 0; t + 1 < n; t++) {
		uint32_t send = ag_slot(a, (a->self + n - t) % n);
		uint32_t recv = ag_slot(a, (a->self + n - t - 1) % n);
		struct dp_xfer x[2];
		int rc;

		ftcc_fault("ag", a->seq, t);
		algo_chunk_range(a->slots, a->count, send, &off, &len);
		algo_xfer_init(a, &x[0], (a->self + 1) % n, DP_SEND, t, (uint8_t *)a->out + off,
			       len);
		algo_chunk_range(a->slots, a->count, recv, &off, &len);
		algo_xfer_init(a, &x[1], (a->self + n - 1) % n, DP_RECV, t, (uint8_t *)a->out + off,
			       len);
		rc = algo_wait_all(a, x, 2);
		if (rc) {
			return rc;
		}
		algo_have_set(a->have, recv);
	}
	return 0;
}
