/* SPDX-License-Identifier: BSD-3-Clause */
/* Processes for the chaos tests: forked children that die with the test, bounded waits, kill
 * and reap, external commands with captured output, CPU hogs and captured stderr.
 *
 * Every child made here is remembered until it is reaped; chaos_proc_cleanup(), called from
 * each test's teardown, kills and reaps whatever is left, so a failed assertion leaves no
 * process behind. None of this is thread-safe: one test thread drives it.
 */
#ifndef FTCC_TESTS_CHAOS_PROC_H
#define FTCC_TESTS_CHAOS_PROC_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* CLOCK_MONOTONIC in nanoseconds: one clock for every process on the machine, so a time taken
 * by a child compares with one taken by the parent. */
int64_t chaos_now_ns(void);
/* Milliseconds from @t0_ns to @t1_ns (may be negative). */
double chaos_ms(int64_t t0_ns, int64_t t1_ns);
/* Prints one measurement line to stdout, "chaos: " + the formatted text, and flushes: always
 * visible in the test output (cr_log_info shows only with --verbose), and grep-able. */
void chaos_report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Sleeps @ms milliseconds (a fault's duration, never a synchronisation). */
void chaos_sleep_ms(int ms);

/* Forks a child that runs @fn(@arg) and _exits with its return value. In the child, fd 2 is
 * replaced by @errfd when it is >= 0, and SIGKILL is delivered if the parent dies. Returns the
 * child's pid (remembered for cleanup) or -1. */
pid_t chaos_fork(int (*fn)(void *), void *arg, int errfd);

/* Like chaos_fork(), but the child execs this program afresh (/proc/self/exe) with @var=@value
 * added to its environment, and keeps @keepfd (>= 0) open across the exec: a constructor of the
 * new image finds @var and runs the child's part from what @keepfd holds. The child then shares
 * no memory map with its parent or its siblings (a forked copy shares the kernel's locks of the
 * mappings it inherited with every other copy: one copy's munmap can wait on another's page
 * fault). Returns the child's pid (remembered for cleanup) once it exec'ed, or -1 with errno (no
 * fork, or no exec: that child is reaped). */
pid_t chaos_fork_exec(const char *var, const char *value, int keepfd, int errfd);
/* Waits up to @timeout_ms for @pid to exit and reaps it; *status gets the wait status.
 * 0 when reaped, -1 at the deadline (the child is left running). */
int chaos_wait_exit(pid_t pid, int timeout_ms, int *status);
/* SIGKILLs @pid (stopped or not) and reaps it; a pid not ours or already reaped is ignored. */
void chaos_kill(pid_t pid);
/* 1 while @pid has not exited (a stopped child counts as alive). Never reaps. */
int chaos_alive(pid_t pid);
/* Kills and reaps every child still remembered. */
void chaos_proc_cleanup(void);

/* Starts @n children that spin on the CPU until killed (nice 0). Their pids go to @pids
 * (at least @n entries). 0 or -1. */
int chaos_hogs_start(int n, pid_t *pids);

/* Runs @argv (argv[0] looked up in PATH) with stdout and stderr captured into @out (always
 * NUL-terminated, may be cut). Returns the exit code, or -1 when it could not run, died of a
 * signal or outlived @timeout_ms (then it is killed). */
int chaos_cmd(char *const argv[], char *out, size_t outlen, int timeout_ms);

/* An anonymous in-memory file for a child's stderr, in append mode (its threads' lines never
 * overwrite each other): give it to chaos_fork() and read it back with chaos_capture_read(). -1
 * on failure. */
int chaos_capture_open(const char *name);
/* Copies what @fd holds so far into @buf (NUL-terminated, cut to @len - 1); returns the
 * length. */
size_t chaos_capture_read(int fd, char *buf, size_t len);
/* The same from byte @off of @fd on. */
size_t chaos_capture_read_at(int fd, off_t off, char *buf, size_t len);
/* Occurrences of @needle in @hay. */
int chaos_count(const char *hay, const char *needle);

#endif
