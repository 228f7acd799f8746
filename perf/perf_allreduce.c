/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf allreduce sweep, shared by the allreduce and collnet modes: the type table, the
 * check values and the exact expected result over a record's contributors, the size sweep and
 * its report, the close time, and --kill R@I (rank R dies at timed iteration I of the last
 * size; rank 0 reports the survivors' stall). Also the allreduce mode's driver: one group
 * through the public C API (ftcc.h, embedded coordinator on 127.0.0.1), blocking or polled.
 */
#include "perf.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h> /* INFINITY */
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ftcc.h"

/* One element type: its ftcc name, size, how its bits are made from a small integer, and the
 * largest check value whose sums over 8 ranks (and every partial sum) stay exact. */
struct ar_type {
	const char *name;
	enum ftcc_dtype dtype;
	unsigned size;
	unsigned ebits, mbits; /* narrow floats: exponent and mantissa bits; 0 otherwise */
	unsigned check_max;
};

static const struct ar_type ar_types[] = {
	{ "int8", FTCC_INT8, 1, 0, 0, 15 },	    { "uint8", FTCC_UINT8, 1, 0, 0, 15 },
	{ "int32", FTCC_INT32, 4, 0, 0, 1024 },	    { "uint32", FTCC_UINT32, 4, 0, 0, 1024 },
	{ "int64", FTCC_INT64, 8, 0, 0, 1024 },	    { "uint64", FTCC_UINT64, 8, 0, 0, 1024 },
	{ "float16", FTCC_FLOAT16, 2, 5, 10, 64 },  { "float32", FTCC_FLOAT32, 4, 0, 0, 1024 },
	{ "float64", FTCC_FLOAT64, 8, 0, 0, 1024 }, { "bfloat16", FTCC_BFLOAT16, 2, 8, 7, 16 },
	{ "fp8_e4m3", FTCC_FP8_E4M3, 1, 4, 3, 2 },  { "fp8_e5m2", FTCC_FP8_E5M2, 1, 5, 2, 1 },
};

static const char *const ar_op_names[FTCC_REDOP_COUNT] = { "sum", "prod", "max", "min", "avg" };

/* What every survivor tells rank 0 about the op of the kill iteration (times: CLOCK_MONOTONIC,
 * which all processes of the host share). The victim sends only t_end: its time of death. */
struct ar_kill_note {
	uint64_t t_ns, t_end; /* the op's duration, and when it returned */
	uint64_t epoch_before, epoch;
	uint32_t ncontrib, attempts;
	int32_t resumed, pad;
};

/* One rank's run: its driver, buffers and what the sweep needs. Owned by the rank. */
struct ar_run {
	const struct perf_opts *o;
	struct perf_boot *b;
	const struct perf_ar_driver *drv;
	void *t; /* the driver's state */
	const struct ar_type *type;
	enum ftcc_redop op;
	unsigned char *sbuf, *rbuf, *want;
	uint64_t *times;
	struct ftcc_record rec, all; /* the last op's record; one with every member */
	struct ar_kill_note note;    /* this rank's view of the kill iteration */
	int nranks, kill_at; /* kill_at: timed iteration of this size at which kill_rank dies */
	int codec;	     /* -q: the codec of a quantized allreduce, 0 none */
	double qerr;	     /* its largest relative error at this size */
};

static const struct ar_type *ar_type_find(const char *name)
{
	size_t i;

	for (i = 0; i < sizeof(ar_types) / sizeof(ar_types[0]); i++) {
		if (!strcmp(ar_types[i].name, name)) {
			return &ar_types[i];
		}
	}
	return NULL;
}

static int ar_op_find(const char *name)
{
	int i;

	for (i = 0; i < FTCC_REDOP_COUNT; i++) {
		if (!strcmp(ar_op_names[i], name)) {
			return i;
		}
	}
	return -1;
}

/* Bits of the non-negative integer @v in a narrow float of @e exponent and @m mantissa bits
 * (bias 2^(e-1) - 1); @v must be exactly representable and normal, as check values are. */
static uint32_t ar_narrow_bits(double v, unsigned e, unsigned m)
{
	int x = 0;

	if (v == 0) {
		return 0;
	}
	while (v >= 2) { /* v = (1 + f) * 2^x; no libm in this program */
		v /= 2;
		x++;
	}
	return ((uint32_t)(x + (1 << (e - 1)) - 1) << m) | (uint32_t)((v - 1) * (double)(1u << m));
}

/* Stores the integer @v as element @i of @buf. Integers wrap as the type does. */
static void ar_put(const struct ar_type *t, void *buf, size_t i, double v)
{
	unsigned char *p = (unsigned char *)buf + i * t->size;
	uint64_t u = (uint64_t)(int64_t)v;
	uint32_t bits;
	float f = (float)v;

	if (t->dtype == FTCC_FLOAT32) {
		memcpy(p, &f, 4);
	} else if (t->dtype == FTCC_FLOAT64) {
		memcpy(p, &v, 8);
	} else if (t->ebits) {
		bits = ar_narrow_bits(v, t->ebits, t->mbits);
		memcpy(p, &bits, t->size); /* little-endian: the low bytes */
	} else {
		memcpy(p, &u, t->size);
	}
}

/* Check value of element @i of @rank's input at iteration @it: small integers chosen per
 * operator so the result is exact in every type (PROD: one rank per element holds 2). */
static double ar_value(const struct ar_run *r, size_t i, int it, int rank)
{
	size_t m = r->type->check_max;

	switch (r->op) {
	case FTCC_PROD:
		return (i + (size_t)it) % (size_t)r->nranks == (size_t)rank ? 2 : 1;
	case FTCC_AVG:
		return (double)((i + 3 * (size_t)it) % m + 1);
	default:
		return (double)((i + 3 * (size_t)it + 5 * (size_t)rank) % m + 1);
	}
}

static void ar_fill(const struct ar_run *r, void *buf, size_t count, int it)
{
	size_t i;

	for (i = 0; i < count; i++) {
		ar_put(r->type, buf, i, ar_value(r, i, it, r->b->rank));
	}
}

/* Wrong elements of @got for iteration @it over the contributors in @rec. */
static uint64_t ar_wrong(struct ar_run *r, const void *got, size_t count, int it,
			 const struct ftcc_record *rec)
{
	uint64_t wrong = 0;
	size_t i;
	int k;

	for (i = 0; i < count; i++) {
		double acc = r->op == FTCC_PROD ? 1 : r->op == FTCC_MIN ? INFINITY : 0;

		for (k = 0; k < r->nranks; k++) {
			double v = ar_value(r, i, it, k);

			if (!ftcc_record_has(rec, (uint32_t)k)) {
				continue;
			}
			acc = r->op == FTCC_PROD ? acc * v :
			      r->op == FTCC_MAX	 ? (v > acc ? v : acc) :
			      r->op == FTCC_MIN	 ? (v < acc ? v : acc) :
			      r->op == FTCC_AVG	 ? v :
						   acc + v;
		}
		ar_put(r->type, r->want, 0, acc);
		wrong += memcmp(r->want, (const unsigned char *)got + i * r->type->size,
				r->type->size) != 0;
	}
	return wrong;
}

/* One op through the driver into r->rec (the driver prints why on failure). */
static int ar_op(struct ar_run *r, size_t count)
{
	void *src = r->o->inplace ? r->rbuf : r->sbuf;

	return r->drv->op(r->t, src, r->rbuf, count, (int)r->type->dtype, (int)r->op, &r->rec);
}

/* What the quantized check needs: rank k's input at iteration it. */
struct ar_qarg {
	const struct ar_run *r;
	int it;
};

static double ar_qvalue(const void *arg, size_t i, int rank)
{
	const struct ar_qarg *q = arg;

	return ar_value(q->r, i, q->it, rank);
}

/* Elements of a quantized result outside the documented bound; the error into r->qerr. */
static uint64_t ar_qwrong(struct ar_run *r, size_t count, int it, const struct ftcc_record *rec)
{
	struct ar_qarg arg = { r, it };
	int member[PERF_MAX_RANKS];
	struct perf_q_check c = { .codec = r->codec,
				  .nranks = r->nranks,
				  .bf16 = r->type->dtype == FTCC_BFLOAT16,
				  .member = member,
				  .value = ar_qvalue,
				  .arg = &arg };
	double rel;
	uint64_t wrong;

	for (int k = 0; k < r->nranks; k++) {
		member[k] = ftcc_record_has(rec, (uint32_t)k);
	}
	wrong = perf_q_wrong(&c, r->rbuf, count, &rel);
	r->qerr = rel > r->qerr ? rel : r->qerr;
	return wrong;
}

/* Warm-up, then the timed iterations of one size into r->times; *@wrong counts bad elements.
 * The kill victim dies here at iteration r->kill_at. */
static int ar_iterations(struct ar_run *r, size_t count, uint64_t *wrong)
{
	const struct perf_opts *o = r->o;
	void *in = o->inplace ? r->rbuf : r->sbuf;
	int it, rc = 0;

	ar_fill(r, in, count, 0);
	for (it = 0; it < o->warmup && !rc; it++) {
		rc = ar_op(r, count);
	}
	rc = rc ? rc : perf_boot_barrier(r->b);
	for (it = 0; it < o->iters && !rc; it++) {
		uint64_t t0;

		if (it == r->kill_at && r->b->rank == o->kill_rank) {
			r->note.t_end = perf_now_ns();
			perf_boot_send(r->b, 0, &r->note, sizeof(r->note));
			fflush(NULL);
			raise(SIGKILL);
		}
		if (o->check) {
			ar_fill(r, in, count, it);
			if (!o->inplace) {
				memset(r->rbuf, 0xa5, count * r->type->size);
			}
		}
		if (it == r->kill_at) {
			r->note.epoch_before = r->rec.epoch;
		}
		t0 = perf_now_ns();
		rc = ar_op(r, count);
		r->times[it] = perf_now_ns() - t0;
		if (!rc && o->check) {
			/* outside the kill's size every member must be in every result */
			const struct ftcc_record *rec = r->kill_at < 0 ? &r->all : &r->rec;

			*wrong += r->codec ? ar_qwrong(r, count, it, rec) :
					     ar_wrong(r, r->rbuf, count, it, rec);
		}
		if (it == r->kill_at) {
			r->note.t_ns = r->times[it];
			r->note.t_end = t0 + r->times[it];
			r->note.epoch = r->rec.epoch;
			r->note.ncontrib = r->rec.ncontrib;
			r->note.attempts = r->rec.attempts;
			r->note.resumed = r->rec.resumed;
		}
	}
	return rc;
}

/* Rank 0: the kill iteration, from the victim's time of death and every survivor's note
 * (survivors must agree on the record). */
static void ar_kill_report(struct ar_run *r, const struct perf_result *res)
{
	const struct perf_opts *o = r->o;
	struct ar_kill_note n, death = { 0 }, worst = { 0 };
	int k, agree = 1, got = 0;
	double after_ms;

	if (perf_boot_recv(r->b, o->kill_rank, &death, sizeof(death))) {
		fprintf(stderr, "ftcc-perf: the victim did not say when it died\n");
	}
	for (k = 0; k < r->nranks; k++) {
		if (k == o->kill_rank) {
			continue;
		}
		if (k == 0) {
			n = r->note;
		} else if (perf_boot_recv(r->b, k, &n, sizeof(n))) {
			continue;
		}
		if (got++ && (n.epoch != worst.epoch || n.ncontrib != worst.ncontrib ||
			      n.resumed != worst.resumed)) {
			agree = 0;
		}
		worst.epoch = n.epoch;
		worst.epoch_before = n.epoch_before;
		worst.ncontrib = n.ncontrib;
		worst.attempts = n.attempts > worst.attempts ? n.attempts : worst.attempts;
		worst.resumed = n.resumed;
		worst.t_ns = n.t_ns > worst.t_ns ? n.t_ns : worst.t_ns;
		worst.t_end = n.t_end > worst.t_end ? n.t_end : worst.t_end;
	}
	after_ms = death.t_end && worst.t_end > death.t_end ?
			   (double)(worst.t_end - death.t_end) / 1e6 :
			   0;
	if (o->json) {
		printf("{\"mode\":\"allreduce\",\"event\":\"kill\",\"nranks\":%d,\"victim\":%d,"
		       "\"iter\":%d,\"size\":%zu,\"op_us\":%.3f,\"done_after_kill_us\":%.3f,"
		       "\"time_median_us\":%.3f,\"epoch_before\":%llu,\"epoch\":%llu,"
		       "\"ncontrib\":%u,\"attempts\":%u,\"resumed\":%d,\"survivors\":%d,"
		       "\"survivors_agree\":%s}\n",
		       r->nranks, o->kill_rank, r->kill_at, res->size, (double)worst.t_ns / 1e3,
		       after_ms * 1e3, res->t_med, (unsigned long long)worst.epoch_before,
		       (unsigned long long)worst.epoch, worst.ncontrib, worst.attempts,
		       worst.resumed, got, agree ? "true" : "false");
	} else {
		printf("# kill: rank %d SIGKILLed itself before timed op %d of %zu B\n"
		       "# kill: that op took %.3f ms on the slowest survivor and was done on all "
		       "%d survivors %.3f ms after the kill (median op of the size %.3f ms)\n"
		       "# kill: epoch %llu -> %llu; record: %u of %d contributors, %u attempt(s), "
		       "resumed %d; survivors %s\n",
		       o->kill_rank, r->kill_at, res->size, (double)worst.t_ns / 1e6, got, after_ms,
		       res->t_med / 1e3, (unsigned long long)worst.epoch_before,
		       (unsigned long long)worst.epoch, worst.ncontrib, r->nranks, worst.attempts,
		       worst.resumed, agree ? "agree" : "DISAGREE");
	}
	fflush(stdout);
}

/* Gathers the times of one size to rank 0 (skipping the dead victim) and prints the row. */
static int ar_report(struct ar_run *r, size_t size, size_t count, uint64_t wrong)
{
	const struct perf_opts *o = r->o;
	struct perf_result res = {
		.size = size, .count = count, .type = r->type->name, .redop = ar_op_names[r->op]
	};
	struct perf_boot live = *r->b;
	int rc;

	if (r->kill_at >= 0) {
		/* perf_collect walks ranks 1..nranks-1: put the last rank in the victim's slot */
		live.fds[o->kill_rank] = live.fds[live.nranks - 1];
		live.nranks--;
	}
	rc = perf_collect(&live, r->times, o->iters, wrong, PERF_TIME_MAX, &res);
	if (rc) {
		return rc;
	}
	if (r->b->rank == 0) {
		perf_result_bw(&res, (double)size, 2.0 * (r->nranks - 1) / r->nranks);
		if (o->json) {
			printf("{\"mode\":\"%s\",\"driver\":\"%s\",\"nranks\":%d,"
			       "\"inplace\":%s,\"size\":%zu,"
			       "\"count\":%zu,\"type\":\"%s\",\"redop\":\"%s\",\"iters\":%d,"
			       "\"warmup\":%d,\"check\":%d,\"time_min_us\":%.3f,"
			       "\"time_median_us\":%.3f,\"time_p99_us\":%.3f,\"time_mean_us\":%.3f,"
			       "\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f,\"wrong\":",
			       o->mode, r->drv->name, r->nranks, o->inplace ? "true" : "false",
			       size, count, res.type, res.redop, res.iters, o->warmup, o->check,
			       res.t_min, res.t_med, res.t_p99, res.t_mean, res.algbw, res.busbw);
			printf(o->check ? "%llu}\n" : "null}\n", (unsigned long long)res.wrong);
			fflush(stdout);
		} else {
			perf_report_row(o, &res);
		}
		if (r->codec) {
			perf_q_report(o, r->codec, r->nranks, count, r->type->size,
				      o->check ? r->qerr : -1);
		}
		if (r->kill_at >= 0) {
			ar_kill_report(r, &res);
		}
	} else if (r->kill_at >= 0) {
		rc = perf_boot_send(r->b, 0, &r->note, sizeof(r->note));
	}
	return rc;
}

/* Next size of the sweep, like nccl-tests -f: multiply, but always grow. 0 ends the sweep. */
static size_t ar_next_size(const struct perf_opts *o, size_t size)
{
	double next = (double)size * o->step_factor;

	if (size >= o->max_bytes || next > (double)o->max_bytes) {
		return 0;
	}
	return (size_t)next > size ? (size_t)next : size + 1;
}

static int ar_sweep(struct ar_run *r)
{
	const struct perf_opts *o = r->o;
	size_t size = o->min_bytes, next;
	int rc = 0;

	for (; size && !rc; size = next) {
		size_t count = size / r->type->size ? size / r->type->size : 1;
		uint64_t wrong = 0;

		next = ar_next_size(o, size);
		r->qerr = 0;
		r->kill_at = next == 0 && o->kill_rank > 0 ? o->kill_iter : -1;
		rc = ar_iterations(r, count, &wrong);
		rc = rc ? rc : ar_report(r, count * r->type->size, count, wrong);
	}
	return rc;
}

static void ar_header(const struct ar_run *r)
{
	char notes[512];

	snprintf(notes, sizeof(notes),
		 "# %d ranks on %s, %s, %s\n"
		 "# each rank times every op back to back; an iteration's time is the slowest "
		 "rank's\n# busbw = algbw * 2(n-1)/n; #wrong counts elements\n",
		 r->nranks,
		 strcmp(r->b->host[0], r->b->host[r->nranks - 1]) ? "several hosts" : r->b->host[0],
		 r->drv->what, r->o->inplace ? "in place" : "out of place");
	perf_report_header(r->o, notes);
}

/* Closes the driver, times it, and has rank 0 print the slowest rank's close time. */
static int ar_close(struct ar_run *r)
{
	const struct perf_opts *o = r->o;
	struct perf_result res = { 0 };
	uint64_t t0 = perf_now_ns(), t;
	int rc;

	r->drv->close(r->t);
	t = perf_now_ns() - t0;
	rc = perf_collect(r->b, &t, 1, 0, PERF_TIME_MAX, &res);
	if (rc || r->b->rank != 0) {
		return rc;
	}
	if (o->json) {
		printf("{\"mode\":\"%s\",\"event\":\"close\",\"nranks\":%d,\"close_us\":%.3f}\n",
		       o->mode, r->nranks, res.t_med);
	} else {
		printf("# close (%s): %.3f ms on the slowest rank\n", r->drv->close_what,
		       res.t_med / 1e3);
	}
	fflush(stdout);
	return 0;
}

int perf_ar_run(const struct perf_opts *o, struct perf_boot *b, const struct perf_ar_driver *drv,
		void *t)
{
	struct ar_run r = {
		.o = o, .b = b, .drv = drv, .t = t, .nranks = b->nranks, .kill_at = -1
	};
	size_t bytes;
	int op, rc;

	r.type = ar_type_find(o->dtype);
	op = ar_op_find(o->redop);
	if (!r.type || op < 0) {
		fprintf(stderr, "ftcc-perf: unknown type '%s' or op '%s'\n", o->dtype, o->redop);
		return -EINVAL;
	}
	r.op = (enum ftcc_redop)op;
	r.codec = perf_q_parse(o->codec);
	if (r.codec < 0 ||
	    (r.codec && (strcmp(o->mode, "allreduce") || r.op != FTCC_SUM ||
			 (r.type->dtype != FTCC_FLOAT32 && r.type->dtype != FTCC_BFLOAT16)))) {
		fprintf(stderr,
			"ftcc-perf: -q %s: a codec (int8 fp8_e4m3 int4) of the allreduce "
			"mode, with -t float32 or bfloat16 and -o sum\n",
			o->codec);
		return -EINVAL;
	}
	memset(r.all.contrib, 0xff, sizeof(r.all.contrib));
	bytes = (o->max_bytes / r.type->size + 1) * r.type->size;
	r.sbuf = perf_buf_alloc(bytes);
	r.rbuf = perf_buf_alloc(bytes);
	r.want = perf_buf_alloc(8);
	r.times = calloc((size_t)o->iters, sizeof(*r.times));
	rc = -ENOMEM;
	if (!r.sbuf || !r.rbuf || !r.want || !r.times) {
		goto free_bufs;
	}
	rc = drv->open(t, b, r.sbuf, r.rbuf, bytes);
	if (rc) {
		goto free_bufs;
	}
	if (b->rank == 0) {
		ar_header(&r);
	}
	rc = ar_sweep(&r);
	if (!rc && r.kill_at < 0) {
		rc = perf_boot_barrier(b); /* nobody leaves while a peer still finishes an op */
	}
	if (!rc && r.kill_at < 0) {
		rc = ar_close(&r);
	} else {
		drv->close(t);
	}
free_bufs:
	free(r.times);
	free(r.want);
	free(r.rbuf);
	free(r.sbuf);
	return rc;
}

int perf_ar_poll(int (*test)(void *arg, int *done), void *arg, int yield, const char *what)
{
	uint64_t since = 0;
	unsigned idle = 0;
	int done = 0, rc;

	while (!(rc = test(arg, &done)) && !done) {
		if (yield) {
			sched_yield();
		}
		if (idle++ % 1024) {
			continue;
		}
		if (!since) {
			since = perf_now_ns();
		} else if (perf_now_ns() - since > PERF_STALL_TIMEOUT_NS) {
			fprintf(stderr, "ftcc-perf: %s made no progress for %llu s\n", what,
				PERF_STALL_TIMEOUT_NS / 1000000000ull);
			return -ETIMEDOUT;
		}
	}
	return rc;
}

/* ---- the allreduce mode's driver: the public C API ------------------------------------- */

/* One rank's member of the group, and how its ops are run. Owned by the rank. */
struct ar_capi {
	ftcc_comm_t *comm;
	int rank, yield;
	struct ftcc_op_opts opts; /* -q */
};

/* A port at @ip that binds now, below the kernel's ephemeral range: a port handed out for port 0
 * and closed again goes back to that range, where any connection on this host may take it as
 * its local port before the member binds it (ftcc_comm_create then fails, EADDRINUSE). Where
 * the range leaves no room below it, one the kernel hands out. 0 when none is found. */
static uint16_t free_port_below_ephemeral(const char *ip)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	unsigned lo = 32768, hi;
	uint64_t x = perf_now_ns() ^ ((uint64_t)getpid() << 20);
	FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

	if (f) {
		if (fscanf(f, "%u %u", &lo, &hi) != 2)
			lo = 32768;
		fclose(f);
	}
	if (inet_pton(AF_INET, ip, &sa.sin_addr) != 1)
		return 0;
	for (int tries = 0; lo > 12000 && tries < 256; tries++) {
		int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

		x = x * 6364136223846793005ull + 1442695040888963407ull;
		sa.sin_port = htons((uint16_t)(10000 + (x >> 33) % (lo - 11000)));
		ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return ntohs(sa.sin_port);
	}
	if (lo <= 12000) {
		socklen_t len = sizeof(sa);
		int fd = socket(AF_INET, SOCK_STREAM, 0), ok;

		sa.sin_port = 0;
		ok = fd >= 0 && bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
		     getsockname(fd, (struct sockaddr *)&sa, &len) == 0;
		if (fd >= 0)
			close(fd);
		if (ok)
			return ntohs(sa.sin_port);
	}
	return 0;
}

int perf_capi_addrs(struct perf_boot *b, char (*addrs)[80], char *group, size_t glen)
{
	uint16_t ports[PERF_MAX_RANKS] = { 0 };
	int i, rc = 0;

	ports[b->rank] = free_port_below_ephemeral(b->host[b->rank]);
	if (!ports[b->rank]) {
		rc = -EADDRNOTAVAIL;
		fprintf(stderr, "ftcc-perf rank %d: no free port on %s\n", b->rank,
			b->host[b->rank]);
	}
	if (b->rank == 0) {
		for (i = 1; i < b->nranks && !rc; i++) {
			rc = perf_boot_recv(b, i, &ports[i], sizeof(ports[i]));
		}
		snprintf(group, glen, "perf-ar-%d", (int)getpid());
		for (i = 1; i < b->nranks && !rc; i++) {
			rc = perf_boot_send(b, i, ports, sizeof(ports));
			rc = rc ? rc : perf_boot_send(b, i, group, glen);
		}
	} else {
		rc = rc ? rc : perf_boot_send(b, 0, &ports[b->rank], sizeof(ports[0]));
		rc = rc ? rc : perf_boot_recv(b, 0, ports, sizeof(ports));
		rc = rc ? rc : perf_boot_recv(b, 0, group, glen);
	}
	for (i = 0; i < b->nranks; i++) {
		snprintf(addrs[i], sizeof(addrs[i]), "%s:%u", b->host[i], ports[i]);
	}
	return rc;
}

int perf_capi_comm(struct perf_boot *b, int degraded, ftcc_comm_t **comm)
{
	char addrs[PERF_MAX_RANKS][80], group[64] = "";
	const char *ptrs[PERF_MAX_RANKS];
	struct ftcc_config cfg;
	int i, rc = perf_capi_addrs(b, addrs, group, sizeof(group));

	if (rc) {
		return rc;
	}
	for (i = 0; i < b->nranks; i++) {
		ptrs[i] = addrs[i];
	}
	ftcc_config_init(&cfg);
	cfg.group = group;
	cfg.rank = (uint32_t)b->rank;
	cfg.size = (uint32_t)b->nranks;
	cfg.addrs = ptrs;
	cfg.coordinator = "embedded";
	cfg.degraded = (enum ftcc_degraded)degraded;
	rc = ftcc_comm_create(&cfg, comm);
	if (rc) {
		fprintf(stderr, "ftcc-perf: rank %d: ftcc_comm_create: %s\n", b->rank,
			ftcc_strerror(rc));
		return -EIO;
	}
	return 0;
}

static int capi_open(void *t, struct perf_boot *b, void *sbuf, void *rbuf, size_t bytes)
{
	struct ar_capi *c = t;

	(void)sbuf; /* the C API takes any buffer at every call */
	(void)rbuf;
	(void)bytes;
	/* the check's expected values are plain sums */
	return perf_capi_comm(b, FTCC_DEGRADED_SUM, &c->comm);
}

static void capi_close(void *t)
{
	struct ar_capi *c = t;

	ftcc_comm_destroy(c->comm);
	c->comm = NULL;
}

/* Prints why op of @count elements failed with @rc. */
static int capi_failed(struct ar_capi *c, const char *call, size_t count, int rc)
{
	fprintf(stderr, "ftcc-perf: rank %d: %s of %zu elements: %s (%s)\n", c->rank, call, count,
		ftcc_strerror(rc), ftcc_comm_last_error(c->comm));
	return -EIO;
}

static int capi_op_blocking(void *t, const void *src, void *dst, size_t count, int dtype, int redop,
			    struct ftcc_record *rec)
{
	struct ar_capi *c = t;
	int rc = ftcc_allreduce_opts(c->comm, src, dst, count, (enum ftcc_dtype)dtype,
				     (enum ftcc_redop)redop, &c->opts, rec);

	return rc ? capi_failed(c, "ftcc_allreduce", count, rc) : 0;
}

/* A request being polled, and its result once done. */
struct capi_poll {
	ftcc_request_t *req;
	struct ftcc_record *rec;
	int rc;
};

static int capi_test(void *arg, int *done)
{
	struct capi_poll *p = arg;

	p->rc = ftcc_test(p->req, done, p->rec);
	return 0; /* the op's own result is p->rc */
}

static int capi_op_poll(void *t, const void *src, void *dst, size_t count, int dtype, int redop,
			struct ftcc_record *rec)
{
	struct ar_capi *c = t;
	struct capi_poll p = { .rec = rec };
	int rc = ftcc_iallreduce_opts(c->comm, src, dst, count, (enum ftcc_dtype)dtype,
				      (enum ftcc_redop)redop, &c->opts, &p.req);

	if (rc) {
		return capi_failed(c, "ftcc_iallreduce", count, rc);
	}
	rc = perf_ar_poll(capi_test, &p, c->yield, "ftcc_test");
	if (rc) {
		return rc; /* the request goes with the communicator */
	}
	return p.rc ? capi_failed(c, "ftcc_test", count, p.rc) : 0;
}

static const struct perf_ar_driver capi_blocking = {
	.name = "capi",
	.what = "ftcc_allreduce (blocking), embedded coordinator",
	.close_what = "ftcc_comm_destroy",
	.open = capi_open,
	.op = capi_op_blocking,
	.close = capi_close,
};

static const struct perf_ar_driver capi_poll = {
	.name = "capi_poll",
	.what = "ftcc_iallreduce + ftcc_test polled (-P), embedded coordinator",
	.close_what = "ftcc_comm_destroy",
	.open = capi_open,
	.op = capi_op_poll,
	.close = capi_close,
};

int perf_allreduce_run(const struct perf_opts *o, struct perf_boot *b)
{
	struct ar_capi c = { .rank = b->rank, .yield = o->yield };

	ftcc_op_opts_init(&c.opts);
	c.opts.codec = perf_q_parse(o->codec) > 0 ? (enum ftcc_codec)perf_q_parse(o->codec) : 0;

	return perf_ar_run(o, b, o->poll ? &capi_poll : &capi_blocking, &c);
}
