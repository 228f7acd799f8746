/* SPDX-License-Identifier: BSD-3-Clause */
/* The FTCC_* settings: the static table built from FTCC_SETTINGS and the current values.
 *
 * Writers (load, set) serialise on a mutex; readers load the current value lock-free. A string
 * value, once published, is never freed while the process runs (superseded ones are kept on a
 * list), so a pointer returned by ftcc_setting_str() stays valid even across reloads.
 */
#define _GNU_SOURCE
#include "ftcc/settings.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/ports.h"
#include "ftcc/sys.h"

/* Per-type pieces of the X-macro: a STR default is a string literal, an INT default a number. */
#define SET_TYPE_INT FTCC_SETTING_INT
#define SET_TYPE_STR FTCC_SETTING_STR
#define SET_INTDEF_INT(def) (def)
#define SET_INTDEF_STR(def) 0
#define SET_STRDEF_INT(def) NULL
#define SET_STRDEF_STR(def) def

/* The table without default texts; those are filled in once by settings_table_init(). */
static const struct ftcc_setting_desc settings_desc[FTCC_SET_COUNT] = {
#define X(id, ty, def, lo, hi, text)                                                               \
	[FTCC_SET_##id] = {                                                                        \
		.name = "FTCC_" #id,                                                               \
		.type = SET_TYPE_##ty,                                                             \
		.min = (lo),                                                                       \
		.max = (hi),                                                                       \
		.doc = (text),                                                                     \
	},
	FTCC_SETTINGS(X)
#undef X
};

static const int64_t settings_int_defaults[FTCC_SET_COUNT] = {
#define X(id, ty, def, lo, hi, text) [FTCC_SET_##id] = SET_INTDEF_##ty(def),
	FTCC_SETTINGS(X)
#undef X
};

static const char *const settings_str_defaults[FTCC_SET_COUNT] = {
#define X(id, ty, def, lo, hi, text) [FTCC_SET_##id] = SET_STRDEF_##ty(def),
	FTCC_SETTINGS(X)
#undef X
};

/* Current values, starting at the defaults; only the slot of the setting's type is used. */
static _Atomic int64_t settings_int[FTCC_SET_COUNT] = {
#define X(id, ty, def, lo, hi, text) [FTCC_SET_##id] = SET_INTDEF_##ty(def),
	FTCC_SETTINGS(X)
#undef X
};
static _Atomic(const char *) settings_str[FTCC_SET_COUNT] = {
#define X(id, ty, def, lo, hi, text) [FTCC_SET_##id] = SET_STRDEF_##ty(def),
	FTCC_SETTINGS(X)
#undef X
};

/* Strings this module allocated, newest first; never freed (see the file comment). */
struct settings_str_node {
	struct settings_str_node *next;
	char text[];
};
static struct settings_str_node *settings_strings;

static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER;

/* The public table: settings_desc plus default texts (INT defaults printed as digits). */
static pthread_once_t settings_table_once = PTHREAD_ONCE_INIT;
static char settings_def_text[FTCC_SET_COUNT][24];
static struct ftcc_setting_desc settings_table_out[FTCC_SET_COUNT];

static void settings_table_init(void)
{
	for (int i = 0; i < FTCC_SET_COUNT; i++) {
		settings_table_out[i] = settings_desc[i];
		if (settings_desc[i].type == FTCC_SETTING_INT) {
			snprintf(settings_def_text[i], sizeof(settings_def_text[i]), "%" PRId64,
				 settings_int_defaults[i]);
			settings_table_out[i].def = settings_def_text[i];
		} else {
			settings_table_out[i].def = settings_str_defaults[i];
		}
	}
}

const struct ftcc_setting_desc *ftcc_settings_table(void)
{
	pthread_once(&settings_table_once, settings_table_init);
	return settings_table_out;
}

/* Strict decimal: optional '-', then digits only; no blanks, no '+', no trailing junk. */
static int settings_parse_int(const char *text, int64_t *out)
{
	const char *p = text;
	int neg = 0;
	uint64_t acc = 0;
	const uint64_t limit = (uint64_t)INT64_MAX + 1;

	if (*p == '-') {
		neg = 1;
		p++;
	}
	if (*p == '\0')
		return -EINVAL;
	for (; *p; p++) {
		if (*p < '0' || *p > '9')
			return -EINVAL;
		uint64_t digit = (uint64_t)(*p - '0');
		if (acc > (limit - digit) / 10)
			return -EINVAL; /* checked before it can wrap */
		acc = acc * 10 + digit;
	}
	if (!neg && acc == limit)
		return -EINVAL;
	*out = neg ? (int64_t)(0 - acc) : (int64_t)acc;
	return 0;
}

/* Maps a FTCC_DEBUG value to a level; -1 if it is none of the names. */
static int settings_parse_level(const char *text)
{
	static const char *const names[] = { "NONE", "WARN", "INFO", "TRACE" };

	for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++) {
		if (strcasecmp(text, names[i]) == 0)
			return i;
	}
	return -1;
}

/* Copies @text into storage that lives for the rest of the process. Caller holds the lock. */
static const char *settings_keep_string(const char *text)
{
	size_t len = strlen(text);
	struct settings_str_node *node = malloc(sizeof(*node) + len + 1);
	if (!node)
		return NULL;
	memcpy(node->text, text, len + 1);
	node->next = settings_strings;
	settings_strings = node;
	return node->text;
}

/* Frees the kept strings when the library is unloaded (NCCL dlcloses the plug-in after its
 * last communicator): nothing of this library can read them any more. */
__attribute__((destructor)) static void settings_release(void)
{
	while (settings_strings) {
		struct settings_str_node *n = settings_strings->next;

		free(settings_strings);
		settings_strings = n;
	}
}

/* Side effects of a new value: the log level and the injection seam follow their settings. */
static void settings_apply(enum ftcc_setting_id id)
{
	if (id == FTCC_SET_DEBUG)
		ftcc_log_set_level(
			(enum ftcc_log_level)settings_parse_level(atomic_load(&settings_str[id])));
	else if (id == FTCC_SET_INJECT)
		ftcc_sys_inject_reload(atomic_load(&settings_str[id]));
}

/* What a string setting with a fixed syntax accepts, for the error line. */
static const char *settings_str_expected(enum ftcc_setting_id id)
{
	switch (id) {
	case FTCC_SET_DEGRADED:
		return "rescale, sum or fail";
	case FTCC_SET_ALGO:
		return "auto (or empty), ring or rd";
	case FTCC_SET_PORT_RANGE:
		return "LO-HI with 1 <= LO <= HI <= 65535, or empty";
	case FTCC_SET_TRANSPORT:
		return "auto (or empty), ib or tcp";
	default:
		return "";
	}
}

/* 0 when @text is valid for string setting @id (those with a fixed syntax; others take any). */
static int settings_str_check(enum ftcc_setting_id id, const char *text)
{
	int lo, hi;

	switch (id) {
	case FTCC_SET_DEGRADED:
		return strcmp(text, "rescale") && strcmp(text, "sum") && strcmp(text, "fail");
	case FTCC_SET_ALGO:
		return text[0] && strcmp(text, "auto") && strcmp(text, "ring") &&
		       strcmp(text, "rd");
	case FTCC_SET_PORT_RANGE:
		return ftcc_port_range_parse(text, &lo, &hi) != 0;
	case FTCC_SET_TRANSPORT:
		return text[0] && strcmp(text, "auto") && strcmp(text, "ib") && strcmp(text, "tcp");
	default:
		return 0;
	}
}

/* Parses and stores one value; caller holds the lock. Logs and returns -EINVAL on bad text. */
static int settings_store(enum ftcc_setting_id id, const char *text)
{
	const struct ftcc_setting_desc *d = &settings_desc[id];

	if (d->type == FTCC_SETTING_INT) {
		int64_t v;
		if (settings_parse_int(text, &v) != 0 || v < d->min || v > d->max) {
			ftcc_warn("%s=\"%s\" is invalid: expected a decimal integer in [%" PRId64
				  ", %" PRId64 "]",
				  d->name, text, d->min, d->max);
			return -EINVAL;
		}
		atomic_store(&settings_int[id], v);
		return 0;
	}

	char upper[8];
	if (id == FTCC_SET_DEBUG) {
		int lvl = settings_parse_level(text);
		if (lvl < 0) {
			ftcc_warn("%s=\"%s\" is invalid: expected one of NONE, WARN, INFO, TRACE",
				  d->name, text);
			return -EINVAL;
		}
		/* Canonical spelling, so readers need not compare case-insensitively. */
		size_t n = strlen(text); /* at most 5: it matched a level name */
		for (size_t i = 0; i <= n; i++)
			upper[i] = (char)toupper((unsigned char)text[i]);
		text = upper;
	}
	if (settings_str_check(id, text)) {
		ftcc_warn("%s=\"%s\" is invalid: expected %s", d->name, text,
			  settings_str_expected(id));
		return -EINVAL;
	}
	/* Unchanged (a reload of the same environment): keep the stored copy, allocate nothing. */
	const char *cur = atomic_load(&settings_str[id]);
	if (cur && strcmp(cur, text) == 0)
		return 0;
	const char *kept = settings_keep_string(text);
	if (!kept)
		return -ENOMEM;
	atomic_store(&settings_str[id], kept);
	return 0;
}

static void settings_reset(enum ftcc_setting_id id)
{
	atomic_store(&settings_int[id], settings_int_defaults[id]);
	atomic_store(&settings_str[id], settings_str_defaults[id]);
}

/* Variables named FTCC_* that are not settings: the tools' and the tests' own. */
static int settings_not_ours(const char *name, size_t len)
{
	static const char *const prefixes[] = { "FTCC_TEST_", "FTCC_FUZZ_",
						"FTCC_PLUGIN_PATH=", "FTCC_PERF_BOOT=" };

	(void)len;
	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0)
			return 1;
	return 0;
}

/* One WARN per process for FTCC_* variables that are no setting (a typo, or a name from an
 * older release: FTCC_MIN_CHUNK, FTCC_EAGER_MAX and FTCC_SOCKBUF gained _BYTES). */
static void settings_warn_unknown(void)
{
	static int warned;

	for (char **e = environ; e && *e && !warned; e++) {
		const char *eq = strchr(*e, '=');
		size_t len = eq ? (size_t)(eq - *e) : strlen(*e);
		int known = 0;

		if (strncmp(*e, "FTCC_", 5) != 0 || settings_not_ours(*e, len))
			continue;
		for (int i = 0; i < FTCC_SET_COUNT && !known; i++)
			known = strlen(settings_desc[i].name) == len &&
				strncmp(settings_desc[i].name, *e, len) == 0;
		if (known)
			continue;
		warned = 1;
		ftcc_warn("%.*s is not an ftcc setting and is ignored (the settings: README, "
			  "\"Settings\"; FTCC_MIN_CHUNK, FTCC_EAGER_MAX and FTCC_SOCKBUF are now "
			  "named with _BYTES)",
			  (int)len, *e);
	}
}

int ftcc_settings_load(void)
{
	int ret = 0;

	pthread_mutex_lock(&settings_lock);
	settings_warn_unknown();
	for (int i = 0; i < FTCC_SET_COUNT; i++) {
		const char *text = getenv(settings_desc[i].name);
		int err = 0;

		if (text)
			err = settings_store((enum ftcc_setting_id)i, text);
		if (!text || err)
			settings_reset((enum ftcc_setting_id)i);
		if (err && !ret)
			ret = err;
	}
	for (int i = 0; i < FTCC_SET_COUNT; i++)
		settings_apply((enum ftcc_setting_id)i);
	pthread_mutex_unlock(&settings_lock);
	return ret;
}

int ftcc_settings_set(enum ftcc_setting_id id, const char *text)
{
	if ((int)id < 0 || id >= FTCC_SET_COUNT || !text)
		return -EINVAL;
	pthread_mutex_lock(&settings_lock);
	int ret = settings_store(id, text);
	if (ret == 0)
		settings_apply(id);
	pthread_mutex_unlock(&settings_lock);
	return ret;
}

int64_t ftcc_setting_int(enum ftcc_setting_id id)
{
	if ((int)id < 0 || id >= FTCC_SET_COUNT)
		return 0;
	return atomic_load_explicit(&settings_int[id], memory_order_relaxed);
}

const char *ftcc_setting_str(enum ftcc_setting_id id)
{
	if ((int)id < 0 || id >= FTCC_SET_COUNT)
		return "";
	const char *s = atomic_load_explicit(&settings_str[id], memory_order_acquire);
	return s ? s : "";
}

int64_t ftcc_heartbeat_ms(int64_t timeout_ms, int64_t hb_ms)
{
	int64_t hb = hb_ms > 0 ? hb_ms : (timeout_ms / 8 < 100 ? timeout_ms / 8 : 100);

	return hb < 5 ? 5 : hb;
}

int64_t ftcc_setting_effective(enum ftcc_setting_id id)
{
	int64_t timeout = ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS);
	int64_t v = ftcc_setting_int(id);

	switch (id) {
	case FTCC_SET_HEARTBEAT_MS:
		return ftcc_heartbeat_ms(timeout, v);
	case FTCC_SET_RECONNECT_MS:
		return v ? v : timeout;
	default:
		return v;
	}
}
