// SPDX-License-Identifier: GPL-2.0-only
/* Btree search and iteration on the fs tree of the "deep" image (4 KiB
 * nodes, root level >= 2): every item is reached exactly once forwards and
 * backwards, and searches for present, absent, first, last and
 * leaf-boundary keys land where dump-tree says the items are. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <btk/csum.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>
#include "tests/unit/fixtures.h"

static const struct btrfs_key KEY_MIN = { 0, 0, 0 };
static const struct btrfs_key KEY_MAX = { UINT64_MAX, 255, UINT64_MAX };

/* Every key of the fs tree in order, and the leaf each one is in. */
struct all_items {
	struct btrfs_key *keys;
	uint64_t *leaf;
	size_t count;
};

static struct fs_info *fs;
static struct all_items all;

static void collect(void)
{
	struct tree_path path;
	size_t cap = 0;
	int ret;

	fs = fixture_open("deep", NULL);
	memset(&all, 0, sizeof(all));
	tree_path_init(&path);
	ret = tree_search(fs, &fs->fs_root, &KEY_MIN, &path);
	while (ret == 0) {
		if (all.count == cap) {
			cap = cap ? cap * 2 : 4096;
			all.keys = realloc(all.keys, cap * sizeof(*all.keys));
			all.leaf = realloc(all.leaf, cap * sizeof(*all.leaf));
			cr_assert(all.keys && all.leaf);
		}
		tree_item_key(&path, &all.keys[all.count]);
		all.leaf[all.count] = path.nodes[0]->bytenr;
		all.count++;
		ret = tree_next(fs, &path);
	}
	cr_assert_eq(ret, 1, "iteration ended with %d: %s", ret, btk_error_msg());
	cr_assert_eq(tree_next(fs, &path), 1, "the end stays the end");
	tree_path_release(fs, &path);
}

static void teardown(void)
{
	free(all.keys);
	free(all.leaf);
	fs_close(fs);
}

TestSuite(tree, .init = collect, .fini = teardown);

/* The key right after k (same objectid and type, offset + 1), if any. */
static int key_succ(const struct btrfs_key *k, struct btrfs_key *out)
{
	if (k->offset == UINT64_MAX)
		return 0;
	*out = *k;
	out->offset++;
	return 1;
}

static int search_key(const struct btrfs_key *key, struct btrfs_key *found, int le)
{
	struct tree_path path;
	int ret;

	tree_path_init(&path);
	ret = le ? tree_search_le(fs, &fs->fs_root, key, &path) : tree_search(fs, &fs->fs_root, key, &path);
	if (ret == 0)
		tree_item_key(&path, found);
	tree_path_release(fs, &path);
	return ret;
}

static void assert_key_eq(const struct btrfs_key *a, const struct btrfs_key *b, const char *what)
{
	cr_assert(key_compare(a, b) == 0, "%s: (%llu %u %llu), want (%llu %u %llu)", what,
		  (unsigned long long)a->objectid, a->type, (unsigned long long)a->offset,
		  (unsigned long long)b->objectid, b->type, (unsigned long long)b->offset);
}

Test(tree, fixture_has_a_deep_fs_tree)
{
	cr_assert_geq(fs->fs_root.level, 2, "fs tree level %u", fs->fs_root.level);
	cr_assert_eq(fs->nodesize, 4096);
}

Test(tree, forward_iteration_is_sorted_and_matches_dump_tree)
{
	char *dump = fixture_dump_tree("deep", "fs");
	size_t dumped = 0;

	for (size_t i = 1; i < all.count; i++)
		cr_assert_lt(key_compare(&all.keys[i - 1], &all.keys[i]), 0, "keys %zu and %zu out of order", i - 1, i);
	dumped = fixture_count_lines(dump, "\titem ", " key (");
	cr_assert_eq(all.count, dumped, "tree_next visited %zu items, dump-tree lists %zu", all.count, dumped);
	cr_assert_eq(all.keys[0].objectid, BTRFS_FIRST_FREE_OBJECTID);
	cr_assert_eq(all.keys[0].type, BTRFS_INODE_ITEM_KEY);
	free(dump);
}

static int count_items(void *arg, const struct tree_block *b)
{
	if (block_level(b) == 0)
		*(uint64_t *)arg += block_nritems(b);
	return 0;
}

Test(tree, forward_iteration_matches_a_full_walk)
{
	uint64_t items = 0, bad = 1;
	struct tree_walk_ops ops = { .visit = count_items, .arg = &items };

	cr_assert_eq(tree_walk(fs, &fs->fs_root, &ops, &bad), 0, "%s", btk_error_msg());
	cr_assert_eq(bad, 0);
	cr_assert_eq(items, all.count);
}

Test(tree, backward_iteration_is_the_reverse)
{
	struct tree_path path;
	struct btrfs_key key;
	size_t i = all.count - 1;
	int ret;

	tree_path_init(&path);
	cr_assert_eq(tree_search_le(fs, &fs->fs_root, &KEY_MAX, &path), 0, "%s", btk_error_msg());
	for (;;) {
		tree_item_key(&path, &key);
		assert_key_eq(&key, &all.keys[i], "tree_prev");
		ret = tree_prev(fs, &path);
		if (ret)
			break;
		cr_assert_gt(i, 0, "tree_prev went past the first item");
		i--;
	}
	cr_assert_eq(ret, 1, "%d: %s", ret, btk_error_msg());
	cr_assert_eq(i, 0, "stopped %zu items before the first", i);
	tree_path_release(fs, &path);
}

Test(tree, prev_and_next_are_inverse_in_the_middle)
{
	struct tree_path path;
	struct btrfs_key key;
	size_t start = all.count / 2;

	tree_path_init(&path);
	cr_assert_eq(tree_search(fs, &fs->fs_root, &all.keys[start], &path), 0);
	for (size_t i = 1; i <= 300; i++) {
		cr_assert_eq(tree_prev(fs, &path), 0);
		tree_item_key(&path, &key);
		assert_key_eq(&key, &all.keys[start - i], "back");
	}
	for (size_t i = 299; i + 1 > 0; i--) {
		cr_assert_eq(tree_next(fs, &path), 0);
		tree_item_key(&path, &key);
		assert_key_eq(&key, &all.keys[start - i], "forward again");
	}
	tree_path_release(fs, &path);
}

Test(tree, search_exact_keys)
{
	struct btrfs_key found;

	for (size_t i = 0; i < all.count; i += 97) {
		cr_assert_eq(search_key(&all.keys[i], &found, 0), 0, "item %zu", i);
		assert_key_eq(&found, &all.keys[i], "tree_search exact");
		cr_assert_eq(search_key(&all.keys[i], &found, 1), 0, "item %zu", i);
		assert_key_eq(&found, &all.keys[i], "tree_search_le exact");
	}
	cr_assert_eq(search_key(&all.keys[all.count - 1], &found, 0), 0);
	assert_key_eq(&found, &all.keys[all.count - 1], "last key");
}

Test(tree, search_between_keys_and_across_leaf_boundaries)
{
	struct btrfs_key probe, found;
	unsigned boundaries = 0;

	for (size_t i = 0; i + 1 < all.count; i++) {
		int at_boundary = all.leaf[i] != all.leaf[i + 1];
		if (!at_boundary && i % 53)
			continue;
		if (!key_succ(&all.keys[i], &probe) || key_compare(&probe, &all.keys[i + 1]) >= 0)
			continue;
		/* >= probe: the next item, which is in the next leaf at a boundary */
		cr_assert_eq(search_key(&probe, &found, 0), 0);
		assert_key_eq(&found, &all.keys[i + 1], "tree_search between keys");
		/* <= probe: this item, even when the descent ended in the next leaf */
		cr_assert_eq(search_key(&probe, &found, 1), 0);
		assert_key_eq(&found, &all.keys[i], "tree_search_le between keys");
		boundaries += at_boundary;
	}
	cr_assert_gt(boundaries, 10, "only %u leaf boundaries could be probed", boundaries);
}

Test(tree, search_before_first_and_after_last)
{
	struct btrfs_key found, probe = all.keys[all.count - 1];

	cr_assert_eq(search_key(&KEY_MIN, &found, 0), 0);
	assert_key_eq(&found, &all.keys[0], "before the first key");
	cr_assert_eq(search_key(&KEY_MIN, &found, 1), 1, "nothing is <= the smallest key");
	cr_assert_eq(search_key(&KEY_MAX, &found, 0), 1, "nothing is >= the largest key");
	cr_assert_eq(search_key(&KEY_MAX, &found, 1), 0);
	assert_key_eq(&found, &all.keys[all.count - 1], "after the last key");
	if (key_succ(&all.keys[all.count - 1], &probe)) {
		cr_assert_eq(search_key(&probe, &found, 0), 1);
		cr_assert_eq(search_key(&probe, &found, 1), 0);
		assert_key_eq(&found, &all.keys[all.count - 1], "just after the last key");
	}
}

Test(tree, lookup)
{
	struct btrfs_key key = { BTRFS_FIRST_FREE_OBJECTID, BTRFS_INODE_ITEM_KEY, 0 }, probe;
	uint8_t buf[512];
	uint32_t size = sizeof(buf);
	size_t i;

	/* the top directory's inode */
	cr_assert_eq(tree_lookup(fs, &fs->fs_root, &key, buf, &size), 0, "%s", btk_error_msg());
	cr_assert_eq(size, sizeof(struct btrfs_inode_item));
	cr_assert(S_ISDIR(inode_mode(buf)), "mode 0%o", inode_mode(buf));
	cr_assert_geq(inode_nlink(buf), 1);

	/* a short buffer gets the first bytes and the real size */
	size = 8;
	memset(buf, 0, sizeof(buf));
	cr_assert_eq(tree_lookup(fs, &fs->fs_root, &key, buf, &size), 0);
	cr_assert_eq(size, sizeof(struct btrfs_inode_item));
	cr_assert_eq(buf[8], 0, "nothing written past the buffer size given");

	for (i = 0; i + 1 < all.count; i++)
		if (key_succ(&all.keys[i], &probe) && key_compare(&probe, &all.keys[i + 1]) < 0)
			break;
	size = sizeof(buf);
	cr_assert_eq(tree_lookup(fs, &fs->fs_root, &probe, buf, &size), -ENOENT);
	size = sizeof(buf);
	cr_assert_eq(tree_lookup(fs, &fs->fs_root, &KEY_MAX, buf, &size), -ENOENT);
}

Test(tree, range_iteration)
{
	struct btrfs_key min = { 300, 0, 0 }, max = { 310, 255, UINT64_MAX }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	size_t want = 0, got = 0, first = SIZE_MAX;
	int ret;

	for (size_t i = 0; i < all.count; i++) {
		if (all.keys[i].objectid >= 300 && all.keys[i].objectid <= 310) {
			if (first == SIZE_MAX)
				first = i;
			want++;
		}
	}
	cr_assert_gt(want, 0);
	tree_iter_init(&it, fs, &fs->fs_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		assert_key_eq(&key, &all.keys[first + got], "tree_iter");
		cr_assert_not_null(data);
		got++;
	}
	cr_assert_eq(ret, 0);
	cr_assert_eq(tree_iter_next(&it, &key, &data, &size), 0, "the end stays the end");
	tree_iter_release(&it);
	cr_assert_eq(got, want);
}

Test(tree, missing_tree_is_enoent)
{
	struct tree_root_ptr none = { .objectid = 12345, .bytenr = 0 };
	struct tree_path path;

	tree_path_init(&path);
	cr_assert_eq(tree_search(fs, &none, &KEY_MIN, &path), -ENOENT);
	cr_assert(strstr(btk_error_msg(), "does not exist"), "%s", btk_error_msg());
	tree_path_release(fs, &path);
}

/* An empty tree is a root leaf without items (an unused quota or uuid tree):
 * every search and iteration ends at once. */
Test(tree_empty, searches_and_iteration_find_nothing)
{
	struct fs_info *small = fixture_open("small", NULL);
	struct tree_root_ptr root = small->uuid_root;
	struct phys_copy copies[MAX_COPIES];
	uint8_t *buf = malloc(small->nodesize), csum[BTRFS_CSUM_SIZE];
	struct tree_path path;
	struct tree_iter it;
	struct btrfs_key key;
	const uint8_t *data;
	uint32_t size = 0;
	int n;

	cr_assert_not_null(buf);
	cr_assert_eq(root.level, 0);
	cr_assert_eq(block_read_copy(small, root.bytenr, 0, NULL, buf), BLOCK_OK);
	header_set_nritems(buf, 0);
	cr_assert_eq(csum_compute(small->csum_type, buf + BTRFS_CSUM_SIZE, small->nodesize - BTRFS_CSUM_SIZE, csum), 0);
	memcpy(header_csum_ptr(buf), csum, BTRFS_CSUM_SIZE);
	n = volumes_map(small, root.bytenr, small->nodesize, copies, NULL);
	cr_assert_gt(n, 0);
	for (int m = 0; m < n; m++)
		cr_assert_eq(io_write(copies[m].dev->io, buf, small->nodesize, copies[m].physical), 0);
	fixture_drop_cache(small, 0);
	free(buf);

	tree_path_init(&path);
	cr_assert_eq(tree_search(small, &root, &KEY_MIN, &path), 1);
	cr_assert_eq(tree_next(small, &path), 1);
	cr_assert_eq(tree_prev(small, &path), 1);
	cr_assert_eq(tree_search_le(small, &root, &KEY_MAX, &path), 1);
	tree_path_release(small, &path);
	cr_assert_eq(tree_lookup(small, &root, &KEY_MIN, NULL, &size), -ENOENT);
	tree_iter_init(&it, small, &root, &KEY_MIN, &KEY_MAX);
	cr_assert_eq(tree_iter_next(&it, &key, &data, &size), 0);
	tree_iter_release(&it);
	fs_close(small);
}
