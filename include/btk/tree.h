/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Searching and iterating btrees. */
#ifndef BTK_TREE_H
#define BTK_TREE_H

#include <stdint.h>
#include <btk/block.h>
#include <btk/fs.h>

struct tree_path {
	struct tree_block *nodes[BTRFS_MAX_LEVEL]; /* nodes[0] is the leaf */
	int slots[BTRFS_MAX_LEVEL];
	int root_level;
};

void tree_path_init(struct tree_path *path);
void tree_path_release(struct fs_info *fs, struct tree_path *path);

/* Position path at the first item >= key. Returns 0 (item found, exact or
 * not: compare the key), 1 when no such item exists in the tree, or -errno. */
int tree_search(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *key,
		struct tree_path *path);
/* Position at the last item <= key: 0, 1 if none, or -errno. */
int tree_search_le(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *key,
		   struct tree_path *path);
/* Step to the next / previous item: 0, 1 at the end, or -errno. */
int tree_next(struct fs_info *fs, struct tree_path *path);
int tree_prev(struct fs_info *fs, struct tree_path *path);

/* The item the path points at. */
void tree_item_key(const struct tree_path *path, struct btrfs_key *key);
const uint8_t *tree_item_data(const struct tree_path *path, uint32_t *size);

/* Iterate the items with min <= key <= max. */
struct tree_iter {
	struct fs_info *fs;
	struct tree_root_ptr root;
	struct btrfs_key min, max;
	struct tree_path path;
	int started;
	/* node whose children were read ahead, per level (prefetch.h) */
	uint64_t prefetched[BTRFS_MAX_LEVEL];
};
void tree_iter_init(struct tree_iter *it, struct fs_info *fs, const struct tree_root_ptr *root,
		    const struct btrfs_key *min, const struct btrfs_key *max);
/* 1 with key/data/size set, 0 at the end, -errno on error. Data stays valid
 * until the next call or tree_iter_release. The leaves and nodes up to max
 * are read ahead in physical order, one node's children at a time. */
int tree_iter_next(struct tree_iter *it, struct btrfs_key *key, const uint8_t **data, uint32_t *size);
void tree_iter_release(struct tree_iter *it);

/* Every item with min <= key <= max, in key order: fn returns 0 to go on,
 * nonzero to stop. 0 at the end, fn's nonzero value, or -errno from reading
 * (btk_last_error()). Data stays valid only during the call. */
typedef int (*tree_item_fn)(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size);
int tree_each_item_in(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *min,
		      const struct btrfs_key *max, tree_item_fn fn, void *arg);
/* The same over the whole tree. */
int tree_each_item(struct fs_info *fs, const struct tree_root_ptr *root, tree_item_fn fn, void *arg);

/* Find one item by exact key: 0 with data copied out (at most *size bytes;
 * *size set to the item size), -ENOENT if absent, -errno on error. */
int tree_lookup(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *key,
		void *buf, uint32_t *size);

#endif
