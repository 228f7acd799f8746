/* SPDX-License-Identifier: BSD-3-Clause */
/* A watch on a test process's own scheduling: a thread that wakes every few milliseconds and,
 * when a wake-up came late, writes one line to stderr with the gap, the steal time over it
 * (what the hypervisor took, summed over the machine's CPUs), and the monotonic time the gap
 * ended. A member removed for silence during such a gap was not running; one removed while its
 * process kept its wake-ups was stuck inside itself.
 *
 * It also follows the library's threads (named "ftcc-...") and the verbs emulator's ("ibemu-..."):
 * one that has not run for 2 s while the watch kept its wake-ups is reported once, with the
 * state, kernel wait and kernel stack of every thread of the process at that moment (a thread
 * stuck on a lock, or in the kernel, shows which), and the stuck thread, sent a real-time
 * signal, writes its own user-space stack. FTCC_TEST_WATCH_LOG=path appends these reports to a
 * file as well, where a passing test's would otherwise be lost with its output. Diagnostics only: nothing reads the lines
 * but a person.
 */
#ifndef FTCC_TESTS_SCHED_WATCH_H
#define FTCC_TESTS_SCHED_WATCH_H

#include <signal.h>

/* Sent to a process that runs the watch, it writes every thread's state and the user stacks of
 * the library's threads within about half a second (the table at once, then 20 ms per thread's
 * stack): what a test that failed asks of a process that
 * still runs. Ignored by a process without the watch (its default action); no terminal sends
 * it, and the library uses no out-of-band data. */
#define SCHED_WATCH_DUMP_SIGNAL SIGURG

/* Starts the watch in this process, its lines prefixed with @who ("head 2"). Gaps of @min_ms
 * and more are written. The calling thread, and the threads it starts afterwards, block
 * SCHED_WATCH_DUMP_SIGNAL: call it before the library starts its threads. 0 or -1 (no thread:
 * the test goes on without the watch). */
int sched_watch_start(const char *who, int min_ms);

#endif
