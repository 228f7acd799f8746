/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-ctl-bench: how fast the membership service reacts, and what it costs.
 *
 *   failover  N forked members on loopback (embedded coordinator); a victim is SIGKILLed or
 *             SIGSTOPped; the time from the signal to the new epoch at every survivor, per rep.
 *   scale     a coordinator daemon in its own process and N members heartbeating at the
 *             default rate (N-1 threads here, one forked process): the daemon's CPU use, then
 *             the forked member is SIGKILLed and the time until all N-1 see the new epoch.
 *
 * Prints one line per measurement plus medians; times are CLOCK_MONOTONIC, comparable across
 * processes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/ctl.h"

#define MAXN 1024

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(int ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* What each member process publishes (shared page). */
struct slot {
	_Atomic uint64_t epoch;	   /* newest epoch seen */
	_Atomic uint64_t t_epoch;  /* when it was first seen */
	_Atomic int state;	   /* enum ctl_member_state */
	_Atomic uint32_t nmembers; /* in that epoch */
};

struct shared {
	_Atomic int stop;
	struct slot s[MAXN];
};

static int free_port(void)
{
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(a);
	int fd = socket(AF_INET, SOCK_STREAM, 0), port = -1;

	if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
	    getsockname(fd, (struct sockaddr *)&a, &len) == 0) {
		port = ntohs(a.sin_port);
	}
	if (fd >= 0) {
		close(fd);
	}
	return port;
}

/* Follows member @m's view into @sl until @stop. */
static void follow(struct ctl_member *m, struct slot *sl, _Atomic int *stop)
{
	struct ctl_view v;

	while (!atomic_load(stop)) {
		ctl_member_view(m, &v);
		atomic_store(&sl->state, (int)v.state);
		if (v.e && v.e->epoch != atomic_load(&sl->epoch)) {
			atomic_store(&sl->t_epoch, now_ns());
			atomic_store(&sl->nmembers, v.e->nmembers);
			atomic_store(&sl->epoch, v.e->epoch);
		}
		ctl_epoch_put(v.e);
		sleep_ms(1);
	}
}

static int run_member(const struct ctl_member_cfg *cfg, struct slot *sl, _Atomic int *stop)
{
	struct ctl_member *m;
	int rc = ctl_member_create(cfg, &m);

	if (rc) {
		fprintf(stderr, "member %u: create: %s\n", cfg->id, strerror(-rc));
		return 1;
	}
	follow(m, sl, stop);
	ctl_member_destroy(m);
	return 0;
}

/* Waits until every member in [0, n) but @skip (and those with skip2) has seen an epoch
 * > @after; returns the latest time it was seen, 0 on timeout. Fills *@first. */
static uint64_t wait_epoch(struct shared *sh, int n, int skip, uint64_t after, int timeout_ms,
			   uint64_t *first, uint32_t *nmembers)
{
	uint64_t deadline = now_ns() + (uint64_t)timeout_ms * 1000000ull;

	while (now_ns() < deadline) {
		uint64_t last = 0, lo = UINT64_MAX;
		int i, all = 1;

		for (i = 0; i < n && all; i++) {
			if (i == skip) {
				continue;
			}
			if (atomic_load(&sh->s[i].epoch) <= after) {
				all = 0;
				break;
			}
			uint64_t t = atomic_load(&sh->s[i].t_epoch);
			last = t > last ? t : last;
			lo = t < lo ? t : lo;
			*nmembers = atomic_load(&sh->s[i].nmembers);
		}
		if (all) {
			*first = lo;
			return last;
		}
		sleep_ms(1);
	}
	return 0;
}

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(*v), cmp_d);
	return n ? (n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2) : 0;
}

/* ---- failover ------------------------------------------------------------------------------ */

static int failover_once(int n, const char *kind, int timeout_ms, double *out_ms)
{
	static char addr_buf[MAXN][32];
	const char *addrs[MAXN];
	struct shared *sh;
	pid_t pids[MAXN];
	int victim, sig, i, rc = -1;
	uint64_t t0, last, first;
	uint32_t nm = 0;
	char group[32];

	victim = !strcmp(kind, "kill-coord") ? 0 : n - 1;
	sig = !strcmp(kind, "stop-member") ? SIGSTOP : SIGKILL;
	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		return -1;
	}
	snprintf(group, sizeof(group), "bench-%d-%u", getpid(), (unsigned)(now_ns() % 100000));
	for (i = 0; i < n; i++) {
		snprintf(addr_buf[i], sizeof(addr_buf[i]), "127.0.0.1:%d", free_port());
		addrs[i] = addr_buf[i];
	}
	for (i = 0; i < n; i++) {
		pids[i] = fork();
		if (pids[i] == 0) {
			struct ctl_member_cfg cfg = { .group = group,
						      .id = (uint32_t)i,
						      .expected = (uint32_t)n,
						      .coordinator = "",
						      .addrs = addrs,
						      .timeout_ms = timeout_ms };

			prctl(PR_SET_PDEATHSIG, SIGKILL);
			_exit(run_member(&cfg, &sh->s[i], &sh->stop));
		}
	}
	if (!wait_epoch(sh, n, -1, 0, 30000, &first, &nm)) {
		fprintf(stderr, "failover: group of %d did not form\n", n);
		goto out;
	}
	sleep_ms(300); /* a few heartbeats in the steady state */
	t0 = now_ns();
	kill(pids[victim], sig);
	last = wait_epoch(sh, n, victim, 1, 4 * timeout_ms + 5000, &first, &nm);
	if (!last) {
		fprintf(stderr, "failover: no new epoch after %s\n", kind);
		goto out;
	}
	*out_ms = (double)(last - t0) / 1e6;
	printf("failover n=%d %s (timeout %d ms): new epoch (%u members) at the first survivor "
	       "after %.1f ms, at every survivor after %.1f ms\n",
	       n, kind, timeout_ms, nm, (double)(first - t0) / 1e6, *out_ms);
	fflush(stdout);
	rc = 0;
out:
	atomic_store(&sh->stop, 1);
	for (i = 0; i < n; i++) {
		if (i == victim && sig == SIGSTOP) {
			kill(pids[i], SIGKILL);
		}
	}
	for (i = 0; i < n; i++) {
		int st;
		uint64_t dl = now_ns() + 2000000000ull;

		while (waitpid(pids[i], &st, WNOHANG) == 0 && now_ns() < dl) {
			sleep_ms(5);
		}
		kill(pids[i], SIGKILL);
		waitpid(pids[i], &st, WNOHANG);
	}
	munmap(sh, sizeof(*sh));
	return rc;
}

static int failover(int n, const char *kind, int reps, int timeout_ms)
{
	double t[64];
	int k, ok = 0;

	for (k = 0; k < reps && k < 64; k++) {
		if (failover_once(n, kind, timeout_ms, &t[ok]) == 0) {
			ok++;
		}
	}
	if (!ok) {
		return 1;
	}
	printf("failover n=%d %s: median %.1f ms over %d reps (kill to new epoch at every "
	       "survivor)\n",
	       n, kind, median(t, ok), ok);
	return ok == reps ? 0 : 1;
}

/* ---- scale --------------------------------------------------------------------------------- */

/* CPU seconds (user + system) used so far by @pid. */
static double cpu_s(pid_t pid)
{
	char path[64], buf[1024], *p;
	unsigned long ut = 0, st = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	f = fopen(path, "r");
	if (!f) {
		return -1;
	}
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	p = strrchr(buf, ')');
	if (!p ||
	    sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st) != 2) {
		return -1;
	}
	return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int scale(int n, int seconds)
{
	static struct ctl_member *ms[MAXN];
	struct shared *sh;
	char spec[64], group[32];
	pid_t daemon_pid, last_pid;
	int port = free_port(), i, rc = 1;
	uint64_t t0, t1, first, last;
	double c0, c1;
	uint32_t nm = 0;

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED || n < 2 || n > MAXN) {
		return 1;
	}
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", port);
	snprintf(group, sizeof(group), "scale-%d", getpid());
	daemon_pid = fork();
	if (daemon_pid == 0) {
		struct ctl_daemon *d;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (ctl_daemon_start(spec, &d)) {
			_exit(1);
		}
		while (!atomic_load(&sh->stop)) {
			sleep_ms(20);
		}
		ctl_daemon_stop(d);
		_exit(0);
	}
	sleep_ms(200);
	last_pid = fork();
	if (last_pid == 0) {
		struct ctl_member_cfg cfg = { .group = group,
					      .id = (uint32_t)(n - 1),
					      .expected = (uint32_t)n,
					      .coordinator = spec };

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		_exit(run_member(&cfg, &sh->s[n - 1], &sh->stop));
	}
	for (i = 0; i < n - 1; i++) {
		struct ctl_member_cfg cfg = { .group = group,
					      .id = (uint32_t)i,
					      .expected = (uint32_t)n,
					      .coordinator = spec };

		if (ctl_member_create(&cfg, &ms[i])) {
			fprintf(stderr, "scale: member %d could not start\n", i);
			goto out;
		}
	}
	/* one follower thread would be more faithful; polling from here is enough */
	t0 = now_ns();
	for (;;) {
		int all = 1;

		for (i = 0; i < n - 1; i++) {
			struct ctl_view v;

			ctl_member_view(ms[i], &v);
			if (v.e && !atomic_load(&sh->s[i].epoch)) {
				atomic_store(&sh->s[i].t_epoch, now_ns());
				atomic_store(&sh->s[i].nmembers, v.e->nmembers);
				atomic_store(&sh->s[i].epoch, v.e->epoch);
			}
			all &= v.e != NULL;
			ctl_epoch_put(v.e);
		}
		if (all && atomic_load(&sh->s[n - 1].epoch)) {
			break;
		}
		if (now_ns() - t0 > 60000000000ull) {
			fprintf(stderr, "scale: %d members did not form in 60 s\n", n);
			goto out;
		}
		sleep_ms(5);
	}
	printf("scale n=%d: group formed in %.1f ms\n", n, (double)(now_ns() - t0) / 1e6);
	c0 = cpu_s(daemon_pid);
	t0 = now_ns();
	sleep_ms(seconds * 1000);
	c1 = cpu_s(daemon_pid);
	t1 = now_ns();
	printf("scale n=%d: coordinator daemon CPU %.2f%% of one core over %.1f s of "
	       "heartbeats\n",
	       n, 100.0 * (c1 - c0) / ((double)(t1 - t0) / 1e9), (double)(t1 - t0) / 1e9);
	c0 = cpu_s(getpid());
	printf("scale n=%d: the %d member threads of this process used %.2f%% of one core "
	       "(since start)\n",
	       n, n - 1, 100.0 * c0 / ((double)(now_ns() - t0) / 1e9 + seconds));
	t0 = now_ns();
	kill(last_pid, SIGKILL);
	last = 0;
	first = UINT64_MAX;
	for (;;) {
		int all = 1;

		for (i = 0; i < n - 1; i++) {
			struct ctl_view v;

			ctl_member_view(ms[i], &v);
			if (v.e && v.e->epoch > 1 && atomic_load(&sh->s[i].epoch) == 1) {
				uint64_t t = now_ns();

				atomic_store(&sh->s[i].epoch, v.e->epoch);
				atomic_store(&sh->s[i].t_epoch, t);
				nm = v.e->nmembers;
				last = t;
				first = t < first ? t : first;
			}
			all &= atomic_load(&sh->s[i].epoch) > 1;
			ctl_epoch_put(v.e);
		}
		if (all) {
			break;
		}
		if (now_ns() - t0 > 30000000000ull) {
			fprintf(stderr, "scale: no new epoch 30 s after the kill\n");
			goto out;
		}
		sleep_ms(1);
	}
	printf("scale n=%d: SIGKILL of one member: new epoch (%u members) at the first member "
	       "after %.1f ms, at all %d after %.1f ms\n",
	       n, nm, (double)(first - t0) / 1e6, n - 1, (double)(last - t0) / 1e6);
	rc = 0;
out:
	for (i = 0; i < n - 1; i++) {
		ctl_member_destroy(ms[i]);
	}
	atomic_store(&sh->stop, 1);
	kill(last_pid, SIGKILL);
	waitpid(last_pid, NULL, 0);
	waitpid(daemon_pid, NULL, 0);
	munmap(sh, sizeof(*sh));
	return rc;
}

static void usage(void)
{
	fprintf(stderr, "usage: ftcc-ctl-bench failover [-n members] [-k kill-member|kill-coord|"
			"stop-member] [-r reps] [-t timeout_ms]\n"
			"       ftcc-ctl-bench scale [-n members] [-d seconds]\n");
}

int main(int argc, char **argv)
{
	const char *kind = "kill-member";
	int n = 5, reps = 5, timeout_ms = 2000, seconds = 10, opt;

	if (argc < 2) {
		usage();
		return 2;
	}
	optind = 2;
	while ((opt = getopt(argc, argv, "n:k:r:t:d:")) != -1) {
		switch (opt) {
		case 'n':
			n = atoi(optarg);
			break;
		case 'k':
			kind = optarg;
			break;
		case 'r':
			reps = atoi(optarg);
			break;
		case 't':
			timeout_ms = atoi(optarg);
			break;
		case 'd':
			seconds = atoi(optarg);
			break;
		default:
			usage();
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	if (n < 2 || n > MAXN) {
		fprintf(stderr, "-n must be 2..%d\n", MAXN);
		return 2;
	}
	if (!strcmp(argv[1], "failover")) {
		return failover(n, kind, reps, timeout_ms);
	}
	if (!strcmp(argv[1], "scale")) {
		return scale(n, seconds);
	}
	usage();
	return 2;
}
