// SPDX-License-Identifier: LGPL-2.1-or-later
/* Copy-on-write btree changes: search with copy and split, insert, delete,
 * resize, create and delete trees. Buffer-level work is in ctree_ops.c. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/ctree_ops.h>
#include <btk/ebitmap.h>
#include "libfs/trans_internal.h"
#include <btk/item_check.h>
#include <btk/walk.h>

#define SEARCH_MAX_RESTARTS 64

static uint32_t nodesize(const struct trans *t)
{
	return t->fs->nodesize;
}

/* A fresh, empty, dirty block for tree `root` at `level`, with its extent
 * reference queued. */
static int new_tree_block(struct trans *t, struct trans_root *root, unsigned level,
			  struct tree_block **out)
{
	uint64_t bytenr;
	struct tree_block *b;
	int ret = alloc_tree_block(t, root->ptr.objectid, &bytenr);

	if (ret)
		return ret;
	ret = block_create(t->fs, bytenr, &b);
	if (ret)
		return ret;
	memcpy(header_fsid_ptr(b->data), t->fs->metadata_uuid, BTRFS_FSID_SIZE);
	memcpy(header_chunk_tree_uuid_ptr(b->data), t->chunk_tree_uuid, BTRFS_UUID_SIZE);
	header_set_bytenr(b->data, bytenr);
	header_set_flags(b->data, (uint64_t)BTRFS_MIXED_BACKREF_REV << BTRFS_BACKREF_REV_SHIFT);
	header_set_generation(b->data, t->transid);
	header_set_owner(b->data, root->ptr.objectid);
	header_set_level(b->data, (uint8_t)level);
	header_set_nritems(b->data, 0);
	ret = trans_mark_dirty(t, b);
	if (!ret)
		ret = trans_queue_ref(t, REF_ADD, bytenr, root->ptr.objectid, (uint8_t)level);
	if (ret) {
		block_put(t->fs, b);
		return ret;
	}
	root->bytes_delta += nodesize(t);
	*out = b;
	return 0;
}

/* The extent of a tree block is released: at once for a block this
 * transaction made (its reference was never applied, or is dropped), at
 * commit for a committed block. Drops the caller's reference. */
static int free_tree_block(struct trans *t, struct trans_root *root, struct tree_block *b)
{
	uint64_t bytenr = b->bytenr;
	unsigned level = block_level(b);
	int ret = trans_adopt_block(t, b); /* one written early is the transaction's too */

	root->bytes_delta -= nodesize(t);
	if (ret < 0) {
		block_put(t->fs, b);
		return ret;
	}
	if (ret) {
		trans_forget_dirty(t, b);
		if (trans_remove_pending_add(t, bytenr))
			ret = alloc_free_tree_block(t, bytenr);
		else
			ret = trans_queue_ref(t, REF_DROP, bytenr, root->ptr.objectid, (uint8_t)level);
	} else {
		ret = trans_queue_ref(t, REF_DROP, bytenr, root->ptr.objectid, (uint8_t)level);
	}
	block_put(t->fs, b);
	return ret;
}

static void set_root(struct trans_root *root, const struct tree_block *b)
{
	root->ptr.bytenr = b->bytenr;
	root->ptr.generation = block_generation(b);
	root->ptr.level = (uint8_t)block_level(b);
	root->changed = true;
}

/* Point the parent slot (or the root) at a block of this transaction. */
static void link_to_parent(struct trans *t, struct trans_root *root, struct tree_path *path, int level,
			   const struct tree_block *b)
{
	if (level == path->root_level) {
		set_root(root, b);
		return;
	}
	key_ptr_set_blockptr(node_key_ptr(path->nodes[level + 1]->data, (unsigned)path->slots[level + 1]),
			     b->bytenr);
	key_ptr_set_generation(node_key_ptr(path->nodes[level + 1]->data, (unsigned)path->slots[level + 1]),
			       t->transid);
}

/* Copy path->nodes[level] unless this transaction already owns it, its
 * references weighed as those of a block owner made (0: the one its header
 * names). The parent must already be a block of this transaction. */
static int cow_block_as(struct trans *t, struct trans_root *root, struct tree_path *path, int level, uint64_t owner)
{
	struct tree_block *old = path->nodes[level], *nb;
	bool shared;
	int ret;

	ret = trans_adopt_block(t, old);
	if (ret)
		return ret < 0 ? ret : 0;
	ret = extent_cow_refs(t, old, root->ptr.objectid, owner ? owner : block_owner(old), &shared);
	if (ret)
		return ret;
	ret = new_tree_block(t, root, (unsigned)level, &nb);
	if (ret)
		return ret;
	memcpy(nb->data + sizeof(struct btrfs_header), old->data + sizeof(struct btrfs_header),
	       nodesize(t) - sizeof(struct btrfs_header));
	header_set_nritems(nb->data, block_nritems(old));
	/* (no flag of the old block carries over: written is set at writeback, reloc
	 * is the relocation's, and a copy is of today's backref revision) */
	header_set_flags(nb->data, (uint64_t)BTRFS_MIXED_BACKREF_REV << BTRFS_BACKREF_REV_SHIFT);
	link_to_parent(t, root, path, level, nb);
	path->nodes[level] = nb;
	if (shared) {
		/* snapshots keep the old block: only root's reference goes */
		root->bytes_delta -= nodesize(t);
		ret = extent_drop_shared(t, old, root->ptr.objectid);
		block_put(t->fs, old);
		return ret;
	}
	return free_tree_block(t, root, old);
}

static int cow_block(struct trans *t, struct trans_root *root, struct tree_path *path, int level)
{
	return cow_block_as(t, root, path, level, 0);
}

/* Binary search in a block: first slot with key >= key; *exact if equal. */
static unsigned lower_bound(const struct tree_block *b, const struct btrfs_key *key, int *exact)
{
	unsigned lo = 0, hi = block_nritems(b);
	struct btrfs_key k;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		block_key(b, mid, &k);
		if (key_compare(&k, key) < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	*exact = 0;
	if (lo < block_nritems(b)) {
		block_key(b, lo, &k);
		*exact = key_compare(&k, key) == 0;
	}
	return lo;
}

/* Update the keys of the ancestors whose subtree now starts with key. */
static void fixup_low_keys(struct tree_path *path, int level, const struct btrfs_key *key)
{
	for (int l = level; l <= path->root_level; l++) {
		uint8_t *ptr = node_key_ptr(path->nodes[l]->data, (unsigned)path->slots[l]);
		key_to_disk(key_ptr_key_ptr(ptr), key);
		if (path->slots[l] != 0)
			break;
	}
}

/* Put a new root node above the current root. */
static int grow_root(struct trans *t, struct trans_root *root, struct tree_path *path)
{
	struct tree_block *top = path->nodes[path->root_level], *nr;
	struct btrfs_key first;
	int ret;

	if (path->root_level + 1 >= BTRFS_MAX_LEVEL)
		return fs_error(t->fs, -EOVERFLOW, "tree %llu would exceed %d levels",
				(unsigned long long)root->ptr.objectid, BTRFS_MAX_LEVEL);
	ret = new_tree_block(t, root, (unsigned)path->root_level + 1, &nr);
	if (ret)
		return ret;
	block_key(top, 0, &first);
	ret = node_insert_ptr(nr->data, nodesize(t), 0, &first, top->bytenr, t->transid);
	if (ret) {
		block_put(t->fs, nr);
		return ret;
	}
	path->root_level++;
	path->nodes[path->root_level] = nr;
	path->slots[path->root_level] = 0;
	set_root(root, nr);
	return 0;
}

/* Whether the block at `level` of the path is the first and/or last of its
 * level in the tree (CTREE_EDGE_*): every pointer above it is 0 / the last. */
static unsigned path_edge(const struct tree_path *path, int level)
{
	unsigned edge = CTREE_EDGE_LEFT | CTREE_EDGE_RIGHT;

	for (int l = level + 1; l <= path->root_level; l++) {
		unsigned slot = (unsigned)path->slots[l];
		if (slot != 0)
			edge &= ~CTREE_EDGE_LEFT;
		if (slot + 1 != block_nritems(path->nodes[l]))
			edge &= ~CTREE_EDGE_RIGHT;
	}
	return edge;
}

/* Split a full node in two; its parent has room (ensured top-down). At the
 * edge of the tree only the outermost pointer is cut off when the new key
 * goes down it (keys in order then fill nodes), else the middle. */
static int split_node(struct trans *t, struct trans_root *root, struct tree_path *path, int level,
		      unsigned slot)
{
	struct tree_block *left, *right;
	struct btrfs_key first;
	unsigned cut;
	int ret;

	if (level == path->root_level && (ret = grow_root(t, root, path)))
		return ret;
	left = path->nodes[level];
	cut = node_choose_split(left->data, slot, path_edge(path, level));
	ret = new_tree_block(t, root, (unsigned)level, &right);
	if (ret)
		return ret;
	ret = node_split(left->data, right->data, nodesize(t), cut);
	if (!ret) {
		block_key(right, 0, &first);
		ret = node_insert_ptr(path->nodes[level + 1]->data, nodesize(t),
				      (unsigned)path->slots[level + 1] + 1, &first, right->bytenr, t->transid);
	}
	block_put(t->fs, right);
	return ret;
}

/* Split the leaf so the item (new of `size` data bytes, or grown to `size`)
 * fits; leaves the path at the block and slot that receive it. */
static int split_leaf(struct trans *t, struct trans_root *root, struct tree_path *path,
		      const struct btrfs_key *key, uint32_t size, bool extend)
{
	struct leaf_split_plan plan;
	struct tree_block *leaf = path->nodes[0], *nb[2] = { NULL, NULL };
	unsigned pslot;
	int ret;

	if (path->root_level == 0 && (ret = grow_root(t, root, path)))
		return ret;
	ret = extend ? leaf_choose_split_extend(leaf->data, nodesize(t), (unsigned)path->slots[0], size, &plan)
		     : leaf_choose_split_edge(leaf->data, nodesize(t), (unsigned)path->slots[0], size,
					      path_edge(path, 0), &plan);
	if (ret)
		return fs_error(t->fs, ret, "item of %u bytes cannot fit in a %u-byte leaf", size, nodesize(t));
	for (unsigned i = 0; i < plan.nr_new; i++) {
		ret = new_tree_block(t, root, 0, &nb[i]);
		if (ret)
			goto out;
	}
	ret = leaf_split_apply(leaf->data, nb[0] ? nb[0]->data : NULL, nb[1] ? nb[1]->data : NULL,
			       nodesize(t), &plan);
	if (ret)
		goto out;
	pslot = (unsigned)path->slots[1];
	/* every item moved on: the leaf's pointer gets the new item's (smaller)
	 * key first, so the pointer to new1 fits after it */
	if (!extend && plan.nr_new && plan.cut[0] == 0)
		fixup_low_keys(path, 1, key);
	for (unsigned i = 0; i < plan.nr_new; i++) {
		struct btrfs_key first = *key; /* a new leaf left empty waits for the new item */
		if (block_nritems(nb[i]))
			block_key(nb[i], 0, &first);
		ret = node_insert_ptr(path->nodes[1]->data, nodesize(t), pslot + 1 + i, &first, nb[i]->bytenr,
				      t->transid);
		if (ret)
			goto out;
	}
	if (plan.target > 0) {
		struct tree_block *target = nb[plan.target - 1];
		block_hold(t->fs, target);
		block_put(t->fs, path->nodes[0]);
		path->nodes[0] = target;
		path->slots[1] = (int)(pslot + plan.target);
	}
	path->slots[0] = (int)plan.slot;
out:
	block_put(t->fs, nb[0]);
	block_put(t->fs, nb[1]);
	return ret;
}

static int read_root_block(struct trans *t, struct trans_root *root, struct tree_block **out)
{
	struct block_expect e = { .generation = root->ptr.generation, .level = root->ptr.level };

	if (!root->ptr.bytenr || root->deleted)
		return fs_error(t->fs, -ENOENT, "tree %llu does not exist", (unsigned long long)root->ptr.objectid);
	return block_read(t->fs, root->ptr.bytenr, &e, out);
}

/* The root block at the top of path, copied for this transaction; *level: its level. */
static int path_start(struct trans *t, struct trans_root *root, struct tree_path *path, int *level)
{
	struct tree_block *b;
	int ret = read_root_block(t, root, &b);

	if (ret)
		return ret;
	*level = (int)block_level(b);
	path->root_level = *level;
	path->nodes[*level] = b;
	return cow_block(t, root, path, *level);
}

/* One descent; 2 means "the tree changed shape, search again". */
static int search_once(struct trans *t, struct trans_root *root, const struct btrfs_key *key, int ins_len,
		       bool extend, struct tree_path *path)
{
	struct tree_block *b;
	int level, exact, ret = path_start(t, root, path, &level);

	if (ret)
		return ret;
	for (; level > 0; level--) {
		unsigned slot;
		b = path->nodes[level];
		slot = lower_bound(b, key, &exact);
		if (!exact && slot > 0)
			slot--;
		if (ins_len > 0 && block_nritems(b) + 2 > node_max_ptrs(nodesize(t))) {
			ret = split_node(t, root, path, level, slot);
			return ret ? ret : 2;
		}
		path->slots[level] = (int)slot;
		ret = block_read_child(t->fs, b, slot, &path->nodes[level - 1]);
		if (ret)
			return ret;
		ret = cow_block(t, root, path, level - 1);
		if (ret)
			return ret;
	}
	b = path->nodes[0];
	path->slots[0] = (int)lower_bound(b, key, &exact);
	if (ins_len > 0 && (extend ? exact : !exact)) {
		uint32_t have = leaf_free_space(b->data, nodesize(t));
		if (have < (uint32_t)ins_len) {
			uint32_t size = extend ? item_size(leaf_item(b->data, (unsigned)path->slots[0])) + (uint32_t)ins_len
					       : (uint32_t)ins_len - (uint32_t)sizeof(struct btrfs_item);
			ret = split_leaf(t, root, path, key, size, extend);
			if (ret)
				return ret;
		}
	}
	return exact ? 0 : 1;
}

static int search_internal(struct trans *t, uint64_t tree, const struct btrfs_key *key, int ins_len,
			   bool extend, struct tree_path *path)
{
	struct trans_root *root = trans_root_entry(t, tree);
	int ret;

	if (!root)
		return trans_root_entry_err();
	/* between operations every tree is whole: the queued references may be
	 * applied, blocks may go to disk */
	trans_refs_note_edit(t, tree, key->type);
	ret = trans_refs_maybe(t);
	if (!ret)
		ret = trans_writeback_maybe(t);
	if (ret)
		return ret;
	for (int i = 0; i < SEARCH_MAX_RESTARTS; i++) {
		tree_path_release(t->fs, path);
		ret = search_once(t, root, key, ins_len, extend, path);
		if (ret != 2)
			return ret;
	}
	return fs_error(t->fs, -ELOOP, "search in tree %llu did not settle", (unsigned long long)tree);
}

int trans_search(struct trans *t, uint64_t tree, const struct btrfs_key *key, int ins_len,
		 struct tree_path *path)
{
	return search_internal(t, tree, key, ins_len, false, path);
}

int trans_insert_item(struct trans *t, uint64_t tree, const struct btrfs_key *key, const void *data,
		      uint32_t size)
{
	struct tree_path path;
	int ret;

	if (size > leaf_max_item_size(nodesize(t)))
		return fs_error(t->fs, -EOVERFLOW, "item of %u bytes is larger than a leaf can hold", size);
	tree_path_init(&path);
	ret = search_internal(t, tree, key, (int)(size + sizeof(struct btrfs_item)), false, &path);
	if (ret == 0)
		ret = -EEXIST;
	else if (ret == 1) {
		uint8_t *leaf = path.nodes[0]->data;
		unsigned slot = (unsigned)path.slots[0];
		ret = leaf_insert_items(leaf, nodesize(t), slot, key, &size, 1);
		if (!ret && size && data)
			memcpy(leaf_item_data(leaf, slot), data, size);
		if (!ret && slot == 0 && path.root_level > 0)
			fixup_low_keys(&path, 1, key);
	}
	tree_path_release(t->fs, &path);
	return ret;
}

/* Make the root's only child the root while the root node has one pointer. */
static int shrink_root(struct trans *t, struct trans_root *root, struct tree_path *path)
{
	while (path->root_level > 0 && block_nritems(path->nodes[path->root_level]) == 1) {
		struct tree_block *top = path->nodes[path->root_level];
		struct tree_block *child = path->nodes[path->root_level - 1];
		int ret;

		/* the path's child was deleted: the one left is its sibling */
		if (!child) {
			ret = block_read_child(t->fs, top, 0, &child);
			if (ret)
				return ret;
			path->nodes[path->root_level - 1] = child;
		}
		set_root(root, child);
		path->nodes[path->root_level] = NULL;
		path->root_level--;
		ret = free_tree_block(t, root, top);
		if (ret)
			return ret;
	}
	return 0;
}

/* Remove pointer `slot` of the node at `level`, and the node if it empties. */
static int delete_ptr(struct trans *t, struct trans_root *root, struct tree_path *path, int level)
{
	struct tree_block *node = path->nodes[level];
	unsigned slot = (unsigned)path->slots[level];
	int ret = node_delete_ptrs(node->data, nodesize(t), slot, 1);

	if (ret)
		return ret;
	if (block_nritems(node) == 0) {
		if (level == path->root_level) {
			/* the tree is empty now: an empty leaf becomes its root */
			struct tree_block *leaf;
			ret = new_tree_block(t, root, 0, &leaf);
			if (ret)
				return ret;
			set_root(root, leaf);
			block_put(t->fs, leaf);
			path->nodes[level] = NULL;
			return free_tree_block(t, root, node);
		}
		path->nodes[level] = NULL;
		ret = free_tree_block(t, root, node);
		return ret ? ret : delete_ptr(t, root, path, level + 1);
	}
	if (slot == 0 && level < path->root_level) {
		struct btrfs_key first;
		block_key(node, 0, &first);
		fixup_low_keys(path, level + 1, &first);
	}
	return 0;
}

/* The leaf sibling at parent slot `pslot`, read and copied for this
 * transaction (linked into the parent), with a reference for the caller. */
static int cow_sibling(struct trans *t, struct trans_root *root, struct tree_path *path, unsigned pslot,
		       struct tree_block **out)
{
	struct tree_block *leaf = path->nodes[0];
	int saved_slot = path->slots[1];
	int ret = block_read_child(t->fs, path->nodes[1], pslot, &path->nodes[0]);

	if (ret) {
		path->nodes[0] = leaf;
		return ret;
	}
	path->slots[1] = (int)pslot;
	ret = cow_block(t, root, path, 0);
	*out = path->nodes[0];
	path->nodes[0] = leaf;
	path->slots[1] = saved_slot;
	if (ret) {
		block_put(t->fs, *out);
		*out = NULL;
	}
	return ret;
}

/* A leaf left less than a quarter full moves all its items into a neighbour
 * with room (left first, then right), and goes away. */
static int merge_underfull_leaf(struct trans *t, struct trans_root *root, struct tree_path *path)
{
	struct tree_block *leaf = path->nodes[0], *sib = NULL;
	struct tree_block *parent = path->nodes[1];
	unsigned n = block_nritems(leaf), pslot = (unsigned)path->slots[1];
	uint32_t data = leaf_data_size(nodesize(t));
	int ret;

	if (path->root_level == 0 || n == 0 || data - leaf_free_space(leaf->data, nodesize(t)) >= data / 4)
		return 0;
	if (pslot > 0) {
		ret = cow_sibling(t, root, path, pslot - 1, &sib);
		if (ret)
			return ret;
		if (leaf_push_left_max(sib->data, leaf->data, nodesize(t), 0) >= n) {
			ret = leaf_push_left(sib->data, leaf->data, nodesize(t), n);
			block_put(t->fs, sib);
			goto drop_leaf;
		}
		block_put(t->fs, sib);
	}
	if (pslot + 1 < block_nritems(parent)) {
		struct btrfs_key first;
		ret = cow_sibling(t, root, path, pslot + 1, &sib);
		if (ret)
			return ret;
		if (leaf_push_right_max(leaf->data, sib->data, nodesize(t), 0) >= n) {
			ret = leaf_push_right(leaf->data, sib->data, nodesize(t), n);
			if (!ret)
				block_key(sib, 0, &first);
			block_put(t->fs, sib);
			if (ret)
				return ret;
			/* the right sibling takes the leaf's place and its first key */
			path->nodes[0] = NULL;
			ret = free_tree_block(t, root, leaf);
			if (!ret)
				ret = node_delete_ptrs(parent->data, nodesize(t), pslot, 1);
			if (!ret)
				fixup_low_keys(path, 1, &first);
			return ret;
		}
		block_put(t->fs, sib);
	}
	return 0;
drop_leaf:
	if (ret)
		return ret;
	path->nodes[0] = NULL;
	ret = free_tree_block(t, root, leaf);
	return ret ? ret : delete_ptr(t, root, path, 1);
}

int trans_delete_item(struct trans *t, uint64_t tree, const struct btrfs_key *key)
{
	struct trans_root *root;
	struct tree_path path;
	int ret;

	tree_path_init(&path);
	ret = search_internal(t, tree, key, -1, false, &path);
	if (ret == 1)
		ret = -ENOENT;
	if (ret)
		goto out;
	root = trans_root_entry(t, tree);
	ret = leaf_delete_items(path.nodes[0]->data, nodesize(t), (unsigned)path.slots[0], 1);
	if (ret)
		goto out;
	if (block_nritems(path.nodes[0]) == 0 && path.root_level > 0) {
		struct tree_block *leaf = path.nodes[0];
		path.nodes[0] = NULL;
		ret = free_tree_block(t, root, leaf);
		if (!ret)
			ret = delete_ptr(t, root, &path, 1);
	} else if (path.root_level > 0) {
		if (path.slots[0] == 0) {
			struct btrfs_key first;
			block_key(path.nodes[0], 0, &first);
			fixup_low_keys(&path, 1, &first);
		}
		ret = merge_underfull_leaf(t, root, &path);
	}
	if (!ret)
		ret = shrink_root(t, root, &path);
out:
	tree_path_release(t->fs, &path);
	return ret;
}

int trans_item_for_update(struct trans *t, uint64_t tree, const struct btrfs_key *key, uint8_t **data,
			  uint32_t *size, struct tree_path *path)
{
	int ret = search_internal(t, tree, key, 0, false, path);

	if (ret == 1)
		return -ENOENT;
	if (ret)
		return ret;
	*data = leaf_item_data(path->nodes[0]->data, (unsigned)path->slots[0]);
	*size = item_size(leaf_item(path->nodes[0]->data, (unsigned)path->slots[0]));
	return 0;
}

int trans_update_item(struct trans *t, uint64_t tree, const struct btrfs_key *key, const void *data,
		      uint32_t size)
{
	struct tree_path path;
	uint32_t old;
	int ret;

	tree_path_init(&path);
	ret = search_internal(t, tree, key, 0, false, &path);
	if (ret == 1)
		ret = -ENOENT;
	if (ret)
		goto out;
	old = item_size(leaf_item(path.nodes[0]->data, (unsigned)path.slots[0]));
	if (size > old) {
		ret = search_internal(t, tree, key, (int)(size - old), true, &path);
		if (ret == 1)
			ret = -ENOENT;
		if (ret)
			goto out;
	}
	if (size != old)
		ret = leaf_resize_item(path.nodes[0]->data, nodesize(t), (unsigned)path.slots[0], size);
	if (!ret)
		memcpy(leaf_item_data(path.nodes[0]->data, (unsigned)path.slots[0]), data, size);
out:
	tree_path_release(t->fs, &path);
	return ret;
}

int trans_create_tree(struct trans *t, uint64_t objectid)
{
	uint8_t item[sizeof(struct btrfs_root_item)];
	struct trans_root *root;
	struct tree_block *leaf;
	struct btrfs_key key = { objectid, BTRFS_ROOT_ITEM_KEY, 0 };
	uint8_t *inode = item;
	int ret;

	/* a tree deleted earlier in this transaction may be made anew */
	root = trans_root_entry(t, objectid);
	if (root && !root->deleted)
		return fs_error(t->fs, -EEXIST, "tree %llu exists already", (unsigned long long)objectid);
	btk_error_clear();
	if (!root && !(root = trans_root_add(t)))
		return -ENOMEM;
	memset(root, 0, sizeof(*root));
	root->ptr.objectid = objectid;
	root->created = true;
	ret = new_tree_block(t, root, 0, &leaf);
	if (ret)
		return ret;
	set_root(root, leaf);
	root->changed = false;
	block_put(t->fs, leaf);

	memset(item, 0, sizeof(item));
	inode_set_generation(inode, 1);
	inode_set_size(inode, 3);
	inode_set_nbytes(inode, nodesize(t));
	inode_set_nlink(inode, 1);
	inode_set_mode(inode, 040755);
	root_item_set_generation(item, t->transid);
	root_item_set_bytenr(item, root->ptr.bytenr);
	root_item_set_level(item, 0);
	root_item_set_refs(item, 1);
	root_item_set_bytes_used(item, nodesize(t));
	root_item_set_generation_v2(item, t->transid);
	root->bytes_delta = 0;
	return trans_insert_item(t, BTRFS_ROOT_TREE_OBJECTID, &key, item, sizeof(item));
}

struct free_walk {
	struct trans *t;
	struct trans_root *root;
	struct ebitmap *freed;  /* NULL, or the blocks freed */
	int err;
};

static int free_visited(void *arg, const struct tree_block *b)
{
	struct free_walk *w = arg;
	struct tree_block *ref;
	int ret = w->freed ? ebitmap_set(w->freed, b->bytenr, w->t->fs->nodesize) : 0;

	if (!ret)
		ret = block_read(w->t->fs, b->bytenr, &BLOCK_EXPECT_ANY, &ref);
	if (!ret)
		ret = free_tree_block(w->t, w->root, ref);
	if (ret)
		w->err = ret;
	return ret;
}

int trans_delete_tree(struct trans *t, uint64_t objectid)
{
	struct trans_root *root = trans_root_entry(t, objectid);
	struct btrfs_key key = { objectid, BTRFS_ROOT_ITEM_KEY, 0 };
	struct free_walk w = { t, root, NULL, 0 };
	struct tree_walk_ops ops = { free_visited, NULL, &w };
	uint64_t bad = 0;
	int ret;

	if (!root)
		return trans_root_entry_err();
	if (objectid == BTRFS_ROOT_TREE_OBJECTID || objectid == BTRFS_CHUNK_TREE_OBJECTID ||
	    objectid == BTRFS_EXTENT_TREE_OBJECTID || objectid == BTRFS_DEV_TREE_OBJECTID)
		return fs_error(t->fs, -EINVAL, "tree %llu cannot be deleted", (unsigned long long)objectid);
	ret = tree_walk(t->fs, &root->ptr, &ops, &bad);
	if (!ret && bad)
		ret = fs_error(t->fs, -EUCLEAN, "tree %llu has %llu unreadable blocks",
			       (unsigned long long)objectid, (unsigned long long)bad);
	if (ret)
		return w.err ? w.err : ret;
	root->deleted = true;
	root->changed = false;
	return trans_delete_item(t, BTRFS_ROOT_TREE_OBJECTID, &key);
}

int trans_restart_tree(struct trans *t, uint64_t objectid)
{
	struct trans_root *root = trans_root_entry(t, objectid);
	struct btrfs_key key = { objectid, BTRFS_ROOT_ITEM_KEY, 0 };
	uint8_t item[sizeof(struct btrfs_root_item)];
	uint32_t size = sizeof(item);
	struct tree_root_ptr rt;
	struct tree_block *leaf;
	int ret;

	if (!root)
		return trans_root_entry_err();
	if (root->deleted || objectid == BTRFS_ROOT_TREE_OBJECTID || objectid == BTRFS_CHUNK_TREE_OBJECTID)
		return fs_error(t->fs, -EINVAL, "tree %llu cannot be restarted", (unsigned long long)objectid);
	if ((ret = trans_get_root(t, BTRFS_ROOT_TREE_OBJECTID, &rt)))
		return ret;
	ret = tree_lookup(t->fs, &rt, &key, item, &size);
	if (ret == 0 && !item_has_fixed(BTRFS_ROOT_ITEM_KEY, size))
		ret = fs_error(t->fs, -EUCLEAN, "root item %llu too small", (unsigned long long)objectid);
	if (ret)
		return ret;
	/* a rebuilt extent tree gets its items from the caller */
	if (objectid == BTRFS_EXTENT_TREE_OBJECTID)
		trans_refs_keep_until_commit(t);
	if ((ret = new_tree_block(t, root, 0, &leaf)))
		return ret;
	set_root(root, leaf);
	block_put(t->fs, leaf);
	/* the root item's bytes_used counts the new blocks only */
	root->bytes_delta = (int64_t)nodesize(t) - (int64_t)root_item_bytes_used(item);
	return 0;
}

/* The tree level of a tree-block extent item, and whether tree `objectid`
 * references it (inline tree block ref). */
static bool item_names_tree(const struct btrfs_key *k, const uint8_t *d, uint32_t size, uint64_t objectid,
			    uint8_t *level)
{
	struct item_view v = item_view_of(d, size);
	struct inline_ref_view r;
	const void *info;
	uint32_t off;

	if (!(extent_flags_in(&v) & BTRFS_EXTENT_FLAG_TREE_BLOCK) || v.past_end)
		return false;
	if (k->type == BTRFS_METADATA_ITEM_KEY) {
		*level = (uint8_t)k->offset;
	} else {
		if (!(info = ITEM_VIEW_STRUCT(&v, sizeof(struct btrfs_extent_item), struct btrfs_tree_block_info)))
			return false;
		*level = tree_block_info_level(info);
	}
	/* (up to a reference the walker cannot read: the kernel cannot either) */
	off = extent_item_refs_start(k, &v);
	while (inline_ref_next(&v, &off, &r) == 1)
		if (r.type == BTRFS_TREE_BLOCK_REF_KEY && inline_ref_offset(d + r.off) == objectid)
			return true;
	return false;
}

/* The blocks of a never-shared tree that its walk could not reach (below an
 * unreadable block) are named by the committed extent tree: drop them too. */
static int drop_unreached(struct trans *t, struct trans_root *root, struct ebitmap *freed)
{
	struct fs_info *fs = t->fs;
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, k;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	tree_iter_init(&it, fs, &fs->extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		uint8_t level;
		if ((k.type != BTRFS_METADATA_ITEM_KEY && k.type != BTRFS_EXTENT_ITEM_KEY) ||
		    !item_names_tree(&k, d, size, root->ptr.objectid, &level) ||
		    ebitmap_test(freed, k.objectid, nodesize(t)) != 0)
			continue;
		root->bytes_delta -= nodesize(t);
		if ((ret = trans_queue_ref(t, REF_DROP, k.objectid, root->ptr.objectid, level)) < 0)
			break;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

int trans_delete_damaged_tree(struct trans *t, uint64_t objectid, uint64_t *unreadable)
{
	struct trans_root *root = trans_root_entry(t, objectid);
	struct btrfs_key key = { objectid, BTRFS_ROOT_ITEM_KEY, 0 };
	struct free_walk w = { t, root, NULL, 0 };
	struct tree_walk_ops ops = { free_visited, NULL, &w };
	int ret;

	*unreadable = 0;
	if (!root)
		return trans_root_entry_err();
	/* the dev tree may go: its caller makes it again from the chunks before the commit; so
	 * may the data relocation tree, whose caller knows no relocation tree shares it */
	if ((!key_tree_never_shared(objectid) && objectid != BTRFS_DATA_RELOC_TREE_OBJECTID) ||
	    objectid == BTRFS_ROOT_TREE_OBJECTID ||
	    objectid == BTRFS_CHUNK_TREE_OBJECTID || objectid == BTRFS_EXTENT_TREE_OBJECTID)
		return fs_error(t->fs, -EINVAL, "tree %llu cannot be deleted this way", (unsigned long long)objectid);
	if (!(w.freed = ebitmap_create(t->fs->sectorsize)))
		return -ENOMEM;
	ret = tree_walk(t->fs, &root->ptr, &ops, unreadable);
	if (ret < 0 && !w.err && ret != -ENOMEM) {
		/* the root itself is unreadable */
		*unreadable = 1;
		btk_error_clear();
		ret = 0;
	}
	if (!ret && *unreadable)
		ret = drop_unreached(t, root, w.freed);
	ebitmap_destroy(w.freed);
	if (ret)
		return w.err ? w.err : ret;
	root->deleted = true;
	root->changed = false;
	return trans_delete_item(t, BTRFS_ROOT_TREE_OBJECTID, &key);
}

/* Descend by key to the node at child_level + 1, copying the path; the slot
 * that points at bytenr under exactly key, or -ENOENT. */
static int find_child_ptr(struct trans *t, struct trans_root *root, unsigned child_level,
			  const struct btrfs_key *key, uint64_t bytenr, struct tree_path *path)
{
	struct tree_block *b;
	int level, exact, ret = path_start(t, root, path, &level);

	if (ret)
		return ret;
	if (level <= (int)child_level)
		return fs_error(t->fs, -ENOENT, "tree %llu has no level %u below its root",
				(unsigned long long)root->ptr.objectid, child_level);
	for (;; level--) {
		unsigned slot;
		b = path->nodes[level];
		slot = lower_bound(b, key, &exact);
		if (!exact && slot > 0)
			slot--;
		path->slots[level] = (int)slot;
		if (level == (int)child_level + 1)
			break;
		if ((ret = block_read_child(t->fs, b, slot, &path->nodes[level - 1])))
			return ret;
		if ((ret = cow_block(t, root, path, level - 1)))
			return ret;
	}
	if (!exact || key_ptr_blockptr(node_key_ptr(b->data, (unsigned)path->slots[level])) != bytenr)
		return fs_error(t->fs, -ENOENT, "tree %llu has no pointer to block %llu at that key",
				(unsigned long long)root->ptr.objectid, (unsigned long long)bytenr);
	return 0;
}

int trans_drop_child(struct trans *t, uint64_t tree, unsigned child_level, const struct btrfs_key *key,
		     uint64_t bytenr)
{
	struct trans_root *root = trans_root_entry(t, tree);
	struct tree_path path;
	int ret;

	if (!root)
		return trans_root_entry_err();
	if (child_level + 1 >= BTRFS_MAX_LEVEL)
		return fs_error(t->fs, -EINVAL, "no tree block has level %u", child_level);
	tree_path_init(&path);
	ret = find_child_ptr(t, root, child_level, key, bytenr, &path);
	if (!ret)
		ret = delete_ptr(t, root, &path, (int)child_level + 1);
	if (!ret && path.nodes[path.root_level])   /* NULL: the tree is an empty leaf now */
		ret = shrink_root(t, root, &path);
	if (!ret) {
		/* the child is not read: its reference goes, the blocks below it stay
		 * referenced until a repair of the extent tree finds them unused */
		root->bytes_delta -= nodesize(t);
		ret = trans_queue_ref(t, REF_DROP, bytenr, root->ptr.objectid, (uint8_t)child_level);
	}
	tree_path_release(t->fs, &path);
	return ret;
}

int trans_rewrite_block(struct trans *t, uint64_t tree, unsigned level, const struct btrfs_key *key, uint64_t bytenr,
			bool *emptied)
{
	return trans_rewrite_block_owned(t, tree, level, key, bytenr, 0, emptied);
}

int trans_rewrite_block_owned(struct trans *t, uint64_t tree, unsigned level, const struct btrfs_key *key,
			      uint64_t bytenr, uint64_t owner, bool *emptied)
{
	struct trans_root *root = trans_root_entry(t, tree);
	struct tree_path path;
	struct btrfs_key first;
	int ret;

	*emptied = false;
	if (!root)
		return trans_root_entry_err();
	if (level >= BTRFS_MAX_LEVEL)
		return fs_error(t->fs, -EINVAL, "no tree block has level %u", level);
	tree_path_init(&path);
	if (root->ptr.bytenr == bytenr) {
		/* the root's copy points the root item at it */
		ret = read_root_block(t, root, &path.nodes[root->ptr.level]);
		if (!ret) {
			path.root_level = root->ptr.level;
			ret = cow_block_as(t, root, &path, root->ptr.level, owner);
		}
		tree_path_release(t->fs, &path);
		return ret;
	}
	ret = find_child_ptr(t, root, level, key, bytenr, &path);
	if (!ret)
		ret = block_read_child(t->fs, path.nodes[level + 1], (unsigned)path.slots[level + 1], &path.nodes[level]);
	if (!ret && block_nritems(path.nodes[level]) == 0) {
		tree_path_release(t->fs, &path);
		*emptied = true;
		return trans_drop_child(t, tree, level, key, bytenr);
	}
	if (!ret)
		ret = cow_block_as(t, root, &path, (int)level, owner);
	if (!ret) {
		block_key(path.nodes[level], 0, &first);
		if (key_compare(&first, key))
			fixup_low_keys(&path, (int)level + 1, &first);
	}
	tree_path_release(t->fs, &path);
	return ret;
}
