/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the membership runtime against bad input: strangers sending garbage, foreign
 * versions, malformed bodies, wrong groups, probes, STATUS and silence on a member's port; bad
 * configurations; address parsing; and destroy's bound with absent or frozen peers.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "ctl_rt_harness.h"

/* Suite ctl_runtime is declared in test_ctl_runtime.c. */

/* ---- strangers and bad input ---------------------------------------------------------------- */

Test(ctl_runtime, strangers_do_not_disturb_the_group, .timeout = 40)
{
	static const uint32_t zero[] = { 0 };
	struct crt_grp g;
	uint8_t out[512], in[4096];
	struct ctl_msg r;

	crt_log_start();
	crt_grp_init(&g, "strangers", 2, NULL);
	crt_grp_start(&g, 0, 0, 0);
	crt_grp_start(&g, 1, 0, 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(ctl_member_wait(g.m[i], 1, FORM_MS), 0);
	int p0 = crt_port_of(g.addr[0]), p1 = crt_port_of(g.addr[1]);
	int silent = crt_raw_connect(p0);
	int64_t silent_t0 = crt_now_ms();

	/* Garbage: closed, logged, nothing answered. */
	static const char junk[] = "GET / HTTP/1.0\r\n\r\nmore junk to fill a header.....";
	cr_expect_eq(crt_exchange(p0, junk, sizeof(junk), in, sizeof(in)), 0);
	/* A foreign version. */
	size_t n = crt_make_hello(out, sizeof(out), g.name, 1, 2, 0);
	out[4] = 99;
	out[5] = 0;
	cr_assert_eq(ctl_frame_check(out, n, &(size_t){ 0 }), -EPROTONOSUPPORT);
	cr_expect_eq(crt_exchange(p0, out, n, in, sizeof(in)), 0);
	/* A sound header over a malformed body (a trailing byte): REFUSE(PROTOCOL). */
	n = crt_make_hello(out, sizeof(out), g.name, 1, 2, 0);
	out[n] = 0;
	out[8] = (uint8_t)(n + 1); /* total length, little-endian at offset 8 */
	cr_assert_lt(n + 1, 256);
	size_t got = crt_exchange(p0, out, n + 1, in, sizeof(in));
	cr_assert_eq(crt_decode_first(in, got, &r), 0, "an answer came (%zu bytes)", got);
	cr_expect_eq(r.type, CTL_REFUSE);
	cr_expect_eq(r.code, CTL_REF_PROTOCOL);
	/* A HELLO of another group: REFUSE(PROTOCOL, wrong group). */
	n = crt_make_hello(out, sizeof(out), "other", 1, 2, 0);
	got = crt_exchange(p0, out, n, in, sizeof(in));
	cr_assert_eq(crt_decode_first(in, got, &r), 0);
	cr_expect_eq(r.code, CTL_REF_PROTOCOL);
	cr_expect(strstr(r.text, "wrong group"), "text: %s", r.text);
	/* A probe, and a HELLO to a member that does not coordinate: NOT_COORD naming member 0. */
	n = crt_make_hello(out, sizeof(out), g.name, 1, 2, CTL_HELLO_PROBE);
	got = crt_exchange(p0, out, n, in, sizeof(in));
	cr_assert_eq(crt_decode_first(in, got, &r), 0);
	cr_expect_eq(r.code, CTL_REF_NOT_COORD);
	cr_expect_eq(r.hint, 0);
	n = crt_make_hello(out, sizeof(out), g.name, 0, 2, 0);
	got = crt_exchange(p1, out, n, in, sizeof(in));
	cr_assert_eq(crt_decode_first(in, got, &r), 0);
	cr_expect_eq(r.code, CTL_REF_NOT_COORD);
	cr_expect_eq(r.hint, 0, "member 1 points at member 0");
	/* STATUS on a member's port. */
	got = crt_exchange(p0, "STATUS\n", 7, in, sizeof(in) - 1);
	in[got] = '\0';
	cr_expect(strstr((char *)in, "member 0 of group \"strangers\""), "status: %s", in);

	cr_expect(crt_log_has("bad magic"), "garbage is logged");
	cr_expect(crt_log_has("foreign version 99"), "a foreign version is logged");

	/* The group is unaffected: still epoch 1, and a change still goes through. */
	cr_expect_eq(crt_cur_epoch(g.m[0]), 1);
	cr_expect_eq(crt_cur_epoch(g.m[1]), 1);
	crt_grp_stop(&g, 1);
	cr_expect_gt(crt_wait_members(g.m[0], 1, zero, 1, 2000), 1);

	/* The silent connection is closed after 5 s. */
	int closed = 0;
	crt_raw_read(silent, in, sizeof(in), 8000, &closed);
	close(silent);
	cr_expect(closed, "a silent stranger is dropped");
	cr_expect_geq(crt_now_ms() - silent_t0, 4500);
	cr_expect(crt_log_has("no HELLO within"), "and logged");
	crt_grp_destroy(&g);
}

Test(ctl_runtime, bad_configs_are_refused)
{
	struct crt_grp g;
	struct ctl_member *m = (struct ctl_member *)&g; /* not NULL: create must clear it */
	struct ctl_member_cfg cfg;
	char longname[80];
	const char *bad_addrs[2];

	crt_log_start();
	crt_grp_init(&g, "cfg", 2, NULL);
#define EXPECT_REFUSED(err, needle)                                                                \
	do {                                                                                       \
		crt_log_reset();                                                                   \
		cr_expect_eq(ctl_member_create(&cfg, &m), (err), "%s", needle);                    \
		cr_expect_null(m, "%s", needle);                                                   \
		cr_expect(crt_log_has(needle), "the log says \"%s\"", needle);                     \
		cfg = crt_grp_cfg(&g, 0);                                                          \
	} while (0)

	cfg = crt_grp_cfg(&g, 0);
	cfg.group = NULL;
	EXPECT_REFUSED(-EINVAL, "group:");
	cfg.group = "";
	EXPECT_REFUSED(-EINVAL, "group:");
	memset(longname, 'x', 64);
	longname[64] = '\0';
	cfg.group = longname;
	EXPECT_REFUSED(-EINVAL, "group:");
	cfg.group = "two words";
	EXPECT_REFUSED(-EINVAL, "group:");
	cfg.expected = 0;
	EXPECT_REFUSED(-EINVAL, "expected:");
	cfg.expected = CTL_MAX_MEMBERS + 1;
	EXPECT_REFUSED(-EINVAL, "expected:");
	cfg.id = 2;
	EXPECT_REFUSED(-EINVAL, "id:");
	cfg.info_len = CTL_INFO_MAX + 1;
	EXPECT_REFUSED(-EINVAL, "info_len:");
	cfg.catchup = 1;
	EXPECT_REFUSED(-EINVAL, "catchup:");
	cfg.addrs = NULL;
	EXPECT_REFUSED(-EINVAL, "addrs:");
	bad_addrs[0] = g.addr[0];
	bad_addrs[1] = "127.0.0.1";
	cfg.addrs = bad_addrs;
	EXPECT_REFUSED(-EINVAL, "addrs[1]:");
	bad_addrs[1] = "127.0.0.1:65536";
	cfg.addrs = bad_addrs;
	EXPECT_REFUSED(-EINVAL, "addrs[1]:");
	cfg.coordinator = "etcd://x";
	EXPECT_REFUSED(-EPROTONOSUPPORT, "etcd backend is not built yet");
	cfg.coordinator = "no-port-here";
	EXPECT_REFUSED(-EINVAL, "bad coordinator");

	/* The control port is taken. */
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)crt_port_of(g.addr[0])),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	cr_expect_eq(ctl_member_create(&cfg, &m), -EADDRINUSE);
	cr_expect_null(m);
	close(fd);
#undef EXPECT_REFUSED
}

Test(ctl_runtime, parse_addr)
{
	struct sockaddr_storage ss;
	unsigned len = 0;

	cr_expect_eq(ctl_parse_addr("127.0.0.1:80", &ss, &len), 0);
	cr_expect_eq(ss.ss_family, AF_INET);
	cr_expect_eq(len, sizeof(struct sockaddr_in));
	cr_expect_eq(ntohs(((struct sockaddr_in *)&ss)->sin_port), 80);
	cr_expect_eq(ctl_parse_addr("[::1]:29500", &ss, &len), 0);
	cr_expect_eq(ss.ss_family, AF_INET6);
	cr_expect_eq(ntohs(((struct sockaddr_in6 *)&ss)->sin6_port), 29500);
	cr_expect_eq(ctl_parse_addr("localhost:1", &ss, &len), 0);
	cr_expect_eq(ctl_parse_addr("0.0.0.0:0", &ss, &len), 0);
	static const char *const bad[] = { "1.2.3.4", "1.2.3.4:", "1.2.3.4:65536", ":80", "::1:80",
					   "[::1]80", "[::1",	  "1.2.3.4:8x",	   NULL };
	for (int i = 0; bad[i]; i++)
		cr_expect_eq(ctl_parse_addr(bad[i], &ss, &len), -EINVAL, "%s", bad[i]);
	cr_expect_eq(ctl_parse_addr(NULL, &ss, &len), -EINVAL);
}

/* ---- destroy's bound ------------------------------------------------------------------------ */

/* Destroys @m and returns how long that took. */
static int64_t timed_destroy(struct ctl_member *m)
{
	int64_t t0 = crt_now_ms();

	ctl_member_destroy(m);
	return crt_now_ms() - t0;
}

Test(ctl_runtime, destroy_is_bounded_with_absent_or_frozen_peers)
{
	struct crt_grp g;
	const struct ctl_epoch *e = (const struct ctl_epoch *)&g; /* not NULL: must be cleared */

	crt_log_start();
	/* Member 1 alone: member 0 (its coordinator) never starts. */
	crt_grp_init(&g, "absent", 3, NULL);
	crt_grp_start(&g, 1, 0, 0);
	cr_expect_eq(ctl_member_wait(g.m[1], 1, 50), -ETIMEDOUT);
	cr_expect_eq(ctl_member_wait(g.m[1], 1, -1), -EINVAL);
	cr_expect_eq(ctl_member_op_epoch(g.m[1], 0, &e), -EAGAIN, "no epoch yet");
	cr_expect_null(e);
	cr_expect_eq(ctl_member_suspect(g.m[1], 7, CTL_EV_LINK, 0), -EINVAL);
	cr_expect_eq(ctl_member_suspect(g.m[1], 2, 0, 0), -EINVAL);
	cr_expect_lt(timed_destroy(g.m[1]), 100);

	/* Member 0 hosting a coordinator that waits for members who never come. */
	crt_grp_start(&g, 0, 0, 0);
	cr_expect_lt(timed_destroy(g.m[0]), 100);

	/* A frozen member 0: its port accepts (the kernel does) but nobody reads or answers. */
	crt_grp_init(&g, "frozen", 2, NULL);
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_port = htons((uint16_t)crt_port_of(g.addr[0])),
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);
	cr_assert_eq(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	cr_assert_eq(listen(fd, 4), 0);
	crt_grp_start(&g, 1, 0, 0);
	cr_expect_eq(ctl_member_wait(g.m[1], 1, 200), -ETIMEDOUT);
	cr_expect_lt(timed_destroy(g.m[1]), 100);
	close(fd);
	ctl_member_destroy(NULL);
}

/* ---- an adopted listening socket (the CollNet plug-in's control port) ------------------------ */

/* A socket listening on 127.0.0.1:@port (0: any), and that port in *@port. */
static int listen_on(int *port, int do_listen)
{
	struct sockaddr_in in = { .sin_family = AF_INET, .sin_port = htons((uint16_t)*port) };
	socklen_t len = sizeof(in);
	int one = 1, fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	cr_assert_geq(fd, 0);
	in.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	cr_assert_eq(bind(fd, (struct sockaddr *)&in, sizeof(in)), 0);
	if (do_listen)
		cr_assert_eq(listen(fd, 16), 0);
	cr_assert_eq(getsockname(fd, (struct sockaddr *)&in, &len), 0);
	*port = ntohs(in.sin_port);
	return fd;
}

Test(ctl_runtime, adopted_listen_socket_forms_the_group)
{
	struct crt_grp g;
	struct ctl_member_cfg cfg;
	int port0 = 0, fd0 = listen_on(&port0, 1);

	crt_log_start();
	crt_grp_init(&g, "adopt", 2, NULL);
	snprintf(g.addr[0], sizeof(g.addr[0]), "127.0.0.1:%d", port0);
	cfg = crt_grp_cfg(&g, 0);
	cfg.has_listen_fd = 1;
	cfg.listen_fd = fd0;
	cr_assert_eq(ctl_member_create(&cfg, &g.m[0]), 0);
	/* The member listens on its own duplicate: the caller's copy can go at once. */
	close(fd0);
	crt_grp_start(&g, 1, 0, 0);
	for (int i = 0; i < 2; i++)
		cr_assert_eq(ctl_member_wait(g.m[i], 1, FORM_MS), 0, "member %d did not form", i);
	crt_grp_destroy(&g);
}

Test(ctl_runtime, adopted_socket_must_listen_on_the_member_port)
{
	struct crt_grp g;
	struct ctl_member_cfg cfg;
	struct ctl_member *m = NULL;
	int port = 0, fd = listen_on(&port, 0);

	crt_log_start();
	crt_grp_init(&g, "adoptbad", 1, NULL);
	snprintf(g.addr[0], sizeof(g.addr[0]), "127.0.0.1:%d", port);
	cfg = crt_grp_cfg(&g, 0);
	cfg.has_listen_fd = 1;
	cfg.listen_fd = fd;
	/* Bound but not listening. */
	cr_expect_eq(ctl_member_create(&cfg, &m), -EBADF);
	cr_assert_null(m);
	close(fd);
	/* Listening, but on another port than addrs[id]. */
	port = 0;
	fd = listen_on(&port, 1);
	snprintf(g.addr[0], sizeof(g.addr[0]), "127.0.0.1:%d", port == 65535 ? 1 : port + 1);
	cfg = crt_grp_cfg(&g, 0);
	cfg.has_listen_fd = 1;
	cfg.listen_fd = fd;
	cr_expect_eq(ctl_member_create(&cfg, &m), -EADDRNOTAVAIL);
	cr_assert_null(m);
	/* Not a socket at all. */
	cfg.listen_fd = 1000;
	cr_expect_eq(ctl_member_create(&cfg, &m), -EBADF);
	close(fd);
}
