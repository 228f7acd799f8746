/* SPDX-License-Identifier: BSD-3-Clause */
/* Running one allreduce op through its attempts: the epoch it belongs to, the resume decision
 * when a new epoch reopened it, the algorithm or the fill, the have notices, the degraded
 * policy, and the record. The protocol is in README "The allreduce engine".
 */
#include "engine.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftcc/fault.h"
#include "ftcc/log.h"
#include "ftcc/quant.h"
#include "ftcc/reduce.h"
#include "ftcc/settings.h"

/* A data plane failure is reported again this often while the member waits for a new epoch. */
#define ENG_REPORT_MS 100
#define ENG_SERVE_MS 10 /* eng_serve(): answers new data connections this often */

static int64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t eng_now_ms(void)
{
	return now_ms();
}

static void nap_ms(int ms)
{
	struct timespec ts = { .tv_sec = 0, .tv_nsec = (long)ms * 1000000L };

	nanosleep(&ts, NULL);
}

void eng_set_error(struct ftcc_comm *c, const char *fmt, ...)
{
	va_list ap;

	pthread_mutex_lock(&c->mu);
	va_start(ap, fmt);
	vsnprintf(c->last_error, sizeof(c->last_error), fmt, ap);
	va_end(ap);
	pthread_mutex_unlock(&c->mu);
}

/* The FTCC_ERR_* for a final membership state, with the reason recorded. */
static int final_state_error(struct ftcc_comm *c, int rc)
{
	struct ctl_view v;

	if (atomic_load(&c->aborted)) {
		return FTCC_ERR_ABORTED;
	}
	ctl_member_view_s(c->ctl, c->stream, &v);
	eng_set_error(c, "member %u of group %s: %s", c->rank, c->group, v.reason);
	ctl_epoch_put(v.e);
	(void)rc;
	return FTCC_ERR_LOST;
}

void eng_serve(struct eng_lane *l)
{
	struct ftcc_comm *c = l->c;
	int64_t now = now_ms();

	if (now - l->served_ms < ENG_SERVE_MS || atomic_load(&c->aborted)) {
		return;
	}
	l->served_ms = now;
	dp_progress(l->dp, NULL, 0, 0, NULL);
}

int eng_op_epoch(struct eng_lane *l, uint64_t seq, const struct ctl_epoch **out)
{
	struct ftcc_comm *c = l->c;
	int64_t deadline = now_ms() + ftcc_setting_int(FTCC_SET_CONNECT_TIMEOUT_MS);
	int rc;

	for (;;) {
		if (atomic_load(&c->aborted)) {
			return FTCC_ERR_ABORTED;
		}
		rc = ctl_member_op_epoch_s(c->ctl, c->stream, seq, out);
		if (rc == 0) {
			if ((*out)->self_index < 0) {
				ctl_epoch_put(*out);
				*out = NULL;
				eng_set_error(c, "member %u is not in the epoch of op %llu",
					      c->rank, (unsigned long long)seq);
				return FTCC_ERR_LOST;
			}
			return 0;
		}
		if (rc == -ENOTCONN || rc == -ESTALE || rc == -ESHUTDOWN) {
			return final_state_error(c, rc);
		}
		if (rc == -ERANGE) {
			eng_set_error(c, "op %llu is older than the epochs kept",
				      (unsigned long long)seq);
			return FTCC_ERR_LOST;
		}
		if (now_ms() > deadline) {
			eng_set_error(c, "op %llu waited too long for its epoch",
				      (unsigned long long)seq);
			return FTCC_ERR_TIMEOUT;
		}
		eng_serve(l);
		nap_ms(1);
	}
}

int eng_check(void *arg)
{
	struct eng_check *k = arg;
	const struct ctl_epoch *e = NULL;
	unsigned gen = atomic_load(&k->c->ctl_gen);
	int rc;

	if (atomic_load(&k->c->aborted)) {
		return -ECANCELED;
	}
	if (gen == k->gen) {
		/* the epoch first: a wait that ends with it is no one's fault */
		return k->deadline_ms && now_ms() >= k->deadline_ms ? -ETIMEDOUT : 0;
	}
	k->gen = gen;
	rc = ctl_member_op_epoch_s(k->c->ctl, k->c->stream, k->seq, &e);
	if (rc == -EAGAIN) {
		return 0; /* a proposal is open: the attempt goes on until it commits */
	}
	if (rc < 0) {
		return -ENOTCONN;
	}
	rc = e->epoch != k->epoch ? -ESTALE : 0;
	ctl_epoch_put(e);
	if (rc == 0 && k->deadline_ms && now_ms() >= k->deadline_ms) {
		rc = -ETIMEDOUT;
	}
	return rc;
}

/* Appends the members of @e not yet in @p[0..*n), with their addresses of lane @l. */
static void add_peers(struct dp_peer *p, uint32_t *n, const struct ctl_epoch *e,
		      const struct eng_lane *l)
{
	for (uint32_t i = 0; i < e->nmembers; i++) {
		uint32_t k;

		for (k = 0; k < *n && p[k].id != e->members[i].id; k++) {
		}
		if (k < *n) {
			continue;
		}
		p[k].id = e->members[i].id;
		p[k].incarnation = e->members[i].incarnation;
		/* A member with another number of lanes (it does not stay: lanes_differ()) gets
		 * its lane 0 address, which refuses this lane's HELLOs. */
		(void)eng_lane_addr(e->members[i].info, e->members[i].info_len,
				    l->c->stream * l->c->nlanes + l->idx,
				    l->c->nlanes * l->c->nstreams, p[k].addr);
		(*n)++;
	}
}

int eng_dp_peers(struct eng_lane *l, const struct ctl_epoch *e)
{
	struct ftcc_comm *c = l->c;
	struct dp_peer *p;
	struct ctl_view v;
	uint32_t n = 0;
	int rc;

	/* The newest epoch's members and @e's: an op of an older epoch must not cut the links
	 * to members that joined since (they may be sending for later ops already). */
	ctl_member_view_s(c->ctl, c->stream, &v);
	if (l->dp_epoch == e->epoch && (!v.e || l->dp_newest == v.e->epoch)) {
		ctl_epoch_put(v.e);
		return 0;
	}
	p = calloc((size_t)e->nmembers + (v.e ? v.e->nmembers : 0), sizeof(*p));
	if (!p) {
		ctl_epoch_put(v.e);
		return -ENOMEM;
	}
	if (v.e) {
		add_peers(p, &n, v.e, l);
	}
	add_peers(p, &n, e, l);
	rc = dp_set_peers(l->dp, p, n);
	free(p);
	if (rc == 0) {
		l->dp_epoch = e->epoch;
		l->dp_newest = v.e ? v.e->epoch : 0;
	}
	ctl_epoch_put(v.e);
	return rc;
}

static int grow(void **buf, size_t *len, size_t want)
{
	void *n;

	if (*len >= want) {
		return 0;
	}
	n = realloc(*buf, want);
	if (!n) {
		return -ENOMEM;
	}
	*buf = n;
	*len = want;
	return 0;
}

/* The contributor set of @e into @att. */
static void contrib_of(const struct ctl_epoch *e, struct eng_att *att)
{
	uint32_t i;

	memset(att->contrib, 0, sizeof(att->contrib));
	att->ncontrib = 0;
	for (i = 0; i < e->nmembers; i++) {
		if ((e->members[i].flags & CTL_MF_CONTRIB) && e->members[i].id < FTCC_MAX_MEMBERS) {
			uint32_t id = e->members[i].id;

			att->contrib[id / 8] |= (uint8_t)(1u << (id % 8));
			att->ncontrib++;
		}
	}
}

static int self_contributes(const struct ctl_epoch *e)
{
	return !!(e->members[e->self_index].flags & CTL_MF_CONTRIB);
}

uint64_t eng_shape(const struct ftcc_request *r)
{
	return (uint64_t)r->kind | (uint64_t)r->codec << 4 | (uint64_t)(r->param & 0xffff) << 8 |
	       (uint64_t)r->count << 24;
}

void eng_shape_text(uint64_t shape, char *buf, size_t len)
{
	enum ftcc_codec codec = (enum ftcc_codec)(shape >> 4 & 0xf);
	unsigned long long count = shape >> 24;
	unsigned param = (unsigned)(shape >> 8 & 0xffff);
	const char *type = ftcc_dtype_name((enum ftcc_dtype)(param & 0xff));
	const char *op = ftcc_redop_name((enum ftcc_redop)(param >> 8));

	switch (shape & 0xf) {
	case ENG_BROADCAST:
		snprintf(buf, len, "broadcast of %llu bytes from member %u", count, param);
		break;
	case ENG_ALLGATHER:
		snprintf(buf, len, "allgather of %llu bytes of %s", count, type);
		break;
	case ENG_REDUCE_SCATTER:
		snprintf(buf, len, "reduce-scatter of %llu x %s %s", count, type, op);
		break;
	case ENG_BARRIER:
		snprintf(buf, len, "barrier");
		break;
	default:
		snprintf(buf, len, "%llu x %s %s%s%s", count, type, op, codec ? " as " : "",
			 codec ? ftcc_q_name(codec) : "");
	}
}

/* Runs a fresh attempt of @r among the members of @e. @input NULL: zeros (a broadcast's
 * non-root). @fresh: the op's result buffer still holds @input. */
static int run_attempt(struct eng_lane *l, struct ftcc_request *r, const struct ctl_epoch *e,
		       const void *input, int fresh, struct eng_att *att, uint32_t *bad_peer)
{
	struct ftcc_comm *c = l->c;
	size_t esz = ftcc_dtype_size(r->dtype), bytes = r->count * esz;
	uint32_t ids[FTCC_MAX_MEMBERS], i;
	/* gen - 1: the first check looks at the epoch whatever happened before it. */
	struct eng_check k = {
		.c = c, .seq = r->seq, .epoch = e->epoch, .gen = atomic_load(&c->ctl_gen) - 1u
	};
	struct algo_att a;
	int filling, rc;

	for (i = 0; i < e->nmembers; i++) {
		ids[i] = e->members[i].id;
	}
	memset(att, 0, sizeof(*att));
	att->shape = eng_shape(r);
	att->valid = 1;
	att->epoch = e->epoch;
	att->algo = r->codec				    ? ALGO_Q :
		    r->kind == ENG_ALLGATHER && c->size > 1 ? ALGO_AG :
							      algo_choose(bytes, e->nmembers);
	if (r->kind == ENG_BROADCAST && att->algo == ALGO_RING) {
		att->algo = ALGO_BC; /* the large-message algorithm of a broadcast */
	}
	if (r->kind == ENG_REDUCE_SCATTER && att->algo == ALGO_RING) {
		att->algo = ALGO_RSC; /* and of a reduce-scatter */
	}
	/* an allgather's and a reduce-scatter's chunks are the group's slots, whoever takes part */
	att->nchunks = att->algo == ALGO_AG || att->algo == ALGO_RSC ?
			       c->size :
			       algo_chunks(att->algo, e->nmembers);
	contrib_of(e, att);
	/* A catch-up member gives the identity; a broadcast's non-root (@input NULL) zeros, the
	 * identity of its uint8 SUM, which its chain never reads. */
	if ((!self_contributes(e) || !input) && !(!input && att->algo == ALGO_BC)) {
		if (grow(&l->ident, &l->ident_len, bytes)) {
			return -ENOMEM;
		}
		eng_identity(l->ident, r->count, r->dtype, r->op);
		input = l->ident;
	}
	if (grow(&l->scratch, &l->scratch_len,
		 algo_scratch_bytes(att->algo, e->nmembers, r->count, r->dtype, r->codec) + 64)) {
		return -ENOMEM;
	}
	memset(&a, 0, sizeof(a));
	a.dp = l->dp;
	a.seq = r->seq;
	a.epoch = e->epoch;
	a.n = e->nmembers;
	a.ids = ids;
	a.self = (uint32_t)e->self_index;
	a.input = input;
	a.out = r->recvbuf;
	a.count = r->count;
	a.dtype = r->dtype;
	a.op = r->op == FTCC_AVG ? FTCC_SUM : r->op;
	a.codec = r->codec;
	a.slots = c->size;
	a.root = r->param;
	a.out_holds_input = fresh && input == l->keep;
	/* The ring keeps the input as it goes; anything else finds it kept (algo.h). */
	a.keep_fill = l->keep_pending && fresh && input == l->keep && att->algo == ALGO_RING;
	if (!a.keep_fill) {
		eng_keep_settle(l, r);
	}
	a.shape = att->shape;
	a.scratch = l->scratch;
	a.have = att->have;
	a.check = eng_check;
	a.check_arg = &k;
	filling = a.keep_fill;
	rc = algo_run(att->algo, &a);
	if (filling && !a.keep_fill) {
		l->keep_pending = 0; /* the ring kept it whole (else nothing ran: still pending) */
	}
	*bad_peer = a.bad_peer;
	return rc;
}

/* The evidence a data plane error is about its peer: never a verdict (the coordinator
 * decides), 0 when the error says nothing about the peer. */
static enum ctl_evidence evidence_of(int rc)
{
	switch (rc) {
	case -EPIPE:	 /* the link broke (reset, closed, replaced): frames may be lost */
	case -ENOMSG:	 /* a frame awaited was lost with a link that broke before */
	case -EPROTO:	 /* a frame the receive did not expect: the link is out of step */
	case -ETIMEDOUT: /* a round of the reports waited past its bound on a peer */
		return CTL_EV_LINK;
	case -EHOSTUNREACH: /* no connection to the peer for the failure timeout */
		return CTL_EV_CUT;
	case -EBADE: /* the peer called the op with another shape: the group must end it */
		return CTL_EV_SHAPE;
	default:
		return 0;
	}
}

/* After a failed attempt: tells the membership what the data plane saw (again every
 * ENG_REPORT_MS: a report sent while the coordinator's link was down is lost), then waits,
 * bounded, until op @seq belongs to an epoch other than @epoch. 0 or an FTCC_ERR_*. */
static int after_failure(struct eng_lane *l, uint64_t seq, uint64_t epoch, int rc,
			 uint32_t bad_peer)
{
	struct ftcc_comm *c = l->c;
	/* The coordinator needs at most the failure timeout to hear silence, plus as much for
	 * a takeover and for a link judged broken for good. */
	int64_t bound = 4 * c->timeout_ms + 2000;
	int64_t deadline = now_ms() + bound, next_report = 0;
	enum ctl_evidence ev = evidence_of(rc);

	if (rc == -ECANCELED || atomic_load(&c->aborted)) {
		return FTCC_ERR_ABORTED;
	}
	if (rc == -ENOTCONN) {
		return final_state_error(c, rc);
	}
	if (rc == -ENOMEM) {
		eng_set_error(c, "op %llu: out of memory", (unsigned long long)seq);
		return FTCC_ERR_NOMEM;
	}
	if (!ev && rc != -ESTALE && rc != -EPROTO) {
		/* not about a peer nor the epoch: this member cannot run the op */
		eng_set_error(c, "op %llu: %s", (unsigned long long)seq, strerror(-rc));
		return FTCC_ERR_SYSTEM;
	}
	if (ev == CTL_EV_SHAPE) {
		ftcc_info("engine: op %llu in epoch %llu: member %u called it with another shape; "
			  "asking for an epoch that ends it on every member",
			  (unsigned long long)seq, (unsigned long long)epoch, bad_peer);
	} else if (ev) {
		ftcc_info("engine: op %llu in epoch %llu: the data link to member %u failed (%s); "
			  "asking for another attempt",
			  (unsigned long long)seq, (unsigned long long)epoch, bad_peer,
			  strerror(-rc));
	}
	for (;;) {
		const struct ctl_epoch *e = NULL;
		int64_t now = now_ms();
		int r;

		if (atomic_load(&c->aborted)) {
			return FTCC_ERR_ABORTED;
		}
		/* the op's epoch first: a failure seen after it changed is no one's fault */
		r = ctl_member_op_epoch_s(c->ctl, c->stream, seq, &e);
		if (r == 0) {
			uint64_t ep = e->epoch;

			ctl_epoch_put(e);
			if (ep != epoch) {
				return 0;
			}
		} else if (r != -EAGAIN) {
			return final_state_error(c, r);
		}
		if (ev && now >= next_report) {
			ctl_member_suspect_s(c->ctl, bad_peer, ev, c->stream, seq);
			next_report = now + ENG_REPORT_MS;
		}
		if (now > deadline) {
			eng_set_error(c,
				      "op %llu: no new epoch within %lld ms after a failure in "
				      "epoch %llu (%s)",
				      (unsigned long long)seq, (long long)bound,
				      (unsigned long long)epoch, strerror(-rc));
			return FTCC_ERR_LOST;
		}
		eng_serve(l);
		ctl_member_wait(c->ctl, epoch + 1, 5);
	}
}

/* Whether this member (@self) holds every chunk it needs: all, or a reduce-scatter's own slot. */
static int all_have(const struct eng_att *att, uint32_t self)
{
	if (att->algo == ALGO_RSC) {
		return self < att->nchunks && algo_have_get(att->have, self);
	}
	for (uint32_t i = 0; i < att->nchunks; i++) {
		if (!algo_have_get(att->have, i)) {
			return 0;
		}
	}
	return 1;
}

/* Degraded policy, AVG, and the record. */
static void finish_op(struct ftcc_comm *c, struct ftcc_request *r, const struct eng_att *att,
		      int attempts, int resumed)
{
	struct ftcc_record *rec = &r->rec;
	size_t esz = ftcc_dtype_size(r->dtype);
	/* a reduce-scatter's result is its own slot (the rest of the buffer is not its) */
	void *res = r->kind == ENG_REDUCE_SCATTER ? (char *)r->recvbuf + r->dst_off : r->recvbuf;
	size_t n = r->kind == ENG_REDUCE_SCATTER ? r->dst_len / esz : r->count;
	int rc = 0;

	memset(rec, 0, sizeof(*rec));
	rec->seq = r->seq;
	rec->epoch = att->epoch;
	rec->size = c->size;
	rec->ncontrib = att->ncontrib;
	rec->attempts = (uint32_t)attempts;
	rec->resumed = resumed;
	rec->scale = 1.0;
	memcpy(rec->contrib, att->contrib, sizeof(rec->contrib));
	if (r->op == FTCC_AVG && att->ncontrib > 0) {
		ftcc_reduce_div(res, n, r->dtype, att->ncontrib);
	}
	if (att->ncontrib < c->size) {
		if (c->degraded == FTCC_DEGRADED_RESCALE && r->op == FTCC_SUM &&
		    ftcc_dtype_is_float(r->dtype) && att->ncontrib > 0) {
			rec->scale = (double)c->size / (double)att->ncontrib;
			ftcc_reduce_scale(res, n, r->dtype, rec->scale);
		} else if (c->degraded == FTCC_DEGRADED_FAIL) {
			rc = FTCC_ERR_DEGRADED;
			eng_set_error(c, "op %llu: %u of %u members contributed (policy fail)",
				      (unsigned long long)r->seq, att->ncontrib, c->size);
		}
	}
	r->result = rc;
}

/* Remembers a completed op for the exchanges of epochs newer than @epoch (the one it completed
 * in: its exchanges there are over); with @keep a copy of its result (before the degraded
 * policy scaled it: what the peer computes too), which is dropped two ops of its lane later
 * (the peer that took part in the lane's next op completed this one before it: the gate). Out
 * of memory, no copy: the op stays correct, and only a broken link in the same op would leave
 * the peer without it. */
static void remember(struct eng_lane *l, const struct ftcc_request *r, const struct eng_att *att,
		     uint64_t epoch, int keep)
{
	struct eng_done *d = &l->done[r->seq % ENG_DONE_RING];
	size_t bytes = r->count * ftcc_dtype_size(r->dtype);
	unsigned k = (unsigned)((r->seq / l->c->nlanes) & 1); /* its turn in the lane */

	if (l->copyowner[k]) {
		l->copyowner[k]->copy = NULL; /* an op two back: its buffer is this op's now */
		l->copyowner[k] = NULL;
	}
	d->seq = r->seq;
	d->att = *att;
	d->reported = epoch;
	d->copy = NULL;
	if (keep && !bytes) {
		/* A result of no bytes: nothing to keep, and the member can still serve it (any
		 * pointer does; nothing is read through it). */
		d->copy = d;
		d->count = 0;
		d->dtype = r->dtype;
	} else if (keep && grow(&l->copybuf[k], &l->copycap[k], bytes) == 0) {
		d->copy = l->copybuf[k];
		l->copyowner[k] = d;
		memcpy(d->copy, r->recvbuf, bytes);
		d->count = r->count;
		d->dtype = r->dtype;
	}
}

/* The members called op @r with different shapes (decision @d, whose mismatch fields every
 * member of the epoch computed alike; @att is this member's, marked): the op fails here as on
 * every member, an in-place buffer gets its input back, and the op is remembered so that a
 * later epoch reopening it ends it the same way. */
static void end_mismatch(struct eng_lane *l, struct ftcc_request *r, const struct rs_decision *d,
			 const struct eng_att *att, uint64_t epoch)
{
	struct ftcc_comm *c = l->c;
	size_t bytes = r->count * ftcc_dtype_size(r->dtype);
	char sa[64], sb[64];

	eng_shape_text(d->mm_shape[0], sa, sizeof(sa));
	eng_shape_text(d->mm_shape[1], sb, sizeof(sb));
	eng_set_error(c,
		      "op %llu: members called it with different shapes: member %u with %s, "
		      "member %u with %s; it failed on every member",
		      (unsigned long long)r->seq, d->mm_id[0], sa, d->mm_id[1], sb);
	ftcc_warn("engine: group %s: %s", c->group, c->last_error);
	if (r->kind == ENG_BROADCAST && r->param != c->rank && bytes) {
		memset(r->recvbuf, 0, bytes);
	} else if (r->sendbuf == r->recvbuf && bytes) {
		eng_keep_settle(l, r);
		memcpy(r->recvbuf, l->keep, bytes);
	}
	remember(l, r, att, epoch, 0);
	memset(&r->rec, 0, sizeof(r->rec));
	r->rec.seq = r->seq;
	r->rec.epoch = epoch;
	r->rec.size = c->size;
	r->result = FTCC_ERR_MISMATCH;
}

static void warn_epoch(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq)
{
	struct ftcc_comm *c = l->c;
	char list[256];
	size_t off = 0;

	if (e->epoch <= l->last_warned_epoch) {
		return;
	}
	l->last_warned_epoch = e->epoch;
	list[0] = '\0';
	for (uint32_t i = 0; i < e->nmembers && off + 12 < sizeof(list); i++) {
		off += (size_t)snprintf(list + off, sizeof(list) - off, "%s%u", i ? "," : "",
					e->members[i].id);
	}
	ftcc_warn("engine: group %s: op %llu continues in epoch %llu with members {%s}", c->group,
		  (unsigned long long)seq, (unsigned long long)e->epoch, list);
}

void eng_keep_settle(struct eng_lane *l, const struct ftcc_request *r)
{
	if (l->keep_pending) {
		memcpy(l->keep, r->recvbuf, r->count * ftcc_dtype_size(r->dtype));
		l->keep_pending = 0;
	}
}

void eng_run_op(struct eng_lane *l, struct ftcc_request *r)
{
	struct ftcc_comm *c = l->c;
	size_t bytes = r->count * ftcc_dtype_size(r->dtype);
	const void *input = r->sendbuf;
	struct eng_att att = { .shape = eng_shape(r) };
	struct rs_decision d;
	uint64_t last_epoch = 0;
	int attempts = 0, resumed = 0, rd_early = 0, warn_due = 0, rc;

	l->keep_pending = 0;
	if (r->kind == ENG_BROADCAST && r->param != c->rank) {
		input = NULL; /* zeros: nothing to keep */
	}
	if (r->kind == ENG_REDUCE_SCATTER && bytes) {
		/* The whole reduction lands in the lane's buffer, kept from op to op (a fresh one
		 * per op would be faulted in every time); eng_coll_finish() copies the own slot
		 * out before the lane runs its next op. */
		if (grow(&l->rsbuf, &l->rsbuf_len, bytes)) {
			eng_set_error(c, "op %llu: out of memory for a reduce-scatter (%zu bytes)",
				      (unsigned long long)r->seq, bytes);
			r->result = FTCC_ERR_NOMEM;
			return;
		}
		r->recvbuf = l->rsbuf;
	}
	if (r->sendbuf == r->recvbuf && bytes && input) {
		/* In place: the input is kept until the op is settled, for a redo. */
		if (ftcc_fault("input", r->seq, 0) || grow(&l->keep, &l->keep_len, bytes)) {
			eng_set_error(c,
				      "op %llu: out of memory keeping the input of an in-place op "
				      "(%zu bytes)",
				      (unsigned long long)r->seq, bytes);
			r->result = FTCC_ERR_NOMEM;
			return;
		}
		/* copied when first needed: eng_keep_settle(), or by a fresh ring attempt */
		l->keep_pending = 1;
		input = l->keep;
	} else if (ftcc_fault("input", r->seq, 0)) {
		/* out of place, the "fail" action still stands for a failed allocation */
		eng_set_error(c, "op %llu: out of memory (FTCC_FAULT)", (unsigned long long)r->seq);
		r->result = FTCC_ERR_NOMEM;
		return;
	}
	for (;;) {
		const struct ctl_epoch *e = NULL, *pe;
		uint32_t bad = UINT32_MAX;
		uint64_t ep;
		int window;

		eng_sync_done(l);
		rc = eng_op_epoch(l, r->seq, &e);
		if (rc) {
			r->result = rc;
			return;
		}
		/* A commit may have become visible after the sync above: the completed ops this
		 * epoch reopens are reported before this member's own exchange in it. */
		eng_sync_epoch(l, e);
		if (c->failed) {
			/* it gave up there (and left): nothing it returns now is the group's */
			ctl_epoch_put(e);
			r->result = c->failed;
			return;
		}
		ep = e->epoch;
		if (last_epoch && ep != last_epoch) {
			warn_due = 1; /* once the exchange decided: a mismatch is no continuation */
			ftcc_fault("epoch", r->seq, 0);
		}
		last_epoch = ep;
		window = e->epoch > 1 && r->seq >= e->boundary &&
			 r->seq < e->boundary + ENG_WINDOW(c);
		rc = eng_dp_peers(l, e);
		/* the members of the op: a joiner whose first op is later is not one of them */
		pe = rc ? NULL : eng_op_view(l, e, r->seq);
		if (rc == 0 && (!pe || pe->self_index < 0)) {
			rc = -ENOMEM;
		}
		if (rc == 0 && window) {
			rc = eng_exchange(l, pe, r->seq, &att, 0, &d, &bad);
		} else if (rc == 0) {
			d.kind = RS_RUN;
		}
		if (warn_due && (rc || d.kind != RS_MISMATCH)) {
			warn_epoch(l, e, r->seq);
			warn_due = 0;
		}
		if (rc == 0 && d.kind != RS_RUN) {
			eng_keep_settle(l, r); /* a fill writes the result buffer */
		}
		if (rc == 0) {
			switch (d.kind) {
			case RS_RUN:
				attempts++;
				rc = run_attempt(l, r, pe, input, attempts == 1 && !resumed, &att,
						 &bad);
				break;
			case RS_FINISH:
			case RS_DONE:
				if (!att.valid || att.epoch != d.att_epoch) {
					memset(&att, 0, sizeof(att));
					att.shape = eng_shape(r);
				}
				att.valid = 1;
				att.epoch = d.att_epoch;
				att.algo = (enum algo_id)d.att_algo;
				att.nchunks = d.nchunks;
				att.ncontrib = d.ncontrib;
				memcpy(att.contrib, d.contrib, sizeof(att.contrib));
				if (d.kind == RS_FINISH) {
					resumed = 1;
					ftcc_fault("fill", r->seq, 0);
					rc = eng_fill(l, pe, r->seq, r, &d, att.shape, &bad);
					if (rc == 0) {
						for (uint32_t k = 0; k < att.nchunks; k++) {
							algo_have_set(att.have, k);
						}
					}
				} else if (!all_have(&att, c->rank)) {
					rc = -EPROTO;
					bad = c->rank;
				}
				break;
			case RS_MISMATCH:
				/* Decided: said in every later report on this op. It returns once
				 * every member decided too (the have notices, without a shape: the
				 * members' differ), so a member that leaves after returning leaves
				 * nobody undecided to finish the op some other way. */
				att.mismatch = 1;
				att.mm_id = d.mm_id[att.shape == d.mm_shape[0]];
				att.mm_shape = d.mm_shape[att.shape == d.mm_shape[0]];
				/* a member that returned it waited for every decision: no
				 * notices now (it would send none) */
				rc = d.mm_ended ? 0 : eng_have(l, pe, r->seq, 0, &bad);
				if (rc == 0) {
					ctl_epoch_put(e);
					end_mismatch(l, r, &d, &att, ep);
					return;
				}
				break;
			}
		}
		/* The two members of a recursive doubling op return at once: each keeps a copy
		 * of the result for the other instead (remember()). Not in larger groups: a
		 * member that returned early and then left (killed, frozen, cut off) before
		 * its last frames reached the others would hold a result the survivors then
		 * compute without it (seen with 4 members in live::soak_mixed_faults_of_4); the
		 * have round keeps one result per op among all who returned it. */
		rd_early = pe && pe->nmembers == 2 && att.algo == ALGO_RD;
		if (rc == 0 && d.kind != RS_DONE && d.kind != RS_MISMATCH && pe->nmembers >= 2 &&
		    !rd_early && !(c->no_have && bytes)) {
			ftcc_fault("have", r->seq, 0);
			rc = eng_have(l, pe, r->seq, att.shape, &bad);
		}
		ctl_epoch_put(e);
		if (rc == 0) {
			break;
		}
		if (rc == -EPROTO && bad == c->rank) {
			ftcc_warn("engine: op %llu: the resume reports contradict each other",
				  (unsigned long long)r->seq);
		}
		rc = after_failure(l, r->seq, ep, rc, bad);
		if (rc) {
			r->result = rc;
			return;
		}
	}
	/* before the policy scales the result; a DONE decision leaves nobody lacking it */
	remember(l, r, &att, last_epoch, rd_early && d.kind != RS_DONE);
	finish_op(c, r, &att, attempts ? attempts : 1, resumed);
}
