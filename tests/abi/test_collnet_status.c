/* SPDX-License-Identifier: BSD-3-Clause */
/* The status file a CollNet node publishes (FTCC_STATUS_DIR), read as a training process would,
 * with node heads (cn_heads.h): after forming, every node's file shows epoch 1, every member and
 * every contributor; after head 2 is SIGKILLed, the survivors' files show the new epoch, the
 * two members left, node 2 lost at that epoch at about the time of the kill, and contributors
 * 0 and 1; python/ftcc_status.py reads the same; closing says "closed". A directory that cannot
 * be written costs one WARN and nothing else.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <unistd.h>

#include "abi_fixture.h"
#include "chaos_proc.h"
#include "cn_heads.h"
#include "ftcc_status.h"

static struct cn_heads g;
static char dir[64], env[CN_MAX_HEADS][128], msg[16384];

static void status_fini(void)
{
	char cmd[160];

	cn_heads_end(&g);
	chaos_proc_cleanup();
	if (dir[0]) {
		snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
}

static const char *explain(void)
{
	return cn_heads_explain(&g, 1200, msg, sizeof(msg));
}

static int64_t unix_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

/* Node @node's status file into @buf; 0, or -1 when there is none. */
static int status_of(int node, char *buf, size_t len)
{
	char path[256], name[64];
	FILE *f;
	size_t n;

	/* The group name is the plug-in's; the node number ends the file name. */
	snprintf(name, sizeof(name), "-node%d.status", node);
	snprintf(path, sizeof(path), "ls '%s' | grep -- '%s$'", dir, name);
	f = popen(path, "r");
	if (!f || !fgets(name, sizeof(name), f)) {
		if (f)
			pclose(f);
		return -1;
	}
	pclose(f);
	name[strcspn(name, "\n")] = '\0';
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "r");
	if (!f)
		return -1;
	n = fread(buf, 1, len - 1, f);
	buf[n] = '\0';
	fclose(f);
	return 0;
}

/* The value of "key value" line @key in @text, or NULL. */
static const char *field(const char *text, const char *key, char *out, size_t len)
{
	size_t k = strlen(key);

	for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL) {
		if (strncmp(p, key, k) == 0 && p[k] == ' ') {
			size_t n = strcspn(p + k + 1, "\n");

			snprintf(out, len, "%.*s", (int)n, p + k + 1);
			return out;
		}
	}
	return NULL;
}

static void expect_field(int node, const char *text, const char *key, const char *want)
{
	char v[256];

	cr_expect(field(text, key, v, sizeof(v)) && strcmp(v, want) == 0,
		  "node %d: %s is \"%s\", want \"%s\":\n%s", node, key,
		  field(text, key, v, sizeof(v)) ? v : "(none)", want, text);
}

/* Every file of the group, polled until each node of @who shows @epoch_min or more. */
static int wait_epoch(uint32_t who, long epoch_min, int timeout_ms)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	char text[4096], v[64];

	for (;;) {
		int all = 1;

		for (int i = 0; i < g.n; i++) {
			if ((who >> i & 1) &&
			    (status_of(i, text, sizeof(text)) ||
			     !field(text, "epoch", v, sizeof(v)) || atol(v) < epoch_min))
				all = 0;
		}
		if (all)
			return 0;
		if (chaos_now_ns() > deadline)
			return -1;
		chaos_sleep_ms(10);
	}
}

/* Three heads with @o, each publishing its status in a fresh directory (@dir), running until
 * they completed 16 ops. */
static void start_with_status_dir(struct cn_opts *o)
{
	snprintf(dir, sizeof(dir), "/tmp/ftcc-status-XXXXXX");
	cr_assert_not_null(mkdtemp(dir));
	for (int h = 0; h < 3; h++) {
		snprintf(env[h], sizeof(env[h]), "FTCC_STATUS_DIR=%s", dir);
		o->env[h] = env[h];
	}
	cr_assert_eq(cn_heads_start(&g, 3, o), 0);
	cr_assert_eq(cn_heads_wait_ops(&g, 7, 16, 30000), 0, "%s", explain());
}

Test(collnet_status, kill_shows_in_the_survivors_files, .init = abi_setup, .fini = status_fini,
     .timeout = 90)
{
	static const struct ft_spec one[] = { { 1024, FTCC_FLOAT32, FTCC_SUM, 0 } };
	struct cn_opts o = { .version = 11, .depth = 8, .nops = -1, .script = one, .nspec = 1 };
	char text[4096], v[256], cmd[512], line[4096], updated[32];
	int64_t t_kill, before, t_lost;
	FILE *py;
	int seen = 0;

	setenv("FTCC_COLLNET_MIN_PERCENT", "0", 1); /* every head inherits it: see the end */
	start_with_status_dir(&o);
	for (int i = 0; i < 3; i++) {
		cr_assert_eq(status_of(i, text, sizeof(text)), 0, "node %d has no status file", i);
		expect_field(i, text, "format", "1");
		expect_field(i, text, "state", "running");
		expect_field(i, text, "epoch", "1");
		expect_field(i, text, "members", "0,1,2");
		expect_field(i, text, "contributors", "0,1,2");
		expect_field(i, text, "nodes", "3");
		snprintf(v, sizeof(v), "%d", i);
		expect_field(i, text, "node", v);
		cr_expect_null(field(text, "lost", v, sizeof(v)), "node %d: lost %s", i, v);
	}
	/* Nothing changes while the ops go on: the file is not rewritten per op. */
	cr_assert_eq(status_of(0, text, sizeof(text)), 0);
	cr_assert(field(text, "updated_ms", updated, sizeof(updated)));
	before = atomic_load(&cn_heads_head(&g, 0)->ndone);
	cr_assert_eq(cn_heads_wait_ops(&g, 7, before + 32, 30000), 0, "%s", explain());
	cr_assert_eq(status_of(0, text, sizeof(text)), 0);
	cr_expect_str_eq(field(text, "updated_ms", v, sizeof(v)), updated,
			 "node 0's file was rewritten while nothing changed:\n%s", text);
	t_kill = unix_ms();
	cn_heads_kill(&g, 2);
	before = atomic_load(&cn_heads_head(&g, 0)->ndone);
	cr_assert_eq(cn_heads_wait_ops(&g, 3, before + 24, 30000), 0, "%s", explain());
	cr_assert_eq(wait_epoch(3, 2, 10000), 0, "the survivors' files show no new epoch");
	for (int i = 0; i < 2; i++) {
		char epoch[32];
		long lost_epoch = -1;

		cr_assert_eq(status_of(i, text, sizeof(text)), 0);
		expect_field(i, text, "state", "running");
		expect_field(i, text, "members", "0,1");
		expect_field(i, text, "contributors", "0,1");
		cr_assert(field(text, "epoch", epoch, sizeof(epoch)));
		cr_assert(field(text, "lost", v, sizeof(v)), "node %d: no lost line:\n%s", i, text);
		cr_expect_eq(sscanf(v, "2 epoch %ld at_ms %" SCNd64, &lost_epoch, &t_lost), 2,
			     "lost %s", v);
		/* The epoch that removed it; a later epoch (a retry) may have followed. */
		cr_expect(lost_epoch >= 2 && lost_epoch <= atol(epoch),
			  "node %d: node 2 lost at epoch %ld, file at epoch %s", i, lost_epoch,
			  epoch);
		cr_expect(t_lost >= t_kill - 100 && t_lost <= unix_ms(),
			  "node %d: node 2 lost at %" PRId64 ", killed at %" PRId64, i, t_lost,
			  t_kill);
		/* The C reader (include/ftcc_status.h) sees the same in the file as written. */
		static struct ftcc_status st;

		cr_assert_eq(ftcc_status_parse(text, strlen(text), &st), 0, "%s", text);
		cr_expect_eq(st.node, (uint32_t)i);
		cr_expect_eq(st.nmembers, 2);
		cr_expect(ftcc_status_has(st.members, 0) && ftcc_status_has(st.members, 1) &&
			  !ftcc_status_has(st.members, 2));
		cr_expect_eq(st.epoch, (uint64_t)atol(epoch));
		cr_assert_eq(st.nlost, 1);
		cr_expect_eq(st.lost[0].node, 2);
		cr_expect_eq(st.lost[0].epoch, (uint64_t)lost_epoch);
		cr_expect_eq(st.lost[0].at_ms, t_lost);
		cr_expect_str_eq(st.state, "running");
	}
	/* The Python reader sees the same. */
	snprintf(cmd, sizeof(cmd), "python3 '%s/python/ftcc_status.py' '%s'", FTCC_SOURCE_DIR, dir);
	py = popen(cmd, "r");
	cr_assert_not_null(py);
	while (fgets(line, sizeof(line), py)) {
		if (strstr(line, "\"node\": 0,") || strstr(line, "\"node\": 1,")) {
			cr_expect(strstr(line, "\"members\": [0, 1]") &&
					  strstr(line, "\"lost\": {\"2\": {\"at_ms\":") &&
					  strstr(line, "\"state\": \"running\""),
				  "ftcc_status.py: %s", line);
			seen++;
		}
	}
	cr_expect_eq(pclose(py), 0, "ftcc_status.py failed");
	cr_expect_eq(seen, 2, "ftcc_status.py printed %d of the survivors' statuses", seen);
	/* And the README's example decides as it should on node 0. */
	snprintf(cmd, sizeof(cmd), "python3 '%s/examples/dropped_nodes.py' '%s' 0", FTCC_SOURCE_DIR,
		 dir);
	py = popen(cmd, "r");
	cr_assert_not_null(py);
	line[0] = '\0';
	if (!fgets(line, sizeof(line), py))
		line[0] = '\0';
	cr_expect_eq(pclose(py), 0, "dropped_nodes.py failed");
	cr_expect(strstr(line, "node 2 was dropped") && strstr(line, "this node saves") &&
			  strstr(line, "scaled by 1.500"),
		  "dropped_nodes.py: %s", line);
	/* Closing says so. */
	cr_assert_eq(cn_heads_stop(&g, 3, 1, 3000), 0, "%s", explain());
	/* (The two survivors close at their own pace with ops in flight: the one that closes
	 * second may run an op with only its own input first, which is why this test's heads
	 * run with FTCC_COLLNET_MIN_PERCENT=0, or that op would fail its group just before
	 * the close; that failure is the subject of failed_state_keeps_its_reason.) */
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(status_of(i, text, sizeof(text)), 0);
		expect_field(i, text, "state", "closed");
	}
}

Test(collnet_status, unwritable_directory_costs_one_warn, .init = abi_setup, .fini = status_fini,
     .timeout = 90)
{
	static const struct ft_spec one[] = { { 1024, FTCC_FLOAT32, FTCC_SUM, 0 } };
	struct cn_opts o = { .version = 11, .depth = 8, .nops = 64, .script = one, .nspec = 1 };
	char log[65536];

	for (int h = 0; h < 2; h++) {
		snprintf(env[h], sizeof(env[h]), "FTCC_STATUS_DIR=/nonexistent/ftcc-status");
		o.env[h] = env[h];
	}
	cr_assert_eq(cn_heads_start(&g, 2, &o), 0);
	cr_assert_eq(cn_heads_wait_ops(&g, 3, 64, 30000), 0, "%s", explain());
	for (int i = 0; i < 2; i++) {
		cr_expect_eq(atomic_load(&cn_heads_head(&g, i)->err), 0, "head %d: %s", i,
			     explain());
		cn_heads_log(&g, i, log, sizeof(log));
		cr_expect_eq(chaos_count(log, "cannot write the status file"), 1, "head %d:\n%s", i,
			     log);
	}
}

/* A node that can no longer go on (an op with fewer than FTCC_COLLNET_MIN_NODES inputs) says
 * so in its file: state failed, with the reason, and it stays failed after later ops. */
Test(collnet_status, failed_state_keeps_its_reason, .init = abi_setup, .fini = status_fini,
     .timeout = 90)
{
	static const struct ft_spec one[] = { { 1024, FTCC_FLOAT32, FTCC_SUM, 0 } };
	struct cn_opts o = {
		.version = 11, .depth = 8, .nops = -1, .script = one, .nspec = 1, .min_nodes = 3
	};
	char text[4096], v[256];
	int64_t deadline;

	start_with_status_dir(&o);
	cn_heads_kill(&g, 2);
	deadline = chaos_now_ns() + 10000LL * 1000000;
	for (int i = 0; i < 2; i++) {
		while (!atomic_load(&cn_heads_head(&g, i)->err) && chaos_now_ns() < deadline)
			chaos_sleep_ms(5);
		cr_assert_neq(atomic_load(&cn_heads_head(&g, i)->err), 0, "head %d went on: %s", i,
			      explain());
	}
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(status_of(i, text, sizeof(text)), 0);
		expect_field(i, text, "state", "failed");
		cr_expect(field(text, "reason", v, sizeof(v)) &&
				  strstr(v, "FTCC_COLLNET_MIN_NODES"),
			  "node %d: reason \"%s\":\n%s", i,
			  field(text, "reason", v, sizeof(v)) ? v : "(none)", text);
	}
	/* Closing a failed node keeps the verdict. */
	cr_assert_eq(cn_heads_stop(&g, 3, 1, 3000), 0, "%s", explain());
	for (int i = 0; i < 2; i++) {
		cr_assert_eq(status_of(i, text, sizeof(text)), 0);
		expect_field(i, text, "state", "failed");
	}
}
