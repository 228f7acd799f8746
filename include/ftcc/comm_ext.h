/* SPDX-License-Identifier: BSD-3-Clause */
/* Engine entry points beyond the public API (include/ftcc.h), for the CollNet plug-in. Not
 * exported from libftcc.so.
 */
#ifndef FTCC_COMM_EXT_H
#define FTCC_COMM_EXT_H

#include "ftcc.h"

/* Extra creation parameters. */
struct ftcc_create_ext {
	/* Embedded coordinator: a socket already listening on cfg->addrs[cfg->rank]'s port, which
	 * the member listens on (a duplicate of it) instead of binding that port itself. The
	 * caller keeps and closes its own descriptor. Lets the plug-in hand out the port in its
	 * listen handle before the group is known. */
	int has_listen_fd;
	int listen_fd;
	/* No point-to-point layer (ftcc_isend and the rest refuse): no thread, listener or
	 * connections of its own. The CollNet plug-in has no use for it. */
	int no_p2p;
	/* Lanes when FTCC_LANES is 0 (its default, "auto"), 1..8; 0: one. Every member of a group
	 * must end up with the same count. */
	uint32_t auto_lanes;
};

/* ftcc_comm_create() with @ext (NULL: none). */
int ftcc_comm_create_ext(const struct ftcc_config *cfg, const struct ftcc_create_ext *ext,
			 ftcc_comm_t **out);

/* The lanes @comm runs (FTCC_LANES, or the creator's auto_lanes); 0 for NULL. */
uint32_t ftcc_comm_lanes(const ftcc_comm_t *comm);

#endif
