/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-perf common pieces: size parsing, the bootstrap socketpair mesh, the check pattern,
 * gathering per-iteration times to rank 0, statistics over them (min, median, p99), and the
 * report (nccl-tests-style table for people, JSON lines for scripts).
 */
#include "perf.h"

#include <ctype.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

int perf_parse_size(const char *text, size_t *out)
{
	char *end;
	unsigned long long v, mult = 1;

	errno = 0;
	v = strtoull(text, &end, 10);
	if (errno || end == text) {
		return -EINVAL;
	}
	switch (toupper((unsigned char)*end)) {
	case 'K':
		mult = 1ull << 10;
		end++;
		break;
	case 'M':
		mult = 1ull << 20;
		end++;
		break;
	case 'G':
		mult = 1ull << 30;
		end++;
		break;
	default:
		break;
	}
	if (toupper((unsigned char)*end) == 'B') {
		end++;
	}
	if (*end != '\0' || (v && mult > (unsigned long long)SIZE_MAX / v)) {
		return -EINVAL;
	}
	*out = (size_t)(v * mult);
	return 0;
}

uint64_t perf_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

int perf_boot_create(struct perf_boot *all, int nranks)
{
	int i, j, sv[2];

	for (i = 0; i < nranks; i++) {
		all[i].nranks = nranks;
		all[i].rank = i;
		all[i].run_id = (uint64_t)getpid(); /* the parent's: every forked rank has it */
		for (j = 0; j < PERF_MAX_RANKS; j++) {
			all[i].fds[j] = -1;
			snprintf(all[i].host[j], sizeof(all[i].host[j]), "127.0.0.1");
		}
	}
	for (i = 0; i < nranks; i++) {
		for (j = i + 1; j < nranks; j++) {
			if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv)) {
				return -errno;
			}
			all[i].fds[j] = sv[0];
			all[j].fds[i] = sv[1];
		}
	}
	return 0;
}

/* In the child of @rank: closes every end that belongs to another rank. */
void perf_boot_keep(struct perf_boot *all, int rank)
{
	int i;

	for (i = 0; i < all[0].nranks; i++) {
		if (i != rank) {
			perf_boot_close(&all[i]);
		}
	}
}

void perf_boot_close(struct perf_boot *b)
{
	int i;

	for (i = 0; i < PERF_MAX_RANKS; i++) {
		if (b->fds[i] >= 0) {
			close(b->fds[i]);
			b->fds[i] = -1;
		}
	}
}

int perf_boot_send(struct perf_boot *b, int peer, const void *buf, size_t len)
{
	const char *p = buf;

	while (len) {
		ssize_t n = send(b->fds[peer], p, len, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n < 0) {
			return errno == ECONNRESET ? -EPIPE : -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int perf_boot_recv(struct perf_boot *b, int peer, void *buf, size_t len)
{
	struct pollfd pfd = { .fd = b->fds[peer], .events = POLLIN };
	char *p = buf;

	while (len) {
		ssize_t n;
		int ready = poll(&pfd, 1, PERF_BOOT_TIMEOUT_MS);

		if (ready < 0 && errno == EINTR) {
			continue;
		}
		if (ready <= 0) {
			fprintf(stderr,
				"ftcc-perf: rank %d: rank %d silent for %d s on the bootstrap\n",
				b->rank, peer, PERF_BOOT_TIMEOUT_MS / 1000);
			return ready ? -errno : -ETIMEDOUT;
		}
		n = recv(b->fds[peer], p, len, 0);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			return -EPIPE;
		}
		if (n < 0) {
			return -errno;
		}
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

int perf_boot_barrier(struct perf_boot *b)
{
	char token = 'b';
	int i, rc = 0;

	if (b->rank != 0) {
		rc = perf_boot_send(b, 0, &token, 1);
		return rc ? rc : perf_boot_recv(b, 0, &token, 1);
	}
	for (i = 1; i < b->nranks && !rc; i++) {
		rc = perf_boot_recv(b, i, &token, 1);
	}
	for (i = 1; i < b->nranks && !rc; i++) {
		rc = perf_boot_send(b, i, &token, 1);
	}
	return rc;
}

/* The pattern word at 8-byte index @k of iteration @iter (a splitmix64 step: cheap, and every
 * byte depends on both the iteration and the offset, so stale or shifted data is caught). */
static uint64_t pattern_word(uint64_t iter, uint64_t k)
{
	uint64_t z = (iter + 1) * 0x9E3779B97F4A7C15ull + k * 0xD1B54A32D192ED03ull;

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
	return z ^ (z >> 31);
}

void perf_pattern_fill(void *buf, size_t len, uint64_t iter)
{
	unsigned char *p = buf;
	size_t k, words = len / 8;

	for (k = 0; k < words; k++) {
		uint64_t w = pattern_word(iter, k);

		memcpy(p + 8 * k, &w, 8);
	}
	if (len % 8) {
		uint64_t w = pattern_word(iter, words);

		memcpy(p + 8 * words, &w, len % 8);
	}
}

static unsigned bytes_differ(uint64_t a, uint64_t b, size_t nbytes)
{
	unsigned char x[8], y[8];
	unsigned i, n = 0;

	memcpy(x, &a, 8);
	memcpy(y, &b, 8);
	for (i = 0; i < nbytes; i++) {
		n += x[i] != y[i];
	}
	return n;
}

uint64_t perf_pattern_wrong(const void *buf, size_t len, uint64_t iter)
{
	const unsigned char *p = buf;
	size_t k, words = len / 8;
	uint64_t wrong = 0;

	for (k = 0; k < words; k++) {
		uint64_t w, want = pattern_word(iter, k);

		memcpy(&w, p + 8 * k, 8);
		if (w != want) {
			wrong += bytes_differ(w, want, 8);
		}
	}
	if (len % 8) {
		uint64_t w = 0, want = pattern_word(iter, words);

		memcpy(&w, p + 8 * words, len % 8);
		wrong += bytes_differ(w, want, len % 8);
	}
	return wrong;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

/* Rank 0: min, median, nearest-rank p99 and mean of @n combined times (sorted in place). */
static void stats_fill(uint64_t *t, int n, struct perf_result *res)
{
	double sum = 0;
	int i, p99 = (99 * n + 99) / 100 - 1;

	qsort(t, (size_t)n, sizeof(*t), cmp_u64);
	for (i = 0; i < n; i++) {
		sum += (double)t[i];
	}
	res->iters = n;
	res->t_min = (double)t[0] / 1e3;
	res->t_med =
		(n % 2 ? (double)t[n / 2] : ((double)t[n / 2 - 1] + (double)t[n / 2]) / 2) / 1e3;
	res->t_p99 = (double)t[p99 < 0 ? 0 : p99] / 1e3;
	res->t_mean = sum / n / 1e3;
}

int perf_collect(struct perf_boot *b, const uint64_t *times_ns, int n, uint64_t wrong,
		 enum perf_combine how, struct perf_result *res)
{
	uint64_t *all, *peer, peer_wrong;
	int i, r, rc = 0;

	if (b->rank != 0) {
		rc = perf_boot_send(b, 0, times_ns, sizeof(*times_ns) * (size_t)n);
		return rc ? rc : perf_boot_send(b, 0, &wrong, sizeof(wrong));
	}
	all = malloc(2 * sizeof(*all) * (size_t)n);
	if (!all) {
		return -ENOMEM;
	}
	peer = all + n;
	memcpy(all, times_ns, sizeof(*all) * (size_t)n);
	res->wrong = wrong;
	for (r = 1; r < b->nranks && !rc; r++) {
		rc = perf_boot_recv(b, r, peer, sizeof(*peer) * (size_t)n);
		if (!rc) {
			rc = perf_boot_recv(b, r, &peer_wrong, sizeof(peer_wrong));
		}
		for (i = 0; !rc && how == PERF_TIME_MAX && i < n; i++) {
			all[i] = peer[i] > all[i] ? peer[i] : all[i];
		}
		res->wrong += peer_wrong;
	}
	if (!rc && n > 0) {
		stats_fill(all, n, res);
	}
	free(all);
	return rc;
}

void perf_result_bw(struct perf_result *res, double bytes, double busbw_factor)
{
	res->algbw = res->t_med > 0 ? bytes / (res->t_med * 1e3) : 0;
	res->busbw = res->algbw * busbw_factor;
}

void *perf_buf_alloc(size_t size)
{
	void *p = NULL;

	if (posix_memalign(&p, 4096, size ? size : 1)) {
		return NULL;
	}
	memset(p, 0, size ? size : 1);
	return p;
}

/* Reporting: only rank 0 prints; stdout is flushed after every row so a long sweep shows
 * progress. */
void perf_report_header(const struct perf_opts *o, const char *notes)
{
	if (o->json) {
		return; /* JSON lines carry every parameter in each object */
	}
	printf("# ftcc-perf mode %s%s: iters %d, warmup %d, depth %d, check %d\n", o->mode,
	       o->roundtrip ? " (round trip)" : "", o->iters, o->warmup, o->depth, o->check);
	if (notes) {
		fputs(notes, stdout);
	}
	printf("# time columns are per iteration over %d timed iterations; algbw and busbw use the "
	       "median\n#\n",
	       o->iters);
	printf("# %12s %12s %6s %6s %10s %10s %10s %12s %12s %8s\n", "size", "count", "type",
	       "redop", "min(us)", "med(us)", "p99(us)", "algbw(GB/s)", "busbw(GB/s)", "#wrong");
	fflush(stdout);
}

void perf_report_row(const struct perf_opts *o, const struct perf_result *r)
{
	char wrong[24] = "null"; /* JSON null / table N/A when data is not checked */

	if (o->check) {
		snprintf(wrong, sizeof(wrong), "%llu", (unsigned long long)r->wrong);
	}
	if (o->json) {
		printf("{\"mode\":\"%s\",\"roundtrip\":%s,\"size\":%zu,\"count\":%zu,\"type\":\"%s\","
		       "\"redop\":\"%s\",\"iters\":%d,\"warmup\":%d,\"depth\":%d,\"yield\":%d,\"check\":%d,"
		       "\"time_min_us\":%.3f,\"time_median_us\":%.3f,\"time_p99_us\":%.3f,"
		       "\"time_mean_us\":%.3f,\"algbw_GBps\":%.4f,\"busbw_GBps\":%.4f,"
		       "\"wrong\":%s}\n",
		       o->mode, o->roundtrip ? "true" : "false", r->size, r->count, r->type,
		       r->redop, r->iters, o->warmup, o->depth, o->yield, o->check, r->t_min,
		       r->t_med, r->t_p99, r->t_mean, r->algbw, r->busbw, wrong);
	} else {
		printf("  %12zu %12zu %6s %6s %10.2f %10.2f %10.2f %12.3f %12.3f %8s\n", r->size,
		       r->count, r->type, r->redop, r->t_min, r->t_med, r->t_p99, r->algbw,
		       r->busbw, o->check ? wrong : "N/A");
	}
	fflush(stdout);
}
