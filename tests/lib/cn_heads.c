/* SPDX-License-Identifier: BSD-3-Clause */
/* Node heads for the CollNet tests (cn_heads.h): the head, a fresh image of the test program
 * (chaos_fork_exec()) that drives one CollNet table as NCCL's proxy does and records every op, and
 * the parent's start and end of the heads. The parent's control of running heads (bounded waits,
 * kill, freeze, stop) is in cn_heads_ctl.c, the checks in cn_heads_check.c.
 */
#define _GNU_SOURCE
#include "cn_heads.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi_net.h"
#include "chaos_proc.h"
#include "ftcc/reduce.h"
#include "nccl/net_v10.h"
#include "nccl/net_v8.h"
#include "nccl/net_v9.h"
#include "sched_watch.h"

#ifndef FTCC_PLUGIN_PATH
#error "FTCC_PLUGIN_PATH must name the built libnccl-net-ftcc.so"
#endif

/* The script's ftcc types and operators go to the plug-in unchanged: the numbering is NCCL's. */
_Static_assert((int)FTCC_FLOAT32 == (int)ncclFloat32 && (int)FTCC_BFLOAT16 == (int)ncclBfloat16 &&
		       (int)FTCC_FP8_E5M2 == (int)ncclFloat8e5m2 &&
		       (int)FTCC_DTYPE_COUNT == (int)ncclNumTypes,
	       "ftcc and NCCL number their types alike");
_Static_assert((int)FTCC_SUM == (int)ncclSum && (int)FTCC_MIN == (int)ncclMin &&
		       (int)FTCC_AVG == (int)ncclAvg,
	       "ftcc and NCCL number their operators alike");

/* Bounds of the waits inside a head: for the other heads' handles (and the parent's go), for
 * the parent's stop or close_now once the script is over, and for requests that make no
 * progress at all. */
#define CN_PUBLISH_WAIT_MS 60000
#define CN_PARENT_WAIT_MS 300000
#define CN_STALL_MS 60000
/* A head whose own wake-ups come this late says so in its log (sched_watch.h). */
#define CN_WATCH_MS 150

/* What a head needs to start. */
struct cn_child_arg {
	const struct cn_heads *g;
	int i;
};

/* The environment variable that makes a new image of this program a head ("fd:index"), and what
 * the parent leaves for the heads behind the shared page: its struct cn_heads, and copies of what
 * the options point to (the head is a fresh exec, chaos_fork_exec(): the parent's memory is not
 * there; its functions are, at the same offsets from each other).
 */
#define CN_HEAD_VAR "FTCC_TEST_CN_HEAD"
struct cn_setup {
	struct cn_heads g; /* pointers as the parent has them */
	struct ft_spec own[CN_MAX_HEADS][CN_MAX_SPECS];
	char degraded[64];
	char ifname[CN_MAX_HEADS][32];
	char env[CN_MAX_HEADS][512];
	intptr_t handle_edit_off; /* from cn_heads_start */
};
struct cn_region {
	struct cn_shared sh; /* first: g->sh is the region */
	struct cn_setup setup;
};

/* One request in flight in a head. */
struct cn_slot {
	void *req;
	int64_t seq; /* -1: free */
	const struct ft_spec *spec;
	char *send, *recv;
};

/* A head's state; lives in the head only. */
struct cn_child {
	const struct cn_heads *g;
	struct cn_head *me;
	int i, version;
	void *lib;
	union {
		const void *any;
		const ncclCollNet_v11_t *v11;
		const ncclCollNet_v10_t *v10;
		const ncclCollNet_v9_t *v9;
		const ncclCollNet_v8_t *v8;
	} t;
	void *ctx, *lcomm, *ccomm;
	char *send, *recv; /* depth slots of max_bytes each */
	void *smh, *rmh;
	size_t max_bytes;
	struct cn_slot slots[CN_MAX_DEPTH];
	int inflight;
};

/* Calls @member of the loaded table, for the members whose signature is the same in every version
 * (all up to closeListen but init, getProperties, listen and v8's iallreduce). */
#define CN_CALL(c, member, ...)                                                                    \
	((c)->version == 11 ? (c)->t.v11->member(__VA_ARGS__) :                                    \
	 (c)->version == 10 ? (c)->t.v10->member(__VA_ARGS__) :                                    \
	 (c)->version == 9  ? (c)->t.v9->member(__VA_ARGS__) :                                     \
			      (c)->t.v8->member(__VA_ARGS__))

/* ---- the head -------------------------------------------------------------------------------- */

static int cn_head_index = -1; /* which head this process is, for the logger */

/* The logger handed to init: one whole line per message on stderr (captured by the parent). */
__attribute__((format(printf, 5, 6))) static void cn_logger(ncclDebugLogLevel level,
							    unsigned long flags, const char *file,
							    int line, const char *fmt, ...)
{
	static const char *const names[] = { "NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE" };
	struct timespec ts;
	char msg[1200];
	va_list ap;
	int n;

	(void)flags;
	clock_gettime(CLOCK_MONOTONIC, &ts); /* the clock of chaos_now_ns(): lines meet faults */
	n = snprintf(msg, sizeof(msg), "head %d %lld.%03ld %s %s:%d ", cn_head_index,
		     (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000, ts.tv_nsec / 1000 % 1000,
		     level >= 0 && level <= NCCL_LOG_TRACE ? names[level] : "?", file, line);
	va_start(ap, fmt);
	n += vsnprintf(msg + n, sizeof(msg) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	msg[n++] = '\n';
	if (write(STDERR_FILENO, msg, (size_t)n) < 0)
		return;
}

__attribute__((format(printf, 2, 3))) static void cn_why(struct cn_child *c, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->me->why, sizeof(c->me->why), fmt, ap);
	va_end(ap);
	fprintf(stderr, "head %d: %s\n", c->i, c->me->why);
}

/* Moves the head's stage forward (never back). */
static void cn_stage(struct cn_child *c, enum cn_stage st)
{
	if (atomic_load(&c->me->stage) < (int)st)
		atomic_store(&c->me->stage, (int)st);
}

static int cn_quit(const struct cn_child *c)
{
	return atomic_load(&c->me->stop) || atomic_load(&c->me->close_now);
}

/* Sets "NAME=value" (opts.env) in this process. */
static void cn_setenv_pair(const char *pair)
{
	char name[128];
	const char *eq = strchr(pair, '=');

	if (!eq || eq == pair || (size_t)(eq - pair) >= sizeof(name))
		return;
	memcpy(name, pair, (size_t)(eq - pair));
	name[eq - pair] = '\0';
	setenv(name, eq + 1, 1);
}

static void cn_setenv_int(const char *name, int v)
{
	char s[24];

	snprintf(s, sizeof(s), "%d", v);
	setenv(name, s, 1);
}

/* The head's environment, before the plug-in is loaded (its settings are read at init). */
static void cn_env(const struct cn_heads *g, int i)
{
	setenv("FTCC_SOCKET_IFNAME", g->o.ifname[i] ? g->o.ifname[i] : "lo", 1);
	cn_setenv_int("FTCC_FAILURE_TIMEOUT_MS", g->o.timeout_ms);
	cn_setenv_int("FTCC_CONNECT_TIMEOUT_MS", g->o.connect_timeout_ms);
	if (g->o.degraded)
		setenv("FTCC_DEGRADED", g->o.degraded, 1);
	else
		unsetenv("FTCC_DEGRADED");
	if (g->o.min_nodes)
		cn_setenv_int("FTCC_COLLNET_MIN_NODES", g->o.min_nodes);
	else
		unsetenv("FTCC_COLLNET_MIN_NODES");
	setenv("NCCL_DEBUG", "INFO", 1);
	test_transport_env(); /* FTCC_TEST_TRANSPORT=ib: net and engine over the emulator */
	if (g->o.env[i])
		cn_setenv_pair(g->o.env[i]);
}

/* dlopen, init, devices, reduceSupport. 0 or -1 (why set). */
static int cn_load(struct cn_child *c)
{
	char sym[40];
	ncclResult_t res;

	c->lib = dlopen(FTCC_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!c->lib) {
		cn_why(c, "dlopen: %s", dlerror());
		return -1;
	}
	snprintf(sym, sizeof(sym), "ncclCollNetPlugin_v%d", c->version);
	c->t.any = dlsym(c->lib, sym);
	if (!c->t.any) {
		cn_why(c, "dlsym %s: %s", sym, dlerror());
		return -1;
	}
	switch (c->version) {
	case 11:
		res = c->t.v11->init(&c->ctx, c->g->o.comm_id, cn_logger);
		break;
	case 10:
		res = c->t.v10->init(cn_logger);
		break;
	case 9:
		res = c->t.v9->init(cn_logger);
		break;
	default:
		res = c->t.v8->init(cn_logger);
		break;
	}
	if (res != ncclSuccess) {
		cn_why(c, "init: %d", (int)res);
		return -1;
	}
	res = CN_CALL(c, devices, &c->me->ndev);
	if (res != ncclSuccess || c->me->ndev < 1) {
		cn_why(c, "devices: %d (%d devices)", (int)res, c->me->ndev);
		return -1;
	}
	for (int op = 0; op < CN_NCCL_OPS; op++) {
		for (int ty = 0; ty < CN_NCCL_TYPES; ty++) {
			int s = -1;

			if (CN_CALL(c, reduceSupport, (ncclDataType_t)ty, (ncclRedOp_t)op, &s) !=
			    ncclSuccess) {
				s = -1;
			}
			c->me->support[op][ty] = s;
		}
	}
	return 0;
}

static ncclResult_t cn_listen(struct cn_child *c, void *handle)
{
	if (c->version == 11)
		return c->t.v11->listen(c->ctx, 0, handle, &c->lcomm);
	if (c->version == 10)
		return c->t.v10->listen(0, handle, &c->lcomm);
	if (c->version == 9)
		return c->t.v9->listen(0, handle, &c->lcomm);
	return c->t.v8->listen(0, handle, &c->lcomm);
}

/* Waits until every head published its handle (or the parent's stop). 0 or -1 (why set). */
static int cn_wait_handles(struct cn_child *c)
{
	const struct cn_heads *g = c->g;
	int64_t deadline = chaos_now_ns() + (int64_t)CN_PUBLISH_WAIT_MS * 1000000;

	for (;;) {
		int all = 1;

		for (int k = 0; k < g->n; k++) {
			int st = atomic_load(&g->sh->head[k].stage);

			if (st == CN_ST_FAILED && g->sh->head[k].handle[0] == 0) {
				cn_why(c, "head %d failed before publishing its handle", k);
				return -1;
			}
			all &= st >= CN_ST_LISTENING;
		}
		if (all && (!g->o.hold_connect || atomic_load(&g->sh->go)))
			return 0;
		if (cn_quit(c)) {
			cn_why(c, "stopped before connect");
			return -1;
		}
		if (chaos_now_ns() > deadline) {
			cn_why(c, "not every head published a handle in %d ms", CN_PUBLISH_WAIT_MS);
			return -1;
		}
		chaos_sleep_ms(1);
	}
}

/* connect with every handle in head order, then regMr of both buffer arenas. 0 or -1. */
static int cn_connect(struct cn_child *c)
{
	const struct cn_heads *g = c->g;
	struct cn_head *me = c->me;
	void *handles[CN_MAX_HEADS];
	size_t arena = c->max_bytes * (size_t)g->o.depth;
	ncclResult_t res;

	for (int k = 0; k < g->n; k++)
		handles[k] = g->sh->head[k].handle;
	me->t_connect0 = chaos_now_ns();
	res = CN_CALL(c, connect, handles, g->n, c->i, c->lcomm, &c->ccomm);
	me->t_connect1 = chaos_now_ns();
	me->connect_res = (int)res;
	if (res != ncclSuccess) {
		cn_why(c, "connect: %d after %.1f ms", (int)res,
		       chaos_ms(me->t_connect0, me->t_connect1));
		c->ccomm = NULL;
		return -1;
	}
	c->send = malloc(arena);
	c->recv = malloc(arena);
	if (!c->send || !c->recv) {
		cn_why(c, "out of memory for %zu-byte buffers", arena);
		return -1;
	}
	res = CN_CALL(c, regMr, c->ccomm, c->send, arena, NCCL_PTR_HOST, &c->smh);
	if (res == ncclSuccess)
		res = CN_CALL(c, regMr, c->ccomm, c->recv, arena, NCCL_PTR_HOST, &c->rmh);
	if (res != ncclSuccess) {
		cn_why(c, "regMr: %d", (int)res);
		return -1;
	}
	return 0;
}

static void cn_note_err(struct cn_child *c, int res, int64_t seq)
{
	int zero = 0;

	if (atomic_compare_exchange_strong(&c->me->err, &zero, res)) {
		c->me->err_seq = seq;
		c->me->t_err = chaos_now_ns();
	}
}

/* Records the end of the op in @s (result @res, test's @size) and frees the slot. */
static void cn_finish(struct cn_child *c, struct cn_slot *s, int res, int size)
{
	struct cn_op *op = &c->me->ops[s->seq];

	op->res = res;
	op->size = size;
	if (res == ncclSuccess)
		op->sum = ft_fnv(s->recv, s->spec->count * ftcc_dtype_size(s->spec->dtype));
	op->t_done = chaos_now_ns();
	atomic_store_explicit(&op->state, 2, memory_order_release);
	atomic_fetch_add(&c->me->ndone, 1);
	if (res != ncclSuccess)
		cn_note_err(c, res, s->seq);
	if (s->req)
		c->inflight--;
	s->req = NULL;
	s->seq = -1;
}

static ncclResult_t cn_iallreduce(struct cn_child *c, struct cn_slot *s)
{
	void *in = s->spec->inplace ? s->recv : s->send;
	ncclDataType_t ty = (ncclDataType_t)s->spec->dtype;
	ncclRedOp_t op = (ncclRedOp_t)s->spec->op;

	if (c->version == 8)
		return c->t.v8->iallreduce(c->ccomm, in, s->recv, (int)s->spec->count, ty, op,
					   c->smh, c->rmh, &s->req);
	return CN_CALL(c, iallreduce, c->ccomm, in, s->recv, s->spec->count, ty, op, c->smh, c->rmh,
		       &s->req);
}

const struct ft_spec *cn_spec_for(const struct cn_heads *g, int head, int64_t seq)
{
	const struct ft_spec *own = g->o.own_script[head];

	return own ? &own[seq % g->o.nspec] : &g->script[seq % g->o.nspec];
}

/* Posts op @seq into a free slot. 1 posted, 0 retry later (a NULL request), -1 failed. */
static int cn_post(struct cn_child *c, int64_t seq)
{
	const struct cn_heads *g = c->g;
	struct cn_slot *s = NULL;
	struct cn_op *op = &c->me->ops[seq];
	ncclResult_t res;

	for (int k = 0; k < g->o.depth && !s; k++)
		if (c->slots[k].seq < 0)
			s = &c->slots[k];
	if (!s)
		return 0;
	s->seq = seq;
	s->spec = cn_spec_for(g, c->i, seq);
	ft_input(s->spec->inplace ? s->recv : s->send, s->spec, (uint32_t)c->i, (uint64_t)seq);
	op->t_post = chaos_now_ns();
	s->req = NULL;
	res = cn_iallreduce(c, s);
	if (res != ncclSuccess) {
		s->req = NULL;
		atomic_store_explicit(&op->state, 1, memory_order_release);
		cn_finish(c, s, (int)res, 0);
		return -1;
	}
	if (!s->req) {
		s->seq = -1; /* NCCL retries the same op later */
		return 0;
	}
	atomic_store_explicit(&op->state, 1, memory_order_release);
	c->inflight++;
	return 1;
}

/* One test() on every request in flight; returns how many completed. */
static int cn_poll(struct cn_child *c)
{
	int n = 0;

	for (int k = 0; k < c->g->o.depth; k++) {
		struct cn_slot *s = &c->slots[k];
		int done = 0, size = -1;
		ncclResult_t res;

		if (s->seq < 0)
			continue;
		res = CN_CALL(c, test, s->req, &done, &size);
		if (res != ncclSuccess || done) {
			cn_finish(c, s, (int)res, size);
			n++;
		}
	}
	return n;
}

/* The script: posts in order with up to depth in flight, completes by polling test(), until the
 * script is over, an error, the parent's stop (drain) or close_now (leave in flight). Each pass
 * polls, then posts up to depth, then looks at close_now: a head told to close does so with
 * depth requests in flight (unless the plug-in refused more), whatever the timing. */
static void cn_run(struct cn_child *c)
{
	const struct cn_heads *g = c->g;
	struct cn_head *me = c->me;
	int64_t limit = g->o.nops < 0 ? CN_MAX_OPS : g->o.nops, posted = 0;
	int64_t t0 = chaos_now_ns(), last = t0;

	for (int k = 0; k < CN_MAX_DEPTH; k++) {
		c->slots[k].seq = -1;
		c->slots[k].send = c->send + (size_t)k * c->max_bytes;
		c->slots[k].recv = c->recv + (size_t)k * c->max_bytes;
	}
	for (;;) {
		int progress = cn_poll(c) > 0, due = 1;
		int more = !atomic_load(&me->err) && !atomic_load(&me->stop) && posted < limit;

		while (more && c->inflight < g->o.depth) {
			int r;

			if (g->o.pace_us && chaos_now_ns() < t0 + posted * g->o.pace_us * 1000) {
				due = 0;
				break;
			}
			r = cn_post(c, posted);
			if (r <= 0) {
				posted += r < 0;
				break;
			}
			posted++;
			progress = 1;
			more = posted < limit;
		}
		if (atomic_load(&me->close_now))
			return;
		more = !atomic_load(&me->err) && !atomic_load(&me->stop) && posted < limit;
		if (c->inflight == 0 && !more)
			return;
		if (progress) {
			last = chaos_now_ns();
		} else if (chaos_ms(last, chaos_now_ns()) > CN_STALL_MS) {
			cn_why(c, "no op completed for %d ms (%d in flight)", CN_STALL_MS,
			       c->inflight);
			return;
		} else if (!due) {
			chaos_sleep_ms(1);
		} else {
			sched_yield(); /* two cores for every head: leave them to the engine */
		}
	}
}

/* After the script (not after an error: NCCL aborts then; unless linger_err): waits for every
 * head to be done with its script, so that no head leaves the group while another still needs
 * it for its last ops, or for the parent's stop or close_now. A head killed by the test never
 * gets there: the test stops the others. */
static void cn_linger(struct cn_child *c)
{
	int64_t deadline = chaos_now_ns() + (int64_t)CN_PARENT_WAIT_MS * 1000000;

	while (!cn_quit(c) && chaos_now_ns() < deadline) {
		int all = 1;

		for (int k = 0; k < c->g->n; k++)
			all &= atomic_load(&c->g->sh->head[k].stage) >= CN_ST_RAN;
		if (all)
			return;
		chaos_sleep_ms(1);
	}
}

/* Times one close call into close_ns / close_res. */
#define CN_TIMED(c, which, call)                                                                   \
	do {                                                                                       \
		int64_t t_ = chaos_now_ns();                                                       \
		(c)->me->close_res[which] = (int)(call);                                           \
		(c)->me->close_ns[which] = chaos_now_ns() - t_;                                    \
	} while (0)

/* deregMr, closeColl, closeListen, finalize, with whatever is still in flight. */
static void cn_close(struct cn_child *c)
{
	c->me->inflight_at_close = c->inflight;
	if (c->ccomm) {
		int64_t t = chaos_now_ns();
		ncclResult_t a = c->smh ? CN_CALL(c, deregMr, c->ccomm, c->smh) : ncclSuccess;
		ncclResult_t b = c->rmh ? CN_CALL(c, deregMr, c->ccomm, c->rmh) : ncclSuccess;

		c->me->close_res[CN_CLOSE_DEREG] = a != ncclSuccess ? (int)a : (int)b;
		c->me->close_ns[CN_CLOSE_DEREG] = chaos_now_ns() - t;
		CN_TIMED(c, CN_CLOSE_COLL, CN_CALL(c, closeColl, c->ccomm));
	}
	if (c->lcomm)
		CN_TIMED(c, CN_CLOSE_LISTEN, CN_CALL(c, closeListen, c->lcomm));
	if (c->version == 11)
		CN_TIMED(c, CN_CLOSE_FINALIZE, c->t.v11->finalize(c->ctx));
}

/* Waits (bounded) for the parent's stop or close_now. */
static void cn_wait_told(const struct cn_child *c)
{
	int64_t deadline = chaos_now_ns() + (int64_t)CN_PARENT_WAIT_MS * 1000000;

	while (!cn_quit(c) && chaos_now_ns() < deadline)
		chaos_sleep_ms(1);
}

/* Body of a head: load, listen and publish, connect, run, close. Returns the exit code. */
static int cn_child_main(void *arg)
{
	const struct cn_child_arg *a = arg;
	const struct cn_heads *g = a->g;
	struct cn_child c = {
		.g = g, .me = &g->sh->head[a->i], .i = a->i, .version = g->o.version
	};
	char handle[NCCL_NET_HANDLE_MAXSIZE] = { 0 };
	char who[16];
	int rc = 0;

	cn_head_index = a->i;
	snprintf(who, sizeof(who), "head %d", a->i);
	sched_watch_start(who, CN_WATCH_MS);
	for (int k = 0; k < g->o.nspec; k++) {
		const struct ft_spec *sp = cn_spec_for(g, a->i, k);
		size_t b = sp->count * ftcc_dtype_size(sp->dtype);

		c.max_bytes = b > c.max_bytes ? b : c.max_bytes;
	}
	c.max_bytes = c.max_bytes ? c.max_bytes : 64;
	cn_env(g, a->i);
	if (cn_load(&c))
		goto failed;
	if (cn_listen(&c, handle) != ncclSuccess || !c.lcomm) {
		cn_why(&c, "listen failed");
		goto failed;
	}
	if (g->o.handle_edit)
		g->o.handle_edit(a->i, handle);
	memcpy(c.me->handle, handle, sizeof(handle));
	cn_stage(&c, CN_ST_LISTENING);
	if (g->o.absent >> a->i & 1) {
		cn_wait_told(&c);
		cn_close(&c);
		cn_stage(&c, CN_ST_CLOSED);
		return 0;
	}
	if (cn_wait_handles(&c) || cn_connect(&c))
		goto failed;
	cn_stage(&c, CN_ST_CONNECTED);
	cn_run(&c);
	cn_stage(&c, CN_ST_RAN);
	if (!atomic_load(&c.me->close_now) && (!atomic_load(&c.me->err) || g->o.linger_err))
		cn_linger(&c);
	cn_close(&c);
	cn_stage(&c, CN_ST_CLOSED);
	return 0;

failed:
	atomic_store(&c.me->stage, CN_ST_FAILED);
	if (c.t.any && c.lib)
		cn_close(&c);
	rc = 3;
	return rc;
}

/* A new image started by cn_heads_start() as head "fd:index" rebuilds the parent's struct
 * cn_heads from the region, runs the head and exits; any other start of the program goes on.
 * The head's whole life is inside this constructor, before main (threads, dlopen: fine with
 * glibc and the sanitizers); it needs nothing of the test framework's. */
__attribute__((constructor)) static void cn_head_entry(void)
{
	static struct cn_heads g;
	const char *v = getenv(CN_HEAD_VAR);
	struct cn_region *r;
	struct cn_child_arg a;
	int fd, i;

	if (!v)
		return;
	if (sscanf(v, "%d:%d", &fd, &i) != 2 || i < 0 || i >= CN_MAX_HEADS) {
		fprintf(stderr, "cn_heads: bad %s=%s\n", CN_HEAD_VAR, v);
		_exit(126);
	}
	unsetenv(CN_HEAD_VAR);
	r = mmap(NULL, sizeof(*r), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (r == MAP_FAILED) {
		fprintf(stderr, "cn_heads: head %d: mmap: %s\n", i, strerror(errno));
		_exit(126);
	}
	close(fd);
	if (i >= r->setup.g.n) {
		snprintf(r->sh.head[i].why, sizeof(r->sh.head[i].why), "head %d of %d", i,
			 r->setup.g.n);
		atomic_store(&r->sh.head[i].stage, CN_ST_FAILED);
		_exit(126);
	}
	g = r->setup.g;
	g.sh = &r->sh;
	g.o.script = g.script;
	for (int h = 0; h < CN_MAX_HEADS; h++) {
		g.o.own_script[h] = g.o.own_script[h] ? r->setup.own[h] : NULL;
		g.o.ifname[h] = g.o.ifname[h] ? r->setup.ifname[h] : NULL;
		g.o.env[h] = g.o.env[h] ? r->setup.env[h] : NULL;
	}
	g.o.degraded = g.o.degraded ? r->setup.degraded : NULL;
	if (g.o.handle_edit)
		g.o.handle_edit = (void (*)(int, char *))((uintptr_t)cn_heads_start +
							  (uintptr_t)r->setup.handle_edit_off);
	a = (struct cn_child_arg){ .g = &g, .i = i };
	_exit(cn_child_main(&a));
}

/* ---- the parent ------------------------------------------------------------------------------ */

/* Copies @s into @dst (@len bytes) for the heads; -1 when it does not fit. */
static int cn_copy_str(char *dst, size_t len, const char *s)
{
	if (!s)
		return 0;
	if (strlen(s) >= len)
		return -1;
	memcpy(dst, s, strlen(s) + 1);
	return 0;
}

/* The region's setup from g (its options complete). 0 or -1 (an option too long). */
static int cn_setup_fill(struct cn_heads *g)
{
	struct cn_setup *st = &((struct cn_region *)g->sh)->setup;
	int bad = 0;

	st->g = *g;
	for (int h = 0; h < CN_MAX_HEADS; h++) {
		if (g->o.own_script[h])
			memcpy(st->own[h], g->o.own_script[h],
			       sizeof(st->own[h][0]) * (size_t)g->o.nspec);
		bad |= cn_copy_str(st->ifname[h], sizeof(st->ifname[h]), g->o.ifname[h]);
		bad |= cn_copy_str(st->env[h], sizeof(st->env[h]), g->o.env[h]);
	}
	bad |= cn_copy_str(st->degraded, sizeof(st->degraded), g->o.degraded);
	if (g->o.handle_edit)
		st->handle_edit_off =
			(intptr_t)((uintptr_t)g->o.handle_edit - (uintptr_t)cn_heads_start);
	return bad ? -1 : 0;
}

int cn_heads_start(struct cn_heads *g, int n, const struct cn_opts *o)
{
	int fd = -1;

	memset(g, 0, sizeof(*g));
	test_fabric_cut_env();
	for (int i = 0; i < CN_MAX_HEADS; i++) {
		g->errfd[i] = -1;
		g->exit_status[i] = -1;
	}
	if (n < 1 || n > CN_MAX_HEADS || !o || !o->script || o->nspec < 1 ||
	    o->nspec > CN_MAX_SPECS || o->depth < 0 || o->depth > CN_MAX_DEPTH ||
	    o->nops > CN_MAX_OPS ||
	    (o->version && o->version != 11 && o->version != 10 && o->version != 9 &&
	     o->version != 8)) {
		fprintf(stderr, "cn_heads: bad options\n");
		return -1;
	}
	g->t0_ns = chaos_now_ns();
	g->n = n;
	g->o = *o;
	memcpy(g->script, o->script, sizeof(g->script[0]) * (size_t)o->nspec);
	g->o.script = g->script;
	g->o.version = o->version ? o->version : 11;
	g->o.comm_id = o->comm_id ? o->comm_id : 0xc011000000000000ull | (uint64_t)getpid();
	g->o.depth = o->depth ? o->depth : 8;
	g->o.nops = o->nops ? o->nops : o->nspec;
	g->o.timeout_ms = o->timeout_ms ? o->timeout_ms : 1000;
	g->o.connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 10000;
	/* The heads' page, and their setup behind it, in a memory file each head maps after its
	 * exec. */
	fd = memfd_create("cn-heads", MFD_CLOEXEC);
	if (fd < 0 || ftruncate(fd, sizeof(struct cn_region)) < 0) {
		fprintf(stderr, "cn_heads: memfd: %s\n", strerror(errno));
		goto fail;
	}
	g->sh = mmap(NULL, sizeof(struct cn_region), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (g->sh == MAP_FAILED) {
		g->sh = NULL;
		fprintf(stderr, "cn_heads: mmap: %s\n", strerror(errno));
		goto fail;
	}
	if (cn_setup_fill(g)) {
		fprintf(stderr, "cn_heads: bad options (a string too long)\n");
		goto fail;
	}
	for (int i = 0; i < n; i++) {
		char name[32], v[32];

		g->sh->head[i].err_seq = -1;
		snprintf(name, sizeof(name), "cn-head-%d", i);
		snprintf(v, sizeof(v), "%d:%d", fd, i);
		g->errfd[i] = chaos_capture_open(name);
		g->sh->head[i].pid = chaos_fork_exec(CN_HEAD_VAR, v, fd, g->errfd[i]);
		if (g->sh->head[i].pid < 0) {
			fprintf(stderr,
				"cn_heads: head %d did not start (fork, then exec of this "
				"program): %s\n",
				i, strerror(errno));
			goto fail;
		}
	}
	close(fd);
	return 0;

fail:
	if (fd >= 0)
		close(fd);
	return -1;
}

void cn_heads_end(struct cn_heads *g)
{
	if (!g->sh)
		return;
	for (int i = 0; i < g->n; i++) {
		chaos_kill(g->sh->head[i].pid);
		if (g->errfd[i] >= 0)
			close(g->errfd[i]);
	}
	munmap(g->sh, sizeof(struct cn_region));
	memset(g, 0, sizeof(*g));
}
