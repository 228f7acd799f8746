/* SPDX-License-Identifier: BSD-3-Clause */
/* Non-blocking framed control connections: read buffer cut into checked frames, bounded write
 * queue, socket set-up (listen, non-blocking connect from a chosen source), the eventfd that
 * wakes a control thread and the poll set it waits on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "rt.h"

#define RBUF_MIN (64u << 10)
#define RBUF_MAX (CTL_FRAME_MAX + (64u << 10))
#define WBUF_MIN (16u << 10)
#define DRAIN_MAX (256u << 10) /* input read and dropped at close, at most */

void rt_conn_init(struct rt_conn *c, int fd, const char *peer)
{
	memset(c, 0, sizeof(*c));
	c->fd = fd;
	snprintf(c->peer, sizeof(c->peer), "%s", peer ? peer : "?");
}

void rt_conn_close(struct rt_conn *c)
{
	if (c->fd >= 0) {
		/* Unread input makes close() send RST, which throws away what we queued last. */
		uint8_t scratch[4096];
		size_t drained = 0;
		ssize_t n;

		while (drained < DRAIN_MAX &&
		       (n = recv(c->fd, scratch, sizeof(scratch), MSG_DONTWAIT)) > 0) {
			drained += (size_t)n;
		}
		close(c->fd);
	}
	c->fd = -1;
	free(c->rbuf);
	free(c->wbuf);
	c->rbuf = c->wbuf = NULL;
	c->roff = c->rlen = c->rcap = 0;
	c->woff = c->wlen = c->wcap = 0;
}

/* Records the first fatal error; @death when the peer's kernel closed or reset the link. */
static int conn_fail(struct rt_conn *c, int err, int death)
{
	if (!c->err) {
		c->err = err;
		c->death = death;
	}
	return c->err;
}

size_t rt_conn_pending(const struct rt_conn *c)
{
	return c->wlen - c->woff;
}

/* Makes room for @need more bytes at the end of the write queue. 0 or -ENOMEM. */
static int conn_wreserve(struct rt_conn *c, size_t need)
{
	if (c->woff > 0 && c->wcap - c->wlen < need) {
		memmove(c->wbuf, c->wbuf + c->woff, c->wlen - c->woff);
		c->wlen -= c->woff;
		c->woff = 0;
	}
	if (c->wcap - c->wlen >= need)
		return 0;
	size_t cap = c->wcap ? c->wcap : WBUF_MIN;
	while (cap - c->wlen < need)
		cap *= 2;
	uint8_t *p = realloc(c->wbuf, cap);
	if (!p)
		return -ENOMEM;
	c->wbuf = p;
	c->wcap = cap;
	return 0;
}

/* Fails the connection when its queue is over the bound (a peer that stopped reading). */
static int conn_check_queue(struct rt_conn *c)
{
	if (rt_conn_pending(c) <= RT_WQ_MAX)
		return 0;
	ftcc_warn("control: %s does not read (over %u MiB queued); closing", c->peer,
		  RT_WQ_MAX >> 20);
	return conn_fail(c, -ENOBUFS, 0);
}

int rt_conn_flush(struct rt_conn *c)
{
	if (c->err)
		return c->err;
	if (c->connecting)
		return 0; /* send() before the handshake ends could fail with EPIPE */
	while (c->woff < c->wlen) {
		ssize_t n = ftcc_sys_send(c->fd, c->wbuf + c->woff, c->wlen - c->woff);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			int death = errno == EPIPE || errno == ECONNRESET;
			return conn_fail(c, -errno, death);
		}
		c->woff += (size_t)n;
	}
	if (c->woff == c->wlen)
		c->woff = c->wlen = 0;
	return 0;
}

int rt_conn_send(struct rt_conn *c, const struct ctl_msg *m)
{
	ssize_t n;

	if (c->err)
		return c->err;
	if (conn_wreserve(c, 4096))
		return conn_fail(c, -ENOMEM, 0);
	n = ctl_msg_encode(m, c->wbuf + c->wlen, c->wcap - c->wlen);
	if (n == -EMSGSIZE) {
		if (conn_wreserve(c, CTL_FRAME_MAX))
			return conn_fail(c, -ENOMEM, 0);
		n = ctl_msg_encode(m, c->wbuf + c->wlen, c->wcap - c->wlen);
	}
	if (n < 0) {
		ftcc_warn("control: cannot encode %s for %s: %s", ctl_type_name(m->type), c->peer,
			  strerror((int)-n));
		return conn_fail(c, (int)n, 0);
	}
	c->wlen += (size_t)n;
	if (conn_check_queue(c))
		return c->err;
	return rt_conn_flush(c);
}

int rt_conn_send_raw(struct rt_conn *c, const void *buf, size_t len)
{
	if (c->err)
		return c->err;
	if (conn_wreserve(c, len))
		return conn_fail(c, -ENOMEM, 0);
	memcpy(c->wbuf + c->wlen, buf, len);
	c->wlen += len;
	if (conn_check_queue(c))
		return c->err;
	return rt_conn_flush(c);
}

ssize_t rt_conn_fill(struct rt_conn *c)
{
	if (c->err)
		return c->err;
	if (c->roff > 0) {
		memmove(c->rbuf, c->rbuf + c->roff, c->rlen - c->roff);
		c->rlen -= c->roff;
		c->roff = 0;
	}
	if (c->rcap - c->rlen < 4096 && c->rcap < RBUF_MAX) {
		size_t cap = c->rcap ? c->rcap * 2 : RBUF_MIN;
		uint8_t *p = realloc(c->rbuf, cap < RBUF_MAX ? cap : RBUF_MAX);

		if (!p)
			return conn_fail(c, -ENOMEM, 0);
		c->rbuf = p;
		c->rcap = cap < RBUF_MAX ? cap : RBUF_MAX;
	}
	if (c->rlen == c->rcap)
		return 0;
	ssize_t n = ftcc_sys_recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen);
	if (n == 0)
		return conn_fail(c, -ECONNRESET, 1); /* EOF: the peer's kernel closed it */
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return 0;
		return conn_fail(c, -errno, errno == ECONNRESET || errno == EPIPE);
	}
	c->rlen += (size_t)n;
	return n;
}

static uint32_t le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int rt_conn_next(struct rt_conn *c, struct ctl_msg *m)
{
	size_t have = c->rlen - c->roff, total = 0;
	int rc = ctl_frame_check(c->rbuf ? c->rbuf + c->roff : (const uint8_t *)"", have, &total);

	if (have >= 4 && le32(c->rbuf + c->roff) != CTL_WIRE_MAGIC)
		return -EPROTO; /* no need to wait for a whole header of garbage */
	if (rc == -EAGAIN)
		return 0;
	if (rc)
		return rc == -EPROTONOSUPPORT ? rc : -EPROTO;
	if (have < total)
		return 0;

	struct ctl_member_rec *recs = m->members;
	uint32_t cap = m->members_cap;

	memset(m, 0, sizeof(*m));
	m->members = recs;
	m->members_cap = cap;
	rc = ctl_msg_decode(c->rbuf + c->roff, total, m);
	c->roff += total;
	if (c->roff == c->rlen)
		c->roff = c->rlen = 0;
	if (rc == -EPROTONOSUPPORT)
		return rc;
	return rc ? -EBADMSG : 1;
}

void rt_conn_head_text(const struct rt_conn *c, int err, char *buf, size_t len)
{
	const uint8_t *p = c->rbuf ? c->rbuf + c->roff : NULL;
	size_t have = c->rlen - c->roff;

	if (err == -EPROTONOSUPPORT && have >= 6)
		snprintf(buf, len, "foreign version %u", (unsigned)(p[4] | p[5] << 8));
	else if (err == -EPROTONOSUPPORT)
		snprintf(buf, len, "foreign version");
	else if (err == -EBADMSG)
		snprintf(buf, len, "malformed frame");
	else if (have >= 4 && le32(p) != CTL_WIRE_MAGIC)
		snprintf(buf, len, "bad magic");
	else
		snprintf(buf, len, "bad header");
}

int rt_msg_alloc(struct ctl_msg *m)
{
	memset(m, 0, sizeof(*m));
	m->members = calloc(CTL_MAX_MEMBERS, sizeof(*m->members));
	if (!m->members)
		return -ENOMEM;
	m->members_cap = CTL_MAX_MEMBERS;
	return 0;
}

void rt_msg_free(struct ctl_msg *m)
{
	free(m->members);
	m->members = NULL;
	m->members_cap = 0;
}

int rt_listen(const struct sockaddr *sa, socklen_t len, int *fd, int *port)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	int one = 1, rc;
	int s = ftcc_sys_socket(sa->sa_family, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (s < 0)
		return -errno;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (ftcc_sys_bind(s, sa, len) < 0 || ftcc_sys_listen(s, 128) < 0 ||
	    getsockname(s, (struct sockaddr *)&ss, &sslen) < 0) {
		rc = -errno;
		close(s);
		return rc;
	}
	*fd = s;
	*port = ntohs(ss.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&ss)->sin6_port :
						 ((struct sockaddr_in *)&ss)->sin_port);
	return 0;
}

int rt_connect_start(const struct sockaddr *dst, socklen_t dlen, const struct sockaddr *src,
		     socklen_t slen, int *fd)
{
	int one = 1, rc;
	int s = ftcc_sys_socket(dst->sa_family, SOCK_STREAM | SOCK_NONBLOCK, 0);

	if (s < 0)
		return -errno;
	/* No TCP_USER_TIMEOUT, no keepalive: silence is judged by heartbeats, not the kernel. */
	setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (src && src->sa_family == dst->sa_family) {
		struct sockaddr_storage any;

		/* The port is picked at connect() time, so binds do not use up ports. */
		setsockopt(s, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		memcpy(&any, src, slen);
		if (any.ss_family == AF_INET)
			((struct sockaddr_in *)&any)->sin_port = 0;
		else
			((struct sockaddr_in6 *)&any)->sin6_port = 0;
		if (ftcc_sys_bind(s, (struct sockaddr *)&any, slen) < 0) {
			rc = -errno;
			close(s);
			return rc;
		}
	}
	*fd = s;
	if (ftcc_sys_connect(s, dst, dlen) == 0)
		return 0;
	if (errno == EINPROGRESS)
		return -EINPROGRESS;
	rc = -errno;
	close(s);
	*fd = -1;
	return rc;
}

int rt_connect_result(int fd)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -errno;
	return -err;
}

int rt_wake_open(void)
{
	int fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);

	return fd < 0 ? -errno : fd;
}

void rt_wake(int fd)
{
	uint64_t one = 1;

	if (write(fd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ftcc_warn("control: eventfd write failed: %m");
}

void rt_wake_clear(int fd)
{
	uint64_t v;

	if (read(fd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		ftcc_warn("control: eventfd read failed: %m");
}

void rt_pollset_reset(struct rt_pollset *ps)
{
	ps->n = 0;
}

int rt_pollset_add(struct rt_pollset *ps, int fd, short events, int kind, void *ptr)
{
	if (ps->n == ps->cap) {
		unsigned cap = ps->cap ? ps->cap * 2 : 32;
		struct pollfd *pfd = realloc(ps->pfd, cap * sizeof(*pfd));

		if (!pfd)
			return -ENOMEM;
		ps->pfd = pfd;
		struct rt_pollref *ref = realloc(ps->ref, cap * sizeof(*ref));
		if (!ref)
			return -ENOMEM;
		ps->ref = ref;
		ps->cap = cap;
	}
	ps->pfd[ps->n] = (struct pollfd){ .fd = fd, .events = events };
	ps->ref[ps->n] = (struct rt_pollref){ .kind = kind, .ptr = ptr };
	ps->n++;
	return 0;
}

void rt_pollset_free(struct rt_pollset *ps)
{
	free(ps->pfd);
	free(ps->ref);
	memset(ps, 0, sizeof(*ps));
}

int rt_pollset_wait(struct rt_pollset *ps, uint64_t timeout_ms)
{
	int ms = timeout_ms > 60000 ? 60000 : (int)timeout_ms;
	int rc = poll(ps->pfd, ps->n, ms);

	if (rc < 0 && errno == EINTR)
		return 0;
	if (rc < 0)
		ftcc_warn("control: poll failed: %m");
	return rc;
}
