/* SPDX-License-Identifier: BSD-3-Clause */
/* The C reader of CollNet status files (include/ftcc_status.h): a whole file as the plug-in
 * writes it, then every way a file can be malformed (each refused, never crashing), unknown
 * keys skipped, more lost nodes than the array holds, and reading from a path.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc_status.h"

static const char good[] = "format 1\n"
			   "group nccl-0123456789abcdef\n"
			   "node 1\n"
			   "nodes 4\n"
			   "state running\n"
			   "epoch 3\n"
			   "members 0,1,3\n"
			   "lost 2 epoch 2 at_ms 1764000000123\n"
			   "last_op 1187\n"
			   "contributors 0,1,3\n"
			   "updated_ms 1764000000456\n"
			   "pid 4242\n";

static struct ftcc_status st;

Test(status_read, a_whole_file)
{
	cr_assert_eq(ftcc_status_parse(good, strlen(good), &st), 0);
	cr_expect_str_eq(st.group, "nccl-0123456789abcdef");
	cr_expect_eq(st.node, 1);
	cr_expect_eq(st.nodes, 4);
	cr_expect_str_eq(st.state, "running");
	cr_expect_eq(st.epoch, 3);
	cr_expect_eq(st.nmembers, 3);
	cr_expect(ftcc_status_has(st.members, 0) && ftcc_status_has(st.members, 3));
	cr_expect(!ftcc_status_has(st.members, 2));
	cr_expect(!ftcc_status_has(st.members, FTCC_STATUS_NODES));
	cr_assert_eq(st.nlost, 1);
	cr_expect_eq(st.lost[0].node, 2);
	cr_expect_eq(st.lost[0].epoch, 2);
	cr_expect_eq(st.lost[0].at_ms, 1764000000123);
	cr_expect(st.has_last_op);
	cr_expect_eq(st.last_op, 1187);
	cr_expect(ftcc_status_has(st.contributors, 1) && !ftcc_status_has(st.contributors, 2));
	cr_expect_eq(st.updated_ms, 1764000000456);
	cr_expect_eq(st.pid, 4242);
	cr_expect_str_eq(st.reason, "");
}

/* @good with line @from replaced by @to ("" removes it). */
static int parse_edited(const char *from, const char *to)
{
	static char buf[2048];
	const char *at = strstr(good, from);

	cr_assert(at, "%s", from);
	snprintf(buf, sizeof(buf), "%.*s%s%s", (int)(at - good), good, to, at + strlen(from));
	return ftcc_status_parse(buf, strlen(buf), &st);
}

Test(status_read, malformed_files_are_refused)
{
	static const char *const edits[][2] = {
		{ "format 1\n", "format 2\n" },
		{ "format 1\n", "" },
		{ "node 1\n", "node x\n" },
		{ "node 1\n", "node 4\n" },
		{ "nodes 4\n", "nodes 1025\n" },
		{ "epoch 3\n", "epoch -3\n" },
		{ "epoch 3\n", "epoch 99999999999999999999\n" },
		{ "members 0,1,3\n", "members 0,,3\n" },
		{ "members 0,1,3\n", "members 0,1,\n" },
		{ "members 0,1,3\n", "members 0,1,1\n" },
		{ "members 0,1,3\n", "members 0,1024\n" },
		{ "members 0,1,3\n", "" },
		{ "lost 2 epoch 2 at_ms 1764000000123\n", "lost 2 epoch 2\n" },
		{ "lost 2 epoch 2 at_ms 1764000000123\n", "lost 2 at_ms 5 epoch 2\n" },
		{ "group nccl-0123456789abcdef\n",
		  "group nccl-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef\n" },
		{ "pid 4242\n", "pid 4242" }, /* no final newline */
		{ "state running\n", "\n" },
	};

	for (size_t i = 0; i < sizeof(edits) / sizeof(edits[0]); i++)
		cr_expect_eq(parse_edited(edits[i][0], edits[i][1]), FTCC_ERR_INVALID,
			     "\"%s\" -> \"%s\" was taken", edits[i][0], edits[i][1]);
	cr_expect_eq(ftcc_status_parse(NULL, 0, &st), FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_status_parse("", 0, &st), FTCC_ERR_INVALID);
	cr_expect_eq(ftcc_status_parse(good, 10, &st), FTCC_ERR_INVALID, "a truncated file");
}

Test(status_read, unknown_keys_skipped_and_many_lost_counted)
{
	char buf[8192];
	size_t at = (size_t)snprintf(buf, sizeof(buf),
				     "%sfuture_key 1 2 3\nstate failed\n"
				     "reason op 12: too few nodes\n",
				     good);

	for (int i = 0; i < FTCC_STATUS_LOST_MAX + 6; i++)
		at += (size_t)snprintf(buf + at, sizeof(buf) - at, "lost %d epoch %d at_ms 7\n",
				       100 + i, i + 1);
	cr_assert_eq(ftcc_status_parse(buf, at, &st), 0);
	cr_expect_str_eq(st.state, "failed", "the last line of a key wins");
	cr_expect_str_eq(st.reason, "op 12: too few nodes");
	cr_expect_eq(st.nlost, 1 + FTCC_STATUS_LOST_MAX + 6);
	cr_expect_eq(st.lost[FTCC_STATUS_LOST_MAX - 1].node, 100 + FTCC_STATUS_LOST_MAX - 2);
}

Test(status_read, from_a_path)
{
	char path[] = "/tmp/ftcc-status-test-XXXXXX";
	int fd = mkstemp(path);

	cr_assert_geq(fd, 0);
	cr_assert_eq(write(fd, good, strlen(good)), (ssize_t)strlen(good));
	close(fd);
	cr_expect_eq(ftcc_status_read(path, &st), 0);
	cr_expect_eq(st.epoch, 3);
	unlink(path);
	errno = 0;
	cr_expect_eq(ftcc_status_read(path, &st), FTCC_ERR_SYSTEM);
	cr_expect_eq(errno, ENOENT);
	cr_expect_eq(ftcc_status_read(NULL, &st), FTCC_ERR_INVALID);
}
