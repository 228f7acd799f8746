/* SPDX-License-Identifier: BSD-3-Clause */
/* Data plane frames on a ready connection: headers encoded and checked here, sends gathered
 * into one writev per socket-buffer's worth straight from the transfers' buffers, receives
 * matched by tag and read straight into the receiving buffer, stale frames drained, and the
 * tail (the rest of an abandoned frame, or a NOP) written before anything else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "dp_int.h"
#include "ftcc/log.h"
#include "ftcc/sys.h"
#include "ftcc/le.h"

void dp_hdr_encode(uint8_t *p, const struct dp_tag *t, uint64_t len, uint64_t shape)
{
	le_put32(p, DP_FRAME_MAGIC);
	le_put32(p + 4, t->phase);
	le_put64(p + 8, t->seq);
	le_put64(p + 16, t->epoch);
	le_put32(p + 24, t->step);
	le_put32(p + 28, 0);
	le_put64(p + 32, len);
	le_put64(p + 40, shape);
}

/* Decodes the header in @c->rhdr. 0 or -EPROTO. */
static int hdr_decode(struct dp_conn *c)
{
	const uint8_t *p = c->rhdr;

	if (le_get32(p) != DP_FRAME_MAGIC || le_get32(p + 28) != 0)
		return -EPROTO;
	if (le_get32(p + 4) == DP_PH_NOP && (le_get64(p + 32) != 0 || le_get64(p + 40) != 0))
		return -EPROTO;
	c->rx_tag.phase = le_get32(p + 4);
	c->rx_tag.seq = le_get64(p + 8);
	c->rx_tag.epoch = le_get64(p + 16);
	c->rx_tag.step = le_get32(p + 24);
	c->rx_len = le_get64(p + 32);
	c->rx_shape = le_get64(p + 40);
	c->rx_off = 0;
	return 0;
}

int dp_tail_set(struct dp *dp, struct dp_conn *c, const void *hdr, size_t len, const void *buf,
		size_t len2)
{
	uint8_t *t;

	if (c->tail)
		return -EBUSY;
	t = malloc(len + len2 ? len + len2 : 1);
	if (!t)
		return -ENOMEM;
	if (len)
		memcpy(t, hdr, len);
	if (len2)
		memcpy(t + len, buf, len2);
	c->tail = t;
	c->tail_len = len + len2;
	c->tail_off = 0;
	dp->ntails++;
	return 0;
}

int dp_tail_flush(struct dp *dp, struct dp_conn *c)
{
	while (c->tail && c->tail_off < c->tail_len) {
		ssize_t n = dp_io_send(c, c->tail + c->tail_off, c->tail_len - c->tail_off);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				return 0;
			return -EPIPE;
		}
		c->tail_off += (size_t)n;
	}
	if (c->tail) {
		free(c->tail);
		c->tail = NULL;
		c->tail_len = c->tail_off = 0;
		dp->ntails--;
	}
	return 1;
}

/* Maps a failed or empty read/write to the dp error: -EPIPE for a closed or reset link. */
static int io_error(const struct dp_peer_ent *pe, ssize_t n, const char *what)
{
	int err = n == 0 ? 0 : errno;

	ftcc_info("dp: connection to member %u lost on %s: %s", pe->id, what,
		  n == 0 ? "EOF" : strerror(err));
	return -EPIPE;
}

static int would_block(void)
{
	return errno == EAGAIN || errno == EWOULDBLOCK;
}

/* Ties frames partly moved in an earlier call to this call's transfers. A receive no longer
 * posted has the rest of its payload drained. A send no longer posted that its caller did not
 * release (dp_release()) leaves half a frame on the stream whose rest dp cannot know: the
 * connection is broken then (returns 1), which the peer survives as a broken link. */
static int conn_rebind(struct dp *dp, struct dp_peer_ent *pe, uint32_t pidx, struct dp_call *call)
{
	struct dp_conn *c = pe->conn;
	int found;

	c->bind_gen = dp->gen;
	c->rx_blocked = 0;
	if (c->rx_mode == DPR_BODY) {
		c->rx_x = NULL;
		for (int i = 0; i < call->n && !c->rx_x; i++) {
			struct dp_xfer *x = &call->x[i];

			if (dp->xpeer[i] == pidx && (x->dir == DP_RECV || x->dir == DP_PEEK) &&
			    !x->done && x->buf == c->rx_buf && x->len == c->rx_len &&
			    dp_tag_cmp(&x->tag, &c->rx_tag) == 0)
				c->rx_x = x;
		}
		if (!c->rx_x)
			c->rx_mode = DPR_DROP;
	}
	if (!c->tx_partial)
		return 0;
	found = 0;
	for (int i = 0; i < call->n && !found; i++) {
		struct dp_xfer *x = &call->x[i];

		found = dp->xpeer[i] == pidx && x->dir == DP_SEND && !x->done &&
			x->buf == c->tx_buf && x->len == c->tx_len &&
			dp_tag_cmp(&x->tag, &c->tx_tag) == 0;
	}
	if (found)
		return 0;
	ftcc_warn("dp: a frame to member %u was abandoned half sent without dp_release()", pe->id);
	dp_conn_broken(dp, pe, "a half-written frame was abandoned");
	return 1;
}

/* The frame being sent is @x; records where it stands after @sent bytes in all. */
static void tx_note(struct dp_conn *c, struct dp_xfer *x, uint64_t sent)
{
	x->hdr_state = sent < DP_FRAME_HDR ? (int)sent : DP_FRAME_HDR;
	x->off = sent > DP_FRAME_HDR ? (size_t)(sent - DP_FRAME_HDR) : 0;
	c->tx_partial = 1;
	c->tx_tag = x->tag;
	c->tx_shape = x->shape;
	c->tx_len = x->len;
	c->tx_buf = x->buf;
	c->tx_sent = sent;
}

/* Writes this call's open sends to @pe, in array order, several frames per writev. 1 when
 * every send went out, 0 when the socket is full, or -EPIPE. */
static int conn_tx(struct dp *dp, struct dp_peer_ent *pe, uint32_t pidx, struct dp_call *call)
{
	struct dp_conn *c = pe->conn;
	uint8_t hdrs[DP_IOV_FRAMES][DP_FRAME_HDR];
	struct iovec iov[2 * DP_IOV_FRAMES];
	struct dp_xfer *fx[DP_IOV_FRAMES];
	uint64_t fsent[DP_IOV_FRAMES];
	int i = 0, rc;

	if (c->tail) {
		rc = dp_tail_flush(dp, c);
		if (rc <= 0)
			return rc < 0 ? io_error(pe, -1, "send") : 0;
	}
	for (;;) {
		int nf = 0, niov = 0, short_write = 0;
		size_t want = 0;
		ssize_t n;

		/* A frame partly written goes first: it is the first open send in order unless
		 * the caller reordered, so find it by identity. */
		for (int k = 0; c->tx_partial && k < call->n; k++) {
			struct dp_xfer *x = &call->x[k];

			if (dp->xpeer[k] == pidx && x->dir == DP_SEND && !x->done &&
			    x->buf == c->tx_buf && dp_tag_cmp(&x->tag, &c->tx_tag) == 0) {
				fx[nf] = x;
				fsent[nf++] = c->tx_sent;
				break;
			}
		}
		for (; i < call->n && nf < DP_IOV_FRAMES; i++) {
			struct dp_xfer *x = &call->x[i];

			if (dp->xpeer[i] != pidx || x->dir != DP_SEND || x->done ||
			    (nf > 0 && fx[0] == x))
				continue;
			fx[nf] = x;
			fsent[nf++] = 0;
		}
		if (nf == 0)
			return 1;
		for (int f = 0; f < nf; f++) {
			struct dp_xfer *x = fx[f];

			if (fsent[f] < DP_FRAME_HDR) {
				dp_hdr_encode(hdrs[f], &x->tag, x->len, x->shape);
				iov[niov].iov_base = hdrs[f] + fsent[f];
				iov[niov++].iov_len = DP_FRAME_HDR - fsent[f];
			}
			uint64_t poff = fsent[f] > DP_FRAME_HDR ? fsent[f] - DP_FRAME_HDR : 0;

			if (x->len > poff) {
				iov[niov].iov_base = (uint8_t *)x->buf + poff;
				iov[niov++].iov_len = x->len - poff;
			}
		}
		for (int v = 0; v < niov; v++)
			want += iov[v].iov_len;
		n = dp_io_sendv(c, iov, niov);
		if (n < 0)
			return would_block() ? 0 : io_error(pe, n, "send");
		c->used |= n > 0;
		if ((size_t)n < want)
			short_write = 1;
		for (int f = 0; f < nf && n > 0; f++) {
			uint64_t total = DP_FRAME_HDR + (uint64_t)fx[f]->len;
			uint64_t take =
				total - fsent[f] < (uint64_t)n ? total - fsent[f] : (uint64_t)n;

			n -= (ssize_t)take;
			if (fsent[f] + take < total) {
				tx_note(c, fx[f], fsent[f] + take);
				break;
			}
			c->tx_partial = 0;
			fx[f]->hdr_state = DP_FRAME_HDR;
			fx[f]->off = fx[f]->len;
			fx[f]->done = 1;
			call->completed++;
		}
		if (short_write)
			return 0; /* the socket buffer is full */
	}
}

/* Finds the receive of this call that frame @c->rx_tag goes to; or tells it is stale (lower
 * than every receive posted for @pidx, and no peek of @pidx posted): *@stale = 1. */
static struct dp_xfer *rx_match(struct dp *dp, struct dp_conn *c, uint32_t pidx,
				struct dp_call *call, int *stale)
{
	const struct dp_tag *lowest = NULL;
	int peeks = 0;

	*stale = 0;
	for (int i = 0; i < call->n; i++) {
		struct dp_xfer *x = &call->x[i];

		peeks |= dp->xpeer[i] == pidx && x->dir == DP_PEEK;
		if (dp->xpeer[i] != pidx || x->dir != DP_RECV)
			continue;
		if (!x->done && dp_tag_cmp(&x->tag, &c->rx_tag) == 0)
			return x;
		if (!lowest || dp_tag_cmp(&x->tag, lowest) < 0)
			lowest = &x->tag;
	}
	*stale = !peeks && lowest && dp_tag_cmp(&c->rx_tag, lowest) < 0;
	return NULL;
}

/* A receive of this call from the peer of @c that can no longer complete: one of an earlier op
 * than @c's frame, which lies after it in tag order. A member runs its ops in order and sends in
 * tag order, so a frame of a later op means it sent the awaited one before, on a connection
 * that broke since; or NULL. (A frame of a later epoch and an earlier or the same op, an epoch
 * that reopened the op, is no such proof.) This rests on what the engine does: every call
 * carries transfers of one op, and a member's frames to a peer go out in non-decreasing
 * (epoch, op) order, all of an op's sends done before any of a later op's. Pipelining ops
 * would have to revisit it (within one op, frames need not leave in tag order: the rule looks
 * at the op only). */
static struct dp_xfer *rx_passed(struct dp *dp, const struct dp_conn *c, uint32_t pidx,
				 struct dp_call *call)
{
	for (int i = 0; i < call->n; i++) {
		struct dp_xfer *x = &call->x[i];

		if (dp->xpeer[i] == pidx && x->dir == DP_RECV && !x->done &&
		    x->tag.seq < c->rx_tag.seq && dp_tag_cmp(&x->tag, &c->rx_tag) < 0)
			return x;
	}
	return NULL;
}

/* A transfer of this call of the op of @c's frame that carries another shape than the frame,
 * or NULL. Frames and transfers without a shape are not checked. */
static const struct dp_xfer *rx_shape_clash(const struct dp_conn *c, const struct dp_call *call)
{
	if (!c->rx_shape)
		return NULL;
	for (int i = 0; i < call->n; i++) {
		const struct dp_xfer *x = &call->x[i];

		if (x->tag.seq == c->rx_tag.seq && x->shape && x->shape != c->rx_shape)
			return x;
	}
	return NULL;
}

/* A peek of this call from peer @pidx, open or done (then *@done = 1), or NULL. Frames from a
 * peer the call peeks at are never stale nor proof of a loss: their order is the caller's. */
static struct dp_xfer *rx_peek(struct dp *dp, uint32_t pidx, struct dp_call *call, int *done)
{
	*done = 0;
	for (int i = 0; i < call->n; i++) {
		struct dp_xfer *x = &call->x[i];

		if (dp->xpeer[i] == pidx && x->dir == DP_PEEK) {
			*done = x->done;
			return x;
		}
	}
	return NULL;
}

/* Drops the frame whose header @c holds because its shape clashes with @x's; records it. */
static int rx_mismatch(struct dp *dp, struct dp_peer_ent *pe, const struct dp_xfer *x,
		       struct dp_call *call)
{
	struct dp_conn *c = pe->conn;

	if (!dp->mm.seen || dp->mm.seq != c->rx_tag.seq || dp->mm.peer != pe->id)
		ftcc_info("dp: member %u sent a frame of op %llu with shape %#llx where this "
			  "member's is %#llx: dropped",
			  pe->id, (unsigned long long)c->rx_tag.seq,
			  (unsigned long long)c->rx_shape, (unsigned long long)x->shape);
	dp->mm.seen = 1;
	dp->mm.peer = pe->id;
	dp->mm.seq = c->rx_tag.seq;
	dp->mm.theirs = c->rx_shape;
	dp->mm.ours = x->shape;
	c->rx_mode = DPR_DROP;
	*call->bad_peer = pe->id;
	return -EBADE;
}

/* Decides what to do with a frame whose header is read. 1 to go on reading, 0 to stop, or
 * -EPROTO, or -EBADE (a shape mismatch: the frame is being dropped). */
static int rx_dispatch(struct dp *dp, struct dp_peer_ent *pe, uint32_t pidx, struct dp_call *call)
{
	struct dp_conn *c = pe->conn;
	int stale, peeked;
	struct dp_xfer *x = rx_match(dp, c, pidx, call, &stale);
	const struct dp_xfer *clash = stale ? NULL : rx_shape_clash(c, call);

	if (clash)
		return rx_mismatch(dp, pe, clash, call);
	if (x) {
		if (x->len != c->rx_len) {
			ftcc_warn("dp: member %u sent %llu bytes for a receive of %zu (tag "
				  "%llu/%llu/%u/%u)",
				  pe->id, (unsigned long long)c->rx_len, x->len,
				  (unsigned long long)x->tag.seq, (unsigned long long)x->tag.epoch,
				  x->tag.phase, x->tag.step);
			return -EPROTO;
		}
		if (!x->buf && x->len > 0) {
			c->rx_mode = DPR_DROP; /* the caller wants it gone */
			x->done = 1;
			call->completed++;
			return 1;
		}
		c->rx_mode = DPR_BODY;
		c->rx_x = x;
		c->rx_buf = x->buf;
		x->hdr_state = 1;
		x->off = 0;
		return 1;
	}
	x = rx_peek(dp, pidx, call, &peeked);
	if (x && !peeked && x->buf && c->rx_len <= x->len) {
		/* it fits the peek's buffer: the whole frame is the peek's */
		x->tag = c->rx_tag;
		x->len = (size_t)c->rx_len;
		x->off = 0;
		x->hdr_state = 1;
		c->rx_mode = DPR_BODY;
		c->rx_x = x;
		c->rx_buf = x->buf;
		return 1;
	}
	if (x) {
		if (!peeked) {
			x->tag = c->rx_tag;
			x->len = (size_t)c->rx_len;
			x->done = 1;
			call->completed++;
		}
		c->rx_mode = DPR_WAIT; /* for a receive of a later call */
		c->rx_blocked = 1;
		return 0;
	}
	if (stale) {
		ftcc_trace("dp: dropping a stale frame of %llu bytes from member %u",
			   (unsigned long long)c->rx_len, pe->id);
		c->rx_mode = DPR_DROP;
		return 1;
	}
	c->rx_mode = DPR_WAIT;
	c->rx_blocked = 1;
	x = peeked ? NULL : rx_passed(dp, c, pidx, call);
	if (x) {
		ftcc_info(
			"dp: member %u is past op %llu (its frame of op %llu, epoch %llu, came "
			"first): the frame of op %llu, epoch %llu, phase %u this member waits for "
			"was lost with a link that broke",
			pe->id, (unsigned long long)x->tag.seq, (unsigned long long)c->rx_tag.seq,
			(unsigned long long)c->rx_tag.epoch, (unsigned long long)x->tag.seq,
			(unsigned long long)x->tag.epoch, x->tag.phase);
		*call->bad_peer = pe->id;
		return -ENOMSG;
	}
	return 0;
}

/* Whether the call still has a receive from peer @pidx that is not done. */
static int rx_open(const struct dp *dp, const struct dp_call *call, uint32_t pidx)
{
	for (int i = 0; i < call->n; i++)
		if (dp->xpeer[i] == pidx && call->x[i].dir != DP_SEND && !call->x[i].done)
			return 1;
	return 0;
}

/* Reads frames from @pe while receives of this call can take them; with @peek, only up to the
 * next header (the call has no receive from @pe). 0 or -EPIPE/-EPROTO/-EBADE/-ENOMSG. */
static int conn_rx(struct dp *dp, struct dp_peer_ent *pe, uint32_t pidx, struct dp_call *call,
		   int peek)
{
	struct dp_conn *c = pe->conn;
	size_t budget = DP_RX_BUDGET; /* then other connections get their turn */
	ssize_t n;
	int rc;

	for (;;) {
		if (budget == 0 || (peek && c->rx_mode == DPR_WAIT))
			return 0;
		switch (c->rx_mode) {
		case DPR_HDR:
			n = dp_io_recv(c, c->rhdr + c->rhdr_off, DP_FRAME_HDR - c->rhdr_off);
			if (n < 0 && would_block())
				return 0;
			if (n <= 0)
				return io_error(pe, n, "receive");
			c->rhdr_off += (uint32_t)n;
			pe->rx_ns = dp_now_ns();
			if (c->rhdr_off < DP_FRAME_HDR)
				continue;
			c->rhdr_off = 0;
			if (hdr_decode(c)) {
				ftcc_warn("dp: malformed frame header from member %u", pe->id);
				return -EPROTO;
			}
			if (c->rx_tag.phase == DP_PH_NOP)
				continue; /* its purpose was to be sent */
			c->used = 1;
			c->rx_mode = DPR_WAIT;
			/* fall through */
		case DPR_WAIT:
			rc = rx_dispatch(dp, pe, pidx, call);
			if (rc <= 0)
				return rc;
			continue;
		case DPR_BODY:
			if (c->rx_off < c->rx_len) {
				n = dp_io_recv(c, (uint8_t *)c->rx_buf + c->rx_off,
					       c->rx_len - c->rx_off);
				if (n < 0 && would_block())
					return 0;
				if (n <= 0)
					return io_error(pe, n, "receive");
				c->rx_off += (uint64_t)n;
				c->rx_x->off = c->rx_off;
				pe->rx_ns = dp_now_ns();
				budget = (size_t)n < budget ? budget - (size_t)n : 0;
			}
			if (c->rx_off == c->rx_len) {
				c->rx_x->done = 1;
				call->completed++;
				c->rx_x = NULL;
				c->rx_mode = DPR_HDR;
				/* Over TCP the next header waits for a call that wants it: reading on
				 * would cost a failed recv() per frame. A stream reads on: its sender
				 * has a few slots, and a stream not drained stalls it (dpx_watch()). */
				if (!peek && !c->xs && !rx_open(dp, call, pidx))
					return 0;
			}
			continue;
		case DPR_DROP: {
			uint64_t left = c->rx_len - c->rx_off;

			if (left == 0) {
				c->rx_mode = DPR_HDR;
				continue;
			}
			n = dp_io_recv(c, dp->scratch, left < DP_SCRATCH ? left : DP_SCRATCH);
			if (n < 0 && would_block())
				return 0;
			if (n <= 0)
				return io_error(pe, n, "receive");
			c->rx_off += (uint64_t)n;
			budget = (size_t)n < budget ? budget - (size_t)n : 0;
			continue;
		}
		}
	}
}

int dp_conn_io(struct dp *dp, struct dp_peer_ent *pe, uint32_t pidx, struct dp_call *call)
{
	int rc;

	if (pe->conn->bind_gen != dp->gen && conn_rebind(dp, pe, pidx, call))
		return 0; /* closed; a later pass reconnects */
	if (pe->want_tx) {
		rc = conn_tx(dp, pe, pidx, call);
		if (rc < 0)
			return rc;
	} else if (pe->conn->tail && dp_tail_flush(dp, pe->conn) < 0) {
		return io_error(pe, -1, "send");
	}
	if (pe->want_rx && !(pe->conn->rx_mode == DPR_WAIT && pe->conn->rx_blocked))
		return conn_rx(dp, pe, pidx, call, 0);
	return 0;
}

int dp_conn_peekable(const struct dp_peer_ent *pe)
{
	const struct dp_conn *c = pe->conn;

	return c && c->state == DPC_READY && (c->rx_mode == DPR_HDR || c->rx_mode == DPR_DROP);
}

int dp_conn_peek(struct dp *dp, struct dp_peer_ent *pe, uint32_t pidx, struct dp_call *call)
{
	if (!dp_conn_peekable(pe))
		return 0;
	return conn_rx(dp, pe, pidx, call, 1);
}

int dp_mismatch(const struct dp *dp, uint64_t *seq, uint32_t *peer, uint64_t *theirs,
		uint64_t *ours)
{
	if (!dp || !dp->mm.seen)
		return -ENOENT;
	*seq = dp->mm.seq;
	*peer = dp->mm.peer;
	*theirs = dp->mm.theirs;
	*ours = dp->mm.ours;
	return 0;
}
