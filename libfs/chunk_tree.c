// SPDX-License-Identifier: LGPL-2.1-or-later
/* The chunk map's tree side: chunk items, dev items and dev extents read
 * through the tree layer. Kept apart from volumes.c, which the tree layer
 * itself reads through, so the two stay one above the other. */
#include <errno.h>

#include <btk/tree.h>
#include <btk/volumes.h>
#include "libfs/volumes_internal.h"

int volumes_read_chunk_tree(struct fs_info *fs)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 };
	struct btrfs_key key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, fs, &fs->chunk_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.type != BTRFS_CHUNK_ITEM_KEY)
			continue;
		ret = chunk_map_add_item(fs, key.offset, data, size);
		/* (a chunk left out is as a lost one: its block group has no chunk, and
		 * a transaction can make it again -- nothing it writes goes there) */
		if (ret == -EUCLEAN && fs->tolerate_damage) {
			fs_note(fs, FS_NOTE_WARNING, "chunk item left out: %s", btk_error_msg());
			continue;
		}
		if (ret)
			break;
	}
	tree_iter_release(&it);
	if (ret < 0 && ret != -ENOMEM && fs->tolerate_damage) {
		/* the chunks read so far stay mapped; the check reports the tree's blocks */
		fs_note(fs, FS_NOTE_WARNING, "chunk tree read only in part: %s", btk_error_msg());
		fs->damage_tolerated = true;
		ret = 0;
	}
	return ret < 0 ? ret : 0;
}

int volumes_each_dev_item(struct fs_info *fs, tree_item_fn fn, void *arg)
{
	const struct btrfs_key min = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 0 };
	const struct btrfs_key max = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, (uint64_t)-1 };

	return tree_each_item_in(fs, &fs->chunk_root, &min, &max, fn, arg);
}

int volumes_each_dev_extent(struct fs_info *fs, const struct tree_root_ptr *dev_root, uint64_t devid,
			    tree_item_fn fn, void *arg)
{
	const struct btrfs_key min = { devid, BTRFS_DEV_EXTENT_KEY, 0 };
	const struct btrfs_key max = { devid, BTRFS_DEV_EXTENT_KEY, (uint64_t)-1 };

	return tree_each_item_in(fs, dev_root, &min, &max, fn, arg);
}

/* RAID0/10/5/6 place consecutive stripe_len pieces on rotating devices. */
