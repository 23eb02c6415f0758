// SPDX-License-Identifier: LGPL-2.1-or-later
/* Btree search and iteration over verified, cached tree blocks. */
#include <errno.h>
#include <string.h>

#include "libfs/prefetch.h"
#include <btk/tree.h>

void tree_path_init(struct tree_path *path)
{
	memset(path, 0, sizeof(*path));
	path->root_level = -1;
}

void tree_path_release(struct fs_info *fs, struct tree_path *path)
{
	for (int i = 0; i < BTRFS_MAX_LEVEL; i++) {
		block_put(fs, path->nodes[i]);
		path->nodes[i] = NULL;
	}
	path->root_level = -1;
}

/* Binary search of a block: the first slot whose key is >= key. *exact is set
 * when that slot's key equals key. */
static unsigned block_lower_bound(const struct tree_block *b, const struct btrfs_key *key, int *exact)
{
	unsigned lo = 0, hi = block_nritems(b);
	struct btrfs_key k;

	*exact = 0;
	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		int cmp;
		block_key(b, mid, &k);
		cmp = key_compare(&k, key);
		if (cmp < 0) {
			lo = mid + 1;
		} else {
			if (cmp == 0)
				*exact = 1;
			hi = mid;
		}
	}
	if (lo < block_nritems(b)) {
		block_key(b, lo, &k);
		*exact = key_compare(&k, key) == 0;
	}
	return lo;
}

static int read_root(struct fs_info *fs, const struct tree_root_ptr *root, struct tree_block **out)
{
	struct block_expect e = { .generation = root->generation, .level = root->level };

	if (!root->bytenr)
		return fs_error(fs, -ENOENT, "tree %llu does not exist", (unsigned long long)root->objectid);
	return block_read(fs, root->bytenr, &e, out);
}

int tree_search(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *key,
		struct tree_path *path)
{
	struct tree_block *b;
	int ret, exact;

	tree_path_release(fs, path);
	ret = read_root(fs, root, &b);
	if (ret)
		return ret;
	path->root_level = (int)block_level(b);
	for (;;) {
		unsigned level = block_level(b);
		unsigned slot = block_lower_bound(b, key, &exact);

		path->nodes[level] = b;
		if (level == 0) {
			path->slots[0] = (int)slot;
			break;
		}
		/* in a node, descend into the last child whose first key is <= key */
		if (!exact && slot > 0)
			slot--;
		path->slots[level] = (int)slot;
		ret = block_read_child(fs, b, slot, &b);
		if (ret) {
			tree_path_release(fs, path);
			return ret;
		}
	}
	if (path->slots[0] < (int)block_nritems(path->nodes[0]))
		return 0;
	ret = tree_next(fs, path);
	return ret;
}

/* Move up until a level has a next slot, then down the leftmost edge. */
int tree_next(struct fs_info *fs, struct tree_path *path)
{
	int level;

	if (!path->nodes[0])
		return 1;
	if (path->slots[0] + 1 < (int)block_nritems(path->nodes[0])) {
		path->slots[0]++;
		return 0;
	}
	for (level = 1; level <= path->root_level; level++)
		if (path->slots[level] + 1 < (int)block_nritems(path->nodes[level]))
			break;
	if (level > path->root_level) {
		path->slots[0] = (int)block_nritems(path->nodes[0]);
		return 1;
	}
	path->slots[level]++;
	for (; level > 0; level--) {
		struct tree_block *child;
		int ret = block_read_child(fs, path->nodes[level], (unsigned)path->slots[level], &child);
		if (ret)
			return ret;
		block_put(fs, path->nodes[level - 1]);
		path->nodes[level - 1] = child;
		path->slots[level - 1] = 0;
	}
	if (block_nritems(path->nodes[0]) == 0)
		return tree_next(fs, path);
	return 0;
}

int tree_prev(struct fs_info *fs, struct tree_path *path)
{
	int level;

	if (!path->nodes[0])
		return 1;
	if (path->slots[0] > 0) {
		path->slots[0]--;
		if (path->slots[0] < (int)block_nritems(path->nodes[0]))
			return 0;
	}
	for (level = 1; level <= path->root_level; level++)
		if (path->slots[level] > 0)
			break;
	if (level > path->root_level)
		return 1;
	path->slots[level]--;
	for (; level > 0; level--) {
		struct tree_block *child;
		int ret = block_read_child(fs, path->nodes[level], (unsigned)path->slots[level], &child);
		if (ret)
			return ret;
		block_put(fs, path->nodes[level - 1]);
		path->nodes[level - 1] = child;
		path->slots[level - 1] = (int)block_nritems(child) - 1;
	}
	if (path->slots[0] < 0)
		return tree_prev(fs, path);
	return 0;
}

int tree_search_le(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *key,
		   struct tree_path *path)
{
	struct btrfs_key found;
	int ret = tree_search(fs, root, key, path);

	if (ret < 0)
		return ret;
	if (ret == 0) {
		tree_item_key(path, &found);
		if (key_compare(&found, key) == 0)
			return 0;
	}
	return tree_prev(fs, path);
}

void tree_item_key(const struct tree_path *path, struct btrfs_key *key)
{
	block_key(path->nodes[0], (unsigned)path->slots[0], key);
}

const uint8_t *tree_item_data(const struct tree_path *path, uint32_t *size)
{
	const uint8_t *item = leaf_item(path->nodes[0]->data, (unsigned)path->slots[0]);

	*size = item_size(item);
	return leaf_item_data(path->nodes[0]->data, (unsigned)path->slots[0]);
}

void tree_iter_init(struct tree_iter *it, struct fs_info *fs, const struct tree_root_ptr *root,
		    const struct btrfs_key *min, const struct btrfs_key *max)
{
	it->fs = fs;
	it->root = *root;
	it->min = *min;
	it->max = *max;
	it->started = 0;
	memset(it->prefetched, 0, sizeof(it->prefetched));
	tree_path_init(&it->path);
}

/* On entering a leaf: announce the siblings still ahead under each node of
 * the path not announced before, up to the iterator's last key. */
static int iter_prefetch(struct tree_iter *it)
{
	for (int level = 1; level <= it->path.root_level && level < BTRFS_MAX_LEVEL; level++) {
		const struct tree_block *node = it->path.nodes[level];
		struct prefetch_filter f = { .first = (unsigned)it->path.slots[level] + 1, .end = (unsigned)-1,
					     .max = &it->max };
		int ret;

		if (!node || it->prefetched[level] == node->bytenr)
			continue;
		it->prefetched[level] = node->bytenr;
		if ((ret = block_prefetch_children(it->fs, node, &f)))
			return ret;
	}
	return 0;
}

int tree_iter_next(struct tree_iter *it, struct btrfs_key *key, const uint8_t **data, uint32_t *size)
{
	bool first = !it->started;
	int ret;

	if (it->started < 0)
		return 0;

	if (first) {
		it->started = 1;
		ret = tree_search(it->fs, &it->root, &it->min, &it->path);
	} else {
		ret = tree_next(it->fs, &it->path);
	}
	if (!ret && (first || it->path.slots[0] == 0))
		ret = iter_prefetch(it);
	if (ret) {
		it->started = -1;
		return ret < 0 ? ret : 0;
	}
	tree_item_key(&it->path, key);
	if (key_compare(key, &it->max) > 0) {
		it->started = -1;
		return 0;
	}
	*data = tree_item_data(&it->path, size);
	return 1;
}

void tree_iter_release(struct tree_iter *it)
{
	tree_path_release(it->fs, &it->path);
}

int tree_each_item_in(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *min,
		      const struct btrfs_key *max, tree_item_fn fn, void *arg)
{
	struct btrfs_key key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret, stop = 0;

	tree_iter_init(&it, fs, root, min, max);
	while (!stop && (ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		stop = fn(arg, &key, data, size);
	tree_iter_release(&it);
	return stop ? stop : ret;
}

int tree_each_item(struct fs_info *fs, const struct tree_root_ptr *root, tree_item_fn fn, void *arg)
{
	const struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 };

	return tree_each_item_in(fs, root, &min, &max, fn, arg);
}

int tree_lookup(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *key,
		void *buf, uint32_t *size)
{
	struct tree_path path;
	struct btrfs_key found;
	const uint8_t *data;
	uint32_t item_len;
	int ret;

	tree_path_init(&path);
	ret = tree_search(fs, root, key, &path);
	if (ret == 0) {
		tree_item_key(&path, &found);
		if (key_compare(&found, key) != 0) {
			ret = -ENOENT;
		} else {
			data = tree_item_data(&path, &item_len);
			memcpy(buf, data, item_len < *size ? item_len : *size);
			*size = item_len;
		}
	} else if (ret == 1) {
		ret = -ENOENT;
	}
	tree_path_release(fs, &path);
	return ret;
}
