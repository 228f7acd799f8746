/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading the status files ftcc's CollNet plug-in publishes (FTCC_STATUS_DIR): which nodes a
 * group has, which it lost and when, and whether it still runs, for a training process written in
 * C or C++ (python/ftcc_status.py reads the same files). Part of libftcc (-lftcc); needs neither
 * NCCL nor a communicator. Thread-safe; nothing is kept between calls.
 *
 *	struct ftcc_status *st = malloc(sizeof(*st));
 *	if (ftcc_status_read("/dev/shm/ftcc/ftcc-nccl-3f0c...-node0.status", st) == 0 &&
 *	    st->nlost > 0)
 *		printf("node %u lost in epoch %llu\n", st->lost[0].node,
 *		       (unsigned long long)st->lost[0].epoch);
 *
 * The file is replaced whole by a rename, so a read sees one version or the other, never half.
 */
#ifndef FTCC_STATUS_H
#define FTCC_STATUS_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc.h"

#ifdef __cplusplus
extern "C" {
#endif

#define FTCC_STATUS_FORMAT 1	/* the format this reader knows */
#define FTCC_STATUS_NODES 1024	/* node ids are below this */
#define FTCC_STATUS_LOST_MAX 64 /* lost nodes kept in lost[] (nlost counts them all) */

struct ftcc_status_lost {
	uint32_t node;
	uint64_t epoch; /* the epoch that no longer had it */
	int64_t at_ms;	/* when, Unix time in ms */
};

/* One status file. Bitmaps have bit (id % 8) of byte (id / 8) set for node id. */
struct ftcc_status {
	char group[64];
	uint32_t node, nodes; /* this node's id; the group's size when it formed */
	char state[16];	      /* "running", "failed" or "closed" */
	uint64_t epoch;
	uint32_t nmembers;
	uint8_t members[FTCC_STATUS_NODES / 8];
	uint32_t nlost;
	struct ftcc_status_lost lost[FTCC_STATUS_LOST_MAX];
	int has_last_op; /* an op completed since the group formed */
	uint64_t last_op;
	uint8_t contributors[FTCC_STATUS_NODES / 8]; /* of last_op and later ops */
	int64_t updated_ms;
	int pid;
	char reason[256]; /* why, when state is "failed" */
};

/* Parses @len bytes of a status file's text into @st. 0, or FTCC_ERR_INVALID (ftcc.h) when
 * it is not a status file of FTCC_STATUS_FORMAT: a line that does not parse, an id out of
 * range, a required field missing. Unknown keys are skipped (later formats may add some). */
FTCC_API int ftcc_status_parse(const char *text, size_t len, struct ftcc_status *st);

/* Reads and parses the status file at @path. 0, FTCC_ERR_INVALID, or FTCC_ERR_SYSTEM (it could
 * not be opened or read: errno says why). */
FTCC_API int ftcc_status_read(const char *path, struct ftcc_status *st);

/* Whether node @id is set in bitmap @map (members, contributors). */
static inline int ftcc_status_has(const uint8_t *map, uint32_t id)
{
	return id < FTCC_STATUS_NODES && (map[id / 8] >> (id % 8) & 1);
}

#ifdef __cplusplus
}
#endif

#endif
