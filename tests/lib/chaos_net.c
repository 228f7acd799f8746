/* SPDX-License-Identifier: BSD-3-Clause */
/* The parent's side of the chaos pair: the environment the children inherit, the shared page,
 * starting, watching and ending the sender and receiver processes (chaos_child.c is what runs
 * in them).
 */
#define _GNU_SOURCE
#include "chaos_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "abi_net.h"
#include "chaos_proc.h"

void chaos_env(int failure_timeout_ms)
{
	extern char **environ;
	char names[64][64], value[16];
	int n = 0;

	/* Collect first: unsetenv reshuffles environ. */
	for (char **e = environ; *e && n < 64; e++) {
		const char *eq = strchr(*e, '=');

		/* FTCC_TEST_* choose what the tests run over; they stay. */
		if (strncmp(*e, "FTCC_", 5) == 0 && strncmp(*e, "FTCC_TEST_", 10) != 0 && eq &&
		    (size_t)(eq - *e) < sizeof(names[0]))
			snprintf(names[n++], sizeof(names[0]), "%.*s", (int)(eq - *e), *e);
	}
	for (int i = 0; i < n; i++)
		unsetenv(names[i]);
	unsetenv("NCCL_DEBUG");
	snprintf(value, sizeof(value), "%d", failure_timeout_ms);
	setenv("FTCC_FAILURE_TIMEOUT_MS", value, 1);
	/* CHAOS_DEBUG=INFO (not an FTCC_ name: kept) makes the children's logs say more. */
	setenv("FTCC_DEBUG", getenv("CHAOS_DEBUG") ? getenv("CHAOS_DEBUG") : "WARN", 1);
	setenv("FTCC_SOCKET_IFNAME", "lo", 1);
	setenv("FTCC_NSTREAMS", "2", 1);
	test_transport_env();
}

const char *chaos_role_name(enum chaos_role role)
{
	return role == CHAOS_SENDER ? "sender" : "receiver";
}

const char *chaos_call_name(int call)
{
	static const char *const names[] = { "none", "connect", "accept", "isend/irecv", "test" };

	return call >= 0 && call <= CHAOS_CALL_TEST ? names[call] : "?";
}

int chaos_pair_init(struct chaos_pair *p, const struct chaos_cfg *cfg)
{
	memset(p, 0, sizeof(*p));
	p->cfg = *cfg;
	p->errfd[0] = p->errfd[1] = -1;
	p->sh = mmap(NULL, sizeof(*p->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
		     0);
	if (p->sh == MAP_FAILED) {
		p->sh = NULL;
		return -1;
	}
	memset(p->sh, 0, sizeof(*p->sh));
	atomic_store(&p->sh->sent_total, -1);
	p->errfd[CHAOS_SENDER] = chaos_capture_open("chaos-sender-stderr");
	p->errfd[CHAOS_RECEIVER] = chaos_capture_open("chaos-receiver-stderr");
	return p->errfd[0] >= 0 && p->errfd[1] >= 0 ? 0 : -1;
}

/* What chaos_fork() hands the new child. */
struct chaos_spawn {
	struct chaos_pair *p;
	enum chaos_role role;
};

static int chaos_spawn_main(void *arg)
{
	struct chaos_spawn *s = arg;

	return chaos_child_run(s->p, s->role);
}

int chaos_pair_spawn(struct chaos_pair *p, enum chaos_role role)
{
	struct chaos_spawn s = { .p = p, .role = role };
	struct chaos_side *me = &p->sh->side[role];

	memset(me, 0, sizeof(*me));
	me->first_bad = -1;
	if (role == CHAOS_SENDER)
		atomic_store(&p->sh->sent_total, -1);
	/* The child gets a copy of @s (fork), so a stack object is fine. */
	p->pid[role] = chaos_fork(chaos_spawn_main, &s, p->errfd[role]);
	return p->pid[role] > 0 ? 0 : -1;
}

int chaos_pair_start(struct chaos_pair *p, const struct chaos_cfg *cfg)
{
	if (chaos_pair_init(p, cfg))
		return -1;
	return chaos_pair_spawn(p, CHAOS_RECEIVER) || chaos_pair_spawn(p, CHAOS_SENDER) ? -1 : 0;
}

void chaos_pair_end(struct chaos_pair *p)
{
	for (int r = 0; r < 2; r++) {
		if (p->pid[r] > 0)
			chaos_kill(p->pid[r]);
		p->pid[r] = 0;
		if (p->errfd[r] >= 0)
			close(p->errfd[r]);
		p->errfd[r] = -1;
	}
	if (p->sh)
		munmap(p->sh, sizeof(*p->sh));
	p->sh = NULL;
}

/* Polls @cond on side @role until it holds, the child is gone, or the deadline. */
static int chaos_wait(struct chaos_pair *p, enum chaos_role role, int timeout_ms,
		      int (*cond)(struct chaos_side *, long), long arg)
{
	int64_t deadline = chaos_now_ns() + (int64_t)timeout_ms * 1000000;
	struct chaos_side *s = &p->sh->side[role];

	for (;;) {
		if (cond(s, arg))
			return 0;
		if (chaos_now_ns() > deadline || p->pid[role] <= 0 || !chaos_alive(p->pid[role]))
			return cond(s, arg) ? 0 : -1;
		chaos_sleep_ms(1);
	}
}

static int chaos_cond_done(struct chaos_side *s, long n)
{
	return atomic_load(&s->done) >= n;
}

static int chaos_cond_stage(struct chaos_side *s, long stage)
{
	return atomic_load(&s->stage) >= stage;
}

static int chaos_cond_err(struct chaos_side *s, long unused)
{
	return atomic_load(&s->err) != 0;
}

static int chaos_cond_test_err(struct chaos_side *s, long unused)
{
	return atomic_load(&s->test_err) != 0;
}

int chaos_wait_done(struct chaos_pair *p, enum chaos_role role, long n, int timeout_ms)
{
	int rc = chaos_wait(p, role, timeout_ms, chaos_cond_done, n);

	return rc == 0 && chaos_cond_done(&p->sh->side[role], n) ? 0 : -1;
}

int chaos_wait_stage(struct chaos_pair *p, enum chaos_role role, int stage, int timeout_ms)
{
	return chaos_wait(p, role, timeout_ms, chaos_cond_stage, stage);
}

int chaos_wait_err(struct chaos_pair *p, enum chaos_role role, int timeout_ms)
{
	return chaos_wait(p, role, timeout_ms, chaos_cond_err, 0);
}

int chaos_wait_test_err(struct chaos_pair *p, enum chaos_role role, int timeout_ms)
{
	return chaos_wait(p, role, timeout_ms, chaos_cond_test_err, 0);
}

int chaos_pair_finish(struct chaos_pair *p, int timeout_ms, char *why, size_t len)
{
	int bad = 0;

	why[0] = '\0';
	atomic_store(&p->sh->close_now, 1);
	for (int r = 0; r < 2; r++) {
		int code = -1;

		if (chaos_wait_child(p, (enum chaos_role)r, timeout_ms, &code) != 0 || code != 0) {
			size_t n = strlen(why);

			snprintf(why + n, len - n, "%s exit code %d; ",
				 chaos_role_name((enum chaos_role)r), code);
			bad = 1;
		}
	}
	return bad ? -1 : 0;
}

int chaos_wait_child(struct chaos_pair *p, enum chaos_role role, int timeout_ms, int *code)
{
	int st = 0;

	if (p->pid[role] <= 0 || chaos_wait_exit(p->pid[role], timeout_ms, &st))
		return -1;
	p->pid[role] = 0;
	if (code)
		*code = st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	return 0;
}

size_t chaos_pair_stderr(struct chaos_pair *p, enum chaos_role role, char *buf, size_t len)
{
	return chaos_capture_read(p->errfd[role], buf, len);
}

int chaos_handle_port(const struct chaos_pair *p, uint16_t *port)
{
	const uint8_t *h = (const uint8_t *)p->sh->handle;

	if (atomic_load(&p->sh->side[CHAOS_RECEIVER].stage) < CHAOS_ST_LISTENING)
		return -1;
	*port = (uint16_t)(h[10] | (h[11] << 8));
	return 0;
}

const char *chaos_side_str(struct chaos_pair *p, enum chaos_role role)
{
	static char buf[2][320];
	struct chaos_side *s = &p->sh->side[role];

	snprintf(buf[role], sizeof(buf[role]),
		 "%s: stage %d, %ld done, err %d from %s, test err %d, %ld bad (first %ld), "
		 "why \"%s\"",
		 chaos_role_name(role), atomic_load(&s->stage), atomic_load(&s->done),
		 atomic_load(&s->err), chaos_call_name(s->err_call), atomic_load(&s->test_err),
		 s->bad, s->first_bad, s->why);
	return buf[role];
}
