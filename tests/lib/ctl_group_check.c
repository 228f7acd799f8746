/* SPDX-License-Identifier: BSD-3-Clause */
/* Reading what the member processes of a test group recorded: the agreement check, the
 * measurement lines and the plain-text description used in assertion messages.
 */
#define _GNU_SOURCE
#include "ctl_group.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "chaos_proc.h"
#include "ftcc/text.h"

static void ctl_group_mask_str(uint32_t mask, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	ftcc_appendf(buf, len, &at, "{");
	for (int i = 0; i < 32; i++)
		if (mask & (1u << i))
			ftcc_appendf(buf, len, &at, "%s%d", at > 1 ? "," : "", i);
	ftcc_appendf(buf, len, &at, "}");
}

double ctl_group_report(const struct ctl_group *g, const char *what, int64_t t_fault_ns,
			uint32_t who, uint32_t mask, uint64_t min_epoch, double *min_ms)
{
	double hi = -1, lo = -1;
	uint64_t epoch = 0;
	char ids[96], late[64];
	size_t at = 0;

	late[0] = '\0';
	for (int i = 0; i < g->n; i++) {
		const struct ctl_group_run *r = ctl_group_cur(g, i);
		const struct ctl_group_epoch *e;
		double ms;

		if (!(who & (1u << i)))
			continue;
		e = r ? ctl_group_find(r, mask, min_epoch) : NULL;
		if (!e) {
			ftcc_appendf(late, sizeof(late), &at, " %d", i);
			continue;
		}
		epoch = e->epoch;
		ms = chaos_ms(t_fault_ns, e->t_ns);
		hi = hi < 0 || ms > hi ? ms : hi;
		lo = lo < 0 || ms < lo ? ms : lo;
	}
	ctl_group_mask_str(mask, ids, sizeof(ids));
	if (late[0]) {
		chaos_report("ctl: %s: epoch >= %llu %s NOT seen by member(s)%s", what,
			     (unsigned long long)min_epoch, ids, late);
		hi = -1;
	} else {
		chaos_report("ctl: %s: epoch %llu %s at every member after %.1f ms (max), "
			     "%.1f (min)",
			     what, (unsigned long long)epoch, ids, hi, lo);
	}
	if (min_ms)
		*min_ms = lo;
	return hi;
}

/* Compares two records of the same epoch number; a description of the first difference into @why,
 * or 0 when they agree. */
static int ctl_group_same(const struct ctl_group_epoch *a, const struct ctl_group_epoch *b,
			  char *why, size_t len)
{
	if (a->nmembers != b->nmembers || a->mask != b->mask)
		snprintf(why, len, "members differ");
	else if (a->coord != b->coord)
		snprintf(why, len, "coordinator %u vs %u", a->coord, b->coord);
	else if (a->boundary != b->boundary)
		snprintf(why, len, "boundary %llu vs %llu", (unsigned long long)a->boundary,
			 (unsigned long long)b->boundary);
	else {
		for (uint32_t k = 0; k < a->nmembers && k < CTL_GROUP_MAX_N; k++) {
			if (a->m[k].id != b->m[k].id || a->m[k].flags != b->m[k].flags ||
			    a->m[k].incarnation != b->m[k].incarnation) {
				snprintf(why, len, "record %u differs (id %u/%u flags %#x/%#x)", k,
					 a->m[k].id, b->m[k].id, a->m[k].flags, b->m[k].flags);
				return 1;
			}
		}
		return 0;
	}
	return 1;
}

/* Checks one run's own records: order, self, info, size, incarnations known to the group. */
static int ctl_group_check_run(const struct ctl_group *g, int ri, char *why, size_t len)
{
	const struct ctl_group_run *r = &g->sh->run[ri];
	uint32_t n = atomic_load(&r->nepochs);

	if (atomic_load(&r->dropped)) {
		snprintf(why, len, "process %d (member %d) saw more than %d epochs", ri, r->member,
			 CTL_GROUP_MAX_EPOCHS);
		return -1;
	}
	for (uint32_t k = 0; k < n; k++) {
		const struct ctl_group_epoch *e = &r->epochs[k];

		if (k && e->epoch <= r->epochs[k - 1].epoch) {
			snprintf(why, len, "member %d (process %d) saw epoch %llu after %llu",
				 r->member, ri, (unsigned long long)e->epoch,
				 (unsigned long long)r->epochs[k - 1].epoch);
			return -1;
		}
		if (e->nmembers > (uint32_t)g->n || e->bad_info ||
		    (e->self_index >= 0 && (uint32_t)e->self_index >= e->nmembers) ||
		    (e->self_index >= 0 && e->m[e->self_index].id != (uint32_t)r->member)) {
			snprintf(why, len,
				 "member %d: epoch %llu: %u members, %d bad info blobs, self_index "
				 "%d",
				 r->member, (unsigned long long)e->epoch, e->nmembers, e->bad_info,
				 e->self_index);
			return -1;
		}
		for (uint32_t j = 0; j < e->nmembers; j++) {
			int known = 0, unknown = 0;

			if (j && e->m[j].id <= e->m[j - 1].id) {
				snprintf(why, len, "member %d: epoch %llu not in id order",
					 r->member, (unsigned long long)e->epoch);
				return -1;
			}
			for (int q = 0; q < g->nruns; q++) {
				const struct ctl_group_run *o = &g->sh->run[q];
				uint64_t inc = atomic_load(&o->incarnation);

				if (o->member != (int)e->m[j].id)
					continue;
				known |= inc == e->m[j].incarnation;
				unknown |= inc == 0;
			}
			if (!known && !unknown) {
				snprintf(why, len,
					 "member %d: epoch %llu lists member %u with incarnation "
					 "%#llx, which no process of it had",
					 r->member, (unsigned long long)e->epoch, e->m[j].id,
					 (unsigned long long)e->m[j].incarnation);
				return -1;
			}
		}
	}
	return 0;
}

/* Compares the records of runs @ra and @rb epoch by epoch. 0, or -1 with @why. */
static int ctl_group_cross(const struct ctl_group_run *ra, const struct ctl_group_run *rb,
			   char *why, size_t len)
{
	uint32_t na = atomic_load(&ra->nepochs), nb = atomic_load(&rb->nepochs);
	char diff[128];

	for (uint32_t x = 0; x < na; x++) {
		for (uint32_t y = 0; y < nb; y++) {
			if (ra->epochs[x].epoch != rb->epochs[y].epoch ||
			    !ctl_group_same(&ra->epochs[x], &rb->epochs[y], diff, sizeof(diff))) {
				continue;
			}
			snprintf(why, len, "epoch %llu: member %d and member %d disagree: %s",
				 (unsigned long long)ra->epochs[x].epoch, ra->member, rb->member,
				 diff);
			return -1;
		}
	}
	return 0;
}

int ctl_group_agree(const struct ctl_group *g, uint32_t live, char *why, size_t len)
{
	const struct ctl_group_epoch *last = NULL;

	if (!g->sh) {
		snprintf(why, len, "group not started");
		return -1;
	}
	for (int ri = 0; ri < g->nruns; ri++)
		if (ctl_group_check_run(g, ri, why, len))
			return -1;
	for (int a = 0; a < g->nruns; a++)
		for (int b = a + 1; b < g->nruns; b++)
			if (ctl_group_cross(&g->sh->run[a], &g->sh->run[b], why, len))
				return -1;
	for (int i = 0; i < g->n; i++) {
		const struct ctl_group_epoch *e;

		if (!(live & (1u << i)))
			continue;
		e = ctl_group_newest(g, i);
		if (!e) {
			snprintf(why, len, "member %d saw no epoch", i);
			return -1;
		}
		if (last && last->epoch != e->epoch) {
			snprintf(why, len, "live members end on different epochs (%llu, %llu)",
				 (unsigned long long)last->epoch, (unsigned long long)e->epoch);
			return -1;
		}
		last = e;
	}
	return 0;
}

/* Describes how process @ri ended, if it did, without reaping it. */
static void ctl_group_exit_str(const struct ctl_group *g, int ri, char *buf, size_t len)
{
	const struct ctl_group_run *r = &g->sh->run[ri];
	siginfo_t si = { 0 };
	int st = g->exit_status[ri];

	if (st == -1 && waitid(P_PID, (id_t)r->pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 &&
	    si.si_pid == r->pid) {
		snprintf(buf, len, "%s %d",
			 si.si_code == CLD_EXITED ? "exited" : "killed by signal", si.si_status);
	} else if (st == -1) {
		snprintf(buf, len, "%s",
			 g->run[r->member] == ri && g->frozen[r->member] ? "frozen" : "running");
	} else if (WIFEXITED(st)) {
		snprintf(buf, len, "exited %d", WEXITSTATUS(st));
	} else {
		snprintf(buf, len, "killed by signal %d", WIFSIGNALED(st) ? WTERMSIG(st) : st);
	}
}

size_t ctl_group_describe(const struct ctl_group *g, char *buf, size_t len)
{
	size_t at = 0;

	buf[0] = '\0';
	if (!g->sh)
		return 0;
	ftcc_appendf(buf, len, &at, "group %s (%d members, timeout %d ms)\n", g->name, g->n,
		     g->timeout_ms);
	for (int ri = 0; ri < g->nruns; ri++) {
		const struct ctl_group_run *r = &g->sh->run[ri];
		struct ctl_group_state st;
		char how[48], ids[96];

		ctl_group_run_state(r, &st);
		ctl_group_exit_str(g, ri, how, sizeof(how));
		ftcc_appendf(
			buf, len, &at,
			"  member %d (pid %d%s, %s, create %d, incarnation %#llx): %s at "
			"%.1f ms, reason \"%s\"\n   ",
			r->member, (int)r->pid, r->join ? ", join" : "", how,
			atomic_load(&r->created), (unsigned long long)atomic_load(&r->incarnation),
			st.state ? ctl_member_state_name((enum ctl_member_state)st.state) : "-",
			st.state ? chaos_ms(g->t0_ns, st.t_ns) : 0.0, st.reason);
		for (uint32_t k = 0; k < atomic_load(&r->nepochs); k++) {
			const struct ctl_group_epoch *e = &r->epochs[k];

			ctl_group_mask_str(e->mask, ids, sizeof(ids));
			ftcc_appendf(buf, len, &at, " epoch %llu%s coord %d at %.1f ms;",
				     (unsigned long long)e->epoch, ids,
				     e->coord == CTL_NO_MEMBER ? -1 : (int)e->coord,
				     chaos_ms(g->t0_ns, e->t_ns));
		}
		ftcc_appendf(buf, len, &at, "\n");
	}
	return at;
}

size_t ctl_group_log(const struct ctl_group *g, int i, char *buf, size_t len)
{
	static char all[1 << 20];
	size_t n;

	buf[0] = '\0';
	if (!ctl_group_cur(g, i) || g->errfd[g->run[i]] < 0 || len == 0)
		return 0;
	n = chaos_capture_read(g->errfd[g->run[i]], all, sizeof(all));
	if (n >= len)
		memmove(all, all + n - (len - 1), len);
	snprintf(buf, len, "%s", all);
	return strlen(buf);
}
