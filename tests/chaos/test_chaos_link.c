/* SPDX-License-Identifier: BSD-3-Clause */
/* Link faults under a live stream, both processes alive: a link that silently drops every
 * packet (must be detected within the failure timeout), transient resets of one data socket or
 * of the control socket (must be repaired with no error and every message delivered exactly
 * once, in order, intact), and a loaded machine with a short timeout (must not raise a false
 * alarm).
 *
 * Faults come from nftables rules and `ss -K` (tests/lib/chaos_fault.h); needs root. Lines
 * "chaos: <test>: ..." carry the measurements. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <string.h>

#include "chaos_fault.h"
#include "chaos_net.h"
#include "chaos_proc.h"

#define WARM_MSGS 16
#define HB_MS(timeout) ((timeout) / 8 < 100 ? (timeout) / 8 : 100)
/* Messages of a reset test: enough that the fault lands well inside the stream. */
#define RESET_MSGS 1200
/* Sockets of one connection: control + FTCC_NSTREAMS (2, chaos_env) data sockets. */
#define CONN_SOCKETS 3

static struct chaos_pair pair;

static void chaos_teardown(void)
{
	chaos_pair_end(&pair);
	chaos_proc_cleanup();
	chaos_fault_cleanup();
}

TestSuite(chaos_link, .fini = chaos_teardown, .timeout = 40);

static void need_nft(void)
{
	char why[256];

	if (!chaos_nft_usable(why, sizeof(why)))
		cr_skip_test("nftables not usable: %s", why);
	chaos_nft_sweep();
}

static void stream_start(const struct chaos_cfg *cfg)
{
	cr_assert_eq(chaos_pair_start(&pair, cfg), 0, "could not start the pair");
	for (int r = 0; r < 2; r++)
		cr_assert_eq(chaos_wait_done(&pair, r, WARM_MSGS, 10000), 0, "not streaming: %s",
			     chaos_side_str(&pair, r));
}

static uint16_t receiver_port(void)
{
	uint16_t port = 0;

	cr_assert_eq(chaos_handle_port(&pair, &port), 0, "no handle");
	return port;
}

/* Every TCP packet to or from the receiver's engine port is dropped: both sides must fail
 * with ncclRemoteError between timeout - one heartbeat and timeout + 1 s, and the rules must
 * go away. The failing call is test() of a pending request, or isend()/irecv() when nothing
 * was pending (over ib a send is pending only against a posted receive), which NCCL sees the
 * same way. */
Test(chaos_link, drop_all_packets)
{
	const int timeout = 1000;
	struct chaos_cfg cfg = { .comm_id = 0xc4a0510000000001ull, .deadline_ms = 20000 };
	char table[32];
	int64_t t_before, t_after;
	uint16_t port;

	need_nft();
	chaos_env(timeout);
	stream_start(&cfg);
	port = receiver_port();
	cr_assert_eq(chaos_nft_table(table, sizeof(table)), 0, "nft table");
	/* All sockets of the connection end at the receiver's engine port: the sender dials it
	 * for the control and every data socket. */
	t_before = chaos_now_ns();
	cr_assert_eq(chaos_nft_drop_port(table, port), 0, "nft drop rules");
	t_after = chaos_now_ns();
	for (int r = 0; r < 2; r++) {
		struct chaos_side *s = &pair.sh->side[r];
		double hi, lo;

		cr_assert_eq(chaos_wait_err(&pair, r, timeout + 3000), 0, "no error: %s",
			     chaos_side_str(&pair, r));
		hi = chaos_ms(t_before, s->t_err_ns);
		lo = chaos_ms(t_after, s->t_err_ns);
		chaos_report("drop_all_packets: %s detected in %.1f ms (rules took %.1f ms to "
			     "install; timeout %d ms, result %d from %s)",
			     chaos_role_name(r), hi, chaos_ms(t_before, t_after), timeout,
			     atomic_load(&s->err), chaos_call_name(s->err_call));
		cr_expect_eq(atomic_load(&s->err), ncclRemoteError, "%s", chaos_side_str(&pair, r));
		cr_expect(atomic_load(&s->test_err) == 0 ||
				  atomic_load(&s->test_err) == ncclRemoteError,
			  "%s", chaos_side_str(&pair, r));
		cr_expect_leq(hi, (double)(timeout + 1000), "%s detected after %.1f ms",
			      chaos_role_name(r), hi);
		cr_expect_geq(chaos_ms(t_after, s->t_err_ns), (double)(timeout - HB_MS(timeout)),
			      "%s: false alarm after %.1f ms", chaos_role_name(r), lo);
		cr_expect_eq(s->bad, 0, "%s", chaos_side_str(&pair, r));
	}
	cr_expect_eq(chaos_nft_delete(table), 0, "nft delete table %s", table);
	cr_expect_eq(chaos_nft_exists(table), 0, "table %s still there", table);
}

enum reset_how { RESET_DATA, RESET_CTRL, RESET_NFT };

/* The sender's sockets to the receiver's engine port; the control socket is the one that has
 * sent the fewest bytes (hello and heartbeats), the busiest is a data socket. */
static void find_flows(uint16_t port, struct chaos_flow *flows, struct chaos_flow **ctrl,
		       struct chaos_flow **data)
{
	int n = chaos_flows(pair.pid[CHAOS_SENDER], port, flows, 8);

	cr_assert_eq(n, CONN_SOCKETS, "sender has %d sockets to port %u, expected %d", n, port,
		     CONN_SOCKETS);
	*ctrl = *data = &flows[0];
	for (int i = 1; i < n; i++) {
		if (flows[i].bytes_sent < (*ctrl)->bytes_sent)
			*ctrl = &flows[i];
		if (flows[i].bytes_sent > (*data)->bytes_sent)
			*data = &flows[i];
	}
	cr_assert_neq(*ctrl, *data, "control and data sockets not told apart");
}

/* Waits until the sender again has a full set of sockets to @port, none of them one of
 * @old: the connection was rebuilt. Returns when that was seen, or 0 if never. */
static int64_t wait_rebuilt(uint16_t port, const struct chaos_flow *old, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;

	while (chaos_now_ns() < deadline) {
		struct chaos_flow now[8];
		int n = chaos_flows(pair.pid[CHAOS_SENDER], port, now, 8), reused = 0;

		for (int i = 0; i < n; i++)
			for (int j = 0; j < CONN_SOCKETS; j++)
				reused |= now[i].lport == old[j].lport;
		if (n == CONN_SOCKETS && !reused)
			return chaos_now_ns();
		chaos_sleep_ms(5);
	}
	return 0;
}

static void inject(enum reset_how how, uint16_t port, const struct chaos_flow *ctrl,
		   const struct chaos_flow *data)
{
	char table[32];
	long rule;

	switch (how) {
	case RESET_DATA: /* the sender's end of a data socket; the kernel resets the other */
		cr_assert_eq(chaos_flow_kill(data->lport, port), 0, "ss -K data socket");
		break;
	case RESET_CTRL: /* the receiver's end of the control socket */
		cr_assert_eq(chaos_flow_kill(port, ctrl->lport), 0, "ss -K control socket");
		break;
	case RESET_NFT: /* every packet the data socket sends is answered with a reset */
		cr_assert_eq(chaos_nft_table(table, sizeof(table)), 0, "nft table");
		rule = chaos_nft_reset_sport(table, data->lport);
		cr_assert_geq(rule, 0, "nft reset rule");
		chaos_sleep_ms(200);
		cr_assert_eq(chaos_nft_del_rule(table, rule), 0, "nft delete rule");
		cr_assert_eq(chaos_nft_delete(table), 0, "nft delete table");
		break;
	}
}

/* Resets part of the connection mid-stream: no error may surface anywhere, the connection
 * must be rebuilt, and every message must arrive exactly once, in order and intact. */
static void reset_mid_stream(const char *name, enum reset_how how, uint64_t comm_id)
{
	struct chaos_cfg cfg = {
		.comm_id = comm_id, .count = RESET_MSGS, .deadline_ms = 30000, .wait_close = true
	};
	struct chaos_flow flows[8], *ctrl, *data;
	static char log[1 << 16];
	char why[256];
	int64_t t_fault, t_injected, t_rebuilt;
	long at;
	uint16_t port;

	if (how == RESET_NFT)
		need_nft();
	chaos_env(2000);
	stream_start(&cfg);
	port = receiver_port();
	find_flows(port, flows, &ctrl, &data);
	at = atomic_load(&pair.sh->side[CHAOS_RECEIVER].done);
	t_fault = chaos_now_ns();
	inject(how, port, ctrl, data);
	t_injected = chaos_now_ns();
	t_rebuilt = wait_rebuilt(port, flows, 5000);
	for (int r = 0; r < 2; r++)
		cr_assert_eq(chaos_wait_stage(&pair, r, CHAOS_ST_STREAMED, 20000), 0,
			     "stream did not end: %s", chaos_side_str(&pair, r));
	/* ss polls are slow (tens of ms): "seen rebuilt" is only an upper bound; the stall is
	 * the measure of the repair. */
	chaos_report("%s: fault at message %ld of %d (injection took %.1f ms); sockets seen "
		     "replaced %.1f ms after it; stall %.1f ms (receiver), %.1f ms (sender)",
		     name, at, RESET_MSGS, chaos_ms(t_fault, t_injected),
		     t_rebuilt ? chaos_ms(t_injected, t_rebuilt) : -1.0,
		     chaos_ms(0, pair.sh->side[CHAOS_RECEIVER].max_gap_ns),
		     chaos_ms(0, pair.sh->side[CHAOS_SENDER].max_gap_ns));
	cr_expect_lt(at, RESET_MSGS - 100, "the fault did not land mid-stream");
	cr_expect_neq(t_rebuilt, 0, "the sender's sockets were not replaced");
	for (int r = 0; r < 2; r++) {
		struct chaos_side *s = &pair.sh->side[r];

		cr_expect_eq(atomic_load(&s->err), 0, "%s", chaos_side_str(&pair, r));
		cr_expect_eq(atomic_load(&s->done), RESET_MSGS, "%s", chaos_side_str(&pair, r));
		cr_expect_eq(s->bad, 0, "%s", chaos_side_str(&pair, r));
		chaos_pair_stderr(&pair, r, log, sizeof(log));
		cr_expect_eq(chaos_count(log, " WARN "), 0, "%s warned:\n%s", chaos_role_name(r),
			     log);
	}
	cr_expect_eq(atomic_load(&pair.sh->sent_total), RESET_MSGS);
	cr_expect_eq(chaos_pair_finish(&pair, 3000, why, sizeof(why)), 0, "%s", why);
}

Test(chaos_link, reset_data_socket)
{
	reset_mid_stream("reset_data_socket", RESET_DATA, 0xc4a0510000000002ull);
}

Test(chaos_link, reset_control_socket)
{
	reset_mid_stream("reset_control_socket", RESET_CTRL, 0xc4a0510000000003ull);
}

Test(chaos_link, reset_by_nft_reject)
{
	reset_mid_stream("reset_by_nft_reject", RESET_NFT, 0xc4a0510000000004ull);
}

/* Polls until either side's test() failed or both streamed every message, or @deadline (ns).
 * Whether it settled. */
static int wait_settled(int64_t deadline)
{
	int settled = 0;

	while (!settled && chaos_now_ns() < deadline) {
		settled = atomic_load(&pair.sh->side[0].test_err) ||
			  atomic_load(&pair.sh->side[1].test_err) ||
			  (atomic_load(&pair.sh->side[0].stage) >= CHAOS_ST_STREAMED &&
			   atomic_load(&pair.sh->side[1].stage) >= CHAOS_ST_STREAMED);
		if (!settled)
			chaos_sleep_ms(1);
	}
	return settled;
}

/* One data socket's packets vanish (a black-holed path, as a bad ECMP route does to one flow)
 * while the control socket stays healthy: the stream must not stall silently. Within the
 * failure timeout + 1 s either the connection is repaired (the stream completed, or moves again
 * while the flow stays dropped, and then completes) or the pending requests fail with
 * ncclRemoteError. */
Test(chaos_link, blackhole_one_data_flow)
{
	const int timeout = 1000;
	struct chaos_cfg cfg = { .comm_id = 0xc4a0510000000006ull,
				 .count = RESET_MSGS,
				 .deadline_ms = 30000,
				 .wait_close = true };
	struct chaos_flow flows[8], *ctrl, *data;
	char table[32];
	int64_t t_fault, deadline;
	long at, d0;
	uint16_t port;
	int settled = 0, moving = 0;

	need_nft();
	chaos_env(timeout);
	stream_start(&cfg);
	port = receiver_port();
	find_flows(port, flows, &ctrl, &data);
	cr_assert_eq(chaos_nft_table(table, sizeof(table)), 0, "nft table");
	at = atomic_load(&pair.sh->side[CHAOS_RECEIVER].done);
	t_fault = chaos_now_ns();
	cr_assert_eq(chaos_nft_drop_port(table, data->lport), 0, "nft drop rules");
	deadline = t_fault + (int64_t)(timeout + 1000) * 1000000;
	settled = wait_settled(deadline);
	if (!settled) {
		/* Repaired but not done yet (a slow host, a sanitizer): the stream must be moving,
		 * which it cannot do over the dropped flow, and then finish. Every message
		 * received already (only the stream's close left) is as good as moving. */
		d0 = atomic_load(&pair.sh->side[CHAOS_RECEIVER].done);
		chaos_sleep_ms(200);
		moving = atomic_load(&pair.sh->side[CHAOS_RECEIVER].done) > d0 ||
			 d0 == (long)cfg.count;
		deadline = t_fault + (int64_t)cfg.deadline_ms * 1000000;
		if (moving)
			settled = wait_settled(deadline);
	}
	chaos_report("blackhole_one_data_flow: fault at message %ld; %s after %.1f ms; received "
		     "%ld, sent %ld; %s; %s",
		     at,
		     settled ? (moving ? "moving at the bound, then settled" : "settled") :
			       "still stalled",
		     chaos_ms(t_fault, chaos_now_ns()),
		     atomic_load(&pair.sh->side[CHAOS_RECEIVER].done),
		     atomic_load(&pair.sh->side[CHAOS_SENDER].done),
		     chaos_side_str(&pair, CHAOS_SENDER), chaos_side_str(&pair, CHAOS_RECEIVER));
	cr_expect(settled,
		  "the stream stalled %d ms with no error and no repair (stuck at %ld "
		  "of %d messages)",
		  timeout + 1000, atomic_load(&pair.sh->side[CHAOS_RECEIVER].done), RESET_MSGS);
	for (int r = 0; r < 2; r++) {
		struct chaos_side *s = &pair.sh->side[r];

		cr_expect(!atomic_load(&s->test_err) ||
				  atomic_load(&s->test_err) == ncclRemoteError,
			  "%s", chaos_side_str(&pair, r));
		cr_expect_eq(s->bad, 0, "%s", chaos_side_str(&pair, r));
	}
	cr_expect_eq(chaos_nft_delete(table), 0, "nft delete table %s", table);
}

/* FTCC_FAILURE_TIMEOUT_MS=200 while two spinning processes compete for the two cores with a
 * 10 s stream: no side may declare its peer dead. */
Test(chaos_link, loaded_short_timeout)
{
	const int timeout = 200, load_ms = 10000;
	struct chaos_cfg cfg = { .comm_id = 0xc4a0510000000005ull, .deadline_ms = 30000 };
	int64_t t0, t_end, oversleep_ns = 0;
	pid_t hogs[2];

	chaos_env(timeout);
	stream_start(&cfg);
	cr_assert_eq(chaos_hogs_start(2, hogs), 0, "could not start the hogs");
	t0 = chaos_now_ns();
	t_end = t0 + (int64_t)load_ms * 1000000;
	/* The longest this process overslept a 10 ms nap: how starved a thread can get here. */
	while (chaos_now_ns() < t_end && !atomic_load(&pair.sh->side[0].err) &&
	       !atomic_load(&pair.sh->side[1].err)) {
		int64_t t = chaos_now_ns();

		chaos_sleep_ms(10);
		t = chaos_now_ns() - t - 10000000;
		oversleep_ns = t > oversleep_ns ? t : oversleep_ns;
	}
	atomic_store(&pair.sh->stop, 1);
	for (int r = 0; r < 2; r++)
		cr_expect_eq(chaos_wait_stage(&pair, r, CHAOS_ST_STREAMED, 10000), 0,
			     "stream did not end: %s", chaos_side_str(&pair, r));
	for (int i = 0; i < 2; i++)
		chaos_kill(hogs[i]);
	chaos_report("loaded_short_timeout: %ld messages in %.0f ms under 2 hogs (%.0f MiB/s); "
		     "longest gap %.1f ms (receiver), %.1f ms (sender); timeout %d ms; the test "
		     "process overslept a 10 ms nap by up to %.1f ms",
		     atomic_load(&pair.sh->side[CHAOS_RECEIVER].done), chaos_ms(t0, chaos_now_ns()),
		     atomic_load(&pair.sh->side[CHAOS_RECEIVER].done) * 1000.0 /
			     chaos_ms(t0, chaos_now_ns()),
		     chaos_ms(0, pair.sh->side[CHAOS_RECEIVER].max_gap_ns),
		     chaos_ms(0, pair.sh->side[CHAOS_SENDER].max_gap_ns), timeout,
		     chaos_ms(0, oversleep_ns));
	for (int r = 0; r < 2; r++) {
		struct chaos_side *s = &pair.sh->side[r];
		static char log[1 << 16];

		chaos_pair_stderr(&pair, r, log, sizeof(log));
		cr_expect_eq(atomic_load(&s->err), 0, "false alarm after %.1f ms: %s; stderr:\n%s",
			     chaos_ms(t0, s->t_err_ns), chaos_side_str(&pair, r), log);
		cr_expect_eq(s->bad, 0, "%s", chaos_side_str(&pair, r));
	}
	cr_expect_geq(atomic_load(&pair.sh->sent_total), WARM_MSGS, "the sender did not finish");
	cr_expect_eq(atomic_load(&pair.sh->side[CHAOS_RECEIVER].done),
		     atomic_load(&pair.sh->sent_total), "received %ld of %ld",
		     atomic_load(&pair.sh->side[CHAOS_RECEIVER].done),
		     atomic_load(&pair.sh->sent_total));
}
