// SPDX-License-Identifier: LGPL-2.1-or-later
/* Read-ahead of a node's children, sorted by device and offset (see prefetch.h). */
#include <errno.h>
#include <stdlib.h>

#include <btk/io.h>
#include "libfs/prefetch.h"
#include <btk/volumes.h>

struct pf_range {
	struct io_dev *io;
	uint64_t start, end;
};

static int range_cmp(const void *a, const void *b)
{
	const struct pf_range *x = a, *y = b;

	if (x->io != y->io)
		return (uintptr_t)x->io < (uintptr_t)y->io ? -1 : 1;
	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return 0;
}

/* Where each copy of the block at bytenr lies; appends to r, returns how many. */
static unsigned block_ranges(struct fs_info *fs, uint64_t bytenr, bool all_copies, struct pf_range *r)
{
	struct phys_copy copies[MAX_COPIES];
	uint64_t contig;
	int n = volumes_map(fs, bytenr, fs->nodesize, copies, &contig);
	int want = volumes_num_copies(fs, bytenr);
	unsigned out = 0;

	if (n <= 0 || want <= 0)
		return 0;
	if (n > want)
		n = want;   /* the union of old and new stripes: the old ones are read */
	if (!all_copies)
		n = 1;
	for (int i = 0; i < n; i++) {
		if (!copies[i].dev || !copies[i].dev->io)
			continue;
		r[out].io = copies[i].dev->io;
		r[out].start = copies[i].physical;
		r[out].end = copies[i].physical + (contig < fs->nodesize ? contig : fs->nodesize);
		out++;
	}
	return out;
}

int block_prefetch_children(struct fs_info *fs, const struct tree_block *node, const struct prefetch_filter *f)
{
	unsigned nr = block_nritems(node), end = f->end < nr ? f->end : nr, n = 0;
	struct pf_range *r;

	if (block_level(node) == 0 || f->first >= end)
		return 0;
	r = malloc((size_t)(end - f->first) * MAX_COPIES * sizeof(*r));
	if (!r)
		return -ENOMEM;
	for (unsigned slot = f->first; slot < end; slot++) {
		const uint8_t *ptr = node_key_ptr(node->data, slot);
		uint64_t bytenr = key_ptr_blockptr(ptr);

		if (f->max) {
			struct btrfs_key k;
			key_from_disk(&k, key_ptr_key_ptr(ptr));
			if (key_compare(&k, f->max) > 0)
				break;   /* keys ascend: nothing further is wanted */
		}
		if (block_is_cached(fs, bytenr) || (f->skip && f->skip(f->arg, bytenr)))
			continue;
		n += block_ranges(fs, bytenr, f->all_copies && !(f->one_copy && f->one_copy(f->arg, bytenr)), r + n);
	}
	qsort(r, n, sizeof(*r), range_cmp);
	for (unsigned i = 0; i < n;) {
		struct pf_range cur = r[i++];
		while (i < n && r[i].io == cur.io && r[i].start <= cur.end + PREFETCH_MAX_GAP) {
			if (r[i].end > cur.end)
				cur.end = r[i].end;
			i++;
		}
		io_prefetch(cur.io, cur.start, cur.end - cur.start);
	}
	free(r);
	return 0;
}
