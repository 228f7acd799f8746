/* SPDX-License-Identifier: BSD-3-Clause */
/* Unit tests of the FTCC_* settings table: defaults, strict parsing at every range edge,
 * rejection of malformed values, re-reading the environment and the side effects of load.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ftcc/sys.h"

/* Last warning logged, captured by capture_sink. Criterion runs each test in its own process,
 * so this state is per test. */
static char last_warning[1024];
static int warnings;

static void capture_sink(enum ftcc_log_level level, const char *file __attribute__((unused)),
			 int line __attribute__((unused)), const char *msg)
{
	if (level == FTCC_LOG_WARN) {
		snprintf(last_warning, sizeof(last_warning), "%s", msg);
		warnings++;
	}
}

static void clear_env(void)
{
	const struct ftcc_setting_desc *t = ftcc_settings_table();
	for (int i = 0; i < FTCC_SET_COUNT; i++)
		unsetenv(t[i].name);
}

static void setup(void)
{
	clear_env();
	ftcc_log_set_sink(capture_sink);
	cr_assert_eq(ftcc_settings_load(), 0);
	warnings = 0;
	last_warning[0] = '\0';
}

TestSuite(settings, .init = setup);

Test(settings, table_is_complete)
{
	const struct ftcc_setting_desc *t = ftcc_settings_table();
	for (int i = 0; i < FTCC_SET_COUNT; i++) {
		cr_assert(strncmp(t[i].name, "FTCC_", 5) == 0, "%s", t[i].name);
		cr_assert(t[i].def && t[i].doc && t[i].doc[0], "%s", t[i].name);
		if (t[i].type == FTCC_SETTING_INT)
			cr_assert(t[i].min <= t[i].max, "%s", t[i].name);
	}
	cr_assert_str_eq(t[FTCC_SET_FAILURE_TIMEOUT_MS].name, "FTCC_FAILURE_TIMEOUT_MS");
	cr_assert_str_eq(t[FTCC_SET_FAILURE_TIMEOUT_MS].def, "2000");
	cr_assert_str_eq(t[FTCC_SET_DEBUG].def, "WARN");
	cr_assert_str_eq(t[FTCC_SET_SOCKET_IFNAME].def, "");
}

Test(settings, defaults_without_environment)
{
	const struct ftcc_setting_desc *t = ftcc_settings_table();
	for (int i = 0; i < FTCC_SET_COUNT; i++) {
		if (t[i].type == FTCC_SETTING_INT) {
			char buf[32];
			snprintf(buf, sizeof(buf), "%" PRId64, ftcc_setting_int(i));
			cr_assert_str_eq(buf, t[i].def, "%s", t[i].name);
		} else {
			cr_assert_str_eq(ftcc_setting_str(i), t[i].def, "%s", t[i].name);
		}
	}
	cr_assert_eq(ftcc_setting_int(FTCC_SET_NSTREAMS), 2);
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_WARN);
	cr_assert_eq(warnings, 0);
}

/* Every INT setting accepts both ends of its range and rejects one past each, keeping the
 * value it had. */
Test(settings, every_int_range_edge)
{
	const struct ftcc_setting_desc *t = ftcc_settings_table();
	for (int i = 0; i < FTCC_SET_COUNT; i++) {
		if (t[i].type != FTCC_SETTING_INT)
			continue;
		char buf[32];
		int64_t before = ftcc_setting_int(i);

		snprintf(buf, sizeof(buf), "%" PRId64, t[i].min - 1);
		cr_assert_eq(ftcc_settings_set(i, buf), -EINVAL, "%s=%s", t[i].name, buf);
		cr_assert_eq(ftcc_setting_int(i), before, "%s", t[i].name);
		snprintf(buf, sizeof(buf), "%" PRId64, t[i].max + 1);
		cr_assert_eq(ftcc_settings_set(i, buf), -EINVAL, "%s=%s", t[i].name, buf);
		cr_assert_eq(ftcc_setting_int(i), before, "%s", t[i].name);

		snprintf(buf, sizeof(buf), "%" PRId64, t[i].min);
		cr_assert_eq(ftcc_settings_set(i, buf), 0, "%s=%s", t[i].name, buf);
		cr_assert_eq(ftcc_setting_int(i), t[i].min, "%s", t[i].name);
		snprintf(buf, sizeof(buf), "%" PRId64, t[i].max);
		cr_assert_eq(ftcc_settings_set(i, buf), 0, "%s=%s", t[i].name, buf);
		cr_assert_eq(ftcc_setting_int(i), t[i].max, "%s", t[i].name);
	}
}

Test(settings, garbage_ints_rejected)
{
	static const char *const bad[] = { "",
					   " 4",
					   "4 ",
					   "+4",
					   "4x",
					   "0x10",
					   "1e3",
					   "4.0",
					   "--4",
					   "-",
					   "４",
					   "4\n",
					   "\t",
					   "99999999999999999999",
					   "-99999999999999999999",
					   "18446744073709551618" /* 2^64 + 2 */ };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(ftcc_settings_set(FTCC_SET_NSTREAMS, bad[i]), -EINVAL, "\"%s\"",
			     bad[i]);
		cr_assert_eq(ftcc_setting_int(FTCC_SET_NSTREAMS), 2, "\"%s\"", bad[i]);
	}
	cr_assert_eq(ftcc_settings_set(FTCC_SET_NSTREAMS, "007"), 0);
	cr_assert_eq(ftcc_setting_int(FTCC_SET_NSTREAMS), 7);
}

/* A variable named like a setting that is none (a typo, an old name) gets one WARN naming it;
 * the tools' own variables get none. */
Test(settings, unknown_variable_is_named_once)
{
	setenv("FTCC_PLUGIN_PATH", "/nowhere.so", 1);
	setenv("FTCC_TEST_QUICK", "1", 1);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_expect_eq(warnings, 0, "%s", last_warning);
	setenv("FTCC_EAGER_MAX", "0", 1);
	cr_assert_eq(ftcc_settings_load(), 0, "an unknown name is no error");
	cr_expect_eq(warnings, 1);
	cr_expect(strstr(last_warning, "FTCC_EAGER_MAX is not an ftcc setting"), "%s",
		  last_warning);
	cr_expect(strstr(last_warning, "_BYTES"), "%s", last_warning);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_expect_eq(warnings, 1, "once per process");
	unsetenv("FTCC_EAGER_MAX");
	unsetenv("FTCC_PLUGIN_PATH");
	unsetenv("FTCC_TEST_QUICK");
}

/* 0 means "derived" for the heartbeat and the reconnect bound: the value in effect is the
 * library's rule, shown by ftcc-settings --current. */
Test(settings, derived_values_in_effect)
{
	cr_assert_eq(ftcc_settings_set(FTCC_SET_FAILURE_TIMEOUT_MS, "400"), 0);
	cr_expect_eq(ftcc_setting_effective(FTCC_SET_HEARTBEAT_MS), 50);
	cr_expect_eq(ftcc_setting_effective(FTCC_SET_RECONNECT_MS), 400);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_FAILURE_TIMEOUT_MS, "5000"), 0);
	cr_expect_eq(ftcc_setting_effective(FTCC_SET_HEARTBEAT_MS), 100, "capped at 100");
	cr_assert_eq(ftcc_settings_set(FTCC_SET_FAILURE_TIMEOUT_MS, "100"), 0);
	cr_expect_eq(ftcc_setting_effective(FTCC_SET_HEARTBEAT_MS), 12);
	cr_expect_eq(ftcc_heartbeat_ms(20, 0), 5, "at least 5");
	cr_assert_eq(ftcc_settings_set(FTCC_SET_HEARTBEAT_MS, "30"), 0);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_RECONNECT_MS, "700"), 0);
	cr_expect_eq(ftcc_setting_effective(FTCC_SET_HEARTBEAT_MS), 30);
	cr_expect_eq(ftcc_setting_effective(FTCC_SET_RECONNECT_MS), 700);
	cr_expect_eq(ftcc_setting_effective(FTCC_SET_NSTREAMS), 2, "others as set");
}

/* String settings with a fixed syntax are checked when they load, like numbers: a bad value is
 * an error naming the variable, never a surprise later. */
Test(settings, string_settings_checked_at_load)
{
	static const char *const bad[][2] = { { "FTCC_DEGRADED", "bogus" },
					      { "FTCC_DEGRADED", "Rescale" },
					      { "FTCC_ALGO", "tree" },
					      { "FTCC_PORT_RANGE", "5-1" },
					      { "FTCC_PORT_RANGE", "30000" } };

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		warnings = 0;
		setenv(bad[i][0], bad[i][1], 1);
		cr_expect_eq(ftcc_settings_load(), -EINVAL, "%s=%s loaded", bad[i][0], bad[i][1]);
		cr_expect_eq(warnings, 1);
		cr_expect(strstr(last_warning, bad[i][0]), "%s", last_warning);
		unsetenv(bad[i][0]);
	}
	setenv("FTCC_DEGRADED", "fail", 1);
	setenv("FTCC_ALGO", "rd", 1);
	setenv("FTCC_PORT_RANGE", "30000-30100", 1);
	cr_expect_eq(ftcc_settings_load(), 0);
	cr_expect_str_eq(ftcc_setting_str(FTCC_SET_PORT_RANGE), "30000-30100");
	unsetenv("FTCC_DEGRADED");
	unsetenv("FTCC_ALGO");
	unsetenv("FTCC_PORT_RANGE");
}

Test(settings, error_names_variable_value_and_range)
{
	cr_assert_eq(ftcc_settings_set(FTCC_SET_NSTREAMS, "17"), -EINVAL);
	cr_assert_eq(warnings, 1);
	cr_assert(strstr(last_warning, "FTCC_NSTREAMS"), "%s", last_warning);
	cr_assert(strstr(last_warning, "\"17\""), "%s", last_warning);
	cr_assert(strstr(last_warning, "[1, 16]"), "%s", last_warning);
}

Test(settings, debug_levels_case_insensitive)
{
	cr_assert_eq(ftcc_settings_set(FTCC_SET_DEBUG, "trace"), 0);
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_TRACE);
	cr_assert_str_eq(ftcc_setting_str(FTCC_SET_DEBUG), "TRACE");
	cr_assert_eq(ftcc_settings_set(FTCC_SET_DEBUG, "None"), 0);
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_NONE);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_DEBUG, "INFO"), 0);
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_INFO);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_DEBUG, "warn"), 0);
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_WARN);

	static const char *const bad[] = { "", "verbose", "WARNING", " INFO", "2" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		cr_assert_eq(ftcc_settings_set(FTCC_SET_DEBUG, bad[i]), -EINVAL, "\"%s\"", bad[i]);
		cr_assert_str_eq(ftcc_setting_str(FTCC_SET_DEBUG), "WARN");
	}
	cr_assert(strstr(last_warning, "FTCC_DEBUG"), "%s", last_warning);
}

Test(settings, load_rereads_environment)
{
	setenv("FTCC_FAILURE_TIMEOUT_MS", "5000", 1);
	setenv("FTCC_SOCKET_IFNAME", "^lo,docker", 1);
	setenv("FTCC_DEBUG", "info", 1);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_assert_eq(ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS), 5000);
	cr_assert_str_eq(ftcc_setting_str(FTCC_SET_SOCKET_IFNAME), "^lo,docker");
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_INFO);

	const char *old = ftcc_setting_str(FTCC_SET_SOCKET_IFNAME);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_assert_eq(ftcc_setting_str(FTCC_SET_SOCKET_IFNAME), old, "same value, same storage");
	setenv("FTCC_FAILURE_TIMEOUT_MS", "100", 1);
	unsetenv("FTCC_SOCKET_IFNAME");
	unsetenv("FTCC_DEBUG");
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_assert_eq(ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS), 100);
	cr_assert_str_eq(ftcc_setting_str(FTCC_SET_SOCKET_IFNAME), "");
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_WARN);
	/* A string handed out before the reload is still readable. */
	cr_assert_str_eq(old, "^lo,docker");
}

/* A malformed variable is reported and falls back to its default; well-formed ones apply. */
Test(settings, load_with_bad_value)
{
	setenv("FTCC_NSTREAMS", "4", 1);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_assert_eq(ftcc_setting_int(FTCC_SET_NSTREAMS), 4);

	setenv("FTCC_NSTREAMS", "lots", 1);
	setenv("FTCC_SOCKBUF_BYTES", "1048576", 1);
	cr_assert_eq(ftcc_settings_load(), -EINVAL);
	cr_assert_eq(ftcc_setting_int(FTCC_SET_NSTREAMS), 2);
	cr_assert_eq(ftcc_setting_int(FTCC_SET_SOCKBUF_BYTES), 1048576);
	cr_assert(strstr(last_warning, "FTCC_NSTREAMS=\"lots\""), "%s", last_warning);

	setenv("FTCC_DEBUG", "loud", 1);
	cr_assert_eq(ftcc_settings_load(), -EINVAL);
	cr_assert_str_eq(ftcc_setting_str(FTCC_SET_DEBUG), "WARN");
	cr_assert_eq(ftcc_log_get_level(), FTCC_LOG_WARN);
}

Test(settings, load_arms_injection)
{
	setenv("FTCC_INJECT", "settings_probe:2", 1);
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_assert_str_eq(ftcc_setting_str(FTCC_SET_INJECT), "settings_probe:2");
	cr_assert_eq(ftcc_sys_inject_hit("settings_probe"), 1);
	cr_assert_eq(ftcc_sys_inject_hit("settings_probe"), 1);
	cr_assert_eq(ftcc_sys_inject_hit("settings_probe"), 0);

	cr_assert_eq(ftcc_settings_set(FTCC_SET_INJECT, "settings_probe"), 0);
	cr_assert_eq(ftcc_sys_inject_hit("settings_probe"), 1);
	cr_assert_eq(ftcc_sys_inject_hit("settings_probe"), 0);

	/* Reloading without the variable disarms what was armed. */
	setenv("FTCC_INJECT", "settings_probe:5", 1);
	cr_assert_eq(ftcc_settings_load(), 0);
	unsetenv("FTCC_INJECT");
	cr_assert_eq(ftcc_settings_load(), 0);
	cr_assert_eq(ftcc_sys_inject_hit("settings_probe"), 0);
}

Test(settings, out_of_range_ids)
{
	cr_assert_eq(ftcc_settings_set(FTCC_SET_COUNT, "1"), -EINVAL);
	int negative = -1;
	cr_assert_eq(ftcc_settings_set((enum ftcc_setting_id)negative, "1"), -EINVAL);
	cr_assert_eq(ftcc_settings_set(FTCC_SET_NSTREAMS, NULL), -EINVAL);
	cr_assert_eq(ftcc_setting_int(FTCC_SET_COUNT), 0);
	cr_assert_str_eq(ftcc_setting_str(FTCC_SET_COUNT), "");
}
