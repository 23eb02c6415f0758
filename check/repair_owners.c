// SPDX-License-Identifier: GPL-2.0-only
/* The tree-block-owner class: a block of a tree other than a subvolume tree
 * (whose blocks a snapshot may share) names another tree as its owner in
 * its header. The tree that reaches the block is its owner: the block is
 * copied on write, which gives the copy the tree's id. Subvolume-tree blocks
 * with a wrong owner are left as they are (which snapshots share them is
 * not known here). */
#include <inttypes.h>

#include "check/repair.h"
#include <btk/block.h>
#include <btk/fs.h>
#include <btk/key.h>
#include <btk/walk.h>

static bool owned_elsewhere(uint64_t tree, const struct tree_block *b)
{
	return block_owner(b) != tree;
}

/* The trees whose every block the tree itself owns. */
static bool own_blocks_only(uint64_t tree)
{
	return !key_is_subvolume_id(tree) && tree != BTRFS_TREE_RELOC_OBJECTID && tree != BTRFS_TREE_LOG_OBJECTID &&
	       tree != BTRFS_ROOT_TREE_OBJECTID && tree != BTRFS_CHUNK_TREE_OBJECTID;
}

int repair_tree_block_owners(struct repair_ctx *r)
{
	struct fs_tree_list list;
	int ret = fs_list_trees(r->fs, &list);

	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < list.count; i++)
		if (own_blocks_only(list.roots[i].objectid))
			ret = repair_rewrite_tree_blocks(r, list.roots[i].objectid, owned_elsewhere);
	fs_tree_list_free(&list);
	if (!ret && r->changes < r->found->counts[PR_TREE_BLOCK_OWNER])
		r->left += r->found->counts[PR_TREE_BLOCK_OWNER] - r->changes;
	return ret;
}
