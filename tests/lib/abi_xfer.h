/* SPDX-License-Identifier: BSD-3-Clause */
/* Connections and message streams over a loaded net table, for the ABI tests.
 *
 * Everything here polls non-blockingly, as NCCL's proxy threads do, and gives up at a
 * deadline: no helper can hang a test.
 */
#ifndef FTCC_TESTS_ABI_XFER_H
#define FTCC_TESTS_ABI_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "abi_net.h"

/* A connected send/receive pair on one device, plus the listen comm it came from. */
struct abi_pair {
	struct abi_net *net;
	void *lcomm;
	void *scomm;
	void *rcomm;
	char handle[NCCL_NET_HANDLE_MAXSIZE];
};

/* Listens on @dev, then polls connect and accept in turn until both comms exist. 0, or -1
 * with a description in @err (a failed call or the deadline). */
int abi_pair_open(struct abi_net *net, int dev, struct abi_pair *p, int timeout_ms, char *err,
		  size_t errlen);
/* Closes the send, receive and listen comms that exist; returns the first failure. */
ncclResult_t abi_pair_close(struct abi_pair *p);

/* Polls connect (send side) or accept (receive side) of one end until its comm exists. */
int abi_connect_poll(struct abi_net *net, int dev, void *handle, void **scomm, int timeout_ms);
int abi_accept_poll(struct abi_net *net, void *lcomm, void **rcomm, int timeout_ms);

/* Polls @req until done; @size gets the reported size. Returns the first non-success result,
 * or ncclInProgress at the deadline. */
ncclResult_t abi_wait(struct abi_net *net, void *req, int *size, int timeout_ms);

/* One message of @size from @tx (registered as @smh) on p->scomm into @rx (@rmh) on p->rcomm:
 * posts both (again while the plug-in answers "not now"), then waits for both. *got gets the
 * receive's size, *wait_ms the time from both posted to both done. 0, or -1 with a
 * description in @err (a failed call or the deadline). */
int abi_xfer_one(struct abi_pair *p, void *tx, void *smh, void *rx, void *rmh, size_t size,
		 int timeout_ms, int *got, int64_t *wait_ms, char *err, size_t errlen);

/* Parameters of a stream of messages from scomm to rcomm. */
struct abi_stream {
	const size_t *sizes; /* size of each message sent */
	int count;
	int window;	   /* most requests in flight per side, 1..8 */
	size_t recv_slack; /* each receive posts this many bytes more than will arrive */
	int timeout_ms;
	/* Filled in: isend / irecv calls that returned a NULL request and were retried. */
	long send_retries;
	long recv_retries;
};

/* Sends every message of @s in order with up to s->window requests in flight per side,
 * retrying NULL requests, testing the oldest request first (as NCCL does), and checks each
 * received size and byte. Buffers are registered with regMr. A NULL p->scomm or p->rcomm
 * runs only the other side (its peer is in another process). 0, or -1 with @err set. */
int abi_stream_run(struct abi_pair *p, struct abi_stream *s, char *err, size_t errlen);

/* Byte @i of message @seq: differs between neighbouring messages and offsets, so reordering,
 * truncation or a shifted copy is caught. */
static inline uint8_t abi_pattern(uint64_t seq, size_t i)
{
	return (uint8_t)(seq * 131u + i * 7u + (i >> 9) + 1u);
}

#endif
