/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf p2p mode: rank 0 -> rank 1 through the plug-in's isend / irecv / test, driven the
 * way NCCL's proxy drives a connection: messages of at most 4 MiB, up to `depth` requests in
 * flight, tested oldest first. -R: a ping-pong of one message each way.
 */
#include "perf_plugin.h"

#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One rank's side of the p2p benchmark: the plug-in, its comms and the registrations of the
 * two buffers (mh[comm][buf], comm 0 = send, 1 = recv; buf 0 = sbuf, 1 = rbuf). */
struct p2p {
	struct perf_plugin pl;
	void *comm[2];
	void *mh[2][2];
	void *buf[2];
	size_t len; /* bytes of each buffer */
	int depth, rank, yield;
};

/* Progress bookkeeping shared by the wait loops: fails after PERF_STALL_TIMEOUT_NS without
 * any progress. After a pass that moved nothing it yields the CPU when @yield is set, as
 * NCCL's proxy progress thread does (sched_yield when idle); -y 0 spins instead. */
struct p2p_idle {
	uint64_t last;
	unsigned spins;
	int yield;
};

static int p2p_idle(struct p2p_idle *w, int moved, const char *what)
{
	uint64_t now;

	if (moved) {
		w->spins = 0;
		return 0;
	}
	if (w->yield) {
		sched_yield();
	}
	if (w->spins++ & 1023) {
		return 0;
	}
	now = perf_now_ns();
	if (w->spins == 1) {
		w->last = now;
	} else if (now - w->last > PERF_STALL_TIMEOUT_NS) {
		fprintf(stderr, "ftcc-perf: %s made no progress for %llu s\n", what,
			PERF_STALL_TIMEOUT_NS / 1000000000ull);
		return -ETIMEDOUT;
	}
	return 0;
}

/* Registration of @ptr (inside sbuf or rbuf) on comm @c. */
static void *p2p_mh(struct p2p *x, int c, const void *ptr)
{
	const char *p = ptr, *r = x->buf[1];

	return x->mh[c][p >= r && p < r + x->len ? 1 : 0];
}

/* Posts one isend (@send) or irecv; *req stays NULL when the plug-in asks to retry later. */
static int p2p_post(struct p2p *x, int send, void *buf, size_t len, void **req)
{
	const ncclNet_v11_t *n = x->pl.net;
	int tag = send ? x->rank : 1 - x->rank; /* NCCL tags with the sender's rank */
	void *mh = p2p_mh(x, !send, buf), *ph = NULL;

	*req = NULL;
	if (send) {
		return perf_plugin_check(n->isend(x->comm[0], buf, len, tag, mh, NULL, req),
					 "isend");
	}
	return perf_plugin_check(n->irecv(x->comm[1], 1, &buf, &len, &tag, &mh, &ph, req), "irecv");
}

/* Tests @req; on completion sets *done and checks a receive got exactly @len bytes. */
static int p2p_test(struct p2p *x, void *req, int recv, size_t len, int *done)
{
	int size = -1, rc;

	rc = perf_plugin_check(x->pl.net->test(req, done, &size), "test");
	if (!rc && *done && recv && (size_t)size != len) {
		fprintf(stderr, "ftcc-perf rank %d: received %d bytes, expected %zu\n", x->rank,
			size, len);
		rc = -EPROTO;
	}
	return rc;
}

/* Moves @size bytes of @buf in messages of at most PERF_CHUNK_MAX, keeping up to x->depth
 * requests in flight in a FIFO and testing the oldest, as NCCL's proxy does. */
static int p2p_stream(struct p2p *x, int send, char *buf, size_t size)
{
	void *ring[32];
	size_t nmsg = (size + PERF_CHUNK_MAX - 1) / PERF_CHUNK_MAX, posted = 0, done = 0;
	struct p2p_idle idle = { .yield = x->yield };
	int rc = 0, fin;

	while (!rc && done < nmsg) {
		int moved = 0;

		while (!rc && posted < nmsg && posted - done < (size_t)x->depth) {
			size_t off = posted * PERF_CHUNK_MAX;
			size_t len = size - off < PERF_CHUNK_MAX ? size - off : PERF_CHUNK_MAX;

			rc = p2p_post(x, send, buf + off, len, &ring[posted % x->depth]);
			if (rc || !ring[posted % x->depth]) {
				break;
			}
			posted++;
			moved = 1;
		}
		if (!rc && done < posted) {
			size_t off = done * PERF_CHUNK_MAX;
			size_t len = size - off < PERF_CHUNK_MAX ? size - off : PERF_CHUNK_MAX;

			fin = 0;
			rc = p2p_test(x, ring[done % x->depth], !send, len, &fin);
			done += (size_t)fin;
			moved |= fin;
		}
		if (!rc) {
			rc = p2p_idle(&idle, moved, send ? "isend" : "irecv");
		}
	}
	return rc;
}

static int p2p_send(void *t, void *buf, size_t size)
{
	return p2p_stream(t, 1, buf, size);
}

static int p2p_recv(void *t, void *buf, size_t size)
{
	return p2p_stream(t, 0, buf, size);
}

/* Posts (retrying while the plug-in returns no request) and then waits for the listed
 * operations together: op i is a send when send[i], of len bytes at bufs[i]. */
static int p2p_many(struct p2p *x, int n, const int *send, void *const *bufs, size_t len)
{
	void *req[2] = { NULL, NULL };
	int i, fin[2] = { 0, 0 }, rc = 0, left = n;
	struct p2p_idle idle = { .yield = x->yield };

	while (!rc && left) {
		int moved = 0;

		for (i = 0; i < n && !rc; i++) {
			if (!req[i]) {
				rc = p2p_post(x, send[i], bufs[i], len, &req[i]);
				moved |= req[i] != NULL;
			} else if (!fin[i]) {
				rc = p2p_test(x, req[i], !send[i], len, &fin[i]);
				left -= fin[i];
				moved |= fin[i];
			}
		}
		if (!rc) {
			rc = p2p_idle(&idle, moved, "round trip");
		}
	}
	return rc;
}

/* rank 0: irecv the echo first (so it is posted before the data can come back), then isend;
 * rank 1: irecv, then isend the same buffer back. One message in flight each way. */
static int p2p_pingpong(void *t, int rank, void *sbuf, void *rbuf, size_t size)
{
	struct p2p *x = t;
	static const int recv_send[2] = { 0, 1 }, recv_only[1] = { 0 }, send_only[1] = { 1 };
	void *bufs[2] = { rbuf, sbuf };
	int rc;

	if (rank == 0) {
		return p2p_many(x, 2, recv_send, bufs, size);
	}
	rc = p2p_many(x, 1, recv_only, &rbuf, size);
	return rc ? rc : p2p_many(x, 1, send_only, &rbuf, size);
}

static const struct perf_pair_ops p2p_ops = {
	.send = p2p_send,
	.recv = p2p_recv,
	.pingpong = p2p_pingpong,
};

/* Registers both buffers on every comm this rank has (rank 1 sends from rbuf in -R). */
static int p2p_register(struct p2p *x)
{
	int c, i, rc = 0;

	for (c = 0; c < 2 && !rc; c++) {
		for (i = 0; i < 2 && !rc && x->comm[c]; i++) {
			rc = perf_plugin_check(x->pl.net->regMr(x->comm[c], x->buf[i], x->len,
								NCCL_PTR_HOST, &x->mh[c][i]),
					       "regMr");
		}
	}
	return rc;
}

/* Undoes p2p_register and the connection, in reverse order; tolerates a partial set-up. */
static void p2p_teardown(struct p2p *x)
{
	const ncclNet_v11_t *n = x->pl.net;
	int c, i;

	for (c = 1; c >= 0; c--) {
		for (i = 1; i >= 0; i--) {
			if (x->mh[c][i]) {
				perf_plugin_check(n->deregMr(x->comm[c], x->mh[c][i]), "deregMr");
			}
		}
	}
	if (x->comm[1]) {
		perf_plugin_check(n->closeRecv(x->comm[1]), "closeRecv");
	}
	if (x->comm[0]) {
		perf_plugin_check(n->closeSend(x->comm[0]), "closeSend");
	}
}

/* The '#' lines of the header: what was loaded and what the times mean. */
static void p2p_notes(const struct perf_opts *o, const struct p2p *x, char *out, size_t len)
{
	const ncclNetProperties_v11_t *pr = &x->pl.props;
	int n;

	n = snprintf(out, len,
		     "# plug-in %s: %s, %d device(s), device %d \"%s\" speed %d Mbps, maxRecvs %d\n"
		     "# polling: %s\n",
		     o->plugin_path, x->pl.net->name, x->pl.ndev, x->pl.dev,
		     pr->name ? pr->name : "?", pr->speed, pr->maxRecvs,
		     o->yield ? "sched_yield after an idle pass, as NCCL's proxy thread (-y 1)" :
				"busy spin (-y 0)");
	if (n < 0 || (size_t)n >= len) {
		return;
	}
	if (o->roundtrip) {
		snprintf(out + n, len - (size_t)n,
			 "# round trip: rank 0 irecv+isend, rank 1 irecv then isend back; one "
			 "message of size bytes each way\n# time = FULL round trip on rank 0 (not "
			 "halved); algbw = 2*size/time\n");
	} else {
		snprintf(out + n, len - (size_t)n,
			 "# one iteration = size bytes rank 0 -> rank 1 as messages of <= %u MiB, "
			 "<= %d in flight\n# time = max(sender, receiver) per iteration\n",
			 PERF_CHUNK_MAX >> 20, o->depth);
	}
}

int perf_p2p_run(const struct perf_opts *o, struct perf_boot *b)
{
	struct p2p x = {
		.depth = o->depth, .rank = b->rank, .len = o->max_bytes, .yield = o->yield
	};
	char notes[1024];
	int rc;

	x.buf[0] = perf_buf_alloc(x.len);
	x.buf[1] = perf_buf_alloc(x.len);
	if (!x.buf[0] || !x.buf[1]) {
		fprintf(stderr, "ftcc-perf rank %d: cannot allocate 2 x %zu bytes\n", b->rank,
			x.len);
		rc = -ENOMEM;
		goto free_bufs;
	}
	rc = perf_plugin_open(&x.pl, o->plugin_path, b->rank);
	if (rc) {
		goto free_bufs;
	}
	/* rank 0 sends, rank 1 receives; a round trip needs both directions on both ranks. */
	rc = perf_plugin_connect(&x.pl, b, 1 - b->rank, b->rank == 0 || o->roundtrip,
				 b->rank == 1 || o->roundtrip, &x.comm[0], &x.comm[1]);
	if (rc) {
		goto close_plugin;
	}
	rc = p2p_register(&x);
	if (!rc) {
		p2p_notes(o, &x, notes, sizeof(notes));
		rc = perf_pair_run(o, b, &p2p_ops, &x, x.buf[0], x.buf[1], notes);
	}
	p2p_teardown(&x);
close_plugin:
	perf_plugin_close(&x.pl);
free_bufs:
	free(x.buf[1]);
	free(x.buf[0]);
	return rc;
}
