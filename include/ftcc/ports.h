/* SPDX-License-Identifier: BSD-3-Clause */
/* The ports of the sockets ftcc listens on (net plug-in connections, CollNet control, the
 * engine's data plane): the kernel's choice, or the first free port of FTCC_PORT_RANGE for
 * clusters whose firewalls open only some ports. Addresses the user gave with a port (an
 * embedded member's control address, the daemon's) keep it.
 */
#ifndef FTCC_PORTS_H
#define FTCC_PORTS_H

#include <sys/socket.h>

/* Parses FTCC_PORT_RANGE text "LO-HI" (1 <= LO <= HI <= 65535) into *@lo, *@hi; "" is 0, 0 (no
 * range). 0 or -EINVAL. */
int ftcc_port_range_parse(const char *text, int *lo, int *hi);

/* Binds @fd to @sa (@len bytes, IPv4 or IPv6). With port 0 and FTCC_PORT_RANGE set, it takes the
 * first free port of the range, trying from a random one so that processes starting together
 * do not race for the same; otherwise it binds @sa as given. 0, or -errno: -EADDRINUSE when
 * every port of the range is taken, -EINVAL for a malformed FTCC_PORT_RANGE (one WARN says
 * so). */
int ftcc_bind_listener(int fd, const struct sockaddr *sa, socklen_t len);

#endif
