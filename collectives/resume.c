/* SPDX-License-Identifier: BSD-3-Clause */
/* The resume decision (include/ftcc/resume.h): pure logic over the members' reports on one op,
 * and the reports' wire form.
 */
#include "ftcc/resume.h"
#include "ftcc/algo.h"
#include "ftcc/le.h"

#include <errno.h>
#include <string.h>

static int bit(const uint8_t *map, uint32_t i)
{
	return map[i / 8] >> (i % 8) & 1;
}

/* Whether @a and @b describe the same attempt the same way. */
static int same_attempt(const struct rs_report *a, const struct rs_report *b)
{
	return a->att_algo == b->att_algo && a->nchunks == b->nchunks &&
	       a->ncontrib == b->ncontrib && !memcmp(a->contrib, b->contrib, sizeof(a->contrib));
}

static int report_valid(const struct rs_report *r, uint64_t seq)
{
	if (r->seq != seq || r->shape == 0 ||
	    (r->flags & ~(uint32_t)(RS_F_ATTEMPT | RS_F_COMPLETED | RS_F_SERVE | RS_F_MISMATCH))) {
		return 0;
	}
	if ((r->flags & RS_F_MISMATCH) ?
		    (r->flags & (RS_F_ATTEMPT | RS_F_SERVE)) || r->mm_id >= FTCC_MAX_MEMBERS ||
			    !r->mm_shape || r->mm_shape == r->shape :
		    r->mm_id || r->mm_shape) {
		return 0;
	}
	if ((r->flags & RS_F_COMPLETED) && !(r->flags & (RS_F_ATTEMPT | RS_F_MISMATCH))) {
		return 0;
	}
	if ((r->flags & RS_F_SERVE) && !(r->flags & RS_F_COMPLETED)) {
		return 0;
	}
	if (r->flags & RS_F_ATTEMPT) {
		uint32_t c, k = 0;

		if (r->nchunks == 0 || r->nchunks > RS_CHUNKS_MAX || r->att_epoch == 0 ||
		    (r->att_algo < ALGO_RING || r->att_algo > ALGO_RSC)) {
			return 0;
		}
		for (c = 0; c < FTCC_MAX_MEMBERS; c++) {
			k += (uint32_t)bit(r->contrib, c);
		}
		if (k != r->ncontrib) {
			return 0;
		}
	}
	return 1;
}

/* Index of the first report of the oldest attempt at or after @after (exclusive), or -1. */
static int oldest_after(const struct rs_report *r, uint32_t n, uint64_t after)
{
	int best = -1;
	uint32_t i;

	for (i = 0; i < n; i++) {
		if ((r[i].flags & RS_F_ATTEMPT) && r[i].att_epoch > after &&
		    (best < 0 || r[i].att_epoch < r[best].att_epoch)) {
			best = (int)i;
		}
	}
	return best;
}

/* Whether report @r holds chunk @c of the attempt of @a (a completed one holds all of it). */
static int holds(const struct rs_report *r, const struct rs_report *a, uint32_t c)
{
	if (!(r->flags & RS_F_ATTEMPT) || r->att_epoch != a->att_epoch) {
		return 0;
	}
	return (r->flags & RS_F_COMPLETED) || bit(r->have, c);
}

/* Fills @d for attempt @a if the reports cover it: 1 covered, 0 not, -EPROTO. */
static int try_attempt(const struct rs_report *r, uint32_t n, const struct rs_report *a,
		       struct rs_decision *d)
{
	int completed = 0, fills = 0;
	uint32_t i, c;

	for (i = 0; i < n; i++) {
		if (!(r[i].flags & RS_F_ATTEMPT) || r[i].att_epoch != a->att_epoch) {
			continue;
		}
		if (!same_attempt(&r[i], a)) {
			return -EPROTO;
		}
		completed |= !!(r[i].flags & RS_F_COMPLETED);
	}
	for (c = 0; c < a->nchunks; c++) {
		uint32_t prov = UINT32_MAX, copy = UINT32_MAX, held_done = 0, lacking = 0,
			 owner = 0;

		for (i = 0; i < n; i++) {
			/* A reduce-scatter's slot is needed, and held, by its owner alone; the slot
			 * of a member not reporting (gone) is nobody's. */
			if (a->att_algo == ALGO_RSC && r[i].id != c) {
				continue;
			}
			owner = 1;
			if (!holds(&r[i], a, c)) {
				lacking = 1;
			} else if (!(r[i].flags & RS_F_COMPLETED)) {
				prov = prov == UINT32_MAX ? i : prov;
			} else {
				held_done = 1;
				if ((r[i].flags & RS_F_SERVE) && copy == UINT32_MAX) {
					copy = i;
				}
			}
		}
		if (a->att_algo == ALGO_RSC && !owner) {
			d->provider[c] = UINT32_MAX;
			continue;
		}
		if (prov == UINT32_MAX && !held_done) {
			return 0;
		}
		/* A member that returned serves only from a copy it kept, and only when no member
		 * still in the op holds the chunk. */
		if (prov == UINT32_MAX && lacking) {
			prov = copy;
			if (prov == UINT32_MAX) {
				return -EPROTO;
			}
		}
		d->provider[c] = lacking ? prov : UINT32_MAX;
		fills |= lacking;
	}
	d->kind = completed && !fills ? RS_DONE : RS_FINISH;
	d->att_epoch = a->att_epoch;
	d->att_algo = a->att_algo;
	d->nchunks = a->nchunks;
	d->ncontrib = a->ncontrib;
	memcpy(d->contrib, a->contrib, sizeof(d->contrib));
	return 1;
}

/* A shape mismatch among the reports: 1 with d filled, 0 none, -EPROTO beside a completed
 * report (a member returned an op that others called differently: cannot be). */
static int mismatch(const struct rs_report *r, uint32_t n, struct rs_decision *d)
{
	uint32_t i, flagged = UINT32_MAX, other = UINT32_MAX, completed = 0, ended = 0;

	for (i = 0; i < n; i++) {
		int mm = !!(r[i].flags & RS_F_MISMATCH), done = !!(r[i].flags & RS_F_COMPLETED);

		if (mm && flagged == UINT32_MAX) {
			flagged = i;
		}
		if (r[i].shape != r[0].shape && other == UINT32_MAX) {
			other = i;
		}
		completed |= done && !mm; /* returned a result */
		ended |= done && mm;	  /* returned the mismatch */
	}
	if (flagged == UINT32_MAX && other == UINT32_MAX) {
		return 0;
	}
	if (completed) {
		return -EPROTO;
	}
	d->kind = RS_MISMATCH;
	d->mm_ended = (int)ended;
	if (other != UINT32_MAX) {
		d->mm_id[0] = r[0].id;
		d->mm_shape[0] = r[0].shape;
		d->mm_id[1] = r[other].id;
		d->mm_shape[1] = r[other].shape;
	} else {
		d->mm_id[0] = r[flagged].id;
		d->mm_shape[0] = r[flagged].shape;
		d->mm_id[1] = r[flagged].mm_id;
		d->mm_shape[1] = r[flagged].mm_shape;
	}
	return 1;
}

int resume_decide(const struct rs_report *r, uint32_t n, struct rs_decision *d)
{
	uint64_t after = 0;
	uint32_t i;
	int a, rc;

	if (!r || !d || n == 0) {
		return -EPROTO;
	}
	memset(d, 0, sizeof(*d));
	for (i = 0; i < n; i++) {
		if (!report_valid(&r[i], r[0].seq)) {
			return -EPROTO;
		}
	}
	rc = mismatch(r, n, d);
	if (rc) {
		return rc < 0 ? rc : 0;
	}
	/* A completed attempt is the answer whatever else is reported: check that first, so a
	 * stray older covered attempt can never override it. */
	for (i = 0; i < n; i++) {
		if (r[i].flags & RS_F_COMPLETED) {
			rc = try_attempt(r, n, &r[i], d);
			if (rc < 0) {
				return rc;
			}
			if (rc == 0) {
				return -EPROTO; /* a completed report covers its attempt */
			}
			for (a = 0; a < (int)n; a++) {
				if ((r[a].flags & RS_F_COMPLETED) &&
				    r[a].att_epoch != d->att_epoch) {
					return -EPROTO; /* two attempts returned */
				}
			}
			return 0;
		}
	}
	while ((a = oldest_after(r, n, after)) >= 0) {
		rc = try_attempt(r, n, &r[a], d);
		if (rc != 0) {
			return rc < 0 ? rc : 0;
		}
		after = r[a].att_epoch;
	}
	d->kind = RS_RUN;
	return 0;
}

void resume_encode(const struct rs_report *r, uint8_t *buf)
{
	le_put32(buf, r->id);
	le_put32(buf + 4, r->flags);
	le_put64(buf + 8, r->seq);
	le_put64(buf + 16, r->att_epoch);
	le_put32(buf + 24, r->att_algo);
	le_put32(buf + 28, r->nchunks);
	le_put32(buf + 32, r->ncontrib);
	le_put32(buf + 36, r->mm_id);
	le_put64(buf + 40, r->shape);
	le_put64(buf + 48, r->mm_shape);
	memcpy(buf + 56, r->have, sizeof(r->have));
	memcpy(buf + 56 + sizeof(r->have), r->contrib, sizeof(r->contrib));
}

int resume_decode(const uint8_t *buf, struct rs_report *r)
{
	memset(r, 0, sizeof(*r));
	r->id = le_get32(buf);
	r->flags = le_get32(buf + 4);
	r->seq = le_get64(buf + 8);
	r->att_epoch = le_get64(buf + 16);
	r->att_algo = le_get32(buf + 24);
	r->nchunks = le_get32(buf + 28);
	r->ncontrib = le_get32(buf + 32);
	r->mm_id = le_get32(buf + 36);
	r->shape = le_get64(buf + 40);
	r->mm_shape = le_get64(buf + 48);
	memcpy(r->have, buf + 56, sizeof(r->have));
	memcpy(r->contrib, buf + 56 + sizeof(r->have), sizeof(r->contrib));
	if (r->id >= FTCC_MAX_MEMBERS || !report_valid(r, r->seq)) {
		return -EPROTO;
	}
	return 0;
}
