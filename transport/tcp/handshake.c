/* SPDX-License-Identifier: BSD-3-Clause */
/* Incoming sockets on the engine's listeners: read the fixed-size hello (never more), check
 * it, and hand the socket to a new or existing connection. A stranger, garbage, a foreign
 * version, another communicator or a stale incarnation is refused with one log line and a
 * closed socket; a silent one is dropped at its deadline. Runs on the engine thread only.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "tcp.h"

#define PENDING_MAX 4096
#define HELLO_TIMEOUT_NS (5 * 1000000000ull)

static int npending;

static void pending_retire(struct tcp_pending *p, bool close_fd)
{
	struct tcp_pending **pp = &tcp_eng.pendings;

	while (*pp && *pp != p)
		pp = &(*pp)->next;
	if (*pp)
		*pp = p->next;
	if (close_fd)
		tcp_engine_del(&p->sk);
	p->sk.fd = -1;
	p->next = tcp_eng.dead_pendings;
	tcp_eng.dead_pendings = p;
	npending--;
}

static void sa_str(const struct sockaddr_storage *ss, char *buf, size_t len)
{
	struct tcp_wire_addr w;

	if (tcp_wire_addr_from_sa(&w, (const struct sockaddr *)ss) == 0)
		tcp_wire_addr_str(&w, buf, len);
	else
		snprintf(buf, len, "?");
}

void tcp_pending_accept(int dev)
{
	for (;;) {
		struct sockaddr_storage ss;
		socklen_t len = sizeof(ss);
		int fd = ftcc_sys_accept(tcp_eng.listeners[dev].fd, (struct sockaddr *)&ss, &len);
		struct tcp_pending *p;

		if (fd < 0) {
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				ftcc_warn("tcp: accept on %s: %s", tcp_eng.devs[dev].name,
					  strerror(errno));
			return;
		}
		p = calloc(1, sizeof(*p));
		if (!p || npending >= PENDING_MAX) {
			ftcc_warn("tcp: refusing connection: %d handshakes pending", npending);
			free(p);
			close(fd);
			continue;
		}
		tcp_sock_tune(fd);
		p->sk = (struct tcp_sock){ .fd = fd, .kind = SK_PENDING };
		p->dev = dev;
		p->deadline_ns = tcp_now_ns() + HELLO_TIMEOUT_NS;
		sa_str(&ss, p->peer, sizeof(p->peer));
		p->next = tcp_eng.pendings;
		tcp_eng.pendings = p;
		npending++;
		if (tcp_engine_add(&p->sk, EPOLLIN | EPOLLRDHUP | EPOLLET)) {
			pending_retire(p, true);
			continue;
		}
		tcp_pending_progress(p);
	}
}

void tcp_pending_expire(uint64_t now)
{
	struct tcp_pending *p = tcp_eng.pendings, *n;

	for (; p; p = n) {
		n = p->next;
		if (now > p->deadline_ns) {
			ftcc_info("tcp: dropped connection from %s: no hello within %llu ms",
				  p->peer, (unsigned long long)(HELLO_TIMEOUT_NS / 1000000));
			pending_retire(p, true);
		}
	}
}

static struct tcp_listen *find_listen(uint64_t id)
{
	for (struct tcp_listen *l = tcp_eng.listens; l; l = l->next)
		if (l->id == id && !l->closing)
			return l;
	return NULL;
}

static struct tcp_conn *find_recv_conn(uint64_t conn_id, uint64_t inc)
{
	for (struct tcp_conn *c = tcp_eng.conns; c; c = c->next)
		if (!c->is_send && c->conn_id == conn_id && c->peer_inc == inc)
			return c;
	return NULL;
}

/* Moves the pending socket into @c as its control socket (new or renewed). */
static const char *route_ctrl_existing(struct tcp_pending *p, struct tcp_conn *c,
				       const struct tcp_hello *h)
{
	const char *why = NULL;

	pthread_mutex_lock(&c->lock);
	if (c->closing || c->state == CS_FAILED)
		why = "connection already failed or closed";
	else if (h->gen <= c->gen)
		why = "stale connection generation";
	else if (h->comm_id != c->comm_id || h->listener_inc != c->local_inc)
		why = "communicator or incarnation mismatch";
	if (!why) {
		tcp_conn_attach_ctrl(c, p->sk.fd, h->gen);
		p->sk.fd = -1;
	}
	pthread_mutex_unlock(&c->lock);
	return why;
}

static const char *route_ctrl_new(struct tcp_pending *p, const struct tcp_hello *h)
{
	struct tcp_listen *l = find_listen(h->listen_id);
	struct tcp_conn *c;

	if (!l)
		return "unknown listen id (closed listener or stale handle)";
	if (h->comm_id != l->comm_id)
		return "foreign communicator id";
	if (h->listener_inc != l->incarnation)
		return "stale incarnation";
	if (h->gen != 1)
		return "reconnect for an unknown connection";
	c = tcp_conn_alloc(false, p->dev);
	if (!c)
		return "out of memory";
	c->conn_id = h->conn_id;
	c->comm_id = l->comm_id;
	c->failure_ns = l->failure_ns;
	c->quiet_loss = l->quiet_loss;
	c->listen_id = l->id;
	c->listen = l;
	c->local_inc = l->incarnation;
	c->peer_inc = h->incarnation;
	c->nstreams = h->nstreams;
	c->peer_addr = h->self;
	tcp_wire_addr_str(&h->self, c->peer_str, sizeof(c->peer_str));
	c->deadline_ns = tcp_now_ns() + tcp_eng.connect_ns;
	c->next = tcp_eng.conns;
	tcp_eng.conns = c;
	pthread_mutex_lock(&c->lock);
	tcp_conn_attach_ctrl(c, p->sk.fd, h->gen);
	pthread_mutex_unlock(&c->lock);
	p->sk.fd = -1;
	return NULL;
}

static const char *route_data(struct tcp_pending *p, const struct tcp_hello *h)
{
	struct tcp_conn *c = find_recv_conn(h->conn_id, h->incarnation);
	const char *why = NULL;
	int rc;

	if (!c)
		return "data socket for an unknown connection";
	pthread_mutex_lock(&c->lock);
	if (c->closing || c->state == CS_FAILED)
		why = "connection already failed or closed";
	else if (h->gen != c->gen || h->stream >= c->nstreams)
		why = "stale generation or bad stream index";
	else if ((rc = tcp_conn_attach_data(c, p->sk.fd, h->stream)))
		why = rc == -ENOTCONN ? "data socket before its control socket" :
					"stream already attached";
	else
		p->sk.fd = -1;
	pthread_mutex_unlock(&c->lock);
	return why;
}

static const char *route(struct tcp_pending *p, const struct tcp_hello *h)
{
	const char *why = NULL;
	struct tcp_conn *c;

	if (h->type == TCP_HELLO_PROBE)
		return NULL;
	pthread_mutex_lock(&tcp_eng.lock);
	if (h->type == TCP_HELLO_DATA) {
		why = route_data(p, h);
	} else {
		c = find_recv_conn(h->conn_id, h->incarnation);
		why = c ? route_ctrl_existing(p, c, h) : route_ctrl_new(p, h);
	}
	pthread_mutex_unlock(&tcp_eng.lock);
	return why;
}

void tcp_pending_progress(struct tcp_pending *p)
{
	struct tcp_hello h;
	const char *why;
	ssize_t n;
	int rc;

	if (p->sk.fd < 0)
		return;
	while (p->got < TCP_HELLO_WIRE_SIZE) {
		n = ftcc_sys_recv(p->sk.fd, p->buf + p->got, TCP_HELLO_WIRE_SIZE - p->got);
		if (n > 0) {
			p->got += (size_t)n;
			continue;
		}
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return;
		ftcc_info("tcp: connection from %s closed before its hello (%zu bytes)", p->peer,
			  p->got);
		pending_retire(p, true);
		return;
	}
	rc = tcp_hello_decode(p->buf, p->got, &h);
	if (rc) {
		ftcc_warn("tcp: refused connection from %s: %s", p->peer,
			  rc == -EPROTO ? "foreign protocol version" : "malformed hello");
		pending_retire(p, true);
		return;
	}
	why = route(p, &h);
	if (why)
		ftcc_warn("tcp: refused connection from %s: %s", p->peer, why);
	/* Routed sockets were moved into a connection (fd -1); the rest are closed. */
	pending_retire(p, p->sk.fd >= 0);
}
