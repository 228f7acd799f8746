/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf across hosts: one rank per process, started by mpirun, torchrun, srun or by hand,
 * joined into the same bootstrap mesh the forked ranks use, over TCP.
 *
 * Rank 0 listens on the boot address's port (every address); every other rank listens on a port
 * of its own choosing, connects to rank 0 (retrying until the bound: ranks start in any order)
 * and says who it is (HELLO: magic "FTPB", version, rank, ranks, its listening port, run id 0).
 * Once all ranks said so, rank 0 sends each one the run's id and the table of every rank's
 * address (as rank 0 saw it) and port; then each rank connects to the ranks below it and accepts
 * the ones above it, each new connection starting with the connector's HELLO with the run's id.
 * A connection that is not a valid HELLO of this run (a stranger, a port scanner, a rank of
 * another size or run, a rank already known) is closed with a line on stderr and the wait goes
 * on; every wait, connects included, ends by PERF_BOOT_TIMEOUT_MS.
 */
#define _GNU_SOURCE
#include "perf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define HOSTS_MAGIC 0x42505446u /* "FTPB" */
#define HOSTS_VERSION 1
#define HOSTS_HELLO 28 /* magic, version, rank, ranks, port: u32 each; run id: u64 (0 to rank 0) */
#define HOSTS_ENTRY 68 /* table entry: address text (64, NUL-padded), port (u32) */

static int64_t left_ms(uint64_t deadline)
{
	uint64_t now = perf_now_ns();

	return now >= deadline ? 0 : (int64_t)((deadline - now) / 1000000) + 1;
}

/* Reads exactly @len bytes from @fd by @deadline. 0, -ETIMEDOUT, -EPIPE or -errno. */
static int read_full(int fd, void *buf, size_t len, uint64_t deadline)
{
	char *p = buf;

	while (len) {
		struct pollfd pfd = { .fd = fd, .events = POLLIN };
		int ready = poll(&pfd, 1, (int)left_ms(deadline));
		ssize_t n;

		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			return ready ? -errno : -ETIMEDOUT;
		n = recv(fd, p, len, 0);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return n ? -errno : -EPIPE;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static int write_full(int fd, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void put32(uint8_t *p, uint32_t v)
{
	v = htonl(v);
	memcpy(p, &v, 4);
}

static uint32_t get32(const uint8_t *p)
{
	uint32_t v;

	memcpy(&v, p, 4);
	return ntohl(v);
}

static int send_hello(int fd, int rank, int nranks, int port, uint64_t run_id)
{
	uint8_t h[HOSTS_HELLO];

	put32(h, HOSTS_MAGIC);
	put32(h + 4, HOSTS_VERSION);
	put32(h + 8, (uint32_t)rank);
	put32(h + 12, (uint32_t)nranks);
	put32(h + 16, (uint32_t)port);
	put32(h + 20, (uint32_t)(run_id >> 32));
	put32(h + 24, (uint32_t)run_id);
	return write_full(fd, h, sizeof(h));
}

/* Reads a HELLO from the accepted @fd: its rank, or -1 after a line saying why it is refused
 * (closed by the caller). A rank must lie in [@lo, nranks) and not be known yet. */
static int read_hello(struct perf_boot *b, int fd, int lo, int *port, uint64_t deadline)
{
	uint8_t h[HOSTS_HELLO];
	uint64_t bound = perf_now_ns() + 5000000000ull; /* a stranger gets 5 s at most */
	int rc = read_full(fd, h, sizeof(h), bound < deadline ? bound : deadline);
	uint32_t r;

	if (rc) {
		fprintf(stderr,
			"ftcc-perf: rank %d: a connection to the bootstrap sent no hello "
			"(%s); closed\n",
			b->rank, strerror(-rc));
		return -1;
	}
	r = get32(h + 8);
	if (get32(h) != HOSTS_MAGIC || get32(h + 4) != HOSTS_VERSION ||
	    get32(h + 12) != (uint32_t)b->nranks || r < (uint32_t)lo || r >= (uint32_t)b->nranks ||
	    b->fds[r] >= 0 || get32(h + 16) > 65535 ||
	    ((uint64_t)get32(h + 20) << 32 | get32(h + 24)) != b->run_id) {
		fprintf(stderr,
			"ftcc-perf: rank %d: refused a bootstrap connection (not an ftcc-perf rank "
			"of this %d-rank run, or a rank already here)\n",
			b->rank, b->nranks);
		return -1;
	}
	*port = (int)get32(h + 16);
	return (int)r;
}

/* A listening IPv4 socket on @host (NULL: any address) and @port (0: any). The fd or -errno. */
static int listen_on(const char *host, int port, int *bound_port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	socklen_t len = sizeof(sa);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc;

	if (fd < 0)
		return -errno;
	sa.sin_addr.s_addr = htonl(INADDR_ANY);
	if (host && inet_pton(AF_INET, host, &sa.sin_addr) != 1) {
		close(fd);
		return -EINVAL;
	}
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) || listen(fd, 64) ||
	    getsockname(fd, (struct sockaddr *)&sa, &len)) {
		rc = -errno;
		close(fd);
		return rc;
	}
	*bound_port = ntohs(sa.sin_port);
	return fd;
}

/* One non-blocking connect to @sa, waited for until @deadline. 0 or -errno. */
static int connect_once(int fd, const struct sockaddr_in *sa, uint64_t deadline)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int err = 0;
	socklen_t len = sizeof(err);

	if (connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) == 0)
		return 0;
	if (errno != EINPROGRESS)
		return -errno;
	for (;;) {
		int ready = poll(&pfd, 1, (int)left_ms(deadline));

		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0)
			return ready ? -errno : -ETIMEDOUT;
		break;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len))
		return -errno;
	return -err;
}

/* Connects to @host:@port, retrying refusals until @deadline; the socket is blocking again
 * once connected. The fd or -errno. */
static int connect_to(const char *host, int port, uint64_t deadline)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };

	if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return -EINVAL;
	for (;;) {
		int one = 1, err;
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);

		if (fd < 0)
			return -errno;
		err = -connect_once(fd, &sa, deadline);
		if (err == 0) {
			setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
			fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
			return fd;
		}
		close(fd);
		if ((err != ECONNREFUSED && err != ETIMEDOUT && err != EHOSTUNREACH &&
		     err != ENETUNREACH) ||
		    perf_now_ns() >= deadline)
			return -err;
		nanosleep(&(struct timespec){ .tv_nsec = 50 * 1000 * 1000 }, NULL);
	}
}

/* Accepts on @lfd until every rank in [@lo, nranks) other than self has a connection. */
static int accept_ranks(struct perf_boot *b, int lfd, int lo, int *ports, uint64_t deadline)
{
	int need = 0;

	for (int r = lo; r < b->nranks; r++)
		need += r != b->rank && b->fds[r] < 0;
	while (need > 0) {
		struct sockaddr_in peer, self;
		socklen_t plen = sizeof(peer), slen = sizeof(self);
		struct pollfd pfd = { .fd = lfd, .events = POLLIN };
		int ready = left_ms(deadline) ? poll(&pfd, 1, (int)left_ms(deadline)) : 0;
		int fd, r, port = 0, one = 1;

		if (ready < 0 && errno == EINTR)
			continue;
		if (ready <= 0) {
			fprintf(stderr,
				"ftcc-perf: rank %d: %d rank(s) did not connect within %d s\n",
				b->rank, need, PERF_BOOT_TIMEOUT_MS / 1000);
			return -ETIMEDOUT;
		}
		fd = accept4(lfd, (struct sockaddr *)&peer, &plen, SOCK_CLOEXEC);
		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				fprintf(stderr, "ftcc-perf: rank %d: accept: %s\n", b->rank,
					strerror(errno));
				return -errno;
			}
			continue;
		}
		r = read_hello(b, fd, lo, &port, deadline);
		if (r < 0) {
			close(fd);
			continue;
		}
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
		b->fds[r] = fd;
		if (ports)
			ports[r] = port;
		inet_ntop(AF_INET, &peer.sin_addr, b->host[r], sizeof(b->host[r]));
		/* rank 0 listens on every address: its own is the one the others reached */
		if (b->rank == 0 && getsockname(fd, (struct sockaddr *)&self, &slen) == 0)
			inet_ntop(AF_INET, &self.sin_addr, b->host[0], sizeof(b->host[0]));
		need--;
	}
	return 0;
}

/* Rank 0: collects every rank's HELLO, then sends each the table. */
static int boot_rank0(struct perf_boot *b, const char *host, int port, uint64_t deadline)
{
	uint8_t table[8 + PERF_MAX_RANKS * HOSTS_ENTRY];
	int ports[PERF_MAX_RANKS] = { 0 }, bound = 0, rc;
	/* Every address: a boot name that resolves to a loopback alias here (127.0.1.1 on
	 * Debian) still reaches rank 0 through the address the others use. */
	int lfd = listen_on(NULL, port, &bound);

	if (lfd < 0) {
		fprintf(stderr, "ftcc-perf: rank 0: cannot listen on port %d: %s\n", port,
			strerror(-lfd));
		return lfd;
	}
	snprintf(b->host[0], sizeof(b->host[0]), "%s", host);
	rc = accept_ranks(b, lfd, 1, ports, deadline);
	close(lfd);
	if (rc)
		return rc;
	b->run_id = perf_now_ns() ^ ((uint64_t)getpid() << 32);
	memset(table, 0, sizeof(table));
	put32(table, (uint32_t)(b->run_id >> 32));
	put32(table + 4, (uint32_t)b->run_id);
	for (int r = 0; r < b->nranks; r++) {
		snprintf((char *)table + 8 + r * HOSTS_ENTRY, 64, "%s", b->host[r]);
		put32(table + 8 + r * HOSTS_ENTRY + 64, (uint32_t)ports[r]);
	}
	for (int r = 1; r < b->nranks && !rc; r++)
		rc = write_full(b->fds[r], table, 8 + (size_t)b->nranks * HOSTS_ENTRY);
	return rc;
}

/* Rank @b->rank > 0: HELLO to rank 0, the table, then the mesh. */
static int boot_rank(struct perf_boot *b, const char *host, int port, uint64_t deadline)
{
	uint8_t table[8 + PERF_MAX_RANKS * HOSTS_ENTRY];
	struct sockaddr_in self;
	socklen_t slen = sizeof(self);
	int myport = 0, lfd = listen_on(NULL, 0, &myport), fd, rc;

	if (lfd < 0)
		return lfd;
	fd = connect_to(host, port, deadline);
	if (fd < 0) {
		fprintf(stderr, "ftcc-perf: rank %d: cannot reach rank 0 at %s:%d: %s\n", b->rank,
			host, port, strerror(-fd));
		close(lfd);
		return fd;
	}
	b->fds[0] = fd;
	rc = send_hello(fd, b->rank, b->nranks, myport, 0);
	rc = rc ? rc : read_full(fd, table, 8 + (size_t)b->nranks * HOSTS_ENTRY, deadline);
	if (rc) {
		fprintf(stderr, "ftcc-perf: rank %d: no table from rank 0: %s\n", b->rank,
			strerror(-rc));
		close(lfd);
		return rc;
	}
	b->run_id = (uint64_t)get32(table) << 32 | get32(table + 4);
	for (int r = 0; r < b->nranks; r++) {
		memcpy(b->host[r], table + 8 + r * HOSTS_ENTRY, sizeof(b->host[r]) - 1);
		b->host[r][sizeof(b->host[r]) - 1] = '\0';
	}
	if (getsockname(fd, (struct sockaddr *)&self, &slen) == 0)
		inet_ntop(AF_INET, &self.sin_addr, b->host[b->rank], sizeof(b->host[b->rank]));
	for (int r = 1; r < b->rank && !rc; r++) {
		int c = connect_to(b->host[r], (int)get32(table + 8 + r * HOSTS_ENTRY + 64),
				   deadline);

		rc = c < 0 ? c : send_hello(c, b->rank, b->nranks, myport, b->run_id);
		if (c >= 0)
			b->fds[r] = c;
	}
	rc = rc ? rc : accept_ranks(b, lfd, b->rank + 1, NULL, deadline);
	close(lfd);
	return rc;
}

int perf_boot_tcp(struct perf_boot *b, int rank, int nranks, const char *boot)
{
	char host[64];
	const char *colon = boot ? strrchr(boot, ':') : NULL;
	uint64_t deadline = perf_now_ns() + (uint64_t)PERF_BOOT_TIMEOUT_MS * 1000000ull;
	int port = 0, rc;

	memset(b, 0, sizeof(*b));
	b->rank = rank;
	b->nranks = nranks;
	for (int r = 0; r < PERF_MAX_RANKS; r++)
		b->fds[r] = -1;
	if (!colon || colon == boot || (size_t)(colon - boot) >= sizeof(host) ||
	    sscanf(colon + 1, "%d", &port) != 1 || port < 1 || port > 65535 || rank < 0 ||
	    nranks < 1 || rank >= nranks || nranks > PERF_MAX_RANKS) {
		fprintf(stderr,
			"ftcc-perf: bad bootstrap: rank %d of %d at \"%s\" (need "
			"IPV4:PORT, 0 <= rank < ranks <= %d)\n",
			rank, nranks, boot ? boot : "", PERF_MAX_RANKS);
		return -EINVAL;
	}
	memcpy(host, boot, (size_t)(colon - boot));
	host[colon - boot] = '\0';
	{
		struct in_addr a;

		if (inet_pton(AF_INET, host, &a) != 1) {
			struct addrinfo hints = { .ai_family = AF_INET }, *res = NULL;

			if (getaddrinfo(host, NULL, &hints, &res) || !res) {
				fprintf(stderr, "ftcc-perf: cannot resolve bootstrap host %s\n",
					host);
				return -EINVAL;
			}
			inet_ntop(AF_INET, &((struct sockaddr_in *)res->ai_addr)->sin_addr, host,
				  sizeof(host));
			freeaddrinfo(res);
		}
	}
	rc = rank == 0 ? boot_rank0(b, host, port, deadline) : boot_rank(b, host, port, deadline);
	if (rc)
		perf_boot_close(b);
	return rc;
}

/* @text as a rank or size (0..PERF_MAX_RANKS) into *@out. 0, or -1 after a line saying so. */
static int perf_env_int(const char *text, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < 0 || v > PERF_MAX_RANKS) {
		fprintf(stderr,
			"ftcc-perf: the launcher's rank or size \"%s\" is not a number "
			"in 0..%d\n",
			text, PERF_MAX_RANKS);
		return -1;
	}
	*out = (int)v;
	return 0;
}

/* The first of @names set in the environment, or NULL. */
static const char *env_first(const char *const *names)
{
	for (; *names; names++) {
		const char *v = getenv(*names);

		if (v && *v)
			return v;
	}
	return NULL;
}

int perf_launch_env(int *rank, int *nranks, char *boot, size_t len)
{
	static const char *const ranks[] = { "OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK",
					     "SLURM_PROCID",	     "RANK",	  NULL };
	static const char *const sizes[] = { "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "SLURM_NTASKS",
					     "WORLD_SIZE", NULL };
	const char *r = env_first(ranks), *s = env_first(sizes);
	const char *addr = getenv("MASTER_ADDR"), *port = getenv("MASTER_PORT");

	if (*rank < 0 && r && perf_env_int(r, rank))
		return -1;
	if (*rank < 0)
		return 0; /* the ranks are forked here */
	if (*nranks <= 0 && s && perf_env_int(s, nranks))
		return -1;
	if (!boot[0] && getenv("FTCC_PERF_BOOT"))
		snprintf(boot, len, "%s", getenv("FTCC_PERF_BOOT"));
	if (!boot[0] && addr && *addr && port && *port)
		snprintf(boot, len, "%s:%s", addr, port);
	return 1;
}
