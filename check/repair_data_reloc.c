// SPDX-License-Identifier: GPL-2.0-only
/* The data-reloc-tree class: the kernel mounts nothing without the data
 * relocation tree, which holds only its top directory between balances. A
 * data relocation tree the check could not read, or whose root item is gone,
 * is made again as mkfs makes it: one leaf with inode 256, a directory whose
 * inode ref names itself "..". Refused while relocation trees exist (a
 * balance was interrupted): the inodes it relocates data through live in the
 * data relocation tree then, and its blocks may be shared. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>
#include <sys/stat.h>

#include "check/repair.h"
#include "check/repair_links.h"
#include <btk/format.h>
#include <btk/tree.h>

static int reloc_trees_exist(struct fs_info *fs);

int repair_data_reloc_tree(struct repair_ctx *r)
{
	const uint64_t id = BTRFS_DATA_RELOC_TREE_OBJECTID, dir = BTRFS_FIRST_FREE_OBJECTID;
	struct btrfs_key ik = { dir, BTRFS_INODE_ITEM_KEY, 0 }, rk = { dir, BTRFS_INODE_REF_KEY, dir };
	struct btrfs_key rootk = { id, BTRFS_ROOT_ITEM_KEY, 0 };
	uint8_t inode[sizeof(struct btrfs_inode_item)] = { 0 };
	uint8_t ref[sizeof(struct btrfs_inode_ref) + 2];
	struct tree_root_ptr rp;
	uint64_t unreadable = 0;
	uint8_t *item;
	uint32_t size;
	struct tree_path path;
	int ret;

	if (!check_tree_unreadable(r->found, id))
		return 0;
	if ((ret = reloc_trees_exist(r->fs)) != 0) {
		if (ret > 0) {
			r->left++;
			repair_say(r, "a balance left relocation trees: the data relocation tree is left as it is");
		}
		return ret < 0 ? ret : 0;
	}
	if (trans_get_root(r->t, id, &rp) == 0 && (ret = trans_delete_damaged_tree(r->t, id, &unreadable)))
		return ret;
	btk_error_clear();
	if ((ret = trans_create_tree(r->t, id)))
		return ret;
	link_init_inode_item(r, inode, S_IFDIR | 0755, 1);
	inode_set_transid(inode, 0);
	inode_set_nbytes(inode, r->fs->nodesize);
	memset(ref, 0, sizeof(ref));
	inode_ref_set_index(ref, 0);
	inode_ref_set_name_len(ref, 2);
	memcpy(ref + sizeof(struct btrfs_inode_ref), "..", 2);
	if ((ret = trans_insert_item(r->t, id, &ik, inode, sizeof(inode))) ||
	    (ret = trans_insert_item(r->t, id, &rk, ref, sizeof(ref))))
		return ret;
	tree_path_init(&path);
	ret = trans_item_for_update(r->t, BTRFS_ROOT_TREE_OBJECTID, &rootk, &item, &size, &path);
	if (ret)
		return ret;
	root_item_set_root_dirid(item, dir);
	tree_path_release(r->fs, &path);
	r->changes++;
	repair_say(r, "the data relocation tree %s: made again empty (its top directory only)",
		   unreadable ? "had unreadable blocks" : "had no root item");
	return 0;
}

/* 1 when the root tree holds a relocation tree's root item, 0 when not, or -errno. */
static int reloc_trees_exist(struct fs_info *fs)
{
	struct btrfs_key min = { BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, 0 };
	struct btrfs_key max = { BTRFS_TREE_RELOC_OBJECTID, BTRFS_ROOT_ITEM_KEY, UINT64_MAX }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, fs, &fs->tree_root, &min, &max);
	ret = tree_iter_next(&it, &key, &data, &size);
	tree_iter_release(&it);
	return ret;
}
