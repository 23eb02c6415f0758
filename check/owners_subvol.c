// SPDX-License-Identifier: GPL-2.0-only
/* Subvolume-tree blocks whose header names a wrong owner. Snapshots share
 * blocks, and the header must name the tree that made the block: the kernel
 * moves its children's references by that owner when a tree copies it, and
 * btrfs check wants the owner to hold it by a reference of its own. Which
 * tree made it is decided from the extent tree: of the trees that hold the
 * block by a reference of their own and reach it, the oldest (lowest id; a
 * snapshot's id is higher than its source's). That tree copies it first,
 * its references weighed as the maker's, then every other tree that reaches
 * it takes a copy of its own: the damaged block is gone, each copy names its
 * tree. A block with full back references is copied the same way, by no
 * maker. A block no tree holds by a reference of its own is left. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/owner_refs.h"
#include "check/owners_subvol.h"
#include "common/grow.h"
#include <btk/block.h>
#include <btk/ebitmap.h>
#include <btk/key.h>
#include <btk/walk.h>

struct bad_block {
	uint64_t bytenr;
	struct btrfs_key key;     /* its parent's key for it (its first key for a root) */
	unsigned level;
};

struct owner_find {
	struct repair_ctx *r;
	const struct tree_root_ptr *trees;   /* the live subvolume trees, in id order */
	size_t ntrees;
	uint64_t tree;                       /* the tree walked */
	struct ebitmap *seen;                /* blocks reached from a tree before */
	const struct tree_block *node[BTRFS_MAX_LEVEL];
	size_t trees_cap;
	struct bad_block *v;
	size_t n, cap;
};

static bool is_live_tree(const struct owner_find *f, uint64_t id)
{
	for (size_t i = 0; i < f->ntrees; i++)
		if (f->trees[i].objectid == id)
			return true;
	return false;
}

/* Tree owner (live) reaches block b: 1; 0 when not, or not known. */
static bool owner_tree_reaches(struct owner_find *f, uint64_t owner, const struct tree_block *b)
{
	struct btrfs_key first = { 0, 0, 0 };
	int ret;

	if (block_nritems(b))
		block_key(b, 0, &first);
	for (size_t i = 0; i < f->ntrees; i++)
		if (f->trees[i].objectid == owner) {
			ret = tree_reaches_block(f->r->fs, &f->trees[i], &first, block_level(b), b->bytenr);
			if (ret < 0)
				btk_error_clear();
			return ret > 0;
		}
	return false;
}

/* The check's rules for a block reached first from tree (phase_trees.c). */
static bool owner_wrong(struct owner_find *f, const struct tree_block *b)
{
	uint64_t owner = block_owner(b);
	struct owner_refs refs;

	if (owner == f->tree)
		return false;
	if (!key_is_subvolume_id(owner) || owner >> 48)
		return true;
	if (owner_refs_read(f->r->fs, &f->r->fs->extent_root, b->bytenr, &refs)) {
		btk_error_clear();
		return !is_live_tree(f, owner);
	}
	if (refs.full || !refs.found)
		return false;
	return !is_live_tree(f, owner) || (!owner_refs_hold(&refs, owner) && !owner_tree_reaches(f, owner, b));
}

static int find_visit(void *arg, const struct tree_block *b)
{
	struct owner_find *f = arg;
	unsigned level = block_level(b);
	const struct tree_block *p;
	struct bad_block *v;
	int seen;

	if (level >= BTRFS_MAX_LEVEL)
		return -EUCLEAN;
	f->node[level] = b;
	for (unsigned l = 0; l < level; l++)
		f->node[l] = NULL;
	if ((seen = ebitmap_test_and_set(f->seen, b->bytenr, f->r->fs->nodesize)) != 0)
		return seen < 0 ? seen : 1;   /* checked from the tree that reached it first */
	if (!owner_wrong(f, b))
		return 0;
	if (!(v = grow_array(f->v, &f->cap, f->n, sizeof(*v), 8)))
		return -ENOMEM;
	f->v = v;
	v = &f->v[f->n++];
	*v = (struct bad_block){ .bytenr = b->bytenr, .level = level };
	if (block_nritems(b))
		block_key(b, 0, &v->key);
	p = level + 1 < BTRFS_MAX_LEVEL ? f->node[level + 1] : NULL;
	for (unsigned slot = 0; p && slot < block_nritems(p); slot++)
		if (key_ptr_blockptr(node_key_ptr(p->data, slot)) == b->bytenr) {
			block_key(p, slot, &v->key);
			break;
		}
	return 0;
}

static int list_tree(void *arg, const struct tree_root_ptr *root, const uint8_t *item, uint32_t size)
{
	struct owner_find *f = arg;
	struct tree_root_ptr *v = grow_array((void *)f->trees, &f->trees_cap, f->ntrees, sizeof(*v), 8);

	(void)item;
	(void)size;
	if (!v)
		return -ENOMEM;
	v[f->ntrees++] = *root;
	f->trees = v;
	return 0;
}

/* Copy block x in every live tree that reaches it, the maker first. */
static int unshare(struct owner_find *f, const struct bad_block *x)
{
	struct repair_ctx *r = f->r;
	struct owner_refs refs;
	uint64_t maker = 0;
	bool *reach = calloc(f->ntrees + 1, sizeof(*reach));
	int ret;

	if (!reach)
		return -ENOMEM;
	if ((ret = owner_refs_read(r->fs, &r->fs->extent_root, x->bytenr, &refs)))
		goto out;
	for (size_t i = 0; i < f->ntrees; i++) {
		struct tree_root_ptr now;
		if ((ret = trans_get_root(r->t, f->trees[i].objectid, &now)) || (ret = tree_reaches_block(r->fs, &now, &x->key, x->level, x->bytenr)) < 0)
			goto out;
		reach[i] = ret;
		if (ret && !maker && !refs.full && owner_refs_hold(&refs, f->trees[i].objectid))
			maker = f->trees[i].objectid;
	}
	ret = 0;
	if (!refs.full && !maker) {
		repair_say(r, "block %" PRIu64 " (level %u): no tree that reaches it holds it by a reference of its "
			   "own: which tree made it is not known, it is left as it is", x->bytenr, x->level);
		goto out;
	}
	for (int pass = 0; pass < 2 && !ret; pass++)
		for (size_t i = 0; i < f->ntrees && !ret; i++) {
			uint64_t tree = f->trees[i].objectid;
			bool emptied;
			if (!reach[i] || (pass == 0) != (tree == maker))
				continue;
			ret = trans_rewrite_block_owned(r->t, tree, x->level, &x->key, x->bytenr, maker, &emptied);
			if (!ret) {
				repair_say(r, "tree %" PRIu64 ": block %" PRIu64 " (level %u) copied, the copy with owner %" PRIu64
					   "%s", tree, x->bytenr, x->level, tree, tree == maker ? " (the tree that made it)" : "");
				r->changes++;
			}
		}
	if (!ret)
		ret = 1;
out:
	free(reach);
	return ret;
}

static int by_level_down(const void *a, const void *b)
{
	const struct bad_block *x = a, *y = b;

	return x->level == y->level ? 0 : x->level > y->level ? -1 : 1;
}

int repair_subvolume_block_owners(struct repair_ctx *r, uint64_t *fixed)
{
	struct owner_find f = { .r = r };
	int ret;

	*fixed = 0;
	ret = fs_each_live_subvolume(r->fs, &r->fs->tree_root, SUBVOLS_WALKABLE, list_tree, &f);
	if (ret < 0 || !(f.seen = ebitmap_create(r->fs->nodesize))) {
		free((void *)f.trees);
		return ret < 0 ? ret : -ENOMEM;
	}
	for (size_t i = 0; i < f.ntrees; i++) {
		struct tree_walk_ops ops = { find_visit, NULL, &f };
		f.tree = f.trees[i].objectid;
		if ((ret = tree_walk(r->fs, &f.trees[i], &ops, NULL)) == -EUCLEAN)
			ret = 0;   /* unreadable blocks are the lost-blocks class's */
		if (ret)
			break;
	}
	if (!ret && f.n)
		qsort(f.v, f.n, sizeof(*f.v), by_level_down);
	for (size_t i = 0; !ret && i < f.n; i++)
		if ((ret = unshare(&f, &f.v[i])) > 0) {
			(*fixed)++;
			ret = 0;
		}
	ebitmap_destroy(f.seen);
	free(f.v);
	free((void *)f.trees);
	return ret;
}
