/* SPDX-License-Identifier: BSD-3-Clause */
/* Process faults under a live stream: SIGKILL or SIGSTOP the sender or the receiver mid-stream
 * and time how long the survivor's pending test() takes to fail; then close every object with
 * requests in flight and a dead or frozen peer, and time each close call.
 *
 * Each test forks a sender and a receiver (tests/lib/chaos_net.h); times are CLOCK_MONOTONIC,
 * shared by all processes. Lines "chaos: <test>: ..." carry the measurements. Run with
 * --jobs 1: the bounds are about time.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "chaos_fault.h"
#include "chaos_net.h"
#include "chaos_proc.h"

/* Messages each side completes before the fault, so it lands mid-stream. */
#define WARM_MSGS 16
/* The heartbeat period the transport derives from a failure timeout (FTCC_HEARTBEAT_MS
 * unset): timeout / 8, at most 100 ms. */
#define HB_MS(timeout) ((timeout) / 8 < 100 ? (timeout) / 8 : 100)

static struct chaos_pair pair;

static void chaos_teardown(void)
{
	chaos_pair_end(&pair);
	chaos_proc_cleanup();
	chaos_fault_cleanup();
}

TestSuite(chaos_proc, .fini = chaos_teardown, .timeout = 30);

/* Starts an endless stream and waits until both sides are into it. */
static void stream_start(uint64_t comm_id, bool wait_close)
{
	struct chaos_cfg cfg = { .comm_id = comm_id,
				 .deadline_ms = 20000,
				 .wait_close = wait_close };

	cr_assert_eq(chaos_pair_start(&pair, &cfg), 0, "could not start the pair");
	for (int r = 0; r < 2; r++)
		cr_assert_eq(chaos_wait_done(&pair, r, WARM_MSGS, 10000), 0, "not streaming: %s",
			     chaos_side_str(&pair, r));
}

static enum chaos_role other(enum chaos_role r)
{
	return r == CHAOS_SENDER ? CHAOS_RECEIVER : CHAOS_SENDER;
}

/* SIGKILLs @victim mid-stream: the survivor's next call must fail with ncclRemoteError within
 * 1 s, naming the lost peer. That call is usually test() of a pending request; it is isend()
 * or irecv() when every request had completed before the kill, which NCCL sees the same way. */
static void kill_mid_stream(const char *name, enum chaos_role victim, uint64_t comm_id)
{
	enum chaos_role surv = other(victim);
	struct chaos_side *s;
	static char log[1 << 16];
	int64_t t_kill;
	double ms;
	int test_err;

	chaos_env(2000);
	stream_start(comm_id, false);
	s = &pair.sh->side[surv];
	t_kill = chaos_now_ns();
	cr_assert_eq(kill(pair.pid[victim], SIGKILL), 0);
	cr_assert_eq(chaos_wait_child(&pair, victim, 2000, NULL), 0, "victim not reaped");
	cr_assert_eq(chaos_wait_err(&pair, surv, 3000), 0, "no error within 3 s: %s",
		     chaos_side_str(&pair, surv));
	ms = chaos_ms(t_kill, s->t_err_ns);
	test_err = atomic_load(&s->test_err);
	chaos_report("%s: detected in %.1f ms (first error from %s of %s: result %d; test() "
		     "result %d)",
		     name, ms, chaos_call_name(s->err_call), chaos_role_name(surv),
		     atomic_load(&s->err), test_err);
	cr_expect_eq(atomic_load(&s->err), ncclRemoteError, "%s", chaos_side_str(&pair, surv));
	cr_expect(test_err == 0 || test_err == ncclRemoteError, "%s", chaos_side_str(&pair, surv));
	cr_expect_leq(ms, 1000.0, "%s detected the kill after %.1f ms", chaos_role_name(surv), ms);
	cr_expect_eq(s->bad, 0, "%s", chaos_side_str(&pair, surv));
	chaos_pair_stderr(&pair, surv, log, sizeof(log));
	cr_expect(strstr(log, "tcp: peer") && strstr(log, "lost"),
		  "no \"peer ... lost\" warning; %s stderr:\n%s", chaos_role_name(surv), log);
}

Test(chaos_proc, kill_receiver)
{
	kill_mid_stream("kill_receiver", CHAOS_RECEIVER, 0xc4a0500000000001ull);
}

Test(chaos_proc, kill_sender)
{
	kill_mid_stream("kill_sender", CHAOS_SENDER, 0xc4a0500000000002ull);
}

/* SIGSTOPs @victim mid-stream: the survivor must fail with ncclRemoteError between
 * timeout - one heartbeat and timeout + 1 s after the stop (the stopped process is SIGKILLed
 * by the teardown), in test() of a pending request, or, when none was pending, in the next
 * isend, where NCCL's proxy sees it then (over ib a send waits for the receiver's
 * clear-to-send, so a sender whose sends all completed before the stop has none pending). */
static void freeze_mid_stream(const char *name, enum chaos_role victim, uint64_t comm_id)
{
	const int timeout = 1000;
	enum chaos_role surv = other(victim);
	struct chaos_side *s;
	int64_t t_stop;
	double ms;

	chaos_env(timeout);
	stream_start(comm_id, false);
	s = &pair.sh->side[surv];
	t_stop = chaos_now_ns();
	cr_assert_eq(kill(pair.pid[victim], SIGSTOP), 0);
	cr_assert_eq(chaos_wait_err(&pair, surv, timeout + 3000), 0, "no error: %s",
		     chaos_side_str(&pair, surv));
	if (s->err_call == CHAOS_CALL_POST && !atomic_load(&s->test_err)) {
		/* nothing pending: the failed isend is what NCCL sees */
		cr_expect_eq(atomic_load(&s->err), ncclRemoteError, "%s",
			     chaos_side_str(&pair, surv));
		ms = chaos_ms(t_stop, s->t_err_ns);
	} else {
		cr_assert_eq(chaos_wait_test_err(&pair, surv, timeout + 3000), 0,
			     "no test() error: %s", chaos_side_str(&pair, surv));
		cr_expect_eq(atomic_load(&s->test_err), ncclRemoteError, "%s",
			     chaos_side_str(&pair, surv));
		ms = chaos_ms(t_stop, s->t_test_err_ns);
	}
	chaos_report("%s: detected in %.1f ms (timeout %d ms, test() of %s: result %d; first "
		     "error from %s after %.1f ms)",
		     name, ms, timeout, chaos_role_name(surv), atomic_load(&s->test_err),
		     chaos_call_name(s->err_call), chaos_ms(t_stop, s->t_err_ns));
	cr_expect_geq(chaos_ms(t_stop, s->t_err_ns), (double)(timeout - HB_MS(timeout)),
		      "first error (from %s) after %.1f ms only", chaos_call_name(s->err_call),
		      chaos_ms(t_stop, s->t_err_ns));
	cr_expect_geq(ms, (double)(timeout - HB_MS(timeout)), "false alarm after %.1f ms", ms);
	cr_expect_leq(ms, (double)(timeout + 1000), "detected only after %.1f ms", ms);
	cr_expect_eq(s->bad, 0, "%s", chaos_side_str(&pair, surv));
}

Test(chaos_proc, freeze_receiver)
{
	freeze_mid_stream("freeze_receiver", CHAOS_RECEIVER, 0xc4a0500000000003ull);
}

Test(chaos_proc, freeze_sender)
{
	freeze_mid_stream("freeze_sender", CHAOS_SENDER, 0xc4a0500000000004ull);
}

/* Kills (@sig SIGKILL) or freezes (SIGSTOP) @victim mid-stream, then makes the survivor
 * abandon its requests in flight and close its comm, its listen comm and its ctx: each call
 * must return within 100 ms, and the process must exit cleanly. */
static void close_with_peer(const char *name, enum chaos_role victim, int sig, uint64_t comm_id)
{
	static const char *const calls[] = { "closeComm", "closeListen", "finalize" };
	enum chaos_role surv = other(victim);
	struct chaos_side *s;
	int code = -1;

	chaos_env(2000);
	stream_start(comm_id, true);
	s = &pair.sh->side[surv];
	cr_assert_eq(kill(pair.pid[victim], sig), 0);
	if (sig == SIGKILL)
		cr_assert_eq(chaos_wait_child(&pair, victim, 2000, NULL), 0, "victim not reaped");
	atomic_store(&pair.sh->close_now, 1);
	cr_assert_eq(chaos_wait_stage(&pair, surv, CHAOS_ST_CLOSED, 3000), 0, "close hung: %s",
		     chaos_side_str(&pair, surv));
	for (int i = 0; i < CHAOS_NCLOSE; i++) {
		double ms = chaos_ms(0, s->close_ns[i]);

		chaos_report("%s: %s of %s returned in %.2f ms (result %d)", name, calls[i],
			     chaos_role_name(surv), ms, s->close_res[i]);
		cr_expect_eq(s->close_res[i], ncclSuccess, "%s returned %d", calls[i],
			     s->close_res[i]);
		cr_expect_leq(ms, 100.0, "%s took %.2f ms", calls[i], ms);
	}
	cr_expect_eq(chaos_wait_child(&pair, surv, 2000, &code), 0, "survivor did not exit");
	cr_expect_eq(code, 0, "survivor exit code %d", code);
}

Test(chaos_proc, close_dead_receiver)
{
	close_with_peer("close_dead_receiver", CHAOS_RECEIVER, SIGKILL, 0xc4a0500000000005ull);
}

Test(chaos_proc, close_dead_sender)
{
	close_with_peer("close_dead_sender", CHAOS_SENDER, SIGKILL, 0xc4a0500000000006ull);
}

Test(chaos_proc, close_frozen_receiver)
{
	close_with_peer("close_frozen_receiver", CHAOS_RECEIVER, SIGSTOP, 0xc4a0500000000007ull);
}

Test(chaos_proc, close_frozen_sender)
{
	close_with_peer("close_frozen_sender", CHAOS_SENDER, SIGSTOP, 0xc4a0500000000008ull);
}
