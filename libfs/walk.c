// SPDX-License-Identifier: LGPL-2.1-or-later
/* Depth-first walk of a tree with an explicit stack (no recursion, one
 * referenced block per level), and the list of trees to walk. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libfs/prefetch.h"
#include <btk/item_check.h>
#include <btk/tree.h>
#include <btk/walk.h>

struct walk_level {
	struct tree_block *block;
	unsigned next_slot;
};

/* A node is about to have its children read: announce them. */
static int walk_prefetch(struct fs_info *fs, const struct tree_walk_ops *ops, const struct tree_walk_prefetch *pf,
			 const struct tree_block *node)
{
	struct prefetch_filter f = { .first = 0, .end = block_nritems(node), .all_copies = pf->all_copies,
				     .skip = pf->skip, .one_copy = pf->one_copy, .arg = ops->arg };

	/* the dropped children of a dropping tree are a prefix of the slots */
	while (pf->dropped && f.first < f.end && tree_child_dropped(pf->dropped, node, f.first))
		f.first++;

	return block_prefetch_children(fs, node, &f);
}

int tree_walk(struct fs_info *fs, const struct tree_root_ptr *root, const struct tree_walk_ops *ops,
	      uint64_t *bad_blocks)
{
	static const struct tree_walk_prefetch first_copies = { false, NULL, NULL, NULL, NULL };

	return tree_walk_prefetching(fs, root, ops, &first_copies, bad_blocks);
}

int tree_walk_prefetching(struct fs_info *fs, const struct tree_root_ptr *root, const struct tree_walk_ops *ops,
			  const struct tree_walk_prefetch *pf, uint64_t *bad_blocks)
{
	struct walk_level stack[BTRFS_MAX_LEVEL];
	struct block_expect e = { .generation = root->generation, .level = root->level };
	struct tree_block *b;
	uint64_t bad = 0;
	int depth = 0, ret;

	if (bad_blocks)
		*bad_blocks = 0;
	ret = block_read(fs, root->bytenr, &e, &b);
	if (ret)
		return ret;
	ret = ops->visit(ops->arg, b);
	if (ret < 0 || ret == 1 || block_level(b) == 0) {
		block_put(fs, b);
		return ret < 0 ? ret : 0;
	}
	stack[0] = (struct walk_level){ b, 0 };
	ret = walk_prefetch(fs, ops, pf, b);
	while (depth >= 0 && !ret) {
		struct walk_level *top = &stack[depth];
		struct tree_block *child;
		int r;

		if (top->next_slot >= block_nritems(top->block)) {
			block_put(fs, top->block);
			depth--;
			continue;
		}
		if (pf->dropped && tree_child_dropped(pf->dropped, top->block, top->next_slot)) {
			top->next_slot++;
			continue;
		}
		if (pf->unread && pf->unread(ops->arg, top->block, top->next_slot)) {
			top->next_slot++;
			continue;
		}
		r = block_read_child(fs, top->block, top->next_slot++, &child);
		if (r) {
			const uint8_t *ptr = node_key_ptr(top->block->data, top->next_slot - 1);
			bad++;
			if (r == -ENOMEM) {
				ret = r;
				break;
			}
			if (ops->bad_block)
				ops->bad_block(ops->arg, key_ptr_blockptr(ptr), (int)block_level(top->block) - 1,
					       r, btk_error_msg());
			continue;
		}
		r = ops->visit(ops->arg, child);
		if (r < 0) {
			block_put(fs, child);
			ret = r;
			break;
		}
		if (r == 1 || block_level(child) == 0 || depth + 1 >= BTRFS_MAX_LEVEL) {
			block_put(fs, child);
			continue;
		}
		stack[++depth] = (struct walk_level){ child, 0 };
		ret = walk_prefetch(fs, ops, pf, child);
	}
	for (; depth >= 0; depth--)
		block_put(fs, stack[depth].block);
	if (bad_blocks)
		*bad_blocks = bad;
	return ret;
}

struct tree_drop_progress root_item_drop_progress(const uint8_t *item, uint32_t size)
{
	struct tree_drop_progress d = { { 0, 0, 0 }, 0 };
	struct item_view v = item_view_of(item, size);

	if (!item_view_has_fixed(&v, BTRFS_ROOT_ITEM_KEY) || root_item_refs(item) != 0)
		return d;   /* the kernel drops deleted subvolumes only */
	key_from_disk(&d.key, root_item_drop_progress_ptr(item));
	/* dropping resumes at a node (level >= 1) no higher than the root */
	if (d.key.objectid && root_item_drop_level(item) >= 1 &&
	    root_item_drop_level(item) <= root_item_level(item))
		d.level = root_item_drop_level(item);
	return d;
}

/* The kernel resumes a drop where a search for the key at drop_level lands:
 * in each node on that path, the last slot whose key is not above it. The
 * slots before it are dropped; a node off the path has no such slot (its
 * keys are all above the key, or it is never reached). */
bool tree_child_dropped(const struct tree_drop_progress *drop, const struct tree_block *node, unsigned slot)
{
	struct btrfs_key next;

	if (!drop->level || block_level(node) < drop->level || slot + 1 >= block_nritems(node))
		return false;
	key_from_disk(&next, node_key_ptr(node->data, slot + 1));
	return key_compare(&next, &drop->key) <= 0;
}

static int tree_list_push_dropping(struct fs_tree_list *list, const struct tree_root_ptr *root,
				   const struct tree_drop_progress *drop)
{
	struct tree_root_ptr *v = realloc(list->roots, (list->count + 1) * sizeof(*v));
	struct tree_drop_progress *d;

	if (!v)
		return -ENOMEM;
	list->roots = v;
	if (!(d = realloc(list->drops, (list->count + 1) * sizeof(*d))))
		return -ENOMEM;
	list->drops = d;
	list->drops[list->count] = drop ? *drop : (struct tree_drop_progress){ { 0, 0, 0 }, 0 };
	list->roots[list->count++] = *root;
	return 0;
}

static int tree_list_push(struct fs_tree_list *list, const struct tree_root_ptr *root)
{
	return tree_list_push_dropping(list, root, NULL);
}

bool root_ptr_from_item(uint64_t objectid, const uint8_t *data, uint32_t size, struct tree_root_ptr *out)
{
	struct item_view v = item_view_of(data, size);
	struct tree_root_ptr r = { objectid, root_item_bytenr_in(&v), root_item_generation_in(&v),
				   root_item_level_in(&v) };   /* level ends the old (v1) item */

	if (v.past_end)
		return false;
	*out = r;
	return out->bytenr && out->level < BTRFS_MAX_LEVEL;
}

/* A root item's tree, with its drop progress, onto the list when it has a root block. */
static int push_root_item(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct tree_root_ptr r;
	struct tree_drop_progress drop;

	if (key->type != BTRFS_ROOT_ITEM_KEY || !root_ptr_from_item(key->objectid, data, size, &r))
		return 0;
	drop = root_item_drop_progress(data, size);
	return tree_list_push_dropping(arg, &r, &drop);
}

/* The log root tree (from the superblock; its transid is not recorded, so
 * generation 0) and the per-subvolume log trees its root items point at. */
static int list_log_trees(struct fs_info *fs, struct fs_tree_list *out)
{
	struct tree_root_ptr log = { BTRFS_TREE_LOG_OBJECTID, super_log_root(fs->super), 0,
				     super_log_root_level(fs->super) };
	int ret = tree_list_push(out, &log);

	if (ret || (ret = tree_each_item(fs, &log, push_root_item, out)) < 0)
		return ret;
	return 0;
}

int fs_list_trees(struct fs_info *fs, struct fs_tree_list *out)
{
	int ret;

	memset(out, 0, sizeof(*out));
	if ((ret = tree_list_push(out, &fs->tree_root)) || (ret = tree_list_push(out, &fs->chunk_root)) ||
	    (ret = tree_each_item(fs, &fs->tree_root, push_root_item, out)) < 0)
		goto fail;
	/* the extent tree's item misdirected: the root the filesystem uses (fs_info.extent_root_item) */
	for (size_t i = 0; fs->extent_root_item.bytenr && i < out->count; i++)
		if (out->roots[i].objectid == BTRFS_EXTENT_TREE_OBJECTID)
			out->roots[i] = fs->extent_root;
	if (super_log_root(fs->super)) {
		ret = list_log_trees(fs, out);
		if (ret)
			goto fail;
	}
	return 0;
fail:
	fs_tree_list_free(out);
	return ret;
}

void fs_tree_list_free(struct fs_tree_list *list)
{
	free(list->roots);
	free(list->drops);
	list->roots = NULL;
	list->drops = NULL;
	list->count = 0;
}

struct subvol_scan {
	unsigned flags;
	subvol_root_fn fn;
	void *arg;
};

static int subvol_root_item(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	const struct subvol_scan *s = arg;
	uint32_t min_size = s->flags & SUBVOLS_FULL_ITEM ? sizeof(struct btrfs_root_item) : BTRFS_ROOT_ITEM_V1_SIZE;
	bool subvol = key_is_subvolume_id(key->objectid) ||
		      ((s->flags & SUBVOLS_DATA_RELOC) && key->objectid == BTRFS_DATA_RELOC_TREE_OBJECTID);
	struct tree_root_ptr r;

	if (key->type != BTRFS_ROOT_ITEM_KEY || !subvol || size < min_size || root_item_refs(data) == 0)
		return 0;
	r = (struct tree_root_ptr){ key->objectid, root_item_bytenr(data), root_item_generation(data),
				    root_item_level(data) };
	if ((s->flags & SUBVOLS_WALKABLE) && (!r.bytenr || r.level >= BTRFS_MAX_LEVEL))
		return 0;
	return s->fn(s->arg, &r, data, size);
}

int fs_each_live_subvolume(struct fs_info *fs, const struct tree_root_ptr *root_tree, unsigned flags,
			   subvol_root_fn fn, void *arg)
{
	struct subvol_scan s = { flags, fn, arg };

	return tree_each_item(fs, root_tree, subvol_root_item, &s);
}
