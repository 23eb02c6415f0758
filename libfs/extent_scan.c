// SPDX-License-Identifier: LGPL-2.1-or-later
/* Extent items decoded once for every reader of the extent tree. */
#include <btk/extent_scan.h>
#include <btk/item_check.h>
#include <btk/tree.h>

struct extent_scan {
	extent_rec_fn fn;
	void *arg;
	uint32_t nodesize;
};

static int scan_item(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	const struct extent_scan *s = arg;
	struct extent_rec e = { key->objectid, key->offset, 0, false, false, -1, data, size };
	struct item_view v = item_view_of(data, size);
	const void *info;

	if (key->type != BTRFS_EXTENT_ITEM_KEY && key->type != BTRFS_METADATA_ITEM_KEY)
		return 0;
	e.flags = extent_flags_in(&v); /* 0 when the item is too short to say */
	if (key->type == BTRFS_METADATA_ITEM_KEY) {
		e.len = s->nodesize;
		e.tree_block = true;
		e.level = (int)key->offset;
		return s->fn(s->arg, &e);
	}
	e.data = e.flags & BTRFS_EXTENT_FLAG_DATA;
	e.tree_block = e.flags & BTRFS_EXTENT_FLAG_TREE_BLOCK;
	if (e.tree_block &&
	    (info = ITEM_VIEW_STRUCT(&v, sizeof(struct btrfs_extent_item), struct btrfs_tree_block_info)))
		e.level = tree_block_info_level(info);
	return s->fn(s->arg, &e);
}

int extent_tree_each(struct fs_info *fs, const struct tree_root_ptr *extent_root, uint64_t first, uint64_t last,
		     extent_rec_fn fn, void *arg)
{
	const struct btrfs_key min = { first, 0, 0 }, max = { last, 255, (uint64_t)-1 };
	struct extent_scan s = { fn, arg, fs->nodesize };

	return tree_each_item_in(fs, extent_root, &min, &max, scan_item, &s);
}
