/* SPDX-License-Identifier: BSD-3-Clause */
/* ftcc-settings: prints the FTCC_* settings table as Markdown; --names their names; --current
 * the values this environment sets, derived ones resolved, and whether they are all valid.
 *
 * The README's settings table is checked against this output (scripts/check-readme-settings.sh),
 * so the table in include/ftcc/settings.h stays the one source of truth.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "ftcc/settings.h"

/* Prints @s with '|' escaped, so a doc line cannot break the Markdown table. */
static void print_cell(const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			fputs("\\|", stdout);
		else
			putchar(*s);
	}
}

static void print_row(const struct ftcc_setting_desc *d)
{
	fputs("| ", stdout);
	print_cell(d->name);
	fputs(" | ", stdout);
	if (d->type == FTCC_SETTING_STR && d->def[0] == '\0')
		fputs("(empty)", stdout);
	else
		print_cell(d->def);
	fputs(" | ", stdout);
	print_cell(d->doc);
	if (d->type == FTCC_SETTING_INT)
		printf(" (%" PRId64 "..%" PRId64 ")", d->min, d->max);
	fputs(" |\n", stdout);
}

/* --current: every setting as this environment sets it, a derived value (0 = derived) with the
 * value in effect. A malformed value is reported (the log line names it) and exits 1, as the
 * library would refuse to start. */
static int print_current(const struct ftcc_setting_desc *table)
{
	int bad = ftcc_settings_load() != 0;

	for (int i = 0; i < FTCC_SET_COUNT; i++) {
		const struct ftcc_setting_desc *d = &table[i];

		if (d->type == FTCC_SETTING_STR) {
			printf("%s=%s\n", d->name, ftcc_setting_str((enum ftcc_setting_id)i));
			continue;
		}
		int64_t v = ftcc_setting_int((enum ftcc_setting_id)i);
		int64_t eff = ftcc_setting_effective((enum ftcc_setting_id)i);

		if (eff != v)
			printf("%s=%" PRId64 " (in effect: %" PRId64 ")\n", d->name, v, eff);
		else
			printf("%s=%" PRId64 "\n", d->name, v);
	}
	return bad || ferror(stdout) ? 1 : 0;
}

int main(int argc, char **argv)
{
	if (argc > 2 ||
	    (argc == 2 && strcmp(argv[1], "--names") != 0 && strcmp(argv[1], "--current") != 0)) {
		fprintf(stderr, "usage: %s [--names | --current]\n", argv[0]);
		return 2;
	}
	const struct ftcc_setting_desc *table = ftcc_settings_table();
	if (argc == 2 && strcmp(argv[1], "--current") == 0)
		return print_current(table);
	if (argc == 2) {
		for (int i = 0; i < FTCC_SET_COUNT; i++)
			printf("%s\n", table[i].name);
		return 0;
	}
	printf("| Variable | Default | Meaning |\n");
	printf("| --- | --- | --- |\n");
	for (int i = 0; i < FTCC_SET_COUNT; i++)
		print_row(&table[i]);
	return ferror(stdout) ? 1 : 0;
}
