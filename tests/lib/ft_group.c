/* SPDX-License-Identifier: BSD-3-Clause */
/* Test groups of allreduce communicators in forked processes: the deterministic inputs and the
 * exact expected results, the member process that runs the script and records every op, and the
 * group's start, restarts and end (the parent's control of running members and its bounded waits:
 * ft_group_ctl.c; the agreement check: ft_group_check.c). Owns each group's shared page.
 */
#define _GNU_SOURCE
#include "ft_group.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "abi_net.h"
#include "chaos_proc.h"
#include "ftcc/reduce.h"

/* How long a member process waits on one op completed by polling ftcc_test(). */
#define FT_TEST_POLL_MS 60000

/* ---- the member process ---------------------------------------------------------------------- */

/* What a forked member process needs; lives on the parent's stack, copied by fork. */
struct ft_child_arg {
	const struct ft_group *g;
	int run;
};

/* One op in flight in a member process. */
struct ft_slot {
	ftcc_request_t *req;
	uint64_t seq;
	int pending; /* opts.nstreams: @seq is the next op to start */
	const struct ft_spec *spec;
	void *send, *recv;
};

/* A member process's state shared with its abort thread. */
struct ft_child {
	const struct ft_group *g;
	struct ft_run *r;
	ftcc_comm_t *comm;
	ftcc_comm_t *stream[FTCC_STREAMS_MAX]; /* opts.nstreams: each stream's handle */
	uint64_t first[FTCC_STREAMS_MAX];      /* and its first op */
	uint64_t round, pos;		       /* the next op: of round @round, @pos-th */
	_Atomic int quit;		       /* the abort thread exits */
};

static void ft_note_max(_Atomic int64_t *at, int64_t v)
{
	int64_t cur = atomic_load(at);

	while (cur < v && !atomic_compare_exchange_weak(at, &cur, v)) {
	}
}

/* Records the end of op @seq (child). */
/* The streams of @g (1 without opts.nstreams). */
static uint32_t ft_nstreams(const struct ft_group *g)
{
	return g->o.nstreams > 1 ? (uint32_t)g->o.nstreams : 1;
}

uint32_t ft_stream_of(const struct ft_group *g, uint64_t seq, uint64_t *j)
{
	uint64_t ns = ft_nstreams(g), period = 2 * ns - 1, p = seq / period, r = seq % period;

	if (r < ns) {
		*j = p * ns + r;
		return 0;
	}
	*j = p;
	return (uint32_t)(r - ns + 1);
}

/* Records the end of op @seq (child): the record's seq is its number in its stream. */
static void ft_finish(const struct ft_group *g, struct ft_run *r, uint64_t seq, size_t bytes,
		      int rc, const struct ftcc_record *rec, const void *result)
{
	struct ft_op *op = &r->ops[seq];

	op->rc = rc;
	if (rec && rc == FTCC_ERR_MISMATCH) /* an in-place buffer holds its input again */
		op->sum = ft_fnv(result, bytes);
	if (rec && (rc == 0 || rc == FTCC_ERR_DEGRADED)) {
		uint64_t j = seq;

		if (ft_nstreams(g) > 1)
			(void)ft_stream_of(g, seq, &j);
		op->bad_seq = rec->seq != j;
		op->epoch = rec->epoch;
		op->size = rec->size;
		op->ncontrib = rec->ncontrib;
		op->attempts = rec->attempts;
		op->resumed = rec->resumed;
		op->scale = rec->scale;
		op->mask = 0;
		for (uint32_t m = 0; m < 32; m++)
			if (ftcc_record_has(rec, m))
				op->mask |= 1u << m;
		op->sum = ft_fnv(result, bytes);
	}
	op->t_done = chaos_now_ns();
	atomic_store_explicit(&op->state, FT_OP_DONE, memory_order_release);
	atomic_fetch_add(&r->ndone, 1);
	ft_note_max(&r->last_seq, (int64_t)seq);
}

/* Records the epoch the communicator is in now, if it is not the one recorded last (child). */
static void ft_note_epoch(ftcc_comm_t *comm, struct ft_run *r)
{
	uint32_t ids[FT_GROUP_MAX_N + 1], n = atomic_load(&r->nepochs), mask = 0;
	struct ftcc_view v;

	if (ftcc_comm_view(comm, &v, ids, FT_GROUP_MAX_N + 1) || !v.epoch ||
	    (n && r->epochs[n - 1].epoch == v.epoch))
		return;
	for (uint32_t i = 0; i < v.nmembers && i <= FT_GROUP_MAX_N; i++)
		mask |= ids[i] < 32 ? 1u << ids[i] : 0;
	if (n == FT_GROUP_MAX_EPOCHS) {
		atomic_fetch_add(&r->epochs_dropped, 1);
		return;
	}
	r->epochs[n] = (struct ft_epoch_seen){ .epoch = v.epoch, .mask = mask };
	atomic_store_explicit(&r->nepochs, n + 1, memory_order_release);
}

/* Caps this process's address space at its size now plus FT_GROUP_AS_SLACK (child). */
static void ft_cap_address_space(void)
{
	FILE *f = fopen("/proc/self/statm", "r");
	unsigned long pages = 0;
	struct rlimit rl;

	if (f && fscanf(f, "%lu", &pages) != 1)
		pages = 0;
	if (f)
		fclose(f);
	if (!pages)
		return;
	rl.rlim_cur = rl.rlim_max =
		pages * (unsigned long)sysconf(_SC_PAGESIZE) + FT_GROUP_AS_SLACK;
	if (setrlimit(RLIMIT_AS, &rl))
		fprintf(stderr, "ft_group: setrlimit(RLIMIT_AS): %s\n", strerror(errno));
}

/* Calls ftcc_comm_abort() when the parent asks (a second thread, so that the op in flight on the
 * main thread is aborted under it). */
static void *ft_abort_thread(void *arg)
{
	struct ft_child *c = arg;

	while (!atomic_load(&c->quit)) {
		if (atomic_load(&c->r->abort)) {
			int64_t t = chaos_now_ns();
			int rc = ftcc_comm_abort(c->comm);
			int64_t d = chaos_now_ns() - t;

			atomic_store(&c->r->abort_rc, rc);
			atomic_store(&c->r->t_abort, chaos_now_ns());
			atomic_store(&c->r->abort_ns, d > 0 ? d : 1);
			return NULL;
		}
		chaos_sleep_ms(1);
	}
	return NULL;
}

/* The argument probes (opts.probe). */
static void ft_probe(struct ft_child *c, void *buf, void *out)
{
	struct ft_run *r = c->r;
	ftcc_request_t *req = NULL;
	struct ftcc_view v;

	ftcc_comm_view(c->comm, &v, NULL, 0);
	r->probe_seq[0] = v.next_seq;
	r->probe_rc[FT_PROBE_NULL_SEND] =
		ftcc_allreduce(c->comm, NULL, out, 8, FTCC_FLOAT32, FTCC_SUM, NULL);
	r->probe_rc[FT_PROBE_NULL_RECV] =
		ftcc_allreduce(c->comm, buf, NULL, 8, FTCC_FLOAT32, FTCC_SUM, NULL);
	r->probe_rc[FT_PROBE_DTYPE] = ftcc_allreduce(
		c->comm, buf, out, 8, (enum ftcc_dtype)FTCC_DTYPE_COUNT, FTCC_SUM, NULL);
	r->probe_rc[FT_PROBE_OP] = ftcc_allreduce(c->comm, buf, out, 8, FTCC_FLOAT32,
						  (enum ftcc_redop)FTCC_REDOP_COUNT, NULL);
	r->probe_rc[FT_PROBE_IDTYPE] =
		ftcc_iallreduce(c->comm, buf, out, 8, (enum ftcc_dtype)99, FTCC_SUM, &req);
	if (r->probe_rc[FT_PROBE_IDTYPE] == 0 && req)
		ftcc_wait(req, NULL);
	r->probe_rc[FT_PROBE_NULL_REQ] =
		ftcc_iallreduce(c->comm, buf, out, 8, FTCC_FLOAT32, FTCC_SUM, NULL);
	r->probe_rc[FT_PROBE_ZERO] =
		ftcc_allreduce(c->comm, buf, out, 0, FTCC_FLOAT32, FTCC_SUM, NULL);
	ftcc_comm_view(c->comm, &v, NULL, 0);
	r->probe_seq[1] = v.next_seq;
}

/* Waits for a slot's op (child). */
static int ft_complete(const struct ft_group *g, struct ft_slot *s, struct ftcc_record *rec)
{
	int64_t deadline;
	int done = 0, rc;

	if (!g->o.use_test)
		return ftcc_wait(s->req, rec);
	deadline = chaos_now_ns() + (int64_t)FT_TEST_POLL_MS * 1000000;
	for (;;) {
		rc = ftcc_test(s->req, &done, rec);
		if (done || rc)
			return rc;
		if (chaos_now_ns() > deadline) {
			fprintf(stderr, "ft_group: op %llu not done after %d ms of ftcc_test\n",
				(unsigned long long)s->seq, FT_TEST_POLL_MS);
			return FTCC_ERR_TIMEOUT;
		}
		sched_yield(); /* two cores for every member: leave them to the engine */
	}
}

/* Whether the script goes on after an op that returned @rc: the op ended so on every member
 * and the communicator stays usable. */
static int ft_goes_on(int rc)
{
	return rc == 0 || rc == FTCC_ERR_DEGRADED || rc == FTCC_ERR_MISMATCH ||
	       rc == FTCC_ERR_PEER_LOST;
}

/* Starts op @s (@req non-NULL) or runs it (@rec) through the call of its kind. */
/* Where op @s's input goes, and where its result is, for @member. */
static void *ft_in_at(const struct ft_slot *s, uint32_t member)
{
	const struct ft_spec *sp = s->spec;
	size_t bytes = sp->count * ftcc_dtype_size(sp->dtype);

	if (sp->kind == FT_BROADCAST)
		return s->recv;
	if (sp->kind == FT_ALLGATHER && sp->inplace)
		return (uint8_t *)s->recv + member * bytes;
	return sp->inplace ? s->recv : s->send;
}

static void *ft_out_at(const struct ft_slot *s, uint32_t member)
{
	const struct ft_spec *sp = s->spec;

	if (sp->kind == FT_REDUCE_SCATTER && sp->inplace)
		return (uint8_t *)s->recv + member * sp->count * ftcc_dtype_size(sp->dtype);
	return s->recv;
}

static int ft_call(ftcc_comm_t *comm, const struct ft_slot *s, uint32_t member,
		   ftcc_request_t **req, struct ftcc_record *rec)
{
	const struct ft_spec *sp = s->spec;
	void *in = ft_in_at(s, member), *out = ft_out_at(s, member);
	struct ftcc_op_opts opts;

	switch (sp->kind) {
	case FT_BROADCAST:
		return req ? ftcc_ibroadcast(comm, s->recv, sp->count, sp->dtype, sp->root, req) :
			     ftcc_broadcast(comm, s->recv, sp->count, sp->dtype, sp->root, rec);
	case FT_ALLGATHER:
		return req ? ftcc_iallgather(comm, in, s->recv, sp->count, sp->dtype, req) :
			     ftcc_allgather(comm, in, s->recv, sp->count, sp->dtype, rec);
	case FT_REDUCE_SCATTER: /* in place: the result in the own slot of the input */
		return req ? ftcc_ireduce_scatter(comm, in, out, sp->count, sp->dtype, sp->op,
						  req) :
			     ftcc_reduce_scatter(comm, in, out, sp->count, sp->dtype, sp->op, rec);
	case FT_BARRIER:
		return req ? ftcc_ibarrier(comm, req) : ftcc_barrier(comm, rec);
	default:
		ftcc_op_opts_init(&opts);
		opts.codec = sp->codec;
		return req ? ftcc_iallreduce_opts(comm, in, s->recv, sp->count, sp->dtype, sp->op,
						  &opts, req) :
			     ftcc_allreduce_opts(comm, in, s->recv, sp->count, sp->dtype, sp->op,
						 &opts, rec);
	}
}

/* Starts (depth > 1) or runs (depth 1) op @s->seq. 0, or the error that ends the script. */
static int ft_start(struct ft_child *c, struct ft_slot *s)
{
	const struct ft_group *g = c->g;
	struct ft_run *r = c->r;
	struct ftcc_record rec;
	uint32_t n = (uint32_t)g->n, m = (uint32_t)r->member;
	int rc;

	ft_input_n(ft_in_at(s, m), s->spec, m, s->seq, n);
	if (r->as_limit_seq && s->seq + 1 == r->as_limit_seq)
		ft_cap_address_space();
	if (r->late_seq && s->seq + 1 == r->late_seq)
		chaos_sleep_ms(r->late_ms);
	r->ops[s->seq].t_start = chaos_now_ns();
	atomic_store_explicit(&r->ops[s->seq].state, FT_OP_STARTED, memory_order_release);
	if (g->o.depth <= 1) {
		memset(&rec, 0, sizeof(rec));
		rc = ft_call(c->comm, s, m, NULL, &rec);
		ft_finish(g, r, s->seq, ft_out_bytes(s->spec, n), rc, &rec, ft_out_at(s, m));
		ft_note_epoch(c->comm, r);
		return ft_goes_on(rc) ? 0 : rc;
	}
	s->req = NULL;
	if (ft_nstreams(g) > 1) {
		uint64_t j;

		rc = ft_call(c->stream[ft_stream_of(g, s->seq, &j)], s, m, &s->req, NULL);
	} else {
		rc = ft_call(c->comm, s, m, &s->req, NULL);
	}
	if (rc)
		ft_finish(g, r, s->seq, 0, rc, NULL, NULL);
	return rc;
}

/* With streams: the next op this member issues (opts.nstreams), past each stream's first. A
 * period's op at offset r is stream 0's (r + 1)-th, or another stream's only one (r >= ns): in
 * round q, the streams with a q-th op there, from stream member % ns on. */
static uint64_t ft_next_stream_op(struct ft_child *c)
{
	uint64_t ns = ft_nstreams(c->g), period = 2 * ns - 1;

	for (;;) {
		uint64_t p = c->round, q = c->pos / ns, t = (c->pos + (uint64_t)c->r->member) % ns;
		uint64_t s, j;

		if (++c->pos == ns * ns) {
			c->pos = 0;
			c->round++;
		}
		if (q > 0 && t != 0)
			continue; /* only stream 0 has more than one op in a period */
		s = p * period + (t == 0 ? q : ns + t - 1);
		(void)ft_stream_of(c->g, s, &j);
		if (j >= c->first[t])
			return s;
	}
}

/* Sleeps until op @seq is due (opts.pace_us), in steps of at most 5 ms so that a stop is seen. 1
 * when stopped. */
static int ft_pace(const struct ft_group *g, struct ft_run *r, uint64_t seq)
{
	int64_t due = g->t0_ns + (int64_t)seq * g->o.pace_us * 1000;

	for (;;) {
		int64_t now = chaos_now_ns(), until = due < now + 5000000 ? due : now + 5000000;
		struct timespec ts = { .tv_sec = until / 1000000000,
				       .tv_nsec = until % 1000000000 };

		if (atomic_load(&r->stop))
			return 1;
		if (now >= due)
			return 0;
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL);
	}
}

/* The script: ops numbered from the communicator's next_seq up to the limit, up to depth of them in
 * flight, until stopped or an op fails for good. Returns that error, or 0. */
static int ft_script(struct ft_child *c, struct ft_slot *slots, int depth)
{
	const struct ft_group *g = c->g;
	struct ft_run *r = c->r;
	int head = 0, inflight = 0, err = 0, at_limit = 0;

	for (;;) {
		while (!err && inflight < depth && !atomic_load(&r->stop)) {
			struct ft_slot *s = &slots[(head + inflight) % depth];
			struct ftcc_view v;

			if (r->catchup && atomic_load(&r->ready) &&
			    atomic_load(&r->ready_seq) < 0) {
				ftcc_comm_view(c->comm, &v, NULL, 0);
				atomic_store(&r->ready_rc, ftcc_comm_ready(c->comm));
				atomic_store(&r->ready_seq, (int64_t)v.next_seq);
			}
			if (ftcc_comm_view(c->comm, &v, NULL, 0) == 0 && v.state != 0) {
				err = v.state;
				break;
			}
			if (ft_nstreams(g) > 1) {
				/* the op is this slot's until started (a limit may hold it) */
				if (!s->pending)
					s->seq = ft_next_stream_op(c);
				s->pending = 1;
				v.next_seq = s->seq;
			}
			if (v.next_seq >= FT_GROUP_MAX_SEQ) {
				atomic_store(&r->overflow, 1);
				break;
			}
			if (v.next_seq >= atomic_load(&g->sh->limit)) {
				at_limit = 1;
				break;
			}
			if (g->o.pace_us && ft_pace(g, r, v.next_seq))
				break;
			s->seq = v.next_seq;
			s->spec = ft_spec_for(g, r->member, s->seq);
			s->pending = 0;
			err = ft_start(c, s);
			if (!err && depth > 1)
				inflight++;
		}
		if (inflight == 0) {
			if (err || at_limit || atomic_load(&r->stop) || atomic_load(&r->overflow))
				return err;
			continue;
		}
		{
			struct ft_slot *s = &slots[head];
			struct ftcc_record rec;
			int rc;

			memset(&rec, 0, sizeof(rec));
			rc = ft_complete(g, s, &rec);
			ft_finish(g, r, s->seq, ft_out_bytes(s->spec, (uint32_t)g->n), rc, &rec,
				  ft_out_at(s, (uint32_t)r->member));
			ft_note_epoch(c->comm, r);
			if (!ft_goes_on(rc) && !err)
				err = rc;
			head = (head + 1) % depth;
			inflight--;
		}
	}
}

static int64_t process_cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Body of a member process: create, probe, run the script, wait to be stopped, destroy. */
static int ft_child_main(void *arg)
{
	const struct ft_child_arg *a = arg;
	const struct ft_group *g = a->g;
	struct ft_run *r = &g->sh->run[a->run];
	struct ft_slot slots[FT_GROUP_MAX_DEPTH] = { 0 };
	struct ftcc_config cfg;
	struct ft_child c = { .g = g, .r = r };
	const char *addrs[FT_GROUP_MAX_N];
	int depth = g->o.depth > 1 ? g->o.depth : 1;
	size_t max_bytes = 64;
	pthread_t th;
	int64_t t, cpu;
	int rc;

	setenv("FTCC_DEBUG", getenv("FT_GROUP_DEBUG") ? getenv("FT_GROUP_DEBUG") : "INFO", 1);
	if (r->fault[0])
		setenv("FTCC_FAULT", r->fault, 1);
	else
		unsetenv("FTCC_FAULT");
	if (r->inject[0])
		setenv("FTCC_INJECT", r->inject, 1);
	else
		unsetenv("FTCC_INJECT");
	if (g->algo[0])
		setenv("FTCC_ALGO", g->algo, 1);
	if (g->o.lanes[r->member]) {
		char v[16];

		snprintf(v, sizeof(v), "%d", g->o.lanes[r->member]);
		setenv("FTCC_LANES", v, 1);
	}
	/* FTCC_TEST_TRANSPORT=ib, or the member's own: frames over the verbs emulator */
	test_transport_set(g->o.transport[r->member] ? g->o.transport[r->member] :
						       getenv("FTCC_TEST_TRANSPORT"));
	for (int k = 0; k < g->o.nspec; k++) {
		const struct ft_spec *sp = ft_spec_for(g, r->member, (uint64_t)k);
		size_t b = ft_script_max_bytes(sp, 1);

		max_bytes = b > max_bytes ? b : max_bytes;
	}
	for (int k = 0; k < depth; k++) {
		slots[k].send = calloc(1, max_bytes);
		slots[k].recv = calloc(1, max_bytes);
		if (!slots[k].send || !slots[k].recv)
			return 2;
	}
	for (int i = 0; i < g->n; i++)
		addrs[i] = g->addr[i];
	ftcc_config_init(&cfg);
	cfg.group = g->name;
	cfg.rank = (uint32_t)r->member;
	cfg.size = (uint32_t)g->n;
	cfg.addrs = addrs;
	cfg.coordinator = "embedded";
	cfg.join = r->join;
	cfg.catchup = r->catchup;
	cfg.degraded = g->o.degraded;
	cfg.timeout_ms = g->o.timeout_ms;
	cfg.connect_timeout_ms = g->o.connect_timeout_ms;
	cfg.nstreams = ft_nstreams(g);
	rc = ftcc_comm_create(&cfg, &c.comm);
	for (uint32_t st = 0; rc == 0 && st < ft_nstreams(g); st++) {
		struct ftcc_view sv;
		uint64_t first_period;

		rc = ftcc_comm_stream(c.comm, st, &c.stream[st]);
		rc = rc ? rc : ftcc_comm_view(c.stream[st], &sv, NULL, 0);
		if (rc)
			break;
		c.first[st] = sv.next_seq;
		/* the first period with an op of this stream it takes part in */
		first_period = st == 0 ? sv.next_seq / ft_nstreams(g) : sv.next_seq;
		if (st == 0 || first_period < c.round)
			c.round = first_period;
	}
	atomic_store(&r->t_created, chaos_now_ns());
	if (rc) {
		fprintf(stderr, "ft_group: member %d: ftcc_comm_create: %s\n", r->member,
			ftcc_strerror(rc));
		atomic_store(&r->end_rc, rc);
		atomic_store(&r->created, rc < 0 ? rc : FTCC_ERR_INVALID);
		return 3;
	}
	r->view0_rc = ftcc_comm_view(c.comm, &r->view0, r->members0, FT_GROUP_MAX_N);
	ft_note_epoch(c.comm, r);
	atomic_store(&r->created, 1);
	if (pthread_create(&th, NULL, ft_abort_thread, &c))
		return 4;
	if (g->o.probe)
		ft_probe(&c, slots[0].send, slots[0].recv);
	rc = ft_script(&c, slots, depth);
	ft_note_epoch(c.comm, r);
	r->view1_rc = ftcc_comm_view(c.comm, &r->view1, NULL, 0);
	snprintf(r->last_error, sizeof(r->last_error), "%s", ftcc_comm_last_error(c.comm));
	atomic_store(&r->end_rc, rc);
	atomic_store(&r->t_end, chaos_now_ns());
	atomic_store(&r->ended, 1);
	while (!atomic_load(&r->stop))
		chaos_sleep_ms(1);
	atomic_store(&c.quit, 1);
	pthread_join(th, NULL);
	cpu = process_cpu_ns();
	t = chaos_now_ns();
	atomic_store(&r->destroy_rc, ftcc_comm_destroy(c.comm));
	atomic_store(&r->destroy_cpu_ns, process_cpu_ns() - cpu);
	atomic_store(&r->destroy_ns, chaos_now_ns() - t > 0 ? chaos_now_ns() - t : 1);
	for (int k = 0; k < depth; k++) {
		free(slots[k].send);
		free(slots[k].recv);
	}
	return 0;
}

/* ---- the parent ------------------------------------------------------------------------------ */

/* The policy the members apply (FTCC_DEGRADED_DEFAULT resolved as the library does). */
int ft_group_start(struct ft_group *g, const char *test, int n, const struct ft_group_opts *o)
{
	memset(g, 0, sizeof(*g));
	if (n < 1 || n > FT_GROUP_MAX_N || !o || !o->script || o->nspec < 1 ||
	    o->nspec > FT_GROUP_MAX_SPECS || o->depth > FT_GROUP_MAX_DEPTH) {
		fprintf(stderr, "ft_group: bad options\n");
		return -1;
	}
	if (o->nstreams > 1 && o->limit % (uint64_t)(2 * o->nstreams - 1) != 0) {
		fprintf(stderr,
			"ft_group: with %d streams the limit is a whole number of periods "
			"of %d ops\n",
			o->nstreams, 2 * o->nstreams - 1);
		return -1;
	}
	g->t0_ns = chaos_now_ns();
	test_fabric_cut_env();
	g->n = n;
	g->o = *o;
	memcpy(g->script, o->script, sizeof(g->script[0]) * (size_t)o->nspec);
	g->o.script = g->script;
	g->o.timeout_ms = o->timeout_ms ? o->timeout_ms : 1000;
	g->o.connect_timeout_ms = o->connect_timeout_ms ? o->connect_timeout_ms : 10000;
	g->o.depth = o->depth > 1 ? o->depth : 1;
	g->o.algo = NULL;
	if (o->algo)
		snprintf(g->algo, sizeof(g->algo), "%s", o->algo);
	for (int i = 0; i < FT_GROUP_MAX_N; i++) {
		if (i < n && o->fault[i])
			snprintf(g->fault0[i], sizeof(g->fault0[i]), "%s", o->fault[i]);
		if (i < n && o->inject[i])
			snprintf(g->inject0[i], sizeof(g->inject0[i]), "%s", o->inject[i]);
		g->o.fault[i] = NULL;
		g->o.inject[i] = NULL;
		g->run[i] = -1;
	}
	snprintf(g->name, sizeof(g->name), "%.40s-%d", test, (int)getpid());
	for (int i = 0; i < FT_GROUP_MAX_RUNS; i++) {
		g->errfd[i] = -1;
		g->exit_status[i] = -1;
	}
	g->sh = mmap(NULL, sizeof(*g->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		     0);
	if (g->sh == MAP_FAILED) {
		g->sh = NULL;
		fprintf(stderr, "ft_group: mmap: %s\n", strerror(errno));
		return -1;
	}
	atomic_store(&g->sh->limit, o->limit ? o->limit : (uint64_t)o->nspec);
	for (int i = 0; i < n; i++) {
		uint16_t port;

		snprintf(g->ip[i], sizeof(g->ip[i]), "127.0.0.%d", FT_GROUP_IP_BASE + i);
		port = ft_group_free_port(g->ip[i]);
		if (!port) {
			fprintf(stderr, "ft_group: no free port on %s\n", g->ip[i]);
			return -1;
		}
		snprintf(g->addr[i], sizeof(g->addr[i]), "%s:%u", g->ip[i], port);
	}
	for (int i = 0; i < n; i++)
		if (ft_group_spawn(g, i, 0, 0, g->fault0[i][0] ? g->fault0[i] : NULL))
			return -1;
	return 0;
}

int ft_group_spawn(struct ft_group *g, int i, int join, int catchup, const char *fault)
{
	struct ft_child_arg a = { .g = g, .run = g->nruns };
	struct ft_run *r;
	char name[32];
	pid_t pid;

	if (!g->sh || i < 0 || i >= g->n || g->nruns >= FT_GROUP_MAX_RUNS ||
	    (g->run[i] >= 0 && g->exit_status[g->run[i]] == -1 &&
	     chaos_alive(g->sh->run[g->run[i]].pid))) {
		fprintf(stderr, "ft_group: cannot start member %d\n", i);
		return -1;
	}
	/* Only the header: the op records of a fresh slot are still zero from mmap, and left
	 * untouched they cost no memory. */
	r = &g->sh->run[a.run];
	memset(r, 0, offsetof(struct ft_run, ops));
	r->member = i;
	r->join = join;
	r->catchup = catchup;
	atomic_store(&r->last_seq, -1);
	atomic_store(&r->ready_seq, -1);
	snprintf(r->fault, sizeof(r->fault), "%s", fault ? fault : "");
	if (!join) {
		/* the first process of each member: its fault options */
		snprintf(r->inject, sizeof(r->inject), "%s", g->inject0[i]);
		r->as_limit_seq = g->o.as_limit_seq[i];
		r->late_seq = g->o.late_seq[i];
		r->late_ms = g->o.late_ms;
	}
	snprintf(name, sizeof(name), "ft-member-%d", i);
	g->errfd[a.run] = chaos_capture_open(name);
	pid = chaos_fork(ft_child_main, &a, g->errfd[a.run]);
	if (pid < 0) {
		fprintf(stderr, "ft_group: fork: %s\n", strerror(errno));
		return -1;
	}
	r->pid = pid;
	g->run[i] = g->nruns++;
	g->frozen[i] = 0;
	return 0;
}

/* The highest sequence number process record @r may hold. */
/* The cores this process may run on: its affinity, and at most its cgroup's CPU quota. */
static double ft_cores(void)
{
	cpu_set_t set;
	double n = 1, quota, period;
	FILE *f = fopen("/sys/fs/cgroup/cpu.max", "r");

	CPU_ZERO(&set);
	if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) > 0)
		n = CPU_COUNT(&set);
	if (f && fscanf(f, "%lf %lf", &quota, &period) == 2 && quota > 0 && period > 0 &&
	    quota / period < n)
		n = quota / period > 1 ? quota / period : 1;
	if (f)
		fclose(f);
	return n;
}

int ft_group_end(struct ft_group *g, int timeout_ms, double *max_destroy_ms, double *cpu_wait_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	int asked[FT_GROUP_MAX_RUNS] = { 0 };
	double ms[FT_GROUP_MAX_RUNS] = { 0 }, cpu[FT_GROUP_MAX_RUNS] = { 0 }, all = 0;
	double cores = ft_cores(), worst = -1e300, worst_ms = 0, worst_wait = 0;
	int bad = 0;

	if (max_destroy_ms)
		*max_destroy_ms = 0;
	if (cpu_wait_ms)
		*cpu_wait_ms = 0;
	if (!g->sh)
		return 0;
	for (int i = 0; i < g->n; i++) {
		int ri = g->run[i];

		if (ri < 0 || g->exit_status[ri] != -1)
			continue;
		if (g->frozen[i]) {
			ft_group_kill(g, i);
			continue;
		}
		atomic_store(&g->sh->run[ri].stop, 1);
		asked[ri] = 1;
	}
	for (int ri = 0; ri < g->nruns; ri++) {
		int st = -1;
		int64_t left = (deadline - chaos_now_ns()) / 1000000;

		if (!asked[ri])
			continue;
		if (chaos_wait_exit(g->sh->run[ri].pid, left > 0 ? (int)left : 0, &st) ||
		    !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
			bad++;
		}
		if (atomic_load(&g->sh->run[ri].destroy_ns))
			ms[ri] = chaos_ms(0, atomic_load(&g->sh->run[ri].destroy_ns));
		cpu[ri] = (double)atomic_load(&g->sh->run[ri].destroy_cpu_ns) / 1e6;
		all += cpu[ri];
	}
	/* Each destroy against what the others' destroys, at once, can keep it waiting for. */
	for (int ri = 0; ri < g->nruns; ri++) {
		double wait = (all - cpu[ri]) / cores;

		if (asked[ri] && ms[ri] - wait > worst) {
			worst = ms[ri] - wait;
			worst_ms = ms[ri];
			worst_wait = wait;
		}
	}
	for (int ri = 0; ri < g->nruns; ri++) {
		chaos_kill(g->sh->run[ri].pid);
		if (g->errfd[ri] >= 0)
			close(g->errfd[ri]);
	}
	munmap(g->sh, sizeof(*g->sh));
	memset(g, 0, sizeof(*g));
	if (max_destroy_ms)
		*max_destroy_ms = worst_ms;
	if (cpu_wait_ms)
		*cpu_wait_ms = worst_wait;
	return bad;
}
