/* SPDX-License-Identifier: BSD-3-Clause */
/* What a CollNet node tells about its group: one WARN per node lost, and, when FTCC_STATUS_DIR
 * names a directory, a status file the training process can read without NCCL's help
 * (python/ftcc_status.py reads it). The file is replaced whole (written aside, then renamed),
 * so a reader never sees half of it, and only when something changed: the members, the
 * contributor set of the ops, the state. It never costs the data path a write per op.
 *
 *   <dir>/ftcc-<group>-node<node>.status, lines of "key value":
 *   format 1 | group G | node I | nodes N | state running|failed|closed | epoch E
 *   members 0,1,3 | lost 2 epoch 3 at_ms T (one line per node missing) | last_op S
 *   contributors 0,1,3 (of op S and of every later op until the next file) | updated_ms T
 *   pid P | reason TEXT (when failed)
 */
#define _GNU_SOURCE
#include "collnet_comm.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ftcc/text.h"

static int64_t cn_unix_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* "0,1,3" of the bits of @set below @n. */
static void cn_put_set(char *buf, size_t len, size_t *at, const uint8_t *set, uint32_t n)
{
	int first = 1;

	for (uint32_t i = 0; i < n; i++) {
		if (set[i / 8] >> (i % 8) & 1) {
			ftcc_appendf(buf, len, at, "%s%u", first ? "" : ",", i);
			first = 0;
		}
	}
}

static int cn_write_all(int fd, const char *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return -1;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

void cn_status_mark(struct cn_comm *cc, const char *state)
{
	const char *dir = ftcc_setting_str(FTCC_SET_STATUS_DIR);
	/* Every line fits: the sets take at most 5 bytes a node, a lost line about 60. */
	size_t len = 1024 + sizeof(cc->fail_why) + (size_t)cc->nnodes * 80, at = 0;
	uint8_t alive[FTCC_MAX_MEMBERS / 8] = { 0 };
	char *buf;

	if (!dir || !dir[0])
		return;
	buf = malloc(len);
	if (!buf)
		return; /* the next change tries again */
	buf[0] = '\0';
	for (uint32_t i = 0; i < cc->nnodes; i++)
		alive[i / 8] |= (uint8_t)(!!cc->alive[i] << (i % 8));
	ftcc_appendf(buf, len, &at, "format 1\ngroup %s\nnode %u\nnodes %u\nstate %s\n", cc->group,
		     cc->rank, cc->nnodes, state);
	ftcc_appendf(buf, len, &at, "epoch %" PRIu64 "\nmembers ", cc->seen_epoch);
	cn_put_set(buf, len, &at, alive, cc->nnodes);
	ftcc_appendf(buf, len, &at, "\n");
	for (uint32_t i = 0; i < cc->nnodes; i++) {
		if (cc->lost_epoch[i])
			ftcc_appendf(buf, len, &at, "lost %u epoch %" PRIu64 " at_ms %" PRId64 "\n",
				     i, cc->lost_epoch[i], cc->lost_ms[i]);
	}
	if (cc->last_ncontrib) {
		ftcc_appendf(buf, len, &at, "last_op %" PRIu64 "\ncontributors ", cc->last_seq);
		cn_put_set(buf, len, &at, cc->last_contrib, cc->nnodes);
		ftcc_appendf(buf, len, &at, "\n");
	}
	ftcc_appendf(buf, len, &at, "updated_ms %" PRId64 "\npid %d\n", cn_unix_ms(),
		     (int)getpid());
	if (strcmp(state, "failed") == 0)
		ftcc_appendf(buf, len, &at, "reason %s\n",
			     cc->fail_why[0] ? cc->fail_why : "no reason recorded");
	free(cc->status_pending);
	cc->status_pending = buf;
	atomic_store(&cc->status_dirty, 1);
}

/* Writes @text to @path through a file beside it, renamed over @path. 0 or -1 (errno). */
static int cn_status_write(const char *path, const char *text)
{
	char tmp[600];
	int fd, rc;

	if (snprintf(tmp, sizeof(tmp), "%s.%d.tmp", path, (int)getpid()) >= (int)sizeof(tmp)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	unlink(tmp); /* a leftover of a process that had our pid */
	fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
	if (fd < 0)
		return -1;
	rc = cn_write_all(fd, text, strlen(text));
	if (close(fd) < 0)
		rc = -1;
	if (rc == 0 && rename(tmp, path) < 0)
		rc = -1;
	if (rc) {
		int e = errno;

		unlink(tmp);
		errno = e;
	}
	return rc;
}

void cn_status_flush(struct cn_comm *cc)
{
	const char *dir = ftcc_setting_str(FTCC_SET_STATUS_DIR);
	char path[512];
	char *text;

	if (!atomic_load(&cc->status_dirty))
		return;
	/* One writer at a time, and each writes the newest text: an older one never lands last. */
	pthread_mutex_lock(&cc->status_mu);
	pthread_mutex_lock(&cc->mu);
	text = cc->status_pending;
	cc->status_pending = NULL;
	atomic_store(&cc->status_dirty, 0);
	pthread_mutex_unlock(&cc->mu);
	if (text && dir && dir[0]) {
		int n = snprintf(path, sizeof(path), "%s/ftcc-%s-node%u.status", dir, cc->group,
				 cc->rank);

		if (n >= (int)sizeof(path))
			errno = ENAMETOOLONG;
		if ((n >= (int)sizeof(path) || cn_status_write(path, text)) && !cc->status_warned) {
			ftcc_warn("CollNet group %s: cannot write the status file in %s: %m; going "
				  "on without it",
				  cc->group, dir);
			cc->status_warned = 1;
		}
	}
	pthread_mutex_unlock(&cc->status_mu);
	free(text);
}

void cn_note_epoch(struct cn_comm *cc, const struct ftcc_record *rec)
{
	struct ftcc_view v;
	uint8_t now[FTCC_MAX_MEMBERS / 8] = { 0 };
	int changed = 0;

	/* Requests may be tested out of order: an older op never replaces a newer one's set. */
	if ((rec->seq > cc->last_seq || !cc->last_ncontrib) &&
	    (rec->ncontrib != cc->last_ncontrib ||
	     memcmp(rec->contrib, cc->last_contrib, sizeof(cc->last_contrib)) != 0)) {
		memcpy(cc->last_contrib, rec->contrib, sizeof(cc->last_contrib));
		cc->last_ncontrib = rec->ncontrib;
		cc->last_seq = rec->seq;
		changed = 1;
	}
	if (rec->epoch <= cc->seen_epoch || ftcc_comm_view(cc->comm, &v, cc->members, cc->nnodes) ||
	    v.epoch <= cc->seen_epoch) {
		if (changed)
			cn_status_mark(cc, cc->failed ? "failed" : "running");
		return;
	}
	for (uint32_t i = 0; i < v.nmembers && i < cc->nnodes; i++) {
		if (cc->members[i] < cc->nnodes)
			now[cc->members[i] / 8] |= (uint8_t)(1u << (cc->members[i] % 8));
	}
	for (uint32_t id = 0; id < cc->nnodes; id++) {
		int in = now[id / 8] >> (id % 8) & 1;

		if (cc->alive[id] && !in) {
			ftcc_warn(
				"CollNet group %s: node %u (%s) lost; continuing in epoch %" PRIu64
				" with %u of %u nodes (op %" PRIu64 ": input of %u nodes, scale "
				"%g, FTCC_DEGRADED=%s)",
				cc->group, id, cc->addrs[id], v.epoch, v.nmembers, cc->nnodes,
				rec->seq, rec->ncontrib, rec->scale,
				ftcc_setting_str(FTCC_SET_DEGRADED));
			cc->lost_epoch[id] = v.epoch;
			cc->lost_ms[id] = cn_unix_ms();
		} else if (!cc->alive[id] && in) {
			ftcc_info("CollNet group %s: node %u (%s) is back in epoch %" PRIu64,
				  cc->group, id, cc->addrs[id], v.epoch);
			cc->lost_epoch[id] = 0;
			cc->lost_ms[id] = 0;
		}
		cc->alive[id] = (uint8_t)in;
	}
	cc->seen_epoch = v.epoch;
	cn_status_mark(cc, cc->failed ? "failed" : "running");
}

/* Makes this node failed with @code and returns it for the op at hand. A node already failed
 * keeps its code, except that a local failure (out of memory, an internal error) replaces
 * ncclRemoteError: with lanes, the ops beside the one that failed here end LOST once the node
 * left, and NCCL may test one of them first; the cause is the local failure. */
static ncclResult_t cn_fail_code(struct cn_comm *cc, ncclResult_t code)
{
	if (!cc->failed || (cc->failed == ncclRemoteError && code != ncclRemoteError))
		cc->failed = code;
	return code;
}

ncclResult_t cn_settle(struct cn_comm *cc, int rc, const struct ftcc_record *rec)
{
	ncclResult_t was_failed = cc->failed, res = ncclSuccess;

	if (rc == 0 || rc == FTCC_ERR_DEGRADED) {
		cn_note_epoch(cc, rec);
		if ((int64_t)rec->ncontrib < cc->min_nodes ||
		    (int64_t)rec->ncontrib * 100 < cc->min_percent * (int64_t)rec->size) {
			ftcc_warn("CollNet group %s: op %" PRIu64
				  " has the input of %u of %u nodes, fewer than "
				  "FTCC_COLLNET_MIN_NODES=%" PRId64
				  " or FTCC_COLLNET_MIN_PERCENT=%" PRId64
				  "%%; the group stops here",
				  cc->group, rec->seq, rec->ncontrib, rec->size, cc->min_nodes,
				  cc->min_percent);
			res = cn_fail_code(cc, ncclRemoteError);
		} else if (rc == FTCC_ERR_DEGRADED) {
			ftcc_warn("CollNet group %s: op %" PRIu64
				  " completed with the input of %u of "
				  "%u nodes, and FTCC_DEGRADED=fail",
				  cc->group, rec->seq, rec->ncontrib, rec->size);
			res = ncclRemoteError;
		}
	} else if (rc == FTCC_ERR_MISMATCH) {
		/* The nodes called this op differently: it failed on every node alike, nobody
		 * left, and the group goes on with the next op. */
		ftcc_warn("CollNet group %s: %s", cc->group, ftcc_comm_last_error(cc->comm));
		res = ncclInvalidUsage;
	} else if (rc == FTCC_ERR_INVALID || rc == FTCC_ERR_NOMEM) {
		/* A local failure: the engine left the group for this node (the others finish
		 * the op without it); this node stays failed. */
		ftcc_warn("CollNet group %s: op failed on node %u: %s (%s); it left the group",
			  cc->group, cc->rank, ftcc_strerror(rc), ftcc_comm_last_error(cc->comm));
		res = cn_fail_code(cc, rc == FTCC_ERR_NOMEM ? ncclSystemError : ncclInternalError);
	} else {
		/* LOST (a minority, or removed), ABORTED, TIMEOUT: this node cannot go on. */
		ftcc_warn("CollNet group %s: node %u can no longer make progress with the group "
			  "(%s): %s",
			  cc->group, cc->rank, ftcc_strerror(rc), ftcc_comm_last_error(cc->comm));
		res = cn_fail_code(cc, ncclRemoteError);
	}
	if (cc->failed != was_failed) {
		if (rc == 0 || rc == FTCC_ERR_DEGRADED)
			snprintf(cc->fail_why, sizeof(cc->fail_why),
				 "op %" PRIu64 " has the input of %u of %u nodes, fewer than "
				 "FTCC_COLLNET_MIN_NODES or FTCC_COLLNET_MIN_PERCENT",
				 rec->seq, rec->ncontrib, rec->size);
		else
			snprintf(cc->fail_why, sizeof(cc->fail_why), "%s: %s", ftcc_strerror(rc),
				 ftcc_comm_last_error(cc->comm));
		cn_status_mark(cc, "failed");
	}
	return res;
}
