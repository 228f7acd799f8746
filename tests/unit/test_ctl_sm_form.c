/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership state machines on a fake network (ctl_fakenet.h), part one: the quorum rule,
 * forming groups of 1 to 7 members (embedded and daemon), formation timeouts, and frames sent by
 * hand (probes, a stale incarnation). Faults are in test_ctl_sm_fail.c, partitions in
 * test_ctl_sm_part.c, joins and boundaries in test_ctl_sm_join.c, random sequences in
 * test_ctl_sm_chaos.c.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "ctl_fakenet.h"

TestSuite(ctl_sm, .timeout = 60);

static int quorum(const uint32_t *live, uint32_t nlive, const uint32_t *base, uint32_t nbase)
{
	return ctl_quorum(live, nlive, base, nbase);
}

#define Q(live, base)                                                                              \
	quorum(live, sizeof(live) / sizeof(uint32_t), base, sizeof(base) / sizeof(uint32_t))

Test(ctl_sm, quorum_truth_table)
{
	static const uint32_t b5[] = { 0, 1, 2, 3, 4 }, b4[] = { 0, 1, 2, 3 }, b2[] = { 0, 1 };
	static const uint32_t b1[] = { 0 }, odd[] = { 2, 5, 7, 9 };
	static const uint32_t l012[] = { 0, 1, 2 }, l34[] = { 3, 4 }, l234[] = { 2, 3, 4 };
	static const uint32_t l01[] = { 0, 1 }, l23[] = { 2, 3 }, l03[] = { 0, 3 },
			      l12[] = { 1, 2 };
	static const uint32_t l0[] = { 0 }, l1[] = { 1 }, l123[] = { 1, 2, 3 };
	static const uint32_t l29[] = { 2, 9 }, l57[] = { 5, 7 }, l579[] = { 5, 7, 9 };

	/* More than half. */
	cr_expect_eq(Q(l012, b5), 1);
	cr_expect_eq(Q(l234, b5), 1);
	cr_expect_eq(Q(b5, b5), 1);
	cr_expect_eq(Q(l34, b5), 0);
	cr_expect_eq(Q(l01, b5), 0);
	cr_expect_eq(Q(l123, b4), 1);
	cr_expect_eq(Q(l579, odd), 1);
	/* Exactly half: only with the lowest id of the base. */
	cr_expect_eq(Q(l01, b4), 1);
	cr_expect_eq(Q(l03, b4), 1);
	cr_expect_eq(Q(l23, b4), 0);
	cr_expect_eq(Q(l12, b4), 0);
	cr_expect_eq(Q(l0, b2), 1);
	cr_expect_eq(Q(l1, b2), 0);
	cr_expect_eq(Q(l29, odd), 1);
	cr_expect_eq(Q(l57, odd), 0);
	/* One member. */
	cr_expect_eq(Q(l0, b1), 1);
	cr_expect_eq(quorum(NULL, 0, b1, 1), 0);
	cr_expect_eq(quorum(NULL, 0, b2, 2), 0);
}

Test(ctl_sm, state_names)
{
	const char *seen[16] = { 0 };
	int n = 0;

	for (int s = CTL_M_BOOT; s <= CTL_M_LEFT; s++) {
		const char *name = ctl_member_state_name((enum ctl_member_state)s);

		cr_assert_not_null(name);
		cr_expect_gt(strlen(name), 0);
		for (int i = 0; i < n; i++) {
			cr_expect_str_neq(seen[i], name, "two states named %s", name);
		}
		seen[n++] = name;
	}
	for (int s = CTL_C_FORMING; s <= CTL_C_STOPPED; s++) {
		cr_assert_not_null(ctl_coord_state_name((enum ctl_coord_state)s));
	}
	cr_expect_str_neq(ctl_coord_state_name(CTL_C_RUNNING), ctl_coord_state_name(CTL_C_STOPPED));
}

static struct fn_cfg cfg_n(uint32_t n)
{
	return (struct fn_cfg){ .sizes = { n } };
}

/* Forms an embedded group of @n and checks epoch 1 everywhere, then that it stays put. */
static void form_n(uint32_t n)
{
	struct fn_cfg cfg = cfg_n(n);
	struct fn *fn = fn_new(&cfg);
	uint32_t ids[FN_MAX_VIEW], got;
	char status[4096];
	int fenced = -1;

	fn_form(fn, 2000);
	cr_expect_leq(fn_seen_all(fn, FN_ALL(n), 1), 500, "formed at %llu ms",
		      (unsigned long long)fn_seen_all(fn, FN_ALL(n), 1));
	for (uint32_t k = 0; k < n; k++) {
		const struct ctl_epoch_rec *v = fn_view(fn, (int)k);

		cr_assert_eq(v->epoch, 1);
		cr_expect_eq(v->boundary, 0, "epoch 1 starts at op %llu",
			     (unsigned long long)v->boundary);
		cr_expect_eq(v->coord, 0);
		cr_assert_eq(v->nmembers, n);
		for (uint32_t i = 0; i < n; i++) {
			cr_expect_eq(v->members[i].id, i);
			cr_expect(v->members[i].flags & CTL_MF_CONTRIB,
				  "member %u not contributing", i);
			cr_expect_eq(v->members[i].incarnation, fn_incarnation(fn, (int)i));
		}
		cr_expect_eq(ctl_msm_coord(fn_msm(fn, (int)k)), 0);
		cr_expect_eq(ctl_msm_op_epoch(fn_msm(fn, (int)k), 0, &fenced), v);
		cr_expect_eq(fenced, 0);
		if (k) {
			cr_expect_null(fn_coord(fn, (int)k), "member %u hosts a coordinator", k);
		}
	}
	cr_assert_not_null(fn_coord(fn, 0));
	cr_expect_eq(ctl_coord_state(fn_coord(fn, 0)), CTL_C_RUNNING);
	cr_expect_eq(ctl_coord_epoch(fn_coord(fn, 0)), 1);
	got = ctl_coord_members(fn_coord(fn, 0), ids, FN_MAX_VIEW);
	cr_assert_eq(got, n);
	for (uint32_t i = 0; i < n; i++) {
		cr_expect_eq(ids[i], i);
	}
	cr_expect_eq(ctl_coord_status(fn_coord(fn, 0), status, sizeof(status), 0) > 0, 1);
	cr_expect_eq(strlen(status), ctl_coord_status(fn_coord(fn, 0), status, sizeof(status), 0));
	cr_expect_not_null(strstr(status, "fake"), "status lacks the group name: %s", status);

	/* Heartbeats keep a healthy group as it is: three failure timeouts, no change. */
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), 1);
	cr_expect_eq(fn_max_proposed(fn, 0), 0);
	for (uint32_t k = 0; k < n; k++) {
		cr_expect_eq(fn_state(fn, (int)k), CTL_M_ACTIVE);
		cr_expect_eq(fn_view(fn, (int)k)->epoch, 1);
		cr_expect_gt(fn_sent(fn, (int)k, CTL_HB), 10, "member %u sent %u heartbeats", k,
			     fn_sent(fn, (int)k, CTL_HB));
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, form_1)
{
	form_n(1);
}

Test(ctl_sm, form_2)
{
	form_n(2);
}

Test(ctl_sm, form_3)
{
	form_n(3);
}

Test(ctl_sm, form_5)
{
	form_n(5);
}

Test(ctl_sm, form_7)
{
	form_n(7);
}

Test(ctl_sm, no_epoch_before_formation)
{
	struct fn_cfg cfg = cfg_n(3);
	struct fn *fn = fn_new(&cfg);
	int fenced = -1;

	fn_start(fn, 0);
	cr_expect_eq(fn_state(fn, 0), CTL_M_BOOT);
	cr_expect_null(fn_view(fn, 0));
	cr_expect_null(ctl_msm_op_epoch(fn_msm(fn, 0), 0, &fenced));
	fn_run(fn, 500);
	cr_expect_eq(fn_state(fn, 0), CTL_M_BOOT, "formed without members 1 and 2");
	cr_expect_null(fn_view(fn, 0));
	cr_expect_eq(ctl_coord_state(fn_coord(fn, 0)), CTL_C_FORMING);
	fn_start(fn, 1);
	fn_start(fn, 2);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(3), 1000, 0, 1, 2), 0);
	cr_expect_eq(fn_view(fn, 0)->epoch, 1);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, form_host_starts_last)
{
	struct fn_cfg cfg = cfg_n(5);
	struct fn *fn = fn_new(&cfg);

	/* Members 1..4 find nobody at member 0's port (refused) and keep trying. */
	for (int k = 1; k < 5; k++) {
		fn_start(fn, k);
	}
	fn_run(fn, 1500);
	for (int k = 1; k < 5; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_BOOT);
		cr_expect_null(fn_coord(fn, k), "member %d hosts a coordinator in BOOT", k);
	}
	fn_start(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(5), 2000, 0, 1, 2, 3, 4), 0);
	cr_expect_eq(fn_view(fn, 3)->epoch, 1);
	cr_expect_eq(fn_view(fn, 3)->coord, 0);
	cr_expect_leq(fn_seen_all(fn, FN_ALL(5), 1), 1500 + 1000);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, form_timeout_names_the_missing_member)
{
	struct fn_cfg cfg = cfg_n(5);
	struct fn *fn = fn_new(&cfg);
	uint64_t t;

	for (int k = 0; k < 4; k++) {
		fn_start(fn, k);
	}
	cr_assert_eq(fn_wait_final(fn, FN_ALL(4), 10000), 0);
	t = fn_now(fn);
	cr_expect_geq(t, fn_form_timeout(fn), "gave up at %llu ms, before the formation timeout",
		      (unsigned long long)t);
	cr_expect_leq(t, fn_form_timeout(fn) + 1000, "gave up at %llu ms", (unsigned long long)t);
	for (int k = 0; k < 4; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_LOST, "member %d: %s", k,
			     ctl_member_state_name(fn_state(fn, k)));
		cr_expect(fn_text_names(fn_reason(fn, k), 4),
			  "member %d's reason does not name 4: %s", k, fn_reason(fn, k));
		cr_expect_null(fn_view(fn, k));
	}
	cr_expect_eq(ctl_coord_state(fn_coord(fn, 0)), CTL_C_STOPPED);
	cr_expect_eq(fn_max_epoch(fn, 0), 0);
	/* A member starting late finds a stopped coordinator: refused, not admitted. */
	fn_start(fn, 4);
	cr_assert_eq(fn_wait_final(fn, FN_BIT(4), 10000), 0);
	cr_expect_neq(fn_state(fn, 4), CTL_M_ACTIVE);
	cr_expect_eq(fn_max_epoch(fn, 0), 0);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, form_without_host_is_lost)
{
	struct fn_cfg cfg = cfg_n(4);
	struct fn *fn = fn_new(&cfg);

	for (int k = 1; k < 4; k++) {
		fn_start(fn, k);
	}
	cr_assert_eq(fn_wait_final(fn, 0xe, 15000), 0);
	cr_expect_geq(fn_now(fn), 5000 - 100, "gave up at %llu ms, before the connect timeout",
		      (unsigned long long)fn_now(fn));
	cr_expect_leq(fn_now(fn), 5000 + 1000);
	for (int k = 1; k < 4; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_LOST);
		cr_expect_gt(strlen(fn_reason(fn, k)), 0);
		cr_expect_null(fn_coord(fn, k), "member %d hosts a coordinator without a view", k);
	}
	cr_expect_eq(fn_max_epoch(fn, 0), 0);
	FN_CHECK(fn);
	fn_free(fn);
}

/* ---- frames by hand ---------------------------------------------------------------------- */

static struct ctl_msg hello_of(const struct fn *fn, uint32_t id, uint64_t inc, uint32_t flags,
			       const struct fn_rec *view, struct ctl_member_rec *mem)
{
	struct ctl_msg m = { .type = CTL_HELLO,
			     .member = id,
			     .flags = flags,
			     .incarnation = inc,
			     .expected = 3,
			     .members = mem };

	snprintf(m.group, sizeof(m.group), "fake");
	m.group_id = ctl_group_id(m.group);
	if (view) {
		m.epoch = view->epoch;
		m.max_epoch = view->epoch;
		m.nmembers = view->n;
		for (uint32_t i = 0; i < view->n; i++) {
			mem[i] = (struct ctl_member_rec){ .id = view->ids[i],
							  .flags = view->flags[i],
							  .incarnation = view->inc[i] };
			mem[i].info_len =
				(uint16_t)snprintf((char *)mem[i].info, CTL_INFO_MAX, "g0.m%u.%llx",
						   view->ids[i], (unsigned long long)view->inc[i]);
		}
	} else {
		m.nmembers = 1;
		mem[0] = (struct ctl_member_rec){ .id = id, .incarnation = inc };
	}
	(void)fn;
	return m;
}

Test(ctl_sm, stale_incarnation_hello_is_refused)
{
	struct fn_cfg cfg = cfg_n(3);
	struct fn *fn = fn_new(&cfg);
	struct ctl_member_rec mem[3];
	const struct ctl_msg *got;
	struct fn_rec e1;
	uint64_t old, max;
	struct ctl_msg m;
	uint32_t n;
	int h;

	fn_form(fn, 2000);
	e1 = *fn_epoch(fn, 0, 1);
	old = fn_incarnation(fn, 2);
	fn_restart(fn, 2, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, FN_ALL(3), 2000, 0, 1, 2), 0);
	cr_assert_neq(fn_incarnation(fn, 2), old);
	cr_assert_eq(fn_view(fn, 0)->members[2].incarnation, fn_incarnation(fn, 2));
	max = fn_max_epoch(fn, 0);

	/* The old process of member 2 comes back (it was only stopped) and says HELLO. */
	h = fn_raw_open(fn, 0);
	m = hello_of(fn, 2, old, 0, &e1, mem);
	fn_raw_send(fn, h, &m);
	fn_run(fn, 200);
	got = fn_raw_msgs(fn, h, &n);
	cr_assert_eq(n, 1, "%u frames answered a stale HELLO", n);
	cr_expect_eq(got[0].type, CTL_REFUSE);
	cr_expect_eq(got[0].code, CTL_REF_STALE, "refused with %s", ctl_refuse_name(got[0].code));
	cr_expect_eq(fn_raw_status(fn, h), 2, "the coordinator left the stale link open");
	fn_run(fn, 2000);
	cr_expect_eq(fn_max_epoch(fn, 0), max);
	for (int k = 0; k < 3; k++) {
		cr_expect_eq(fn_state(fn, k), CTL_M_ACTIVE);
		cr_expect_eq(fn_view(fn, k)->members[2].incarnation, fn_incarnation(fn, 2));
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, probe_is_answered_with_the_coordinator)
{
	struct fn_cfg cfg = cfg_n(3);
	struct fn *fn = fn_new(&cfg);
	struct ctl_member_rec mem[1];
	const struct ctl_msg *got;
	struct ctl_msg m;
	uint32_t n;
	int h0, h2;

	fn_form(fn, 2000);
	m = hello_of(fn, 1, 0x77, CTL_HELLO_PROBE, NULL, mem);
	m.nmembers = 0;
	h0 = fn_raw_open(fn, 0);
	h2 = fn_raw_open(fn, 2);
	fn_raw_send(fn, h0, &m);
	fn_raw_send(fn, h2, &m);
	fn_run(fn, 200);

	got = fn_raw_msgs(fn, h0, &n);
	cr_assert_eq(n, 1, "a probe to the host was answered with %u frames", n);
	cr_expect_eq(got[0].type, CTL_REFUSE);
	cr_expect_eq(got[0].code, CTL_REF_NOT_COORD);
	cr_expect_eq(got[0].hint, 0, "the host names %d", (int)got[0].hint);
	got = fn_raw_msgs(fn, h2, &n);
	cr_assert_eq(n, 1);
	cr_expect_eq(got[0].code, CTL_REF_NOT_COORD);
	cr_expect_eq(got[0].hint, 0, "member 2 believes %d coordinates", (int)got[0].hint);
	cr_expect_eq(fn_raw_status(fn, h0), 2);
	cr_expect_eq(fn_raw_status(fn, h2), 2);
	fn_run(fn, 1000);
	cr_expect_eq(fn_max_epoch(fn, 0), 1);
	cr_expect_eq(fn_max_proposed(fn, 0), 0);
	FN_CHECK(fn);
	fn_free(fn);
}

/* ---- daemon ------------------------------------------------------------------------------ */

Test(ctl_sm, daemon_form_and_kill)
{
	struct fn_cfg cfg = { .daemon = 1, .sizes = { 4 } };
	struct fn *fn = fn_new(&cfg);
	uint64_t t;

	fn_form(fn, 2000);
	cr_expect_leq(fn_seen_all(fn, FN_ALL(4), 1), 500);
	for (int k = 0; k < 4; k++) {
		cr_expect_eq(fn_view(fn, k)->coord, CTL_NO_MEMBER);
		cr_expect_eq(ctl_msm_coord(fn_msm(fn, k)), CTL_NO_MEMBER);
		cr_expect_null(fn_coord(fn, k));
	}
	cr_assert_not_null(fn_daemon_coord(fn, 0));
	cr_expect_eq(ctl_coord_state(fn_daemon_coord(fn, 0)), CTL_C_RUNNING);

	/* Member 0 is nothing special with a daemon. */
	fn_run(fn, 300);
	t = fn_now(fn);
	fn_kill(fn, 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xe, 2000, 1, 2, 3), 0);
	cr_expect_eq(fn_view(fn, 1)->epoch, 2);
	cr_expect_eq(fn_view(fn, 1)->coord, CTL_NO_MEMBER);
	cr_expect_leq(fn_seen_all(fn, 0xe, 2) - t, 100 + 50, "removed after %llu ms",
		      (unsigned long long)(fn_seen_all(fn, 0xe, 2) - t));
	fn_run(fn, 300);
	t = fn_now(fn);
	fn_kill(fn, 2);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xa, 2000, 1, 3), 0);
	cr_expect_eq(fn_view(fn, 3)->epoch, 3);
	cr_expect_leq(fn_seen_all(fn, 0xa, 3) - t, 100 + 50);
	for (int k = 0; k < 4; k++) {
		cr_expect_null(fn_coord(fn, k));
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, daemon_freeze_member_removed_by_silence)
{
	struct fn_cfg cfg = { .daemon = 1, .sizes = { 4 } };
	struct fn *fn = fn_new(&cfg);
	uint64_t t, dt;

	fn_form(fn, 2000);
	fn_run(fn, 500);
	t = fn_now(fn);
	fn_freeze(fn, 2);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0xb, 4000, 0, 1, 3), 0);
	dt = fn_seen_all(fn, 0xb, 2) - t;
	cr_expect_geq(dt, 1000 - 100, "removed %llu ms after the freeze", (unsigned long long)dt);
	cr_expect_leq(dt, 1000 + 1000, "removed %llu ms after the freeze", (unsigned long long)dt);
	fn_thaw(fn, 2);
	cr_assert_eq(fn_wait_final(fn, FN_BIT(2), 10000), 0);
	cr_expect_eq(fn_state(fn, 2), CTL_M_REMOVED, "thawed member ended %s: %s",
		     ctl_member_state_name(fn_state(fn, 2)), fn_reason(fn, 2));
	cr_expect_eq(fn_max_epoch(fn, 0), 2);
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, daemon_three_groups)
{
	struct fn_cfg cfg = { .daemon = 1, .ngroups = 3, .sizes = { 2, 3, 4 } };
	struct fn *fn = fn_new(&cfg);
	uint64_t t;

	fn_form(fn, 2000);
	for (uint32_t g = 0; g < 3; g++) {
		cr_assert_not_null(fn_daemon_coord(fn, g));
		cr_expect_eq(ctl_coord_epoch(fn_daemon_coord(fn, g)), 1);
		cr_expect_eq(fn_max_epoch(fn, g), 1);
	}
	cr_expect_neq(fn_daemon_coord(fn, 0), fn_daemon_coord(fn, 1));
	fn_run(fn, 300);
	t = fn_now(fn);
	fn_kill(fn, fn_node(fn, 1, 1));
	cr_assert_eq(
		FN_WAIT_VIEW(fn, FN_BIT(fn_node(fn, 1, 0)) | FN_BIT(fn_node(fn, 1, 2)), 2000, 0, 2),
		0);
	cr_expect_leq(fn_seen_all(fn, FN_BIT(fn_node(fn, 1, 0)), 2) - t, 150);
	fn_run(fn, 3000);
	cr_expect_eq(fn_max_epoch(fn, 0), 1, "group 0 changed when group 1 lost a member");
	cr_expect_eq(fn_max_epoch(fn, 1), 2);
	cr_expect_eq(fn_max_epoch(fn, 2), 1, "group 2 changed when group 1 lost a member");
	for (uint32_t id = 0; id < 4; id++) {
		cr_expect_eq(fn_view(fn, fn_node(fn, 2, id))->nmembers, 4);
		cr_expect_eq(fn_state(fn, fn_node(fn, 2, id)), CTL_M_ACTIVE);
	}
	FN_CHECK(fn);
	fn_free(fn);
}

Test(ctl_sm, daemon_unreachable_member_is_lost)
{
	struct fn_cfg cfg = { .daemon = 1, .sizes = { 4 } };
	struct fn *fn = fn_new(&cfg);

	fn_form(fn, 2000);
	fn_run(fn, 300);
	fn_partition(fn, FN_BIT(3), 0);
	cr_assert_eq(FN_WAIT_VIEW(fn, 0x7, 4000, 0, 1, 2), 0);
	cr_assert_eq(fn_wait_final(fn, FN_BIT(3), 20000), 0);
	cr_expect_eq(fn_state(fn, 3), CTL_M_LOST, "member 3: %s",
		     ctl_member_state_name(fn_state(fn, 3)));
	cr_expect_null(fn_coord(fn, 3), "a daemon-mode member took over");
	fn_heal(fn);
	fn_run(fn, 2000);
	cr_expect_eq(fn_state(fn, 3), CTL_M_LOST);
	cr_expect_eq(fn_max_epoch(fn, 0), 2);
	FN_CHECK(fn);
	fn_free(fn);
}
