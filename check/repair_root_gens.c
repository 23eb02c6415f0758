// SPDX-License-Identifier: GPL-2.0-only
/* The root-generations class: a root item whose generation is newer than the
 * filesystem's (so its tree's root block fails the transid check) gets the
 * generation of that block, when the block itself reads, is not newer than
 * the filesystem and has the item's level. Its tree being unreadable for that
 * reason alone does not stop this transaction (which changes the root tree
 * only); any other unreadable tree does. The check runs again after it. */
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include <btk/block.h>
#include <btk/format.h>
#include <btk/tree.h>

struct future_roots {
	struct repair_ctx *r;
	struct repair_keys l;
	uint64_t other_unreadable;
};

/* Whether the root block verifies on its own and could be the item's. */
static bool block_explains(struct repair_ctx *r, const uint8_t *d, uint64_t *gen)
{
	struct block_expect any = BLOCK_EXPECT_ANY;
	struct tree_block *b;
	bool ok;

	if (!root_item_bytenr(d) || block_read(r->fs, root_item_bytenr(d), &any, &b) != 0) {
		fs_error_clear(r->fs);
		return false;
	}
	*gen = block_generation(b);
	ok = *gen && *gen <= r->fs->generation && block_level(b) == root_item_level(d);
	block_put(r->fs, b);
	return ok;
}

static int note_root(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct future_roots *s = arg;
	uint64_t gen;

	if (k->type != BTRFS_ROOT_ITEM_KEY || size < BTRFS_ROOT_ITEM_V1_SIZE)
		return 0;
	if (root_item_generation(d) > s->r->fs->generation && block_explains(s->r, d, &gen))
		return repair_keys_push(&s->l, k);
	s->other_unreadable += check_tree_unreadable(s->r->found, k->objectid);
	return 0;
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
		uint64_t gen = 0;
		tree_path_init(&path);
		ret = trans_item_for_update(r->t, BTRFS_ROOT_TREE_OBJECTID, &s.l.keys[i], &item, &size, &path);
		if (!ret && block_explains(r, item, &gen)) {
			uint64_t from = root_item_generation(item);
			root_item_set_generation(item, gen);
			if (size >= sizeof(struct btrfs_root_item))
				root_item_set_generation_v2(item, gen);
			r->changes++;
			repair_say(r, "root %" PRIu64 ": generation %" PRIu64 " -> %" PRIu64 " (its root block's)",
				   s.l.keys[i].objectid, from, gen);
		}
		tree_path_release(r->fs, &path);
	}
	free(s.l.keys);
	return ret < 0 ? ret : 0;
}
