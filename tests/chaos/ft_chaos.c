/* SPDX-License-Identifier: BSD-3-Clause */
/* Shared by the allreduce chaos tests (test_chaos_allreduce*.c): the group under test, the op
 * scripts, and the checks every test ends with.
 */
#define _GNU_SOURCE
#include "ft_chaos.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

#include "abi_net.h"
#include "chaos_fault.h"
#include "chaos_proc.h"

struct ft_group grp;
static char text[1 << 19];

void chaos_teardown(void)
{
	/* FT_GROUP_VERBOSE=1: every record and log, also when the test passed. */
	if (getenv("FT_GROUP_VERBOSE") && grp.sh)
		printf("%s\n", describe());
	ft_group_end(&grp, 2000, NULL, NULL);
	chaos_fault_cleanup();
	chaos_proc_cleanup();
	test_fabric_cut_clear();
}

/* 1 MiB of float32: the ring (above FTCC_RD_MAX_BYTES), long enough to die in. */
const struct ft_spec big[] = { { 262144, FTCC_FLOAT32, FTCC_SUM, 0 } };
/* The same in place: a redo reads the input the ring kept as it went (algo.h's keep_fill). */
const struct ft_spec big_inplace[] = { { 262144, FTCC_FLOAT32, FTCC_SUM, 1 } };
/* 1 MiB of float32 as int8 codes: the quantized allreduce. */
const struct ft_spec qbig[] = { { 262144, FTCC_FLOAT32, FTCC_SUM, 0, FTCC_CODEC_INT8 } };
/* 8 elements: recursive doubling. */
const struct ft_spec small[] = { { 8, FTCC_FLOAT32, FTCC_SUM, 0 }, { 8, FTCC_INT32, FTCC_MAX, 1 } };
/* Open-ended scripts (thousands of ops, each checked at the end): 256 KiB for the ring. */
const struct ft_spec paced[] = {
	{ 65536, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 8, FTCC_INT32, FTCC_SUM, 1 },
	{ 1000, FTCC_FLOAT32, FTCC_AVG, 1 },
	{ 4099, FTCC_BFLOAT16, FTCC_MAX, 0 },
};
/* Both algorithms, several types. */
const struct ft_spec mixed[] = {
	{ 262144, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 8, FTCC_INT32, FTCC_SUM, 1 },
	{ 1000, FTCC_FLOAT32, FTCC_AVG, 1 },
	{ 65537, FTCC_BFLOAT16, FTCC_MAX, 0 },
};

/* "{0,2}" for a set of ids; the static buffer of slot @k (0..3). */
const char *ids(uint32_t mask, int k)
{
	static char buf[4][64];
	size_t at = 0;

	buf[k][at++] = '{';
	for (int i = 0; i < 32 && at + 4 < sizeof(buf[k]); i++)
		if (mask >> i & 1)
			at += (size_t)snprintf(buf[k] + at, sizeof(buf[k]) - at, "%s%d",
					       at > 1 ? "," : "", i);
	snprintf(buf[k] + at, sizeof(buf[k]) - at, "}");
	return buf[k];
}

const char *describe(void)
{
	size_t at = ft_group_describe(&grp, 6, text, sizeof(text));

	for (int i = 0; i < grp.n && at + 1 < sizeof(text); i++) {
		char log[16384];
		int k;

		ft_group_log(&grp, i, log, sizeof(log));
		k = snprintf(text + at, sizeof(text) - at, "--- member %d, end of its log:\n%s\n",
			     i, log);
		at = k < 0 ? at : at + (size_t)k < sizeof(text) ? at + (size_t)k : sizeof(text) - 1;
	}
	return text;
}

/* Agreement and exact results over every record, and one member list per epoch number over
 * every process; returns the number of ops checked. */
int expect_agree(void)
{
	char why[1024];
	int checked = ft_group_invariants(&grp, 0, why, sizeof(why));

	cr_expect_geq(checked, 0, "%s\n%s", why, describe());
	return checked;
}

/* Ends the group: every process still running destroys its communicator, in time, and exits 0. */
void end_group(void)
{
	double ms, cpu_wait_ms;

	cr_expect_eq(ft_group_end(&grp, 5000, &ms, &cpu_wait_ms), 0,
		     "members did not exit cleanly");
	cr_expect_leq(ms, DESTROY_BOUND_MS + cpu_wait_ms,
		      "ftcc_comm_destroy took %.1f ms (the other members' destroys' CPU time over "
		      "the cores: %.1f ms)",
		      ms, cpu_wait_ms);
}

/* Every member of @live ended its script without an error, at op @limit (with streams, a whole
 * number of periods: the view's next op is stream 0's, the op @limit would be there). */
void expect_finished(uint32_t live, uint64_t limit)
{
	if (grp.o.nstreams > 1)
		ft_stream_of(&grp, limit, &limit);
	for (int i = 0; i < grp.n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		if (!(live >> i & 1))
			continue;
		cr_expect_eq(atomic_load(&r->end_rc), 0, "survivor %d ended with %s (\"%s\")\n%s",
			     i, ftcc_strerror(atomic_load(&r->end_rc)), r->last_error, describe());
		cr_expect_eq(r->view1.next_seq, limit, "survivor %d stopped at op %llu of %llu", i,
			     (unsigned long long)r->view1.next_seq, (unsigned long long)limit);
	}
}

/* The first op from @from on whose contributor set lacks one of @gone (-1 if none below @to), and
 * checks that every op from @from to @to - 1 was completed by all of @live, that the sets before it
 * are @before and from it on exactly @live. */
int64_t expect_transition(uint32_t live, uint32_t gone, uint32_t before, uint64_t from, uint64_t to)
{
	int64_t first = -1;

	for (uint64_t s = from; s < to; s++) {
		struct ft_seq_info in;

		ft_group_seq(&grp, s, &in);
		cr_expect_eq(in.done_by & live, live, "op %llu: done by %s only, not %s\n%s",
			     (unsigned long long)s, ids(in.done_by, 0), ids(live, 1), describe());
		if (first < 0 && (in.mask & gone) != gone)
			first = (int64_t)s;
		if (first < 0)
			cr_expect_eq(in.mask, before, "op %llu: set %s, expected %s",
				     (unsigned long long)s, ids(in.mask, 0), ids(before, 1));
		else
			cr_expect_eq(in.mask, live,
				     "op %llu: set %s after the failure, expected %s",
				     (unsigned long long)s, ids(in.mask, 0), ids(live, 1));
	}
	return first;
}
