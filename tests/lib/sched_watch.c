/* SPDX-License-Identifier: BSD-3-Clause */
/* The scheduling watch (sched_watch.h). */
#define _GNU_SOURCE
#include "sched_watch.h"

#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "chaos_proc.h"

#define WATCH_PERIOD_MS 10
#define SCAN_PERIODS 10	 /* the threads are looked at every 100 ms */
#define STUCK_MS 2000	 /* a library thread that has not run this long is reported */
#define STUCK_REPORTS 3	 /* at most this many reports per process */
#define WATCH_THREADS 64 /* threads followed */
#define WATCH_LINE 16384 /* one report, written at once */

/* A thread of this process the watch follows: the library's ("ftcc-...") and the verbs
 * emulator's ("ibemu-..."), each of which wakes at least every 100 ms when all is well. */
struct watched {
	pid_t tid;
	unsigned long long ran; /* CPU ticks plus context switches: grows whenever it runs */
	int64_t since_ns;	/* when @ran last changed */
	int reported;		/* reported for this stretch */
	int seen;		/* found by the last scan */
};

static struct watched watched[WATCH_THREADS];
static int nwatched, nreports;

/* The signal that has a stuck thread write its own user-space stack (addresses; a library's
 * static functions as offsets into it, for addr2line on the same build). */
#define STACK_SIGNAL (SIGRTMIN + 5)

static char watch_who[32];
static char watch_log[256]; /* FTCC_TEST_WATCH_LOG: reports copied there too, from any test */
static int watch_min_ms;
static volatile sig_atomic_t dump_asked;

static void dump_handler(int sig)
{
	(void)sig;
	dump_asked = 1;
}

/* Writes "  user stack of tid N:" and the stack to @fd. Signal context: system calls only (the
 * number is formatted by hand); backtrace() was primed in sched_watch_start() so that it does
 * not allocate here, and backtrace_symbols_fd() takes the loader's lock through dladdr(), which
 * is acceptable for a diagnostic of a thread already stuck. */
static void stack_write(int fd, void *const *frames, int n)
{
	char head[64] = "  user stack of tid ", digits[24];
	long tid = syscall(SYS_gettid);
	size_t len = strlen(head);
	int nd = 0;

	do {
		digits[nd++] = (char)('0' + tid % 10);
		tid /= 10;
	} while (tid > 0 && nd < (int)sizeof(digits));
	while (nd > 0)
		head[len++] = digits[--nd];
	head[len++] = ':';
	head[len++] = '\n';
	if (write(fd, head, len) < 0)
		return;
	backtrace_symbols_fd(frames, n, fd);
}

static void stack_handler(int sig)
{
	int saved = errno; /* the interrupted code may be about to read it */
	void *frames[32];
	int n = backtrace(frames, 32);

	(void)sig;
	stack_write(STDERR_FILENO, frames, n);
	if (watch_log[0]) {
		int fd = open(watch_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		if (fd >= 0) {
			stack_write(fd, frames, n);
			close(fd);
		}
	}
	errno = saved;
}

/* The machine's steal time so far in clock ticks (the 8th field of /proc/stat's "cpu" line);
 * -1 when it cannot be read. */
static long long steal_ticks(void)
{
	char buf[512];
	long long f[8] = { 0 };
	int fd = open("/proc/stat", O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return -1;
	n = read(fd, buf, sizeof(buf) - 1); /* the "cpu" line comes first */
	close(fd);
	if (n <= 0)
		return -1;
	buf[n] = '\0';
	return sscanf(buf, "cpu %lld %lld %lld %lld %lld %lld %lld %lld", &f[0], &f[1], &f[2],
		      &f[3], &f[4], &f[5], &f[6], &f[7]) == 8 ?
		       f[7] :
		       -1;
}

/* Reads /proc/self/task/@tid/@what into @buf (NUL-terminated, the last newline cut); the
 * length, or -1. */
static int task_read(pid_t tid, const char *what, char *buf, size_t cap)
{
	char path[64];
	int fd, n;

	snprintf(path, sizeof(path), "/proc/self/task/%d/%s", (int)tid, what);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	n = (int)read(fd, buf, cap - 1);
	close(fd);
	if (n < 0)
		return -1;
	while (n > 0 && buf[n - 1] == '\n')
		n--;
	buf[n] = '\0';
	return n;
}

/* @tid's scheduler state letter, and its CPU ticks plus context switches into *@ran. */
static char task_ran(pid_t tid, unsigned long long *ran)
{
	char buf[4096], *p, *sw; /* status is about 1.5 KB, its switch counts last */
	unsigned long long utime = 0, stime = 0;
	char state = '?';

	*ran = 0;
	if (task_read(tid, "stat", buf, sizeof(buf)) > 0 && (p = strrchr(buf, ')')) &&
	    sscanf(p + 1, " %c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &state, &utime,
		   &stime) == 3)
		*ran = utime + stime;
	if (task_read(tid, "status", buf, sizeof(buf)) > 0) {
		for (sw = buf; (sw = strstr(sw, "ctxt_switches:")); sw++)
			*ran += strtoull(sw + strlen("ctxt_switches:"), NULL, 10);
	}
	return state;
}

/* Appends one line on thread @tid to @out: its name, state, kernel wait and the top of its
 * kernel stack (readable by root only). */
static size_t task_line(char *out, size_t cap, size_t len, pid_t tid)
{
	char comm[32] = "?", wchan[64] = "?", stack[512] = "", frames[160] = "";
	unsigned long long ran;
	char state = task_ran(tid, &ran);
	char *s = stack;
	int nf = 0;

	task_read(tid, "comm", comm, sizeof(comm));
	task_read(tid, "wchan", wchan, sizeof(wchan));
	if (task_read(tid, "stack", stack, sizeof(stack)) > 0) {
		for (char *line = strtok_r(stack, "\n", &s); line && nf < 3;
		     line = strtok_r(NULL, "\n", &s), nf++) {
			char *sym = strchr(line, ' ');
			size_t fl = strlen(frames);

			snprintf(frames + fl, sizeof(frames) - fl, "%s%s", nf ? " < " : "",
				 sym ? sym + 1 : line);
		}
	}
	if (len < cap)
		len += (size_t)snprintf(out + len, cap - len, "  tid %d %s %c wchan %s%s%s\n",
					(int)tid, comm, state, wchan, nf ? " stack " : "", frames);
	return len < cap ? len : cap - 1;
}

/* Writes, at once, "<who> <ms> thread watch: @why; every thread now:" and a line per thread. */
static void threads_report(int64_t now, const char *why, const pid_t *tids, int ntids)
{
	static char out[WATCH_LINE];
	size_t len = (size_t)snprintf(
		out, sizeof(out), "%s %lld.%03lld thread watch: %s; every thread now:\n", watch_who,
		(long long)(now / 1000000), (long long)(now / 1000 % 1000), why);

	for (int t = 0; t < ntids; t++)
		len = task_line(out, sizeof(out), len, tids[t]);
	if (len >= sizeof(out) - 1) {
		len = sizeof(out) - 1;
		out[len - 1] = '\n'; /* cut, but the next line is not glued to it */
	}
	if (watch_log[0]) {
		int fd = open(watch_log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);

		if (fd >= 0) {
			if (write(fd, out, len) < 0) {
				/* the copy is a convenience; stderr below is the record */
			}
			close(fd);
		}
	}
	if (write(STDERR_FILENO, out, len) < 0)
		return;
}

/* This process's thread ids into @tids (at most @cap); how many. Only system calls and the stack:
 * the watch must not take a lock that a stuck thread may hold (malloc's, stdio's). */
static int task_ids(pid_t *tids, int cap)
{
	char buf[4096];
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC), n = 0;
	long got;

	if (fd < 0)
		return 0;
	while (n < cap && (got = syscall(SYS_getdents64, fd, buf, sizeof(buf))) > 0) {
		for (long off = 0; off < got && n < cap;) {
			/* struct linux_dirent64: u64 ino, s64 off, u16 reclen, u8 type, name */
			unsigned short reclen;
			const char *name = buf + off + 19;

			memcpy(&reclen, buf + off + 16, sizeof(reclen));
			if (name[0] >= '1' && name[0] <= '9')
				tids[n++] = (pid_t)atoi(name);
			off += reclen;
		}
	}
	close(fd);
	return n;
}

/* Looks at every thread of this process; reports, once per stretch, a library thread that has
 * not run for STUCK_MS while this watch ran, with every thread's state at that moment. */
static void threads_scan(int64_t now)
{
	pid_t tids[WATCH_THREADS * 2], stuck = 0;
	int ntids = task_ids(tids, WATCH_THREADS * 2);
	int64_t stuck_for = 0;

	for (int i = 0; i < nwatched; i++)
		watched[i].seen = 0;
	for (int t = 0; t < ntids; t++) {
		pid_t tid = tids[t];
		char comm[32];
		unsigned long long ran;
		struct watched *w = NULL;

		if (task_read(tid, "comm", comm, sizeof(comm)) < 0 ||
		    (strncmp(comm, "ftcc-", 5) != 0 && strncmp(comm, "ibemu-", 6) != 0))
			continue;
		task_ran(tid, &ran);
		for (int i = 0; i < nwatched && !w; i++)
			w = watched[i].tid == tid ? &watched[i] : NULL;
		if (!w && nwatched < WATCH_THREADS) {
			w = &watched[nwatched++];
			*w = (struct watched){ .tid = tid, .ran = ran, .since_ns = now };
		}
		if (!w)
			continue;
		w->seen = 1;
		if (ran != w->ran) {
			w->ran = ran;
			w->since_ns = now;
			w->reported = 0;
		} else if (!w->reported && chaos_ms(w->since_ns, now) >= STUCK_MS && !stuck) {
			w->reported = 1;
			stuck = tid;
			stuck_for = (int64_t)chaos_ms(w->since_ns, now);
		}
	}
	for (int i = 0; i < nwatched;) { /* threads that ended */
		if (!watched[i].seen)
			watched[i] = watched[--nwatched];
		else
			i++;
	}
	if (!stuck || nreports >= STUCK_REPORTS)
		return;
	nreports++;

	char comm[32] = "?", why[96];

	task_read(stuck, "comm", comm, sizeof(comm));
	snprintf(why, sizeof(why), "%s (tid %d) has not run for %lld ms while this watch did", comm,
		 (int)stuck, (long long)stuck_for);
	threads_report(now, why, tids, ntids);
	syscall(SYS_tgkill, getpid(), stuck, STACK_SIGNAL);
}

/* Every thread's state, then the user stack of each library and emulator thread, one after
 * the other: what a test process that was asked (SCHED_WATCH_DUMP_SIGNAL) looks like inside. */
static void threads_dump(int64_t now)
{
	struct timespec gap = { 0, 20 * 1000000L }; /* one stack's lines before the next */
	pid_t tids[WATCH_THREADS * 2];
	int ntids = task_ids(tids, WATCH_THREADS * 2);

	threads_report(now, "asked for a dump", tids, ntids);
	for (int t = 0; t < ntids; t++) {
		char comm[32];

		if (task_read(tids[t], "comm", comm, sizeof(comm)) < 0 ||
		    (strncmp(comm, "ftcc-", 5) != 0 && strncmp(comm, "ibemu-", 6) != 0))
			continue;
		syscall(SYS_tgkill, getpid(), tids[t], STACK_SIGNAL);
		nanosleep(&gap, NULL);
	}
}

static void *watch_main(void *arg)
{
	struct timespec period = { 0, WATCH_PERIOD_MS * 1000000L };
	long tick_ms = 1000 / sysconf(_SC_CLK_TCK);
	int64_t last = chaos_now_ns(), read_at = last;
	long long steal = steal_ticks();
	unsigned periods = 0;

	(void)arg;
	(void)pthread_setname_np(pthread_self(), "sched-watch");
	for (;;) {
		int64_t now;
		double late;

		nanosleep(&period, NULL);
		now = chaos_now_ns();
		late = chaos_ms(last, now) - WATCH_PERIOD_MS;
		if (late >= watch_min_ms) {
			long long s = steal_ticks();
			char line[200];
			int len = snprintf(line, sizeof(line),
					   "%s %lld.%03lld sched watch: woke %.0f ms late (steal "
					   "time since %.0f ms before, summed over the machine's "
					   "CPUs: %lld ms)\n",
					   watch_who, (long long)(now / 1000000),
					   (long long)(now / 1000 % 1000), late,
					   chaos_ms(read_at, now),
					   s >= 0 && steal >= 0 ? (s - steal) * tick_ms : -1);

			if (len > (int)sizeof(line) - 1)
				len = (int)sizeof(line) - 1;
			if (len > 0 && write(STDERR_FILENO, line, (size_t)len) < 0)
				break;
			steal = s;
			read_at = now;
		} else if (chaos_ms(read_at, now) >= 1000) {
			steal = steal_ticks();
			read_at = now;
		}
		if (dump_asked) {
			dump_asked = 0;
			threads_dump(now);
			now = chaos_now_ns(); /* the dump's own time is no late wake-up */
		}
		last = now;
		/* Only a scan on time counts: a late wake-up means nobody ran, the watch included. */
		if (++periods % SCAN_PERIODS == 0 && late < watch_min_ms)
			threads_scan(now);
		else if (late >= watch_min_ms)
			for (int i = 0; i < nwatched; i++)
				watched[i].since_ns = now;
	}
	return NULL;
}

int sched_watch_start(const char *who, int min_ms)
{
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	struct sigaction sa = { .sa_handler = stack_handler, .sa_flags = SA_RESTART };
	void *prime[2];

	snprintf(watch_who, sizeof(watch_who), "%s", who);
	snprintf(watch_log, sizeof(watch_log), "%s",
		 getenv("FTCC_TEST_WATCH_LOG") ? getenv("FTCC_TEST_WATCH_LOG") : "");
	watch_min_ms = min_ms;
	backtrace(prime, 2); /* loads what backtrace() needs now, not in the signal handler */
	if (pthread_attr_init(&attr))
		return -1;
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	rc = pthread_create(&t, &attr, watch_main, NULL);
	pthread_attr_destroy(&attr);
	if (rc)
		return -1;
	sigemptyset(&sa.sa_mask);
	sigaction(STACK_SIGNAL, &sa, NULL);
	sa.sa_handler = dump_handler;
	sigaction(SCHED_WATCH_DUMP_SIGNAL, &sa, NULL);
	/* The dump request goes to the watch alone: this thread, and those it starts from now on
	 * (the library's), block it, so that it interrupts none of their system calls. */
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, SCHED_WATCH_DUMP_SIGNAL);
	pthread_sigmask(SIG_BLOCK, &sa.sa_mask, NULL);
	return 0;
}
