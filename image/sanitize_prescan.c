// SPDX-License-Identifier: GPL-2.0-only
/* The prescan pass of the sanitizer over a whole filesystem (sanitize.h):
 * every leaf of every tree that can hold names (subvolumes, snapshots, log
 * trees, reloc trees), each shared block once. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>

#include "image/sanitize.h"
#include <btk/block.h>
#include <btk/ebitmap.h>
#include <btk/walk.h>

struct prescan_ctx {
	struct sanitizer *s;
	struct fs_info *fs;
	struct ebitmap *seen;
};

static int prescan_visit(void *arg, const struct tree_block *b)
{
	struct prescan_ctx *c = arg;
	int ret = ebitmap_test_and_set(c->seen, b->bytenr, c->fs->nodesize);

	if (ret)
		return ret < 0 ? ret : 1; /* a shared subtree seen before */
	return block_level(b) ? 0 : sanitize_prescan(c->s, b->data);
}

/* Trees without directory entries (their leaves carry no names). */
static bool nameless_tree(uint64_t objectid)
{
	return objectid >= BTRFS_ROOT_TREE_OBJECTID && objectid <= BTRFS_RAID_STRIPE_TREE_OBJECTID &&
	       objectid != BTRFS_FS_TREE_OBJECTID;
}

int sanitize_prescan_fs(struct sanitizer *s, struct fs_info *fs)
{
	struct prescan_ctx c = { s, fs, ebitmap_create(fs->sectorsize) };
	struct tree_walk_ops ops = { prescan_visit, NULL, &c };
	struct fs_tree_list trees;
	int ret;

	if (!c.seen)
		return -ENOMEM;
	ret = fs_list_trees(fs, &trees);
	if (ret) {
		ebitmap_destroy(c.seen);
		return ret;
	}
	for (size_t i = 0; !ret && i < trees.count; i++)
		if (trees.roots[i].bytenr && !nameless_tree(trees.roots[i].objectid))
			ret = tree_walk(fs, &trees.roots[i], &ops, NULL);
	fs_tree_list_free(&trees);
	ebitmap_destroy(c.seen);
	return ret;
}
