/* SPDX-License-Identifier: BSD-3-Clause */
/* The quantized allreduce (ftcc_allreduce_opts with a codec) across processes: groups of 1 to 5
 * members run every codec on float32 and bfloat16, SUM and AVG, 1 element to 4 MiB, in and out of
 * place, blocking and with ops in flight mixed with plain ones. Every member's result must be
 * bit-identical to every other's and to what the algorithm makes from the exact inputs (the
 * parent encodes, sums and encodes again itself: ft_expect()), every record clean. A member that
 * calls an op with another codec ends that op with FTCC_ERR_MISMATCH on every member, and the
 * group goes on. Bad options are FTCC_ERR_INVALID at once.
 *
 * Members run in their own processes (tests/lib/ft_group.h). No root needed. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "chaos_proc.h"
#include "ft_group.h"

#define FORM_MS 10000
#define RUN_MS 30000

static struct ft_group grp;
static char text[1 << 16];

static void quant_teardown(void)
{
	ft_group_end(&grp, 2000, NULL, NULL);
	chaos_proc_cleanup();
}

TestSuite(ft_mproc_quant, .fini = quant_teardown, .timeout = 60);

static uint32_t ids_all(int n)
{
	return (1u << n) - 1;
}

static const char *describe(void)
{
	ft_group_describe(&grp, 4, text, sizeof(text));
	return text;
}

/* Runs @o's script on @n members; every op must be in every record and checked. */
static void run_checked(const char *name, int n, struct ft_group_opts *o, uint64_t mismatched)
{
	uint64_t limit = (uint64_t)o->nspec;
	char why[1024];
	int checked;

	cr_assert_eq(ft_group_start(&grp, name, n, o), 0, "could not start %d members", n);
	cr_assert_eq(ft_group_wait_created(&grp, ids_all(n), FORM_MS), 0,
		     "%d members did not form\n%s", n, describe());
	cr_assert_eq(ft_group_wait_ended(&grp, ids_all(n), RUN_MS), 0,
		     "the script did not end within %d ms\n%s", RUN_MS, describe());
	for (int i = 0; i < n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d ended with %s (%s)", i,
			     ftcc_strerror(atomic_load(&r->end_rc)), r->last_error);
		for (uint64_t s = 0; s < limit; s++) {
			const struct ft_op *op = ft_group_op(&grp, i, s);
			int want = mismatched == s + 1 ? FTCC_ERR_MISMATCH : 0;

			cr_assert(op, "member %d: op %llu not done\n%s", i, (unsigned long long)s,
				  describe());
			cr_expect_eq(op->rc, want, "member %d op %llu: %s", i,
				     (unsigned long long)s, ftcc_strerror(op->rc));
			cr_expect(want || (op->attempts == 1 && op->mask == ids_all(n)),
				  "member %d op %llu: %u attempts, contributors %#x", i,
				  (unsigned long long)s, op->attempts, op->mask);
		}
	}
	checked = ft_group_invariants(&grp, ids_all(n), why, sizeof(why));
	cr_expect_geq(checked, 0, "%s\n%s", why, describe());
	/* an op that ended in a mismatch has no result to check */
	cr_expect_eq((uint64_t)checked, limit - !!mismatched, "%d ops checked of %llu", checked,
		     (unsigned long long)limit);
	cr_expect_eq(ft_group_end(&grp, 5000, NULL, NULL), 0, "members did not exit cleanly");
}

static const size_t sizes[] = { 0, 1, 3, 1000, 65537, 1u << 20 };
static const enum ftcc_codec codecs[] = { FTCC_CODEC_INT8, FTCC_CODEC_FP8_E4M3, FTCC_CODEC_INT4 };

/* Every codec x {float32 SUM, bfloat16 AVG} x sizes (0 elements too: empty frames, the shape
 * checked), in and out of place for both types (36 ops). */
static void all_codecs(const char *name, int n, int depth)
{
	struct ft_spec script[36];
	struct ft_group_opts o = { .script = script, .nspec = 36, .depth = depth };
	int k = 0;

	for (int c = 0; c < 3; c++) {
		for (int s = 0; s < 6; s++) {
			for (int t = 0; t < 2; t++, k++) {
				script[k] = (struct ft_spec){
					.count = sizes[s],
					.dtype = t ? FTCC_BFLOAT16 : FTCC_FLOAT32,
					.op = t ? FTCC_AVG : FTCC_SUM,
					.inplace = (k / 2) % 2,
					.codec = codecs[c],
				};
			}
		}
	}
	run_checked(name, n, &o, 0);
}

Test(ft_mproc_quant, codecs_n1)
{
	all_codecs("q1", 1, 1);
}

Test(ft_mproc_quant, codecs_n2)
{
	all_codecs("q2", 2, 1);
}

Test(ft_mproc_quant, codecs_n3)
{
	all_codecs("q3", 3, 1);
}

Test(ft_mproc_quant, codecs_n4_in_flight)
{
	all_codecs("q4", 4, 4);
}

Test(ft_mproc_quant, codecs_n5)
{
	all_codecs("q5", 5, 1);
}

/* Quantized and plain ops of both algorithms interleaved, 4 in flight, on 3 members. */
Test(ft_mproc_quant, mixed_with_plain_ops)
{
	struct ft_spec script[12];
	struct ft_group_opts o = { .script = script, .nspec = 12, .depth = 4 };

	for (int k = 0; k < 12; k++) {
		script[k] = (struct ft_spec){
			.count = k % 3 == 0 ? 8 : 300000,
			.dtype = FTCC_FLOAT32,
			.op = FTCC_SUM,
			.inplace = k % 4 == 1,
			.codec = k % 2 ? codecs[k % 3] : FTCC_CODEC_NONE,
		};
	}
	run_checked("qmix", 3, &o, 0);
}

/* Member 1 calls op 2 without the codec the others use: that op ends with FTCC_ERR_MISMATCH on
 * every member, nobody is removed, and the next ops are fine. */
Test(ft_mproc_quant, another_codec_is_a_mismatch)
{
	struct ft_spec script[5], own[5];
	struct ft_group_opts o = { .script = script, .nspec = 5 };

	for (int k = 0; k < 5; k++) {
		script[k] = (struct ft_spec){ 5000, FTCC_FLOAT32, FTCC_SUM, 0, FTCC_CODEC_INT8 };
		own[k] = script[k];
	}
	own[2].codec = FTCC_CODEC_NONE;
	o.own_script[1] = own;
	run_checked("qmm", 3, &o, 3);
}

/* A data connection reset between live members in the scatter (member 1, op 5) and in the gather
 * (member 2, op 8), nobody removed: each op needs a new epoch, in which it is redone (op 5:
 * nobody holds a final chunk before the gather) or, mostly for op 8, finished from the data
 * (the owners that reduced hold their chunks; the missing ones are filled over the
 * block-aligned partition, which 70000 elements on 3 members tells apart from the plain one).
 * Every result exact and the same everywhere. */
Test(ft_mproc_quant, resets_between_live_members)
{
	struct ft_spec script[2] = { { 70000, FTCC_FLOAT32, FTCC_SUM, 0, FTCC_CODEC_INT8 },
				     { 3001, FTCC_BFLOAT16, FTCC_AVG, 1, FTCC_CODEC_INT4 } };
	struct ft_group_opts o = { .script = script, .nspec = 2, .limit = 12 };
	char why[1024];
	int checked;

	o.fault[1] = "qs:5:0:reset";
	o.fault[2] = "qg:8:0:reset";
	cr_assert_eq(ft_group_start(&grp, "qreset", 3, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, 7, FORM_MS), 0, "no group\n%s", describe());
	cr_assert_eq(ft_group_wait_ended(&grp, 7, RUN_MS), 0, "not ended\n%s", describe());
	for (int i = 0; i < 3; i++) {
		for (uint64_t s = 0; s < 12; s++) {
			const struct ft_op *op = ft_group_op(&grp, i, s);

			cr_assert(op, "member %d did not complete op %llu\n%s", i,
				  (unsigned long long)s, describe());
			cr_expect_eq(op->rc, 0, "member %d op %llu: %s", i, (unsigned long long)s,
				     ftcc_strerror(op->rc));
		}
	}
	checked = ft_group_invariants(&grp, 7, why, sizeof(why));
	cr_expect_eq(checked, 12, "%s\n%s", checked < 0 ? why : "", describe());
	/* A member may meet the new epoch before its first attempt: what shows is the epoch of a
	 * redone op, or the resumed flag of one finished from the data (whose epoch is its
	 * attempt's). */
	cr_expect_gt(ft_group_op(&grp, 0, 5)->epoch, ft_group_op(&grp, 0, 4)->epoch,
		     "op 5 saw no reset\n%s", describe());
	cr_expect(ft_group_op(&grp, 0, 8)->resumed ||
			  ft_group_op(&grp, 0, 8)->epoch > ft_group_op(&grp, 0, 7)->epoch,
		  "op 8 saw no reset\n%s", describe());
	cr_expect(!ft_group_op(&grp, 0, 5)->resumed, "op 5 finished from data nobody held");
	cr_expect_eq(ft_group_end(&grp, 5000, NULL, NULL), 0, "members did not exit cleanly");
}

/* Options a codec cannot take, and options not made by ftcc_op_opts_init(), are refused at once on
 * a one-member group, which then still works. */
Test(ft_mproc_quant, bad_options_are_invalid)
{
	char addr[32];
	const char *addrs[1] = { addr };
	struct ftcc_config cfg;
	struct ftcc_op_opts opts;
	struct {
		struct ftcc_op_opts o;
		uint32_t more[2];
	} newer = { 0 };
	ftcc_comm_t *comm = NULL;
	ftcc_request_t *req = NULL;
	float in[4] = { 1, 2, 3, 4 }, out[4];
	int32_t iin[4] = { 1 }, iout[4];

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ft_group_free_port("127.0.0.1"));
	ftcc_config_init(&cfg);
	cfg.group = "qbad";
	cfg.size = 1;
	cfg.addrs = addrs;
	cr_assert_eq(ftcc_comm_create(&cfg, &comm), 0);
	ftcc_op_opts_init(&opts);
	opts.codec = FTCC_CODEC_INT8;
	cr_expect_eq(ftcc_allreduce_opts(comm, iin, iout, 4, FTCC_INT32, FTCC_SUM, &opts, NULL),
		     FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_allreduce_opts(comm, in, out, 4, FTCC_FLOAT32, FTCC_MAX, &opts, NULL),
		     FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_iallreduce_opts(comm, in, out, 4, FTCC_FLOAT64, FTCC_SUM, &opts, &req),
		     FTCC_ERR_INVALID);
	opts.codec = FTCC_CODEC_COUNT;
	cr_expect_eq(ftcc_allreduce_opts(comm, in, out, 4, FTCC_FLOAT32, FTCC_SUM, &opts, NULL),
		     FTCC_ERR_INVALID);
	opts.codec = FTCC_CODEC_INT8;
	opts.struct_size = 0;
	cr_expect_eq(ftcc_allreduce_opts(comm, in, out, 4, FTCC_FLOAT32, FTCC_SUM, &opts, NULL),
		     FTCC_ERR_INVALID);
	/* a newer header's larger struct: taken while its extra fields are zero */
	newer.o = opts;
	newer.o.struct_size = (uint32_t)sizeof(newer);
	cr_expect_eq(ftcc_allreduce_opts(comm, in, out, 4, FTCC_FLOAT32, FTCC_SUM, &newer.o, NULL),
		     0);
	newer.more[1] = 1;
	cr_expect_eq(ftcc_allreduce_opts(comm, in, out, 4, FTCC_FLOAT32, FTCC_SUM, &newer.o, NULL),
		     FTCC_ERR_INVALID);
	cr_expect_null(req);
	ftcc_op_opts_init(&opts);
	opts.codec = FTCC_CODEC_INT4;
	cr_expect_eq(ftcc_allreduce_opts(comm, in, out, 4, FTCC_FLOAT32, FTCC_SUM, &opts, NULL), 0);
	for (int i = 0; i < 4; i++) /* two encodings of a block of maximum 4: 4 / 14 each */
		cr_expect(out[i] > in[i] - 0.58f && out[i] < in[i] + 0.58f, "%g for %g",
			  (double)out[i], (double)in[i]);
	cr_expect_eq(ftcc_allreduce_opts(comm, in, out, 4, FTCC_FLOAT32, FTCC_SUM, NULL, NULL), 0);
	cr_expect_arr_eq(in, out, sizeof(in));
	cr_expect_eq(ftcc_comm_destroy(comm), 0);
}
