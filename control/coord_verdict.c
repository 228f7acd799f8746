/* SPDX-License-Identifier: BSD-3-Clause */
/* The coordinator's verdicts on evidence: silence, the probe of a member whose control
 * connection ended without a LEAVE, and trouble on the data links between members (another
 * attempt of the ops in flight, or, when a link stays broken between two live members, the
 * removal of exactly one of them by a fixed rule). Part of the pure state machine: no I/O.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "coord.h"
#include "ftcc/log.h"

/* RUNNING: whether the members heard within the timeout may go on without the others. A member
 * whose connection is down for a moment (reset, reconnecting) still counts while it was heard
 * within the timeout: the binding check is the one at commit, over the members that ACKed. */
static int coord_has_quorum(struct ctl_coord *c, uint64_t now, char *why, size_t len)
{
	uint8_t live[CTL_MAX_MEMBERS];
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		live[i] = s->state == SLOT_IN && !s->remove_death &&
			  now - s->last_rx <= c->cfg.timeout_ms;
	}
	return coord_may_proceed(c, live, why, len, "the coordinator");
}

void coord_check_silence(struct ctl_coord *c, uint64_t now)
{
	char why[CTL_TEXT_MAX];
	int silent = 0;
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->state == SLOT_IN && !s->remove && now - s->last_rx > c->cfg.timeout_ms) {
			silent = 1;
		}
		if (c->prop_epoch && s->in_prop && s->state == SLOT_IN && !s->acked &&
		    now - c->prop_start > c->cfg.timeout_ms) {
			silent = 1;
		}
	}
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->join && now - s->join_rx > c->cfg.timeout_ms) {
			ftcc_log(FTCC_LOG_INFO, "control: group %s: joiner %u silent; dropped",
				 c->cfg.group, i);
			if (s->join_conn != CTL_CONN_NONE) {
				c->ops.close(c->ops.arg, s->join_conn);
			}
			s->join = 0;
			s->join_conn = CTL_CONN_NONE;
		}
	}
	if (!silent) {
		return;
	}
	if (!coord_has_quorum(c, now, why, sizeof(why))) {
		coord_stop(c, CTL_REF_NO_QUORUM, "%s", why);
		return;
	}
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->state != SLOT_IN || s->remove) {
			continue;
		}
		if (now - s->last_rx > c->cfg.timeout_ms) {
			snprintf(why, sizeof(why), "silent for %" PRIu64 " ms", now - s->last_rx);
			coord_remove(c, i, 0, why, now);
		} else if (c->prop_epoch && s->in_prop && !s->acked &&
			   now - c->prop_start > c->cfg.timeout_ms) {
			coord_remove(c, i, 0, "did not answer a proposal", now);
		}
	}
}

/* ---- probes ------------------------------------------------------------------------------- */

void coord_probe(struct ctl_coord *c, uint32_t id, const char *why)
{
	struct coord_slot *s = &c->slots[id];

	if (s->state != SLOT_IN || s->remove || s->probing || !c->ops.probe) {
		return;
	}
	if (id == c->cfg.host) {
		return; /* we are alive */
	}
	s->probing = 1;
	s->probe_inc = s->rec.incarnation;
	ftcc_log(FTCC_LOG_INFO, "control: group %s: %s; probing member %u's port", c->cfg.group,
		 why, id);
	c->ops.probe(c->ops.arg, id, s->rec.incarnation);
}

void ctl_coord_on_probe(struct ctl_coord *c, uint32_t id, uint64_t incarnation,
			enum ctl_probe_result res, uint64_t now)
{
	struct coord_slot *s;

	coord_clock(c, now);
	if (id >= c->n || c->state == CTL_C_STOPPED) {
		return;
	}
	s = &c->slots[id];
	if (!s->probing || s->probe_inc != incarnation) {
		return;
	}
	s->probing = 0;
	if (s->state != SLOT_IN || s->rec.incarnation != incarnation || s->remove) {
		return;
	}
	switch (res) {
	case CTL_PROBE_REFUSED:
		if (s->conn != CTL_CONN_NONE) {
			return; /* it came back meanwhile: the refusal was of another listener */
		}
		if (c->state == CTL_C_TAKEOVER) {
			s->dead = 1;
			ctl_coord_tick(c, now);
			return;
		}
		coord_remove(c, id, 1,
			     "its control connection ended without a LEAVE and its port refuses "
			     "connections: its process is gone",
			     now);
		if (c->state == CTL_C_RUNNING && !c->prop_epoch) {
			ctl_coord_tick(c, now);
		}
		return;
	case CTL_PROBE_ALIVE:
		ftcc_log(FTCC_LOG_INFO,
			 "control: group %s: member %u takes connections: alive, only its link "
			 "broke; it stays unless it stays silent",
			 c->cfg.group, id);
		return;
	case CTL_PROBE_UNKNOWN:
		ftcc_log(FTCC_LOG_INFO,
			 "control: group %s: no answer from member %u's port: silence decides",
			 c->cfg.group, id);
		return;
	}
}

/* ---- data links --------------------------------------------------------------------------- */

/* Whether slot @s counts for the link rules: in the group, staying, heard within the timeout
 * (an end we have not heard for that long is for the silence rule). */
static int heard(const struct ctl_coord *c, const struct coord_slot *s, uint64_t now)
{
	return s->state == SLOT_IN && !s->remove && now - s->last_rx <= c->cfg.timeout_ms;
}

/* Whether slot @s was heard within a few heartbeats. A member that just died is still within
 * the timeout when its peers report it unreachable; while an end of a troubled link is between
 * the two, the cut rule waits (silence may yet decide, and a tie-break must not remove the live
 * end instead). */
static int fresh(const struct ctl_coord *c, const struct coord_slot *s, uint64_t now)
{
	uint64_t w =
		c->cfg.timeout_ms / 2 < 4 * c->cfg.hb_ms ? c->cfg.timeout_ms / 2 : 4 * c->cfg.hb_ms;

	return now - s->last_rx <= w;
}

/* The lowest op of stream @t some member of the epoch has not done. */
static uint64_t group_done(const struct ctl_coord *c, uint32_t t)
{
	uint64_t lo = UINT64_MAX;

	for (uint32_t i = 0; i < c->n; i++) {
		const struct coord_slot *s = &c->slots[i];

		if (s->state == SLOT_IN && !s->remove && s->done_op[t] < lo) {
			lo = s->done_op[t];
		}
	}
	return lo;
}

/* When the streak of @l was last reported: a streak of straggler reports only (counting
 * nothing) lives as long as they come; one with reports that count, as long as those do. */
static uint64_t link_heard(const struct coord_link *l)
{
	if (l->nrep) {
		return l->last;
	}
	return l->last > l->slast ? l->last : l->slast;
}

/* Whether the retry asked by straggler reports only waits still: the accused has not issued
 * the op yet, and the hold has not run out (coord_link_report()). */
static int link_held(const struct ctl_coord *c, const struct coord_link *l, uint64_t now)
{
	return !l->nrep && !l->shape && !l->urgent && l->hold_until && now < l->hold_until &&
	       c->slots[l->hold_who].next_op[l->hold_t] <= l->hold_seq;
}

/* A report of the streak of @l failed in op @seq of stream @t. Ops of two streams do not
 * compare: each stream keeps its own highest failed op. */
static void link_seq(struct coord_link *l, uint32_t t, uint64_t seq)
{
	if (!(l->streams >> t & 1) || seq > l->seq[t]) {
		l->seq[t] = seq;
	}
	l->streams |= 1u << t;
	l->stream = t;
}

/* Whether the link carried its failed ops after all: every member has done, in every stream a
 * report of the streak failed in, that stream's failed op since. */
static int link_settled(const struct ctl_coord *c, const struct coord_link *l)
{
	for (uint32_t t = 0; t < c->nstreams; t++) {
		if ((l->streams >> t & 1) && group_done(c, t) <= l->seq[t]) {
			return 0;
		}
	}
	return l->streams != 0;
}

static struct coord_link *link_get(struct ctl_coord *c, uint32_t a, uint32_t b, uint64_t now)
{
	struct coord_link *free_l = NULL, *oldest = NULL;

	for (int i = 0; i < COORD_LINKS; i++) {
		struct coord_link *l = &c->links[i];

		if (l->a != l->b && l->a == a && l->b == b) {
			return l;
		}
		if (l->a == l->b && !free_l) {
			free_l = l;
		}
		if (!oldest || link_heard(l) < link_heard(oldest)) {
			oldest = l;
		}
	}
	if (!free_l) {
		free_l = oldest; /* the table is full: forget the stalest streak */
	}
	memset(free_l, 0, sizeof(*free_l));
	free_l->a = a;
	free_l->b = b;
	free_l->first = now;
	return free_l;
}

void coord_link_report(struct ctl_coord *c, uint32_t r, uint32_t p, int cut, uint64_t epoch,
		       uint32_t t, uint64_t seq, uint64_t now)
{
	uint32_t a = r < p ? r : p, b = r < p ? p : r;
	struct coord_link *l;
	int straggler, idle, joined;
	struct coord_srep *sr;

	if (c->slots[r].remove || c->slots[p].remove) {
		return; /* one of them is on its way out already */
	}
	l = link_get(c, a, b, now);
	if ((now - link_heard(l) > c->cfg.timeout_ms && link_heard(l)) || l->settled) {
		/* the previous streak ended, or the link carried its ops after all: a new fault */
		memset(l, 0, sizeof(*l));
		l->a = a;
		l->b = b;
		l->first = now;
	}
	/* The accused has not issued that op. If it has done every op it issued, it is idle between
	 * ops: late, not cut off (a straggler). So it is if the reporter joined at an op past the
	 * accused's first op not done: the accused's ops in flight began before the join, and
	 * their data planes do not know the reporter (no answer to it) until their next attempt.
	 * Otherwise the accused, in an op (on another lane: FTCC_LANES), answers connections
	 * meanwhile, and silence from it is a cut. */
	idle = c->slots[p].done_op[t] >= c->slots[p].next_op[t];
	joined = *ctl_rec_start(&c->slots[r].rec, t) > c->slots[p].done_op[t];
	straggler = cut && c->slots[p].next_op[t] <= seq && (idle || joined);
	/* The same report again (a member waiting for an epoch repeats its report): its evidence
	 * is as old as the first, which was a straggler's, also once the accused issued the op
	 * (a held retry ends there, and the repeats until the epoch commits would count). */
	sr = &l->srep[r != l->a][t < CTL_STREAMS_MAX ? t : 0];
	straggler |= cut && sr->valid && sr->seq == seq && epoch <= sr->epoch;
	if (straggler) {
		/* The reporter gets another attempt; nothing counts. */
		cut = 0;
		if (!l->last) {
			l->last = now;
		}
		l->slast = now;
		sr->valid = 1;
		sr->seq = seq;
		sr->epoch = epoch;
		l->urgent |= joined;
		if (idle && !joined) {
			/* An attempt before the accused issued the op meets the same silence, and
			 * each retry epoch restarts the ops in flight of every stream: also those
			 * whose own reports would show a real cut (a member blocked in stream 0 by
			 * the cut the reporter meets in stream 1 is idle in stream 1; retried at
			 * once, the group retried forever). So the retry waits until its heartbeat
			 * says the accused issued the op, or the failure timeout at most (the
			 * reporter waits 4 timeouts for an epoch before it gives up). */
			if (!l->hold_until) {
				/* a takeover coordinator: the reporter lost time already */
				l->hold_until = now + (c->cfg.takeover ? c->cfg.timeout_ms / 2 :
									 c->cfg.timeout_ms);
			}
			l->hold_who = p;
			l->hold_t = t;
			l->hold_seq = seq;
		}
	} else {
		if (!l->nrep) {
			l->first = now;
		}
		l->last = now;
		l->cut |= cut;
		link_seq(l, t, seq);
		l->nrep++;
	}
	/* The ops in flight need another attempt unless an epoch committed since the one the
	 * reporter failed in reopened its op already (the boundary is at or below it). */
	if (!cut && (epoch >= c->epoch || c->boundary[t] > seq)) {
		l->want_retry = 1;
	}
	ftcc_log(
		FTCC_LOG_INFO,
		"control: group %s: member %u reports its data link to member %u %s (epoch %" PRIu64
		", op %" PRIu64 ")",
		c->cfg.group, r, p,
		straggler ? "unusable, but that member has not issued the op yet and cannot know "
			    "better (another attempt)" :
		cut	  ? "unusable" :
			    "broken",
		epoch, seq);
}

void coord_shape_report(struct ctl_coord *c, uint32_t r, uint32_t p, uint64_t epoch, uint32_t t,
			uint64_t seq, uint64_t now)
{
	struct coord_link *l;

	uint32_t a = r < p ? r : p, b = r < p ? p : r;

	if (c->slots[r].remove || c->slots[p].remove) {
		return;
	}
	l = link_get(c, a, b, now);
	if (l->settled || (link_heard(l) && now - link_heard(l) > c->cfg.timeout_ms)) {
		memset(l, 0, sizeof(*l)); /* an earlier streak is over: this is no part of it */
		l->a = a;
		l->b = b;
		l->first = now;
	}
	if (!l->last) {
		l->last = now; /* keeps the entry for the timeout; it counts no fault */
	}
	l->shape = 1;
	link_seq(l, t, seq);
	/* An open retry proposal reopens the op already (both ends report, and again every
	 * 100 ms): asking once more would only make a second epoch right after it. */
	if ((epoch >= c->epoch || c->boundary[t] > seq) && !(c->prop_epoch && c->prop_retry)) {
		l->want_retry = 1;
	}
	ftcc_log(FTCC_LOG_INFO,
		 "control: group %s: member %u reports that member %u called op %" PRIu64
		 " with another shape (epoch %" PRIu64 ")",
		 c->cfg.group, r, p, seq, epoch);
}

/* Backoff between two retry epochs of one streak: a link that keeps failing does not make an
 * epoch per failure. */
static uint64_t retry_backoff(const struct ctl_coord *c, uint32_t retries)
{
	uint64_t cap = c->cfg.timeout_ms / 4 ? c->cfg.timeout_ms / 4 : 1;
	uint64_t ms = retries == 0 ? 0 : 10ull << (retries > 8 ? 8 : retries - 1);

	return ms < cap ? ms : cap;
}

/* Whether link @l counts as broken for good now: one side cannot reach the other (after a
 * short wait for the reports of the same fault from elsewhere), or it kept failing for the
 * failure timeout whatever the retries. */
static int link_broken(const struct ctl_coord *c, const struct coord_link *l, uint64_t now)
{
	uint64_t settle =
		c->cfg.timeout_ms / 4 < 4 * c->cfg.hb_ms ? c->cfg.timeout_ms / 4 : 4 * c->cfg.hb_ms;

	if (l->cut) {
		return now - l->first >= settle;
	}
	return l->last - l->first >= c->cfg.timeout_ms;
}

/* The cut rule: among the members at the ends of broken links (both alive: we hear them), the
 * one with the most troubled links (broken, or reported lately and not yet judged) goes, ties
 * going to the higher id, until no broken link is left. A faulty member (a NIC that fails every
 * send) has trouble with everyone and goes alone, whichever of its links is judged broken first;
 * a single broken link between two members removes exactly one of them. */
static void cut_rule(struct ctl_coord *c, uint8_t *broken, const uint8_t *troubled, uint64_t now)
{
	uint32_t count[CTL_MAX_MEMBERS];
	uint8_t gone[COORD_LINKS];

	memset(gone, 0, sizeof(gone));
	for (;;) {
		uint32_t victim = CTL_NO_MEMBER, best = 0, i;
		uint32_t end_a = CTL_NO_MEMBER, end_b = CTL_NO_MEMBER;
		char text[160];

		memset(count, 0, c->n * sizeof(count[0]));
		for (i = 0; i < COORD_LINKS; i++) {
			if (troubled[i] && !gone[i]) {
				count[c->links[i].a]++;
				count[c->links[i].b]++;
			}
		}
		for (i = 0; i < COORD_LINKS; i++) {
			const struct coord_link *l = &c->links[i];

			if (!broken[i] || gone[i]) {
				continue;
			}
			if (count[l->a] > best || (count[l->a] == best && l->a > victim) ||
			    victim == CTL_NO_MEMBER) {
				best = count[l->a];
				victim = l->a;
			}
			if (count[l->b] > best || (count[l->b] == best && l->b > victim)) {
				best = count[l->b];
				victim = l->b;
			}
		}
		if (victim == CTL_NO_MEMBER) {
			return;
		}
		for (i = 0; i < COORD_LINKS; i++) {
			struct coord_link *l = &c->links[i];

			if (troubled[i] && !gone[i] && (l->a == victim || l->b == victim)) {
				if (broken[i] && end_a == CTL_NO_MEMBER) {
					end_a = l->a; /* named in the WARN below */
					end_b = l->b;
				}
				gone[i] = 1;
				l->a = l->b = 0; /* the streak ends with the removal */
			}
		}
		snprintf(text, sizeof(text),
			 "its data links to %u other member%s stayed broken while both ends were "
			 "alive",
			 best, best > 1 ? "s" : "");
		ftcc_warn("control: group %s: members %u and %u are both alive but cannot exchange "
			  "data; removing member %u (trouble with %u member%s; the member with the "
			  "most goes, ties the higher id)",
			  c->cfg.group, end_a, end_b, victim, best, best > 1 ? "s" : "");
		coord_remove(c, victim, 0, text, now);
	}
}

/* Whether the cut rule must wait: an end of a broken link, or of a troubled link that shares
 * an end with one (it weighs in the counts), was not heard lately (@stale). */
static int cut_unsure(const struct ctl_coord *c, const uint8_t *broken, const uint8_t *troubled,
		      const uint8_t *stale)
{
	for (int i = 0; i < COORD_LINKS; i++) {
		const struct coord_link *b = &c->links[i];

		if (!broken[i]) {
			continue;
		}
		for (int k = 0; k < COORD_LINKS; k++) {
			const struct coord_link *t = &c->links[k];

			if (troubled[k] && stale[k] &&
			    (k == i || t->a == b->a || t->a == b->b || t->b == b->a ||
			     t->b == b->b)) {
				return 1;
			}
		}
	}
	return 0;
}

void coord_check_links(struct ctl_coord *c, uint64_t now)
{
	uint8_t broken[COORD_LINKS], troubled[COORD_LINKS], stale[COORD_LINKS];
	int any = 0;

	for (int i = 0; i < COORD_LINKS; i++) {
		struct coord_link *l = &c->links[i];

		broken[i] = troubled[i] = stale[i] = 0;
		if (l->a == l->b) {
			continue;
		}
		if ((now - link_heard(l) > c->cfg.timeout_ms && !l->want_retry) ||
		    c->slots[l->a].state != SLOT_IN || c->slots[l->b].state != SLOT_IN ||
		    c->slots[l->a].remove || c->slots[l->b].remove) {
			l->a = l->b = 0; /* over, or one end is gone: not a link matter any more */
			continue;
		}
		if (l->nrep && link_settled(c, l)) {
			l->settled = 1; /* every member has done the failed op since */
		}
		if (l->settled || !heard(c, &c->slots[l->a], now) ||
		    !heard(c, &c->slots[l->b], now)) {
			continue; /* recovered, or silence decides about the end we do not hear */
		}
		/* reports about a member that had not issued the op count for nothing */
		troubled[i] = l->nrep > 0;
		stale[i] = !fresh(c, &c->slots[l->a], now) || !fresh(c, &c->slots[l->b], now);
		if (troubled[i] && link_broken(c, l, now)) {
			broken[i] = 1;
			any = 1;
			continue;
		}
		if (l->want_retry && now >= l->retry_at && !link_held(c, l, now)) {
			l->hold_until = 0;
			l->urgent = 0;
			if (!c->retry_pending && !c->prop_epoch && l->shape && !l->nrep) {
				snprintf(c->retry_why, sizeof(c->retry_why),
					 "members %u and %u called op %" PRIu64
					 " of stream %u with different shapes",
					 l->a, l->b, l->seq[l->stream], l->stream);
			} else if (!c->retry_pending && !c->prop_epoch) {
				snprintf(c->retry_why, sizeof(c->retry_why),
					 "the data link between members %u and %u broke", l->a,
					 l->b);
			}
			c->retry_pending = 1;
			l->want_retry = 0;
			/* a shape report is no link fault: its epoch is not held back */
			l->retry_at = now + retry_backoff(c, l->nrep ? ++l->retries : 0);
		}
	}
	if (any && !cut_unsure(c, broken, troubled, stale)) {
		cut_rule(c, broken, troubled, now);
	}
}
