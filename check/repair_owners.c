// SPDX-License-Identifier: GPL-2.0-only
/* The tree-block-owner class: a block names another tree than its own as
 * owner in its header. In a tree other than a subvolume tree (whose blocks
 * snapshots may share) the tree that reaches the block owns it: the block
 * is copied on write, which gives the copy the tree's id (the root tree's
 * and the chunk tree's roots too: the commit writes their new place into the
 * superblock). Subvolume-tree blocks: check/owners_subvol.c. */
#include <inttypes.h>

#include "check/owners_subvol.h"
#include "check/repair.h"
#include <btk/block.h>
#include <btk/fs.h>
#include <btk/key.h>
#include <btk/walk.h>

/* A block another tree owns, or of an older backref revision than the
 * filesystem's (phase_trees.c): its copy is the tree's, of today's revision. */
static bool owned_elsewhere(uint64_t tree, const struct tree_block *b)
{
	return block_owner(b) != tree ||
	       header_flags(b->data) >> BTRFS_BACKREF_REV_SHIFT != BTRFS_MIXED_BACKREF_REV;
}

/* The trees whose every block the tree itself owns. */
static bool own_blocks_only(uint64_t tree)
{
	return !key_is_subvolume_id(tree) && tree != BTRFS_TREE_RELOC_OBJECTID && tree != BTRFS_TREE_LOG_OBJECTID;
}

int repair_tree_block_owners(struct repair_ctx *r)
{
	struct fs_tree_list list;
	uint64_t fixed = 0, others;
	int ret = fs_list_trees(r->fs, &list);

	if (ret)
		return ret;
	for (size_t i = 0; !ret && i < list.count; i++)
		if (own_blocks_only(list.roots[i].objectid))
			ret = repair_rewrite_tree_blocks(r, list.roots[i].objectid, owned_elsewhere);
	fs_tree_list_free(&list);
	others = r->changes;   /* one per block */
	if (!ret)
		ret = repair_subvolume_block_owners(r, &fixed);
	fixed += others;
	if (!ret && fixed < r->found->counts[PR_TREE_BLOCK_OWNER])
		r->left += r->found->counts[PR_TREE_BLOCK_OWNER] - fixed;
	return ret;
}
