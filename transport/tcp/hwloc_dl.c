/* SPDX-License-Identifier: BSD-3-Clause */
/* Run-time binding to libhwloc for the TCP device layer.
 *
 * Owns the dlopen handle, the entry points taken with dlsym and the process's one topology.
 * hwloc is never linked (no hwloc symbol is referenced), so the plug-in loads where it is absent.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "ftcc/tcp_dev.h"

#include <errno.h>

#ifdef FTCC_HAVE_HWLOC_H

#include "ftcc/log.h"

#include <dlfcn.h>
#include <hwloc.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The soname of the hwloc 2.x ABI whose <hwloc.h> we compile against. */
#define HW_SONAME "libhwloc.so.15"

/* libhwloc entry points, all from dlsym. Only exported functions may appear here: the inline
 * helpers of <hwloc/helper.h> call exported symbols directly and would link libhwloc. */
struct hw_fns {
	unsigned (*get_api_version)(void);
	int (*topology_init)(hwloc_topology_t *topo);
	int (*set_io_types_filter)(hwloc_topology_t topo, enum hwloc_type_filter_e filter);
	int (*topology_load)(hwloc_topology_t topo);
	void (*topology_destroy)(hwloc_topology_t topo);
	unsigned (*get_nbobjs_by_depth)(hwloc_topology_t topo, int depth);
	hwloc_obj_t (*get_obj_by_depth)(hwloc_topology_t topo, int depth, unsigned idx);
	int (*bitmap_list_snprintf)(char *buf, size_t len, hwloc_const_bitmap_t map);
	int (*bitmap_weight)(hwloc_const_bitmap_t map);
	int (*bitmap_first)(hwloc_const_bitmap_t map);
};

/* Process-wide hwloc state, guarded by lock. state: 0 not tried yet, 1 loaded, -1 failed
 * (not retried until tcp_dev_release, so a missing library costs one dlopen). */
static struct {
	pthread_mutex_t lock;
	int state;
	void *handle;
	hwloc_topology_t topo;
	struct hw_fns fn;
} hw = { .lock = PTHREAD_MUTEX_INITIALIZER };

/* Stores dlsym(@name) into the function pointer at @slot (memcpy: ISO C has no cast from an
 * object pointer to a function pointer). */
static int hw_sym(const char *name, void *slot)
{
	void *p = dlsym(hw.handle, name);

	if (!p) {
		ftcc_warn("hwloc: %s lacks %s; using sysfs", HW_SONAME, name);
		return -ENOENT;
	}
	memcpy(slot, &p, sizeof(p));
	return 0;
}

static int hw_bind_syms(void)
{
	struct hw_fns *f = &hw.fn;

	if (hw_sym("hwloc_get_api_version", &f->get_api_version) ||
	    hw_sym("hwloc_topology_init", &f->topology_init) ||
	    hw_sym("hwloc_topology_set_io_types_filter", &f->set_io_types_filter) ||
	    hw_sym("hwloc_topology_load", &f->topology_load) ||
	    hw_sym("hwloc_topology_destroy", &f->topology_destroy) ||
	    hw_sym("hwloc_get_nbobjs_by_depth", &f->get_nbobjs_by_depth) ||
	    hw_sym("hwloc_get_obj_by_depth", &f->get_obj_by_depth) ||
	    hw_sym("hwloc_bitmap_list_snprintf", &f->bitmap_list_snprintf) ||
	    hw_sym("hwloc_bitmap_weight", &f->bitmap_weight) ||
	    hw_sym("hwloc_bitmap_first", &f->bitmap_first)) {
		return -ENOENT;
	}
	/* Object structs are read directly, so the run-time ABI must match the header's. */
	if ((f->get_api_version() >> 16) != (HWLOC_API_VERSION >> 16)) {
		ftcc_warn("hwloc: run-time API %#x, built for %#x; using sysfs",
			  f->get_api_version(), (unsigned)HWLOC_API_VERSION);
		return -ENOENT;
	}
	return 0;
}

/* Loads libhwloc and the topology once. Caller holds hw.lock. 0 or -ENOSYS. */
static int hw_load_locked(void)
{
	hwloc_topology_t topo;

	if (hw.state)
		return hw.state > 0 ? 0 : -ENOSYS;
	hw.state = -1;
	/* RTLD_LOCAL: hwloc's symbols must not leak into NCCL's or the application's namespace. */
	hw.handle = dlopen(HW_SONAME, RTLD_NOW | RTLD_LOCAL);
	if (!hw.handle) {
		ftcc_info("hwloc: not loaded (%s); using sysfs", dlerror());
		return -ENOSYS;
	}
	if (hw_bind_syms())
		goto err_close;
	if (hw.fn.topology_init(&topo)) {
		ftcc_warn("hwloc: topology_init failed; using sysfs");
		goto err_close;
	}
	if (hw.fn.set_io_types_filter(topo, HWLOC_TYPE_FILTER_KEEP_IMPORTANT) ||
	    hw.fn.topology_load(topo)) {
		ftcc_warn("hwloc: topology load failed; using sysfs");
		goto err_destroy;
	}
	hw.topo = topo;
	hw.state = 1;
	ftcc_info("hwloc: topology loaded from %s", HW_SONAME);
	return 0;

err_destroy:
	hw.fn.topology_destroy(topo);
err_close:
	dlclose(hw.handle);
	hw.handle = NULL;
	memset(&hw.fn, 0, sizeof(hw.fn));
	return -ENOSYS;
}

/* The network OS device called @name, or NULL. Caller holds hw.lock with hwloc loaded. */
static hwloc_obj_t hw_find_netdev(const char *name)
{
	unsigned n = hw.fn.get_nbobjs_by_depth(hw.topo, HWLOC_TYPE_DEPTH_OS_DEVICE);

	for (unsigned i = 0; i < n; i++) {
		hwloc_obj_t o = hw.fn.get_obj_by_depth(hw.topo, HWLOC_TYPE_DEPTH_OS_DEVICE, i);

		if (o && o->attr && o->attr->osdev.type == HWLOC_OBJ_OSDEV_NETWORK && o->name &&
		    strcmp(o->name, name) == 0) {
			return o;
		}
	}
	return NULL;
}

/* The PCI device above I/O object @o, or NULL when it hangs off no PCI device. */
static hwloc_obj_t hw_pci_parent(hwloc_obj_t o)
{
	for (o = o->parent; o && !o->cpuset; o = o->parent) {
		if (o->type == HWLOC_OBJ_PCI_DEVICE)
			return o;
	}
	return NULL;
}

/* The first ancestor of @o with a cpuset: I/O objects have none. */
static hwloc_obj_t hw_non_io_ancestor(hwloc_obj_t o)
{
	while (o && !o->cpuset)
		o = o->parent;
	return o;
}

/* Whether the realpath @path has the PCI bus id of @pci as one of its components. */
static int hw_path_has_busid(const char *path, hwloc_obj_t pci)
{
	char id[32], *hit;
	const struct hwloc_pcidev_attr_s *a = &pci->attr->pcidev;

	snprintf(id, sizeof(id), "/%04x:%02x:%02x.%01x", (unsigned)a->domain, (unsigned)a->bus,
		 (unsigned)a->dev, (unsigned)a->func);
	hit = strstr(path, id);
	return hit && (hit[strlen(id)] == '/' || hit[strlen(id)] == '\0');
}

/* Reads hwloc's view of @dev into the caller's buffers. Caller holds hw.lock, hwloc loaded. */
static int hw_lookup(const struct tcp_dev *dev, char *pci, size_t pci_len, int *numa, char *cpus,
		     size_t cpus_len)
{
	char sys[128], *real;
	hwloc_obj_t os = hw_find_netdev(dev->name), pcidev, anc;
	int n;

	if (!os || !(pcidev = hw_pci_parent(os)) || !(anc = hw_non_io_ancestor(os)))
		return -ENOENT;
	snprintf(sys, sizeof(sys), "/sys/class/net/%s/device", dev->name);
	real = realpath(sys, NULL);
	if (!real || strlen(real) >= pci_len || !hw_path_has_busid(real, pcidev)) {
		ftcc_warn("hwloc: %s: PCI parent does not match %s; using sysfs", dev->name,
			  real ? real : sys);
		free(real);
		return -ENOENT;
	}
	strcpy(pci, real);
	free(real);
	/* One node: the NIC is local to it. Several (no locality known): unknown. */
	*numa = -1;
	if (anc->nodeset && hw.fn.bitmap_weight(anc->nodeset) == 1)
		*numa = hw.fn.bitmap_first(anc->nodeset);
	n = hw.fn.bitmap_list_snprintf(cpus, cpus_len, anc->cpuset);
	if (n < 0 || (size_t)n >= cpus_len)
		cpus[0] = '\0'; /* a cut list would name the wrong CPUs */
	return 0;
}

int tcp_dev_fill_topology_hwloc(struct tcp_dev *dev)
{
	char pci[sizeof(dev->pci_path)], cpus[sizeof(dev->cpulist)];
	int numa, err;

	pthread_mutex_lock(&hw.lock);
	err = hw_load_locked();
	if (!err)
		err = hw_lookup(dev, pci, sizeof(pci), &numa, cpus, sizeof(cpus));
	pthread_mutex_unlock(&hw.lock);
	if (err)
		return err;
	memcpy(dev->pci_path, pci, sizeof(pci));
	memcpy(dev->cpulist, cpus, sizeof(cpus));
	dev->numa_node = numa;
	dev->from_hwloc = 1;
	return 0;
}

int tcp_dev_hwloc_available(void)
{
	int err;

	pthread_mutex_lock(&hw.lock);
	err = hw_load_locked();
	pthread_mutex_unlock(&hw.lock);
	return err == 0;
}

void tcp_dev_release(void)
{
	pthread_mutex_lock(&hw.lock);
	if (hw.topo)
		hw.fn.topology_destroy(hw.topo);
	if (hw.handle)
		dlclose(hw.handle);
	hw.topo = NULL;
	hw.handle = NULL;
	memset(&hw.fn, 0, sizeof(hw.fn));
	hw.state = 0;
	pthread_mutex_unlock(&hw.lock);
}

#else /* !FTCC_HAVE_HWLOC_H: built without <hwloc.h>, sysfs only. */

int tcp_dev_fill_topology_hwloc(struct tcp_dev *dev)
{
	(void)dev;
	return -ENOSYS;
}

int tcp_dev_hwloc_available(void)
{
	return 0;
}

void tcp_dev_release(void)
{
}

#endif
