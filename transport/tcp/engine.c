/* SPDX-License-Identifier: BSD-3-Clause */
/* The TCP engine: process-wide progress thread (epoll), the per-device listening sockets,
 * and the lists of every connection and half-open incoming socket. The thread also frees
 * closed connections, so no object is freed while an epoll batch may still point at it.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/ports.h"
#include "ftcc/settings.h"
#include "ftcc/sys.h"
#include "tcp.h"

struct tcp_engine tcp_eng = { .lock = PTHREAD_MUTEX_INITIALIZER, .epfd = -1 };

uint64_t tcp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

uint64_t tcp_engine_new_id(void)
{
	uint64_t id = 0;

	while (id == 0) {
		if (getrandom(&id, sizeof(id), 0) != sizeof(id))
			id = tcp_now_ns() ^ ((uint64_t)getpid() << 32);
	}
	return id;
}

void tcp_sock_tune(int fd)
{
	int one = 1;
	unsigned int user_timeout = (unsigned int)(tcp_eng.timeout_ns / 1000000);

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	/* Unacknowledged bytes older than the failure timeout error the socket, so a flow that
	 * is black-holed on its own is noticed (and restored on new sockets). */
	setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof(user_timeout));
}

bool tcp_app_polling(struct tcp_conn *c, uint64_t now)
{
	uint64_t last = atomic_load_explicit(&c->app_poll_ns, memory_order_relaxed);

	return (int64_t)(now - last) < (int64_t)TCP_APP_POLL_NS;
}

void tcp_engine_wake(void)
{
	uint64_t one = 1;

	if (tcp_eng.wake.fd >= 0 && write(tcp_eng.wake.fd, &one, sizeof(one)) < 0 &&
	    errno != EAGAIN)
		ftcc_trace("tcp: wake write failed: %s", strerror(errno));
}

int tcp_engine_add(struct tcp_sock *sk, uint32_t events)
{
	struct epoll_event ev = { .events = events, .data.ptr = sk };

	if (epoll_ctl(tcp_eng.epfd, EPOLL_CTL_ADD, sk->fd, &ev) < 0) {
		int err = -errno;

		ftcc_warn("tcp: epoll_ctl(ADD, fd %d): %s", sk->fd, strerror(errno));
		return err;
	}
	return 0;
}

void tcp_engine_del(struct tcp_sock *sk)
{
	if (sk->fd < 0)
		return;
	epoll_ctl(tcp_eng.epfd, EPOLL_CTL_DEL, sk->fd, NULL);
	close(sk->fd);
	sk->fd = -1;
	sk->connecting = false;
}

void tcp_engine_track(struct tcp_conn *c)
{
	pthread_mutex_lock(&tcp_eng.lock);
	c->next = tcp_eng.conns;
	tcp_eng.conns = c;
	pthread_mutex_unlock(&tcp_eng.lock);
}

/* Frees what close_conn and the handshake retired; called between epoll batches. */
static void engine_reap(void)
{
	struct tcp_conn *dead;
	struct tcp_pending *dp;

	pthread_mutex_lock(&tcp_eng.lock);
	dead = tcp_eng.dead;
	tcp_eng.dead = NULL;
	dp = tcp_eng.dead_pendings;
	tcp_eng.dead_pendings = NULL;
	pthread_mutex_unlock(&tcp_eng.lock);
	while (dead) {
		struct tcp_conn *n = dead->next;

		tcp_conn_free(dead);
		dead = n;
	}
	while (dp) {
		struct tcp_pending *n = dp->next;

		free(dp);
		dp = n;
	}
}

static void engine_timers(uint64_t now)
{
	pthread_mutex_lock(&tcp_eng.lock);
	for (struct tcp_conn *c = tcp_eng.conns; c; c = c->next) {
		pthread_mutex_lock(&c->lock);
		tcp_conn_timer(c, now);
		pthread_mutex_unlock(&c->lock);
	}
	pthread_mutex_unlock(&tcp_eng.lock);
	tcp_pending_expire(now);
}

static void engine_dispatch(struct tcp_sock *sk)
{
	uint64_t v;

	switch (sk->kind) {
	case SK_WAKE:
		while (read(sk->fd, &v, sizeof(v)) > 0)
			;
		break;
	case SK_LISTENER:
		tcp_pending_accept(sk->idx);
		break;
	case SK_PENDING:
		tcp_pending_progress((struct tcp_pending *)sk);
		break;
	case SK_CTRL:
	case SK_DATA:
		/* A caller polling this connection right now moves its bytes itself: waking up to
		 * compete for the lock would only add latency. The timer catches what it leaves. */
		if (tcp_app_polling(sk->conn, tcp_now_ns()))
			break;
		pthread_mutex_lock(&sk->conn->lock);
		tcp_conn_progress(sk->conn);
		pthread_mutex_unlock(&sk->conn->lock);
		break;
	}
}

static void *engine_main(void *arg)
{
	struct epoll_event evs[64];
	uint64_t tick_ns = tcp_eng.hb_ns / 2;
	uint64_t next_tick = tcp_now_ns() + tick_ns;

	ftcc_thread_name("tcp");
	(void)arg;
	if (ftcc_setting_int(FTCC_SET_NUMA_BIND) && tcp_eng.ndev > 0 && tcp_eng.devs[0].cpulist[0])
		tcp_dev_bind_thread(tcp_eng.devs[0].cpulist);
	while (!atomic_load(&tcp_eng.stop)) {
		uint64_t now = tcp_now_ns();
		int wait_ms = next_tick > now ? (int)((next_tick - now) / 1000000) + 1 : 0;
		int n = epoll_wait(tcp_eng.epfd, evs, 64, wait_ms);

		for (int i = 0; i < n; i++)
			engine_dispatch(evs[i].data.ptr);
		now = tcp_now_ns();
		if (now >= next_tick) {
			engine_timers(now);
			next_tick = now + tick_ns;
		}
		engine_reap();
	}
	return NULL;
}

static int engine_listen_dev(int d)
{
	struct tcp_dev *dev = &tcp_eng.devs[d];
	struct sockaddr_storage ss;
	socklen_t len = sizeof(ss);
	int one = 1, fd, rc;

	fd = ftcc_sys_socket(dev->addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	memcpy(&ss, &dev->addr, dev->addr_len);
	rc = ftcc_bind_listener(fd, (struct sockaddr *)&ss, dev->addr_len);
	if (rc == 0 &&
	    (ftcc_sys_listen(fd, 1024) < 0 || getsockname(fd, (struct sockaddr *)&ss, &len) < 0))
		rc = -errno;
	if (rc) {
		ftcc_warn("tcp: cannot listen on %s: %s", dev->name, strerror(-rc));
		close(fd);
		return rc;
	}
	tcp_wire_addr_from_sa(&tcp_eng.listen_addr[d], (struct sockaddr *)&ss);
	tcp_eng.listeners[d] = (struct tcp_sock){ .fd = fd, .kind = SK_LISTENER, .idx = d };
	rc = tcp_engine_add(&tcp_eng.listeners[d], EPOLLIN);
	if (rc) {
		close(fd);
		tcp_eng.listeners[d].fd = -1;
	}
	return rc;
}

static void engine_read_settings(void)
{
	uint64_t ms = 1000000ull;
	int64_t timeout = ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS);
	int64_t hb = ftcc_setting_effective(FTCC_SET_HEARTBEAT_MS);

	tcp_eng.timeout_ns = (uint64_t)timeout * ms;
	tcp_eng.hb_ns = (uint64_t)hb * ms;
	tcp_eng.reconnect_ns = (uint64_t)ftcc_setting_effective(FTCC_SET_RECONNECT_MS) * ms;
	tcp_eng.connect_ns = (uint64_t)ftcc_setting_int(FTCC_SET_CONNECT_TIMEOUT_MS) * ms;
	tcp_eng.nstreams = (int)ftcc_setting_int(FTCC_SET_NSTREAMS);
	tcp_eng.chunk_min = (int)ftcc_setting_int(FTCC_SET_MIN_CHUNK_BYTES);
	tcp_eng.sockbuf = (int)ftcc_setting_int(FTCC_SET_SOCKBUF_BYTES);
	tcp_eng.eager_max = (size_t)ftcc_setting_int(FTCC_SET_EAGER_MAX_BYTES);
}

/* Releases everything the engine holds; the thread is already joined. */
static void engine_teardown(void)
{
	for (int d = 0; d < TCP_DEV_MAX; d++)
		if (tcp_eng.listeners[d].kind == SK_LISTENER)
			tcp_engine_del(&tcp_eng.listeners[d]);
	memset(tcp_eng.listeners, 0, sizeof(tcp_eng.listeners));
	while (tcp_eng.conns) {
		struct tcp_conn *c = tcp_eng.conns;

		tcp_eng.conns = c->next;
		tcp_conn_free(c);
	}
	while (tcp_eng.listens) {
		struct tcp_listen *l = tcp_eng.listens;

		tcp_eng.listens = l->next;
		free(l);
	}
	while (tcp_eng.pendings) {
		struct tcp_pending *p = tcp_eng.pendings;

		tcp_eng.pendings = p->next;
		tcp_engine_del(&p->sk);
		free(p);
	}
	engine_reap();
	if (tcp_eng.wake.fd >= 0)
		close(tcp_eng.wake.fd);
	tcp_eng.wake.fd = -1;
	if (tcp_eng.epfd >= 0)
		close(tcp_eng.epfd);
	tcp_eng.epfd = -1;
	tcp_dev_release();
}

static int engine_start(void)
{
	int rc, n;

	engine_read_settings();
	tcp_eng.wake.fd = -1;
	n = tcp_dev_discover(tcp_eng.devs, TCP_DEV_MAX);
	if (n <= 0) {
		ftcc_warn("tcp: no usable network interface (FTCC_SOCKET_IFNAME=\"%s\")",
			  ftcc_setting_str(FTCC_SET_SOCKET_IFNAME));
		tcp_dev_release();
		return n < 0 ? n : -ENODEV;
	}
	tcp_eng.ndev = n;
	tcp_eng.epfd = epoll_create1(EPOLL_CLOEXEC);
	tcp_eng.wake = (struct tcp_sock){ .kind = SK_WAKE };
	tcp_eng.wake.fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (tcp_eng.epfd < 0 || tcp_eng.wake.fd < 0) {
		rc = -errno;
		goto err_teardown;
	}
	rc = tcp_engine_add(&tcp_eng.wake, EPOLLIN);
	for (int d = 0; d < n && rc == 0; d++)
		rc = engine_listen_dev(d);
	if (rc)
		goto err_teardown;
	atomic_store(&tcp_eng.stop, false);
	rc = -pthread_create(&tcp_eng.thread, NULL, engine_main, NULL);
	if (rc)
		goto err_teardown;
	ftcc_info("tcp: %d device(s), first %s, heartbeat %llu ms, failure timeout %llu ms", n,
		  tcp_eng.devs[0].name, (unsigned long long)(tcp_eng.hb_ns / 1000000),
		  (unsigned long long)(tcp_eng.timeout_ns / 1000000));
	return 0;

err_teardown:
	ftcc_warn("tcp: engine start failed: %s", strerror(-rc));
	engine_teardown();
	return rc;
}

/* Serialises init and fini; the progress thread never takes it, so fini may join. */
static pthread_mutex_t life_lock = PTHREAD_MUTEX_INITIALIZER;

int tcp_engine_get(void)
{
	int rc = 0;

	pthread_mutex_lock(&life_lock);
	if (tcp_eng.refs == 0)
		rc = engine_start();
	if (rc == 0)
		tcp_eng.refs++;
	pthread_mutex_unlock(&life_lock);
	return rc;
}

void tcp_engine_put(void)
{
	pthread_mutex_lock(&life_lock);
	if (tcp_eng.refs > 0 && --tcp_eng.refs == 0) {
		atomic_store(&tcp_eng.stop, true);
		tcp_engine_wake();
		pthread_join(tcp_eng.thread, NULL);
		engine_teardown();
	}
	pthread_mutex_unlock(&life_lock);
}

/* Whether the engine runs (for the plug-in's unload path and tests). */
int tcp_engine_refs(void)
{
	int refs;

	pthread_mutex_lock(&life_lock);
	refs = tcp_eng.refs;
	pthread_mutex_unlock(&life_lock);
	return refs;
}
