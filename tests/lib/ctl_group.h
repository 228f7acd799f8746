/* SPDX-License-Identifier: BSD-3-Clause */
/* A membership group whose members each run in their own forked process, for the multi-process
 * and chaos tests of control/: the test kills, freezes, restarts or cuts off members, then
 * checks what every member saw.
 *
 * Member i listens on 127.0.0.(10 + i):port_i (distinct loopback addresses, so an nftables rule
 * can cut one member off by address). Its process polls ctl_member_view() every few
 * milliseconds, and at once when the runtime signals a change, and records into a page shared
 * before fork every new epoch it sees (number, members, flags, incarnations, coordinator and the
 * CLOCK_MONOTONIC time it first saw it), its state with the reason text, and its own
 * incarnation. Each process (a restart is a new one) has its own record, kept until the group
 * ends, so the checks also cover what dead processes saw. The child writes its record; the
 * parent only reads it and sets the stop flag. One test thread drives a group.
 */
#ifndef FTCC_TESTS_CTL_GROUP_H
#define FTCC_TESTS_CTL_GROUP_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "ftcc/ctl.h"

#define CTL_GROUP_MAX_N 8	/* members in one test group */
#define CTL_GROUP_MAX_RUNS 16	/* member processes over a group's life, restarts included */
#define CTL_GROUP_MAX_EPOCHS 32 /* epochs one process records */
#define CTL_GROUP_IP_BASE 10	/* member i listens on 127.0.0.(CTL_GROUP_IP_BASE + i) */

/* One epoch as a member process first saw it. */
struct ctl_group_epoch {
	uint64_t epoch;
	uint64_t boundary;
	uint32_t coord;
	uint32_t nmembers; /* as published; at most CTL_GROUP_MAX_N are kept in m[] */
	uint32_t mask;	   /* bit (1 << id) for every member id */
	int self_index;
	int bad_info; /* member records whose info blob is not the one that member published */
	int64_t t_ns; /* CLOCK_MONOTONIC when the process first saw this epoch */
	struct {
		uint32_t id, flags;
		uint64_t incarnation;
	} m[CTL_GROUP_MAX_N];
};

/* What one member process reports. Written by that process only, except stop. */
struct ctl_group_run {
	int member;	     /* member id it runs */
	int join;	     /* started with cfg.join */
	pid_t pid;	     /* set by the parent */
	_Atomic int created; /* 0: not yet; 1: ctl_member_create() succeeded; < 0 its error */
	_Atomic int stop;    /* parent: destroy the member and exit 0 */
	_Atomic int64_t destroy_ns;   /* how long ctl_member_destroy() took (0: not yet) */
	_Atomic uint64_t incarnation; /* from its own record in a view; 0 until it is in one */
	_Atomic uint32_t nepochs;     /* entries of epochs[] written (release) */
	_Atomic uint32_t dropped;     /* epochs not recorded because epochs[] was full */
	uint64_t last_epoch;	      /* child only: the epoch number recorded last */
	struct ctl_group_epoch epochs[CTL_GROUP_MAX_EPOCHS];
	/* Current state, written under seq (odd while the child writes). */
	_Atomic uint32_t seq;
	int state;	    /* enum ctl_member_state; 0 before the first view */
	int64_t t_state_ns; /* when the process first saw this state */
	char reason[CTL_TEXT_MAX];
};

/* The page the parent and every member process of one group share. */
struct ctl_group_shared {
	struct ctl_group_run run[CTL_GROUP_MAX_RUNS];
};

/* Options of a group. Zero fields take the defaults given. */
struct ctl_group_opts {
	int timeout_ms;		 /* failure timeout of every member; 0: 1000 */
	int connect_timeout_ms;	 /* 0: 2 * timeout_ms */
	const char *coordinator; /* NULL: embedded; "host:port" of a daemon (copied) */
};

/* A group as the test (the parent) sees it. Owned by the test; zero it (or let ctl_group_end() do
 * so) before ctl_group_start(). */
struct ctl_group {
	char name[CTL_GROUP_MAX];
	int n;
	int timeout_ms, connect_timeout_ms;
	char coordinator[64];		     /* "" for embedded */
	char ip[CTL_GROUP_MAX_N][16];	     /* "127.0.0.(10 + i)" */
	char addr[CTL_GROUP_MAX_N][32];	     /* "ip:port", the member's control address */
	int run[CTL_GROUP_MAX_N];	     /* current run of each member, -1: none */
	int frozen[CTL_GROUP_MAX_N];	     /* SIGSTOPped and not resumed */
	int nruns;			     /* runs started */
	int errfd[CTL_GROUP_MAX_RUNS];	     /* each run's captured stderr */
	int exit_status[CTL_GROUP_MAX_RUNS]; /* wait status once reaped, -1 before */
	int64_t t0_ns;			     /* when ctl_group_start() began */
	struct ctl_group_shared *sh;	     /* NULL when the group is not started */
};

/* The current state of a member process, copied out of its record. */
struct ctl_group_state {
	int state; /* enum ctl_member_state; 0 before its first view */
	int64_t t_ns;
	char reason[CTL_TEXT_MAX];
};

/* Starts @n (<= CTL_GROUP_MAX_N) member processes forming the group "<test>-<pid>": picks a free
 * port on each member's address, maps the shared page and forks. Does not wait for the group. 0, or
 * -1 with a line on stderr (what was started is left for ctl_group_end()). */
int ctl_group_start(struct ctl_group *g, const char *test, int n, const struct ctl_group_opts *o);

/* Starts a new process for member @i (whose previous one must be dead), with cfg.join = @join, on
 * the same address. 0 or -1. */
int ctl_group_spawn(struct ctl_group *g, int i, int join);

/* SIGKILLs member @i's process and reaps it. */
void ctl_group_kill(struct ctl_group *g, int i);
/* SIGSTOPs member @i's process and waits (bounded) until it is stopped. 0 or
 * -1. */
int ctl_group_freeze(struct ctl_group *g, int i);
/* SIGCONTs member @i's process. */
void ctl_group_thaw(struct ctl_group *g, int i);

/* Member @i's current process record, or NULL when it has none. Pointer into the shared page, valid
 * until ctl_group_end(). */
const struct ctl_group_run *ctl_group_cur(const struct ctl_group *g, int i);
/* The newest epoch member @i's current process has seen, or NULL. */
const struct ctl_group_epoch *ctl_group_newest(const struct ctl_group *g, int i);
/* Copies member @i's current state into @st; returns st->state (0: no process or no view). */
int ctl_group_state(const struct ctl_group *g, int i, struct ctl_group_state *st);

/* Copies the state of one process record consistently (bounded retries against its writer);
 * returns st->state. */
int ctl_group_run_state(const struct ctl_group_run *r, struct ctl_group_state *st);
/* The first epoch process record @r holds numbered >= @min with exactly the members of @mask,
 * or NULL. */
const struct ctl_group_epoch *ctl_group_find(const struct ctl_group_run *r, uint32_t mask,
					     uint64_t min);

/* When member @i's current process first saw an epoch numbered >= @min_epoch whose members are
 * exactly those of @mask (bit (1 << id)), or 0 when it has not (yet). */
int64_t ctl_group_seen(const struct ctl_group *g, int i, uint32_t mask, uint64_t min_epoch);
/* Polls up to @timeout_ms until every member in @who (a mask of ids) has seen such an epoch. 0, or
 * -1 at the deadline. */
int ctl_group_wait_view(const struct ctl_group *g, uint32_t who, uint32_t mask, uint64_t min_epoch,
			int timeout_ms);
/* Polls up to @timeout_ms until member @i is in a final state (LOST, REMOVED or LEFT). Returns that
 * state, or 0 at the deadline. */
int ctl_group_wait_final(const struct ctl_group *g, int i, int timeout_ms);

/* Prints one measurement line through chaos_report():
 *   "ctl: <what>: epoch N {ids} at every member after MAX ms (max), MIN (min)"
 * the times counted from @t_fault_ns to when each member in @who first saw the epoch described as
 * in ctl_group_seen(). Returns the max in ms, or -1 (and says who) when some member has not seen
 * it; *@min_ms gets the min when not NULL. */
double ctl_group_report(const struct ctl_group *g, const char *what, int64_t t_fault_ns,
			uint32_t who, uint32_t mask, uint64_t min_epoch, double *min_ms);

/* Checks what every process of the group recorded, dead ones included: one epoch number means the
 * same members, flags, incarnations, coordinator and boundary everywhere; each process saw strictly
 * increasing numbers, its own id where self_index points and the right info blobs; every
 * incarnation in a view belongs to a process of that member; no record was dropped; and the members
 * in @live end on the same newest epoch. 0, or -1 with the first violation described in @why. */
int ctl_group_agree(const struct ctl_group *g, uint32_t live, char *why, size_t len);

/* Plain text of everything recorded (one paragraph per process, times in ms since the start) into
 * @buf; returns the length. For assertion messages. */
size_t ctl_group_describe(const struct ctl_group *g, char *buf, size_t len);
/* The stderr captured so far of member @i's current process (the runtime's log) into @buf, its last
 * @len - 1 bytes; returns the length. */
size_t ctl_group_log(const struct ctl_group *g, int i, char *buf, size_t len);

/* Asks every running, unfrozen member process to destroy its member and exit, waits up to
 * @timeout_ms for all, then kills whatever is left (frozen ones at once), unmaps the page and
 * zeroes @g. Returns how many processes asked to stop did not exit 0 in time; *@max_destroy_ms
 * (when not NULL) gets the longest ctl_member_destroy() among them. No-op on a group not started.
 */
int ctl_group_end(struct ctl_group *g, int timeout_ms, double *max_destroy_ms);

/* ---- a coordinator daemon in its own process ------------------------------------------------- */

/* The page a daemon process shares with the test. */
struct ctl_group_daemon_page {
	_Atomic int port;	   /* > 0 once listening; < 0: ctl_daemon_start()'s error */
	_Atomic int stop;	   /* parent: stop the daemon and exit */
	_Atomic uint32_t req, ack; /* parent bumps req; the child answers with status, ack = req */
	char status[16384];
};

/* A daemon (ctl_daemon_start on 127.0.0.1, port picked by the kernel) run by a forked child, so
 * that member processes forked by the test never inherit its sockets. */
struct ctl_group_daemon {
	pid_t pid;
	int errfd;
	char spec[32]; /* "127.0.0.1:port": ctl_group_opts.coordinator */
	struct ctl_group_daemon_page *pg;
};

/* Forks the daemon and waits up to @timeout_ms until it listens. 0 or -1. */
int ctl_group_daemon_start(struct ctl_group_daemon *d, int timeout_ms);
/* ctl_daemon_status() text, asked of the daemon process, into @buf. Returns the length, 0 when it
 * did not answer within @timeout_ms. */
size_t ctl_group_daemon_status(struct ctl_group_daemon *d, char *buf, size_t len, int timeout_ms);
/* Stops the daemon (ctl_daemon_stop), waits up to @timeout_ms, kills it if needed, zeroes @d. 0
 * when it exited 0 in time. No-op when not started. */
int ctl_group_daemon_end(struct ctl_group_daemon *d, int timeout_ms);

#endif
