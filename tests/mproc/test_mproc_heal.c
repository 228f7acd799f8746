/* SPDX-License-Identifier: BSD-3-Clause */
/* State healing (ftcc_state_offer, ftcc_state_ifetch) across processes: a member restarts as a
 * catch-up joiner and fetches the group's state (a large "model" and an "opt") from a member
 * the library picks, while the others go on with their allreduces (the joiner takes part in
 * them as a catch-up member meanwhile); member 0 offers nothing, so the library skips it; a
 * name nobody offers is FTCC_ERR_INVALID. In the second test the source is killed while the
 * model's data arrives, and the fetch finishes from the next member, bit for bit.
 *
 * Members run in their own processes (tests/lib/p2p_group.h). No root needed. Run with
 * --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chaos_proc.h"
#include "p2p_group.h"

#define MODEL_BYTES (128u << 20)
#define OPT_BYTES ((1u << 20) + 5)
#define JOINER 3
#define F_HEALED 0  /* the joiner has the state */
#define F_OFFERED 1 /* members 1 and 2 offer it */

TestSuite(ft_mproc_heal, .fini = pg_teardown, .timeout = 120);

/* Allreduces until one carries a 1 from a member that saw the joiner healed (or failing):
 * every member stops after the same op. @poll runs between ops (the joiner's fetch). Ops done,
 * or -1 after a failure (recorded). */
static int ops_until_healed(ftcc_comm_t *c, int me, int (*poll)(void *), void *arg)
{
	int ops = 0, failed = 0;

	for (;;) {
		float x = atomic_load(&pg->flag[F_HEALED]) ? 1.0f : 0.0f;
		int rc = ftcc_allreduce(c, &x, &x, 1, FTCC_FLOAT32, FTCC_SUM, NULL);

		if (rc && rc != FTCC_ERR_DEGRADED) {
			snprintf(pg->m[me].why, sizeof(pg->m[me].why), "allreduce %d: %s", ops,
				 ftcc_strerror(rc));
			pg->m[me].fail_line = __LINE__;
			return -1;
		}
		ops++;
		if (poll && !failed && poll(arg)) {
			failed = 1; /* recorded: the group still stops together */
			atomic_store(&pg->flag[F_HEALED], 1);
		}
		if (x > 0)
			return failed ? -1 : ops;
		usleep(500);
	}
}

struct joiner {
	ftcc_comm_t *c;
	int kill_source;
	uint8_t *model, *opt;
	ftcc_request_t *fm, *fo;
	int done_m, done_o, ops_fetching;
	int whole_at_stop; /* the model's last byte was in when its source was stopped */
	int watched;	   /* the watcher saw the first byte come */
	struct ftcc_p2p_status sm, so;
	int rc_m, rc_o;
};

/* The kill test's watcher: stops the model's source (member 1) the moment its first byte is
 * in, notes whether the last one was in already (then the kill was not mid-transfer), kills
 * it. A thread of its own, spinning: the ops between the joiner's polls take longer than the
 * transfer may. */
static void *watch_main(void *arg)
{
	struct joiner *j = arg;
	volatile const uint8_t *m = j->model;
	int64_t end = chaos_now_ns() + 30000000000ll;

	while (m[0] == 0xaa && chaos_now_ns() < end) {
	}
	j->watched = 1;
	if (pg->m[1].pid <= 0)
		return NULL;	     /* never signal a process group */
	kill(pg->m[1].pid, SIGSTOP); /* now: what it sent so far is all it sends */
	j->whole_at_stop = m[MODEL_BYTES - 1] != 0xaa;
	kill(pg->m[1].pid, SIGKILL);
	pg->m[JOINER].t_ns[0] = chaos_now_ns();
	return NULL;
}

/* Between the joiner's ops: the fetches' progress, then the check of what came and ready.
 * 1 to stop (a failure). */
static int joiner_poll(void *arg)
{
	struct joiner *j = arg;
	int me = JOINER;

	if (!j->done_m) {
		j->rc_m = ftcc_wait_p2p(j->fm, 0, &j->sm);
		j->done_m = j->rc_m != FTCC_ERR_TIMEOUT;
	}
	if (!j->done_o) {
		j->rc_o = ftcc_wait_p2p(j->fo, 0, &j->so);
		j->done_o = j->rc_o != FTCC_ERR_TIMEOUT;
	}
	if (!j->done_m || !j->done_o) {
		j->ops_fetching++;
		return 0;
	}
	if (!atomic_load(&pg->flag[F_HEALED])) {
		PG_FAIL_RET(1, j->rc_m || j->rc_o, "fetches: %s, %s", ftcc_strerror(j->rc_m),
			    ftcc_strerror(j->rc_o));
		PG_FAIL_RET(1, pg_check(j->model, MODEL_BYTES, 7, 1) >= 0, "the model differs");
		PG_FAIL_RET(1, pg_check(j->opt, OPT_BYTES, 7, 2) >= 0, "opt differs");
		PG_FAIL_RET(1, ftcc_comm_ready(j->c), "ready");
		pg->m[me].t_ns[1] = chaos_now_ns();
		atomic_store(&pg->flag[F_HEALED], 1);
	}
	return 0;
}

static void heal(int me, ftcc_comm_t *c, int kill_source)
{
	static struct joiner j;
	uint8_t *model = NULL, *opt = NULL, absent[16];
	pthread_t watcher;
	ftcc_request_t *r;
	int rc, ops;

	if (me == 1 || me == 2) {
		model = malloc(MODEL_BYTES);
		opt = malloc(OPT_BYTES);
		PG_FAIL_IF(!model || !opt, "no memory");
		pg_fill(model, MODEL_BYTES, 7, 1); /* the same state on every replica */
		pg_fill(opt, OPT_BYTES, 7, 2);
		PG_FAIL_IF(ftcc_state_offer(c, "model", model, MODEL_BYTES), "offer");
		PG_FAIL_IF(ftcc_state_offer(c, "opt", opt, OPT_BYTES), "offer");
		PG_FAIL_IF(ftcc_state_offer(c, "opt", opt, OPT_BYTES) != FTCC_ERR_INVALID,
			   "offered twice");
		atomic_fetch_add(&pg->flag[F_OFFERED], 1);
	}
	if (me != JOINER) {
		pg->m[me].ntx = ops_until_healed(c, me, NULL, NULL);
		if (me == 1 || me == 2) {
			PG_FAIL_IF(ftcc_state_withdraw(c, "model"), "withdraw");
			PG_FAIL_IF(ftcc_state_withdraw(c, "opt"), "withdraw");
			PG_FAIL_IF(ftcc_state_withdraw(c, "opt") != FTCC_ERR_INVALID, "twice");
		}
		free(model);
		free(opt);
		return;
	}
	/* the joiner: leaves, then comes back as a new incarnation catching up */
	pg_wait_flag(F_OFFERED, 2);
	ftcc_comm_destroy(c);
	pg_comm = NULL;
	usleep(200000);
	rc = pg_create(me, 1, 1, &pg_comm);
	PG_FAIL_IF(rc, "join: %s", ftcc_strerror(rc));
	c = pg_comm;
	j.c = c;
	j.kill_source = kill_source;
	j.model = malloc(MODEL_BYTES);
	j.opt = malloc(OPT_BYTES);
	PG_FAIL_IF(!j.model || !j.opt, "no memory");
	memset(j.model, 0xaa, MODEL_BYTES);
	/* a name nobody offers: every member says so */
	rc = ftcc_state_ifetch(c, "absent", absent, sizeof(absent), &r);
	PG_FAIL_IF(rc, "ifetch: %s", ftcc_strerror(rc));
	rc = ftcc_wait_p2p(r, 30000, NULL);
	PG_FAIL_IF(rc != FTCC_ERR_INVALID, "a state nobody offers: %s", ftcc_strerror(rc));
	if (kill_source)
		PG_FAIL_IF(pthread_create(&watcher, NULL, watch_main, &j), "thread");
	rc = ftcc_state_ifetch(c, "model", j.model, MODEL_BYTES, &j.fm);
	PG_FAIL_IF(rc, "ifetch: %s", ftcc_strerror(rc));
	rc = ftcc_state_ifetch(c, "opt", j.opt, OPT_BYTES, &j.fo);
	PG_FAIL_IF(rc, "ifetch: %s", ftcc_strerror(rc));
	ops = ops_until_healed(c, me, joiner_poll, &j);
	if (kill_source)
		pthread_join(watcher, NULL);
	PG_FAIL_IF(j.whole_at_stop, "the model came whole before its source was stopped: "
				    "nothing was killed mid-transfer");
	PG_FAIL_IF(kill_source && (!j.watched || pg->m[1].pid <= 0),
		   "the watcher did not see the model come (pid %d)", (int)pg->m[1].pid);
	if (ops < 0)
		return; /* recorded */
	pg->m[me].ntx = ops;
	pg->m[me].nrx = j.ops_fetching;
	pg->m[me].rx[0].peer = j.sm.source;
	pg->m[me].rx[1].peer = j.so.source;
	free(j.model);
	free(j.opt);
}

static void sc_heal(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	(void)S_;
	heal(me, c, 0);
}

static void sc_heal_kill(struct pg_shared *S_, int me, ftcc_comm_t *c)
{
	(void)S_;
	heal(me, c, 1);
}

Test(ft_mproc_heal, joiner_fetches_while_the_others_go_on)
{
	pg_run("heal", 4, sc_heal, 100000, 0);
	chaos_report("heal: the joiner ran %d ops while fetching; model from member %u, opt "
		     "from member %u",
		     pg->m[JOINER].nrx, pg->m[JOINER].rx[0].peer, pg->m[JOINER].rx[1].peer);
	cr_expect_eq(pg->m[JOINER].rx[0].peer, 1, "member 0 offers nothing: member 1 is next");
	cr_expect_eq(pg->m[JOINER].rx[1].peer, 1);
	cr_expect_geq(pg->m[JOINER].nrx, 1, "the group's ops went on while the joiner fetched");
}

Test(ft_mproc_heal, source_killed_mid_transfer)
{
	pg_run("healkill", 4, sc_heal_kill, 100000, 1u << 1);
	chaos_report("heal: model from member %u after member 1 was killed mid-transfer; the "
		     "joiner ran %d ops while fetching",
		     pg->m[JOINER].rx[0].peer, pg->m[JOINER].nrx);
	cr_expect_eq(pg->m[JOINER].rx[0].peer, 2, "the next source after the killed one");
}
