// SPDX-License-Identifier: GPL-2.0-only
/* The lost-blocks repair class: a subvolume-tree block that no copy gives
 * back (transid mismatch, bad checksum, invalid header) is dropped from its
 * parent, and the report names the keys it held (ctx->fs_lost). What the
 * other trees still say about those items (extent references, names whose
 * other half survived) is repaired by the classes after it, which choose
 * from a check run again after this one (check/repair.c). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>

#include "check/fs_lost.h"
#include "check/repair.h"
#include "check/repair_links.h"
#include <btk/block.h>
#include <btk/walk.h>

struct lost_block {
	struct btrfs_key key;     /* the parent's key for it */
	uint64_t bytenr;
	unsigned level;
};

/* The unreadable blocks of one tree, and the node last visited at each level
 * (the parent of a bad block at level l is the last node at level l + 1). */
struct lost_find {
	const struct tree_block *node[BTRFS_MAX_LEVEL];
	struct lost_block *v;
	size_t n, cap;
	bool visited;
	int err;
};

static int find_visit(void *arg, const struct tree_block *b)
{
	struct lost_find *f = arg;
	unsigned level = block_level(b);

	f->visited = true;
	if (level >= BTRFS_MAX_LEVEL)
		return -EUCLEAN;
	f->node[level] = b;
	return 0;
}

static void find_bad(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	struct lost_find *f = arg;
	const struct tree_block *p = level >= 0 && level + 1 < BTRFS_MAX_LEVEL ? f->node[level + 1] : NULL;

	(void)err;
	(void)why;
	if (!p || f->err)
		return;
	for (unsigned slot = 0; slot < block_nritems(p); slot++) {
		if (key_ptr_blockptr(node_key_ptr(p->data, slot)) != bytenr)
			continue;
		if (f->n == f->cap) {
			size_t cap = f->cap ? f->cap * 2 : 8;
			struct lost_block *v = realloc(f->v, cap * sizeof(*v));
			if (!v) {
				f->err = -ENOMEM;
				return;
			}
			f->v = v;
			f->cap = cap;
		}
		block_key(p, slot, &f->v[f->n].key);
		f->v[f->n].bytenr = bytenr;
		f->v[f->n].level = (unsigned)level;
		f->n++;
		return;
	}
}

/* Say which keys of root are lost (the check's ranges for it). */
static void say_lost_ranges(struct repair_ctx *r, uint64_t root)
{
	const struct fs_lost *l = r->found->fs_lost;

	for (size_t i = 0; i < l->n; i++) {
		char a[80], b[80];
		if (l->v[i].root != root)
			continue;
		fs_lost_key_str(a, sizeof(a), &l->v[i].lo, false);
		fs_lost_key_str(b, sizeof(b), &l->v[i].hi, l->v[i].to_end);
		repair_say(r, "subvolume %" PRIu64 ": the items from %s up to %s are lost", root, a, b);
	}
}

/* Drop the unreadable blocks of subvolume tree root. */
static int drop_in_tree(struct repair_ctx *r, uint64_t root)
{
	struct lost_find f = { 0 };
	struct tree_walk_ops ops = { find_visit, find_bad, &f };
	struct tree_root_ptr ptr;
	uint64_t bad = 0;
	int ret = trans_get_root(r->t, root, &ptr);

	if (ret)
		return ret;
	ret = tree_walk(r->fs, &ptr, &ops, &bad);
	if (ret < 0 && !f.visited && !f.err) {
		repair_say(r, "subvolume %" PRIu64 ": its root block is unreadable, left as it is", root);
		r->left++;
		return 0;
	}
	if (!ret)
		ret = f.err;
	for (size_t i = 0; !ret && i < f.n; i++) {
		ret = trans_drop_child(r->t, root, f.v[i].level, &f.v[i].key, f.v[i].bytenr);
		if (!ret) {
			repair_say(r, "subvolume %" PRIu64 ": dropped unreadable block %" PRIu64 " (level %u)", root,
				   f.v[i].bytenr, f.v[i].level);
			r->changes++;
		}
	}
	if (!ret && f.n < bad)
		r->left += bad - f.n;
	if (!ret && f.n) {
		say_lost_ranges(r, root);
		ret = repair_lost_named_inodes(r, root);
	}
	free(f.v);
	return ret;
}

int repair_lost_blocks(struct repair_ctx *r)
{
	const struct fs_lost *l = r->found->fs_lost;
	uint64_t last = 0;

	if (!l)
		return 0;
	for (size_t i = 0; i < l->n; i++) {
		int ret;
		if (l->v[i].root == last)
			continue;
		last = l->v[i].root;
		if ((ret = drop_in_tree(r, last)))
			return ret;
	}
	return 0;
}

bool repair_lost_covers(const struct check_ctx *ctx)
{
	const struct check_stats *st = &ctx->stats;

	if (st->n_unreadable_trees == UINT_MAX || !st->n_unreadable_trees || !ctx->fs_lost)
		return false;
	for (unsigned i = 0; i < st->n_unreadable_trees; i++) {
		struct btrfs_key all = { 0, 0, 0 }, end = { UINT64_MAX, 255, UINT64_MAX };
		if (!key_is_subvolume_id(st->unreadable_trees[i]) ||
		    !fs_lost_meets(ctx->fs_lost, st->unreadable_trees[i], &all, &end))
			return false;
	}
	return true;
}
