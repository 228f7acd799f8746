/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal structures of the verbs transport, shared by its files only.
 *
 * One engine per process (refcounted by init/fini) owns the loaded verbs, the devices (one per
 * active HCA port that passes FTCC_IB_HCA, each with its context, protection domain and MR
 * cache), a progress thread, and every connection. A connection is a set of RC queue pairs
 * plus a side channel made of two connections of the TCP transport (one each way), which
 * carries the handshake, the rebuild of the queue pairs after a QP error while both sides
 * live, and, through the TCP transport's own heartbeats and probes, the verdict on the peer:
 * closed or dead (-ECONNRESET) or silent past FTCC_FAILURE_TIMEOUT_MS (-ETIMEDOUT).
 *
 * Data path (as NCCL's): the receiver RDMA-writes clear-to-send entries (address, size, rkey,
 * tag) into the sender's FIFO; the sender writes the payload striped over the QPs, the sizes
 * into the receiver's sizes array, and closes each QP's chain with a zero-byte write with
 * immediate (the slot's sequence number) that consumes a posted receive. Lock order: engine
 * lock, then a connection's lock.
 */
#ifndef FTCC_IB_INT_H
#define FTCC_IB_INT_H

#include <infiniband/verbs.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ftcc/ib.h"
#include "ftcc/transport.h"

#define IB_DEV_MAX 16
#define IB_SQ_DEPTH 512
#define IB_RQ_DEPTH (2 * IB_NSLOTS)
#define IB_OUTBOX 16
/* How long a request in flight may still complete after the side channel ended. */
#define IB_END_GRACE_NS 100000000ull

/* libibverbs, loaded at run time. Data-path verbs are not symbols (inline in verbs.h): they go
 * through ibv_context.ops as libibverbs' own header does. */
struct ib_verbs {
	struct ibv_device **(*get_device_list)(int *num);
	void (*free_device_list)(struct ibv_device **list);
	const char *(*get_device_name)(struct ibv_device *dev);
	struct ibv_context *(*open_device)(struct ibv_device *dev);
	int (*close_device)(struct ibv_context *ctx);
	int (*query_device)(struct ibv_context *ctx, struct ibv_device_attr *attr);
	int (*query_port)(struct ibv_context *ctx, uint8_t port, struct ibv_port_attr *attr);
	int (*query_gid)(struct ibv_context *ctx, uint8_t port, int index, union ibv_gid *gid);
	int (*query_gid_ex)(struct ibv_context *ctx, uint32_t port, uint32_t index,
			    struct ibv_gid_entry *entry, uint32_t flags, size_t size); /* opt */
	int (*get_async_event)(struct ibv_context *ctx, struct ibv_async_event *ev);
	void (*ack_async_event)(struct ibv_async_event *ev);
	const char *(*event_type_str)(enum ibv_event_type type);
	struct ibv_pd *(*alloc_pd)(struct ibv_context *ctx);
	int (*dealloc_pd)(struct ibv_pd *pd);
	struct ibv_mr *(*reg_mr)(struct ibv_pd *pd, void *addr, size_t len, int access);
	struct ibv_mr *(*reg_dmabuf_mr)(struct ibv_pd *pd, uint64_t off, size_t len, uint64_t iova,
					int fd, int access); /* optional */
	int (*dereg_mr)(struct ibv_mr *mr);
	struct ibv_cq *(*create_cq)(struct ibv_context *ctx, int cqe, void *user,
				    struct ibv_comp_channel *ch, int vec);
	int (*destroy_cq)(struct ibv_cq *cq);
	struct ibv_qp *(*create_qp)(struct ibv_pd *pd, struct ibv_qp_init_attr *attr);
	int (*modify_qp)(struct ibv_qp *qp, struct ibv_qp_attr *attr, int mask);
	int (*destroy_qp)(struct ibv_qp *qp);
	int (*fork_init)(void);
};

extern struct ib_verbs ibv;

/* A work request id: generation, kind and a value (slot sequence, or QP index for receives). */
#define IB_WR(gen, kind, v)                                                                        \
	((((uint64_t)(gen)&0xffffff) << 40) | ((uint64_t)(kind) << 32) | (uint32_t)(v))
#define IB_WR_GEN(w) ((uint32_t)((w) >> 40))
#define IB_WR_KIND(w) ((int)(((w) >> 32) & 0xff))
#define IB_WR_VAL(w) ((uint32_t)(w))
enum { IB_WR_RECV = 1, IB_WR_IMM, IB_WR_DATA, IB_WR_SIZES, IB_WR_CTS, IB_WR_PROBE };

/* Loads libibverbs (FTCC_IBVERBS_LIB, else "libibverbs.so.1") once per process and resolves
 * every verb; never unloads it. 0, or -ENOENT (no library) / -ENOSYS (a verb missing),
 * with one INFO line. Thread-safe. */
int ib_verbs_load(void);

/* A cached registration: the pages [start, start + len) and who uses them. */
struct ib_mr_entry {
	uintptr_t start;
	size_t len; /* 0 for a dma-buf registration: never shared, only found by its MR */
	int refs;
	int type; /* FTCC_PTR_HOST or FTCC_PTR_CUDA: what the pages are */
	struct ibv_mr *mr;
};

/* Where one flush reads: an address of GPU memory and its MR's rkey. */
struct ib_flush_target {
	uint64_t addr;
	uint32_t rkey;
};

/* Flushes [lo, hi] failed (their tests say -EIO). */
struct ib_flush_range {
	uint64_t lo, hi;
};
#define IB_FLUSH_FAILED 16 /* failed ranges remembered per device */

/* What GPU memory a device registers (ib_dev.gpu). */
#define IB_GPU_DMABUF 1	 /* ibv_reg_dmabuf_mr works */
#define IB_GPU_PEERMEM 2 /* a peer-memory client: ibv_reg_mr takes device pointers */

/* One usable HCA port. Owned by the engine; lives until the last fini. */
struct ib_dev {
	char name[64]; /* HCA name, e.g. "mlx5_0" */
	int port;
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	int link_layer; /* IBV_LINK_LAYER_* */
	int mtu;	/* active MTU (enum ibv_mtu) */
	uint16_t lid;
	int gid_index;
	uint8_t gid[16];
	int speed_mbps;
	char pci_path[256];
	int numa_node;
	uint64_t guid;
	_Atomic int port_down; /* IBV_EVENT_PORT_ERR seen, no PORT_ACTIVE since */
	_Atomic int fatal;     /* IBV_EVENT_DEVICE_FATAL: nothing on it works any more */
	pthread_mutex_t mr_lock;
	struct ib_mr_entry *mrs;
	int nmrs, cap_mrs;
	int gpu; /* IB_GPU_*, probed at discovery */
	/* The flush of GPU memory (gdr.c): a queue pair connected to itself, made at the first
	 * flush, reading one byte into flush_host; repaired after an error. Under flush_lock. */
	pthread_mutex_t flush_lock;
	struct ibv_cq *flush_cq;
	struct ibv_qp *flush_qp;
	struct ibv_mr *flush_mr;
	void *flush_host;		    /* a page of its own (fork-safe registration) */
	struct ib_flush_target *flush_ring; /* read id's target at id % flush_cap */
	size_t flush_cap;		    /* a power of two; grows, never refuses */
	uint64_t flush_posted, flush_sent, flush_done; /* reads asked for, on the QP, completed */
	uint64_t flush_broken_ns; /* since when its queue pair is being repaired; 0 */
	uint64_t flush_retry_ns;  /* the repair's next attempt, not before */
	struct ib_flush_range flush_failed[IB_FLUSH_FAILED]; /* reads that failed */
	unsigned int flush_nfailed;
};

/* Discovers devices into @devs (at most IB_DEV_MAX): active ports passing FTCC_IB_HCA, with
 * their GID chosen. Returns the count (0 without devices) or a negative errno. */
int ib_dev_discover(struct ib_dev *devs, int max);
/* Closes what ib_dev_discover opened (every QP, CQ and MR must be gone). */
void ib_dev_close(struct ib_dev *d);
/* Reads and acknowledges the pending async events of @d (non-blocking); logs them. */
void ib_dev_poll_events(struct ib_dev *d);
/* Cached registration of [@data, @data + @size) on @d, host memory or GPU memory (@type
 * FTCC_PTR_HOST or FTCC_PTR_CUDA); *mr on success. */
int ib_mr_get(struct ib_dev *d, void *data, size_t size, int type, struct ibv_mr **mr);
/* Whether @mr holds GPU memory: 1, 0 (host memory), -1 (not a registration of @d). */
int ib_mr_is_gpu(struct ib_dev *d, const struct ibv_mr *mr);
void ib_mr_put(struct ib_dev *d, struct ibv_mr *mr);
/* Keeps @mr (a dma-buf registration of @type memory) in @d's table so that ib_mr_put finds
 * it. */
int ib_mr_track(struct ib_dev *d, struct ibv_mr *mr, int type);
/* gdr.c: GPU memory. */
/* Finds what GPU memory @d can register (d->gpu) and readies its flush; at discovery. */
void ib_gdr_probe(struct ib_dev *d);
/* getProperties' ptrSupport of @d: host, plus CUDA and dma-buf where they work. */
int ib_gdr_ptr_support(const struct ib_dev *d);
/* Registers the GPU pages [@start, @start + @len): dma-buf, else peer memory. NULL with errno
 * (EOPNOTSUPP: neither works here). Caller holds d->mr_lock. */
struct ibv_mr *ib_gdr_reg(struct ib_dev *d, uintptr_t start, size_t len, int access);
/* Posts the flush of a receive into @data (GPU memory registered as @mr): *id to test. 0 or
 * -ENOMEM; never "not now" (a repair in progress keeps it for the new queue pair). */
int ib_gdr_flush_post(struct ib_dev *d, void *data, const struct ibv_mr *mr, uint64_t *id);
/* Whether flush @id completed (*done); 0, or -EIO when it failed (its buffer deregistered, or
 * the queue pair not repaired within the failure timeout; later flushes start afresh). */
int ib_gdr_flush_test(struct ib_dev *d, uint64_t id, int *done);
/* Destroys the flush's queue pair, CQ and MR. */
void ib_gdr_close(struct ib_dev *d);

enum ib_conn_state {
	IBC_DIAL = 1,	  /* connector: side channel forward leg connecting */
	IBC_WELCOME_WAIT, /* connector: HELLO sent, waiting for WELCOME */
	IBC_HELLO_WAIT,	  /* acceptor: waiting for HELLO */
	IBC_BACK,	  /* acceptor: connecting the back leg */
	IBC_READY_WAIT,	  /* acceptor: WELCOME sent, waiting for READY */
	IBC_READY,	  /* established (possibly rebuilding its QPs) */
	IBC_FAILED,
};

/* One clear-to-send entry as it lies in the sender's FIFO (64 bytes). */
struct ib_cts {
	uint64_t addr;
	uint64_t size;
	uint32_t rkey;
	int32_t tag;
	uint32_t nreqs;
	uint32_t pad0;
	uint64_t seq; /* slot sequence + 1: zeroed memory is never a valid entry */
	uint8_t pad[24];
};

enum ib_req_state { IBR_FREE = 0, IBR_ACTIVE, IBR_DONE };

/* One isend, irecv or iflush. Lives in its connection's arrays. */
struct ib_req {
	struct ib_conn *conn;
	int state;
	bool is_send;
	uint64_t flush_id; /* an iflush of GPU memory: the device's flush to wait for; 0 none */
	uint64_t seq;
	/* send */
	void *data;
	size_t size;
	uint32_t lkey;
	/* recv */
	int n;
	size_t sizes[FTCC_MAX_RECVS];
};

/* One FIFO slot: a receive of up to FTCC_MAX_RECVS buffers and, on the send side, the sends
 * matched to it. */
struct ib_slot {
	uint64_t seq;
	bool active;
	int nreqs;
	int matched;	   /* send: entries with a send */
	bool posted;	   /* send: fully matched, so its writes go (again) on the current QPs */
	uint32_t imm_mask; /* QPs whose closing completion came (send: signalled writes; recv:
			    * immediates), this generation; cleared when the QPs are rebuilt */
	struct ib_req *req[FTCC_MAX_RECVS]; /* send: per entry; recv: req[0] */
	struct ib_cts cts[FTCC_MAX_RECVS];  /* send: copy of the matched entries */
};

/* A queued control message on the side channel's outgoing leg. */
struct ib_outmsg {
	struct ftcc_req *req;
	uint8_t buf[IB_MSG_MAX];
	size_t len;
	uint64_t seq; /* order of queueing: messages go out in it */
	bool queued;  /* waiting for the leg or a request slot */
};

/* One connection (either side). Owned by the caller from connect/accept until close_conn. */
struct ib_conn {
	struct ftcc_conn base; /* first */
	struct ib_conn *next;  /* engine list */
	pthread_mutex_t lock;
	bool is_send;
	int state;
	_Atomic int err;  /* sticky */
	uint64_t fail_ns; /* when it failed */
	struct ib_dev *dev;
	struct ftcc_tctx tctx;
	struct ib_listen *listen; /* acceptor: where to hand it when ready */
	bool handed;		  /* acceptor: returned by accept (the caller owns it) */
	bool in_ready;		  /* acceptor: queued in listen->ready */
	bool side_err;		  /* the failure came from the side channel */
	uint64_t dial_id;	  /* connector: token kept in the caller's handle */
	uint64_t deadline_ns;	  /* handshake */
	char peer_str[96];
	/* side channel */
	struct ftcc_conn *out, *in;
	struct ftcc_listen *back_listen; /* connector: where the acceptor dials back */
	uint8_t tcp_handle[FTCC_HANDLE_SIZE];
	struct ftcc_req *rreq;
	uint8_t rbuf[IB_MSG_MAX];
	struct ib_outmsg outbox[IB_OUTBOX];
	uint64_t out_seq;
	int refuse; /* acceptor: the hello is refused with this error (sent once dialled back) */
	/* queue pairs of generation gen */
	struct ibv_cq *cq;
	struct ibv_qp *qp[IB_MAX_QPS];
	uint32_t psn[IB_MAX_QPS];
	int nqps;
	uint32_t gen;
	struct ib_port_info peer;
	bool qps_ready;		      /* both sides RTS: data may flow */
	bool own_rts;		      /* ours are RTS for gen */
	bool peer_rebuilt;	      /* the peer said its gen QPs are RTS */
	bool need_create;	      /* the rebuild has not made its QPs yet */
	uint32_t peer_gen;	      /* generation of the peer's set in c->peer */
	uint8_t qp_state[IB_MAX_QPS]; /* how far each QP got: INIT, RTR, RTS */
	bool no_tell;		      /* the peer ended it: do not tell it why */
	uint32_t warned_gen;	      /* a failing rebuild step warned in this generation */
	bool welcomed;		      /* connector: WELCOME came; its RTR/RTS may still be due */
	int misuse_errs; /* access/length error completions since the last delivered message */
	uint64_t peer_done;
	uint64_t rebuild_ns;  /* when the running rebuild started; 0 none */
	char rebuild_why[96]; /* an error completion asks for a rebuild after its batch */
	int rebuilds;
	int recv_posted[IB_MAX_QPS];
	/* control memory (registered once) */
	struct ib_cts *fifo; /* send: written by the receiver; recv: source of CTS writes */
	struct ibv_mr *fifo_mr;
	uint64_t (*sizes)[FTCC_MAX_RECVS]; /* recv: written by the sender; send: source */
	struct ibv_mr *sizes_mr;
	uint64_t remote_addr; /* send: receiver's sizes array; recv: sender's FIFO */
	uint32_t remote_rkey;
	/* requests */
	struct ib_slot slots[IB_NSLOTS];
	uint64_t head;	   /* send: next slot to match; recv: next slot to post */
	uint64_t done_seq; /* recv: first slot not complete */
	struct ib_req reqs[FTCC_MAX_REQUESTS];
	struct ib_req flushes[FTCC_MAX_REQUESTS]; /* iflush: never short of a request */
};

/* A listen endpoint: a TCP listen for the side channel and the connections it produced. */
struct ib_listen {
	struct ftcc_listen base; /* first */
	struct ib_listen *next;
	int dev;
	struct ftcc_tctx tctx;
	struct ftcc_listen *tcp;
	struct ib_conn *ready[64]; /* established, not yet accepted */
	int nready;
};

/* Process-wide state. */
struct ib_engine {
	pthread_mutex_t lock;
	int refs;
	pthread_t thread;
	bool stop;
	const struct ftcc_transport_ops *tcp;
	struct ib_dev devs[IB_DEV_MAX];
	int ndev;
	struct ib_conn *conns;
	struct ib_listen *listens;
	uint64_t next_id;
	int qps_per_conn, timeout, retry_cnt, sl, tc;
	uint64_t connect_ns, rebuild_ns;
};

extern struct ib_engine ib_eng;

extern const struct ftcc_transport_ops ib_ops;

uint64_t ib_now_ns(void);
/* conn.c */
void ib_conn_fail(struct ib_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void ib_conn_progress(struct ib_conn *c); /* side channel and timers; caller holds c->lock */
void ib_conn_free(struct ib_conn *c);
int ib_engine_get(void);
void ib_engine_put(void);
/* Queues control message @m on the side channel (sent by the progress thread). */
void ib_ctl_send(struct ib_conn *c, const struct ib_msg *m);
/* qp.c */
void ib_port_fill(const struct ib_conn *c, struct ib_port_info *pi);
int ib_qps_create(struct ib_conn *c);
int ib_qps_connect(struct ib_conn *c);
/* Tears the set down after taking its completions out; -EIO when posted receives never came
 * back (a completion may be lost). */
int ib_qps_destroy(struct ib_conn *c);
/* The rebuild's next steps (create, then connect once the peer's set is known); what fails is
 * tried again on the next tick until the rebuild's deadline. Caller holds c->lock. */
void ib_rebuild_step(struct ib_conn *c);
/* Both sides' sets of c->gen are RTS: data flows again. */
void ib_rebuild_finish(struct ib_conn *c);
int ib_recv_post(struct ib_conn *c, int q, int n);
/* Starts generation gen + 1 after a QP error: tears the QPs down (keeping what completed),
 * makes new ones and tells the peer. Caller holds c->lock. */
void ib_rebuild_start(struct ib_conn *c, const char *why);
/* data.c */
int ib_poll(struct ib_conn *c); /* drains the CQ; caller holds c->lock */
void ib_handle_wc(struct ib_conn *c, const struct ibv_wc *wc, bool draining);
int ib_slot_post(struct ib_conn *c, struct ib_slot *s);
int ib_cts_post(struct ib_conn *c, struct ib_slot *s);
/* After a rebuild: complete what the peer has, send or ask again for the rest. */
void ib_data_resume(struct ib_conn *c);
/* After a teardown: what the old QPs half delivered starts over (counters cleared). */
void ib_data_forget_partial(struct ib_conn *c);
int ib_isend(struct ftcc_conn *base, void *data, size_t size, int tag, void *mh,
	     struct ftcc_req **req);
int ib_irecv(struct ftcc_conn *base, int n, void **data, const size_t *sizes, const int *tags,
	     void **mh, struct ftcc_req **req);
int ib_test(struct ftcc_req *r, int *done, size_t *sizes);
const char *ib_wc_status_str(enum ibv_wc_status st);

#endif
