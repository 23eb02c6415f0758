/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The extents the extent tree records, one decoded record each, for the
 * programs that read the whole extent tree (or a block group's part of it)
 * to find tree blocks, data extents or used space. */
#ifndef BTK_EXTENT_SCAN_H
#define BTK_EXTENT_SCAN_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/fs.h>

/* One EXTENT_ITEM or METADATA_ITEM. */
struct extent_rec {
	uint64_t bytenr;
	uint64_t len;          /* a METADATA_ITEM's: the nodesize */
	uint64_t flags;        /* BTRFS_EXTENT_FLAG_*; 0 when the item is too short to say */
	bool tree_block;       /* a METADATA_ITEM, or an EXTENT_ITEM flagged TREE_BLOCK */
	bool data;             /* an EXTENT_ITEM flagged DATA (a bad one may be both) */
	int level;             /* a tree block's level; -1 when the item does not say (and for data) */
	const uint8_t *item;   /* the item, size bytes: valid during the call only */
	uint32_t size;
};

typedef int (*extent_rec_fn)(void *arg, const struct extent_rec *e);
/* Every extent item of the extent tree at extent_root whose bytenr lies in
 * [first, last], in address order. fn returns 0 to go on, nonzero to stop:
 * 0 at the end, fn's nonzero value, or -errno from reading (btk_last_error()). */
int extent_tree_each(struct fs_info *fs, const struct tree_root_ptr *extent_root, uint64_t first, uint64_t last,
		     extent_rec_fn fn, void *arg);

#endif
