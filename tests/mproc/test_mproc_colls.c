/* SPDX-License-Identifier: BSD-3-Clause */
/* Broadcast, allgather, reduce-scatter and barrier (ftcc.h) across processes: groups of 1 to 5
 * members run each of them with several sizes, types, roots and in-place forms, mixed with
 * allreduce, blocking and 4 in flight; every result is checked against the exact one
 * (ft_expect_member(): the root's input, every member's slot, the reduction's own slot) and
 * across members, every record clean. Members that call different collectives, or a broadcast
 * from different roots, at the same point get FTCC_ERR_MISMATCH and go on; a connection reset
 * between live members inside a broadcast and an allgather removes nobody. Bad arguments are
 * FTCC_ERR_INVALID at once.
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

static void colls_teardown(void)
{
	ft_group_end(&grp, 2000, NULL, NULL);
	chaos_proc_cleanup();
}

TestSuite(ft_mproc_colls, .fini = colls_teardown, .timeout = 60);

static uint32_t ids_all(int n)
{
	return (1u << n) - 1;
}

static const char *describe(void)
{
	ft_group_describe(&grp, 4, text, sizeof(text));
	return text;
}

/* Runs @o's script (@limit ops) on @n members: every op must end on every member with a result
 * (op @mismatched - 1: FTCC_ERR_MISMATCH) over all members, checked. */
static void run_checked(const char *name, int n, struct ft_group_opts *o, uint64_t limit,
			uint64_t mismatched)
{
	char why[1024];
	int checked;

	o->limit = limit;
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
			cr_expect(want || op->mask == ids_all(n),
				  "member %d op %llu: contributors %#x", i, (unsigned long long)s,
				  op->mask);
		}
	}
	checked = ft_group_invariants(&grp, ids_all(n), why, sizeof(why));
	cr_expect_eq((uint64_t)checked, limit - !!mismatched, "%s\n%s", checked < 0 ? why : "",
		     describe());
	cr_expect_eq(ft_group_end(&grp, 5000, NULL, NULL), 0, "members did not exit cleanly");
}

static const size_t sizes[] = { 1, 1000, 70000 };
static const enum ftcc_dtype types[] = { FTCC_FLOAT32, FTCC_INT32, FTCC_BFLOAT16 };

/* Each kind x 3 sizes, allgather and reduce-scatter in and out of place (the reduce-scatter's
 * result in its own slot of the input), roots and operators rotating, with an allreduce between
 * kinds (20 ops). */
static int all_kinds(struct ft_spec *script, int n)
{
	int k = 0;

	for (int kind = FT_BROADCAST; kind <= FT_BARRIER; kind++) {
		for (int s = 0; s < 3; s++) {
			for (int ip = 0;
			     ip < (kind == FT_ALLGATHER || kind == FT_REDUCE_SCATTER ? 2 : 1) &&
			     !(kind == FT_BARRIER && s);
			     ip++) {
				script[k] = (struct ft_spec){
					.count = sizes[s],
					.dtype = types[(k + s) % 3],
					.op = kind == FT_REDUCE_SCATTER ? (enum ftcc_redop)(k % 5) :
									  FTCC_SUM,
					.inplace = ip,
					.kind = (enum ft_kind)kind,
					.root = (uint32_t)(k % n),
				};
				k++;
			}
		}
		script[k++] = (struct ft_spec){ 4099, FTCC_FLOAT32, FTCC_AVG, kind % 2 };
	}
	return k;
}

static void kinds_on(const char *name, int n, int depth)
{
	struct ft_spec script[40];
	struct ft_group_opts o = { .script = script, .depth = depth };

	o.nspec = all_kinds(script, n);
	run_checked(name, n, &o, (uint64_t)o.nspec, 0);
}

Test(ft_mproc_colls, kinds_n1)
{
	kinds_on("c1", 1, 1);
}

Test(ft_mproc_colls, kinds_n2)
{
	kinds_on("c2", 2, 1);
}

Test(ft_mproc_colls, kinds_n3_in_flight)
{
	kinds_on("c3", 3, 4);
}

Test(ft_mproc_colls, kinds_n4)
{
	kinds_on("c4", 4, 1);
}

Test(ft_mproc_colls, kinds_n5_in_flight)
{
	kinds_on("c5", 5, 4);
}

/* Broadcasts above FTCC_RD_MAX_BYTES run as a pipelined chain from the root (algo_bc.c): byte
 * counts that are no multiple of a segment or a page, from 2 to 64 segments (more segments
 * than the window), every member as the root in turn, blocking and 4 in flight. */
static void chain_on(const char *name, int n, int depth)
{
	static const size_t counts[] = { 65537, 300001, (1u << 20) + 3, (5u << 20) + 4097 };
	struct ft_spec script[16];
	struct ft_group_opts o = { .script = script, .depth = depth };

	for (int k = 0; k < 8; k++)
		script[k] = (struct ft_spec){ .count = counts[k % 4] / (k % 2 ? 4 : 1),
					      .dtype = k % 2 ? FTCC_FLOAT32 : FTCC_INT8,
					      .kind = FT_BROADCAST,
					      .root = (uint32_t)((k + k / 4) % n) };
	o.nspec = 8;
	run_checked(name, n, &o, 16, 0);
}

Test(ft_mproc_colls, broadcast_chain_n2)
{
	chain_on("bc2", 2, 1);
}

Test(ft_mproc_colls, broadcast_chain_n4_in_flight)
{
	chain_on("bc4", 4, 4);
}

/* Member 2 calls op 1 as another collective or as a broadcast from another root than the others':
 * op 1 ends with FTCC_ERR_MISMATCH on every member, and the next ops run normally. */
static void mismatch_case(const char *name, int op_kind, uint32_t root)
{
	struct ft_spec script[5], own[5];
	struct ft_group_opts o = { .script = script, .nspec = 5 };

	for (int k = 0; k < 5; k++) {
		script[k] = (struct ft_spec){ .count = 3000,
					      .dtype = FTCC_FLOAT32,
					      .op = FTCC_SUM,
					      .kind = FT_BROADCAST,
					      .root = 0 };
		own[k] = script[k];
	}
	own[1].kind = (enum ft_kind)op_kind;
	own[1].root = root;
	o.own_script[2] = own;
	run_checked(name, 3, &o, 5, 2);
}

Test(ft_mproc_colls, another_kind_is_a_mismatch)
{
	mismatch_case("cmk", FT_BARRIER, 0);
}

Test(ft_mproc_colls, another_root_is_a_mismatch)
{
	mismatch_case("cmr", FT_BROADCAST, 1);
}

/* A reset between live members inside a broadcast (op 4, member 1, its first segment) and an
 * allgather (op 7, member 2): each is attempted again, nobody removed, every result exact. */
Test(ft_mproc_colls, resets_between_live_members)
{
	struct ft_spec script[3] = {
		{ .count = 70000, .dtype = FTCC_FLOAT32, .kind = FT_BROADCAST, .root = 2 },
		{ .count = 30000, .dtype = FTCC_INT32, .kind = FT_ALLGATHER, .inplace = 1 },
		{ .count = 30000,
		  .dtype = FTCC_FLOAT32,
		  .op = FTCC_SUM,
		  .kind = FT_REDUCE_SCATTER },
	};
	struct ft_group_opts o = { .script = script, .nspec = 3, .limit = 12 };
	char why[1024];
	int checked;

	o.fault[1] = "bc:3:0:reset";
	o.fault[2] = "ag:7:0:reset";
	cr_assert_eq(ft_group_start(&grp, "creset", 3, &o), 0);
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
	/* A member may meet the new epoch before its first attempt: what shows is the epoch of a
	 * redone op, or the resumed flag of one finished from the data (whose epoch is its
	 * attempt's). */
	for (uint64_t s = 3; s <= 7; s += 4)
		cr_expect(ft_group_op(&grp, 0, s)->resumed ||
				  ft_group_op(&grp, 0, s)->epoch >
					  ft_group_op(&grp, 0, s - 1)->epoch,
			  "op %llu saw no reset\n%s", (unsigned long long)s, describe());
	checked = ft_group_invariants(&grp, 7, why, sizeof(why));
	cr_expect_eq(checked, 12, "%s\n%s", checked < 0 ? why : "", describe());
	cr_expect_eq(ft_group_end(&grp, 5000, NULL, NULL), 0, "members did not exit cleanly");
}

/* Bad arguments on a one-member group, which then still works. */
Test(ft_mproc_colls, bad_arguments_are_invalid)
{
	char addr[32];
	const char *addrs[1] = { addr };
	struct ftcc_config cfg;
	ftcc_comm_t *comm = NULL;
	ftcc_request_t *req = NULL;
	float buf[8] = { 1, 2, 3, 4, 5, 6, 7, 8 }, out[8];

	snprintf(addr, sizeof(addr), "127.0.0.1:%u", ft_group_free_port("127.0.0.1"));
	ftcc_config_init(&cfg);
	cfg.group = "cbad";
	cfg.size = 1;
	cfg.addrs = addrs;
	cr_assert_eq(ftcc_comm_create(&cfg, &comm), 0);
	cr_expect_eq(ftcc_broadcast(comm, buf, 4, FTCC_FLOAT32, 1, NULL), FTCC_ERR_INVALID,
		     "root outside the group");
	cr_expect_eq(ftcc_broadcast(comm, NULL, 4, FTCC_FLOAT32, 0, NULL), FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_broadcast(comm, buf, 4, (enum ftcc_dtype)99, 0, NULL), FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_allgather(comm, buf + 1, buf, 4, FTCC_FLOAT32, NULL), FTCC_ERR_INVALID,
		     "overlapping, not the own slot");
	cr_expect_eq(ftcc_allgather(comm, buf, NULL, 4, FTCC_FLOAT32, NULL), FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_reduce_scatter(comm, buf, out, 4, FTCC_FLOAT32, FTCC_REDOP_COUNT, NULL),
		     FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_ibarrier(comm, NULL), FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_ibroadcast(NULL, buf, 4, FTCC_FLOAT32, 0, &req), FTCC_ERR_INVALID);
	cr_expect_null(req);
	cr_expect_eq(ftcc_broadcast(comm, buf, 8, FTCC_FLOAT32, 0, NULL), 0);
	cr_expect_eq(buf[7], 8.0f);
	cr_expect_eq(ftcc_allgather(comm, buf, out, 8, FTCC_FLOAT32, NULL), 0);
	cr_expect_arr_eq(out, buf, sizeof(buf));
	cr_expect_eq(ftcc_barrier(comm, NULL), 0);
	/* a reduce-scatter started and never collected goes with the communicator (ASan: no
	 * leak of its buffer) */
	cr_expect_eq(ftcc_ireduce_scatter(comm, buf, out, 8, FTCC_FLOAT32, FTCC_SUM, &req), 0);
	cr_expect_eq(ftcc_comm_destroy(comm), 0);
}
