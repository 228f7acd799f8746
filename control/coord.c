/* SPDX-License-Identifier: BSD-3-Clause */
/* The coordinator of one group as a pure state machine: formation, epoch proposals and commits,
 * death and silence verdicts under the quorum rule, joins and takeover. No I/O, no clock, no
 * locks: see include/ftcc/ctl_sm.h for the protocol and the calling rules.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "coord.h"
#include "ftcc/log.h"

int ctl_quorum(const uint32_t *live, uint32_t nlive, const uint32_t *base, uint32_t nbase)
{
	uint32_t in = 0, lowest = UINT32_MAX, i, j;
	int has_lowest = 0;

	if (nbase == 0) {
		return 0;
	}
	for (i = 0; i < nbase; i++) {
		if (base[i] < lowest) {
			lowest = base[i];
		}
	}
	for (i = 0; i < nlive; i++) {
		for (j = 0; j < nbase; j++) {
			if (live[i] == base[j]) {
				in++;
				has_lowest |= live[i] == lowest;
				break;
			}
		}
	}
	return 2 * in > nbase || (2 * in == nbase && has_lowest);
}

struct ctl_coord *ctl_coord_create(const struct ctl_coord_cfg *cfg, const struct ctl_coord_ops *ops,
				   uint64_t now)
{
	struct ctl_coord *c;
	uint32_t i;

	if (cfg->expected == 0 || cfg->expected > CTL_MAX_MEMBERS ||
	    cfg->nstreams > CTL_STREAMS_MAX) {
		return NULL;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		return NULL;
	}
	c->slots = calloc(cfg->expected, sizeof(*c->slots));
	c->msg.members = calloc(cfg->expected, sizeof(*c->msg.members));
	if (!c->slots || !c->msg.members) {
		free(c->slots);
		free(c->msg.members);
		free(c);
		return NULL;
	}
	c->cfg = *cfg;
	c->cfg.members = NULL;
	c->cfg.nmembers = 0;
	c->ops = *ops;
	c->n = cfg->expected;
	c->nstreams = cfg->nstreams ? cfg->nstreams : 1;
	c->gid = ctl_group_id(cfg->group);
	c->start = now;
	c->last_tick = now;
	c->last_hb = now;
	for (i = 0; i < c->n; i++) {
		c->slots[i].conn = CTL_CONN_NONE;
		c->slots[i].abandoned_conn = CTL_CONN_NONE;
		c->slots[i].join_conn = CTL_CONN_NONE;
	}
	if (cfg->takeover) {
		c->state = CTL_C_TAKEOVER;
		c->max_epoch = cfg->max_epoch > cfg->epoch ? cfg->max_epoch : cfg->epoch;
		coord_adopt(c, cfg->epoch, cfg->members, cfg->nmembers, now);
		ftcc_log(
			FTCC_LOG_INFO,
			"control: group %s: member %u takes over as coordinator from epoch %" PRIu64,
			c->cfg.group, c->cfg.host, cfg->epoch);
	} else {
		c->state = CTL_C_FORMING;
	}
	return c;
}

void ctl_coord_destroy(struct ctl_coord *c)
{
	if (!c) {
		return;
	}
	free(c->slots);
	free(c->msg.members);
	free(c);
}

enum ctl_coord_state ctl_coord_state(const struct ctl_coord *c)
{
	return c->state;
}

uint64_t ctl_coord_epoch(const struct ctl_coord *c)
{
	return c->epoch;
}

uint32_t ctl_coord_members(const struct ctl_coord *c, uint32_t *ids, uint32_t cap)
{
	uint32_t i, k = 0;

	for (i = 0; i < c->n; i++) {
		if (c->slots[i].state == SLOT_IN) {
			if (k < cap) {
				ids[k] = i;
			}
			k++;
		}
	}
	return k;
}

/* ---- sending -------------------------------------------------------------------------------- */

/* Resets the scratch message to type @type with the header fields every frame carries. */
struct ctl_msg *coord_msg(struct ctl_coord *c, uint16_t type, uint64_t epoch)
{
	struct ctl_member_rec *recs = c->msg.members;

	memset(&c->msg, 0, sizeof(c->msg));
	c->msg.members = recs;
	c->msg.members_cap = c->n;
	c->msg.type = type;
	c->msg.group_id = c->gid;
	c->msg.epoch = epoch;
	return &c->msg;
}

void coord_msg_streams(const struct ctl_coord *c, struct ctl_msg *m)
{
	m->nstreams = c->nstreams;
	for (uint32_t t = 1; t < c->nstreams; t++) {
		*ctl_msg_boundary(m, t) = c->boundary[t];
	}
}

/* Sends REFUSE(@code) with the formatted text on @conn and closes it. */
void coord_refuse(struct ctl_coord *c, uint32_t conn, uint32_t code, uint32_t hint, const char *fmt,
		  ...)
{
	struct ctl_msg *m = coord_msg(c, CTL_REFUSE, c->epoch);
	va_list ap;

	m->code = code;
	m->hint = hint;
	va_start(ap, fmt);
	vsnprintf(m->text, sizeof(m->text), fmt, ap);
	va_end(ap);
	c->ops.send(c->ops.arg, conn, m);
	c->ops.close(c->ops.arg, conn);
}

/* Forgets slot @s's connection (closing it) without any verdict on the member. */
static void slot_detach(struct ctl_coord *c, struct coord_slot *s)
{
	if (s->conn != CTL_CONN_NONE) {
		c->ops.close(c->ops.arg, s->conn);
		s->conn = CTL_CONN_NONE;
	}
	s->abandoned_conn = CTL_CONN_NONE;
}

/* Fills the scratch message's member list with the members of the committed epoch. Returns the
 * count. */
static uint32_t fill_members(struct ctl_coord *c, struct ctl_msg *m)
{
	uint32_t i;

	m->nmembers = 0;
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->state != SLOT_IN) {
			continue;
		}
		m->members[m->nmembers] = s->rec;
		m->members[m->nmembers].id = i;
		m->nmembers++;
	}
	return m->nmembers;
}

/* VIEW of the committed epoch to slot @s. */
static void send_view(struct ctl_coord *c, struct coord_slot *s)
{
	struct ctl_msg *m;

	if (s->conn == CTL_CONN_NONE) {
		return;
	}
	m = coord_msg(c, CTL_VIEW, c->epoch);
	m->boundary = c->boundary[0];
	coord_msg_streams(c, m);
	m->coord = c->cfg.host;
	fill_members(c, m);
	c->ops.send(c->ops.arg, s->conn, m);
}

/* PROPOSE of the open proposal to slot @s. */
static void send_propose(struct ctl_coord *c, struct coord_slot *s)
{
	struct ctl_msg *m;
	uint32_t i;

	if (s->conn == CTL_CONN_NONE) {
		return;
	}
	m = coord_msg(c, CTL_PROPOSE, c->prop_epoch);
	m->coord = c->cfg.host;
	m->nstreams = c->nstreams; /* the records' starts; its boundaries say nothing yet */
	for (i = 0; i < c->n; i++) {
		if (c->slots[i].in_prop) {
			m->members[m->nmembers] = c->slots[i].rec;
			m->members[m->nmembers].id = i;
			m->members[m->nmembers].flags = c->slots[i].prop_flags;
			m->nmembers++;
		}
	}
	c->ops.send(c->ops.arg, s->conn, m);
}

/* Stops the coordinator: REFUSE(@code, reason) to every connection. */
void coord_stop(struct ctl_coord *c, uint32_t code, const char *fmt, ...)
{
	va_list ap;
	uint32_t i;

	if (c->state == CTL_C_STOPPED) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(c->stop_reason, sizeof(c->stop_reason), fmt, ap);
	va_end(ap);
	c->stop_code = code;
	c->state = CTL_C_STOPPED;
	c->prop_epoch = 0;
	ftcc_log(code == CTL_REF_CLOSED || code == CTL_REF_LEFT ? FTCC_LOG_INFO : FTCC_LOG_WARN,
		 "control: group %s: coordinator stops: %s", c->cfg.group, c->stop_reason);
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->conn != CTL_CONN_NONE) {
			coord_refuse(c, s->conn, code, CTL_NO_MEMBER, "%s", c->stop_reason);
			s->conn = CTL_CONN_NONE;
		}
		if (s->join_conn != CTL_CONN_NONE) {
			coord_refuse(c, s->join_conn, code, CTL_NO_MEMBER, "%s", c->stop_reason);
			s->join_conn = CTL_CONN_NONE;
			s->join = 0;
		}
	}
}

void ctl_coord_shutdown(struct ctl_coord *c, uint64_t now)
{
	(void)now;
	coord_stop(c, CTL_REF_CLOSED, "coordinator of group %s shut down", c->cfg.group);
}

void ctl_coord_host_left(struct ctl_coord *c, const char *reason, uint64_t now)
{
	(void)now;
	if (c->cfg.host == CTL_NO_MEMBER) {
		ctl_coord_shutdown(c, now);
		return;
	}
	coord_stop(c, CTL_REF_LEFT, "member %u, the coordinator of group %s, left: %s", c->cfg.host,
		   c->cfg.group, reason && reason[0] ? reason : "no reason given");
}

/* ---- membership changes --------------------------------------------------------------------- */

/* Marks member @id of the committed epoch for removal. @death: death evidence (no quorum
 * needed); otherwise a silence verdict. */
void coord_remove(struct ctl_coord *c, uint32_t id, int death, const char *why, uint64_t now)
{
	struct coord_slot *s = &c->slots[id];

	(void)now;
	if (s->state != SLOT_IN || s->remove) {
		if (s->state == SLOT_IN && death) {
			s->remove_death = 1;
		}
		return;
	}
	s->remove = 1;
	s->remove_death = death;
	snprintf(s->why, sizeof(s->why), "%s", why);
	/* A member that left said so itself (and warned if it gave up); removing one that did not
	 * leave is what an operator must see. */
	ftcc_log(s->gone ? FTCC_LOG_INFO : FTCC_LOG_WARN,
		 "control: group %s: member %u to be removed: %s", c->cfg.group, id, why);
	/* A stayer of the open proposal is gone: that proposal can never commit. */
	if (c->prop_epoch && s->in_prop) {
		c->prop_epoch = 0;
	}
}

/* Whether member slot @s is proven out of the group: its own words (LEAVE), or a new
 * incarnation of it asking to join. A connection closed or reset, a refused connect, silence:
 * none of these proves a process gone (a firewall forges resets; a partition looks like
 * silence), so none of them lets a minority go on. A daemon is the only authority of its groups
 * (no member ever takes over), so a death it proved itself by its own probe counts too. */
static int proven_out(const struct ctl_coord *c, const struct coord_slot *s)
{
	if (s->deserted) {
		return 0; /* it follows another coordinator: what it did proves nothing here */
	}
	return s->gone || (c->cfg.host == CTL_NO_MEMBER && s->remove_death);
}

/* The safety rule for acting without some members: the members @live may go on without the
 * others of epoch @c->epoch when they are a quorum of all its members, or when every member
 * outside them is proven out (only those could have formed another group, and they cannot). */
int coord_may_proceed(struct ctl_coord *c, const uint8_t *is_live, char *why, size_t len,
		      const char *who)
{
	uint32_t live[CTL_MAX_MEMBERS] = { 0 }, base[CTL_MAX_MEMBERS] = { 0 };
	uint32_t nlive = 0, nbase = 0, nout = 0, i;

	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->state != SLOT_IN) {
			continue;
		}
		base[nbase++] = i;
		if (is_live[i]) {
			live[nlive++] = i;
		} else if (proven_out(c, s)) {
			nout++;
		}
	}
	if (ctl_quorum(live, nlive, base, nbase) || (nlive && nlive + nout == nbase)) {
		return 1;
	}
	snprintf(why, len,
		 "%s reaches %u of the %u members of epoch %" PRIu64
		 " of group %s (%u left on purpose), not a majority (no quorum): it cannot tell "
		 "dead members from a network partition, so this side stops",
		 who, nlive, nbase, c->epoch, c->cfg.group, nout);
	return 0;
}

/* Opens a proposal for the pending changes, if any. */
static void coord_propose(struct ctl_coord *c, uint64_t now)
{
	uint32_t i, n = 0, stayers = 0;
	int change = 0;

	change = c->retry_pending;
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		s->in_prop = 0;
		s->acked = 0;
		if (s->state == SLOT_IN && !s->remove) {
			s->in_prop = 1;
			s->prop_flags = s->rec.flags & CTL_MF_CONTRIB;
			if (s->ready) {
				s->prop_flags |= CTL_MF_CONTRIB;
				change = 1;
			}
			stayers++;
		} else if (s->state == SLOT_IN) {
			change = 1;
		} else if (s->join && s->join_conn != CTL_CONN_NONE) {
			s->in_prop = 1;
			s->prop_flags = s->join_catchup ? 0 : CTL_MF_CONTRIB;
			change = 1;
		}
		n += s->in_prop;
	}
	if (!change) {
		return;
	}
	if (n == 0) {
		coord_stop(c, CTL_REF_CLOSED, "group %s has no members left", c->cfg.group);
		return;
	}
	c->prop_epoch = ++c->max_epoch;
	c->prop_start = now;
	c->prop_retry = c->retry_pending;
	c->retry_pending = 0;
	ftcc_log(FTCC_LOG_INFO, "control: group %s: proposing epoch %" PRIu64 " (%u members)%s%s",
		 c->cfg.group, c->prop_epoch, n, c->prop_retry ? ": another attempt, " : "",
		 c->prop_retry ? c->retry_why : "");
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->in_prop && s->state == SLOT_IN) {
			send_propose(c, s);
		}
	}
	if (stayers == 0) {
		coord_commit(c, now);
	}
}

/* Stream @t's boundary of the open proposal: the lowest op some stayer has not done when
 * members are removed or the ops in flight need another attempt, else past every stayer's next
 * op plus the slack (nobody waits). */
static uint64_t prop_boundary(struct ctl_coord *c, int removal, uint32_t t)
{
	uint64_t b = removal ? UINT64_MAX : c->boundary[t];
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (!s->in_prop || s->state != SLOT_IN) {
			continue;
		}
		if (removal) {
			b = s->done_op[t] < b ? s->done_op[t] : b;
		} else if (s->next_op[t] + CTL_JOIN_SLACK > b) {
			b = s->next_op[t] + CTL_JOIN_SLACK;
		}
	}
	return b == UINT64_MAX ? c->boundary[t] : b;
}

/* Commits the open proposal: removed members are told and dropped, joiners become members,
 * everyone gets the VIEW. */
void coord_commit(struct ctl_coord *c, uint64_t now)
{
	uint8_t live[CTL_MAX_MEMBERS];
	char why[CTL_TEXT_MAX];
	int removal = 0;
	uint64_t b[CTL_STREAMS_MAX], jb[CTL_STREAMS_MAX];
	uint32_t i, t;

	/* The safety rule once more, over the members that answered: whatever the reason for
	 * the change, the ones who go on must be a quorum of the epoch, or all the rest dead. */
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		live[i] = s->state == SLOT_IN && s->in_prop && s->acked;
	}
	if (!coord_may_proceed(c, live, why, sizeof(why), "the coordinator")) {
		coord_stop(c, CTL_REF_NO_QUORUM, "%s", why);
		return;
	}

	removal = c->prop_retry;
	for (i = 0; i < c->n; i++) {
		removal |= c->slots[i].state == SLOT_IN && !c->slots[i].in_prop;
	}
	/* A joiner starts past every stayer's next op even when the epoch reopens ops from @b:
	 * the ops below that some stayer may have finished already, and nobody could serve a
	 * newcomer their results. Each stream alike. */
	for (t = 0; t < c->nstreams; t++) {
		b[t] = prop_boundary(c, removal, t);
		jb[t] = removal ? prop_boundary(c, 0, t) : b[t];
	}
	if (removal) {
		/* This epoch reopens every op in flight: the retries asked so far are done. */
		for (i = 0; i < COORD_LINKS; i++) {
			c->links[i].want_retry = 0;
			c->links[i].hold_until = 0;
			c->links[i].urgent = 0;
		}
	}
	/* A joiner stays, with its first op @jb: the ops below it run without it (each member's
	 * record carries its start). */
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->state == SLOT_IN && !s->in_prop) {
			if (s->conn != CTL_CONN_NONE) {
				coord_refuse(c, s->conn, CTL_REF_STALE, CTL_NO_MEMBER,
					     "member %u removed from group %s at epoch %" PRIu64
					     ": %s",
					     i, c->cfg.group, c->prop_epoch, s->why);
				s->conn = CTL_CONN_NONE;
			}
			s->state = SLOT_EMPTY;
			s->gone_epoch = c->prop_epoch;
			s->gone_at = now;
			s->gone_inc = s->rec.incarnation;
			s->remove = 0;
			s->remove_death = 0;
			continue;
		}
		if (!s->in_prop) {
			continue;
		}
		if (s->state != SLOT_IN) {
			s->state = SLOT_IN;
			s->rec = s->join_rec;
			s->conn = s->join_conn;
			s->abandoned_conn = CTL_CONN_NONE;
			s->join = 0;
			s->join_conn = CTL_CONN_NONE;
			s->dead = 0; /* evidence was against the incarnation this one replaces */
			s->gone = 0;
			s->deserted = 0;
			s->reported = 0;
			s->probing = 0;
			s->rec.done = jb[0];
			for (t = 0; t < c->nstreams; t++) {
				s->next_op[t] = s->done_op[t] = jb[t];
				*ctl_rec_start(&s->rec, t) = jb[t];
			}
			s->last_rx = now;
		} else {
			s->rec.done = s->done_op[0];
		}
		s->rec.flags = s->prop_flags;
		s->ready = 0;
		s->in_prop = 0;
	}
	c->epoch = c->prop_epoch;
	memcpy(c->boundary, b, c->nstreams * sizeof(b[0]));
	c->prop_epoch = 0;
	c->prop_retry = 0;
	ftcc_log(FTCC_LOG_INFO, "control: group %s: epoch %" PRIu64 " from op %" PRIu64,
		 c->cfg.group, c->epoch, c->boundary[0]);
	for (i = 0; i < c->n; i++) {
		if (c->slots[i].state == SLOT_IN) {
			send_view(c, &c->slots[i]);
		}
	}
}

/* ---- formation and takeover ----------------------------------------------------------------- */

/* FORMING: commits epoch 1 (or past any number a member reported) once everyone is here. */
static void coord_form(struct ctl_coord *c, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		if (c->slots[i].state != SLOT_IN) {
			return;
		}
	}
	c->state = CTL_C_RUNNING;
	c->epoch = ++c->max_epoch;
	memset(c->boundary, 0, sizeof(c->boundary));
	for (i = 0; i < c->n; i++) {
		c->slots[i].rec.done = 0;
		c->slots[i].rec.start = 0;
		memset(c->slots[i].rec.xstart, 0, sizeof(c->slots[i].rec.xstart));
		c->slots[i].last_rx = now;
	}
	ftcc_log(FTCC_LOG_INFO, "control: group %s formed: epoch %" PRIu64 ", %u members",
		 c->cfg.group, c->epoch, c->n);
	for (i = 0; i < c->n; i++) {
		send_view(c, &c->slots[i]);
	}
}

/* TAKEOVER: makes the view @members of epoch @epoch the one being rebuilt. Reports already
 * received from members that keep their incarnation stay counted. */
void coord_adopt(struct ctl_coord *c, uint64_t epoch, const struct ctl_member_rec *members,
		 uint32_t n, uint64_t now)
{
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		if (c->slots[i].state == SLOT_IN) {
			c->slots[i].state = SLOT_EMPTY;
		}
	}
	for (i = 0; i < n; i++) {
		struct coord_slot *s;

		if (members[i].id >= c->n) {
			continue;
		}
		s = &c->slots[members[i].id];
		if (s->rec.incarnation != members[i].incarnation) {
			/* what was known was about another incarnation */
			s->dead = 0;
			s->gone = 0;
			if (s->reported) {
				s->reported = 0;
				slot_detach(c, s);
			}
		}
		s->state = SLOT_IN;
		s->rec = members[i];
		s->rec.flags &= CTL_MF_CONTRIB;
		s->dead |= (members[i].flags & CTL_MF_DEAD) != 0;
		s->gone |= (members[i].flags & CTL_MF_LEFT) != 0;
		if (!s->reported) {
			s->last_rx = now;
		}
	}
	c->epoch = epoch;
}

/* TAKEOVER: once every member not known dead (nor the lost coordinator) reported, or at the
 * deadline, proposes the rebuilt group if the safety rule allows; stops otherwise. The
 * proposal must be ACKed like any other: a report that was stale (its sender moved on and its
 * connection is gone) cannot make an epoch. */
static void coord_takeover_check(struct ctl_coord *c, uint64_t now)
{
	uint8_t live[CTL_MAX_MEMBERS];
	uint32_t waiting = 0, i;
	char why[CTL_TEXT_MAX], who[48];

	/* Live members notice the loss within a heartbeat or two of each other; a member still
	 * missing after that is dead or cut off (it may not be awaited for long: liveness). */
	uint64_t grace =
		c->cfg.timeout_ms / 2 < 4 * c->cfg.hb_ms ? c->cfg.timeout_ms / 2 : 4 * c->cfg.hb_ms;

	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		live[i] = s->state == SLOT_IN && s->reported && !s->dead && !s->gone;
		/* A member that reports past the grace while it had seen an epoch newer than the
		 * one rebuilt here was still following another coordinator after we began: it may
		 * be in a committed epoch we cannot see, whose other members may go on without it
		 * under that epoch's own quorum. It does not count towards ours. */
		if (live[i] && s->rep_at - c->start >= grace && s->rep_max > c->epoch) {
			live[i] = 0;
		}
		if (s->state == SLOT_IN && !s->reported && !s->dead && !s->gone &&
		    i != c->cfg.suspect) {
			waiting++;
		}
	}
	if (waiting && now - c->start < grace) {
		return;
	}
	snprintf(who, sizeof(who), "takeover by member %u", c->cfg.host);
	if (!coord_may_proceed(c, live, why, sizeof(why), who)) {
		/* A live member whose own thread stalled (a loaded host) restarts its silence
		 * timer after the stall and notices the loss up to a failure timeout later than
		 * the others. While such members are awaited, the quorum may still come: stopping
		 * now would end the group for a slow member. They get one and a half failure
		 * timeouts. A reporter gives up three after its own loss, at most one before ours:
		 * the decision and its commit fit in what is left. */
		if (waiting && now - c->start < c->cfg.timeout_ms + c->cfg.timeout_ms / 2) {
			return;
		}
		coord_stop(c, CTL_REF_NO_QUORUM, "%s", why);
		return;
	}
	c->state = CTL_C_RUNNING;
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		if (s->state != SLOT_IN) {
			continue;
		}
		if (!live[i]) {
			coord_remove(c, i, s->dead || s->gone,
				     s->gone ? "left the group (takeover)" :
				     s->dead ? "dead (takeover)" :
					       "did not report to the new coordinator",
				     now);
		} else {
			s->last_rx = now;
		}
	}
	for (i = 0; i < c->n; i++) {
		c->slots[i].dead = 0; /* carried by remove_death from here on */
	}
	/* Taking over from a coordinator that left on purpose is routine; from a lost one, not. */
	ftcc_log(c->cfg.suspect < c->n && c->slots[c->cfg.suspect].gone ? FTCC_LOG_INFO :
									  FTCC_LOG_WARN,
		 "control: group %s: member %u takes over from epoch %" PRIu64, c->cfg.group,
		 c->cfg.host, c->epoch);
	ctl_coord_tick(c, now);
}

/* ---- timers ------------------------------------------------------------------------------- */

/* Heartbeats to every attached member; they carry the settled op (lowest done over members). */
static void coord_heartbeat(struct ctl_coord *c)
{
	uint64_t settled = UINT64_MAX;
	struct ctl_msg *m;
	uint32_t i;

	for (i = 0; i < c->n; i++) {
		if (c->slots[i].state == SLOT_IN && c->slots[i].done_op[0] < settled) {
			settled = c->slots[i].done_op[0];
		}
	}
	for (i = 0; i < c->n; i++) {
		struct coord_slot *s = &c->slots[i];

		m = coord_msg(c, CTL_HB, c->epoch);
		m->done_op = settled == UINT64_MAX ? 0 : settled;
		if (s->conn != CTL_CONN_NONE) {
			c->ops.send(c->ops.arg, s->conn, m);
		}
		if (s->join && s->join_conn != CTL_CONN_NONE) {
			c->ops.send(c->ops.arg, s->join_conn, m);
		}
	}
}

void coord_clock(struct ctl_coord *c, uint64_t now)
{
	uint32_t i;

	/* A gap this long between two events means this process was not running (stopped,
	 * swapped out). The silence is ours, not the members': their clocks restart. And what
	 * is queued for us may be stale: members may have answered our proposal and then given
	 * up on us. The open proposal is dropped; a new one needs fresh answers, which members
	 * that left cannot give. */
	if (now - c->last_tick > c->cfg.timeout_ms / 2) {
		for (i = 0; i < c->n; i++) {
			c->slots[i].last_rx = now;
			c->slots[i].join_rx = now;
			c->slots[i].acked = 0;
		}
		if (c->prop_epoch) {
			ftcc_log(FTCC_LOG_INFO,
				 "control: group %s: coordinator did not run for %" PRIu64
				 " ms; proposal of epoch %" PRIu64 " dropped",
				 c->cfg.group, now - c->last_tick, c->prop_epoch);
			c->prop_epoch = 0;
		}
		c->prop_start = now;
	}
	c->last_tick = now;
}

void ctl_coord_tick(struct ctl_coord *c, uint64_t now)
{
	if (c->state == CTL_C_STOPPED) {
		return;
	}
	coord_clock(c, now);
	if (now - c->last_hb >= c->cfg.hb_ms) {
		c->last_hb = now;
		coord_heartbeat(c);
	}
	switch (c->state) {
	case CTL_C_FORMING:
		coord_form(c, now);
		if (c->state == CTL_C_FORMING && now - c->start > c->cfg.form_timeout_ms) {
			char missing[160];

			coord_missing(c, missing, sizeof(missing));
			coord_stop(c, CTL_REF_CLOSED,
				   "group %s did not form within %" PRIu64
				   " ms: member(s) %s never "
				   "came",
				   c->cfg.group, c->cfg.form_timeout_ms, missing);
		}
		break;
	case CTL_C_TAKEOVER:
		coord_takeover_check(c, now);
		break;
	case CTL_C_RUNNING:
		coord_check_silence(c, now);
		if (c->state == CTL_C_RUNNING) {
			coord_check_links(c, now);
		}
		if (c->state == CTL_C_RUNNING && !c->prop_epoch) {
			coord_propose(c, now);
		}
		break;
	case CTL_C_STOPPED:
		break;
	}
}

/* Lists the ids not yet here (FORMING) into @buf, e.g. "3, 5". */
void coord_missing(struct ctl_coord *c, char *buf, size_t len)
{
	size_t off = 0;
	uint32_t i;

	buf[0] = '\0';
	for (i = 0; i < c->n && off + 12 < len; i++) {
		if (c->slots[i].state != SLOT_IN) {
			off += (size_t)snprintf(buf + off, len - off, "%s%u", off ? ", " : "", i);
		}
	}
}
