// SPDX-License-Identifier: GPL-2.0-only
/* Tree walks on real images: every block is visited exactly once (as many
 * nodes and leaves as dump-tree prints), a damaged child is reported and
 * skipped without ending the walk, and fs_list_trees lists the trees mkfs
 * creates. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <btk/tree.h>
#include <btk/walk.h>
#include "tests/unit/fixtures.h"

struct visits {
	uint64_t nodes, leaves, items;
	uint64_t *bytenrs;
	size_t count, cap;
	int skip_level;      /* visit returns 1 for blocks of this level (-1: never) */
	size_t stop_after;   /* visit returns -EINTR at this visit (0: never) */
	/* bad_block reports */
	unsigned bad_calls;
	uint64_t bad_bytenr;
	int bad_level, bad_err;
	char bad_why[512];
};

static int visit(void *arg, const struct tree_block *b)
{
	struct visits *v = arg;

	if (v->count == v->cap) {
		v->cap = v->cap ? v->cap * 2 : 1024;
		v->bytenrs = realloc(v->bytenrs, v->cap * sizeof(*v->bytenrs));
		cr_assert_not_null(v->bytenrs);
	}
	v->bytenrs[v->count++] = b->bytenr;
	if (block_level(b) == 0) {
		v->leaves++;
		v->items += block_nritems(b);
	} else {
		v->nodes++;
	}
	if (v->stop_after && v->count == v->stop_after)
		return -EINTR;
	return (int)block_level(b) == v->skip_level ? 1 : 0;
}

static void bad_block(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	struct visits *v = arg;

	v->bad_calls++;
	v->bad_bytenr = bytenr;
	v->bad_level = level;
	v->bad_err = err;
	snprintf(v->bad_why, sizeof(v->bad_why), "%s", why ? why : "");
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t walk(struct fs_info *fs, const struct tree_root_ptr *root, struct visits *v, int expect_ret)
{
	struct tree_walk_ops ops = { .visit = visit, .bad_block = bad_block, .arg = v };
	uint64_t bad = UINT64_MAX;
	int ret = tree_walk(fs, root, &ops, &bad);

	cr_assert_eq(ret, expect_ret, "tree_walk returned %d: %s", ret, btk_error_msg());
	return bad;
}

static void init_visits(struct visits *v)
{
	memset(v, 0, sizeof(*v));
	v->skip_level = -1;
}

/* Blocks dump-tree printed of a kind: each has a first line
 * "node|leaf <bytenr> [level L] items N ..." and a second "... flags ...". */
static uint64_t count_blocks(const char *text, const char *prefix)
{
	return fixture_count_lines(text, prefix, " items ");
}

Test(walk, every_block_exactly_once)
{
	struct fs_info *fs = fixture_open("deep", NULL);
	char *dump = fixture_dump_tree("deep", "fs");
	struct btrfs_key min = { 0, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX }, key;
	struct tree_iter it;
	struct visits v;
	const uint8_t *data;
	uint32_t size;
	uint64_t items = 0;

	init_visits(&v);
	cr_assert_eq(walk(fs, &fs->fs_root, &v, 0), 0, "no bad blocks");
	cr_assert_eq(v.bad_calls, 0);
	cr_assert_eq(v.bytenrs[0], fs->fs_root.bytenr, "pre-order: the root first");
	qsort(v.bytenrs, v.count, sizeof(*v.bytenrs), cmp_u64);
	for (size_t i = 1; i < v.count; i++)
		cr_assert_neq(v.bytenrs[i - 1], v.bytenrs[i], "block %llu visited twice",
			      (unsigned long long)v.bytenrs[i]);
	cr_assert_eq(v.nodes, count_blocks(dump, "node "), "nodes: walk %llu", (unsigned long long)v.nodes);
	cr_assert_eq(v.leaves, count_blocks(dump, "leaf "), "leaves: walk %llu", (unsigned long long)v.leaves);
	cr_assert_gt(v.nodes, 1);
	cr_assert_gt(v.leaves, 100);

	tree_iter_init(&it, fs, &fs->fs_root, &min, &max);
	while (tree_iter_next(&it, &key, &data, &size) == 1)
		items++;
	tree_iter_release(&it);
	cr_assert_eq(v.items, items, "leaf item counts sum to the iterated items");
	free(v.bytenrs);
	free(dump);
	fs_close(fs);
}

Test(walk, skipping_children_and_stopping)
{
	struct fs_info *fs = fixture_open("deep", NULL);
	struct visits all, v;

	init_visits(&all);
	walk(fs, &fs->fs_root, &all, 0);

	init_visits(&v);
	v.skip_level = fs->fs_root.level; /* skip below the root */
	walk(fs, &fs->fs_root, &v, 0);
	cr_assert_eq(v.count, 1);

	free(v.bytenrs);
	init_visits(&v);
	v.skip_level = 1; /* visit the nodes but not the leaves */
	walk(fs, &fs->fs_root, &v, 0);
	cr_assert_eq(v.nodes, all.nodes);
	cr_assert_eq(v.leaves, 0);

	free(v.bytenrs);
	init_visits(&v);
	v.stop_after = 10;
	walk(fs, &fs->fs_root, &v, -EINTR);
	cr_assert_eq(v.count, 10, "nothing visited after the error");
	free(all.bytenrs);
	free(v.bytenrs);
	fs_close(fs);
}

Test(walk, damaged_leaf_is_reported_and_skipped)
{
	struct fs_info *fs = fixture_open("deep", NULL);
	struct visits before, v;
	uint64_t victim = 0, bad;
	char name[32];

	init_visits(&before);
	walk(fs, &fs->fs_root, &before, 0);
	/* a leaf in the middle of the tree: find it by walking leaves only */
	{
		struct btrfs_key key = { 0, 0, 0 };
		struct tree_path path;
		tree_path_init(&path);
		cr_assert_eq(tree_search(fs, &fs->fs_root, &key, &path), 0);
		for (unsigned leaves = 0; leaves < before.leaves / 2;) {
			uint64_t cur = path.nodes[0]->bytenr;
			cr_assert_eq(tree_next(fs, &path), 0);
			leaves += path.nodes[0]->bytenr != cur;
		}
		victim = path.nodes[0]->bytenr;
		tree_path_release(fs, &path);
	}
	cr_assert_eq(fixture_corrupt_block(fs, victim, -1), 0);

	init_visits(&v);
	bad = walk(fs, &fs->fs_root, &v, 0);
	cr_assert_eq(bad, 1);
	cr_assert_eq(v.bad_calls, 1);
	cr_assert_eq(v.bad_bytenr, victim);
	cr_assert_eq(v.bad_level, 0);
	cr_assert_eq(v.bad_err, -EUCLEAN);
	snprintf(name, sizeof(name), "%llu", (unsigned long long)victim);
	cr_assert(strstr(v.bad_why, name), "why names the block: %s", v.bad_why);
	cr_assert_eq(v.leaves, before.leaves - 1, "the walk went on past the bad leaf");
	cr_assert_eq(v.nodes, before.nodes);
	free(before.bytenrs);
	free(v.bytenrs);
	fs_close(fs);
}

Test(walk, damaged_node_loses_its_subtree_only)
{
	struct fs_info *fs = fixture_open("deep", NULL);
	struct visits before, sub, v;
	struct tree_block *root, *child;
	struct tree_root_ptr child_root;
	uint64_t bad;

	init_visits(&before);
	walk(fs, &fs->fs_root, &before, 0);
	/* the second child of the root is a node; count its subtree */
	cr_assert_eq(block_read(fs, fs->fs_root.bytenr, NULL, &root), 0);
	cr_assert_geq(block_nritems(root), 2);
	child_root.objectid = BTRFS_FS_TREE_OBJECTID;
	child_root.bytenr = key_ptr_blockptr(node_key_ptr(root->data, 1));
	child_root.generation = key_ptr_generation(node_key_ptr(root->data, 1));
	child_root.level = (uint8_t)(block_level(root) - 1);
	block_put(fs, root);
	cr_assert_eq(block_read(fs, child_root.bytenr, NULL, &child), 0);
	cr_assert_geq(block_level(child), 1);
	block_put(fs, child);
	init_visits(&sub);
	walk(fs, &child_root, &sub, 0);

	cr_assert_eq(fixture_corrupt_block(fs, child_root.bytenr, -1), 0);
	init_visits(&v);
	bad = walk(fs, &fs->fs_root, &v, 0);
	cr_assert_eq(bad, 1);
	cr_assert_eq(v.bad_bytenr, child_root.bytenr);
	cr_assert_eq(v.bad_level, child_root.level);
	cr_assert_eq(v.count, before.count - sub.count);
	cr_assert_eq(v.leaves, before.leaves - sub.leaves);
	free(before.bytenrs);
	free(sub.bytenrs);
	free(v.bytenrs);
	fs_close(fs);
}

Test(walk, unreadable_root_is_an_error)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct visits v;
	struct tree_walk_ops ops = { .visit = visit, .arg = &v };
	uint64_t bad = 99;

	init_visits(&v);
	cr_assert_eq(fixture_corrupt_block(fs, fs->csum_root.bytenr, -1), 0);
	cr_assert_eq(tree_walk(fs, &fs->csum_root, &ops, &bad), -EUCLEAN);
	cr_assert_eq(v.count, 0);
	cr_assert_eq(bad, 0);
	fs_close(fs);
}

Test(fs_list_trees, lists_the_trees_mkfs_creates)
{
	static const uint64_t want[] = {
		BTRFS_ROOT_TREE_OBJECTID,  BTRFS_CHUNK_TREE_OBJECTID, BTRFS_EXTENT_TREE_OBJECTID,
		BTRFS_DEV_TREE_OBJECTID,   BTRFS_FS_TREE_OBJECTID,    BTRFS_CSUM_TREE_OBJECTID,
		BTRFS_UUID_TREE_OBJECTID,  BTRFS_FREE_SPACE_TREE_OBJECTID, BTRFS_DATA_RELOC_TREE_OBJECTID,
	};
	struct fs_info *fs = fixture_open("small", NULL);
	struct fs_tree_list list;

	cr_assert_eq(fs_list_trees(fs, &list), 0, "%s", btk_error_msg());
	cr_assert_eq(list.count, sizeof(want) / sizeof(want[0]), "%zu trees", list.count);
	for (size_t i = 0; i < list.count; i++) {
		struct visits v;
		uint64_t bad;

		cr_assert_eq(list.roots[i].objectid, want[i], "tree %zu is %lld, want %lld", i,
			     (long long)list.roots[i].objectid, (long long)want[i]);
		cr_assert_neq(list.roots[i].bytenr, 0);
		/* and every tree is whole */
		init_visits(&v);
		bad = walk(fs, &list.roots[i], &v, 0);
		cr_assert_eq(bad, 0, "tree %lld has bad blocks", (long long)list.roots[i].objectid);
		free(v.bytenrs);
	}
	cr_assert_eq(list.roots[0].bytenr, fs->tree_root.bytenr);
	cr_assert_eq(list.roots[1].bytenr, fs->chunk_root.bytenr);
	cr_assert_eq(list.roots[2].bytenr, fs->extent_root.bytenr);
	cr_assert_eq(list.roots[4].bytenr, fs->fs_root.bytenr);
	cr_assert_eq(list.roots[4].level, fs->fs_root.level);
	fs_tree_list_free(&list);
	cr_assert_null(list.roots);
	cr_assert_eq(list.count, 0);
	fs_close(fs);
}
