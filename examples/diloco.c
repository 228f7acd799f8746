/* SPDX-License-Identifier: BSD-3-Clause */
/* A Streaming-DiLoCo-shaped loop over the C API: the model's outer gradients in FRAGMENTS
 * fragments, one fragment's quantized allreduce started each step and consumed FRAGMENTS steps
 * later, so that the exchange overlaps the inner steps ("compute", a sleep by default: the GPU
 * works while the CPU is free; --spin burns the CPU instead). Prints the median step time, and
 * with --alone runs the same steps without the allreduces (the compute alone) to compare.
 *
 *   ftcc-diloco RANK SIZE ADDR0,ADDR1,... [--codec int8|fp8_e4m3|int4|none] [--mib M]
 *               [--fragments F] [--compute-ms C] [--steps S] [--spin] [--alone]
 *
 * Each fragment has a stream of its own (cfg.nstreams, ftcc_comm_stream(); fragments beyond
 * FTCC_STREAMS_MAX share): a fragment's allreduce is ordered only with that fragment's, so its
 * schedule is its own, and fragments in flight move at once. A member that dies is left out
 * from the next fragment on (its record says so); the others go on. perf/quant_link.sh runs it
 * on a shaped link.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ftcc.h"

#define MAX_FRAGMENTS 16
#define MAX_MEMBERS 64

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* The inner steps: @ms of sleep (a GPU computing) or of spinning (a CPU computing). */
static void compute(double ms, int spin)
{
	double end = now_ms() + ms;
	time_t sec = (time_t)(ms / 1e3);

	if (!spin) {
		nanosleep(&(struct timespec){ .tv_sec = sec,
					      .tv_nsec = (long)((ms - (double)sec * 1e3) * 1e6) },
			  NULL);
		return;
	}
	while (now_ms() < end) {
	}
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
	int fragments = 4, steps = 40, spin = 0, alone = 0, nmem = 0, done = 0, failed = 0;
	double mib = 16, compute_ms = 100;
	enum ftcc_codec codec = FTCC_CODEC_INT8;
	const char *addrs[MAX_MEMBERS];
	ftcc_request_t *req[MAX_FRAGMENTS] = { 0 };
	struct ftcc_op_opts opts;
	struct ftcc_config cfg;
	ftcc_comm_t *comm, *stream[MAX_FRAGMENTS];
	float *frag[MAX_FRAGMENTS];
	double *t;
	size_t count;
	char *list;

	if (argc < 4) {
		fprintf(stderr, "usage: ftcc-diloco RANK SIZE ADDR0,ADDR1,... [options]\n");
		return 2;
	}
	for (int i = 4; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";

		if (!strcmp(a, "--codec")) {
			codec = !strcmp(v, "int8")     ? FTCC_CODEC_INT8 :
				!strcmp(v, "fp8_e4m3") ? FTCC_CODEC_FP8_E4M3 :
				!strcmp(v, "int4")     ? FTCC_CODEC_INT4 :
				!strcmp(v, "none")     ? FTCC_CODEC_NONE :
							 FTCC_CODEC_COUNT;
			i++;
		} else if (!strcmp(a, "--mib")) {
			mib = atof(v), i++;
		} else if (!strcmp(a, "--fragments")) {
			fragments = atoi(v), i++;
		} else if (!strcmp(a, "--compute-ms")) {
			compute_ms = atof(v), i++;
		} else if (!strcmp(a, "--steps")) {
			steps = atoi(v), i++;
		} else if (!strcmp(a, "--spin")) {
			spin = 1;
		} else if (!strcmp(a, "--alone")) {
			alone = 1;
		} else {
			fprintf(stderr, "ftcc-diloco: unknown option %s\n", a);
			return 2;
		}
	}
	list = strdup(argv[3]);
	for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && nmem < MAX_MEMBERS;
	     tok = strtok_r(NULL, ",", &save)) {
		addrs[nmem++] = tok;
	}
	count = (size_t)(mib * 1048576.0 / sizeof(float));
	if (codec == FTCC_CODEC_COUNT || fragments < 1 || fragments > MAX_FRAGMENTS || steps < 1 ||
	    !(mib > 0) || atoi(argv[2]) != nmem || count == 0) {
		fprintf(stderr, "ftcc-diloco: bad arguments\n");
		return 2;
	}
	ftcc_config_init(&cfg);
	cfg.group = "diloco";
	cfg.rank = (uint32_t)atoi(argv[1]);
	cfg.size = (uint32_t)nmem;
	cfg.addrs = addrs;
	cfg.nstreams = (uint32_t)(fragments < FTCC_STREAMS_MAX ? fragments : FTCC_STREAMS_MAX);
	if (ftcc_comm_create(&cfg, &comm)) {
		return 1;
	}
	for (int f = 0; f < fragments; f++) {
		if (ftcc_comm_stream(comm, (uint32_t)f % cfg.nstreams, &stream[f])) {
			return 1;
		}
	}
	ftcc_op_opts_init(&opts);
	opts.codec = codec;
	t = calloc((size_t)steps, sizeof(*t));
	for (int f = 0; f < fragments; f++) {
		frag[f] = calloc(count, sizeof(float));
		if (!frag[f] || !t) {
			return 1;
		}
	}
	for (int s = 0; s < steps; s++) {
		int f = s % fragments, rc;
		struct ftcc_record rec;
		double t0 = now_ms();

		if (req[f]) { /* the fragment started F steps ago: its outer update is due */
			rc = ftcc_wait(req[f], &rec);
			req[f] = NULL;
			if (rc && rc != FTCC_ERR_DEGRADED) {
				fprintf(stderr, "fragment %d: %s (%s)\n", f, ftcc_strerror(rc),
					ftcc_comm_last_error(comm));
				failed = 1;
				break;
			}
			if (rec.ncontrib < rec.size) {
				printf("step %d: fragment %d from %u of %u members (epoch %llu)\n",
				       s, f, rec.ncontrib, rec.size, (unsigned long long)rec.epoch);
			}
		}
		for (size_t i = 0; i < count; i += 97) { /* this fragment's new outer gradient */
			frag[f][i] = (float)(cfg.rank + 1) * 1e-3f * (float)(s + 1);
		}
		if (!alone) {
			rc = ftcc_iallreduce_opts(stream[f], frag[f], frag[f], count, FTCC_FLOAT32,
						  FTCC_AVG, &opts, &req[f]);
			if (rc) {
				fprintf(stderr, "start: %s\n", ftcc_strerror(rc));
				failed = 1;
				break;
			}
		}
		compute(compute_ms, spin);
		t[done++] = now_ms() - t0;
	}
	for (int f = 0; f < fragments; f++) {
		int rc = req[f] ? ftcc_wait(req[f], NULL) : 0;

		if (rc && rc != FTCC_ERR_DEGRADED) {
			fprintf(stderr, "fragment %d: %s\n", f, ftcc_strerror(rc));
			failed = 1;
		}
		free(frag[f]);
	}
	qsort(t, (size_t)done, sizeof(*t), cmp_double); /* the steps that ran */
	if (cfg.rank == 0 && done) {
		printf("diloco: %d members, %d fragments of %.1f MiB as %s%s, compute %.1f ms "
		       "(%s): median step %.2f ms (%.3fx the compute)\n",
		       nmem, fragments, mib, alone ? "nothing (alone)" : "",
		       alone ? "" :
			       (codec == FTCC_CODEC_NONE ? "float32" :
				codec == FTCC_CODEC_INT8 ? "int8" :
				codec == FTCC_CODEC_INT4 ? "int4" :
							   "fp8_e4m3"),
		       compute_ms, spin ? "spin" : "sleep", t[done / 2], t[done / 2] / compute_ms);
	}
	free(t);
	free(list);
	ftcc_comm_destroy(comm);
	return failed || done < steps;
}
