/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messages (ftcc_isend, ftcc_irecv, ftcc_cancel) across processes: every pair of
 * 2 to 5 members, sizes from 0 bytes to over a MiB, named and any source, self included, mixed
 * with allreduce; the order of one sender's messages; a receive cancelled before its message
 * came, and one cancelled while its data moved (its buffer unmapped at once: a late byte would
 * kill the receiver); a withdrawn send; a message longer than a receive; link resets between
 * live members in a stream (every message delivered exactly once, in order, nobody removed); a
 * peer killed or frozen with requests open (they end with FTCC_ERR_PEER_LOST, a receive from
 * any source waits on, the communicator goes on); bad arguments.
 *
 * Each member runs a scenario in its own process and writes what it saw to a shared page; the
 * parent checks it across members: every send that ended with 0 was received exactly once, with
 * its tag, length and content. No root needed. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "abi_net.h"
#include "chaos_proc.h"
#include "ft_group.h"
#include "ftcc/sys.h"

#define NMAX 5
#define RECS 512
#define TIMEOUT_MS 2000 /* the failure timeout of the groups */

struct rec {
	uint32_t peer;
	uint64_t tag, bytes;
	uint32_t sum;
	int rc;
};

struct member {
	_Atomic int stage; /* 1 created, 2 finished the scenario */
	pid_t pid;
	int fail_line;
	char why[256];
	int nrx, ntx;
	struct rec rx[RECS], tx[RECS];
	int64_t t_ns[4];
};

struct shared {
	char group[64];
	uint16_t ports[NMAX];
	int n;
	_Atomic int flag[8];
	struct member m[NMAX];
};

typedef void (*scenario_fn)(struct shared *S, int me, ftcc_comm_t *c);

static struct shared *S;
static scenario_fn cur_fn;

static void p2p_teardown(void)
{
	chaos_proc_cleanup();
	if (S)
		munmap(S, sizeof(*S));
	S = NULL;
}

TestSuite(ft_mproc_p2p, .fini = p2p_teardown, .timeout = 90);

#define FAIL_IF(cond, ...)                                                                         \
	do {                                                                                       \
		if (cond) {                                                                        \
			struct member *m_ = &S->m[me];                                             \
			if (!m_->fail_line) {                                                      \
				m_->fail_line = __LINE__;                                          \
				snprintf(m_->why, sizeof(m_->why), __VA_ARGS__);                   \
			}                                                                          \
			return;                                                                    \
		}                                                                                  \
	} while (0)

static uint8_t pat(uint32_t src, uint64_t tag, size_t i)
{
	return (uint8_t)(src * 31 + tag * 7 + i * 13 + (i >> 8));
}

static void fill(uint8_t *b, size_t len, uint32_t src, uint64_t tag)
{
	for (size_t i = 0; i < len; i++)
		b[i] = pat(src, tag, i);
}

/* Index of the first byte that is not the pattern, or -1. */
static long check(const uint8_t *b, size_t len, uint32_t src, uint64_t tag)
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

static void note(struct rec *r, int *n, uint32_t peer, uint64_t tag, const void *b, size_t len,
		 int rc)
{
	if (*n < RECS)
		r[(*n)++] = (struct rec){
			.peer = peer, .tag = tag, .bytes = len, .sum = sum_of(b, len), .rc = rc
		};
}

static void wait_flag(int k, int v)
{
	int64_t end = chaos_now_ns() + 30000000000ll;

	while (atomic_load(&S->flag[k]) < v && chaos_now_ns() < end)
		usleep(1000);
}

static int child(void *arg)
{
	int me = (int)(intptr_t)arg;
	struct ftcc_config cfg;
	const char *addrs[NMAX];
	char abuf[NMAX][32];
	ftcc_comm_t *c = NULL;
	int rc;

	for (int i = 0; i < S->n; i++) {
		snprintf(abuf[i], sizeof(abuf[i]), "127.0.0.1:%u", S->ports[i]);
		addrs[i] = abuf[i];
	}
	ftcc_config_init(&cfg);
	cfg.group = S->group;
	cfg.rank = (uint32_t)me;
	cfg.size = (uint32_t)S->n;
	cfg.addrs = addrs;
	cfg.coordinator = "embedded";
	cfg.timeout_ms = TIMEOUT_MS;
	cfg.connect_timeout_ms = 20000;
	S->m[me].pid = getpid();
	test_transport_env(); /* FTCC_TEST_TRANSPORT=ib: frames over the verbs emulator */
	rc = ftcc_comm_create(&cfg, &c);
	if (rc) {
		S->m[me].fail_line = __LINE__;
		snprintf(S->m[me].why, sizeof(S->m[me].why), "create: %s", ftcc_strerror(rc));
		return 1;
	}
	atomic_store(&S->m[me].stage, 1);
	cur_fn(S, me, c);
	atomic_store(&S->m[me].stage, 2);
	ftcc_comm_destroy(c);
	return S->m[me].fail_line ? 1 : 0;
}

/* Runs @fn on @n members; each must finish within @ms, except those in @dying (killed or
 * frozen on purpose). */
static void run(const char *name, int n, scenario_fn fn, int ms, uint32_t dying)
{
	pid_t pid[NMAX];

	S = mmap(NULL, sizeof(*S), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	cr_assert(S != MAP_FAILED);
	memset(S, 0, sizeof(*S));
	snprintf(S->group, sizeof(S->group), "p2p-%s-%d", name, (int)getpid());
	S->n = n;
	for (int i = 0; i < n; i++)
		S->ports[i] = ft_group_free_port("127.0.0.1");
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
			     atomic_load(&S->m[i].stage));
		cr_expect(!S->m[i].fail_line, "member %d failed at line %d: %s", i,
			  S->m[i].fail_line, S->m[i].why);
		cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "member %d: exit status %#x", i,
			  st);
	}
}

/* Across members: each send that ended with 0 was received once by its destination, with the
 * same tag, length and content; each receive that ended with 0 matches one such send. */
static void check_exactly_once(int n, uint32_t live)
{
	for (int s = 0; s < n; s++) {
		for (int k = 0; k < S->m[s].ntx; k++) {
			const struct rec *t = &S->m[s].tx[k];
			int found = 0;

			if (t->rc || !(live >> t->peer & 1))
				continue;
			for (int j = 0; j < S->m[t->peer].nrx; j++) {
				const struct rec *r = &S->m[t->peer].rx[j];

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
		for (int j = 0; j < S->m[d].nrx; j++) {
			const struct rec *r = &S->m[d].rx[j];
			int found = 0;

			if (r->rc)
				continue;
			for (int k = 0; k < S->m[r->peer].ntx; k++) {
				const struct rec *t = &S->m[r->peer].tx[k];

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

/* ---- every pair, many sizes ---------------------------------------------------------------- */

static const size_t sizes[] = { 0, 1, 3000, 65536 + 5, (1u << 20) + 3 };
#define NSIZES (sizeof(sizes) / sizeof(sizes[0]))

static void sc_pairs(struct shared *S_, int me, ftcc_comm_t *c)
{
	int n = S_->n;
	ftcc_request_t *rq[NMAX * NSIZES], *sq[NMAX * NSIZES];
	uint8_t *rb[NMAX * NSIZES], *sb[NMAX * NSIZES];
	float x = 1.0f + (float)me;
	struct ftcc_record rec;
	int rc;

	/* receives first for odd sizes, sends first for even ones: both orders meet */
	for (int pass = 0; pass < 2; pass++) {
		for (int s = 0; s < n; s++) {
			for (size_t k = 0; k < NSIZES; k++) {
				int i = s * (int)NSIZES + (int)k;
				uint64_t rtag = (uint64_t)s * 16 + k, stag = (uint64_t)me * 16 + k;

				if ((int)(k % 2) == pass) {
					rb[i] = malloc(sizes[k] + 1);
					rc = ftcc_irecv(c, rb[i], sizes[k],
							k % 3 ? (uint32_t)s : FTCC_ANY_SOURCE, rtag,
							&rq[i]);
					FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
				} else {
					sb[i] = malloc(sizes[k] + 1);
					fill(sb[i], sizes[k], (uint32_t)me, stag);
					rc = ftcc_isend(c, sb[i], sizes[k], (uint32_t)s, stag,
							&sq[i]);
					FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
				}
			}
		}
		if (pass == 0) {
			rc = ftcc_allreduce(c, &x, &x, 1, FTCC_FLOAT32, FTCC_SUM, &rec);
			FAIL_IF(rc || rec.ncontrib != (uint32_t)n, "allreduce: %s",
				ftcc_strerror(rc));
		}
	}
	for (int s = 0; s < n; s++) {
		for (size_t k = 0; k < NSIZES; k++) {
			int i = s * (int)NSIZES + (int)k;
			struct ftcc_p2p_status st;
			uint64_t rtag = (uint64_t)s * 16 + k, stag = (uint64_t)me * 16 + k;
			long bad;

			rc = ftcc_wait_p2p(sq[i], 30000, &st);
			note(S->m[me].tx, &S->m[me].ntx, (uint32_t)s, stag, sb[i], sizes[k], rc);
			FAIL_IF(rc, "send to %d of %zu bytes: %s", s, sizes[k], ftcc_strerror(rc));
			rc = ftcc_wait_p2p(rq[i], 30000, &st);
			note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, rb[i], st.bytes, rc);
			FAIL_IF(rc, "receive from %d of %zu bytes: %s", s, sizes[k],
				ftcc_strerror(rc));
			FAIL_IF(st.source != (uint32_t)s || st.tag != rtag || st.bytes != sizes[k],
				"receive %d/%zu: status %u/%llu/%zu", s, k, st.source,
				(unsigned long long)st.tag, st.bytes);
			bad = check(rb[i], sizes[k], (uint32_t)s, rtag);
			FAIL_IF(bad >= 0, "message from %d of %zu bytes differs at %ld", s,
				sizes[k], bad);
			free(rb[i]);
			free(sb[i]);
		}
	}
	rc = ftcc_allreduce(c, &x, &x, 1, FTCC_FLOAT32, FTCC_SUM, &rec);
	FAIL_IF(rc || rec.ncontrib != (uint32_t)n, "allreduce after: %s", ftcc_strerror(rc));
}

Test(ft_mproc_p2p, every_pair_many_sizes)
{
	for (int n = 2; n <= NMAX; n += 3) {
		run("pairs", n, sc_pairs, 60000, 0);
		check_exactly_once(n, (1u << n) - 1);
		cr_expect_eq(S->m[0].nrx, n * (int)NSIZES);
		p2p_teardown();
	}
}

/* ---- order, withdraw, too long -------------------------------------------------------------- */

#define NORDER 40
#define WD_BYTES 8192 /* longer than a message whose data goes with its announcement */

static void sc_order(struct shared *S_, int me, ftcc_comm_t *c)
{
	static uint8_t b[NORDER][64];
	ftcc_request_t *q[NORDER];
	struct ftcc_p2p_status st;
	int rc;

	(void)S_;
	if (me == 0) {
		static uint8_t x[WD_BYTES], y[WD_BYTES], e[64];
		ftcc_request_t *w;

		for (int i = 0; i < NORDER; i++) {
			fill(b[i], sizeof(b[i]), 0, (uint64_t)i);
			rc = ftcc_isend(c, b[i], sizeof(b[i]), 1, 9 + (uint64_t)(i % 2), &q[i]);
			FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		}
		for (int i = 0; i < NORDER; i++) {
			rc = ftcc_wait_p2p(q[i], 30000, &st);
			note(S->m[me].tx, &S->m[me].ntx, 1, 9 + (uint64_t)(i % 2), b[i], 64, rc);
			FAIL_IF(rc, "send %d: %s", i, ftcc_strerror(rc));
		}
		/* short: its data left with its announcement, too late to withdraw */
		fill(e, sizeof(e), 0, 11);
		rc = ftcc_isend(c, e, sizeof(e), 1, 11, &w);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		usleep(100000);
		rc = ftcc_cancel(w);
		atomic_store(&S->flag[2], 1);
		FAIL_IF(rc != FTCC_ERR_BUSY, "cancel of a short send that left: %s",
			ftcc_strerror(rc));
		rc = ftcc_wait_p2p(w, 30000, NULL);
		note(S->m[me].tx, &S->m[me].ntx, 1, 11, e, sizeof(e), rc);
		FAIL_IF(rc, "short send after its cancel: %s", ftcc_strerror(rc));
		/* withdrawn: never seen by member 1 */
		fill(x, sizeof(x), 0, 4);
		rc = ftcc_isend(c, x, sizeof(x), 1, 4, &w);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		usleep(100000);
		rc = ftcc_cancel(w);
		FAIL_IF(rc, "cancel of a send nobody took: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(w, 0, NULL);
		FAIL_IF(rc != FTCC_ERR_CANCELED, "withdrawn send ended with %s", ftcc_strerror(rc));
		atomic_store(&S->flag[1], 1);
		fill(y, sizeof(y), 0, 5);
		rc = ftcc_isend(c, y, sizeof(y), 1, 4, &w);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(w, 30000, NULL);
		note(S->m[me].tx, &S->m[me].ntx, 1, 4, y, sizeof(y), rc);
		FAIL_IF(rc, "second send of tag 4: %s", ftcc_strerror(rc));
		/* too long for the first receive */
		static uint8_t big[1000];

		fill(big, sizeof(big), 0, 8);
		rc = ftcc_isend(c, big, sizeof(big), 1, 8, &w);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		atomic_store(&S->flag[0], 1);
		rc = ftcc_wait_p2p(w, 30000, NULL);
		note(S->m[me].tx, &S->m[me].ntx, 1, 8, big, sizeof(big), rc);
		FAIL_IF(rc, "send of 1000 bytes: %s", ftcc_strerror(rc));
		return;
	}
	usleep(300000);			       /* the messages wait at this member, unexpected */
	for (int i = 0; i < NORDER / 2; i++) { /* tag 10 first: each tag in its own order */
		rc = ftcc_irecv(c, b[i], sizeof(b[i]), 0, 10, &q[i]);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	}
	for (int i = NORDER / 2; i < NORDER; i++) {
		rc = ftcc_irecv(c, b[i], sizeof(b[i]), FTCC_ANY_SOURCE, 9, &q[i]);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	}
	for (int i = 0; i < NORDER; i++) {
		uint64_t want = i < NORDER / 2 ? (uint64_t)(2 * i + 1) : (uint64_t)(2 * (i - 20));

		rc = ftcc_wait_p2p(q[i], 30000, &st);
		note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, b[i], 64, rc);
		FAIL_IF(rc, "receive %d: %s", i, ftcc_strerror(rc));
		FAIL_IF(check(b[i], 64, 0, want) >= 0,
			"receive %d (tag %llu) holds another "
			"message than the %llu-th sent",
			i, (unsigned long long)st.tag, (unsigned long long)want);
	}
	{
		static uint8_t x[WD_BYTES], small[500], big[1000];
		ftcc_request_t *r;

		wait_flag(2, 1); /* taken only once its sender tried to cancel it */
		rc = ftcc_irecv(c, x, 64, 0, 11, &r);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, &st);
		note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, x, st.bytes, rc);
		FAIL_IF(rc || check(x, 64, 0, 11) >= 0, "tag 11: %s", ftcc_strerror(rc));
		wait_flag(1, 1); /* its first message of tag 4 was withdrawn */
		rc = ftcc_irecv(c, x, sizeof(x), 0, 4, &r);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, &st);
		note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, x, st.bytes, rc);
		FAIL_IF(rc || check(x, WD_BYTES, 0, 5) >= 0, "tag 4: %s, or the withdrawn message",
			ftcc_strerror(rc));
		rc = ftcc_irecv(c, x, sizeof(x), 0, 4, &r);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 300, &st);
		FAIL_IF(rc != FTCC_ERR_TIMEOUT, "a third message of tag 4: %s", ftcc_strerror(rc));
		FAIL_IF(ftcc_cancel(r), "cancel");
		FAIL_IF(ftcc_wait_p2p(r, 0, NULL) != FTCC_ERR_CANCELED, "cancelled receive");
		wait_flag(0, 1);
		rc = ftcc_irecv(c, small, sizeof(small), 0, 8, &r);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, NULL);
		FAIL_IF(rc != FTCC_ERR_INVALID, "a 1000-byte message into 500 bytes: %s",
			ftcc_strerror(rc));
		rc = ftcc_irecv(c, big, sizeof(big), 0, 8, &r);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, &st);
		note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, big, st.bytes, rc);
		FAIL_IF(rc || st.bytes != 1000 || check(big, 1000, 0, 8) >= 0,
			"the 1000-byte message after: %s", ftcc_strerror(rc));
	}
}

Test(ft_mproc_p2p, order_withdraw_too_long)
{
	run("order", 2, sc_order, 60000, 0);
	check_exactly_once(2, 3);
	cr_expect_eq(S->m[1].nrx, NORDER + 3);
}

/* ---- cancel: before the message, and while its data moves ------------------------------------ */

#define CANCEL_BIG (64u << 20)

static void sc_cancel(struct shared *S_, int me, ftcc_comm_t *c)
{
	struct ftcc_p2p_status st;
	ftcc_request_t *r;
	int rc;

	(void)S_;
	if (me == 0) {
		uint8_t *a = malloc(1 << 20), *big = malloc(CANCEL_BIG);

		wait_flag(0, 1);
		fill(a, 1 << 20, 0, 5);
		rc = ftcc_isend(c, a, 1 << 20, 1, 5, &r);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 30000, NULL);
		note(S->m[me].tx, &S->m[me].ntx, 1, 5, a, 1 << 20, rc);
		FAIL_IF(rc, "send of tag 5: %s", ftcc_strerror(rc));
		fill(big, CANCEL_BIG, 0, 6);
		rc = ftcc_isend(c, big, CANCEL_BIG, 1, 6, &r);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r, 60000, NULL);
		note(S->m[me].tx, &S->m[me].ntx, 1, 6, big, CANCEL_BIG, rc);
		FAIL_IF(rc, "send of 64 MiB: %s", ftcc_strerror(rc));
		free(a);
		free(big);
		return;
	}
	/* cancelled before its message is sent; the buffer is gone at once */
	uint8_t *gone =
		mmap(NULL, 1 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	uint8_t *b = malloc(CANCEL_BIG);

	FAIL_IF(gone == MAP_FAILED || !b, "no memory");
	rc = ftcc_irecv(c, gone, 1 << 20, 0, 5, &r);
	FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	FAIL_IF(ftcc_cancel(r), "cancel");
	munmap(gone, 1 << 20);
	rc = ftcc_wait_p2p(r, 0, NULL);
	FAIL_IF(rc != FTCC_ERR_CANCELED, "cancelled receive ended with %s", ftcc_strerror(rc));
	atomic_store(&S->flag[0], 1);
	usleep(200000); /* its message waits here, taken by no one */
	rc = ftcc_irecv(c, b, 1 << 20, 0, 5, &r);
	FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	rc = ftcc_wait_p2p(r, 30000, &st);
	note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, b, st.bytes, rc);
	FAIL_IF(rc || check(b, 1 << 20, 0, 5) >= 0, "tag 5 after the cancel: %s",
		ftcc_strerror(rc));

	/* cancelled while its data moves: the sender is stopped half way, the receive cancelled,
	 * its buffer unmapped; then the message goes again, whole, to another receive */
	gone = mmap(NULL, CANCEL_BIG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	FAIL_IF(gone == MAP_FAILED, "no memory");
	memset(gone, 0xaa, CANCEL_BIG);
	rc = ftcc_irecv(c, gone, CANCEL_BIG, 0, 6, &r);
	FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	{
		int64_t end = chaos_now_ns() + 30000000000ll;

		while (*(volatile uint8_t *)gone == 0xaa && chaos_now_ns() < end) {
		}
	}
	kill(S->m[0].pid, SIGSTOP);
	S->m[me].t_ns[0] = chaos_now_ns();
	rc = ftcc_wait_p2p(r, 0, NULL);
	FAIL_IF(rc != FTCC_ERR_TIMEOUT, "the 64 MiB receive ended before the cancel: %s",
		ftcc_strerror(rc));
	FAIL_IF(ftcc_cancel(r), "cancel while data moves");
	munmap(gone, CANCEL_BIG);
	rc = ftcc_wait_p2p(r, 0, NULL);
	usleep(50000);
	kill(S->m[0].pid, SIGCONT);
	FAIL_IF(rc != FTCC_ERR_CANCELED, "receive cancelled mid-data ended with %s",
		ftcc_strerror(rc));
	rc = ftcc_irecv(c, b, CANCEL_BIG, 0, 6, &r);
	FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	rc = ftcc_wait_p2p(r, 60000, &st);
	note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, b, st.bytes, rc);
	FAIL_IF(rc || st.bytes != CANCEL_BIG, "64 MiB after the cancel: %s", ftcc_strerror(rc));
	FAIL_IF(check(b, CANCEL_BIG, 0, 6) >= 0, "64 MiB after the cancel: content differs");
	free(b);
}

Test(ft_mproc_p2p, cancel_before_and_during_data)
{
	run("cancel", 2, sc_cancel, 80000, 0);
	check_exactly_once(2, 3);
	cr_expect_eq(S->m[1].nrx, 2);
}

/* ---- cancels racing the data's arrival --------------------------------------------------------- */

#define NRACE 120
#define RACE_BYTES (4u << 20)

static void sc_race(struct shared *S_, int me, ftcc_comm_t *c)
{
	static uint8_t b[RACE_BYTES];
	ftcc_request_t *r;
	int rc, cancelled = 0;

	(void)S_;
	for (int i = 0; i < NRACE; i++) {
		if (me == 0) {
			fill(b, RACE_BYTES, 0, (uint64_t)i);
			rc = ftcc_isend(c, b, RACE_BYTES, 1, (uint64_t)i, &r);
			FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
			rc = ftcc_wait_p2p(r, 30000, NULL);
			note(S->m[me].tx, &S->m[me].ntx, 1, (uint64_t)i, b, RACE_BYTES, rc);
			FAIL_IF(rc, "send %d: %s", i, ftcc_strerror(rc));
			continue;
		}
		struct ftcc_p2p_status st;
		int crc;

		memset(b, 0, RACE_BYTES);
		rc = ftcc_irecv(c, b, RACE_BYTES, 0, (uint64_t)i, &r);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		/* at some point of the data's arrival: before, during (the progress thread writes
		 * the buffer, the cancel waits for it), or after (the request ended first) */
		usleep((useconds_t)((i * 97) % 3000));
		crc = ftcc_cancel(r);
		rc = ftcc_wait_p2p(r, 30000, &st);
		FAIL_IF(crc, "cancel %d: %s", i, ftcc_strerror(crc));
		FAIL_IF(rc && rc != FTCC_ERR_CANCELED, "receive %d: %s", i, ftcc_strerror(rc));
		if (rc == FTCC_ERR_CANCELED) { /* the message waits for the next receive */
			cancelled++;
			memset(b, 0, RACE_BYTES);
			rc = ftcc_irecv(c, b, RACE_BYTES, 0, (uint64_t)i, &r);
			FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
			rc = ftcc_wait_p2p(r, 30000, &st);
		}
		note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, b, st.bytes, rc);
		FAIL_IF(rc || check(b, RACE_BYTES, 0, (uint64_t)i) >= 0, "message %d: %s", i,
			ftcc_strerror(rc));
	}
	if (me == 1)
		chaos_report("p2p: %d of %d receives cancelled, their message taken by the next",
			     cancelled, NRACE);
}

Test(ft_mproc_p2p, cancels_racing_the_data)
{
	run("race", 2, sc_race, 80000, 0);
	check_exactly_once(2, 3);
	cr_expect_eq(S->m[1].nrx, NRACE);
}

/* ---- link resets between live members --------------------------------------------------------- */

#define NSTREAM 300
#define STREAM_BYTES (256u << 10)
#define WINDOW 8

static void sc_stream(struct shared *S_, int me, ftcc_comm_t *c)
{
	static uint8_t b[WINDOW][STREAM_BYTES];
	ftcc_request_t *q[WINDOW];
	struct ftcc_view v;
	int rc;

	(void)S_;
	for (int i = 0; i < NSTREAM + WINDOW; i++) {
		int k = i % WINDOW;

		if (i >= WINDOW) { /* the message WINDOW back */
			struct ftcc_p2p_status st;
			uint64_t t = (uint64_t)(i - WINDOW);

			rc = ftcc_wait_p2p(q[k], 60000, &st);
			if (me == 0) {
				note(S->m[me].tx, &S->m[me].ntx, 1, t, b[k], STREAM_BYTES, rc);
			} else {
				note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, b[k], st.bytes,
				     rc);
				FAIL_IF(!rc && st.tag != t, "message %llu came as the %llu-th",
					(unsigned long long)st.tag, (unsigned long long)t);
			}
			FAIL_IF(rc, "message %llu: %s", (unsigned long long)t, ftcc_strerror(rc));
		}
		if (i >= NSTREAM)
			continue;
		/* resets of the link, from each side in turn */
		if (i % 60 == 30 && (i / 60) % 2 == me)
			ftcc_sys_inject_arm("sendv", 1);
		if (me == 0) {
			fill(b[k], STREAM_BYTES, 0, (uint64_t)i);
			rc = ftcc_isend(c, b[k], STREAM_BYTES, 1, (uint64_t)i, &q[k]);
		} else {
			rc = ftcc_irecv(c, b[k], STREAM_BYTES, 0, FTCC_ANY_TAG, &q[k]);
		}
		FAIL_IF(rc, "post: %s", ftcc_strerror(rc));
	}
	rc = ftcc_comm_view(c, &v, NULL, 0);
	atomic_fetch_add(&S->flag[3], 1);
	wait_flag(3, 2); /* neither leaves before both looked */
	FAIL_IF(rc || v.nmembers != 2 || v.epoch != 1,
		"the group after the resets: %u members, "
		"epoch %llu",
		v.nmembers, (unsigned long long)v.epoch);
}

Test(ft_mproc_p2p, resets_between_live_members)
{
	run("reset", 2, sc_stream, 80000, 0);
	check_exactly_once(2, 3);
	cr_expect_eq(S->m[1].nrx, NSTREAM);
	for (int j = 0; j < S->m[1].nrx; j++)
		cr_expect_eq(S->m[1].rx[j].sum, S->m[0].tx[j].sum, "message %d differs", j);
}

/* ---- a peer lost with requests open ---------------------------------------------------------- */

static void sc_lost(struct shared *S_, int me, ftcc_comm_t *c, int sig)
{
	static uint8_t big[1 << 20];
	uint8_t x[16], y[16];
	ftcc_request_t *s2, *r2, *rany;
	struct ftcc_p2p_status st;
	struct ftcc_record rec;
	float f = 1.0f;
	int rc;

	(void)S_;
	if (me == 2) {
		wait_flag(1, 1);
		raise(sig);
		return;
	}
	if (me == 0) {
		wait_flag(2, 1);
		fill(x, sizeof(x), 0, 3);
		rc = ftcc_isend(c, x, sizeof(x), 1, 3, &s2);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(s2, 30000, NULL);
		note(S->m[me].tx, &S->m[me].ntx, 1, 3, x, sizeof(x), rc);
		FAIL_IF(rc, "send to member 1 after the loss: %s", ftcc_strerror(rc));
	} else {
		rc = ftcc_isend(c, big, sizeof(big), 2, 1, &s2);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_irecv(c, y, sizeof(y), 2, 2, &r2);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		rc = ftcc_irecv(c, y, sizeof(y), FTCC_ANY_SOURCE, 3, &rany);
		FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
		usleep(100000);
		S->m[me].t_ns[0] = chaos_now_ns();
		atomic_store(&S->flag[1], 1);
		rc = ftcc_wait_p2p(s2, 30000, NULL);
		FAIL_IF(rc != FTCC_ERR_PEER_LOST, "send to the lost member: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(r2, 30000, NULL);
		FAIL_IF(rc != FTCC_ERR_PEER_LOST, "receive from the lost member: %s",
			ftcc_strerror(rc));
		S->m[me].t_ns[1] = chaos_now_ns();
		rc = ftcc_isend(c, big, 8, 2, 1, &s2);
		FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
		rc = ftcc_wait_p2p(s2, 30000, NULL);
		FAIL_IF(rc != FTCC_ERR_PEER_LOST, "a send to it after: %s", ftcc_strerror(rc));
		atomic_store(&S->flag[2], 1);
		rc = ftcc_wait_p2p(rany, 30000, &st);
		note(S->m[me].rx, &S->m[me].nrx, st.source, st.tag, y, st.bytes, rc);
		FAIL_IF(rc || st.source != 0, "receive from any source: %s from %u",
			ftcc_strerror(rc), st.source);
	}
	rc = ftcc_allreduce(c, &f, &f, 1, FTCC_FLOAT32, FTCC_SUM, &rec);
	FAIL_IF(rc || rec.ncontrib != 2, "allreduce after the loss: %s over %u", ftcc_strerror(rc),
		rec.ncontrib);
}

static void sc_killed(struct shared *S_, int me, ftcc_comm_t *c)
{
	sc_lost(S_, me, c, SIGKILL);
}

static void sc_frozen(struct shared *S_, int me, ftcc_comm_t *c)
{
	sc_lost(S_, me, c, SIGSTOP);
}

static void lost_checks(void)
{
	double ms = chaos_ms(S->m[1].t_ns[0], S->m[1].t_ns[1]);

	check_exactly_once(3, 3);
	chaos_report("p2p: requests with the lost member ended %.0f ms after it was lost", ms);
	/* detection (the failure timeout) and a new epoch, on a loaded machine */
	cr_expect(ms < 6 * TIMEOUT_MS, "requests ended %.0f ms after the loss", ms);
}

Test(ft_mproc_p2p, peer_killed_with_requests_open)
{
	run("killed", 3, sc_killed, 60000, 1u << 2);
	lost_checks();
}

Test(ft_mproc_p2p, peer_frozen_with_requests_open)
{
	run("frozen", 3, sc_frozen, 60000, 1u << 2);
	lost_checks();
}

/* ---- one member: self, bad arguments ---------------------------------------------------------- */

static void sc_alone(struct shared *S_, int me, ftcc_comm_t *c)
{
	uint8_t a[100], b[100];
	ftcc_request_t *s, *r;
	struct ftcc_p2p_status st;
	float f = 2.0f;
	int rc;

	(void)S_;
	fill(a, sizeof(a), 0, 1);
	FAIL_IF(ftcc_isend(c, a, 10, 1, 0, &s) != FTCC_ERR_INVALID, "send to member 1 of 1");
	FAIL_IF(ftcc_isend(c, NULL, 10, 0, 0, &s) != FTCC_ERR_INVALID, "NULL buffer");
	FAIL_IF(ftcc_isend(c, a, 10, 0, FTCC_ANY_TAG, &s) != FTCC_ERR_INVALID, "any tag sent");
	FAIL_IF(ftcc_irecv(c, b, 10, 7, 0, &r) != FTCC_ERR_INVALID, "receive from member 7");
	FAIL_IF(ftcc_isend(c, a, 10, 0, 0, NULL) != FTCC_ERR_INVALID, "NULL request");
	FAIL_IF(ftcc_cancel(NULL) != FTCC_ERR_INVALID, "cancel NULL");
	FAIL_IF(ftcc_wait_p2p(NULL, 0, NULL) != FTCC_ERR_INVALID, "wait NULL");
	rc = ftcc_iallreduce(c, &f, &f, 1, FTCC_FLOAT32, FTCC_SUM, &r);
	FAIL_IF(rc, "iallreduce: %s", ftcc_strerror(rc));
	FAIL_IF(ftcc_cancel(r) != FTCC_ERR_INVALID, "cancel of an allreduce");
	FAIL_IF(ftcc_wait_p2p(r, 0, NULL) != FTCC_ERR_INVALID, "wait_p2p of an allreduce");
	FAIL_IF(ftcc_wait(r, NULL), "allreduce");
	/* to self: sent first, received after; a send to self withdrawn */
	rc = ftcc_isend(c, a, sizeof(a), 0, 1, &s);
	FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
	rc = ftcc_irecv(c, b, sizeof(b), FTCC_ANY_SOURCE, FTCC_ANY_TAG, &r);
	FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	FAIL_IF(ftcc_wait_p2p(r, 1000, &st) || st.source != 0 || st.bytes != 100 ||
			check(b, sizeof(b), 0, 1) >= 0,
		"self message");
	FAIL_IF(ftcc_wait(s, NULL), "self send");
	rc = ftcc_isend(c, a, sizeof(a), 0, 2, &s);
	FAIL_IF(rc, "isend: %s", ftcc_strerror(rc));
	FAIL_IF(ftcc_cancel(s), "cancel self send");
	FAIL_IF(ftcc_wait_p2p(s, 0, NULL) != FTCC_ERR_CANCELED, "withdrawn self send");
	rc = ftcc_irecv(c, b, sizeof(b), 0, 2, &r);
	FAIL_IF(rc, "irecv: %s", ftcc_strerror(rc));
	FAIL_IF(ftcc_wait_p2p(r, 100, NULL) != FTCC_ERR_TIMEOUT, "a withdrawn message came");
	FAIL_IF(ftcc_cancel(r), "cancel");
	{
		int done = 0;
		struct ftcc_record rec;

		FAIL_IF(ftcc_test(r, &done, &rec) != FTCC_ERR_CANCELED || !done, "test");
	}
}

Test(ft_mproc_p2p, one_member_self_and_bad_arguments)
{
	run("alone", 1, sc_alone, 30000, 0);
}
