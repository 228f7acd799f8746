/* SPDX-License-Identifier: BSD-3-Clause */
/* Data plane connections over a transport of the ops table (FTCC_TRANSPORT picked ib). The TCP
 * connection and its HELLOs stay as they are (rendezvous, incarnations, strangers); then each
 * end opens a transport listen endpoint, sends its handle on the TCP connection, connects to the
 * other's handle and accepts the other's connection, and says in one byte whether its stream
 * came up. A stream that does not come up in time (a loaded host, an HCA or fabric fault while
 * the TCP path works) is no failure: the pair moves its frames over its TCP connection instead,
 * with a WARN. Once both streams are up, the frames of dp_frame.c
 * travel as a byte stream over that pair: the sender copies the stream into registered slots,
 * one message each; the receiver keeps a receive posted in each of its slots and copies out in
 * order. The copies make a frame's buffers the caller's again the moment dp has taken them, as
 * on a socket, so an abandoned attempt never leaves a remote write aimed at a buffer the engine
 * reuses.
 *
 * The TCP connection stays open and idle: its end (EOF, reset) says the peer closed its side of
 * this data plane connection, and a byte on it is a protocol error. Liveness and the repair of
 * transient faults between live members are the transport's (an IB link flap is hidden; a peer
 * it gives up on, dead or silent past FTCC_FAILURE_TIMEOUT_MS, fails the stream, which breaks
 * the connection as a reset of its socket would). A slow reader only stops the sender's slots
 * from coming back, which is no verdict.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

#include "dp_int.h"
#include "ftcc/log.h"
#include "ftcc/sys.h"

int dpx_start(struct dp *dp, struct dp_conn *c, int64_t now)
{
	struct dp_xs *xs = calloc(1, sizeof(*xs));
	int rc;

	if (!xs)
		return -ENOMEM;
	rc = dp->xt->listen(&dp->xctx, 0, xs->hout, &xs->l);
	if (rc) {
		ftcc_warn("dp: %s listen for member %u failed: %s", dp->xt->name, c->peer_id,
			  strerror(-rc));
		free(xs);
		return rc;
	}
	c->xs = xs;
	c->state = DPC_XPORT;
	xs->start_ns = now;
	/* half the failure timeout for this end's stream to come up, else the pair falls back to
	 * TCP (the peer's handle and byte must be in by twice the failure timeout, or the attempt
	 * fails as a TCP attempt that got no answer: dpx_step, dpx_peer_late) */
	c->deadline_ns = now + dp->cut_ns;
	dp->nxport++;
	return 0;
}

/* Whether the peer's side of the exchange (its handle, its byte) is too late: its TCP connection
 * and HELLO answered, so the peer's process is alive and may just be slow to step (a stalled or
 * starved process, which the membership's failure timeout judges); twice the failure timeout
 * from the start, as a HELLO's answer (dp_conn.c). This end's own stream still has half the
 * timeout to come up before the pair falls back to TCP (c->deadline_ns). */
static int dpx_peer_late(const struct dp *dp, const struct dp_conn *c, int64_t now)
{
	return now > c->deadline_ns + 3 * dp->cut_ns;
}

/* Moves the handles: ours out, the peer's in. 1 when both are through, 0, or -errno. */
static int xport_handles(struct dp_conn *c)
{
	struct dp_xs *xs = c->xs;
	ssize_t n;

	while (xs->hout_off < FTCC_HANDLE_SIZE) {
		n = ftcc_sys_send(c->fd, xs->hout + xs->hout_off, FTCC_HANDLE_SIZE - xs->hout_off);
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		xs->hout_off += (uint32_t)n;
	}
	while (xs->hin_off < FTCC_HANDLE_SIZE) {
		n = ftcc_sys_recv(c->fd, xs->hin + xs->hin_off, FTCC_HANDLE_SIZE - xs->hin_off);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -errno;
		xs->hin_off += (uint32_t)n;
		if (xs->hin_off == FTCC_HANDLE_SIZE) /* a token the peer wrote names nothing here */
			memset(xs->hin + FTCC_HANDLE_SCRATCH_OFF, 0, FTCC_HANDLE_SCRATCH_LEN);
	}
	return 1;
}

/* Each end says once, in one byte after its handle, whether its stream is up ('I': its
 * receives are posted) or not ('T': not up within c->deadline_ns, a transport error, or the
 * peer said 'T'). The pair moves frames over the stream when both said 'I', else over the TCP
 * connection, right after the byte: both ends see both bytes, so they never disagree. */
#define DPX_SAY_IB 'I'
#define DPX_SAY_TCP 'T'

/* Reads the peer's byte once its handle is in. 0 (read or not there yet) or -errno. */
static int xport_hear(struct dp_conn *c)
{
	struct dp_xs *xs = c->xs;
	uint8_t b;
	ssize_t n;

	if (xs->peer_say || xs->hin_off < FTCC_HANDLE_SIZE)
		return 0;
	n = ftcc_sys_recv(c->fd, &b, 1);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
	if (b != DPX_SAY_IB && b != DPX_SAY_TCP)
		return -EPROTO;
	xs->peer_say = b;
	return 0;
}

/* Sends this end's byte (after the handle, which is out). 0 or -errno. */
static int xport_say(struct dp *dp, struct dp_conn *c, uint8_t say, const char *why)
{
	ssize_t n = ftcc_sys_send(c->fd, &say, 1);

	if (n != 1) /* one byte on a socket with room for a handle: only an error stops it */
		return n < 0 && errno != EAGAIN && errno != EWOULDBLOCK ? -errno : -EIO;
	c->xs->my_say = say;
	if (say == DPX_SAY_TCP && why)
		ftcc_log(dp->tcp_warned ? FTCC_LOG_INFO : FTCC_LOG_WARN,
			 "dp: the %s stream with member %u is not up (%s): its frames go over TCP, "
			 "which costs speed, not the op",
			 dp->xt->name, c->peer_id, why);
	if (say == DPX_SAY_TCP && why)
		dp->tcp_warned = 1;
	return 0;
}

/* Keeps a receive posted in every free receive slot. 0 or the transport's error. */
static int xs_rx_post(const struct ftcc_transport_ops *t, struct dp_xs *xs)
{
	while (xs->r_post - xs->r_head < DPX_SLOTS) {
		uint32_t i = (uint32_t)(xs->r_post % DPX_SLOTS);
		void *data = xs->rbuf + (size_t)i * DPX_SLOT;
		size_t size = DPX_SLOT;
		int tag = DPX_TAG;
		struct ftcc_req *r = NULL;
		int rc = t->irecv(xs->rc, 1, &data, &size, &tag, &xs->rmh, &r);

		if (rc)
			return rc;
		if (!r)
			return 0; /* the transport's own limit: again later */
		xs->r_req[i] = r;
		xs->r_post++;
	}
	return 0;
}

/* Both transport connections are up: the slots, registered, and the receives posted. */
static int xport_open(struct dp *dp, struct dp_conn *c)
{
	struct dp_xs *xs = c->xs;
	int rc;

	xs->sbuf = malloc((size_t)DPX_SLOTS * DPX_SLOT);
	xs->rbuf = malloc((size_t)DPX_SLOTS * DPX_SLOT);
	if (!xs->sbuf || !xs->rbuf) {
		ftcc_warn("dp: no memory for the stream buffers of member %u", c->peer_id);
		return -ENOMEM;
	}
	rc = dp->xt->reg_mr(xs->sc, xs->sbuf, (size_t)DPX_SLOTS * DPX_SLOT, FTCC_PTR_HOST,
			    &xs->smh);
	if (!rc)
		rc = dp->xt->reg_mr(xs->rc, xs->rbuf, (size_t)DPX_SLOTS * DPX_SLOT, FTCC_PTR_HOST,
				    &xs->rmh);
	if (rc) {
		/* pinned memory (RLIMIT_MEMLOCK) or the HCA's tables: this member's resources */
		ftcc_warn("dp: cannot register the stream buffers of member %u (%zu bytes): %s",
			  c->peer_id, 2 * (size_t)DPX_SLOTS * DPX_SLOT, strerror(-rc));
		return -ENOMEM;
	}
	rc = xs_rx_post(dp->xt, xs);
	return rc == -ENOMEM ? -ECONNREFUSED : rc; /* the connection's failure, not ours */
}

/* This end's stream: the transport connections both ways, then the slots. 1 up, 0 not yet,
 * or -errno (-ENOMEM: this member's buffers). */
static int xport_up(struct dp *dp, struct dp_conn *c)
{
	struct dp_xs *xs = c->xs;
	int rc;

	if (!xs->sc) {
		/* the same handle buffer on every poll: the transport keeps its token there */
		rc = dp->xt->connect(&dp->xctx, 0, xs->hin, &xs->sc);
		if (rc) /* -ENOMEM there may be the peer's refusal: only ours count as local */
			return rc == -ENOMEM ? -ECONNREFUSED : rc;
	}
	if (!xs->rc) {
		rc = dp->xt->accept(xs->l, &xs->rc);
		if (rc)
			return rc == -ENOMEM ? -ECONNREFUSED : rc;
	}
	if (!xs->sc || !xs->rc)
		return 0;
	dp->xt->close_listen(xs->l);
	xs->l = NULL;
	rc = xport_open(dp, c);
	return rc ? rc : 1;
}

int dpx_step(struct dp *dp, struct dp_conn *c, int64_t now)
{
	struct dp_xs *xs = c->xs;
	char why[64];
	double ms;
	int rc;

	if (c->state != DPC_XPORT)
		return c->state == DPC_READY;
	/* Only time in which this end steps counts: a gap (no call wanted the peer) moves the
	 * deadline by as much, so an idle member does not give up on a healthy stream. */
	if (xs->step_ns && now - xs->step_ns > dp->nop_ns)
		c->deadline_ns += now - xs->step_ns;
	xs->step_ns = now;
	ms = (double)(now - xs->start_ns) / 1e6;
	rc = xport_handles(c);
	if (rc >= 0)
		rc = xport_hear(c);
	if (rc < 0)
		return rc;
	if (xs->hin_off < FTCC_HANDLE_SIZE || xs->hout_off < FTCC_HANDLE_SIZE)
		/* the peer sends its handle at its first step: not even that is a failed attempt,
		 * as a HELLO without an answer is (bounded alike: dpx_peer_late) */
		return dpx_peer_late(dp, c, now) ? -ETIMEDOUT : 0;
	if (!xs->my_say && xs->peer_say == DPX_SAY_TCP) {
		rc = xport_say(dp, c, DPX_SAY_TCP, "the peer's is not");
	} else if (!xs->my_say && !xs->up) {
		rc = xport_up(dp, c);
		if (rc == -ENOMEM)
			return rc; /* this member's: it gives up */
		if (rc > 0)
			xs->up = 1;
		else if (rc < 0)
			rc = xport_say(dp, c, DPX_SAY_TCP, strerror(-rc));
	}
	if (rc >= 0 && !xs->my_say && xs->up)
		rc = xport_say(dp, c, DPX_SAY_IB, NULL);
	if (rc >= 0 && !xs->my_say && now > c->deadline_ns) {
		snprintf(why, sizeof(why), "not up in %.0f ms", ms);
		rc = xport_say(dp, c, DPX_SAY_TCP, why);
	}
	if (rc < 0)
		return rc;
	if (!xs->my_say || !xs->peer_say) /* the peer's byte: it says at its own deadline */
		return dpx_peer_late(dp, c, now) ? -ETIMEDOUT : 0;
	if (xs->my_say == DPX_SAY_TCP || xs->peer_say == DPX_SAY_TCP) {
		dpx_free(dp, c); /* out of dp->nxport too */
		c->state = DPC_READY;
		return 1;
	}
	dp->nxport--;
	c->state = DPC_READY;
	xs->fd_check_ns = now;
	ftcc_info("dp: member %u: frames over %s (set up in %.1f ms)", c->peer_id, dp->xt->name,
		  ms);
	return 1;
}

void dpx_free(struct dp *dp, struct dp_conn *c)
{
	struct dp_xs *xs = c->xs;

	if (!xs)
		return;
	if (c->state == DPC_XPORT)
		dp->nxport--;
	if (xs->smh)
		dp->xt->dereg_mr(xs->sc, xs->smh);
	if (xs->rmh)
		dp->xt->dereg_mr(xs->rc, xs->rmh);
	if (xs->sc)
		dp->xt->close_conn(xs->sc);
	if (xs->rc)
		dp->xt->close_conn(xs->rc);
	if (xs->l)
		dp->xt->close_listen(xs->l);
	free(xs->sbuf);
	free(xs->rbuf);
	free(xs);
	c->xs = NULL;
}

/* The stream's error, after a look at the idle TCP connection now and then: its end means the
 * peer closed this connection, and counts DPX_EOF_GRACE_NS later (what it sent before, already
 * acknowledged to it, may not show in our completions yet, as on an HCA). 0 or -errno
 * (sticky). */
static int xs_check(struct dp_conn *c)
{
	struct dp_xs *xs = c->xs;
	int64_t now;
	uint8_t b;
	ssize_t n;

	if (xs->err)
		return xs->err;
	now = dp_now_ns();
	if (xs->eof_ns) {
		if (now - xs->eof_ns >= DPX_EOF_GRACE_NS)
			xs->err = -ECONNRESET;
		return xs->err;
	}
	if (now - xs->fd_check_ns < DPX_FD_CHECK_NS)
		return 0;
	xs->fd_check_ns = now;
	n = recv(c->fd, &b, 1, MSG_DONTWAIT);
	if (n == 0)
		xs->eof_ns = now;
	else if (n > 0)
		xs->err = -EPROTO; /* nothing is sent there after the handles */
	else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
		xs->err = -errno;
	return xs->err;
}

/* Retires completed sends in order. 0 or the error (sticky). */
static int xs_tx_progress(const struct ftcc_transport_ops *t, struct dp_xs *xs)
{
	while (xs->s_done < xs->s_post) {
		uint32_t i = (uint32_t)(xs->s_done % DPX_SLOTS);
		int done = 0, rc = t->test(xs->s_req[i], &done, NULL);

		if (rc)
			return xs->err = rc;
		if (!done)
			break;
		xs->s_req[i] = NULL;
		xs->s_done++;
	}
	return 0;
}

/* The transport of the dp that owns @c: kept in the stream's connections' ops. */
static const struct ftcc_transport_ops *xs_ops(const struct dp_conn *c)
{
	return c->xs->sc->ops;
}

static ssize_t xs_fail(int err)
{
	errno = -err;
	return -1;
}

/* Bytes count as sent once their message is posted (the transport then delivers them without
 * another call here, as a kernel sends what a socket took): a slot the peer has no receive for
 * yet is not kept filled, or the peer could wait on it while this member, done with the call,
 * computes. The copy is redone on the next try. */
static ssize_t xs_sendv(struct dp_conn *c, const struct iovec *iov, int niov)
{
	struct dp_xs *xs = c->xs;
	const struct ftcc_transport_ops *t = xs_ops(c);
	size_t total = 0, off = 0;
	int v = 0;

	if (xs_check(c) || xs_tx_progress(t, xs))
		return xs_fail(xs->err);
	while (xs->s_post - xs->s_done < DPX_SLOTS) {
		uint32_t i = (uint32_t)(xs->s_post % DPX_SLOTS);
		uint8_t *slot = xs->sbuf + (size_t)i * DPX_SLOT;
		size_t len = 0, v_off = off;
		int v_at = v;
		struct ftcc_req *r = NULL;
		int rc;

		while (v < niov && len < DPX_SLOT) {
			size_t take = iov[v].iov_len - off;

			if (take > DPX_SLOT - len)
				take = DPX_SLOT - len;
			memcpy(slot + len, (const uint8_t *)iov[v].iov_base + off, take);
			len += take;
			off += take;
			if (off == iov[v].iov_len) {
				v++;
				off = 0;
			}
		}
		if (len == 0)
			break;
		rc = t->isend(xs->sc, slot, len, DPX_TAG, xs->smh, &r);
		if (rc)
			return xs_fail(xs->err = rc);
		if (!r) { /* the peer's receive is not there yet */
			v = v_at;
			off = v_off;
			break;
		}
		xs->s_req[i] = r;
		xs->s_ns[i] = dp_now_ns();
		xs->s_post++;
		total += len;
	}
	if (total == 0) {
		errno = EAGAIN;
		return -1;
	}
	return (ssize_t)total;
}

/* Reads what has arrived, whatever failed meanwhile: completed receives are read before any
 * error counts (the send side's, the transport's or the TCP connection's end), as a socket
 * gives its data before its error. */
static ssize_t xs_recv(struct dp_conn *c, void *buf, size_t len)
{
	struct dp_xs *xs = c->xs;
	const struct ftcc_transport_ops *t = xs_ops(c);
	size_t got = 0;
	int rc = 0;

	while (got < len) {
		if (!xs->r_have) {
			uint32_t i = (uint32_t)(xs->r_head % DPX_SLOTS);
			size_t size[FTCC_MAX_RECVS] = { 0 };
			int done = 0;

			if (xs->r_head == xs->r_post)
				break; /* none posted (the transport's limit, or it failed) */
			rc = t->test(xs->r_req[i], &done, size);
			if (rc || !done)
				break;
			if (size[0] > DPX_SLOT) {
				rc = -EPROTO;
				break;
			}
			xs->r_req[i] = NULL;
			xs->r_len = size[0];
			xs->r_off = 0;
			xs->r_have = 1;
		}
		size_t take = xs->r_len - xs->r_off < len - got ? xs->r_len - xs->r_off : len - got;

		memcpy((uint8_t *)buf + got,
		       xs->rbuf + (size_t)(xs->r_head % DPX_SLOTS) * DPX_SLOT + xs->r_off, take);
		xs->r_off += take;
		got += take;
		if (xs->r_off == xs->r_len) {
			xs->r_have = 0;
			xs->r_head++;
		}
	}
	if (!rc && !xs->err)
		rc = xs_rx_post(t, xs);
	if (rc && !xs->err)
		xs->err = rc;
	if (got > 0)
		return (ssize_t)got; /* an error shows in the next call */
	if (xs->err || xs_check(c))
		return xs_fail(xs->err);
	errno = EAGAIN;
	return -1;
}

int dpx_watch(struct dp_conn *c, int64_t now, int64_t cut_ns)
{
	struct dp_xs *xs = c->xs;
	int64_t age;

	if (xs_tx_progress(xs_ops(c), xs)) {
		ftcc_info("dp: stream to member %u failed: %s", c->peer_id, strerror(-xs->err));
		return -EPIPE;
	}
	if (xs->s_done == xs->s_post)
		return 0;
	age = now - xs->s_ns[xs->s_done % DPX_SLOTS];
	if (age < cut_ns)
		return 0;
	ftcc_warn("dp: member %u has not acknowledged data for %lld ms (%llu messages outstanding)",
		  c->peer_id, (long long)(age / 1000000),
		  (unsigned long long)(xs->s_post - xs->s_done));
	return -EPIPE;
}

void dpx_drain(struct dp *dp)
{
	int64_t deadline = dp_now_ns() + DPX_DRAIN_NS;

	if (atomic_load_explicit(&dp->aborted, memory_order_acquire))
		return; /* the group is being left anyway: nobody waits for these */
	for (;;) {
		int open = 0;

		for (uint32_t i = 0; i < dp->npeers; i++) {
			struct dp_conn *c = dp->peers[i].conn;

			if (!c || !c->xs || c->state != DPC_READY || c->xs->err)
				continue;
			if (xs_tx_progress(xs_ops(c), c->xs) == 0 && c->xs->s_done < c->xs->s_post)
				open++;
		}
		if (!open || dp_now_ns() >= deadline)
			return;
		struct timespec ts = { 0, 1000000 };

		nanosleep(&ts, NULL);
	}
}

/* The socket calls' fault-injection seam (FTCC_INJECT, FTCC_FAULT's reset) holds for streams
 * too: an injected failure breaks the stream for good, as a reset breaks a socket. */
static int xs_injected(struct dp_conn *c, const char *name)
{
	if (!ftcc_sys_inject_hit(name))
		return 0;
	ftcc_info("FTCC_INJECT: failing %s on the stream to member %u with ECONNRESET", name,
		  c->peer_id);
	c->xs->err = -ECONNRESET;
	errno = ECONNRESET;
	return 1;
}

ssize_t dp_io_send(struct dp_conn *c, const void *buf, size_t len)
{
	struct iovec v = { .iov_base = (void *)buf, .iov_len = len };

	if (!c->xs)
		return ftcc_sys_send(c->fd, buf, len);
	return xs_injected(c, "send") ? -1 : xs_sendv(c, &v, 1);
}

ssize_t dp_io_sendv(struct dp_conn *c, const struct iovec *iov, int n)
{
	if (!c->xs)
		return ftcc_sys_sendv(c->fd, iov, n);
	return xs_injected(c, "sendv") ? -1 : xs_sendv(c, iov, n);
}

ssize_t dp_io_recv(struct dp_conn *c, void *buf, size_t len)
{
	size_t n;

	if (c->xs)
		return xs_injected(c, "recv") ? -1 : xs_recv(c, buf, len);
	if (!dp_conn_buffered(c)) {
		ssize_t got;

		if (len >= DP_RBUF)
			return ftcc_sys_recv(c->fd, buf, len);
		got = ftcc_sys_recv(c->fd, c->rbuf, DP_RBUF);
		if (got <= 0)
			return got;
		c->rb_off = 0;
		c->rb_len = (uint16_t)got;
	}
	n = (size_t)(c->rb_len - c->rb_off) < len ? (size_t)(c->rb_len - c->rb_off) : len;
	memcpy(buf, c->rbuf + c->rb_off, n);
	c->rb_off = (uint16_t)(c->rb_off + n);
	return (ssize_t)n;
}
