/* SPDX-License-Identifier: BSD-3-Clause */
/* Node heads for the CollNet tests, second half: what the parent reads back from the heads'
 * records: the exact-result check of every op, plain-text descriptions and the heads' logs. The
 * first half (cn_heads.c) runs the heads.
 */
#define _GNU_SOURCE
#include "cn_heads.h"

#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "abi_net.h"
#include "chaos_proc.h"
#include "ftcc/reduce.h"
#include "sched_watch.h"
#include "ftcc/text.h"

size_t cn_heads_log(const struct cn_heads *g, int i, char *buf, size_t len)
{
	static char all[1 << 20];
	size_t n;

	if (len)
		buf[0] = '\0';
	if (!g->sh || i < 0 || i >= g->n || g->errfd[i] < 0 || !len)
		return 0;
	n = chaos_capture_read(g->errfd[i], all, sizeof(all));
	if (n + 1 > len) {
		memcpy(buf, all + n - (len - 1), len - 1);
		buf[len - 1] = '\0';
		return len - 1;
	}
	memcpy(buf, all, n + 1);
	return n;
}

/* ---- checks ---------------------------------------------------------------------------------- */

/* Compares the completers of op @s among @who: fills *@ref with the first success, checks every
 * other success against it. Returns the number of successes, or -1 with @why. */
static int cn_agree(const struct cn_heads *g, uint32_t who, int64_t s, const struct cn_op **ref,
		    int *k0, int64_t *t_first, char *why, size_t len)
{
	int n = 0;

	*ref = NULL;
	for (int k = 0; k < g->n; k++) {
		const struct cn_op *op = &g->sh->head[k].ops[s];

		if (!(who >> k & 1) ||
		    atomic_load_explicit(&op->state, memory_order_acquire) != 2 ||
		    op->res != ncclSuccess) {
			continue;
		}
		if (n++ == 0) {
			*ref = op;
			*k0 = k;
			*t_first = op->t_done;
			continue;
		}
		*t_first = op->t_done < *t_first ? op->t_done : *t_first;
		if (op->sum != (*ref)->sum || op->size != (*ref)->size) {
			snprintf(
				why, len,
				"op %lld: heads %d and %d disagree: size %d sum %016llx vs size %d "
				"sum %016llx",
				(long long)s, *k0, k, (*ref)->size, (unsigned long long)(*ref)->sum,
				op->size, (unsigned long long)op->sum);
			return -1;
		}
	}
	return n;
}

/* Checks op @s's agreed record @ref against the exact results over all heads or all but @lost.
 * 0 full, 1 degraded, -1 (why). */
static int cn_expect(const struct cn_heads *g, int64_t s, const struct cn_op *ref, int k0,
		     uint32_t lost, int may_lose, enum ftcc_degraded policy, void *acc, void *tmp,
		     char *why, size_t len)
{
	const struct ft_spec *spec = &g->script[s % g->o.nspec];
	size_t bytes = spec->count * ftcc_dtype_size(spec->dtype);
	uint32_t all = g->n >= 32 ? ~0u : (1u << g->n) - 1;
	uint64_t full = ft_expect(spec, (uint64_t)s, all, (uint32_t)g->n, policy, acc, tmp, NULL);
	uint64_t part = 0;

	if ((size_t)ref->size != bytes) {
		snprintf(why, len, "op %lld (%zu x %s): head %d: test() said size %d, not %zu",
			 (long long)s, spec->count, ftcc_dtype_name(spec->dtype), k0, ref->size,
			 bytes);
		return -1;
	}
	if (ref->sum == full)
		return 0;
	if (may_lose && (all & ~lost) != all) {
		part = ft_expect(spec, (uint64_t)s, all & ~lost, (uint32_t)g->n, policy, acc, tmp,
				 NULL);
		if (ref->sum == part)
			return 1;
	}
	snprintf(why, len,
		 "op %lld (%zu x %s %s%s): head %d got sum %016llx, expected %016llx over all %d "
		 "heads%s",
		 (long long)s, spec->count, ftcc_dtype_name(spec->dtype), ftcc_redop_name(spec->op),
		 spec->inplace ? " in place" : "", k0, (unsigned long long)ref->sum,
		 (unsigned long long)full, g->n,
		 may_lose && lost ? " (or the result without the lost heads)" : "");
	return -1;
}

#define CN_EPOCHS_MAX 1024

/* One epoch as a head's log named it. */
struct cn_epoch_seen {
	uint64_t epoch;
	int head;
	char ids[160];
};

/* Parses "epoch E (K members {IDS}" (the membership's INFO line) or "epoch E with members {IDS}"
 * (the engine's WARN when an op continues in a new epoch) at @p into @e. 0, or -1 when it is
 * neither. */
static int cn_epoch_parse(const char *p, struct cn_epoch_seen *e)
{
	unsigned long long ep;
	unsigned k;
	int at = 0;
	const char *ids, *end;

	if ((sscanf(p, "epoch %llu (%u members {%n", &ep, &k, &at) != 2 || at == 0) &&
	    (sscanf(p, "epoch %llu with members {%n", &ep, &at) != 1 || at == 0))
		return -1;
	ids = p + at;
	end = strchr(ids, '}');
	if (!end || (size_t)(end - ids) >= sizeof(e->ids))
		return -1;
	e->epoch = ep;
	memcpy(e->ids, ids, (size_t)(end - ids));
	e->ids[end - ids] = '\0';
	return 0;
}

int cn_heads_epochs(const struct cn_heads *g, char *why, size_t len)
{
	static char log[1 << 20];
	static struct cn_epoch_seen seen[CN_EPOCHS_MAX];
	int nseen = 0;

	if (len)
		why[0] = '\0';
	for (int i = 0; g->sh && i < g->n; i++) {
		cn_heads_log(g, i, log, sizeof(log));
		for (const char *p = strstr(log, " epoch "); p; p = strstr(p + 1, " epoch ")) {
			struct cn_epoch_seen e = { .head = i };
			int k;

			if (cn_epoch_parse(p + 1, &e))
				continue;
			k = 0;
			while (k < nseen && seen[k].epoch != e.epoch)
				k++;
			if (k == nseen) {
				if (nseen < CN_EPOCHS_MAX)
					seen[nseen++] = e;
				continue;
			}
			if (strcmp(seen[k].ids, e.ids) != 0) {
				snprintf(
					why, len,
					"epoch %llu has two member lists: {%s} at head %d, {%s} at "
					"head %d",
					(unsigned long long)e.epoch, seen[k].ids, seen[k].head,
					e.ids, i);
				return -1;
			}
		}
	}
	return nseen;
}

int cn_heads_check(const struct cn_heads *g, uint32_t who, uint32_t lost, int64_t t_fault_ns,
		   enum ftcc_degraded policy, int *nfull, int *ndegraded, char *why, size_t len)
{
	size_t max_bytes = ft_script_max_bytes(g->script, g->o.nspec);
	void *acc = NULL, *tmp = NULL;
	int checked = 0, full = 0, degraded = 0, rc = 0;

	if (len)
		why[0] = '\0';
	if (!g->sh)
		return 0;
	acc = malloc(max_bytes);
	tmp = malloc(max_bytes);
	if (!acc || !tmp) {
		snprintf(why, len, "out of memory");
		rc = -1;
	}
	for (int64_t s = 0; s < CN_MAX_OPS && !rc; s++) {
		const struct cn_op *ref;
		int64_t t_first = 0;
		int k0 = -1, n = cn_agree(g, who, s, &ref, &k0, &t_first, why, len), r;

		if (n < 0) {
			rc = -1;
			break;
		}
		if (n == 0)
			continue;
		r = cn_expect(g, s, ref, k0, lost, t_first >= t_fault_ns, policy, acc, tmp, why,
			      len);
		if (r < 0) {
			rc = -1;
			break;
		}
		checked++;
		full += r == 0;
		degraded += r == 1;
	}
	free(acc);
	free(tmp);
	if (!rc && cn_heads_epochs(g, why, len) < 0)
		rc = -1;
	for (int i = 0; !rc && i < g->n; i++) {
		static char log[1 << 20];
		const char *bad;

		cn_heads_log(g, i, log, sizeof(log));
		bad = test_log_transport(log, NULL);
		if (bad) {
			snprintf(why, len, "head %d moved its frames over %s", i, bad);
			rc = -1;
		}
	}
	if (nfull)
		*nfull = full;
	if (ndegraded)
		*ndegraded = degraded;
	return rc ? -1 : checked;
}

static const char *cn_stage_name(int st)
{
	static const char *const names[] = { "start", "listening", "connected",
					     "ran",   "closed",	   "failed" };

	return st >= 0 && st <= CN_ST_FAILED ? names[st] : "?";
}

size_t cn_heads_describe(const struct cn_heads *g, int tail, char *buf, size_t len)
{
	size_t at = 0;

	if (len)
		buf[0] = '\0';
	if (!g->sh)
		return 0;
	ftcc_appendf(buf, len, &at, "%d heads, table v%d, depth %d, %d ops\n", g->n, g->o.version,
		     g->o.depth, g->o.nops);
	for (int i = 0; i < g->n; i++) {
		const struct cn_head *h = &g->sh->head[i];
		int64_t nd = atomic_load(&h->ndone), top = -1;

		for (int64_t s = 0; s < CN_MAX_OPS; s++)
			if (atomic_load_explicit(&h->ops[s].state, memory_order_acquire))
				top = s;
		ftcc_appendf(
			buf, len, &at,
			"head %d pid %d: %s%s, connect %d (%.1f ms), %lld done, err %d at op %lld, "
			"%d in flight at close, close ms %.2f/%.2f/%.2f/%.2f res %d/%d/%d/%d%s%s\n",
			i, (int)h->pid, cn_stage_name(atomic_load(&h->stage)),
			g->frozen[i] ? " (frozen)" : "", h->connect_res,
			h->t_connect1 ? chaos_ms(h->t_connect0, h->t_connect1) : -1.0,
			(long long)nd, atomic_load(&h->err), (long long)h->err_seq,
			h->inflight_at_close, chaos_ms(0, h->close_ns[0]),
			chaos_ms(0, h->close_ns[1]), chaos_ms(0, h->close_ns[2]),
			chaos_ms(0, h->close_ns[3]), h->close_res[0], h->close_res[1],
			h->close_res[2], h->close_res[3], h->why[0] ? ": " : "", h->why);
		for (int64_t s = top - tail + 1 < 0 ? 0 : top - tail + 1; s <= top; s++) {
			const struct cn_op *op = &h->ops[s];
			int st = atomic_load_explicit(&op->state, memory_order_acquire);

			ftcc_appendf(
				buf, len, &at,
				"  op %lld: %s res %d size %d sum %016llx post %.1f done %.1f ms\n",
				(long long)s, st == 2 ? "done" : "posted", op->res, op->size,
				(unsigned long long)op->sum, chaos_ms(g->t0_ns, op->t_post),
				st == 2 ? chaos_ms(g->t0_ns, op->t_done) : -1.0);
		}
	}
	return at;
}

/* The first explanation of a group's failure asks every head that still runs (not reaped, not
 * frozen) for its threads' states and stacks (sched_watch.h). What head i wrote from
 * dump_from[i] to dump_to[i] holds that dump, from its first line on. */
#define CN_DUMP_MARK "thread watch: asked for a dump"
#define CN_LOG_WINDOW (1u << 20) /* the last MiB of a head's log is what is looked at */

static const struct cn_heads *dump_group; /* the group asked, and when it started: */
static int64_t dump_t0;			  /* a second group of the test asks again */
static off_t dump_from[CN_MAX_HEADS], dump_to[CN_MAX_HEADS];

static off_t cn_log_size(const struct cn_heads *g, int i)
{
	struct stat st;

	return g->errfd[i] >= 0 && fstat(g->errfd[i], &st) == 0 ? st.st_size : 0;
}

static int cn_dump_asked(const struct cn_heads *g)
{
	return dump_group == g && dump_t0 == g->t0_ns;
}

static void cn_heads_ask_dump(const struct cn_heads *g)
{
	int sent = 0;

	if (cn_dump_asked(g))
		return;
	dump_group = g;
	dump_t0 = g->t0_ns;
	for (int i = 0; i < g->n; i++) {
		dump_from[i] = dump_to[i] = cn_log_size(g, i);
		if (g->exit_status[i] == -1 && !g->frozen[i] && g->sh->head[i].pid > 0)
			sent += kill(g->sh->head[i].pid, SCHED_WATCH_DUMP_SIGNAL) == 0;
	}
	if (!sent)
		return;
	chaos_sleep_ms(500); /* the heads write at once: a table, then 20 ms per thread's stack */
	for (int i = 0; i < g->n; i++)
		dump_to[i] = cn_log_size(g, i);
}

/* Head @i's log, its last CN_LOG_WINDOW bytes, into @all (NUL-terminated); its length, and in
 * *@from and *@to the dump's place in it (equal when there is none). */
static size_t cn_log_window(const struct cn_heads *g, int i, char *all, size_t *from, size_t *to)
{
	off_t size = cn_log_size(g, i);
	off_t base = size > (off_t)CN_LOG_WINDOW - 1 ? size - ((off_t)CN_LOG_WINDOW - 1) : 0;
	size_t n = chaos_capture_read_at(g->errfd[i], base, all, CN_LOG_WINDOW);
	const char *mark;

	*from = *to = n;
	if (!cn_dump_asked(g) || dump_to[i] <= dump_from[i] || dump_from[i] < base)
		return n;
	*from = (size_t)(dump_from[i] - base) < n ? (size_t)(dump_from[i] - base) : n;
	*to = (size_t)(dump_to[i] - base) < n ? (size_t)(dump_to[i] - base) : n;
	/* Only the dump goes apart: what the head logged in the same moment before it stays. */
	mark = memmem(all + *from, *to - *from, CN_DUMP_MARK, strlen(CN_DUMP_MARK));
	if (!mark) {
		*from = *to;
		return n;
	}
	while (mark > all + *from && mark[-1] != '\n')
		mark--;
	*from = (size_t)(mark - all);
	return n;
}

const char *cn_heads_explain(const struct cn_heads *g, size_t log_tail, char *buf, size_t len)
{
	size_t at = cn_heads_describe(g, 4, buf, len / 2);
	char *all = malloc(CN_LOG_WINDOW);
	size_t dump_at[CN_MAX_HEADS] = { 0 }, dump_len[CN_MAX_HEADS] = { 0 };
	char *dumps = malloc(CN_LOG_WINDOW);
	size_t dumps_len = 0;

	if (g->sh)
		cn_heads_ask_dump(g);
	/* Every head's log first: the dumps, long, come after all of them. */
	for (int i = 0; all && dumps && i < g->n && at + 1 < len; i++) {
		size_t from, to, n = cn_log_window(g, i, all, &from, &to);

		dump_at[i] = dumps_len;
		dump_len[i] = to - from < CN_LOG_WINDOW - 1 - dumps_len ?
				      to - from :
				      CN_LOG_WINDOW - 1 - dumps_len;
		memcpy(dumps + dumps_len, all + from, dump_len[i]);
		dumps_len += dump_len[i];
		memmove(all + from, all + to, n - to + 1); /* the log without the dump */
		n -= to - from;
		ftcc_appendf(buf, len, &at, "--- head %d, end of its log:\n%s\n", i,
			     all + (n > log_tail ? n - log_tail : 0));
	}
	for (int i = 0, left = g->n; all && dumps && i < g->n && at + 1 < len; i++, left--) {
		size_t room = (len - at) / (size_t)left, show = dump_len[i];
		char saved;

		if (!show)
			continue;
		if (show + 100 > room)
			show = room > 100 ? room - 100 : 0;
		saved = dumps[dump_at[i] + show];
		dumps[dump_at[i] + show] = '\0';
		ftcc_appendf(buf, len, &at, "--- head %d, its threads when asked%s:\n%s\n", i,
			     show < dump_len[i] ? " (cut)" : "", dumps + dump_at[i]);
		dumps[dump_at[i] + show] = saved;
	}
	free(dumps);
	free(all);
	return buf;
}
