/* SPDX-License-Identifier: BSD-3-Clause */
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
	/* progress per stream from its last HELLO, HB or ACK */
	uint64_t next_op[CTL_STREAMS_MAX], done_op[CTL_STREAMS_MAX];
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
	uint64_t rep_at, rep_max; /* TAKEOVER: when it reported, the highest epoch it had seen */
	int gone; /* proven out by its own words: it sent LEAVE, or a new incarnation of it asked
		   * to join (TAKEOVER: a report says its coordinator announced it left) */
	int deserted; /* said it lost us: it may be in a newer epoch, so its death proves nothing */
	int probing;  /* a probe of its listening port is out (for probe_inc) */
	uint64_t probe_inc;	/* the incarnation the probe is about */
	uint64_t gone_epoch;	/* removed at this epoch (for the stale refusal text) */
	uint64_t gone_at;	/* when that epoch committed (the status says how long ago) */
	uint64_t gone_inc;	/* incarnation that was removed */
	uint64_t silence_since; /* first SILENCE suspicion against it, 0 none */
	uint32_t silence_by;	/* who reported it */
};

/* A straggler report remembered (struct coord_link's srep): its op and epoch. */
struct coord_srep {
	uint64_t seq, epoch;
	int valid;
};

/* Trouble on the data link between members a < b, as members reported it (SUSPECT LINK or
 * CUT). A streak ends when no report came for the failure timeout. */
struct coord_link {
	uint32_t a, b;	   /* a == b: the entry is free */
	uint64_t first;	   /* first report of the streak */
	uint64_t last;	   /* latest report */
	int cut;	   /* a CUT report: one could not reach the other at all */
	int want_retry;	   /* a LINK report asks for another attempt of the ops in flight */
	uint32_t retries;  /* retry epochs proposed for this streak */
	uint64_t retry_at; /* the next retry epoch not before this (backoff) */
	uint64_t seq[CTL_STREAMS_MAX]; /* per stream: highest op a report of the streak failed in */
	uint32_t streams;	       /* bit t: a report failed in stream t */
	uint32_t stream;	       /* the latest report's stream (for the log) */
	uint32_t nrep; /* reports that count (not about a member that had not issued the op) */
	int settled;   /* every member has done that op since: the link carried it after all */
	int shape;     /* a SHAPE report asks for the epoch (not a link fault: counts nothing) */
	/* Reports about a member idle between ops (stragglers, counting nothing): the latest, and
	 * the retry they ask for held until that member issued the op (hold_seq of stream hold_t)
	 * or hold_until, whichever comes first (coord_link_report()). */
	uint64_t slast, hold_until, hold_seq;
	uint32_t hold_who, hold_t;
	int urgent; /* a straggler report of a joiner's: its retry is not held */
	/* The latest straggler report of each direction ([0]: by a, about b) and stream: the same
	 * report sent again stays a straggler's after the accused issued the op, as the evidence
	 * predates it. A member waiting in several streams repeats a report in each. */
	struct coord_srep srep[2][CTL_STREAMS_MAX];
};

#define COORD_LINKS 64

struct ctl_coord {
	struct ctl_coord_cfg cfg; /* members pointer cleared: the view is copied into slots */
	struct ctl_coord_ops ops;
	enum ctl_coord_state state;
	uint32_t n;   /* == cfg.expected */
	uint64_t gid; /* ctl_group_id(cfg.group) */
	struct coord_slot *slots;
	uint64_t epoch;			    /* committed (TAKEOVER: the adopted view's epoch) */
	uint64_t boundary[CTL_STREAMS_MAX]; /* the committed epoch's, per stream */
	uint32_t nstreams;		    /* the group's streams (cfg.nstreams, at least 1) */
	uint64_t max_epoch;		    /* highest number used or seen; never reused */
	uint64_t prop_epoch;		    /* open proposal, 0 none */
	uint64_t prop_start;
	uint64_t start, last_tick, last_hb;
	uint32_t stop_code;
	char stop_reason[CTL_TEXT_MAX];
	int retry_pending;   /* a retry epoch (the same members) is owed */
	int prop_retry;	     /* the open proposal is (also) a retry */
	char retry_why[128]; /* why, for the log */
	struct coord_link links[COORD_LINKS];
	struct ctl_msg msg; /* scratch for outgoing frames; members has n records */
};

struct ctl_msg *coord_msg(struct ctl_coord *c, uint16_t type, uint64_t epoch);
void coord_refuse(struct ctl_coord *c, uint32_t conn, uint32_t code, uint32_t hint, const char *fmt,
		  ...) __attribute__((format(printf, 5, 6)));
void coord_stop(struct ctl_coord *c, uint32_t code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void coord_remove(struct ctl_coord *c, uint32_t id, int death, const char *why, uint64_t now);
/* The safety rule: whether the members flagged in @is_live (indexed by id) may go on without the
 * other members of the committed epoch. When not, @why says so (from @who's point of view). */
int coord_may_proceed(struct ctl_coord *c, const uint8_t *is_live, char *why, size_t len,
		      const char *who);
/* Silence verdicts: members not heard for the timeout are removed while the others form a
 * quorum; without one the coordinator stops. */
void coord_check_silence(struct ctl_coord *c, uint64_t now);
void coord_commit(struct ctl_coord *c, uint64_t now);
void coord_adopt(struct ctl_coord *c, uint64_t epoch, const struct ctl_member_rec *members,
		 uint32_t n, uint64_t now);
void coord_missing(struct ctl_coord *c, char *buf, size_t len);
/* Asks the runtime to probe member @id's listening port (its control connection ended without a
 * LEAVE, or a peer cannot reach it). The answer comes through ctl_coord_on_probe(). */
void coord_probe(struct ctl_coord *c, uint32_t id, const char *why);
/* A data link report from member @r about member @p (SUSPECT LINK, CUT or SILENCE) made in the
 * reporter's epoch @epoch while it ran op @seq. */
void coord_link_report(struct ctl_coord *c, uint32_t r, uint32_t p, int cut, uint64_t epoch,
		       uint32_t stream, uint64_t seq, uint64_t now);
/* Member @r's frames of op @seq and member @p's carry different shapes (SUSPECT SHAPE): an
 * epoch reopens the ops in flight so that their resume exchange ends that op on every member.
 * No evidence against anyone, and no streak of the cut rule. */
void coord_shape_report(struct ctl_coord *c, uint32_t r, uint32_t p, uint64_t epoch,
			uint32_t stream, uint64_t seq, uint64_t now);
/* Puts the committed epoch's stream boundaries into @m (VIEW, PROPOSE). */
void coord_msg_streams(const struct ctl_coord *c, struct ctl_msg *m);
/* Timers of the link table: retry epochs owed, and links broken for good (the cut rule). */
void coord_check_links(struct ctl_coord *c, uint64_t now);
/* Every entry point calls this first: detects that this process did not run for a while. */
void coord_clock(struct ctl_coord *c, uint64_t now);

#endif
