// SPDX-License-Identifier: GPL-2.0-only
/* Holding a delta's join records (struct delta_links, check/phase_fs.h):
 * the fs-tree items add them here, snap_delta.c cancels identical gone/new
 * pairs and hands the rest to the sorters. Apart from snap_delta.c, which
 * drives the item walk, so the item checks need not call up into it. */
#include <errno.h>
#include <stdlib.h>

#include "check/phase_fs.h"

size_t delta_links_budget(uint64_t memory_limit)
{
	/* a record, and its share of the pairing table (up to four 4-byte slots) and flags */
	uint64_t n = memory_limit / 32 / 3 / (sizeof(struct link_rec) + 17);

	return n > DELTA_LINKS_MAX ? DELTA_LINKS_MAX : n < 256 ? 256 : (size_t)n;
}

int delta_links_hold(struct delta_links *d, unsigned i, const struct link_rec *r)
{
	size_t max = d->max ? d->max : DELTA_LINKS_MAX;

	if (d->n[i] == d->cap[i]) {
		size_t cap = d->cap[i] ? d->cap[i] * 2 : 256;
		struct link_rec *v;
		if (d->cap[i] >= max)
			return 1;
		if (cap > max)
			cap = max;
		if (!(v = realloc(d->v[i], cap * sizeof(*v))))
			return -ENOMEM;
		d->v[i] = v;
		d->cap[i] = cap;
	}
	d->v[i][d->n[i]++] = *r;
	return 0;
}
