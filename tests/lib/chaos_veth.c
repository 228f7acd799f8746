/* SPDX-License-Identifier: BSD-3-Clause */
/* Veth pairs through `ip`: names made from the test's pid, a free 10.251.x.y/32 address each,
 * bounded waits until the interface runs. Owns the list of pairs not yet deleted, which the
 * teardown empties, and the sweep of pairs whose process is gone.
 */
#define _GNU_SOURCE
#include "chaos_veth.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "chaos_proc.h"

#define VETH_TOOL_MS 5000
#define VETH_UP_MS 2000
#define VETH_PREFIX "ftv"

static char veth_made[CHAOS_VETH_MAX][CHAOS_VETH_NAME_LEN];

/* Runs "ip" with @args (at most 9, NULL-terminated); output into @out (NULL: dropped). Returns
 * ip's exit code or -1. */
static int veth_ip(char *out, size_t len, const char *const *args)
{
	char scratch[512];
	char *argv[11] = { "ip" };

	for (int k = 0; k < 9 && args[k]; k++) {
		argv[k + 1] = (char *)args[k];
	}
	if (!out) {
		out = scratch;
		len = sizeof(scratch);
	}
	return chaos_cmd(argv, out, len, VETH_TOOL_MS);
}

/* Whether some interface holds the IPv4 address @a (network order). */
static int veth_addr_taken(in_addr_t a)
{
	struct ifaddrs *ifs, *ifa;
	int taken = 0;

	if (getifaddrs(&ifs))
		return 1;
	for (ifa = ifs; ifa && !taken; ifa = ifa->ifa_next) {
		if (ifa->ifa_addr && ifa->ifa_addr->sa_family == AF_INET)
			taken = ((const struct sockaddr_in *)(const void *)ifa->ifa_addr)
					->sin_addr.s_addr == a;
	}
	freeifaddrs(ifs);
	return taken;
}

/* A free address 10.251.x.y (y in 1..254), starting from one made from the pid and @i. */
static int veth_pick_addr(int i, char *ip)
{
	uint32_t start = ((uint32_t)getpid() * 8u + (uint32_t)i) % (256u * 254u);

	for (uint32_t k = 0; k < 256u * 254u; k++) {
		uint32_t v = (start + k) % (256u * 254u);
		in_addr_t a;

		snprintf(ip, CHAOS_VETH_IP_LEN, "10.251.%u.%u", v / 254u, v % 254u + 1u);
		a = inet_addr(ip);
		if (!veth_addr_taken(a))
			return 0;
	}
	return -1;
}

static void veth_remember(const char *name, int on)
{
	for (int i = 0; i < CHAOS_VETH_MAX; i++) {
		if (on && veth_made[i][0] == '\0') {
			snprintf(veth_made[i], sizeof(veth_made[i]), "%s", name);
			return;
		}
		if (!on && strcmp(veth_made[i], name) == 0) {
			veth_made[i][0] = '\0';
		}
	}
}

/* Polls up to VETH_UP_MS until @name is up and running (carrier on both ends). 0 or -1. */
static int veth_wait_running(const char *name)
{
	int64_t deadline = chaos_now_ns() + (int64_t)VETH_UP_MS * 1000000;
	char path[64], state[32];

	snprintf(path, sizeof(path), "/sys/class/net/%s/operstate", name);
	for (;;) {
		FILE *f = fopen(path, "re");
		int up = 0;

		if (f) {
			up = fgets(state, sizeof(state), f) && strncmp(state, "up", 2) == 0;
			fclose(f);
		}
		if (up) {
			return 0;
		}
		if (chaos_now_ns() > deadline) {
			return -1;
		}
		chaos_sleep_ms(5);
	}
}

int chaos_veth_create(int i, char *name, char *ip)
{
	char peer[CHAOS_VETH_NAME_LEN + 1], cidr[CHAOS_VETH_IP_LEN + 3], out[1024] = "";
	const char *del[] = { "link", "del", name, NULL };
	const char *add[] = { "link", "add", name, "type", "veth", "peer", "name", peer, NULL };
	const char *addr[] = { "addr", "add", cidr, "dev", name, NULL };
	const char *up0[] = { "link", "set", name, "up", NULL };
	const char *up1[] = { "link", "set", peer, "up", NULL };
	const char *step = "link add";

	if (i < 0 || i >= CHAOS_VETH_MAX) {
		fprintf(stderr, "chaos: veth %d: out of range\n", i);
		return -1;
	}
	/* "ftv" + pid (at most 7 digits) + "x" + index: 12 characters, 13 with the peer's "p". */
	snprintf(name, CHAOS_VETH_NAME_LEN, VETH_PREFIX "%dx%d", (int)getpid(), i);
	snprintf(peer, sizeof(peer), "%sp", name);
	veth_ip(NULL, 0, del);
	if (veth_pick_addr(i, ip)) {
		fprintf(stderr, "chaos: veth %s: no free address in 10.251.0.0/16\n", name);
		return -1;
	}
	snprintf(cidr, sizeof(cidr), "%s/32", ip);
	veth_remember(name, 1);
	if (veth_ip(out, sizeof(out), add) != 0) {
		goto fail;
	}
	step = "addr add";
	if (veth_ip(out, sizeof(out), addr) != 0) {
		goto fail;
	}
	step = "link set up";
	if (veth_ip(out, sizeof(out), up0) != 0 || veth_ip(out, sizeof(out), up1) != 0) {
		goto fail;
	}
	step = "wait until running";
	if (veth_wait_running(name) != 0) {
		goto fail;
	}
	return 0;
fail:
	fprintf(stderr, "chaos: veth %s (%s): %s: %s\n", name, ip, step, out);
	return -1;
}

int chaos_veth_delete(const char *name)
{
	const char *del[] = { "link", "del", name, NULL };
	char path[64];
	int rc = veth_ip(NULL, 0, del);

	snprintf(path, sizeof(path), "/sys/class/net/%s", name);
	if (rc == 0 || access(path, F_OK) != 0) {
		veth_remember(name, 0);
	}
	return rc == 0 ? 0 : -1;
}

void chaos_veth_cleanup(void)
{
	for (int i = 0; i < CHAOS_VETH_MAX; i++) {
		char name[CHAOS_VETH_NAME_LEN];

		if (veth_made[i][0] == '\0') {
			continue;
		}
		snprintf(name, sizeof(name), "%.15s", veth_made[i]);
		if (chaos_veth_delete(name)) {
			fprintf(stderr, "chaos: could not delete veth %s\n", name);
		}
	}
}

void chaos_veth_sweep(void)
{
	DIR *d = opendir("/sys/class/net");
	struct dirent *e;
	char gone[CHAOS_VETH_MAX * 4][CHAOS_VETH_NAME_LEN];
	int n = 0;

	if (!d) {
		return;
	}
	/* Collect first: deleting while reading the directory may skip entries. */
	while ((e = readdir(d)) && n < (int)(sizeof(gone) / sizeof(gone[0]))) {
		int pid, idx, end = 0;

		if (sscanf(e->d_name, VETH_PREFIX "%dx%d%n", &pid, &idx, &end) != 2 ||
		    e->d_name[end] != '\0' || pid <= 0) {
			continue; /* not ours, or a peer (its pair goes with it) */
		}
		if (kill((pid_t)pid, 0) < 0 && errno == ESRCH) {
			snprintf(gone[n++], CHAOS_VETH_NAME_LEN, "%.15s", e->d_name);
		}
	}
	closedir(d);
	for (int i = 0; i < n; i++) {
		const char *del[] = { "link", "del", gone[i], NULL };

		veth_ip(NULL, 0, del);
	}
}
