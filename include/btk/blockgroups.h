/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Block group items, looked up for every chunk. */
#ifndef BTK_BLOCKGROUPS_H
#define BTK_BLOCKGROUPS_H

#include <stddef.h>
#include <stdint.h>
#include <btk/fs.h>

struct block_group {
	uint64_t start;
	uint64_t length;
	uint64_t flags;
	uint64_t used;
	uint64_t chunk_objectid; /* as the item says (256 in every valid one) */
	int missing;          /* the chunk exists but its block group item does not */
};

struct block_group_list {
	struct block_group *groups; /* sorted by start */
	size_t count;
};

/* The tree that holds block group items: the block-group tree when that
 * feature is on, else the extent tree. */
const struct tree_root_ptr *fs_block_group_tree(const struct fs_info *fs);
/* One entry per chunk, with its block group item's flags and used bytes. */
int fs_read_block_groups(struct fs_info *fs, struct block_group_list *out);
void block_group_list_free(struct block_group_list *list);

#endif
