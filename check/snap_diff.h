/* SPDX-License-Identifier: GPL-2.0-only */
/* The leaves by which two trees differ (doc/design.md, "Snapshots"): both
 * walked level by level from their roots, a child pointer present on both
 * sides (same block, same generation) skipped with its whole subtree. */
#ifndef BTK_CHECK_SNAP_DIFF_H
#define BTK_CHECK_SNAP_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/block.h>
#include <btk/fs.h>

/* A leaf of tree a (side 0) or of tree b (side 1) that the other lacks: 0 to go on, -errno to stop. */
typedef int (*snap_leaf_fn)(void *arg, int side, const struct tree_block *leaf);

/* The key ranges of a tree's leaves, sorted (leaves do not overlap). */
struct snap_range {
	struct btrfs_key lo, hi;   /* its first and last key */
};
struct snap_ranges {
	struct snap_range *v;
	size_t n, cap;
};
int snap_ranges_add(struct snap_ranges *r, const struct tree_block *leaf);
void snap_ranges_sort(struct snap_ranges *r);
/* The key lies in one of the leaves. */
bool snap_ranges_has(const struct snap_ranges *r, const struct btrfs_key *k);
void snap_ranges_free(struct snap_ranges *r);

/* 0, 1 when more than max_blocks private blocks would be read (given up), or
 * -errno (a block unreadable: btk_error_msg()). *blocks: private blocks read. */
int snap_diff(struct fs_info *fs, const struct tree_root_ptr *a, const struct tree_root_ptr *b, uint64_t max_blocks,
	      snap_leaf_fn fn, void *arg, uint64_t *blocks);

#endif
