/* SPDX-License-Identifier: BSD-3-Clause */
/* Fault tests of the TCP transport without root: FTCC_INJECT fails syscall wrappers in the
 * middle of a message stream (sender data sockets, receiver data sockets, control sockets,
 * and the redial itself). The connection must be restored: every message arrives exactly
 * once, in order, intact, no request fails, and the restore is logged.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "ftcc/settings.h"
#include "tcp_harness.h"

#define OPEN_MS 5000
#define MIB (1u << 20)
#define MAX_SHOTS 4

TestSuite(tcp_faults, .timeout = 120);

/* Injections to arm: spec[k] just before message at[k] is posted. */
struct plan {
	const char *spec[MAX_SHOTS];
	int at[MAX_SHOTS];
};

static void plan_arm(int i, void *arg)
{
	const struct plan *pl = arg;

	for (int k = 0; k < MAX_SHOTS && pl->spec[k]; k++)
		if (pl->at[k] == i)
			cr_assert_eq(ftcc_settings_set(FTCC_SET_INJECT, pl->spec[k]), 0, "%s",
				     pl->spec[k]);
}

/* Up to 1 MiB, 4 MiB every 37th: big messages are in flight when a fault hits. */
static size_t size_fault(int i)
{
	uint64_t x = (uint64_t)(i + 1) * 0x9e3779b97f4a7c15ull;

	if (i % 37 == 5)
		return 4 * MIB;
	x ^= x >> 31;
	return (size_t)1 << (x % 21) | (size_t)(x >> 40) % 4096;
}

static const char *const default_env[] = { "FTCC_FAILURE_TIMEOUT_MS=3000", NULL };

/* Counts the injected failures of the log; every one must have hit by the end. */
static int fired(void)
{
	return th_log_count("FTCC_INJECT: failing");
}

/* The transport saw no loss, and restored the connection whenever a fault was injected. */
static void expect_restored(int faults)
{
	int restored = th_log_count("restored after");

	if (th_log_count(" lost: ") || (faults && !restored))
		th_log_dump();
	cr_expect_eq(th_log_count(" lost: "), 0, "the connection was declared lost");
	if (faults)
		cr_expect_gt(restored, 0, "%d faults injected, no restore logged", faults);
}

/* Runs a 300-message stream over a fresh connection with @pl armed along the way. */
static void stream_with_faults(const char *const *env, const struct plan *pl, int recv_n,
			       int want_fired)
{
	struct th_stream o = { .nmsg = 300,
			       .window = 8,
			       .recv_n = recv_n,
			       .extra_cap = 3,
			       .size_of = size_fault,
			       .at = plan_arm,
			       .arg = (void *)pl,
			       .timeout_ms = 60000 };
	struct th_pair p;
	char err[256];

	th_start(env ? env : default_env);
	cr_assert_eq(th_pair_open(&p, 0xfa, OPEN_MS), 0);
	if (th_stream_run(&p, &o, err, sizeof(err))) {
		th_log_dump();
		cr_assert_fail("%s", err);
	}
	cr_expect_eq(fired(), want_fired, "injections armed but not all fired, or fired twice");
	expect_restored(fired());
	th_pair_close(&p);
	th_stop();
}

/* send: control sockets (acks, heartbeats, hellos) of either side. */
Test(tcp_faults, control_send_once)
{
	stream_with_faults(NULL, &(struct plan){ { "send:1" }, { 100 } }, 1, 1);
}

Test(tcp_faults, control_send_repeatedly_during_restore)
{
	stream_with_faults(NULL, &(struct plan){ { "send:4" }, { 60 } }, 1, 4);
}

/* sendv: the sender's data sockets only. */
Test(tcp_faults, sender_data_sendv_once)
{
	stream_with_faults(NULL, &(struct plan){ { "sendv:1" }, { 100 } }, 1, 1);
}

Test(tcp_faults, sender_data_sendv_three)
{
	stream_with_faults(NULL, &(struct plan){ { "sendv:3" }, { 100 } }, 2, 3);
}

/* recv: mostly the receiver's data sockets, which read the most. */
Test(tcp_faults, receiver_data_recv_two)
{
	stream_with_faults(NULL, &(struct plan){ { "recv:2" }, { 100 } }, 1, 2);
}

Test(tcp_faults, receiver_data_recv_five)
{
	stream_with_faults(NULL, &(struct plan){ { "recv:5" }, { 150 } }, 3, 5);
}

/* recvv: no TCP path reads through ftcc_sys_recvv today, so nothing fires; the stream must
 * be intact either way, and restored if it ever does fire. */
Test(tcp_faults, recvv_once)
{
	stream_with_faults(NULL, &(struct plan){ { "recvv:1" }, { 100 } }, 1, 0);
}

Test(tcp_faults, faults_at_several_points)
{
	struct plan pl = { { "sendv:1", "recv:1", "send:1", "sendv:2,recv:2" },
			   { 40, 110, 180, 250 } };

	stream_with_faults(NULL, &pl, 2, 7);
}

/* The redial's own connect, socket and accept calls fail too: the sender backs off and
 * tries again. */
Test(tcp_faults, redial_fails_then_succeeds)
{
	struct plan pl = { { "sendv:1,connect:2", "recv:1,socket:2", "sendv:1,accept:1" },
			   { 50, 150, 250 } };

	stream_with_faults(NULL, &pl, 1, 8);
}

/* Messages split over 4 streams in 4 KiB pieces: a fault leaves partial messages on several
 * sockets, which the receiver must reset and the sender resend whole. */
Test(tcp_faults, split_messages_over_four_streams)
{
	static const char *const env[] = { "FTCC_FAILURE_TIMEOUT_MS=3000", "FTCC_NSTREAMS=4",
					   "FTCC_MIN_CHUNK_BYTES=4096", NULL };
	struct plan pl = { { "sendv:1", "recv:3", "sendv:2" }, { 60, 140, 220 } };

	stream_with_faults(env, &pl, 4, 6);
}

Test(tcp_faults, single_stream)
{
	static const char *const env[] = { "FTCC_FAILURE_TIMEOUT_MS=3000", "FTCC_NSTREAMS=1",
					   NULL };
	struct plan pl = { { "sendv:1", "recv:1" }, { 80, 200 } };

	stream_with_faults(env, &pl, 1, 2);
}

static size_t size_small(int i)
{
	return (size_t)(i * 613 % 70000);
}

/* Faults while the connection is idle hit the control sockets (heartbeats) and then the
 * handshake of the restore itself. An idle connection must be restored too, and stay usable
 * longer than FTCC_FAILURE_TIMEOUT_MS afterwards. */
Test(tcp_faults, idle_control_faults)
{
	static const char *const env[] = { "FTCC_FAILURE_TIMEOUT_MS=1000", NULL };
	static const char *const specs[] = { "recv:1", "send:1", "recv:2",
					     "send:2", "recv:3", "recv:4" };
	struct th_stream o = {
		.nmsg = 40, .window = 8, .recv_n = 1, .size_of = size_small, .timeout_ms = 20000
	};
	struct th_pair p;
	char err[256];

	th_start(env);
	cr_assert_eq(th_pair_open(&p, 0x1d, OPEN_MS), 0);
	for (size_t k = 0; k < sizeof(specs) / sizeof(specs[0]); k++) {
		int before = fired();

		cr_assert_eq(th_stream_run(&p, &o, err, sizeof(err)), 0, "before %s: %s", specs[k],
			     err);
		cr_assert_eq(ftcc_settings_set(FTCC_SET_INJECT, specs[k]), 0);
		usleep(1500 * 1000); /* heartbeats flow; longer than the failure timeout */
		cr_expect_gt(fired(), before, "%s did not fire while idle", specs[k]);
		if (th_log_count(" lost: "))
			th_log_dump();
		cr_assert_eq(th_log_count(" lost: "), 0, "idle connection lost after %s", specs[k]);
		cr_assert_eq(th_stream_run(&p, &o, err, sizeof(err)), 0, "after %s: %s", specs[k],
			     err);
	}
	expect_restored(fired());
	th_pair_close(&p);
	th_stop();
}

/* The caller polls a connection, a send fault redials it inside the caller's own call, and the
 * caller then goes idle: the engine must still finish the redial it left (connect completion,
 * WELCOME), or the connection dies at its reconnect deadline with no fault left to blame. */
Test(tcp_faults, fault_while_caller_polls_then_idles)
{
	static const char *const env[] = { "FTCC_FAILURE_TIMEOUT_MS=1000", "FTCC_EAGER_MAX_BYTES=0",
					   NULL };
	const struct ftcc_transport_ops *ops = th_start(env);
	static char a[1000], b[1024], ra[1000], rb[1024];
	struct ftcc_req *sa = NULL, *sb = NULL, *rr = NULL;
	void *bufs[2] = { ra, rb };
	size_t caps[2] = { sizeof(ra), sizeof(rb) }, got[2];
	int tags[2] = { 1, 2 }, done = 0;
	struct th_pair p;

	cr_assert_eq(th_pair_open(&p, 0x90, OPEN_MS), 0);
	th_fill(b, sizeof(b), 9);
	cr_assert_eq(ops->isend(p.s, a, sizeof(a), 1, NULL, &sa), 0);
	cr_assert_not_null(sa);
	cr_assert_eq(ops->test(sa, &done, NULL), 0); /* the caller is polling this connection */
	cr_assert_eq(done, 0, "no receive posted yet");
	cr_assert_eq(ftcc_settings_set(FTCC_SET_INJECT, "sendv:1"), 0);
	cr_assert_eq(ops->isend(p.s, b, sizeof(b), 2, NULL, &sb), 0); /* faults and redials */
	cr_assert_not_null(sb);
	usleep(1500 * 1000); /* idle, longer than the reconnect deadline */
	cr_expect_eq(fired(), 1);
	if (th_log_count(" lost: "))
		th_log_dump();
	cr_assert_eq(th_log_count(" lost: "), 0, "connection lost while the caller was idle");
	cr_assert_eq(ops->irecv(p.r, 2, bufs, caps, tags, NULL, &rr), 0);
	cr_assert_not_null(rr);
	cr_assert_eq(th_wait(ops, rr, got, 5000), 0);
	cr_expect_eq(got[0], sizeof(a));
	cr_expect_eq(got[1], sizeof(b));
	cr_expect_eq(th_check(rb, sizeof(rb), 9), -1);
	cr_expect_eq(th_wait(ops, sa, NULL, 5000), 0);
	cr_expect_eq(th_wait(ops, sb, NULL, 5000), 0);
	expect_restored(fired());
	th_pair_close(&p);
	th_stop();
}
