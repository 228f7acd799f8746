/* SPDX-License-Identifier: BSD-3-Clause */
/* A SWARM-shaped pipeline over the C API's point-to-point messages: member 0 (the first stage)
 * sends each microbatch's activations to one of the workers of the middle stage (members 1 to
 * SIZE - 2), picked round-robin among those alive; each worker transforms what it gets and
 * sends it on to member SIZE - 1 (the last stage), which checks it and confirms to member 0.
 * Workers come and go: a send to a worker that left ends with FTCC_ERR_PEER_LOST, and a
 * microbatch a lost worker took but never passed on is sent to another. Receives wait with a
 * deadline (ftcc_wait_p2p) and are cancelled when it passes (ftcc_cancel): nothing leaks, no
 * step wedges on a peer that left.
 *
 *   ftcc-swarm RANK SIZE ADDR0,ADDR1,... [--microbatches M] [--kib K] [--die-after N]
 *
 * --die-after N: worker 1 exits abruptly after taking its N-th microbatch, before passing it
 * on. Member 0 prints what happened and exits 0 once every microbatch was confirmed.
 */
#define _POSIX_C_SOURCE 200809L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc.h"

#define MAX_MEMBERS 64
#define MAX_MB 4096
#define TAG_STOP (1ull << 40) /* microbatch tags are below */
#define WAIT_MS 200

static uint32_t size, last;
static size_t nfloat;

/* Microbatch @mb's activations, and what a worker makes of them. */
static float act(uint64_t mb, size_t i)
{
	return (float)((mb * 131 + i * 7) % 1000) * 0.25f;
}

static float work(float x)
{
	return x * 2.0f + 1.0f;
}

static int alive(ftcc_comm_t *c, uint32_t id)
{
	uint32_t m[MAX_MEMBERS];
	struct ftcc_view v;

	if (ftcc_comm_view(c, &v, m, MAX_MEMBERS))
		return 0;
	for (uint32_t i = 0; i < v.nmembers && i < MAX_MEMBERS; i++)
		if (m[i] == id)
			return 1;
	return 0;
}

/* Receives one message from @src (or any) into @buf, waiting WAIT_MS at a time; between waits,
 * @stop(@arg) may end it (the receive is cancelled: the buffer is the caller's again). */
static int recv_until(ftcc_comm_t *c, void *buf, size_t len, uint32_t src,
		      struct ftcc_p2p_status *st, int (*stop)(void *), void *arg)
{
	for (;;) {
		ftcc_request_t *r;
		int rc = ftcc_irecv(c, buf, len, src, FTCC_ANY_TAG, &r);

		if (rc)
			return rc;
		rc = ftcc_wait_p2p(r, WAIT_MS, st);
		if (rc != FTCC_ERR_TIMEOUT)
			return rc;
		ftcc_cancel(r);
		rc = ftcc_wait_p2p(r, -1, st); /* cancelled, or it came meanwhile */
		if (rc != FTCC_ERR_CANCELED)
			return rc;
		if (stop && stop(arg))
			return FTCC_ERR_CANCELED;
	}
}

static int never(void *arg)
{
	(void)arg;
	return 0;
}

static int worker(ftcc_comm_t *c, uint32_t me, int die_after)
{
	float *x = malloc(nfloat * sizeof(float));
	int taken = 0;

	for (;;) {
		struct ftcc_p2p_status st;
		ftcc_request_t *s;
		int rc = recv_until(c, x, nfloat * sizeof(float), 0, &st, never, NULL);

		if (rc || st.tag == TAG_STOP)
			break;
		if (me == 1 && ++taken == die_after) {
			fprintf(stderr, "swarm: worker 1 dies holding microbatch %llu\n",
				(unsigned long long)st.tag);
			_exit(3);
		}
		for (size_t i = 0; i < nfloat; i++)
			x[i] = work(x[i]);
		rc = ftcc_isend(c, x, nfloat * sizeof(float), last, st.tag, &s);
		if (rc || (rc = ftcc_wait_p2p(s, -1, NULL)))
			fprintf(stderr, "swarm: worker %u: microbatch %llu to the last stage: %s\n",
				me, (unsigned long long)st.tag, ftcc_strerror(rc));
	}
	free(x);
	return 0;
}

static int sink(ftcc_comm_t *c)
{
	float *x = malloc(nfloat * sizeof(float));
	static uint8_t seen[MAX_MB];
	int bad = 0;

	for (;;) {
		struct ftcc_p2p_status st;
		ftcc_request_t *s;
		uint64_t mb;
		int rc =
			recv_until(c, x, nfloat * sizeof(float), FTCC_ANY_SOURCE, &st, never, NULL);

		if (rc || (st.source == 0 && st.tag == TAG_STOP))
			break;
		mb = st.tag;
		for (size_t i = 0; i < nfloat; i++)
			bad += x[i] != work(act(mb, i));
		if (mb < MAX_MB && !seen[mb]) { /* a microbatch sent twice is confirmed once */
			seen[mb] = 1;
			if (!ftcc_isend(c, &mb, sizeof(mb), 0, mb, &s))
				ftcc_wait_p2p(s, -1, NULL);
		}
	}
	free(x);
	if (bad)
		fprintf(stderr, "swarm: the last stage saw %d wrong values\n", bad);
	return bad ? 1 : 0;
}

struct producer {
	ftcc_comm_t *c;
	int n;
	uint32_t owner[MAX_MB]; /* the worker it went to last, UINT32_MAX: confirmed */
	ftcc_request_t *send[MAX_MB];
	float *buf[MAX_MB];
	uint32_t next;
	int resent;
};

/* Sends microbatch @mb to the next worker alive. */
static int dispatch(struct producer *p, uint32_t mb)
{
	for (uint32_t k = 0; k < size - 2; k++) {
		uint32_t w = 1 + (p->next++ % (size - 2));

		if (!alive(p->c, w))
			continue;
		p->owner[mb] = w;
		return ftcc_isend(p->c, p->buf[mb], nfloat * sizeof(float), w, mb, &p->send[mb]);
	}
	fprintf(stderr, "swarm: no worker left\n");
	return FTCC_ERR_LOST;
}

static int producer(ftcc_comm_t *c, int n)
{
	static struct producer p;
	int confirmed = 0, rc;
	uint64_t got;

	p.c = c;
	p.n = n;
	for (uint32_t mb = 0; mb < (uint32_t)n; mb++) {
		p.buf[mb] = malloc(nfloat * sizeof(float));
		for (size_t i = 0; i < nfloat; i++)
			p.buf[mb][i] = act(mb, i);
		if ((rc = dispatch(&p, mb)))
			return 1;
	}
	while (confirmed < n) {
		struct ftcc_p2p_status st;
		ftcc_request_t *r;

		rc = ftcc_irecv(c, &got, sizeof(got), last, FTCC_ANY_TAG, &r);
		if (rc)
			return 1;
		rc = ftcc_wait_p2p(r, WAIT_MS, &st);
		if (rc == FTCC_ERR_TIMEOUT) {
			ftcc_cancel(r);
			rc = ftcc_wait_p2p(r, -1, &st);
		}
		if (rc == 0 && got < (uint64_t)n && p.owner[got] != UINT32_MAX) {
			p.owner[got] = UINT32_MAX;
			confirmed++;
		} else if (rc && rc != FTCC_ERR_CANCELED) {
			fprintf(stderr, "swarm: confirmation: %s\n", ftcc_strerror(rc));
			return 1;
		}
		/* sends that ended, and microbatches whose worker left without passing them on */
		for (uint32_t mb = 0; mb < (uint32_t)n; mb++) {
			int done = 1;

			if (p.send[mb] &&
			    ftcc_test(p.send[mb], &done, NULL) == FTCC_ERR_PEER_LOST) {
				p.send[mb] = NULL;
				if (p.owner[mb] != UINT32_MAX && (rc = dispatch(&p, mb)) == 0)
					p.resent++;
				continue;
			}
			if (done)
				p.send[mb] = NULL;
			if (!p.send[mb] && p.owner[mb] != UINT32_MAX && !alive(c, p.owner[mb]) &&
			    dispatch(&p, mb) == 0)
				p.resent++;
		}
	}
	for (uint32_t w = 1; w <= last; w++) { /* the workers and the last stage stop */
		ftcc_request_t *s;
		uint64_t stop = 0;

		if (alive(c, w) && !ftcc_isend(c, &stop, sizeof(stop), w, TAG_STOP, &s))
			ftcc_wait_p2p(s, 10000, NULL);
	}
	printf("swarm: %d microbatches through %u workers, %d sent again after a worker was "
	       "lost; every result checked by the last stage\n",
	       n, size - 2, p.resent);
	return 0;
}

int main(int argc, char **argv)
{
	const char *addrs[MAX_MEMBERS];
	struct ftcc_config cfg;
	ftcc_comm_t *comm;
	int n = 64, die_after = 0, nmem = 0, rc;
	double kib = 64;
	uint32_t me;
	char *list;

	if (argc < 4) {
		fprintf(stderr, "usage: ftcc-swarm RANK SIZE ADDR0,ADDR1,... [options]\n");
		return 2;
	}
	for (int i = 4; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "0";

		if (!strcmp(a, "--microbatches")) {
			n = atoi(v), i++;
		} else if (!strcmp(a, "--kib")) {
			kib = atof(v), i++;
		} else if (!strcmp(a, "--die-after")) {
			die_after = atoi(v), i++;
		} else {
			fprintf(stderr, "ftcc-swarm: unknown option %s\n", a);
			return 2;
		}
	}
	list = strdup(argv[3]);
	for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok && nmem < MAX_MEMBERS;
	     tok = strtok_r(NULL, ",", &save)) {
		addrs[nmem++] = tok;
	}
	nfloat = (size_t)(kib * 1024.0 / sizeof(float));
	if (atoi(argv[2]) != nmem || nmem < 3 || n < 1 || n > MAX_MB || nfloat == 0) {
		fprintf(stderr,
			"ftcc-swarm: bad arguments (3 to %d members, 1 to %d microbatches)\n",
			MAX_MEMBERS, MAX_MB);
		return 2;
	}
	size = (uint32_t)nmem;
	last = size - 1;
	me = (uint32_t)atoi(argv[1]);
	ftcc_config_init(&cfg);
	cfg.group = "swarm";
	cfg.rank = me;
	cfg.size = size;
	cfg.addrs = addrs;
	if (ftcc_comm_create(&cfg, &comm)) {
		return 1;
	}
	rc = me == 0 ? producer(comm, n) : me == last ? sink(comm) : worker(comm, me, die_after);
	ftcc_comm_destroy(comm);
	free(list);
	return rc;
}
