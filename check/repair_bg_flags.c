// SPDX-License-Identifier: GPL-2.0-only
/* The block-group-flags class: a block group item's flags are its chunk's
 * type (the kernel refuses a mount when they differ), so they are set from
 * the chunk item, which the allocator and the chunk map already follow. */
#include <inttypes.h>

#include "check/repair.h"
#include <btk/blockgroups.h>
#include <btk/format.h>
#include <btk/tree.h>
#include <btk/volumes.h>

static int set_flags(struct repair_ctx *r, const struct block_group *bg, uint64_t type)
{
	struct btrfs_key key = { bg->start, BTRFS_BLOCK_GROUP_ITEM_KEY, bg->length };
	struct tree_path path;
	uint8_t *item;
	uint32_t isize;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, trans_block_group_tree(r->t), &key, &item, &isize, &path);
	if (ret == 0 && isize < sizeof(struct btrfs_block_group_item))
		ret = fs_error(r->fs, -EUCLEAN, "block group item %" PRIu64 " is too small", bg->start);
	if (ret == 0) {
		block_group_set_flags(item, type);
		r->changes++;
		repair_say(r, "block group %" PRIu64 ": flags 0x%" PRIx64 " -> 0x%" PRIx64 " (its chunk's type)",
			   bg->start, bg->flags, type);
	}
	tree_path_release(r->fs, &path);
	return ret;
}

int repair_block_group_flags(struct repair_ctx *r)
{
	struct block_group_list bgs = { 0 };
	int ret = fs_read_block_groups(r->fs, &bgs);

	for (size_t i = 0; ret == 0 && i < bgs.count; i++) {
		const struct chunk *c = fs_chunk_lookup(r->fs, bgs.groups[i].start);

		if (!bgs.groups[i].missing && c && c->logical == bgs.groups[i].start && bgs.groups[i].flags != c->type)
			ret = set_flags(r, &bgs.groups[i], c->type);
	}
	if (bgs.groups)
		block_group_list_free(&bgs);
	return ret;
}
