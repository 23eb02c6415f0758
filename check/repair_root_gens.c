// SPDX-License-Identifier: GPL-2.0-only
/* The root-generations class: a root item whose generation is newer than the
 * filesystem's gets the generation of its root block, when the block itself
 * reads and has the item's level. A block not newer than the filesystem (the
 * transid check fails) lends the item its generation; a block as new as the
 * item (both from the future: the kernel refuses it) is copied on write, with
 * the blocks under it from the future as well, and the commit gives the item
 * this transaction's generation. Its tree being unreadable for that reason
 * alone does not stop this transaction; any other unreadable tree does. The
 * check runs again after it. */
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>

#include "check/repair.h"
#include <btk/block.h>
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>

struct future_roots {
	struct repair_ctx *r;
	struct repair_keys l;
	uint64_t other_unreadable;
};

/* How the root block explains the item (d): 1 an older block whose generation
 * the item takes, 2 a block from the future as new as the item, 0 neither. */
static int block_explains(struct repair_ctx *r, const uint8_t *d, uint64_t *gen)
{
	struct block_expect any = BLOCK_EXPECT_ANY;
	struct tree_block *b;
	int how;

	if (!root_item_bytenr(d) || block_read(r->fs, root_item_bytenr(d), &any, &b) != 0) {
		fs_error_clear(r->fs);
		return 0;
	}
	*gen = block_generation(b);
	how = !*gen || block_level(b) != root_item_level(d) ? 0 : *gen <= r->fs->generation ? 1 :
	      *gen == root_item_generation(d) ? 2 : 0;
	block_put(r->fs, b);
	return how;
}

/* The first keys of the blocks from the future under bytenr (the block itself
 * included), following pointers whose generation is from the future too, or
 * (all) every pointer. */
static int future_blocks(struct repair_ctx *r, uint64_t bytenr, int depth, bool all, struct repair_keys *l)
{
	struct block_expect any = BLOCK_EXPECT_ANY;
	struct btrfs_key first = { 0, 0, 0 };
	struct tree_block *b;
	int ret = block_read(r->fs, bytenr, &any, &b);

	if (ret)
		return ret;
	if ((!all && block_generation(b) <= r->fs->generation) || !block_nritems(b) || depth > BTRFS_MAX_LEVEL) {
		block_put(r->fs, b);
		return 0;
	}
	block_key(b, 0, &first);
	/* (a copy this transaction made has its generation, the filesystem's next) */
	if (block_generation(b) > r->fs->generation && block_generation(b) != trans_transid(r->t))
		ret = repair_keys_push(l, &first);
	for (unsigned i = 0; !ret && block_level(b) && i < block_nritems(b); i++) {
		const uint8_t *p = node_key_ptr(b->data, i);
		if (all || key_ptr_generation(p) > r->fs->generation)
			ret = future_blocks(r, key_ptr_blockptr(p), depth + 1, all, l);
	}
	block_put(r->fs, b);
	return ret;
}

/* Copy the future blocks of tree `root` on write: a search for each one's first key. */
static int cow_future_tree(struct repair_ctx *r, uint64_t root, uint64_t bytenr, bool all)
{
	struct repair_keys l = { 0 };
	int ret = future_blocks(r, bytenr, 0, all, &l);

	for (size_t i = 0; ret >= 0 && i < l.n; i++) {
		struct tree_path path;
		tree_path_init(&path);
		ret = trans_search(r->t, root, &l.keys[i], 0, &path);
		tree_path_release(r->fs, &path);
	}
	if (ret >= 0 && l.n)
		repair_say(r, "tree %" PRIu64 ": %zu block(s) from the future copied on write", root, l.n);
	if (ret >= 0)
		r->changes += l.n;
	free(l.keys);
	return ret < 0 ? ret : 0;
}

static int note_root(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct future_roots *s = arg;
	struct item_view v = item_view_of(d, size);
	uint64_t gen;

	if (k->type != BTRFS_ROOT_ITEM_KEY || !item_view_has_fixed(&v, k->type))
		return 0;
	if (root_item_generation(d) > s->r->fs->generation && block_explains(s->r, d, &gen) > 0)
		return repair_keys_push(&s->l, k);
	s->other_unreadable += check_tree_unreadable(s->r->found, k->objectid);
	return 0;
}

/* The trees the check saw blocks from the future in (below root items that are
 * not): every such block copied on write, the tree walked whole. */
static int cow_future_blocks(struct repair_ctx *r)
{
	const struct check_stats *st = &r->found->stats;
	int ret = 0;

	if (st->n_future_trees == UINT_MAX) {
		repair_say(r, "blocks from the future in too many trees: left");
		r->left++;
		return 0;
	}
	for (unsigned i = 0; !ret && i < st->n_future_trees; i++) {
		struct tree_root_ptr rp;
		if ((ret = trans_get_root(r->t, st->future_trees[i], &rp)))
			break;
		ret = cow_future_tree(r, st->future_trees[i], rp.bytenr, true);
	}
	return ret;
}

int repair_root_generations(struct repair_ctx *r)
{
	struct future_roots s = { .r = r };
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item(r->fs, &rp, note_root, &s);
	/* core trees are not in root items: the root, chunk and (here) extent trees must read */
	if (ret >= 0 && (s.other_unreadable || check_tree_unreadable(r->found, BTRFS_ROOT_TREE_OBJECTID) ||
			 check_tree_unreadable(r->found, BTRFS_CHUNK_TREE_OBJECTID) || r->found->counts[PR_TREE_BLOCK_UNREADABLE])) {
		repair_say(r, "other trees are unreadable: root generations left");
		r->left += s.l.n ? s.l.n : 1;
		s.l.n = 0;
	}
	for (size_t i = 0; ret >= 0 && i < s.l.n; i++) {
		struct tree_path path;
		uint8_t *item;
		uint32_t size;
		uint64_t gen = 0, from = 0, bytenr = 0;
		int how = 0;
		tree_path_init(&path);
		ret = trans_item_for_update(r->t, BTRFS_ROOT_TREE_OBJECTID, &s.l.keys[i], &item, &size, &path);
		if (!ret) {
			how = block_explains(r, item, &gen);
			from = root_item_generation(item);
			bytenr = root_item_bytenr(item);
		}
		if (how == 1) {
			root_item_set_generation(item, gen);
			if (size >= sizeof(struct btrfs_root_item))
				root_item_set_generation_v2(item, gen);
			r->changes++;
			repair_say(r, "root %" PRIu64 ": generation %" PRIu64 " -> %" PRIu64 " (its root block's)",
				   s.l.keys[i].objectid, from, gen);
		}
		tree_path_release(r->fs, &path);
		if (how == 2) {
			/* the commit gives the item the copy's generation */
			ret = cow_future_tree(r, s.l.keys[i].objectid, bytenr, false);
			repair_say(r, "root %" PRIu64 ": generation %" PRIu64 " -> this transaction's", s.l.keys[i].objectid,
				   from);
		}
	}
	free(s.l.keys);
	if (ret >= 0 && !s.other_unreadable)
		ret = cow_future_blocks(r);
	return ret < 0 ? ret : 0;
}
