/* SPDX-License-Identifier: BSD-3-Clause */
/* Data plane: creation (listening socket, published address), the peer table of the current
 * epoch, and the progress loop (passes over the transfers, a short spin, then poll() with the
 * abort eventfd), dp_run() and dp_abort(). Connections live in dp_conn.c, frames in dp_frame.c.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "dp_int.h"
#include "ftcc/log.h"
#include "ftcc/ports.h"
#include "ftcc/settings.h"
#include "ftcc/sys.h"
#include "ftcc/tcp_dev.h"

int64_t dp_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int dp_tag_cmp(const struct dp_tag *a, const struct dp_tag *b)
{
	if (a->epoch != b->epoch)
		return a->epoch < b->epoch ? -1 : 1;
	if (a->seq != b->seq)
		return a->seq < b->seq ? -1 : 1;
	if (a->phase != b->phase)
		return a->phase < b->phase ? -1 : 1;
	if (a->step != b->step)
		return a->step < b->step ? -1 : 1;
	return 0;
}

/* Resolves numeric @host (brackets allowed around IPv6) and @port into @ss. 0 or -EINVAL. */
static int dp_resolve(const char *host, const char *port, int flags, struct sockaddr_storage *ss,
		      socklen_t *len)
{
	char h[DP_ADDR_MAX];
	size_t hl = strlen(host);
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM, .ai_flags = flags }, *res = NULL;

	if (hl >= sizeof(h))
		return -EINVAL;
	if (hl >= 2 && host[0] == '[' && host[hl - 1] == ']') {
		memcpy(h, host + 1, hl - 2);
		h[hl - 2] = '\0';
	} else {
		memcpy(h, host, hl + 1);
	}
	if (getaddrinfo(h, port, &hints, &res) != 0 || !res)
		return -EINVAL;
	if (res->ai_addrlen > sizeof(*ss)) {
		freeaddrinfo(res);
		return -EINVAL;
	}
	memcpy(ss, res->ai_addr, res->ai_addrlen);
	*len = res->ai_addrlen;
	freeaddrinfo(res);
	return 0;
}

/* Parses a published "host:port" / "[v6]:port". 0 or -EINVAL. */
static int dp_parse_addr(const char *text, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[DP_ADDR_MAX];
	const char *colon = strrchr(text, ':');

	if (!colon || colon == text || (size_t)(colon - text) >= sizeof(host) || !colon[1])
		return -EINVAL;
	memcpy(host, text, (size_t)(colon - text));
	host[colon - text] = '\0';
	if (strchr(host, ':') && host[0] != '[')
		return -EINVAL; /* IPv6 must be bracketed */
	return dp_resolve(host, colon + 1, AI_NUMERICHOST | AI_NUMERICSERV, ss, len);
}

/* Picks the bind address: @cfg's host, else the first discovered device. */
static int dp_bind_addr(const struct dp_cfg *cfg, struct sockaddr_storage *ss, socklen_t *len)
{
	struct tcp_dev devs[TCP_DEV_MAX];
	int n;

	if (cfg->bind_host)
		return dp_resolve(cfg->bind_host, "0", AI_NUMERICSERV, ss, len);
	n = tcp_dev_discover(devs, TCP_DEV_MAX);
	if (n < 0)
		return n;
	if (n == 0)
		return -ENODEV;
	memcpy(ss, &devs[0].addr, devs[0].addr_len);
	*len = devs[0].addr_len;
	return 0;
}

/* Opens the listening socket on dp->self_sa and writes dp->addr. 0 or -errno. */
static int dp_listen(struct dp *dp)
{
	struct sockaddr_storage ss;
	socklen_t sslen = sizeof(ss);
	char host[INET6_ADDRSTRLEN + 16], port[8];
	int one = 1, rc;

	dp->lfd = ftcc_sys_socket(dp->self_sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK, 0);
	if (dp->lfd < 0)
		return -errno;
	setsockopt(dp->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	dp_sock_opts(dp->lfd); /* buffer sizes before listen(): accepted sockets inherit them */
	rc = ftcc_bind_listener(dp->lfd, (struct sockaddr *)&dp->self_sa, dp->self_salen);
	if (rc)
		return rc;
	if (ftcc_sys_listen(dp->lfd, 128) < 0 ||
	    getsockname(dp->lfd, (struct sockaddr *)&ss, &sslen) < 0)
		return -errno;
	rc = getnameinfo((struct sockaddr *)&ss, sslen, host, sizeof(host), port, sizeof(port),
			 NI_NUMERICHOST | NI_NUMERICSERV);
	if (rc != 0)
		return -EINVAL;
	if (ss.ss_family == AF_INET6)
		rc = snprintf(dp->addr, sizeof(dp->addr), "[%s]:%s", host, port);
	else
		rc = snprintf(dp->addr, sizeof(dp->addr), "%s:%s", host, port);
	return rc < 0 || (size_t)rc >= sizeof(dp->addr) ? -ENAMETOOLONG : 0;
}

/* Frames over the ib transport when FTCC_TRANSPORT picks it (as for the net plug-in), else over
 * the TCP connections themselves (dp keeps its own sockets rather than the tcp transport's:
 * fewer copies and threads). 0 or -ENODEV (ib forced and not there: warned). */
static int dp_pick_transport(struct dp *dp)
{
	int held = 0, rc = 0;
	const struct ftcc_transport_ops *t = ftcc_transport_pick(&held);

	if (!t)
		return -ENODEV;
	if (strcmp(t->name, "tcp") == 0)
		return 0;
	if (!held)
		rc = t->init();
	if (rc) {
		ftcc_warn("dp: transport %s did not start: %s", t->name, strerror(-rc));
		return rc;
	}
	dp->xt = t;
	dp->xctx.comm_id = dp->cfg.group_id;
	dp->xctx.incarnation = dp->cfg.incarnation;
	/* Whether a member's process runs is the control plane's to judge: a stream's peer may
	 * stay silent twice the communicator's failure timeout, so a process that stalls (a
	 * loaded host) is not cut off by its data link first. A link that is cut is still noticed
	 * within the timeout by the transport's repair bound and the data plane's watch. */
	dp->xctx.failure_ns = (uint64_t)dp->cut_ns * 4;
	dp->xctx.quiet_loss = 1; /* the membership decides what a loss is, and says so */
	return 0;
}

int dp_create(const struct dp_cfg *cfg, struct dp **out)
{
	struct dp *dp;
	int rc;

	if (!cfg || !out)
		return -EINVAL;
	*out = NULL;
	dp = calloc(1, sizeof(*dp));
	if (!dp)
		return -ENOMEM;
	dp->cfg = *cfg;
	dp->cfg.bind_host = NULL; /* not ours to keep */
	dp->lfd = dp->wake = -1;
	{
		int64_t f = cfg->failure_ms > 0 ? cfg->failure_ms :
						  ftcc_setting_int(FTCC_SET_FAILURE_TIMEOUT_MS);

		/* Half the failure timeout: a link judged broken, or a peer unreachable, leaves
		 * the membership the other half to act on it within the bound. */
		dp->cut_ns = (f / 2 > 20 ? f / 2 : 20) * 1000000;
		dp->nop_ns = dp->cut_ns / 2;
	}
	rc = dp_pick_transport(dp);
	if (rc)
		goto free_dp;
	rc = dp_bind_addr(cfg, &dp->self_sa, &dp->self_salen);
	if (rc) {
		ftcc_warn("dp: no address to listen on (%s): %s",
			  cfg->bind_host ? cfg->bind_host : "first interface", strerror(-rc));
		goto free_dp;
	}
	rc = dp_listen(dp);
	if (rc) {
		ftcc_warn("dp: cannot listen: %s", strerror(-rc));
		goto close_listen;
	}
	dp->wake = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (dp->wake < 0) {
		rc = -errno;
		goto close_listen;
	}
	ftcc_info("dp: member %u incarnation %llu listening on %s, frames over %s", cfg->self_id,
		  (unsigned long long)cfg->incarnation, dp->addr, dp->xt ? dp->xt->name : "tcp");
	*out = dp;
	return 0;

close_listen:
	if (dp->lfd >= 0)
		close(dp->lfd);
free_dp:
	if (dp->xt)
		dp->xt->fini();
	free(dp);
	return rc;
}

const char *dp_addr(const struct dp *dp)
{
	return dp->addr;
}

struct dp_peer_ent *dp_peer_find(struct dp *dp, uint32_t id)
{
	uint32_t lo = 0, hi = dp->npeers;

	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;

		if (dp->peers[mid].id == id)
			return &dp->peers[mid];
		if (dp->peers[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

static int peer_ent_cmp(const void *a, const void *b)
{
	const struct dp_peer_ent *x = a, *y = b;

	return x->id < y->id ? -1 : x->id > y->id;
}

/* Whether @sa is this host: a loopback address, or the bind address's. */
static int dp_sa_local(const struct dp *dp, const struct sockaddr_storage *sa)
{
	const struct sockaddr_in *a = (const struct sockaddr_in *)sa;
	const struct sockaddr_in6 *b = (const struct sockaddr_in6 *)sa;

	if (sa->ss_family != dp->self_sa.ss_family)
		return 0;
	if (sa->ss_family == AF_INET)
		return (ntohl(a->sin_addr.s_addr) >> 24) == 127 ||
		       a->sin_addr.s_addr ==
			       ((const struct sockaddr_in *)&dp->self_sa)->sin_addr.s_addr;
	return sa->ss_family == AF_INET6 &&
	       (IN6_IS_ADDR_LOOPBACK(&b->sin6_addr) ||
		!memcmp(&b->sin6_addr, &((const struct sockaddr_in6 *)&dp->self_sa)->sin6_addr,
			sizeof(b->sin6_addr)));
}

/* More members on this host (this one and its peers at a local address) than cores this
 * process may run on. */
static int dp_oversubscribed(const struct dp *dp)
{
	uint32_t local = 1;
	cpu_set_t cores;

	for (uint32_t i = 0; i < dp->npeers; i++)
		local += (uint32_t)dp_sa_local(dp, &dp->peers[i].sa);
	CPU_ZERO(&cores);
	return sched_getaffinity(0, sizeof(cores), &cores) == 0 &&
	       local > (uint32_t)CPU_COUNT(&cores);
}

int dp_set_peers(struct dp *dp, const struct dp_peer *peers, uint32_t n)
{
	struct dp_peer_ent *ents;
	uint32_t m = 0;

	if (!dp || (n > 0 && !peers))
		return -EINVAL;
	ents = calloc(n ? n : 1, sizeof(*ents));
	if (!ents)
		return -ENOMEM;
	for (uint32_t i = 0; i < n; i++) {
		if (peers[i].id == dp->cfg.self_id)
			continue;
		struct dp_peer_ent *e = &ents[m];

		if (memchr(peers[i].addr, '\0', DP_ADDR_MAX) == NULL ||
		    dp_parse_addr(peers[i].addr, &e->sa, &e->salen)) {
			ftcc_warn("dp: member %u has a malformed address", peers[i].id);
			free(ents);
			return -EINVAL;
		}
		e->id = peers[i].id;
		e->inc = peers[i].incarnation;
		m++;
	}
	qsort(ents, m, sizeof(*ents), peer_ent_cmp);
	for (uint32_t i = 1; i < m; i++) {
		if (ents[i].id == ents[i - 1].id) {
			free(ents);
			return -EINVAL;
		}
	}
	/* Keep the connections of members listed again with the same incarnation. */
	for (uint32_t i = 0; i < dp->npeers; i++) {
		struct dp_peer_ent *old = &dp->peers[i];
		struct dp_peer_ent *e = bsearch(old, ents, m, sizeof(*ents), peer_ent_cmp);

		if (e && e->inc == old->inc) {
			e->broke_idle = old->broke_idle;
			e->xfail = old->xfail;
		}
		if (!old->conn)
			continue;
		if (e && e->inc == old->inc) {
			e->conn = old->conn;
			e->down_ns = old->down_ns;
			e->want_ns = old->want_ns;
			e->rx_ns = old->rx_ns;
		} else {
			ftcc_info("dp: closing the connection to member %u incarnation %llu (%s)",
				  old->id, (unsigned long long)old->inc,
				  e ? "new incarnation" : "left the epoch");
			dp_conn_free(dp, old->conn);
		}
		old->conn = NULL;
	}
	free(dp->peers);
	dp->peers = ents;
	dp->npeers = m;
	dp->spin_yield = dp_oversubscribed(dp);
	dp_pending_adopt(dp);
	return 0;
}

/* Resolves the peers of @n transfers into dp->xpeer. 0 or -EINVAL. */
static int dp_map_xfers(struct dp *dp, struct dp_xfer *x, int n)
{
	if (n > dp->xpeer_cap) {
		int cap = n < 16 ? 16 : n;
		uint32_t *p = realloc(dp->xpeer, (size_t)cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		dp->xpeer = p;
		dp->xpeer_cap = cap;
	}
	for (int i = 0; i < n; i++) {
		struct dp_peer_ent *pe = dp_peer_find(dp, x[i].peer);

		if (!pe || (x[i].dir != DP_SEND && x[i].dir != DP_RECV && x[i].dir != DP_PEEK) ||
		    (x[i].len > 0 && !x[i].buf && x[i].dir == DP_SEND))
			return -EINVAL;
		dp->xpeer[i] = (uint32_t)(pe - dp->peers);
	}
	return 0;
}

/* Marks what each peer of the call still has to move. Returns how many transfers are open. */
static int dp_mark_wants(struct dp *dp, struct dp_call *call)
{
	int open = 0;

	for (int i = 0; i < call->n; i++) {
		struct dp_peer_ent *pe = &dp->peers[dp->xpeer[i]];

		pe->want_tx = pe->want_rx = 0;
	}
	for (int i = 0; i < call->n; i++) {
		struct dp_peer_ent *pe = &dp->peers[dp->xpeer[i]];

		if (call->x[i].done)
			continue;
		open++;
		if (call->x[i].dir == DP_SEND)
			pe->want_tx = 1;
		else
			pe->want_rx = 1;
	}
	return open;
}

/* Writes the tails of peers this call does not visit (a connection broken meanwhile is closed;
 * the call that next needs the peer reconnects). */
static void dp_flush_tails(struct dp *dp)
{
	for (uint32_t i = 0; i < dp->npeers && dp->ntails; i++) {
		struct dp_peer_ent *pe = &dp->peers[i];

		if (pe->stamp == dp->pass || !pe->conn || !pe->conn->tail ||
		    pe->conn->state != DPC_READY)
			continue;
		if (dp_tail_flush(dp, pe->conn) < 0)
			dp_conn_broken_idle(dp, pe,
					    "writing the rest of an abandoned frame failed");
	}
}

/* Whether the call still has a transfer with peer @pidx that is not done. */
static int dp_peer_open(const struct dp *dp, const struct dp_call *call, uint32_t pidx)
{
	for (int i = 0; i < call->n; i++)
		if (dp->xpeer[i] == pidx && !call->x[i].done)
			return 1;
	return 0;
}

/* One non-blocking pass: accepts, set-ups and I/O of every peer the call has open transfers
 * with. Returns how many transfers remain open, or an error. */
static int dp_pass(struct dp *dp, struct dp_call *call)
{
	int rc;

	if (call->accept_due) {
		/* not while spinning: an accept() per retry would only cost */
		call->accept_due = 0;
		rc = dp_accept_pass(dp, call);
		if (rc)
			return rc;
	}
	if (dp->nxport)
		dp_xport_idle(dp);
	dp->pass++;
	if (dp_mark_wants(dp, call) == 0) {
		if (dp->ntails)
			dp_flush_tails(dp);
		return 0;
	}
	for (int i = 0; i < call->n; i++) {
		uint32_t pidx = dp->xpeer[i];
		struct dp_peer_ent *pe = &dp->peers[pidx];

		if (pe->stamp == dp->pass || (!pe->want_tx && !pe->want_rx))
			continue;
		pe->stamp = dp->pass;
		if (pe->broke_idle) {
			pe->broke_idle = pe->xfail = 0;
			*call->bad_peer = pe->id;
			return -EPIPE;
		}
		rc = dp_conn_setup(dp, pe);
		if (rc == 0)
			continue;
		if (rc > 0) {
			rc = dp_conn_io(dp, pe, pidx, call);
			if (rc == 0)
				continue;
			if (rc == -EPIPE && !dp_peer_open(dp, call, pidx)) {
				/* It closed after all this call wanted of it: this call
				 * completes, the next one that wants it hears of it. */
				dp_conn_broken_idle(dp, pe, "closed or reset");
				continue;
			}
			/* a frame of another shape is dropped, not the link; nor is one that
			 * shows a frame awaited lost (it waits for the call that wants it) */
			if (rc != -EBADE && rc != -ENOMSG)
				dp_conn_broken(dp, pe,
					       rc == -EPROTO ? "a malformed or unexpected frame" :
							       "closed or reset");
		}
		*call->bad_peer = pe->id;
		return rc;
	}
	if (dp->ntails)
		dp_flush_tails(dp);
	return dp_mark_wants(dp, call);
}

/* Adds @fd with @events to the poll set; @peek: the index of the peer it peeks at
 * (dp_peek_others), else UINT32_MAX. 0 or -ENOMEM. */
static int dp_poll_add(struct dp *dp, int *np, int fd, short events, uint32_t peek)
{
	if (*np == dp->pfd_cap) {
		int cap = dp->pfd_cap ? dp->pfd_cap * 2 : 16;
		struct pollfd *p = realloc(dp->pfd, (size_t)cap * sizeof(*p));
		uint32_t *k;

		if (!p)
			return -ENOMEM;
		dp->pfd = p;
		k = realloc(dp->pfd_peek, (size_t)cap * sizeof(*k));
		if (!k)
			return -ENOMEM;
		dp->pfd_peek = k;
		dp->pfd_cap = cap;
	}
	dp->pfd_peek[*np] = peek;
	dp->pfd[(*np)++] = (struct pollfd){ .fd = fd, .events = events };
	return 0;
}

/* Reads the next frame header from each connection poll() found readable among those of peers
 * this call has no transfers with (dp_conn_peek()). 0, or -EBADE with *@call->bad_peer (a
 * frame of another shape of one of the call's ops). */
static int dp_peek_others(struct dp *dp, struct dp_call *call, int np)
{
	for (int k = 0; k < np; k++) {
		uint32_t i = dp->pfd_peek[k];
		struct dp_peer_ent *pe;
		int rc;

		if (i == UINT32_MAX)
			continue;
		pe = &dp->peers[i];
		if (!(dp->pfd[k].revents & (POLLIN | POLLHUP | POLLERR)) &&
		    !(pe->conn && pe->conn->xs) && !dp_conn_buffered(pe->conn))
			continue; /* a stream's data never shows on its socket, nor read-ahead */
		if (!dp_conn_peekable(pe) || pe->conn->fd != dp->pfd[k].fd)
			continue;
		rc = dp_conn_peek(dp, pe, i, call);
		if (rc == -EBADE)
			return rc;
		if (rc == -ENOMSG) /* not from a peek (no receive there); never a broken link */
			continue;
		if (rc < 0) /* the next call that wants it hears of it */
			dp_conn_broken_idle(
				dp, pe, rc == -EPROTO ? "a malformed frame" : "closed or reset");
	}
	return 0;
}

/* Sleeps in poll() until something the call waits for may have happened, at most @wait_ns. */
static int dp_wait(struct dp *dp, struct dp_call *call, int64_t wait_ns)
{
	int np = 0, rc = 0, ahead = 0;
	int64_t now = dp_now_ns();

	rc |= dp_poll_add(dp, &np, dp->wake, POLLIN, UINT32_MAX);
	rc |= dp_poll_add(dp, &np, dp->lfd, POLLIN, UINT32_MAX);
	for (uint32_t i = 0; i < dp->npending; i++) {
		if (dp->pending[i]->state == DPC_ACCEPTED)
			rc |= dp_poll_add(dp, &np, dp->pending[i]->fd, POLLIN, UINT32_MAX);
	}
	dp->pass++;
	for (int i = 0; i < call->n; i++) {
		struct dp_peer_ent *pe = &dp->peers[dp->xpeer[i]];
		short ev;

		if (pe->stamp == dp->pass || !pe->conn)
			continue;
		pe->stamp = dp->pass;
		if ((pe->want_tx || pe->want_rx) && dp_conn_watch(dp, pe, now) < 0) {
			dp_conn_broken(dp, pe, "data unacknowledged");
			*call->bad_peer = pe->id;
			return -EPIPE;
		}
		if (pe->conn->state == DPC_BACKOFF && pe->conn->retry_ns - now < wait_ns)
			wait_ns = pe->conn->retry_ns - now;
		ev = dp_conn_events(dp, pe);
		if ((ev & POLLIN) && dp_conn_buffered(pe->conn))
			ahead = 1; /* bytes read ahead: the next pass takes them */
		if (ev)
			rc |= dp_poll_add(dp, &np, pe->conn->fd, ev, UINT32_MAX);
	}
	for (uint32_t i = 0; i < dp->npeers; i++) {
		struct dp_peer_ent *pe = &dp->peers[i];
		short ev = 0;
		int peek;

		if (pe->stamp == dp->pass || !pe->conn)
			continue;
		if (pe->conn->tail && pe->conn->state == DPC_READY && !pe->conn->xs)
			ev |= POLLOUT; /* a stream's room never shows on its socket */
		peek = call->n > 0 && dp_conn_peekable(pe);
		if (peek)
			ev |= POLLIN; /* a frame of another shape shows in its header */
		if (peek && dp_conn_buffered(pe->conn))
			ahead = 1; /* its next header may be read ahead already */
		if (ev)
			rc |= dp_poll_add(dp, &np, pe->conn->fd, ev, peek ? i : UINT32_MAX);
	}
	if (rc)
		return -ENOMEM;
	if (wait_ns > dp->nop_ns / 2)
		wait_ns = dp->nop_ns / 2; /* the watch above runs again by then */
	if (dp->xt && (call->n > 0 || dp->nxport) && wait_ns > DPX_POLL_NS)
		wait_ns = DPX_POLL_NS; /* streams move where poll() cannot see */
	if (wait_ns < 0 || ahead)
		wait_ns = 0;
	if (dp->xt) {
		struct timespec ts = { .tv_sec = wait_ns / 1000000000,
				       .tv_nsec = wait_ns % 1000000000 };

		rc = ppoll(dp->pfd, (nfds_t)np, &ts, NULL);
	} else {
		rc = poll(dp->pfd, (nfds_t)np, (int)((wait_ns + 999999) / 1000000));
	}
	if (rc < 0 && errno != EINTR) {
		ftcc_warn("dp: poll failed: %m");
		return -errno;
	}
	if (rc > 0 && (dp->pfd[1].revents & (POLLIN | POLLERR)))
		dp->lfd_ready = 1;
	if (rc > 0 && (dp->pfd[0].revents & POLLIN) &&
	    !atomic_load_explicit(&dp->aborted, memory_order_acquire)) {
		uint64_t v;

		if (read(dp->wake, &v, sizeof(v)) < 0 && errno != EAGAIN)
			ftcc_warn(
				"dp: eventfd read failed: %m"); /* a kick: the caller looks at kicked */
	}
	return rc > 0 || dp->xt || ahead ? dp_peek_others(dp, call, np) : 0;
}

int dp_progress(struct dp *dp, struct dp_xfer *x, int n, int wait_ms, uint32_t *bad_peer)
{
	uint32_t bad_dummy;
	struct dp_call call = {
		.x = x, .n = n, .accept_due = 1, .bad_peer = bad_peer ? bad_peer : &bad_dummy
	};
	int64_t start, deadline, spin_end;
	int rc;

	if (!dp || n < 0 || (n > 0 && !x))
		return -EINVAL;
	if (atomic_load_explicit(&dp->aborted, memory_order_acquire))
		return -ECANCELED;
	if (dp->local_err)
		return dp->local_err; /* this member cannot go on (logged where it happened) */
	rc = dp_map_xfers(dp, x, n);
	if (rc)
		return rc;
	dp->gen++;
	dp->adopted = 0;
	start = dp_now_ns();
	deadline = start + (int64_t)(wait_ms > 0 ? wait_ms : 0) * 1000000;
	/* a call without transfers waits for connections only: no spin */
	spin_end = n == 0 ? start : start + (dp->xt ? DPX_SPIN_NS : DP_SPIN_NS);
	for (;;) {
		rc = dp_pass(dp, &call);
		if (rc < 0)
			return rc;
		if (call.completed)
			return call.completed;
		if (rc == 0 && (n > 0 || (!dp->ntails && !dp->cfg.either_connects)))
			return 0; /* nothing left open (a call without transfers drains the tails,
				   * and waits for connections when either side connects) */
		if (atomic_load_explicit(&dp->aborted, memory_order_acquire))
			return -ECANCELED;
		if (atomic_exchange_explicit(&dp->kicked, 0, memory_order_acq_rel))
			return 0;
		if (dp->adopted) { /* the caller may want to post transfers on it */
			dp->adopted = 0;
			return 0;
		}
		int64_t now = dp_now_ns();

		if (now >= deadline)
			return 0;
		if (now < spin_end) {
			/* the transport's threads, or a peer's, may be what moves it */
			if (dp->xt || dp->spin_yield)
				sched_yield();
			continue;
		}
		rc = dp_wait(dp, &call, deadline - now);
		if (rc)
			return rc;
		call.accept_due = 1;
		if (atomic_load_explicit(&dp->aborted, memory_order_acquire))
			return -ECANCELED;
	}
}

void dp_release(struct dp *dp, const struct dp_xfer *x, int n)
{
	if (!dp || !x)
		return;
	for (int i = 0; i < n; i++) {
		struct dp_peer_ent *pe = x[i].done ? NULL : dp_peer_find(dp, x[i].peer);
		struct dp_conn *c = pe ? pe->conn : NULL;

		if (!c || c->state != DPC_READY)
			continue;
		if (x[i].dir != DP_SEND && c->rx_mode == DPR_BODY && c->rx_buf == x[i].buf &&
		    dp_tag_cmp(&c->rx_tag, &x[i].tag) == 0) {
			c->rx_mode = DPR_DROP; /* the rest of its payload goes nowhere */
			c->rx_x = NULL;
			continue;
		}
		if (x[i].dir != DP_SEND || !c->tx_partial || c->tx_buf != x[i].buf ||
		    dp_tag_cmp(&c->tx_tag, &x[i].tag) != 0) {
			continue;
		}
		/* Half written: the rest (header and payload) is copied and goes first. */
		uint8_t hdr[DP_FRAME_HDR];
		uint64_t sent = c->tx_sent;
		size_t hrest = sent < DP_FRAME_HDR ? DP_FRAME_HDR - (size_t)sent : 0;
		size_t poff = sent > DP_FRAME_HDR ? (size_t)(sent - DP_FRAME_HDR) : 0;

		dp_hdr_encode(hdr, &c->tx_tag, c->tx_len, c->tx_shape);
		c->tx_partial = 0;
		if (c->tail || dp_tail_set(dp, c, hdr + DP_FRAME_HDR - hrest, hrest,
					   (const uint8_t *)x[i].buf + poff, c->tx_len - poff)) {
			dp_conn_broken(dp, pe, "no memory for the rest of an abandoned frame");
			continue;
		}
		if (dp_tail_flush(dp, c) < 0)
			dp_conn_broken(dp, pe, "writing the rest of an abandoned frame failed");
	}
}

int dp_run(struct dp *dp, struct dp_xfer *x, int n, int (*check)(void *arg), void *arg,
	   int check_ms, uint32_t *bad_peer)
{
	int64_t last, now;
	int rc;

	if (check_ms <= 0)
		check_ms = 10;
	last = dp_now_ns();
	for (;;) {
		int open = 0;

		for (int i = 0; i < n; i++)
			open += !x[i].done;
		if (open == 0)
			return 0;
		rc = dp_progress(dp, x, n, check_ms, bad_peer);
		if (rc < 0) {
			if (rc != -ECANCELED)
				dp_release(dp, x, n);
			return rc;
		}
		now = dp_now_ns();
		if (rc == 0 || now - last >= (int64_t)check_ms * 1000000) {
			last = now;
			rc = check ? check(arg) : 0;
			if (rc) {
				dp_release(dp, x, n);
				return rc;
			}
		}
	}
}

void dp_abort(struct dp *dp)
{
	uint64_t one = 1;

	if (!dp)
		return;
	atomic_store_explicit(&dp->aborted, 1, memory_order_release);
	if (write(dp->wake, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ftcc_warn("dp: eventfd write failed: %m");
}

void dp_kick(struct dp *dp)
{
	uint64_t one = 1;

	if (!dp)
		return;
	atomic_store_explicit(&dp->kicked, 1, memory_order_release);
	if (write(dp->wake, &one, sizeof(one)) < 0 && errno != EAGAIN)
		ftcc_warn("dp: eventfd write failed: %m");
}

void dp_destroy(struct dp *dp)
{
	if (!dp)
		return;
	if (dp->xt)
		dpx_drain(dp); /* what was sent arrives, as a socket's close delivers it */
	for (uint32_t i = 0; i < dp->npeers; i++)
		dp_conn_free(dp, dp->peers[i].conn);
	for (uint32_t i = 0; i < dp->npending; i++)
		dp_conn_free(dp, dp->pending[i]);
	if (dp->lfd >= 0)
		close(dp->lfd);
	if (dp->wake >= 0)
		close(dp->wake);
	if (dp->xt)
		dp->xt->fini();
	free(dp->peers);
	free(dp->xpeer);
	free(dp->pfd);
	free(dp->pfd_peek);
	free(dp);
}
