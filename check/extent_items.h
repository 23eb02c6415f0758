/* SPDX-License-Identifier: GPL-2.0-only */
/* Extent items written whole from the references they must have (the
 * extent-refs repair and the extent-tree rebuild): inline references while
 * the item has room, in the kernel's order, keyed items after that, with the
 * encoding of libfs/backref.c. */
#ifndef BTK_CHECK_EXTENT_ITEMS_H
#define BTK_CHECK_EXTENT_ITEMS_H

#include <stddef.h>
#include <stdint.h>

#include "check/repair_notes.h"
#include <btk/trans.h>

/* The refs of extent bytenr (extent_fix records: type, a, b, c, count) go
 * inline after the item's head (out[0..*osize), *osize updated) or as keyed
 * items inserted now; refs is reordered. *total: the item's refs count. */
int extent_item_put_refs(struct fs_info *fs, struct trans *t, uint64_t bytenr, struct extent_fix *refs, size_t n, uint8_t *out,
			 uint32_t *osize, uint64_t *total);

struct check_ctx;

/* Read the extent notes back, one extent at a time: fn gets its type-0
 * record and its references (which fn may reorder). 0 or the first error. */
int extent_notes_each(struct check_ctx *found, struct fs_info *fs,
		      int (*fn)(void *arg, const struct extent_fix *hdr, struct extent_fix *refs, size_t n), void *arg);

#endif
