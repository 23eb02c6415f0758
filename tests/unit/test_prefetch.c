// SPDX-License-Identifier: GPL-2.0-only
/* Read-ahead of tree blocks: the ranges handed to the I/O layer are sorted,
 * merged, cover every copy asked for and nothing the filter excludes; walks
 * and iterations that read ahead visit exactly what they did without it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "libfs/prefetch.h"
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>
#include "tests/unit/fixtures.h"

struct hint { uint64_t off, len; };
static struct hint hints[100000];
static size_t nhints;
static struct io_ops recording_ops;

static int record_prefetch(struct io_dev *io, uint64_t off, uint64_t len)
{
	(void)io;
	cr_assert_lt(nhints, sizeof(hints) / sizeof(hints[0]));
	hints[nhints++] = (struct hint){ off, len };
	return 0;
}

/* The "deep" fixture (fs tree of level >= 2) on a memory device that records hints. */
static struct fs_info *open_recording(void)
{
	struct fs_info *fs = fixture_open("deep", NULL);

	recording_ops = *fs->devices[0].io->ops;
	recording_ops.prefetch = record_prefetch;
	fs->devices[0].io->ops = &recording_ops;
	nhints = 0;
	return fs;
}

static bool covered(uint64_t physical, uint64_t len)
{
	for (size_t i = 0; i < nhints; i++)
		if (hints[i].off <= physical && physical + len <= hints[i].off + hints[i].len)
			return true;
	return false;
}

static void assert_sorted_disjoint(void)
{
	for (size_t i = 1; i < nhints; i++)
		cr_assert_gt(hints[i].off, hints[i - 1].off + hints[i - 1].len + PREFETCH_MAX_GAP,
			     "hint %zu: ranges in device order, gaps <= %llu merged", i,
			     (unsigned long long)PREFETCH_MAX_GAP);
}

static bool skip_all(void *arg, uint64_t bytenr)
{
	(void)arg;
	(void)bytenr;
	return true;
}

/* Read ahead the children of root with f: only the first copy of each is announced. */
static void assert_first_copies_only(struct fs_info *fs, const struct tree_block *root, const struct prefetch_filter *f)
{
	nhints = 0;
	cr_assert_eq(block_prefetch_children(fs, root, f), 0);
	for (unsigned s = 0; s < block_nritems(root); s++) {
		struct phys_copy c[MAX_COPIES];
		volumes_map(fs, key_ptr_blockptr(node_key_ptr(root->data, s)), fs->nodesize, c, NULL);
		cr_assert(covered(c[0].physical, fs->nodesize));
		cr_assert_not(covered(c[1].physical, fs->nodesize), "child %u: second copy not read ahead", s);
	}
}

Test(prefetch, children_of_a_node_in_device_order)
{
	struct fs_info *fs = open_recording();
	struct tree_block *root;
	struct block_expect e = { .generation = fs->fs_root.generation, .level = fs->fs_root.level };
	struct prefetch_filter f = { .first = 0, .end = (unsigned)-1, .all_copies = true };
	unsigned copies_seen = 0;

	cr_assert_geq(fs->fs_root.level, 2, "the fixture needs a tall tree");
	cr_assert_eq(block_read(fs, fs->fs_root.bytenr, &e, &root), 0);
	cr_assert_eq(block_prefetch_children(fs, root, &f), 0);
	cr_assert_gt(nhints, 0);
	assert_sorted_disjoint();
	for (unsigned s = 0; s < block_nritems(root); s++) {
		uint64_t bytenr = key_ptr_blockptr(node_key_ptr(root->data, s));
		struct phys_copy c[MAX_COPIES];
		int n = volumes_map(fs, bytenr, fs->nodesize, c, NULL);
		cr_assert_eq(n, 2, "DUP metadata");
		for (int m = 0; m < n; m++, copies_seen++)
			cr_assert(covered(c[m].physical, fs->nodesize), "child %u copy %d announced", s, m);
	}
	cr_assert_eq(copies_seen, 2 * block_nritems(root));

	/* first copies only: no second copy is announced */
	f.all_copies = false;
	assert_first_copies_only(fs, root, &f);
	/* all copies, but the first copy only of the children one_copy names */
	f.all_copies = true;
	f.one_copy = skip_all;
	assert_first_copies_only(fs, root, &f);
	f.one_copy = NULL;
	f.all_copies = false;

	/* the filter: skipped children, children past max, cached children */
	nhints = 0;
	f.skip = skip_all;
	cr_assert_eq(block_prefetch_children(fs, root, &f), 0);
	cr_assert_eq(nhints, 0, "skipped children are not read ahead");
	f.skip = NULL;
	{
		struct btrfs_key first;
		struct tree_block *child;
		block_key(root, 0, &first);
		f.max = &first;
		cr_assert_eq(block_prefetch_children(fs, root, &f), 0);
		cr_assert_eq(nhints, 1, "only the first child can hold keys <= its first key");
		cr_assert_eq(hints[0].len, fs->nodesize);
		nhints = 0;
		cr_assert_eq(block_read_child(fs, root, 0, &child), 0);
		cr_assert_eq(block_prefetch_children(fs, root, &f), 0);
		cr_assert_eq(nhints, 0, "a cached child is not read ahead");
		block_put(fs, child);
	}
	block_put(fs, root);
	fs_close(fs);
}

static int count_visit(void *arg, const struct tree_block *b)
{
	(void)b;
	(*(uint64_t *)arg)++;
	return 0;
}

Test(prefetch, walks_and_iterations_read_ahead)
{
	struct fs_info *fs = open_recording();
	struct btrfs_key min = { 0, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX }, key;
	static const struct tree_walk_prefetch all = { true, NULL, NULL, NULL, NULL };
	uint64_t plain = 0, pf = 0, announced = 0, items = 0;
	struct tree_walk_ops ops = { .visit = count_visit, .arg = &plain };
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;

	tree_iter_init(&it, fs, &fs->fs_root, &min, &max);
	while (tree_iter_next(&it, &key, &data, &size) == 1)
		items++;
	tree_iter_release(&it);
	cr_assert_gt(items, 1000);
	cr_assert_gt(nhints, 0, "a full iteration reads ahead");

	cr_assert_eq(tree_walk(fs, &fs->fs_root, &ops, NULL), 0);
	block_cache_destroy(fs);
	cr_assert_eq(block_cache_create(fs, 1 << 20), 0);
	nhints = 0;
	ops.arg = &pf;
	cr_assert_eq(tree_walk_prefetching(fs, &fs->fs_root, &ops, &all, NULL), 0);
	cr_assert_eq(pf, plain, "the same blocks are visited");
	for (size_t i = 0; i < nhints; i++)
		announced += hints[i].len;
	/* every block but the root, both copies (merging may add the gaps) */
	cr_assert_geq(announced, 2 * (plain - 1) * fs->nodesize);

	fs_close(fs);
}
