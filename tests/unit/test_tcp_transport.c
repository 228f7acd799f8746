/* SPDX-License-Identifier: BSD-3-Clause */
/* Tests of the TCP transport through its ops table, both ends in this process over lo:
 * lifecycle (init/fini refcount and threads), devices, connection set-up, refusals and misuse.
 * Requests are tested in test_tcp_transport_reqs.c, messages in test_tcp_transport_msgs.c,
 * fault injection in test_tcp_transport_faults.c.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../../transport/tcp/wire.h"
#include "tcp_harness.h"

#define OPEN_MS 5000

TestSuite(tcp_transport, .timeout = 60);

Test(tcp_transport, init_fini_refcount_and_threads)
{
	int base = th_threads();
	const struct ftcc_transport_ops *ops = th_start(NULL);

	cr_expect_eq(th_threads(), base + 1, "one progress thread");
	cr_assert_eq(ops->init(), 0);
	cr_expect_eq(th_threads(), base + 1, "a second init starts nothing");
	ops->fini();
	cr_expect_eq(th_threads(), base + 1, "still referenced");
	ops->fini();
	cr_expect_eq(th_threads(), base, "thread gone after the last fini");
	ops->fini(); /* one too many: harmless */
	cr_expect_eq(th_threads(), base);
	cr_assert_eq(ops->init(), 0, "restarts after the last fini");
	cr_expect_eq(th_threads(), base + 1);

	struct th_pair p;

	cr_assert_eq(th_pair_open(&p, 1, OPEN_MS), 0, "works after a restart");
	th_pair_close(&p);
	ops->fini();
	cr_expect_eq(th_threads(), base);
}

Test(tcp_transport, devices_and_properties)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	struct ftcc_dev_props props;
	int ndev = -1;

	cr_assert_eq(ops->devices(&ndev), 0);
	cr_assert_eq(ndev, 1, "FTCC_SOCKET_IFNAME=lo gives one device");
	cr_assert_eq(ops->get_properties(0, &props), 0);
	cr_expect_str_eq(props.name, "lo");
	cr_expect_null(props.pci_path, "lo is virtual");
	cr_expect_eq(props.ptr_support, FTCC_PTR_HOST);
	cr_expect_eq(props.max_recvs, FTCC_MAX_RECVS);
	cr_expect_gt(props.max_comms, 0);
	cr_expect_gt(props.speed_mbps, 0);
	cr_expect_geq(props.max_p2p_bytes, (size_t)1 << 30);
	cr_expect_eq(ops->get_properties(-1, &props), -EINVAL);
	cr_expect_eq(ops->get_properties(ndev, &props), -EINVAL);
	th_stop();
}

Test(tcp_transport, connect_accept_describe_and_register)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	struct ftcc_req *req = NULL;
	struct th_pair p;
	char desc[128];
	void *mh = NULL;
	int buf = 0;

	cr_assert_eq(th_pair_open(&p, 0x42, OPEN_MS), 0);
	cr_expect_eq(ops->describe_peer(p.s, desc, sizeof(desc)), 0);
	cr_expect(strstr(desc, "127.0.0.1:") == desc, "send side peer: %s", desc);
	cr_expect_eq(ops->describe_peer(p.r, desc, sizeof(desc)), 0);
	cr_expect(strstr(desc, "127.0.0.1:") == desc, "receive side peer: %s", desc);
	cr_expect_eq(ops->reg_mr(p.s, &buf, sizeof(buf), FTCC_PTR_HOST, &mh), 0);
	cr_expect_not_null(mh);
	cr_expect_eq(ops->dereg_mr(p.s, mh), 0);
	cr_expect_eq(ops->reg_mr(p.r, &buf, sizeof(buf), FTCC_PTR_CUDA, &mh), -EINVAL);
	cr_expect_eq(ops->reg_mr_dmabuf(p.r, &buf, sizeof(buf), FTCC_PTR_HOST, 0, -1, &mh),
		     -EOPNOTSUPP, "stub filled by registration");
	cr_expect_eq(ops->iflush(p.r, 1, (void *[]){ &buf }, (int[]){ 4 }, NULL, &req), 0);
	cr_assert_not_null(req);
	cr_expect_eq(th_wait(ops, req, NULL, 1000), 0, "host flush completes at once");
	th_pair_close(&p);
	th_stop();
}

Test(tcp_transport, several_connections_on_one_listen)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	struct th_pair p;
	struct ftcc_conn *s2 = NULL, *r2 = NULL;
	int64_t deadline = th_now_ms() + OPEN_MS;

	cr_assert_eq(th_pair_open(&p, 7, OPEN_MS), 0);
	/* The dial token was cleared: the same handle dials anew. */
	while ((!s2 || !r2) && th_now_ms() < deadline) {
		if (!s2)
			cr_assert_eq(ops->connect(&p.ctx, 0, p.handle, &s2), 0);
		if (!r2)
			cr_assert_eq(ops->accept(p.l, &r2), 0);
	}
	cr_assert(s2 && r2, "second connection not established");
	cr_expect_neq(s2, p.s);
	cr_expect_neq(r2, p.r);
	cr_expect_eq(ops->close_conn(s2), 0);
	cr_expect_eq(ops->close_conn(r2), 0);
	th_pair_close(&p);
	th_stop();
}

Test(tcp_transport, garbage_handle_is_einval)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	struct ftcc_tctx ctx = { .comm_id = 1, .incarnation = 2 };
	uint8_t handle[FTCC_HANDLE_SIZE];
	struct ftcc_conn *c = (struct ftcc_conn *)&ctx;

	memset(handle, 0, sizeof(handle));
	cr_expect_eq(ops->connect(&ctx, 0, handle, &c), -EINVAL, "zeros");
	cr_expect_null(c);
	srand(5);
	for (int round = 0; round < 50; round++) {
		for (size_t i = 0; i < sizeof(handle); i++)
			handle[i] = (uint8_t)rand();
		cr_expect_eq(ops->connect(&ctx, 0, handle, &c), -EINVAL, "random %d", round);
		cr_expect_null(c);
	}
	struct tcp_handle h = { .addr = { .family = AF_INET, .port = 1, .ip = { 127, 0, 0, 1 } },
				.listen_id = 1,
				.comm_id = 1,
				.incarnation = 1 };

	memset(handle, 0, sizeof(handle));
	tcp_handle_encode(&h, handle);
	handle[4] = 9; /* a future protocol version */
	cr_expect_eq(ops->connect(&ctx, 0, handle, &c), -EINVAL, "foreign version");
	th_stop();
}

Test(tcp_transport, handle_of_another_communicator_is_einval)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	struct ftcc_tctx mine = { .comm_id = 0xaaaa, .incarnation = 3 };
	struct ftcc_tctx other = { .comm_id = 0xbbbb, .incarnation = 4 };
	uint8_t handle[FTCC_HANDLE_SIZE];
	struct ftcc_listen *l = NULL;
	struct ftcc_conn *c = NULL, *a = NULL;

	cr_assert_eq(ops->listen(&mine, 0, handle, &l), 0);
	cr_expect_eq(ops->connect(&other, 0, handle, &c), -EINVAL);
	cr_expect_null(c);
	cr_expect_eq(ops->accept(l, &a), 0);
	cr_expect_null(a, "nothing to accept");
	cr_expect_eq(ops->connect(&mine, 5, handle, &c), -EINVAL, "bad device");
	cr_expect_eq(ops->close_listen(l), 0);
	th_stop();
}

/* Polls connect on @handle until it fails or establishes; returns the error. */
static int dial_until_error(const struct ftcc_transport_ops *ops, struct ftcc_tctx *ctx,
			    uint8_t *handle, int timeout_ms)
{
	int64_t deadline = th_now_ms() + timeout_ms;
	struct ftcc_conn *c = NULL;
	int rc = 0;

	while (rc == 0 && !c && th_now_ms() < deadline)
		rc = ops->connect(ctx, 0, handle, &c);
	if (c)
		ops->close_conn(c);
	return c ? 0 : (rc ? rc : -ETIME);
}

Test(tcp_transport, stale_handles_are_refused)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	struct ftcc_tctx ctx = { .comm_id = 9, .incarnation = 10 };
	uint8_t handle[FTCC_HANDLE_SIZE], copy[FTCC_HANDLE_SIZE];
	struct ftcc_listen *l = NULL;
	struct tcp_handle h;

	cr_assert_eq(ops->listen(&ctx, 0, handle, &l), 0);
	cr_assert_eq(tcp_handle_decode(handle, sizeof(handle), &h), 0);
	h.incarnation++; /* the listener "restarted" */
	memset(copy, 0, sizeof(copy));
	tcp_handle_encode(&h, copy);
	cr_expect_eq(dial_until_error(ops, &ctx, copy, OPEN_MS), -ECONNREFUSED,
		     "stale incarnation");
	cr_expect_gt(th_log_count("stale incarnation"), 0);
	cr_expect_eq(ops->close_listen(l), 0);
	memcpy(copy, handle, sizeof(copy));
	cr_expect_eq(dial_until_error(ops, &ctx, copy, OPEN_MS), -ECONNREFUSED, "closed listen");
	cr_expect_gt(th_log_count("unknown listen id"), 0);
	th_stop();
}

Test(tcp_transport, misuse_is_refused)
{
	const struct ftcc_transport_ops *ops = th_start(NULL);
	struct ftcc_req *req = (struct ftcc_req *)&req;
	struct th_pair p;
	char buf[8];
	void *bufs[FTCC_MAX_RECVS + 1] = { 0 };
	size_t sizes[FTCC_MAX_RECVS + 1] = { 0 };
	int tags[FTCC_MAX_RECVS + 1] = { 0 };

	for (int i = 0; i <= FTCC_MAX_RECVS; i++) {
		bufs[i] = buf;
		sizes[i] = sizeof(buf);
	}
	cr_assert_eq(th_pair_open(&p, 3, OPEN_MS), 0);
	cr_expect_eq(ops->isend(p.r, buf, 1, 0, NULL, &req), -EINVAL, "isend on a receive side");
	cr_expect_null(req);
	cr_expect_eq(ops->irecv(p.s, 1, bufs, sizes, tags, NULL, &req), -EINVAL,
		     "irecv on a send side");
	cr_expect_null(req);
	cr_expect_eq(ops->irecv(p.r, 0, bufs, sizes, tags, NULL, &req), -EINVAL, "n = 0");
	cr_expect_eq(ops->irecv(p.r, FTCC_MAX_RECVS + 1, bufs, sizes, tags, NULL, &req), -EINVAL,
		     "n = 9");
	cr_expect_null(req);
	th_pair_close(&p);
	th_stop();
}
