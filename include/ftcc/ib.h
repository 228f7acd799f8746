/* SPDX-License-Identifier: BSD-3-Clause */
/* The InfiniBand / RoCE verbs transport's pure pieces, exposed for unit tests: the HCA filter,
 * GID selection, the handle and control-message codec, queue-pair attribute builders and
 * the MR cache's page math. Nothing here calls a verb or needs libibverbs at run time.
 *
 * The transport itself (transport/ib/) registers as "ib" when built with the verbs headers;
 * libibverbs is loaded with dlopen at its first init, never linked.
 */
#ifndef FTCC_IB_H
#define FTCC_IB_H

#include <stddef.h>
#include <stdint.h>

#define IB_MAX_QPS 16	 /* FTCC_IB_QPS_PER_CONN's ceiling */
#define IB_NSLOTS 32	 /* receive slots in flight per connection (FTCC_MAX_REQUESTS) */
#define IB_CTS_SIZE 64	 /* one clear-to-send entry */
#define IB_MSG_MAX 512	 /* largest control message */
#define IB_HANDLE_TCP 64 /* bytes of the side channel's TCP handle at the start of ours */

/* --- HCA filter (FTCC_IB_HCA, the syntax of NCCL_IB_HCA) ---------------------------------- */

/* Whether port @port of device @dev passes @filter (1 or 0). Syntax: comma-separated entries
 * "name[:port]"; a leading '^' makes the list exclusive, a leading '=' (after '^' if both)
 * makes names exact instead of prefixes; an entry without a port matches every port. NULL or
 * blank: everything passes. Pure function. */
int ib_hca_match(const char *filter, const char *dev, int port);

/* --- GID selection ------------------------------------------------------------------------- */

enum ib_gid_type { IB_GID_IB = 0, IB_GID_ROCE_V1 = 1, IB_GID_ROCE_V2 = 2 };

/* One GID table entry as the device reports it. */
struct ib_gid_info {
	uint8_t raw[16];
	int type;  /* enum ib_gid_type; -1 when unknown */
	int valid; /* the entry could be read */
};

/* Chooses the GID index for a RoCE port from @tbl (@n entries): a non-zero, non-link-local
 * RoCE v2 GID, IPv4-mapped first (as NCCL_IB_ADDR_FAMILY's default), then any global v2, then
 * any global v1, then a link-local v2. Returns the index, or -ENOENT when none is usable.
 * Pure function. */
int ib_gid_select(const struct ib_gid_info *tbl, int n);
/* Whether @raw is all zero / link-local (fe80::/10) / IPv4-mapped (::ffff:a.b.c.d). */
int ib_gid_is_zero(const uint8_t *raw);
int ib_gid_is_link_local(const uint8_t *raw);
int ib_gid_is_v4mapped(const uint8_t *raw);

/* --- handle and control messages ------------------------------------------------------------ */

/* What one side tells the other about its port and queue pairs. */
struct ib_port_info {
	uint16_t lid;
	uint8_t link_layer; /* 1 InfiniBand, 2 Ethernet (IBV_LINK_LAYER_*) */
	uint8_t mtu;	    /* active MTU, enum ibv_mtu */
	uint8_t gid[16];
	uint8_t nqps;
	uint32_t qpn[IB_MAX_QPS];
	uint32_t psn[IB_MAX_QPS];
};

enum ib_msg_type {
	IB_MSG_HELLO = 1,   /* connector -> acceptor: back channel, QPs, CTS FIFO */
	IB_MSG_WELCOME = 2, /* acceptor -> connector: QPs (already RTS), sizes array */
	IB_MSG_READY = 3,   /* connector -> acceptor: RTS; the receiver may write CTS */
	IB_MSG_REBUILD = 4, /* either way: new QPs of generation @gen */
	IB_MSG_REBUILT = 5, /* either way: my QPs of @gen are RTS; where I stand */
	IB_MSG_REFUSE = 6,  /* acceptor -> connector: no such listen or bad hello */
	IB_MSG_ERROR = 7,   /* either way: my side failed the connection with @status */
};

/* One control message. Fields a type does not use are zero. */
struct ib_msg {
	uint16_t type;
	uint32_t gen;
	uint8_t back_handle[IB_HANDLE_TCP]; /* HELLO: the connector's back-channel TCP handle */
	struct ib_port_info port;	    /* HELLO, WELCOME, REBUILD */
	uint64_t addr;			    /* HELLO: CTS FIFO; WELCOME: sizes array */
	uint32_t rkey;
	uint64_t done_seq; /* REBUILT: receiver: first receive slot not complete */
	int32_t status;	   /* REFUSE, ERROR: negative errno */
};

/* Encodes @m into @buf (IB_MSG_MAX bytes, little-endian, versioned); returns its length. */
size_t ib_msg_encode(const struct ib_msg *m, uint8_t *buf);
/* Decodes @len bytes; 0, -EBADMSG (garbage, bad counts), -EPROTO (other version). */
int ib_msg_decode(const uint8_t *buf, size_t len, struct ib_msg *m);

/* The 128-byte handle: the side channel's TCP handle (IB_HANDLE_TCP bytes), then our magic
 * and version at 64, the connector's scratch from 96. */
void ib_handle_stamp(uint8_t *handle);
/* 0 when @handle carries our magic and version, else -EINVAL (-EPROTO: other version). */
int ib_handle_check(const uint8_t *handle);

/* --- queue-pair attributes ---------------------------------------------------------------- */

/* Everything the INIT, RTR and RTS transitions of one RC QP need, from both sides. */
struct ib_qp_params {
	int port;
	int link_layer; /* 1 IB, 2 Ethernet */
	int local_mtu, remote_mtu;
	uint16_t remote_lid;
	uint8_t local_gid[16], remote_gid[16];
	int gid_index;
	uint32_t remote_qpn, local_psn, remote_psn;
	int sl, tc, timeout, retry_cnt;
};

struct ibv_qp_attr;
/* Fill @attr (zeroed first) and return the ibv_modify_qp mask for each transition, as
 * ibv_modify_qp(3) requires for RC. RTR: path MTU is the smaller of both; IB addresses by
 * LID with a GRH only across subnets, RoCE always by GID with a GRH. Pure functions. */
int ib_qp_init_attr(const struct ib_qp_params *p, struct ibv_qp_attr *attr);
int ib_qp_rtr_attr(const struct ib_qp_params *p, struct ibv_qp_attr *attr);
int ib_qp_rts_attr(const struct ib_qp_params *p, struct ibv_qp_attr *attr);

/* --- MR cache ------------------------------------------------------------------------------ */

/* The page-aligned range a registration of [@addr, @addr + @size) covers: *start and *len,
 * both multiples of @page (a power of two). @size 0 still covers the page of @addr. */
void ib_mr_pages(uintptr_t addr, size_t size, size_t page, uintptr_t *start, size_t *len);

/* --- GPU memory ---------------------------------------------------------------------------- */

/* Whether a peer-memory client for NVIDIA GPUs is loaded (nvidia-peermem, or the older
 * nv_peer_mem), so that ibv_reg_mr takes a device pointer: one of the files NCCL looks for
 * exists under @root (NULL: "", the real /sys). 1 or 0. */
int ib_gdr_peermem_at(const char *root);

/* --- speeds -------------------------------------------------------------------------------- */

/* Link speed in Mb/s from ibv_port_attr's active_width and active_speed codes; 0 unknown. */
int ib_port_speed_mbps(int active_width, int active_speed);

#endif
