/* SPDX-License-Identifier: BSD-3-Clause */
/* Fake network harness, the cluster: making and freeing it, starting members, the faults (kill,
 * freeze, partition, restart, leave), the fake clock and the bounded waits on it.
 */
#define _GNU_SOURCE
#include "ctl_fakenet_int.h"

#include <criterion/criterion.h>
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- cluster --------------------------------------------------------------------------------- */

struct fn *fn_new(const struct fn_cfg *cfg)
{
	struct fn *fn = fn_xcalloc(1, sizeof(*fn));
	uint32_t base = 0;

	fn->cfg = *cfg;
	fn->cfg.hb_ms = cfg->hb_ms ? cfg->hb_ms : 100;
	fn->cfg.timeout_ms = cfg->timeout_ms ? cfg->timeout_ms : 1000;
	fn->cfg.connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms : 5000;
	fn->cfg.form_timeout_ms = cfg->form_timeout_ms ? cfg->form_timeout_ms : 3000;
	fn->cfg.step_ms = cfg->step_ms ? cfg->step_ms : 10;
	fn->cfg.latency_ms = cfg->latency_ms ? cfg->latency_ms : 1;
	fn->cfg.net_connect_timeout_ms =
		cfg->net_connect_timeout_ms ? cfg->net_connect_timeout_ms : 500;
	fn->rng = cfg->seed ? cfg->seed * 0x9e3779b97f4a7c15ull : 1;
	fn->ngroups = cfg->daemon && cfg->ngroups ? cfg->ngroups : 1;
	cr_assert_leq(fn->ngroups, FN_MAX_GROUPS);
	fn->now = FN_T0;
	fn->trace = fn_xcalloc(FN_TRACE_MAX, 1);
	fn->wbuf = fn_xcalloc(CTL_FRAME_MAX, 1);
	for (uint32_t g = 0; g < fn->ngroups; g++) {
		struct fn_group *gr = &fn->groups[g];

		snprintf(gr->name, sizeof(gr->name), fn->ngroups == 1 ? "fake" : "fake-%u", g);
		gr->size = cfg->sizes[g];
		gr->base = base;
		cr_assert(gr->size >= 1 && base + gr->size <= FN_MAX_NODES, "bad group size %u",
			  gr->size);
		for (uint32_t i = 0; i < gr->size; i++) {
			struct fn_node *nd = &fn->nodes[base + i];

			nd->fn = fn;
			nd->k = (int)(base + i);
			nd->g = g;
			nd->id = i;
		}
		base += gr->size;
	}
	fn->nnodes = (int)base;
	return fn;
}

void fn_free(struct fn *fn)
{
	if (!fn) {
		return;
	}
	for (int k = 0; k < fn->nnodes; k++) {
		if (fn->nodes[k].msm) {
			ctl_msm_destroy(fn->nodes[k].msm);
		}
		free(fn->nodes[k].recs);
	}
	while (fn->slots) {
		struct fn_cslot *s = fn->slots;

		fn->slots = s->next;
		if (s->c) {
			ctl_coord_destroy(s->c);
		}
		free(s);
	}
	for (uint32_t g = 0; g < fn->ngroups; g++) {
		free(fn->groups[g].epochs);
	}
	for (size_t i = 0; i < fn->nevs; i++) {
		fn_msg_free(fn->evs[i].m);
	}
	for (uint32_t i = 0; i < fn->nconns; i++) {
		free(fn->conns[i]);
	}
	for (int h = 0; h < fn->nraws; h++) {
		for (uint32_t i = 0; i < fn->raws[h].n; i++) {
			free(fn->raws[h].msgs[i].members);
		}
		free(fn->raws[h].msgs);
	}
	free(fn->evs);
	free(fn->probes);
	free(fn->conns);
	free(fn->trace);
	free(fn->wbuf);
	free(fn);
}

int fn_node(const struct fn *fn, uint32_t g, uint32_t id)
{
	cr_assert(g < fn->ngroups && id < fn->groups[g].size);
	return (int)(fn->groups[g].base + id);
}

int fn_nodes(const struct fn *fn)
{
	return fn->nnodes;
}

static struct fn_node *node_of(struct fn *fn, int k)
{
	cr_assert(k >= 0 && k < fn->nnodes, "no node %d", k);
	return &fn->nodes[k];
}

static void node_create(struct fn *fn, struct fn_node *nd, int join, int catchup)
{
	struct ctl_msm_cfg cfg = { .id = nd->id,
				   .expected = fn->groups[nd->g].size,
				   .daemon = fn->cfg.daemon,
				   .join = join,
				   .catchup = catchup,
				   .timeout_ms = fn->cfg.timeout_ms,
				   .hb_ms = fn->cfg.hb_ms,
				   .connect_timeout_ms = fn->cfg.connect_timeout_ms,
				   .nstreams = fn->cfg.nstreams };
	struct ctl_msm_ops ops = fn_msm_ops;
	char who[32];

	snprintf(cfg.group, sizeof(cfg.group), "%s", fn->groups[nd->g].name);
	nd->inc = 0x1000000ull * (uint64_t)(nd->k + 1) + 0x1111ull * (nd->restarts + 1);
	nd->done_op = 0; /* a new process starts at op 0 */
	fn_info_of(nd->g, nd->id, nd->inc, nd->info);
	cfg.incarnation = nd->inc;
	cfg.info_len = (uint16_t)strlen(nd->info);
	memcpy(cfg.info, nd->info, cfg.info_len);
	ops.arg = nd;
	nd->alive = 1;
	nd->frozen = 0;
	nd->has_state = 0;
	nd->conn = 0;
	fn_tr(fn, "%s: start (inc %llx, join %d, catchup %d)",
	      fn_ep_name(fn, nd->k, who, sizeof(who)), (unsigned long long)nd->inc, join, catchup);
	nd->msm = ctl_msm_create(&cfg, &ops, fn->now);
	cr_assert_not_null(nd->msm, "ctl_msm_create failed");
	nd->dirty = 1; /* the first state needs no changed() */
	fn_node_after(fn, nd);
}

void fn_start(struct fn *fn, int k)
{
	struct fn_node *nd = node_of(fn, k);

	cr_assert(!nd->alive, "node %d already started", k);
	node_create(fn, nd, 0, 0);
}

void fn_start_all(struct fn *fn)
{
	for (int k = 0; k < fn->nnodes; k++) {
		fn_start(fn, k);
	}
}

void fn_kill(struct fn *fn, int k)
{
	struct fn_node *nd = node_of(fn, k);
	char who[32];

	if (!nd->alive) {
		return;
	}
	fn_tr(fn, "%s: KILLED", fn_ep_name(fn, k, who, sizeof(who)));
	if (nd->msm) {
		ctl_msm_destroy(nd->msm);
		nd->msm = NULL;
	}
	if (nd->cs && nd->cs->c) {
		ctl_coord_destroy(nd->cs->c);
		nd->cs->c = NULL;
	}
	nd->cs = NULL;
	/* The kernel closes every socket of the process: peers read EOF after what was sent. */
	for (uint32_t i = 0; i < fn->nconns; i++) {
		struct fn_conn *c = fn->conns[i];

		if (c->client == k && c->cgen == nd->gen && c->cstate != CS_CLOSED) {
			if (c->cstate == CS_OPEN) {
				fn_send_c2s(fn, c, EV_C2S_EOF, NULL);
			} else {
				c->failed = 1;
			}
			c->cstate = CS_CLOSED;
		}
		if (c->target == k && c->resolved && c->tgen == nd->gen && !c->sclosed) {
			c->sclosed = 1;
			fn_send_s2c(fn, c, EV_S2C_EOF, NULL);
		}
	}
	nd->alive = 0;
	nd->frozen = 0;
	nd->gen++;
	nd->conn = 0;
}

void fn_freeze(struct fn *fn, int k)
{
	char who[32];

	node_of(fn, k)->frozen = 1;
	fn_tr(fn, "%s: FROZEN", fn_ep_name(fn, k, who, sizeof(who)));
}

void fn_thaw(struct fn *fn, int k)
{
	char who[32];

	node_of(fn, k)->frozen = 0;
	fn_tr(fn, "%s: THAWED", fn_ep_name(fn, k, who, sizeof(who)));
}

void fn_restart(struct fn *fn, int k, int catchup)
{
	struct fn_node *nd = node_of(fn, k);

	fn_kill(fn, k);
	nd->restarts++;
	node_create(fn, nd, 1, catchup);
}

static struct fn_node *running(struct fn *fn, int k)
{
	struct fn_node *nd = node_of(fn, k);

	cr_assert(nd->alive && nd->msm && !nd->frozen, "node %d does not run", k);
	return nd;
}

void fn_leave(struct fn *fn, int k)
{
	struct fn_node *nd = running(fn, k);
	char who[32];

	fn_tr(fn, "%s: LEAVE", fn_ep_name(fn, k, who, sizeof(who)));
	ctl_msm_leave(nd->msm, "the test", fn->now);
	fn_node_after(fn, nd);
	/* As the runtime does when a member leaves: the coordinator it hosts says so and goes. */
	fn_cslot_end(fn, nd->cs, 2);
	nd->cs = NULL;
}

int fn_ready(struct fn *fn, int k)
{
	struct fn_node *nd = running(fn, k);
	int rc = ctl_msm_ready(nd->msm, fn->now);

	fn_node_after(fn, nd);
	return rc;
}

void fn_suspect_at(struct fn *fn, int k, uint32_t peer, enum ctl_evidence ev, uint64_t seq)
{
	struct fn_node *nd = running(fn, k);

	ctl_msm_suspect(nd->msm, peer, ev, seq, fn->now);
	fn_node_after(fn, nd);
}

void fn_suspect(struct fn *fn, int k, uint32_t peer, enum ctl_evidence ev)
{
	struct fn_node *nd = running(fn, k);
	const struct ctl_epoch_rec *v = ctl_msm_view(nd->msm);

	uint64_t seq = v && v->boundary > nd->done_op ? v->boundary : nd->done_op;

	/* the op that failed: the first this member has not done */
	ctl_msm_suspect(nd->msm, peer, ev, seq, fn->now);
	fn_node_after(fn, nd);
}

void fn_partition(struct fn *fn, uint64_t side_b, int daemon_b)
{
	for (int k = 0; k < fn->nnodes; k++) {
		fn->nodes[k].side = (side_b >> k) & 1;
	}
	fn->daemon_side = !!daemon_b;
	fn_tr(fn, "PARTITION %llx | rest", (unsigned long long)side_b);
}

void fn_heal(struct fn *fn)
{
	for (int k = 0; k < fn->nnodes; k++) {
		fn->nodes[k].side = 0;
	}
	fn->daemon_side = 0;
	fn_tr(fn, "HEAL");
}

void fn_progress(struct fn *fn, int k, uint64_t next_op, uint64_t done_op)
{
	struct fn_node *nd = running(fn, k);

	ctl_msm_progress(nd->msm, next_op, done_op);
	nd->done_op = done_op;
	fn_node_after(fn, nd);
}

void fn_progress_s(struct fn *fn, int k, uint32_t t, uint64_t next_op, uint64_t done_op)
{
	struct fn_node *nd = running(fn, k);

	ctl_msm_progress_s(nd->msm, t, next_op, done_op);
	if (t == 0) {
		nd->done_op = done_op;
	}
	fn_node_after(fn, nd);
}

void fn_suspect_s(struct fn *fn, int k, uint32_t peer, enum ctl_evidence ev, uint32_t t,
		  uint64_t seq)
{
	struct fn_node *nd = running(fn, k);

	ctl_msm_suspect_s(nd->msm, peer, ev, t, seq, fn->now);
	fn_node_after(fn, nd);
}

/* ---- clock ----------------------------------------------------------------------------------- */

uint64_t fn_now(const struct fn *fn)
{
	return fn->now - FN_T0;
}

void fn_step(struct fn *fn)
{
	fn->now += fn->cfg.step_ms;
	fn_deliver_due(fn);
	fn_probes_due(fn);
	for (int k = 0; k < fn->nnodes; k++) {
		struct fn_node *nd = &fn->nodes[k];

		if (!nd->alive || nd->frozen) {
			continue;
		}
		if (nd->cs && nd->cs->c) {
			ctl_coord_tick(nd->cs->c, fn->now);
		}
		if (nd->msm) {
			ctl_msm_tick(nd->msm, fn->now);
			fn_node_after(fn, nd);
		}
	}
	for (uint32_t g = 0; g < fn->ngroups; g++) {
		if (fn->groups[g].daemon && fn->groups[g].daemon->c) {
			ctl_coord_tick(fn->groups[g].daemon->c, fn->now);
		}
	}
}

void fn_run(struct fn *fn, uint64_t ms)
{
	uint64_t end = fn->now + ms;

	while (fn->now < end) {
		fn_step(fn);
	}
}

int fn_run_until(struct fn *fn, int (*pred)(struct fn *, void *), void *arg, uint64_t max_ms)
{
	uint64_t end = fn->now + max_ms;

	for (;;) {
		if (pred(fn, arg)) {
			return 0;
		}
		if (fn->now >= end) {
			fprintf(stderr, "fakenet: condition not met within %llu ms\n",
				(unsigned long long)max_ms);
			fn_dump(fn, 150);
			return -ETIMEDOUT;
		}
		fn_step(fn);
	}
}

struct view_want {
	uint64_t who;
	const uint32_t *ids;
	uint32_t n;
};

int fn_view_is(const struct fn *fn, int k, const uint32_t *ids, uint32_t n)
{
	const struct ctl_epoch_rec *v = fn_view(fn, k);

	if (!v || v->nmembers != n) {
		return 0;
	}
	for (uint32_t i = 0; i < n; i++) {
		if (v->members[i].id != ids[i]) {
			return 0;
		}
	}
	return 1;
}

static int view_pred(struct fn *fn, void *arg)
{
	const struct view_want *w = arg;
	uint64_t epoch = 0;

	for (int k = 0; k < fn->nnodes; k++) {
		if (!(w->who & FN_BIT(k))) {
			continue;
		}
		if (fn_state(fn, k) != CTL_M_ACTIVE || !fn_view_is(fn, k, w->ids, w->n)) {
			return 0;
		}
		if (epoch && fn_view(fn, k)->epoch != epoch) {
			return 0;
		}
		epoch = fn_view(fn, k)->epoch;
	}
	return 1;
}

int fn_wait_view(struct fn *fn, uint64_t who, const uint32_t *ids, uint32_t n, uint64_t max_ms)
{
	struct view_want w = { .who = who, .ids = ids, .n = n };

	return fn_run_until(fn, view_pred, &w, max_ms);
}

struct state_want {
	uint64_t who;
	int st; /* 0: any final state, or dead */
};

static int state_pred(struct fn *fn, void *arg)
{
	const struct state_want *w = arg;

	for (int k = 0; k < fn->nnodes; k++) {
		if (!(w->who & FN_BIT(k))) {
			continue;
		}
		if (w->st ? fn_state(fn, k) != (enum ctl_member_state)w->st :
			    fn->nodes[k].msm && !fn_is_final(fn_state(fn, k))) {
			return 0;
		}
	}
	return 1;
}

int fn_wait_state(struct fn *fn, uint64_t who, enum ctl_member_state st, uint64_t max_ms)
{
	struct state_want w = { .who = who, .st = (int)st };

	return fn_run_until(fn, state_pred, &w, max_ms);
}

int fn_wait_final(struct fn *fn, uint64_t who, uint64_t max_ms)
{
	struct state_want w = { .who = who, .st = 0 };

	return fn_run_until(fn, state_pred, &w, max_ms);
}

/* ---- conveniences for the tests ------------------------------------------------------------ */

static int formed_pred(struct fn *fn, void *arg)
{
	for (int k = 0; k < fn->nnodes; k++) {
		const struct ctl_epoch_rec *v = fn_view(fn, k);

		if (fn_state(fn, k) != CTL_M_ACTIVE || !v || v->epoch != 1 ||
		    v->nmembers != fn->groups[fn->nodes[k].g].size) {
			return 0;
		}
	}
	return 1;
}

void fn_form(struct fn *fn, uint64_t max_ms)
{
	fn_start_all(fn);
	cr_assert_eq(fn_run_until(fn, formed_pred, NULL, max_ms), 0,
		     "groups not formed within %llu ms", (unsigned long long)max_ms);
}

uint64_t fn_seen_all(const struct fn *fn, uint64_t who, uint64_t epoch)
{
	uint64_t max = 0;

	for (int k = 0; k < fn->nnodes; k++) {
		if (who & FN_BIT(k)) {
			uint64_t t = fn_seen_at(fn, k, epoch);

			max = t > max ? t : max;
		}
	}
	return max;
}

int fn_reason_has(const struct fn *fn, int k, const char *word)
{
	return strcasestr(fn_reason(fn, k), word) != NULL;
}

int fn_text_names(const char *text, uint32_t id)
{
	char num[16];
	size_t n = (size_t)snprintf(num, sizeof(num), "%u", id);

	for (const char *p = strstr(text, num); p; p = strstr(p + 1, num)) {
		if ((p == text || !isdigit((unsigned char)p[-1])) &&
		    !isdigit((unsigned char)p[n])) {
			return 1;
		}
	}
	return 0;
}

uint64_t fn_form_timeout(const struct fn *fn)
{
	return fn->form_timeout;
}
