/* SPDX-License-Identifier: BSD-3-Clause */
/* Named fault-injection points (FTCC_FAULT): the parser of "point:seq[:step[:action]]" specs
 * and the act of dying, stopping or exiting at the first match of each spec.
 */
#define _GNU_SOURCE
#include "ftcc/fault.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ftcc/sys.h"

#define FAULT_MAX 16
#define FAULT_ANY_STEP UINT64_MAX

enum fault_action { FAULT_KILL, FAULT_STOP, FAULT_EXIT, FAULT_RESET, FAULT_FAIL, FAULT_HOLD };

/* How long "hold" keeps the thread that reached the point. */
#define FAULT_HOLD_MS 1000

/* One armed spec. */
struct fault_spec {
	char point[16];
	uint64_t seq;
	uint64_t step; /* FAULT_ANY_STEP or a uint32_t */
	enum fault_action action;
	atomic_int fired;
};

int ftcc_fault_armed;

static const char *const fault_points[] = {
	"connect", "rs",   "ag",   "rd",    "qs",   "qg",    "report",
	"decide",  "fill", "have", "epoch", "join", "input", "bc",
};

static struct fault_spec fault_specs[FAULT_MAX];
static atomic_uint fault_nspecs;
static pthread_mutex_t fault_lock = PTHREAD_MUTEX_INITIALIZER;

/* Parses an unsigned decimal of @len bytes at @s, at most @max. 0 or -EINVAL. */
static int fault_parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
	uint64_t v = 0;

	if (len == 0 || len > 20) {
		return -EINVAL;
	}
	for (size_t i = 0; i < len; i++) {
		unsigned d = (unsigned)(s[i] - '0');

		if (d > 9 || v > (UINT64_MAX - d) / 10) {
			return -EINVAL;
		}
		v = v * 10 + d;
	}
	if (v > max) {
		return -EINVAL;
	}
	*out = v;
	return 0;
}

static int fault_field_is(const char *s, size_t len, const char *word)
{
	return strlen(word) == len && memcmp(s, word, len) == 0;
}

/* Parses one spec of @len bytes at @s into @f. 0 or -EINVAL. */
static int fault_parse_one(const char *s, size_t len, struct fault_spec *f)
{
	const char *field[4] = { 0 };
	size_t flen[4] = { 0 };
	int nf = 0, known = 0;
	const char *end = s + len, *p = s;

	for (;;) {
		const char *colon = memchr(p, ':', (size_t)(end - p));
		const char *stop = colon ? colon : end;

		if (nf == 4) {
			return -EINVAL;
		}
		field[nf] = p;
		flen[nf++] = (size_t)(stop - p);
		if (!colon) {
			break;
		}
		p = colon + 1;
	}
	if (nf < 2) {
		return -EINVAL;
	}
	for (size_t i = 0; i < sizeof(fault_points) / sizeof(fault_points[0]); i++) {
		known |= fault_field_is(field[0], flen[0], fault_points[i]);
	}
	if (!known) {
		return -EINVAL;
	}
	memset(f, 0, sizeof(*f));
	memcpy(f->point, field[0], flen[0]);
	if (fault_parse_u64(field[1], flen[1], UINT64_MAX, &f->seq)) {
		return -EINVAL;
	}
	f->step = FAULT_ANY_STEP;
	if (nf > 2 && !fault_field_is(field[2], flen[2], "*") &&
	    fault_parse_u64(field[2], flen[2], UINT32_MAX, &f->step)) {
		return -EINVAL;
	}
	f->action = FAULT_KILL;
	if (nf > 3) {
		if (fault_field_is(field[3], flen[3], "kill")) {
			f->action = FAULT_KILL;
		} else if (fault_field_is(field[3], flen[3], "stop")) {
			f->action = FAULT_STOP;
		} else if (fault_field_is(field[3], flen[3], "exit")) {
			f->action = FAULT_EXIT;
		} else if (fault_field_is(field[3], flen[3], "reset")) {
			f->action = FAULT_RESET;
		} else if (fault_field_is(field[3], flen[3], "fail")) {
			f->action = FAULT_FAIL;
		} else if (fault_field_is(field[3], flen[3], "hold")) {
			f->action = FAULT_HOLD;
		} else {
			return -EINVAL;
		}
	}
	return 0;
}

int ftcc_fault_load(void)
{
	const char *text = ftcc_setting_str(FTCC_SET_FAULT);
	struct fault_spec parsed[FAULT_MAX];
	unsigned n = 0;
	const char *p = text;
	int rc = 0;

	while (*text) {
		const char *comma = strchr(p, ',');
		size_t len = comma ? (size_t)(comma - p) : strlen(p);

		if (n == FAULT_MAX || fault_parse_one(p, len, &parsed[n])) {
			rc = -EINVAL;
			break;
		}
		n++;
		if (!comma) {
			break;
		}
		p = comma + 1;
	}
	pthread_mutex_lock(&fault_lock);
	__atomic_store_n(&ftcc_fault_armed, 0, __ATOMIC_RELEASE);
	atomic_store(&fault_nspecs, 0);
	if (rc) {
		ftcc_warn("FTCC_FAULT=\"%s\": expected point:seq[:step[:action]] (at most %d, "
			  "comma-separated; action kill, stop, exit, reset or fail); nothing armed",
			  text, FAULT_MAX);
		n = 0;
	}
	for (unsigned i = 0; i < n; i++) {
		memcpy(fault_specs[i].point, parsed[i].point, sizeof(parsed[i].point));
		fault_specs[i].seq = parsed[i].seq;
		fault_specs[i].step = parsed[i].step;
		fault_specs[i].action = parsed[i].action;
		atomic_store(&fault_specs[i].fired, 0);
	}
	atomic_store(&fault_nspecs, n);
	__atomic_store_n(&ftcc_fault_armed, n > 0, __ATOMIC_RELEASE);
	pthread_mutex_unlock(&fault_lock);
	return rc;
}

static const char *fault_action_text(enum fault_action a)
{
	switch (a) {
	case FAULT_EXIT:
		return "exiting";
	case FAULT_STOP:
		return "stopping";
	case FAULT_RESET:
		return "resetting my next data-plane send";
	case FAULT_FAIL:
		return "failing";
	case FAULT_HOLD:
		return "holding this thread for a second";
	case FAULT_KILL:
		break;
	}
	return "killing myself";
}

int ftcc_fault_hit(const char *point, uint64_t seq, uint32_t step)
{
	unsigned n = atomic_load(&fault_nspecs);
	int fail = 0;

	for (unsigned i = 0; i < n; i++) {
		struct fault_spec *f = &fault_specs[i];

		if (f->seq != seq || (f->step != FAULT_ANY_STEP && f->step != step) ||
		    strcmp(f->point, point) != 0 || atomic_exchange(&f->fired, 1)) {
			continue;
		}
		ftcc_warn("FTCC_FAULT: %s at %s op %" PRIu64 " step %" PRIu32,
			  fault_action_text(f->action), point, seq, step);
		switch (f->action) {
		case FAULT_EXIT:
			_exit(3);
		case FAULT_STOP:
			kill(getpid(), SIGSTOP);
			break;
		case FAULT_KILL:
			kill(getpid(), SIGKILL);
			break;
		case FAULT_RESET:
			ftcc_sys_inject_arm("sendv", 1);
			break;
		case FAULT_FAIL:
			fail = 1;
			break;
		case FAULT_HOLD: {
			struct timespec ts = { .tv_sec = FAULT_HOLD_MS / 1000,
					       .tv_nsec = (FAULT_HOLD_MS % 1000) * 1000000L };

			nanosleep(&ts, NULL);
			break;
		}
		}
	}
	return fail;
}
