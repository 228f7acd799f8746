/* SPDX-License-Identifier: BSD-3-Clause */
/* The collComm of the CollNet plug-in, shared by collnet.c (the tables) and collnet_status.c
 * (what the node tells about its group: the WARN for a lost node, the status file). plugin/
 * only.
 */
#ifndef FTCC_PLUGIN_COLLNET_COMM_H
#define FTCC_PLUGIN_COLLNET_COMM_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ftcc.h"
#include "plugin.h"

/* Requests one collComm holds at once; NCCL keeps at most NCCL_STEPS (8) per channel in
 * flight. When every slot is taken, iallreduce answers "retry" (a NULL request). */
#define CN_MAX_REQS 512
/* The most lanes FTCC_LANES allows. */
#define CN_MAX_LANES 8

struct cn_comm;

struct cn_req {
	uint32_t magic; /* CN_REQ_MAGIC while in flight, 0 when free */
	struct cn_comm *cc;
	ftcc_request_t *r;
	size_t bytes;
	int64_t t_post_ns; /* when it was posted, while tracing; else 0 */
	int next_free;
};

struct cn_comm {
	uint32_t magic;
	ftcc_comm_t *comm;
	uint32_t nnodes, rank;
	char group[32];
	int64_t min_nodes;
	int64_t min_percent; /* FTCC_COLLNET_MIN_PERCENT */
	char (*addrs)[64];   /* each node's control address, for log lines */

	pthread_mutex_t mu; /* the request slots and the membership seen */
	int free_head;
	ncclResult_t failed; /* sticky: the group can no longer make progress */
	uint64_t seen_epoch;
	uint8_t *alive;	   /* nnodes flags: member of the newest epoch seen */
	uint32_t *members; /* nnodes: scratch for views */
	/* The status file (FTCC_STATUS_DIR): what it says, under mu. */
	uint64_t *lost_epoch; /* nnodes: the epoch a node was first seen missing, 0 in */
	int64_t *lost_ms;     /* nnodes: when (Unix time, ms) */
	uint8_t last_contrib[FTCC_MAX_MEMBERS / 8]; /* contributors of the last op published */
	uint64_t last_seq;			    /* that op */
	uint32_t last_ncontrib;
	char fail_why[160];	   /* why this node failed (cc->failed), for the file */
	char *status_pending;	   /* the newest text not yet written (owned), under mu */
	_Atomic int status_dirty;  /* status_pending is set: the next flush writes it */
	pthread_mutex_t status_mu; /* one writer at a time, taken without mu */
	int status_warned;	   /* one WARN when the file cannot be written (status_mu) */
	struct cn_req reqs[CN_MAX_REQS];
	/* connect's confirmation ops (one per lane): their input and results */
	int32_t confirm_one;
	int32_t confirm_sum[CN_MAX_LANES];
	_Atomic int in_flight; /* ops posted and not yet seen done, counted while tracing */
};

/* What op result @rc (with its record @rec when 0 or FTCC_ERR_DEGRADED) means for the node: the
 * test()'s ncclResult_t, a WARN when something went wrong, cc->failed set when the node cannot
 * go on (it keeps its first code, except that a local failure replaces ncclRemoteError), and
 * the status renewed. Caller holds cc->mu. */
PLUGIN_HIDDEN ncclResult_t cn_settle(struct cn_comm *cc, int rc, const struct ftcc_record *rec);
/* Says once, in a WARN, which nodes left the group since the last epoch seen, and renews the
 * status when the membership or the contributor set changed. Caller holds cc->mu. */
PLUGIN_HIDDEN void cn_note_epoch(struct cn_comm *cc, const struct ftcc_record *rec);
/* Renews the status text of @cc (when FTCC_STATUS_DIR is set) for cn_status_flush(): @state is
 * "running", "failed" (cc->fail_why says why) or "closed". Caller holds cc->mu. Formats only:
 * no file system call under the lock. */
PLUGIN_HIDDEN void cn_status_mark(struct cn_comm *cc, const char *state);
/* Writes the newest status text, if one is pending, to the status file (written aside, then
 * renamed). Caller does not hold cc->mu. Cheap when nothing is pending. */
PLUGIN_HIDDEN void cn_status_flush(struct cn_comm *cc);

#endif
