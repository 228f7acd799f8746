/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership wire format: the frames members and coordinators exchange on control connections.
 *
 * Every frame is a 32-byte header (magic, version, type, total length, group id, epoch)
 * followed by a type-specific body. All integers are little-endian; every field is validated on
 * decode, so bytes from the network reach the state machines only as a checked struct ctl_msg.
 * The fuzz target fuzz_ctl_wire drives all of it.
 */
#ifndef FTCC_CTL_WIRE_H
#define FTCC_CTL_WIRE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define CTL_WIRE_MAGIC 0x4d435446u /* "FTCM" */
#define CTL_WIRE_VERSION 4	   /* 3: SUSPECT evidence SHAPE; 4: streams */
#define CTL_HDR_SIZE 32
#define CTL_MAX_MEMBERS 1024 /* members in one view */
#define CTL_GROUP_MAX 64     /* group name, including the NUL */
#define CTL_INFO_MAX 192     /* opaque per-member blob (the engine's data-plane addresses) */
#define CTL_TEXT_MAX 256     /* REFUSE text, including the NUL */
#define CTL_FRAME_MAX (320u << 10)
/* Streams: independent op sequences of one group, each with its own progress, boundary and
 * admissions (stream 0's are the scalar fields; streams 1.. travel in a tail of the frames that
 * carry them, present only when a member has more than one stream). */
#define CTL_STREAMS_MAX 8
#define CTL_NO_MEMBER UINT32_MAX

enum ctl_type {
	CTL_HELLO = 1,	 /* member -> coordinator: first frame of every connection */
	CTL_VIEW = 2,	 /* coordinator -> member: an epoch is committed (or the current one) */
	CTL_PROPOSE = 3, /* coordinator -> member: an epoch is proposed; answer with ACK */
	CTL_ACK = 4,	 /* member -> coordinator: progress at the time of a PROPOSE */
	CTL_HB = 5,	 /* both ways, every heartbeat period */
	CTL_SUSPECT = 6, /* member -> coordinator: evidence against a peer */
	CTL_LEAVE =
		7, /* member -> coordinator: leaving on purpose, with a reason (proof it is out) */
	CTL_READY = 8,	/* member -> coordinator: a catch-up member now contributes */
	CTL_REFUSE = 9, /* -> member: why it is refused or stopped; the sender closes next */
	CTL_TYPE_MAX = CTL_REFUSE,
};

/* HELLO flags. */
#define CTL_HELLO_JOIN 0x1    /* not in any epoch of this group yet (new or restarted) */
#define CTL_HELLO_CATCHUP 0x2 /* join as a non-contributor (JOIN only) */
#define CTL_HELLO_PROBE 0x4   /* only asking who coordinates; answered by REFUSE(NOT_COORD) */
#define CTL_HELLO_FLAGS (CTL_HELLO_JOIN | CTL_HELLO_CATCHUP | CTL_HELLO_PROBE)

/* Member record flags. */
#define CTL_MF_CONTRIB 0x1 /* contributes input (clear: catch-up, receives results only) */
#define CTL_MF_DEAD 0x2	   /* HELLO reports: the sender holds death evidence against it */
#define CTL_MF_LEFT 0x4	   /* HELLO reports: it left on purpose (its coordinator said so) */
#define CTL_MF_FLAGS (CTL_MF_CONTRIB | CTL_MF_DEAD | CTL_MF_LEFT)

/* SUSPECT evidence. None of it is a verdict: the coordinator decides, on evidence about the
 * accused that it gathers itself (its own link to it, a probe of its listening port). */
enum ctl_evidence {
	CTL_EV_DEATH = 1,   /* the sender saw its link to the peer closed by the peer's kernel */
	CTL_EV_SILENCE = 2, /* no traffic from the peer for the failure timeout */
	CTL_EV_LINK = 3,    /* a data link between two members broke and may have lost frames:
			     * the ops in flight need another attempt (a retry epoch) */
	CTL_EV_CUT = 4,	    /* the sender cannot reach the peer's data plane at all */
	CTL_EV_SHAPE = 5,   /* the peer called the op with another shape (count, type, operator):
			     * the op must end on every member (an epoch whose resume exchange
			     * decides so); says nothing against the peer */
	CTL_EV_MAX = CTL_EV_SHAPE,
};

/* REFUSE codes. */
enum ctl_refuse {
	CTL_REF_PROTOCOL = 1,  /* malformed frame, unexpected type, wrong group */
	CTL_REF_STALE = 2,     /* the member's epoch or incarnation is no longer in the group */
	CTL_REF_NOT_COORD = 3, /* this process does not coordinate; hint names who does */
	CTL_REF_NO_QUORUM = 4, /* the coordinator lost its majority: this side stops */
	CTL_REF_FULL = 5,      /* the group already has its expected members with these ids */
	CTL_REF_CLOSED = 6,    /* the coordinator is shutting down */
	CTL_REF_LEFT = 7,      /* the coordinator's hosting member left the group on purpose */
	CTL_REF_MAX = CTL_REF_LEFT,
};

/* One member as carried in HELLO (the sender's view), VIEW and PROPOSE. */
struct ctl_member_rec {
	uint32_t id;	      /* stable member id (rank) */
	uint32_t flags;	      /* CTL_MF_* */
	uint64_t incarnation; /* random per process start; a restart is a new incarnation */
	uint64_t done;	      /* VIEW: first op the member had not completed when reported */
	uint64_t start;	      /* first op it takes part in: 0 for a founding member, its admission
			       * boundary for a joiner (which stays its first op when a later epoch
			       * reopens ops below it: those run without it) */
	uint64_t xstart[CTL_STREAMS_MAX - 1]; /* stream t >= 1: its start is xstart[t - 1] */
	uint16_t info_len;
	uint8_t info[CTL_INFO_MAX];
};

/* A decoded frame. Fields a type does not carry are zero. @members points to caller storage of
 * @members_cap records (decode fills at most that many; more is -EMSGSIZE). */
struct ctl_msg {
	uint16_t type;
	uint64_t group_id; /* ctl_group_id(group name) */
	uint64_t epoch; /* sender's epoch (HELLO, HB, ACK, ...); the epoch itself (VIEW, PROPOSE) */

	/* HELLO */
	uint32_t member;      /* sender's member id */
	uint32_t flags;	      /* CTL_HELLO_* */
	uint64_t incarnation; /* sender's incarnation */
	uint32_t expected;    /* group size the sender expects */
	uint64_t max_epoch;   /* highest epoch number the sender has seen (incl. proposals) */
	uint16_t listen_port; /* port the sender's control listener takes connections on, at the
			       * address its connection comes from (death probes); 0: none */
	char group[CTL_GROUP_MAX];

	/* HELLO, ACK, HB (member -> coordinator): op progress */
	uint64_t next_op; /* next op sequence number the member will issue */
	uint64_t done_op; /* first op the member has not completed */

	/* VIEW, PROPOSE */
	uint64_t boundary; /* VIEW: first op of this epoch */
	uint32_t coord;	   /* coordinator's member id, CTL_NO_MEMBER for a daemon */

	/* SUSPECT */
	uint32_t peer;
	uint32_t evidence; /* enum ctl_evidence */
	uint64_t seq;	   /* the op the sender was running when it saw it (LINK, CUT) */

	/* REFUSE (and text: LEAVE) */
	uint32_t code;		 /* enum ctl_refuse */
	uint32_t hint;		 /* NOT_COORD: member id believed to coordinate, or CTL_NO_MEMBER */
	char text[CTL_TEXT_MAX]; /* REFUSE: why; LEAVE: the member's reason for leaving */

	/* HELLO (sender's info in members[0] when JOIN; its view otherwise), VIEW, PROPOSE */
	uint32_t nmembers;
	uint32_t members_cap;
	struct ctl_member_rec *members;

	/* Streams 1 .. nstreams - 1 (stream 0's numbers are the fields above). HELLO, ACK, HB:
	 * their progress; VIEW, PROPOSE: their boundaries (and each record's xstart); HELLO's
	 * records carry xstart too. @nstreams is 1 when a frame has no stream tail (0 encodes as
	 * 1); frames of other types carry none. */
	uint32_t nstreams;
	uint64_t xnext[CTL_STREAMS_MAX - 1];
	uint64_t xdone[CTL_STREAMS_MAX - 1];
	uint64_t xboundary[CTL_STREAMS_MAX - 1];
	uint32_t stream; /* SUSPECT: the stream of @seq (0: the first) */
};

/* Stream @t's next op, first op not done, and boundary in @m (t < CTL_STREAMS_MAX). */
static inline uint64_t *ctl_msg_next(struct ctl_msg *m, unsigned t)
{
	return t ? &m->xnext[t - 1] : &m->next_op;
}
static inline uint64_t *ctl_msg_done(struct ctl_msg *m, unsigned t)
{
	return t ? &m->xdone[t - 1] : &m->done_op;
}
static inline uint64_t *ctl_msg_boundary(struct ctl_msg *m, unsigned t)
{
	return t ? &m->xboundary[t - 1] : &m->boundary;
}
/* Stream @t's start in record @r. */
static inline uint64_t *ctl_rec_start(struct ctl_member_rec *r, unsigned t)
{
	return t ? &r->xstart[t - 1] : &r->start;
}

/* FNV-1a 64 of @name: the group id every frame carries. */
uint64_t ctl_group_id(const char *name);

/* Checks the header at @buf (@have bytes available). Returns 0 and sets *@total to the whole
 * frame's length; -EAGAIN when fewer than CTL_HDR_SIZE bytes are there; -EPROTO for a bad magic,
 * type or length; -EPROTONOSUPPORT for a foreign version. Never reads past @have. */
int ctl_frame_check(const void *buf, size_t have, size_t *total);

/* Decodes the complete frame @buf of @len bytes into @m (whose members/members_cap the caller
 * set). 0, -EPROTO (malformed: any field out of range, trailing bytes, unterminated string),
 * -EPROTONOSUPPORT (version) or -EMSGSIZE (more members than members_cap). */
int ctl_msg_decode(const void *buf, size_t len, struct ctl_msg *m);

/* Encodes @m into @buf of @cap bytes. Returns the frame length, or -EMSGSIZE / -EINVAL (a field
 * out of range: the same checks decode makes). */
ssize_t ctl_msg_encode(const struct ctl_msg *m, void *buf, size_t cap);

/* Short names for logs. */
const char *ctl_type_name(unsigned type);
const char *ctl_refuse_name(unsigned code);
const char *ctl_evidence_name(unsigned ev);

#endif
