/* SPDX-License-Identifier: BSD-3-Clause */
/* Connection lifecycle: allocation, dialing, attaching accepted sockets, faults, timers.
 *
 * A fault (reset, EOF, I/O error) on a live connection is first treated as transient: the
 * send side redials and the two sides resume from the receiver's state; the receive side
 * probes the sender's engine port meanwhile. A refused redial or probe is evidence of death
 * and fails the connection at once; silence past FTCC_FAILURE_TIMEOUT_MS fails it too.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "tcp.h"

#define EV_SOCK (EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET)
#define PROBE_PERIOD_NS (50 * 1000000ull)

struct tcp_conn *tcp_conn_alloc(bool is_send, int dev)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->base.ops = &tcp_ops;
	pthread_mutex_init(&c->lock, NULL);
	c->is_send = is_send;
	c->dev = dev;
	c->peer_rank = -1;
	c->probe_fd = -1;
	c->nstreams = tcp_eng.nstreams;
	c->chunk_min = tcp_eng.chunk_min;
	c->ctrl = (struct tcp_sock){ .fd = -1, .kind = SK_CTRL, .conn = c };
	for (int i = 0; i < TCP_MAX_STREAMS; i++)
		c->streams[i].sk = (struct tcp_sock){
			.fd = -1, .kind = SK_DATA, .idx = (uint8_t)i, .conn = c
		};
	for (int i = 0; i < TCP_SEND_RING; i++)
		c->sreq[i] = (struct tcp_req){ .conn = c, .kind = REQ_SEND };
	for (int i = 0; i < TCP_RECV_RING; i++)
		c->rreq[i] = (struct tcp_req){ .conn = c, .kind = REQ_RECV };
	c->last_rx_ns = c->last_hb_ns = tcp_now_ns();
	return c;
}

void tcp_conn_close_sockets(struct tcp_conn *c)
{
	tcp_engine_del(&c->ctrl);
	c->ctrl_out_len = 0;
	c->ctrl_in_got = 0;
	for (int i = 0; i < TCP_MAX_STREAMS; i++) {
		struct tcp_stream *s = &c->streams[i];

		tcp_engine_del(&s->sk);
		s->ready = false;
		s->hello_sent = 0;
		s->have_chunk = false;
		s->rhdr_got = 0;
		s->in_payload = false;
		s->blocked = false;
	}
	if (c->probe_fd >= 0)
		close(c->probe_fd);
	c->probe_fd = -1;
}

void tcp_conn_free(struct tcp_conn *c)
{
	tcp_conn_close_sockets(c);
	for (int i = 0; i < TCP_SEND_RING; i++)
		if (c->sreq[i].eager && !c->sreq[i].acked)
			free(c->sreq[i].data);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static int sock_open(struct tcp_conn *c, struct tcp_sock *sk, bool data)
{
	struct sockaddr_storage ss;
	socklen_t len = tcp_wire_addr_to_sa(&c->peer_addr, &ss);
	int fd;

	fd = ftcc_sys_socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	tcp_sock_tune(fd);
	if (data && tcp_eng.sockbuf > 0) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &tcp_eng.sockbuf, sizeof(int));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tcp_eng.sockbuf, sizeof(int));
	}
	if (ftcc_sys_connect(fd, (struct sockaddr *)&ss, len) < 0 && errno != EINPROGRESS) {
		int err = -errno;

		close(fd);
		return err;
	}
	sk->fd = fd;
	sk->connecting = true;
	if (tcp_engine_add(sk, EV_SOCK)) {
		close(fd);
		sk->fd = -1;
		return -EIO;
	}
	return 0;
}

static void fill_hello(struct tcp_conn *c, struct tcp_hello *h, uint16_t type, int stream)
{
	memset(h, 0, sizeof(*h));
	h->type = type;
	h->stream = (uint16_t)stream;
	h->nstreams = (uint16_t)c->nstreams;
	h->gen = c->gen;
	h->listen_id = c->listen_id;
	h->comm_id = c->comm_id;
	h->listener_inc = c->peer_inc;
	h->incarnation = c->local_inc;
	h->conn_id = c->conn_id;
	h->self = tcp_eng.listen_addr[c->dev];
}

/* Send side: opens a new control socket (generation + 1) and queues its hello. */
int tcp_conn_dial_start(struct tcp_conn *c)
{
	struct tcp_hello h;
	int rc;

	tcp_conn_close_sockets(c);
	c->gen++;
	rc = sock_open(c, &c->ctrl, false);
	if (rc)
		return rc;
	fill_hello(c, &h, TCP_HELLO_CTRL, 0);
	tcp_hello_encode(&h, c->ctrl_out);
	c->ctrl_out_len = TCP_HELLO_WIRE_SIZE;
	c->state = CS_DIAL;
	return 0;
}

/* Send side, WELCOME received: apply the receiver's state and open the data sockets. */
void tcp_conn_on_welcome(struct tcp_conn *c, const struct tcp_frame *f)
{
	struct tcp_hello h;

	if (!c->is_send || f->gen != c->gen || c->state != CS_DIAL) {
		tcp_conn_fail(c, -EBADMSG, "unexpected WELCOME (generation %u, ours %u)", f->gen,
			      c->gen);
		return;
	}
	tcp_send_apply_resume(c, f);
	if (c->state == CS_FAILED)
		return;
	for (int i = 0; i < c->nstreams; i++) {
		struct tcp_stream *s = &c->streams[i];
		int rc = sock_open(c, &s->sk, true);

		if (rc) {
			tcp_conn_fault(c, rc, "data socket connect failed");
			return;
		}
		fill_hello(c, &h, TCP_HELLO_DATA, i);
		tcp_hello_encode(&h, s->hello);
		s->hello_sent = 0;
	}
	c->state = CS_DATA;
}

/* Receive side: an accepted control socket becomes this connection's (first or renewed). */
void tcp_conn_attach_ctrl(struct tcp_conn *c, int fd, uint32_t gen)
{
	struct epoll_event ev = { .events = EV_SOCK, .data.ptr = &c->ctrl };
	struct tcp_frame f = { .type = TCP_FRAME_WELCOME };
	bool renewed = c->gen > 0;

	tcp_conn_close_sockets(c);
	if (renewed) {
		tcp_recv_reset_partial(c);
		/* The sender saw a fault we may not have seen: an outage starts now either way. */
		if (!c->fault_ns) {
			c->fault_ns = tcp_now_ns();
			c->deadline_ns = c->fault_ns + tcp_eng.reconnect_ns;
		}
	}
	c->gen = gen;
	c->ctrl.fd = fd;
	epoll_ctl(tcp_eng.epfd, EPOLL_CTL_MOD, fd, &ev);
	f.gen = gen;
	tcp_recv_resume_state(c, &f);
	tcp_ctrl_queue(c, &f);
	c->last_rx_ns = tcp_now_ns();
	c->state = CS_DATA;
	tcp_conn_progress(c);
}

static void conn_maybe_ready(struct tcp_conn *c)
{
	for (int i = 0; i < c->nstreams; i++)
		if (!c->streams[i].ready)
			return;
	if (c->fault_ns)
		ftcc_info("tcp: connection with %s restored after %llu ms (generation %u)",
			  c->peer_str, (unsigned long long)((tcp_now_ns() - c->fault_ns) / 1000000),
			  c->gen);
	c->state = CS_READY;
	c->fault_ns = 0;
	c->backoff_ms = 0;
	c->last_rx_ns = tcp_now_ns();
}

int tcp_conn_attach_data(struct tcp_conn *c, int fd, int idx)
{
	struct tcp_stream *s = &c->streams[idx];
	struct epoll_event ev = { .events = EV_SOCK, .data.ptr = &s->sk };

	if (c->ctrl.fd < 0)
		return -ENOTCONN;
	if (s->sk.fd >= 0)
		return -EEXIST;
	s->sk.fd = fd;
	s->sk.connecting = false;
	s->ready = true;
	epoll_ctl(tcp_eng.epfd, EPOLL_CTL_MOD, fd, &ev);
	if (tcp_eng.sockbuf > 0)
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &tcp_eng.sockbuf, sizeof(int));
	conn_maybe_ready(c);
	tcp_conn_progress(c);
	return 0;
}

/* Called by data.c when a send-side data socket finished its hello. */
void tcp_conn_stream_ready(struct tcp_conn *c)
{
	conn_maybe_ready(c);
}

void tcp_conn_fail(struct tcp_conn *c, int err, const char *fmt, ...)
{
	char why[160];
	char rank[24] = "";
	va_list ap;

	if (c->state == CS_FAILED)
		return;
	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	if (c->peer_rank >= 0)
		snprintf(rank, sizeof(rank), " (rank %d)", c->peer_rank);
	/* The line goes out before the error is visible to a caller polling without the lock. */
	if (!c->closing && c->peer_closed)
		ftcc_info("tcp: peer %s%s closed the connection", c->peer_str, rank);
	else if (!c->closing)
		ftcc_log(c->quiet_loss ? FTCC_LOG_INFO : FTCC_LOG_WARN, "tcp: peer %s%s lost: %s",
			 c->peer_str, rank, why);
	c->state = CS_FAILED;
	tcp_conn_close_sockets(c);
	__atomic_store_n(&c->err, err, __ATOMIC_RELEASE);
}

void tcp_conn_fault(struct tcp_conn *c, int err, const char *why)
{
	uint64_t now = tcp_now_ns();

	if (c->closing || c->state == CS_FAILED)
		return;
	if (c->peer_closed) {
		tcp_conn_fail(c, -ECONNRESET, "closed by the peer");
		return;
	}
	/* Before the first establishment there is nothing to restore: a refused or broken
	 * handshake fails at once (the peer logged why). */
	if (c->state != CS_READY && !c->fault_ns) {
		tcp_conn_fail(c, err == -ECONNREFUSED ? err : -ECONNREFUSED,
			      "%s during connection setup: %s", why, strerror(-err));
		return;
	}
	if (err == -ECONNREFUSED) {
		tcp_conn_fail(c, -ECONNRESET, "process gone (%s: connection refused)", why);
		return;
	}
	tcp_conn_close_sockets(c);
	if (!c->fault_ns) {
		c->next_try_ns = now;
		c->fault_ns = now;
		/* A fault the kernel raises after a silence counts from the silence. */
		c->deadline_ns = (c->last_rx_ns < now ? c->last_rx_ns : now) + tcp_eng.reconnect_ns;
		ftcc_info("tcp: connection with %s broken (%s: %s), restoring", c->peer_str, why,
			  strerror(-err));
	}
	c->state = CS_REDIAL;
	tcp_conn_timer(c, now);
}

/* Receive side during an outage: is the sender's engine port still there? */
static void conn_probe(struct tcp_conn *c, uint64_t now)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int err = 0;

	if (c->probe_fd >= 0) {
		len = sizeof(err);
		getsockopt(c->probe_fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err == 0 && !(send(c->probe_fd, "", 0, MSG_NOSIGNAL) < 0 && errno == EAGAIN)) {
			struct tcp_hello h;
			uint8_t buf[TCP_HELLO_WIRE_SIZE];

			fill_hello(c, &h, TCP_HELLO_PROBE, 0);
			tcp_hello_encode(&h, buf);
			if (send(c->probe_fd, buf, sizeof(buf), MSG_NOSIGNAL) < 0)
				err = errno;
		}
		close(c->probe_fd);
		c->probe_fd = -1;
		if (err == ECONNREFUSED) {
			tcp_conn_fail(c, -ECONNRESET, "process gone (probe refused)");
			return;
		}
	}
	if (now < c->next_try_ns)
		return;
	c->next_try_ns = now + PROBE_PERIOD_NS;
	len = tcp_wire_addr_to_sa(&c->peer_addr, &ss);
	c->probe_fd = ftcc_sys_socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (c->probe_fd < 0)
		return;
	if (ftcc_sys_connect(c->probe_fd, (struct sockaddr *)&ss, len) < 0 &&
	    errno == ECONNREFUSED) {
		close(c->probe_fd);
		c->probe_fd = -1;
		tcp_conn_fail(c, -ECONNRESET, "process gone (probe refused)");
	}
}

static void conn_redial(struct tcp_conn *c, uint64_t now)
{
	int rc;

	if (c->ctrl.fd >= 0 || now < c->next_try_ns)
		return;
	rc = tcp_conn_dial_start(c);
	if (rc == -ECONNREFUSED) {
		tcp_conn_fail(c, -ECONNRESET, "process gone (reconnect refused)");
		return;
	}
	c->backoff_ms = c->backoff_ms ? c->backoff_ms * 2 : 10;
	if (c->backoff_ms > 200)
		c->backoff_ms = 200;
	c->next_try_ns = now + (uint64_t)c->backoff_ms * 1000000ull;
	if (rc)
		tcp_conn_close_sockets(c);
}

static void conn_heartbeat(struct tcp_conn *c, uint64_t now)
{
	struct tcp_frame f = { .type = TCP_FRAME_HEARTBEAT };

	if (c->ctrl.fd < 0 || c->ctrl.connecting || c->last_hb_ns + tcp_eng.hb_ns > now)
		return;
	c->last_hb_ns = now;
	if (c->ctrl_out_len == 0)
		tcp_ctrl_queue(c, &f);
	tcp_conn_progress(c);
}

/* Send side: a data socket whose unacknowledged bytes outlived TCP_USER_TIMEOUT (a flow
 * black-holed on its own while the control socket is fine) has a pending error that nothing
 * else reads, since the send side never receives on data sockets. */
static void conn_check_streams(struct tcp_conn *c)
{
	for (int i = 0; i < c->nstreams && c->state == CS_READY; i++) {
		int err = 0;
		socklen_t len = sizeof(err);
		struct tcp_sock *sk = &c->streams[i].sk;

		if (sk->fd >= 0 && getsockopt(sk->fd, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err)
			tcp_conn_fault(c, -err, "data socket");
	}
}

void tcp_conn_timer(struct tcp_conn *c, uint64_t now)
{
	if (c->closing || c->state == CS_FAILED)
		return;
	/* Edges the engine skipped while the caller polled, in every state: a redial whose
	 * connect completed during a poll is otherwise never looked at again. */
	if (c->state != CS_REDIAL && !tcp_app_polling(c, now))
		tcp_conn_progress(c);
	if (c->closing || c->state == CS_FAILED)
		return;
	/* a connection's own bound lengthens the engine's, never shortens it (the heartbeats
	 * keep the engine's period) */
	const uint64_t silence_ns =
		c->failure_ns > tcp_eng.timeout_ns ? c->failure_ns : tcp_eng.timeout_ns;

	switch (c->state) {
	case CS_READY:
		if (c->is_send)
			conn_check_streams(c);
		if (c->state != CS_READY)
			break;
		conn_heartbeat(c, now);
		if (c->state == CS_READY && c->last_rx_ns + silence_ns < now) {
			tcp_conn_progress(c); /* data may be queued behind our own delay */
			if (c->state == CS_READY && c->last_rx_ns + silence_ns < now)
				tcp_conn_fail(
					c, -ETIMEDOUT, "no heartbeat or data for %llu ms",
					(unsigned long long)((now - c->last_rx_ns) / 1000000));
		}
		break;
	case CS_DIAL:
	case CS_DATA:
		conn_heartbeat(c, now);
		if (c->state != CS_FAILED && now > c->deadline_ns)
			tcp_conn_fail(c, -ETIMEDOUT, "connection not established in time");
		break;
	case CS_REDIAL:
		if (now > c->deadline_ns) {
			tcp_conn_fail(c, -ETIMEDOUT, "could not restore the connection in %llu ms",
				      (unsigned long long)(tcp_eng.reconnect_ns / 1000000));
			break;
		}
		if (c->is_send)
			conn_redial(c, now);
		else
			conn_probe(c, now);
		break;
	default:
		break;
	}
}
