/* SPDX-License-Identifier: BSD-3-Clause */
/* Internal structures of the TCP transport, shared by its files only.
 *
 * One engine per process (refcounted by init/fini) owns an epoll progress thread, one
 * listening socket per device, and every connection. A connection is one control socket
 * (handshake, heartbeats, acks, close) plus nstreams data sockets carrying message chunks.
 * The connector is always the send side. Lock order: engine lock, then a connection's lock.
 */
#ifndef FTCC_TCP_H
#define FTCC_TCP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ftcc/tcp_dev.h"
#include "ftcc/transport.h"
#include "wire.h"

#define TCP_SEND_RING 256 /* messages in flight on a send side: 32 requests x 8 receives */
#define TCP_RECV_RING 32  /* receive requests in flight */
#define TCP_MSG_RING TCP_RESUME_WINDOW
#define TCP_CTRL_OUT 4096
/* A connection polled by its caller within this window is left to the caller. */
#define TCP_APP_POLL_NS 2000000ull

enum tcp_sock_kind { SK_WAKE = 1, SK_LISTENER, SK_PENDING, SK_CTRL, SK_DATA };

/* An fd registered with the engine's epoll; epoll data points here. */
struct tcp_sock {
	int fd;
	uint8_t kind;
	uint8_t idx;	       /* data stream index, or device index for listeners */
	bool connecting;       /* non-blocking connect still in progress */
	struct tcp_conn *conn; /* SK_CTRL, SK_DATA */
};

/* An accepted socket whose hello is not complete yet. Owned by the engine. */
struct tcp_pending {
	struct tcp_sock sk;
	uint8_t buf[TCP_HELLO_WIRE_SIZE];
	size_t got;
	uint64_t deadline_ns;
	char peer[64];
	int dev;
	struct tcp_pending *next;
};

enum tcp_req_state { REQ_FREE = 0, REQ_ACTIVE, REQ_DONE };
enum tcp_req_kind { REQ_SEND = 1, REQ_RECV, REQ_FLUSH };

/* One isend (one message) or one irecv (n buffers). Lives in its connection's ring. */
struct tcp_req {
	struct tcp_conn *conn;
	_Atomic int state;
	uint8_t kind;
	int n;
	/* send */
	void *data;
	size_t size;
	uint32_t tag;
	uint64_t seq;
	bool acked; /* the receiver has the whole message */
	bool busy;  /* the ring slot holds a message not yet acknowledged */
	bool eager; /* small message: copied at isend and reported done at once */
	/* recv */
	void *bufs[FTCC_MAX_RECVS];
	size_t caps[FTCC_MAX_RECVS];
	int tags[FTCC_MAX_RECVS];
	size_t sizes[FTCC_MAX_RECVS];
	bool slot_used[FTCC_MAX_RECVS];
	uint64_t base_seq;
	int ndone;
};

/* Receiver's view of one message in flight. */
struct tcp_rmsg {
	struct tcp_req *req; /* group it belongs to; NULL when not matched yet */
	int slot;
	uint64_t total, got;
	bool complete;
};

/* One data socket and its send/receive progress. */
struct tcp_stream {
	struct tcp_sock sk;
	bool ready; /* connected and hello fully sent / attached */
	uint8_t hello[TCP_HELLO_WIRE_SIZE];
	size_t hello_sent;
	/* send side */
	uint64_t cur_seq; /* message whose chunk (if any) is being written */
	bool have_chunk;
	uint8_t hdr[TCP_CHUNK_WIRE_SIZE];
	uint64_t chunk_off, chunk_len;
	size_t chunk_sent; /* header + payload bytes written */
	/* receive side */
	uint8_t rhdr[TCP_CHUNK_WIRE_SIZE];
	size_t rhdr_got;
	struct tcp_chunk cur;
	bool in_payload;
	uint64_t payload_got;
	bool blocked; /* chunk's message not posted yet */
};

enum tcp_conn_state {
	CS_DIAL = 1, /* sender: control socket connecting / waiting for WELCOME */
	CS_DATA,     /* data sockets connecting (sender) or joining (receiver) */
	CS_READY,
	CS_REDIAL, /* connection broken, being restored */
	CS_FAILED, /* sticky error set */
};

/* One side of a connection. Created by connect (send) or by an incoming hello (recv);
 * owned by the caller once returned, freed by the engine thread after close_conn. */
struct tcp_conn {
	struct ftcc_conn base;
	pthread_mutex_t lock;
	bool is_send;
	bool closing;  /* close_conn called; engine frees it */
	bool accepted; /* recv side handed to accept() */
	bool peer_closed;
	enum tcp_conn_state state;
	int err; /* sticky negative errno */
	int dev;
	uint64_t conn_id, comm_id, listen_id;
	uint64_t
		failure_ns; /* ftcc_tctx's: silence fails it after this if longer than the engine's */
	int quiet_loss;	    /* ftcc_tctx's: a loss is logged at INFO */
	uint64_t local_inc, peer_inc;
	uint32_t gen;
	int nstreams;
	struct tcp_wire_addr peer_addr; /* peer engine listener */
	char peer_str[80];
	int peer_rank;		   /* NCCL rank when learnt from tags, else -1 */
	uint64_t dial_id;	   /* connect() scratch token in the handle */
	struct tcp_listen *listen; /* recv side before accept */
	/* control socket */
	struct tcp_sock ctrl;
	uint8_t ctrl_out[TCP_CTRL_OUT];
	size_t ctrl_out_len;
	uint8_t ctrl_in[1024];
	size_t ctrl_in_got;
	bool ack_dirty;
	struct tcp_stream streams[TCP_MAX_STREAMS];
	/* time */
	uint64_t last_rx_ns, last_hb_ns;
	_Atomic uint64_t app_poll_ns; /* last test()/isend()/irecv() by the caller */
	uint64_t deadline_ns;	      /* dial / reconnect deadline */
	uint64_t next_try_ns;	      /* next redial or probe */
	uint64_t fault_ns;	      /* when the current outage began */
	int backoff_ms;
	int probe_fd;
	/* send side */
	struct tcp_req sreq[TCP_SEND_RING];
	uint64_t s_next;  /* next message number */
	uint64_t s_acked; /* every message below is acked */
	int chunk_min;
	/* recv side */
	struct tcp_req rreq[TCP_RECV_RING];
	uint64_t r_posted_groups;
	uint64_t r_post_seq; /* messages covered by posted receives */
	uint64_t r_cum;	     /* every message below is complete */
	struct tcp_rmsg rmsg[TCP_MSG_RING];
	struct tcp_conn *next; /* engine list */
};

/* A listen endpoint; holds connections whose handshake completed until accept(). */
struct tcp_listen {
	struct ftcc_listen base;
	uint64_t id;
	int dev;
	uint64_t comm_id, incarnation;
	uint64_t failure_ns; /* ftcc_tctx's; 0 = the engine's */
	int quiet_loss;	     /* ftcc_tctx's */
	bool closing;
	struct tcp_listen *next;
};

/* Engine: the process-wide progress thread and its objects. */
struct tcp_engine {
	pthread_mutex_t lock;
	int refs;
	int epfd;
	struct tcp_sock wake;
	pthread_t thread;
	atomic_bool stop;
	int ndev;
	struct tcp_dev devs[TCP_DEV_MAX];
	struct tcp_sock listeners[TCP_DEV_MAX];
	struct tcp_wire_addr listen_addr[TCP_DEV_MAX];
	struct tcp_listen *listens;
	struct tcp_conn *conns; /* live connections (both sides) */
	struct tcp_conn *dead;	/* closed, freed by the thread between batches */
	struct tcp_pending *pendings;
	struct tcp_pending *dead_pendings;
	/* settings, read at the first init */
	uint64_t timeout_ns, hb_ns, reconnect_ns, connect_ns;
	int nstreams, chunk_min, sockbuf;
	size_t eager_max;
};

extern struct tcp_engine tcp_eng;
extern const struct ftcc_transport_ops tcp_ops;

uint64_t tcp_now_ns(void);

/* TCP_NODELAY and TCP_USER_TIMEOUT (the failure timeout) on a new socket. */
void tcp_sock_tune(int fd);

/* Whether the caller polled @c within TCP_APP_POLL_NS of @now. */
bool tcp_app_polling(struct tcp_conn *c, uint64_t now);

/* engine.c */
int tcp_engine_get(void);
void tcp_engine_put(void);
int tcp_engine_refs(void);
void tcp_engine_wake(void);
int tcp_engine_add(struct tcp_sock *sk, uint32_t events);
void tcp_engine_del(struct tcp_sock *sk);
void tcp_engine_track(struct tcp_conn *c);
uint64_t tcp_engine_new_id(void);

/* handshake.c: incoming sockets */
void tcp_pending_accept(int dev);
void tcp_pending_progress(struct tcp_pending *p);
void tcp_pending_expire(uint64_t now);

/* conn.c: lifecycle */
struct tcp_conn *tcp_conn_alloc(bool is_send, int dev);
void tcp_conn_free(struct tcp_conn *c);
int tcp_conn_dial_start(struct tcp_conn *c);
void tcp_conn_fault(struct tcp_conn *c, int err, const char *why);
void tcp_conn_fail(struct tcp_conn *c, int err, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
void tcp_conn_timer(struct tcp_conn *c, uint64_t now);
void tcp_conn_close_sockets(struct tcp_conn *c);
void tcp_conn_attach_ctrl(struct tcp_conn *c, int fd, uint32_t gen);
int tcp_conn_attach_data(struct tcp_conn *c, int fd, int idx);
void tcp_conn_on_welcome(struct tcp_conn *c, const struct tcp_frame *f);
void tcp_conn_stream_ready(struct tcp_conn *c);

/* data.c: byte movement; all called with the connection locked */
void tcp_conn_progress(struct tcp_conn *c);
void tcp_ctrl_queue(struct tcp_conn *c, const struct tcp_frame *f);
void tcp_recv_reset_partial(struct tcp_conn *c);
void tcp_recv_resume_state(struct tcp_conn *c, struct tcp_frame *f);
void tcp_send_apply_resume(struct tcp_conn *c, const struct tcp_frame *f);

#endif
