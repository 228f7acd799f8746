/* SPDX-License-Identifier: BSD-3-Clause */
/* Strangers at the engine's listening port: garbage, silence, a foreign protocol version, a
 * hello for a stale incarnation, and a connect() with a handle of another communicator. The
 * listener must refuse each with one log line, never block, stay alive and go on serving a
 * legitimate connection.
 *
 * A receiver process serves connection after connection (each CONN_MSGS checked messages);
 * the test plays the stranger with raw sockets, then starts a legitimate sender process.
 * Hellos are built with the transport's own wire encoder (transport/tcp/wire.h), linked from
 * ftcc_core. Lines "chaos: <test>: ..." carry the measurements.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "../../transport/tcp/wire.h"
#include "chaos_fault.h"
#include "chaos_net.h"
#include "chaos_proc.h"

#define CONN_MSGS 4
#define REFUSED "refused connection"

static struct chaos_pair pair;
static int strangers[4] = { -1, -1, -1, -1 };

static void chaos_teardown(void)
{
	for (int i = 0; i < 4; i++) {
		if (strangers[i] >= 0)
			close(strangers[i]);
		strangers[i] = -1;
	}
	chaos_pair_end(&pair);
	chaos_proc_cleanup();
	chaos_fault_cleanup();
}

TestSuite(chaos_listen, .fini = chaos_teardown, .timeout = 30);

static void listener_start(uint64_t comm_id)
{
	struct chaos_cfg cfg = {
		.comm_id = comm_id, .count = CONN_MSGS, .deadline_ms = 20000, .serve = true
	};

	chaos_env(2000);
	cr_assert_eq(chaos_pair_init(&pair, &cfg), 0);
	cr_assert_eq(chaos_pair_spawn(&pair, CHAOS_RECEIVER), 0);
	cr_assert_eq(chaos_wait_stage(&pair, CHAOS_RECEIVER, CHAOS_ST_LISTENING, 10000), 0,
		     "listener did not start: %s", chaos_side_str(&pair, CHAOS_RECEIVER));
}

/* A raw TCP connection to the listener's engine port, kept in strangers[] for the teardown. */
static int stranger(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint16_t port = 0;
	int fd, slot = -1;

	cr_assert_eq(chaos_handle_port(&pair, &port), 0);
	for (int i = 0; i < 4 && slot < 0; i++)
		if (strangers[i] < 0)
			slot = i;
	cr_assert_geq(slot, 0, "too many strangers");
	sa.sin_port = htons(port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	cr_assert_geq(fd, 0);
	strangers[slot] = fd;
	cr_assert_eq(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0, "connect: %s",
		     strerror(errno));
	return fd;
}

static void stranger_close(int fd)
{
	for (int i = 0; i < 4; i++)
		if (strangers[i] == fd)
			strangers[i] = -1;
	close(fd);
}

static void send_all(int fd, const void *buf, size_t len)
{
	cr_assert_eq(send(fd, buf, len, MSG_NOSIGNAL), (ssize_t)len, "send: %s", strerror(errno));
}

/* The listener must close a refused socket: EOF (or a reset) within 2 s. */
static void expect_closed_by_listener(int fd)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char c;

	cr_assert_eq(poll(&p, 1, 2000), 1, "the listener kept a refused socket open");
	cr_expect_leq(recv(fd, &c, 1, 0), 0, "the listener sent bytes to a stranger");
}

static int refused_lines(void)
{
	static char log[1 << 16];

	chaos_pair_stderr(&pair, CHAOS_RECEIVER, log, sizeof(log));
	return chaos_count(log, REFUSED);
}

/* Waits for the listener's stderr to hold more than @before refusals, the last naming
 * @reason. */
static void expect_refused(int before, const char *reason)
{
	static char log[1 << 16];
	int64_t deadline = chaos_now_ns() + 2000000000ll;
	const char *last;

	while (refused_lines() <= before && chaos_now_ns() < deadline)
		chaos_sleep_ms(1);
	chaos_pair_stderr(&pair, CHAOS_RECEIVER, log, sizeof(log));
	cr_assert_gt(chaos_count(log, REFUSED), before, "no \"" REFUSED "\" line; stderr:\n%s",
		     log);
	last = strstr(log, REFUSED);
	for (const char *n = last; n; n = strstr(n + 1, REFUSED))
		last = n;
	cr_expect(strstr(last, reason), "refusal does not say \"%s\":\n%s", reason, last);
}

/* A legitimate sender connects and sends CONN_MSGS messages; the listener must accept it
 * within 1 s of the connect and receive them intact. */
static void legit_exchange(const char *name)
{
	struct chaos_side *snd = &pair.sh->side[CHAOS_SENDER];
	struct chaos_side *rcv = &pair.sh->side[CHAOS_RECEIVER];
	long served = atomic_load(&rcv->served);
	int64_t deadline;
	int code = -1;
	double ms;

	cr_assert_eq(chaos_pair_spawn(&pair, CHAOS_SENDER), 0);
	cr_assert_eq(chaos_wait_child(&pair, CHAOS_SENDER, 10000, &code), 0, "sender hung: %s",
		     chaos_side_str(&pair, CHAOS_SENDER));
	cr_assert_eq(code, 0, "sender exit %d: %s", code, chaos_side_str(&pair, CHAOS_SENDER));
	cr_assert_eq(atomic_load(&snd->done), CONN_MSGS, "%s", chaos_side_str(&pair, CHAOS_SENDER));
	deadline = chaos_now_ns() + 2000000000ll;
	while (atomic_load(&rcv->served) == served && chaos_now_ns() < deadline &&
	       chaos_alive(pair.pid[1]))
		chaos_sleep_ms(1);
	cr_assert_eq(atomic_load(&rcv->served), served + 1, "the listener did not serve it: %s",
		     chaos_side_str(&pair, CHAOS_RECEIVER));
	ms = chaos_ms(snd->t_setup_ns, rcv->t_ready_ns);
	chaos_report("%s: legitimate connection accepted %.1f ms after connect", name, ms);
	cr_expect_leq(ms, 1000.0, "accept came %.1f ms after connect", ms);
	cr_expect_eq(atomic_load(&rcv->err), 0, "%s", chaos_side_str(&pair, CHAOS_RECEIVER));
	cr_expect_eq(rcv->bad, 0, "%s", chaos_side_str(&pair, CHAOS_RECEIVER));
}

/* Ends the listener; it must still be alive and exit cleanly. */
static void listener_end(void)
{
	int code = -1;

	cr_assert(chaos_alive(pair.pid[CHAOS_RECEIVER]), "the listener died");
	atomic_store(&pair.sh->stop, 1);
	cr_assert_eq(chaos_wait_child(&pair, CHAOS_RECEIVER, 5000, &code), 0, "listener hung");
	cr_expect_eq(code, 0, "listener exit %d: %s", code, chaos_side_str(&pair, CHAOS_RECEIVER));
}

/* A valid control hello for the published handle (a connector that would be accepted). */
static void valid_hello(uint8_t *buf, struct tcp_handle *h)
{
	struct tcp_hello hello = { .type = TCP_HELLO_CTRL, .nstreams = 2, .gen = 1 };

	cr_assert_eq(tcp_handle_decode((const uint8_t *)pair.sh->handle, TCP_HANDLE_WIRE_SIZE, h),
		     0, "published handle does not decode");
	hello.listen_id = h->listen_id;
	hello.comm_id = h->comm_id;
	hello.listener_inc = h->incarnation;
	hello.incarnation = 0x57a1e00000000001ull;
	hello.conn_id = 0x57a1e00000000002ull;
	hello.self = h->addr; /* any valid address: a refused hello is never probed back */
	tcp_hello_encode(&hello, buf);
}

Test(chaos_listen, garbage_hello)
{
	uint8_t junk[TCP_HELLO_WIRE_SIZE];
	uint32_t x = 0x2545f491u;
	int before, fd;

	listener_start(0xc4a0520000000001ull);
	for (size_t i = 0; i < sizeof(junk); i++) {
		x ^= x << 13;
		x ^= x >> 17;
		x ^= x << 5;
		junk[i] = (uint8_t)x;
	}
	junk[0] = (uint8_t) ~(TCP_WIRE_MAGIC & 0xff); /* never the magic by chance */
	before = refused_lines();
	fd = stranger();
	send_all(fd, junk, sizeof(junk));
	expect_refused(before, "malformed hello");
	expect_closed_by_listener(fd);
	stranger_close(fd);
	legit_exchange("garbage_hello");
	listener_end();
}

Test(chaos_listen, silent_then_closed)
{
	listener_start(0xc4a0520000000002ull);
	stranger_close(stranger());
	legit_exchange("silent_then_closed");
	listener_end();
}

/* A silent connection that stays must not hold up the listener. */
Test(chaos_listen, silent_and_stays)
{
	int fd[2];

	listener_start(0xc4a0520000000003ull);
	fd[0] = stranger();
	fd[1] = stranger();
	send_all(fd[1], "FTCC", 4); /* a hello that never completes */
	legit_exchange("silent_and_stays");
	legit_exchange("silent_and_stays (again)");
	listener_end();
	stranger_close(fd[0]);
	stranger_close(fd[1]);
}

Test(chaos_listen, wrong_magic_and_version)
{
	uint8_t buf[TCP_HELLO_WIRE_SIZE];
	struct tcp_handle h;
	int before, fd;

	listener_start(0xc4a0520000000004ull);
	valid_hello(buf, &h);
	buf[0] ^= 0xff; /* magic */
	before = refused_lines();
	fd = stranger();
	send_all(fd, buf, sizeof(buf));
	expect_refused(before, "malformed hello");
	expect_closed_by_listener(fd);
	stranger_close(fd);

	valid_hello(buf, &h);
	buf[4] = TCP_WIRE_VERSION + 1; /* version, little-endian at bytes 4..5 */
	before = refused_lines();
	fd = stranger();
	send_all(fd, buf, sizeof(buf));
	expect_refused(before, "foreign protocol version");
	expect_closed_by_listener(fd);
	stranger_close(fd);
	legit_exchange("wrong_magic_and_version");
	listener_end();
}

/* A well-formed hello whose listener incarnation (handle bytes 44..51) is not the current one:
 * what a connector holding a handle from before a restart sends. */
Test(chaos_listen, stale_incarnation)
{
	uint8_t buf[TCP_HELLO_WIRE_SIZE];
	struct tcp_handle h;
	uint8_t stale[NCCL_NET_HANDLE_MAXSIZE];
	int before, fd;

	listener_start(0xc4a0520000000005ull);
	memcpy(stale, pair.sh->handle, sizeof(stale));
	stale[44] ^= 0x5a;
	cr_assert_eq(tcp_handle_decode(stale, TCP_HANDLE_WIRE_SIZE, &h), 0);
	valid_hello(buf, &(struct tcp_handle){ 0 });
	{
		struct tcp_hello hello;

		cr_assert_eq(tcp_hello_decode(buf, sizeof(buf), &hello), 0);
		hello.listener_inc = h.incarnation;
		tcp_hello_encode(&hello, buf);
	}
	before = refused_lines();
	fd = stranger();
	send_all(fd, buf, sizeof(buf));
	expect_refused(before, "stale incarnation");
	expect_closed_by_listener(fd);
	stranger_close(fd);
	legit_exchange("stale_incarnation");
	listener_end();
}

/* connect() through the plug-in with a handle of another communicator fails at once, with
 * an error and a log line, and leaves the listener serving. */
Test(chaos_listen, foreign_communicator)
{
	struct chaos_side *snd;
	static char log[1 << 16];
	int code = -1;
	double ms;

	listener_start(0xc4a0520000000006ull);
	snd = &pair.sh->side[CHAOS_SENDER];
	pair.cfg.send_comm_id = 0xc4a05200000000ffull;
	cr_assert_eq(chaos_pair_spawn(&pair, CHAOS_SENDER), 0);
	cr_assert_eq(chaos_wait_child(&pair, CHAOS_SENDER, 5000, &code), 0, "connect hung: %s",
		     chaos_side_str(&pair, CHAOS_SENDER));
	ms = chaos_ms(snd->t_setup_ns, snd->t_err_ns);
	chaos_report("foreign_communicator: connect failed with result %d in %.2f ms",
		     atomic_load(&snd->err), ms);
	cr_expect_neq(code, 0, "the connect with a foreign handle succeeded");
	cr_expect_eq(snd->err_call, CHAOS_CALL_CONNECT, "%s", chaos_side_str(&pair, CHAOS_SENDER));
	cr_expect_neq(atomic_load(&snd->err), ncclSuccess);
	cr_expect_leq(ms, 1000.0);
	chaos_pair_stderr(&pair, CHAOS_SENDER, log, sizeof(log));
	cr_expect(strstr(log, "WARN") && strstr(log, "communicator"),
		  "no warning naming the communicator; connector stderr:\n%s", log);
	pair.cfg.send_comm_id = 0;
	legit_exchange("foreign_communicator");
	listener_end();
}
