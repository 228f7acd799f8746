/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf allreduce -q CODEC: the quantized allreduce's check and report. The encoding's size
 * and error bounds are computed here from what ftcc.h and README document (not from the
 * library's code), so the benchmark checks the documentation as well as the results.
 */
#include "perf.h"

#include <stdio.h>
#include <string.h>

#include "ftcc.h"

static const char *const q_names[FTCC_CODEC_COUNT] = { "none", "int8", "fp8_e4m3", "int4" };
static const double q_max[FTCC_CODEC_COUNT] = { 0, 127, 448, 7 };

int perf_q_parse(const char *name)
{
	for (int i = 0; name && i < FTCC_CODEC_COUNT; i++) {
		if (!strcmp(name, q_names[i])) {
			return i;
		}
	}
	return name ? -1 : 0;
}

const char *perf_q_name(int codec)
{
	return codec >= 0 && codec < FTCC_CODEC_COUNT ? q_names[codec] : "unknown";
}

/* Bytes of @count elements' encoding: a float32 scale per block, a code per element (int4: two
 * per byte). */
static size_t q_bytes(int codec, size_t count)
{
	size_t codes = codec == FTCC_CODEC_INT4 ? (count + 1) / 2 : count;

	return (count + FTCC_CODEC_BLOCK - 1) / FTCC_CODEC_BLOCK * 4 + codes;
}

/* The documented bound of one encoding of @x in a block of largest magnitude @m. */
static double q_bound(int codec, double x, double m)
{
	double s = m / q_max[codec];

	return codec == FTCC_CODEC_FP8_E4M3 ? (x < 0 ? -x : x) / 16 + s / 1024 : s / 2;
}

/* Elements of chunk @j of @n: whole blocks, shared out as evenly as blocks allow. */
static size_t q_chunk(size_t count, int n, int j)
{
	size_t nblk = (count + FTCC_CODEC_BLOCK - 1) / FTCC_CODEC_BLOCK;
	size_t base = nblk / (size_t)n, rem = nblk % (size_t)n;
	size_t first = (size_t)j * base + ((size_t)j < rem ? (size_t)j : rem);
	size_t off = first * FTCC_CODEC_BLOCK,
	       end = off + (base + ((size_t)j < rem)) * FTCC_CODEC_BLOCK;

	off = off < count ? off : count;
	return (end < count ? end : count) - off;
}

size_t perf_q_payload(int codec, int nranks, size_t count)
{
	size_t sent = 0;

	/* rank 0 sends every other chunk once, encoded, and its own encoded sum to each other
	 * rank */
	for (int j = 1; j < nranks; j++) {
		sent += q_bytes(codec, q_chunk(count, nranks, j));
	}
	return sent + (size_t)(nranks - 1) * q_bytes(codec, q_chunk(count, nranks, 0));
}

static double q_abs(double v)
{
	return v < 0 ? -v : v;
}

static double q_got(const void *got, int bf16, size_t i)
{
	float f;

	if (bf16) {
		uint16_t h;
		uint32_t u;

		memcpy(&h, (const uint8_t *)got + 2 * i, 2);
		u = (uint32_t)h << 16;
		memcpy(&f, &u, 4);
	} else {
		memcpy(&f, (const uint8_t *)got + 4 * i, 4);
	}
	return f;
}

uint64_t perf_q_wrong(const struct perf_q_check *c, const void *got, size_t count, double *max_rel)
{
	uint64_t wrong = 0;
	double top = 0, worst = 0;

	for (size_t b = 0; b < count; b += FTCC_CODEC_BLOCK) {
		size_t len = count - b < FTCC_CODEC_BLOCK ? count - b : FTCC_CODEC_BLOCK;
		double m[PERF_MAX_RANKS] = { 0 }, msum = 0, slack = 0;

		for (size_t i = b; i < b + len; i++) {
			double sum = 0;

			for (int k = 0; k < c->nranks; k++) {
				double v = c->member[k] ? q_abs(c->value(c->arg, i, k)) : 0;

				m[k] = v > m[k] ? v : m[k];
				sum += c->member[k] ? c->value(c->arg, i, k) : 0;
			}
			msum = q_abs(sum) > msum ? q_abs(sum) : msum;
		}
		for (int k = 0; k < c->nranks; k++) {
			slack += q_bound(c->codec, m[k], m[k]); /* the sum's maximum may move */
		}
		for (size_t i = b; i < b + len; i++) {
			double sum = 0, mag = 0, bound = 0, err;

			for (int k = 0; k < c->nranks; k++) {
				double v = c->member[k] ? c->value(c->arg, i, k) : 0;
				double e = q_bound(c->codec, v, m[k]);

				sum += v;
				mag += q_abs(v) + e;
				bound += e;
			}
			/* float32 additions of the decoded inputs, then the sum's own encoding */
			bound += mag * c->nranks * 0x1p-24 +
				 q_bound(c->codec, q_abs(sum) + bound, msum + slack);
			if (c->bf16) { /* and the result rounded to bfloat16 */
				bound += (q_abs(sum) + bound) * 0x1p-8;
			}
			err = q_abs(q_got(got, c->bf16, i) - sum);
			wrong += !(err <= bound);
			worst = err > worst ? err : worst;
			top = q_abs(sum) > top ? q_abs(sum) : top;
		}
	}
	*max_rel = top > 0 ? worst / top : worst;
	return wrong;
}

void perf_q_report(const struct perf_opts *o, int codec, int nranks, size_t count, size_t esz,
		   double max_rel)
{
	size_t q = perf_q_payload(codec, nranks, count);
	size_t full = (size_t)(2.0 * (nranks - 1) / nranks * (double)(count * esz));

	if (o->json) {
		printf("{\"mode\":\"%s\",\"event\":\"codec\",\"codec\":\"%s\",\"count\":%zu,"
		       "\"payload_bytes\":%zu,\"plain_payload_bytes\":%zu,\"max_rel_err\":%.3g}\n",
		       o->mode, perf_q_name(codec), count, q, full, max_rel);
	} else {
		printf("# %s: rank 0 sent %zu payload bytes (%zu as %zu-byte elements: %.2fx fewer); "
		       "largest error %.3g of the largest result%s\n",
		       perf_q_name(codec), q, full, esz, q ? (double)full / (double)q : 0,
		       max_rel < 0 ? 0 : max_rel, max_rel < 0 ? " (not checked: -c 1)" : "");
	}
	fflush(stdout);
}
