/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Extent back references: their one on-disk encoding (libfs/backref.c), for
 * the write path that adds and drops references one at a time and for the
 * repairs that write whole extent items (btk-check). */
#ifndef BTK_BACKREF_H
#define BTK_BACKREF_H

#include <stdint.h>

#include <btk/format.h>
#include <btk/key.h>

struct trans;

/* One reference to an extent. */
struct backref {
	uint8_t type;           /* BTRFS_{TREE_BLOCK,SHARED_BLOCK,EXTENT_DATA,SHARED_DATA}_REF_KEY */
	uint64_t id;            /* the root (TREE_BLOCK, EXTENT_DATA) or the parent block (SHARED_*) */
	uint64_t objectid, offset; /* EXTENT_DATA: inode and file offset minus the extent offset */
};

/* The kernel's inline order: type ascending, then this sequence (the root or
 * parent, or the data ref hash) descending. qsort comparator on struct backref. */
uint64_t backref_seq(const struct backref *r);
int backref_inline_cmp(const void *a, const void *b);
/* An extent item grows no larger than this with inline references; past it
 * they are keyed items. */
uint32_t backref_max_inline(uint32_t nodesize);
/* Write r at p as an inline reference with count (data refs; tree refs have
 * none). Returns its size (extent_inline_ref_size), 0 for an unknown type. */
uint32_t backref_put_inline(uint8_t *p, const struct backref *r, uint32_t count);
/* r as a keyed item of the extent at bytenr: key (a data ref's offset is
 * key_offset, its hash or a later probe) and data (at most
 * sizeof(struct btrfs_extent_data_ref) bytes, *size of them). */
void backref_put_keyed(uint64_t bytenr, const struct backref *r, uint32_t count, uint64_t key_offset,
		       struct btrfs_key *key, uint8_t *data, uint32_t *size);
/* Insert r as a keyed item (a data ref takes the next free offset after its
 * hash when hashes collide). 0 or -errno (-EEXIST for a tree ref present). */
int backref_insert_keyed(struct trans *t, uint64_t bytenr, const struct backref *r, uint32_t count);

#endif
