/* SPDX-License-Identifier: BSD-3-Clause */
/* The reader of CollNet status files (include/ftcc_status.h); the writer is
 * plugin/collnet_status.c. One "key value" per line; every number is decimal.
 */
#include "ftcc_status.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define STATUS_FILE_MAX (64u << 10) /* the largest file read (1024 nodes fit easily) */

/* Parses an unsigned decimal that fills [p, end). 0 or -1. */
static int num(const char *p, const char *end, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (p == end) {
		return -1;
	}
	for (; p < end; p++) {
		if (*p < '0' || *p > '9' || v > (max - (uint64_t)(*p - '0')) / 10) {
			return -1;
		}
		v = v * 10 + (uint64_t)(*p - '0');
	}
	*out = v;
	return 0;
}

/* "1,4,7" (possibly empty) into bitmap @map; the count into *@n (may be NULL). 0 or -1. */
static int ids(const char *p, const char *end, uint8_t *map, uint32_t *n)
{
	uint32_t k = 0;

	memset(map, 0, FTCC_STATUS_NODES / 8);
	while (p < end) {
		const char *c = memchr(p, ',', (size_t)(end - p));
		uint64_t id;

		if (!c) {
			c = end;
		}
		if (num(p, c, FTCC_STATUS_NODES - 1, &id) || ftcc_status_has(map, (uint32_t)id)) {
			return -1;
		}
		map[id / 8] |= (uint8_t)(1u << (id % 8));
		k++;
		p = c < end ? c + 1 : end;
		if (c + 1 == end) {
			return -1; /* a trailing comma */
		}
	}
	if (n) {
		*n = k;
	}
	return 0;
}

/* Copies [p, end) into @out of @len bytes as a string; -1 when it does not fit. */
static int text(const char *p, const char *end, char *out, size_t len)
{
	size_t n = (size_t)(end - p);

	if (n >= len || memchr(p, '\0', n)) {
		return -1;
	}
	memcpy(out, p, n);
	out[n] = '\0';
	return 0;
}

/* "N epoch E at_ms T" of a lost line. */
static int lost(const char *p, const char *end, struct ftcc_status *st)
{
	uint64_t node, epoch, at;
	const char *a = memchr(p, ' ', (size_t)(end - p)), *b, *c, *d;

	if (!a || (size_t)(end - a) < 7 || memcmp(a, " epoch ", 7)) {
		return -1;
	}
	b = a + 7;
	c = memchr(b, ' ', (size_t)(end - b));
	if (!c || (size_t)(end - c) < 7 || memcmp(c, " at_ms ", 7)) {
		return -1;
	}
	d = c + 7;
	if (num(p, a, FTCC_STATUS_NODES - 1, &node) || num(b, c, UINT64_MAX, &epoch) ||
	    num(d, end, INT64_MAX, &at)) {
		return -1;
	}
	if (st->nlost < FTCC_STATUS_LOST_MAX) {
		st->lost[st->nlost] = (struct ftcc_status_lost){ .node = (uint32_t)node,
								 .epoch = epoch,
								 .at_ms = (int64_t)at };
	}
	st->nlost++;
	return 0;
}

enum {
	HAVE_FORMAT = 1,
	HAVE_GROUP = 2,
	HAVE_NODE = 4,
	HAVE_NODES = 8,
	HAVE_STATE = 16,
	HAVE_EPOCH = 32,
	HAVE_MEMBERS = 64,
	HAVE_ALL = 127
};

/* One line [p, end): key, one space, value. Updates *@have. 0 or -1. */
static int line(const char *p, const char *end, struct ftcc_status *st, unsigned *have)
{
	const char *sp = memchr(p, ' ', (size_t)(end - p));
	const char *v = sp ? sp + 1 : end;
	size_t klen = (size_t)((sp ? sp : end) - p);
	uint64_t x;

#define KEY(k) (klen == sizeof(k) - 1 && memcmp(p, k, klen) == 0)
	if (KEY("format")) {
		*have |= HAVE_FORMAT;
		return num(v, end, UINT32_MAX, &x) || x != FTCC_STATUS_FORMAT ? -1 : 0;
	}
	if (KEY("group")) {
		*have |= HAVE_GROUP;
		return text(v, end, st->group, sizeof(st->group));
	}
	if (KEY("state")) {
		*have |= HAVE_STATE;
		return text(v, end, st->state, sizeof(st->state));
	}
	if (KEY("reason")) {
		return text(v, end, st->reason, sizeof(st->reason));
	}
	if (KEY("node") || KEY("nodes") || KEY("pid")) {
		uint64_t max = KEY("pid") ? INT32_MAX : FTCC_STATUS_NODES - (KEY("node") ? 1 : 0);

		if (num(v, end, max, &x)) {
			return -1;
		}
		if (KEY("pid")) {
			st->pid = (int)x;
		} else if (KEY("node")) {
			st->node = (uint32_t)x;
			*have |= HAVE_NODE;
		} else {
			st->nodes = (uint32_t)x;
			*have |= HAVE_NODES;
		}
		return 0;
	}
	if (KEY("epoch") || KEY("last_op") || KEY("updated_ms")) {
		if (num(v, end, KEY("updated_ms") ? INT64_MAX : UINT64_MAX, &x)) {
			return -1;
		}
		if (KEY("epoch")) {
			st->epoch = x;
			*have |= HAVE_EPOCH;
		} else if (KEY("last_op")) {
			st->last_op = x;
			st->has_last_op = 1;
		} else {
			st->updated_ms = (int64_t)x;
		}
		return 0;
	}
	if (KEY("members")) {
		*have |= HAVE_MEMBERS;
		return ids(v, end, st->members, &st->nmembers);
	}
	if (KEY("contributors")) {
		return ids(v, end, st->contributors, NULL);
	}
	if (KEY("lost")) {
		return lost(v, end, st);
	}
#undef KEY
	return klen ? 0 : -1; /* a key of a later format: skipped */
}

FTCC_API int ftcc_status_parse(const char *t, size_t len, struct ftcc_status *st)
{
	const char *p = t, *end = t ? t + len : NULL;
	unsigned have = 0;

	if (!t || !st) {
		return FTCC_ERR_INVALID;
	}
	memset(st, 0, sizeof(*st));
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));

		if (!nl) {
			return FTCC_ERR_INVALID; /* every line ends with a newline */
		}
		if (line(p, nl, st, &have)) {
			return FTCC_ERR_INVALID;
		}
		p = nl + 1;
	}
	return have == HAVE_ALL && st->node < st->nodes ? 0 : FTCC_ERR_INVALID;
}

FTCC_API int ftcc_status_read(const char *path, struct ftcc_status *st)
{
	char *buf;
	size_t got = 0;
	int fd, rc, err;

	if (!path || !st) {
		return FTCC_ERR_INVALID;
	}
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		return FTCC_ERR_SYSTEM;
	}
	buf = malloc(STATUS_FILE_MAX);
	if (!buf) {
		close(fd);
		return FTCC_ERR_NOMEM;
	}
	for (;;) {
		ssize_t n = read(fd, buf + got, STATUS_FILE_MAX - got);

		if (n < 0 && errno == EINTR) {
			continue;
		}
		if (n <= 0) {
			err = n < 0 ? errno : 0;
			break;
		}
		got += (size_t)n;
		if (got == STATUS_FILE_MAX) {
			err = EFBIG;
			break;
		}
	}
	close(fd);
	if (err) {
		free(buf);
		errno = err;
		return err == EFBIG ? FTCC_ERR_INVALID : FTCC_ERR_SYSTEM;
	}
	rc = ftcc_status_parse(buf, got, st);
	free(buf);
	return rc;
}
