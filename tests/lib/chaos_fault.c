/* SPDX-License-Identifier: BSD-3-Clause */
/* Network faults through nft and ss: per-test nftables tables on the output hook, and the
 * listing and destruction of one process's TCP sockets. Owns the list of tables not yet
 * deleted, which the teardown empties.
 */
#define _GNU_SOURCE
#include "chaos_fault.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "chaos_proc.h"

#define CHAOS_TOOL_MS 5000
#define CHAOS_TABLE_PREFIX "ftcc_test_"
#define CHAOS_MAX_TABLES 4

static char chaos_tables[CHAOS_MAX_TABLES][32];

static long chaos_nft_rule(const char *table, const char *rule);

/* Port after the last ':' of an "addr:port" token ("[::1]:80" included). */
static int chaos_token_port(const char *tok, size_t len, uint16_t *port)
{
	const char *colon = NULL;

	for (size_t i = 0; i < len; i++)
		if (tok[i] == ':')
			colon = tok + i;
	if (!colon)
		return -1;
	*port = (uint16_t)strtoul(colon + 1, NULL, 10);
	return 0;
}

static uint64_t chaos_field_u64(const char *line, const char *key)
{
	const char *p = strstr(line, key);

	return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* Parses one socket line: "RecvQ SendQ local:port peer:port users:((...,pid=N,fd=M))". */
static int chaos_flow_parse(const char *line, pid_t pid, struct chaos_flow *f)
{
	char want[32];
	const char *tok[4];
	size_t toklen[4];
	const char *p = line, *users;
	int n = 0;

	snprintf(want, sizeof(want), "pid=%d,", (int)pid);
	users = strstr(line, want);
	if (!users)
		return -1;
	while (n < 4 && *p) {
		while (*p == ' ')
			p++;
		tok[n] = p;
		while (*p && *p != ' ')
			p++;
		toklen[n] = (size_t)(p - tok[n]);
		n++;
	}
	memset(f, 0, sizeof(*f));
	if (n < 4 || chaos_token_port(tok[2], toklen[2], &f->lport) ||
	    chaos_token_port(tok[3], toklen[3], &f->rport))
		return -1;
	f->fd = (int)chaos_field_u64(users, "fd=");
	return 0;
}

int chaos_flows(pid_t pid, uint16_t rport, struct chaos_flow *out, int max)
{
	char *argv[] = { "ss", "-tnpiH", "state", "established", NULL };
	static char buf[1 << 18];
	struct chaos_flow *cur = NULL;
	int n = 0;

	if (chaos_cmd(argv, buf, sizeof(buf), CHAOS_TOOL_MS) != 0)
		return -1;
	/* A socket line, then (with -i) an indented line of TCP info for it. */
	for (char *line = strtok(buf, "\n"); line; line = strtok(NULL, "\n")) {
		struct chaos_flow f;

		if (line[0] == '\t' || line[0] == ' ') {
			if (cur) {
				cur->bytes_sent = chaos_field_u64(line, "bytes_sent:");
				cur->bytes_received = chaos_field_u64(line, "bytes_received:");
			}
			cur = NULL;
			continue;
		}
		cur = NULL;
		if (chaos_flow_parse(line, pid, &f) || (rport && f.rport != rport) || n >= max)
			continue;
		out[n] = f;
		cur = &out[n++];
	}
	return n;
}

int chaos_flow_kill(uint16_t lport, uint16_t rport)
{
	char src[32], dst[32], out[1024];
	char *argv[] = { "ss", "-K", "-tnH", "src", src, "dst", dst, NULL };

	snprintf(src, sizeof(src), "127.0.0.1:%u", lport);
	snprintf(dst, sizeof(dst), "127.0.0.1:%u", rport);
	/* ss lists what it destroyed; nothing listed means nothing matched. */
	if (chaos_cmd(argv, out, sizeof(out), CHAOS_TOOL_MS) != 0)
		return -1;
	return strstr(out, src) ? 0 : -1;
}

int chaos_kill_flows(const char *src_ip, const char *dst_ip, const uint16_t *keep, int nkeep)
{
	static char out[1 << 16];
	char filter[1024];
	size_t at = 0;
	char *argv[] = { "ss", "-K", "-tnH", "state", "established", filter, NULL };
	int n = 0;

	at += (size_t)snprintf(filter + at, sizeof(filter) - at, "src %s", src_ip);
	if (dst_ip)
		at += (size_t)snprintf(filter + at, sizeof(filter) - at, " and dst %s", dst_ip);
	for (int i = 0; i < nkeep && at < sizeof(filter); i++)
		at += (size_t)snprintf(filter + at, sizeof(filter) - at,
				       " and sport != :%u and dport != :%u", keep[i], keep[i]);
	if (at >= sizeof(filter) || chaos_cmd(argv, out, sizeof(out), CHAOS_TOOL_MS) != 0)
		return -1;
	/* ss lists what it destroyed, one socket per line */
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n"))
		n += strstr(line, src_ip) != NULL;
	return n;
}

long chaos_nft_between(const char *table, const char *src_ip, const char *dst_ip,
		       const uint16_t *keep, int nkeep, const char *verdict)
{
	char rule[512], set[256] = "";
	size_t at = 0;

	for (int i = 0; i < nkeep && at < sizeof(set); i++)
		at += (size_t)snprintf(set + at, sizeof(set) - at, "%s%u", i ? ", " : "", keep[i]);
	if (nkeep)
		snprintf(rule, sizeof(rule),
			 "ip saddr %s ip daddr %s tcp sport != { %s } tcp dport != { %s } %s",
			 src_ip, dst_ip, set, set, verdict);
	else
		snprintf(rule, sizeof(rule), "ip saddr %s ip daddr %s meta l4proto tcp %s", src_ip,
			 dst_ip, verdict);
	return chaos_nft_rule(table, rule);
}

/* Runs "nft ARGS..." (at most 6); output into @out. Returns nft's exit code or -1. */
static int chaos_nft(char *out, size_t outlen, const char *a0, const char *a1, const char *a2,
		     const char *a3, const char *a4, const char *a5)
{
	char scratch[512];
	char *argv[] = { "nft",	     (char *)a0, (char *)a1, (char *)a2,
			 (char *)a3, (char *)a4, (char *)a5, NULL };

	if (!out) {
		out = scratch;
		outlen = sizeof(scratch);
	}
	return chaos_cmd(argv, out, outlen, CHAOS_TOOL_MS);
}

int chaos_nft_usable(char *why, size_t len)
{
	char out[512];
	int rc;

	if (geteuid() != 0) {
		snprintf(why, len, "not root");
		return 0;
	}
	rc = chaos_nft(out, sizeof(out), "list", "tables", NULL, NULL, NULL, NULL);
	if (rc != 0) {
		snprintf(why, len, "nft list tables: exit %d: %.200s", rc, out);
		return 0;
	}
	return 1;
}

void chaos_nft_sweep(void)
{
	static char out[16384];

	if (chaos_nft(out, sizeof(out), "list", "tables", NULL, NULL, NULL, NULL) != 0)
		return;
	for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
		char *name = strstr(line, "table inet " CHAOS_TABLE_PREFIX);
		long pid;

		if (!name)
			continue;
		name += strlen("table inet ");
		pid = strtol(name + strlen(CHAOS_TABLE_PREFIX), NULL, 10);
		if (pid > 0 && kill((pid_t)pid, 0) < 0 && errno == ESRCH)
			chaos_nft(NULL, 0, "delete", "table", "inet", name, NULL, NULL);
	}
}

static void chaos_table_remember(const char *name, int on)
{
	for (int i = 0; i < CHAOS_MAX_TABLES; i++) {
		if (on && chaos_tables[i][0] == '\0') {
			snprintf(chaos_tables[i], sizeof(chaos_tables[i]), "%.31s", name);
			return;
		}
		if (!on && strcmp(chaos_tables[i], name) == 0)
			chaos_tables[i][0] = '\0';
	}
}

int chaos_nft_table(char *name, size_t len)
{
	char out[512];

	snprintf(name, len, CHAOS_TABLE_PREFIX "%d", (int)getpid());
	chaos_nft(NULL, 0, "delete", "table", "inet", name, NULL, NULL);
	chaos_table_remember(name, 1);
	if (chaos_nft(out, sizeof(out), "add", "table", "inet", name, NULL, NULL) != 0 ||
	    chaos_nft(out, sizeof(out), "add", "chain", "inet", name,
		      "out { type filter hook output priority 0 ; policy accept ; }", NULL) != 0) {
		fprintf(stderr, "chaos: nft table %s: %s\n", name, out);
		chaos_nft_delete(name);
		return -1;
	}
	return 0;
}

/* Adds @rule to the table's chain; returns its handle or -1. */
static long chaos_nft_rule(const char *table, const char *rule)
{
	char out[1024];
	const char *h;

	if (chaos_nft(out, sizeof(out), "--echo", "--handle", "add rule inet", table, "out",
		      rule) != 0) {
		fprintf(stderr, "chaos: nft add rule %s: %s\n", rule, out);
		return -1;
	}
	h = strstr(out, "# handle ");
	return h ? strtol(h + strlen("# handle "), NULL, 10) : -1;
}

int chaos_nft_drop_port(const char *table, uint16_t port)
{
	char rule[64];

	snprintf(rule, sizeof(rule), "tcp sport %u drop", port);
	if (chaos_nft_rule(table, rule) < 0)
		return -1;
	snprintf(rule, sizeof(rule), "tcp dport %u drop", port);
	return chaos_nft_rule(table, rule) < 0 ? -1 : 0;
}

long chaos_nft_reset_sport(const char *table, uint16_t port)
{
	char rule[64];

	snprintf(rule, sizeof(rule), "tcp sport %u reject with tcp reset", port);
	return chaos_nft_rule(table, rule);
}

int chaos_nft_isolate_ip(const char *table, const char *ip)
{
	char cmd[512], out[1024];
	char *argv[] = { "nft", cmd, NULL };

	/* One invocation is one transaction: both directions are cut at the same instant. */
	snprintf(cmd, sizeof(cmd),
		 "add rule inet %s out ip saddr %s ip daddr != %s meta l4proto tcp drop ; "
		 "add rule inet %s out ip daddr %s ip saddr != %s meta l4proto tcp drop",
		 table, ip, ip, table, ip, ip);
	if (chaos_cmd(argv, out, sizeof(out), CHAOS_TOOL_MS) != 0) {
		fprintf(stderr, "chaos: nft %s: %s\n", cmd, out);
		return -1;
	}
	return 0;
}

int chaos_nft_del_rule(const char *table, long handle)
{
	char h[24];

	snprintf(h, sizeof(h), "%ld", handle);
	return chaos_nft(NULL, 0, "delete", "rule", "inet", table, "out handle", h) == 0 ? 0 : -1;
}

int chaos_nft_delete(const char *table)
{
	int rc = chaos_nft(NULL, 0, "delete", "table", "inet", table, NULL, NULL);

	if (rc == 0 || !chaos_nft_exists(table))
		chaos_table_remember(table, 0);
	return rc == 0 ? 0 : -1;
}

int chaos_nft_exists(const char *table)
{
	return chaos_nft(NULL, 0, "list", "table", "inet", table, NULL, NULL) == 0;
}

void chaos_fault_cleanup(void)
{
	for (int i = 0; i < CHAOS_MAX_TABLES; i++) {
		char name[32];

		if (chaos_tables[i][0] == '\0')
			continue;
		snprintf(name, sizeof(name), "%.31s", chaos_tables[i]);
		if (chaos_nft_delete(name))
			fprintf(stderr, "chaos: could not delete nft table inet %s\n", name);
	}
}
