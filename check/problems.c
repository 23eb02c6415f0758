/* The problem table. Sorted by code; tests/unit/test_problems.c checks that
 * it is sorted, complete and free of duplicate ids. */
#include <stddef.h>

#include "check/problems.h"

static const struct problem_def table[] = {
	{ PR_SUPER_COPY_INVALID, "super-copy-invalid", SEV_ERROR, FIX_FROM_MIRROR,
	  "a superblock copy is invalid" },
	{ PR_SUPER_COPY_STALE, "super-copy-stale", SEV_WARNING, FIX_FROM_MIRROR,
	  "a superblock copy has an older generation" },
	{ PR_SUPER_COPY_DIFFERS, "super-copy-differs", SEV_ERROR, FIX_FROM_MIRROR,
	  "superblock copies of the same generation differ" },
	{ PR_SUPER_BACKUP_ROOT_BAD, "super-backup-root-bad", SEV_WARNING, FIX_NONE,
	  "a backup root points at an unreadable tree" },
	{ PR_SUPER_BYTES_USED, "super-bytes-used", SEV_ERROR, FIX_RECOMPUTE,
	  "superblock bytes_used differs from the sum of block groups" },
	{ PR_SUPER_TOTAL_BYTES, "super-total-bytes", SEV_ERROR, FIX_RECOMPUTE,
	  "superblock total_bytes differs from the sum of device sizes" },
	{ PR_TREE_BLOCK_BAD_COPY, "tree-block-bad-copy", SEV_ERROR, FIX_FROM_MIRROR,
	  "a copy of a tree block is bad while another copy is good" },
	{ PR_TREE_BLOCK_UNREADABLE, "tree-block-unreadable", SEV_ERROR, FIX_NONE,
	  "no copy of a tree block is good" },
	{ PR_TREE_BLOCK_OWNER, "tree-block-owner", SEV_ERROR, FIX_NONE,
	  "a tree block's owner does not match the tree it is in" },
	{ PR_TREE_BLOCK_DOUBLE_REF, "tree-block-double-ref", SEV_ERROR, FIX_NONE,
	  "a tree block is referenced twice within one tree" },
	{ PR_TREE_ROOT_UNREADABLE, "tree-root-unreadable", SEV_ERROR, FIX_NONE,
	  "the root block of a tree cannot be read" },
	{ PR_ITEM_MALFORMED, "item-malformed", SEV_ERROR, FIX_NONE,
	  "an item is too small or inconsistent for its type" },
	{ PR_ITEM_UNKNOWN_TYPE, "item-unknown-type", SEV_WARNING, FIX_NONE,
	  "an item has a key type this tool does not know" },
	{ PR_CHUNK_NO_DEV_EXTENT, "chunk-no-dev-extent", SEV_ERROR, FIX_NONE,
	  "a chunk stripe has no matching dev extent" },
	{ PR_DEV_EXTENT_NO_CHUNK, "dev-extent-no-chunk", SEV_ERROR, FIX_NONE,
	  "a dev extent belongs to no chunk stripe" },
	{ PR_DEV_EXTENT_MISMATCH, "dev-extent-mismatch", SEV_ERROR, FIX_NONE,
	  "a dev extent disagrees with its chunk (length or chunk offset)" },
	{ PR_DEV_EXTENT_OVERLAP, "dev-extent-overlap", SEV_ERROR, FIX_NONE,
	  "dev extents overlap on a device" },
	{ PR_DEV_EXTENT_BEYOND_DEVICE, "dev-extent-beyond-device", SEV_ERROR, FIX_NONE,
	  "a dev extent lies beyond the end of its device" },
	{ PR_DEV_BYTES_USED, "dev-bytes-used", SEV_ERROR, FIX_RECOMPUTE,
	  "a device's bytes_used differs from the sum of its dev extents" },
	{ PR_SYS_CHUNK_NOT_IN_TREE, "sys-chunk-not-in-tree", SEV_ERROR, FIX_NONE,
	  "a chunk of the system chunk array is missing from the chunk tree" },
	{ PR_SYS_CHUNK_MISSING, "sys-chunk-missing", SEV_ERROR, FIX_NONE,
	  "a system chunk of the chunk tree is missing from the system chunk array" },
	{ PR_CHUNK_NO_BLOCK_GROUP, "chunk-no-block-group", SEV_ERROR, FIX_NONE,
	  "a chunk has no block group item" },
	{ PR_BLOCK_GROUP_NO_CHUNK, "block-group-no-chunk", SEV_ERROR, FIX_NONE,
	  "a block group item has no chunk" },
	{ PR_BLOCK_GROUP_FLAGS, "block-group-flags", SEV_ERROR, FIX_NONE,
	  "a block group's flags differ from its chunk's type" },
	{ PR_DEVICE_MISSING, "device-missing", SEV_ERROR, FIX_NONE,
	  "a member device of the filesystem is missing" },
	{ PR_EXTENT_OVERLAP, "extent-overlap", SEV_ERROR, FIX_REFS,
	  "two extent items overlap" },
	{ PR_EXTENT_OUTSIDE_CHUNK, "extent-outside-chunk", SEV_ERROR, FIX_REFS,
	  "an extent item lies outside every chunk" },
	{ PR_TREE_BLOCK_NOT_ALLOCATED, "tree-block-not-allocated", SEV_ERROR, FIX_REFS,
	  "a tree block in use has no extent item" },
	{ PR_TREE_BLOCK_LEAKED, "tree-block-leaked", SEV_ERROR, FIX_REFS,
	  "an extent item declares a tree block that no tree uses" },
	{ PR_BLOCK_GROUP_USED, "block-group-used", SEV_ERROR, FIX_RECOMPUTE,
	  "a block group's used bytes differ from the sum of its extents" },
	{ PR_FREE_SPACE_MISMATCH, "free-space-mismatch", SEV_ERROR, FIX_RECOMPUTE,
	  "the free-space tree differs from the space the extents leave free" },
	{ PR_FREE_SPACE_INFO_COUNT, "free-space-info-count", SEV_ERROR, FIX_RECOMPUTE,
	  "a free-space info item counts a different number of extents" },
};

_Static_assert(sizeof(table) / sizeof(table[0]) == PR__COUNT - 1, "every code has a table entry");

const struct problem_def *problem_lookup(enum problem_code code)
{
	if (code < 1 || code >= PR__COUNT)
		return NULL;
	return &table[code - 1];
}

const struct problem_def *problem_table(unsigned *count)
{
	*count = (unsigned)(sizeof(table) / sizeof(table[0]));
	return table;
}
