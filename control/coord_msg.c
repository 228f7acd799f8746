/* SPDX-License-Identifier: BSD-3-Clause */
/* The coordinator's inputs: frames from members (HELLO by state, heartbeats, ACKs, evidence,
 * leave, ready), connections that end, and the plain-text status of the group.
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "coord.h"
#include "ftcc/log.h"
#include "ftcc/text.h"

/* The slot whose member (or joiner, *@joiner = 1) owns @conn, or NULL. */
static struct coord_slot *slot_of_conn(struct ctl_coord *c, uint32_t conn, int *joiner)
{
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		if (c->slots[i].conn == conn) {
			*joiner = 0;
			return &c->slots[i];
		}
		if (c->slots[i].join && c->slots[i].join_conn == conn) {
			*joiner = 1;
			return &c->slots[i];
		}
	}
	return NULL;
}

/* The sender's own record in a HELLO (its info), or a blank one. */
static struct ctl_member_rec hello_self(const struct ctl_msg *m)
{
	struct ctl_member_rec r;
	uint32_t i;

	memset(&r, 0, sizeof(r));
	for (i = 0; i < m->nmembers; i++) {
		if (m->members[i].id == m->member) {
			r = m->members[i];
			break;
		}
	}
	r.id = m->member;
	r.incarnation = m->incarnation;
	r.flags = 0;
	return r;
}

/* Proposes pending changes now, or commits the open proposal once every stayer ACKed. */
static void coord_kick(struct ctl_coord *c, uint64_t now)
{
	uint32_t i;

	if (c->state != CTL_C_RUNNING) {
		return;
	}
	if (!c->prop_epoch) {
		ctl_coord_tick(c, now);
		return;
	}
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->state == SLOT_IN && s->in_prop && !s->acked) {
			return;
		}
	}
	coord_commit(c, now);
}

/* Takes a member's progress from @m: never below its first op (a joiner reports 0 until its
 * engine learns where it starts, and must not pull an epoch's boundary down to 0). */
static void take_progress(struct coord_slot *s, const struct ctl_msg *m)
{
	for (uint32_t t = 0; t < m->nstreams && t < CTL_STREAMS_MAX; t++) {
		uint64_t start = *ctl_rec_start(&s->rec, t);
		uint64_t next = *ctl_msg_next((struct ctl_msg *)m, t);
		uint64_t done = *ctl_msg_done((struct ctl_msg *)m, t);

		s->next_op[t] = next > start ? next : start;
		s->done_op[t] = done > start ? done : start;
	}
}

/* Attaches @conn to member slot @s, closing a previous connection of the same member. */
static void attach(struct ctl_coord *c, struct coord_slot *s, uint32_t conn,
		   const struct ctl_msg *m, uint64_t now)
{
	if (s->conn != CTL_CONN_NONE && s->conn != conn) {
		c->ops.close(c->ops.arg, s->conn);
	}
	s->conn = conn;
	s->abandoned_conn = CTL_CONN_NONE;
	s->deserted = 0; /* it follows this coordinator again */
	s->last_rx = now;
	take_progress(s, m);
}

/* A process with this id asks to join (new, restarted, or told it is not a member). */
static void hello_join(struct ctl_coord *c, struct coord_slot *s, uint32_t conn,
		       const struct ctl_msg *m, uint64_t now)
{
	uint32_t id = m->member;

	if (s->state == SLOT_IN && s->rec.incarnation == m->incarnation) {
		/* Already admitted: a reconnect of a joiner that missed its VIEW. */
		attach(c, s, conn, m, now);
		ctl_coord_tick(c, now);
		return;
	}
	if (s->join && s->join_conn != CTL_CONN_NONE && s->join_conn != conn) {
		c->ops.close(c->ops.arg, s->join_conn);
	}
	if (s->state == SLOT_IN) {
		/* A new incarnation proves the old process is gone. */
		coord_remove(c, id, 1, "restarted (a new incarnation asked to join)", now);
		s->gone = 1;
	}
	s->join = 1;
	s->join_conn = conn;
	s->join_rec = hello_self(m);
	s->join_catchup = (m->flags & CTL_HELLO_CATCHUP) != 0;
	s->join_rx = now;
	ftcc_log(FTCC_LOG_INFO, "control: group %s: member %u asks to join%s", c->cfg.group, id,
		 s->join_catchup ? " (catch-up)" : "");
}

/* TAKEOVER: a member's report. */
static void hello_report(struct ctl_coord *c, struct coord_slot *s, uint32_t conn,
			 const struct ctl_msg *m, uint64_t now)
{
	uint32_t i;

	if (m->flags & CTL_HELLO_JOIN) {
		if (s->state == SLOT_IN && s->rec.incarnation != m->incarnation) {
			s->dead = 1; /* restarted: the old incarnation is gone */
		}
		coord_refuse(c, conn, CTL_REF_NOT_COORD, c->cfg.host,
			     "group %s is electing a coordinator; try again", c->cfg.group);
		return;
	}
	if (m->epoch > c->epoch && m->nmembers) {
		coord_adopt(c, m->epoch, m->members, m->nmembers, now);
		if (c->cfg.host != CTL_NO_MEMBER && c->slots[c->cfg.host].state != SLOT_IN) {
			coord_stop(c, CTL_REF_STALE,
				   "member %u was removed from group %s by epoch %" PRIu64
				   " and cannot take over",
				   c->cfg.host, c->cfg.group, m->epoch);
			coord_refuse(c, conn, CTL_REF_NOT_COORD, CTL_NO_MEMBER, "%s",
				     c->stop_reason);
			return;
		}
	}
	if (s->state != SLOT_IN || s->rec.incarnation != m->incarnation) {
		coord_refuse(c, conn, CTL_REF_STALE, CTL_NO_MEMBER,
			     "member %u (incarnation %" PRIx64 ") is not in epoch %" PRIu64
			     " of group %s; join again",
			     m->member, m->incarnation, c->epoch, c->cfg.group);
		return;
	}
	attach(c, s, conn, m, now);
	s->reported = 1;
	s->rep_at = now;
	s->rep_max = m->max_epoch > m->epoch ? m->max_epoch : m->epoch;
	for (i = 0; i < m->nmembers; i++) {
		const struct ctl_member_rec *r = &m->members[i];

		if (r->id >= c->n || c->slots[r->id].state != SLOT_IN ||
		    c->slots[r->id].rec.incarnation != r->incarnation) {
			continue;
		}
		if (r->flags & CTL_MF_DEAD) {
			c->slots[r->id].dead = 1;
		}
		if (r->flags & CTL_MF_LEFT) {
			c->slots[r->id].gone = 1;
		}
	}
}

/* RUNNING: a member reconnects, or someone not in the group says HELLO. */
static void hello_running(struct ctl_coord *c, struct coord_slot *s, uint32_t conn,
			  const struct ctl_msg *m, uint64_t now)
{
	if (m->flags & CTL_HELLO_JOIN) {
		hello_join(c, s, conn, m, now);
		return;
	}
	if (m->epoch > c->epoch) {
		/* it follows a newer epoch than ours: another coordinator took over */
		if (s->state == SLOT_IN && s->rec.incarnation == m->incarnation) {
			s->deserted = 1;
		}
		coord_refuse(c, conn, CTL_REF_NOT_COORD, CTL_NO_MEMBER,
			     "this coordinator of group %s is at epoch %" PRIu64
			     ", older than the member's %" PRIu64,
			     c->cfg.group, c->epoch, m->epoch);
		return;
	}
	if (s->state == SLOT_IN && s->rec.incarnation == m->incarnation) {
		attach(c, s, conn, m, now);
		if (!s->remove) {
			/* send the committed view; the member ignores one it has */
			struct ctl_msg *v = coord_msg(c, CTL_VIEW, c->epoch);
			uint32_t i;

			v->boundary = c->boundary[0];
			coord_msg_streams(c, v);
			v->coord = c->cfg.host;
			for (i = 0; i < c->n; i++) {
				if (c->slots[i].state == SLOT_IN) {
					v->members[v->nmembers] = c->slots[i].rec;
					v->members[v->nmembers].id = i;
					v->nmembers++;
				}
			}
			c->ops.send(c->ops.arg, conn, v);
			if (c->prop_epoch && s->in_prop) {
				c->prop_epoch = 0; /* re-propose so it gets a PROPOSE too */
				ctl_coord_tick(c, now);
			}
		}
		return;
	}
	if (s->gone_epoch && s->gone_inc == m->incarnation) {
		coord_refuse(c, conn, CTL_REF_STALE, CTL_NO_MEMBER,
			     "member %u was removed from group %s at epoch %" PRIu64
			     " (now %" PRIu64 "); it must join again",
			     m->member, c->cfg.group, s->gone_epoch, c->epoch);
	} else {
		coord_refuse(c, conn, CTL_REF_STALE, CTL_NO_MEMBER,
			     "member %u (incarnation %" PRIx64 ", epoch %" PRIu64
			     ") is not in group %s at epoch %" PRIu64 "; it must join again",
			     m->member, m->incarnation, m->epoch, c->cfg.group, c->epoch);
	}
}

static void on_hello(struct ctl_coord *c, uint32_t conn, const struct ctl_msg *m, uint64_t now)
{
	struct coord_slot *s;

	if (c->state == CTL_C_STOPPED) {
		coord_refuse(c, conn, c->stop_code, CTL_NO_MEMBER, "%s", c->stop_reason);
		return;
	}
	if (m->member >= c->n || m->expected != c->n) {
		coord_refuse(c, conn, CTL_REF_PROTOCOL, CTL_NO_MEMBER,
			     "member %u expecting %u members does not fit group %s of %u members",
			     m->member, m->expected, c->cfg.group, c->n);
		return;
	}
	if ((m->nstreams ? m->nstreams : 1) != c->nstreams) {
		coord_refuse(c, conn, CTL_REF_PROTOCOL, CTL_NO_MEMBER,
			     "member %u has %u op streams; group %s has %u (the same on every "
			     "member)",
			     m->member, m->nstreams, c->cfg.group, c->nstreams);
		return;
	}
	if (m->max_epoch > c->max_epoch) {
		c->max_epoch = m->max_epoch;
	}
	if (m->epoch > c->max_epoch) {
		c->max_epoch = m->epoch;
	}
	s = &c->slots[m->member];
	switch (c->state) {
	case CTL_C_FORMING:
		if (s->state == SLOT_IN && s->conn != CTL_CONN_NONE && s->conn != conn) {
			c->ops.close(c->ops.arg, s->conn);
			s->conn = CTL_CONN_NONE;
		}
		s->state = SLOT_IN;
		s->rec = hello_self(m);
		s->rec.flags = (m->flags & CTL_HELLO_CATCHUP) ? 0 : CTL_MF_CONTRIB;
		attach(c, s, conn, m, now);
		ctl_coord_tick(c, now);
		break;
	case CTL_C_TAKEOVER:
		hello_report(c, s, conn, m, now);
		ctl_coord_tick(c, now);
		break;
	case CTL_C_RUNNING:
		hello_running(c, s, conn, m, now);
		coord_kick(c, now);
		break;
	case CTL_C_STOPPED:
		break;
	}
}

/* SUSPECT from member @r about @m->peer. Evidence from one member about another is never a
 * verdict: the coordinator probes the accused, retries the ops in flight, or, when a data link
 * stays broken between two members it hears, applies the cut rule (coord_verdict.c). */
static void on_suspect(struct ctl_coord *c, uint32_t r, const struct ctl_msg *m, uint64_t now)
{
	char why[96];

	if (m->peer == c->cfg.host && c->cfg.host != CTL_NO_MEMBER &&
	    (m->evidence == CTL_EV_SILENCE || m->evidence == CTL_EV_DEATH)) {
		/* The member lost us and is about to close: its leaving is no evidence, and a
		 * takeover report it sent before is withdrawn. */
		c->slots[r].abandoned_conn = c->slots[r].conn;
		c->slots[r].reported = 0;
		c->slots[r].acked = 0;
		c->slots[r].deserted = 1;
		return;
	}
	if (m->peer >= c->n || c->slots[m->peer].state != SLOT_IN || m->peer == r ||
	    c->state != CTL_C_RUNNING || m->stream >= c->nstreams) {
		return;
	}
	switch (m->evidence) {
	case CTL_EV_DEATH:
		snprintf(why, sizeof(why), "member %u saw its link to member %u closed", r,
			 m->peer);
		coord_probe(c, m->peer, why);
		break;
	case CTL_EV_LINK:
		coord_link_report(c, r, m->peer, 0, m->epoch, m->stream, m->seq, now);
		break;
	case CTL_EV_SHAPE:
		coord_shape_report(c, r, m->peer, m->epoch, m->stream, m->seq, now);
		break;
	case CTL_EV_SILENCE:
	case CTL_EV_CUT:
		snprintf(why, sizeof(why), "member %u cannot reach member %u", r, m->peer);
		coord_probe(c, m->peer, why);
		coord_link_report(c, r, m->peer, 1, m->epoch, m->stream, m->seq, now);
		break;
	default:
		break;
	}
}

void ctl_coord_on_msg(struct ctl_coord *c, uint32_t conn, const struct ctl_msg *m, uint64_t now)
{
	struct coord_slot *s;
	int joiner = 0;
	uint32_t id;

	coord_clock(c, now);
	if (m->type == CTL_HELLO) {
		on_hello(c, conn, m, now);
		return;
	}
	s = slot_of_conn(c, conn, &joiner);
	if (!s || c->state == CTL_C_STOPPED) {
		return; /* a connection we already let go */
	}
	id = (uint32_t)(s - c->slots);
	if (joiner) {
		s->join_rx = now;
		if (m->type == CTL_READY) {
			s->join_catchup = 0;
		} else if (m->type == CTL_LEAVE) {
			c->ops.close(c->ops.arg, s->join_conn);
			s->join = 0;
			s->join_conn = CTL_CONN_NONE;
		}
		return;
	}
	s->last_rx = now;
	switch (m->type) {
	case CTL_HB:
		take_progress(s, m);
		break;
	case CTL_ACK:
		take_progress(s, m);
		if (c->prop_epoch && m->epoch == c->prop_epoch && s->in_prop) {
			s->acked = 1;
		}
		break;
	case CTL_SUSPECT:
		on_suspect(c, id, m, now);
		break;
	case CTL_LEAVE: {
		char why[CTL_TEXT_MAX + 32];

		c->ops.close(c->ops.arg, s->conn);
		s->conn = CTL_CONN_NONE;
		s->gone = 1;
		ftcc_log(FTCC_LOG_INFO, "control: group %s: member %u leaves: %s", c->cfg.group, id,
			 m->text[0] ? m->text : "no reason given");
		if (c->state == CTL_C_TAKEOVER) {
			s->dead = 1;
			s->reported = 0;
		} else {
			snprintf(why, sizeof(why), "left the group (%s)",
				 m->text[0] ? m->text : "no reason given");
			coord_remove(c, id, 1, why, now);
		}
		break;
	}
	case CTL_READY:
		if (s->state == SLOT_IN && !(s->rec.flags & CTL_MF_CONTRIB)) {
			s->ready = 1;
		}
		break;
	default:
		coord_refuse(c, conn, CTL_REF_PROTOCOL, CTL_NO_MEMBER,
			     "unexpected %s frame from member %u", ctl_type_name(m->type), id);
		s->conn = CTL_CONN_NONE;
		break;
	}
	if (c->state == CTL_C_TAKEOVER) {
		ctl_coord_tick(c, now);
	} else {
		coord_kick(c, now);
	}
}

void ctl_coord_on_close(struct ctl_coord *c, uint32_t conn, int death, uint64_t now)
{
	struct coord_slot *s;
	int joiner = 0;
	uint32_t id;

	coord_clock(c, now);
	s = slot_of_conn(c, conn, &joiner);
	if (!s) {
		return;
	}
	id = (uint32_t)(s - c->slots);
	if (joiner) {
		s->join = 0;
		s->join_conn = CTL_CONN_NONE;
		return;
	}
	s->conn = CTL_CONN_NONE;
	if (conn == s->abandoned_conn) {
		s->abandoned_conn = CTL_CONN_NONE;
		return;
	}
	if (!death) {
		return; /* a local error: silence will tell */
	}
	switch (c->state) {
	case CTL_C_FORMING:
		s->state = SLOT_EMPTY;
		break;
	case CTL_C_TAKEOVER:
		/* not awaited any more unless it reports again; a probe may prove it gone */
		s->reported = 0;
		coord_probe(c, id, "a member's control connection ended during the takeover");
		ctl_coord_tick(c, now);
		break;
	case CTL_C_RUNNING:
		/* Closed or reset by its host's kernel, or by a firewall between us: the member
		 * comes back if it lives. A refused connect to its port says it does not. */
		coord_probe(c, id, "its control connection ended without a LEAVE");
		break;
	case CTL_C_STOPPED:
		break;
	}
}

const char *ctl_coord_state_name(enum ctl_coord_state st)
{
	switch (st) {
	case CTL_C_FORMING:
		return "forming";
	case CTL_C_TAKEOVER:
		return "takeover";
	case CTL_C_RUNNING:
		return "running";
	case CTL_C_STOPPED:
		return "stopped";
	}
	return "unknown";
}

/* printf into @buf at *@off, never past @len. */
size_t ctl_coord_status(const struct ctl_coord *c, char *buf, size_t len, uint64_t now)
{
	size_t off = 0;
	uint32_t i;

	if (len == 0) {
		return 0;
	}
	buf[0] = '\0';
	ftcc_appendf(buf, len, &off,
		     "group %s state %s epoch %" PRIu64 " boundary %" PRIu64
		     " expected %u coordinator ",
		     c->cfg.group, ctl_coord_state_name(c->state), c->epoch, c->boundary[0], c->n);
	if (c->cfg.host == CTL_NO_MEMBER) {
		ftcc_appendf(buf, len, &off, "daemon");
	} else {
		ftcc_appendf(buf, len, &off, "member-%u", c->cfg.host);
	}
	if (c->prop_epoch) {
		ftcc_appendf(buf, len, &off, " proposing %" PRIu64, c->prop_epoch);
	}
	if (c->state == CTL_C_STOPPED) {
		ftcc_appendf(buf, len, &off, " reason \"%s\"", c->stop_reason);
	}
	ftcc_appendf(buf, len, &off, "\n");
	for (i = 0; i < c->n; i++) {
		const struct coord_slot *s = &c->slots[i];

		if (s->state == SLOT_IN) {
			ftcc_appendf(buf, len, &off,
				     "  member %u incarnation %016" PRIx64
				     " %s %s last-heartbeat-ms %" PRIu64 " done %" PRIu64
				     " next %" PRIu64 "%s\n",
				     i, s->rec.incarnation,
				     (s->rec.flags & CTL_MF_CONTRIB) ? "contributor" : "catch-up",
				     s->conn != CTL_CONN_NONE ? "connected" : "disconnected",
				     now - s->last_rx, s->done_op[0], s->next_op[0],
				     s->remove ? " (being removed)" : "");
		}
		if (s->state != SLOT_IN && s->gone_epoch) {
			ftcc_appendf(buf, len, &off,
				     "  removed %u incarnation %016" PRIx64 " at epoch %" PRIu64
				     " %" PRIu64 " ms ago: %s\n",
				     i, s->gone_inc, s->gone_epoch,
				     now > s->gone_at ? now - s->gone_at : 0, s->why);
		}
		if (s->join) {
			ftcc_appendf(buf, len, &off,
				     "  join %u incarnation %016" PRIx64
				     "%s last-heartbeat-ms %" PRIu64 "\n",
				     i, s->join_rec.incarnation, s->join_catchup ? " catch-up" : "",
				     now - s->join_rx);
		}
	}
	return off;
}
