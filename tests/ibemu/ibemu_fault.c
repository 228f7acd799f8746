/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs emulator's faults: the test hook ftcc_ibemu_inject() (QP errors, a wire blackout,
 * port and device events) and the fabric cuts a test asks for through IBEMU_CUT_DIR.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ibemu.h"

#define EXPORT __attribute__((visibility("default")))

/* IBEMU_CUT_DIR lets a test cut the emulated fabric where nftables cuts an IP (the wire here is
 * not IP), looked at every 10 ms:
 *  - a file named by this process's pid: its port is off the fabric (a blackout, renewed), no
 *    packet in or out and no event, as when a cable beyond the switch is pulled;
 *  - a file "<this pid>-<peer pid>": nothing is written on the links to that process, requests
 *    and acknowledgements alike, while reads go on (a one-way cut: RC needs both ways, so the
 *    QPs at both ends time out). */
void emu_cut_check(uint64_t now)
{
	const char *dir = getenv("IBEMU_CUT_DIR");
	char path[256];

	if (!dir || !*dir || now < emu.cut_check_ns)
		return;
	emu.cut_check_ns = now + 10000000ull;
	snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid());
	if (access(path, F_OK) == 0)
		emu.blackout_until_ns = now + 20000000ull;
}

/* Whether @l is cut from this side now (see emu_cut_check()); a new link is looked at at once. */
int emu_link_cut(struct emu_link *l, uint64_t now)
{
	const char *dir = getenv("IBEMU_CUT_DIR");
	char path[256];

	if (!dir || !*dir || l->fd < 0)
		return 0;
	if (l->cut_ns && now < l->cut_ns + 10000000ull)
		return l->cut_out;
	l->cut_ns = now;
	if (!l->peer_pid) {
		struct ucred uc;
		socklen_t len = sizeof(uc);

		if (getsockopt(l->fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) == 0 && uc.pid > 0)
			l->peer_pid = uc.pid;
	}
	snprintf(path, sizeof(path), "%s/%d-%d", dir, (int)getpid(), l->peer_pid);
	l->cut_out = l->peer_pid > 0 && access(path, F_OK) == 0;
	return l->cut_out;
}

void emu_inject_locked(const char *what)
{
	uint64_t now = emu_now_ns();

	if (strcmp(what, "qp_error_one") == 0) {
		for (struct emu_ctx *c = emu.ctxs; c; c = c->next) {
			for (struct emu_qp *q = c->qps; q; q = q->next) {
				if (q->qp.state == IBV_QPS_RTS && q->nswr) {
					emu_qp_fail(q, IBV_WC_RETRY_EXC_ERR);
					return;
				}
			}
		}
	} else if (strcmp(what, "qp_error") == 0) {
		for (struct emu_ctx *c = emu.ctxs; c; c = c->next) {
			for (struct emu_qp *q = c->qps; q; q = q->next) {
				if (q->qp.state == IBV_QPS_RTS)
					emu_qp_fail(q, q->nswr ? IBV_WC_RETRY_EXC_ERR :
								 IBV_WC_SUCCESS);
			}
		}
	} else if (strncmp(what, "blackout:", 9) == 0) {
		emu.blackout_until_ns = now + (uint64_t)atol(what + 9) * 1000000ull;
	} else if (strcmp(what, "device_fatal") == 0) {
		for (struct emu_ctx *c = emu.ctxs; c; c = c->next) {
			c->port_up = 0;
			for (struct emu_qp *q = c->qps; q; q = q->next) {
				if (q->qp.state != IBV_QPS_RESET)
					emu_qp_fail(q, q->nswr ? IBV_WC_FATAL_ERR : IBV_WC_SUCCESS);
			}
			emu_ctx_async(c, IBV_EVENT_DEVICE_FATAL, NULL);
		}
	} else if (strcmp(what, "port_down") == 0 || strcmp(what, "port_up") == 0) {
		int up = what[5] == 'u';

		for (struct emu_ctx *c = emu.ctxs; c; c = c->next) {
			if (c->port_up != up)
				emu_ctx_async(c, up ? IBV_EVENT_PORT_ACTIVE : IBV_EVENT_PORT_ERR,
					      NULL);
			c->port_up = up;
		}
	}
}

/* Test hook (not a verb): "qp_error" fails every RTS queue pair of this process as a link
 * error would (retry exceeded on the first outstanding send, flush for the rest);
 * "qp_error_one" only the first with sends outstanding; "blackout:MS"
 * stops this process's emulated wire for MS ms; "port_down" and "port_up" change the port
 * state and raise the async event; "device_fatal" kills every device of the process (its QPs
 * to ERR, its ports down, IBV_EVENT_DEVICE_FATAL). Returns 0, or EINVAL for an unknown fault. */
EXPORT int ftcc_ibemu_inject(const char *what)
{
	if (!what || (strcmp(what, "qp_error") && strcmp(what, "qp_error_one") &&
		      strncmp(what, "blackout:", 9) && strcmp(what, "port_down") &&
		      strcmp(what, "port_up") && strcmp(what, "device_fatal")))
		return EINVAL;
	pthread_mutex_lock(&emu.lock);
	emu_inject_locked(what);
	pthread_mutex_unlock(&emu.lock);
	emu_wake();
	return 0;
}
