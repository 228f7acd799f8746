/* SPDX-License-Identifier: BSD-3-Clause */
/* ABI tests of the CollNet plug-in: the exported tables (v11 .. v8) and their devices,
 * reduceSupport, groups of 2, 3 and 4 node heads (cn_heads.h) running long mixed scripts (every type
 * class, every operator, in place, 0 elements to 4 MiB) with every op checked against the exact
 * result on every head, 64 requests in flight, one 64 MiB op, misuse of every call, and
 * load / init / connect / close / unload cycles that must give back threads and fds. Groups
 * that come apart or never form are in test_collnet_abi_fail.c.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>

#include "abi_fixture.h"
#include "chaos_proc.h"
#include "cn_heads.h"

#define GROUP_TIMEOUT_MS 60000
/* The failure timeout of the heads here, where no fault is injected: a head silent this long
 * was stopped by the machine, never by what these tests check. With the chaos tests' 1 s, a
 * group of four lost two live heads to a stall of every head process of 4.2 to 4.6 s (two of
 * them stopped in the same millisecond and resumed in the same millisecond: a virtual CPU the
 * hypervisor held, not the plug-in). The short tests below (64 requests in flight, one 64 MiB
 * op) keep the 1 s: heartbeats must never wait behind data, however large. */
#define QUIET_TIMEOUT_MS 15000

/* Each Criterion test runs in its own process, so file-scope state is per test. */
static struct cn_heads g;
static char msg[400000];
static char err[512];

static void cn_fini(void)
{
	cn_heads_end(&g);
	chaos_proc_cleanup();
}

/* One Criterion test per CollNet table (suites collnet_v11 .. collnet_v8) from
 * `static void body(int version)`. */
#define CN_ALL_VERSIONS(body, secs)                                                                \
	Test(collnet_v11, body, .init = abi_setup, .fini = cn_fini, .timeout = secs)               \
	{                                                                                          \
		body(11);                                                                          \
	}                                                                                          \
	Test(collnet_v10, body, .init = abi_setup, .fini = cn_fini, .timeout = secs)               \
	{                                                                                          \
		body(10);                                                                          \
	}                                                                                          \
	Test(collnet_v9, body, .init = abi_setup, .fini = cn_fini, .timeout = secs)                \
	{                                                                                          \
		body(9);                                                                           \
	}                                                                                          \
	Test(collnet_v8, body, .init = abi_setup, .fini = cn_fini, .timeout = secs)                \
	{                                                                                          \
		body(8);                                                                           \
	}

/* The state of every head and the end of each one's log, for assertion messages. */
static const char *explain(void)
{
	return cn_heads_explain(&g, 200000, msg, sizeof(msg));
}

/* ---- tables ---------------------------------------------------------------------------------- */

/* A loaded CollNet table of any version. */
struct cn_table {
	int version;
	void *lib;
	union {
		const void *any;
		const ncclCollNet_v11_t *v11;
		const ncclCollNet_v10_t *v10;
		const ncclCollNet_v9_t *v9;
		const ncclCollNet_v8_t *v8;
	} t;
	void *ctx;
};

static void table_load(struct cn_table *c, int version)
{
	char sym[40];

	memset(c, 0, sizeof(*c));
	c->version = version;
	c->lib = dlopen(FTCC_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	cr_assert_not_null(c->lib, "dlopen: %s", dlerror());
	snprintf(sym, sizeof(sym), "ncclCollNetPlugin_v%d", version);
	c->t.any = dlsym(c->lib, sym);
	cr_assert_not_null(c->t.any, "dlsym %s: %s", sym, dlerror());
}

static ncclResult_t table_init(struct cn_table *c)
{
	switch (c->version) {
	case 11:
		return c->t.v11->init(&c->ctx, 0xabcdef0011223344ull, abi_logger);
	case 10:
		return c->t.v10->init(abi_logger);
	case 9:
		return c->t.v9->init(abi_logger);
	default:
		return c->t.v8->init(abi_logger);
	}
}

/* The name getProperties gives device @dev, through the table's own properties layout. */
static ncclResult_t table_dev_name(struct cn_table *c, int dev, char *name, size_t len)
{
	ncclNetProperties_v11_t p11 = { 0 };
	ncclNetProperties_v10_t p10 = { 0 };
	ncclNetProperties_v9_t p9 = { 0 };
	ncclNetProperties_v8_t p8 = { 0 };
	const char *n = NULL;
	ncclResult_t res;

	switch (c->version) {
	case 11:
		res = c->t.v11->getProperties(dev, &p11);
		n = p11.name;
		break;
	case 10:
		res = c->t.v10->getProperties(dev, &p10);
		n = p10.name;
		break;
	case 9:
		res = c->t.v9->getProperties(dev, &p9);
		n = p9.name;
		break;
	default:
		res = c->t.v8->getProperties(dev, &p8);
		n = p8.name;
		break;
	}
	snprintf(name, len, "%s", n ? n : "(null)");
	return res;
}

/* Member @member of the loaded table (a name or a function pointer), as a const void *. */
#define TABLE_FIELD(c, member)                                                                     \
	((c)->version == 11 ? (const void *)(c)->t.v11->member :                                   \
	 (c)->version == 10 ? (const void *)(c)->t.v10->member :                                   \
	 (c)->version == 9  ? (const void *)(c)->t.v9->member :                                    \
			      (const void *)(c)->t.v8->member)

/* Calls @member of the loaded table, for the members whose signature every version shares. */
#define TABLE_SAME(c, member, ...)                                                                 \
	((c)->version == 11 ? (c)->t.v11->member(__VA_ARGS__) :                                    \
	 (c)->version == 10 ? (c)->t.v10->member(__VA_ARGS__) :                                    \
	 (c)->version == 9  ? (c)->t.v9->member(__VA_ARGS__) :                                     \
			      (c)->t.v8->member(__VA_ARGS__))

/* The table is exported, named "ftcc", offers allreduce only, and has exactly the net table's
 * devices under the same names (NCCL pairs a net and a collnet device by name). */
static void tables(int version)
{
	struct cn_table c;
	struct abi_net net;
	int ndev = 0, nnet = 0;

	table_load(&c, version);
	cr_assert_str_eq(TABLE_FIELD(&c, name), "ftcc");
	cr_assert_null(TABLE_FIELD(&c, iallgather), "v%d iallgather is set", version);
	cr_assert_null(TABLE_FIELD(&c, ireducescatter), "v%d ireducescatter is set", version);
	cr_assert_eq(table_init(&c), ncclSuccess);
	cr_assert_eq(TABLE_SAME(&c, devices, &ndev), ncclSuccess);
	cr_assert_eq(abi_net_load(&net, 11, err, sizeof(err)), 0, "%s", err);
	cr_assert_eq(abi_net_init(&net), ncclSuccess);
	cr_assert_eq(abi_devices(&net, &nnet), ncclSuccess);
	cr_assert(ndev > 0 && ndev == nnet, "collnet v%d: %d devices, net: %d", version, ndev,
		  nnet);
	for (int d = 0; d < ndev; d++) {
		ncclNetProperties_v11_t p;
		char cname[128];

		cr_assert_eq(table_dev_name(&c, d, cname, sizeof(cname)), ncclSuccess, "dev %d", d);
		cr_assert_eq(abi_props(&net, d, &p), ncclSuccess);
		cr_assert_str_eq(cname, p.name, "device %d: collnet \"%s\", net \"%s\"", d, cname,
				 p.name);
	}
	if (version == 11)
		cr_assert_eq(c.t.v11->finalize(c.ctx), ncclSuccess);
	cr_assert_eq(abi_net_finalize(&net), ncclSuccess);
	abi_net_unload(&net);
	dlclose(c.lib);
}
CN_ALL_VERSIONS(tables, 30)

/* reduceSupport: every built-in operator NCCL asks about on every type, no user-defined operator
 * or unknown type, and an error (not a crash) for a NULL answer. */
static void reduce_support(int version)
{
	struct cn_table c;
	int s;

	table_load(&c, version);
	cr_assert_eq(table_init(&c), ncclSuccess);
	for (int op = 0; op < CN_NCCL_OPS; op++) {
		for (int ty = 0; ty < CN_NCCL_TYPES; ty++) {
			s = -1;
			cr_assert_eq(TABLE_SAME(&c, reduceSupport, (ncclDataType_t)ty,
						(ncclRedOp_t)op, &s),
				     ncclSuccess, "op %d type %d", op, ty);
			cr_assert_eq(s, 1, "op %d type %d unsupported", op, ty);
		}
	}
	s = -1;
	cr_assert_eq(TABLE_SAME(&c, reduceSupport, ncclFloat32, (ncclRedOp_t)(ncclNumOps + 3), &s),
		     ncclSuccess);
	cr_assert_eq(s, 0, "a user-defined operator is supported");
	s = -1;
	cr_assert_eq(TABLE_SAME(&c, reduceSupport, (ncclDataType_t)ncclNumTypes, ncclSum, &s),
		     ncclSuccess);
	cr_assert_eq(s, 0, "type %d is supported", ncclNumTypes);
	s = -1;
	cr_assert_eq(TABLE_SAME(&c, reduceSupport, (ncclDataType_t)-1, ncclSum, &s), ncclSuccess);
	cr_assert_eq(s, 0, "type -1 is supported");
	cr_assert_neq(TABLE_SAME(&c, reduceSupport, ncclFloat32, ncclSum, NULL), ncclSuccess);
	if (version == 11)
		cr_assert_eq(c.t.v11->finalize(c.ctx), ncclSuccess);
	dlclose(c.lib);
}
CN_ALL_VERSIONS(reduce_support, 30)

/* ---- groups ---------------------------------------------------------------------------------- */

/* A mixed script: every type class, every operator NCCL hands to CollNet, in place and not,
 * from 0 elements to 4 MiB. */
static const struct ft_spec mixed[] = {
	{ 0, FTCC_FLOAT32, FTCC_SUM, 0 },	 { 1, FTCC_INT32, FTCC_SUM, 0 },
	{ 1, FTCC_FLOAT64, FTCC_MAX, 1 },	 { 7, FTCC_BFLOAT16, FTCC_SUM, 0 },
	{ 33, FTCC_FLOAT16, FTCC_MIN, 0 },	 { 100, FTCC_INT8, FTCC_SUM, 1 },
	{ 1000, FTCC_UINT64, FTCC_PROD, 0 },	 { 4096, FTCC_FLOAT32, FTCC_SUM, 1 },
	{ 65536, FTCC_INT32, FTCC_MAX, 0 },	 { 3, FTCC_UINT8, FTCC_MIN, 0 },
	{ 12345, FTCC_FLOAT64, FTCC_SUM, 0 },	 { 1 << 19, FTCC_FLOAT32, FTCC_SUM, 0 },
	{ 257, FTCC_INT64, FTCC_MIN, 1 },	 { 999, FTCC_BFLOAT16, FTCC_PROD, 0 },
	{ 5000, FTCC_FLOAT16, FTCC_MAX, 1 },	 { 0, FTCC_INT32, FTCC_MAX, 1 },
	{ 1 << 20, FTCC_BFLOAT16, FTCC_SUM, 1 }, { 64, FTCC_FP8_E4M3, FTCC_SUM, 0 },
	{ 64, FTCC_FP8_E5M2, FTCC_MAX, 0 },	 { 2, FTCC_UINT32, FTCC_PROD, 1 },
	{ 100000, FTCC_INT8, FTCC_MAX, 0 },	 { 1 << 18, FTCC_FLOAT64, FTCC_MIN, 0 },
	{ 31, FTCC_FLOAT32, FTCC_PROD, 0 },	 { 8191, FTCC_UINT64, FTCC_SUM, 0 },
	{ 1 << 20, FTCC_FLOAT32, FTCC_SUM, 1 },	 { 777, FTCC_FLOAT64, FTCC_PROD, 1 },
};
#define NMIXED ((int)(sizeof(mixed) / sizeof(mixed[0])))

/* Small ops only (up to 64 KiB), for deep queues. */
static const struct ft_spec small[] = {
	{ 1, FTCC_FLOAT32, FTCC_SUM, 0 },     { 4096, FTCC_INT32, FTCC_MAX, 1 },
	{ 0, FTCC_FLOAT64, FTCC_SUM, 0 },     { 1000, FTCC_BFLOAT16, FTCC_SUM, 0 },
	{ 16384, FTCC_FLOAT32, FTCC_MIN, 0 }, { 77, FTCC_UINT64, FTCC_PROD, 1 },
	{ 8192, FTCC_FLOAT64, FTCC_SUM, 1 },  { 3000, FTCC_INT8, FTCC_SUM, 0 },
};
#define NSMALL ((int)(sizeof(small) / sizeof(small[0])))

/* Waits for every head of a group that runs its whole script to close by itself, then checks
 * what each head reports and every op's result (all full: nobody left). */
static void group_finish(int nops)
{
	uint32_t all = (1u << g.n) - 1;
	int64_t t0 = chaos_now_ns();
	int full = 0, deg = 0, checked;

	cr_assert_eq(cn_heads_wait_stage(&g, all, CN_ST_CLOSED, GROUP_TIMEOUT_MS), 0, "%s",
		     explain());
	cr_assert_eq(cn_heads_stop(&g, all, 0, 10000), 0, "heads did not exit: %s", explain());
	for (int i = 0; i < g.n; i++) {
		const struct cn_head *h = cn_heads_head(&g, i);

		cr_assert_eq(h->connect_res, ncclSuccess, "%s", explain());
		cr_assert_eq(atomic_load(&h->err), 0, "head %d: %s", i, explain());
		cr_assert_eq(atomic_load(&h->ndone), nops, "head %d: %s", i, explain());
		cr_assert_eq(h->inflight_at_close, 0);
		for (int k = 0; k < CN_NCLOSE; k++)
			cr_assert_eq(h->close_res[k], ncclSuccess, "head %d close %d: %s", i, k,
				     explain());
		/* Every head must answer reduceSupport alike, or NCCL's nodes would disagree on
		 * whether an op goes over CollNet. */
		cr_assert_eq(h->ndev, cn_heads_head(&g, 0)->ndev);
		cr_assert_eq(memcmp(h->support, cn_heads_head(&g, 0)->support, sizeof(h->support)),
			     0, "head %d answers reduceSupport differently", i);
		for (int op = 0; op < CN_NCCL_OPS; op++)
			for (int ty = 0; ty < CN_NCCL_TYPES; ty++)
				cr_assert_eq(h->support[op][ty], 1, "head %d op %d type %d", i, op,
					     ty);
	}
	checked = cn_heads_check(&g, all, 0, INT64_MAX, FTCC_DEGRADED_RESCALE, &full, &deg, err,
				 sizeof(err));
	cr_assert_eq(checked, nops, "%s", checked < 0 ? err : explain());
	cr_assert_eq(full, nops);
	cr_assert_eq(deg, 0);
	chaos_report(
		"collnet v%d: %d heads, %d ops depth %d ran and checked in %.0f ms (connect %.0f ms)",
		g.o.version, g.n, nops, g.o.depth, chaos_ms(t0, chaos_now_ns()),
		chaos_ms(cn_heads_head(&g, 0)->t_connect0, cn_heads_head(&g, 0)->t_connect1));
}

static void group(int version, int n, int nops)
{
	struct cn_opts o = {
		.version = version,
		.depth = 8,
		.nops = nops,
		.script = mixed,
		.nspec = NMIXED,
		.timeout_ms = QUIET_TIMEOUT_MS,
	};

	cr_assert_eq(cn_heads_start(&g, n, &o), 0);
	group_finish(nops);
}

static void group2(int version)
{
	group(version, 2, 300);
}
CN_ALL_VERSIONS(group2, 120)

static void group3(int version)
{
	group(version, 3, 240);
}
CN_ALL_VERSIONS(group3, 120)

static void group4(int version)
{
	group(version, 4, 200);
}
CN_ALL_VERSIONS(group4, 120)

/* The most requests in flight at once on head @i, from its records. */
static int max_in_flight(int i)
{
	const struct cn_head *h = cn_heads_head(&g, i);
	int64_t n = atomic_load(&h->ndone);
	int best = 0;

	for (int64_t s = 0; s < n; s++) {
		int k = 0;

		for (int64_t j = 0; j < n; j++)
			k += h->ops[j].t_post <= h->ops[s].t_post &&
			     h->ops[j].t_done > h->ops[s].t_post;
		best = k > best ? k : best;
	}
	return best;
}

/* 64 requests in flight, far more than NCCL's 8 per channel: still accepted and exact. */
Test(collnet_v11, depth64, .init = abi_setup, .fini = cn_fini, .timeout = 120)
{
	struct cn_opts o = {
		.version = 11,
		.depth = 64,
		.nops = 512,
		.script = small,
		.nspec = NSMALL,
	};
	int most;

	cr_assert_eq(cn_heads_start(&g, 2, &o), 0);
	group_finish(512);
	most = max_in_flight(0);
	cr_assert_geq(most, 33, "at most %d requests were in flight at once", most);
	chaos_report("collnet depth 64: up to %d requests in flight", most);
}

/* One 64 MiB float32 op between two heads (1 GiB would not fit CI memory). */
Test(collnet_v11, large_64mib, .init = abi_setup, .fini = cn_fini, .timeout = 120)
{
	static const struct ft_spec big[] = { { 16u << 20, FTCC_FLOAT32, FTCC_SUM, 0 } };
	struct cn_opts o = { .version = 11, .depth = 1, .nops = 1, .script = big, .nspec = 1 };
	const struct cn_head *h;

	cr_assert_eq(cn_heads_start(&g, 2, &o), 0);
	group_finish(1);
	h = cn_heads_head(&g, 0);
	cr_assert_eq(h->ops[0].size, 64 << 20);
	chaos_report("collnet 64 MiB float32 sum, 2 heads: %.1f ms",
		     chaos_ms(h->ops[0].t_post, h->ops[0].t_done));
}

/* The lanes head @i's plug-in said it runs in its connect line ("..., N lanes), connected"),
 * or -1. */
static int lanes_said(int i)
{
	static char log[1 << 20];
	const char *p, *q;

	cn_heads_log(&g, i, log, sizeof(log));
	p = strstr(log, "CollNet: node ");
	q = p ? strstr(p, " lanes), connected") : NULL;
	if (!q)
		return -1;
	while (q > p && q[-1] >= '0' && q[-1] <= '9')
		q--;
	return atoi(q);
}

/* Three heads with @setting ("FTCC_LANES=n") or none, ops 16 deep: every op exact, and each head
 * runs @want lanes. */
static void lanes_case(const char *setting, int want)
{
	struct cn_opts o = {
		.version = 11,
		.depth = 16,
		.nops = 240,
		.script = mixed,
		.nspec = NMIXED,
		.timeout_ms = QUIET_TIMEOUT_MS,
	};

	setenv("NCCL_DEBUG", "INFO", 1); /* the heads' connect line names their lanes */
	unsetenv("FTCC_LANES");
	for (int i = 0; i < 3; i++)
		o.env[i] = setting;
	cr_assert_eq(cn_heads_start(&g, 3, &o), 0);
	group_finish(240);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(lanes_said(i), want, "head %d runs %d lanes, not %d: %s", i,
			     lanes_said(i), want, explain());
}

/* FTCC_LANES is 0 by default: the CollNet plug-in then runs 4 lanes. */
Test(collnet_v11, four_lanes_by_default, .init = abi_setup, .fini = cn_fini, .timeout = 120)
{
	lanes_case(NULL, 4);
}

/* FTCC_LANES set: that many lanes (neither the default nor the fallback of one). */
Test(collnet_v11, ftcc_lanes_sets_the_lanes, .init = abi_setup, .fini = cn_fini, .timeout = 120)
{
	lanes_case("FTCC_LANES=2", 2);
}

/* ---- argument errors ------------------------------------------------------------------------- */

static ncclResult_t table_listen(struct cn_table *c, void *handle, void **lcomm)
{
	switch (c->version) {
	case 11:
		return c->t.v11->listen(c->ctx, 0, handle, lcomm);
	case 10:
		return c->t.v10->listen(0, handle, lcomm);
	case 9:
		return c->t.v9->listen(0, handle, lcomm);
	default:
		return c->t.v8->listen(0, handle, lcomm);
	}
}

static ncclResult_t table_iallreduce(struct cn_table *c, void *cc, void *send, void *recv,
				     size_t count, ncclDataType_t type, ncclRedOp_t op, void *mh,
				     void **req)
{
	if (c->version == 8)
		return c->t.v8->iallreduce(cc, send, recv, (int)count, type, op, mh, mh, req);
	return TABLE_SAME(c, iallreduce, cc, send, recv, count, type, op, mh, mh, req);
}

static ncclResult_t table_finalize(struct cn_table *c)
{
	return c->version == 11 ? c->t.v11->finalize(c->ctx) : ncclSuccess;
}

/* Loads and inits table v@version, listens and connects a group of this one node. */
static void open_single(struct cn_table *c, int version, char *handle, void **lcomm, void **cc)
{
	void *hs[1] = { handle };

	table_load(c, version);
	cr_assert_eq(table_init(c), ncclSuccess);
	cr_assert_eq(table_listen(c, handle, lcomm), ncclSuccess);
	cr_assert_eq(TABLE_SAME(c, connect, hs, 1, 0, *lcomm, cc), ncclSuccess);
	cr_assert_not_null(*cc);
}

/* Polls test() on @req up to 5 s. */
static ncclResult_t wait_req(struct cn_table *c, void *req, int *size)
{
	int64_t deadline = chaos_now_ns() + 5000000000ll;
	int done = 0;
	ncclResult_t res;

	do {
		res = TABLE_SAME(c, test, req, &done, size);
	} while (res == ncclSuccess && !done && chaos_now_ns() < deadline);
	cr_assert(done || res != ncclSuccess, "request not done after 5 s");
	return res;
}

/* Misuse of every call: NULL out-pointers, pointers to memory that is no plug-in object, unknown
 * types and operators, negative counts, device memory, impossible ranks. Each fails with an
 * error and leaves its out-pointer NULL; none crashes; the collComm still works afterwards. */
static void bad_args(int version)
{
	struct cn_table c;
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	void *lcomm = NULL, *cc = NULL, *mh = NULL, *req, *out, *hs[1] = { handle };
	void *zero = calloc(1, 1 << 16);
	float in[16], res_buf[16];
	int done = 0, size = -1;

	cr_assert_not_null(zero);
	for (int i = 0; i < 16; i++)
		in[i] = (float)i;
	open_single(&c, version, handle, &lcomm, &cc);
	cr_assert_eq(TABLE_SAME(&c, regMr, cc, in, sizeof(in), NCCL_PTR_HOST, &mh), ncclSuccess);
	out = (void *)1;
	cr_assert_neq(TABLE_SAME(&c, regMr, cc, in, sizeof(in), NCCL_PTR_CUDA, &out), ncclSuccess);
	cr_assert_null(out, "regMr(NCCL_PTR_CUDA) left a handle");
	cr_assert_neq(TABLE_SAME(&c, regMr, cc, in, sizeof(in), NCCL_PTR_HOST, NULL), ncclSuccess);
	/* iallreduce */
	cr_assert_neq(table_iallreduce(&c, cc, in, res_buf, 16, ncclFloat32, ncclSum, mh, NULL),
		      ncclSuccess);
	static const struct {
		int type, op;
	} bad[] = {
		{ ncclNumTypes, ncclSum },     { -1, ncclSum },	    { ncclFloat32, ncclNumOps + 3 },
		{ ncclFloat32, ncclMaxRedOp }, { ncclFloat32, -1 }, { 1 << 20, 1 << 20 }
	};
	for (size_t k = 0; k < sizeof(bad) / sizeof(bad[0]); k++) {
		req = (void *)1;
		cr_assert_neq(table_iallreduce(&c, cc, in, res_buf, 16, (ncclDataType_t)bad[k].type,
					       (ncclRedOp_t)bad[k].op, mh, &req),
			      ncclSuccess, "type %d op %d", bad[k].type, bad[k].op);
		cr_assert_null(req);
	}
	req = (void *)1;
	cr_assert_neq(table_iallreduce(&c, cc, NULL, res_buf, 16, ncclFloat32, ncclSum, mh, &req),
		      ncclSuccess);
	cr_assert_null(req);
	if (version == 8) {
		req = (void *)1;
		cr_assert_neq(
			c.t.v8->iallreduce(cc, in, res_buf, -1, ncclFloat32, ncclSum, mh, mh, &req),
			ncclSuccess, "v8 count -1");
		cr_assert_null(req);
	}
	/* A pointer to zeroed memory where a plug-in object belongs. */
	req = (void *)1;
	cr_assert_neq(table_iallreduce(&c, zero, in, res_buf, 16, ncclFloat32, ncclSum, mh, &req),
		      ncclSuccess);
	cr_assert_null(req);
	out = (void *)1;
	cr_assert_neq(TABLE_SAME(&c, regMr, zero, in, sizeof(in), NCCL_PTR_HOST, &out),
		      ncclSuccess);
	cr_assert_null(out);
	cr_assert_neq(TABLE_SAME(&c, deregMr, cc, zero), ncclSuccess);
	cr_assert_neq(TABLE_SAME(&c, deregMr, cc, NULL), ncclSuccess);
	cr_assert_neq(TABLE_SAME(&c, test, zero, &done, &size), ncclSuccess);
	cr_assert_neq(TABLE_SAME(&c, test, NULL, &done, &size), ncclSuccess);
	cr_assert_neq(TABLE_SAME(&c, closeColl, zero), ncclSuccess);
	cr_assert_neq(TABLE_SAME(&c, closeColl, NULL), ncclSuccess);
	cr_assert_neq(TABLE_SAME(&c, closeListen, zero), ncclSuccess);
	cr_assert_neq(TABLE_SAME(&c, iflush, cc, in, 4, mh, NULL), ncclSuccess);
	/* connect with impossible ranks, or against no listen comm */
	static const int ranks[][2] = { { 1, 1 }, { 1, 5 }, { 1, -1 }, { 0, 0 }, { -3, 0 } };
	for (size_t k = 0; k < sizeof(ranks) / sizeof(ranks[0]); k++) {
		out = (void *)1;
		cr_assert_neq(TABLE_SAME(&c, connect, hs, ranks[k][0], ranks[k][1], lcomm, &out),
			      ncclSuccess, "nranks %d rank %d", ranks[k][0], ranks[k][1]);
		cr_assert_null(out);
	}
	out = (void *)1;
	cr_assert_neq(TABLE_SAME(&c, connect, hs, 1, 0, zero, &out), ncclSuccess);
	cr_assert_null(out);
	/* A real request: test() without a done pointer fails, then the op completes. */
	req = NULL;
	cr_assert_eq(table_iallreduce(&c, cc, in, res_buf, 16, ncclFloat32, ncclSum, mh, &req),
		     ncclSuccess);
	cr_assert_not_null(req);
	cr_assert_neq(TABLE_SAME(&c, test, req, NULL, &size), ncclSuccess);
	cr_assert_eq(wait_req(&c, req, &size), ncclSuccess);
	cr_assert_eq(size, (int)sizeof(in));
	cr_assert_eq(memcmp(in, res_buf, sizeof(in)), 0, "a group of one must return its input");
	cr_assert(abi_log_warned("bad arguments"), "no warning for the bad arguments");
	cr_assert_eq(TABLE_SAME(&c, deregMr, cc, mh), ncclSuccess);
	cr_assert_eq(TABLE_SAME(&c, closeColl, cc), ncclSuccess);
	cr_assert_eq(TABLE_SAME(&c, closeListen, lcomm), ncclSuccess);
	cr_assert_eq(table_finalize(&c), ncclSuccess);
	dlclose(c.lib);
	free(zero);
}
CN_ALL_VERSIONS(bad_args, 30)

/* deregMr of a handle already deregistered is rejected, and is no double free (the ASan build
 * would report one). */
static void dereg_twice(int version)
{
	struct cn_table c;
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	void *lcomm = NULL, *cc = NULL, *mh = NULL;
	char buf[256];

	open_single(&c, version, handle, &lcomm, &cc);
	cr_assert_eq(TABLE_SAME(&c, regMr, cc, buf, sizeof(buf), NCCL_PTR_HOST, &mh), ncclSuccess);
	cr_assert_eq(TABLE_SAME(&c, deregMr, cc, mh), ncclSuccess);
	cr_assert_neq(TABLE_SAME(&c, deregMr, cc, mh), ncclSuccess, "second deregMr accepted");
	cr_assert_eq(TABLE_SAME(&c, closeColl, cc), ncclSuccess);
	cr_assert_eq(TABLE_SAME(&c, closeListen, lcomm), ncclSuccess);
	cr_assert_eq(table_finalize(&c), ncclSuccess);
	dlclose(c.lib);
}
CN_ALL_VERSIONS(dereg_twice, 30)

/* listen before init: pre-v11 tables have no ctx yet, v11 gets a NULL one. */
static void listen_before_init(int version)
{
	struct cn_table c;
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	void *lcomm = (void *)1;

	table_load(&c, version);
	cr_assert_neq(table_listen(&c, handle, &lcomm), ncclSuccess);
	cr_assert_null(lcomm);
	cr_assert_eq(table_init(&c), ncclSuccess);
	cr_assert_eq(table_listen(&c, handle, &lcomm), ncclSuccess, "listen after init");
	cr_assert_eq(TABLE_SAME(&c, closeListen, lcomm), ncclSuccess);
	cr_assert_eq(table_finalize(&c), ncclSuccess);
	dlclose(c.lib);
}
CN_ALL_VERSIONS(listen_before_init, 30)

/* ---- life cycle ------------------------------------------------------------------------------ */

/* Waits up to 1 s for @counter to come back to @want; returns the last value. */
static int settle(int (*counter)(void), int want)
{
	int64_t deadline = chaos_now_ns() + 1000000000ll;
	int n;

	while ((n = counter()) != want && chaos_now_ns() < deadline)
		chaos_sleep_ms(5);
	return n;
}

/* The page two heads of a life-cycle test share. */
struct cyc_page {
	_Atomic int published[2];
	_Atomic int done[2];
	char handle[2][NCCL_NET_HANDLE_MAXSIZE];
};

/* Waits up to 10 s for @flag to be set. 0 or -1. */
static int cyc_wait(_Atomic int *flag)
{
	int64_t deadline = chaos_now_ns() + 10000000000ll;

	while (!atomic_load(flag)) {
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(1);
	}
	return 0;
}

/* One full life of head @rank of a 2-node group: dlopen, init, listen, connect, one checked
 * allreduce, every close call, dlclose. No Criterion call: the forked head runs it too. Returns
 * 0 or the number of the step that failed. */
static int cyc_head(int version, int rank, struct cyc_page *p)
{
	struct cn_table c = { .version = version };
	int32_t in[1024], out[1024];
	void *lcomm = NULL, *cc = NULL, *mh = NULL, *req = NULL, *hs[2];
	int64_t deadline = chaos_now_ns() + 10000000000ll;
	int done = 0, size = 0;
	char sym[40];

	c.lib = dlopen(FTCC_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	snprintf(sym, sizeof(sym), "ncclCollNetPlugin_v%d", version);
	if (!c.lib || !(c.t.any = dlsym(c.lib, sym)))
		return 1;
	if (table_init(&c) != ncclSuccess || table_listen(&c, p->handle[rank], &lcomm))
		return 2;
	atomic_store(&p->published[rank], 1);
	if (cyc_wait(&p->published[!rank]))
		return 3;
	hs[0] = p->handle[0];
	hs[1] = p->handle[1];
	if (TABLE_SAME(&c, connect, hs, 2, rank, lcomm, &cc) != ncclSuccess ||
	    TABLE_SAME(&c, regMr, cc, out, sizeof(out), NCCL_PTR_HOST, &mh) != ncclSuccess)
		return 4;
	for (int i = 0; i < 1024; i++)
		in[i] = i * (rank + 1);
	if (table_iallreduce(&c, cc, in, out, 1024, ncclInt32, ncclSum, mh, &req) || !req)
		return 5;
	while (!done && chaos_now_ns() < deadline)
		if (TABLE_SAME(&c, test, req, &done, &size) != ncclSuccess)
			return 6;
	for (int i = 0; i < 1024; i++)
		if (!done || out[i] != 3 * i || size != (int)sizeof(out))
			return 7;
	/* Close only once both have their result: a node leaving earlier would make it degraded. */
	atomic_store(&p->done[rank], 1);
	if (cyc_wait(&p->done[!rank]))
		return 8;
	if (TABLE_SAME(&c, deregMr, cc, mh) || TABLE_SAME(&c, closeColl, cc) ||
	    TABLE_SAME(&c, closeListen, lcomm) || table_finalize(&c))
		return 9;
	dlclose(c.lib);
	return 0;
}

static struct cyc_page *cyc_shared;
static int cyc_version;

static int cyc_peer(void *arg)
{
	(void)arg;
	return cyc_head(cyc_version, 1, cyc_shared);
}

/* 20 lives of dlopen / init / listen / closeListen / finalize / dlclose in this process, then 3
 * lives with a 2-node connect and an allreduce against a forked head: every life must give back
 * its threads and fds. */
static void cycles(int version)
{
	int threads0 = abi_thread_count(), fds0 = abi_fd_count(), n, st = -1;

	for (int k = 0; k < 20; k++) {
		struct cn_table c;
		char handle[NCCL_NET_HANDLE_MAXSIZE];
		void *lcomm = NULL;

		table_load(&c, version);
		cr_assert_eq(table_init(&c), ncclSuccess, "cycle %d", k);
		cr_assert_eq(table_listen(&c, handle, &lcomm), ncclSuccess, "cycle %d", k);
		cr_assert_eq(TABLE_SAME(&c, closeListen, lcomm), ncclSuccess);
		cr_assert_eq(table_finalize(&c), ncclSuccess);
		dlclose(c.lib);
		n = settle(abi_thread_count, threads0);
		cr_assert_eq(n, threads0, "cycle %d: %d threads, %d before", k, n, threads0);
		n = settle(abi_fd_count, fds0);
		cr_assert_eq(n, fds0, "cycle %d: %d fds, %d before", k, n, fds0);
	}
	cyc_shared = mmap(NULL, sizeof(*cyc_shared), PROT_READ | PROT_WRITE,
			  MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert_neq(cyc_shared, MAP_FAILED);
	cyc_version = version;
	for (int k = 0; k < 3; k++) {
		pid_t pid;

		memset(cyc_shared, 0, sizeof(*cyc_shared));
		pid = chaos_fork(cyc_peer, NULL, -1); /* before this process loads the plug-in */
		cr_assert_gt(pid, 0);
		cr_assert_eq(cyc_head(version, 0, cyc_shared), 0, "connect cycle %d", k);
		cr_assert_eq(chaos_wait_exit(pid, 10000, &st), 0, "the forked head hangs");
		cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "forked head: status %#x", st);
		n = settle(abi_thread_count, threads0);
		cr_assert_eq(n, threads0, "connect cycle %d: %d threads, %d before", k, n,
			     threads0);
		n = settle(abi_fd_count, fds0);
		cr_assert_eq(n, fds0, "connect cycle %d: %d fds, %d before", k, n, fds0);
	}
	munmap(cyc_shared, sizeof(*cyc_shared));
}
CN_ALL_VERSIONS(cycles, 60)
