// SPDX-License-Identifier: GPL-2.0-only
/* Derived trees rebuilt in a transaction: the free-space tree from the
 * extent tree (libfs/free_space_tree.c, with the v1 space cache cleared) and
 * the uuid tree from the root items (libfs/uuid_tree.c); a tree with
 * unreadable blocks is dropped whole first. */
#include <inttypes.h>

#include "check/repair.h"
#include <btk/free_space_tree.h>
#include <btk/uuid_tree.h>

/* A tree the check could not read whole goes first (its blocks below the
 * unreadable ones found through the extent tree): the builders below delete
 * only trees they can read. */
static int drop_damaged_tree(struct repair_ctx *r, uint64_t objectid, const char *what)
{
	struct tree_root_ptr root;
	uint64_t unreadable;
	int ret;

	if (!check_tree_unreadable(r->found, objectid) || trans_get_root(r->t, objectid, &root) != 0)
		return 0;
	if ((ret = trans_delete_damaged_tree(r->t, objectid, &unreadable)))
		return ret;
	repair_say(r, "the old %s had %" PRIu64 " unreadable block(s): dropped whole", what, unreadable);
	return 0;
}

int repair_free_space_tree(struct repair_ctx *r)
{
	struct fst_build_stats st;
	int ret;

	bool bgt = super_compat_ro_flags(trans_super(r->t)) & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE;

	if (!(r->fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE) && !bgt) {
		repair_say(r, "the filesystem has no free-space tree: nothing to rebuild "
			   "('btk-tune --enable free-space-tree' makes one)");
		return 0;
	}
	/* the block-group tree needs both: the kernel mounts it with nothing less */
	if (bgt && !(r->fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE))
		repair_say(r, "block-group tree without a free-space tree: the free-space-tree feature turned on");
	if (bgt && !(super_incompat_flags(trans_super(r->t)) & BTRFS_FEATURE_INCOMPAT_NO_HOLES)) {
		uint8_t *sb = trans_super(r->t);
		super_set_incompat_flags(sb, super_incompat_flags(sb) | BTRFS_FEATURE_INCOMPAT_NO_HOLES);
		repair_say(r, "block-group tree without no-holes: the no-holes feature turned on");
	}
	if ((ret = drop_damaged_tree(r, BTRFS_FREE_SPACE_TREE_OBJECTID, "free-space tree")))
		return ret;
	ret = fst_build(r->fs, r->t, &st);
	if (ret)
		return ret;
	repair_say(r, "%s for %zu block group(s), %" PRIu64 " free extent(s)",
		   st.replaced ? "rebuilt" : "built", st.groups, st.extents);
	if (st.v1_caches && st.v1_removed)
		repair_say(r, "v1 space cache: %zu cache(s) removed", st.v1_caches);
	else if (st.v1_caches)
		repair_say(r, "v1 space cache: %zu cache(s) invalidated, left for the kernel (%s)", st.v1_caches,
			   st.v1_why);
	r->changes++;
	return 0;
}

int repair_uuid_tree(struct repair_ctx *r)
{
	struct uuid_tree_stats st;
	int ret = drop_damaged_tree(r, BTRFS_UUID_TREE_OBJECTID, "uuid tree");

	if (ret || (ret = uuid_tree_rebuild(r->fs, r->t, &st)))
		return ret;
	repair_say(r, "%s with %u item(s): %u subvolume uuid(s), %u received uuid(s)",
		   st.replaced ? "rebuilt" : "created", st.items, st.subvols, st.received);
	r->changes++;
	return 0;
}
