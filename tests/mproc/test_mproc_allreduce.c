/* SPDX-License-Identifier: BSD-3-Clause */
/* The fault-tolerant allreduce through the public C API (ftcc.h), across processes, with no faults:
 * groups of 1 to 5 member processes run scripts over every element type and operator, message sizes
 * from 1 element to 4 MiB, in place and out of place, blocking and with 4 ops in flight, both
 * algorithms; every result is checked bit for bit against the exact reduction, and every record
 * must say epoch 1, one attempt, every member. Bad arguments and configurations must give
 * FTCC_ERR_INVALID at once.
 *
 * Members run in their own processes (tests/lib/ft_group.h). No root needed. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stddef.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_proc.h"
#include "ft_group.h"
#include "ftcc/reduce.h"

/* n processes forming on a small, busy machine. */
#define FORM_MS 10000
/* A whole script; the largest moves a few 4 MiB buffers. */
#define RUN_MS 30000
/* ftcc.h: destroy is bounded like abort (100 ms); slack for a loaded machine, plus the other
 * members' destroy CPU time over the cores (tests/chaos/ft_chaos.h). */
#define DESTROY_BOUND_MS 500
/* A bad argument or configuration is refused at once. */
#define INVALID_BOUND_MS 1000

static struct ft_group grp;
static char text[1 << 16];

static void mproc_teardown(void)
{
	ft_group_end(&grp, 2000, NULL, NULL);
	chaos_proc_cleanup();
}

TestSuite(ft_mproc, .fini = mproc_teardown, .timeout = 60);

static uint32_t ids_all(int n)
{
	return (1u << n) - 1;
}

static const char *describe(void)
{
	size_t at = ft_group_describe(&grp, 4, text, sizeof(text));

	for (int i = 0; i < grp.n && at + 1 < sizeof(text); i++) {
		char log[2048];
		int k;

		ft_group_log(&grp, i, log, sizeof(log));
		k = snprintf(text + at, sizeof(text) - at, "--- member %d, end of its log:\n%s\n",
			     i, log);
		at = k < 0 ? at : at + (size_t)k < sizeof(text) ? at + (size_t)k : sizeof(text) - 1;
	}
	return text;
}

/* The view right after create: epoch 1 with every member, this one at its own index, member 0
 * coordinating, contributing, no op yet, no error. */
static void expect_view0(int n)
{
	for (int i = 0; i < n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);
		const struct ftcc_view *v = &r->view0;

		cr_expect_eq(r->view0_rc, 0, "member %d: ftcc_comm_view: %d", i, r->view0_rc);
		cr_expect_eq(v->epoch, 1, "member %d: epoch %llu after forming", i,
			     (unsigned long long)v->epoch);
		cr_expect_eq(v->nmembers, (uint32_t)n, "member %d: %u members", i, v->nmembers);
		cr_expect_eq(v->self_index, i, "member %d: self_index %d", i, v->self_index);
		cr_expect_eq(v->coordinator, 0, "member %d: coordinator %u", i, v->coordinator);
		cr_expect_eq(v->contributor, 1, "member %d: not a contributor", i);
		cr_expect_eq(v->next_seq, 0, "member %d: next_seq %llu before any op", i,
			     (unsigned long long)v->next_seq);
		cr_expect_eq(v->state, 0, "member %d: state %d", i, v->state);
		cr_expect_eq(v->boundary, 0, "member %d: epoch 1 begins at op %llu", i,
			     (unsigned long long)v->boundary);
		for (int k = 0; k < n && k < (int)v->nmembers; k++)
			cr_expect_eq(r->members0[k], (uint32_t)k, "member %d: members[%d] = %u", i,
				     k, r->members0[k]);
	}
}

/* Every member ran ops 0 .. @limit - 1, each complete, in order, in epoch 1 with every member and
 * one attempt, and ended with next_seq = @limit. */
static void expect_clean_records(int n, uint64_t first, uint64_t limit)
{
	for (int i = 0; i < n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);
		int64_t prev = 0;

		cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d ended with %s (%s)\n%s", i,
			     ftcc_strerror(atomic_load(&r->end_rc)), r->last_error, describe());
		cr_expect_eq(r->view1.next_seq, limit, "member %d: next_seq %llu after %llu ops", i,
			     (unsigned long long)r->view1.next_seq, (unsigned long long)limit);
		cr_expect_eq(r->view1.epoch, 1, "member %d: epoch %llu at the end", i,
			     (unsigned long long)r->view1.epoch);
		for (uint64_t s = first; s < limit; s++) {
			const struct ft_op *op = ft_group_op(&grp, i, s);

			cr_assert(op, "member %d: op %llu not done\n%s", i, (unsigned long long)s,
				  describe());
			cr_expect_eq(op->rc, 0, "member %d op %llu: %s", i, (unsigned long long)s,
				     ftcc_strerror(op->rc));
			cr_expect(op->epoch == 1 && op->attempts == 1 &&
					  op->ncontrib == (uint32_t)n && op->mask == ids_all(n) &&
					  !op->resumed && op->scale == 1.0,
				  "member %d op %llu: epoch %llu attempts %u ncontrib %u set %#x "
				  "resumed %d scale %g",
				  i, (unsigned long long)s, (unsigned long long)op->epoch,
				  op->attempts, op->ncontrib, op->mask, op->resumed, op->scale);
			cr_expect_geq(op->t_done, prev,
				      "member %d: op %llu completed before op %llu", i,
				      (unsigned long long)s, (unsigned long long)s - 1);
			prev = op->t_done;
		}
	}
}

/* Runs @o's script on @n members to the end and checks every record, leaving the group up; returns
 * the time it took in ms (formation excluded). */
static double run_script(const char *name, int n, struct ft_group_opts *o)
{
	uint64_t limit = o->limit ? o->limit : (uint64_t)o->nspec;
	char why[1024];
	int64_t t0, t1;
	int checked;

	cr_assert_eq(ft_group_start(&grp, name, n, o), 0, "could not start %d members", n);
	cr_assert_eq(ft_group_wait_created(&grp, ids_all(n), FORM_MS), 0,
		     "%d members did not form\n%s", n, describe());
	t0 = chaos_now_ns();
	cr_assert_eq(ft_group_wait_ended(&grp, ids_all(n), RUN_MS), 0,
		     "the script did not end within %d ms\n%s", RUN_MS, describe());
	t1 = chaos_now_ns();
	expect_view0(n);
	expect_clean_records(n, o->probe ? ft_group_cur(&grp, 0)->probe_seq[1] : 0, limit);
	/* no faults here: every member is steady */
	checked = ft_group_invariants(&grp, ids_all(n), why, sizeof(why));
	cr_expect_geq(checked, 0, "%s\n%s", why, describe());
	cr_expect_eq((uint64_t)checked,
		     limit - (o->probe ? ft_group_cur(&grp, 0)->probe_seq[1] : 0),
		     "%d ops checked, %llu run", checked, (unsigned long long)limit);
	return chaos_ms(t0, t1);
}

/* Stops the group: every member destroys its communicator, in time, and exits 0. */
static void end_clean(void)
{
	double destroy_ms, cpu_wait_ms;

	cr_expect_eq(ft_group_end(&grp, 5000, &destroy_ms, &cpu_wait_ms), 0,
		     "members did not exit cleanly");
	cr_expect_leq(
		destroy_ms, DESTROY_BOUND_MS + cpu_wait_ms,
		"destroy took %.1f ms (the other members' destroys' CPU time over the cores: %.1f ms)",
		destroy_ms, cpu_wait_ms);
}

static double run_clean(const char *name, int n, struct ft_group_opts *o)
{
	double ms = run_script(name, n, o);

	end_clean();
	return ms;
}

/* ---- every type and operator ----------------------------------------------------------------- */

static const size_t type_counts[] = { 1, 3, 1000, 65537 };

/* 12 types x 5 operators on 3 members; counts cycle through type_counts, in place every other op.
 */
static void all_types(const char *name, int n, const char *algo)
{
	struct ft_spec script[FTCC_DTYPE_COUNT * FTCC_REDOP_COUNT];
	struct ft_group_opts o = { .script = script, .algo = algo };
	int k = 0;

	for (int d = 0; d < FTCC_DTYPE_COUNT; d++) {
		for (int op = 0; op < FTCC_REDOP_COUNT; op++, k++) {
			script[k] = (struct ft_spec){
				.count = type_counts[k % 4],
				.dtype = (enum ftcc_dtype)d,
				.op = (enum ftcc_redop)op,
				.inplace = k % 2,
			};
		}
	}
	o.nspec = k;
	chaos_report("ft: %s: %d ops (12 types x 5 operators) on %d members in %.1f ms", name, k, n,
		     run_clean(name, n, &o));
}

Test(ft_mproc, all_types_ops_n3)
{
	all_types("types3", 3, NULL);
}

Test(ft_mproc, all_types_ops_n4_ring)
{
	all_types("types4r", 4, "ring");
}

Test(ft_mproc, all_types_ops_n5_rd)
{
	all_types("types5d", 5, "rd");
}

/* ---- message sizes and group sizes ----------------------------------------------------------- */

static const size_t sizes[] = { 1, 3, 1000, 65537, 1u << 20 };

/* Each size as float32 SUM (out of place) and int32 AVG (in place): 1 Mi elements are 4 MiB. */
static void sizes_on(const char *name, int n, const char *algo)
{
	struct ft_spec script[10];
	struct ft_group_opts o = { .script = script, .nspec = 10, .algo = algo };

	for (int k = 0; k < 5; k++) {
		script[2 * k] = (struct ft_spec){ sizes[k], FTCC_FLOAT32, FTCC_SUM, 0 };
		script[2 * k + 1] = (struct ft_spec){ sizes[k], FTCC_INT32, FTCC_AVG, 1 };
	}
	chaos_report("ft: %s: 1 .. 4 Mi elements on %d members (%s) in %.1f ms", name, n,
		     algo ? algo : "auto", run_clean(name, n, &o));
}

Test(ft_mproc, sizes_n1)
{
	sizes_on("sizes1", 1, NULL);
}

Test(ft_mproc, sizes_n2)
{
	sizes_on("sizes2", 2, NULL);
}

Test(ft_mproc, sizes_n3)
{
	sizes_on("sizes3", 3, NULL);
}

Test(ft_mproc, sizes_n4)
{
	sizes_on("sizes4", 4, NULL);
}

Test(ft_mproc, sizes_n5)
{
	sizes_on("sizes5", 5, NULL);
}

/* The ring with fewer elements than members (chunks of 0 elements) and the recursive doubling with
 * 4 MiB, 3 and 5 members (the non-power-of-two fold). */
Test(ft_mproc, sizes_n3_ring)
{
	sizes_on("sizes3r", 3, "ring");
}

Test(ft_mproc, sizes_n5_ring)
{
	sizes_on("sizes5r", 5, "ring");
}

Test(ft_mproc, sizes_n3_rd)
{
	sizes_on("sizes3d", 3, "rd");
}

Test(ft_mproc, sizes_n5_rd)
{
	sizes_on("sizes5d", 5, "rd");
}

/* ---- mixed transports -------------------------------------------------------------------------- */

/* Members 0 and 2 over ib (the verbs emulator), member 1 over tcp (a host whose HCA is down): the
 * pairs with member 1 move their frames over TCP, the pair 0-2 over ib; every op completes, the
 * same everywhere, and member 0 warns once that member 1 has no stream. */
Test(ft_mproc, mixed_transports_n3)
{
#ifdef FTCC_IBEMU_PATH
	static char log[1 << 20];
	struct ft_spec script[10];
	struct ft_group_opts o = { .script = script,
				   .nspec = 10,
				   .transport = { "ib", "tcp", "ib" } };

	for (int k = 0; k < 5; k++) {
		script[2 * k] = (struct ft_spec){ sizes[k], FTCC_FLOAT32, FTCC_SUM, 0 };
		script[2 * k + 1] = (struct ft_spec){ sizes[k], FTCC_INT32, FTCC_AVG, 1 };
	}
	chaos_report("ft: mixed: 1 .. 4 Mi elements on 3 members, one without ib, in %.1f ms",
		     run_script("mixed", 3, &o));
	ft_group_log(&grp, 0, log, sizeof(log));
	cr_expect(strstr(log, "member 2: frames over ib"), "0-2 not over ib\n%s", describe());
	cr_expect(strstr(log, "member 1 moves its frames over tcp"), "no warning about member 1");
	cr_expect(!strstr(log, "member 1: frames over ib"), "0-1 over ib");
	ft_group_log(&grp, 1, log, sizeof(log));
	cr_expect(!strstr(log, "frames over ib"), "member 1 used ib\n%s", describe());
	end_clean();
#else
	cr_skip_test("built without the ib transport (libibverbs-dev): no emulator");
#endif
}

/* Member 1's HCA never brings a connection up (every move to RTR times out), while its TCP path
 * works: its pairs move their frames over TCP after the stream's half failure timeout, with a
 * WARN, and nobody is removed or fails an op; the pair 0-2 stays on ib. */
Test(ft_mproc, stream_not_up_falls_back_to_tcp_n3)
{
#ifdef FTCC_IBEMU_PATH
	static char log[1 << 20];
	struct ft_spec script[4];
	struct ft_group_opts o = { .script = script,
				   .nspec = 4,
				   .transport = { "ib", "ib-no-rtr", "ib" } };

	for (int k = 0; k < 4; k++)
		script[k] = (struct ft_spec){ sizes[k], FTCC_FLOAT32, FTCC_SUM, 0 };
	chaos_report("ft: no stream with member 1: 4 ops on 3 members in %.1f ms",
		     run_script("nostream", 3, &o));
	ft_group_log(&grp, 0, log, sizeof(log));
	cr_expect(strstr(log, "member 2: frames over ib"), "0-2 not over ib\n%s", describe());
	cr_expect(strstr(log, "stream with member 1 is not up"), "no warning about member 1\n%s",
		  describe());
	ft_group_log(&grp, 1, log, sizeof(log));
	cr_expect(!strstr(log, "frames over ib ("), "member 1 has a stream\n%s", describe());
	end_clean();
#else
	cr_skip_test("built without the ib transport (libibverbs-dev): no emulator");
#endif
}

/* ---- ops in flight --------------------------------------------------------------------------- */

/* 32 ops of mixed sizes and types, 4 in flight at once, completed in order. */
static void async_on(const char *name, int n, int use_test)
{
	static const enum ftcc_dtype types[] = { FTCC_FLOAT32, FTCC_INT64, FTCC_BFLOAT16,
						 FTCC_UINT8 };
	struct ft_spec script[16];
	struct ft_group_opts o = {
		.script = script, .nspec = 16, .limit = 32, .depth = 4, .use_test = use_test
	};

	for (int k = 0; k < 16; k++) {
		script[k] = (struct ft_spec){
			.count = k % 5 == 4 ? 300000 : type_counts[k % 4],
			.dtype = types[k % 4],
			.op = (enum ftcc_redop)(k % FTCC_REDOP_COUNT),
			.inplace = k % 3 == 0,
		};
	}
	chaos_report("ft: %s: 32 ops, 4 in flight (%s), on %d members in %.1f ms", name,
		     use_test ? "ftcc_test" : "ftcc_wait", n, run_clean(name, n, &o));
}

Test(ft_mproc, async_depth4_wait_n3)
{
	async_on("async3", 3, 0);
}

Test(ft_mproc, async_depth4_test_n4)
{
	async_on("async4", 4, 1);
}

/* ---- bad arguments --------------------------------------------------------------------------- */

/* In a formed group of 2, NULL buffers, an unknown type or operator and a NULL request pointer are
 * refused with FTCC_ERR_INVALID without taking a sequence number; a count of 0 is refused or done
 * the same way on both members; then the script runs normally. */
Test(ft_mproc, bad_arguments_n2)
{
	static const char *const names[FT_PROBE_COUNT] = {
		"NULL sendbuf", "NULL recvbuf", "unknown dtype", "unknown op",
		"idtype 99",	"NULL req",	"count 0",
	};
	struct ft_spec script[2] = { { 1000, FTCC_FLOAT32, FTCC_SUM, 0 },
				     { 3, FTCC_INT8, FTCC_MAX, 1 } };
	struct ft_group_opts o = { .script = script, .nspec = 2, .limit = 4, .probe = 1 };
	const struct ft_run *r0, *r1;
	uint64_t zero_seqs;

	run_script("badargs", 2, &o);
	r0 = ft_group_cur(&grp, 0);
	r1 = ft_group_cur(&grp, 1);
	for (int k = 0; k < FT_PROBE_ZERO; k++) {
		cr_expect_eq(r0->probe_rc[k], FTCC_ERR_INVALID, "member 0: %s gave %d (%s)",
			     names[k], r0->probe_rc[k], ftcc_strerror(r0->probe_rc[k]));
		cr_expect_eq(r1->probe_rc[k], FTCC_ERR_INVALID, "member 1: %s gave %d (%s)",
			     names[k], r1->probe_rc[k], ftcc_strerror(r1->probe_rc[k]));
	}
	cr_expect(r0->probe_rc[FT_PROBE_ZERO] == 0 ||
			  r0->probe_rc[FT_PROBE_ZERO] == FTCC_ERR_INVALID,
		  "count 0 gave %d", r0->probe_rc[FT_PROBE_ZERO]);
	cr_expect_eq(r0->probe_rc[FT_PROBE_ZERO], r1->probe_rc[FT_PROBE_ZERO],
		     "count 0: member 0 got %d, member 1 %d", r0->probe_rc[FT_PROBE_ZERO],
		     r1->probe_rc[FT_PROBE_ZERO]);
	zero_seqs = r0->probe_rc[FT_PROBE_ZERO] == 0;
	for (int i = 0; i < 2; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		cr_expect_eq(r->probe_seq[0], 0, "member %d: next_seq %llu before the probes", i,
			     (unsigned long long)r->probe_seq[0]);
		cr_expect_eq(r->probe_seq[1], zero_seqs,
			     "member %d: next_seq %llu after the probes (count 0 %s)", i,
			     (unsigned long long)r->probe_seq[1],
			     zero_seqs ? "accepted" : "refused");
		cr_expect_eq(atomic_load(&r->end_rc), 0, "member %d ended with %d\n%s", i,
			     atomic_load(&r->end_rc), describe());
	}
	end_clean();
	chaos_report("ft: bad_arguments: count 0 is %s", zero_seqs ? "an op" : "refused");
}

/* Creates a communicator from @cfg in this process: must be refused with FTCC_ERR_INVALID, at once,
 * leaving *out NULL. */
static void expect_invalid_config(const char *what, const struct ftcc_config *cfg)
{
	ftcc_comm_t *comm = NULL;
	int64_t t = chaos_now_ns();
	int rc = ftcc_comm_create(cfg, &comm);
	double ms = chaos_ms(t, chaos_now_ns());

	cr_expect_eq(rc, FTCC_ERR_INVALID, "%s: ftcc_comm_create gave %d (%s)", what, rc,
		     ftcc_strerror(rc));
	cr_expect_null(comm, "%s: a communicator came back", what);
	cr_expect_leq(ms, INVALID_BOUND_MS, "%s: refused after %.1f ms", what, ms);
	if (comm) {
		ftcc_comm_abort(comm);
		ftcc_comm_destroy(comm);
	}
}

Test(ft_mproc, bad_config)
{
	static const char *const addrs[2] = { "127.0.0.1:1", "127.0.0.1:2" };
	char longname[80];
	struct ftcc_config cfg;
	ftcc_comm_t *comm = NULL;
	char buf[32] = { 0 };

	memset(longname, 'g', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
#define BASE()                                                                                     \
	do {                                                                                       \
		ftcc_config_init(&cfg);                                                            \
		cfg.group = "badcfg";                                                              \
		cfg.size = 2;                                                                      \
		cfg.rank = 0;                                                                      \
		cfg.addrs = addrs;                                                                 \
		cfg.coordinator = "embedded";                                                      \
		cfg.connect_timeout_ms = 500;                                                      \
	} while (0)
	BASE();
	cfg.rank = 2;
	expect_invalid_config("rank == size", &cfg);
	BASE();
	cfg.rank = 7;
	expect_invalid_config("rank > size", &cfg);
	BASE();
	cfg.size = 0;
	expect_invalid_config("size 0", &cfg);
	BASE();
	cfg.size = FTCC_MAX_MEMBERS + 1;
	expect_invalid_config("size above FTCC_MAX_MEMBERS", &cfg);
	BASE();
	cfg.group = NULL;
	expect_invalid_config("NULL group", &cfg);
	BASE();
	cfg.group = "";
	expect_invalid_config("empty group name", &cfg);
	BASE();
	cfg.group = longname;
	expect_invalid_config("79-byte group name", &cfg);
	BASE();
	cfg.addrs = NULL;
	expect_invalid_config("embedded without addresses", &cfg);
	BASE();
	cfg.degraded = (enum ftcc_degraded)9;
	expect_invalid_config("unknown degraded policy", &cfg);
	BASE();
	cfg.struct_size = 0;
	expect_invalid_config("not made by ftcc_config_init()", &cfg);
	BASE();
	cfg.struct_size -= 4;
	expect_invalid_config("a config of another size", &cfg);
	BASE();
	cfg.nstreams = FTCC_STREAMS_MAX + 1;
	expect_invalid_config("too many streams", &cfg);
	/* a struct of a header without nstreams: taken (one stream, whatever lies past it), so
	 * the create waits for the group, in vain here */
	BASE();
	cfg.struct_size = (uint32_t)offsetof(struct ftcc_config, nstreams);
	cfg.nstreams = FTCC_STREAMS_MAX + 1;
	cr_expect_eq(ftcc_comm_create(&cfg, &comm), FTCC_ERR_TIMEOUT,
		     "the config of an older header was not taken");
	cr_expect_null(comm);
	BASE();
	cfg.version = FTCC_VERSION_CODE(FTCC_VERSION_MAJOR + 1, 0, 0);
	expect_invalid_config("another major version", &cfg);
#undef BASE
	cr_expect_eq(ftcc_comm_create(NULL, &comm), FTCC_ERR_INVALID, "NULL config");
	cr_expect_null(comm);
	ftcc_config_init(&cfg);
	cr_expect_eq(ftcc_comm_create(&cfg, NULL), FTCC_ERR_INVALID, "NULL out");
	cr_expect_eq(ftcc_allreduce(NULL, buf, buf, 1, FTCC_FLOAT32, FTCC_SUM, NULL),
		     FTCC_ERR_INVALID, "allreduce on a NULL communicator");
}

/* ftcc_config_init() sets every field to its default, whatever was there. */
Test(ft_mproc, config_init_defaults)
{
	struct ftcc_config cfg;

	memset(&cfg, 0x5a, sizeof(cfg));
	ftcc_config_init(&cfg);
	cr_expect_eq(cfg.struct_size, sizeof(cfg));
	cr_expect_eq(cfg.version, FTCC_VERSION);
	cr_expect_null(cfg.group);
	cr_expect_null(cfg.addrs);
	cr_expect_null(cfg.coordinator);
	cr_expect_eq(cfg.join, 0);
	cr_expect_eq(cfg.catchup, 0);
	cr_expect_eq(cfg.degraded, FTCC_DEGRADED_DEFAULT);
	cr_expect_eq(cfg.timeout_ms, 0);
	cr_expect_eq(cfg.connect_timeout_ms, 0);
}

/* ---- error names ----------------------------------------------------------------------------- */

Test(ft_mproc, strerror_names_every_error)
{
	const char *seen[10];

	for (int e = FTCC_OK; e >= FTCC_ERR_MISMATCH; e--) {
		const char *s = ftcc_strerror(e);

		cr_assert(s && s[0], "ftcc_strerror(%d) is empty", e);
		for (int k = 0; k < -e; k++)
			cr_expect_str_neq(s, seen[k], "errors %d and %d share the name \"%s\"", e,
					  -k, s);
		seen[-e] = s;
	}
	cr_expect(ftcc_strerror(-100) && ftcc_strerror(-100)[0], "unknown error has no name");
	cr_expect(ftcc_strerror(7) && ftcc_strerror(7)[0], "positive value has no name");
	cr_expect_str_neq(ftcc_strerror(-100), ftcc_strerror(FTCC_ERR_LOST));
}

/* ---- version and limits ---------------------------------------------------------------------- */

Test(ft_mproc, version_matches_the_header)
{
	cr_expect_eq(ftcc_version(), FTCC_VERSION, "library %d, header %d", ftcc_version(),
		     FTCC_VERSION);
	cr_expect_eq(FTCC_VERSION,
		     FTCC_VERSION_MAJOR * 10000 + FTCC_VERSION_MINOR * 100 + FTCC_VERSION_PATCH);
	cr_expect_lt(FTCC_VERSION_MINOR, 100);
	cr_expect_lt(FTCC_VERSION_PATCH, 100);
}

struct busy_peer {
	struct ftcc_config cfg;
	ftcc_comm_t *comm;
	int rc;
};

static void *busy_peer_create(void *arg)
{
	struct busy_peer *p = arg;

	p->rc = ftcc_comm_create(&p->cfg, &p->comm);
	return NULL;
}

/* Member 1 of a group of 2 (another thread) issues nothing, so member 0's first op waits for
 * it: member 0 can start FTCC_MAX_INFLIGHT ops (one more while the first executes), then
 * FTCC_ERR_BUSY without taking a sequence number. Abort ends them all. */
Test(ft_mproc, busy_past_max_inflight)
{
	char addr[2][32];
	const char *addrs[2] = { addr[0], addr[1] };
	struct busy_peer p[2];
	pthread_t t;
	float in = 1.0f, out[8];
	struct ftcc_view v;
	uint64_t before;
	int started = 0, rc = 0;

	for (int i = 0; i < 2; i++) {
		snprintf(addr[i], sizeof(addr[i]), "127.0.0.1:%u", ft_group_free_port("127.0.0.1"));
		ftcc_config_init(&p[i].cfg);
		p[i].cfg.group = "busy";
		p[i].cfg.rank = (uint32_t)i;
		p[i].cfg.size = 2;
		p[i].cfg.addrs = addrs;
		p[i].cfg.connect_timeout_ms = FORM_MS;
		p[i].comm = NULL;
	}
	cr_assert_eq(pthread_create(&t, NULL, busy_peer_create, &p[1]), 0);
	busy_peer_create(&p[0]);
	pthread_join(t, NULL);
	cr_assert_eq(p[0].rc, 0, "member 0: %s", ftcc_strerror(p[0].rc));
	cr_assert_eq(p[1].rc, 0, "member 1: %s", ftcc_strerror(p[1].rc));
	while (started <= FTCC_MAX_INFLIGHT + 1) {
		ftcc_request_t *req;

		rc = ftcc_iallreduce(p[0].comm, &in, &out[started % 8], 1, FTCC_FLOAT32, FTCC_SUM,
				     &req);
		if (rc) {
			break;
		}
		started++;
	}
	cr_expect_eq(rc, FTCC_ERR_BUSY, "start %d gave %d (%s)", started + 1, rc,
		     ftcc_strerror(rc));
	cr_expect(started == FTCC_MAX_INFLIGHT || started == FTCC_MAX_INFLIGHT + 1,
		  "%d ops started before BUSY", started);
	cr_assert_eq(ftcc_comm_view(p[0].comm, &v, NULL, 0), 0);
	before = v.next_seq;
	cr_expect_eq(before, (uint64_t)started, "next_seq %llu", (unsigned long long)before);
	for (int i = 0; i < 2; i++) {
		ftcc_comm_abort(p[i].comm);
		cr_expect_eq(ftcc_comm_destroy(p[i].comm), 0);
	}
}

/* ---- the harness itself --------------------------------------------------------------------- */

/* The inputs are the small integers intended, in every encoding, and the expected result depends
 * on the contributor set: otherwise the checks above could pass on wrong results. */
Test(ft_mproc, harness_inputs_and_expectations)
{
	const struct ft_spec f32 = { 3, FTCC_FLOAT32, FTCC_SUM, 0 };
	const struct ft_spec avg = { 3, FTCC_FLOAT32, FTCC_AVG, 0 };
	const float want[3] = { -21, -19, -17 }; /* members 0 and 1 of op 0: (m + 1) + e - 12 */
	const float want_avg[3] = { -10.5f, -9.5f, -8.5f };
	float acc[3], tmp[3];
	double scale;
	uint16_t h[2];
	uint8_t b[2];

	cr_expect_eq(ft_expect(&f32, 0, 0x3, 4, FTCC_DEGRADED_SUM, acc, tmp, &scale),
		     ft_fnv(want, sizeof(want)));
	cr_expect_eq(scale, 1.0);
	cr_expect_neq(ft_expect(&f32, 0, 0x7, 4, FTCC_DEGRADED_SUM, acc, tmp, NULL),
		      ft_fnv(want, sizeof(want)), "the set does not matter");
	cr_expect_neq(ft_expect(&f32, 1, 0x3, 4, FTCC_DEGRADED_SUM, acc, tmp, NULL),
		      ft_fnv(want, sizeof(want)), "the op does not matter");
	ft_expect(&f32, 0, 0x3, 4, FTCC_DEGRADED_RESCALE, acc, tmp, &scale);
	cr_expect(scale == 2.0 && acc[0] == -42 && acc[2] == -34, "rescale: %g, %g", scale, acc[0]);
	cr_expect_eq(ft_expect(&avg, 0, 0x3, 4, FTCC_DEGRADED_RESCALE, acc, tmp, &scale),
		     ft_fnv(want_avg, sizeof(want_avg)), "AVG over 2: %g %g %g", acc[0], acc[1],
		     acc[2]);
	cr_expect_eq(scale, 1.0, "AVG is never rescaled");

	/* Member 0 of op 0, elements 0 and 1: -11 and -10 (float16, bfloat16 keeps h % 16: 1, 2). */
	ft_input(h, &(struct ft_spec){ 2, FTCC_FLOAT16, FTCC_SUM, 0 }, 0, 0);
	cr_expect(h[0] == 0xc980 && h[1] == 0xc900, "float16 -11, -10: %#x %#x", h[0], h[1]);
	ft_input(h, &(struct ft_spec){ 2, FTCC_BFLOAT16, FTCC_SUM, 0 }, 0, 0);
	cr_expect(h[0] == 0x3f80 && h[1] == 0x4000, "bfloat16 1, 2: %#x %#x", h[0], h[1]);
	/* fp8 inputs are 0/1: member 0 of op 1, elements 0 and 1 are 1 and 0. */
	ft_input(b, &(struct ft_spec){ 2, FTCC_FP8_E4M3, FTCC_SUM, 0 }, 0, 1);
	cr_expect(b[0] == 0x38 && b[1] == 0, "e4m3 1, 0: %#x %#x", b[0], b[1]);
	ft_input(b, &(struct ft_spec){ 2, FTCC_FP8_E5M2, FTCC_SUM, 0 }, 0, 1);
	cr_expect(b[0] == 0x3c && b[1] == 0, "e5m2 1, 0: %#x %#x", b[0], b[1]);
	/* PROD inputs are 1 or 2. */
	ft_input(b, &(struct ft_spec){ 2, FTCC_FP8_E5M2, FTCC_PROD, 0 }, 0, 0);
	cr_expect(b[0] == 0x40 && b[1] == 0x3c, "e5m2 PROD 2, 1: %#x %#x", b[0], b[1]);
}

/* The agreement check catches a wrong result, a disagreement and a wrong contributor set: the
 * records of a clean run are altered one at a time in the shared page. */
Test(ft_mproc, harness_check_catches_bad_records)
{
	struct ft_spec script[2] = { { 1000, FTCC_FLOAT32, FTCC_SUM, 0 },
				     { 3, FTCC_INT64, FTCC_MIN, 1 } };
	struct ft_group_opts o = { .script = script, .nspec = 2, .limit = 4 };
	struct ft_op *a, *b, save_a, save_b;
	char why[1024];

	run_script("selfcheck", 2, &o);
	a = (struct ft_op *)ft_group_op(&grp, 0, 2);
	b = (struct ft_op *)ft_group_op(&grp, 1, 2);
	cr_assert(a && b);
	save_a = *a;
	save_b = *b;
	a->sum ^= 1;
	cr_expect_lt(ft_group_check(&grp, why, sizeof(why)), 0, "one changed result passed");
	cr_expect(strstr(why, "disagree"), "%s", why);
	b->sum ^= 1;
	cr_expect_lt(ft_group_check(&grp, why, sizeof(why)), 0, "a wrong result passed");
	cr_expect(strstr(why, "expected"), "%s", why);
	*a = save_a;
	*b = save_b;
	a->mask = b->mask = 0x1;
	a->ncontrib = b->ncontrib = 1;
	cr_expect_lt(ft_group_check(&grp, why, sizeof(why)), 0, "a wrong set passed");
	*a = save_a;
	*b = save_b;
	a->rc = b->rc = FTCC_ERR_DEGRADED;
	cr_expect_lt(ft_group_check(&grp, why, sizeof(why)), 0, "a wrong result code passed");
	*a = save_a;
	*b = save_b;
	cr_expect_eq(ft_group_check(&grp, why, sizeof(why)), 4, "%s", why);

	/* The invariants across processes: one member list per epoch number, a steady member in
	 * every contributor set, a steady member never out of the group. */
	{
		struct ft_run *r1 = (struct ft_run *)ft_group_cur(&grp, 1);
		struct ft_epoch_seen save_e = r1->epochs[0];
		int save_rc = atomic_load(&r1->end_rc);

		cr_assert_gt(atomic_load(&r1->nepochs), 0, "no epoch recorded");
		cr_expect_eq(ft_group_invariants(&grp, 0x3, why, sizeof(why)), 4, "%s", why);
		r1->epochs[0].mask = 0x1;
		cr_expect_lt(ft_group_invariants(&grp, 0x3, why, sizeof(why)), 0,
			     "two member lists for one epoch passed");
		cr_expect(strstr(why, "two member lists"), "%s", why);
		r1->epochs[0] = save_e;
		a->mask = b->mask = 0x1;
		a->ncontrib = b->ncontrib = 1;
		cr_expect_lt(ft_group_invariants(&grp, 0x2, why, sizeof(why)), 0,
			     "a steady member missing from a set passed");
		*a = save_a;
		*b = save_b;
		atomic_store(&r1->end_rc, FTCC_ERR_LOST);
		cr_expect_lt(ft_group_invariants(&grp, 0x2, why, sizeof(why)), 0,
			     "a steady member out of the group passed");
		cr_expect(strstr(why, "never faulted"), "%s", why);
		atomic_store(&r1->end_rc, save_rc);
		cr_expect_eq(ft_group_invariants(&grp, 0x3, why, sizeof(why)), 4, "%s", why);
	}
	end_clean();
}
