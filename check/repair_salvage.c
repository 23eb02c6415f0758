// SPDX-License-Identifier: GPL-2.0-only
/* The tree-salvage repair class: every block the check read as its salvaged
 * view (libfs/block_salvage.h: items re-laid out or dropped, keys sorted, a
 * level, generation or first key other than the parent says) is copied to a
 * fresh block in one transaction, so the view becomes what is on disk: the
 * parent's pointer gets the new block's generation and its first key. What
 * the dropped entries held is repaired by the classes after it, which choose
 * from a check run again after this one (check/repair.c). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>

#include "check/repair.h"
#include "check/root_outdated.h"
#include "common/grow.h"
#include <btk/block.h>
#include <btk/block_salvage.h>
#include <btk/ebitmap.h>
#include <btk/walk.h>

struct salvaged_block {
	struct btrfs_key key;     /* the parent's key for it (unused for the root) */
	uint64_t bytenr;
	unsigned level;
};

/* The salvaged blocks of one tree in walk order (a parent before its
 * children), and the node last visited at each level. */
struct salvage_find {
	uint64_t tree;
	bool (*want)(uint64_t tree, const struct tree_block *b); /* the blocks to rewrite */
	bool zero_generation_pointers; /* and the children of pointers of generation 0 */
	const struct tree_block *node[BTRFS_MAX_LEVEL];
	struct salvaged_block *v;
	size_t n, cap;
	int err;
};

/* The parent's pointer to bytenr names generation 0 (phase_trees.c reports it). */
static bool pointer_generation_zero(const struct tree_block *parent, uint64_t bytenr)
{
	for (unsigned slot = 0; slot < block_nritems(parent); slot++)
		if (key_ptr_blockptr(node_key_ptr(parent->data, slot)) == bytenr)
			return key_ptr_generation(node_key_ptr(parent->data, slot)) == 0;
	return false;
}

static int find_visit(void *arg, const struct tree_block *b)
{
	struct salvage_find *f = arg;
	unsigned level = block_level(b);
	const struct tree_block *p;

	if (level >= BTRFS_MAX_LEVEL)
		return -EUCLEAN;
	f->node[level] = b;
	for (unsigned l = 0; l < level; l++)
		f->node[l] = NULL;
	p = level + 1 < BTRFS_MAX_LEVEL ? f->node[level + 1] : NULL;
	if (!f->want(f->tree, b) && !(f->zero_generation_pointers && p && pointer_generation_zero(p, b->bytenr)))
		return 0;
	if (f->n == f->cap) {
		size_t cap = f->cap ? f->cap * 2 : 8;
		struct salvaged_block *v = realloc(f->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		f->v = v;
		f->cap = cap;
	}
	f->v[f->n] = (struct salvaged_block){ .bytenr = b->bytenr, .level = level };
	for (unsigned slot = 0; p && slot < block_nritems(p); slot++)
		if (key_ptr_blockptr(node_key_ptr(p->data, slot)) == b->bytenr) {
			block_key(p, slot, &f->v[f->n].key);
			break;
		}
	f->n++;
	return 0;
}

/* A salvaged extent tree may have lost items of blocks in use (or the
 * check found blocks without items): until the commit, no block the check
 * reached is handed out again. */
static int keep_reached_blocks(struct repair_ctx *r)
{
	struct ebitmap *seen = r->found->visited;
	uint64_t from = 0, start, len;
	int ret;

	while (seen && (ret = ebitmap_next_set(seen, from, &start, &len)) == 1) {
		for (uint64_t b = start; b < start + len; b += r->fs->nodesize)
			if ((ret = trans_space_keep_until_commit(r->t, b, r->fs->nodesize)))
				return ret;
		from = start + len;
	}
	return seen ? ret : 0;
}

static bool is_salvaged(uint64_t tree, const struct tree_block *b)
{
	(void)tree;
	return b->salvaged;
}

/* Copy the blocks of tree that want() picks to fresh blocks (their salvaged
 * view, their header made the tree's): the parent before its children. */
int repair_rewrite_tree_blocks(struct repair_ctx *r, uint64_t tree,
			       bool (*want)(uint64_t tree, const struct tree_block *b))
{
	struct salvage_find f = { .tree = tree, .want = want, .zero_generation_pointers = want == is_salvaged };
	struct tree_walk_ops ops = { find_visit, NULL, &f };
	struct tree_root_ptr ptr;
	int ret = trans_get_root(r->t, tree, &ptr);

	if (ret)
		return 0;   /* a tree the check saw and a class before this one removed */
	ret = tree_walk(r->fs, &ptr, &ops, NULL);
	if (ret == -EUCLEAN && !f.n)
		ret = 0;     /* unreadable blocks are the lost-blocks class's */
	for (size_t i = 0; !ret && i < f.n; i++) {
		bool emptied;
		ret = trans_rewrite_block(r->t, tree, f.v[i].level, &f.v[i].key, f.v[i].bytenr, &emptied);
		if (ret == -ENOENT) {
			/* its parent was rewritten with it gone (a pointer dropped) */
			ret = 0;
			continue;
		}
		if (ret)
			break;
		if (emptied)
			repair_say(r, "tree %" PRIu64 ": block %" PRIu64 " (level %u) kept nothing: its pointer dropped",
				   tree, f.v[i].bytenr, f.v[i].level);
		else
			repair_say(r, "tree %" PRIu64 ": block %" PRIu64 " (level %u) rewritten %s", tree, f.v[i].bytenr,
				   f.v[i].level, want == is_salvaged ? "from its salvaged view" : "with the tree as owner");
		r->changes++;
	}
	free(f.v);
	return ret;
}

/* The subvolumes whose root item names an older root block than the
 * extent tree's (root_outdated.h): the root-items class points them at the
 * newest, so the stale tree's view is not copied here. */
struct outdated_ids {
	uint64_t *v;
	size_t n, cap;
};

static int add_outdated(void *arg, const struct root_fix *f)
{
	struct outdated_ids *o = arg;
	uint64_t *v = grow_array(o->v, &o->cap, o->n, sizeof(*v), 8);

	if (!v)
		return -ENOMEM;
	o->v = v;
	o->v[o->n++] = f->key.objectid;
	return 0;
}

static int rewrite_unless_outdated(struct repair_ctx *r, const struct outdated_ids *o, uint64_t tree)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i] == tree) {
			repair_say(r, "tree %" PRIu64 ": its root item is outdated, left to the root-items class", tree);
			return 0;
		}
	return repair_rewrite_tree_blocks(r, tree, is_salvaged);
}

int repair_salvaged_blocks(struct repair_ctx *r)
{
	const struct check_stats *st = &r->found->stats;
	struct outdated_ids o = { 0 };
	struct fs_tree_list list;
	int ret;

	if ((ret = keep_reached_blocks(r)))
		return ret;
	if ((ret = root_outdated_each(r->fs, add_outdated, &o)))
		goto out;
	if (st->n_salvaged_trees != UINT_MAX) {
		for (unsigned i = 0; !ret && i < st->n_salvaged_trees; i++)
			ret = rewrite_unless_outdated(r, &o, st->salvaged_trees[i]);
		goto out;
	}
	if ((ret = fs_list_trees(r->fs, &list)))
		goto out;
	for (size_t i = 0; !ret && i < list.count; i++)
		if (list.roots[i].objectid != BTRFS_TREE_LOG_OBJECTID)
			ret = rewrite_unless_outdated(r, &o, list.roots[i].objectid);
	fs_tree_list_free(&list);
out:
	free(o.v);
	return ret;
}
