/* SPDX-License-Identifier: BSD-3-Clause */
/* A normal shutdown is no alert: members of a group that finished its ops destroy their
 * communicators one after another, in every order that matters (the coordinator's host first,
 * last, in the middle), and no process logs a WARN line. Each member's exit is a LEAVE, not a
 * death: the others log at INFO, hand the coordinator on, and exit 0 in turn.
 *
 * Not covered: every member exiting at the same moment. A member that leaves while the others
 * look for a new coordinator has nobody to send its LEAVE to; the successor then counts it as
 * dead, not as left, lacks a quorum and logs a WARN on its way out (seen in about 1 run in 10).
 *
 * Members run in their own processes (tests/lib/ft_group.h). No root needed. Run with --jobs 1.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

#include "chaos_proc.h"
#include "ft_group.h"

#define FORM_MS 10000
#define RUN_MS 30000
/* Between two exits: so that each LEAVE is handled, and a successor has taken over when the
 * coordinator's host left (a takeover awaits missing reports for min(T/2, 4 heartbeats), 400
 * ms here), before the next member goes. */
#define GAP_MS 1500
/* One member's destroy and exit, on a loaded machine. */
#define EXIT_BOUND_MS 5000
#define NOPS 24

static struct ft_group grp;
static char logbuf[1 << 16];

static void exit_teardown(void)
{
	ft_group_end(&grp, 2000, NULL, NULL);
	chaos_proc_cleanup();
}

TestSuite(ft_exit, .fini = exit_teardown, .timeout = 60);

/* The WARN lines of member @i's log, copied into @out; how many. */
static int warn_lines(int i, char *out, size_t len)
{
	size_t at = 0;
	int n = 0;

	out[0] = '\0';
	ft_group_log(&grp, i, logbuf, sizeof(logbuf));
	for (char *line = strtok(logbuf, "\n"); line; line = strtok(NULL, "\n")) {
		if (!strstr(line, " WARN "))
			continue;
		n++;
		if (at + strlen(line) + 2 < len)
			at += (size_t)snprintf(out + at, len - at, "%s\n", line);
	}
	return n;
}

/* @n members run NOPS ops, then exit one by one in @order (@n member ids). */
static void clean_exit(const char *name, int n, const int *order)
{
	struct ft_spec script[1] = { { 4096, FTCC_FLOAT32, FTCC_SUM, 0 } };
	struct ft_group_opts o = { .script = script, .nspec = 1, .limit = NOPS };
	uint32_t all = (1u << n) - 1, stopped = 0;
	char warns[4096];

	cr_assert_eq(ft_group_start(&grp, name, n, &o), 0);
	cr_assert_eq(ft_group_wait_created(&grp, all, FORM_MS), 0, "the group did not form");
	cr_assert_eq(ft_group_wait_op(&grp, all, NOPS - 1, RUN_MS), 0, "ops did not complete");
	cr_assert_eq(ft_group_wait_ended(&grp, all, RUN_MS), 0, "scripts did not end");
	for (int i = 0; i < n; i++) {
		const struct ft_run *r = ft_group_cur(&grp, i);

		cr_assert_eq(atomic_load(&r->end_rc), 0, "member %d ended its ops with %s", i,
			     ftcc_strerror(atomic_load(&r->end_rc)));
	}
	for (int k = 0; k < n && stopped != all; k++) {
		uint32_t now = 1u << order[k];

		for (int i = 0; i < n; i++) {
			if (now >> i & 1)
				ft_group_stop(&grp, i);
		}
		for (int i = 0; i < n; i++) {
			int st = -1;

			if (!(now >> i & 1))
				continue;
			cr_assert_neq(ft_group_wait_exit(&grp, i, EXIT_BOUND_MS, &st), 0,
				      "%s: member %d did not exit", name, i);
			cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0,
				  "%s: member %d exit status %#x", name, i, st);
			cr_expect_eq(atomic_load(&ft_group_cur(&grp, i)->destroy_rc), 0,
				     "%s: member %d: ftcc_comm_destroy failed", name, i);
		}
		stopped |= now;
		chaos_sleep_ms(GAP_MS);
	}
	for (int i = 0; i < n; i++) {
		int k = warn_lines(i, warns, sizeof(warns));

		cr_expect_eq(k, 0, "%s: member %d logged %d WARN line(s) at a normal exit:\n%s",
			     name, i, k, warns);
	}
}

Test(ft_exit, coordinator_host_first_of_3)
{
	static const int order[] = { 0, 1, 2 };

	clean_exit("exit012", 3, order);
}

Test(ft_exit, coordinator_host_last_of_3)
{
	static const int order[] = { 2, 1, 0 };

	clean_exit("exit210", 3, order);
}

Test(ft_exit, coordinator_host_in_the_middle_of_4)
{
	static const int order[] = { 2, 0, 3, 1 };

	clean_exit("exit2031", 4, order);
}

Test(ft_exit, two_members_either_order)
{
	static const int first[] = { 0, 1 }, second[] = { 1, 0 };

	clean_exit("exit01", 2, first);
	ft_group_end(&grp, 2000, NULL, NULL);
	clean_exit("exit10", 2, second);
}
