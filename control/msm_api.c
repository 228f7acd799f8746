/* SPDX-License-Identifier: BSD-3-Clause */
/* The member state machine's calls from the engine side (progress, evidence, readiness,
 * leaving) and its read-only accessors. See include/ftcc/ctl_sm.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ftcc/ctl_sm.h"
#include "msm_int.h"

void ctl_msm_progress_s(struct ctl_msm *s, uint32_t stream, uint64_t next_op, uint64_t done_op)
{
	if (stream < s->nstreams) {
		s->next_op[stream] = next_op;
		s->done_op[stream] = done_op;
	}
}

void ctl_msm_progress(struct ctl_msm *s, uint64_t next_op, uint64_t done_op)
{
	ctl_msm_progress_s(s, 0, next_op, done_op);
}

void ctl_msm_suspect(struct ctl_msm *s, uint32_t peer, enum ctl_evidence ev, uint64_t seq,
		     uint64_t now)
{
	ctl_msm_suspect_s(s, peer, ev, 0, seq, now);
}

void ctl_msm_suspect_s(struct ctl_msm *s, uint32_t peer, enum ctl_evidence ev, uint32_t stream,
		       uint64_t seq, uint64_t now)
{
	struct ctl_msg *m;

	(void)now;
	if (msm_is_final(s) || peer >= s->cfg.expected || peer == s->cfg.id ||
	    s->state != CTL_M_ACTIVE || stream >= s->nstreams) {
		return;
	}
	m = msm_msg(s, CTL_SUSPECT);
	m->peer = peer;
	m->evidence = ev;
	m->stream = stream;
	m->seq = seq;
	msm_send(s, m);
}

int ctl_msm_ready(struct ctl_msm *s, uint64_t now)
{
	(void)now;
	if (!s->cfg.catchup || msm_is_final(s)) {
		return -EINVAL;
	}
	if (s->state == CTL_M_ACTIVE && s->link == LINK_OPEN) {
		msm_send(s, msm_msg(s, CTL_READY));
	} else {
		s->ready_pending = 1;
	}
	return 0;
}

void ctl_msm_leave(struct ctl_msm *s, const char *reason, uint64_t now)
{
	(void)now;
	if (msm_is_final(s)) {
		return;
	}
	if (s->link == LINK_OPEN) {
		struct ctl_msg *m = msm_msg(s, CTL_LEAVE);

		snprintf(m->text, sizeof(m->text), "%s", reason ? reason : "");
		msm_send(s, m);
	}
	msm_set_reason(s, "left group %s: %s", s->cfg.group,
		       reason && reason[0] ? reason : "no reason given");
	msm_finish(s, CTL_M_LEFT);
}

enum ctl_member_state ctl_msm_state(const struct ctl_msm *s)
{
	return s->state;
}

const char *ctl_msm_reason(const struct ctl_msm *s)
{
	return s->reason;
}

const struct ctl_epoch_rec *ctl_msm_view(const struct ctl_msm *s)
{
	return s->nhist ? &s->hist[s->head] : NULL;
}

const struct ctl_epoch_rec *ctl_msm_op_epoch_s(const struct ctl_msm *s, uint32_t stream,
					       uint64_t seq, int *fenced)
{
	unsigned k;

	*fenced = 0;
	if (stream >= s->nstreams) {
		return NULL;
	}
	*fenced = s->prop_epoch != 0 && seq >= s->fence[stream];
	for (k = 0; k < s->nhist; k++) {
		const struct ctl_epoch_rec *e = &s->hist[(s->head + MSM_HIST - k) % MSM_HIST];

		if (ctl_epoch_rec_boundary(e, stream) <= seq) {
			return e;
		}
	}
	return NULL;
}

const struct ctl_epoch_rec *ctl_msm_op_epoch(const struct ctl_msm *s, uint64_t seq, int *fenced)
{
	return ctl_msm_op_epoch_s(s, 0, seq, fenced);
}

uint64_t ctl_msm_admitted_s(const struct ctl_msm *s, uint32_t stream)
{
	return stream < s->nstreams ? s->admitted[stream] : 0;
}

uint64_t ctl_msm_admitted(const struct ctl_msm *s)
{
	return s->admitted[0];
}

uint32_t ctl_msm_coord(const struct ctl_msm *s)
{
	return s->state == CTL_M_ACTIVE ? s->coord : CTL_NO_MEMBER;
}

uint64_t ctl_msm_next_deadline(const struct ctl_msm *s)
{
	uint64_t t = s->last_tick + s->cfg.hb_ms / 2;

	if (s->link == LINK_NONE && s->retry_at && s->retry_at < t) {
		t = s->retry_at;
	}
	return t;
}

const char *ctl_member_state_name(enum ctl_member_state st)
{
	switch (st) {
	case CTL_M_BOOT:
		return "forming";
	case CTL_M_JOINING:
		return "joining";
	case CTL_M_ACTIVE:
		return "active";
	case CTL_M_SEARCH:
		return "searching";
	case CTL_M_LOST:
		return "lost";
	case CTL_M_REMOVED:
		return "removed";
	case CTL_M_LEFT:
		return "left";
	}
	return "unknown";
}
