/* SPDX-License-Identifier: BSD-3-Clause */
/* Internals of the fake network harness (ctl_fakenet*.c): the cluster's structures and the
 * functions its files share. Tests use ctl_fakenet.h only.
 */
#ifndef FTCC_TESTS_CTL_FAKENET_INT_H
#define FTCC_TESTS_CTL_FAKENET_INT_H

#include <stddef.h>
#include <stdint.h>

#include "ctl_fakenet.h"

#define FN_T0 1000000ull	/* machines' clock at fn_new: not 0, to catch "0 means never" */
#define FN_TRACE_MAX (8u << 20) /* trace bytes kept (the newest) */
#define FN_MAX_RAW 16

/* One coordinator instance, hosted by a node or the daemon. Never freed before fn_free, so a stale
 * pointer held by a connection stays valid (c is NULL once the instance is gone). */
struct fn_cslot {
	struct fn *fn;
	struct ctl_coord *c;
	int node; /* host node, or FN_DAEMON */
	uint32_t g;
	struct fn_cslot *next;
};

/* Client side of a connection. */
enum { CS_CONNECTING = 1, CS_OPEN, CS_CLOSED };

/* One connection: a client (a member or a raw client) and a server side (a node's control port or
 * the daemon) bound to a coordinator by its HELLO. */
struct fn_conn {
	uint32_t id;
	int client; /* node index, or FN_RAW */
	int raw;    /* raw handle when client == FN_RAW */
	uint64_t cgen;
	int target; /* node index, or FN_DAEMON */
	uint64_t tgen;
	int resolved, failed; /* connect answered; connect refused or timed out */
	int cstate;	      /* client side */
	uint32_t nsent;
	struct fn_cslot *srv; /* bound coordinator (NULL before HELLO) */
	int sclosed;	      /* server side gone: refused, closed, or ended */
	int sclose_called;    /* the coordinator called close */
	int cut;	      /* a frame was lost to a partition: the stream is dead */
	uint64_t t_req, last_c2s, last_s2c;
};

/* Events: a connect's answer (to the client), a frame or the end of the stream in one direction
 * (C2S: to the server side, S2C: to the client). */
enum { EV_CONNECT = 1, EV_TIMEOUT, EV_C2S, EV_C2S_EOF, EV_S2C, EV_S2C_EOF };

/* One pending event; delivered in (due, seq) order once its receiver runs. Owns @m. */
struct fn_ev {
	uint64_t due, seq;
	int kind;
	uint32_t conn;
	struct ctl_msg *m;
};

/* One member process: its msm, the coordinator it hosts, its link, and what it saw. @gen counts
 * its deaths, so frames meant for a dead process are not given to its successor. */
struct fn_node {
	struct fn *fn;
	int k;
	uint32_t g, id;
	int alive, frozen, side;
	uint64_t gen, inc;
	uint32_t restarts;
	struct ctl_msm *msm;
	uint64_t done_op; /* last fn_progress: the op its data path is in */
	struct fn_cslot *cs;
	uint32_t conn; /* current connection, 0 none */
	int dirty, has_state;
	enum ctl_member_state last_state;
	struct fn_rec *recs;
	uint32_t nrecs, caprecs;
	uint32_t sent[CTL_TYPE_MAX + 1];
	char info[CTL_INFO_MAX];
};

/* One group: its members' node range, the daemon's coordinator for it, the epochs committed. */
struct fn_group {
	char name[CTL_GROUP_MAX];
	uint32_t size, base;
	struct fn_cslot *daemon;
	struct fn_rec *epochs; /* committed, one per number */
	uint32_t nepochs, capepochs;
	uint64_t max_prop;
};

/* A raw client's connection and the frames it received (deep copies). */
struct fn_raw {
	uint32_t conn;
	struct ctl_msg *msgs;
	uint32_t n, cap;
	int status;
};

/* A probe a coordinator asked for (ops.probe), answered at @due from the state of the network
 * then: the target process alive on the same side (ALIVE), gone (REFUSED), or across a
 * partition (UNKNOWN, after the connect timeout). */
struct fn_probe {
	uint64_t due;
	struct fn_cslot *s;
	uint32_t id;
	uint64_t inc;
	int node;
	int across; /* was across a partition when asked */
};

/* The cluster: nodes, groups, connections, pending events, the trace. Owned by the test. */
struct fn {
	struct fn_cfg cfg;
	uint64_t now; /* machines' clock */
	int nnodes;
	struct fn_node nodes[FN_MAX_NODES];
	uint32_t ngroups;
	struct fn_group groups[FN_MAX_GROUPS];
	struct fn_conn **conns;
	uint32_t nconns, capconns;
	struct fn_ev *evs;
	size_t nevs, capevs;
	uint64_t seq;
	struct fn_cslot *slots;
	int daemon_side;
	struct fn_raw raws[FN_MAX_RAW];
	int nraws;
	fn_watch_fn watch;
	void *watch_arg;
	struct fn_probe *probes;
	uint32_t nprobes, capprobes;
	char *trace;
	size_t tlen;
	char viol[2048];
	size_t vlen;
	uint8_t *wbuf;
	uint64_t form_timeout; /* of the newest coordinator made */
	uint64_t rng;
};

/* The member ops every msm is made with (arg: its struct fn_node). */
extern const struct ctl_msm_ops fn_msm_ops;

/* Answers the probes that are due (their coordinator's host running). */
void fn_probes_due(struct fn *fn);
/* The coordinator of @s goes: 0 silently, 1 shut down (REFUSE CLOSED), 2 its host left
 * (REFUSE LEFT). */
void fn_cslot_end(struct fn *fn, struct fn_cslot *s, int how);

/* Memory: fail the test when out of it. fn_xgrow makes room for @need items of @size in @p
 * (capacity *@cap) and returns the new pointer. */
void *fn_xcalloc(size_t n, size_t size);
void *fn_xgrow(void *p, uint32_t *cap, uint32_t need, size_t size);

/* One trace line at the current fake time; a violation of a promise (traced and kept for
 * fn_check). */
void fn_tr(struct fn *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void fn_viol(struct fn *fn, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Name of endpoint @e (node, FN_DAEMON, FN_RAW) for the trace, in @buf. */
const char *fn_ep_name(const struct fn *fn, int e, char *buf, size_t len);
/* One-line description of @m for the trace. */
void fn_msg_text(const struct ctl_msg *m, char *buf, size_t len);

int fn_is_final(enum ctl_member_state st);
/* The info blob member @id of group @g publishes in incarnation @inc (a string). */
void fn_info_of(uint32_t g, uint32_t id, uint64_t inc, char *buf);
/* Fills @r from a view; checks id order and info blobs. 0, or -1 (violation noted). */
int fn_rec_fill(struct fn *fn, struct fn_rec *r, uint32_t g, uint64_t epoch, uint64_t boundary,
		uint32_t coord, const struct ctl_member_rec *mem, uint32_t n, const char *who);
/* Adds @r to group @g's committed epochs, or checks it agrees with the one there. */
void fn_commit_note(struct fn *fn, uint32_t g, const struct fn_rec *r, const char *who);
/* After every call into member @nd: records a new epoch or state, checks changed() was called
 * and that a final state stays final. */
void fn_node_after(struct fn *fn, struct fn_node *nd);

/* Frees a frame copy (NULL ignored). */
void fn_msg_free(struct ctl_msg *m);
/* Queues an event of @kind (EV_C2S, EV_C2S_EOF / EV_S2C, EV_S2C_EOF) on @c, after the ones
 * already queued in that direction; takes @m. */
void fn_send_c2s(struct fn *fn, struct fn_conn *c, int kind, struct ctl_msg *m);
void fn_send_s2c(struct fn *fn, struct fn_conn *c, int kind, struct ctl_msg *m);
/* Delivers every event due by now to endpoints that run. */
void fn_deliver_due(struct fn *fn);

#endif
