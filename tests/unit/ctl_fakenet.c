/* SPDX-License-Identifier: BSD-3-Clause */
/* Fake network for the membership state machines: connections as FIFO queues of frame copies
 * (round-tripped through the wire codec) with a delay, the ops of members and coordinators,
 * routing of HELLOs as the runtime does, delivery to endpoints that run, raw clients.
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

/* ---- messages and events ------------------------------------------------------------------ */

static struct ctl_msg *msg_dup(struct fn *fn, const struct ctl_msg *m)
{
	struct ctl_msg *d = fn_xcalloc(1, sizeof(*d));
	ssize_t len;

	d->members = fn_xcalloc(m->nmembers, sizeof(*d->members));
	d->members_cap = m->nmembers;
	if (!fn->cfg.no_wire) {
		len = ctl_msg_encode(m, fn->wbuf, CTL_FRAME_MAX);
		if (len < 0) {
			fn_viol(fn, "ctl_msg_encode(%s) = %zd", ctl_type_name(m->type), len);
		} else if (ctl_msg_decode(fn->wbuf, (size_t)len, d) != 0) {
			fn_viol(fn, "ctl_msg_decode of an encoded %s failed",
				ctl_type_name(m->type));
		} else {
			if (d->type != m->type || d->epoch != m->epoch ||
			    d->nmembers != m->nmembers || d->group_id != m->group_id) {
				fn_viol(fn, "%s changed in a wire round trip",
					ctl_type_name(m->type));
			}
			return d;
		}
	}
	{
		struct ctl_member_rec *mem = d->members;

		*d = *m;
		d->members = mem;
		d->members_cap = m->nmembers;
		if (m->nmembers) {
			memcpy(mem, m->members, m->nmembers * sizeof(*mem));
		}
	}
	return d;
}

void fn_msg_free(struct ctl_msg *m)
{
	if (m) {
		free(m->members);
		free(m);
	}
}

static void ev_add(struct fn *fn, int kind, uint32_t conn, uint64_t due, struct ctl_msg *m)
{
	if (fn->nevs == fn->capevs) {
		fn->capevs = fn->capevs * 2 + 64;
		fn->evs = realloc(fn->evs, fn->capevs * sizeof(*fn->evs));
		cr_assert_not_null(fn->evs, "out of memory");
	}
	fn->evs[fn->nevs++] =
		(struct fn_ev){ .due = due, .seq = fn->seq++, .kind = kind, .conn = conn, .m = m };
}

static struct fn_conn *fn_conn_get(struct fn *fn, uint32_t id)
{
	return id >= 1 && id <= fn->nconns ? fn->conns[id - 1] : NULL;
}

uint64_t fn_rand(struct fn *fn)
{
	/* xorshift64*: deterministic per seed. */
	fn->rng ^= fn->rng >> 12;
	fn->rng ^= fn->rng << 25;
	fn->rng ^= fn->rng >> 27;
	return fn->rng * 0x2545f4914f6cdd1dull;
}

static uint64_t lat(struct fn *fn)
{
	return fn->cfg.latency_ms + (fn->cfg.jitter_ms ? fn_rand(fn) % (fn->cfg.jitter_ms + 1) : 0);
}

void fn_send_c2s(struct fn *fn, struct fn_conn *c, int kind, struct ctl_msg *m)
{
	uint64_t due = fn->now + lat(fn);

	due = due < c->last_c2s ? c->last_c2s : due;
	c->last_c2s = due;
	ev_add(fn, kind, c->id, due, m);
}

void fn_send_s2c(struct fn *fn, struct fn_conn *c, int kind, struct ctl_msg *m)
{
	uint64_t due = fn->now + lat(fn);

	due = due < c->last_s2c ? c->last_s2c : due;
	c->last_s2c = due;
	ev_add(fn, kind, c->id, due, m);
}

static int side_of(const struct fn *fn, int e)
{
	if (e == FN_DAEMON) {
		return fn->daemon_side;
	}
	return e >= 0 ? fn->nodes[e].side : 0;
}

static void watch(struct fn *fn, int from, int to, const struct ctl_msg *m)
{
	char a[32], b[32], text[768];

	fn_msg_text(m, text, sizeof(text));
	fn_tr(fn, "%s -> %s: %s", fn_ep_name(fn, from, a, sizeof(a)),
	      fn_ep_name(fn, to, b, sizeof(b)), text);
	if (fn->watch) {
		fn->watch(fn->watch_arg, from, to, m);
	}
}

/* ---- coordinator ops ---------------------------------------------------------------------- */

static int srv_ep(const struct fn_cslot *s)
{
	return s->node;
}

static void co_send(void *arg, uint32_t conn, const struct ctl_msg *m)
{
	struct fn_cslot *s = arg;
	struct fn *fn = s->fn;
	struct fn_conn *c = fn_conn_get(fn, conn);

	if (!c || c->srv != s) {
		fn_viol(fn, "coordinator sends on conn %u it does not own", conn);
		return;
	}
	if (c->sclose_called) {
		fn_viol(fn, "coordinator sends %s on conn %u after closing it",
			ctl_type_name(m->type), conn);
		return;
	}
	if (c->sclosed) {
		fn_tr(fn, "conn %u ended: %s dropped", conn, ctl_type_name(m->type));
		return;
	}
	watch(fn, srv_ep(s), c->client, m);
	if (m->type == CTL_VIEW) {
		struct fn_rec r;

		if (fn_rec_fill(fn, &r, s->g, m->epoch, m->boundary, m->coord, m->members,
				m->nmembers, "coordinator VIEW") == 0) {
			r.node = s->node == FN_DAEMON ? FN_DAEMON : -1;
			fn_commit_note(fn, s->g, &r, "coordinator VIEW");
		}
	} else if (m->type == CTL_PROPOSE && m->epoch > fn->groups[s->g].max_prop) {
		fn->groups[s->g].max_prop = m->epoch;
	}
	fn_send_s2c(fn, c, EV_S2C, msg_dup(fn, m));
}

static void co_close(void *arg, uint32_t conn)
{
	struct fn_cslot *s = arg;
	struct fn *fn = s->fn;
	struct fn_conn *c = fn_conn_get(fn, conn);

	if (!c || c->srv != s) {
		fn_viol(fn, "coordinator closes conn %u it does not own", conn);
		return;
	}
	if (c->sclose_called) {
		fn_viol(fn, "coordinator closes conn %u twice", conn);
		return;
	}
	fn_tr(fn, "coordinator closes conn %u", conn);
	c->sclose_called = 1;
	if (!c->sclosed) {
		c->sclosed = 1;
		fn_send_s2c(fn, c, EV_S2C_EOF, NULL);
	}
}

static void co_probe(void *arg, uint32_t id, uint64_t incarnation)
{
	struct fn_cslot *s = arg;
	struct fn *fn = s->fn;
	struct fn_group *gr = &fn->groups[s->g];
	struct fn_probe *p;
	int node = id < gr->size ? (int)(gr->base + id) : -1;
	int across = node < 0 || side_of(fn, s->node) != side_of(fn, node);

	fn->probes = fn_xgrow(fn->probes, &fn->capprobes, fn->nprobes + 1, sizeof(*fn->probes));
	p = &fn->probes[fn->nprobes++];
	p->s = s;
	p->id = id;
	p->inc = incarnation;
	p->node = node;
	p->across = across;
	p->due = fn->now + (across ? fn->cfg.net_connect_timeout_ms : 2 * lat(fn));
	fn_tr(fn, "coordinator probes member %u", id);
}

void fn_probes_due(struct fn *fn)
{
	for (uint32_t i = 0; i < fn->nprobes;) {
		struct fn_probe p = fn->probes[i];
		int host = p.s->node;
		enum ctl_probe_result res;

		if (p.due > fn->now ||
		    (host >= 0 && fn->nodes[host].alive && fn->nodes[host].frozen)) {
			i++;
			continue;
		}
		fn->probes[i] = fn->probes[--fn->nprobes];
		if (!p.s->c || (host >= 0 && !fn->nodes[host].alive)) {
			continue; /* its coordinator is gone */
		}
		if (p.across || p.node < 0) {
			res = CTL_PROBE_UNKNOWN;
		} else if (!fn->nodes[p.node].alive) {
			res = CTL_PROBE_REFUSED;
		} else if (fn->nodes[p.node].frozen) {
			res = CTL_PROBE_UNKNOWN; /* its kernel accepts, but nobody answers */
		} else {
			res = CTL_PROBE_ALIVE;
		}
		fn_tr(fn, "probe of member %u: %s", p.id,
		      res == CTL_PROBE_ALIVE   ? "alive" :
		      res == CTL_PROBE_REFUSED ? "refused" :
						 "no answer");
		ctl_coord_on_probe(p.s->c, p.id, p.inc, res, fn->now);
	}
}

static struct fn_cslot *cslot_new(struct fn *fn, int node, uint32_t g, struct ctl_coord_cfg *cfg)
{
	struct fn_cslot *s = fn_xcalloc(1, sizeof(*s));
	struct ctl_coord_ops ops = {
		.arg = s, .send = co_send, .close = co_close, .probe = co_probe
	};

	s->fn = fn;
	s->node = node;
	s->g = g;
	s->next = fn->slots;
	fn->slots = s;
	if (!cfg->hb_ms) {
		cfg->hb_ms = fn->cfg.hb_ms;
	}
	if (!cfg->timeout_ms) {
		cfg->timeout_ms = fn->cfg.timeout_ms;
	}
	if (!cfg->form_timeout_ms) {
		cfg->form_timeout_ms = fn->cfg.form_timeout_ms;
	}
	fn->form_timeout = cfg->form_timeout_ms;
	s->c = ctl_coord_create(cfg, &ops, fn->now);
	cr_assert_not_null(s->c, "ctl_coord_create failed");
	return s;
}

void fn_cslot_end(struct fn *fn, struct fn_cslot *s, int how)
{
	if (!s || !s->c) {
		return;
	}
	if (how == 1) {
		ctl_coord_shutdown(s->c, fn->now);
	} else if (how == 2) {
		ctl_coord_host_left(s->c, "left", fn->now);
	}
	ctl_coord_destroy(s->c);
	s->c = NULL;
	/* The runtime closes what is still routed to a coordinator that goes. */
	for (uint32_t i = 0; i < fn->nconns; i++) {
		struct fn_conn *c = fn->conns[i];

		if (c->srv == s && !c->sclosed) {
			c->sclosed = 1;
			fn_send_s2c(fn, c, EV_S2C_EOF, NULL);
		}
	}
}

/* ---- member ops ------------------------------------------------------------------------------ */

static void ms_disconnect(void *arg);

static struct fn_conn *fn_conn_new(struct fn *fn, int client, int target)
{
	struct fn_conn *c = fn_xcalloc(1, sizeof(*c));

	fn->conns = fn_xgrow(fn->conns, &fn->capconns, fn->nconns + 1, sizeof(*fn->conns));
	fn->conns[fn->nconns++] = c;
	c->id = fn->nconns;
	c->client = client;
	c->cgen = client >= 0 ? fn->nodes[client].gen : 0;
	c->target = target;
	c->cstate = CS_CONNECTING;
	c->t_req = fn->now;
	c->last_c2s = fn->now + lat(fn);
	ev_add(fn, EV_CONNECT, c->id, c->last_c2s, NULL);
	return c;
}

static void ms_connect(void *arg, uint32_t target)
{
	struct fn_node *nd = arg;
	struct fn *fn = nd->fn;
	struct fn_group *gr = &fn->groups[nd->g];
	char who[32];
	int t;

	fn_ep_name(fn, nd->k, who, sizeof(who));
	if (nd->conn) {
		struct fn_conn *old = fn_conn_get(fn, nd->conn);

		if (old && old->cstate != CS_CLOSED) {
			fn_tr(fn, "%s: connect while conn %u is open: closing it", who, old->id);
			ms_disconnect(nd);
		}
	}
	if (target == CTL_NO_MEMBER) {
		if (!fn->cfg.daemon) {
			fn_viol(fn, "%s: embedded member connects to the daemon", who);
		}
		t = FN_DAEMON;
	} else {
		if (fn->cfg.daemon || target >= gr->size) {
			fn_viol(fn, "%s: connect to member %u", who, target);
			target = 0;
		}
		t = (int)(gr->base + target);
	}
	nd->conn = fn_conn_new(fn, nd->k, t)->id;
	{
		char to[32];

		fn_tr(fn, "%s: connect to %s (conn %u)", who, fn_ep_name(fn, t, to, sizeof(to)),
		      nd->conn);
	}
}

static void ms_send(void *arg, const struct ctl_msg *m)
{
	struct fn_node *nd = arg;
	struct fn *fn = nd->fn;
	struct fn_conn *c = fn_conn_get(fn, nd->conn);
	char who[32];

	if (m->type >= 1 && m->type <= CTL_TYPE_MAX) {
		nd->sent[m->type]++;
	}
	if (!c || c->cstate == CS_CLOSED) {
		fn_tr(fn, "%s: %s dropped: no link", fn_ep_name(fn, nd->k, who, sizeof(who)),
		      ctl_type_name(m->type));
		return;
	}
	if (c->nsent++ == 0 && m->type != CTL_HELLO) {
		fn_viol(fn, "%s: first frame on conn %u is %s, not HELLO",
			fn_ep_name(fn, nd->k, who, sizeof(who)), c->id, ctl_type_name(m->type));
	}
	watch(fn, nd->k, c->target, m);
	fn_send_c2s(fn, c, EV_C2S, msg_dup(fn, m));
}

static void ms_disconnect(void *arg)
{
	struct fn_node *nd = arg;
	struct fn *fn = nd->fn;
	struct fn_conn *c = fn_conn_get(fn, nd->conn);
	char who[32];

	nd->conn = 0;
	if (!c || c->cstate == CS_CLOSED) {
		return;
	}
	fn_tr(fn, "%s: disconnect conn %u", fn_ep_name(fn, nd->k, who, sizeof(who)), c->id);
	if (c->cstate == CS_CONNECTING) {
		c->failed = 1;
	} else {
		fn_send_c2s(fn, c, EV_C2S_EOF, NULL);
	}
	c->cstate = CS_CLOSED;
}

static void ms_host(void *arg, const struct ctl_coord_cfg *cfg)
{
	struct fn_node *nd = arg;
	struct fn *fn = nd->fn;
	struct ctl_coord_cfg c;
	char who[32];

	fn_ep_name(fn, nd->k, who, sizeof(who));
	if (!cfg) {
		fn_tr(fn, "%s: stops hosting (another takeover won)", who);
		fn_cslot_end(fn, nd->cs, 1);
		nd->cs = NULL;
		return;
	}
	c = *cfg;
	if (fn->cfg.daemon) {
		fn_viol(fn, "%s: a daemon-mode member hosts a coordinator", who);
	}
	if (c.host != nd->id) {
		fn_viol(fn, "%s: hosts a coordinator with host = %u", who, c.host);
	}
	if (strcmp(c.group, fn->groups[nd->g].name) || c.expected != fn->groups[nd->g].size) {
		fn_viol(fn, "%s: hosts a coordinator of group '%s' expected %u", who, c.group,
			c.expected);
	}
	fn_tr(fn,
	      "%s: hosts a coordinator (%s, epoch %llu, max %llu, %u members, suspect "
	      "%d)",
	      who, c.takeover ? "takeover" : "forming", (unsigned long long)c.epoch,
	      (unsigned long long)c.max_epoch, c.nmembers, (int)c.suspect);
	fn_cslot_end(fn, nd->cs, 1);
	nd->cs = cslot_new(fn, nd->k, nd->g, &c);
}

static void ms_changed(void *arg)
{
	struct fn_node *nd = arg;

	nd->dirty = 1;
}

const struct ctl_msm_ops fn_msm_ops = {
	.connect = ms_connect,
	.send = ms_send,
	.disconnect = ms_disconnect,
	.host = ms_host,
	.changed = ms_changed,
};

/* ---- delivery -------------------------------------------------------------------------------- */

enum { RX_RUN, RX_BLOCKED, RX_DROP };

/* Whether the receiver of @e can take it now. */
static int ev_receiver(const struct fn *fn, const struct fn_ev *e, struct fn_conn *c)
{
	int stream = e->kind == EV_C2S || e->kind == EV_C2S_EOF || e->kind == EV_S2C ||
		     e->kind == EV_S2C_EOF;

	int to_server = e->kind == EV_C2S || e->kind == EV_C2S_EOF;
	int ep = to_server ? c->target : c->client;

	if (to_server && (c->failed || !c->resolved)) {
		return c->failed ? RX_DROP : RX_BLOCKED;
	}
	if (ep >= 0) {
		const struct fn_node *nd = &fn->nodes[ep];
		uint64_t gen = to_server ? c->tgen : c->cgen;

		if (e->kind != EV_CONNECT && (!nd->alive || nd->gen != gen)) {
			return RX_DROP;
		}
		if (e->kind == EV_CONNECT && (!nd->alive || nd->gen != c->cgen)) {
			return RX_DROP;
		}
		if (nd->frozen) {
			return RX_BLOCKED;
		}
	}
	if (stream && c->cut) {
		return RX_DROP;
	}
	if (stream && side_of(fn, c->client) != side_of(fn, c->target)) {
		if (fn->cfg.partition_delays) {
			return RX_BLOCKED; /* TCP retransmits until the partition heals */
		}
		/* Lost: and so is the rest of the stream (TCP delivers in order or not at all). */
		c->cut = 1;
		return RX_DROP;
	}
	return RX_RUN;
}

static void client_connected(struct fn *fn, struct fn_conn *c)
{
	if (c->client == FN_RAW) {
		fn->raws[c->raw].status = 1;
		return;
	}
	ctl_msm_on_connected(fn->nodes[c->client].msm, fn->now);
	fn_node_after(fn, &fn->nodes[c->client]);
}

static void client_closed(struct fn *fn, struct fn_conn *c, int refused, int death)
{
	char who[32];

	c->cstate = CS_CLOSED;
	fn_tr(fn, "%s: conn %u ends (refused %d, death %d)",
	      fn_ep_name(fn, c->client, who, sizeof(who)), c->id, refused, death);
	if (c->client == FN_RAW) {
		fn->raws[c->raw].status = 2;
		return;
	}
	if (fn->nodes[c->client].conn == c->id) {
		fn->nodes[c->client].conn = 0;
	}
	ctl_msm_on_close(fn->nodes[c->client].msm, refused, death, fn->now);
	fn_node_after(fn, &fn->nodes[c->client]);
}

static void deliver_connect(struct fn *fn, struct fn_conn *c, int timeout)
{
	int t = c->target;

	if (c->cstate != CS_CONNECTING) {
		return;
	}
	if (timeout) {
		c->failed = 1;
		client_closed(fn, c, 0, 0);
		return;
	}
	if (t >= 0 && !fn->nodes[t].alive) {
		c->failed = 1;
		client_closed(fn, c, 1, 0);
		return;
	}
	if (side_of(fn, c->client) != side_of(fn, t)) {
		uint64_t due = c->t_req + fn->cfg.net_connect_timeout_ms;

		ev_add(fn, EV_TIMEOUT, c->id, due > fn->now ? due : fn->now + 1, NULL);
		return;
	}
	c->resolved = 1;
	c->tgen = t >= 0 ? fn->nodes[t].gen : 0;
	c->cstate = CS_OPEN;
	client_connected(fn, c);
}

/* Answers a HELLO that no coordinator takes, as the runtime does, and closes.
 */
static void refuse_hello(struct fn *fn, struct fn_conn *c, uint32_t code, uint32_t hint,
			 const char *text)
{
	struct ctl_msg r = { .type = CTL_REFUSE, .code = code, .hint = hint };
	const char *g = c->target >= 0 ? fn->groups[fn->nodes[c->target].g].name : "";

	r.group_id = ctl_group_id(g);
	snprintf(r.text, sizeof(r.text), "%s", text);
	watch(fn, c->target, c->client, &r);
	c->sclosed = 1;
	fn_send_s2c(fn, c, EV_S2C, msg_dup(fn, &r));
	fn_send_s2c(fn, c, EV_S2C_EOF, NULL);
}

/* The coordinator a first frame on @c goes to, or NULL after refusing it. */
static struct fn_cslot *route_hello(struct fn *fn, struct fn_conn *c, const struct ctl_msg *m)
{
	if (m->type != CTL_HELLO) {
		fn_viol(fn, "conn %u: first frame %s is not HELLO", c->id, ctl_type_name(m->type));
		refuse_hello(fn, c, CTL_REF_PROTOCOL, CTL_NO_MEMBER, "HELLO expected");
		return NULL;
	}
	if (m->group_id != ctl_group_id(m->group)) {
		fn_viol(fn, "conn %u: HELLO group id does not match group '%s'", c->id, m->group);
	}
	/* As the runtime does, a probe is answered before any coordinator sees it. */
	if (m->flags & CTL_HELLO_PROBE) {
		uint32_t hint = CTL_NO_MEMBER;

		if (c->target >= 0 && fn->nodes[c->target].msm) {
			hint = ctl_msm_coord(fn->nodes[c->target].msm);
		}
		refuse_hello(fn, c, CTL_REF_NOT_COORD, hint, "probe answered");
		return NULL;
	}
	if (c->target == FN_DAEMON) {
		for (uint32_t g = 0; g < fn->ngroups; g++) {
			struct fn_group *gr = &fn->groups[g];
			struct ctl_coord_cfg cfg = { .expected = m->expected,
						     .nstreams = m->nstreams,
						     .host = CTL_NO_MEMBER };

			if (strcmp(gr->name, m->group)) {
				continue;
			}
			if (!gr->daemon) {
				snprintf(cfg.group, sizeof(cfg.group), "%s", gr->name);
				fn_tr(fn, "daemon: new coordinator for '%s' (%u members)", gr->name,
				      m->expected);
				gr->daemon = cslot_new(fn, FN_DAEMON, g, &cfg);
			}
			return gr->daemon;
		}
		refuse_hello(fn, c, CTL_REF_PROTOCOL, CTL_NO_MEMBER, "unknown group");
		return NULL;
	}
	{
		struct fn_node *nd = &fn->nodes[c->target];

		if (strcmp(fn->groups[nd->g].name, m->group)) {
			refuse_hello(fn, c, CTL_REF_PROTOCOL, CTL_NO_MEMBER, "wrong group");
			return NULL;
		}
		if (nd->cs && nd->cs->c) {
			return nd->cs;
		}
		refuse_hello(fn, c, CTL_REF_NOT_COORD,
			     nd->msm ? ctl_msm_coord(nd->msm) : CTL_NO_MEMBER,
			     "this member does not coordinate");
		return NULL;
	}
}

static void deliver(struct fn *fn, struct fn_ev *e)
{
	struct fn_conn *c = fn_conn_get(fn, e->conn);

	switch (e->kind) {
	case EV_CONNECT:
	case EV_TIMEOUT:
		deliver_connect(fn, c, e->kind == EV_TIMEOUT);
		break;
	case EV_C2S:
		if (c->sclosed) {
			break;
		}
		if (!c->srv) {
			c->srv = route_hello(fn, c, e->m);
			if (!c->srv) {
				break;
			}
		}
		if (c->srv->c) {
			ctl_coord_on_msg(c->srv->c, c->id, e->m, fn->now);
		}
		break;
	case EV_C2S_EOF:
		if (c->sclosed) {
			break;
		}
		c->sclosed = 1;
		if (c->srv && c->srv->c) {
			fn_tr(fn, "conn %u: coordinator sees the peer close", c->id);
			ctl_coord_on_close(c->srv->c, c->id, 1, fn->now);
		}
		break;
	case EV_S2C:
		if (c->cstate != CS_OPEN) {
			break;
		}
		if (c->client == FN_RAW) {
			struct fn_raw *r = &fn->raws[c->raw];

			r->msgs = fn_xgrow(r->msgs, &r->cap, r->n + 1, sizeof(*r->msgs));
			r->msgs[r->n] = *e->m;
			e->m->members = NULL;
			r->n++;
		} else {
			ctl_msm_on_msg(fn->nodes[c->client].msm, e->m, fn->now);
			fn_node_after(fn, &fn->nodes[c->client]);
		}
		break;
	case EV_S2C_EOF:
		if (c->cstate == CS_OPEN) {
			client_closed(fn, c, 0, 1);
		}
		break;
	}
}

static int ev_before(const struct fn_ev *a, const struct fn_ev *b)
{
	return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

/* Delivers every event due by now, in (due, seq) order, to receivers that run.
 */
void fn_deliver_due(struct fn *fn)
{
	for (;;) {
		size_t best = SIZE_MAX;

		for (size_t i = 0; i < fn->nevs; i++) {
			struct fn_ev *e = &fn->evs[i];
			int rx;

			if (e->due > fn->now) {
				continue;
			}
			rx = ev_receiver(fn, e, fn_conn_get(fn, e->conn));
			if (rx == RX_DROP) {
				fn_msg_free(e->m);
				fn->evs[i--] = fn->evs[--fn->nevs];
				continue;
			}
			if (rx == RX_RUN && (best == SIZE_MAX || ev_before(e, &fn->evs[best]))) {
				best = i;
			}
		}
		if (best == SIZE_MAX) {
			return;
		}
		{
			struct fn_ev e = fn->evs[best];

			fn->evs[best] = fn->evs[--fn->nevs];
			deliver(fn, &e);
			fn_msg_free(e.m);
		}
	}
}

/* ---- raw clients ----------------------------------------------------------------------------- */

int fn_raw_open(struct fn *fn, int target)
{
	int h = fn->nraws++;
	struct fn_conn *c;

	cr_assert_lt(h, FN_MAX_RAW);
	c = fn_conn_new(fn, FN_RAW, target);
	c->raw = h;
	fn->raws[h].conn = c->id;
	return h;
}

void fn_raw_send(struct fn *fn, int h, const struct ctl_msg *m)
{
	struct fn_conn *c = fn_conn_get(fn, fn->raws[h].conn);

	watch(fn, FN_RAW, c->target, m);
	fn_send_c2s(fn, c, EV_C2S, msg_dup(fn, m));
}

const struct ctl_msg *fn_raw_msgs(const struct fn *fn, int h, uint32_t *n)
{
	*n = fn->raws[h].n;
	return fn->raws[h].msgs;
}

int fn_raw_status(const struct fn *fn, int h)
{
	return fn->raws[h].status;
}
