/* SPDX-License-Identifier: BSD-3-Clause */
/* Message tests of the TCP transport, both ends in this process over lo: single and grouped
 * receives matched by tag, larger and smaller posted buffers, empty messages, ordering and
 * content over long mixed-size streams, and messages split across 1, 4 and 16 data sockets.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tcp_harness.h"

#define OPEN_MS 5000
#define MIB (1u << 20)

TestSuite(tcp_msgs, .timeout = 120);

/* Runs @o over a fresh connection and fails the test with the driver's reason. */
static void run_stream(const struct th_stream *o)
{
	struct th_pair p;
	char err[256];

	cr_assert_eq(th_pair_open(&p, 0x51, OPEN_MS), 0);
	if (th_stream_run(&p, o, err, sizeof(err))) {
		th_log_dump();
		cr_assert_fail("%s", err);
	}
	th_pair_close(&p);
}

Test(tcp_msgs, single_message_into_a_larger_buffer)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	static char out[1000], in[4096];
	struct ftcc_req *s = NULL, *r = NULL;
	size_t cap = sizeof(in), got = 0, sent = 0;
	void *b = in;
	int tag = 3;
	struct th_pair p;

	cr_assert_eq(th_pair_open(&p, 1, OPEN_MS), 0);
	th_fill(out, sizeof(out), 77);
	memset(in, 0, sizeof(in));
	cr_assert_eq(ops->isend(p.s, out, sizeof(out), tag, NULL, &s), 0);
	cr_assert_eq(ops->irecv(p.r, 1, &b, &cap, &tag, NULL, &r), 0);
	cr_assert(s && r);
	cr_assert_eq(th_wait(ops, r, &got, 5000), 0);
	cr_expect_eq(got, sizeof(out), "reported size is the sent size");
	cr_expect_eq(th_check(in, sizeof(out), 77), -1);
	cr_expect_eq(in[sizeof(out)], 0, "nothing written past the message");
	cr_assert_eq(th_wait(ops, s, &sent, 5000), 0);
	cr_expect_eq(sent, sizeof(out));
	th_pair_close(&p);
	th_stop();
}

static size_t size_small(int i)
{
	return (size_t)(i * 37 % 3000);
}

/* n = 1..8 buffers per receive, each group's messages sent in another order of tags, every
 * buffer larger than its message. */
Test(tcp_msgs, multi_receive_matches_tags)
{
	th_start(NULL);
	for (int n = 1; n <= FTCC_MAX_RECVS; n++) {
		struct th_stream o = { .nmsg = n * 12,
				       .window = 16,
				       .recv_n = n,
				       .extra_cap = 64,
				       .size_of = size_small,
				       .timeout_ms = 20000 };

		run_stream(&o);
	}
	th_stop();
}

/* With one tag on every buffer, messages fill the buffers in posting order. */
Test(tcp_msgs, multi_receive_same_tags_in_posting_order)
{
	th_start(NULL);
	for (int n = 2; n <= FTCC_MAX_RECVS; n += 3) {
		struct th_stream o = { .nmsg = n * 10,
				       .window = 24,
				       .recv_n = n,
				       .same_tags = 1,
				       .size_of = size_small,
				       .timeout_ms = 20000 };

		run_stream(&o);
	}
	th_stop();
}

Test(tcp_msgs, truncation_fails_the_receive)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	static char out[1000], in[100];
	struct ftcc_req *s = NULL, *r = NULL;
	size_t cap = sizeof(in);
	void *b = in;
	int tag = 0;
	struct th_pair p;

	cr_assert_eq(th_pair_open(&p, 2, OPEN_MS), 0);
	cr_assert_eq(ops->irecv(p.r, 1, &b, &cap, &tag, NULL, &r), 0);
	cr_assert_eq(ops->isend(p.s, out, sizeof(out), tag, NULL, &s), 0);
	cr_assert(s && r);
	cr_expect_eq(th_wait(ops, r, NULL, 5000), -EMSGSIZE);
	cr_expect_gt(th_log_count("truncated"), 0);
	th_pair_close(&p);
	th_stop();
}

static size_t size_zero(int i)
{
	return 0;
}

static size_t size_zero_or_not(int i)
{
	return i % 3 ? 0 : (size_t)(i * 1021 % (3 * MIB));
}

Test(tcp_msgs, empty_messages)
{
	struct th_stream zeros = { .nmsg = 64,
				   .window = 16,
				   .recv_n = 1,
				   .extra_cap = 8,
				   .size_of = size_zero,
				   .timeout_ms = 20000 };
	struct th_stream mixed = { .nmsg = 96,
				   .window = 8,
				   .recv_n = 4,
				   .size_of = size_zero_or_not,
				   .timeout_ms = 30000 };

	th_start(NULL);
	run_stream(&zeros);
	run_stream(&mixed);
	th_stop();
}

/* Log-uniform sizes from 1 B to 4 MiB, with the edges and chunk boundaries mixed in. */
static size_t size_mixed(int i)
{
	static const size_t edges[] = { 1, 4 * MIB, 131072, 131073, 262143, 4 * MIB - 1 };
	uint64_t x = (uint64_t)i * 0x9e3779b97f4a7c15ull;

	if (i % 11 == 0)
		return edges[(i / 11) % 6];
	x ^= x >> 29;
	return ((size_t)1 << (x % 22)) + (size_t)((x >> 8) % ((size_t)1 << (x % 22)));
}

Test(tcp_msgs, ordering_over_500_mixed_messages)
{
	struct th_stream o = {
		.nmsg = 500, .window = 8, .recv_n = 1, .size_of = size_mixed, .timeout_ms = 90000
	};

	th_start(NULL);
	run_stream(&o);
	o.recv_n = 2; /* and grouped, tags crossing */
	o.nmsg = 200;
	run_stream(&o);
	th_stop();
}

static size_t size_up_to_mib(int i)
{
	return (size_t)((uint64_t)i * 2654435761u % MIB) + 1;
}

/* Runs a split-heavy stream with @nstreams data sockets and 4 KiB minimum chunks. */
static void split_streams(const char *nstreams)
{
	char env[64];
	struct th_stream o = { .nmsg = 240,
			       .window = 12,
			       .recv_n = 3,
			       .extra_cap = 5,
			       .size_of = size_up_to_mib,
			       .timeout_ms = 60000 };

	snprintf(env, sizeof(env), "FTCC_NSTREAMS=%s", nstreams);
	th_start((const char *const[]){ env, "FTCC_MIN_CHUNK_BYTES=4096", NULL });
	run_stream(&o);
	th_stop();
}

Test(tcp_msgs, one_stream)
{
	split_streams("1");
}

Test(tcp_msgs, four_streams_small_chunks)
{
	split_streams("4");
}

Test(tcp_msgs, sixteen_streams_small_chunks)
{
	split_streams("16");
}
