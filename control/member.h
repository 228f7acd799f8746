/* SPDX-License-Identifier: BSD-3-Clause */
/* One member's runtime (struct ctl_member), shared by member.c (configuration, API, published
 * snapshots) and member_loop.c (the control thread, the coordinator link, the msm's ops).
 *
 * Locking: @lock protects everything below it. The control thread holds it except while it
 * polls and while it calls cfg.on_change; API calls take it, call the msm and wake the thread.
 */
#ifndef FTCC_CONTROL_MEMBER_H
#define FTCC_CONTROL_MEMBER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "rt.h"

/* The member's one coordinator connection. */
enum link_state {
	LINK_NONE = 0,
	LINK_CONNECTING, /* connect() started (or failed at once: c.err set, fd -1) */
	LINK_OPEN,
};

struct member_link {
	struct rt_conn c;
	enum link_state state;
	uint32_t target;   /* member id, or CTL_NO_MEMBER for the daemon */
	uint64_t deadline; /* LINK_CONNECTING: give up then */
	uint32_t gen;	   /* bumped whenever the link is replaced or dropped */
};

struct ctl_member {
	pthread_mutex_t lock;
	pthread_cond_t cond; /* broadcast after every state or epoch change */
	pthread_t thread;
	bool thread_started;
	int wake_fd;

	/* Configuration, fixed at create. */
	char group[CTL_GROUP_MAX];
	uint32_t id, expected;
	enum rt_backend backend;
	struct sockaddr_storage daemon_addr;
	unsigned daemon_len;
	struct sockaddr_storage *addrs; /* embedded: one per member id; daemon: NULL */
	unsigned *addr_lens;
	struct sockaddr_storage src; /* outgoing links bind to this host (port 0) ... */
	unsigned src_len;	     /* ... when nonzero: addrs[id] was given */
	struct rt_times t;
	void (*on_change)(void *arg);
	void *on_change_arg;

	/* Machines and connections. */
	struct ctl_msm *msm;
	struct rt_host host;   /* listener (embedded) and the hosted coordinator's connections */
	struct rt_route route; /* route.coord: the coordinator this member hosts, or NULL */
	uint64_t next_tick;    /* msm and coordinator ticks at least every hb/2 */
	struct member_link link;
	struct ctl_msg msg; /* decode scratch */
	struct rt_pollset ps;

	/* Published state. */
	enum ctl_member_state state;
	const struct ctl_epoch *cur; /* newest committed epoch (a reference), or NULL */
	struct rt_epoch_cache cache;
	bool dirty;  /* the msm said changed(): republish */
	bool notify; /* cfg.on_change is owed */

	uint32_t nstreams;
	/* ctl_member_progress(), lock-free, per stream */
	_Atomic uint64_t next_op[CTL_STREAMS_MAX], done_op[CTL_STREAMS_MAX];

	bool stopping;	  /* ctl_member_destroy() is waiting for the thread */
	uint64_t stop_at; /* ... which gives up flushing then */
};

/* Passes the engine's progress to the msm; call before every msm call. Lock held. */
void member_prep(struct ctl_member *m);
/* Republishes the state and snapshot when the msm said changed(); wakes waiters. Lock held. */
void member_publish(struct ctl_member *m);
/* The msm's ops for @m. */
struct ctl_msm_ops member_msm_ops(struct ctl_member *m);
/* The host's ops for @m (HELLO routing, STATUS). */
struct rt_host_ops member_host_ops(struct ctl_member *m);
/* Status text of @m into @buf; lock held. Returns the length. */
size_t member_status_locked(struct ctl_member *m, char *buf, size_t len, uint64_t now);
/* The control thread's body. */
void *member_thread(void *arg);
/* Closes the link, the hosted coordinator (without telling anyone) and the host. Lock held
 * or thread gone. */
void member_close_all(struct ctl_member *m);

#endif
