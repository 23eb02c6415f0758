/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Bulk leaf building: lay sorted items out over a given number of leaves
 * and write each leaf whole, for code that rewrites a tree in place (btk-image
 * restore's one-device layout refills the chunk and dev trees in the blocks
 * they already have). The item-at-a-time edits are in ctree_ops.h. */
#ifndef BTK_LEAF_BUILD_H
#define BTK_LEAF_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include <btk/key.h>

/* One item to place: its key and size bytes of data. */
struct leaf_entry {
	struct btrfs_key key;
	const void *data;
	uint32_t size;
};

/* How many of the n entries (in key order) each of nleaves leaves of
 * nodesize gets, in counts[nleaves]: every leaf at least one, spread evenly
 * by bytes when that fits, else packed from the left. 0, or -ENOSPC when
 * they do not fit (or n < nleaves), -EINVAL for a bad nodesize. */
int leaf_build_distribute(const struct leaf_entry *e, size_t n, size_t nleaves, uint32_t nodesize,
			  size_t *counts);
/* Make leaf (nodesize bytes, a level-0 header) hold exactly the n entries:
 * nritems, items and data packed at the end, the rest zeroed; other header
 * fields are kept (the checksum is the caller's). 0, -EINVAL when the keys
 * are not strictly ascending or the block is no leaf, -ENOSPC when they do
 * not fit; leaf is unchanged on error. */
int leaf_build(uint8_t *leaf, uint32_t nodesize, const struct leaf_entry *e, size_t n);

#endif
