/* SPDX-License-Identifier: BSD-3-Clause */
/* Membership backend selection and the small pieces every runtime file shares: the backend
 * spec ("", "embedded", "host:port", "etcd://..."), address parsing, the clock, the timing
 * defaults from the settings, and incarnation numbers.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "rt.h"

uint64_t rt_now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static pthread_once_t settings_once = PTHREAD_ONCE_INIT;

static void settings_load_once(void)
{
	if (ftcc_settings_load())
		ftcc_warn("control: invalid FTCC_* setting (named above); using defaults for it");
}

void rt_settings_once(void)
{
	pthread_once(&settings_once, settings_load_once);
}

void rt_times_fill(int64_t timeout_ms, int64_t hb_ms, int64_t connect_ms, struct rt_times *t)
{
	int64_t timeout =
		timeout_ms > 0 ? timeout_ms : ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS);
	int64_t hb = ftcc_heartbeat_ms(timeout,
				       hb_ms > 0 ? hb_ms : ftcc_setting_int(FTCC_SET_HEARTBEAT_MS));

	t->timeout_ms = (uint64_t)timeout;
	t->hb_ms = (uint64_t)hb;
	t->connect_ms = (uint64_t)(connect_ms > 0 ? connect_ms :
						    ftcc_setting_int(FTCC_SET_CONNECT_TIMEOUT_MS));
}

uint64_t rt_incarnation(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		/* No entropy yet or getrandom filtered: clock and pid still differ per start. */
		struct timespec ts;

		clock_gettime(CLOCK_REALTIME, &ts);
		v = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
		    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)&v;
	}
	return v ? v : 1;
}

/* Strict decimal port 0..65535. 0 or -EINVAL. */
static int parse_port(const char *s, uint16_t *port)
{
	unsigned long v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (unsigned long)(*s - '0');
		if (v > 65535)
			return -EINVAL;
	}
	*port = (uint16_t)v;
	return 0;
}

/* Resolves the name @host once (first IPv4 or IPv6 answer). 0 or -EINVAL. */
static int resolve_name(const char *host, uint16_t port, struct sockaddr_storage *ss,
			unsigned *sslen)
{
	struct addrinfo hints = { .ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM };
	struct addrinfo *res = NULL;
	int rc = getaddrinfo(host, NULL, &hints, &res);

	if (rc || !res) {
		ftcc_info("control: cannot resolve \"%s\": %s", host, gai_strerror(rc));
		return -EINVAL;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*sslen = (unsigned)res->ai_addrlen;
	freeaddrinfo(res);
	if (ss->ss_family == AF_INET)
		((struct sockaddr_in *)ss)->sin_port = htons(port);
	else if (ss->ss_family == AF_INET6)
		((struct sockaddr_in6 *)ss)->sin6_port = htons(port);
	else
		return -EINVAL;
	return 0;
}

int ctl_parse_addr(const char *text, struct sockaddr_storage *ss, unsigned *sslen)
{
	char host[256];
	const char *colon, *hstart = text;
	size_t hlen;
	uint16_t port;

	if (!text)
		return -EINVAL;
	if (text[0] == '[') {
		const char *close = strchr(text, ']');

		if (!close || close[1] != ':')
			return -EINVAL;
		hstart = text + 1;
		hlen = (size_t)(close - hstart);
		colon = close + 1;
	} else {
		colon = strrchr(text, ':');
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - text);
		if (memchr(text, ':', hlen))
			return -EINVAL; /* a bare IPv6 address needs brackets */
	}
	if (hlen == 0 || hlen >= sizeof(host) || parse_port(colon + 1, &port))
		return -EINVAL;
	memcpy(host, hstart, hlen);
	host[hlen] = '\0';
	memset(ss, 0, sizeof(*ss));

	struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
	struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
	if (text[0] != '[' && inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
		v4->sin_family = AF_INET;
		v4->sin_port = htons(port);
		*sslen = sizeof(*v4);
		return 0;
	}
	if (text[0] == '[') {
		if (inet_pton(AF_INET6, host, &v6->sin6_addr) != 1)
			return -EINVAL;
		v6->sin6_family = AF_INET6;
		v6->sin6_port = htons(port);
		*sslen = sizeof(*v6);
		return 0;
	}
	return resolve_name(host, port, ss, sslen);
}

int rt_backend_parse(const char *spec, enum rt_backend *kind, struct sockaddr_storage *ss,
		     unsigned *sslen)
{
	if (!spec || !*spec || strcmp(spec, "embedded") == 0) {
		*kind = RT_EMBEDDED;
		return 0;
	}
	if (strncmp(spec, "etcd://", 7) == 0) {
		ftcc_warn("control: coordinator \"%s\": etcd backend is not built yet", spec);
		return -EPROTONOSUPPORT;
	}
	if (ctl_parse_addr(spec, ss, sslen)) {
		ftcc_warn("control: bad coordinator \"%s\" (expected empty, \"embedded\", "
			  "host:port or etcd://...)",
			  spec);
		return -EINVAL;
	}
	*kind = RT_DAEMON;
	return 0;
}

void rt_addr_text(const struct sockaddr *sa, char *buf, size_t len)
{
	char ip[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *v4 = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &v4->sin_addr, ip, sizeof(ip));
		snprintf(buf, len, "%s:%u", ip, ntohs(v4->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &v6->sin6_addr, ip, sizeof(ip));
		snprintf(buf, len, "[%s]:%u", ip, ntohs(v6->sin6_port));
	} else {
		snprintf(buf, len, "?");
	}
}
