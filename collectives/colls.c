/* SPDX-License-Identifier: BSD-3-Clause */
/* The calls that start ops (include/ftcc.h): allreduce with and without options, and the other
 * collectives, each made an allreduce the engine runs (engine.h, enum eng_kind) so that they are
 * numbered, recorded, resumed and redone as allreduce is:
 *   broadcast       a uint8 SUM of the bytes, every member but the root giving zeros (x + 0
 *                   is x, bit for bit), run as a chain from the root above FTCC_RD_MAX_BYTES
 *                   (algo_bc.c: the root's data is final wherever it is held); a result
 *                   without the root's input is FTCC_ERR_PEER_LOST;
 *   allgather       a uint8 SUM of size slots, each member giving its own slot and zeros, run
 *                   as the allgather half of a ring (algo_ag.c: every slot is final at its
 *                   owner);
 *   reduce-scatter  the allreduce of all slots into a buffer the lane keeps, of which the
 *                   member's slot is copied out; above FTCC_RD_MAX_BYTES only the ring's
 *                   reduce-scatter half (algo_ring.c, ALGO_RSC: each member's own slot is
 *                   final at it, and the only chunk it needs);
 *   barrier         an allreduce of no elements (the exchange still happens).
 * Each carries its own kind (and a broadcast its root) in the op's shape, so members that call
 * different collectives at the same point get FTCC_ERR_MISMATCH. Bandwidth: the least possible
 * above FTCC_RD_MAX_BYTES.
 */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "ftcc/quant.h"
#include "ftcc/reduce.h"

/* The codec of @o (NONE without options), or -1 for options not made by ftcc_op_opts_init()
 * (a struct_size too small, or a newer header's struct whose fields past ours ask for something
 * this library cannot do: not all zero), or not valid with @dtype and @op. */
static int codec_of(const struct ftcc_op_opts *o, enum ftcc_dtype dtype, enum ftcc_redop op)
{
	if (!o) {
		return FTCC_CODEC_NONE;
	}
	/* (a size beyond any plausible header is garbage: refused before anything is read) */
	if (o->struct_size < offsetof(struct ftcc_op_opts, codec) + sizeof(o->codec) ||
	    o->struct_size > 256) {
		return -1;
	}
	/* a newer header's fields: fine while they ask for nothing (zero) */
	for (size_t i = sizeof(*o); i < o->struct_size; i++) {
		if (((const uint8_t *)o)[i]) {
			return -1;
		}
	}
	if (o->codec == FTCC_CODEC_NONE) {
		return FTCC_CODEC_NONE;
	}
	return ftcc_q_supported((enum ftcc_codec)o->codec, dtype, op) ? (int)o->codec : -1;
}

/* The allreduce of the arguments, as eng_start() takes it; -1 for bad options. */
static int start(struct ftcc_comm *c, const void *sendbuf, void *recvbuf, size_t count,
		 enum ftcc_dtype dtype, enum ftcc_redop op, const struct ftcc_op_opts *opts,
		 int wake, ftcc_request_t **req)
{
	int codec = codec_of(opts, dtype, op);
	struct eng_op d = { .kind = ENG_ALLREDUCE,
			    .param = (uint32_t)dtype | (uint32_t)op << 8,
			    .sendbuf = sendbuf,
			    .recvbuf = recvbuf,
			    .count = count,
			    .dtype = dtype,
			    .op = op,
			    .codec = codec < 0 ? FTCC_CODEC_COUNT : (enum ftcc_codec)codec };

	return eng_start(c, &d, wake, req);
}

FTCC_API int ftcc_iallreduce(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
			     enum ftcc_dtype dtype, enum ftcc_redop op, ftcc_request_t **req)
{
	return start(c, sendbuf, recvbuf, count, dtype, op, NULL, 1, req);
}

FTCC_API int ftcc_iallreduce_opts(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
				  enum ftcc_dtype dtype, enum ftcc_redop op,
				  const struct ftcc_op_opts *opts, ftcc_request_t **req)
{
	return start(c, sendbuf, recvbuf, count, dtype, op, opts, 1, req);
}

FTCC_API int ftcc_allreduce(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
			    enum ftcc_dtype dtype, enum ftcc_redop op, struct ftcc_record *rec)
{
	ftcc_request_t *r;
	int rc = start(c, sendbuf, recvbuf, count, dtype, op, NULL, 0, &r);

	return rc ? rc : ftcc_wait(r, rec);
}

FTCC_API int ftcc_allreduce_opts(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
				 enum ftcc_dtype dtype, enum ftcc_redop op,
				 const struct ftcc_op_opts *opts, struct ftcc_record *rec)
{
	ftcc_request_t *r;
	int rc = start(c, sendbuf, recvbuf, count, dtype, op, opts, 0, &r);

	return rc ? rc : ftcc_wait(r, rec);
}

/* ---- the other collectives ------------------------------------------------------------------ */

static int bcast_start(ftcc_comm_t *c, void *buf, size_t count, enum ftcc_dtype dtype,
		       uint32_t root, int wake, ftcc_request_t **req)
{
	size_t esz = ftcc_dtype_size(dtype);
	struct eng_op d = { .kind = ENG_BROADCAST,
			    .param = root,
			    .sendbuf = buf,
			    .recvbuf = buf,
			    .count = count * esz,
			    .dtype = FTCC_UINT8,
			    .op = FTCC_SUM };

	if (!c || !req || esz == 0 || root >= c->size || count > FTCC_MAX_COUNT / 8 ||
	    (count && !buf)) {
		return FTCC_ERR_INVALID;
	}
	return eng_start(c, &d, wake, req);
}

static int allgather_start(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
			   enum ftcc_dtype dtype, int wake, ftcc_request_t **req)
{
	size_t esz = ftcc_dtype_size(dtype), bytes = count * esz;
	struct eng_op d = { .kind = ENG_ALLGATHER,
			    .param = (uint32_t)dtype,
			    .sendbuf = recvbuf,
			    .recvbuf = recvbuf,
			    .dtype = FTCC_UINT8,
			    .op = FTCC_SUM };
	uint8_t *slot;

	if (!c || !req || esz == 0 || count > FTCC_MAX_COUNT / 8 / c->size ||
	    (count && (!sendbuf || !recvbuf))) {
		return FTCC_ERR_INVALID;
	}
	d.count = bytes * c->size;
	slot = count ? (uint8_t *)recvbuf + (size_t)c->rank * bytes : NULL;
	if (count && (const uint8_t *)sendbuf != slot &&
	    (const uint8_t *)sendbuf < (uint8_t *)recvbuf + d.count &&
	    (uint8_t *)recvbuf < (const uint8_t *)sendbuf + bytes) {
		return FTCC_ERR_INVALID; /* overlapping but not this member's slot */
	}
	if (count) {
		memmove(slot, sendbuf, bytes);
		memset(recvbuf, 0, (size_t)c->rank * bytes);
		memset(slot + bytes, 0, d.count - (size_t)(c->rank + 1) * bytes);
	}
	return eng_start(c, &d, wake, req);
}

static int rs_start(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
		    enum ftcc_dtype dtype, enum ftcc_redop op, int wake, ftcc_request_t **req)
{
	size_t esz = ftcc_dtype_size(dtype);
	struct eng_op d = { .kind = ENG_REDUCE_SCATTER,
			    .param = (uint32_t)dtype | (uint32_t)op << 8,
			    .sendbuf = sendbuf,
			    .dtype = dtype,
			    .op = op,
			    .dst = recvbuf };

	if (!c || !req || esz == 0 || (unsigned)op >= FTCC_REDOP_COUNT ||
	    count > FTCC_MAX_COUNT / c->size || (count && (!sendbuf || !recvbuf))) {
		return FTCC_ERR_INVALID;
	}
	d.count = count * c->size;
	d.dst_off = (size_t)c->rank * count * esz;
	d.dst_len = count * esz;
	/* d.recvbuf NULL: the lane's buffer when the op runs (eng_run_op) */
	return eng_start(c, &d, wake, req);
}

FTCC_API int ftcc_ibroadcast(ftcc_comm_t *c, void *buf, size_t count, enum ftcc_dtype dtype,
			     uint32_t root, ftcc_request_t **req)
{
	return bcast_start(c, buf, count, dtype, root, 1, req);
}

FTCC_API int ftcc_iallgather(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
			     enum ftcc_dtype dtype, ftcc_request_t **req)
{
	return allgather_start(c, sendbuf, recvbuf, count, dtype, 1, req);
}

FTCC_API int ftcc_ireduce_scatter(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
				  enum ftcc_dtype dtype, enum ftcc_redop op, ftcc_request_t **req)
{
	return rs_start(c, sendbuf, recvbuf, count, dtype, op, 1, req);
}

FTCC_API int ftcc_ibarrier(ftcc_comm_t *c, ftcc_request_t **req)
{
	struct eng_op d = { .kind = ENG_BARRIER, .dtype = FTCC_UINT8, .op = FTCC_SUM };

	return eng_start(c, &d, 1, req);
}

void eng_coll_finish(struct eng_lane *l, struct ftcc_request *r)
{
	struct ftcc_comm *c = l->c;
	int ok = r->result == 0 || r->result == FTCC_ERR_DEGRADED;

	if (r->kind == ENG_BROADCAST && ok) {
		if (!ftcc_record_has(&r->rec, r->param)) {
			eng_set_error(c,
				      "op %llu: broadcast from member %u: its data is not in the "
				      "result (it left or died first, or was catching up)",
				      (unsigned long long)r->seq, r->param);
			r->result = FTCC_ERR_PEER_LOST;
			/* the root's buffer holds its data again, the others' zeros */
			if (r->count && r->param == c->rank) {
				eng_keep_settle(l, r);
				memcpy(r->recvbuf, l->keep, r->count);
			} else if (r->count) {
				memset(r->recvbuf, 0, r->count);
			}
		} else {
			r->result = 0; /* the data is whole, whoever else is missing */
		}
	}
	if (r->kind == ENG_REDUCE_SCATTER && ok && r->dst_len) {
		memmove(r->dst, (uint8_t *)r->recvbuf + r->dst_off, r->dst_len);
	}
}

/* ---- the blocking forms --------------------------------------------------------------------- */

FTCC_API int ftcc_broadcast(ftcc_comm_t *c, void *buf, size_t count, enum ftcc_dtype dtype,
			    uint32_t root, struct ftcc_record *rec)
{
	ftcc_request_t *r;
	int rc = bcast_start(c, buf, count, dtype, root, 0, &r);

	return rc ? rc : ftcc_wait(r, rec);
}

FTCC_API int ftcc_allgather(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
			    enum ftcc_dtype dtype, struct ftcc_record *rec)
{
	ftcc_request_t *r;
	int rc = allgather_start(c, sendbuf, recvbuf, count, dtype, 0, &r);

	return rc ? rc : ftcc_wait(r, rec);
}

FTCC_API int ftcc_reduce_scatter(ftcc_comm_t *c, const void *sendbuf, void *recvbuf, size_t count,
				 enum ftcc_dtype dtype, enum ftcc_redop op, struct ftcc_record *rec)
{
	ftcc_request_t *r;
	int rc = rs_start(c, sendbuf, recvbuf, count, dtype, op, 0, &r);

	return rc ? rc : ftcc_wait(r, rec);
}

FTCC_API int ftcc_barrier(ftcc_comm_t *c, struct ftcc_record *rec)
{
	struct eng_op d = { .kind = ENG_BARRIER, .dtype = FTCC_UINT8, .op = FTCC_SUM };
	ftcc_request_t *r;
	int rc = eng_start(c, &d, 0, &r);

	return rc ? rc : ftcc_wait(r, rec);
}
