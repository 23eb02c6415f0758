/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Visiting every block of a tree, and listing the trees of a filesystem. */
#ifndef BTK_WALK_H
#define BTK_WALK_H

#include <btk/block.h>
#include <btk/fs.h>

struct tree_walk_ops {
	/* Called for each block in depth-first pre-order. Return 0 to go on,
	 * 1 to skip this node's children, or <0 to stop the walk with that error. */
	int (*visit)(void *arg, const struct tree_block *block);
	/* Called when a child pointer leads to an unreadable or invalid block;
	 * the walk goes on with the next sibling. May be NULL. */
	void (*bad_block)(void *arg, uint64_t bytenr, int level, int err, const char *why);
	void *arg;
};

/* Walk one tree. 0 when every block was visited or skipped on request; the
 * number of bad blocks is returned through *bad_blocks (may be NULL); <0 on
 * an error from visit or when the root itself cannot be read. */
int tree_walk(struct fs_info *fs, const struct tree_root_ptr *root, const struct tree_walk_ops *ops,
	      uint64_t *bad_blocks);

/* What tree_walk reads ahead: each node's children in physical order
 * (prefetch.h), first copies only, unless all_copies (for a visit that
 * verifies every copy); skip (may be NULL, called with ops->arg) is true for
 * a child the visit will skip, one_copy (may be NULL) for a child of which
 * the visit reads the first copy only. */
struct tree_drop_progress;
struct tree_walk_prefetch {
	bool all_copies;
	bool (*skip)(void *arg, uint64_t bytenr);
	bool (*one_copy)(void *arg, uint64_t bytenr);
	/* A deleted subvolume the kernel has begun to drop (may be NULL): the
	 * subtrees it has dropped already are not walked. */
	const struct tree_drop_progress *dropped;
	/* May be NULL (called with ops->arg): true for a child that is neither
	 * read nor visited, as if its visit had returned 1 (a block the caller
	 * verified before and knows satisfies this pointer). */
	bool (*unread)(void *arg, const struct tree_block *parent, unsigned slot);
};
int tree_walk_prefetching(struct fs_info *fs, const struct tree_root_ptr *root, const struct tree_walk_ops *ops,
			  const struct tree_walk_prefetch *pf, uint64_t *bad_blocks);

/* How far the kernel got dropping a deleted subvolume (refs 0), from its
 * root item: at level drop_level and above, every child left of the path to
 * key is gone (freed, or its reference from this tree dropped); the rest of
 * the tree is intact. level 0: the drop has not begun (or the item is not
 * usable), the whole tree stands. */
struct tree_drop_progress {
	struct btrfs_key key;
	uint8_t level;
};
/* The drop progress of a root item (level 0 when none applies). */
struct tree_drop_progress root_item_drop_progress(const uint8_t *item, uint32_t size);
/* Whether child slot of node (a node of the dropping tree) was dropped. */
bool tree_child_dropped(const struct tree_drop_progress *drop, const struct tree_block *node, unsigned slot);

/* The tree a root item (of any tree of roots) points at, as objectid: true
 * when it has a root block of a valid level, false otherwise. */
bool root_ptr_from_item(uint64_t objectid, const uint8_t *data, uint32_t size, struct tree_root_ptr *out);
/* Every tree of the filesystem, in the order dump-tree prints them: root
 * tree, chunk tree, then each ROOT_ITEM of the root tree, then the log tree.
 * drops[i] is the drop progress of roots[i]. */
struct fs_tree_list {
	struct tree_root_ptr *roots;
	struct tree_drop_progress *drops;
	size_t count;
};
int fs_list_trees(struct fs_info *fs, struct fs_tree_list *out);
void fs_tree_list_free(struct fs_tree_list *list);

/* The live subvolume trees of a root tree (the filesystem's, or the one a
 * transaction sees), in id order: ROOT_ITEMs of subvolume ids with refs != 0
 * (a deleted one awaits cleanup and may be half dropped). The flags add the
 * data relocation tree, keep only trees with a root block and a valid level
 * (WALKABLE), or only full-size root items (with uuids). fn gets the tree and
 * its root item; returns as in tree_each_item. */
#define SUBVOLS_DATA_RELOC 1u
#define SUBVOLS_WALKABLE 2u
#define SUBVOLS_FULL_ITEM 4u
typedef int (*subvol_root_fn)(void *arg, const struct tree_root_ptr *root, const uint8_t *item, uint32_t size);
int fs_each_live_subvolume(struct fs_info *fs, const struct tree_root_ptr *root_tree, unsigned flags,
			   subvol_root_fn fn, void *arg);

#endif
