/* SPDX-License-Identifier: BSD-3-Clause */
/* Data plane connections: socket options, the HELLO exchange (connector side: non-blocking
 * connect, retried with back-off for as long as transfers want the peer; acceptor side:
 * validation, pending connections from members the epoch does not name yet), their refusal
 * with one log line, broken connections, and the liveness watch of a connection a call waits
 * on (NOP frames, the kernel's acknowledgements).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dp_int.h"
#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ftcc/sys.h"
#include "ftcc/le.h"

/* A decoded HELLO. */
struct dp_hello {
	uint32_t magic;
	uint16_t version;
	uint64_t group;
	uint32_t from, to;
	uint64_t from_inc, to_inc;
	int stream; /* the sender moves frames over a transport */
};

static void hello_encode(uint8_t *p, const struct dp *dp, uint32_t to, uint64_t to_inc)
{
	memset(p, 0, DP_HELLO_SIZE);
	le_put32(p, DP_HELLO_MAGIC);
	p[4] = DP_HELLO_VERSION;
	p[6] = dp->xt ? 1 : 0;
	le_put64(p + 8, dp->cfg.group_id);
	le_put32(p + 16, dp->cfg.self_id);
	le_put32(p + 20, to);
	le_put64(p + 24, dp->cfg.incarnation);
	le_put64(p + 32, to_inc);
}

static void hello_decode(const uint8_t *p, struct dp_hello *h)
{
	h->magic = le_get32(p);
	h->version = (uint16_t)(p[4] | p[5] << 8);
	h->group = le_get64(p + 8);
	h->from = le_get32(p + 16);
	h->to = le_get32(p + 20);
	h->from_inc = le_get64(p + 24);
	h->to_inc = le_get64(p + 32);
	h->stream = p[6] == 1;
}

/* Whether the connection with member @id moves frames over a stream: both ends have one (an
 * end without, a host whose HCA is down or a peer with FTCC_TRANSPORT=tcp, makes the pair use
 * the TCP connection, said once). */
static int hello_stream(struct dp *dp, uint32_t id, int theirs)
{
	if (dp->xt && !theirs && !dp->mixed_warned) {
		dp->mixed_warned = 1;
		ftcc_warn("dp: member %u moves its frames over tcp, this member over %s: frames "
			  "with it go over tcp (set FTCC_TRANSPORT alike on every host)",
			  id, dp->xt->name);
	}
	return dp->xt && theirs;
}

/* Checks the parts of a HELLO every side checks: version, group, addressed to us. Returns NULL
 * or why it is refused. */
static const char *hello_check(const struct dp *dp, const struct dp_hello *h)
{
	if (h->magic != DP_HELLO_MAGIC)
		return "not a data plane HELLO";
	if (h->version != DP_HELLO_VERSION)
		return "foreign version";
	if (h->group != dp->cfg.group_id)
		return "another group";
	if (h->to != dp->cfg.self_id || h->to_inc != dp->cfg.incarnation)
		return "addressed to another member or incarnation";
	if (h->from == dp->cfg.self_id)
		return "from our own id";
	return NULL;
}

void dp_sock_opts(int fd)
{
	int one = 1, sz = (int)ftcc_setting_int(FTCC_SET_SOCKBUF_BYTES);

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (sz > 0) {
		setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sz, sizeof(sz));
		setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &sz, sizeof(sz));
	}
}

void dp_conn_free(struct dp *dp, struct dp_conn *c)
{
	if (!c)
		return;
	if (c->tail) {
		free(c->tail);
		dp->ntails--;
	}
	dpx_free(dp, c);
	if (c->fd >= 0)
		close(c->fd);
	free(c);
}

void dp_conn_broken(struct dp *dp, struct dp_peer_ent *pe, const char *why)
{
	ftcc_info("dp: connection to member %u broke (%s); it will be made again", pe->id, why);
	dp_conn_free(dp, pe->conn);
	pe->conn = NULL;
	pe->down_ns = pe->want_ns = dp_now_ns();
	pe->stall_ns = 0;
}

void dp_conn_broken_idle(struct dp *dp, struct dp_peer_ent *pe, const char *why)
{
	if (pe->conn && pe->conn->used) {
		pe->broke_idle = 1;
		pe->xfail = 0;
	}
	dp_conn_broken(dp, pe, why);
}

/* Removes pending entry @i (order is not kept). */
static void pending_drop(struct dp *dp, uint32_t i, int free_it)
{
	if (free_it)
		dp_conn_free(dp, dp->pending[i]);
	dp->pending[i] = dp->pending[--dp->npending];
}

/* Whether the call has open transfers with @pe. */
static int call_uses(const struct dp *dp, const struct dp_call *call, const struct dp_peer_ent *pe)
{
	for (int i = 0; call && i < call->n; i++) {
		if (!call->x[i].done && &dp->peers[dp->xpeer[i]] == pe)
			return 1;
	}
	return 0;
}

/* Ties pending entry @i to @pe: replies with our HELLO and replaces @pe's connection. 0, or
 * -EPIPE when the call was using the replaced connection. */
static int pending_adopt(struct dp *dp, uint32_t i, struct dp_peer_ent *pe, struct dp_call *call)
{
	struct dp_conn *c = dp->pending[i];
	struct dp_conn *old = pe->conn;
	ssize_t n;

	hello_encode(c->hello_out, dp, pe->id, pe->inc);
	n = ftcc_sys_send(c->fd, c->hello_out, DP_HELLO_SIZE);
	if (n != DP_HELLO_SIZE) {
		/* 40 bytes into a fresh socket's empty buffer: anything else means it is gone */
		ftcc_warn("dp: cannot answer the HELLO of member %u: %s", pe->id,
			  n < 0 ? strerror(errno) : "short write");
		pending_drop(dp, i, 1);
		return 0;
	}
	c->hout_off = DP_HELLO_SIZE;
	c->state = DPC_READY;
	c->rb_off = c->rb_len = 0;
	if (hello_stream(dp, pe->id, c->hello_in[6] == 1)) {
		int rc = dpx_start(dp, c, dp_now_ns());

		if (rc) { /* logged; this member cannot go on: the next call hears of it */
			dp->local_err = rc == -ENOMEM ? rc : -EIO;
			pending_drop(dp, i, 1);
			return 0;
		}
	}
	pending_drop(dp, i, 0);
	pe->conn = c;
	pe->down_ns = 0;
	pe->stall_ns = 0;
	pe->rx_ns = dp_now_ns();
	ftcc_info("dp: member %u incarnation %llu connected", pe->id, (unsigned long long)pe->inc);
	dp->adopted |= dp->cfg.either_connects;
	if (old && old->mine && old->state != DPC_READY && old->state != DPC_XPORT) {
		/* our own attempt, not yet a connection (either_connects): nothing was on it */
		dp_conn_free(dp, old);
		return 0;
	}
	if (!old)
		return 0;
	/* The peer made a new connection: its old one broke on its side, and what was in flight
	 * on it is lost (the old one's tail too). */
	if (old->used) { /* the next call that wants it hears of it, if not this one */
		pe->broke_idle = 1;
		pe->xfail = 0;
	}
	dp_conn_free(dp, old);
	if (!call_uses(dp, call, pe))
		return 0;
	pe->broke_idle = pe->xfail = 0;
	ftcc_info("dp: member %u reconnected while transfers were in flight", pe->id);
	*call->bad_peer = pe->id;
	return -EPIPE;
}

/* Judges a complete HELLO on pending entry @i: refuses it (closed), adopts it, or keeps it
 * waiting for an epoch that names its sender. */
static int pending_hello(struct dp *dp, uint32_t i, struct dp_call *call)
{
	struct dp_conn *c = dp->pending[i];
	struct dp_hello h;
	struct dp_peer_ent *pe;
	const char *why;

	hello_decode(c->hello_in, &h);
	why = hello_check(dp, &h);
	if (!why && h.from > dp->cfg.self_id && !dp->cfg.either_connects)
		why = "the higher member id must not connect";
	pe = why ? NULL : dp_peer_find(dp, h.from);
	if (!why && pe && h.from > dp->cfg.self_id && h.from_inc == pe->inc && pe->conn &&
	    pe->conn->mine && pe->conn->state != DPC_BACKOFF) {
		/* Our own connection (or attempt) goes first: the peer takes it in place of its
		 * attempt. One that broke on the peer's side shows here soon (we read every
		 * connection we hold), and the peer's next attempt is taken then. */
		ftcc_trace("dp: member %u connected while ours is up or under way; refusing its",
			   h.from);
		pending_drop(dp, i, 1);
		return 0;
	}
	if (!why && pe && h.from_inc < pe->inc)
		why = "stale incarnation";
	if (why) {
		ftcc_warn("dp: refusing a connection claiming member %u incarnation %llu "
			  "(version %u, group %llx, to %u/%llu): %s",
			  h.from, (unsigned long long)h.from_inc, h.version,
			  (unsigned long long)h.group, h.to, (unsigned long long)h.to_inc, why);
		pending_drop(dp, i, 1);
		return 0;
	}
	c->peer_id = h.from;
	c->peer_inc = h.from_inc;
	if (pe && pe->inc == h.from_inc) {
		uint8_t b;
		ssize_t n = recv(c->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);

		if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)) {
			/* an attempt its connector gave up (it may have a newer one): adopting it
			 * would replace a live connection with a dead one */
			ftcc_info(
				"dp: member %u closed a connection before its answer; dropping it",
				h.from);
			pending_drop(dp, i, 1);
			return 0;
		}
		return pending_adopt(dp, i, pe, call);
	}
	c->state = DPC_UNKNOWN;
	ftcc_info("dp: member %u incarnation %llu not in the epoch yet; holding its connection",
		  h.from, (unsigned long long)h.from_inc);
	return 0;
}

/* Reads on pending entry @i. 0, or -EPIPE from an adoption. */
static int pending_read(struct dp *dp, uint32_t i, struct dp_call *call)
{
	struct dp_conn *c = dp->pending[i];
	ssize_t n = ftcc_sys_recv(c->fd, c->hello_in + c->hin_off, DP_HELLO_SIZE - c->hin_off);

	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
		return 0;
	if (n <= 0) {
		ftcc_warn("dp: an accepted connection closed before its HELLO (%s)",
			  n == 0 ? "EOF" : strerror(errno));
		pending_drop(dp, i, 1);
		return 0;
	}
	c->hin_off += (uint32_t)n;
	if (c->hin_off >= 4 && le_get32(c->hello_in) != DP_HELLO_MAGIC) {
		ftcc_warn("dp: refusing an accepted connection: not a data plane HELLO");
		pending_drop(dp, i, 1);
		return 0;
	}
	if (c->hin_off < DP_HELLO_SIZE)
		return 0;
	return pending_hello(dp, i, call);
}

int dp_accept_pass(struct dp *dp, struct dp_call *call)
{
	int64_t now = dp_now_ns();

	if (!dp->lfd_ready && !dp->npending && now - dp->accept_ns < DP_ACCEPT_IDLE_NS)
		return 0; /* nothing seen coming: a failed accept() would only cost */
	dp->lfd_ready = 0;
	dp->accept_ns = now;

	for (int k = 0; k < 16; k++) {
		int fd = ftcc_sys_accept(dp->lfd, NULL, NULL);
		struct dp_conn *c;

		if (fd < 0)
			break;
		if (dp->npending == DP_PENDING_MAX) {
			ftcc_warn("dp: %u connections wait for their HELLO already; refusing one",
				  DP_PENDING_MAX);
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (!c) {
			close(fd);
			continue;
		}
		dp_sock_opts(fd);
		c->fd = fd;
		c->state = DPC_ACCEPTED;
		c->deadline_ns = now + (int64_t)DP_PENDING_MS * 1000000;
		dp->pending[dp->npending++] = c;
	}
	for (uint32_t i = dp->npending; i-- > 0;) {
		struct dp_conn *c = dp->pending[i];
		int rc;

		if (now > c->deadline_ns) {
			if (c->state == DPC_ACCEPTED)
				ftcc_warn("dp: no HELLO on an accepted connection within %d ms; "
					  "closing it",
					  DP_PENDING_MS);
			else
				ftcc_warn("dp: member %u incarnation %llu not named by an epoch "
					  "within %d ms; closing its connection",
					  c->peer_id, (unsigned long long)c->peer_inc,
					  DP_PENDING_MS);
			pending_drop(dp, i, 1);
			continue;
		}
		if (c->state != DPC_ACCEPTED)
			continue;
		rc = pending_read(dp, i, call);
		if (rc)
			return rc;
	}
	return 0;
}

void dp_pending_adopt(struct dp *dp)
{
	for (uint32_t i = dp->npending; i-- > 0;) {
		struct dp_conn *c = dp->pending[i];
		struct dp_peer_ent *pe;

		if (c->state != DPC_UNKNOWN)
			continue;
		pe = dp_peer_find(dp, c->peer_id);
		if (!pe || pe->inc < c->peer_inc)
			continue; /* still unknown, or newer than this epoch knows */
		if (pe->inc == c->peer_inc) {
			pending_adopt(dp, i, pe, NULL);
			continue;
		}
		ftcc_warn("dp: refusing held connection of member %u: incarnation %llu, the epoch "
			  "names %llu",
			  c->peer_id, (unsigned long long)c->peer_inc, (unsigned long long)pe->inc);
		pending_drop(dp, i, 1);
	}
}

/* Whether the peer counts as unreachable now: wanted and not ready for dp->cut_ns. Only time
 * in which calls kept wanting it counts: after a gap of nop_ns without one (an idle member, a
 * connection that broke between ops) the clock starts again. 0 or -EHOSTUNREACH. */
static int setup_down(struct dp *dp, struct dp_peer_ent *pe, int64_t now)
{
	return now - pe->down_ns >= dp->cut_ns ? -EHOSTUNREACH : 0;
}

/* A call wants @pe, which is not ready: starts or continues its down time (setup_down()). */
static void setup_wanted(struct dp *dp, struct dp_peer_ent *pe, int64_t now)
{
	if (!pe->down_ns || now - pe->want_ns > dp->nop_ns)
		pe->down_ns = now;
	pe->want_ns = now;
}

/* A connect attempt failed (@what, @err): retry after a back-off. */
static int setup_retry(struct dp *dp, struct dp_peer_ent *pe, const char *what, int err,
		       int64_t now)
{
	struct dp_conn *c = pe->conn;

	dpx_free(dp, c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->hout_off = c->hin_off = 0;
	ftcc_trace("dp: connect to member %u: %s%s%s; retrying in %d ms", pe->id, what,
		   err ? ": " : "", err ? strerror(err) : "", c->backoff_ms);
	c->state = DPC_BACKOFF;
	c->retry_ns = now + (int64_t)c->backoff_ms * 1000000;
	c->backoff_ms =
		c->backoff_ms * 2 > DP_BACKOFF_MAX_MS ? DP_BACKOFF_MAX_MS : c->backoff_ms * 2;
	return setup_down(dp, pe, now);
}

/* A connect attempt failed here (@what, @err: no socket, our own address gone): evidence about
 * this member, not the peer. The error goes up as it is (the engine gives up and leaves). */
static int setup_local(struct dp *dp, struct dp_peer_ent *pe, const char *what, int err)
{
	struct dp_conn *c = pe->conn;

	dpx_free(dp, c);
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->hout_off = c->hin_off = 0;
	c->state = DPC_BACKOFF;
	c->retry_ns = dp_now_ns() + (int64_t)c->backoff_ms * 1000000;
	ftcc_warn("dp: cannot connect to member %u: %s: %s", pe->id, what, strerror(err));
	return err ? -err : -EIO;
}

/* The bound on an attempt whose TCP connection is up (the peer's kernel answered: the network
 * between the two works) while its HELLO waits: the peer's process may be slow to take it, a
 * stalled or starved process that the membership's failure timeout judges, not this link. Twice
 * the failure timeout, as the stream's silence (dp->xctx.failure_ns). */
static void setup_tcp_up(struct dp *dp, struct dp_conn *c, int64_t now)
{
	c->state = DPC_HELLO;
	c->deadline_ns = now + 4 * dp->cut_ns;
}

/* Starts a non-blocking connect to @pe, bounded by dp->cut_ns until the TCP connection is up. */
static int setup_connect(struct dp *dp, struct dp_peer_ent *pe, int64_t now)
{
	struct dp_conn *c = pe->conn;
	int one = 1;

	c->deadline_ns = now + dp->cut_ns;
	c->fd = ftcc_sys_socket(pe->sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (c->fd < 0)
		return setup_local(dp, pe, "socket", errno);
	dp_sock_opts(c->fd);
	if (dp->self_sa.ss_family == pe->sa.ss_family) {
		/* leave from the published address; the port is picked at connect() time */
		setsockopt(c->fd, IPPROTO_IP, IP_BIND_ADDRESS_NO_PORT, &one, sizeof(one));
		if (ftcc_sys_bind(c->fd, (struct sockaddr *)&dp->self_sa, dp->self_salen) < 0)
			return setup_local(dp, pe, "bind", errno);
	}
	if (ftcc_sys_connect(c->fd, (struct sockaddr *)&pe->sa, pe->salen) < 0) {
		if (errno != EINPROGRESS)
			return setup_retry(dp, pe, "connect", errno, now);
		c->state = DPC_CONNECTING;
		return 0;
	}
	setup_tcp_up(dp, c, now);
	return 0;
}

static int setup_up(struct dp *dp, struct dp_peer_ent *pe, int64_t now);

/* Moves @pe's stream set-up (either side). 1 when ready, 0 not yet; a failure is a failed
 * attempt: the connector retries with back-off, the acceptor drops its side (the connector's
 * next attempt replaces it) and the next call that wants the peer fails with -EPIPE; a local
 * failure (-ENOMEM) is this member's, kept for the next call (dp->local_err). */
static int setup_xport(struct dp *dp, struct dp_peer_ent *pe, int64_t now)
{
	int mine = pe->conn->mine;
	int rc = dpx_step(dp, pe->conn, now);

	if (rc > 0) {
		if (pe->xfail) /* the link works after all: no call needs to hear of it */
			pe->broke_idle = pe->xfail = 0;
		return mine ? setup_up(dp, pe, now) : 1;
	}
	if (rc == 0)
		return 0;
	if (rc == -ENOMEM) { /* ours, not the link's: the engine gives up and leaves */
		dp->local_err = rc;
		if (mine)
			return setup_local(dp, pe, "stream buffers", ENOMEM);
		dp_conn_broken(dp, pe, "no stream buffers here");
		return rc;
	}
	if (mine)
		return setup_retry(dp, pe, "transport connection", -rc, now);
	ftcc_info("dp: transport connection with member %u failed: %s", pe->id, strerror(-rc));
	dp_conn_broken(dp, pe, "transport connection failed");
	/* Evidence from this end too, as a send failing on a socket gives it: the call that wants
	 * the peer (this one or the next) fails with -EPIPE, and the membership hears of the link
	 * from both ends at once (its cut rule weighs a member by its troubled links). Withdrawn
	 * if a stream with the peer comes up before a call heard of it. */
	if (!pe->broke_idle)
		pe->xfail = 1;
	pe->broke_idle = 1;
	return 0;
}

void dp_xport_idle(struct dp *dp)
{
	int64_t now = dp_now_ns();

	for (uint32_t i = 0; i < dp->npeers && dp->nxport; i++) {
		struct dp_peer_ent *pe = &dp->peers[i];

		if (pe->conn && pe->conn->state == DPC_XPORT)
			(void)setup_xport(dp, pe, now);
	}
}

/* Sends our HELLO and reads the reply. 1 when the connection is ready. */
static int setup_hello(struct dp *dp, struct dp_peer_ent *pe, int64_t now)
{
	struct dp_conn *c = pe->conn;
	struct dp_hello h;
	const char *why;
	ssize_t n;

	if (c->hout_off < DP_HELLO_SIZE) {
		if (c->hout_off == 0)
			hello_encode(c->hello_out, dp, pe->id, pe->inc);
		n = ftcc_sys_send(c->fd, c->hello_out + c->hout_off, DP_HELLO_SIZE - c->hout_off);
		if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
			return setup_retry(dp, pe, "HELLO", errno, now);
		if (n > 0)
			c->hout_off += (uint32_t)n;
		if (c->hout_off < DP_HELLO_SIZE)
			return 0;
	}
	n = ftcc_sys_recv(c->fd, c->hello_in + c->hin_off, DP_HELLO_SIZE - c->hin_off);
	if (n == 0)
		return setup_retry(dp, pe, "closed during the HELLO (refused by the peer?)", 0,
				   now);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK ?
			       0 :
			       setup_retry(dp, pe, "HELLO", errno, now);
	c->hin_off += (uint32_t)n;
	if (c->hin_off < DP_HELLO_SIZE)
		return 0;
	hello_decode(c->hello_in, &h);
	why = hello_check(dp, &h);
	if (!why && (h.from != pe->id || h.from_inc != pe->inc))
		why = "answered by another member or incarnation";
	if (why) {
		ftcc_warn("dp: connection to member %u incarnation %llu refused: %s", pe->id,
			  (unsigned long long)pe->inc, why);
		return setup_retry(dp, pe, why, 0, now);
	}
	if (hello_stream(dp, pe->id, h.stream)) {
		int rc = dpx_start(dp, c, now);

		if (rc) { /* logged; this member cannot go on, as on the acceptor's side */
			dp->local_err = rc == -ENOMEM ? rc : -EIO;
			setup_local(dp, pe, "transport listen", -rc);
			return dp->local_err;
		}
		return setup_xport(dp, pe, now);
	}
	return setup_up(dp, pe, now);
}

/* The connection to @pe is ready (the HELLOs, and the stream when there is one). 1. */
static int setup_up(struct dp *dp, struct dp_peer_ent *pe, int64_t now)
{
	struct dp_conn *c = pe->conn;

	c->state = DPC_READY;
	c->rb_off = c->rb_len = 0;
	c->backoff_ms = DP_BACKOFF_MIN_MS;
	pe->down_ns = 0;
	pe->stall_ns = 0;
	pe->rx_ns = now;
	ftcc_info("dp: connected to member %u incarnation %llu", pe->id,
		  (unsigned long long)pe->inc);
	return 1;
}

int dp_conn_setup(struct dp *dp, struct dp_peer_ent *pe)
{
	struct dp_conn *c = pe->conn;
	int64_t now;
	int rc;

	if (c && c->state == DPC_READY)
		return 1;
	if (!c && dp->cfg.self_id > pe->id && !dp->cfg.either_connects)
		return 0; /* the lower id connects to us */
	now = dp_now_ns();
	setup_wanted(dp, pe, now);
	if (c && c->state == DPC_XPORT)
		return setup_xport(dp, pe, now);
	if (!c) {
		c = calloc(1, sizeof(*c));
		if (!c)
			return -ENOMEM;
		c->fd = -1;
		c->state = DPC_BACKOFF;
		c->mine = 1;
		c->peer_id = pe->id;
		c->peer_inc = pe->inc;
		c->backoff_ms = DP_BACKOFF_MIN_MS;
		c->retry_ns = now;
		pe->conn = c;
	}
	if (c->state != DPC_BACKOFF && now > c->deadline_ns)
		return setup_retry(dp, pe, "no answer", ETIMEDOUT, now);
	/* Only a failed attempt says unreachable (setup_retry): one down for long already gets a
	 * fresh attempt at once in each call, bounded by its deadline, so that a peer that
	 * answers again (a straggler that reached the op) is found before it is reported. */
	if (c->state == DPC_BACKOFF) {
		if (now < c->retry_ns && now - pe->down_ns < dp->cut_ns)
			return 0;
		rc = setup_connect(dp, pe, now);
		if (rc || c->state != DPC_HELLO)
			return rc;
	}
	if (c->state == DPC_CONNECTING) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLOUT };
		int err = 0;
		socklen_t len = sizeof(err);

		if (poll(&pfd, 1, 0) <= 0)
			return 0;
		if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err)
			return setup_retry(dp, pe, "connect", err, now);
		setup_tcp_up(dp, c, now);
	}
	return setup_hello(dp, pe, now);
}

int dp_conn_watch(struct dp *dp, struct dp_peer_ent *pe, int64_t now)
{
	struct dp_conn *c = pe->conn;
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	if (!c || c->state != DPC_READY)
		return 0;
	if (pe->want_rx && now - pe->rx_ns >= dp->nop_ns && !c->tail && !c->tx_partial) {
		/* A receive waited long: put a byte on the wire, so that a connection the peer's
		 * side has lost answers with a reset, or stays unacknowledged (below). */
		uint8_t nop[DP_FRAME_HDR];
		struct dp_tag t = { .phase = DP_PH_NOP };

		dp_hdr_encode(nop, &t, 0, 0);
		pe->rx_ns = now;
		if (dp_tail_set(dp, c, nop, sizeof(nop), NULL, 0) == 0 && dp_tail_flush(dp, c) < 0)
			return -EPIPE;
	}
	if (c->xs) /* the whole failure timeout: the transport repairs a flap within it */
		return dpx_watch(c, now, 2 * dp->cut_ns);
	if (now - pe->check_ns < dp->nop_ns / 2)
		return 0;
	pe->check_ns = now;
	/* Data the peer's kernel keeps not acknowledging for cut_ns (retransmission timeouts
	 * fired, and go on firing), or window probes it keeps not answering: the path is cut or
	 * the peer's host is gone. A peer that only reads slowly answers the window probes of a
	 * full window, and a lost packet is recovered by the next retransmission: neither counts,
	 * and the clock starts over at every answer. */
	if (getsockopt(c->fd, IPPROTO_TCP, TCP_INFO, &ti, &len) != 0 ||
	    !((ti.tcpi_unacked > 0 && ti.tcpi_retransmits > 0) || ti.tcpi_probes > 0)) {
		pe->stall_ns = 0;
		return 0;
	}
	if (!pe->stall_ns)
		pe->stall_ns = now;
	if (now - pe->stall_ns >= dp->cut_ns) {
		ftcc_warn("dp: member %u has not acknowledged data for %u ms (%u retransmissions, "
			  "%u window probes unanswered)",
			  pe->id, ti.tcpi_last_ack_recv, ti.tcpi_retransmits, ti.tcpi_probes);
		return -EPIPE;
	}
	return 0;
}

short dp_conn_events(const struct dp *dp, const struct dp_peer_ent *pe)
{
	const struct dp_conn *c = pe->conn;
	short ev = 0;

	(void)dp;
	switch (c->state) {
	case DPC_CONNECTING:
		return POLLOUT;
	case DPC_HELLO:
		return c->hout_off < DP_HELLO_SIZE ? POLLOUT : POLLIN;
	case DPC_XPORT:
		return POLLIN;
	case DPC_READY:
		if (c->xs)
			return POLLIN; /* its end; the stream is polled (DPX_POLL_NS) */
		if (pe->want_tx || c->tail)
			ev |= POLLOUT;
		if (pe->want_rx && !(c->rx_mode == DPR_WAIT && c->rx_blocked))
			ev |= POLLIN;
		return ev;
	default:
		return 0;
	}
}

int dp_linked(const struct dp *dp, uint32_t id)
{
	const struct dp_peer_ent *pe = dp ? dp_peer_find((struct dp *)dp, id) : NULL;

	return pe && pe->conn && pe->conn->state != DPC_BACKOFF;
}
