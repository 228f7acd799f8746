/* SPDX-License-Identifier: BSD-3-Clause */
/* Members that call an op with different shapes (count, element type or operator) get
 * FTCC_ERR_MISMATCH from that op, every one of them, with both shapes and members named; nobody
 * is removed, nothing hangs, an in-place buffer holds its input again, and the ops before and
 * after are exact. Covered: one element more (the same algorithm, frames of another length), a
 * count that picks the other algorithm (frames the others never wait for), another type of the
 * same size, another operator, no elements against some, several mismatched ops in a row, and
 * groups of 2 to 5. Also: ops of no elements, which now exchange (empty frames) so that they are
 * checked, stay exact and agreed when a data link resets under them.
 *
 * Members run in their own processes (tests/lib/ft_group.h). No root needed. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_proc.h"
#include "ft_group.h"
#include "ftcc/reduce.h"

#define FORM_MS 10000
/* The whole script, mismatches included: each ends after one epoch change (a few failure
 * timeouts at most on a loaded machine), far below this. */
#define RUN_MS 40000
#define NSPEC 8

static struct ft_group grp;
static char text[1 << 15];

static void mismatch_teardown(void)
{
	ft_group_end(&grp, 2000, NULL, NULL);
	chaos_proc_cleanup();
}

TestSuite(ft_mismatch, .fini = mismatch_teardown, .timeout = 90);

static int same_spec(const struct ft_spec *a, const struct ft_spec *b)
{
	return a->count == b->count && a->dtype == b->dtype && a->op == b->op;
}

/* Whether some member calls op @seq otherwise than member 0. */
static int mismatched(const struct ft_group *g, uint64_t seq)
{
	for (int i = 1; i < g->n; i++)
		if (!same_spec(ft_spec_for(g, i, seq), ft_spec_for(g, 0, seq)))
			return 1;
	return 0;
}

/* The shape text the library prints for @s. */
static void shape_text(const struct ft_spec *s, char *buf, size_t len)
{
	snprintf(buf, len, "%zu x %s %s", s->count, ftcc_dtype_name(s->dtype),
		 ftcc_redop_name(s->op));
}

/* Runs @n members over @script (NSPEC ops), member i calling @own[i]'s instead where given,
 * then checks every op of every member. */
static void run_case(const char *name, int n, const struct ft_spec *script,
		     const struct ft_spec *const *own)
{
	struct ft_group_opts o = { .script = script, .nspec = NSPEC, .limit = NSPEC };
	uint32_t all = (1u << n) - 1;
	size_t max = 64;
	void *acc, *tmp, *in;
	int nmm = 0;

	for (int i = 0; i < n; i++)
		o.own_script[i] = own[i];
	cr_assert_eq(ft_group_start(&grp, name, n, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, all, FORM_MS), 0, "the group did not form");
	if (ft_group_wait_ended(&grp, all, RUN_MS) != 0) {
		ft_group_describe(&grp, 4, text, sizeof(text));
		cr_assert_fail("the scripts did not end (a hang):\n%s", text);
	}
	for (int i = 0; i < n; i++)
		for (int k = 0; k < NSPEC; k++) {
			const struct ft_spec *sp = ft_spec_for(&grp, i, (uint64_t)k);
			size_t b = sp->count * ftcc_dtype_size(sp->dtype);

			max = b > max ? b : max;
		}
	acc = calloc(1, max);
	tmp = calloc(1, max);
	in = calloc(1, max);
	cr_assert(acc && tmp && in);
	for (int i = 0; i < n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d ended its script with %s (%s)",
			     i, ftcc_strerror(atomic_load(&r->end_rc)), r->last_error);
		cr_expect_eq(r->view1.state, 0, "member %d's communicator failed", i);
		cr_expect_eq(r->view1.nmembers, (uint32_t)n, "member %d sees %u members", i,
			     r->view1.nmembers);
		for (uint32_t e = 0; e < atomic_load(&r->nepochs); e++)
			cr_expect_eq(
				r->epochs[e].mask, all,
				"member %d saw epoch %llu with members %#x: someone was removed", i,
				(unsigned long long)r->epochs[e].epoch, r->epochs[e].mask);
		for (uint64_t s = 0; s < NSPEC; s++) {
			const struct ft_spec *sp = ft_spec_for(&grp, i, s);
			const struct ft_op *op = ft_group_op(&grp, i, s);

			cr_assert(op, "member %d did not complete op %llu", i,
				  (unsigned long long)s);
			if (mismatched(&grp, s)) {
				nmm += i == 0;
				cr_expect_eq(op->rc, FTCC_ERR_MISMATCH,
					     "member %d op %llu: %s instead of a mismatch", i,
					     (unsigned long long)s, ftcc_strerror(op->rc));
				if (sp->inplace) {
					ft_input(in, sp, (uint32_t)i, s);
					cr_expect_eq(
						op->sum,
						ft_fnv(in, sp->count * ftcc_dtype_size(sp->dtype)),
						"member %d op %llu: the in-place buffer lost its input",
						i, (unsigned long long)s);
				}
				continue;
			}
			cr_expect_eq(op->rc, 0, "member %d op %llu: %s", i, (unsigned long long)s,
				     ftcc_strerror(op->rc));
			cr_expect_eq(
				op->sum,
				ft_expect(sp, s, all, (uint32_t)n, ft_policy(&grp), acc, tmp, NULL),
				"member %d op %llu: wrong result", i, (unsigned long long)s);
			cr_expect_eq(op->ncontrib, (uint32_t)n);
		}
	}
	cr_expect_gt(nmm, 0, "the case has no mismatched op");
	/* How long a mismatched op took, from its first start to its last end. */
	for (uint64_t s = 0; s < NSPEC; s++) {
		int64_t t0 = INT64_MAX, t1 = 0;

		if (!mismatched(&grp, s))
			continue;
		for (int i = 0; i < n; i++) {
			const struct ft_op *op = ft_group_op(&grp, i, s);

			t0 = op->t_start < t0 ? op->t_start : t0;
			t1 = op->t_done > t1 ? op->t_done : t1;
		}
		chaos_report("mismatch: %s: op %llu ended with FTCC_ERR_MISMATCH on all %d members "
			     "within %.1f ms of its first start",
			     name, (unsigned long long)s, n, chaos_ms(t0, t1));
	}
	/* Member 0's log names both shapes of every mismatched op (its WARN line). */
	ft_group_log(&grp, 0, text, sizeof(text));
	for (uint64_t s = 0; s < NSPEC; s++) {
		char a[64], b[64];

		for (int i = 1; i < n && mismatched(&grp, s); i++) {
			if (same_spec(ft_spec_for(&grp, i, s), ft_spec_for(&grp, 0, s)))
				continue;
			shape_text(ft_spec_for(&grp, 0, s), a, sizeof(a));
			shape_text(ft_spec_for(&grp, i, s), b, sizeof(b));
			cr_expect(
				strstr(text, a) && strstr(text, b),
				"member 0's log does not name both shapes (%s, %s) of op %llu:\n%s",
				a, b, (unsigned long long)s, text);
			break;
		}
	}
	free(acc);
	free(tmp);
	free(in);
}

/* Fills @dst with @src and returns it. */
static const struct ft_spec *copy_script(struct ft_spec *dst, const struct ft_spec *src)
{
	memcpy(dst, src, sizeof(dst[0]) * NSPEC);
	return dst;
}

static const struct ft_spec base[NSPEC] = {
	{ 1000, FTCC_FLOAT32, FTCC_SUM, 0 },   { 1000, FTCC_FLOAT32, FTCC_SUM, 1 },
	{ 1000, FTCC_FLOAT32, FTCC_SUM, 0 },   { 4096, FTCC_INT32, FTCC_MAX, 1 },
	{ 1000, FTCC_FLOAT32, FTCC_SUM, 0 },   { 8, FTCC_FLOAT64, FTCC_SUM, 0 },
	{ 300000, FTCC_FLOAT32, FTCC_SUM, 1 }, { 1000, FTCC_FLOAT32, FTCC_SUM, 0 },
};

/* The first case: counts 1000 and 1001, two members. No eviction, no rescaled result. */
Test(ft_mismatch, one_element_more_two_members)
{
	static struct ft_spec m1[NSPEC];
	const struct ft_spec *own[2] = { NULL, copy_script(m1, base) };

	m1[2].count = 1001;
	run_case("mm-plus1", 2, base, own);
}

/* The second case: 1000 against 200000 elements, which picks the ring where the others
 * run recursive doubling: no hang. Also in place (op 1). */
Test(ft_mismatch, another_algorithm_two_members)
{
	static struct ft_spec m0[NSPEC];
	const struct ft_spec *own[2] = { copy_script(m0, base), NULL };

	m0[2].count = 200000;
	m0[1].count = 200000;
	run_case("mm-algo2", 2, base, own);
}

/* Four members; member 2 alone runs the ring (its frames go to member 3, who waits on member 1
 * in recursive doubling): the mismatch shows through a frame nobody waits for. In place. */
Test(ft_mismatch, another_algorithm_four_members)
{
	static struct ft_spec m2[NSPEC];
	const struct ft_spec *own[4] = { NULL, NULL, copy_script(m2, base), NULL };

	m2[1].count = 200000;
	run_case("mm-algo4", 4, base, own);
}

/* The same bytes, another meaning: a type of the same size (int32 for float32), and another
 * operator; three members. Without the check both would complete with a wrong result. */
Test(ft_mismatch, another_type_and_operator_three_members)
{
	static struct ft_spec m1[NSPEC], m2[NSPEC];
	const struct ft_spec *own[3] = { NULL, copy_script(m1, base), copy_script(m2, base) };

	m1[2].dtype = FTCC_INT32;
	m2[3].op = FTCC_MIN;
	run_case("mm-type-op", 3, base, own);
}

/* No elements against some, and three mismatched ops in a row (each its own epoch), five
 * members. */
Test(ft_mismatch, empty_op_and_a_run_of_mismatches_five_members)
{
	static struct ft_spec m4[NSPEC], m0[NSPEC];
	const struct ft_spec *own[5] = { copy_script(m0, base), NULL, NULL, NULL,
					 copy_script(m4, base) };

	m0[5].count = 0;
	m4[2].count = 999;
	m4[3].count = 4097;
	m4[4].op = FTCC_PROD;
	run_case("mm-run5", 5, base, own);
}

/* Two members run ops of 0 and 8 elements (recursive doubling); member 1's send of an empty op's
 * exchange fails with a reset. Every op ends with the same result on both, nobody is removed. */
Test(ft_mismatch, empty_ops_across_a_reset_two_members)
{
	static struct ft_spec script[NSPEC];
	struct ft_group_opts o = { .script = script, .nspec = NSPEC, .limit = 4 * NSPEC };
	char why[1024];
	int checked;

	for (int k = 0; k < NSPEC; k++)
		script[k] = (struct ft_spec){ k % 2 ? 8 : 0, FTCC_FLOAT32, FTCC_SUM, k % 4 == 1 };
	o.fault[1] = "rd:10:1:reset"; /* op 10 has no elements */
	cr_assert_eq(ft_group_start(&grp, "mm-empty", 2, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, 3, FORM_MS), 0, "the group did not form");
	if (ft_group_wait_ended(&grp, 3, RUN_MS) != 0) {
		ft_group_describe(&grp, 4, text, sizeof(text));
		cr_assert_fail("the scripts did not end:\n%s", text);
	}
	for (int i = 0; i < 2; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d: %s (%s)", i,
			     ftcc_strerror(atomic_load(&r->end_rc)), r->last_error);
		cr_expect_eq(r->view1.nmembers, 2, "member %d sees %u members", i,
			     r->view1.nmembers);
		for (uint64_t s = 0; s < 4 * NSPEC; s++) {
			const struct ft_op *op = ft_group_op(&grp, i, s);

			cr_assert(op, "member %d did not complete op %llu", i,
				  (unsigned long long)s);
			cr_expect_eq(op->rc, 0, "member %d op %llu: %s", i, (unsigned long long)s,
				     ftcc_strerror(op->rc));
		}
	}
	checked = ft_group_invariants(&grp, 3, why, sizeof(why));
	cr_expect_eq(checked, 4 * NSPEC, "%s", checked < 0 ? why : "");
	/* the reset happened: op 10 finished in a later epoch than the first */
	cr_expect_gt(ft_group_op(&grp, 0, 10)->epoch, 1, "op 10 saw no reset");
}
