/* SPDX-License-Identifier: BSD-3-Clause */
/* Byte movement on one connection: the control socket (frames) and the data sockets
 * (message chunks). Large messages go straight from the sender's buffer to the socket and
 * from the socket into the receiver's posted buffer; a receiver reads a chunk's payload only
 * once a receive for that message is posted, so unexpected data waits in the kernel. A send
 * completes when the receiver acknowledges it, so a reset connection can be restored by
 * resending what was not acknowledged. Every function here runs with the connection locked.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "tcp.h"

static bool would_block(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK;
}

/* Non-blocking connect finished? 1 yes, 0 not yet, negative errno on failure. */
static int sock_connected(struct tcp_sock *sk)
{
	int err = 0;
	socklen_t len = sizeof(err);

	if (!sk->connecting)
		return 1;
	if (getsockopt(sk->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -errno;
	if (err)
		return -err;
	/* SO_ERROR is 0 both when connected and while still in progress. */
	struct sockaddr_storage ss;
	socklen_t sl = sizeof(ss);

	if (getpeername(sk->fd, (struct sockaddr *)&ss, &sl) < 0)
		return errno == ENOTCONN ? 0 : -errno;
	sk->connecting = false;
	return 1;
}

void tcp_ctrl_queue(struct tcp_conn *c, const struct tcp_frame *f)
{
	if (c->ctrl_out_len + TCP_FRAME_HDR_SIZE + TCP_FRAME_MAX_PAYLOAD > TCP_CTRL_OUT)
		return; /* only heartbeats can be dropped here: acks are coalesced */
	c->ctrl_out_len += tcp_frame_encode(f, c->ctrl_out + c->ctrl_out_len);
}

static void ctrl_flush(struct tcp_conn *c)
{
	while (c->ctrl.fd >= 0 && !c->ctrl.connecting) {
		ssize_t n;

		if (c->ack_dirty && c->ctrl_out_len + TCP_FRAME_HDR_SIZE + 8 <= TCP_CTRL_OUT) {
			struct tcp_frame f = { .type = TCP_FRAME_ACK, .value = c->r_cum };

			c->ctrl_out_len += tcp_frame_encode(&f, c->ctrl_out + c->ctrl_out_len);
			c->ack_dirty = false;
		}
		if (c->ctrl_out_len == 0)
			return;
		n = ftcc_sys_send(c->ctrl.fd, c->ctrl_out, c->ctrl_out_len);
		if (n < 0) {
			if (!would_block())
				tcp_conn_fault(c, -errno, "control send");
			return;
		}
		memmove(c->ctrl_out, c->ctrl_out + n, c->ctrl_out_len - (size_t)n);
		c->ctrl_out_len -= (size_t)n;
		c->last_hb_ns = tcp_now_ns();
	}
}

static void send_mark_acked(struct tcp_conn *c, uint64_t seq)
{
	struct tcp_req *r = &c->sreq[seq % TCP_SEND_RING];

	if (seq >= c->s_next || r->seq != seq || r->acked)
		return;
	r->acked = true;
	r->busy = false;
	if (r->eager) {
		/* Reported done at isend; the copy was kept only for resending. */
		free(r->data);
		r->data = NULL;
		return;
	}
	atomic_store_explicit(&r->state, REQ_DONE, memory_order_release);
}

static void send_advance_acked(struct tcp_conn *c)
{
	while (c->s_acked < c->s_next && c->sreq[c->s_acked % TCP_SEND_RING].acked)
		c->s_acked++;
}

static void ctrl_frame(struct tcp_conn *c, const struct tcp_frame *f)
{
	switch (f->type) {
	case TCP_FRAME_ACK:
		if (!c->is_send || f->value > c->s_next) {
			tcp_conn_fail(c, -EBADMSG, "acknowledgement beyond what was sent");
			return;
		}
		for (uint64_t s = c->s_acked; s < f->value; s++)
			send_mark_acked(c, s);
		send_advance_acked(c);
		break;
	case TCP_FRAME_WELCOME:
		tcp_conn_on_welcome(c, f);
		break;
	case TCP_FRAME_CLOSE:
		c->peer_closed = true;
		break;
	default: /* heartbeat: receipt already counted */
		break;
	}
}

static void ctrl_read(struct tcp_conn *c)
{
	while (c->ctrl.fd >= 0 && !c->ctrl.connecting) {
		ssize_t n = ftcc_sys_recv(c->ctrl.fd, c->ctrl_in + c->ctrl_in_got,
					  sizeof(c->ctrl_in) - c->ctrl_in_got);
		size_t off = 0;

		if (n <= 0) {
			if (n < 0 && would_block())
				return;
			tcp_conn_fault(c, n == 0 ? -ECONNRESET : -errno,
				       n == 0 ? "control socket closed" : "control receive");
			return;
		}
		c->ctrl_in_got += (size_t)n;
		c->last_rx_ns = tcp_now_ns();
		for (;;) {
			struct tcp_frame f;
			int len = tcp_frame_length(c->ctrl_in + off, c->ctrl_in_got - off);

			if (len == 0 || (len > 0 && (size_t)len > c->ctrl_in_got - off))
				break;
			if (len < 0 || tcp_frame_decode(c->ctrl_in + off, (size_t)len, &f)) {
				tcp_conn_fail(c, -EBADMSG, "malformed control frame");
				return;
			}
			off += (size_t)len;
			ctrl_frame(c, &f);
			if (c->ctrl.fd < 0)
				return; /* the frame failed or renewed the connection */
		}
		memmove(c->ctrl_in, c->ctrl_in + off, c->ctrl_in_got - off);
		c->ctrl_in_got -= off;
	}
}

static void ctrl_progress(struct tcp_conn *c)
{
	int rc;

	if (c->ctrl.fd < 0)
		return;
	rc = sock_connected(&c->ctrl);
	if (rc < 0) {
		tcp_conn_fault(c, rc, "control connect");
		return;
	}
	if (rc == 0)
		return;
	ctrl_read(c);
	ctrl_flush(c);
}

/* How a message is cut: at most one chunk per stream, none smaller than chunk_min. */
static uint64_t chunk_count(const struct tcp_conn *c, uint64_t size)
{
	uint64_t n = size / (uint64_t)c->chunk_min;

	if (n < 1)
		n = 1;
	return n < (uint64_t)c->nstreams ? n : (uint64_t)c->nstreams;
}

/* Finds the next chunk stream @s must write; false when it has none now. */
static bool stream_next_chunk(struct tcp_conn *c, struct tcp_stream *s)
{
	if (s->cur_seq < c->s_acked)
		s->cur_seq = c->s_acked;
	for (; s->cur_seq < c->s_next; s->cur_seq++) {
		struct tcp_req *r = &c->sreq[s->cur_seq % TCP_SEND_RING];
		uint64_t n, j, csize;
		struct tcp_chunk ch;

		if (r->acked)
			continue;
		n = chunk_count(c, r->size);
		j = ((uint64_t)s->sk.idx + (uint64_t)c->nstreams - r->seq % (uint64_t)c->nstreams) %
		    (uint64_t)c->nstreams;
		if (j >= n)
			continue;
		csize = (r->size + n - 1) / n;
		ch.tag = r->tag;
		ch.seq = r->seq;
		ch.total = r->size;
		ch.offset = j * csize;
		ch.len = ch.offset >= r->size ?
				 0 :
				 (r->size - ch.offset < csize ? r->size - ch.offset : csize);
		tcp_chunk_encode(&ch, s->hdr);
		s->chunk_off = ch.offset;
		s->chunk_len = ch.len;
		s->chunk_sent = 0;
		s->have_chunk = true;
		return true;
	}
	return false;
}

static bool stream_hello(struct tcp_conn *c, struct tcp_stream *s)
{
	int rc = sock_connected(&s->sk);

	if (rc <= 0) {
		if (rc < 0)
			tcp_conn_fault(c, rc, "data connect");
		return false;
	}
	while (s->hello_sent < TCP_HELLO_WIRE_SIZE) {
		ssize_t n = ftcc_sys_send(s->sk.fd, s->hello + s->hello_sent,
					  TCP_HELLO_WIRE_SIZE - s->hello_sent);

		if (n < 0) {
			if (!would_block())
				tcp_conn_fault(c, -errno, "data hello");
			return false;
		}
		s->hello_sent += (size_t)n;
	}
	s->ready = true;
	s->cur_seq = c->s_acked;
	tcp_conn_stream_ready(c);
	return true;
}

static void stream_send(struct tcp_conn *c, struct tcp_stream *s)
{
	if (!s->ready && !stream_hello(c, s))
		return;
	while (s->sk.fd >= 0) {
		struct tcp_req *r;
		struct iovec iov[2];
		int cnt = 0;
		ssize_t n;

		if (!s->have_chunk && !stream_next_chunk(c, s))
			return;
		r = &c->sreq[s->cur_seq % TCP_SEND_RING];
		if (s->chunk_sent < TCP_CHUNK_WIRE_SIZE) {
			iov[cnt].iov_base = s->hdr + s->chunk_sent;
			iov[cnt++].iov_len = TCP_CHUNK_WIRE_SIZE - s->chunk_sent;
		}
		size_t pdone = s->chunk_sent > TCP_CHUNK_WIRE_SIZE ?
				       s->chunk_sent - TCP_CHUNK_WIRE_SIZE :
				       0;
		if (s->chunk_len > pdone) {
			iov[cnt].iov_base = (char *)r->data + s->chunk_off + pdone;
			iov[cnt++].iov_len = s->chunk_len - pdone;
		}
		n = ftcc_sys_sendv(s->sk.fd, iov, cnt);
		if (n < 0) {
			if (!would_block())
				tcp_conn_fault(c, -errno, "data send");
			return;
		}
		s->chunk_sent += (size_t)n;
		if (s->chunk_sent == TCP_CHUNK_WIRE_SIZE + s->chunk_len) {
			s->have_chunk = false;
			s->cur_seq++;
		}
	}
}

/* True when message @seq may take slot @slot of group @g now: its tag is on no other free
 * slot, or every earlier message of the group already has its buffer. */
static bool recv_tag_unique(const struct tcp_req *g, int slot, uint64_t seq,
			    const struct tcp_conn *c)
{
	int same = 0;

	for (int k = 0; k < g->n; k++)
		same += !g->slot_used[k] && g->tags[k] == g->tags[slot];
	if (same <= 1)
		return true;
	for (uint64_t s = g->base_seq > c->r_cum ? g->base_seq : c->r_cum; s < seq; s++)
		if (!c->rmsg[s % TCP_MSG_RING].req)
			return false;
	return true;
}

/* Finds (or assigns) the posted buffer of the chunk's message. 1 matched, 0 not posted yet,
 * negative errno on a protocol error (fails the connection). */
static int recv_match(struct tcp_conn *c, const struct tcp_chunk *ch, struct tcp_rmsg **out)
{
	struct tcp_rmsg *m;
	struct tcp_req *g = NULL;

	if (ch->seq < c->r_cum || ch->seq - c->r_cum >= TCP_MSG_RING)
		return ch->seq < c->r_cum ? -EBADMSG : 0;
	if (ch->seq >= c->r_post_seq)
		return 0;
	m = &c->rmsg[ch->seq % TCP_MSG_RING];
	if (m->complete)
		return -EBADMSG;
	if (!m->req) {
		for (int i = 0; i < TCP_RECV_RING; i++) {
			struct tcp_req *r = &c->rreq[i];

			if (atomic_load_explicit(&r->state, memory_order_relaxed) == REQ_ACTIVE &&
			    ch->seq >= r->base_seq && ch->seq < r->base_seq + (uint64_t)r->n) {
				g = r;
				break;
			}
		}
		if (!g)
			return -EBADMSG;
		m->slot = -1;
		for (int k = 0; k < g->n; k++) {
			if (!g->slot_used[k] && (uint32_t)g->tags[k] == ch->tag) {
				m->slot = k;
				break;
			}
		}
		if (m->slot < 0)
			return -ENOMSG;
		/* Buffers sharing a tag take messages in posting order: wait until every
		 * earlier message of the group has been matched. */
		if (!recv_tag_unique(g, m->slot, ch->seq, c))
			return 0;
		if (ch->total > g->caps[m->slot])
			return -EMSGSIZE;
		g->slot_used[m->slot] = true;
		g->sizes[m->slot] = ch->total;
		m->req = g;
		m->total = ch->total;
		m->got = 0;
		c->peer_rank = (int)ch->tag;
	} else if (m->total != ch->total) {
		return -EBADMSG;
	}
	*out = m;
	return 1;
}

static void recv_complete(struct tcp_conn *c, struct tcp_rmsg *m)
{
	struct tcp_req *g = m->req;

	m->complete = true;
	if (++g->ndone == g->n)
		atomic_store_explicit(&g->state, REQ_DONE, memory_order_release);
	while (c->r_cum < c->r_post_seq && c->rmsg[c->r_cum % TCP_MSG_RING].complete) {
		c->rmsg[c->r_cum % TCP_MSG_RING] = (struct tcp_rmsg){ 0 };
		c->r_cum++;
		c->ack_dirty = true;
	}
}

static void recv_error(struct tcp_conn *c, int rc, const struct tcp_chunk *ch)
{
	if (rc == -EMSGSIZE)
		tcp_conn_fail(c, rc,
			      "message %llu truncated: %llu bytes sent, smaller buffer posted",
			      (unsigned long long)ch->seq, (unsigned long long)ch->total);
	else if (rc == -ENOMSG)
		tcp_conn_fail(c, -EBADMSG, "message %llu: no posted buffer has tag %u",
			      (unsigned long long)ch->seq, ch->tag);
	else
		tcp_conn_fail(c, -EBADMSG, "protocol error on message %llu",
			      (unsigned long long)ch->seq);
}

/* Reads one chunk header. 1 complete, 0 would block, -1 the connection faulted. */
static int stream_read_hdr(struct tcp_conn *c, struct tcp_stream *s)
{
	while (s->rhdr_got < TCP_CHUNK_WIRE_SIZE) {
		ssize_t n = ftcc_sys_recv(s->sk.fd, s->rhdr + s->rhdr_got,
					  TCP_CHUNK_WIRE_SIZE - s->rhdr_got);

		if (n <= 0) {
			if (n < 0 && would_block())
				return 0;
			tcp_conn_fault(c, n == 0 ? -ECONNRESET : -errno,
				       n == 0 ? "data socket closed" : "data receive");
			return -1;
		}
		s->rhdr_got += (size_t)n;
		c->last_rx_ns = tcp_now_ns();
	}
	if (tcp_chunk_decode(s->rhdr, TCP_CHUNK_WIRE_SIZE, &s->cur)) {
		tcp_conn_fail(c, -EBADMSG, "malformed chunk header");
		return -1;
	}
	s->in_payload = false;
	s->payload_got = 0;
	return 1;
}

static void stream_recv(struct tcp_conn *c, struct tcp_stream *s)
{
	while (s->sk.fd >= 0 && s->ready) {
		struct tcp_rmsg *m = NULL;
		int rc;

		if (!s->in_payload) {
			if (s->rhdr_got < TCP_CHUNK_WIRE_SIZE && stream_read_hdr(c, s) <= 0)
				return;
			rc = recv_match(c, &s->cur, &m);
			if (rc <= 0) {
				s->blocked = rc == 0;
				if (rc < 0)
					recv_error(c, rc, &s->cur);
				return;
			}
			s->blocked = false;
			s->in_payload = true;
		}
		m = &c->rmsg[s->cur.seq % TCP_MSG_RING];
		while (s->payload_got < s->cur.len) {
			char *dst = (char *)m->req->bufs[m->slot] + s->cur.offset + s->payload_got;
			ssize_t n = ftcc_sys_recv(s->sk.fd, dst, s->cur.len - s->payload_got);

			if (n <= 0) {
				if (n < 0 && would_block())
					return;
				tcp_conn_fault(c, n == 0 ? -ECONNRESET : -errno,
					       n == 0 ? "data socket closed" : "data receive");
				return;
			}
			s->payload_got += (uint64_t)n;
			c->last_rx_ns = tcp_now_ns();
		}
		m->got += s->cur.len;
		s->in_payload = false;
		s->rhdr_got = 0;
		if (m->got > m->total) {
			tcp_conn_fail(c, -EBADMSG, "message %llu overrun",
				      (unsigned long long)s->cur.seq);
			return;
		}
		if (m->got == m->total)
			recv_complete(c, m);
	}
}

void tcp_conn_progress(struct tcp_conn *c)
{
	if (c->closing || c->state == CS_FAILED)
		return;
	ctrl_progress(c);
	for (int i = 0; i < c->nstreams && c->state != CS_FAILED; i++) {
		struct tcp_stream *s = &c->streams[i];

		if (s->sk.fd < 0)
			continue;
		if (c->is_send)
			stream_send(c, s);
		else
			stream_recv(c, s);
	}
	if (c->state == CS_READY && c->ctrl_out_len == 0 && c->ctrl.fd >= 0) {
		/* A due heartbeat goes out from whichever thread is here: the engine's timer
		 * may be waiting for this lock behind a long copy. */
		uint64_t now = tcp_now_ns();

		if (c->last_hb_ns + tcp_eng.hb_ns <= now) {
			struct tcp_frame f = { .type = TCP_FRAME_HEARTBEAT };

			tcp_ctrl_queue(c, &f);
			c->last_hb_ns = now;
		}
	}
	if (c->ack_dirty || c->ctrl_out_len)
		ctrl_flush(c);
}

void tcp_recv_reset_partial(struct tcp_conn *c)
{
	for (uint64_t s = c->r_cum; s < c->r_post_seq; s++) {
		struct tcp_rmsg *m = &c->rmsg[s % TCP_MSG_RING];

		if (!m->complete)
			m->got = 0;
	}
}

void tcp_recv_resume_state(struct tcp_conn *c, struct tcp_frame *f)
{
	f->value = c->r_cum;
	memset(f->done, 0, sizeof(f->done));
	for (uint64_t i = 0; i < TCP_RESUME_WINDOW && c->r_cum + i < c->r_post_seq; i++)
		if (c->rmsg[(c->r_cum + i) % TCP_MSG_RING].complete)
			f->done[i / 8] |= (uint8_t)(1u << (i % 8));
}

void tcp_send_apply_resume(struct tcp_conn *c, const struct tcp_frame *f)
{
	if (f->value > c->s_next) {
		tcp_conn_fail(c, -EBADMSG, "resume point beyond what was sent");
		return;
	}
	for (uint64_t s = c->s_acked; s < f->value; s++)
		send_mark_acked(c, s);
	for (uint64_t i = 0; i < TCP_RESUME_WINDOW; i++)
		if (f->done[i / 8] & (1u << (i % 8)))
			send_mark_acked(c, f->value + i);
	send_advance_acked(c);
	for (int i = 0; i < TCP_MAX_STREAMS; i++) {
		c->streams[i].cur_seq = c->s_acked;
		c->streams[i].have_chunk = false;
	}
}
