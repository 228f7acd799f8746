/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf fault mode: how fast a lost peer is reported. Rank 0 streams messages of -b bytes
 * to rank 1 through the plug-in (8 in flight, as NCCL's proxy); at iteration -k rank 1 tells
 * rank 0 the time and its pid over the bootstrap and raises SIGKILL or SIGSTOP. Rank 0 keeps
 * polling and prints how long its pending request took to fail with ncclRemoteError.
 */
#include "perf_plugin.h"

#include <errno.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define FAULT_DEPTH 8
#define FAULT_GIVE_UP_NS (30ull * 1000000000ull)

/* What rank 1 sends just before the signal. */
struct fault_note {
	uint64_t t_ns;
	int32_t pid, iter;
};

/* Rank 0: a fault note, if one has arrived (non-blocking). 1 got it, 0 not yet. */
static int fault_note_poll(struct perf_boot *b, struct fault_note *n)
{
	struct pollfd p = { .fd = b->fds[1], .events = POLLIN };

	if (poll(&p, 1, 0) <= 0)
		return 0;
	return perf_boot_recv(b, 1, n, sizeof(*n)) == 0;
}

/* One side's loop: keeps FAULT_DEPTH requests in flight until a request fails (returns the
 * ncclResult), @victim's signal time comes (rank 1), or the give-up time passes. */
static int fault_stream(const struct perf_opts *o, struct perf_boot *b, struct perf_plugin *pl,
			void *comm, void *mh, char *buf, size_t size)
{
	const ncclNet_v11_t *n = pl->net;
	void *ring[FAULT_DEPTH] = { 0 };
	uint64_t posted = 0, done = 0, start = perf_now_ns();
	int tag = 0, rank = b->rank;

	while (perf_now_ns() - start < FAULT_GIVE_UP_NS) {
		ncclResult_t res = ncclSuccess;
		int fin = 0;

		if (rank == 1 && done == (uint64_t)o->fault_iter * FAULT_DEPTH) {
			struct fault_note note = { perf_now_ns(), getpid(), o->fault_iter };

			perf_boot_send(b, 0, &note, sizeof(note));
			raise(strcmp(o->fault_sig, "STOP") ? SIGKILL : SIGSTOP);
		}
		while (posted - done < FAULT_DEPTH && res == ncclSuccess) {
			void **r = &ring[posted % FAULT_DEPTH], *ph = NULL;
			size_t len = size;

			res = rank == 0 ? n->isend(comm, buf, size, tag, mh, NULL, r) :
					  n->irecv(comm, 1, (void **)&buf, &len, &tag, &mh, &ph, r);
			if (res != ncclSuccess || !*r)
				break;
			posted++;
		}
		if (res == ncclSuccess && done < posted)
			res = n->test(ring[done % FAULT_DEPTH], &fin, NULL);
		if (res != ncclSuccess)
			return (int)res;
		done += (uint64_t)fin;
		if (!fin)
			sched_yield();
	}
	return 0;
}

static int fault_rank0_report(const struct perf_opts *o, struct perf_boot *b, int res)
{
	struct fault_note note;
	double ms;

	if (!fault_note_poll(b, &note)) {
		printf("# fault: rank 1 was not signalled or nothing failed (result %d)\n", res);
		return -EIO;
	}
	ms = (double)(perf_now_ns() - note.t_ns) / 1e6;
	kill(note.pid, SIGKILL); /* a stopped peer is ours to end */
	printf("# fault: rank 1 got SIG%s at iteration %d (%zu-byte messages, %d in flight)\n",
	       o->fault_sig, note.iter, o->min_bytes, FAULT_DEPTH);
	printf("# fault: rank 0's pending request returned %s (%d) after %.1f ms\n",
	       res == ncclRemoteError ? "ncclRemoteError" : "an error", res, ms);
	fflush(stdout);
	return res == ncclRemoteError ? 0 : -EIO;
}

int perf_fault_run(const struct perf_opts *o, struct perf_boot *b)
{
	struct perf_plugin pl;
	void *scomm = NULL, *rcomm = NULL, *comm, *mh = NULL;
	char *buf = perf_buf_alloc(o->min_bytes);
	int rc, res;

	if (!buf)
		return -ENOMEM;
	rc = perf_plugin_open(&pl, o->plugin_path, b->rank);
	if (rc)
		goto free_buf;
	rc = perf_plugin_connect(&pl, b, 1 - b->rank, b->rank == 0, b->rank == 1, &scomm, &rcomm);
	if (rc)
		goto close_plugin;
	comm = b->rank == 0 ? scomm : rcomm;
	rc = perf_plugin_check(pl.net->regMr(comm, buf, o->min_bytes, NCCL_PTR_HOST, &mh), "regMr");
	if (!rc) {
		res = fault_stream(o, b, &pl, comm, mh, buf, o->min_bytes);
		rc = b->rank == 0 ? fault_rank0_report(o, b, res) : -EIO;
		pl.net->deregMr(comm, mh);
	}
	if (scomm)
		pl.net->closeSend(scomm);
	if (rcomm)
		pl.net->closeRecv(rcomm);
close_plugin:
	perf_plugin_close(&pl);
free_buf:
	free(buf);
	return rc;
}
