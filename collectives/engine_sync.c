/* SPDX-License-Identifier: BSD-3-Clause */
/* The engine's exchanges besides the algorithms: resume reports and the decision, the fill of
 * missing chunks, the have notices, the reports of completed ops a newer epoch reopens, and the
 * identity input of a member catching up.
 */
#include "engine.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/fault.h"
#include "ftcc/log.h"
#include "ftcc/reduce.h"

/* Ms between two checks of the epoch while a transfer waits. */
#define ENG_CHECK_MS 10

static struct dp_tag tag_of(uint64_t seq, uint64_t epoch, uint32_t phase, uint32_t step)
{
	struct dp_tag t = { .seq = seq, .epoch = epoch, .phase = phase, .step = step };

	return t;
}

/* Runs @x of op @seq in @epoch until done, an error, or the epoch changes; with @deadline_ms
 * (0: none), -ETIMEDOUT from then. */
static int run_xfers_until(struct eng_lane *l, struct dp_xfer *x, int n, uint64_t seq,
			   uint64_t epoch, int64_t deadline_ms, uint32_t *bad_peer)
{
	struct ftcc_comm *c = l->c;
	struct eng_check k = { .c = c,
			       .seq = seq,
			       .epoch = epoch,
			       .gen = atomic_load(&c->ctl_gen) - 1u,
			       .deadline_ms = deadline_ms };

	if (n == 0) {
		return 0;
	}
	return dp_run(l->dp, x, n, eng_check, &k, ENG_CHECK_MS, bad_peer);
}

static int run_xfers(struct eng_lane *l, struct dp_xfer *x, int n, uint64_t seq, uint64_t epoch,
		     uint32_t *bad_peer)
{
	return run_xfers_until(l, x, n, seq, epoch, 0, bad_peer);
}

static void report_of(const struct eng_att *att, uint32_t id, uint64_t seq, uint32_t flags,
		      struct rs_report *r)
{
	memset(r, 0, sizeof(*r));
	r->id = id;
	r->seq = seq;
	r->shape = att->shape;
	if (att->mismatch) {
		/* what it held of the op does not matter any more; COMPLETED: it returned it */
		r->flags = RS_F_MISMATCH | (flags & RS_F_COMPLETED);
		r->mm_id = att->mm_id;
		r->mm_shape = att->mm_shape;
		return;
	}
	if (att->valid) {
		r->flags = RS_F_ATTEMPT | flags;
		r->att_epoch = att->epoch;
		r->att_algo = (uint32_t)att->algo;
		r->nchunks = att->nchunks;
		r->ncontrib = att->ncontrib;
		memcpy(r->have, att->have, sizeof(r->have));
		memcpy(r->contrib, att->contrib, sizeof(r->contrib));
	}
}

/* The reports of a group of up to ENG_HAVE_ALL_MAX members: each sends its own (@slots[n]) to
 * every other and receives theirs into @slots[i], i its index. 0 or an error. */
static int reports_all(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq, uint8_t *slots,
		       uint32_t *bad_peer)
{
	uint32_t n = e->nmembers, self = (uint32_t)e->self_index, i;
	struct dp_xfer *x = calloc(2 * (size_t)n, sizeof(*x));
	int nx = 0, rc;

	if (!x) {
		return -ENOMEM;
	}
	for (i = 0; i < n; i++) {
		if (i == self) {
			continue;
		}
		x[nx++] = (struct dp_xfer){ .peer = e->members[i].id,
					    .dir = DP_SEND,
					    .tag = tag_of(seq, e->epoch, DP_PH_REPORT, 0),
					    .buf = slots + (size_t)n * RS_WIRE_SIZE,
					    .len = RS_WIRE_SIZE };
		x[nx++] = (struct dp_xfer){ .peer = e->members[i].id,
					    .dir = DP_RECV,
					    .tag = tag_of(seq, e->epoch, DP_PH_REPORT, 0),
					    .buf = slots + (size_t)i * RS_WIRE_SIZE,
					    .len = RS_WIRE_SIZE };
	}
	rc = run_xfers(l, x, nx, seq, e->epoch, bad_peer);
	free(x);
	return rc;
}

/* The reports of a larger group, gathered in ceil(log2 n) rounds (Bruck's allgather), so that a
 * member exchanges with 2 log2(n) peers, the have rounds' own, not with every member. @slots
 * holds them relative to this member: slot j is member self + j's (mod n), slot 0 its own. In
 * round k (d = 2^k) this member sends slots 0 .. c-1 to the member d places before it and
 * receives slots d .. d+c-1 from the one d places after it, c = min(d, n - d): what that member
 * held of itself and the members after it. Every member takes part in every round, members that
 * completed the op too (report_done()).
 *
 * A member waits here on relays, not only on the reports' authors: a member that gave up the
 * rounds (its link to its partner broke) stops passing reports on. A member still in the op gets
 * a new epoch for that (the link's ends report it, and the coordinator does not let a link go
 * while a member is still in the op); it waits as long as the op's other waits do, since an
 * author of a later op may simply not have called it yet. A member that completed the op
 * (@bounded) may have no one to ask for another epoch: when every member is past the op the
 * coordinator lets the link go. Every author of an op it completed has called it, so its rounds
 * end by a bound from the failure timeout: -ETIMEDOUT naming the member it waited on. 0 or an
 * error. */
static int reports_rounds(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq,
			  uint8_t *slots, int bounded, uint32_t *bad_peer)
{
	uint32_t n = e->nmembers, self = (uint32_t)e->self_index, k = 0, d;
	int64_t deadline = bounded ? eng_now_ms() + 4 * l->c->timeout_ms + 2000 : 0;
	int rc = 0;

	for (d = 1; d < n && rc == 0; d <<= 1, k++) {
		size_t cnt = d < n - d ? d : n - d;
		struct dp_xfer x[2] = {
			{ .peer = e->members[(self + n - d) % n].id,
			  .dir = DP_SEND,
			  .tag = tag_of(seq, e->epoch, DP_PH_REPORT, k),
			  .buf = slots,
			  .len = cnt * RS_WIRE_SIZE },
			{ .peer = e->members[(self + d) % n].id,
			  .dir = DP_RECV,
			  .tag = tag_of(seq, e->epoch, DP_PH_REPORT, k),
			  .buf = slots + (size_t)d * RS_WIRE_SIZE,
			  .len = cnt * RS_WIRE_SIZE },
		};

		if (k) {
			ftcc_fault("report", seq, k);
		}
		rc = run_xfers_until(l, x, 2, seq, e->epoch, deadline, bad_peer);
		if (rc == -ETIMEDOUT && x[0].done && x[1].done) {
			rc = 0; /* the bound passed as the round ended */
		} else if (rc == -ETIMEDOUT) {
			*bad_peer = x[1].done ? x[0].peer : x[1].peer;
			ftcc_warn("engine: op %llu in epoch %llu: round %u of the resume reports "
				  "with member %u not done within %lld ms",
				  (unsigned long long)seq, (unsigned long long)e->epoch, k,
				  *bad_peer, (long long)(4 * l->c->timeout_ms + 2000));
		}
	}
	return rc;
}

/* Where report @i (a member index) lies in the exchange's slots. */
static const uint8_t *report_slot(const struct ctl_epoch *e, const uint8_t *slots, uint32_t i)
{
	uint32_t n = e->nmembers, self = (uint32_t)e->self_index;

	if (n <= ENG_HAVE_ALL_MAX) {
		return slots + (size_t)i * RS_WIRE_SIZE;
	}
	return slots + (size_t)((i + n - self) % n) * RS_WIRE_SIZE;
}

int eng_exchange(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq,
		 const struct eng_att *mine, uint32_t flags, struct rs_decision *d,
		 uint32_t *bad_peer)
{
	struct ftcc_comm *c = l->c;
	uint32_t n = e->nmembers, self = (uint32_t)e->self_index, i;
	int rounds = n > ENG_HAVE_ALL_MAX, rc;
	uint8_t *bufs = malloc((size_t)(n + 1) * RS_WIRE_SIZE);

	if (!bufs) {
		return -ENOMEM;
	}
	report_of(mine, c->rank, seq, flags, &l->reports[self]);
	if (flags & RS_F_COMPLETED) {
		for (i = 0; i < mine->nchunks; i++) {
			algo_have_set(l->reports[self].have, i);
		}
	}
	resume_encode(&l->reports[self], bufs + (rounds ? 0 : (size_t)n * RS_WIRE_SIZE));
	ftcc_fault("report", seq, 0);
	rc = rounds ? reports_rounds(l, e, seq, bufs, !!(flags & RS_F_COMPLETED), bad_peer) :
		      reports_all(l, e, seq, bufs, bad_peer);
	for (i = 0; rc == 0 && i < n; i++) {
		if (i == self) {
			continue;
		}
		/* a relay copies reports as they came: a malformed one is its author's */
		if (resume_decode(report_slot(e, bufs, i), &l->reports[i]) ||
		    l->reports[i].id != e->members[i].id || l->reports[i].seq != seq) {
			ftcc_warn("engine: op %llu: malformed resume report from member %u",
				  (unsigned long long)seq, e->members[i].id);
			*bad_peer = e->members[i].id;
			rc = -EPROTO;
		}
	}
	if (rc == 0) {
		rc = resume_decide(l->reports, n, d);
		if (rc) {
			*bad_peer = c->rank;
		} else {
			ftcc_info("engine: op %llu in epoch %llu: %s (attempt of epoch %llu)",
				  (unsigned long long)seq, (unsigned long long)e->epoch,
				  d->kind == RS_RUN	 ? "run" :
				  d->kind == RS_FINISH	 ? "finish" :
				  d->kind == RS_MISMATCH ? "shape mismatch" :
							   "done",
				  (unsigned long long)d->att_epoch);
			ftcc_fault("decide", seq, 0);
		}
	}
	free(bufs);
	return rc;
}

/* Whether report @r holds chunk @ch of attempt @d. */
static int holds(const struct rs_report *r, const struct rs_decision *d, uint32_t ch)
{
	if (!(r->flags & RS_F_ATTEMPT) || r->att_epoch != d->att_epoch) {
		return 0;
	}
	return (r->flags & RS_F_COMPLETED) || algo_have_get(r->have, ch);
}

int eng_fill(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq, struct ftcc_request *r,
	     const struct rs_decision *d, uint64_t shape, uint32_t *bad_peer)
{
	uint32_t n = e->nmembers, self = (uint32_t)e->self_index, ch, i;
	size_t esz = ftcc_dtype_size(r->dtype), cap = 16, nx = 0;
	struct dp_xfer *x = malloc(cap * sizeof(*x));
	int rc;

	if (!x) {
		return -ENOMEM;
	}
	for (ch = 0; ch < d->nchunks; ch++) {
		uint32_t prov = d->provider[ch];
		size_t off, len;

		algo_range((enum algo_id)d->att_algo, d->nchunks, r->count, ch, &off, &len);
		if (len == 0 || prov == UINT32_MAX) {
			continue; /* nobody lacks it (or needs it) */
		}
		for (i = 0; i < n; i++) {
			struct dp_xfer t = { .tag = tag_of(seq, e->epoch, DP_PH_FILL, ch),
					     .buf = (char *)r->recvbuf + off * esz,
					     .len = len * esz,
					     .shape = shape };

			if (holds(&l->reports[i], d, ch) || i == prov) {
				continue;
			}
			if (prov == self) {
				t.peer = e->members[i].id;
				t.dir = DP_SEND;
			} else if (i == self) {
				t.peer = e->members[prov].id;
				t.dir = DP_RECV;
			} else {
				continue;
			}
			if (nx == cap) {
				struct dp_xfer *nw = realloc(x, 2 * cap * sizeof(*x));

				if (!nw) {
					free(x);
					return -ENOMEM;
				}
				x = nw;
				cap *= 2;
			}
			x[nx++] = t;
		}
	}
	rc = run_xfers(l, x, (int)nx, seq, e->epoch, bad_peer);
	free(x);
	return rc;
}

/* The have notices of a group of @n among @e's members, all at once: one round, n - 1 notices
 * each way per member. 0 or an error. */
static int have_all(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq, uint64_t shape,
		    uint32_t *bad_peer)
{
	uint32_t n = e->nmembers, self = (uint32_t)e->self_index, i;
	uint64_t *vals = calloc((size_t)n + 1, sizeof(uint64_t));
	struct dp_xfer *x = calloc(2 * (size_t)n, sizeof(*x));
	int nx = 0, rc;

	if (!vals || !x) {
		free(vals);
		free(x);
		return -ENOMEM;
	}
	vals[n] = e->epoch;
	for (i = 0; i < n; i++) {
		if (i == self) {
			continue;
		}
		x[nx++] = (struct dp_xfer){ .peer = e->members[i].id,
					    .dir = DP_SEND,
					    .tag = tag_of(seq, e->epoch, DP_PH_HAVE, 0),
					    .buf = &vals[n],
					    .len = sizeof(uint64_t),
					    .shape = shape };
		x[nx++] = (struct dp_xfer){ .peer = e->members[i].id,
					    .dir = DP_RECV,
					    .tag = tag_of(seq, e->epoch, DP_PH_HAVE, 0),
					    .buf = &vals[i],
					    .len = sizeof(uint64_t),
					    .shape = shape };
	}
	rc = run_xfers(l, x, nx, seq, e->epoch, bad_peer);
	free(vals);
	free(x);
	return rc;
}

/* The same as a dissemination barrier: in round k this member tells the member 2^k places after
 * it and hears from the one 2^k places before it, each round after the one before. After
 * ceil(log2 n) rounds every member has heard, through the others, from every member, so each
 * holds the whole result: log2(n) notices and peers per member instead of n - 1. Every notice
 * carries its sender's shape and is checked by its receiver, so a member that completes has a
 * chain of equal shapes from every member: one shape among all. */
static int have_rounds(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq, uint64_t shape,
		       uint32_t *bad_peer)
{
	uint32_t n = e->nmembers, self = (uint32_t)e->self_index, k = 0, d;
	uint64_t mine = e->epoch, theirs = 0;
	int rc = 0;

	for (d = 1; d < n && rc == 0; d <<= 1, k++) {
		struct dp_xfer x[2] = {
			{ .peer = e->members[(self + d) % n].id,
			  .dir = DP_SEND,
			  .tag = tag_of(seq, e->epoch, DP_PH_HAVE, k),
			  .buf = &mine,
			  .len = sizeof(mine),
			  .shape = shape },
			{ .peer = e->members[(self + n - d) % n].id,
			  .dir = DP_RECV,
			  .tag = tag_of(seq, e->epoch, DP_PH_HAVE, k),
			  .buf = &theirs,
			  .len = sizeof(theirs),
			  .shape = shape },
		};

		if (k) {
			ftcc_fault("have", seq, k);
		}
		rc = run_xfers(l, x, 2, seq, e->epoch, bad_peer);
	}
	return rc;
}

int eng_have(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq, uint64_t shape,
	     uint32_t *bad_peer)
{
	/* With the shape: an op whose data phase moved nothing (no elements) is checked here,
	 * among all of its members. Up to ENG_HAVE_ALL_MAX members one round is the fastest;
	 * above it the notices, peers and connections of one round grow with the group. */
	if (e->nmembers <= ENG_HAVE_ALL_MAX) {
		return have_all(l, e, seq, shape, bad_peer);
	}
	return have_rounds(l, e, seq, shape, bad_peer);
}

/* Whether completed op @dn takes part in the whole exchange of @e (it receives the reports
 * too): with a copy kept, which it may serve, or in a group whose reports go in rounds. */
static int done_exchanges(const struct ctl_epoch *e, const struct eng_done *dn)
{
	return dn->copy || e->nmembers > ENG_HAVE_ALL_MAX;
}

/* A completed op in the whole exchange (done_exchanges()), as a member still in the op would
 * run it; with a copy, the chunks the decision asks of this member, from the copy. */
static int serve_done(struct eng_lane *l, const struct ctl_epoch *e, struct eng_done *dn,
		      uint32_t *bad)
{
	struct ftcc_request fake = {
		.seq = dn->seq, .recvbuf = dn->copy, .count = dn->count, .dtype = dn->dtype
	};
	struct rs_decision d;
	int rc = eng_exchange(l, e, dn->seq, &dn->att, RS_F_COMPLETED | (dn->copy ? RS_F_SERVE : 0),
			      &d, bad);

	if (rc == -EPROTO && *bad == l->c->rank && !dn->copy) {
		/* The reports contradict each other: the members still in the op see the same
		 * ones and meet the same; this one returned the op and has nothing to serve. */
		ftcc_warn("engine: op %llu: the resume reports contradict each other",
			  (unsigned long long)dn->seq);
		rc = 0;
	}
	if (rc == 0 && d.kind == RS_FINISH && dn->copy) {
		rc = eng_fill(l, e, dn->seq, &fake, &d, dn->att.shape, bad);
	}
	return rc;
}

/* Sends the completed report of done entry @dn to every other member of @e (the whole exchange
 * where done_exchanges() says so). */
static int report_done(struct eng_lane *l, const struct ctl_epoch *e, struct eng_done *dn)
{
	struct ftcc_comm *c = l->c;
	uint32_t n = e->nmembers, self = (uint32_t)e->self_index, i, bad = UINT32_MAX;
	uint8_t buf[RS_WIRE_SIZE];
	struct rs_report rep;
	struct dp_xfer *x;
	int nx = 0, rc;

	if (done_exchanges(e, dn)) {
		rc = serve_done(l, e, dn, &bad);
		goto out;
	}
	x = calloc(n, sizeof(*x));
	if (!x) {
		return -ENOMEM;
	}
	report_of(&dn->att, c->rank, dn->seq, RS_F_COMPLETED, &rep);
	for (i = 0; !dn->att.mismatch && i < dn->att.nchunks; i++) {
		algo_have_set(rep.have, i);
	}
	resume_encode(&rep, buf);
	for (i = 0; i < n; i++) {
		if (i != self) {
			x[nx++] =
				(struct dp_xfer){ .peer = e->members[i].id,
						  .dir = DP_SEND,
						  .tag = tag_of(dn->seq, e->epoch, DP_PH_REPORT, 0),
						  .buf = buf,
						  .len = RS_WIRE_SIZE };
		}
	}
	rc = run_xfers(l, x, nx, dn->seq, e->epoch, &bad);
	free(x);
out:
	if (rc == -EPIPE || rc == -EPROTO || rc == -EHOSTUNREACH || rc == -ENOMSG ||
	    rc == -ETIMEDOUT) {
		/* The member waiting for this report needs another epoch: ask for it. This
		 * member reports again in that epoch. (-ENOMSG: that peer is past the op; the
		 * coordinator lets it go when every member is.) */
		ctl_member_suspect_s(c->ctl, bad, rc == -EHOSTUNREACH ? CTL_EV_CUT : CTL_EV_LINK,
				     c->stream, dn->seq);
	}
	return rc;
}

void eng_sync_epoch(struct eng_lane *l, const struct ctl_epoch *e)
{
	struct ftcc_comm *c = l->c;
	if (!e || e->epoch <= 1 || e->self_index < 0) {
		return;
	}
	for (uint64_t s = e->boundary; s < e->boundary + ENG_WINDOW(l->c) && s < l->exec_seq; s++) {
		struct eng_done *dn = &l->done[s % ENG_DONE_RING];
		int rc;

		if (dn->seq != s || dn->reported >= e->epoch) {
			continue;
		}
		int prc = eng_dp_peers(l, e), whole = 0;
		const struct ctl_epoch *pe = prc ? NULL : eng_op_view(l, e, s);

		if (pe && pe->self_index < 0) {
			break;
		}
		if (pe) {
			dn->reported = e->epoch;
			whole = done_exchanges(pe, dn);
			prc = report_done(l, pe, dn);
		} else if (!prc) {
			prc = -ENOMEM;
		}
		if (prc == -ENOMEM || prc == -EINVAL || prc == -EIO) {
			/* the others would wait for this report: they must not */
			char why[128];

			snprintf(why, sizeof(why), "cannot report op %llu in epoch %llu: %s",
				 (unsigned long long)s, (unsigned long long)e->epoch,
				 strerror(-prc));
			dn->reported = 0;
			eng_give_up(c, prc == -ENOMEM ? FTCC_ERR_NOMEM : FTCC_ERR_SYSTEM, why);
			break;
		}
		rc = prc;
		if (rc) {
			/* A newer epoch came meanwhile, or a link failed: report again in the next
			 * epoch, which report_done asked for after a link failure. A report that
			 * is only sent goes again in this one too, at the next op (a copy of it
			 * that arrives twice is stale, and dropped), in case the request for an
			 * epoch was lost. A whole exchange (serving a kept copy) does not: the
			 * frames that came in before the failure were taken, and a second
			 * exchange in the same epoch would wait for them behind the peers' later
			 * frames and accuse a working link (-ENOMSG). Nor after -ENOMSG, which
			 * would only fail again on the peer's later frame. */
			int asked = rc == -EPIPE || rc == -EPROTO || rc == -EHOSTUNREACH ||
				    rc == -ETIMEDOUT;

			dn->reported = rc == -ENOMSG || (asked && whole) ? e->epoch : 0;
			break;
		}
	}
}

void eng_sync_done(struct eng_lane *l)
{
	struct ftcc_comm *c = l->c;
	unsigned gen = atomic_load(&c->ctl_gen);
	struct ctl_view v;

	if (gen == l->sync_gen) {
		return;
	}
	l->sync_gen = gen;
	ctl_member_view_s(c->ctl, c->stream, &v);
	eng_sync_epoch(l, v.e);
	ctl_epoch_put(v.e);
}

const struct ctl_epoch *eng_op_view(struct eng_lane *l, const struct ctl_epoch *e, uint64_t seq)
{
	uint32_t n = 0;
	size_t need;

	for (uint32_t i = 0; i < e->nmembers; i++) {
		n += e->members[i].start <= seq;
	}
	if (n == e->nmembers) {
		return e;
	}
	need = sizeof(*e) + (size_t)n * sizeof(e->members[0]);
	if (need > l->opv_cap) {
		struct ctl_epoch *v = realloc(l->opv, need);

		if (!v) {
			return NULL;
		}
		l->opv = v;
		l->opv_cap = need;
	}
	l->opv->epoch = e->epoch;
	l->opv->stream = e->stream;
	l->opv->boundary = e->boundary;
	l->opv->coord = e->coord;
	l->opv->self_index = -1;
	l->opv->nmembers = 0;
	for (uint32_t i = 0; i < e->nmembers; i++) {
		if (e->members[i].start > seq) {
			continue;
		}
		if ((int)i == e->self_index) {
			l->opv->self_index = (int)l->opv->nmembers;
		}
		l->opv->members[l->opv->nmembers++] = e->members[i];
	}
	return l->opv;
}

void eng_give_up(struct ftcc_comm *c, int err, const char *why)
{
	int first;

	pthread_mutex_lock(&c->mu);
	first = !c->failed;
	if (first) {
		c->failed = err;
	}
	pthread_mutex_unlock(&c->mu);
	if (!first || atomic_load(&c->aborted)) {
		return;
	}
	ftcc_warn("engine: group %s: member %u gives up and leaves the group: %s", c->group,
		  c->rank, why);
	ctl_member_leave(c->ctl, why);
}

/* Identity elements, little-endian bytes, per type: [0] SUM/AVG is all zero. */
static void identity_bytes(enum ftcc_dtype t, enum ftcc_redop op, uint8_t out[8])
{
	static const uint64_t one[FTCC_DTYPE_COUNT] = {
		1, 1, 1, 1, 1, 1, 0x3c00, 0x3f800000, 0x3ff0000000000000ull, 0x3f80, 0x38, 0x3c
	};
	static const uint64_t lowest[FTCC_DTYPE_COUNT] = { 0x80,
							   0,
							   0x80000000,
							   0,
							   0x8000000000000000ull,
							   0,
							   0xfc00,
							   0xff800000,
							   0xfff0000000000000ull,
							   0xff80,
							   0xfe,
							   0xfc };
	static const uint64_t highest[FTCC_DTYPE_COUNT] = { 0x7f,
							    0xff,
							    0x7fffffff,
							    0xffffffff,
							    0x7fffffffffffffffull,
							    UINT64_MAX,
							    0x7c00,
							    0x7f800000,
							    0x7ff0000000000000ull,
							    0x7f80,
							    0x7e,
							    0x7c };
	uint64_t v = 0;

	switch (op) {
	case FTCC_PROD:
		v = one[t];
		break;
	case FTCC_MAX:
		v = lowest[t];
		break;
	case FTCC_MIN:
		v = highest[t];
		break;
	default:
		v = 0;
		break;
	}
	for (int i = 0; i < 8; i++) {
		out[i] = (uint8_t)(v >> (8 * i));
	}
}

void eng_identity(void *buf, size_t count, enum ftcc_dtype dtype, enum ftcc_redop op)
{
	size_t esz = ftcc_dtype_size(dtype);
	uint8_t id[8];

	identity_bytes(dtype, op, id);
	for (size_t i = 0; i < count; i++) {
		memcpy((uint8_t *)buf + i * esz, id, esz);
	}
}
