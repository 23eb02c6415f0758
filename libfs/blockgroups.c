// SPDX-License-Identifier: LGPL-2.1-or-later
/* Reading block group items by exact key, one lookup per chunk: cheaper than
 * scanning an extent tree of millions of items. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/blockgroups.h>
#include <btk/item_check.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include "libfs/volumes_internal.h"

const struct tree_root_ptr *fs_block_group_tree(const struct fs_info *fs)
{
	if ((fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE) && fs->block_group_root.bytenr)
		return &fs->block_group_root;
	return &fs->extent_root;
}

int fs_read_block_groups(struct fs_info *fs, struct block_group_list *out)
{
	const struct tree_root_ptr *root = fs_block_group_tree(fs);
	size_t n = fs->chunks->count;

	memset(out, 0, sizeof(*out));
	if (!root->bytenr)
		return fs_error(fs, -ENOENT, "no tree holds the block group items");
	out->groups = calloc(n ? n : 1, sizeof(*out->groups));
	if (!out->groups)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		const struct chunk *c = fs->chunks->chunks[i];
		struct btrfs_key key = { c->logical, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length };
		uint8_t item[sizeof(struct btrfs_block_group_item)];
		uint32_t size = sizeof(item);
		struct block_group *bg = &out->groups[out->count++];
		struct item_view v;
		int ret;

		bg->start = c->logical;
		bg->length = c->length;
		bg->flags = c->type;
		bg->chunk_objectid = BTRFS_FIRST_CHUNK_TREE_OBJECTID;
		ret = tree_lookup(fs, root, &key, item, &size);
		v = item_view_copied(item, sizeof(item), size);
		if (ret == -ENOENT || (ret == 0 && !item_view_has_fixed(&v, key.type))) {
			bg->missing = 1;
			continue;
		}
		if (ret) {
			block_group_list_free(out);
			return ret;
		}
		bg->flags = block_group_flags(item);
		bg->used = block_group_used(item);
		bg->chunk_objectid = block_group_chunk_objectid(item);
	}
	return 0;
}

void block_group_list_free(struct block_group_list *list)
{
	free(list->groups);
	list->groups = NULL;
	list->count = 0;
}
