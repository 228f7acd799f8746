/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the membership runtime (ctl_member_*, ctl_daemon_*) in one process over 127.0.0.x:
 * formation, departures and takeover, restart and catch-up joins, source addresses of links,
 * the daemon with two groups and its STATUS text. Bad input and destroy's bound are in
 * test_ctl_runtime_input.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl_rt_harness.h"
#include "tcp_harness.h"

TestSuite(ctl_runtime, .timeout = 30);

/* ---- formation, departures, takeover -------------------------------------------------------- */

Test(ctl_runtime, three_members_form_shrink_and_take_over)
{
	static const uint32_t all[] = { 0, 1, 2 }, two[] = { 0, 1 }, one[] = { 1 };
	struct crt_grp g;

	crt_log_start();
	crt_grp_init(&g, "form3", 3, NULL);
	for (int i = 0; i < 3; i++)
		crt_grp_start(&g, i, 0, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ctl_member_wait(g.m[i], 1, FORM_MS), 0, "member %d formed", i);

	for (int i = 0; i < 3; i++) {
		struct ctl_view v;

		ctl_member_view(g.m[i], &v);
		cr_assert_not_null(v.e);
		cr_expect_eq(v.state, CTL_M_ACTIVE);
		cr_expect_eq(v.self, (uint32_t)i);
		cr_expect_eq(v.e->epoch, 1, "member %d: epoch 1", i);
		cr_expect_eq(v.e->coord, 0, "member 0 coordinates");
		cr_expect_eq(v.e->self_index, i);
		cr_assert(crt_same_ids(v.e, all, 3), "member %d sees 0 1 2", i);
		for (int j = 0; j < 3; j++) {
			cr_expect_eq(v.e->members[j].info_len, strlen(g.info[j]) + 1);
			cr_expect_str_eq((const char *)v.e->members[j].info, g.info[j]);
			cr_expect(v.e->members[j].flags & CTL_MF_CONTRIB);
		}
		ctl_epoch_put(v.e);

		const struct ctl_epoch *e = NULL;
		cr_expect_eq(ctl_member_op_epoch(g.m[i], 0, &e), 0);
		cr_expect(e && e->epoch == 1, "op 0 is in epoch 1");
		ctl_epoch_put(e);
	}
	/* on_change runs on the control thread after the change: poll for it, bounded. */
	for (int64_t end = crt_now_ms() + 1000;
	     crt_now_ms() < end && atomic_load(&crt_changes[2]) == 0;)
		usleep(1000);
	cr_expect_gt(atomic_load(&crt_changes[2]), 0, "on_change was called");

	char st[8192];
	ctl_member_status(g.m[0], st, sizeof(st));
	cr_expect(strstr(st, "member 0 of group \"form3\""), "status: %s", st);
	cr_expect(strstr(st, "active"), "%s", st);

	/* A member leaves: the other two go on in a new epoch within a second. */
	int64_t t0 = crt_now_ms();
	crt_grp_stop(&g, 2);
	uint64_t e2 = crt_wait_members(g.m[0], 1, two, 2, 1000);
	cr_assert_gt(e2, 1, "member 0 sees 0 1 without 2");
	cr_assert_gt(crt_wait_members(g.m[1], 1, two, 2, 1000 - (int)(crt_now_ms() - t0)), 1,
		     "member 1 sees 0 1 without 2");
	cr_expect_eq(crt_cur_epoch(g.m[1]), e2);

	/* The host of the coordinator leaves: member 1 takes over alone. */
	int64_t took = crt_now_ms();
	crt_grp_stop(&g, 0);
	took = crt_now_ms() - took;
	cr_expect_lt(took, 100, "destroy of the host took %lld ms", (long long)took);
	uint64_t e3 = crt_wait_members(g.m[1], e2, one, 1, 3000);
	cr_assert_gt(e3, e2, "member 1 carries on alone");
	struct ctl_view v;
	ctl_member_view(g.m[1], &v);
	cr_expect_eq(v.state, CTL_M_ACTIVE);
	cr_expect_eq(v.e->coord, 1, "member 1 coordinates now");
	ctl_epoch_put(v.e);
	ctl_member_status(g.m[1], st, sizeof(st));
	cr_expect(strstr(st, "form3"), "status of the new host names the group: %s", st);
	crt_grp_destroy(&g);
	cr_expect_eq(th_leak_check(), 0, "nothing leaked");
}

Test(ctl_runtime, links_leave_from_the_member_address)
{
	struct crt_grp g;
	struct sockaddr_in sa = { .sin_family = AF_INET };
	socklen_t len = sizeof(sa);
	uint8_t in[4096];
	struct ctl_msg h;
	int closed = 0;

	crt_log_start();
	/* Member 1 of a group on 127.0.0.10-11; the test plays member 0. */
	crt_grp_init_on(&g, "srcaddr", 2, NULL, 10);
	sa.sin_port = htons((uint16_t)crt_port_of(g.addr[0]));
	sa.sin_addr.s_addr = inet_addr("127.0.0.10");
	int lfd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(lfd, 4), 0);
	crt_grp_start(&g, 1, 0, 0);

	struct pollfd pfd = { .fd = lfd, .events = POLLIN };
	cr_assert_eq(poll(&pfd, 1, 2000), 1, "member 1 connects to member 0");
	int fd = accept(lfd, (struct sockaddr *)&sa, &len);
	cr_assert_geq(fd, 0);
	cr_expect_str_eq(inet_ntoa(sa.sin_addr), "127.0.0.11", "bound to its own address");
	size_t got = 0;
	for (int64_t end = crt_now_ms() + 2000; crt_now_ms() < end && got < CTL_HDR_SIZE + 45;) {
		got += crt_raw_read(fd, in + got, sizeof(in) - got, 100, &closed);
		if (closed)
			break;
	}
	cr_assert_eq(crt_decode_first(in, got, &h), 0, "a whole HELLO came (%zu bytes)", got);
	cr_expect_eq(h.type, CTL_HELLO);
	cr_expect_eq(h.member, 1);
	cr_expect_eq(h.expected, 2);
	cr_expect_str_eq(h.group, "srcaddr");
	cr_expect_eq(h.group_id, ctl_group_id("srcaddr"));
	cr_expect_neq(h.incarnation, 0);
	close(fd);
	close(lfd);
	crt_grp_destroy(&g);
}

Test(ctl_runtime, restarted_member_joins_again)
{
	static const uint32_t all[] = { 0, 1, 2 }, rest[] = { 0, 2 };
	struct crt_grp g;

	crt_log_start();
	crt_grp_init(&g, "restart", 3, NULL);
	for (int i = 0; i < 3; i++)
		crt_grp_start(&g, i, 0, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ctl_member_wait(g.m[i], 1, FORM_MS), 0);

	crt_grp_stop(&g, 1);
	uint64_t e2 = crt_wait_members(g.m[0], 1, rest, 2, 2000);
	cr_assert_gt(e2, 1);
	cr_assert_gt(crt_wait_members(g.m[2], 1, rest, 2, 2000), 1);

	crt_grp_start(&g, 1, 1, 0);
	uint64_t e3 = crt_wait_members(g.m[1], 0, all, 3, FORM_MS);
	cr_assert_gt(e3, e2, "the restarted member is admitted in a newer epoch");
	for (int i = 0; i < 3; i += 2)
		cr_expect_geq(crt_wait_members(g.m[i], e2, all, 3, 2000), e3,
			      "member %d sees 1 back", i);

	struct ctl_view v;
	ctl_member_view(g.m[1], &v);
	cr_expect_eq(v.e->self_index, 1);
	cr_expect(v.e->members[1].flags & CTL_MF_CONTRIB, "a plain join contributes at once");
	ctl_epoch_put(v.e);
	cr_expect_eq(ctl_member_ready(g.m[1]), -EINVAL, "not a catch-up member");
	crt_grp_destroy(&g);
}

/* Flags of member @id in @m's current view; -1 when it is not in it. */
static long flags_of(struct ctl_member *m, uint32_t id, uint64_t *epoch)
{
	struct ctl_view v;
	long flags = -1;

	ctl_member_view(m, &v);
	for (uint32_t i = 0; v.e && i < v.e->nmembers; i++) {
		if (v.e->members[i].id == id)
			flags = v.e->members[i].flags;
	}
	*epoch = v.e ? v.e->epoch : 0;
	ctl_epoch_put(v.e);
	return flags;
}

Test(ctl_runtime, catch_up_member_becomes_contributor)
{
	static const uint32_t all[] = { 0, 1, 2 }, rest[] = { 0, 2 };
	struct crt_grp g;
	uint64_t ej = 0, er = 0;

	crt_log_start();
	crt_grp_init(&g, "catchup", 3, NULL);
	for (int i = 0; i < 3; i++)
		crt_grp_start(&g, i, 0, 0);
	for (int i = 0; i < 3; i++)
		cr_assert_eq(ctl_member_wait(g.m[i], 1, FORM_MS), 0);
	crt_grp_stop(&g, 1);
	uint64_t e2 = crt_wait_members(g.m[0], 1, rest, 2, 2000);
	cr_assert_gt(e2, 1);

	crt_grp_start(&g, 1, 1, 1);
	cr_assert_gt(crt_wait_members(g.m[1], 0, all, 3, FORM_MS), e2);
	long f = flags_of(g.m[1], 1, &ej);
	cr_assert_geq(f, 0);
	cr_expect_eq(f & CTL_MF_CONTRIB, 0, "a catch-up member does not contribute yet");
	cr_expect(flags_of(g.m[1], 0, &ej) & CTL_MF_CONTRIB, "the others do");

	cr_assert_eq(ctl_member_ready(g.m[1]), 0);
	for (int64_t end = crt_now_ms() + 2000; crt_now_ms() < end;) {
		ctl_member_wait(g.m[0], ej + 1, 100);
		f = flags_of(g.m[0], 1, &er);
		if (er > ej && f >= 0 && (f & CTL_MF_CONTRIB))
			break;
	}
	if (!(er > ej && f >= 0 && (f & CTL_MF_CONTRIB)))
		crt_log_dump();
	cr_expect_gt(er, ej, "readiness is committed in a newer epoch");
	cr_expect(f >= 0 && (f & CTL_MF_CONTRIB), "member 1 contributes now");
	crt_grp_destroy(&g);
}

/* ---- daemon ---------------------------------------------------------------------------------- */

Test(ctl_runtime, daemon_serves_two_groups_and_status)
{
	struct ctl_daemon *d = NULL;
	struct crt_grp a, b;
	char spec[64], st[16384], raw[16384];

	crt_log_start();
	cr_assert_eq(ctl_daemon_start("127.0.0.1:0", &d), 0);
	cr_assert_gt(ctl_daemon_port(d), 0);
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", ctl_daemon_port(d));
	crt_grp_init(&a, "alpha", 2, spec);
	crt_grp_init(&b, "beta", 2, spec);
	for (int i = 0; i < 2; i++) {
		crt_grp_start(&a, i, 0, 0);
		crt_grp_start(&b, i, 0, 0);
	}
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(ctl_member_wait(a.m[i], 1, FORM_MS), 0, "alpha %d", i);
		cr_assert_eq(ctl_member_wait(b.m[i], 1, FORM_MS), 0, "beta %d", i);
	}
	struct ctl_view v;
	ctl_member_view(a.m[1], &v);
	cr_expect_eq(v.e->coord, CTL_NO_MEMBER, "the daemon coordinates");
	cr_expect_eq(v.e->nmembers, 2);
	cr_expect_str_eq((const char *)v.e->members[0].info, "info-0");
	ctl_epoch_put(v.e);

	size_t n = ctl_daemon_status(d, st, sizeof(st));
	cr_assert_gt(n, 0);
	cr_expect_eq(n, strlen(st));
	cr_expect(strstr(st, "alpha") && strstr(st, "beta"), "status lists both groups:\n%s", st);

	int fd = crt_raw_connect(ctl_daemon_port(d)), closed = 0;
	cr_assert_eq(send(fd, "STATUS\n", 7, MSG_NOSIGNAL), 7);
	size_t got = crt_raw_read(fd, raw, sizeof(raw) - 1, 2000, &closed);
	close(fd);
	raw[got] = '\0';
	cr_expect(closed, "the daemon closes after the status text");
	cr_expect(strstr(raw, "alpha") && strstr(raw, "beta"), "STATUS lists both:\n%s", raw);
	cr_expect_eq(strcspn(raw, "\n"), strcspn(st, "\n"));
	cr_expect_eq(strncmp(raw, st, strcspn(st, "\n")), 0, "same first line:\n%s\n%s", raw, st);

	/* One group shrinks; the other is untouched. */
	crt_grp_stop(&a, 1);
	static const uint32_t zero[] = { 0 };
	cr_expect_gt(crt_wait_members(a.m[0], 1, zero, 1, 2000), 1);
	cr_expect_eq(crt_cur_epoch(b.m[0]), 1);
	crt_grp_destroy(&a);
	crt_grp_destroy(&b);
	ctl_daemon_stop(d);
	cr_expect_eq(th_leak_check(), 0, "nothing leaked");
}

Test(ctl_runtime, daemon_stop_tells_members)
{
	struct ctl_daemon *d = NULL;
	struct crt_grp a;
	char spec[64];

	crt_log_start();
	cr_assert_eq(ctl_daemon_start("127.0.0.1:0", &d), 0);
	snprintf(spec, sizeof(spec), "127.0.0.1:%d", ctl_daemon_port(d));
	crt_grp_init(&a, "gamma", 2, spec);
	crt_grp_start(&a, 0, 0, 0);
	crt_grp_start(&a, 1, 0, 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(ctl_member_wait(a.m[i], 1, FORM_MS), 0);
	int64_t t0 = crt_now_ms();
	ctl_daemon_stop(d);
	cr_expect_lt(crt_now_ms() - t0, 200, "the daemon stops promptly");
	/* The members no longer have a coordinator: they leave ACTIVE (search, then maybe LOST). */
	for (int64_t end = crt_now_ms() + 2000; crt_now_ms() < end;) {
		struct ctl_view v;

		ctl_member_view(a.m[0], &v);
		ctl_epoch_put(v.e);
		if (v.state != CTL_M_ACTIVE)
			break;
		usleep(5000);
	}
	struct ctl_view v;
	ctl_member_view(a.m[0], &v);
	ctl_epoch_put(v.e);
	cr_expect_neq(v.state, CTL_M_ACTIVE, "member 0 noticed the daemon is gone");
	crt_grp_destroy(&a);
}
