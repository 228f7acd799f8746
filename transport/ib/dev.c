/* SPDX-License-Identifier: BSD-3-Clause */
/* The verbs transport's devices: discovery of active HCA ports through FTCC_IB_HCA, GID
 * choice for RoCE, speed, PCI path and NUMA node from sysfs, async events, and the
 * per-device MR cache keyed by page range.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftcc/log.h"
#include "ftcc/settings.h"
#include "ib_int.h"

/* The GID type when the library cannot say (no ibv_query_gid_ex): sysfs, as NCCL reads it. */
static int gid_type_sysfs(const char *dev, int port, int idx)
{
	char path[256], buf[32] = "";
	FILE *f;

	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/ports/%d/gid_attrs/types/%d", dev,
		 port, idx);
	f = fopen(path, "r");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f))
		buf[0] = '\0';
	fclose(f);
	if (strstr(buf, "v2"))
		return IB_GID_ROCE_V2;
	if (strstr(buf, "RoCE") || strstr(buf, "v1"))
		return IB_GID_ROCE_V1;
	return -1;
}

static int dev_choose_gid(struct ib_dev *d, int tbl_len)
{
	int forced = (int)ftcc_setting_int(FTCC_SET_IB_GID_INDEX);
	struct ib_gid_info tbl[128];
	int n = tbl_len < 128 ? tbl_len : 128;

	if (d->link_layer == IBV_LINK_LAYER_INFINIBAND && forced < 0)
		forced = 0; /* the port GID */
	memset(tbl, 0, sizeof(tbl));
	for (int i = 0; i < n; i++) {
		union ibv_gid g;

		if (ibv.query_gid_ex) {
			struct ibv_gid_entry e;

			if (ibv.query_gid_ex(d->ctx, (uint32_t)d->port, (uint32_t)i, &e, 0,
					     sizeof(e)) == 0) {
				memcpy(tbl[i].raw, e.gid.raw, 16);
				tbl[i].type = e.gid_type == IBV_GID_TYPE_ROCE_V2 ? IB_GID_ROCE_V2 :
					      e.gid_type == IBV_GID_TYPE_ROCE_V1 ? IB_GID_ROCE_V1 :
										   IB_GID_IB;
				tbl[i].valid = 1;
			}
			continue;
		}
		if (ibv.query_gid(d->ctx, (uint8_t)d->port, i, &g) == 0) {
			memcpy(tbl[i].raw, g.raw, 16);
			tbl[i].type = gid_type_sysfs(d->name, d->port, i);
			tbl[i].valid = 1;
		}
	}
	int idx = forced >= 0 ? forced : ib_gid_select(tbl, n);
	if (idx < 0 || idx >= n || !tbl[idx].valid || ib_gid_is_zero(tbl[idx].raw)) {
		ftcc_warn("ib: %s:%d has no usable GID%s; port skipped", d->name, d->port,
			  forced >= 0 ? " at FTCC_IB_GID_INDEX" : "");
		return -ENOENT;
	}
	d->gid_index = idx;
	memcpy(d->gid, tbl[idx].raw, 16);
	return 0;
}

static void dev_sysfs(struct ib_dev *d)
{
	char path[256], real[PATH_MAX];
	FILE *f;

	d->numa_node = -1;
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device", d->name);
	if (realpath(path, real) && strlen(real) < sizeof(d->pci_path))
		memcpy(d->pci_path, real, strlen(real) + 1);
	snprintf(path, sizeof(path), "/sys/class/infiniband/%s/device/numa_node", d->name);
	f = fopen(path, "r");
	if (f) {
		if (fscanf(f, "%d", &d->numa_node) != 1)
			d->numa_node = -1;
		fclose(f);
	}
}

/* Opens @dev and adds its active ports that pass the filter. */
static int dev_add_ports(struct ibv_device *dev, struct ib_dev *devs, int n, int max)
{
	const char *filter = ftcc_setting_str(FTCC_SET_IB_HCA);
	const char *name = ibv.get_device_name(dev);
	struct ibv_device_attr da;
	struct ibv_context *ctx;
	int added = 0;

	ctx = ibv.open_device(dev);
	if (!ctx) {
		ftcc_info("ib: cannot open %s: %s", name, strerror(errno));
		return 0;
	}
	if (ibv.query_device(ctx, &da)) {
		ibv.close_device(ctx);
		return 0;
	}
	for (int port = 1; port <= da.phys_port_cnt && n + added < max; port++) {
		struct ibv_port_attr pa;
		struct ib_dev *d = &devs[n + added];

		if (!ib_hca_match(filter, name, port))
			continue;
		memset(&pa, 0, sizeof(pa));
		if (ibv.query_port(ctx, (uint8_t)port, &pa) || pa.state != IBV_PORT_ACTIVE)
			continue;
		if (pa.link_layer != IBV_LINK_LAYER_INFINIBAND &&
		    pa.link_layer != IBV_LINK_LAYER_ETHERNET)
			continue;
		memset(d, 0, sizeof(*d));
		snprintf(d->name, sizeof(d->name), "%s", name);
		d->port = port;
		d->link_layer = pa.link_layer;
		d->mtu = pa.active_mtu;
		d->lid = pa.lid;
		d->speed_mbps = ib_port_speed_mbps(pa.active_width, pa.active_speed);
		d->guid = da.node_guid;
		/* Each port gets its own context: they are independent devices to NCCL. */
		d->ctx = added ? ibv.open_device(dev) : ctx;
		if (!d->ctx)
			continue;
		if (dev_choose_gid(d, pa.gid_tbl_len)) {
			if (added)
				ibv.close_device(d->ctx);
			continue;
		}
		d->pd = ibv.alloc_pd(d->ctx);
		if (!d->pd) {
			if (added)
				ibv.close_device(d->ctx);
			continue;
		}
		int fl = fcntl(d->ctx->async_fd, F_GETFL);
		if (fl >= 0)
			fcntl(d->ctx->async_fd, F_SETFL, fl | O_NONBLOCK);
		pthread_mutex_init(&d->mr_lock, NULL);
		ib_gdr_probe(d);
		dev_sysfs(d);
		ftcc_info("ib: device %d: %s port %d, %s, lid %u, GID index %d, %d Mb/s", n + added,
			  d->name, port, d->link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "IB",
			  d->lid, d->gid_index, d->speed_mbps);
		added++;
	}
	if (!added)
		ibv.close_device(ctx);
	return added;
}

int ib_dev_discover(struct ib_dev *devs, int max)
{
	struct ibv_device **list;
	int num = 0, n = 0;

	list = ibv.get_device_list(&num);
	if (!list) {
		/* ENOSYS: a kernel without RDMA; no devices, not an error. */
		ftcc_info("ib: no verbs devices (%s)", strerror(errno));
		return 0;
	}
	for (int i = 0; i < num && n < max; i++)
		n += dev_add_ports(list[i], devs, n, max);
	ibv.free_device_list(list);
	return n;
}

void ib_dev_close(struct ib_dev *d)
{
	ib_gdr_close(d);
	pthread_mutex_destroy(&d->flush_lock);
	pthread_mutex_lock(&d->mr_lock);
	for (int i = 0; i < d->nmrs; i++)
		ibv.dereg_mr(d->mrs[i].mr);
	free(d->mrs);
	d->mrs = NULL;
	d->nmrs = d->cap_mrs = 0;
	pthread_mutex_unlock(&d->mr_lock);
	pthread_mutex_destroy(&d->mr_lock);
	if (d->pd)
		ibv.dealloc_pd(d->pd);
	if (d->ctx)
		ibv.close_device(d->ctx);
	d->pd = NULL;
	d->ctx = NULL;
}

void ib_dev_poll_events(struct ib_dev *d)
{
	struct ibv_async_event ev;

	while (d->ctx && ibv.get_async_event(d->ctx, &ev) == 0) {
		enum ibv_event_type t = ev.event_type;

		ibv.ack_async_event(&ev);
		switch (t) {
		case IBV_EVENT_PORT_ERR:
			ftcc_warn("ib: %s port %d went down", d->name, d->port);
			atomic_store(&d->port_down, 1);
			break;
		case IBV_EVENT_PORT_ACTIVE:
			atomic_store(&d->port_down, 0);
			ftcc_info("ib: %s port %d is active again", d->name, d->port);
			break;
		case IBV_EVENT_DEVICE_FATAL:
			/* The line first: a caller that sees the flag sees the reason logged. */
			ftcc_warn("ib: %s: fatal device error; its connections fail", d->name);
			atomic_store(&d->fatal, 1);
			break;
		default:
			ftcc_info("ib: %s: async event %s", d->name, ibv.event_type_str(t));
			break;
		}
	}
}

/* Room for one more entry in @d's table; 0 or -ENOMEM. Caller holds d->mr_lock. */
static int mr_table_room(struct ib_dev *d)
{
	if (d->nmrs < d->cap_mrs)
		return 0;
	int cap = d->cap_mrs ? 2 * d->cap_mrs : 32;
	struct ib_mr_entry *m = realloc(d->mrs, sizeof(*m) * (size_t)cap);

	if (!m)
		return -ENOMEM;
	d->mrs = m;
	d->cap_mrs = cap;
	return 0;
}

int ib_mr_get(struct ib_dev *d, void *data, size_t size, int type, struct ibv_mr **out)
{
	const int access =
		IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start;
	size_t len;
	int rc = 0;

	ib_mr_pages((uintptr_t)data, size, page > 0 ? (size_t)page : 4096, &start, &len);
	pthread_mutex_lock(&d->mr_lock);
	for (int i = 0; i < d->nmrs; i++) {
		struct ib_mr_entry *e = &d->mrs[i];

		if (e->len && e->type == type && e->start <= start &&
		    start + len <= e->start + e->len) {
			e->refs++;
			*out = e->mr;
			goto out;
		}
	}
	if (mr_table_room(d)) {
		rc = -ENOMEM;
		goto out;
	}
	errno = 0;
	struct ibv_mr *mr = type == FTCC_PTR_CUDA ? ib_gdr_reg(d, start, len, access) :
						    ibv.reg_mr(d->pd, (void *)start, len, access);
	if (!mr) {
		rc = errno ? -errno : -EIO;
		ftcc_warn("ib: registering %zu bytes of %s memory on %s failed: %s", len,
			  type == FTCC_PTR_CUDA ? "GPU" : "host", d->name, strerror(-rc));
		goto out;
	}
	d->mrs[d->nmrs++] = (struct ib_mr_entry){
		.start = start, .len = len, .refs = 1, .type = type, .mr = mr
	};
	*out = mr;
out:
	pthread_mutex_unlock(&d->mr_lock);
	return rc;
}

void ib_mr_put(struct ib_dev *d, struct ibv_mr *mr)
{
	int i;

	pthread_mutex_lock(&d->mr_lock);
	for (i = 0; i < d->nmrs && d->mrs[i].mr != mr; i++)
		;
	if (i == d->nmrs) {
		/* Not ours (or already released): never deregister what we do not hold. */
	} else if (--d->mrs[i].refs == 0) {
		ibv.dereg_mr(mr);
		d->mrs[i] = d->mrs[--d->nmrs];
	}
	pthread_mutex_unlock(&d->mr_lock);
}

int ib_mr_track(struct ib_dev *d, struct ibv_mr *mr, int type)
{
	int rc = 0;

	pthread_mutex_lock(&d->mr_lock);
	rc = mr_table_room(d);
	if (!rc)
		d->mrs[d->nmrs++] = (struct ib_mr_entry){ .refs = 1, .type = type, .mr = mr };
	pthread_mutex_unlock(&d->mr_lock);
	return rc;
}

int ib_mr_is_gpu(struct ib_dev *d, const struct ibv_mr *mr)
{
	int gpu = -1;

	pthread_mutex_lock(&d->mr_lock);
	for (int i = 0; i < d->nmrs; i++) {
		if (d->mrs[i].mr == mr) {
			gpu = d->mrs[i].type == FTCC_PTR_CUDA;
			break;
		}
	}
	pthread_mutex_unlock(&d->mr_lock);
	return gpu;
}
