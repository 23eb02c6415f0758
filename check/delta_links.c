// SPDX-License-Identifier: GPL-2.0-only
/* Holding a delta's join records (struct delta_links, check/phase_fs.h):
 * the fs-tree items add them here, snap_delta.c cancels identical gone/new
 * pairs and hands the rest to the sorters. Apart from snap_delta.c, which
 * drives the item walk, so the item checks need not call up into it. */
#include <errno.h>
#include <stdlib.h>

#include "check/phase_fs.h"

int delta_links_hold(struct delta_links *d, unsigned i, const struct link_rec *r)
{
	if (d->n[i] == d->cap[i]) {
		size_t cap = d->cap[i] ? d->cap[i] * 2 : 1024;
		struct link_rec *v;
		if (d->cap[i] >= DELTA_LINKS_MAX)
			return 1;
		if (!(v = realloc(d->v[i], cap * sizeof(*v))))
			return -ENOMEM;
		d->v[i] = v;
		d->cap[i] = cap;
	}
	d->v[i][d->n[i]++] = *r;
	return 0;
}
