/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf msg mode: the C API's point-to-point messages between ranks 0 and 1 of a group
 * (ftcc.h, embedded coordinator), through the same sweep as p2p and sock (perf_pair.c): one
 * message per iteration, ftcc_isend on rank 0 and ftcc_irecv on rank 1, each waited for; -R:
 * rank 1 sends each message back.
 */
#include "perf.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "ftcc.h"

#define MSG_TAG 1
#define MSG_WAIT_MS 60000 /* one message of the sweep, at most */

struct msg_pair {
	ftcc_comm_t *comm;
	int rank;
};

static int msg_done(struct msg_pair *m, const char *what, size_t size, ftcc_request_t *r, int rc)
{
	if (!rc) {
		rc = ftcc_wait_p2p(r, MSG_WAIT_MS, NULL);
	}
	if (rc) {
		fprintf(stderr, "ftcc-perf: rank %d: %s of %zu bytes: %s (%s)\n", m->rank, what,
			size, ftcc_strerror(rc), ftcc_comm_last_error(m->comm));
		return -EIO;
	}
	return 0;
}

static int msg_send_to(struct msg_pair *m, int peer, void *buf, size_t size)
{
	ftcc_request_t *r = NULL;

	return msg_done(m, "ftcc_isend", size, r,
			ftcc_isend(m->comm, buf, size, (uint32_t)peer, MSG_TAG, &r));
}

static int msg_recv_from(struct msg_pair *m, int peer, void *buf, size_t size)
{
	ftcc_request_t *r = NULL;
	int rc = ftcc_irecv(m->comm, buf, size, (uint32_t)peer, MSG_TAG, &r);

	return msg_done(m, "ftcc_irecv", size, r, rc);
}

static int msg_send(void *t, void *buf, size_t size)
{
	return msg_send_to(t, 1, buf, size);
}

static int msg_recv(void *t, void *buf, size_t size)
{
	return msg_recv_from(t, 0, buf, size);
}

static int msg_pingpong(void *t, int rank, void *sbuf, void *rbuf, size_t size)
{
	int rc;

	if (rank == 0) {
		rc = msg_send_to(t, 1, sbuf, size);
		return rc ? rc : msg_recv_from(t, 1, rbuf, size);
	}
	rc = msg_recv_from(t, 0, rbuf, size);
	return rc ? rc : msg_send_to(t, 0, rbuf, size);
}

static const struct perf_pair_ops msg_ops = {
	.send = msg_send,
	.recv = msg_recv,
	.pingpong = msg_pingpong,
};

int perf_msg_run(const struct perf_opts *o, struct perf_boot *b)
{
	struct msg_pair m = { .rank = b->rank };
	void *sbuf = perf_buf_alloc(o->max_bytes), *rbuf = perf_buf_alloc(o->max_bytes);
	const char *notes =
		o->roundtrip ?
			"# ftcc_isend / ftcc_irecv between the members of a group, each waited "
			"for; -d ignored\n# round trip: rank 0 sends size bytes, rank 1 sends them "
			"back; time = FULL round trip on rank 0 (not halved)\n" :
			"# ftcc_isend / ftcc_irecv between the members of a group, each waited "
			"for; -d ignored\n# one iteration = one message of size bytes rank 0 -> "
			"rank 1; time = max(sender, receiver) per iteration\n";
	int rc;

	if (!sbuf || !rbuf) {
		fprintf(stderr, "ftcc-perf rank %d: cannot allocate 2 x %zu bytes\n", b->rank,
			o->max_bytes);
		rc = -ENOMEM;
		goto free_bufs;
	}
	rc = perf_capi_comm(b, FTCC_DEGRADED_DEFAULT, &m.comm);
	if (rc) {
		goto free_bufs;
	}
	rc = perf_pair_run(o, b, &msg_ops, &m, sbuf, rbuf, notes);
	perf_boot_barrier(b); /* neither leaves while the other still moves data */
	ftcc_comm_destroy(m.comm);
free_bufs:
	free(rbuf);
	free(sbuf);
	return rc;
}
