/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-demo: a live demo of the fault-tolerant allreduce through the public C API. It forks a
 * few local members on the embedded coordinator; each allreduces a vector per "training step".
 * One member dies in the middle of an op (SIGKILL at an engine fault point); the survivors
 * finish that op and go on in a new epoch; later the member restarts and joins again. Every
 * step prints its epoch, contributors, time and result checksum on every member.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ftcc.h"

#define DEMO_MAX_MEMBERS 8
#define DEMO_MAX_STEPS 1000

/* What member @m reports about step @s, in shared memory. */
struct demo_slot {
	_Atomic int state; /* 0 not yet, 1 done */
	int rc;
	uint64_t epoch;
	uint32_t ncontrib;
	uint32_t contrib; /* bit i: member i */
	uint64_t sum;	  /* FNV-1a of the result */
	int64_t t_start_ns, t_done_ns;
};

struct demo_shared {
	struct demo_slot slot[DEMO_MAX_MEMBERS][DEMO_MAX_STEPS];
	_Atomic int joined_at[DEMO_MAX_MEMBERS]; /* first step of a restarted member, +1 */
};

struct demo_opts {
	int n, steps, victim, kill_step, restart_step, pace_ms, timeout_ms;
	size_t count;
	int port;
	char group[64];
};

static int64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint64_t fnv1a(const void *p, size_t len)
{
	const uint8_t *b = p;
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < len; i++) {
		h = (h ^ b[i]) * 1099511628211ull;
	}
	return h;
}

/* One member's life: create (or join), then one allreduce per step until the last. */
static int member_main(const struct demo_opts *o, struct demo_shared *sh, int rank, int join)
{
	char addr_text[DEMO_MAX_MEMBERS][32];
	const char *addrs[DEMO_MAX_MEMBERS];
	struct ftcc_config cfg;
	struct ftcc_view v;
	ftcc_comm_t *comm;
	float *in, *out;
	int rc;

	for (int i = 0; i < o->n; i++) {
		snprintf(addr_text[i], sizeof(addr_text[i]), "127.0.0.1:%d", o->port + i);
		addrs[i] = addr_text[i];
	}
	ftcc_config_init(&cfg);
	cfg.group = o->group;
	cfg.rank = (uint32_t)rank;
	cfg.size = (uint32_t)o->n;
	cfg.addrs = addrs;
	cfg.coordinator = "";
	cfg.join = join;
	cfg.timeout_ms = o->timeout_ms;
	cfg.degraded = FTCC_DEGRADED_SUM;
	rc = ftcc_comm_create(&cfg, &comm);
	if (rc) {
		fprintf(stderr, "member %d: ftcc_comm_create: %s\n", rank, ftcc_strerror(rc));
		return 1;
	}
	in = malloc(o->count * sizeof(float));
	out = malloc(o->count * sizeof(float));
	if (!in || !out) {
		return 1;
	}
	for (;;) {
		struct ftcc_record rec;
		struct demo_slot *sl;
		uint64_t seq;

		ftcc_comm_view(comm, &v, NULL, 0);
		seq = v.next_seq;
		if (seq >= (uint64_t)o->steps) {
			break;
		}
		if (join && !atomic_load(&sh->joined_at[rank])) {
			atomic_store(&sh->joined_at[rank], (int)seq + 1);
		}
		/* The "gradient" of member r at step s: integers, so sums are exact. */
		for (size_t i = 0; i < o->count; i++) {
			in[i] = (float)((rank + 1) * (int)((seq + i) % 13));
		}
		sl = &sh->slot[rank][seq];
		sl->t_start_ns = now_ns();
		rc = ftcc_allreduce(comm, in, out, o->count, FTCC_FLOAT32, FTCC_SUM, &rec);
		sl->t_done_ns = now_ns();
		sl->rc = rc;
		sl->epoch = rec.epoch;
		sl->ncontrib = rec.ncontrib;
		sl->contrib = 0;
		for (int i = 0; i < o->n; i++) {
			sl->contrib |= (uint32_t)ftcc_record_has(&rec, (uint32_t)i) << i;
		}
		sl->sum = fnv1a(out, o->count * sizeof(float));
		atomic_store(&sl->state, 1);
		if (rc && rc != FTCC_ERR_DEGRADED) {
			fprintf(stderr, "member %d: step %" PRIu64 ": %s: %s\n", rank, seq,
				ftcc_strerror(rc), ftcc_comm_last_error(comm));
			break;
		}
		usleep((useconds_t)o->pace_ms * 1000);
	}
	ftcc_comm_destroy(comm);
	free(in);
	free(out);
	return rc ? 1 : 0;
}

static pid_t spawn(const struct demo_opts *o, struct demo_shared *sh, int rank, int join,
		   const char *fault)
{
	pid_t pid;

	fflush(stdout);
	pid = fork();
	if (pid == 0) {
		if (fault) {
			setenv("FTCC_FAULT", fault, 1);
		} else {
			unsetenv("FTCC_FAULT");
		}
		_exit(member_main(o, sh, rank, join));
	}
	return pid;
}

static void usage(void)
{
	fprintf(stderr,
		"usage: ftcc-demo [-n members] [-s steps] [-c floats] [-k victim] [-K kill_step]\n"
		"                 [-r restart_step] [-p pace_ms] [-t failure_timeout_ms]\n"
		"  defaults: 4 members, 40 steps, 262144 floats (1 MiB), member 2 dies inside\n"
		"  step 12 (ring reduce-scatter), restarts after step 20, 100 ms between steps\n");
}

static int parse(int argc, char **argv, struct demo_opts *o)
{
	int c;

	*o = (struct demo_opts){ .n = 4,
				 .steps = 40,
				 .victim = 2,
				 .kill_step = 12,
				 .restart_step = 20,
				 .pace_ms = 100,
				 .timeout_ms = 1000,
				 .count = 262144 };
	while ((c = getopt(argc, argv, "n:s:c:k:K:r:p:t:h")) != -1) {
		switch (c) {
		case 'n':
			o->n = atoi(optarg);
			break;
		case 's':
			o->steps = atoi(optarg);
			break;
		case 'c':
			o->count = (size_t)strtoull(optarg, NULL, 0);
			break;
		case 'k':
			o->victim = atoi(optarg);
			break;
		case 'K':
			o->kill_step = atoi(optarg);
			break;
		case 'r':
			o->restart_step = atoi(optarg);
			break;
		case 'p':
			o->pace_ms = atoi(optarg);
			break;
		case 't':
			o->timeout_ms = atoi(optarg);
			break;
		default:
			usage();
			return -1;
		}
	}
	if (o->n < 2 || o->n > DEMO_MAX_MEMBERS || o->steps < 1 || o->steps > DEMO_MAX_STEPS ||
	    o->victim < 0 || o->victim >= o->n || o->count < 1 || o->pace_ms < 0) {
		usage();
		return -1;
	}
	return 0;
}

/* Prints step @s once every member expected to finish it did; 1 when printed. */
static int print_step(const struct demo_opts *o, struct demo_shared *sh, int s, const int *alive,
		      int64_t median_ns, int *agree)
{
	const struct demo_slot *first = NULL;
	int64_t t1 = 0; /* longest time a member spent in the step */
	int members = 0, same = 1;

	for (int m = 0; m < o->n; m++) {
		const struct demo_slot *sl = &sh->slot[m][s];

		if (!atomic_load(&sl->state)) {
			if (alive[m] && (!atomic_load(&sh->joined_at[m]) ||
					 s >= atomic_load(&sh->joined_at[m]) - 1)) {
				return 0;
			}
			continue;
		}
		members++;
		if (!first) {
			first = sl;
		} else if (sl->sum != first->sum || sl->contrib != first->contrib ||
			   sl->epoch != first->epoch) {
			same = 0;
		}
		/* A restarted member's first step began when it was admitted, long before the
		 * others got there: it says nothing about the step's own time. */
		if (s != atomic_load(&sh->joined_at[m]) - 1 &&
		    sl->t_done_ns - sl->t_start_ns > t1) {
			t1 = sl->t_done_ns - sl->t_start_ns;
		}
	}
	if (!first) {
		return 1;
	}
	*agree &= same;
	printf("step %3d  epoch %2" PRIu64 "  contributors %u/%d {", s, first->epoch,
	       first->ncontrib, o->n);
	for (int m = 0; m < o->n; m++) {
		if (first->contrib >> m & 1) {
			printf("%s%d", (first->contrib & ((1u << m) - 1)) ? "," : "", m);
		}
	}
	printf("}  %7.2f ms  result %016" PRIx64 " %s on %d member%s%s\n", (double)t1 / 1e6,
	       first->sum, same ? "identical" : "DIFFERENT", members, members == 1 ? "" : "s",
	       median_ns && t1 > 5 * median_ns + 20000000 ? "   <- stall" : "");
	fflush(stdout);
	return 1;
}

int main(int argc, char **argv)
{
	struct demo_opts o;
	struct demo_shared *sh;
	pid_t pid[DEMO_MAX_MEMBERS];
	int alive[DEMO_MAX_MEMBERS];
	char fault[64];
	int next = 0, agree = 1, restarted = 0, failed = 0;
	int64_t deadline, median_ns = 0;

	if (parse(argc, argv, &o)) {
		return 2;
	}
	snprintf(o.group, sizeof(o.group), "demo-%d", (int)getpid());
	o.port = 20000 + (int)(getpid() % 20000);
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mmap");
		return 1;
	}
	printf("ftcc-demo: %d members on 127.0.0.1, embedded coordinator, %zu float32 per "
	       "allreduce, %d steps\n",
	       o.n, o.count, o.steps);
	printf("ftcc-demo: member %d will be SIGKILLed inside step %d (ring reduce-scatter) and "
	       "restarted after step %d\n\n",
	       o.victim, o.kill_step, o.restart_step);
	snprintf(fault, sizeof(fault), "rs:%d:0:kill", o.kill_step);
	for (int m = 0; m < o.n; m++) {
		pid[m] = spawn(&o, sh, m, 0, m == o.victim && o.kill_step < o.steps ? fault : NULL);
		alive[m] = 1;
	}
	deadline = now_ns() + (int64_t)(o.steps * (o.pace_ms + 500) + 30000) * 1000000;
	while (next < o.steps && now_ns() < deadline) {
		int status;
		pid_t w = waitpid(-1, &status, WNOHANG);

		for (int m = 0; w > 0 && m < o.n; m++) {
			if (pid[m] == w && alive[m]) {
				alive[m] = 0;
				if (WIFSIGNALED(status)) {
					printf("*** member %d died (signal %d) during step %d\n", m,
					       WTERMSIG(status), next);
				} else if (WEXITSTATUS(status)) {
					failed = 1;
				}
			}
		}
		if (!restarted && !alive[o.victim] && next > o.restart_step) {
			printf("*** member %d restarts and asks to join\n", o.victim);
			pid[o.victim] = spawn(&o, sh, o.victim, 1, NULL);
			alive[o.victim] = 1;
			restarted = 1;
		}
		if (print_step(&o, sh, next, alive, median_ns, &agree)) {
			if (next == 4) {
				int64_t t = 0;

				for (int m = 0; m < o.n; m++) {
					const struct demo_slot *sl = &sh->slot[m][3];

					t = sl->t_done_ns - sl->t_start_ns > t ?
						    sl->t_done_ns - sl->t_start_ns :
						    t;
				}
				median_ns = t;
			}
			next++;
			continue;
		}
		usleep(2000);
	}
	for (int m = 0; m < o.n; m++) {
		int status;

		if (alive[m] && waitpid(pid[m], &status, 0) == pid[m] &&
		    (!WIFEXITED(status) || WEXITSTATUS(status))) {
			failed = 1;
		}
	}
	if (next < o.steps) {
		printf("ftcc-demo: FAILED: step %d did not complete in time\n", next);
		return 1;
	}
	printf("\nftcc-demo: %s: every step's result identical on every member that completed "
	       "it%s\n",
	       agree && !failed ? "OK" : "FAILED", agree ? "" : " -- NOT");
	return agree && !failed ? 0 : 1;
}
