/* SPDX-License-Identifier: BSD-3-Clause */
/* The allreduce test harness, second half: the members' inputs and the exact results they must
 * get, and what the parent reads back: stalls, gaps, per-op agreement checks, descriptions and
 * logs. The first half (ft_group.c) runs the member processes.
 */
#define _GNU_SOURCE
#include "ft_group.h"

#include <stdarg.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "abi_net.h"
#include "chaos_proc.h"
#include "ftcc/algo.h"
#include "ftcc/quant.h"
#include "ftcc/reduce.h"
#include "ftcc/text.h"

const struct ft_spec *ft_spec_of(const struct ft_group *g, uint64_t seq)
{
	return &g->script[seq % (uint64_t)g->o.nspec];
}

const struct ft_spec *ft_spec_for(const struct ft_group *g, int member, uint64_t seq)
{
	const struct ft_spec *own = g->o.own_script[member];

	return own ? &own[seq % (uint64_t)g->o.nspec] : ft_spec_of(g, seq);
}

enum ftcc_degraded ft_policy(const struct ft_group *g)
{
	const char *env = getenv("FTCC_DEGRADED");

	if (g->o.degraded != FTCC_DEGRADED_DEFAULT)
		return g->o.degraded;
	if (env && strcmp(env, "sum") == 0)
		return FTCC_DEGRADED_SUM;
	if (env && strcmp(env, "fail") == 0)
		return FTCC_DEGRADED_FAIL;
	return FTCC_DEGRADED_RESCALE;
}

/* ---- inputs and expected results ------------------------------------------------------------- */

/* The value of element @e of member @m's input of op @seq: small integers, so that every reduction
 * over up to FT_GROUP_MAX_N members is exact in the type (partial sums stay below 2^(mantissa bits
 * + 1); products are powers of two). */
static int ft_value(const struct ft_spec *spec, uint32_t m, uint64_t seq, size_t e)
{
	int h = (int)((m + 1) * (seq % 7 + 1) + e % 5);

	if (spec->op == FTCC_PROD) {
		return 1 + ((m + seq + e) % 3 == 0);
	}
	switch (spec->dtype) {
	case FTCC_INT8:
	case FTCC_UINT8:
	case FTCC_FP8_E4M3:
	case FTCC_FP8_E5M2:
		return (int)((m + seq + e) % 2);
	case FTCC_BFLOAT16:
		return h % 16;
	case FTCC_UINT32:
	case FTCC_UINT64:
		return h;
	default:
		return h - 12;
	}
}

/* The bits of the small integer @v in a binary float format with @ebits exponent bits, @mbits
 * mantissa bits and exponent bias @bias (exact for the values ft_value() makes). */
static uint32_t ft_small_float(int v, int ebits, int mbits, int bias)
{
	uint32_t sign = v < 0, a = (uint32_t)(v < 0 ? -v : v), man;
	int e;

	if (a == 0) {
		return sign << (ebits + mbits);
	}
	e = 31 - __builtin_clz(a);
	man = a - (1u << e);
	man = e <= mbits ? man << (mbits - e) : man >> (e - mbits);
	return sign << (ebits + mbits) | (uint32_t)(e + bias) << mbits | man;
}

/* Stores @v as element @i of @buf in @dtype. */
static void ft_store(void *buf, size_t i, enum ftcc_dtype dtype, int v)
{
	switch (dtype) {
	case FTCC_INT8:
		((int8_t *)buf)[i] = (int8_t)v;
		break;
	case FTCC_UINT8:
		((uint8_t *)buf)[i] = (uint8_t)v;
		break;
	case FTCC_INT32:
		((int32_t *)buf)[i] = v;
		break;
	case FTCC_UINT32:
		((uint32_t *)buf)[i] = (uint32_t)v;
		break;
	case FTCC_INT64:
		((int64_t *)buf)[i] = v;
		break;
	case FTCC_UINT64:
		((uint64_t *)buf)[i] = (uint64_t)v;
		break;
	case FTCC_FLOAT16:
		((uint16_t *)buf)[i] = (uint16_t)ft_small_float(v, 5, 10, 15);
		break;
	case FTCC_FLOAT32:
		((float *)buf)[i] = (float)v;
		break;
	case FTCC_FLOAT64:
		((double *)buf)[i] = v;
		break;
	case FTCC_BFLOAT16:
		((uint16_t *)buf)[i] = (uint16_t)ft_small_float(v, 8, 7, 127);
		break;
	case FTCC_FP8_E4M3:
		((uint8_t *)buf)[i] = (uint8_t)ft_small_float(v, 4, 3, 7);
		break;
	case FTCC_FP8_E5M2:
		((uint8_t *)buf)[i] = (uint8_t)ft_small_float(v, 5, 2, 15);
		break;
	default:
		break;
	}
}

void ft_input(void *buf, const struct ft_spec *spec, uint32_t member, uint64_t seq)
{
	for (size_t e = 0; e < spec->count; e++)
		ft_store(buf, e, spec->dtype, ft_value(spec, member, seq, e));
}

uint64_t ft_fnv(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++) {
		h ^= p[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* Whether the rescale policy scales this op's result. */
static int ft_rescaled(const struct ft_spec *spec, uint32_t ncontrib, uint32_t size,
		       enum ftcc_degraded policy)
{
	return policy == FTCC_DEGRADED_RESCALE && spec->op == FTCC_SUM &&
	       ftcc_dtype_is_float(spec->dtype) && ncontrib > 0 && ncontrib < size;
}

/* The result of a quantized op over the members of @mask into @acc, as collectives/algo_q.c
 * makes it among exactly those members: each member's chunk c encoded, the decodings summed in
 * float32 in member order, the sum encoded once more and decoded. @tmp holds one input. */
static void ft_expect_q(const struct ft_spec *spec, uint64_t seq, uint32_t mask, void *acc,
			void *tmp)
{
	size_t esz = ftcc_dtype_size(spec->dtype), off, len;
	uint32_t n = (uint32_t)__builtin_popcount(mask);
	float *sum = calloc(spec->count + 1, sizeof(float));
	uint8_t *enc = malloc(ftcc_q_bytes(spec->codec, spec->count) + 64);

	if (!sum || !enc)
		abort();
	for (uint32_t m = 0; m < 32; m++) {
		if (!(mask >> m & 1))
			continue;
		ft_input(tmp, spec, m, seq);
		for (uint32_t c = 0; c < n; c++) {
			algo_range(ALGO_Q, n, spec->count, c, &off, &len);
			ftcc_q_encode(spec->codec, (uint8_t *)tmp + off * esz, spec->dtype, len,
				      enc);
			ftcc_q_decode_add(spec->codec, enc, len, sum + off);
		}
	}
	for (uint32_t c = 0; c < n; c++) {
		algo_range(ALGO_Q, n, spec->count, c, &off, &len);
		ftcc_q_encode(spec->codec, sum + off, FTCC_FLOAT32, len, enc);
		ftcc_q_decode(spec->codec, enc, len, (uint8_t *)acc + off * esz, spec->dtype);
	}
	free(sum);
	free(enc);
}

uint64_t ft_expect(const struct ft_spec *spec, uint64_t seq, uint32_t mask, uint32_t size,
		   enum ftcc_degraded policy, void *acc, void *tmp, double *scale)
{
	size_t bytes = spec->count * ftcc_dtype_size(spec->dtype);
	uint32_t n = 0;

	if (scale)
		*scale = 1.0;
	for (uint32_t m = 0; m < 32; m++) {
		if (!(mask >> m & 1))
			continue;
		if (!spec->codec)
			ft_input(n ? tmp : acc, spec, m, seq);
		if (n && !spec->codec)
			ftcc_reduce(acc, tmp, spec->count, spec->dtype, spec->op);
		n++;
	}
	if (spec->codec && n)
		ft_expect_q(spec, seq, mask, acc, tmp);
	if (n == 0)
		memset(acc, 0, bytes);
	if (spec->op == FTCC_AVG && n)
		ftcc_reduce_div(acc, spec->count, spec->dtype, n);
	if (ft_rescaled(spec, n, size, policy)) {
		double f = (double)size / (double)n;

		ftcc_reduce_scale(acc, spec->count, spec->dtype, f);
		if (scale)
			*scale = f;
	}
	return ft_fnv(acc, bytes);
}

static int64_t ft_run_top(const struct ft_run *r)
{
	int64_t top = atomic_load(&r->last_seq) + FT_GROUP_MAX_DEPTH;

	return top < FT_GROUP_MAX_SEQ ? top : FT_GROUP_MAX_SEQ - 1;
}

double ft_group_stall(const struct ft_group *g, uint32_t who, int64_t t_ns, double *min_ms,
		      uint64_t *seq)
{
	double hi = -1, lo = -1;
	int missing = 0;

	for (int i = 0; i < g->n; i++) {
		const struct ft_run *r = ft_group_cur(g, i);
		int64_t best = 0, best_seq = -1;

		if (!(who >> i & 1))
			continue;
		for (int64_t s = 0; r && s <= ft_run_top(r); s++) {
			const struct ft_op *op = &r->ops[s];

			if (atomic_load_explicit(&op->state, memory_order_acquire) != FT_OP_DONE ||
			    op->t_done < t_ns) {
				continue;
			}
			if (!best || op->t_done < best) {
				best = op->t_done;
				best_seq = s;
			}
		}
		if (!best) {
			missing = 1;
			continue;
		}
		if (chaos_ms(t_ns, best) > hi) {
			hi = chaos_ms(t_ns, best);
			if (seq)
				*seq = (uint64_t)best_seq;
		}
		if (lo < 0 || chaos_ms(t_ns, best) < lo)
			lo = chaos_ms(t_ns, best);
	}
	if (min_ms)
		*min_ms = lo;
	return missing ? -1 : hi;
}

double ft_group_max_gap(const struct ft_group *g, int i, int64_t t_from_ns, int64_t t_to_ns)
{
	const struct ft_run *r = ft_group_cur(g, i);
	int64_t prev = t_from_ns;
	double gap = 0;

	for (int64_t s = 0; r && s <= ft_run_top(r); s++) {
		const struct ft_op *op = &r->ops[s];

		if (atomic_load_explicit(&op->state, memory_order_acquire) != FT_OP_DONE ||
		    op->t_done < t_from_ns || op->t_done > t_to_ns) {
			continue;
		}
		if (chaos_ms(prev, op->t_done) > gap)
			gap = chaos_ms(prev, op->t_done);
		prev = op->t_done;
	}
	return gap;
}

static int ft_is_result(int rc)
{
	return rc == 0 || rc == FTCC_ERR_DEGRADED;
}

int ft_group_seq(const struct ft_group *g, uint64_t seq, struct ft_seq_info *info)
{
	memset(info, 0, sizeof(*info));
	if (!g->sh || seq >= FT_GROUP_MAX_SEQ)
		return 0;
	for (int k = 0; k < g->nruns; k++) {
		const struct ft_run *r = &g->sh->run[k];
		const struct ft_op *op = &r->ops[seq];

		if (atomic_load_explicit(&op->state, memory_order_acquire) != FT_OP_DONE)
			continue;
		if (!ft_is_result(op->rc)) {
			info->nerr++;
			continue;
		}
		if (info->ndone++ == 0) {
			info->rc = op->rc;
			info->mask = op->mask;
			info->ncontrib = op->ncontrib;
			info->epoch = op->epoch;
			info->t_first = op->t_done;
			info->t_last = op->t_done;
		}
		info->done_by |= 1u << r->member;
		info->resumed |= op->resumed;
		info->attempts_max =
			op->attempts > info->attempts_max ? op->attempts : info->attempts_max;
		info->t_first = op->t_done < info->t_first ? op->t_done : info->t_first;
		info->t_last = op->t_done > info->t_last ? op->t_done : info->t_last;
	}
	return info->ndone;
}

int64_t ft_group_max_seq(const struct ft_group *g)
{
	int64_t top = -1;

	for (int k = 0; g->sh && k < g->nruns; k++) {
		int64_t s = atomic_load(&g->sh->run[k].last_seq);

		top = s > top ? s : top;
	}
	return top;
}

/* Compares @op (of process @k) with the first completer @ref (of process @k0) of op @seq. 0, or -1
 * with @why filled. */
static int ft_check_pair(const struct ft_op *ref, int k0, const struct ft_op *op, int k,
			 uint64_t seq, int own_slot, char *why, size_t len)
{
	const char *what = NULL;

	if (op->sum != ref->sum && !own_slot)
		what = "result checksum";
	else if (op->mask != ref->mask)
		what = "contributor set";
	else if (op->ncontrib != ref->ncontrib)
		what = "ncontrib";
	else if (op->epoch != ref->epoch)
		what = "epoch";
	else if (op->scale != ref->scale)
		what = "scale";
	else if (op->rc != ref->rc)
		what = "result code";
	if (!what)
		return 0;
	snprintf(why, len,
		 "op %llu: processes %d and %d disagree on the %s: (sum %016llx set %#x n %u epoch "
		 "%llu resumed %d scale %g rc %d) vs (sum %016llx set %#x n %u epoch %llu resumed "
		 "%d scale %g rc %d)",
		 (unsigned long long)seq, k0, k, what, (unsigned long long)ref->sum, ref->mask,
		 ref->ncontrib, (unsigned long long)ref->epoch, ref->resumed, ref->scale, ref->rc,
		 (unsigned long long)op->sum, op->mask, op->ncontrib, (unsigned long long)op->epoch,
		 op->resumed, op->scale, op->rc);
	return -1;
}

/* Checks op @seq's reference record @ref against the exact result. 0 or -1 with @why. */
static int ft_check_expect(const struct ft_group *g, const struct ft_op *ref, int k0, uint64_t seq,
			   void *acc, void *tmp, char *why, size_t len)
{
	const struct ft_spec *spec = ft_spec_of(g, seq);
	enum ftcc_degraded policy = ft_policy(g);
	/* a broadcast with its root is whole, whoever else is missing */
	int want_rc = policy == FTCC_DEGRADED_FAIL && ref->ncontrib < (uint32_t)g->n &&
				      spec->kind != FT_BROADCAST ?
			      FTCC_ERR_DEGRADED :
			      0;
	double scale;
	uint64_t sum = ft_expect_member(spec, seq, ref->mask, (uint32_t)g->n, policy, acc, tmp,
					&scale, (uint32_t)g->sh->run[k0].member);

	if ((uint32_t)__builtin_popcount(ref->mask) != ref->ncontrib) {
		snprintf(why, len, "op %llu: ncontrib %u but %d bits in the set %#x",
			 (unsigned long long)seq, ref->ncontrib, __builtin_popcount(ref->mask),
			 ref->mask);
		return -1;
	}
	if (ref->size != (uint32_t)g->n) {
		snprintf(why, len, "op %llu: record size %u, group of %d", (unsigned long long)seq,
			 ref->size, g->n);
		return -1;
	}
	if (spec->kind == FT_BROADCAST && !(ref->mask >> spec->root & 1)) {
		snprintf(why, len,
			 "op %llu: a broadcast from member %u completed (rc %d) without it in its "
			 "set %#x (process %d): it must end FTCC_ERR_PEER_LOST",
			 (unsigned long long)seq, spec->root, ref->rc, ref->mask, k0);
		return -1;
	}
	if (sum != ref->sum || scale != ref->scale || want_rc != ref->rc) {
		snprintf(why, len,
			 "op %llu (%zu x %s %s%s) over %#x (process %d): got sum %016llx scale "
			 "%.17g rc %d, expected sum %016llx scale %.17g rc %d",
			 (unsigned long long)seq, spec->count, ftcc_dtype_name(spec->dtype),
			 ftcc_redop_name(spec->op), spec->inplace ? " in place" : "", ref->mask, k0,
			 (unsigned long long)ref->sum, ref->scale, ref->rc, (unsigned long long)sum,
			 scale, want_rc);
		return -1;
	}
	return 0;
}

size_t ft_in_bytes(const struct ft_spec *spec, uint32_t n)
{
	size_t b = spec->count * ftcc_dtype_size(spec->dtype);

	return spec->kind == FT_BARRIER ? 0 : spec->kind == FT_REDUCE_SCATTER ? b * n : b;
}

size_t ft_out_bytes(const struct ft_spec *spec, uint32_t n)
{
	size_t b = spec->count * ftcc_dtype_size(spec->dtype);

	return spec->kind == FT_BARRIER ? 0 : spec->kind == FT_ALLGATHER ? b * n : b;
}

size_t ft_script_max_bytes(const struct ft_spec *script, int nspec)
{
	size_t max_bytes = 64;

	for (int k = 0; k < nspec; k++) {
		size_t b = script[k].count * ftcc_dtype_size(script[k].dtype);

		if (script[k].kind == FT_ALLGATHER || script[k].kind == FT_REDUCE_SCATTER)
			b *= FT_GROUP_MAX_N;
		max_bytes = b > max_bytes ? b : max_bytes;
	}
	return max_bytes;
}

void ft_input_n(void *buf, const struct ft_spec *spec, uint32_t member, uint64_t seq, uint32_t n)
{
	struct ft_spec whole = *spec;

	if (spec->kind == FT_BARRIER)
		return;
	if (spec->kind == FT_REDUCE_SCATTER)
		whole.count *= n;
	ft_input(buf, &whole, member, seq);
}

uint64_t ft_expect_member(const struct ft_spec *spec, uint64_t seq, uint32_t mask, uint32_t size,
			  enum ftcc_degraded policy, void *acc, void *tmp, double *scale,
			  uint32_t member)
{
	size_t bytes = spec->count * ftcc_dtype_size(spec->dtype);
	struct ft_spec whole = *spec;

	if (scale)
		*scale = 1.0;
	switch (spec->kind) {
	case FT_BARRIER:
		return ft_fnv(acc, 0);
	case FT_BROADCAST:
		if (mask >> spec->root & 1)
			ft_input(acc, spec, spec->root, seq);
		else
			memset(acc, 0, bytes);
		return ft_fnv(acc, bytes);
	case FT_ALLGATHER:
		for (uint32_t m = 0; m < size; m++) {
			if (mask >> m & 1)
				ft_input((uint8_t *)acc + m * bytes, spec, m, seq);
			else
				memset((uint8_t *)acc + m * bytes, 0, bytes);
		}
		return ft_fnv(acc, bytes * size);
	case FT_REDUCE_SCATTER:
		whole.kind = FT_ALLREDUCE;
		whole.count *= size;
		ft_expect(&whole, seq, mask, size, policy, acc, tmp, scale);
		return ft_fnv((uint8_t *)acc + member * bytes, bytes);
	default:
		return ft_expect(spec, seq, mask, size, policy, acc, tmp, scale);
	}
}

/* Every process that completed an op moved its frames over the transport the test asked for
 * (test_log_transport()). 0, or -1 with @why. */
static int ft_check_transport(const struct ft_group *g, char *why, size_t len)
{
	static char log[1 << 20];

	for (int k = 0; k < g->nruns; k++) {
		const struct ft_run *r = &g->sh->run[k];
		const char *bad;

		if (atomic_load(&r->ndone) == 0 || g->errfd[k] < 0)
			continue;
		chaos_capture_read(g->errfd[k], log, sizeof(log));
		bad = test_log_transport(log, g->o.transport[r->member]);
		if (bad) {
			snprintf(why, len, "member %d (run %d) moved its frames over %s", r->member,
				 k, bad);
			return -1;
		}
	}
	return 0;
}

int ft_group_check(const struct ft_group *g, char *why, size_t len)
{
	size_t max_bytes = ft_script_max_bytes(g->script, g->o.nspec);
	void *acc, *tmp;
	int checked = 0, rc = 0;
	int64_t top = ft_group_max_seq(g);

	if (len)
		why[0] = '\0';
	if (!g->sh)
		return 0;
	if (ft_check_transport(g, why, len))
		return -1;
	acc = malloc(max_bytes);
	tmp = malloc(max_bytes);
	if (!acc || !tmp) {
		snprintf(why, len, "out of memory");
		rc = -1;
		goto out_free;
	}
	for (int64_t s = 0; s <= top + FT_GROUP_MAX_DEPTH && s < FT_GROUP_MAX_SEQ && !rc; s++) {
		const struct ft_op *ref = NULL;
		int k0 = -1, own = ft_spec_of(g, (uint64_t)s)->kind == FT_REDUCE_SCATTER, lost = -1;

		for (int k = 0; k < g->nruns && !rc; k++) {
			const struct ft_run *r = &g->sh->run[k];
			const struct ft_op *op = &r->ops[s];

			if (atomic_load_explicit(&op->state, memory_order_acquire) != FT_OP_DONE)
				continue;
			lost = op->rc == FTCC_ERR_PEER_LOST && lost < 0 ? k : lost;
			if (!ft_is_result(op->rc))
				continue;
			if (op->bad_seq) {
				snprintf(why, len, "op %lld: process %d got a record of another op",
					 (long long)s, k);
				rc = -1;
			} else if (!(op->mask >> r->member & 1) && !r->catchup) {
				snprintf(why, len,
					 "op %lld: process %d (member %d) is not in the "
					 "contributor set %#x of its result",
					 (long long)s, k, r->member, op->mask);
				rc = -1;
			} else if (!ref) {
				ref = op;
				k0 = k;
			} else {
				rc = ft_check_pair(ref, k0, op, k, (uint64_t)s, own, why, len);
			}
			if (!rc && own && ref != op) /* each member's own slot */
				rc = ft_check_expect(g, op, k, (uint64_t)s, acc, tmp, why, len);
		}
		if (ref && lost >= 0 && !rc) {
			snprintf(why, len,
				 "op %lld: process %d got a result, process %d FTCC_ERR_PEER_LOST",
				 (long long)s, k0, lost);
			rc = -1;
		}
		if (ref && !rc) {
			rc = ft_check_expect(g, ref, k0, (uint64_t)s, acc, tmp, why, len);
			checked++;
		}
	}
out_free:
	free(acc);
	free(tmp);
	return rc ? -1 : checked;
}

/* Appends to @buf at *@at (bounded by @len). */
/* One member list per epoch number, over every process's records. 0 or -1 with @why. */
static int ft_check_epochs(const struct ft_group *g, char *why, size_t len)
{
	for (int k = 0; k < g->nruns; k++) {
		const struct ft_run *a = &g->sh->run[k];
		uint32_t na = atomic_load_explicit(&a->nepochs, memory_order_acquire);

		for (uint32_t i = 0; i < na; i++) {
			for (int j = k; j < g->nruns; j++) {
				const struct ft_run *b = &g->sh->run[j];
				uint32_t nb =
					atomic_load_explicit(&b->nepochs, memory_order_acquire);

				for (uint32_t e = 0; e < nb; e++) {
					if (b->epochs[e].epoch != a->epochs[i].epoch ||
					    b->epochs[e].mask == a->epochs[i].mask)
						continue;
					snprintf(
						why, len,
						"epoch %llu has two member lists: %#x (process %d, "
						"member %d) and %#x (process %d, member %d)",
						(unsigned long long)a->epochs[i].epoch,
						a->epochs[i].mask, k, a->member, b->epochs[e].mask,
						j, b->member);
					return -1;
				}
			}
		}
	}
	return 0;
}

int ft_group_invariants(const struct ft_group *g, uint32_t steady, char *why, size_t len)
{
	int64_t top = ft_group_max_seq(g);
	int checked;

	if (len)
		why[0] = '\0';
	if (!g->sh)
		return 0;
	if (ft_check_epochs(g, why, len))
		return -1;
	checked = ft_group_check(g, why, len);
	if (checked < 0)
		return -1;
	for (int64_t s = 0; s <= top && s < FT_GROUP_MAX_SEQ; s++) {
		struct ft_seq_info in;

		if (ft_group_seq(g, (uint64_t)s, &in) == 0)
			continue;
		if ((in.mask & steady) != steady) {
			snprintf(why, len,
				 "op %lld: members %#x were never faulted but are not all in its "
				 "contributor set %#x",
				 (long long)s, steady, in.mask);
			return -1;
		}
	}
	for (int i = 0; i < g->n; i++) {
		const struct ft_run *r = ft_group_cur(g, i);

		if (!(steady >> i & 1) || !r)
			continue;
		if (atomic_load(&r->ended) && atomic_load(&r->end_rc)) {
			snprintf(why, len,
				 "member %d was never faulted but its script ended with %d: %s", i,
				 atomic_load(&r->end_rc), r->last_error);
			return -1;
		}
	}
	return checked;
}

size_t ft_group_describe(const struct ft_group *g, int tail, char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = '\0';
	if (!g->sh)
		return 0;
	ftcc_appendf(buf, len, &at, "group %s of %d, limit %llu\n", g->name, g->n,
		     (unsigned long long)atomic_load(&g->sh->limit));
	for (int k = 0; k < g->nruns; k++) {
		const struct ft_run *r = &g->sh->run[k];
		int64_t top = atomic_load(&r->last_seq), from = top - tail + 1;

		ftcc_appendf(
			buf, len, &at,
			"process %d: member %d pid %d%s%s%s%s created %d, last op %lld, %llu done, "
			"ended %d rc %d (%s) \"%s\"%s\n",
			k, r->member, (int)r->pid, r->join ? " join" : "",
			r->catchup ? " catchup" : "", r->fault[0] ? " fault " : "", r->fault,
			atomic_load(&r->created), (long long)top,
			(unsigned long long)atomic_load(&r->ndone), atomic_load(&r->ended),
			atomic_load(&r->end_rc), ftcc_strerror(atomic_load(&r->end_rc)),
			r->last_error, g->exit_status[k] != -1 ? " (gone)" : "");
		for (int64_t s = from < 0 ? 0 : from; s <= top + 1 && s < FT_GROUP_MAX_SEQ; s++) {
			const struct ft_op *op = &r->ops[s];
			int st = atomic_load_explicit(&op->state, memory_order_acquire);

			if (st == FT_OP_NONE)
				continue;
			ftcc_appendf(
				buf, len, &at,
				"  op %lld: %s rc %d epoch %llu set %#x n %u attempts %u resumed %d "
				"scale %g start %.1f done %.1f ms\n",
				(long long)s, st == FT_OP_DONE ? "done" : "started", op->rc,
				(unsigned long long)op->epoch, op->mask, op->ncontrib, op->attempts,
				op->resumed, op->scale, chaos_ms(g->t0_ns, op->t_start),
				st == FT_OP_DONE ? chaos_ms(g->t0_ns, op->t_done) : -1.0);
		}
	}
	return at;
}

size_t ft_group_log(const struct ft_group *g, int i, char *buf, size_t len)
{
	static char all[1 << 20];
	size_t n;

	if (len)
		buf[0] = '\0';
	if (!g->sh || i < 0 || i >= g->n || g->run[i] < 0 || g->errfd[g->run[i]] < 0 || !len)
		return 0;
	n = chaos_capture_read(g->errfd[g->run[i]], all, sizeof(all));
	if (n + 1 > len) {
		memcpy(buf, all + n - (len - 1), len - 1);
		buf[len - 1] = '\0';
		return len - 1;
	}
	memcpy(buf, all, n + 1);
	return n;
}
