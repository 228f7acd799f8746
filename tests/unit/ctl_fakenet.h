/* SPDX-License-Identifier: BSD-3-Clause */
/* Harness of the membership state machine tests: a simulated cluster of members (struct ctl_msm)
 * and the coordinators they host (or a daemon's), joined by a fake network of FIFO connections that
 * carry decoded frames, driven by a fake clock, with kills, freezes, partitions, restarts.
 *
 * It records every committed epoch each member saw and every VIEW a coordinator sent, and checks
 * the promises of include/ftcc/ctl_sm.h on them (agreement, growing epoch numbers, final states
 * stay final, changed() called on every change). Single-threaded; every run is bounded in fake time
 * and deterministic.
 */
#ifndef FTCC_TESTS_CTL_FAKENET_H
#define FTCC_TESTS_CTL_FAKENET_H

#include <stddef.h>
#include <stdint.h>

#include "ftcc/ctl_sm.h"

#define FN_MAX_NODES 48 /* members of every group together */
#define FN_MAX_GROUPS 4 /* daemon mode: groups on the one daemon */
#define FN_MAX_VIEW 32	/* members recorded per epoch */
#define FN_DAEMON (-2)	/* the daemon as an endpoint (watch callback) */
#define FN_RAW (-3)	/* a raw client as an endpoint (watch callback) */
#define FN_BIT(k) (1ull << (k))
#define FN_ALL(n) ((n) >= 64 ? ~0ull : (1ull << (n)) - 1)

/* Cluster configuration; zero fields take the defaults in brackets. */
struct fn_cfg {
	int daemon;			 /* 1: members use one daemon (coordinator per group) */
	uint32_t ngroups;		 /* daemon mode: groups [1]; embedded: always 1 */
	uint32_t sizes[FN_MAX_GROUPS];	 /* members of each group (ids 0 .. size - 1) */
	uint64_t hb_ms;			 /* [100] */
	uint64_t timeout_ms;		 /* failure timeout [1000] */
	uint64_t connect_timeout_ms;	 /* members' BOOT/JOINING bound [5000] */
	uint64_t form_timeout_ms;	 /* filled into host cfgs that leave it 0 [3000] */
	uint64_t step_ms;		 /* clock step [10] */
	uint64_t latency_ms;		 /* one-way delivery delay, >= 1 [1] */
	uint64_t net_connect_timeout_ms; /* a connect across a partition fails after [500] */
	int partition_delays;		 /* 1: partitions hold frames until healed [0: lose] */
	int no_wire;			 /* 1: skip the ctl_msg_encode/decode round trip */
	uint64_t jitter_ms;		 /* extra delay 0..jitter per frame, FIFO per link [0] */
	uint64_t seed;			 /* of the jitter and fn_rand [1] */
	uint32_t nstreams;		 /* op streams of every member [1] */
};

/* One committed epoch as one member saw it (or as a coordinator sent it, @node < 0). */
struct fn_rec {
	uint64_t epoch;
	uint64_t boundary;
	uint32_t coord;
	uint32_t n;
	uint32_t ids[FN_MAX_VIEW];
	uint32_t flags[FN_MAX_VIEW];
	uint64_t inc[FN_MAX_VIEW];
	uint64_t t;	     /* fake ms since the cluster was made */
	uint64_t member_inc; /* incarnation of the member that saw it */
	int node;	     /* who saw it; FN_DAEMON or -1 (a hosted coordinator) for VIEWs sent */
};

/* Observer of every frame queued on the fake network: @from and @to are node indexes, FN_DAEMON or
 * FN_RAW; @m is valid during the call only. It runs inside a machine's call, so it may only note
 * things or call fn_freeze / fn_partition (which call no machine). */
typedef void (*fn_watch_fn)(void *arg, int from, int to, const struct ctl_msg *m);

struct fn;

/* Makes a cluster (nothing started). Fails the test when out of memory. */
struct fn *fn_new(const struct fn_cfg *cfg);
/* Destroys every machine and frees everything. NULL is ignored. */
void fn_free(struct fn *fn);

/* Node index of member @id of group @g. */
int fn_node(const struct fn *fn, uint32_t g, uint32_t id);
/* Number of nodes (members of all groups). */
int fn_nodes(const struct fn *fn);

/* Starts member @k to form its group (join = 0). */
void fn_start(struct fn *fn, int k);
/* Starts every member of every group, in node order. */
void fn_start_all(struct fn *fn);

/* Faults and actions, at the current fake time. */
void fn_kill(struct fn *fn, int k);		    /* process gone; links end with EOF */
void fn_freeze(struct fn *fn, int k);		    /* SIGSTOP: nothing runs, input queues */
void fn_thaw(struct fn *fn, int k);		    /* SIGCONT */
void fn_restart(struct fn *fn, int k, int catchup); /* kill if alive; new incarnation, join */
void fn_leave(struct fn *fn, int k);		    /* ctl_msm_leave */
int fn_ready(struct fn *fn, int k);		    /* ctl_msm_ready; its return value */
void fn_suspect(struct fn *fn, int k, uint32_t peer, enum ctl_evidence ev); /* data path */
/* The same about op @seq (fn_suspect: the first op @k has not done). */
void fn_suspect_at(struct fn *fn, int k, uint32_t peer, enum ctl_evidence ev, uint64_t seq);
/* Frames between a node in @side_b and one outside it are lost, with the rest of their link's
 * stream (or held until fn_heal with cfg.partition_delays); connects across time out. @daemon_b
 * puts the daemon on side b. */
void fn_partition(struct fn *fn, uint64_t side_b, int daemon_b);
void fn_heal(struct fn *fn);
/* Reports engine progress of member @k (ctl_msm_progress; a restarted process starts at 0). */
void fn_progress(struct fn *fn, int k, uint64_t next_op, uint64_t done_op);
/* The same for stream @t (ctl_msm_progress_s). */
void fn_progress_s(struct fn *fn, int k, uint32_t t, uint64_t next_op, uint64_t done_op);
/* fn_suspect_at about op @seq of stream @t. */
void fn_suspect_s(struct fn *fn, int k, uint32_t peer, enum ctl_evidence ev, uint32_t t,
		  uint64_t seq);

/* Fake time. fn_now: ms since fn_new. */
uint64_t fn_now(const struct fn *fn);
/* One clock step: delivers what is due to every running endpoint, then ticks every live, unfrozen
 * machine. */
void fn_step(struct fn *fn);
/* Steps for @ms. */
void fn_run(struct fn *fn, uint64_t ms);
/* Steps until @pred(fn, arg) holds (checked before each step) or @max_ms passed. 0 or -ETIMEDOUT
 * (the trace tail and the states are printed to stderr then). */
int fn_run_until(struct fn *fn, int (*pred)(struct fn *, void *), void *arg, uint64_t max_ms);
/* Runs until every node in @who is ACTIVE in one epoch whose members are exactly @ids. */
int fn_wait_view(struct fn *fn, uint64_t who, const uint32_t *ids, uint32_t n, uint64_t max_ms);
#define FN_WAIT_VIEW(fn, who, max_ms, ...)                                                         \
	fn_wait_view(fn, who, (const uint32_t[]){ __VA_ARGS__ },                                   \
		     sizeof((const uint32_t[]){ __VA_ARGS__ }) / sizeof(uint32_t), max_ms)
/* Runs until every node in @who is in state @st. */
int fn_wait_state(struct fn *fn, uint64_t who, enum ctl_member_state st, uint64_t max_ms);
/* Runs until every node in @who is in a final state (LOST, REMOVED, LEFT) or dead. */
int fn_wait_final(struct fn *fn, uint64_t who, uint64_t max_ms);

/* Member @k's machine (NULL when dead or never started), state, reason and newest epoch. */
struct ctl_msm *fn_msm(const struct fn *fn, int k);
enum ctl_member_state fn_state(const struct fn *fn, int k);
const char *fn_reason(const struct fn *fn, int k);
const struct ctl_epoch_rec *fn_view(const struct fn *fn, int k);
/* 1 when the newest view of @k has exactly the ids @ids. */
int fn_view_is(const struct fn *fn, int k, const uint32_t *ids, uint32_t n);
/* The coordinator member @k hosts (NULL: none); the daemon's coordinator of group @g. */
struct ctl_coord *fn_coord(const struct fn *fn, int k);
struct ctl_coord *fn_daemon_coord(const struct fn *fn, uint32_t g);
uint64_t fn_incarnation(const struct fn *fn, int k);
int fn_alive(const struct fn *fn, int k);

/* Every epoch member @k saw (all its incarnations, in order): *@n records. */
const struct fn_rec *fn_recs(const struct fn *fn, int k, uint32_t *n);
/* Fake time member @k first saw epoch @epoch, or UINT64_MAX. */
uint64_t fn_seen_at(const struct fn *fn, int k, uint64_t epoch);
/* The record of epoch @epoch of group @g as committed (from a VIEW sent or a member), or NULL. */
const struct fn_rec *fn_epoch(const struct fn *fn, uint32_t g, uint64_t epoch);
/* Highest epoch number committed in group @g (0: none). */
uint64_t fn_max_epoch(const struct fn *fn, uint32_t g);
/* Highest epoch number PROPOSEd in group @g (0: none). */
uint64_t fn_max_proposed(const struct fn *fn, uint32_t g);
/* Frames of @type sent by member @k (to its coordinator) so far. */
uint32_t fn_sent(const struct fn *fn, int k, uint16_t type);

/* Calls @w on every frame queued from now on (NULL: none). */
void fn_set_watch(struct fn *fn, fn_watch_fn w, void *arg);

/* A raw client speaking frames by hand to node @target (or the daemon: FN_DAEMON). Its frames go
 * through the same network; replies are collected. Returns a handle >= 0. */
int fn_raw_open(struct fn *fn, int target);
void fn_raw_send(struct fn *fn, int h, const struct ctl_msg *m);
/* Frames received on @h so far (deep copies owned by the harness); *@n of them. */
const struct ctl_msg *fn_raw_msgs(const struct fn *fn, int h, uint32_t *n);
/* 1 once the raw connection is open; 2 once it ended (EOF or refused). */
int fn_raw_status(const struct fn *fn, int h);

/* Starts every member and runs until each group formed epoch 1 with all its members, within
 * @max_ms; fails the test otherwise. */
void fn_form(struct fn *fn, uint64_t max_ms);
/* Latest time a node of @who first saw epoch @epoch (UINT64_MAX when one never did). */
uint64_t fn_seen_all(const struct fn *fn, uint64_t who, uint64_t epoch);
/* 1 when member @k's reason contains @word, ignoring case. */
int fn_reason_has(const struct fn *fn, int k, const char *word);
/* 1 when @text names the number @id as a whole token ("member 4", "4 missing", not "40"). */
int fn_text_names(const char *text, uint32_t id);
/* form_timeout_ms of the newest coordinator made (as filled in by the harness). */
uint64_t fn_form_timeout(const struct fn *fn);

/* A pseudo-random number from the cluster's seeded generator. */
uint64_t fn_rand(struct fn *fn);

/* Checks everything recorded so far: no violation noted on the way (agreement per epoch number,
 * epochs growing per member, final states final, changed() on every change, frames that encode,
 * the first frame of a link a HELLO, info blobs as published), and every live, unfrozen ACTIVE
 * member of each group in its group's newest committed epoch, which lists it. 0, or -1 with a
 * description in @err (and the trace tail printed to stderr). */
int fn_check(struct fn *fn, char *err, size_t len);
#define FN_CHECK(fn)                                                                               \
	do {                                                                                       \
		char fn_err_[1024];                                                                \
		cr_assert(fn_check(fn, fn_err_, sizeof(fn_err_)) == 0, "%s", fn_err_);             \
	} while (0)

/* Prints the last @lines lines of the event trace and every member's state to stderr. */
void fn_dump(const struct fn *fn, int lines);

#endif
