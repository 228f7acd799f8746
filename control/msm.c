/* SPDX-License-Identifier: BSD-3-Clause */
/* One member's side of the membership protocol as a pure state machine: reaching the
 * coordinator, following its epochs, heartbeats, the proposal fence, losing the coordinator
 * and finding (or becoming) its successor. See include/ftcc/ctl_sm.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/ctl_sm.h"
#include "ftcc/log.h"
#include "msm_int.h"

void msm_set_reason(struct ctl_msm *s, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(s->reason, sizeof(s->reason), fmt, ap);
	va_end(ap);
}

static struct ctl_epoch_rec *newest(struct ctl_msm *s)
{
	return s->nhist ? &s->hist[s->head] : NULL;
}

static void changed(struct ctl_msm *s)
{
	if (s->ops.changed) {
		s->ops.changed(s->ops.arg);
	}
}

/* Final state @st with the reason already set; closes the link. */
void msm_finish(struct ctl_msm *s, enum ctl_member_state st)
{
	if (s->link != LINK_NONE) {
		s->ops.disconnect(s->ops.arg);
		s->link = LINK_NONE;
	}
	s->state = st;
	ftcc_log(st == CTL_M_LEFT ? FTCC_LOG_INFO : FTCC_LOG_WARN,
		 "control: group %s: member %u %s: %s", s->cfg.group, s->cfg.id,
		 ctl_member_state_name(st), s->reason);
	changed(s);
}

int msm_is_final(const struct ctl_msm *s)
{
	return s->state == CTL_M_LOST || s->state == CTL_M_REMOVED || s->state == CTL_M_LEFT;
}

struct ctl_msg *msm_msg(struct ctl_msm *s, uint16_t type)
{
	struct ctl_epoch_rec *e = newest(s);

	memset(&s->msg, 0, sizeof(s->msg));
	s->msg.members = s->scratch;
	s->msg.members_cap = s->cfg.expected;
	s->msg.type = type;
	s->msg.group_id = ctl_group_id(s->cfg.group);
	s->msg.epoch = e ? e->epoch : 0;
	s->msg.next_op = s->next_op[0];
	s->msg.done_op = s->done_op[0];
	if (type == CTL_HELLO || type == CTL_ACK || type == CTL_HB) {
		s->msg.nstreams = s->nstreams;
		for (uint32_t t = 1; t < s->nstreams; t++) {
			*ctl_msg_next(&s->msg, t) = s->next_op[t];
			*ctl_msg_done(&s->msg, t) = s->done_op[t];
		}
	}
	return &s->msg;
}

void msm_send(struct ctl_msm *s, struct ctl_msg *m)
{
	if (s->link == LINK_OPEN) {
		s->ops.send(s->ops.arg, m);
	}
}

/* ---- connecting ----------------------------------------------------------------------------- */

static void connect_to(struct ctl_msm *s, uint32_t target)
{
	s->link = LINK_CONNECTING;
	s->target = target;
	s->retry_at = 0;
	s->ops.connect(s->ops.arg, target);
}

/* Drops the link; connect again after a heartbeat period. */
static void drop_link(struct ctl_msm *s, uint64_t now)
{
	if (s->link != LINK_NONE) {
		s->ops.disconnect(s->ops.arg);
		s->link = LINK_NONE;
	}
	s->retry_at = now + s->cfg.hb_ms;
}

/* The record flags that carry this member's evidence about member @id in a takeover report. */
static uint32_t evidence_flags(const struct ctl_msm *s, uint32_t id)
{
	if (id >= s->cfg.expected) {
		return 0;
	}
	switch (s->evidence[id]) {
	case EV_DEAD:
		return CTL_MF_DEAD;
	case EV_LEFT:
		return CTL_MF_LEFT;
	default:
		return 0;
	}
}

/* The configuration a hosted coordinator starts with; the view for a takeover. */
static void host_cfg(struct ctl_msm *s, struct ctl_coord_cfg *cc, int takeover)
{
	struct ctl_epoch_rec *e = newest(s);
	uint32_t i;

	memset(cc, 0, sizeof(*cc));
	memcpy(cc->group, s->cfg.group, sizeof(cc->group));
	cc->expected = s->cfg.expected;
	cc->host = s->cfg.id;
	cc->timeout_ms = s->cfg.timeout_ms;
	cc->hb_ms = s->cfg.hb_ms;
	cc->form_timeout_ms = s->cfg.connect_timeout_ms;
	cc->nstreams = s->nstreams;
	cc->suspect = CTL_NO_MEMBER;
	if (!takeover || !e) {
		return;
	}
	cc->takeover = 1;
	cc->epoch = e->epoch;
	cc->max_epoch = s->max_epoch;
	cc->suspect = s->lost;
	cc->nmembers = e->nmembers;
	for (i = 0; i < e->nmembers; i++) {
		s->scratch[i] = e->members[i];
		s->scratch[i].flags |= evidence_flags(s, e->members[i].id);
	}
	cc->members = s->scratch;
}

/* SEARCH: the lowest member of the view nobody holds evidence against; hosts a takeover when
 * that is this member. */
static void search_next(struct ctl_msm *s, uint64_t now)
{
	struct ctl_epoch_rec *e = newest(s);
	uint32_t i, cand = CTL_NO_MEMBER;

	if (s->cfg.daemon) {
		connect_to(s, CTL_NO_MEMBER);
		return;
	}
	for (i = 0; e && i < e->nmembers; i++) {
		uint32_t id = e->members[i].id;

		if (id < s->cfg.expected && s->evidence[id] == EV_NONE) {
			cand = id;
			break;
		}
	}
	if (cand == CTL_NO_MEMBER) {
		msm_set_reason(s, "no member of group %s is reachable", s->cfg.group);
		msm_finish(s, CTL_M_LOST);
		return;
	}
	if (cand == s->cfg.id && !s->hosting) {
		struct ctl_coord_cfg cc;

		host_cfg(s, &cc, 1);
		s->hosting = 1;
		s->ops.host(s->ops.arg, &cc);
	}
	(void)now;
	connect_to(s, cand);
}

/* The coordinator (or the candidate being tried) is gone: @ev is the evidence. */
static void lose(struct ctl_msm *s, enum msm_ev ev, uint64_t now)
{
	uint32_t who = s->target;

	if (s->link == LINK_OPEN && ev == EV_SILENT) {
		/* Tell it, in case it is only frozen: it must not take our going as death. */
		struct ctl_msg *m = msm_msg(s, CTL_SUSPECT);

		m->peer = who;
		m->evidence = CTL_EV_SILENCE;
		msm_send(s, m);
	}
	if (s->link != LINK_NONE) {
		s->ops.disconnect(s->ops.arg);
		s->link = LINK_NONE;
	}
	if (who != CTL_NO_MEMBER && who < s->cfg.expected && ev != EV_NONE) {
		s->evidence[who] = (uint8_t)ev;
	}
	if (s->state == CTL_M_ACTIVE) {
		s->state = CTL_M_SEARCH;
		s->lost = who;
		s->deadline = now + 3 * s->cfg.timeout_ms;
		/* A coordinator whose host left on purpose is routine, not an alert. */
		ftcc_log(ev == EV_LEFT ? FTCC_LOG_INFO : FTCC_LOG_WARN,
			 "control: group %s: member %u lost its coordinator (%s %u); looking for "
			 "its successor",
			 s->cfg.group, s->cfg.id,
			 ev == EV_LEFT ? "it left, member" :
			 ev == EV_DEAD ? "its port refuses connections, member" :
					 "silence of member",
			 who);
		changed(s);
	}
	if (s->cfg.daemon) {
		s->retry_at = now + s->cfg.hb_ms;
		return;
	}
	search_next(s, now);
}

struct ctl_msm *ctl_msm_create(const struct ctl_msm_cfg *cfg, const struct ctl_msm_ops *ops,
			       uint64_t now)
{
	struct ctl_msm *s;
	unsigned i;

	if (cfg->expected == 0 || cfg->expected > CTL_MAX_MEMBERS || cfg->id >= cfg->expected ||
	    cfg->nstreams > CTL_STREAMS_MAX) {
		return NULL;
	}
	s = calloc(1, sizeof(*s));
	if (!s) {
		return NULL;
	}
	s->cfg = *cfg;
	s->ops = *ops;
	s->evidence = calloc(cfg->expected, 1);
	s->scratch = calloc(cfg->expected, sizeof(*s->scratch));
	for (i = 0; i < MSM_HIST; i++) {
		s->hist[i].members = calloc(cfg->expected, sizeof(*s->hist[i].members));
		if (!s->hist[i].members) {
			break;
		}
	}
	if (!s->evidence || !s->scratch || i < MSM_HIST) {
		ctl_msm_destroy(s);
		return NULL;
	}
	s->coord = CTL_NO_MEMBER;
	s->lost = CTL_NO_MEMBER;
	s->nstreams = cfg->nstreams ? cfg->nstreams : 1;
	for (i = 0; i < CTL_STREAMS_MAX; i++) {
		s->fence[i] = UINT64_MAX;
	}
	s->last_tick = now;
	/* past the coordinator's own formation deadline, so its verdict (naming who is
	 * missing) arrives first */
	s->deadline = now + cfg->connect_timeout_ms + 2 * cfg->hb_ms;
	msm_set_reason(s, "starting");
	if (cfg->join) {
		s->state = CTL_M_JOINING;
		s->join_next = cfg->daemon ? CTL_NO_MEMBER : (cfg->id == 0 && cfg->expected > 1);
		connect_to(s, s->join_next);
	} else {
		s->state = CTL_M_BOOT;
		if (!cfg->daemon && cfg->id == 0) {
			struct ctl_coord_cfg cc;

			host_cfg(s, &cc, 0);
			s->hosting = 1;
			s->ops.host(s->ops.arg, &cc);
		}
		connect_to(s, cfg->daemon ? CTL_NO_MEMBER : 0);
	}
	return s;
}

void ctl_msm_destroy(struct ctl_msm *s)
{
	unsigned i;

	if (!s) {
		return;
	}
	for (i = 0; i < MSM_HIST; i++) {
		free(s->hist[i].members);
	}
	free(s->evidence);
	free(s->scratch);
	free(s);
}

void ctl_msm_on_connected(struct ctl_msm *s, uint64_t now)
{
	struct ctl_epoch_rec *e = newest(s);
	struct ctl_msg *m;
	uint32_t i, self = CTL_NO_MEMBER;

	if (s->link != LINK_CONNECTING) {
		return;
	}
	s->link = LINK_OPEN;
	s->last_rx = now;
	s->last_hb = now;
	m = msm_msg(s, CTL_HELLO);
	m->member = s->cfg.id;
	m->incarnation = s->cfg.incarnation;
	m->expected = s->cfg.expected;
	m->max_epoch = s->max_epoch;
	m->listen_port = s->cfg.listen_port;
	memcpy(m->group, s->cfg.group, sizeof(m->group));
	if (s->state == CTL_M_JOINING) {
		m->flags = CTL_HELLO_JOIN |
			   (s->cfg.catchup && !s->ready_pending ? CTL_HELLO_CATCHUP : 0);
	}
	if (e && s->state != CTL_M_JOINING) {
		for (i = 0; i < e->nmembers; i++) {
			m->members[i] = e->members[i];
			m->members[i].flags |= evidence_flags(s, e->members[i].id);
			if (e->members[i].id == s->cfg.id) {
				self = i;
			}
		}
		m->nmembers = e->nmembers;
	}
	if (self == CTL_NO_MEMBER) {
		/* Only our own record, in id order among any others is not needed: alone. */
		m->epoch = e && s->state != CTL_M_JOINING ? e->epoch : 0;
		m->nmembers = 1;
		memset(&m->members[0], 0, sizeof(m->members[0]));
		m->members[0].id = s->cfg.id;
		m->members[0].incarnation = s->cfg.incarnation;
	}
	self = self == CTL_NO_MEMBER ? 0 : self;
	m->members[self].info_len = s->cfg.info_len;
	memcpy(m->members[self].info, s->cfg.info, s->cfg.info_len);
	msm_send(s, m);
}

/* Whether the member list of VIEW or PROPOSE @m fits this group: ids below the group's size
 * (the wire format checked they are strictly increasing). The engine indexes bitmaps by them. */
static int ids_fit(const struct ctl_msm *s, const struct ctl_msg *m)
{
	/* (and its streams are this member's: a view without the tail would put every other
	 * stream's boundary and starts at op 0) */
	if (m->nmembers == 0 || m->nmembers > s->cfg.expected ||
	    (m->nstreams ? m->nstreams : 1) != s->nstreams) {
		return 0;
	}
	for (uint32_t i = 0; i < m->nmembers; i++) {
		if (m->members[i].id >= s->cfg.expected) {
			return 0;
		}
	}
	return 1;
}

/* A VIEW: install it when newer and it names us. */
static void on_view(struct ctl_msm *s, const struct ctl_msg *m)
{
	struct ctl_epoch_rec *e = newest(s), *n;
	int in = 0, contrib = 0;
	const struct ctl_member_rec *self = NULL;
	uint32_t i;

	if (!ids_fit(s, m)) {
		ftcc_warn("control: group %s: member %u ignores a view of epoch %" PRIu64
			  " that does not fit the group (%u members naming one outside the group's "
			  "%u, or %u op streams for this member's %u)",
			  s->cfg.group, s->cfg.id, m->epoch, m->nmembers, s->cfg.expected,
			  m->nstreams, s->nstreams);
		return;
	}
	if (m->epoch > s->max_epoch) {
		s->max_epoch = m->epoch;
	}
	if (e && m->epoch <= e->epoch) {
		return;
	}
	for (i = 0; i < m->nmembers; i++) {
		if (m->members[i].id == s->cfg.id &&
		    m->members[i].incarnation == s->cfg.incarnation) {
			in = 1;
			contrib = (m->members[i].flags & CTL_MF_CONTRIB) != 0;
			self = &m->members[i];
		}
	}
	if (!in) {
		return;
	}
	for (i = 0; i < CTL_STREAMS_MAX; i++) {
		s->admitted[i] = i ? self->xstart[i - 1] : self->start;
	}
	s->head = s->nhist ? (s->head + 1) % MSM_HIST : 0;
	if (s->nhist < MSM_HIST) {
		s->nhist++;
	}
	n = &s->hist[s->head];
	n->epoch = m->epoch;
	n->boundary = m->boundary;
	memcpy(n->xboundary, m->xboundary, sizeof(n->xboundary));
	n->coord = m->coord;
	n->nmembers = m->nmembers;
	memcpy(n->members, m->members, m->nmembers * sizeof(*m->members));
	s->coord = s->cfg.daemon ? CTL_NO_MEMBER : m->coord;
	s->prop_epoch = 0;
	for (i = 0; i < CTL_STREAMS_MAX; i++) {
		s->fence[i] = UINT64_MAX;
	}
	memset(s->evidence, 0, s->cfg.expected);
	s->lost = CTL_NO_MEMBER;
	s->redials = 0;
	if (s->hosting && !s->cfg.daemon && s->coord != s->cfg.id) {
		/* a takeover we started lost the race to another member's */
		s->hosting = 0;
		s->ops.host(s->ops.arg, NULL);
	}
	s->state = CTL_M_ACTIVE;
	msm_set_reason(s, "in epoch %" PRIu64 " from op %" PRIu64 " with %u members", n->epoch,
		       n->boundary, n->nmembers);
	if (s->ready_pending && !contrib) {
		struct ctl_msg *r = msm_msg(s, CTL_READY);

		msm_send(s, r);
	}
	s->ready_pending = 0;
	changed(s);
}

static void on_refuse(struct ctl_msm *s, const struct ctl_msg *m, uint64_t now)
{
	switch (m->code) {
	case CTL_REF_NOT_COORD:
		if (s->state == CTL_M_ACTIVE) {
			/* Our coordinator's address answers, but nothing there coordinates our
			 * group any more (it restarted, or stepped down): it is lost. */
			lose(s, EV_DEAD, now);
			return;
		}
		if (s->link != LINK_NONE) {
			s->ops.disconnect(s->ops.arg);
			s->link = LINK_NONE;
		}
		if (s->state == CTL_M_JOINING && !s->cfg.daemon) {
			/* go where it points, or keep walking the ids */
			if (m->hint < s->cfg.expected && m->hint != s->target &&
			    m->hint != s->cfg.id) {
				s->join_next = m->hint;
				connect_to(s, m->hint);
				return;
			}
			/* no hint: ask the next id after a pause */
			s->join_next = (s->join_next + 1) % s->cfg.expected;
			if (s->join_next == s->cfg.id) {
				s->join_next = (s->join_next + 1) % s->cfg.expected;
			}
		} else if (s->state == CTL_M_SEARCH && m->hint < s->cfg.expected &&
			   m->hint != s->target && m->hint != s->cfg.id &&
			   s->evidence[m->hint] == EV_NONE) {
			connect_to(s, m->hint);
			return;
		}
		/* it has not noticed the loss yet (or is electing): ask again soon */
		s->retry_at = now + (s->cfg.hb_ms < 10 ? s->cfg.hb_ms : 10);
		return;
	case CTL_REF_STALE:
		msm_set_reason(s, "%s", m->text);
		msm_finish(s, CTL_M_REMOVED);
		return;
	case CTL_REF_CLOSED:
	case CTL_REF_LEFT:
		if (s->state == CTL_M_ACTIVE || s->state == CTL_M_SEARCH) {
			/* The coordinator is going away on purpose. LEFT: with its hosting member,
			 * which is then proven out of the group. */
			lose(s, m->code == CTL_REF_LEFT ? EV_LEFT : EV_DEAD, now);
			return;
		}
		msm_set_reason(s, "%s", m->text);
		msm_finish(s, CTL_M_LOST);
		return;
	default:
		msm_set_reason(s, "%s", m->text[0] ? m->text : ctl_refuse_name(m->code));
		msm_finish(s, CTL_M_LOST);
		return;
	}
}

void ctl_msm_on_msg(struct ctl_msm *s, const struct ctl_msg *m, uint64_t now)
{
	if (msm_is_final(s) || s->link != LINK_OPEN) {
		return;
	}
	s->last_rx = now;
	switch (m->type) {
	case CTL_VIEW:
		on_view(s, m);
		break;
	case CTL_PROPOSE: {
		struct ctl_msg *a;
		uint32_t i;
		int in = 0;

		if (!ids_fit(s, m)) {
			break;
		}
		if (m->epoch > s->max_epoch) {
			s->max_epoch = m->epoch;
		}
		for (i = 0; i < m->nmembers; i++) {
			in |= m->members[i].id == s->cfg.id;
		}
		if (!in || (s->state != CTL_M_ACTIVE && s->state != CTL_M_SEARCH)) {
			break;
		}
		s->prop_epoch = m->epoch;
		for (i = 0; i < s->nstreams; i++) {
			s->fence[i] = s->next_op[i] + CTL_JOIN_SLACK;
		}
		a = msm_msg(s, CTL_ACK);
		a->epoch = m->epoch;
		msm_send(s, a);
		break;
	}
	case CTL_HB:
		s->redials = 0; /* the coordinator's link works */
		break;
	case CTL_REFUSE:
		on_refuse(s, m, now);
		break;
	default:
		break;
	}
}

void ctl_msm_on_close(struct ctl_msm *s, int refused, int death, uint64_t now)
{
	if (msm_is_final(s) || s->link == LINK_NONE) {
		return;
	}
	s->link = LINK_NONE;
	switch (s->state) {
	case CTL_M_BOOT:
		/* member 0 may not listen yet: ask again soon */
		s->retry_at = now + (s->cfg.hb_ms < 20 ? s->cfg.hb_ms : 20);
		break;
	case CTL_M_JOINING:
		if (!s->cfg.daemon) {
			/* next id (not ourselves), wrapping after a pause */
			uint32_t nx = s->join_next + 1;

			if (nx == s->cfg.id) {
				nx++;
			}
			if (nx >= s->cfg.expected) {
				nx = s->cfg.id == 0 && s->cfg.expected > 1;
				s->join_next = nx;
				s->retry_at = now + s->cfg.hb_ms;
				break;
			}
			s->join_next = nx;
			connect_to(s, nx);
			return;
		}
		s->retry_at = now + s->cfg.hb_ms;
		break;
	case CTL_M_ACTIVE:
		if (refused) {
			/* nothing listens where the coordinator did: its process is gone */
			lose(s, EV_DEAD, now);
			break;
		}
		/* Closed or reset (a firewall, a conntrack flush, the peer's kernel), or a local
		 * error: connect again. Silence for the failure timeout, or a refused connect,
		 * is what loses the coordinator. */
		ftcc_log(FTCC_LOG_INFO,
			 "control: group %s: member %u: the link to coordinator %u ended (%s); "
			 "connecting again",
			 s->cfg.group, s->cfg.id, s->target,
			 death ? "closed by the other end" : "local error or timeout");
		s->retry_at = s->redials++ ? now + s->cfg.hb_ms : now;
		break;
	case CTL_M_SEARCH:
		lose(s, (refused || death) ? EV_DEAD : EV_SILENT, now);
		break;
	default:
		break;
	}
}

void ctl_msm_tick(struct ctl_msm *s, uint64_t now)
{
	if (msm_is_final(s)) {
		return;
	}
	/* A gap this long means this process did not run: the silence was ours. */
	if (now - s->last_tick > s->cfg.timeout_ms / 2) {
		s->last_rx = now;
		if (s->deadline) {
			s->deadline += now - s->last_tick;
		}
	}
	s->last_tick = now;
	if (s->link == LINK_OPEN) {
		if (now - s->last_rx > s->cfg.timeout_ms) {
			if (s->state == CTL_M_ACTIVE || s->state == CTL_M_SEARCH) {
				lose(s, EV_SILENT, now);
			} else {
				drop_link(s, now);
			}
			return;
		}
		if (now - s->last_hb >= s->cfg.hb_ms) {
			s->last_hb = now;
			msm_send(s, msm_msg(s, CTL_HB));
		}
	} else if (s->state == CTL_M_ACTIVE && now - s->last_rx > s->cfg.timeout_ms) {
		/* the coordinator's link stayed down (or connecting) for the failure timeout */
		lose(s, EV_SILENT, now);
		return;
	} else if (s->link == LINK_NONE && now >= s->retry_at) {
		if (s->state == CTL_M_SEARCH) {
			search_next(s, now);
		} else if (s->state == CTL_M_JOINING) {
			connect_to(s, s->cfg.daemon ? CTL_NO_MEMBER : s->join_next);
		} else if (s->state == CTL_M_BOOT) {
			connect_to(s, s->cfg.daemon ? CTL_NO_MEMBER : 0);
		} else if (s->state == CTL_M_ACTIVE) {
			connect_to(s, s->coord);
		}
	}
	if (msm_is_final(s)) {
		return;
	}
	if (s->state != CTL_M_ACTIVE && now > s->deadline) {
		if (s->state == CTL_M_SEARCH) {
			char who[32] = "the daemon"; /* which no member replaces */

			if (!s->cfg.daemon)
				snprintf(who, sizeof(who), "member %u", s->lost);
			msm_set_reason(
				s,
				"lost the coordinator of group %s (%s) and found neither it nor "
				"a successor with a majority within %" PRIu64 " ms",
				s->cfg.group, who, 3 * s->cfg.timeout_ms);
		} else {
			msm_set_reason(s, "could not %s group %s within %" PRIu64 " ms",
				       s->state == CTL_M_JOINING ? "join" : "form", s->cfg.group,
				       s->cfg.connect_timeout_ms);
		}
		msm_finish(s, CTL_M_LOST);
	}
}
