/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf main: options, the table of modes, and the ranks.
 * Each mode is one row of perf_modes[]; main forks the mode's ranks on this host, connected by
 * a socketpair mesh made before fork(), and turns their exit statuses into its own. Given a
 * rank (--rank, or a launcher's environment: mpirun, srun, torchrun), it runs that one rank
 * instead, joined to the others over TCP (perf_hosts.c), as nccl-tests runs under mpirun.
 * Forked ranks are bound to cores as mpirun binds its ranks by default (--bind), so that a
 * comparison with an MPI baseline on this host runs both under the same placement.
 */
#define _GNU_SOURCE /* sched_setaffinity */
#include "perf.h"

#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

/* Adding a mode = one row here (and its run function). */
static const struct perf_mode perf_modes[] = {
	{ .name = "p2p",
	  .nranks = 2,
	  .doc = "rank 0 -> rank 1 through the plug-in's isend/irecv/test (-R: round trip)",
	  .run = perf_p2p_run,
	  .victim = -1 },
	{ .name = "msg",
	  .nranks = 2,
	  .doc = "rank 0 -> rank 1 through the C API's point-to-point messages, ftcc_isend / "
		 "ftcc_irecv, each waited for (-R: round trip); compare with sock",
	  .run = perf_msg_run,
	  .victim = -1 },
	{ .name = "fault",
	  .nranks = 2,
	  .doc = "rank 0 streams -b byte messages to rank 1, which gets SIG<-K> at iteration "
		 "-k; prints when rank 0's pending request reports the loss",
	  .run = perf_fault_run,
	  .victim = 1 },
	{ .name = "sock",
	  .nranks = 2,
	  .doc = "baseline: one blocking TCP stream (loopback, or between the hosts of ranks 0 and "
		 "1), TCP_NODELAY (-R: ping-pong)",
	  .run = perf_sock_run,
	  .victim = -1 },
	{ .name = "allreduce",
	  .nranks = 2,
	  .doc = "the ranks form a group (ftcc.h, embedded coordinator) and time blocking "
		 "ftcc_allreduce of -t elements with -o (-P: ftcc_iallreduce + ftcc_test "
		 "polled); -I in place; --kill R@I",
	  .run = perf_allreduce_run,
	  .victim = -1,
	  .max_ranks = 8 },
	{ .name = "broadcast",
	  .nranks = 2,
	  .doc = "the ranks form a group (ftcc.h) and time blocking ftcc_broadcast from rank 0 of "
		 "a buffer of the size (float32; busbw = algbw)",
	  .run = perf_colls_run,
	  .victim = -1,
	  .max_ranks = 8 },
	{ .name = "allgather",
	  .nranks = 2,
	  .doc = "blocking ftcc_allgather, the size being all ranks' slots (float32; busbw = "
		 "algbw * (n-1)/n)",
	  .run = perf_colls_run,
	  .victim = -1,
	  .max_ranks = 8 },
	{ .name = "reduce_scatter",
	  .nranks = 2,
	  .doc = "blocking ftcc_reduce_scatter, the size being all ranks' slots (float32 sum; "
		 "busbw = algbw * (n-1)/n)",
	  .run = perf_colls_run,
	  .victim = -1,
	  .max_ranks = 8 },
	{ .name = "collnet",
	  .nranks = 2,
	  .doc = "the ranks dlopen the plug-in, form a group through ncclCollNetPlugin_v11 "
		 "(listen on device 0, handles swapped, connect) and time its iallreduce + "
		 "test, polled as NCCL's proxy does (-y), of -t elements with -o; -I in place; "
		 "prints the close time",
	  .run = perf_collnet_run,
	  .victim = -1,
	  .max_ranks = 8 },
};

#define PERF_NMODES (sizeof(perf_modes) / sizeof(perf_modes[0]))
#define PERF_KILL_GRACE_NS (5ull * 1000000000ull)

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
		"usage: ftcc-perf [-m mode] [-b minbytes] [-e maxbytes] [-f stepfactor] [-n iters]\n"
		"                 [-w warmup] [-c 0|1] [-d depth] [-y 0|1] [-p plugin.so] [-R] [-j]\n"
		"                 [-k iter] [-K KILL|STOP] [-N ranks] [-t type] [-o op] [-q codec] [-I] [-P]\n"
		"                 [--kill R@I] [--rank R --boot IPV4:PORT] [--bind auto|core|none]\n"
		"  -b, -e   smallest and largest message size; K, M, G suffixes (default 32M)\n"
		"  -f       multiply the size by this until it exceeds maxbytes (default 2)\n"
		"  -n, -w   timed and warm-up iterations per size (default 20, 5)\n"
		"  -c 1     fill with a pattern of (iteration, offset), verify, count #wrong bytes\n"
		"  -d       requests in flight per side, 1..32 (default 8, like NCCL_STEPS)\n"
		"  -y 0|1   plug-in modes and allreduce -P: yield the CPU after a poll pass without\n"
		"           progress, as NCCL's proxy thread does (default 1); 0 spins\n"
		"  -p       plug-in to dlopen (default $FTCC_PLUGIN_PATH, else libnccl-net-ftcc.so)\n"
		"  -R       round-trip latency: one message in flight, time = full round trip\n"
		"  -j       JSON lines (one object per size) instead of the table\n"
		"  -k, -K   fault mode: iteration (default 20) and signal, KILL (default) or STOP\n"
		"  -N       allreduce and collnet modes: ranks, 1..8 (default 2)\n"
		"  -t, -o   allreduce and collnet modes: element type (int8 uint8 int32 uint32 int64\n"
		"           uint64 float16 float32 float64 bfloat16 fp8_e4m3 fp8_e5m2; default\n"
		"           float32) and operator (sum prod max min avg; default sum)\n"
		"  -I       allreduce and collnet modes: in place (sendbuf == recvbuf)\n"
		"  -q       allreduce mode: quantized with this codec (int8 fp8_e4m3 int4), float32\n"
		"           or bfloat16 sum; with -c 1 each result is checked against the\n"
		"           documented error bound and the largest error printed\n"
		"  -P       allreduce mode: poll: ftcc_iallreduce + ftcc_test, sched_yield after a\n"
		"           test that did not finish (-y), as the collnet mode drives the plug-in\n"
		"  --kill R@I  allreduce mode: rank R (1..N-1) SIGKILLs itself at timed iteration\n"
		"           I of the last size; rank 0 reports the survivors' stall and record\n"
		"  --rank R, --boot IPV4:PORT  run only rank R of -N ranks in this process, one per\n"
		"           host as under mpirun; rank 0 listens on the boot address. Unset, they\n"
		"           come from the launcher: OMPI_COMM_WORLD_RANK/_SIZE, PMIX_RANK, PMI_RANK/\n"
		"           PMI_SIZE, SLURM_PROCID/SLURM_NTASKS or RANK/WORLD_SIZE, and FTCC_PERF_BOOT\n"
		"           or MASTER_ADDR:MASTER_PORT. Not with the fault mode or --kill\n"
		"  --bind   forked ranks: core binds rank r to the r-th core this process may run\n"
		"           on (needs ranks <= cores); none leaves placement to the scheduler; auto\n"
		"           (default) is core with at most 2 ranks, else none, as mpirun binds its\n"
		"           ranks by default. A rank run under a launcher keeps the launcher's\n"
		"           binding\n"
		"modes:\n");
	for (i = 0; i < PERF_NMODES; i++) {
		if (perf_modes[i].max_ranks > perf_modes[i].nranks) {
			fprintf(f, "  %-9s %d..%d ranks (-N, default %d): %s\n", perf_modes[i].name,
				1, perf_modes[i].max_ranks, perf_modes[i].nranks,
				perf_modes[i].doc);
		} else {
			fprintf(f, "  %-9s %d ranks: %s\n", perf_modes[i].name,
				perf_modes[i].nranks, perf_modes[i].doc);
		}
	}
}

static int parse_int(const char *text, int lo, int hi, int *out)
{
	char *end;
	long v;

	errno = 0;
	v = strtol(text, &end, 10);
	if (errno || end == text || *end || v < lo || v > hi) {
		return -EINVAL;
	}
	*out = (int)v;
	return 0;
}

/* One option letter with its argument; 0 or -EINVAL. */
static int parse_opt(struct perf_opts *o, int c, const char *arg)
{
	char *end;

	switch (c) {
	case 'b':
		return perf_parse_size(arg, &o->min_bytes);
	case 'e':
		return perf_parse_size(arg, &o->max_bytes);
	case 'f':
		o->step_factor = strtod(arg, &end);
		return *end || !(o->step_factor > 1.0) ? -EINVAL : 0;
	case 'n':
		return parse_int(arg, 1, 1000000, &o->iters);
	case 'w':
		return parse_int(arg, 0, 1000000, &o->warmup);
	case 'c':
		return parse_int(arg, 0, 1, &o->check);
	case 'd':
		return parse_int(arg, 1, 32, &o->depth);
	case 'y':
		return parse_int(arg, 0, 1, &o->yield);
	case 'm':
		o->mode = arg;
		return 0;
	case 'p':
		o->plugin_path = arg;
		return 0;
	case 'j':
		o->json = 1;
		return 0;
	case 'R':
		o->roundtrip = 1;
		return 0;
	case 'k':
		return parse_int(arg, 0, 1000000, &o->fault_iter);
	case 'K':
		if (strcmp(arg, "KILL") && strcmp(arg, "STOP"))
			return -EINVAL;
		o->fault_sig = arg;
		return 0;
	case 'N':
		return parse_int(arg, 1, PERF_MAX_RANKS, &o->nranks);
	case 't':
		o->dtype = arg;
		return 0;
	case 'o':
		o->redop = arg;
		return 0;
	case 'I':
		o->inplace = 1;
		return 0;
	case 'P':
		o->poll = 1;
		return 0;
	case 'q':
		o->codec = arg;
		return perf_q_parse(arg) < 0 ? -EINVAL : 0;
	case 'r': /* --rank R */
		return parse_int(arg, 0, PERF_MAX_RANKS - 1, &o->rank);
	case 'B': /* --boot IPV4:PORT */
		if (strlen(arg) >= sizeof(o->boot))
			return -EINVAL;
		snprintf(o->boot, sizeof(o->boot), "%s", arg);
		return 0;
	case 'C': /* --bind auto|core|none */
		if (!strcmp(arg, "auto"))
			o->bind = PERF_BIND_AUTO;
		else if (!strcmp(arg, "core"))
			o->bind = PERF_BIND_CORE;
		else if (!strcmp(arg, "none"))
			o->bind = PERF_BIND_NONE;
		else
			return -EINVAL;
		return 0;
	case 'X': /* --kill R@I */
		return sscanf(arg, "%d@%d", &o->kill_rank, &o->kill_iter) == 2 &&
				       o->kill_rank >= 1 && o->kill_iter >= 0 ?
			       0 :
			       -EINVAL;
	default:
		return -EINVAL;
	}
}

static int parse_args(int argc, char **argv, struct perf_opts *o)
{
	static const struct option longs[] = { { "kill", required_argument, NULL, 'X' },
					       { "rank", required_argument, NULL, 'r' },
					       { "boot", required_argument, NULL, 'B' },
					       { "bind", required_argument, NULL, 'C' },
					       { NULL, 0, NULL, 0 } };
	int c;

	*o = (struct perf_opts){ .min_bytes = 32u << 20,
				 .max_bytes = 32u << 20,
				 .step_factor = 2.0,
				 .iters = 20,
				 .warmup = 5,
				 .depth = 8,
				 .yield = 1,
				 .mode = "p2p",
				 .fault_iter = 20,
				 .fault_sig = "KILL",
				 .dtype = "float32",
				 .redop = "sum",
				 .kill_rank = -1,
				 .rank = -1,
				 .plugin_path = getenv("FTCC_PLUGIN_PATH") };
	if (!o->plugin_path || !*o->plugin_path) {
		o->plugin_path = "libnccl-net-ftcc.so";
	}
	while ((c = getopt_long(argc, argv, "b:e:f:n:w:c:d:y:m:p:k:K:N:t:o:q:IPjRh", longs,
				NULL)) != -1) {
		if (c == 'h') {
			usage(stdout);
			exit(0);
		}
		if (parse_opt(o, c, optarg)) {
			fprintf(stderr, "ftcc-perf: bad option -%c%s%s\n", optopt ? optopt : c,
				optarg ? " " : "", optarg ? optarg : "");
			return -EINVAL;
		}
	}
	if (optind != argc || o->min_bytes == 0 || o->max_bytes < o->min_bytes) {
		fprintf(stderr,
			"ftcc-perf: need 1 <= minbytes <= maxbytes and no stray arguments\n");
		return -EINVAL;
	}
	return 0;
}

static const struct perf_mode *find_mode(const char *name)
{
	size_t i;

	for (i = 0; i < PERF_NMODES; i++) {
		if (!strcmp(perf_modes[i].name, name)) {
			return &perf_modes[i];
		}
	}
	return NULL;
}

/* Waits for all @n children. After the first failure the others get PERF_KILL_GRACE_NS to end
 * on their own (they see the dead peer's bootstrap socket close), then SIGKILL. Reaped
 * entries of @pids are zeroed. */
static int wait_ranks(pid_t *pids, int n, int victim)
{
	int alive = n, failed = 0, status, r;
	uint64_t kill_at = 0;

	while (alive) {
		pid_t pid = waitpid(-1, &status, kill_at ? WNOHANG : 0);

		if (pid < 0 && errno == EINTR) {
			continue;
		}
		if (pid < 0) {
			return -errno;
		}
		if (pid == 0) {
			if (perf_now_ns() >= kill_at) {
				for (r = 0; r < n; r++) {
					if (pids[r] > 0) {
						kill(pids[r], SIGKILL);
					}
				}
			}
			nanosleep(&(struct timespec){ .tv_nsec = 10 * 1000 * 1000 }, NULL);
			continue;
		}
		for (r = 0; r < n && pids[r] != pid; r++) {
		}
		if (r == n) {
			continue; /* not one of ours */
		}
		pids[r] = 0; /* reaped: never signal that pid again */
		alive--;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
			continue;
		}
		if (r == victim && WIFSIGNALED(status)) {
			continue; /* the fault the mode injected */
		}
		if (WIFSIGNALED(status)) {
			fprintf(stderr, "ftcc-perf: rank %d killed by signal %d\n", r,
				WTERMSIG(status));
		} else {
			fprintf(stderr, "ftcc-perf: rank %d failed (exit %d)\n", r,
				WEXITSTATUS(status));
		}
		if (!failed++) {
			kill_at = perf_now_ns() + PERF_KILL_GRACE_NS;
		}
	}
	return failed ? -EIO : 0;
}

/* The core of CPU @cpu: its package and core ids (sysfs), or the CPU itself where they cannot
 * be read. Hardware threads of one core share it. */
static long long core_of(int cpu)
{
	long long id[2] = { -1, -1 };
	const char *what[2] = { "physical_package_id", "core_id" };

	for (int i = 0; i < 2; i++) {
		char path[96];
		FILE *f;

		snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%d/topology/%s", cpu,
			 what[i]);
		f = fopen(path, "r");
		if (!f || fscanf(f, "%lld", &id[i]) != 1)
			id[i] = -1;
		if (f)
			fclose(f);
	}
	return id[0] < 0 || id[1] < 0 ? -1 - cpu : (id[0] << 20) | id[1];
}

/* The CPUs of forked rank @r of @n under o->bind, in @set: every hardware thread of the r-th
 * core this process may run on, as mpirun binds to a core. 0: bind to them, 1: leave the rank
 * where the scheduler puts it, -EINVAL: "core" asked for more ranks than cores. mpirun's
 * default is to bind to a core with at most 2 ranks; ranks that share cores are not bound. */
static int rank_cpus(const struct perf_opts *o, int r, int n, cpu_set_t *set)
{
	static long long cores[CPU_SETSIZE];
	cpu_set_t allowed;
	int ncores = 0;

	if (o->bind == PERF_BIND_NONE || sched_getaffinity(0, sizeof(allowed), &allowed))
		return 1;
	for (int c = 0; c < CPU_SETSIZE; c++) {
		long long id;
		int k = 0;

		if (!CPU_ISSET(c, &allowed))
			continue;
		id = core_of(c);
		while (k < ncores && cores[k] != id)
			k++;
		if (k == ncores)
			cores[ncores++] = id;
	}
	if (n > ncores)
		return o->bind == PERF_BIND_CORE ? -EINVAL : 1;
	if (o->bind == PERF_BIND_AUTO && n > 2)
		return 1;
	CPU_ZERO(set);
	for (int c = 0; c < CPU_SETSIZE; c++) {
		if (CPU_ISSET(c, &allowed) && core_of(c) == cores[r])
			CPU_SET(c, set);
	}
	return 0;
}

/* Forks @m's ranks (-N of them where the mode allows), each running m->run on its end of the
 * bootstrap mesh, bound per --bind before the rank starts a thread. */
static int run_mode(const struct perf_mode *m, const struct perf_opts *o)
{
	struct perf_boot all[PERF_MAX_RANKS];
	pid_t pids[PERF_MAX_RANKS];
	cpu_set_t cpus;
	int i, r, rc, n = o->nranks ? o->nranks : m->nranks;
	int victim = m->victim >= 0 ? m->victim : o->kill_rank;

	if ((o->nranks && (!m->max_ranks || n > m->max_ranks)) ||
	    (o->kill_rank >= 0 &&
	     (strcmp(m->name, "allreduce") || o->kill_rank >= n || o->kill_iter >= o->iters))) {
		fprintf(stderr,
			"ftcc-perf: mode %s: -N 1..%d; --kill R@I needs 1 <= R < N and I "
			"< -n\n",
			m->name, m->max_ranks ? m->max_ranks : m->nranks);
		return -EINVAL;
	}
	if (rank_cpus(o, 0, n, &cpus) < 0) {
		fprintf(stderr, "ftcc-perf: --bind core: %d ranks and fewer cores\n", n);
		return -EINVAL;
	}
	rc = perf_boot_create(all, n);
	if (rc) {
		fprintf(stderr, "ftcc-perf: socketpair: %s\n", strerror(-rc));
		return rc;
	}
	fflush(NULL);
	for (r = 0; r < n; r++) {
		pids[r] = fork();
		if (pids[r] < 0) {
			rc = -errno;
			break;
		}
		if (pids[r] == 0) {
			perf_boot_keep(all, r);
			if (rank_cpus(o, r, n, &cpus) == 0 &&
			    sched_setaffinity(0, sizeof(cpus), &cpus) != 0) {
				fprintf(stderr, "ftcc-perf: rank %d: sched_setaffinity: %s\n", r,
					strerror(errno));
			}
			rc = m->run(o, &all[r]);
			perf_boot_close(&all[r]);
			fflush(NULL);
			_exit(rc ? 1 : 0);
		}
	}
	for (i = 0; i < n; i++) {
		perf_boot_close(&all[i]);
	}
	if (r < n) {
		fprintf(stderr, "ftcc-perf: fork: %s\n", strerror(-rc));
		for (i = 0; i < r; i++) {
			kill(pids[i], SIGKILL);
		}
		while (wait(NULL) > 0) {
		}
		return rc;
	}
	return wait_ranks(pids, n, victim);
}

/* Runs rank o->rank of @m in this process, joined to the others over TCP. */
static int run_one_rank(const struct perf_mode *m, const struct perf_opts *o)
{
	struct perf_boot b;
	int n = o->nranks ? o->nranks : m->nranks, rc;

	if (m->victim >= 0 || o->kill_rank >= 0 ||
	    (o->nranks && m->max_ranks == 0 && o->nranks != m->nranks) ||
	    (m->max_ranks && n > m->max_ranks) || !o->boot[0]) {
		fprintf(stderr,
			"ftcc-perf: one rank per process needs --boot (or MASTER_ADDR and "
			"MASTER_PORT), a mode other than fault, no --kill, and -N within the "
			"mode's ranks (%s: %d..%d)\n",
			m->name, 1, m->max_ranks ? m->max_ranks : m->nranks);
		return -EINVAL;
	}
	rc = perf_boot_tcp(&b, o->rank, n, o->boot);
	if (rc)
		return rc;
	rc = m->run(o, &b);
	perf_boot_close(&b);
	return rc;
}

int main(int argc, char **argv)
{
	const struct perf_mode *m;
	struct perf_opts o;

	if (parse_args(argc, argv, &o)) {
		usage(stderr);
		return 2;
	}
	m = find_mode(o.mode);
	if (!m) {
		fprintf(stderr, "ftcc-perf: unknown mode '%s'\n", o.mode);
		usage(stderr);
		return 2;
	}
	switch (perf_launch_env(&o.rank, &o.nranks, o.boot, sizeof(o.boot))) {
	case 1:
		return run_one_rank(m, &o) ? 1 : 0;
	case 0:
		break;
	default:
		return 2;
	}
	/* A benchmark on one host: keep the plug-in on loopback unless told otherwise. */
	setenv("FTCC_SOCKET_IFNAME", "lo", 0);
	return run_mode(m, &o) ? 1 : 0;
}
