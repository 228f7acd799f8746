/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership state machines on a fake network, part five: seeded random sequences of kills,
 * restarts, freezes, partitions and leaves, over a network with latency and jitter (partitions
 * lose frames on some seeds and hold them on others; every fifth seed uses a daemon). Whatever
 * happens, the harness's invariants hold (one member list per epoch number, epochs only grow,
 * final states stay final), and once the faults stop the group settles: every live member is
 * ACTIVE in the newest epoch or in a final state, and that epoch lists exactly the ACTIVE ones.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>

#include "ctl_fakenet.h"

/* Seeds run (about 5 ms each); build with -DNSEEDS=3000 for a longer search. */
#ifndef NSEEDS
#define NSEEDS 200
#endif

struct chaos_state {
	uint32_t n;
	uint64_t partition_until;
};

/* Every live member is in a final state or ACTIVE in the newest epoch, and that epoch lists
 * exactly the ACTIVE members with their current incarnations. */
static int settled(struct fn *fn, void *arg)
{
	const struct chaos_state *cs = arg;
	uint64_t max = fn_max_epoch(fn, 0);
	const struct ctl_epoch_rec *v = NULL;
	uint32_t nactive = 0;

	for (uint32_t k = 0; k < cs->n; k++) {
		enum ctl_member_state st = fn_state(fn, (int)k);

		if (!fn_alive(fn, (int)k) || st == CTL_M_LOST || st == CTL_M_REMOVED ||
		    st == CTL_M_LEFT) {
			continue;
		}
		if (st != CTL_M_ACTIVE || fn_view(fn, (int)k)->epoch != max) {
			return 0;
		}
		v = fn_view(fn, (int)k);
		nactive++;
	}
	if (!v) {
		return 1;
	}
	for (uint32_t i = 0; i < v->nmembers; i++) {
		int m = (int)v->members[i].id;

		if (fn_state(fn, m) != CTL_M_ACTIVE ||
		    v->members[i].incarnation != fn_incarnation(fn, m)) {
			return 0;
		}
	}
	return v->nmembers == nactive;
}

/* Reports progress @op of member @k when it runs. */
static void progress(struct fn *fn, const int *frozen, int k, uint64_t op)
{
	if (fn_alive(fn, k) && !frozen[k] && fn_msm(fn, k)) {
		fn_progress(fn, k, op, op);
	}
}

/* One random fault on a live cluster. */
static void chaos_fault(struct fn *fn, struct chaos_state *cs, int *frozen)
{
	int k = (int)(fn_rand(fn) % cs->n);
	unsigned what = (unsigned)(fn_rand(fn) % 8);

	switch (what) {
	case 0:
	case 1:
		fn_kill(fn, k);
		frozen[k] = 0;
		break;
	case 2:
	case 3:
		if (!fn_alive(fn, k)) {
			fn_restart(fn, k, (int)(fn_rand(fn) % 2));
		} else if (frozen[k]) {
			fn_thaw(fn, k);
			frozen[k] = 0;
		} else {
			fn_freeze(fn, k);
			frozen[k] = 1;
		}
		break;
	case 4:
		if (fn_alive(fn, k) && !frozen[k]) {
			fn_restart(fn, k, 0);
		}
		break;
	case 5:
	case 6:
		fn_partition(fn, fn_rand(fn) & FN_ALL(cs->n), (int)(fn_rand(fn) % 2));
		cs->partition_until = fn_now(fn) + 200 + fn_rand(fn) % 3000;
		break;
	default:
		if (fn_alive(fn, k) && !frozen[k] && fn_msm(fn, k) &&
		    fn_state(fn, k) == CTL_M_ACTIVE && fn_rand(fn) % 4 == 0) {
			fn_leave(fn, k);
		}
		break;
	}
}

/* Runs seed @seed. 0, or -1 with what went wrong in @err. */
static int chaos_run(uint64_t seed, char *err, size_t len)
{
	struct fn_cfg cfg = { .daemon = seed % 5 == 4,
			      .sizes = { 4 + (uint32_t)(seed % 4) },
			      .latency_ms = 1 + seed % 20,
			      .jitter_ms = seed % 30,
			      .partition_delays = (int)(seed / 2 % 2),
			      .step_ms = 5,
			      .seed = seed };
	struct fn *fn = fn_new(&cfg);
	struct chaos_state cs = { .n = cfg.sizes[0] };
	int frozen[FN_MAX_NODES] = { 0 };
	uint32_t nfaults;
	int rc = -1;

	fn_form(fn, 3000);
	nfaults = 2 + (uint32_t)(fn_rand(fn) % 6);
	for (uint32_t i = 0; i < nfaults; i++) {
		fn_run(fn, 50 + fn_rand(fn) % 2500);
		if (cs.partition_until && fn_now(fn) >= cs.partition_until) {
			fn_heal(fn);
			cs.partition_until = 0;
		}
		for (uint32_t k = 0; k < cs.n; k++) {
			progress(fn, frozen, (int)k, fn_now(fn) / 10);
		}
		chaos_fault(fn, &cs, frozen);
	}
	/* The faults stop: heal, thaw, and let it settle. */
	fn_heal(fn);
	for (uint32_t k = 0; k < cs.n; k++) {
		if (frozen[k]) {
			fn_thaw(fn, (int)k);
		}
	}
	/* Detections already under way (a thawed member's silence) fire within a timeout or two. */
	fn_run(fn, 2500);
	if (fn_run_until(fn, settled, &cs, 60000) != 0) {
		snprintf(err, len, "did not settle within 60 s after the faults stopped");
		goto out;
	}
	fn_run(fn, 3000);
	if (!settled(fn, &cs)) {
		snprintf(err, len, "unsettled again");
		goto out;
	}
	if (fn_check(fn, err, len) != 0) {
		goto out;
	}
	rc = 0;
out:
	fn_free(fn);
	return rc;
}

Test(ctl_sm, chaos_seeds)
{
	char err[1024], failed[4096] = "";
	size_t n = 0;
	int nfail = 0;

	for (uint64_t seed = 1; seed <= NSEEDS; seed++) {
		if (chaos_run(seed, err, sizeof(err)) != 0) {
			fprintf(stderr, "chaos seed %llu failed: %s\n", (unsigned long long)seed,
				err);
			nfail++;
			if (n + 64 < sizeof(failed)) {
				n += (size_t)snprintf(failed + n, sizeof(failed) - n,
						      "seed %llu: %.*s; ", (unsigned long long)seed,
						      (int)(sizeof(failed) - n - 32), err);
			}
		}
	}
	cr_expect_eq(nfail, 0, "%d of %d seeds failed: %s", nfail, NSEEDS, failed);
}
