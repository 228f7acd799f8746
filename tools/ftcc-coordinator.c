/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-coordinator: the membership daemon (FTCC_COORDINATOR=host:port) serving any number of
 * groups until SIGINT or SIGTERM, and its status client (--status host:port prints what the
 * daemon's STATUS request returns).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "ftcc.h"
#include "ftcc/ctl.h"
#include "ftcc/settings.h"

#define DEFAULT_LISTEN "0.0.0.0:29650" /* not torchrun's 29500 nor its rendezvous's 29400 */
#define STATUS_TIMEOUT_MS 5000

static void usage(FILE *out, const char *argv0)
{
	fprintf(out,
		"usage: %s [--listen host:port] [--status host:port] [--version] [--help]\n"
		"  --listen  serve groups on this address (default %s; port 0 picks one)\n"
		"  --status  print the state of the daemon at this address and exit\n"
		"  --version print the library version and exit\n"
		"  --help    print this and exit\n",
		argv0, DEFAULT_LISTEN);
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Waits for @events on @fd until STATUS_TIMEOUT_MS after @t0. 1 ready, 0 timeout, -1 error. */
static int wait_fd(int fd, short events, const struct timespec *t0)
{
	struct pollfd pfd = { .fd = fd, .events = events };
	long left = STATUS_TIMEOUT_MS - elapsed_ms(t0);

	if (left <= 0)
		return 0;
	int rc = poll(&pfd, 1, (int)left);
	return rc < 0 && errno == EINTR ? 0 : rc;
}

static int status_client(const char *addr)
{
	struct sockaddr_storage ss;
	unsigned len = 0;
	struct timespec t0;
	char buf[65536];
	ssize_t n;
	int err = 0, fd;
	socklen_t elen = sizeof(err);

	if (ctl_parse_addr(addr, &ss, &len)) {
		fprintf(stderr, "ftcc-coordinator: bad address \"%s\" (expected host:port)\n",
			addr);
		return 2;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		perror("ftcc-coordinator: socket");
		return 1;
	}
	if (connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS)
		goto fail;
	if (wait_fd(fd, POLLOUT, &t0) <= 0)
		goto timeout;
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &elen) < 0 || err) {
		errno = err ? err : errno;
		goto fail;
	}
	if (send(fd, "STATUS\n", 7, MSG_NOSIGNAL) != 7)
		goto fail;
	for (;;) {
		if (wait_fd(fd, POLLIN, &t0) <= 0)
			goto timeout;
		n = recv(fd, buf, sizeof(buf), 0);
		if (n == 0)
			break;
		if (n < 0) {
			if (errno == EAGAIN || errno == EINTR)
				continue;
			goto fail;
		}
		fwrite(buf, 1, (size_t)n, stdout);
	}
	close(fd);
	return ferror(stdout) ? 1 : 0;
fail:
	fprintf(stderr, "ftcc-coordinator: %s: %s\n", addr, strerror(errno));
	close(fd);
	return 1;
timeout:
	fprintf(stderr, "ftcc-coordinator: %s: no complete answer within %d ms\n", addr,
		STATUS_TIMEOUT_MS);
	close(fd);
	return 1;
}

/* Serves until SIGINT or SIGTERM. */
static int serve(const char *addr)
{
	struct ctl_daemon *d = NULL;
	sigset_t set;
	int sig = -1, rc;

	if (ftcc_settings_load()) {
		fprintf(stderr, "ftcc-coordinator: invalid FTCC_* setting (named above)\n");
		return 2;
	}
	/* Blocked before the daemon's thread starts, so it inherits the mask and the signals
	 * are taken here by sigtimedwait(). */
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	rc = ctl_daemon_start(addr, &d);
	if (rc) {
		fprintf(stderr, "ftcc-coordinator: cannot serve on %s: %s\n", addr, strerror(-rc));
		return 1;
	}
	printf("ftcc-coordinator: listening on %s (port %d)\n", addr, ctl_daemon_port(d));
	fflush(stdout);
	while (sig < 0) {
		struct timespec ts = { .tv_sec = 1 };

		sig = sigtimedwait(&set, NULL, &ts);
	}
	printf("ftcc-coordinator: %s, stopping\n", strsignal(sig));
	ctl_daemon_stop(d);
	return 0;
}

int main(int argc, char **argv)
{
	const char *listen_addr = DEFAULT_LISTEN, *status_addr = NULL;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--listen") == 0 && i + 1 < argc) {
			listen_addr = argv[++i];
		} else if (strcmp(argv[i], "--status") == 0 && i + 1 < argc) {
			status_addr = argv[++i];
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout, argv[0]);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("ftcc-coordinator %d.%d.%d\n", ftcc_version() / 10000,
			       ftcc_version() / 100 % 100, ftcc_version() % 100);
			return 0;
		} else {
			usage(stderr, argv[0]);
			return 2;
		}
	}
	if (status_addr)
		return status_client(status_addr);
	return serve(listen_addr);
}
