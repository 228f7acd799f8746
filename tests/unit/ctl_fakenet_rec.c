/* SPDX-License-Identifier: BSD-3-Clause */
/* Fake network harness, records and checks: the trace, violations, every epoch each member saw
 * and every VIEW sent, the agreement checks made as they arrive and at the end, accessors.
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

void *fn_xcalloc(size_t n, size_t size)
{
	void *p = calloc(n ? n : 1, size);

	cr_assert_not_null(p, "out of memory");
	return p;
}

void *fn_xgrow(void *p, uint32_t *cap, uint32_t need, size_t size)
{
	if (need <= *cap) {
		return p;
	}
	*cap = need * 2 + 8;
	p = realloc(p, (size_t)*cap * size);
	cr_assert_not_null(p, "out of memory");
	return p;
}

/* ---- trace and violations ------------------------------------------------------------------ */

void fn_tr(struct fn *fn, const char *fmt, ...)
{
	char line[1024];
	va_list ap;
	int n;

	n = snprintf(line, sizeof(line), "[%6llu] ", (unsigned long long)(fn->now - FN_T0));
	va_start(ap, fmt);
	vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	strcat(line, "\n");
	n = (int)strlen(line);
	if (fn->tlen + (size_t)n + 1 > FN_TRACE_MAX) {
		size_t cut = FN_TRACE_MAX / 2;

		memmove(fn->trace, fn->trace + cut, fn->tlen - cut);
		fn->tlen -= cut;
	}
	memcpy(fn->trace + fn->tlen, line, (size_t)n + 1);
	fn->tlen += (size_t)n;
}

void fn_viol(struct fn *fn, const char *fmt, ...)
{
	char text[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(text, sizeof(text), fmt, ap);
	va_end(ap);
	fn_tr(fn, "VIOLATION: %s", text);
	if (fn->vlen + 8 < sizeof(fn->viol)) {
		fn->vlen += (size_t)snprintf(fn->viol + fn->vlen, sizeof(fn->viol) - fn->vlen,
					     "[t=%llu] %s; ", (unsigned long long)(fn->now - FN_T0),
					     text);
		if (fn->vlen >= sizeof(fn->viol)) {
			fn->vlen = sizeof(fn->viol) - 1;
		}
	}
}

const char *fn_ep_name(const struct fn *fn, int e, char *buf, size_t len)
{
	if (e == FN_DAEMON) {
		snprintf(buf, len, "daemon");
	} else if (e == FN_RAW) {
		snprintf(buf, len, "raw");
	} else if (fn->ngroups == 1) {
		snprintf(buf, len, "m%u", fn->nodes[e].id);
	} else {
		snprintf(buf, len, "g%u.m%u", fn->nodes[e].g, fn->nodes[e].id);
	}
	return buf;
}

void fn_msg_text(const struct ctl_msg *m, char *buf, size_t len)
{
	int n = snprintf(buf, len, "%s e%llu", ctl_type_name(m->type),
			 (unsigned long long)m->epoch);

	switch (m->type) {
	case CTL_HELLO:
		n += snprintf(buf + n, len - (size_t)n, " id=%u inc=%llx fl=%x max=%llu", m->member,
			      (unsigned long long)m->incarnation, m->flags,
			      (unsigned long long)m->max_epoch);
		break;
	case CTL_ACK:
		n += snprintf(buf + n, len - (size_t)n, " next=%llu done=%llu",
			      (unsigned long long)m->next_op, (unsigned long long)m->done_op);
		break;
	case CTL_VIEW:
	case CTL_PROPOSE:
		n += snprintf(buf + n, len - (size_t)n, " b=%llu coord=%d",
			      (unsigned long long)m->boundary, (int)m->coord);
		break;
	case CTL_SUSPECT:
		n += snprintf(buf + n, len - (size_t)n, " peer=%u ev=%u", m->peer, m->evidence);
		break;
	case CTL_REFUSE:
		n += snprintf(buf + n, len - (size_t)n, " %s hint=%d \"%s\"",
			      ctl_refuse_name(m->code), (int)m->hint, m->text);
		break;
	default:
		break;
	}
	if (m->type != CTL_HB && m->type != CTL_REFUSE && m->nmembers && (size_t)n + 8 < len) {
		n += snprintf(buf + n, len - (size_t)n, " [");
		for (uint32_t i = 0; i < m->nmembers && (size_t)n + 24 < len; i++) {
			n += snprintf(buf + n, len - (size_t)n, "%s%u%s%s", i ? " " : "",
				      m->members[i].id,
				      m->members[i].flags & CTL_MF_CONTRIB ? "" : "c",
				      m->members[i].flags & CTL_MF_DEAD ? "!" : "");
		}
		snprintf(buf + n, len - (size_t)n, "]");
	}
}

/* ---- records --------------------------------------------------------------------------------- */

int fn_is_final(enum ctl_member_state st)
{
	return st == CTL_M_LOST || st == CTL_M_REMOVED || st == CTL_M_LEFT;
}

void fn_info_of(uint32_t g, uint32_t id, uint64_t inc, char *buf)
{
	snprintf(buf, CTL_INFO_MAX, "g%u.m%u.%llx", g, id, (unsigned long long)inc);
}

/* Fills @r from a view's fields; 0, or -1 (violation noted) when it cannot be recorded. */
int fn_rec_fill(struct fn *fn, struct fn_rec *r, uint32_t g, uint64_t epoch, uint64_t boundary,
		uint32_t coord, const struct ctl_member_rec *mem, uint32_t n, const char *who)
{
	memset(r, 0, sizeof(*r));
	r->epoch = epoch;
	r->boundary = boundary;
	r->coord = coord;
	r->t = fn->now - FN_T0;
	if (n > FN_MAX_VIEW) {
		fn_viol(fn, "%s: epoch %llu has %u members, more than the harness records", who,
			(unsigned long long)epoch, n);
		return -1;
	}
	r->n = n;
	for (uint32_t i = 0; i < n; i++) {
		char want[CTL_INFO_MAX];

		r->ids[i] = mem[i].id;
		r->flags[i] = mem[i].flags;
		r->inc[i] = mem[i].incarnation;
		if (i && mem[i].id <= mem[i - 1].id) {
			fn_viol(fn, "%s: epoch %llu members not in id order", who,
				(unsigned long long)epoch);
		}
		fn_info_of(g, mem[i].id, mem[i].incarnation, want);
		if (mem[i].info_len != strlen(want) || memcmp(mem[i].info, want, strlen(want))) {
			fn_viol(fn, "%s: epoch %llu member %u info is not the blob it published",
				who, (unsigned long long)epoch, mem[i].id);
		}
	}
	return 0;
}

static int rec_same(const struct fn_rec *a, const struct fn_rec *b)
{
	if (a->epoch != b->epoch || a->boundary != b->boundary || a->coord != b->coord ||
	    a->n != b->n) {
		return 0;
	}
	for (uint32_t i = 0; i < a->n; i++) {
		if (a->ids[i] != b->ids[i] || a->flags[i] != b->flags[i] ||
		    a->inc[i] != b->inc[i]) {
			return 0;
		}
	}
	return 1;
}

static void rec_text(const struct fn_rec *r, char *buf, size_t len)
{
	int n = snprintf(buf, len, "e%llu b=%llu coord=%d {", (unsigned long long)r->epoch,
			 (unsigned long long)r->boundary, (int)r->coord);

	for (uint32_t i = 0; i < r->n && (size_t)n + 32 < len; i++) {
		n += snprintf(buf + n, len - (size_t)n, "%s%u%s/%llx", i ? " " : "", r->ids[i],
			      r->flags[i] & CTL_MF_CONTRIB ? "" : "c",
			      (unsigned long long)r->inc[i]);
	}
	snprintf(buf + n, len - (size_t)n, "}");
}

/* Adds @r to group @g's table of committed epochs, or checks it against the one there. */
void fn_commit_note(struct fn *fn, uint32_t g, const struct fn_rec *r, const char *who)
{
	struct fn_group *gr = &fn->groups[g];

	for (uint32_t i = 0; i < gr->nepochs; i++) {
		if (gr->epochs[i].epoch == r->epoch) {
			if (!rec_same(&gr->epochs[i], r)) {
				char a[512], b[512];

				rec_text(&gr->epochs[i], a, sizeof(a));
				rec_text(r, b, sizeof(b));
				fn_viol(fn, "disagreement on epoch %llu: %s saw %s, before: %s",
					(unsigned long long)r->epoch, who, b, a);
			}
			return;
		}
	}
	gr->epochs = fn_xgrow(gr->epochs, &gr->capepochs, gr->nepochs + 1, sizeof(*gr->epochs));
	gr->epochs[gr->nepochs++] = *r;
}

/* After every call into member @nd: note a new epoch or state, check the changed() contract and
 * that a final state stays final. */
void fn_node_after(struct fn *fn, struct fn_node *nd)
{
	const struct ctl_epoch_rec *v;
	enum ctl_member_state st;
	char who[32], text[512];
	struct fn_rec r;

	if (!nd->msm) {
		return;
	}
	fn_ep_name(fn, nd->k, who, sizeof(who));
	st = ctl_msm_state(nd->msm);
	v = ctl_msm_view(nd->msm);
	if (nd->has_state && st != nd->last_state) {
		if (!nd->dirty) {
			fn_viol(fn, "%s: state %s -> %s without changed()", who,
				ctl_member_state_name(nd->last_state), ctl_member_state_name(st));
		}
		if (fn_is_final(nd->last_state)) {
			fn_viol(fn, "%s: left final state %s for %s", who,
				ctl_member_state_name(nd->last_state), ctl_member_state_name(st));
		}
		fn_tr(fn, "%s: state %s -> %s (%s)", who, ctl_member_state_name(nd->last_state),
		      ctl_member_state_name(st), ctl_msm_reason(nd->msm));
	}
	nd->has_state = 1;
	nd->last_state = st;
	if (v && fn_rec_fill(fn, &r, nd->g, v->epoch, v->boundary, v->coord, v->members,
			     v->nmembers, who) == 0) {
		const struct fn_rec *last = nd->nrecs ? &nd->recs[nd->nrecs - 1] : NULL;

		r.node = nd->k;
		r.member_inc = nd->inc;
		if (last && last->member_inc == nd->inc && last->epoch == r.epoch) {
			if (!rec_same(last, &r)) {
				fn_viol(fn, "%s: epoch %llu changed content", who,
					(unsigned long long)r.epoch);
			}
		} else {
			if (!nd->dirty) {
				fn_viol(fn, "%s: epoch %llu without changed()", who,
					(unsigned long long)r.epoch);
			}
			if (last && r.epoch <= last->epoch) {
				fn_viol(fn, "%s: epoch %llu after %llu", who,
					(unsigned long long)r.epoch,
					(unsigned long long)last->epoch);
			}
			rec_text(&r, text, sizeof(text));
			fn_tr(fn, "%s: sees %s", who, text);
			nd->recs = fn_xgrow(nd->recs, &nd->caprecs, nd->nrecs + 1, sizeof(r));
			nd->recs[nd->nrecs++] = r;
			fn_commit_note(fn, nd->g, &r, who);
		}
	}
	nd->dirty = 0;
}

/* ---- accessors ------------------------------------------------------------------------------- */

struct ctl_msm *fn_msm(const struct fn *fn, int k)
{
	return k >= 0 && k < fn->nnodes ? fn->nodes[k].msm : NULL;
}

enum ctl_member_state fn_state(const struct fn *fn, int k)
{
	struct ctl_msm *s = fn_msm(fn, k);

	return s ? ctl_msm_state(s) : (enum ctl_member_state)0;
}

const char *fn_reason(const struct fn *fn, int k)
{
	struct ctl_msm *s = fn_msm(fn, k);

	return s ? ctl_msm_reason(s) : "(not running)";
}

const struct ctl_epoch_rec *fn_view(const struct fn *fn, int k)
{
	struct ctl_msm *s = fn_msm(fn, k);

	return s ? ctl_msm_view(s) : NULL;
}

struct ctl_coord *fn_coord(const struct fn *fn, int k)
{
	return fn->nodes[k].alive && fn->nodes[k].cs ? fn->nodes[k].cs->c : NULL;
}

struct ctl_coord *fn_daemon_coord(const struct fn *fn, uint32_t g)
{
	return fn->groups[g].daemon ? fn->groups[g].daemon->c : NULL;
}

uint64_t fn_incarnation(const struct fn *fn, int k)
{
	return fn->nodes[k].inc;
}

int fn_alive(const struct fn *fn, int k)
{
	return fn->nodes[k].alive;
}

const struct fn_rec *fn_recs(const struct fn *fn, int k, uint32_t *n)
{
	*n = fn->nodes[k].nrecs;
	return fn->nodes[k].recs;
}

uint64_t fn_seen_at(const struct fn *fn, int k, uint64_t epoch)
{
	for (uint32_t i = 0; i < fn->nodes[k].nrecs; i++) {
		if (fn->nodes[k].recs[i].epoch == epoch) {
			return fn->nodes[k].recs[i].t;
		}
	}
	return UINT64_MAX;
}

const struct fn_rec *fn_epoch(const struct fn *fn, uint32_t g, uint64_t epoch)
{
	for (uint32_t i = 0; i < fn->groups[g].nepochs; i++) {
		if (fn->groups[g].epochs[i].epoch == epoch) {
			return &fn->groups[g].epochs[i];
		}
	}
	return NULL;
}

uint64_t fn_max_epoch(const struct fn *fn, uint32_t g)
{
	uint64_t max = 0;

	for (uint32_t i = 0; i < fn->groups[g].nepochs; i++) {
		max = fn->groups[g].epochs[i].epoch > max ? fn->groups[g].epochs[i].epoch : max;
	}
	return max;
}

uint64_t fn_max_proposed(const struct fn *fn, uint32_t g)
{
	return fn->groups[g].max_prop;
}

uint32_t fn_sent(const struct fn *fn, int k, uint16_t type)
{
	return type >= 1 && type <= CTL_TYPE_MAX ? fn->nodes[k].sent[type] : 0;
}

void fn_set_watch(struct fn *fn, fn_watch_fn w, void *arg)
{
	fn->watch = w;
	fn->watch_arg = arg;
}

/* ---- checks ---------------------------------------------------------------------------------- */

int fn_check(struct fn *fn, char *err, size_t len)
{
	err[0] = 0;
	if (fn->vlen) {
		snprintf(err, len, "%s", fn->viol);
		goto fail;
	}
	for (uint32_t g = 0; g < fn->ngroups; g++) {
		uint64_t max = fn_max_epoch(fn, g);

		for (int k = 0; k < fn->nnodes; k++) {
			struct fn_node *nd = &fn->nodes[k];
			const struct ctl_epoch_rec *v;
			int self = 0;

			if (nd->g != g || !nd->alive || nd->frozen || !nd->msm ||
			    ctl_msm_state(nd->msm) != CTL_M_ACTIVE) {
				continue;
			}
			v = ctl_msm_view(nd->msm);
			if (!v || v->epoch != max) {
				snprintf(err, len,
					 "node %d (g%u.m%u) ACTIVE at epoch %llu, newest is %llu",
					 k, g, nd->id, v ? (unsigned long long)v->epoch : 0ull,
					 (unsigned long long)max);
				goto fail;
			}
			for (uint32_t i = 0; i < v->nmembers; i++) {
				self |= v->members[i].id == nd->id &&
					v->members[i].incarnation == nd->inc;
			}
			if (!self) {
				snprintf(err, len, "node %d ACTIVE in epoch %llu that lacks it", k,
					 (unsigned long long)v->epoch);
				goto fail;
			}
		}
	}
	return 0;
fail:
	fprintf(stderr, "fakenet check failed: %s\n", err);
	fn_dump(fn, 150);
	return -1;
}

void fn_dump(const struct fn *fn, int lines)
{
	size_t at = fn->tlen;
	int n = 0;

	while (at > 0 && n <= lines) {
		at--;
		n += fn->trace[at] == '\n';
	}
	fprintf(stderr, "---- fakenet trace (last %d lines) ----\n%s", lines,
		fn->trace + at + (at ? 1 : 0));
	for (int k = 0; k < fn->nnodes; k++) {
		const struct ctl_epoch_rec *v = fn_view(fn, k);
		char who[32];

		fprintf(stderr, "%s: %s%s %s epoch %llu coord %d: %s\n",
			fn_ep_name(fn, k, who, sizeof(who)), fn->nodes[k].alive ? "" : "dead ",
			fn->nodes[k].frozen ? "frozen" : "",
			fn->nodes[k].msm ? ctl_member_state_name(fn_state(fn, k)) : "-",
			v ? (unsigned long long)v->epoch : 0ull,
			fn->nodes[k].msm ? (int)ctl_msm_coord(fn->nodes[k].msm) : -1,
			fn_reason(fn, k));
	}
}
