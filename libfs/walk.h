/* Visiting every block of a tree, and listing the trees of a filesystem. */
#ifndef BTK_WALK_H
#define BTK_WALK_H

#include "libfs/block.h"
#include "libfs/fs.h"

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
struct tree_walk_prefetch {
	bool all_copies;
	bool (*skip)(void *arg, uint64_t bytenr);
	bool (*one_copy)(void *arg, uint64_t bytenr);
};
int tree_walk_prefetching(struct fs_info *fs, const struct tree_root_ptr *root, const struct tree_walk_ops *ops,
			  const struct tree_walk_prefetch *pf, uint64_t *bad_blocks);

/* Every tree of the filesystem, in the order dump-tree prints them: root
 * tree, chunk tree, then each ROOT_ITEM of the root tree, then the log tree. */
struct fs_tree_list {
	struct tree_root_ptr *roots;
	size_t count;
};
int fs_list_trees(struct fs_info *fs, struct fs_tree_list *out);
void fs_tree_list_free(struct fs_tree_list *list);

#endif
