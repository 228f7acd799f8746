/* SPDX-License-Identifier: BSD-3-Clause */
/* Groups of C API members in forked processes for the point-to-point and state healing tests
 * (p2p_group.h).
 */
#define _GNU_SOURCE
#include "p2p_group.h"

#include <criterion/criterion.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi_net.h"
#include "chaos_proc.h"
#include "ft_group.h"

struct pg_shared *pg;
ftcc_comm_t *pg_comm;
void (*pg_before_create)(int me);
uint32_t pg_nstreams;
static pg_fn cur_fn;

void pg_teardown(void)
{
	chaos_proc_cleanup();
	if (pg)
		munmap(pg, sizeof(*pg));
	pg = NULL;
	pg_before_create = NULL;
	pg_nstreams = 0;
}

static uint8_t pat(uint32_t src, uint64_t tag, size_t i)
{
	return (uint8_t)(src * 31 + tag * 7 + i * 13 + (i >> 8));
}

void pg_fill(uint8_t *b, size_t len, uint32_t src, uint64_t tag)
{
	for (size_t i = 0; i < len; i++)
		b[i] = pat(src, tag, i);
}

/* Index of the first byte that is not the pattern, or -1. */
long pg_check(const uint8_t *b, size_t len, uint32_t src, uint64_t tag)
{
	for (size_t i = 0; i < len; i++)
		if (b[i] != pat(src, tag, i))
			return (long)i;
	return -1;
}

static uint32_t sum_of(const uint8_t *b, size_t len)
{
	uint32_t s = 2166136261u;

	for (size_t i = 0; i < len; i++)
		s = (s ^ b[i]) * 16777619u;
	return s;
}

void pg_note(struct pg_rec *r, int *n, uint32_t peer, uint64_t tag, const void *b, size_t len,
	     int rc)
{
	if (*n < PG_RECS)
		r[(*n)++] = (struct pg_rec){
			.peer = peer, .tag = tag, .bytes = len, .sum = sum_of(b, len), .rc = rc
		};
}

void pg_wait_flag(int k, int v)
{
	int64_t end = chaos_now_ns() + 30000000000ll;

	while (atomic_load(&pg->flag[k]) < v && chaos_now_ns() < end)
		usleep(1000);
}

int pg_create(int me, int join, int catchup, ftcc_comm_t **c)
{
	struct ftcc_config cfg;
	const char *addrs[PG_NMAX];
	char abuf[PG_NMAX][32];

	for (int i = 0; i < pg->n; i++) {
		snprintf(abuf[i], sizeof(abuf[i]), "127.0.0.1:%u", pg->ports[i]);
		addrs[i] = abuf[i];
	}
	ftcc_config_init(&cfg);
	cfg.group = pg->group;
	cfg.rank = (uint32_t)me;
	cfg.size = (uint32_t)pg->n;
	cfg.addrs = addrs;
	cfg.coordinator = "embedded";
	cfg.timeout_ms = PG_TIMEOUT_MS;
	cfg.connect_timeout_ms = 20000;
	cfg.join = join;
	cfg.catchup = catchup;
	cfg.nstreams = pg_nstreams;
	return ftcc_comm_create(&cfg, c);
}

static int child(void *arg)
{
	int me = (int)(intptr_t)arg;
	ftcc_comm_t *c = NULL;
	int rc;

	pg->m[me].pid = getpid();
	test_transport_env(); /* FTCC_TEST_TRANSPORT=ib: frames over the verbs emulator */
	if (pg_before_create)
		pg_before_create(me);
	rc = pg_create(me, 0, 0, &c);
	if (rc) {
		pg->m[me].fail_line = __LINE__;
		snprintf(pg->m[me].why, sizeof(pg->m[me].why), "create: %s", ftcc_strerror(rc));
		atomic_fetch_add(&pg->finished, 1);
		return 1;
	}
	atomic_store(&pg->m[me].stage, 1);
	pg_comm = c;
	cur_fn(pg, me, c);
	atomic_store(&pg->m[me].stage, 2);
	/* Nobody leaves while another still runs its scenario: the last op's stragglers would
	 * find the group gone (a member alone cannot take over a coordinator that left). */
	atomic_fetch_add(&pg->finished, 1);
	for (int64_t end = chaos_now_ns() + 30000000000ll;
	     atomic_load(&pg->finished) < pg->expect_finished && chaos_now_ns() < end;)
		usleep(1000);
	ftcc_comm_destroy(pg_comm);
	return pg->m[me].fail_line ? 1 : 0;
}

void pg_run(const char *name, int n, pg_fn fn, int ms, uint32_t dying)
{
	pid_t pid[PG_NMAX];

	pg = mmap(NULL, sizeof(*pg), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(pg != MAP_FAILED);
	memset(pg, 0, sizeof(*pg));
	snprintf(pg->group, sizeof(pg->group), "p2p-%s-%d", name, (int)getpid());
	pg->n = n;
	pg->expect_finished = n - __builtin_popcount(dying);
	for (int i = 0; i < n; i++)
		pg->ports[i] = ft_group_free_port("127.0.0.1");
	cur_fn = fn;
	for (int i = 0; i < n; i++) {
		pid[i] = chaos_fork(child, (void *)(intptr_t)i, -1);
		cr_assert(pid[i] > 0);
	}
	for (int i = 0; i < n; i++) {
		int st = 0;

		if (dying >> i & 1)
			continue;
		cr_assert_eq(chaos_wait_exit(pid[i], ms, &st), 0,
			     "member %d did not finish within %d ms (stage %d)", i, ms,
			     atomic_load(&pg->m[i].stage));
		cr_expect(!pg->m[i].fail_line, "member %d failed at line %d: %s", i,
			  pg->m[i].fail_line, pg->m[i].why);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "member %d: exit status %#x", i,
			  st);
	}
}

void pg_exactly_once(int n, uint32_t live)
{
	for (int s = 0; s < n; s++) {
		for (int k = 0; k < pg->m[s].ntx; k++) {
			const struct pg_rec *t = &pg->m[s].tx[k];
			int found = 0;

			if (t->rc || !(live >> t->peer & 1))
				continue;
			for (int j = 0; j < pg->m[t->peer].nrx; j++) {
				const struct pg_rec *r = &pg->m[t->peer].rx[j];

				found += r->rc == 0 && r->peer == (uint32_t)s && r->tag == t->tag &&
					 r->bytes == t->bytes && r->sum == t->sum;
			}
			cr_expect_eq(
				found, 1,
				"member %d's send %d (to %u, tag %llu, %llu bytes) was received "
				"%d times",
				s, k, t->peer, (unsigned long long)t->tag,
				(unsigned long long)t->bytes, found);
		}
	}
	for (int d = 0; d < n; d++) {
		for (int j = 0; j < pg->m[d].nrx; j++) {
			const struct pg_rec *r = &pg->m[d].rx[j];
			int found = 0;

			if (r->rc)
				continue;
			for (int k = 0; k < pg->m[r->peer].ntx; k++) {
				const struct pg_rec *t = &pg->m[r->peer].tx[k];

				found += t->peer == (uint32_t)d && t->tag == r->tag &&
					 t->bytes == r->bytes && t->sum == r->sum;
			}
			cr_expect_eq(found, 1,
				     "member %d received a message (from %u, tag %llu) "
				     "that was sent %d times",
				     d, r->peer, (unsigned long long)r->tag, found);
		}
	}
}
