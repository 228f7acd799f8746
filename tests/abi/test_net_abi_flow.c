/* SPDX-License-Identifier: BSD-3-Clause */
/* ABI tests of the net plug-in's flow control and request bookkeeping: sends posted before
 * any receive, request rings filled until isend / irecv answer NULL (which NCCL retries),
 * grouped receives matched by tag, and the sizes test() writes back into NCCL's int arrays.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "abi_fixture.h"

#define CONNECT_TIMEOUT_MS ABI_CONNECT_TIMEOUT_MS
#define STREAM_TIMEOUT_MS ABI_STREAM_TIMEOUT_MS
/* Value test() must leave alone in size entries beyond the request's buffers. */
#define SIZE_GUARD (-7)

static struct abi_net net;
static struct abi_pair pair;

static void open_pair(int version)
{
	abi_open_pair(&net, &pair, version);
}

static void close_pair(void)
{
	abi_close_pair(&net, &pair);
}

/* All sends are posted before any receive, as happens when the receiving GPU runs late; NULL
 * requests are retried and every message must still arrive in order. */
static void sends_first(int version)
{
	enum { N = 8, SIZE = 65536 };
	static char tx[N][SIZE], rx[N][SIZE];
	void *sreq[N] = { 0 }, *rreq[N] = { 0 }, *smh, *rmh;
	int posted = 0, size;

	open_pair(version);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, tx, sizeof(tx), &smh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, sizeof(rx), &rmh), ncclSuccess);
	for (int i = 0; i < N; i++)
		for (int j = 0; j < SIZE; j++)
			tx[i][j] = (char)abi_pattern((uint64_t)i, (size_t)j);
	/* Post as many as the transport takes now; the rest wait for receives. */
	int64_t stop = abi_now_ms() + 200;
	while (posted < N && abi_now_ms() < stop) {
		cr_assert_eq(abi_isend(&net, pair.scomm, tx[posted], SIZE, smh, &sreq[posted]),
			     ncclSuccess);
		posted += sreq[posted] != NULL;
	}
	cr_log_info("v%d: %d of %d sends accepted before any receive", version, posted, N);
	for (int i = 0; i < N; i++) {
		int64_t deadline = abi_now_ms() + CONNECT_TIMEOUT_MS;
		while (!rreq[i]) {
			cr_assert_eq(abi_irecv(&net, pair.rcomm, rx[i], SIZE, rmh, 0, &rreq[i]),
				     ncclSuccess);
			cr_assert_lt(abi_now_ms(), deadline, "irecv %d never accepted", i);
		}
		if (posted < N) {
			cr_assert_eq(
				abi_isend(&net, pair.scomm, tx[posted], SIZE, smh, &sreq[posted]),
				ncclSuccess);
			posted += sreq[posted] != NULL;
		}
	}
	stop = abi_now_ms() + CONNECT_TIMEOUT_MS;
	while (posted < N) {
		cr_assert_lt(abi_now_ms(), stop, "isend %d never accepted", posted);
		cr_assert_eq(abi_isend(&net, pair.scomm, tx[posted], SIZE, smh, &sreq[posted]),
			     ncclSuccess);
		posted += sreq[posted] != NULL;
	}
	for (int i = 0; i < N; i++) {
		cr_assert_eq(abi_wait(&net, sreq[i], &size, STREAM_TIMEOUT_MS), ncclSuccess);
		cr_assert_eq(abi_wait(&net, rreq[i], &size, STREAM_TIMEOUT_MS), ncclSuccess);
		cr_assert_eq(size, SIZE);
		cr_assert_eq(memcmp(rx[i], tx[i], SIZE), 0, "message %d differs", i);
	}
	cr_assert_eq(abi_dereg_mr(&net, pair.scomm, smh), ncclSuccess);
	cr_assert_eq(abi_dereg_mr(&net, pair.rcomm, rmh), ncclSuccess);
	close_pair();
}
ABI_ALL_VERSIONS(sends_first)

/* Posts tiny sends with no receive until isend answers NULL (its ring is full) or MAX are
 * in flight, then drains everything with NCCL's full window of 32 receives, retrying every
 * NULL: nothing may be lost, duplicated or reordered. */
static void full_rings(int version)
{
	enum { MAX = 300, RWIN = 32 };
	static uint32_t tx[MAX], rx[RWIN];
	void *sreq[MAX] = { 0 }, *rreq[RWIN] = { 0 }, *smh, *rmh;
	int sent = 0, sdone = 0, rposted = 0, rdone = 0, nulls = 0;

	open_pair(version);
	for (int i = 0; i < MAX; i++)
		tx[i] = 0xabc00000u + (uint32_t)i;
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, tx, sizeof(tx), &smh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, sizeof(rx), &rmh), ncclSuccess);
	while (sent < MAX) {
		cr_assert_eq(abi_isend(&net, pair.scomm, &tx[sent], 4, smh, &sreq[sent]),
			     ncclSuccess);
		if (!sreq[sent])
			break;
		sent++;
	}
	cr_log_info("v%d: %d sends accepted before the first NULL", version, sent);
	int64_t deadline = abi_now_ms() + STREAM_TIMEOUT_MS;
	while (rdone < MAX || sdone < MAX) {
		int done = 0, size = -1;
		cr_assert_lt(abi_now_ms(), deadline, "sent %d done %d, received %d", sent, sdone,
			     rdone);
		if (rposted < MAX && rposted - rdone < RWIN) {
			void **slot = &rreq[rposted % RWIN];
			cr_assert_eq(
				abi_irecv(&net, pair.rcomm, &rx[rposted % RWIN], 4, rmh, 0, slot),
				ncclSuccess);
			rposted += *slot != NULL;
			nulls += *slot == NULL;
		}
		if (sent < MAX) {
			cr_assert_eq(abi_isend(&net, pair.scomm, &tx[sent], 4, smh, &sreq[sent]),
				     ncclSuccess);
			nulls += sreq[sent] == NULL;
			sent += sreq[sent] != NULL;
		}
		if (sdone < sent) {
			cr_assert_eq(abi_test(&net, sreq[sdone], &done, &size), ncclSuccess);
			sdone += done;
		}
		if (rdone < rposted) {
			cr_assert_eq(abi_test(&net, rreq[rdone % RWIN], &done, &size), ncclSuccess);
			if (done) {
				cr_assert_eq(size, 4);
				cr_assert_eq(rx[rdone % RWIN], tx[rdone], "message %d out of order",
					     rdone);
				rdone++;
			}
		}
	}
	cr_log_info("v%d: %d NULL requests retried", version, nulls);
	close_pair();
}
ABI_ALL_VERSIONS(full_rings)

/* One irecv of three buffers, filled by tag whatever the send order, as NCCL groups the
 * receives of one connection when maxRecvs > 1. test() must write exactly three sizes. */
static void grouped_receive(int version)
{
	static char tx[3][300], rx[3][512];
	void *data[3] = { rx[0], rx[1], rx[2] }, *mhs[3], *sreq[3] = { 0 }, *rreq = NULL, *smh;
	size_t caps[3] = { 128, 64, 512 };
	int tags[3] = { 0, 1, 2 }, order[3] = { 2, 0, 1 }, lens[3] = { 100, 0, 300 };
	int sizes[8];
	ncclNetProperties_v11_t p;

	open_pair(version);
	cr_assert_eq(abi_props(&net, 0, &p), ncclSuccess);
	if (p.maxRecvs < 3) {
		cr_log_info("maxRecvs %d: NCCL never groups receives here", p.maxRecvs);
		close_pair();
		return;
	}
	memset(tx, 0, sizeof(tx));
	for (int b = 0; b < 3; b++)
		memset(tx[b], 'a' + b, (size_t)lens[b]);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, tx, sizeof(tx), &smh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, sizeof(rx), &mhs[0]), ncclSuccess);
	mhs[1] = mhs[2] = mhs[0];
	int64_t deadline = abi_now_ms() + CONNECT_TIMEOUT_MS;
	while (!rreq) {
		cr_assert_lt(abi_now_ms(), deadline);
		cr_assert_eq(abi_irecvn(&net, pair.rcomm, 3, data, caps, tags, mhs, 1, &rreq),
			     ncclSuccess);
	}
	for (int i = 0; i < 3; i++) {
		int b = order[i];
		while (!sreq[i]) {
			cr_assert_lt(abi_now_ms(), deadline);
			cr_assert_eq(abi_isend_tag(&net, pair.scomm, tx[b], (size_t)lens[b],
						   tags[b], smh, &sreq[i]),
				     ncclSuccess);
		}
	}
	for (int i = 0; i < 8; i++)
		sizes[i] = SIZE_GUARD;
	cr_assert_eq(abi_wait(&net, rreq, sizes, STREAM_TIMEOUT_MS), ncclSuccess);
	for (int b = 0; b < 3; b++) {
		cr_assert_eq(sizes[b], lens[b], "buffer %d (tag %d): size %d", b, tags[b],
			     sizes[b]);
		for (int j = 0; j < lens[b]; j++)
			cr_assert_eq(rx[b][j], 'a' + b, "buffer %d byte %d", b, j);
	}
	for (int i = 3; i < 8; i++)
		cr_assert_eq(sizes[i], SIZE_GUARD, "test() wrote sizes[%d] of a 3-buffer receive",
			     i);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(abi_wait(&net, sreq[i], NULL, STREAM_TIMEOUT_MS), ncclSuccess);
	close_pair();
}
ABI_ALL_VERSIONS(grouped_receive)

/* NCCL tests a send with the address of a single int: test() must write that one entry. */
static void send_size_only(int version)
{
	static char tx[1000], rx[1000];
	void *smh, *rmh, *sreq = NULL, *rreq = NULL;
	struct {
		int size;
		int guard[7];
	} out;

	open_pair(version);
	cr_assert_eq(abi_reg_mr(&net, pair.scomm, tx, sizeof(tx), &smh), ncclSuccess);
	cr_assert_eq(abi_reg_mr(&net, pair.rcomm, rx, sizeof(rx), &rmh), ncclSuccess);
	int64_t deadline = abi_now_ms() + CONNECT_TIMEOUT_MS;
	while (!sreq || !rreq) {
		cr_assert_lt(abi_now_ms(), deadline);
		if (!rreq)
			cr_assert_eq(abi_irecv(&net, pair.rcomm, rx, sizeof(rx), rmh, 0, &rreq),
				     ncclSuccess);
		if (!sreq)
			cr_assert_eq(abi_isend(&net, pair.scomm, tx, 777, smh, &sreq), ncclSuccess);
	}
	out.size = SIZE_GUARD;
	for (int i = 0; i < 7; i++)
		out.guard[i] = SIZE_GUARD;
	cr_assert_eq(abi_wait(&net, sreq, &out.size, STREAM_TIMEOUT_MS), ncclSuccess);
	cr_assert_eq(out.size, 777);
	for (int i = 0; i < 7; i++)
		cr_assert_eq(out.guard[i], SIZE_GUARD, "test() of a send wrote past its size");
	cr_assert_eq(abi_wait(&net, rreq, NULL, STREAM_TIMEOUT_MS), ncclSuccess);
	close_pair();
}
ABI_ALL_VERSIONS(send_size_only)
