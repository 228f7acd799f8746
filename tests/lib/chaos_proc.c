/* SPDX-License-Identifier: BSD-3-Clause */
/* Child processes of the chaos tests: fork with a parent-death signal, reap within deadlines,
 * run nft and ss with their output captured, spin CPU hogs. Owns the list of children not yet
 * reaped, which the teardown empties.
 */
#define _GNU_SOURCE
#include "chaos_proc.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define CHAOS_MAX_CHILDREN 64
/* How long chaos_fork_exec() waits for its child's exec. */
#define CHAOS_EXEC_MS 10000

static pid_t chaos_children[CHAOS_MAX_CHILDREN];

int64_t chaos_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

double chaos_ms(int64_t t0_ns, int64_t t1_ns)
{
	return (double)(t1_ns - t0_ns) / 1e6;
}

void chaos_report(const char *fmt, ...)
{
	char line[512];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	printf("chaos: %s\n", line);
	fflush(stdout);
}

void chaos_sleep_ms(int ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

static void chaos_remember(pid_t pid)
{
	for (int i = 0; i < CHAOS_MAX_CHILDREN; i++) {
		if (chaos_children[i] == 0) {
			chaos_children[i] = pid;
			return;
		}
	}
	/* Full: never expected (a test makes a handful); kill rather than leak. */
	kill(pid, SIGKILL);
	waitpid(pid, NULL, 0);
}

static int chaos_forget(pid_t pid)
{
	for (int i = 0; i < CHAOS_MAX_CHILDREN; i++) {
		if (chaos_children[i] == pid) {
			chaos_children[i] = 0;
			return 1;
		}
	}
	return 0;
}

/* In a new child: die with the parent (also if it died before the prctl). */
static void chaos_child_bind(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(125);
}

pid_t chaos_fork(int (*fn)(void *), void *arg, int errfd)
{
	pid_t parent = getpid();
	pid_t pid;

	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0)
		return -1;
	if (pid == 0) {
		chaos_child_bind(parent);
		if (errfd >= 0 && dup2(errfd, STDERR_FILENO) < 0)
			_exit(124);
		_exit(fn(arg));
	}
	chaos_remember(pid);
	return pid;
}

pid_t chaos_fork_exec(const char *var, const char *value, int keepfd, int errfd)
{
	extern char **environ;
	char *argv[] = { (char *)"ftcc-test-child", NULL };
	pid_t parent = getpid();
	size_t n = 0, len = strlen(var) + strlen(value) + 2;
	char **envp;
	char *mine;
	int st[2], err = 0;
	pid_t pid;

	/* Everything the child needs is made here: between fork and exec it only calls what is
	 * async-signal-safe (this process may have other threads). A pipe closed by the exec
	 * says it happened; a child that could not exec writes its errno there instead. */
	while (environ[n])
		n++;
	envp = calloc(n + 2, sizeof(*envp));
	mine = malloc(len);
	if (!envp || !mine || pipe2(st, O_CLOEXEC) < 0) {
		free(envp);
		free(mine);
		return -1;
	}
	snprintf(mine, len, "%s=%s", var, value);
	for (size_t i = 0, k = 0; i < n; i++) {
		if (strncmp(environ[i], var, strlen(var)) || environ[i][strlen(var)] != '=')
			envp[k++] = environ[i];
	}
	for (n = 0; envp[n];)
		n++;
	envp[n] = mine;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid == 0) {
		chaos_child_bind(parent);
		close(st[0]);
		if ((errfd < 0 || dup2(errfd, STDERR_FILENO) >= 0) &&
		    (keepfd < 0 || fcntl(keepfd, F_SETFD, 0) >= 0))
			execve("/proc/self/exe", argv, envp);
		err = errno;
		if (write(st[1], &err, sizeof(err)) < 0)
			_exit(127);
		_exit(127);
	}
	free(envp);
	free(mine);
	close(st[1]);
	if (pid > 0) {
		/* EOF: it exec'ed; an errno: it could not. Bounded: a child that neither execs
		 * nor dies within CHAOS_EXEC_MS is killed and counts as not started. */
		struct pollfd p = { .fd = st[0], .events = POLLIN };
		ssize_t r = -1;
		int ready;

		while ((ready = poll(&p, 1, CHAOS_EXEC_MS)) < 0 && errno == EINTR)
			;
		if (ready > 0)
			r = read(st[0], &err, sizeof(err));
		if (r != 0) { /* not exec'ed: reaped here, not left to look alive */
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			pid = -1;
			errno = r > 0 ? err : ETIMEDOUT;
		}
	}
	close(st[0]);
	if (pid < 0)
		return -1;
	chaos_remember(pid);
	return pid;
}

int chaos_wait_exit(pid_t pid, int timeout_ms, int *status)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	int st = 0;

	for (;;) {
		pid_t r = waitpid(pid, &st, WNOHANG);

		if (r == pid || (r < 0 && errno == ECHILD)) {
			chaos_forget(pid);
			if (status)
				*status = r == pid ? st : -1;
			return 0;
		}
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(1);
	}
}

void chaos_kill(pid_t pid)
{
	if (pid <= 0 || !chaos_forget(pid))
		return;
	kill(pid, SIGKILL);
	/* SIGKILL ends a stopped process too; the kernel reaps it promptly, but bound the wait
	 * anyway and never hang a teardown. */
	for (int i = 0; i < 5000; i++) {
		pid_t r = waitpid(pid, NULL, WNOHANG);

		if (r == pid || (r < 0 && errno == ECHILD))
			return;
		chaos_sleep_ms(1);
	}
	fprintf(stderr, "chaos: child %d did not die within 5 s of SIGKILL\n", (int)pid);
}

int chaos_alive(pid_t pid)
{
	siginfo_t si = { 0 };

	if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
		return 0;
	return si.si_pid == 0;
}

void chaos_proc_cleanup(void)
{
	for (int i = 0; i < CHAOS_MAX_CHILDREN; i++)
		if (chaos_children[i] > 0)
			chaos_kill(chaos_children[i]);
}

static int chaos_spin(void *arg)
{
	volatile unsigned long n = 0;

	(void)arg;
	for (;;)
		n++;
	return 0;
}

int chaos_hogs_start(int n, pid_t *pids)
{
	for (int i = 0; i < n; i++) {
		pids[i] = chaos_fork(chaos_spin, NULL, -1);
		if (pids[i] < 0)
			return -1;
	}
	return 0;
}

/* Reads the command's output until EOF or the deadline; returns 0 at EOF, -1 otherwise. */
static int chaos_cmd_drain(int fd, char *out, size_t outlen, int64_t deadline)
{
	size_t got = 0;
	char sink[512];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		int64_t left = (deadline - chaos_now_ns()) / 1000000;
		ssize_t n;

		if (left <= 0)
			return -1;
		if (poll(&p, 1, (int)left) <= 0)
			continue;
		if (got + 1 < outlen)
			n = read(fd, out + got, outlen - 1 - got);
		else
			n = read(fd, sink, sizeof(sink)); /* keep draining: never block the child */
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n == 0 ? 0 : -1;
		if (got + 1 < outlen) {
			got += (size_t)n;
			out[got] = '\0';
		}
	}
}

int chaos_cmd(char *const argv[], char *out, size_t outlen, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	pid_t parent = getpid();
	int fds[2], st = 0, rc;
	pid_t pid;

	if (outlen)
		out[0] = '\0';
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -1;
	fflush(stdout);
	fflush(stderr);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return -1;
	}
	if (pid == 0) {
		chaos_child_bind(parent);
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	chaos_remember(pid);
	close(fds[1]);
	rc = chaos_cmd_drain(fds[0], out, outlen, deadline);
	close(fds[0]);
	if (rc || chaos_wait_exit(pid, (int)((deadline - chaos_now_ns()) / 1000000) + 1, &st)) {
		chaos_kill(pid);
		return -1;
	}
	return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

int chaos_capture_open(const char *name)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	/* Append mode: the child's threads write their log lines through one shared file offset,
	 * and without O_APPEND two lines written at once can land at the same offset, one
	 * overwriting the other (seen: a third of the lines of four threads lost). */
	if (fd >= 0 && fcntl(fd, F_SETFL, O_APPEND) < 0) {
		close(fd);
		return -1;
	}
	return fd;
}

size_t chaos_capture_read(int fd, char *buf, size_t len)
{
	return chaos_capture_read_at(fd, 0, buf, len);
}

size_t chaos_capture_read_at(int fd, off_t off, char *buf, size_t len)
{
	size_t got = 0;

	while (got + 1 < len) {
		ssize_t n = pread(fd, buf + got, len - 1 - got, off + (off_t)got);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (size_t)n;
	}
	buf[got] = '\0';
	return got;
}

int chaos_count(const char *hay, const char *needle)
{
	int n = 0;
	size_t len = strlen(needle);

	for (const char *p = hay; len && (p = strstr(p, needle)) != NULL; p += len)
		n++;
	return n;
}
