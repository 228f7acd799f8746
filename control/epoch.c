/* SPDX-License-Identifier: BSD-3-Clause */
/* Epoch snapshots (struct ctl_epoch): immutable copies of a committed epoch, shared by
 * reference count between a member's cache and whoever called ctl_member_view() or
 * ctl_member_op_epoch(); and the small per-member cache of the newest ones.
 */
#define _GNU_SOURCE
#include <stdalign.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "rt.h"

/* Allocated right before each struct ctl_epoch (whose flexible array leaves no room for it). */
struct epoch_hdr {
	alignas(max_align_t) atomic_long refs;
};

static struct epoch_hdr *epoch_hdr(const struct ctl_epoch *e)
{
	return (struct epoch_hdr *)((char *)(uintptr_t)e - sizeof(struct epoch_hdr));
}

struct ctl_epoch *rt_epoch_make(const struct ctl_epoch_rec *r, uint32_t self, uint32_t stream)
{
	size_t size = sizeof(struct epoch_hdr) + sizeof(struct ctl_epoch) +
		      (size_t)r->nmembers * sizeof(struct ctl_member_rec);
	struct epoch_hdr *h = malloc(size);

	if (!h)
		return NULL;
	atomic_init(&h->refs, 1);

	struct ctl_epoch *e = (struct ctl_epoch *)(h + 1);
	e->epoch = r->epoch;
	e->stream = stream;
	e->boundary = ctl_epoch_rec_boundary(r, stream);
	e->coord = r->coord;
	e->nmembers = r->nmembers;
	e->self_index = -1;
	if (r->nmembers)
		memcpy(e->members, r->members, (size_t)r->nmembers * sizeof(e->members[0]));
	for (uint32_t i = 0; i < r->nmembers; i++) {
		if (e->members[i].id == self)
			e->self_index = (int)i;
		if (stream)
			e->members[i].start = e->members[i].xstart[stream - 1];
	}
	return e;
}

const struct ctl_epoch *rt_epoch_get(const struct ctl_epoch *e)
{
	atomic_fetch_add_explicit(&epoch_hdr(e)->refs, 1, memory_order_relaxed);
	return e;
}

void ctl_epoch_put(const struct ctl_epoch *e)
{
	if (!e)
		return;
	struct epoch_hdr *h = epoch_hdr(e);
	if (atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
		free(h);
}

const struct ctl_epoch *rt_epoch_cache_find(const struct rt_epoch_cache *c, uint64_t epoch,
					    uint32_t stream)
{
	for (unsigned i = 0; i < RT_EPOCH_CACHE; i++) {
		if (c->e[i] && c->e[i]->epoch == epoch && c->e[i]->stream == stream)
			return c->e[i];
	}
	return NULL;
}

const struct ctl_epoch *rt_epoch_cache_get(struct rt_epoch_cache *c, const struct ctl_epoch_rec *r,
					   uint32_t self, uint32_t stream)
{
	const struct ctl_epoch *e = rt_epoch_cache_find(c, r->epoch, stream);

	if (e)
		return e;
	e = rt_epoch_make(r, self, stream);
	if (!e)
		return NULL;
	ctl_epoch_put(c->e[c->next]);
	c->e[c->next] = e;
	c->next = (c->next + 1) %
		  (c->cap && c->cap <= RT_EPOCH_CACHE ? c->cap : RT_EPOCH_CACHE_PER_STREAM);
	return e;
}

void rt_epoch_cache_clear(struct rt_epoch_cache *c)
{
	for (unsigned i = 0; i < RT_EPOCH_CACHE; i++) {
		ctl_epoch_put(c->e[i]);
		c->e[i] = NULL;
	}
	c->next = 0;
}
