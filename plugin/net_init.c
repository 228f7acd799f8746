/* SPDX-License-Identifier: BSD-3-Clause */
/* Life cycle of the net plug-in: init and finalize (v11), the pre-v11 global init, and the
 * unload destructor.
 *
 * Owns the per-communicator ctxs (and the pre-v11 default ctx), the reference on the
 * transport each ctx holds, and the log sink that forwards to NCCL's logger. The data path is
 * in net.c.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ftcc/transport.h"
#include "plugin.h"

/* Serialises init, finalize and the unload destructor. */
static pthread_mutex_t plugin_lock = PTHREAD_MUTEX_INITIALIZER;
static int plugin_refs;			  /* live ctxs; each holds one transport reference */
static struct plugin_ctx *plugin_default; /* the pre-v11 default ctx, or NULL */
/* The transport of the first ctx; a static table, so it stays valid after the last finalize
 * (devices and getProperties may come between ctxs). test() needs it because a request does
 * not say which transport made it. */
static _Atomic(const struct ftcc_transport_ops *) plugin_ops;

/* Log forwarding; its own lock because collnet attaches to it too. */
static pthread_mutex_t plugin_log_lock = PTHREAD_MUTEX_INITIALIZER;
static int plugin_log_refs;
static _Atomic(ncclDebugLogger_t) plugin_logger;

static ncclDebugLogLevel plugin_nccl_level(enum ftcc_log_level level)
{
	switch (level) {
	case FTCC_LOG_WARN:
		return NCCL_LOG_WARN;
	case FTCC_LOG_INFO:
		return NCCL_LOG_INFO;
	default:
		return NCCL_LOG_TRACE;
	}
}

/* The ftcc log sink while NCCL's logger is attached. */
static void plugin_log_sink(enum ftcc_log_level level, const char *file, int line, const char *msg)
{
	ncclDebugLogger_t logger = atomic_load_explicit(&plugin_logger, memory_order_acquire);

	if (logger) {
		logger(plugin_nccl_level(level), NCCL_NET, file, line,
		       "NET/" PLUGIN_NET_NAME ": %s", msg);
		return;
	}
	/* Only a line racing with the last release lands here: keep warnings visible. */
	if (level == FTCC_LOG_WARN)
		fprintf(stderr, "ftcc WARN %s:%d %s\n", file, line, msg);
}

/* Level named @name (NONE, WARN, INFO, TRACE; any case), or @fallback. */
static enum ftcc_log_level plugin_level_named(const char *name, enum ftcc_log_level fallback)
{
	static const char *const names[] = { "NONE", "WARN", "INFO", "TRACE" };

	for (int i = 0; name && i < (int)(sizeof(names) / sizeof(names[0])); i++) {
		if (strcasecmp(name, names[i]) == 0)
			return (enum ftcc_log_level)i;
	}
	return fallback;
}

/* FTCC_DEBUG sets the level for our own stderr sink; behind NCCL's logger, NCCL_DEBUG=INFO
 * or TRACE must also show our lines, so it becomes the log's floor (never lowering what
 * FTCC_DEBUG asked for, and kept when a communicator reloads the settings). NCCL filters again
 * by NCCL_DEBUG and NCCL_DEBUG_SUBSYS. */
static void plugin_log_follow_nccl(void)
{
	enum ftcc_log_level want = plugin_level_named(getenv("NCCL_DEBUG"), FTCC_LOG_WARN);

	if (want > FTCC_LOG_TRACE)
		want = FTCC_LOG_TRACE;
	ftcc_log_set_floor(want);
}

/* Remembers @logger if it is not NULL (a NULL one must not silence an earlier ctx) and
 * routes ftcc's log through it. Caller holds plugin_log_lock. */
static void plugin_log_update(ncclDebugLogger_t logger)
{
	if (logger)
		atomic_store_explicit(&plugin_logger, logger, memory_order_release);
	if (atomic_load_explicit(&plugin_logger, memory_order_relaxed))
		ftcc_log_set_sink(plugin_log_sink);
}

void plugin_log_acquire(ncclDebugLogger_t logger)
{
	pthread_mutex_lock(&plugin_log_lock);
	plugin_log_refs++;
	plugin_log_update(logger);
	pthread_mutex_unlock(&plugin_log_lock);
}

void plugin_log_release(void)
{
	pthread_mutex_lock(&plugin_log_lock);
	if (plugin_log_refs > 0 && --plugin_log_refs == 0) {
		/* NCCL may dlclose us, and itself be unloaded, after this: point nowhere into it. */
		ftcc_log_set_sink(NULL);
		atomic_store_explicit(&plugin_logger, NULL, memory_order_release);
		ftcc_log_set_floor(FTCC_LOG_NONE);
		ftcc_log_set_level(
			plugin_level_named(ftcc_setting_str(FTCC_SET_DEBUG), FTCC_LOG_WARN));
	}
	pthread_mutex_unlock(&plugin_log_lock);
}

/* A random incarnation, so that a peer never mistakes a restarted process for the old one. */
static uint64_t plugin_random64(void)
{
	uint64_t v = 0;

	if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v)) {
		/* No entropy yet (early boot) or getrandom filtered: clock and pid still differ
		 * between incarnations. */
		struct timespec ts;
		clock_gettime(CLOCK_REALTIME, &ts);
		v = ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec) ^
		    ((uint64_t)getpid() << 40) ^ (uint64_t)(uintptr_t)&v;
	}
	return v ? v : 1;
}

/* Creates a ctx and takes its transport reference. The first ctx (re)reads the settings so a
 * bad FTCC_* value fails init loudly. Caller holds plugin_lock. */
static int plugin_ctx_create(uint64_t comm_id, int traffic_class, struct plugin_ctx **out)
{
	int err;

	if (plugin_refs == 0) {
		err = ftcc_settings_load();
		if (err) {
			ftcc_warn("init failed: invalid FTCC_* setting (named above); "
				  "the plug-in is disabled");
			return err;
		}
		plugin_log_follow_nccl();
	}
	const struct ftcc_transport_ops *ops = plugin_refs ? atomic_load(&plugin_ops) : NULL;
	int held = 0;
	if (!ops)
		ops = ftcc_transport_pick(&held);
	if (!ops)
		return -ENODEV;
	struct plugin_ctx *ctx = calloc(1, sizeof(*ctx));
	if (!ctx) {
		if (held)
			ops->fini();
		return -ENOMEM;
	}
	err = held ? 0 : ops->init();
	if (err) {
		ftcc_warn("init failed: transport %s did not start (%s)", ops->name,
			  strerror(-err));
		goto free_ctx;
	}
	ctx->tctx.comm_id = comm_id;
	ctx->tctx.incarnation = plugin_random64();
	ctx->ops = ops;
	ctx->traffic_class = traffic_class;
	atomic_store_explicit(&plugin_ops, ops, memory_order_release);
	plugin_refs++;
	ftcc_info("init comm 0x%016llx incarnation 0x%016llx over %s", (unsigned long long)comm_id,
		  (unsigned long long)ctx->tctx.incarnation, ops->name);
	*out = ctx;
	return 0;

free_ctx:
	free(ctx);
	return err;
}

/* Drops @ctx's transport reference and frees it. Caller holds plugin_lock. */
static void plugin_ctx_destroy(struct plugin_ctx *ctx)
{
	ftcc_info("finalize comm 0x%016llx", (unsigned long long)ctx->tctx.comm_id);
	ctx->ops->fini();
	plugin_refs--;
	free(ctx);
}

ncclResult_t plugin_init(void **ctx, uint64_t comm_id, ncclNetCommConfig_v11_t *config,
			 ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	struct plugin_ctx *c = NULL;

	(void)prof; /* no profiler events yet */
	if (!ctx)
		return plugin_result(-EINVAL, "init");
	*ctx = NULL;
	plugin_log_acquire(logger);
	pthread_mutex_lock(&plugin_lock);
	int err = plugin_ctx_create(
		comm_id, config ? config->trafficClass : NCCL_NET_TRAFFIC_CLASS_UNDEF, &c);
	pthread_mutex_unlock(&plugin_lock);
	if (err) {
		/* Translate (and log) while NCCL's logger is still attached. NCCL calls
		 * finalize(NULL) next, which has nothing left to release. */
		ncclResult_t res = plugin_result(err, "init");
		plugin_log_release();
		return res;
	}
	*ctx = c;
	return ncclSuccess;
}

ncclResult_t plugin_finalize(void *ctx)
{
	/* NCCL finalizes the ctx of a failed init too, which is NULL. */
	if (!ctx)
		return ncclSuccess;
	pthread_mutex_lock(&plugin_lock);
	plugin_ctx_destroy(ctx);
	pthread_mutex_unlock(&plugin_lock);
	plugin_log_release();
	return ncclSuccess;
}

ncclResult_t plugin_init_global(ncclDebugLogger_t logger, ncclProfilerCallback_t prof)
{
	(void)prof;
	pthread_mutex_lock(&plugin_lock);
	if (plugin_default) {
		pthread_mutex_unlock(&plugin_lock);
		/* Repeated old-style init: only remember a newer logger. */
		pthread_mutex_lock(&plugin_log_lock);
		plugin_log_update(logger);
		pthread_mutex_unlock(&plugin_log_lock);
		return ncclSuccess;
	}
	/* The default ctx keeps one log reference until unload; take it before creating so
	 * settings warnings reach NCCL. */
	plugin_log_acquire(logger);
	int err = plugin_ctx_create(0, NCCL_NET_TRAFFIC_CLASS_UNDEF, &plugin_default);
	pthread_mutex_unlock(&plugin_lock);
	if (err) {
		ncclResult_t res = plugin_result(err, "init");
		plugin_log_release();
		return res;
	}
	return ncclSuccess;
}

void *plugin_global_ctx(void)
{
	pthread_mutex_lock(&plugin_lock);
	void *ctx = plugin_default;
	pthread_mutex_unlock(&plugin_lock);
	return ctx;
}

const struct ftcc_transport_ops *plugin_transport(void)
{
	return atomic_load_explicit(&plugin_ops, memory_order_acquire);
}

/* Runs at dlclose (and at exit). Pre-v11 NCCL never finalizes, and an application that
 * crashed out of a communicator may not either: drop every transport reference still held so
 * that no progress thread outlives the code it runs, and stop pointing into NCCL. */
__attribute__((destructor)) static void plugin_unload(void)
{
	pthread_mutex_lock(&plugin_lock);
	if (plugin_default) {
		plugin_ctx_destroy(plugin_default);
		plugin_default = NULL;
	}
	const struct ftcc_transport_ops *ops = atomic_load(&plugin_ops);
	for (; plugin_refs > 0; plugin_refs--)
		ops->fini();
	pthread_mutex_unlock(&plugin_lock);

	pthread_mutex_lock(&plugin_log_lock);
	plugin_log_refs = 0;
	ftcc_log_set_sink(NULL);
	atomic_store(&plugin_logger, NULL);
	pthread_mutex_unlock(&plugin_log_lock);
}
