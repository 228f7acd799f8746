/* SPDX-License-Identifier: BSD-3-Clause */
/* Harness of the membership runtime tests (test_ctl_runtime*.c): groups of members in this
 * process on 127.0.0.x, bounded waits for a member list, a captured log, and raw sockets that
 * play strangers or a frozen peer. Every wait is bounded.
 */
#ifndef FTCC_TESTS_CTL_RT_HARNESS_H
#define FTCC_TESTS_CTL_RT_HARNESS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ftcc/ctl.h"

#define MAXN 4
#define FORM_MS 5000
#define TIMEOUT_MS 500 /* failure timeout of every member here: keeps the suite fast */

/* Installs the capturing log sink at INFO level. */
void crt_log_start(void);
/* Forgets what was captured. */
void crt_log_reset(void);
/* 1 when a captured line contains @needle. Thread-safe. */
int crt_log_has(const char *needle);
/* Prints the captured log to stderr (for a failing test). */
void crt_log_dump(void);

int64_t crt_now_ms(void);

/* @n ports of 127.0.0.1 nobody listens on right now (bound to port 0 together, released). */
void crt_free_ports(int n, int *ports);

/* One group of embedded (or daemon) members in this process. Owned by the test. */
struct crt_grp {
	int n;
	char name[32];
	char addr[MAXN][32];
	const char *addrs[MAXN];
	char info[MAXN][16];	 /* "info-<id>", published with each member */
	const char *coordinator; /* NULL: embedded */
	struct ctl_member *m[MAXN];
};

/* Calls of cfg.on_change, per member id. */
extern atomic_int crt_changes[MAXN];

/* Names the group and picks its ports: member i listens on 127.0.0.(@host0 + i), or on
 * 127.0.0.1 for all (crt_grp_init). @coordinator: backend spec, NULL for embedded. */
void crt_grp_init_on(struct crt_grp *g, const char *name, int n, const char *coordinator,
		     int host0);
void crt_grp_init(struct crt_grp *g, const char *name, int n, const char *coordinator);
/* The configuration of member @id (failure timeout TIMEOUT_MS, on_change counting). */
struct ctl_member_cfg crt_grp_cfg(struct crt_grp *g, int id);
/* Creates member @id (fails the test if that fails). */
void crt_grp_start(struct crt_grp *g, int id, int join, int catchup);
/* Destroys member @id (if any) / every member. */
void crt_grp_stop(struct crt_grp *g, int id);
void crt_grp_destroy(struct crt_grp *g);

/* Epoch number of @m's current view (0 before the first). */
uint64_t crt_cur_epoch(struct ctl_member *m);
/* 1 when @e holds exactly the @n ids of @ids, in order. */
int crt_same_ids(const struct ctl_epoch *e, const uint32_t *ids, int n);
/* Waits until @m is in an epoch newer than @after with exactly @ids. Returns that epoch, or 0
 * after @timeout_ms (with the member's status and the log printed). */
uint64_t crt_wait_members(struct ctl_member *m, uint64_t after, const uint32_t *ids, int n,
			  int timeout_ms);

/* A blocking TCP connection to 127.0.0.1:@port (fails the test if refused). */
int crt_raw_connect(int port);
/* The port of "host:port". */
int crt_port_of(const char *addr);
/* Reads until the peer closes or @timeout_ms pass. Returns the bytes read; *@closed = 1 when
 * the peer closed (EOF or reset). */
size_t crt_raw_read(int fd, void *buf, size_t cap, int timeout_ms, int *closed);
/* Decodes the first frame of @buf (@len bytes) into @m. 0 or a negative errno. */
int crt_decode_first(const uint8_t *buf, size_t len, struct ctl_msg *m);
/* A HELLO of member @id of @group into @buf. Returns its length. */
size_t crt_make_hello(uint8_t *buf, size_t cap, const char *group, uint32_t id, uint32_t expected,
		      uint32_t flags);
/* Sends @len bytes to @port and reads the answer until the runtime closes (bounded). Returns
 * the answer's length; fails the test if the connection stays open. */
size_t crt_exchange(int port, const void *out, size_t len, uint8_t *in, size_t cap);

#endif
