/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs emulator's internals: a libibverbs.so.1 replacement for tests on machines without
 * RDMA hardware, with reliable-connected queue pairs between processes of one host.
 *
 * Model. Each process's emulated port is an "agent" thread with an abstract unix socket named
 * by the port's LID; RDMA writes travel as packets between agents, one stream socket per
 * (sender context, destination LID). The responder checks the packet against its queue pair
 * (state, source, PSN) and memory region (rkey, protection domain, bounds, access) before a
 * byte lands, consumes a posted receive for a write with immediate, and acknowledges; the
 * requester completes work requests in order on acknowledgement, and fails the queue pair
 * (retry exceeded, then flush) when nothing moved for timeout x (retry_cnt + 1). One lock
 * guards everything: the emulator is small, not fast.
 *
 * What differs from a real HCA (the tests must not rely on these): the emulated NIC stops
 * with its process (a SIGSTOPped responder neither acknowledges nor places data, where a real
 * HCA would do both); packets are never lost, reordered or corrupted; send, atomics, SRQs and
 * UD are not implemented (posting them returns EOPNOTSUPP), nor is RDMA read, except on a
 * queue pair connected to itself with nothing else in flight (the flush of GPU memory), where
 * it is carried out at once. A dma-buf region is the emulator's own mapping of the fd (a memfd
 * stands in for a GPU's dma-buf in tests).
 */
#ifndef FTCC_IBEMU_H
#define FTCC_IBEMU_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#define EMU_MAX_SGE 4
#define EMU_MAX_INLINE 64
#define EMU_GID_TBL 4
#define EMU_RNR_DELAY_NS 1000000ull
#define EMU_PKT_WRITE 1
#define EMU_PKT_ACK 2

/* NAK codes carried by an ACK packet. */
enum emu_ack { EMU_ACK_OK = 0, EMU_NAK_RNR = 1, EMU_NAK_ACCESS = 2, EMU_NAK_INVALID = 3 };

/* The fixed packet header; a WRITE is followed by len payload bytes. Host order: both ends are
 * processes of one host. */
struct emu_pkt {
	uint32_t type;
	uint32_t dst_qpn;
	uint32_t src_qpn;
	uint32_t psn;
	uint16_t src_lid;
	uint16_t status; /* ACK: enum emu_ack */
	uint32_t imm;	 /* WRITE: big-endian immediate as posted */
	uint32_t has_imm;
	uint32_t rkey;
	uint64_t raddr;
	uint64_t len;
};

/* One emulated device (the table ibv_get_device_list returns). */
struct emu_device {
	struct ibv_device dev; /* first: what the application sees */
	int roce;	       /* link layer Ethernet (RoCE v2 GIDs) instead of InfiniBand */
};

struct emu_link;

/* An open device: its port, LID, listening socket and async event queue. Owned by the
 * application (ibv_open_device / ibv_close_device). */
struct emu_ctx {
	struct ibv_context ctx; /* first */
	struct emu_device *edev;
	uint16_t lid;
	int listen_fd;
	int async_pipe[2]; /* [0] is ctx.async_fd */
	int port_up;
	struct emu_ctx *next;
	struct emu_link *links;
	struct emu_mr *mrs;
	/* Mappings of deregistered dma-buf regions, unmapped when the device closes: a work
	 * request still queued may point into one (sends read stale bytes there, as from any
	 * deregistered region here, instead of crashing the emulator). */
	struct emu_dead {
		void *map;
		size_t len;
		struct emu_dead *next;
	} * dead;
	struct emu_qp *qps;
	uint32_t next_qpn;
	struct {
		enum ibv_event_type type;
		void *elem;
	} events[64];
	int nevents;
	/* receive completions that become visible on the agent's next round */
	struct {
		struct emu_cq *cq;
		struct ibv_wc wc;
	} * late;
	int nlate, cap_late;
};

struct emu_pd {
	struct ibv_pd pd; /* first */
};

/* A memory region; keys are unique per context. Addresses in work requests are the MR's
 * (iova for a dma-buf region); host = address + shift. */
struct emu_mr {
	struct ibv_mr mr; /* first */
	int access;
	intptr_t shift; /* 0, except for a dma-buf region: where the emulator mapped the fd */
	void *map;	/* that mapping (munmap at deregistration), or NULL */
	size_t map_len;
	struct emu_mr *next;
};

/* A completion queue: a ring of cqe entries; an overrun breaks it for good. */
struct emu_cq {
	struct ibv_cq cq; /* first */
	struct ibv_wc *ring;
	int cap, head, count;
	int broken;
};

/* One posted send work request, kept until acknowledged (or flushed). */
struct emu_swr {
	uint64_t wr_id;
	enum ibv_wr_opcode opcode;
	int signaled;
	uint32_t psn;
	uint64_t raddr;
	uint32_t rkey, imm;
	int nsge;
	struct ibv_sge sge[EMU_MAX_SGE];
	uint8_t inline_buf[EMU_MAX_INLINE];
	int is_inline;
	uint64_t len;
	int bad_lkey; /* fails with LOC_PROT_ERR when it reaches the wire */
	uint64_t post_ns;
};

/* A reliable-connected queue pair. */
struct emu_qp {
	struct ibv_qp qp; /* first */
	struct emu_qp *next;
	struct ibv_qp_cap cap;
	int sq_sig_all;
	/* attributes from modify_qp */
	int port, access, path_mtu, timeout, retry_cnt, rnr_retry, min_rnr_timer, max_rd_atomic;
	uint32_t dest_qpn, rq_psn, sq_psn;
	uint16_t dlid; /* peer LID (RoCE: decoded from the destination GID) */
	/* send queue: swr[0..nswr) in order; [0..nsent) are on the wire */
	struct emu_swr *swr;
	int nswr, nsent;
	uint32_t next_psn;
	uint64_t progress_ns; /* last ACK or byte moved for this QP */
	uint64_t rnr_until_ns;
	int rnr_left;
	/* receive queue */
	uint64_t *rwr;
	int rhead, rcount;
	int unsig_acked; /* acknowledged unsignalled WRs still holding send-queue slots */
};

/* One stream socket to or from a peer agent. */
struct emu_link {
	struct emu_link *next;
	struct emu_ctx *ctx;
	int fd;
	int outgoing;
	int dead; /* socket closed; freed by the sweep (an outgoing one after retry_ns) */
	uint16_t peer_lid;
	uint64_t retry_ns; /* outgoing link: next connect attempt after a refusal */
	int peer_pid;	   /* the process at the other end (SO_PEERCRED), 0 until known */
	int cut_out;	   /* IBEMU_CUT_DIR names a cut from here to it: nothing is written */
	uint64_t cut_ns;   /* when cut_out was last looked at */
	/* receive side */
	struct emu_pkt in;
	size_t in_got;
	uint64_t in_left; /* payload bytes still to read */
	uint8_t *in_dst;  /* where they go, or NULL to discard */
	int in_status;	  /* ACK to send when the payload is in */
	struct emu_qp *in_qp;
	int in_imm;
	/* send side: one packet at a time */
	struct emu_pkt out;
	int out_active;	   /* a packet (header, then payload) is partly written */
	uint32_t last_qpn; /* round robin among the QPs that send on this link */
	size_t out_hdr_done;
	struct emu_qp *out_qp; /* WRITE in flight for this QP, or NULL */
	uint64_t out_done;     /* payload bytes written */
	struct emu_pkt *acks;
	int nacks, cap_acks;
};

/* Process-wide state. */
struct emu_state {
	pthread_mutex_t lock;
	pthread_t agent;
	int agent_running;
	unsigned long agent_gen; /* an agent runs while this is the value it started with */
	int wake[2];
	struct emu_ctx *ctxs;
	struct emu_device devs[4];
	struct ibv_device *list[5];
	int ndev;
	char fabric[32];
	uint64_t blackout_until_ns;
	uint64_t cut_check_ns; /* IBEMU_CUT_DIR last looked at */
};

extern struct emu_state emu;

/* The test hooks (see ibemu_fault.c); tests reach them with dlsym. */
int ftcc_ibemu_inject(const char *what);
/* RDMA reads carried out so far in this process (the flushes of GPU memory). */
unsigned long ftcc_ibemu_reads(void);
void emu_inject_locked(const char *what);
/* IBEMU_CUT_DIR: a cut of this process's port (a blackout while it lasts), checked every 10 ms
 * by the agent; whether link @l is cut from this side now (nothing may be written on it). */
void emu_cut_check(uint64_t now);
int emu_link_cut(struct emu_link *l, uint64_t now);

/* The port's attributes; caller holds emu.lock. */
void emu_port_attr(struct emu_ctx *c, struct ibv_port_attr *a);
uint64_t emu_now_ns(void);
void emu_wake(void);
int emu_agent_start(void);
/* Stops and joins the agent when no context is open. Caller does not hold emu.lock. */
void emu_agent_stop_if_idle(void);
void emu_ctx_async(struct emu_ctx *c, enum ibv_event_type type, void *elem);
/* Queues a completion on @cq; an overrun breaks the CQ and raises IBV_EVENT_CQ_ERR. */
void emu_cq_push(struct emu_cq *cq, const struct ibv_wc *wc);
/* Queues @wc for @cq until the agent's next round (emu_late_flush); caller holds emu.lock. */
void emu_late_push(struct emu_ctx *c, struct emu_cq *cq, const struct ibv_wc *wc);
void emu_late_flush(struct emu_ctx *c);
/* Makes QP @qpn's waiting completions visible now. */
void emu_late_flush_qp(struct emu_ctx *c, uint32_t qpn);
/* Drops the waiting completions of @cq, or of QP number @qpn (a destroyed object's). */
void emu_late_forget(struct emu_ctx *c, const struct emu_cq *cq, uint32_t qpn);
/* Moves @qp to ERR: the first send WR completes with @head_status (when not SUCCESS), every
 * other posted WR with IBV_WC_WR_FLUSH_ERR. */
void emu_qp_fail(struct emu_qp *qp, enum ibv_wc_status head_status);
/* Completes the send WRs of @qp with PSN up to @psn. */
void emu_qp_ack(struct emu_qp *qp, uint32_t psn);
int emu_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad);
int emu_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad);
struct emu_mr *emu_mr_by_lkey(struct emu_ctx *c, uint32_t lkey);
struct emu_mr *emu_mr_by_rkey(struct emu_ctx *c, uint32_t rkey);
struct emu_qp *emu_qp_by_num(struct emu_ctx *c, uint32_t qpn);
int emu_listen(struct emu_ctx *c);
void emu_links_close(struct emu_ctx *c);
/* Drops every link that is sending a packet of @qp (the stream would lose its framing). */
void emu_links_forget_qp(struct emu_qp *qp);
/* Whether 24-bit PSN @a is at or before @b. */
static inline int emu_psn_le(uint32_t a, uint32_t b)
{
	return ((b - a) & 0xffffffu) < 0x800000u;
}

#endif
