/* SPDX-License-Identifier: BSD-3-Clause */
/* Baseline for ftcc-perf -m allreduce: MPI_Allreduce (MPI_FLOAT, MPI_SUM, out of place) over
 * the same size sweep, timed the same way (each rank times every call back to back; the time
 * of an iteration is the slowest rank's), printed in the same columns or JSON lines.
 *
 * build: mpicc -O2 -o mpi_allreduce perf/baselines/mpi_allreduce.c
 * run:   mpirun --allow-run-as-root --oversubscribe -np N --mca pml ob1 --mca btl tcp,self \
 *               --mca btl_tcp_if_include lo ./mpi_allreduce [-b 8] [-e 32M] [-f 2] [-n 20]
 *               [-w 5] [-c 0|1] [-j]
 */
#include <errno.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Command-line options (the subset of ftcc-perf's that applies). */
struct opts {
	size_t min_bytes, max_bytes;
	double step;
	int iters, warmup, check, json;
};

static int parse_size(const char *text, size_t *out)
{
	char *end;
	unsigned long long v = strtoull(text, &end, 10), mult = 1;

	if (end == text) {
		return -EINVAL;
	}
	if (*end == 'K' || *end == 'k') {
		mult = 1ull << 10;
	} else if (*end == 'M' || *end == 'm') {
		mult = 1ull << 20;
	} else if (*end == 'G' || *end == 'g') {
		mult = 1ull << 30;
	}
	*out = (size_t)(v * mult);
	return 0;
}

static int parse_args(int argc, char **argv, struct opts *o)
{
	int c;

	*o = (struct opts){
		.min_bytes = 8, .max_bytes = 32u << 20, .step = 2.0, .iters = 20, .warmup = 5
	};
	while ((c = getopt(argc, argv, "b:e:f:n:w:c:j")) != -1) {
		switch (c) {
		case 'b':
			if (parse_size(optarg, &o->min_bytes)) {
				return -EINVAL;
			}
			break;
		case 'e':
			if (parse_size(optarg, &o->max_bytes)) {
				return -EINVAL;
			}
			break;
		case 'f':
			o->step = atof(optarg);
			break;
		case 'n':
			o->iters = atoi(optarg);
			break;
		case 'w':
			o->warmup = atoi(optarg);
			break;
		case 'c':
			o->check = atoi(optarg);
			break;
		case 'j':
			o->json = 1;
			break;
		default:
			return -EINVAL;
		}
	}
	if (o->min_bytes < 4 || o->max_bytes < o->min_bytes || !(o->step > 1.0) || o->iters < 1 ||
	    o->warmup < 0) {
		return -EINVAL;
	}
	return 0;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The check value of element @i of @rank's input at iteration @it: a small integer, so the
 * float sum over ranks is exact. */
static float pattern(size_t i, int it, int rank)
{
	return (float)((i + (size_t)it * 7) % 1024 + 1) * (float)(rank + 1);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Times one size: every rank fills @t with its per-call times (ns); returns wrong elements. */
static uint64_t run_size(const struct opts *o, float *in, float *out, size_t count, int rank,
			 int nranks, uint64_t *t)
{
	uint64_t wrong = 0;
	float ranksum = (float)nranks * (float)(nranks + 1) / 2;
	size_t i;
	int it;

	for (i = 0; i < count; i++) {
		in[i] = pattern(i, 0, rank);
	}
	for (it = 0; it < o->warmup; it++) {
		MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	}
	MPI_Barrier(MPI_COMM_WORLD);
	for (it = 0; it < o->iters; it++) {
		uint64_t t0;

		if (o->check) {
			for (i = 0; i < count; i++) {
				in[i] = pattern(i, it, rank);
				out[i] = -1.0f;
			}
		}
		t0 = now_ns();
		MPI_Allreduce(in, out, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
		t[it] = now_ns() - t0;
		for (i = 0; o->check && i < count; i++) {
			wrong += out[i] != pattern(i, it, 0) * ranksum;
		}
	}
	return wrong;
}

static void report(const struct opts *o, size_t size, size_t count, int nranks, uint64_t *t,
		   uint64_t wrong)
{
	int n = o->iters, p99 = (99 * n + 99) / 100 - 1;
	double med, algbw, busbw;

	qsort(t, (size_t)n, sizeof(*t), cmp_u64);
	med = (n % 2 ? (double)t[n / 2] : ((double)t[n / 2 - 1] + (double)t[n / 2]) / 2) / 1e3;
	algbw = (double)size / (med * 1e3);
	busbw = algbw * 2.0 * (nranks - 1) / nranks;
	if (o->json) {
		printf("{\"mode\":\"mpi\",\"nranks\":%d,\"size\":%zu,\"count\":%zu,"
		       "\"type\":\"float32\",\"redop\":\"sum\",\"inplace\":false,\"iters\":%d,"
		       "\"warmup\":%d,\"check\":%d,\"time_min_us\":%.3f,\"time_median_us\":%.3f,"
		       "\"time_p99_us\":%.3f,\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f,\"wrong\":%llu}\n",
		       nranks, size, count, n, o->warmup, o->check, (double)t[0] / 1e3, med,
		       (double)t[p99 < 0 ? 0 : p99] / 1e3, algbw, busbw, (unsigned long long)wrong);
	} else {
		printf("  %12zu %12zu %7s %6s %10.2f %10.2f %10.2f %12.3f %12.3f %8llu\n", size,
		       count, "float32", "sum", (double)t[0] / 1e3, med,
		       (double)t[p99 < 0 ? 0 : p99] / 1e3, algbw, busbw, (unsigned long long)wrong);
	}
	fflush(stdout);
}

int main(int argc, char **argv)
{
	uint64_t *t, *tmax, wrong, wrong_all;
	struct opts o;
	float *in, *out;
	int rank, nranks;
	double s;

	MPI_Init(&argc, &argv);
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (parse_args(argc, argv, &o)) {
		if (rank == 0) {
			fprintf(stderr,
				"usage: mpi_allreduce [-b min] [-e max] [-f step] [-n iters] "
				"[-w warmup] [-c 0|1] [-j]\n");
		}
		MPI_Finalize();
		return 2;
	}
	in = malloc(o.max_bytes + 4);
	out = malloc(o.max_bytes + 4);
	t = calloc((size_t)o.iters, sizeof(*t));
	tmax = calloc((size_t)o.iters, sizeof(*tmax));
	if (!in || !out || !t || !tmax) {
		MPI_Abort(MPI_COMM_WORLD, 1);
	}
	memset(out, 0, o.max_bytes + 4);
	if (rank == 0 && !o.json) {
		printf("# MPI_Allreduce baseline: %d ranks, iters %d, warmup %d, check %d, out of "
		       "place\n# time = median over iterations of the slowest rank's time of that "
		       "call (calls back to back)\n#\n",
		       nranks, o.iters, o.warmup, o.check);
		printf("# %12s %12s %7s %6s %10s %10s %10s %12s %12s %8s\n", "size", "count",
		       "type", "redop", "min(us)", "med(us)", "p99(us)", "algbw(GB/s)",
		       "busbw(GB/s)", "#wrong");
	}
	for (s = (double)o.min_bytes; s <= (double)o.max_bytes; s *= o.step) {
		size_t count = (size_t)s / 4, size = count * 4;

		wrong = run_size(&o, in, out, count, rank, nranks, t);
		MPI_Reduce(t, tmax, o.iters, MPI_UINT64_T, MPI_MAX, 0, MPI_COMM_WORLD);
		MPI_Reduce(&wrong, &wrong_all, 1, MPI_UINT64_T, MPI_SUM, 0, MPI_COMM_WORLD);
		if (rank == 0) {
			report(&o, size, count, nranks, tmax, o.check ? wrong_all : 0);
		}
	}
	free(tmax);
	free(t);
	free(out);
	free(in);
	MPI_Finalize();
	return 0;
}
