/* SPDX-License-Identifier: BSD-3-Clause */
/* The member state machine's state (msm.c), and the helpers its calls in msm_api.c share. */
#ifndef FTCC_CONTROL_MSM_INT_H
#define FTCC_CONTROL_MSM_INT_H

#include "ftcc/ctl_sm.h"

#define MSM_HIST 8 /* committed epochs kept for op lookups */

enum msm_link { LINK_NONE = 0, LINK_CONNECTING, LINK_OPEN };
/* What this member knows of another (of the coordinator, mostly): nothing, that it is gone
 * (its port refused us), silent, or that it left on purpose (proof that it is out). */
enum msm_ev { EV_NONE = 0, EV_DEAD, EV_SILENT, EV_LEFT };

struct ctl_msm {
	struct ctl_msm_cfg cfg;
	struct ctl_msm_ops ops;
	enum ctl_member_state state;
	char reason[CTL_TEXT_MAX];

	struct ctl_epoch_rec hist[MSM_HIST]; /* ring of committed epochs, newest at head */
	unsigned nhist, head;
	uint64_t max_epoch; /* highest number seen, proposals included */

	enum msm_link link;
	uint32_t target;	   /* whom the link goes to */
	uint64_t last_rx, last_hb; /* on the link */
	uint64_t retry_at;	   /* no link: connect again at this time (0: now) */
	uint32_t coord;		   /* believed coordinator */
	uint8_t *evidence;	   /* per id: enum msm_ev, reset by every VIEW */
	uint32_t lost;		   /* SEARCH: the coordinator that was lost */
	uint64_t deadline;	   /* BOOT/JOINING/SEARCH: give up (LOST) at this time */
	uint32_t join_next;	   /* JOINING: next id to ask */
	int hosting;		   /* embedded: a coordinator is hosted here */
	uint32_t redials;	   /* ACTIVE: connects to the coordinator since its link ended */
	uint64_t admitted[CTL_STREAMS_MAX]; /* its first op per stream, from its record in the
					     * newest view */

	uint32_t nstreams;
	uint64_t next_op[CTL_STREAMS_MAX], done_op[CTL_STREAMS_MAX];
	uint64_t prop_epoch;		 /* open proposal ACKed, 0 none */
	uint64_t fence[CTL_STREAMS_MAX]; /* ops at or past it wait while a proposal is open */
	int ready_pending;		 /* READY to send once in an epoch with a link */
	uint64_t last_tick;

	struct ctl_msg msg; /* scratch */
	struct ctl_member_rec *scratch;
};

/* Why the member is in a final state (or the last notable event). */
void msm_set_reason(struct ctl_msm *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Final state @st with the reason already set; closes the link. */
void msm_finish(struct ctl_msm *s, enum ctl_member_state st);
int msm_is_final(const struct ctl_msm *s);
/* The scratch message of @type, with this member's epoch and progress. */
struct ctl_msg *msm_msg(struct ctl_msm *s, uint16_t type);
/* Queues @m on the open link (dropped without one). */
void msm_send(struct ctl_msm *s, struct ctl_msg *m);

#endif
