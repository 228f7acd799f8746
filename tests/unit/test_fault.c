/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the named fault points (FTCC_FAULT): what parses and what does not, that a
 * point that does not match does nothing, and, in forked children, that a match exits, kills or
 * stops the process once per spec.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/fault.h"
#include "ftcc/settings.h"

static int arm(const char *spec)
{
	cr_assert_eq(ftcc_settings_set(FTCC_SET_FAULT, spec), 0);
	return ftcc_fault_load();
}

Test(fault_parse, valid_specs)
{
	static const char *const ok[] = {
		"rs:3",
		"ag:0:2",
		"rd:5:*",
		"rd:5:*:stop",
		"connect:0:0:kill",
		"fill:18446744073709551615:4294967295:exit",
		"rs:1:0:exit,ag:2,have:3:*:stop",
		"report:1,decide:1,epoch:2,join:9",
	};

	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		cr_expect_eq(arm(ok[i]), 0, "\"%s\"", ok[i]);
		cr_expect_eq(ftcc_fault_armed, 1, "\"%s\" not armed", ok[i]);
	}
	cr_expect_eq(arm(""), 0);
	cr_expect_eq(ftcc_fault_armed, 0, "an empty FTCC_FAULT arms nothing");
}

Test(fault_parse, malformed_specs_arm_nothing)
{
	static const char *const bad[] = {
		"rs",
		"rs:",
		"rs:x",
		"bogus:1",
		":1",
		"rs:1:",
		"rs:1:2:",
		"rs:1:2:explode",
		"rs:1:2:exit:more",
		"rs:-1",
		"rs:+1",
		"rs:1:-2",
		"rs:1:4294967296",
		"rs:18446744073709551616",
		"rs:1,",
		",rs:1",
		"rs:1,,ag:2",
		"rs:1,ag",
		"RS:1",
		"rs :1",
		"rs:1:**",
		"rs:1 ",
	};

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(arm("rs:1"), 0);
		cr_assert_eq(ftcc_fault_armed, 1);
		cr_expect_eq(arm(bad[i]), -EINVAL, "\"%s\" accepted", bad[i]);
		cr_expect_eq(ftcc_fault_armed, 0, "\"%s\" left something armed", bad[i]);
	}
}

Test(fault_parse, too_many_specs)
{
	char spec[1024] = "";

	for (int i = 0; i < 40; i++) {
		strcat(spec, i ? ",rs:1" : "rs:1");
	}
	cr_expect_eq(arm(spec), -EINVAL);
	cr_expect_eq(ftcc_fault_armed, 0);
}

Test(fault_hit, other_points_do_nothing)
{
	cr_assert_eq(arm("rs:3:1:exit,ag:4:*:kill"), 0);
	ftcc_fault("ag", 3, 1);
	ftcc_fault("rs", 2, 1);
	ftcc_fault("rs", 3, 2);
	ftcc_fault("rs", 4, 1);
	ftcc_fault("rd", 3, 1);
	ftcc_fault("ag", 5, 0);
	ftcc_fault("r", 3, 1);
	ftcc_fault("rss", 3, 1);
	cr_expect_eq(ftcc_fault_armed, 1); /* still here */
}

/* Waits for @pid to exit, be killed or stop, 10 s at most. Returns its wait status. */
static int wait_child(pid_t pid)
{
	struct timespec tick = { 0, 2000000 };
	int status = 0;

	for (int i = 0; i < 5000; i++) {
		pid_t r = waitpid(pid, &status, WNOHANG | WUNTRACED);

		if (r == pid) {
			return status;
		}
		cr_assert_eq(r, 0, "waitpid: %d", errno);
		nanosleep(&tick, NULL);
	}
	kill(pid, SIGKILL);
	waitpid(pid, &status, 0);
	cr_assert_fail("the child neither exited nor stopped within 10 s");
	return status;
}

/* Forks a child that arms @spec and passes point @point of op @seq at @step, then exits 0. */
static pid_t fork_hit(const char *spec, const char *point, uint64_t seq, uint32_t step)
{
	pid_t pid = fork();

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		if (ftcc_settings_set(FTCC_SET_FAULT, spec) || ftcc_fault_load()) {
			_exit(10);
		}
		ftcc_fault(point, seq, step);
		_exit(0);
	}
	return pid;
}

Test(fault_hit, exit_action_exits_3)
{
	int st = wait_child(fork_hit("rs:3:1:exit", "rs", 3, 1));

	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x", st);
	st = wait_child(fork_hit("rs:3:1:exit", "rs", 3, 2));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "another step acted: %#x", st);
}

Test(fault_hit, any_step_and_second_spec)
{
	int st = wait_child(fork_hit("rd:4:*:exit", "rd", 4, 123));

	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x", st);
	st = wait_child(fork_hit("rd:4:exit", "rd", 4, 0));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 10, "\"rd:4:exit\" parsed: %#x", st);
	st = wait_child(fork_hit("rs:1:0:exit,ag:2:5:exit", "ag", 2, 5));
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 3, "status %#x", st);
}

Test(fault_hit, kill_is_the_default)
{
	int st = wait_child(fork_hit("ag:7", "ag", 7, 9));

	cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "status %#x", st);
}

/* A stopped child, continued, passes the same point again and is not stopped twice. */
Test(fault_hit, stop_acts_once)
{
	pid_t pid = fork();
	int st;

	cr_assert_neq(pid, -1);
	if (pid == 0) {
		if (ftcc_settings_set(FTCC_SET_FAULT, "have:2:0:stop") || ftcc_fault_load()) {
			_exit(10);
		}
		ftcc_fault("have", 2, 0);
		ftcc_fault("have", 2, 0);
		_exit(0);
	}
	st = wait_child(pid);
	cr_assert(WIFSTOPPED(st), "status %#x", st);
	cr_assert_eq(kill(pid, SIGCONT), 0);
	st = wait_child(pid);
	if (WIFSTOPPED(st)) {
		kill(pid, SIGKILL);
		waitpid(pid, &st, 0);
		cr_assert_fail("stopped a second time");
	}
	cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "status %#x", st);
}
