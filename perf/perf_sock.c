/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf sock mode: the baseline measured in the same run as the plug-in. One TCP
 * connection (loopback, or between the two ranks' hosts), blocking send/recv with TCP_NODELAY
 * and kernel-default buffers; the same sweep, iterations and report as p2p (perf_pair.c). -R:
 * a blocking ping-pong.
 */
#include "perf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* One rank's end of the baseline connection. */
struct sock_pair {
	int fd;
	int rank;
};

static int sock_fail(int rank, const char *what)
{
	int err = errno ? errno : EIO;

	fprintf(stderr, "ftcc-perf rank %d: %s: %s\n", rank, what, strerror(err));
	return -err;
}

/* Nagle off (small messages go out at once); every blocking call bounded by the stall timeout
 * so a hung peer ends the run instead of hanging it. */
static int sock_tune(int fd, int rank)
{
	struct timeval tv = { .tv_sec = (time_t)(PERF_STALL_TIMEOUT_NS / 1000000000ull) };
	int one = 1;

	if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) ||
	    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) ||
	    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv))) {
		return sock_fail(rank, "setsockopt");
	}
	return 0;
}

/* rank 1 listens on its address (127.0.0.1 for forked ranks), an ephemeral port, and tells
 * rank 0; returns the data socket. */
static int sock_accept(struct perf_boot *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t sl = sizeof(sa);
	int lfd, fd = -1, rc;
	struct pollfd pfd;

	if (inet_pton(AF_INET, b->host[1], &sa.sin_addr) != 1) {
		errno = EINVAL;
		return sock_fail(b->rank, b->host[1]);
	}

	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0) {
		return sock_fail(b->rank, "socket");
	}
	if (bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) || listen(lfd, 1) ||
	    getsockname(lfd, (struct sockaddr *)&sa, &sl)) {
		rc = sock_fail(b->rank, "bind/listen");
		goto close_listen;
	}
	rc = perf_boot_send(b, 0, &sa.sin_port, sizeof(sa.sin_port));
	if (rc) {
		goto close_listen;
	}
	pfd = (struct pollfd){ .fd = lfd, .events = POLLIN };
	rc = poll(&pfd, 1, (int)(PERF_CONNECT_TIMEOUT_NS / 1000000));
	if (rc <= 0) {
		errno = rc ? errno : ETIMEDOUT;
		rc = sock_fail(b->rank, "accept");
		goto close_listen;
	}
	fd = accept(lfd, NULL, NULL);
	rc = fd < 0 ? sock_fail(b->rank, "accept") : fd;
close_listen:
	close(lfd);
	return rc;
}

/* rank 0 connects to the port rank 1 announced; returns the data socket. */
static int sock_connect(struct perf_boot *b)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	int fd, rc;

	if (inet_pton(AF_INET, b->host[1], &sa.sin_addr) != 1) {
		errno = EINVAL;
		return sock_fail(b->rank, b->host[1]);
	}
	rc = perf_boot_recv(b, 1, &sa.sin_port, sizeof(sa.sin_port));
	if (rc) {
		return rc;
	}
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		return sock_fail(b->rank, "socket");
	}
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		rc = sock_fail(b->rank, "connect");
		close(fd);
		return rc;
	}
	return fd;
}

static int sock_send(void *t, void *buf, size_t size)
{
	struct sock_pair *s = t;
	const char *p = buf;

	while (size) {
		ssize_t n = send(s->fd, p, size, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			return sock_fail(s->rank, "send");
		}
		p += n;
		size -= (size_t)n;
	}
	return 0;
}

static int sock_recv(void *t, void *buf, size_t size)
{
	struct sock_pair *s = t;
	char *p = buf;

	while (size) {
		ssize_t n = recv(s->fd, p, size, 0);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			errno = n ? errno : EPIPE;
			return sock_fail(s->rank, "recv");
		}
		p += n;
		size -= (size_t)n;
	}
	return 0;
}

/* rank 0 sends then waits for the echo; rank 1 receives and echoes the same buffer. */
static int sock_pingpong(void *t, int rank, void *sbuf, void *rbuf, size_t size)
{
	int rc;

	if (rank == 0) {
		rc = sock_send(t, sbuf, size);
		return rc ? rc : sock_recv(t, rbuf, size);
	}
	rc = sock_recv(t, rbuf, size);
	return rc ? rc : sock_send(t, rbuf, size);
}

static const struct perf_pair_ops sock_ops = {
	.send = sock_send,
	.recv = sock_recv,
	.pingpong = sock_pingpong,
};

int perf_sock_run(const struct perf_opts *o, struct perf_boot *b)
{
	struct sock_pair s = { .fd = -1, .rank = b->rank };
	void *sbuf = perf_buf_alloc(o->max_bytes), *rbuf = perf_buf_alloc(o->max_bytes);
	const char *notes =
		o->roundtrip ?
			"# baseline: one TCP connection on 127.0.0.1, blocking send/recv, "
			"TCP_NODELAY; -d ignored\n# round trip: rank 0 sends size bytes, rank 1 "
			"echoes them; time = FULL round trip on rank 0 (not halved); algbw = "
			"2*size/time\n" :
			"# baseline: one TCP connection on 127.0.0.1, blocking send/recv, "
			"TCP_NODELAY; -d ignored\n# one iteration = size bytes rank 0 -> rank 1 in "
			"one send() loop; time = max(sender, receiver) per iteration\n";
	int rc;

	if (!sbuf || !rbuf) {
		fprintf(stderr, "ftcc-perf rank %d: cannot allocate 2 x %zu bytes\n", b->rank,
			o->max_bytes);
		rc = -ENOMEM;
		goto free_bufs;
	}
	rc = b->rank == 0 ? sock_connect(b) : sock_accept(b);
	if (rc < 0) {
		goto free_bufs;
	}
	s.fd = rc;
	rc = sock_tune(s.fd, b->rank);
	if (!rc) {
		rc = perf_pair_run(o, b, &sock_ops, &s, sbuf, rbuf, notes);
	}
	close(s.fd);
free_bufs:
	free(rbuf);
	free(sbuf);
	return rc;
}
