/* SPDX-License-Identifier: BSD-3-Clause */
/* The transport ops table: bytes between two endpoints.
 *
 * A transport (tcp/, later ib/) fills the ops it supports into a const table; registration
 * fills the rest with stubs returning -EOPNOTSUPP, so callers never test for NULL. Knows
 * nothing of collectives, membership or NCCL types.
 *
 * Conventions for every op:
 *   - return 0 or a negative errno; "not yet" is *out = NULL or *done = 0, never an error;
 *   - a peer that is gone is -ECONNRESET (evidence of death: reset, refused reconnect, close)
 *     or -ETIMEDOUT (silent past FTCC_FAILURE_TIMEOUT_MS); both are sticky on the connection;
 *   - misuse (bad handle, truncation, too many requests) is -EINVAL, -EMSGSIZE or -EBADMSG;
 *   - nothing blocks, except where an op says so.
 */
#ifndef FTCC_TRANSPORT_H
#define FTCC_TRANSPORT_H

#include <stddef.h>
#include <stdint.h>

/* Size of the opaque connection handle exchanged out of band (NCCL_NET_HANDLE_MAXSIZE). */
#define FTCC_HANDLE_SIZE 128
/* Bytes of a handle that listen leaves zero and connect keeps its token of the attempt in (see
 * connect). A handle that came over the network has them zeroed before its first connect: a
 * token a peer wrote there must not name another caller's attempt. */
#define FTCC_HANDLE_SCRATCH_OFF 96
#define FTCC_HANDLE_SCRATCH_LEN 16
/* Most requests one connection accepts in flight (NCCL_NET_MAX_REQUESTS). */
#define FTCC_MAX_REQUESTS 32
/* Most buffers in one multi-receive. */
#define FTCC_MAX_RECVS 8

/* Memory types of reg_mr (values are NCCL's NCCL_PTR_* bits). */
#define FTCC_PTR_HOST 0x1
#define FTCC_PTR_CUDA 0x2
#define FTCC_PTR_DMABUF 0x4

/* What a device offers; filled by get_properties. Strings are owned by the transport and
 * live until the transport's last fini. */
struct ftcc_dev_props {
	const char *name;     /* unique device name, e.g. the interface name */
	const char *pci_path; /* sysfs PCI path, or NULL for a virtual device */
	uint64_t guid;
	int ptr_support; /* FTCC_PTR_* bits */
	int reg_is_global;
	int force_flush;
	int speed_mbps;
	int port;
	float latency_us;
	int max_comms;
	int max_recvs;
	size_t max_p2p_bytes;
	size_t max_coll_bytes;
	int numa_node; /* -1 when unknown */
};

/* Per-communicator context: who is connecting. Owned by the caller (plugin ctx), must
 * outlive every listen/connect made with it. */
struct ftcc_tctx {
	uint64_t comm_id;     /* NCCL communicator hash; 0 when unknown (old ABIs) */
	uint64_t incarnation; /* random per ctx: a restarted process never reuses one */
	/* How long a connected peer may stay silent (no heartbeat, no data) before the connection
	 * fails, where longer than FTCC_FAILURE_TIMEOUT_MS (0: that); repairs, TCP's reconnect
	 * window and its kernel timeout keep the process-wide bound. A connection accepted on a
	 * listen takes the listen's; the ib transport gives its side channel its own. */
	uint64_t failure_ns;
	/* 1: a lost peer is logged at INFO, not WARN: the caller's membership says what a loss
	 * means and alerts itself (the allreduce engine's data plane: a member's normal exit
	 * closes its connections while the others' views still name it). */
	int quiet_loss;
};

struct ftcc_transport_ops;

/* Base of a transport's listen object; the transport's struct embeds it first. */
struct ftcc_listen {
	const struct ftcc_transport_ops *ops;
};

/* Base of a transport's connection (a send or a receive side); embedded first. */
struct ftcc_conn {
	const struct ftcc_transport_ops *ops;
};

/* Opaque request; owned by the connection, recycled after test() reports done. */
struct ftcc_req;

struct ftcc_transport_ops {
	const char *name;
	/* Takes a reference on the transport (starts its progress thread on the first). May
	 * block briefly (device discovery). */
	int (*init)(void);
	/* Drops the reference; the last one stops every thread and frees every object. */
	void (*fini)(void);
	int (*devices)(int *ndev);
	int (*get_properties)(int dev, struct ftcc_dev_props *props);
	/* Opens a listen endpoint on @dev and writes its FTCC_HANDLE_SIZE-byte handle. */
	int (*listen)(const struct ftcc_tctx *ctx, int dev, void *handle, struct ftcc_listen **out);
	/* Non-blocking connect to @handle; *out stays NULL until established. The caller passes
	 * the same FTCC_HANDLE_SIZE buffer on every poll: the transport keeps a token of the
	 * attempt in bytes it does not use for the address (NCCL allows this). */
	int (*connect)(const struct ftcc_tctx *ctx, int dev, void *handle, struct ftcc_conn **out);
	/* Non-blocking accept of one connection on @l; *out NULL until one is established. */
	int (*accept)(struct ftcc_listen *l, struct ftcc_conn **out);
	int (*reg_mr)(struct ftcc_conn *c, void *data, size_t size, int type, void **mh);
	int (*reg_mr_dmabuf)(struct ftcc_conn *c, void *data, size_t size, int type,
			     uint64_t offset, int fd, void **mh);
	int (*dereg_mr)(struct ftcc_conn *c, void *mh);
	/* Posts a send of @size bytes from @data (not copied: must stay valid until done).
	 * *req NULL means "cannot post now, retry". */
	int (*isend)(struct ftcc_conn *c, void *data, size_t size, int tag, void *mh,
		     struct ftcc_req **req);
	/* Posts one receive of @n buffers; messages fill them by tag, in posting order. */
	int (*irecv)(struct ftcc_conn *c, int n, void **data, const size_t *sizes, const int *tags,
		     void **mh, struct ftcc_req **req);
	int (*iflush)(struct ftcc_conn *c, int n, void **data, const int *sizes, void **mh,
		      struct ftcc_req **req);
	/* Polls @r. On done, @sizes (if not NULL) gets the received size of each buffer (one
	 * entry for a send) and the request is recycled. */
	int (*test)(struct ftcc_req *r, int *done, size_t *sizes);
	/* Closes either side; never waits for the peer; frees requests still in flight. */
	int (*close_conn)(struct ftcc_conn *c);
	int (*close_listen)(struct ftcc_listen *l);
	/* Writes a short description of the peer ("127.0.0.1:4000 rank 3") for log lines. */
	int (*describe_peer)(struct ftcc_conn *c, char *buf, size_t len);
};

/* Returns a registered transport by name ("tcp"), or NULL. Tables are static. */
const struct ftcc_transport_ops *ftcc_transport_get(const char *name);

/* The transport FTCC_TRANSPORT names: tcp, ib, or (auto) ib when it finds an active HCA port
 * and tcp otherwise, as NCCL prefers its IB transport to sockets. A forced ib without a port is
 * an error (one WARN, NULL), not a quiet fallback. With @held, a transport it had to start to
 * look (ib) is returned with that reference kept (*@held 1: the caller's to fini); otherwise the
 * caller inits what it gets. Not thread-safe against itself. */
const struct ftcc_transport_ops *ftcc_transport_pick(int *held);

/* Copies @src into @dst, replacing every NULL op with a -EOPNOTSUPP stub. */
void ftcc_transport_fill_stubs(struct ftcc_transport_ops *dst,
			       const struct ftcc_transport_ops *src);

#endif
