/* SPDX-License-Identifier: BSD-3-Clause */
/* The sender and receiver children of the chaos tests: each loads the plug-in, connects,
 * streams checked messages through the v11 table, closes when told, and reports every result
 * into its side of the shared page. Runs only in a forked child.
 */
#define _GNU_SOURCE
#include "chaos_net.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "chaos_proc.h"

#ifndef FTCC_PLUGIN_PATH
#error "FTCC_PLUGIN_PATH must name the built libnccl-net-ftcc.so"
#endif

#define CHAOS_WORDS (CHAOS_MSG_BYTES / sizeof(uint64_t))

/* One child's state; lives in the child only. */
struct chaos_child {
	struct chaos_pair *p;
	enum chaos_role role;
	struct chaos_side *me;
	const ncclNet_v11_t *net;
	void *lib, *ctx, *lcomm, *comm;
	uint64_t *buf[CHAOS_WINDOW];
	void *mh[CHAOS_WINDOW];
	int64_t deadline_ns;
};

/* The logger handed to init: one line per message on stderr (a memfd the parent reads). */
__attribute__((format(printf, 5, 6))) static void chaos_logger(ncclDebugLogLevel level,
							       unsigned long flags,
							       const char *file, int line,
							       const char *fmt, ...)
{
	static const char *const names[] = { "NONE", "VERSION", "WARN", "INFO", "ABORT", "TRACE" };
	char msg[1200];
	va_list ap;
	int n;

	(void)flags;
	n = snprintf(msg, sizeof(msg), "%d %s %s:%d ", (int)getpid(),
		     level >= 0 && level <= NCCL_LOG_TRACE ? names[level] : "?", file, line);
	va_start(ap, fmt);
	n += vsnprintf(msg + n, sizeof(msg) - (size_t)n - 1, fmt, ap);
	va_end(ap);
	if (n > (int)sizeof(msg) - 2)
		n = (int)sizeof(msg) - 2;
	msg[n++] = '\n';
	if (write(STDERR_FILENO, msg, (size_t)n) < 0)
		return;
}

static uint64_t chaos_word(long k, size_t i)
{
	return (((uint64_t)k << 32) | (uint64_t)i) * 0x9e3779b97f4a7c15ull;
}

static void chaos_fill(uint64_t *w, long k)
{
	for (size_t i = 0; i < CHAOS_WORDS; i++)
		w[i] = chaos_word(k, i);
}

static int chaos_check(const uint64_t *w, long k)
{
	for (size_t i = 0; i < CHAOS_WORDS; i++)
		if (w[i] != chaos_word(k, i))
			return -1;
	return 0;
}

/* Between polls that found nothing to do: a short nap rather than a spin, so that on a small
 * machine the plug-in's own progress threads (and the faults' tools) get the CPU. NCCL's
 * proxy spins, but it does not share two cores with a sender, a receiver and CPU hogs. */
static void chaos_nap(void)
{
	struct timespec ts = { .tv_nsec = 20000 };

	nanosleep(&ts, NULL);
}

static int chaos_late(const struct chaos_child *ch)
{
	return chaos_now_ns() > ch->deadline_ns;
}

static void chaos_why(struct chaos_child *ch, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));

static void chaos_why(struct chaos_child *ch, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(ch->me->why, sizeof(ch->me->why), fmt, ap);
	va_end(ap);
}

/* Records the first failing call; the stores before the atomic one are visible with it. */
static void chaos_record_err(struct chaos_child *ch, int call, ncclResult_t res)
{
	int64_t now = chaos_now_ns();

	if (call == CHAOS_CALL_TEST && !atomic_load(&ch->me->test_err)) {
		ch->me->t_test_err_ns = now;
		atomic_store(&ch->me->test_err, (int)res);
	}
	if (atomic_load(&ch->me->err))
		return;
	ch->me->t_err_ns = now;
	ch->me->err_call = call;
	atomic_store(&ch->me->err, (int)res);
}

static void chaos_completed(struct chaos_side *me)
{
	int64_t now = chaos_now_ns();

	if (me->t_last_ns && now - me->t_last_ns > me->max_gap_ns)
		me->max_gap_ns = now - me->t_last_ns;
	if (!me->t_first_ns)
		me->t_first_ns = now;
	me->t_last_ns = now;
	atomic_fetch_add(&me->done, 1);
}

static int chaos_load(struct chaos_child *ch, uint64_t comm_id)
{
	ncclNetCommConfig_v11_t config = { .trafficClass = NCCL_NET_TRAFFIC_CLASS_UNDEF };
	ncclResult_t res;

	ch->lib = dlopen(FTCC_PLUGIN_PATH, RTLD_NOW | RTLD_LOCAL);
	if (!ch->lib) {
		chaos_why(ch, "dlopen: %s", dlerror());
		return -1;
	}
	ch->net = dlsym(ch->lib, "ncclNetPlugin_v11");
	if (!ch->net) {
		chaos_why(ch, "dlsym ncclNetPlugin_v11: %s", dlerror());
		return -1;
	}
	res = ch->net->init(&ch->ctx, comm_id, &config, chaos_logger, NULL);
	if (res != ncclSuccess) {
		chaos_why(ch, "init: result %d", res);
		return -1;
	}
	return 0;
}

static int chaos_reg(struct chaos_child *ch)
{
	for (int i = 0; i < CHAOS_WINDOW; i++) {
		ncclResult_t res = ch->net->regMr(ch->comm, ch->buf[i], CHAOS_MSG_BYTES,
						  NCCL_PTR_HOST, &ch->mh[i]);

		if (res != ncclSuccess) {
			chaos_why(ch, "regMr: result %d", res);
			return -1;
		}
	}
	return 0;
}

static void chaos_dereg(struct chaos_child *ch)
{
	for (int i = 0; i < CHAOS_WINDOW; i++) {
		if (ch->mh[i])
			ch->net->deregMr(ch->comm, ch->mh[i]);
		ch->mh[i] = NULL;
	}
}

/* Polls connect until the send comm comes. */
static int chaos_connect(struct chaos_child *ch)
{
	struct chaos_side *peer = &ch->p->sh->side[CHAOS_RECEIVER];
	char handle[NCCL_NET_HANDLE_MAXSIZE];
	ncclNetDeviceHandle_v11_t *dev = NULL;

	while (atomic_load(&peer->stage) < CHAOS_ST_LISTENING) {
		if (chaos_late(ch)) {
			chaos_why(ch, "no handle from the receiver");
			return -1;
		}
		chaos_sleep_ms(1);
	}
	/* connect() keeps its dial token in the handle: work on a private copy. */
	memcpy(handle, ch->p->sh->handle, sizeof(handle));
	ch->me->t_setup_ns = chaos_now_ns();
	while (!ch->comm) {
		ncclResult_t res = ch->net->connect(ch->ctx, 0, handle, &ch->comm, &dev);

		if (res != ncclSuccess) {
			chaos_record_err(ch, CHAOS_CALL_CONNECT, res);
			chaos_why(ch, "connect: result %d", res);
			return -1;
		}
		if (!ch->comm && chaos_late(ch)) {
			chaos_why(ch, "connect: no send comm before the deadline");
			return -1;
		}
		if (!ch->comm)
			chaos_nap();
	}
	ch->me->t_ready_ns = chaos_now_ns();
	return 0;
}

/* Polls accept until a receive comm comes; 1 when the parent said stop first. */
static int chaos_accept(struct chaos_child *ch)
{
	ncclNetDeviceHandle_v11_t *dev = NULL;

	ch->me->t_setup_ns = chaos_now_ns();
	while (!ch->comm) {
		ncclResult_t res = ch->net->accept(ch->lcomm, &ch->comm, &dev);

		if (res != ncclSuccess) {
			chaos_record_err(ch, CHAOS_CALL_ACCEPT, res);
			chaos_why(ch, "accept: result %d", res);
			return -1;
		}
		if (ch->comm)
			break;
		if (ch->p->cfg.serve && atomic_load(&ch->p->sh->stop))
			return 1;
		if (chaos_late(ch)) {
			chaos_why(ch, "accept: no receive comm before the deadline");
			return -1;
		}
		chaos_sleep_ms(1);
	}
	ch->me->t_ready_ns = chaos_now_ns();
	return 0;
}

/* Sends until the count, stop (then drains), close_now, an error or the deadline. */
static void chaos_stream_send(struct chaos_child *ch)
{
	struct chaos_shared *sh = ch->p->sh;
	long limit = ch->p->cfg.count, next = 0, oldest = 0;
	void *req[CHAOS_WINDOW] = { 0 };

	while (!atomic_load(&sh->close_now)) {
		int failed = atomic_load(&ch->me->err) != 0;
		int stopping = failed || atomic_load(&sh->stop) || (limit && next == limit);
		int progressed = 0, done = 0, size = 0;
		ncclResult_t res;

		while (!stopping && next - oldest < CHAOS_WINDOW) {
			int slot = (int)(next % CHAOS_WINDOW);

			chaos_fill(ch->buf[slot], next);
			res = ch->net->isend(ch->comm, ch->buf[slot], CHAOS_MSG_BYTES, CHAOS_TAG,
					     ch->mh[slot], NULL, &req[slot]);
			if (res != ncclSuccess) {
				/* Keep testing what is pending: that is the failure NCCL sees. */
				chaos_record_err(ch, CHAOS_CALL_POST, res);
				failed = 1;
				break;
			}
			if (!req[slot])
				break;
			next++;
			stopping = limit && next == limit;
		}
		if (oldest == next) {
			if (stopping)
				break;
			continue;
		}
		res = ch->net->test(req[oldest % CHAOS_WINDOW], &done, &size);
		if (res != ncclSuccess) {
			chaos_record_err(ch, CHAOS_CALL_TEST, res);
			return;
		}
		if (done) {
			chaos_completed(ch->me);
			oldest++;
			progressed = 1;
		}
		if (chaos_late(ch)) {
			chaos_why(ch, "deadline: %ld sent, %ld posted", oldest, next);
			return;
		}
		if (!progressed)
			chaos_nap();
	}
	if (atomic_load(&sh->close_now) || atomic_load(&ch->me->err))
		return;
	atomic_store(&sh->sent_total, oldest);
	/* Stopped by the parent, the receiver has posted receives past the end: closing now
	 * would fail them. Let it see the total and finish first. */
	while (!limit && atomic_load(&sh->side[CHAOS_RECEIVER].stage) < CHAOS_ST_STREAMED &&
	       !atomic_load(&sh->close_now) && !chaos_late(ch))
		chaos_sleep_ms(1);
}

/* Receives until the count (or what the sender says it sent), close_now, an error or the
 * deadline, checking each message against the pattern of its position. */
static void chaos_stream_recv(struct chaos_child *ch)
{
	struct chaos_shared *sh = ch->p->sh;
	long limit = ch->p->cfg.count, next = 0, oldest = 0;
	void *req[CHAOS_WINDOW] = { 0 };

	ch->me->t_last_ns = 0;
	while (!atomic_load(&sh->close_now)) {
		long target = limit ? limit : atomic_load(&sh->sent_total);
		int done = 0, size = 0;
		ncclResult_t res;

		if (target >= 0 && oldest >= target)
			return;
		if (oldest == next && atomic_load(&ch->me->err))
			return;
		while (!atomic_load(&ch->me->err) && next - oldest < CHAOS_WINDOW &&
		       (!limit || next < limit)) {
			int slot = (int)(next % CHAOS_WINDOW);
			size_t cap = CHAOS_MSG_BYTES;
			int tag = CHAOS_TAG;
			void *data = ch->buf[slot];

			res = ch->net->irecv(ch->comm, 1, &data, &cap, &tag, &ch->mh[slot], NULL,
					     &req[slot]);
			if (res != ncclSuccess) {
				chaos_record_err(ch, CHAOS_CALL_POST, res);
				break;
			}
			if (!req[slot])
				break;
			next++;
		}
		if (oldest == next) {
			chaos_nap(); /* every receive was refused for now: retry */
			continue;
		}
		res = ch->net->test(req[oldest % CHAOS_WINDOW], &done, &size);
		if (res != ncclSuccess) {
			chaos_record_err(ch, CHAOS_CALL_TEST, res);
			return;
		}
		if (done) {
			int slot = (int)(oldest % CHAOS_WINDOW);

			if (size != (int)CHAOS_MSG_BYTES || chaos_check(ch->buf[slot], oldest)) {
				if (ch->me->first_bad < 0)
					ch->me->first_bad = oldest;
				ch->me->bad++;
			}
			/* Scribble over it so a receive that completes without data is caught. */
			memset(ch->buf[slot], 0xee, 64);
			chaos_completed(ch->me);
			oldest++;
			continue;
		}
		if (chaos_late(ch)) {
			chaos_why(ch, "deadline: %ld received, %ld posted", oldest, next);
			return;
		}
		chaos_nap();
	}
}

/* Times each close call; the comm may have requests in flight and a dead or frozen peer. */
static void chaos_close(struct chaos_child *ch)
{
	struct chaos_side *me = ch->me;
	int64_t t0;

	chaos_dereg(ch);
	t0 = chaos_now_ns();
	if (ch->comm)
		me->close_res[CHAOS_CLOSE_COMM] = ch->role == CHAOS_SENDER ?
							  ch->net->closeSend(ch->comm) :
							  ch->net->closeRecv(ch->comm);
	me->close_ns[CHAOS_CLOSE_COMM] = chaos_now_ns() - t0;
	ch->comm = NULL;
	t0 = chaos_now_ns();
	if (ch->lcomm)
		me->close_res[CHAOS_CLOSE_LISTEN] = ch->net->closeListen(ch->lcomm);
	me->close_ns[CHAOS_CLOSE_LISTEN] = chaos_now_ns() - t0;
	ch->lcomm = NULL;
	t0 = chaos_now_ns();
	if (ch->ctx)
		me->close_res[CHAOS_CLOSE_FINALIZE] = ch->net->finalize(ch->ctx);
	me->close_ns[CHAOS_CLOSE_FINALIZE] = chaos_now_ns() - t0;
	ch->ctx = NULL;
}

/* Receiver in serve mode: one connection after another until stop. */
static void chaos_serve(struct chaos_child *ch)
{
	while (chaos_accept(ch) == 0) {
		if (chaos_reg(ch))
			return;
		atomic_store(&ch->me->stage, CHAOS_ST_CONNECTED);
		chaos_stream_recv(ch);
		chaos_dereg(ch);
		ch->net->closeRecv(ch->comm);
		ch->comm = NULL;
		if (atomic_load(&ch->me->err) || ch->me->why[0])
			return;
		ch->me->served++;
	}
}

static int chaos_setup(struct chaos_child *ch)
{
	const struct chaos_cfg *cfg = &ch->p->cfg;
	uint64_t comm_id =
		ch->role == CHAOS_SENDER && cfg->send_comm_id ? cfg->send_comm_id : cfg->comm_id;
	char own[NCCL_NET_HANDLE_MAXSIZE];
	ncclResult_t res;

	for (int i = 0; i < CHAOS_WINDOW; i++) {
		ch->buf[i] = malloc(CHAOS_MSG_BYTES);
		if (!ch->buf[i]) {
			chaos_why(ch, "out of memory");
			return -1;
		}
	}
	if (chaos_load(ch, comm_id))
		return -1;
	/* Both sides listen, as NCCL ranks do, so each has a listen comm to close. */
	res = ch->net->listen(ch->ctx, 0, ch->role == CHAOS_RECEIVER ? ch->p->sh->handle : own,
			      &ch->lcomm);
	if (res != ncclSuccess) {
		chaos_why(ch, "listen: result %d", res);
		return -1;
	}
	if (ch->role == CHAOS_RECEIVER) {
		atomic_store(&ch->me->stage, CHAOS_ST_LISTENING);
		if (cfg->serve)
			return 0;
		if (chaos_accept(ch))
			return -1;
	} else if (chaos_connect(ch)) {
		return -1;
	}
	return chaos_reg(ch);
}

int chaos_child_run(struct chaos_pair *p, enum chaos_role role)
{
	struct chaos_child child = { .p = p, .role = role, .me = &p->sh->side[role] };
	struct chaos_child *ch = &child;
	struct chaos_shared *sh = p->sh;
	int rc = 0;

	ch->deadline_ns = chaos_now_ns() + (int64_t)ch->p->cfg.deadline_ms * 1000000;
	if (chaos_setup(ch)) {
		atomic_store(&ch->me->stage, CHAOS_ST_SETUP_FAILED);
		rc = 2;
	} else if (ch->p->cfg.serve && ch->role == CHAOS_RECEIVER) {
		chaos_serve(ch);
		atomic_store(&ch->me->stage, CHAOS_ST_STREAMED);
	} else {
		atomic_store(&ch->me->stage, CHAOS_ST_CONNECTED);
		if (ch->role == CHAOS_SENDER)
			chaos_stream_send(ch);
		else
			chaos_stream_recv(ch);
		atomic_store(&ch->me->stage, CHAOS_ST_STREAMED);
		while (ch->p->cfg.wait_close && !atomic_load(&sh->close_now) && !chaos_late(ch))
			chaos_sleep_ms(1);
	}
	if (ch->net) {
		chaos_close(ch);
		if (rc == 0)
			atomic_store(&ch->me->stage, CHAOS_ST_CLOSED);
	}
	return rc;
}
