/* SPDX-License-Identifier: BSD-3-Clause */
/* A watch on a test process's own scheduling: a thread that wakes every few milliseconds and,
 * when a wake-up came late, writes one line to stderr with the gap, the steal time over it
 * (what the hypervisor took, summed over the machine's CPUs), and the monotonic time the gap
 * ended. A member removed for silence during such a gap was not running; one removed while its
 * process kept its wake-ups was stuck inside itself. Diagnostics only: nothing reads the lines
 * but a person.
 */
#ifndef FTCC_TESTS_SCHED_WATCH_H
#define FTCC_TESTS_SCHED_WATCH_H

/* Starts the watch in this process, its lines prefixed with @who ("head 2"). Gaps of @min_ms
 * and more are written. 0 or -1 (no thread: the test goes on without the watch). */
int sched_watch_start(const char *who, int min_ms);

#endif
