/* SPDX-License-Identifier: BSD-3-Clause */
/* Syscall wrappers and the fault-injection seam behind them.
 *
 * Owns the FTCC_INJECT state. When nothing is armed a wrapper pays one relaxed atomic load for
 * injection; the armed path (tests only) takes a mutex.
 */
#define _GNU_SOURCE
#include "ftcc/sys.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "ftcc/log.h"

#define INJECT_MAX 16
#define INJECT_NAME_MAX 32

/* One armed entry of FTCC_INJECT: wrapper @name fails @left more times. */
struct inject_slot {
	char name[INJECT_NAME_MAX];
	long left;
};

static pthread_mutex_t inject_lock = PTHREAD_MUTEX_INITIALIZER;
static struct inject_slot inject_slots[INJECT_MAX];
static int inject_nslots;
/* Sum of every slot's @left; zero means the fast path returns at once. */
static _Atomic long inject_armed;

/* Parses one "name[:count]" entry of @len bytes into @slot. 0, or -EINVAL. */
static int inject_parse_entry(const char *s, size_t len, struct inject_slot *slot)
{
	const char *colon = memchr(s, ':', len);
	size_t nlen = colon ? (size_t)(colon - s) : len;
	long count = 1;

	if (nlen == 0 || nlen >= INJECT_NAME_MAX)
		return -EINVAL;
	if (colon) {
		const char *p = colon + 1, *end = s + len;
		if (p == end)
			return -EINVAL;
		count = 0;
		for (; p < end; p++) {
			if (*p < '0' || *p > '9' || count > (INT_MAX - (*p - '0')) / 10)
				return -EINVAL;
			count = count * 10 + (*p - '0');
		}
		if (count == 0)
			return -EINVAL;
	}
	memcpy(slot->name, s, nlen);
	slot->name[nlen] = '\0';
	slot->left = count;
	return 0;
}

void ftcc_sys_inject_reload(const char *spec)
{
	pthread_mutex_lock(&inject_lock);
	inject_nslots = 0;
	long total = 0;
	for (const char *s = spec ? spec : ""; *s;) {
		size_t len = strcspn(s, ",");
		if (len > 0) {
			if (inject_nslots == INJECT_MAX) {
				ftcc_warn("FTCC_INJECT: more than %d entries; ignoring the rest",
					  INJECT_MAX);
				break;
			}
			struct inject_slot *slot = &inject_slots[inject_nslots];
			if (inject_parse_entry(s, len, slot) == 0) {
				inject_nslots++;
				total += slot->left;
			} else {
				ftcc_warn("FTCC_INJECT: ignoring malformed entry \"%.*s\" "
					  "(expected name[:count], count in [1, %d])",
					  (int)len, s, INT_MAX);
			}
		}
		s += len;
		if (*s == ',')
			s++;
	}
	atomic_store_explicit(&inject_armed, total, memory_order_relaxed);
	pthread_mutex_unlock(&inject_lock);
}

void ftcc_sys_inject_arm(const char *name, long count)
{
	pthread_mutex_lock(&inject_lock);
	int i;
	for (i = 0; i < inject_nslots && strcmp(inject_slots[i].name, name) != 0; i++) {
	}
	if (i == inject_nslots && inject_nslots < INJECT_MAX && strlen(name) < INJECT_NAME_MAX) {
		snprintf(inject_slots[i].name, INJECT_NAME_MAX, "%s", name);
		inject_slots[i].left = 0;
		inject_nslots++;
	}
	if (i < inject_nslots && count > 0) {
		inject_slots[i].left += count;
		atomic_fetch_add_explicit(&inject_armed, count, memory_order_relaxed);
	}
	pthread_mutex_unlock(&inject_lock);
}

int ftcc_sys_inject_hit(const char *name)
{
	int hit = 0;

	if (atomic_load_explicit(&inject_armed, memory_order_relaxed) == 0)
		return 0;
	pthread_mutex_lock(&inject_lock);
	for (int i = 0; i < inject_nslots; i++) {
		struct inject_slot *slot = &inject_slots[i];
		if (slot->left > 0 && strcmp(slot->name, name) == 0) {
			slot->left--;
			atomic_fetch_sub_explicit(&inject_armed, 1, memory_order_relaxed);
			hit = 1;
			break;
		}
	}
	pthread_mutex_unlock(&inject_lock);
	return hit;
}

/* Fails wrapper @name if injection says so: sets errno to @err and returns 1. */
static int sys_injected(const char *name, int err)
{
	if (!ftcc_sys_inject_hit(name))
		return 0;
	ftcc_info("FTCC_INJECT: failing %s with %s", name, strerrorname_np(err));
	errno = err;
	return 1;
}

/* Logs a failed call once, except for the "not yet" answers of non-blocking sockets. */
static void sys_log_failure(const char *name, int fd)
{
	if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINPROGRESS)
		return;
	ftcc_info("%s(fd %d) failed: %m", name, fd); /* %m: errno, which the logger keeps */
}

int ftcc_sys_socket(int domain, int type, int proto)
{
	if (sys_injected("socket", EIO))
		return -1;
	int fd = socket(domain, type | SOCK_CLOEXEC, proto);
	if (fd < 0)
		sys_log_failure("socket", -1);
	return fd;
}

/* A blocking connect() interrupted by a signal goes on in the background and must not be
 * restarted (that would fail with EALREADY); wait for it to finish instead. */
static int sys_connect_finish(int fd)
{
	struct pollfd pfd = { .fd = fd, .events = POLLOUT };
	int err = 0;
	socklen_t len = sizeof(err);

	while (poll(&pfd, 1, -1) < 0) {
		if (errno != EINTR)
			return -1;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
		return -1;
	if (err) {
		errno = err;
		return -1;
	}
	return 0;
}

int ftcc_sys_connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (sys_injected("connect", EIO))
		return -1;
	int ret = connect(fd, sa, len);
	if (ret < 0 && errno == EINTR)
		ret = sys_connect_finish(fd);
	if (ret < 0)
		sys_log_failure("connect", fd);
	return ret;
}

int ftcc_sys_accept(int fd, struct sockaddr *sa, socklen_t *len)
{
	if (sys_injected("accept", EIO))
		return -1;
	int ret;
	do {
		ret = accept4(fd, sa, len, SOCK_NONBLOCK | SOCK_CLOEXEC);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		sys_log_failure("accept", fd);
	return ret;
}

int ftcc_sys_bind(int fd, const struct sockaddr *sa, socklen_t len)
{
	if (sys_injected("bind", EIO))
		return -1;
	int ret = bind(fd, sa, len);
	if (ret < 0)
		sys_log_failure("bind", fd);
	return ret;
}

int ftcc_sys_listen(int fd, int backlog)
{
	if (sys_injected("listen", EIO))
		return -1;
	int ret = listen(fd, backlog);
	if (ret < 0)
		sys_log_failure("listen", fd);
	return ret;
}

ssize_t ftcc_sys_send(int fd, const void *buf, size_t len)
{
	if (sys_injected("send", ECONNRESET))
		return -1;
	ssize_t ret;
	do {
		ret = send(fd, buf, len, MSG_NOSIGNAL);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		sys_log_failure("send", fd);
	return ret;
}

ssize_t ftcc_sys_sendv(int fd, const struct iovec *iov, int iovcnt)
{
	if (sys_injected("sendv", ECONNRESET))
		return -1;
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	ssize_t ret;
	do {
		ret = sendmsg(fd, &msg, MSG_NOSIGNAL);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		sys_log_failure("sendv", fd);
	return ret;
}

ssize_t ftcc_sys_recv(int fd, void *buf, size_t len)
{
	if (sys_injected("recv", ECONNRESET))
		return -1;
	ssize_t ret;
	do {
		ret = recv(fd, buf, len, 0);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		sys_log_failure("recv", fd);
	return ret;
}

ssize_t ftcc_sys_recvv(int fd, const struct iovec *iov, int iovcnt)
{
	if (sys_injected("recvv", ECONNRESET))
		return -1;
	struct msghdr msg = { .msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)iovcnt };
	ssize_t ret;
	do {
		ret = recvmsg(fd, &msg, 0);
	} while (ret < 0 && errno == EINTR);
	if (ret < 0)
		sys_log_failure("recvv", fd);
	return ret;
}

void ftcc_thread_name(const char *what, ...)
{
	char name[16]; /* the kernel's TASK_COMM_LEN, with its NUL */
	va_list ap;
	int n = snprintf(name, sizeof(name), "ftcc-");

	va_start(ap, what);
	vsnprintf(name + n, sizeof(name) - (size_t)n, what, ap);
	va_end(ap);
	(void)pthread_setname_np(pthread_self(), name);
}
