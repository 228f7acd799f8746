/* SPDX-License-Identifier: BSD-3-Clause */
/* Faults of the InfiniBand data path under a live stream, over the verbs emulator: queue-pair
 * errors while both processes live (every QP of a process fails at once, as a link error does;
 * then a wire blackout longer than the QP timeout) must be hidden, with every message
 * delivered once, in order and intact; a port that goes down and stays down must fail both
 * sides within the failure timeout, never hang them.
 *
 * Faults come from the emulator (IBEMU_INJECT="fault@N": after this process's Nth data
 * packet). These tests force the ib transport whatever FTCC_TEST_TRANSPORT says. Lines
 * "chaos: <test>: ..." carry the measurements. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "chaos_fault.h"
#include "chaos_net.h"
#include "chaos_proc.h"

#ifdef FTCC_IBEMU_PATH

#define IB_MSGS 1200

static struct chaos_pair pair;

static void chaos_teardown(void)
{
	chaos_pair_end(&pair);
	chaos_proc_cleanup();
	unsetenv("IBEMU_INJECT");
	unsetenv("FTCC_IB_TIMEOUT");
	unsetenv("FTCC_IB_QPS_PER_CONN");
}

TestSuite(chaos_ib, .fini = chaos_teardown, .timeout = 60);

/* The children run over the emulator, log at INFO (the rebuild lines are INFO) and inject
 * @fault. */
static void ib_env(int timeout_ms, const char *fault, int qp_timeout, int qps)
{
	char v[16];

	snprintf(v, sizeof(v), "%d", qps);
	setenv("FTCC_IB_QPS_PER_CONN", v, 1);
	chaos_env(timeout_ms);
	setenv("FTCC_TRANSPORT", "ib", 1);
	setenv("FTCC_IBVERBS_LIB", FTCC_IBEMU_PATH, 1);
	setenv("FTCC_DEBUG", "INFO", 1);
	setenv("IBEMU_INJECT", fault, 1);
	snprintf(v, sizeof(v), "%d", qp_timeout);
	setenv("FTCC_IB_TIMEOUT", v, 1);
}

/* A full stream of IB_MSGS with @fault injected in both processes: no error, nothing lost,
 * repeated or corrupted, no WARN, and the log says the queue pairs were rebuilt. */
static void hidden_fault(const char *name, const char *fault, int qp_timeout, int qps,
			 uint64_t comm_id)
{
	struct chaos_cfg cfg = {
		.comm_id = comm_id, .count = IB_MSGS, .deadline_ms = 30000, .wait_close = true
	};
	static char log[1 << 16];
	char why[256];
	int rebuilt = 0;

	ib_env(2000, fault, qp_timeout, qps);
	cr_assert_eq(chaos_pair_start(&pair, &cfg), 0, "could not start the pair");
	for (int r = 0; r < 2; r++)
		cr_assert_eq(chaos_wait_stage(&pair, r, CHAOS_ST_STREAMED, 25000), 0,
			     "stream did not end: %s", chaos_side_str(&pair, r));
	for (int r = 0; r < 2; r++) {
		struct chaos_side *s = &pair.sh->side[r];

		cr_expect_eq(atomic_load(&s->err), 0, "%s", chaos_side_str(&pair, r));
		cr_expect_eq(atomic_load(&s->done), IB_MSGS, "%s", chaos_side_str(&pair, r));
		cr_expect_eq(s->bad, 0, "%s", chaos_side_str(&pair, r));
		chaos_pair_stderr(&pair, r, log, sizeof(log));
		cr_expect_eq(chaos_count(log, " WARN "), 0, "%s warned:\n%s", chaos_role_name(r),
			     log);
		rebuilt += chaos_count(log, "restored (generation");
	}
	chaos_report("%s: %d messages intact over %d QPs; %d rebuilds completed; longest stall "
		     "%.1f ms (receiver), %.1f ms (sender)",
		     name, IB_MSGS, qps, rebuilt,
		     chaos_ms(0, pair.sh->side[CHAOS_RECEIVER].max_gap_ns),
		     chaos_ms(0, pair.sh->side[CHAOS_SENDER].max_gap_ns));
	cr_expect_geq(rebuilt, 2, "the fault did not make both sides rebuild their QPs");
	cr_expect_eq(atomic_load(&pair.sh->sent_total), IB_MSGS);
	cr_expect_eq(chaos_pair_finish(&pair, 3000, why, sizeof(why)), 0, "%s", why);
}

/* Every QP of each process fails at once (retry exceeded on what was in flight, the rest
 * flushed), at a different moment on each side. */
Test(chaos_ib, qp_error_hidden)
{
	hidden_fault("qp_error_hidden", "qp_error@300", 16, 1, 0xc4a0520000000001ull);
}

/* The same over three QPs per connection: a message's shares and immediates straddle the
 * fault on different QPs. */
Test(chaos_ib, qp_error_hidden_striped)
{
	hidden_fault("qp_error_hidden_striped", "qp_error@300", 16, 3, 0xc4a0520000000004ull);
}

/* One QP of each process fails, the others of its connection carry on until the rebuild. */
Test(chaos_ib, one_qp_error_hidden_striped)
{
	hidden_fault("one_qp_error_hidden_striped", "qp_error_one@300", 16, 3,
		     0xc4a0520000000005ull);
}

/* The wire stops for 400 ms, longer than the QP timeout (12: 134 ms with 7 retries), shorter
 * than the failure timeout: both sides' work requests time out and the QPs are rebuilt. */
Test(chaos_ib, blackout_hidden)
{
	hidden_fault("blackout_hidden", "blackout:400@300", 12, 1, 0xc4a0520000000002ull);
}

Test(chaos_ib, blackout_hidden_striped)
{
	hidden_fault("blackout_hidden_striped", "blackout:400@300", 12, 4, 0xc4a0520000000006ull);
}

/* A port goes down for good mid-stream (the sender's, after its 200th data packet; the
 * receiver's counter is slower and may never get there): no data moves, rebuilt QPs time out
 * again, and within the failure timeout of the last progress, plus the QP timeout and a second
 * of slack, both sides fail with ncclRemoteError (the side that lost its port by the rebuild
 * deadline, the other because its peer gave up and closed); nobody hangs. */
Test(chaos_ib, port_down_fails_in_bound)
{
	const int timeout = 1000;
	struct chaos_cfg cfg = { .comm_id = 0xc4a0520000000003ull, .deadline_ms = 20000 };
	static char log[1 << 16];
	int warned = 0;

	ib_env(timeout, "port_down@200", 12, 2);
	cr_assert_eq(chaos_pair_start(&pair, &cfg), 0, "could not start the pair");
	for (int r = 0; r < 2; r++)
		cr_assert_eq(chaos_wait_test_err(&pair, r, 15000), 0, "no error: %s",
			     chaos_side_str(&pair, r));
	for (int r = 0; r < 2; r++) {
		struct chaos_side *s = &pair.sh->side[r];
		double ms = chaos_ms(s->t_last_ns, s->t_test_err_ns);

		chaos_report("port_down_fails_in_bound: %s failed %.1f ms after its last "
			     "completion (timeout %d ms), after %ld messages",
			     chaos_role_name(r), ms, timeout, atomic_load(&s->done));
		cr_expect_eq(atomic_load(&s->test_err), ncclRemoteError, "%s",
			     chaos_side_str(&pair, r));
		cr_expect_gt(atomic_load(&s->done), 0, "%s", chaos_side_str(&pair, r));
		cr_expect_leq(ms, (double)(timeout + 1000 + 134), "%s", chaos_side_str(&pair, r));
		cr_expect_eq(s->bad, 0, "%s", chaos_side_str(&pair, r));
		chaos_pair_stderr(&pair, r, log, sizeof(log));
		warned += chaos_count(log, "went down");
	}
	cr_expect_geq(warned, 1, "no port-down warning on either side");
}

#endif
