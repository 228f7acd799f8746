/* SPDX-License-Identifier: BSD-3-Clause */
/* Point-to-point messages of a communicator (ftcc_isend, ftcc_irecv, ftcc_cancel): their life
 * cycle as comm.c drives it. The protocol and its thread are in p2p.c and p2p_run.c.
 */
#ifndef FTCC_P2P_H
#define FTCC_P2P_H

#include <stdint.h>

#include "engine.h"

/* Creates the point-to-point layer of @c (its rank, size, incarnation and timeout set): its own
 * data plane (a listener on @bind_host, NULL: the first interface; HELLOs name a group id other
 * than the engine's @group_id), whose address p2p_addr() gives for the member to publish.
 * Nothing runs yet. 0 and *@out, or -errno. */
int p2p_create(struct ftcc_comm *c, uint64_t group_id, const char *bind_host, struct p2p **out);

/* The address to publish, "host:port". */
const char *p2p_addr(const struct p2p *p);

/* Starts the progress thread (the membership must exist). 0 or -errno. */
int p2p_start(struct p2p *p);

/* The membership changed, or requests wait: the progress thread looks now. Any thread; never
 * blocks. */
void p2p_kick(struct p2p *p);

/* Leaving on purpose: waits, at most P2P_FLUSH_MS, until the control frames due to the peers
 * (the acknowledgements of messages this member took) are out. */
void p2p_flush(struct p2p *p);

/* Stops the thread; every request not ended ends with FTCC_ERR_ABORTED, later ones at once. */
void p2p_stop(struct p2p *p);

/* Frees everything but the requests (the communicator's live list frees those). */
void p2p_destroy(struct p2p *p);

/* How many members the layer's data plane holds a connection with (made or being made, by
 * either side), as its thread last counted them. For tests and diagnostics. */
uint32_t p2p_links(struct p2p *p);

/* ftcc_test() and ftcc_wait() of a point-to-point request. */
int p2p_test(struct ftcc_request *r, int *done, struct ftcc_record *rec);
int p2p_wait(struct ftcc_request *r, struct ftcc_record *rec);

#endif
