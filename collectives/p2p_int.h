/* SPDX-License-Identifier: BSD-3-Clause */
/* Private state of the point-to-point layer (p2p.c: requests, matching and the protocol's
 * messages; p2p_run.c: the progress thread, the membership and the data plane).
 *
 * The protocol, per ordered pair of members, over a data plane of its own (dp.h; its frames'
 * tags say what a frame is, not where it goes):
 *
 *   sender                                receiver
 *   RTS(id, tag, length, low) ----------> a message waits for a receive (no data moves)
 *                                         a receive takes it: gen += 1
 *         <----------------------------- CTS(id, gen)
 *   DATA(id, gen) --------------------->  into the receive's buffer, when gen is current
 *         <----------------------------- ACK(id, flags): the send ends
 *
 * Ids count the sender's messages to that receiver from 0 (per incarnation of both). Every
 * message stays with its sender until the ACK, and every frame is sent again, or asked for
 * again, after the link between them broke: the sender repeats the RTS of each message not
 * acknowledged; the receiver answers an RTS it holds taken with a new CTS (a new gen, so data
 * of an older one is dropped), and one it delivered with its ACK again (it remembers the ids it
 * delivered above the sender's lowest open id, @low). A receive that is cancelled after its CTS
 * bumps the gen too: data still on the way is dropped, and the message waits for another
 * receive. A sender withdraws a message whose data never left with WD(id), answered by ACK
 * with P2P_ACK_WD. Frames: tag.seq = id, tag.phase = the kind, tag.epoch = P2P_MINE for a frame
 * about the sender's own message (RTS, DATA, WD) and P2P_YOURS for one about the receiver's
 * (CTS, ACK), tag.step = gen for DATA, a counter that keeps control frames distinct otherwise.
 *
 * Connections. The data plane lets either member connect (dp_cfg.either_connects). A peer is in
 * a progress call only while this member has frames for it or a connection with it exists
 * (peer_wanted()): the frames make the connection, and the peek on every connection held reads
 * what the peer sends and sees the connection break. A member that nothing is sent to or from
 * is never connected to. An attempt waiting to be retried (dp_linked() 0) is made again only
 * while there are frames for it.
 */
#ifndef FTCC_P2P_INT_H
#define FTCC_P2P_INT_H

#include <pthread.h>
#include <stdint.h>

#include "engine.h"
#include "p2p.h"

enum { P2P_RTS = 1, P2P_CTS = 2, P2P_DATA = 3, P2P_ACK = 4, P2P_WD = 5 };
enum { P2P_MINE = 0, P2P_YOURS = 1 };
#define P2P_ACK_WD 1u	   /* the ACK of a withdrawn message */
#define P2P_ACK_REFUSED 2u /* the ACK of a message its receiver will not take */
#define P2P_CTL_MAX 24	   /* payload bytes of a control frame at most, RTS data aside */
#define P2P_EAGER 4096	   /* a message up to this long travels inside its RTS */
#define P2P_PEEK_MAX (P2P_CTL_MAX + P2P_EAGER) /* frames read whole by the peek */
#define P2P_EAGER_CAP (4u << 20) /* bytes of RTS data kept for messages no receive took */
#define P2P_WAIT_MS 100		 /* longest wait of the progress thread between looks */
#define P2P_HOLD_MS 100		 /* a peer the data plane cannot reach sits out this long */
#define P2P_FLUSH_MS 200	 /* a member leaving on purpose waits this long for its frames */
#define P2P_REANNOUNCE_NS (5ll * 1000000000) /* a message unanswered this long goes again */
#define P2P_GROUP_SALT 0x7032707032707032ull /* its HELLOs are not the engine's */

/* A message this member sends to another, kept until the receiver's ACK or the peer's loss. */
struct p2p_out {
	struct p2p_out *next; /* the peer's, in id order */
	uint64_t id, tag;
	const void *buf;
	size_t len;
	struct ftcc_request *req; /* NULL once the request ended (withdrawn) */
	int announce;		  /* its RTS (its WD once withdrawn) is due: 1, or 2 without data */
	int64_t ann_ns;		  /* when it was last announced */
	int withdrawn;
	int data_ever;	    /* data of it went out (a DATA frame done or begun) */
	int data_posted;    /* @dx is in the transfers */
	int acked;	    /* its ACK came while its data was going out */
	uint32_t ack_flags; /* and said this */
	uint32_t want_gen;  /* the newest CTS */
	uint32_t sent_gen;  /* DATA posted for it */
	struct dp_xfer dx;
};

/* A message announced to this member (RTS), or sent to itself. */
struct p2p_in {
	struct p2p_in *next; /* arrival order, every sender's */
	uint32_t from;
	uint64_t id, tag, len;
	struct ftcc_request *req; /* the receive that took it, or NULL */
	uint32_t gen;
	struct ftcc_request *self; /* a message to self: its send */
	uint8_t *eager;		   /* its data, when its RTS carried it and it was kept */
};

/* A control frame to send. */
struct p2p_ctl {
	struct p2p_ctl *next;
	struct dp_xfer x;
	uint8_t pl[]; /* its payload */
};

/* State healing (p2p_state.c): the library's tags, above FTCC_TAG_MAX. A fetch sends REQ
 * (nonce, bytes, name) to a source, which answers OK(nonce) with the state or NO(nonce). */
#define P2P_TAG_REQ (FTCC_TAG_MAX + 2)
#define P2P_TAG_OK(n) (FTCC_TAG_MAX + 1 + (2ull << 56) + ((n) & ((1ull << 56) - 1)))
#define P2P_TAG_NO(n) (FTCC_TAG_MAX + 1 + (3ull << 56) + ((n) & ((1ull << 56) - 1)))
#define P2P_NAME_MAX 64
#define P2P_REQ_BYTES (16 + P2P_NAME_MAX)
#define P2P_REFUSE_MAX 64

/* State this member serves. */
struct p2p_offer {
	struct p2p_offer *next;
	char name[P2P_NAME_MAX];
	const void *buf;
	size_t bytes;
	uint32_t inflight; /* sends of it not ended */
	int gone;	   /* withdrawn: no new sends */
};

/* An answer being sent. */
struct p2p_serve {
	struct p2p_serve *next;
	struct ftcc_request *send;
	struct p2p_offer *offer; /* NULL: a NO */
	uint64_t no;
};

/* A fetch in progress. */
struct p2p_fetch {
	struct p2p_fetch *next;
	struct ftcc_request *req; /* the caller's */
	char name[P2P_NAME_MAX];
	uint32_t src; /* the source asked now, UINT32_MAX: none yet */
	uint64_t nonce;
	int refused; /* a source said it does not offer it (so) */
	uint8_t tried[FTCC_MAX_MEMBERS / 8];
	struct ftcc_request *ask, *ok, *no;
	int64_t asked_ns; /* when the source was asked */
	uint64_t nobuf;
};

/* The answer of a source to a fetch given up: one message from @from, with either tag, which
 * the receiver refuses when it comes. */
struct p2p_refuse {
	uint32_t from;
	uint64_t tag[2];
};

struct p2p_done {
	uint64_t id;
	uint32_t flags;
};

/* Another member of the newest view. */
struct p2p_peer {
	uint32_t id;
	uint64_t inc;
	char addr[DP_ADDR_MAX]; /* "" when it published none (p2p off there) */
	uint64_t next_id;	/* of the next message to it */
	struct p2p_out *out, **out_tail;
	struct p2p_ctl *ctl, **ctl_tail;
	uint32_t ctr;
	uint64_t rx_low; /* its ids below were delivered or withdrawn */
	struct p2p_done *done;
	uint32_t ndone, done_cap;
	struct dp_xfer pk; /* the peek, in every progress call (dir 0: to set up afresh) */
	struct dp_xfer rx; /* the receive of the frame it showed (rx_frame) */
	int rx_frame;
	struct p2p_in *rx_in; /* rx takes the DATA of this message */
	uint8_t pkbuf[P2P_PEEK_MAX];
	int64_t hold_ns; /* unreachable: out of the transfers until then */
	int held_logged;
	int down;	/* its link broke and nothing came from it since */
	uint32_t flags; /* in the view (CTL_MF_CONTRIB: it holds the group's state) */
};

struct p2p {
	struct ftcc_comm *c;
	struct dp *dp;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t thread;
	int started;
	int stop;    /* under mu */
	int running; /* the thread runs (under mu) */
	int failed;  /* sticky: every request ends with it (FTCC_ERR_*) */
	unsigned gen;
	int synced;
	uint64_t epoch;
	struct p2p_peer **peers; /* sorted by id */
	uint32_t npeers;
	struct ftcc_request *recvs;		  /* receives not ended, post order (pnext) */
	struct ftcc_request *sends, **sends_tail; /* sends not yet given to their peer */
	struct p2p_in *in, **in_tail;
	int check_recvs;    /* receives from a named source to look at */
	uint32_t nlinked;   /* peers with a connection, at the last build() (p2p_links) */
	size_t eager_bytes; /* RTS data kept (struct p2p_in.eager) */
	/* state healing (p2p_state.c) */
	struct p2p_offer *offers;
	struct p2p_serve *serving;
	struct p2p_fetch *fetches;
	struct ftcc_request *srv_req; /* the receive of REQs (every member answers them) */
	uint8_t srv_buf[P2P_REQ_BYTES];
	uint64_t nonce;
	struct ftcc_request **orphans; /* the library's requests to free once they end */
	uint32_t norphans, orphans_cap;
	struct p2p_refuse refuse[P2P_REFUSE_MAX];
	uint32_t nrefuse;
	/* the thread's transfers of one progress call, and where each came from */
	struct dp_xfer *x;
	struct dp_xfer **xsrc;
	struct ftcc_request **xbusy;
	int xcap, nbusy;
};

/* p2p.c */
int64_t p2p_now_ns(void);
struct p2p_peer *p2p_peer_find(struct p2p *p, uint32_t id);
/* Ends @r with @rc (under mu). */
void p2p_end(struct p2p *p, struct ftcc_request *r, int rc);
/* Queues a control frame to @pe: @len bytes of @pl, then @len2 of @pl2. 0 or -ENOMEM. */
int p2p_ctl_queue(struct p2p_peer *pe, uint64_t epoch, uint32_t phase, uint64_t id,
		  const uint8_t *pl, size_t len, const void *pl2, size_t len2);
/* The peek of @pe completed: acts on the frame it read whole, or sets up @pe->rx to take the
 * frame it showed. */
void p2p_on_peek(struct p2p *p, struct p2p_peer *pe);
/* @pe->rx took its frame: acts on it. */
void p2p_on_frame(struct p2p *p, struct p2p_peer *pe);
/* Send @o's DATA frame to @pe went out whole (an ACK that came meanwhile acts now). */
void p2p_out_sent(struct p2p *p, struct p2p_peer *pe, struct p2p_out *o);
/* A receive @r no longer takes message @m: @m waits for another receive. */
void p2p_unbind(struct p2p *p, struct p2p_in *m);
/* Gives message @m to the first receive that takes it. */
void p2p_match_in(struct p2p *p, struct p2p_in *m);
/* Gives receive @r the first waiting message it takes. */
void p2p_match_recv(struct p2p *p, struct ftcc_request *r);
/* Carries out the cancel of @r (from the thread: @r's buffer may be in its transfers). */
void p2p_cancel_now(struct p2p *p, struct ftcc_request *r, int in_thread);
/* Frees @m (unlinked from the arrival list). */
void p2p_in_free(struct p2p *p, struct p2p_in *m);

/* p2p_api.c: a request of the caller's (on the comm's live list), and the posting of a send
 * or receive whose fields are set (under mu; the library's own requests too). */
struct ftcc_request *p2p_req_new(struct ftcc_comm *c, enum eng_kind kind);
void p2p_post_send(struct p2p *p, struct ftcc_request *r);
void p2p_post_recv(struct p2p *p, struct ftcc_request *r);

/* p2p_state.c: offers served, fetches moved on (the thread, each pass); a cancelled fetch;
 * every fetch ended with @rc (a final state); everything freed. Under mu. */
void p2p_state_step(struct p2p *p);
void p2p_state_cancel(struct p2p *p, struct ftcc_request *r);
void p2p_state_end(struct p2p *p, int rc);
void p2p_state_free(struct p2p *p);
/* p2p.c: the one message from @from with tag @a or @b is refused (now, or when it comes). */
void p2p_refuse(struct p2p *p, uint32_t from, uint64_t a, uint64_t b);
/* Removes entry @i of the refusal list, keeping the order (oldest first). */
void p2p_refuse_del(struct p2p *p, uint32_t i);

/* p2p_run.c */
void *p2p_main(void *arg);
/* Everything @pe holds is dropped: its requests end with @rc. */
void p2p_peer_drop(struct p2p *p, struct p2p_peer *pe, int rc);

#endif
