/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's pure pieces (include/ftcc/ib.h): FTCC_IB_HCA matching, GID selection
 * from synthetic tables, the control-message codec and handle stamp, the queue-pair attribute
 * builders of each transition, the MR cache's page math and the port speed table.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifdef FTCC_HAVE_IB
#include <infiniband/verbs.h>

#include "ftcc/ib.h"

Test(ib, hca_filter)
{
	/* Unset or blank: every port. */
	cr_expect_eq(ib_hca_match(NULL, "mlx5_0", 1), 1);
	cr_expect_eq(ib_hca_match("  ", "mlx5_0", 1), 1);
	/* Prefixes, as NCCL_IB_HCA. */
	cr_expect_eq(ib_hca_match("mlx5", "mlx5_0", 1), 1);
	cr_expect_eq(ib_hca_match("mlx5_1", "mlx5_0", 1), 0);
	cr_expect_eq(ib_hca_match("mlx5_1", "mlx5_10", 1), 1); /* a prefix */
	/* Exact names. */
	cr_expect_eq(ib_hca_match("=mlx5_1", "mlx5_10", 1), 0);
	cr_expect_eq(ib_hca_match("=mlx5_1", "mlx5_1", 2), 1);
	/* Ports. */
	cr_expect_eq(ib_hca_match("mlx5_0:1,mlx5_1", "mlx5_0", 1), 1);
	cr_expect_eq(ib_hca_match("mlx5_0:1,mlx5_1", "mlx5_0", 2), 0);
	cr_expect_eq(ib_hca_match("mlx5_0:1,mlx5_1", "mlx5_1", 2), 1);
	cr_expect_eq(ib_hca_match("mlx5_0:x", "mlx5_0", 1), 0, "a port that is not a number");
	cr_expect_eq(ib_hca_match("mlx5_0:", "mlx5_0", 1), 0);
	/* Exclusion, alone and with '='. */
	cr_expect_eq(ib_hca_match("^mlx5_0", "mlx5_0", 1), 0);
	cr_expect_eq(ib_hca_match("^mlx5_0", "mlx5_1", 1), 1);
	cr_expect_eq(ib_hca_match("^=mlx5_1", "mlx5_10", 1), 1);
	cr_expect_eq(ib_hca_match("^=mlx5_1", "mlx5_1", 1), 0);
	cr_expect_eq(ib_hca_match("^mlx5_0:2", "mlx5_0", 1), 1);
	/* Blanks and empty entries; lists with no names. */
	cr_expect_eq(ib_hca_match(" mlx5_1 , ,", "mlx5_1", 1), 1);
	cr_expect_eq(ib_hca_match("^", "mlx5_0", 1), 1);
	cr_expect_eq(ib_hca_match("=", "mlx5_0", 1), 0);
}

static void gid_set(struct ib_gid_info *g, const char *kind, int type)
{
	memset(g, 0, sizeof(*g));
	g->valid = 1;
	g->type = type;
	if (strcmp(kind, "zero") == 0)
		return;
	if (strcmp(kind, "ll") == 0) {
		g->raw[0] = 0xfe;
		g->raw[1] = 0x80;
		g->raw[15] = 7;
	} else if (strcmp(kind, "v4") == 0) {
		g->raw[10] = g->raw[11] = 0xff;
		g->raw[12] = 10;
		g->raw[15] = 9;
	} else { /* a global IPv6 address */
		g->raw[0] = 0x20;
		g->raw[1] = 0x01;
		g->raw[15] = 5;
	}
}

Test(ib, gid_selection)
{
	struct ib_gid_info t[6];

	/* The usual mlx5 RoCE table: link-local v1/v2, then IPv4-mapped v1/v2. */
	gid_set(&t[0], "ll", IB_GID_ROCE_V1);
	gid_set(&t[1], "ll", IB_GID_ROCE_V2);
	gid_set(&t[2], "v4", IB_GID_ROCE_V1);
	gid_set(&t[3], "v4", IB_GID_ROCE_V2);
	cr_expect_eq(ib_gid_select(t, 4), 3);
	/* A global IPv6 v2 wins over v1 and link-local, loses to IPv4-mapped v2. */
	gid_set(&t[4], "v6", IB_GID_ROCE_V2);
	cr_expect_eq(ib_gid_select(t, 5), 3);
	cr_expect_eq(ib_gid_select(t, 3), 2, "only v1 global and link-locals: the v1 global");
	t[2].valid = 0;
	cr_expect_eq(ib_gid_select(t, 3), 1, "link-local v2 is the last resort");
	gid_set(&t[0], "zero", IB_GID_ROCE_V2);
	gid_set(&t[1], "ll", IB_GID_ROCE_V1);
	cr_expect_eq(ib_gid_select(t, 3), -ENOENT, "zero and link-local v1 are never chosen");
	/* Unknown types (no sysfs in a container) are not RoCE v2. */
	gid_set(&t[0], "v4", -1);
	cr_expect_eq(ib_gid_select(t, 1), -ENOENT);
	cr_expect_eq(ib_gid_select(t, 0), -ENOENT);
	cr_expect(ib_gid_is_v4mapped(t[0].raw));
	cr_expect(!ib_gid_is_link_local(t[0].raw));
}

Test(ib, msg_round_trip)
{
	struct ib_msg m = { .type = IB_MSG_HELLO,
			    .gen = 7,
			    .addr = 0x1122334455667788ull,
			    .rkey = 0xabcdef01,
			    .done_seq = 99,
			    .status = -EPROTO };
	uint8_t buf[IB_MSG_MAX];
	struct ib_msg back;
	size_t len;

	for (int i = 0; i < IB_HANDLE_TCP; i++)
		m.back_handle[i] = (uint8_t)(i * 7);
	m.port.lid = 0x1234;
	m.port.link_layer = 2;
	m.port.mtu = 3;
	m.port.gid[0] = 0xfe;
	m.port.gid[15] = 0x42;
	m.port.nqps = IB_MAX_QPS;
	for (int q = 0; q < IB_MAX_QPS; q++) {
		m.port.qpn[q] = 0x100000u + (uint32_t)q;
		m.port.psn[q] = 0xabcdeu * (uint32_t)(q + 1) & 0xffffff;
	}
	len = ib_msg_encode(&m, buf);
	cr_assert_leq(len, IB_MSG_MAX);
	cr_assert_eq(ib_msg_decode(buf, len, &back), 0);
	cr_expect_eq(back.type, m.type);
	cr_expect_eq(back.gen, m.gen);
	cr_expect_eq(back.addr, m.addr);
	cr_expect_eq(back.rkey, m.rkey);
	cr_expect_eq(back.done_seq, m.done_seq);
	cr_expect_eq(back.status, m.status);
	cr_expect_arr_eq(back.back_handle, m.back_handle, IB_HANDLE_TCP);
	cr_expect_eq(memcmp(&back.port, &m.port, sizeof(m.port)), 0);
	/* Truncated, padded, a bad count, a bad type, another version. */
	cr_expect_eq(ib_msg_decode(buf, len - 1, &back), -EBADMSG);
	cr_expect_eq(ib_msg_decode(buf, len + 1, &back), -EBADMSG);
	buf[121 - 1] = IB_MAX_QPS + 1;
	cr_expect_eq(ib_msg_decode(buf, len, &back), -EBADMSG);
	buf[121 - 1] = IB_MAX_QPS;
	buf[6] = 99;
	cr_expect_eq(ib_msg_decode(buf, len, &back), -EBADMSG);
	buf[6] = IB_MSG_HELLO;
	buf[4] = 2;
	cr_expect_eq(ib_msg_decode(buf, len, &back), -EPROTO);
	buf[0] ^= 1;
	cr_expect_eq(ib_msg_decode(buf, len, &back), -EBADMSG);
}

Test(ib, handle_stamp)
{
	uint8_t h[128] = { 0 };

	cr_expect_eq(ib_handle_check(h), -EINVAL);
	ib_handle_stamp(h);
	cr_expect_eq(ib_handle_check(h), 0);
	for (int i = 0; i < IB_HANDLE_TCP; i++)
		cr_expect_eq(h[i], 0, "the side channel's bytes are left alone");
	h[IB_HANDLE_TCP + 8] ^= 2;
	cr_expect_eq(ib_handle_check(h), -EPROTO);
}

static struct ib_qp_params params(int link_layer)
{
	struct ib_qp_params p = { .port = 1,
				  .link_layer = link_layer,
				  .local_mtu = IBV_MTU_4096,
				  .remote_mtu = IBV_MTU_1024,
				  .remote_lid = 77,
				  .gid_index = 3,
				  .remote_qpn = 0x1234,
				  .local_psn = 0x111,
				  .remote_psn = 0x222,
				  .sl = 2,
				  .tc = 106,
				  .timeout = 16,
				  .retry_cnt = 7 };

	p.local_gid[0] = p.remote_gid[0] = 0xfe;
	p.local_gid[1] = p.remote_gid[1] = 0x80;
	p.remote_gid[15] = 1;
	return p;
}

Test(ib, qp_attributes)
{
	struct ib_qp_params p = params(IBV_LINK_LAYER_INFINIBAND);
	struct ibv_qp_attr a;
	int mask;

	mask = ib_qp_init_attr(&p, &a);
	cr_expect_eq(mask, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS);
	cr_expect_eq(a.qp_state, IBV_QPS_INIT);
	cr_expect_eq(a.port_num, 1);
	cr_expect_eq(a.qp_access_flags, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);

	mask = ib_qp_rtr_attr(&p, &a);
	cr_expect_eq(mask, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
				   IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
				   IBV_QP_MIN_RNR_TIMER);
	cr_expect_eq(a.qp_state, IBV_QPS_RTR);
	cr_expect_eq(a.path_mtu, IBV_MTU_1024, "the smaller MTU of the two");
	cr_expect_eq(a.dest_qp_num, 0x1234);
	cr_expect_eq(a.rq_psn, 0x222, "the peer's send PSN");
	cr_expect_eq(a.ah_attr.dlid, 77);
	cr_expect_eq(a.ah_attr.sl, 2);
	cr_expect_eq(a.ah_attr.is_global, 0, "same subnet prefix: no GRH on IB");
	p.remote_gid[0] = 0x20; /* another subnet */
	ib_qp_rtr_attr(&p, &a);
	cr_expect_eq(a.ah_attr.is_global, 1);
	cr_expect_eq(a.ah_attr.grh.sgid_index, 3);

	p = params(IBV_LINK_LAYER_ETHERNET);
	ib_qp_rtr_attr(&p, &a);
	cr_expect_eq(a.ah_attr.is_global, 1, "RoCE always addresses by GID");
	cr_expect_eq(a.ah_attr.dlid, 0);
	cr_expect_eq(a.ah_attr.grh.hop_limit, 255);
	cr_expect_eq(a.ah_attr.grh.traffic_class, 106);
	cr_expect_eq(memcmp(a.ah_attr.grh.dgid.raw, p.remote_gid, 16), 0);

	mask = ib_qp_rts_attr(&p, &a);
	cr_expect_eq(mask, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
				   IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC);
	cr_expect_eq(a.sq_psn, 0x111);
	cr_expect_eq(a.timeout, 16);
	cr_expect_eq(a.retry_cnt, 7);
	cr_expect_eq(a.rnr_retry, 7);
}

Test(ib, mr_pages)
{
	uintptr_t start;
	size_t len;

	ib_mr_pages(0x10000, 4096, 4096, &start, &len);
	cr_expect(start == 0x10000 && len == 4096, "aligned: %#lx %zu", start, len);
	ib_mr_pages(0x10001, 4096, 4096, &start, &len);
	cr_expect(start == 0x10000 && len == 8192, "spans two pages: %#lx %zu", start, len);
	ib_mr_pages(0x10fff, 1, 4096, &start, &len);
	cr_expect(start == 0x10000 && len == 4096, "last byte of a page: %#lx %zu", start, len);
	ib_mr_pages(0x10fff, 2, 4096, &start, &len);
	cr_expect(start == 0x10000 && len == 8192, "crosses by one: %#lx %zu", start, len);
	ib_mr_pages(0x12345, 0, 4096, &start, &len);
	cr_expect(start == 0x12000 && len == 4096, "zero bytes: %#lx %zu", start, len);
	ib_mr_pages(0x200000 - 1, 2, 65536, &start, &len);
	cr_expect(start == 0x1f0000 && len == 131072, "64 KiB pages: %#lx %zu", start, len);
}

Test(ib, port_speed)
{
	cr_expect_eq(ib_port_speed_mbps(2, 32), 100000, "4x EDR");
	cr_expect_eq(ib_port_speed_mbps(2, 64), 200000, "4x HDR");
	cr_expect_eq(ib_port_speed_mbps(2, 128), 400000, "4x NDR");
	cr_expect_eq(ib_port_speed_mbps(1, 1), 2500, "1x SDR");
	cr_expect_eq(ib_port_speed_mbps(16, 64), 100000, "2x HDR");
	cr_expect_eq(ib_port_speed_mbps(3, 32), 0, "unknown width");
	cr_expect_eq(ib_port_speed_mbps(2, 3), 0, "unknown speed");
}

/* A peer-memory client shows by any one of the files NCCL looks for. */
Test(ib, peermem_detection)
{
	static const char *const files[] = { "sys/kernel/mm/memory_peers/nv_mem/version",
					     "sys/kernel/mm/memory_peers/nv_mem_nc/version",
					     "sys/module/nvidia_peermem/version" };
	char root[] = "/tmp/ftcc-peermem-XXXXXX", cmd[256], path[256];

	cr_assert(mkdtemp(root));
	cr_expect_eq(ib_gdr_peermem_at(root), 0, "an empty tree has none");
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(cmd, sizeof(cmd), "mkdir -p $(dirname %s/%s)", root, files[i]);
		cr_assert_eq(system(cmd), 0);
		snprintf(path, sizeof(path), "%s/%s", root, files[i]);
		FILE *f = fopen(path, "w");
		cr_assert(f);
		fclose(f);
		cr_expect_eq(ib_gdr_peermem_at(root), 1, "%s", files[i]);
		unlink(path);
		cr_expect_eq(ib_gdr_peermem_at(root), 0, "%s removed", files[i]);
	}
	snprintf(cmd, sizeof(cmd), "rm -rf %s", root);
	cr_assert_eq(system(cmd), 0);
}

#endif
