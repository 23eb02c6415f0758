// SPDX-License-Identifier: GPL-2.0-only
/* trans_drop_child: a child pointer of a subvolume tree goes without its
 * block being read; a wrong key or block number is -ENOENT; after the commit
 * the tree holds every block and item but the dropped leaf's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <sys/mman.h>

#include <btk/block.h>
#include <btk/trans.h>
#include <btk/tree.h>
#include <btk/walk.h>
#include "tests/unit/fixtures.h"

struct count {
	uint64_t blocks, items;
	uint64_t seen_dropped;
	uint64_t dropped;
};

static int count_visit(void *arg, const struct tree_block *b)
{
	struct count *c = arg;

	c->blocks++;
	if (b->bytenr == c->dropped)
		c->seen_dropped++;
	if (block_level(b) == 0)
		c->items += block_nritems(b);
	return 0;
}

static void count_tree(struct fs_info *fs, struct count *c)
{
	struct tree_root_ptr r;
	struct tree_walk_ops ops = { count_visit, NULL, c };

	cr_assert_eq(fs_find_root(fs, BTRFS_FS_TREE_OBJECTID, &r), 0);
	cr_assert_eq(tree_walk(fs, &r, &ops, NULL), 0);
}

Test(trans_drop, drops_a_leaf)
{
	uint8_t *buf;
	size_t size;
	struct fs_info *fs;
	struct trans *t;
	struct tree_root_ptr r;
	struct tree_block *root, *node, *leaf;
	struct btrfs_key key;
	struct count before = { 0 }, after = { 0 };
	uint64_t bytenr;
	unsigned level;

	fixture_image_copy("deep", &buf, &size);
	fs = fixture_open_buffer(buf, size, true);
	cr_assert_eq(fs_find_root(fs, BTRFS_FS_TREE_OBJECTID, &r), 0);
	cr_assert_eq(block_read(fs, r.bytenr, &BLOCK_EXPECT_ANY, &root), 0);
	cr_assert_geq(block_level(root), 2);
	/* the second leaf under the root's first level-1 node */
	cr_assert_eq(block_read_child(fs, root, 0, &node), 0);
	while (block_level(node) > 1) {
		struct tree_block *n;
		cr_assert_eq(block_read_child(fs, node, 0, &n), 0);
		block_put(fs, node);
		node = n;
	}
	cr_assert_geq(block_nritems(node), 2);
	block_key(node, 1, &key);
	bytenr = key_ptr_blockptr(node_key_ptr(node->data, 1));
	cr_assert_eq(block_read_child(fs, node, 1, &leaf), 0);
	level = block_level(leaf);
	before.dropped = bytenr;
	count_tree(fs, &before);
	before.items -= block_nritems(leaf);
	block_put(fs, leaf);
	block_put(fs, node);
	block_put(fs, root);

	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(trans_drop_child(t, BTRFS_FS_TREE_OBJECTID, level, &key, bytenr + fs->nodesize), -ENOENT);
	trans_abort(t);
	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(trans_drop_child(t, BTRFS_FS_TREE_OBJECTID, level, &key, bytenr), 0);
	cr_assert_eq(trans_commit(t), 0);

	after.dropped = bytenr;
	count_tree(fs, &after);
	cr_assert_eq(after.seen_dropped, 0);
	cr_assert_eq(after.blocks, before.blocks - 1);
	cr_assert_eq(after.items, before.items, "items %llu, want %llu", (unsigned long long)after.items,
		     (unsigned long long)before.items);
	fs_close(fs);
	munmap(buf, size);
}
