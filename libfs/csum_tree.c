// SPDX-License-Identifier: LGPL-2.1-or-later
/* A forward cursor over the csum items of a logical range (see csum_tree.h). */
#include <errno.h>
#include <string.h>

#include <btk/csum_tree.h>

int csum_tree_open(struct csum_tree_cursor *c, struct fs_info *fs, uint64_t start, uint64_t end)
{
	return csum_tree_open_in(c, fs, &fs->csum_root, start, end);
}

int csum_tree_open_in(struct csum_tree_cursor *c, struct fs_info *fs, const struct tree_root_ptr *root,
		      uint64_t start, uint64_t end)
{
	struct btrfs_key min = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, start };
	struct btrfs_key max = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, end ? end - 1 : 0 }, k;
	struct tree_path path;
	int ret;

	memset(c, 0, sizeof(*c));
	c->fs = fs;
	c->end = end;
	c->pos = start;
	if (!root->bytenr || !fs->csum_size || !fs->sectorsize || start >= end) {
		c->done = true;
		return 0;
	}
	/* the item at or before start may cover it */
	tree_path_init(&path);
	ret = tree_search_le(fs, root, &min, &path);
	if (ret == 0) {
		tree_item_key(&path, &k);
		if (k.objectid == min.objectid && k.type == min.type)
			min.offset = k.offset;
	}
	tree_path_release(fs, &path);
	if (ret < 0)
		return ret;
	tree_iter_init(&c->it, fs, root, &min, &max);
	c->open = true;
	return 0;
}

void csum_tree_close(struct csum_tree_cursor *c)
{
	if (c->open)
		tree_iter_release(&c->it);
	c->open = false;
	c->have = false;
}

/* Load the next item: 1, 0 past the last one, or -errno. */
static int next_item(struct csum_tree_cursor *c)
{
	struct btrfs_key k;
	const uint8_t *d;
	uint32_t size;
	int ret;

	c->have = false;
	if (c->done)
		return 0;
	ret = tree_iter_next(&c->it, &k, &d, &size);
	if (ret <= 0) {
		c->done = true;
		return ret;
	}
	c->start = k.offset;
	c->stop = k.offset + (uint64_t)(size / c->fs->csum_size) * c->fs->sectorsize;
	if (c->stop < c->start) /* past the end of the address space: clamp */
		c->stop = UINT64_MAX;
	c->csums = d;
	c->have = true;
	return 1;
}

int csum_tree_next(struct csum_tree_cursor *c, uint64_t *lo, uint64_t *hi, const uint8_t **csums)
{
	for (;;) {
		uint64_t a, b;
		int ret;

		if (!c->have && (ret = next_item(c)) <= 0)
			return ret;
		a = c->start > c->pos ? c->start : c->pos;
		b = c->stop < c->end ? c->stop : c->end;
		if (a >= b) {
			c->have = false;
			continue;
		}
		/* an item starting inside a sector of the last run would misalign: skip that part */
		a += (a - c->start) % c->fs->sectorsize ? c->fs->sectorsize - (a - c->start) % c->fs->sectorsize : 0;
		if (a >= b) {
			c->have = false;
			continue;
		}
		*lo = a;
		*hi = b;
		*csums = c->csums + (a - c->start) / c->fs->sectorsize * c->fs->csum_size;
		c->pos = b;
		c->have = false;
		return 1;
	}
}

int csum_tree_get(struct csum_tree_cursor *c, uint64_t logical, const uint8_t **csum)
{
	while (!c->have || c->stop <= logical) {
		int ret = next_item(c);
		if (ret <= 0)
			return ret;
	}
	if (logical < c->start || logical >= c->end)
		return 0;
	*csum = c->csums + (logical - c->start) / c->fs->sectorsize * c->fs->csum_size;
	return 1;
}
