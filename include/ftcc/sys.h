/* SPDX-License-Identifier: BSD-3-Clause */
/* Syscall wrappers: the one place socket and epoll calls go through.
 *
 * Each wrapper keeps errno, returns what the syscall returns (or -1 with errno set), and is
 * the seam for fault injection: FTCC_INJECT="name[:count]" makes the next @count calls of
 * wrapper @name fail (EIO, or ECONNRESET for I/O calls) without making the syscall.
 */
#ifndef FTCC_SYS_H
#define FTCC_SYS_H

#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

/* Re-reads FTCC_INJECT. Called by ftcc_settings_load(). */
void ftcc_sys_inject_reload(const char *spec);

/* Arms @count more failures of wrapper @name (tests: FTCC_FAULT's "reset"). Thread-safe. */
void ftcc_sys_inject_arm(const char *name, long count);

/* Returns 1 (and consumes one count) when wrapper @name must fail now. Thread-safe. */
int ftcc_sys_inject_hit(const char *name);

int ftcc_sys_socket(int domain, int type, int proto);
int ftcc_sys_connect(int fd, const struct sockaddr *sa, socklen_t len);
int ftcc_sys_accept(int fd, struct sockaddr *sa, socklen_t *len);
int ftcc_sys_bind(int fd, const struct sockaddr *sa, socklen_t len);
int ftcc_sys_listen(int fd, int backlog);
ssize_t ftcc_sys_send(int fd, const void *buf, size_t len);
ssize_t ftcc_sys_sendv(int fd, const struct iovec *iov, int iovcnt);
ssize_t ftcc_sys_recv(int fd, void *buf, size_t len);
ssize_t ftcc_sys_recvv(int fd, const struct iovec *iov, int iovcnt);

/* Names the calling thread "ftcc-" plus @what (printf format), cut to the kernel's 15 bytes, as
 * top -H, gdb and /proc/<pid>/task/<tid>/comm show it: a process that hosts the library (a
 * training job's) tells the library's threads from its own. Failure is ignored. */
void ftcc_thread_name(const char *what, ...) __attribute__((format(printf, 1, 2)));

#endif
