/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's pure decisions: which ports the HCA filter keeps, which GID a RoCE
 * port uses, the RC queue-pair attributes of each transition, the MR cache's page math and
 * the link speed. No verb is called here (see include/ftcc/ib.h).
 */
#include <errno.h>
#include <infiniband/verbs.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc/ib.h"

/* One filter entry "name[:port]" against @dev/@port. */
static int hca_entry_match(const char *ent, size_t len, int exact, const char *dev, int port)
{
	const char *colon = memchr(ent, ':', len);
	size_t nlen = colon ? (size_t)(colon - ent) : len;
	int want_port = -1;

	if (colon) {
		char num[16];
		size_t plen = len - nlen - 1;
		char *end;

		if (plen == 0 || plen >= sizeof(num))
			return 0;
		memcpy(num, colon + 1, plen);
		num[plen] = '\0';
		want_port = (int)strtol(num, &end, 10);
		if (*end)
			return 0;
	}
	if (nlen == 0 || strncmp(ent, dev, nlen) != 0)
		return 0;
	if (exact && dev[nlen] != '\0')
		return 0;
	return want_port < 0 || want_port == port;
}

int ib_hca_match(const char *filter, const char *dev, int port)
{
	int exclude = 0, exact = 0, any = 0, hit = 0;
	const char *p = filter;

	if (!p)
		return 1;
	while (*p == ' ')
		p++;
	if (!*p)
		return 1;
	if (*p == '^') {
		exclude = 1;
		p++;
	}
	if (*p == '=') {
		exact = 1;
		p++;
	}
	while (*p) {
		const char *end = strchr(p, ',');
		size_t len = end ? (size_t)(end - p) : strlen(p);

		while (len && *p == ' ') {
			p++;
			len--;
		}
		while (len && p[len - 1] == ' ')
			len--;
		if (len) {
			any = 1;
			hit |= hca_entry_match(p, len, exact, dev, port);
		}
		p += end ? (size_t)(end - p) + 1 : strlen(p);
		if (!end)
			break;
	}
	if (!any)
		return exclude; /* "^" excludes nothing; "=" includes nothing */
	return exclude ? !hit : hit;
}

int ib_gdr_peermem_at(const char *root)
{
	static const char *const files[] = { "/sys/kernel/mm/memory_peers/nv_mem/version",
					     "/sys/kernel/mm/memory_peers/nv_mem_nc/version",
					     "/sys/module/nvidia_peermem/version" };
	char path[512];

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		snprintf(path, sizeof(path), "%s%s", root ? root : "", files[i]);
		if (access(path, F_OK) == 0)
			return 1;
	}
	return 0;
}

int ib_gid_is_zero(const uint8_t *raw)
{
	for (int i = 0; i < 16; i++) {
		if (raw[i])
			return 0;
	}
	return 1;
}

int ib_gid_is_link_local(const uint8_t *raw)
{
	return raw[0] == 0xfe && (raw[1] & 0xc0) == 0x80;
}

int ib_gid_is_v4mapped(const uint8_t *raw)
{
	static const uint8_t prefix[12] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff };

	return memcmp(raw, prefix, sizeof(prefix)) == 0;
}

/* Preference of one entry; higher is better, 0 unusable. */
static int gid_score(const struct ib_gid_info *g)
{
	if (!g->valid || ib_gid_is_zero(g->raw))
		return 0;
	if (ib_gid_is_link_local(g->raw))
		return g->type == IB_GID_ROCE_V2 ? 1 : 0;
	if (g->type == IB_GID_ROCE_V2)
		return ib_gid_is_v4mapped(g->raw) ? 4 : 3;
	if (g->type == IB_GID_ROCE_V1)
		return 2;
	return 0;
}

int ib_gid_select(const struct ib_gid_info *tbl, int n)
{
	int best = -ENOENT, best_score = 0;

	for (int i = 0; i < n; i++) {
		int s = gid_score(&tbl[i]);

		if (s > best_score) {
			best = i;
			best_score = s;
		}
	}
	return best;
}

int ib_qp_init_attr(const struct ib_qp_params *p, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_INIT;
	a->pkey_index = 0;
	a->port_num = (uint8_t)p->port;
	a->qp_access_flags = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	return IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

int ib_qp_rtr_attr(const struct ib_qp_params *p, struct ibv_qp_attr *a)
{
	int roce = p->link_layer == IBV_LINK_LAYER_ETHERNET;

	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTR;
	a->path_mtu = (enum ibv_mtu)(p->local_mtu < p->remote_mtu ? p->local_mtu : p->remote_mtu);
	a->dest_qp_num = p->remote_qpn;
	a->rq_psn = p->remote_psn;
	a->max_dest_rd_atomic = 1;
	a->min_rnr_timer = 12; /* 0.64 ms */
	a->ah_attr.sl = (uint8_t)p->sl;
	a->ah_attr.port_num = (uint8_t)p->port;
	a->ah_attr.dlid = roce ? 0 : p->remote_lid;
	/* IB needs a GRH only to leave the subnet (the GIDs' prefixes differ). */
	if (roce || memcmp(p->local_gid, p->remote_gid, 8) != 0) {
		a->ah_attr.is_global = 1;
		memcpy(a->ah_attr.grh.dgid.raw, p->remote_gid, 16);
		a->ah_attr.grh.sgid_index = (uint8_t)p->gid_index;
		a->ah_attr.grh.hop_limit = 255;
		a->ah_attr.grh.traffic_class = (uint8_t)p->tc;
	}
	return IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
	       IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}

int ib_qp_rts_attr(const struct ib_qp_params *p, struct ibv_qp_attr *a)
{
	memset(a, 0, sizeof(*a));
	a->qp_state = IBV_QPS_RTS;
	a->sq_psn = p->local_psn;
	a->timeout = (uint8_t)p->timeout;
	a->retry_cnt = (uint8_t)p->retry_cnt;
	a->rnr_retry = 7; /* the IB code for "retry forever" */
	a->max_rd_atomic = 1;
	return IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
	       IBV_QP_MAX_QP_RD_ATOMIC;
}

void ib_mr_pages(uintptr_t addr, size_t size, size_t page, uintptr_t *start, size_t *len)
{
	uintptr_t s = addr & ~(uintptr_t)(page - 1);
	uintptr_t e = (addr + (size ? size : 1) + page - 1) & ~(uintptr_t)(page - 1);

	*start = s;
	*len = (size_t)(e - s);
}

int ib_port_speed_mbps(int width, int speed)
{
	int lanes, lane_mbps;

	switch (width) {
	case 1:
		lanes = 1;
		break;
	case 2:
		lanes = 4;
		break;
	case 4:
		lanes = 8;
		break;
	case 8:
		lanes = 12;
		break;
	case 16:
		lanes = 2;
		break;
	default:
		return 0;
	}
	switch (speed) {
	case 1:
		lane_mbps = 2500;
		break;
	case 2:
		lane_mbps = 5000;
		break;
	case 4:
	case 8:
		lane_mbps = 10000;
		break;
	case 16:
		lane_mbps = 14000;
		break;
	case 32:
		lane_mbps = 25000;
		break;
	case 64:
		lane_mbps = 50000;
		break;
	case 128:
		lane_mbps = 100000;
		break;
	case 256:
		lane_mbps = 200000;
		break;
	default:
		return 0;
	}
	return lanes * lane_mbps;
}
