/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* In-buffer btree block operations: insert, delete, resize, split and push
 * items of a leaf and key pointers of a node, entirely inside caller-owned
 * buffers of nodesize bytes. No I/O, no allocation: the copy-on-write
 * transaction code allocates blocks, fills their headers and calls these.
 *
 * Conventions shared by every function here:
 *  - nodesize must be a power of two in [4096, 65536]; otherwise -EINVAL.
 *  - Leaf functions take level-0 blocks, node functions level 1..7 blocks
 *    (and both sides of a split or push must have the same level): else -EINVAL.
 *  - The block's structure (item count, offsets and sizes) is checked on entry,
 *    so nothing is ever read or written outside the buffer: -EUCLEAN if broken.
 *    Key order is checked only where the operation puts keys next to each other;
 *    block_check_layout() is the full check.
 *  - A failing call leaves every buffer byte-for-byte unchanged.
 *  - Bytes an operation frees or creates are zeroed, so a block that started
 *    zeroed keeps its unused space zeroed (reproducible images and checksums).
 *  - Header fields other than nritems (bytenr, owner, generation, flags...) are
 *    never touched; parent keys are the caller's (a new first key of a leaf or
 *    node must be copied up, as the kernel's fixup_low_keys does).
 * Returns are 0 / -EINVAL (bad arguments: slot out of range, keys that would
 * break the order) / -ENOSPC (does not fit) / -EUCLEAN (the block was broken). */
#ifndef BTK_CTREE_OPS_H
#define BTK_CTREE_OPS_H

#include <stddef.h>
#include <stdint.h>

#include <btk/format.h>
#include <btk/key.h>

#define CTREE_HEADER_SIZE ((uint32_t)sizeof(struct btrfs_header))      /* 101 */
#define CTREE_ITEM_SIZE ((uint32_t)sizeof(struct btrfs_item))          /* 25 */
#define CTREE_KEY_PTR_SIZE ((uint32_t)sizeof(struct btrfs_key_ptr))    /* 33 */

/* nodesize is a btrfs node size (power of two, 4 KiB .. 64 KiB). */
int ctree_nodesize_valid(uint32_t nodesize);

/* ---------------------------------------------------------------- leaves */

/* Bytes after the header: item headers plus item data (BTRFS_LEAF_DATA_SIZE). */
static inline uint32_t leaf_data_size(uint32_t nodesize) { return nodesize - CTREE_HEADER_SIZE; }
/* The largest item a leaf can hold (BTRFS_MAX_ITEM_SIZE): alone, filling it. */
static inline uint32_t leaf_max_item_size(uint32_t nodesize)
{
	return leaf_data_size(nodesize) - CTREE_ITEM_SIZE;
}
/* Offset (relative to the end of the header, like item offsets) where the item
 * data area starts: the offset of the last item, leaf_data_size() if empty. A
 * broken leaf reports leaf_data_size(). */
uint32_t leaf_data_end(const uint8_t *leaf, uint32_t nodesize);
/* Unused bytes between the item headers and the item data. Inserting an item of
 * s bytes needs s + CTREE_ITEM_SIZE of them. A broken leaf reports 0. */
uint32_t leaf_free_space(const uint8_t *leaf, uint32_t nodesize);

/* Make room for n new items at slot (0..nritems), keys[0..n) strictly ascending
 * and between the neighbours at slot-1 and slot, data sizes sizes[0..n). The new
 * items' data is zeroed; fill it through leaf_item_data(). -EINVAL if a key is
 * out of order or equal to a neighbour, -ENOSPC if they do not fit together. */
int leaf_insert_items(uint8_t *leaf, uint32_t nodesize, unsigned slot, const struct btrfs_key *keys,
		      const uint32_t *sizes, unsigned n);
/* Remove items [slot, slot + n). Deleting every item leaves a valid empty leaf. */
int leaf_delete_items(uint8_t *leaf, uint32_t nodesize, unsigned slot, unsigned n);
/* Change the data size of item slot at the end of its data, keeping the first
 * min(old, new) bytes (btrfs_extend_item / btrfs_truncate_item(from_end=1)).
 * Grown bytes are zeroed. new_size 0 is allowed; -ENOSPC if the leaf is short
 * of new_size - old_size free bytes. */
int leaf_resize_item(uint8_t *leaf, uint32_t nodesize, unsigned slot, uint32_t new_size);
/* Replace the key of item slot; it must stay strictly between its neighbours. */
int leaf_set_key(uint8_t *leaf, uint32_t nodesize, unsigned slot, const struct btrfs_key *key);

/* Move items [split_slot, nritems) of left into right, which must be an empty
 * leaf (header initialised by the caller, nritems 0). split_slot == nritems
 * moves nothing, split_slot == 0 moves everything. Never -ENOSPC. */
int leaf_split(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned split_slot);
/* Move the last count items of left to the front of right / the first count
 * items of right to the end of left. The blocks must be neighbours in key
 * order (left's last key < right's first key, else -EINVAL); -ENOSPC if the
 * items do not fit in the receiving leaf. count may be every item. */
int leaf_push_right(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned count);
int leaf_push_left(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned count);
/* The largest count leaf_push_right / leaf_push_left would accept while leaving
 * at least `reserve` bytes free in the receiving leaf (0 if none, or if a block
 * is broken). */
unsigned leaf_push_right_max(const uint8_t *left, const uint8_t *right, uint32_t nodesize,
			     uint32_t reserve);
unsigned leaf_push_left_max(const uint8_t *left, const uint8_t *right, uint32_t nodesize,
			    uint32_t reserve);

/* How to split a leaf so that one item fits: a new item to insert, or an
 * existing item to grow. The leaf's items [0, nritems) are cut into up to three
 * consecutive runs that stay in key order:
 *    leaf  keeps   [0, cut[0])
 *    new1  gets    [cut[0], cut[1])      (nr_new >= 1; cut[1] == nritems if nr_new == 1)
 *    new2  gets    [cut[1], nritems)     (nr_new == 2)
 * so the resulting blocks, left to right, are leaf, new1, new2. After
 * leaf_split_apply(), the item goes to block `target` (0 = leaf, 1 = new1,
 * 2 = new2) at `slot`: leaf_insert_items(target, slot, ...) for a new item,
 * leaf_resize_item(target, slot, new_size) for a grown one. It then fits, and
 * no resulting block is empty. nr_new == 0: it fits already, no split. */
struct leaf_split_plan {
	unsigned nr_new;       /* 0, 1 or 2 new leaves */
	unsigned cut[2];
	unsigned target;       /* 0, 1, 2: block that receives the item */
	unsigned slot;         /* the item's slot in that block */
};
/* Plan room for a new item of insert_size data bytes at insert_slot
 * (0..nritems). One new leaf whenever possible, cut so that the fuller of the
 * two leaves is as empty as possible (the smallest such cut on a tie). Two new
 * leaves only when no single cut works, which happens only inside the leaf
 * (0 < insert_slot < nritems): the item then goes alone in new1, with
 * cut[0] == cut[1] == insert_slot. At the edges one new leaf always suffices:
 * at worst the item is alone, in new1 at the end (cut[0] == nritems, nothing
 * moves) or in the emptied leaf at the front (cut[0] == 0, every item moves to
 * new1; new leaves always go after the original). -EINVAL if insert_size >
 * leaf_max_item_size() or insert_slot > nritems. */
int leaf_choose_split(const uint8_t *leaf, uint32_t nodesize, unsigned insert_slot,
		      uint32_t insert_size, struct leaf_split_plan *plan);
/* Where a leaf or node sits in its tree, for the split choices below: the
 * last block of its level (every pointer above it is its node's last) or the
 * first. Keys arriving in order keep landing at that edge, so cutting there
 * instead of in the middle leaves the blocks behind full. */
#define CTREE_EDGE_RIGHT 1u
#define CTREE_EDGE_LEFT  2u
/* leaf_choose_split(), but when a split is needed and the new item goes after
 * the last item of a CTREE_EDGE_RIGHT leaf, it goes alone into new1 (cut[0] ==
 * nritems, nothing moves); before the first item of a CTREE_EDGE_LEFT leaf, it
 * goes alone into the emptied leaf (cut[0] == 0, every item moves to new1).
 * Other slots or edge == 0: exactly leaf_choose_split(). */
int leaf_choose_split_edge(const uint8_t *leaf, uint32_t nodesize, unsigned insert_slot,
			   uint32_t insert_size, unsigned edge, struct leaf_split_plan *plan);
/* Plan room to grow item slot to new_size bytes; the same contract. When no
 * single cut works the item is cut out alone into new1: cut = {slot, slot + 1}.
 * At the edges one new leaf always suffices (at worst the item alone: kept in
 * the leaf with cut[0] == 1, or moved to new1 with cut[0] == nritems - 1).
 * nr_new == 0 when the leaf has new_size - old size free bytes (or the item
 * does not grow). -EINVAL if new_size > leaf_max_item_size() or no such slot. */
int leaf_choose_split_extend(const uint8_t *leaf, uint32_t nodesize, unsigned slot,
			     uint32_t new_size, struct leaf_split_plan *plan);
/* Carry out a plan on leaf with empty leaves new1 (nr_new >= 1) and new2
 * (nr_new == 2; may be NULL otherwise). All checks happen before anything
 * moves. -EINVAL if the plan does not match the leaf or a new leaf is not empty. */
int leaf_split_apply(uint8_t *leaf, uint8_t *new1, uint8_t *new2, uint32_t nodesize,
		     const struct leaf_split_plan *plan);

/* ----------------------------------------------------------------- nodes */

/* Key pointers a node can hold (BTRFS_NODEPTRS_PER_BLOCK). */
static inline unsigned node_max_ptrs(uint32_t nodesize)
{
	return (nodesize - CTREE_HEADER_SIZE) / CTREE_KEY_PTR_SIZE;
}
/* Insert a key pointer at slot (0..nritems); key strictly between its
 * neighbours, blockptr != 0. -ENOSPC if the node holds node_max_ptrs(). */
int node_insert_ptr(uint8_t *node, uint32_t nodesize, unsigned slot, const struct btrfs_key *key,
		    uint64_t blockptr, uint64_t generation);
/* Remove pointers [slot, slot + n). A node may become empty in between
 * operations (to be freed or refilled); block_check_layout rejects it. */
int node_delete_ptrs(uint8_t *node, uint32_t nodesize, unsigned slot, unsigned n);
/* Rewrite pointer slot (after COW of the child, or a new first key below). */
int node_set_ptr(uint8_t *node, uint32_t nodesize, unsigned slot, const struct btrfs_key *key,
		 uint64_t blockptr, uint64_t generation);
/* Replace only the key of pointer slot (fixup of low keys). */
int node_set_key(uint8_t *node, uint32_t nodesize, unsigned slot, const struct btrfs_key *key);
/* The split_slot for node_split() of a node whose pointer `slot` leads to
 * where a new key goes: the middle (nritems / 2), but at the edge of the tree
 * (edge as for leaf_choose_split_edge) going down its outermost pointer, only
 * that pointer is cut off (nritems - 1 on the right, 1 on the left), so the
 * rest stays full. A node of fewer than 2 pointers: nritems / 2. */
unsigned node_choose_split(const uint8_t *node, unsigned slot, unsigned edge);
/* Move pointers [split_slot, nritems) of left into right, an empty node of the
 * same level. */
int node_split(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned split_slot);
/* Move the last count pointers of left to the front of right / the first count
 * of right to the end of left; same level, neighbours in key order. */
int node_push_right(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned count);
int node_push_left(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned count);

/* --------------------------------------------------------------- checking */

/* Full structural check of one tree block, the kernel tree-checker's layout
 * rules: level < BTRFS_MAX_LEVEL; leaf: item headers inside the leaf, keys
 * strictly ascending, item data packed back to back from the end of the block
 * and not overlapping the item headers; node: 1..node_max_ptrs pointers, keys
 * strictly ascending, no zero block pointer. (Checksum, bytenr, fsid, owner and
 * item contents are block_verify's and the item checkers' business.)
 * 0, or -EUCLEAN with the first problem described in why (may be NULL). */
int block_check_layout(const uint8_t *block, uint32_t nodesize, char *why, size_t len);

#endif
