/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the syscall wrappers: socket flags, MSG_NOSIGNAL, EAGAIN passed through,
 * EINTR retried, errno kept, and FTCC_INJECT counts consumed exactly; the library's thread names.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"

static void quiet_sink(enum ftcc_log_level level __attribute__((unused)),
		       const char *file __attribute__((unused)), int line __attribute__((unused)),
		       const char *msg __attribute__((unused)))
{
}

static void setup(void)
{
	ftcc_log_set_sink(quiet_sink);
	ftcc_log_set_level(FTCC_LOG_TRACE); /* exercise the logging path of every failure */
	ftcc_sys_inject_reload("");
}

TestSuite(sys, .init = setup);

static void pair(int sv[2], int nonblock)
{
	cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | (nonblock ? SOCK_NONBLOCK : 0), 0, sv), 0);
}

Test(sys, socket_is_cloexec)
{
	int fd = ftcc_sys_socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_geq(fd, 0);
	cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
	close(fd);
}

/* A loopback connection made through the wrappers; the accepted end is non-blocking. */
Test(sys, loopback_connect_accept)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int lfd = ftcc_sys_socket(AF_INET, SOCK_STREAM, 0);

	cr_assert_eq(ftcc_sys_bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(ftcc_sys_listen(lfd, 4), 0);
	cr_assert_eq(getsockname(lfd, (struct sockaddr *)&sa, &len), 0);
	int cfd = ftcc_sys_socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(ftcc_sys_connect(cfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	int afd = ftcc_sys_accept(lfd, NULL, NULL);
	cr_assert_geq(afd, 0);
	cr_assert(fcntl(afd, F_GETFL) & O_NONBLOCK);
	cr_assert(fcntl(afd, F_GETFD) & FD_CLOEXEC);

	cr_assert_eq(ftcc_sys_send(cfd, "ping", 4), 4);
	char buf[8];
	ssize_t n;
	while ((n = ftcc_sys_recv(afd, buf, sizeof(buf))) < 0 && errno == EAGAIN)
		usleep(1000);
	cr_assert_eq(n, 4);
	cr_assert(memcmp(buf, "ping", 4) == 0);
	close(afd);
	close(cfd);
	close(lfd);
}

Test(sys, empty_nonblocking_recv_is_eagain)
{
	int sv[2];
	char c;
	pair(sv, 1);
	errno = 0;
	cr_assert_eq(ftcc_sys_recv(sv[0], &c, 1), -1);
	cr_assert(errno == EAGAIN || errno == EWOULDBLOCK);
	int lfd = ftcc_sys_socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	cr_assert_eq(ftcc_sys_bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(ftcc_sys_listen(lfd, 1), 0);
	cr_assert_eq(ftcc_sys_accept(lfd, NULL, NULL), -1);
	cr_assert(errno == EAGAIN || errno == EWOULDBLOCK);
}

/* Writing to a closed peer is EPIPE, not a SIGPIPE that kills the test. */
Test(sys, no_sigpipe)
{
	int sv[2];
	pair(sv, 0);
	close(sv[1]);
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };
	cr_assert_eq(ftcc_sys_send(sv[0], "x", 1), -1);
	cr_assert_eq(errno, EPIPE);
	cr_assert_eq(ftcc_sys_sendv(sv[0], &iov, 1), -1);
	cr_assert_eq(errno, EPIPE);
}

Test(sys, vectored_round_trip)
{
	int sv[2];
	char a[3] = "abc", b[4] = "defg", out1[5] = { 0 }, out2[2] = { 0 };
	struct iovec tx[2] = { { a, sizeof(a) }, { b, sizeof(b) } };
	struct iovec rx[2] = { { out1, sizeof(out1) }, { out2, sizeof(out2) } };

	pair(sv, 0);
	cr_assert_eq(ftcc_sys_sendv(sv[0], tx, 2), 7);
	cr_assert_eq(ftcc_sys_recvv(sv[1], rx, 2), 7);
	cr_assert(memcmp(out1, "abcde", 5) == 0);
	cr_assert(memcmp(out2, "fg", 2) == 0);
}

Test(sys, errno_of_real_failure_kept)
{
	char c = 0;
	errno = 0;
	cr_assert_eq(ftcc_sys_send(-1, &c, 1), -1);
	cr_assert_eq(errno, EBADF);
	cr_assert_eq(ftcc_sys_recv(-1, &c, 1), -1);
	cr_assert_eq(errno, EBADF);
	cr_assert_eq(ftcc_sys_listen(-1, 1), -1);
	cr_assert_eq(errno, EBADF);
}

static volatile sig_atomic_t signals_seen;
static void on_signal(int sig __attribute__((unused)))
{
	signals_seen++;
}

struct interrupter {
	pthread_t target;
	int fd;
};

static void *interrupt_then_write(void *arg)
{
	struct interrupter *it = arg;
	struct timespec ms50 = { 0, 50 * 1000 * 1000 };

	nanosleep(&ms50, NULL);
	pthread_kill(it->target, SIGUSR1);
	nanosleep(&ms50, NULL);
	cr_assert_eq(write(it->fd, "z", 1), 1);
	return NULL;
}

/* A blocking recv interrupted by a handler without SA_RESTART is retried, not reported. */
Test(sys, eintr_retried)
{
	struct sigaction sa = { .sa_handler = on_signal }; /* no SA_RESTART */
	int sv[2];
	char c = 0;
	pthread_t th;

	cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
	pair(sv, 0);
	struct interrupter it = { .target = pthread_self(), .fd = sv[1] };
	cr_assert_eq(pthread_create(&th, NULL, interrupt_then_write, &it), 0);
	cr_assert_eq(ftcc_sys_recv(sv[0], &c, 1), 1);
	pthread_join(th, NULL);
	cr_assert_eq(c, 'z');
	cr_assert_eq(signals_seen, 1);
}

Test(sys, inject_counts_consumed_exactly)
{
	int sv[2];
	char c;
	pair(sv, 1);

	ftcc_sys_inject_reload("send:2,recv,connect:1");
	for (int i = 0; i < 2; i++) {
		errno = 0;
		cr_assert_eq(ftcc_sys_send(sv[0], "q", 1), -1);
		cr_assert_eq(errno, ECONNRESET);
	}
	/* The injected calls never reached the kernel: the peer has nothing to read yet. */
	cr_assert_eq(recv(sv[1], &c, 1, MSG_DONTWAIT), -1);
	cr_assert_eq(ftcc_sys_send(sv[0], "q", 1), 1);

	cr_assert_eq(ftcc_sys_recv(sv[1], &c, 1), -1);
	cr_assert_eq(errno, ECONNRESET);
	cr_assert_eq(ftcc_sys_recv(sv[1], &c, 1), 1);

	cr_assert_eq(ftcc_sys_connect(sv[0], NULL, 0), -1);
	cr_assert_eq(errno, EIO);
	cr_assert_eq(ftcc_sys_inject_hit("connect"), 0);
}

Test(sys, inject_every_wrapper)
{
	struct iovec iov = { .iov_base = "x", .iov_len = 1 };

	ftcc_sys_inject_reload("socket,connect,accept,bind,listen,send,sendv,recv,recvv");
	errno = 0;
	cr_assert_eq(ftcc_sys_socket(AF_INET, SOCK_STREAM, 0), -1);
	cr_assert_eq(errno, EIO);
	cr_assert_eq(ftcc_sys_connect(-1, NULL, 0), -1);
	cr_assert_eq(errno, EIO);
	cr_assert_eq(ftcc_sys_accept(-1, NULL, NULL), -1);
	cr_assert_eq(errno, EIO);
	cr_assert_eq(ftcc_sys_bind(-1, NULL, 0), -1);
	cr_assert_eq(errno, EIO);
	cr_assert_eq(ftcc_sys_listen(-1, 1), -1);
	cr_assert_eq(errno, EIO);
	cr_assert_eq(ftcc_sys_send(-1, "x", 1), -1);
	cr_assert_eq(errno, ECONNRESET);
	cr_assert_eq(ftcc_sys_sendv(-1, &iov, 1), -1);
	cr_assert_eq(errno, ECONNRESET);
	cr_assert_eq(ftcc_sys_recv(-1, NULL, 0), -1);
	cr_assert_eq(errno, ECONNRESET);
	cr_assert_eq(ftcc_sys_recvv(-1, &iov, 1), -1);
	cr_assert_eq(errno, ECONNRESET);
	/* All consumed: the real calls run again (and fail on the bad fd for real). */
	cr_assert_eq(ftcc_sys_send(-1, "x", 1), -1);
	cr_assert_eq(errno, EBADF);
}

Test(sys, inject_malformed_entries_ignored)
{
	ftcc_sys_inject_reload("a:0,b:x,:3,c:,d:-1,e:99999999999,f:1x,,g:3,"
			       "a-name-that-is-far-too-long-to-be-a-wrapper-name");
	const char *never[] = { "a", "b", "", "c", "d", "e", "f" };
	for (size_t i = 0; i < sizeof(never) / sizeof(never[0]); i++)
		cr_assert_eq(ftcc_sys_inject_hit(never[i]), 0, "%s", never[i]);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ftcc_sys_inject_hit("g"), 1);
	cr_assert_eq(ftcc_sys_inject_hit("g"), 0);

	/* The count's range ends at INT_MAX exactly. */
	ftcc_sys_inject_reload("big:2147483647,huge:2147483648");
	cr_assert_eq(ftcc_sys_inject_hit("huge"), 0);
	cr_assert_eq(ftcc_sys_inject_hit("big"), 1);
}

Test(sys, inject_reload_replaces)
{
	ftcc_sys_inject_reload("x:5");
	cr_assert_eq(ftcc_sys_inject_hit("x"), 1);
	ftcc_sys_inject_reload("y");
	cr_assert_eq(ftcc_sys_inject_hit("x"), 0);
	cr_assert_eq(ftcc_sys_inject_hit("y"), 1);
	ftcc_sys_inject_reload("y:3");
	ftcc_sys_inject_reload(NULL);
	cr_assert_eq(ftcc_sys_inject_hit("y"), 0);
	/* Repeated names each keep their own count. */
	ftcc_sys_inject_reload("z,z:2");
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ftcc_sys_inject_hit("z"), 1);
	cr_assert_eq(ftcc_sys_inject_hit("z"), 0);
}

#define HIT_THREADS 8
#define HIT_TRIES 5000

static void *hit_worker(void *arg)
{
	long *hits = arg;
	for (int i = 0; i < HIT_TRIES; i++)
		*hits += ftcc_sys_inject_hit("race");
	return NULL;
}

Test(sys, inject_exact_under_contention)
{
	pthread_t th[HIT_THREADS];
	long hits[HIT_THREADS] = { 0 }, total = 0;

	ftcc_sys_inject_reload("race:12345");
	for (int i = 0; i < HIT_THREADS; i++)
		cr_assert_eq(pthread_create(&th[i], NULL, hit_worker, &hits[i]), 0);
	for (int i = 0; i < HIT_THREADS; i++) {
		pthread_join(th[i], NULL);
		total += hits[i];
	}
	cr_assert_eq(total, 12345);
}

struct named {
	const char *what;
	char comm[32];
};

static void *name_self(void *arg)
{
	struct named *n = arg;
	char path[64];
	ssize_t len;
	int fd;

	if (strchr(n->what, '%'))
		ftcc_thread_name(n->what, 7u);
	else
		ftcc_thread_name("%s", n->what);
	snprintf(path, sizeof(path), "/proc/self/task/%ld/comm", (long)gettid());
	fd = open(path, O_RDONLY | O_CLOEXEC);
	len = fd >= 0 ? read(fd, n->comm, sizeof(n->comm) - 1) : -1;
	if (fd >= 0)
		close(fd);
	n->comm[len > 0 ? len : 0] = '\0';
	n->comm[strcspn(n->comm, "\n")] = '\0';
	return NULL;
}

/* What the kernel shows for a thread named with @what (a format taking one unsigned 7). */
static const char *thread_named(struct named *n, const char *what)
{
	pthread_t t;

	n->what = what;
	cr_assert_eq(pthread_create(&t, NULL, name_self, n), 0);
	cr_assert_eq(pthread_join(t, NULL), 0);
	return n->comm;
}

/* The library's threads are told apart by name in a host process (top -H, gdb, /proc). */
Test(sys, thread_names)
{
	struct named n;

	cr_expect_str_eq(thread_named(&n, "lane%u"), "ftcc-lane7");
	cr_expect_str_eq(thread_named(&n, "ib"), "ftcc-ib");
	/* cut to the kernel's 15 bytes, never refused */
	cr_expect_str_eq(thread_named(&n, "abcdefghijklmnopqrstuvwxyz"), "ftcc-abcdefghij");
}
