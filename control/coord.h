/* Internal state of the coordinator state machine, shared by its two source files: coord.c
 * (changes, proposals, timers) and coord_msg.c (frames in, connections ending, status text).
 */
#ifndef FTCC_CONTROL_COORD_H
#define FTCC_CONTROL_COORD_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc/ctl_sm.h"

#define CTL_CONN_NONE UINT32_MAX

enum coord_slot_state {
	SLOT_EMPTY = 0, /* not a member (never came, or removed) */
	SLOT_IN,	/* FORMING: said HELLO; otherwise a member of the committed epoch */
};

/* Everything the coordinator knows about member id i (slots are indexed by id). */
struct coord_slot {
	enum coord_slot_state state;
	struct ctl_member_rec rec; /* incarnation, flags (CONTRIB), info; done as last announced */
	uint32_t conn;		   /* its connection, CTL_CONN_NONE when none */
	uint32_t abandoned_conn;   /* conn whose member said it lost us: its end is no evidence */
	uint64_t last_rx;	   /* last frame from it */
	uint64_t next_op, done_op; /* progress from its last HELLO, HB or ACK */
	uint64_t join_start;	   /* first op it takes part in (joiners) */
	int join;	    /* a process with this id asks to join (after the old one goes) */
	uint32_t join_conn; /* its connection */
	struct ctl_member_rec join_rec;
	int join_catchup;	  /* as a non-contributor */
	uint64_t join_rx;	  /* its last frame */
	int ready;		  /* catch-up member declared ready */
	int remove, remove_death; /* pending removal, and whether for death evidence */
	char why[96];		  /* why it is being removed */
	int in_prop, acked;	  /* in the open proposal's list; ACKed it */
	uint32_t prop_flags;	  /* its flags in the open proposal */
	int reported, dead;	  /* TAKEOVER: sent its report; someone holds death evidence */
	int deserted; /* said it lost us: it may be in a newer epoch, so its death proves nothing */
	uint64_t gone_epoch;	/* removed at this epoch (for the stale refusal text) */
	uint64_t gone_inc;	/* incarnation that was removed */
	uint64_t silence_since; /* first SILENCE suspicion against it, 0 none */
	uint32_t silence_by;	/* who reported it */
};

struct ctl_coord {
	struct ctl_coord_cfg cfg; /* members pointer cleared: the view is copied into slots */
	struct ctl_coord_ops ops;
	enum ctl_coord_state state;
	uint32_t n;   /* == cfg.expected */
	uint64_t gid; /* ctl_group_id(cfg.group) */
	struct coord_slot *slots;
	uint64_t epoch, boundary; /* committed (TAKEOVER: the adopted view's epoch) */
	uint64_t max_epoch;	  /* highest number used or seen; never reused */
	uint64_t prop_epoch;	  /* open proposal, 0 none */
	uint64_t prop_start;
	uint64_t start, last_tick, last_hb;
	uint32_t stop_code;
	char stop_reason[CTL_TEXT_MAX];
	struct ctl_msg msg; /* scratch for outgoing frames; members has n records */
};

struct ctl_msg *coord_msg(struct ctl_coord *c, uint16_t type, uint64_t epoch);
void coord_refuse(struct ctl_coord *c, uint32_t conn, uint32_t code, uint32_t hint, const char *fmt,
		  ...) __attribute__((format(printf, 5, 6)));
void coord_stop(struct ctl_coord *c, uint32_t code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void coord_remove(struct ctl_coord *c, uint32_t id, int death, const char *why, uint64_t now);
void coord_commit(struct ctl_coord *c, uint64_t now);
void coord_adopt(struct ctl_coord *c, uint64_t epoch, const struct ctl_member_rec *members,
		 uint32_t n, uint64_t now);
void coord_missing(struct ctl_coord *c, char *buf, size_t len);
/* Every entry point calls this first: detects that this process did not run for a while. */
void coord_clock(struct ctl_coord *c, uint64_t now);

#endif
