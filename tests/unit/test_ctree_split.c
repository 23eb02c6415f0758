// SPDX-License-Identifier: GPL-2.0-only
/* Split choices at the edges of a tree (leaf_choose_split_edge,
 * node_choose_split, and the COW write path that uses them): keys inserted in
 * ascending (descending) order must leave every leaf full but the last
 * (first) one, so the leaf count is the ideal ceil(N / items per leaf), at
 * node sizes 4, 16 and 64 KiB; splits inside a leaf or away from the edges
 * stay balanced, and random inserts still give a valid tree. The write-path
 * tests build the uuid tree anew in real images, reopen them after the
 * commit, check every block's layout, the items against what went in, and
 * finally run the reference checker. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <btk/block.h>
#include <btk/ctree_ops.h>
#include <btk/trans.h>
#include <btk/tree.h>
#include <btk/walk.h>
#include "tests/unit/fixtures.h"

#include "tests/unit/under_valgrind.h"

#define ITEM CTREE_ITEM_SIZE
#define TREE BTRFS_UUID_TREE_OBJECTID

static const uint32_t nodesizes[] = { 4096, 16384, 65536 };
#define NR_NODESIZES (sizeof(nodesizes) / sizeof(nodesizes[0]))

static unsigned per_leaf(uint32_t ns, uint32_t size)
{
	return leaf_data_size(ns) / (size + ITEM);
}

static unsigned ceil_div(unsigned a, unsigned b)
{
	return (a + b - 1) / b;
}

/* ------------------------------------------------- in-buffer leaves */

static uint8_t *new_leaf(uint32_t ns)
{
	uint8_t *b = calloc(1, ns);

	cr_assert_not_null(b);
	header_set_bytenr(b, 1ULL << 30);
	header_set_generation(b, 7);
	header_set_owner(b, TREE);
	header_set_level(b, 0);
	return b;
}

/* A row of leaves filled in key order from one end, split as planned. */
struct row {
	uint32_t ns;
	uint8_t *leaf[8192];
	unsigned n;
};

static void row_add(struct row *r, unsigned at, uint8_t *leaf)
{
	cr_assert_lt(r->n, sizeof(r->leaf) / sizeof(r->leaf[0]));
	memmove(&r->leaf[at + 1], &r->leaf[at], (r->n - at) * sizeof(r->leaf[0]));
	r->leaf[at] = leaf;
	r->n++;
}

/* Insert key objectid k of `size` bytes after everything (descending == 0)
 * or before everything, splitting with the edge hint (or none). */
static void row_put(struct row *r, uint64_t k, uint32_t size, int descending, unsigned edge)
{
	struct btrfs_key key = { k, BTRFS_UUID_KEY_SUBVOL, 0 };
	unsigned i = descending ? 0 : r->n - 1;
	unsigned slot = descending ? 0 : header_nritems(r->leaf[i]);
	struct leaf_split_plan plan;
	uint8_t *nb[2] = { NULL, NULL };

	if (leaf_free_space(r->leaf[i], r->ns) < size + ITEM) {
		cr_assert_eq(leaf_choose_split_edge(r->leaf[i], r->ns, slot, size, edge, &plan), 0);
		cr_assert_gt(plan.nr_new, 0);
		for (unsigned j = 0; j < plan.nr_new; j++)
			nb[j] = new_leaf(r->ns);
		cr_assert_eq(leaf_split_apply(r->leaf[i], nb[0], nb[1], r->ns, &plan), 0);
		for (unsigned j = 0; j < plan.nr_new; j++)
			row_add(r, i + 1 + j, nb[j]);
		i += plan.target;
		slot = plan.slot;
	}
	cr_assert_eq(leaf_insert_items(r->leaf[i], r->ns, slot, &key, &size, 1), 0);
}

/* Every leaf valid and non-empty, keys 1..n in order; returns the leaf count. */
static unsigned row_check(struct row *r, unsigned n)
{
	uint64_t next = 1;
	char why[160];

	for (unsigned i = 0; i < r->n; i++) {
		cr_assert_eq(block_check_layout(r->leaf[i], r->ns, why, sizeof(why)), 0, "leaf %u: %s", i, why);
		cr_assert_gt(header_nritems(r->leaf[i]), 0, "leaf %u empty", i);
		for (unsigned s = 0; s < header_nritems(r->leaf[i]); s++) {
			struct btrfs_key k;
			key_from_disk(&k, item_key_ptr(leaf_item(r->leaf[i], s)));
			cr_assert_eq(k.objectid, next, "leaf %u slot %u: key %llu, want %llu", i, s,
				     (unsigned long long)k.objectid, (unsigned long long)next);
			next++;
		}
	}
	cr_assert_eq(next, (uint64_t)n + 1);
	return r->n;
}

static void row_free(struct row *r)
{
	for (unsigned i = 0; i < r->n; i++)
		free(r->leaf[i]);
	r->n = 0;
}

/* n items of `size` bytes in order from one end; returns the leaf count,
 * having checked the full-but-one shape when edge hints are given. */
static unsigned fill_row(uint32_t ns, uint32_t size, unsigned n, int descending, unsigned edge)
{
	static struct row r;
	unsigned per = per_leaf(ns, size), leaves;

	r.ns = ns;
	r.n = 0;
	row_add(&r, 0, new_leaf(ns));
	for (unsigned i = 0; i < n; i++)
		row_put(&r, descending ? n - i : i + 1, size, descending, edge);
	leaves = row_check(&r, n);
	if (edge & (descending ? CTREE_EDGE_LEFT : CTREE_EDGE_RIGHT)) {
		cr_assert_eq(leaves, ceil_div(n, per), "ns %u size %u n %u %s: %u leaves, ideal %u", ns, size, n,
			     descending ? "descending" : "ascending", leaves, ceil_div(n, per));
		for (unsigned i = 0; i < leaves; i++) {
			unsigned partial = descending ? 0 : leaves - 1;
			if (i != partial)
				cr_assert_eq(header_nritems(r.leaf[i]), per, "ns %u size %u: leaf %u has %u items, not %u",
					     ns, size, i, header_nritems(r.leaf[i]), per);
		}
	}
	row_free(&r);
	return leaves;
}

Test(ctree_split, sequential_fills_leaves)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		uint32_t sizes[] = { 0, 8, 100, ns / 5, leaf_data_size(ns) / 2 - ITEM, leaf_data_size(ns) / 2 - ITEM + 1,
				     leaf_max_item_size(ns) };
		for (unsigned s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
			unsigned per = per_leaf(ns, sizes[s]);
			unsigned counts[] = { 1, per, per + 1, 4 * per + 3 };
			for (unsigned c = 0; c < 4; c++) {
				unsigned n = counts[c] > 1500 ? 1500 : counts[c];
				fill_row(ns, sizes[s], n, 0, CTREE_EDGE_RIGHT);
				fill_row(ns, sizes[s], n, 1, CTREE_EDGE_LEFT);
				fill_row(ns, sizes[s], n, 0, CTREE_EDGE_LEFT | CTREE_EDGE_RIGHT);
			}
		}
	}
}

/* Without the hint the same appends cut in the middle: more leaves. Shows
 * the counting above can tell the two apart. */
Test(ctree_split, middle_cut_without_hint)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		unsigned per = per_leaf(ns, 100), n = 5 * per;
		cr_assert_gt(fill_row(ns, 100, n, 0, 0), ceil_div(n, per) + 2);
		cr_assert_gt(fill_row(ns, 100, n, 1, 0), ceil_div(n, per) + 2);
		/* the wrong edge changes nothing either */
		cr_assert_gt(fill_row(ns, 100, n, 0, CTREE_EDGE_LEFT), ceil_div(n, per) + 2);
		cr_assert_gt(fill_row(ns, 100, n, 1, CTREE_EDGE_RIGHT), ceil_div(n, per) + 2);
	}
}

/* Away from the edge slots, or when the item fits, the hint changes nothing. */
Test(ctree_split, hint_only_at_edge_slots)
{
	srand(1234);
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		for (unsigned round = 0; round < 300; round++) {
			uint8_t *leaf = new_leaf(ns);
			unsigned n = 0;
			uint32_t size;
			/* fill with random sizes until nearly full */
			for (;;) {
				struct btrfs_key k = { n + 1, BTRFS_UUID_KEY_SUBVOL, 0 };
				size = (uint32_t)rand() % (ns / 6);
				if (leaf_free_space(leaf, ns) < size + ITEM)
					break;
				cr_assert_eq(leaf_insert_items(leaf, ns, n, &k, &size, 1), 0);
				n++;
			}
			size = (uint32_t)rand() % leaf_max_item_size(ns);
			for (unsigned slot = 0; slot <= n; slot++) {
				struct leaf_split_plan a, b;
				cr_assert_eq(leaf_choose_split(leaf, ns, slot, size, &a), 0);
				cr_assert_eq(leaf_choose_split_edge(leaf, ns, slot, size,
								    CTREE_EDGE_LEFT | CTREE_EDGE_RIGHT, &b), 0);
				if (a.nr_new == 0 || (slot != 0 && slot != n)) {
					cr_assert(memcmp(&a, &b, sizeof(a)) == 0, "ns %u slot %u of %u: plan changed",
						  ns, slot, n);
				} else if (slot == n) {
					cr_assert(b.nr_new == 1 && b.cut[0] == n && b.target == 1 && b.slot == 0);
				} else {
					cr_assert(b.nr_new == 1 && b.cut[0] == 0 && b.target == 0 && b.slot == 0);
				}
			}
			cr_assert_eq(leaf_choose_split_edge(leaf, ns, n + 1, size, CTREE_EDGE_RIGHT, &(struct leaf_split_plan){ 0 }),
				     -EINVAL);
			free(leaf);
		}
	}
}

Test(ctree_split, node_cut)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		uint8_t *node = calloc(1, ns);
		unsigned max = node_max_ptrs(ns);

		cr_assert_not_null(node);
		header_set_level(node, 1);
		header_set_nritems(node, max - 1);
		cr_assert_eq(node_choose_split(node, max - 2, CTREE_EDGE_RIGHT), max - 2);
		cr_assert_eq(node_choose_split(node, max - 2, CTREE_EDGE_LEFT), (max - 1) / 2);
		cr_assert_eq(node_choose_split(node, max - 3, CTREE_EDGE_RIGHT), (max - 1) / 2);
		cr_assert_eq(node_choose_split(node, 0, CTREE_EDGE_LEFT), 1);
		cr_assert_eq(node_choose_split(node, 0, CTREE_EDGE_RIGHT), (max - 1) / 2);
		cr_assert_eq(node_choose_split(node, 1, CTREE_EDGE_LEFT), (max - 1) / 2);
		cr_assert_eq(node_choose_split(node, 0, 0), (max - 1) / 2);
		header_set_nritems(node, 1);
		cr_assert_eq(node_choose_split(node, 0, CTREE_EDGE_LEFT | CTREE_EDGE_RIGHT), 0);
		free(node);
	}
}

/* ------------------------------------------------- the COW write path */

/* Data of an item: a function of its key, so only keys need remembering. */
static void item_data(const struct btrfs_key *k, uint8_t *buf, uint32_t size)
{
	for (uint32_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(k->objectid * 31 + k->offset * 7 + i);
}

static int key_cmp(const void *a, const void *b)
{
	return key_compare(a, b);
}

struct shape {
	uint32_t ns;
	unsigned blocks, leaves, level1, max_level;
	unsigned leaf_items[4096], node_ptrs[256];
	unsigned bad_layout;
	char why[160];
};

static int visit(void *arg, const struct tree_block *b)
{
	struct shape *s = arg;

	s->blocks++;
	if (block_check_layout(b->data, s->ns, s->why, sizeof(s->why)))
		s->bad_layout++;
	if (block_level(b) > s->max_level)
		s->max_level = block_level(b);
	if (block_level(b) == 0 && s->leaves < 4096)
		s->leaf_items[s->leaves++] = block_nritems(b);
	if (block_level(b) == 1 && s->level1 < 256)
		s->node_ptrs[s->level1++] = block_nritems(b);
	return 0;
}

/* Reopen the image; the tree must hold exactly keys[0..n) (sorted) with
 * sizes from size_of and data from item_data. Records its shape. */
static void verify(uint8_t *buf, size_t bufsize, const struct btrfs_key *keys, size_t n,
		   uint32_t (*size_of)(const struct btrfs_key *, uint32_t), struct shape *sh)
{
	struct fs_info *fs = fixture_open_buffer(buf, bufsize, false);
	struct tree_walk_ops ops = { visit, NULL, sh };
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_root_ptr root;
	struct tree_iter it;
	const uint8_t *data;
	uint8_t *want = malloc(fs->nodesize);
	uint32_t size;
	uint64_t bad = 0;
	size_t i = 0;
	int ret;

	cr_assert_not_null(want);
	memset(sh, 0, sizeof(*sh));
	sh->ns = fs->nodesize;
	cr_assert_eq(fs_find_root(fs, TREE, &root), 0, "%s", btk_error_msg());
	cr_assert_eq(tree_walk(fs, &root, &ops, &bad), 0, "tree_walk: %s", btk_error_msg());
	cr_assert_eq(bad, 0);
	cr_assert_eq(sh->bad_layout, 0, "bad block layout: %s", sh->why);
	cr_assert_eq(sh->max_level, root.level);
	tree_iter_init(&it, fs, &root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		cr_assert_lt(i, n, "more items than inserted");
		cr_assert_eq(key_compare(&key, &keys[i]), 0, "item %zu: key differs", i);
		cr_assert_eq(size, size_of(&key, fs->nodesize), "item %zu: size %u", i, size);
		item_data(&key, want, size);
		cr_assert(memcmp(data, want, size) == 0, "item %zu: data differs", i);
		i++;
	}
	tree_iter_release(&it);
	cr_assert_eq(ret, 0, "tree_iter: %s", btk_error_msg());
	cr_assert_eq(i, n, "%zu items, inserted %zu", i, n);
	free(want);
	fs_close(fs);
}

static uint32_t g_fixed_size;

static uint32_t fixed_size(const struct btrfs_key *k, uint32_t ns)
{
	(void)k;
	(void)ns;
	return g_fixed_size;
}

/* Mostly a tenth to a quarter of a leaf, one in 16 over half a leaf; from the key. */
static uint32_t random_size(const struct btrfs_key *k, uint32_t ns)
{
	uint64_t h = (k->objectid ^ (k->offset * 0x9e3779b97f4a7c15ULL)) * 0xff51afd7ed558ccdULL;
	uint32_t lo = ns / 10, hi = ns / 4;

	h ^= h >> 29;
	if (h % 16 == 0) {
		lo = ns / 2 + 8;
		hi = leaf_max_item_size(ns) + 1;
	}
	return (uint32_t)((lo + (h >> 8) % (hi - lo)) & ~7u);
}

/* Build the uuid tree anew in a copy of the recipe's image from keys, in the
 * given order, commit, and verify against the sorted keys. */
static void build_tree(const char *recipe, struct btrfs_key *keys, size_t n,
		       uint32_t (*size_of)(const struct btrfs_key *, uint32_t), struct shape *sh, bool check)
{
	uint8_t *buf, *data;
	size_t bufsize;
	struct fs_info *fs;
	struct trans *t;

	fixture_image_copy(recipe, &buf, &bufsize);
	fs = fixture_open_buffer(buf, bufsize, true);
	data = malloc(fs->nodesize);
	cr_assert_not_null(data);
	cr_assert_eq(trans_start(fs, &t), 0, "%s", btk_error_msg());
	cr_assert_eq(trans_delete_tree(t, TREE), 0, "%s", btk_error_msg());
	cr_assert_eq(trans_create_tree(t, TREE), 0, "%s", btk_error_msg());
	for (size_t i = 0; i < n; i++) {
		uint32_t size = size_of(&keys[i], fs->nodesize);
		item_data(&keys[i], data, size);
		cr_assert_eq(trans_insert_item(t, TREE, &keys[i], data, size), 0, "insert %zu: %s", i, btk_error_msg());
	}
	cr_assert_eq(trans_commit(t), 0, "commit: %s", btk_error_msg());
	fs_close(fs);
	free(data);
	qsort(keys, n, sizeof(*keys), key_cmp);
	verify(buf, bufsize, keys, n, size_of, sh);
	if (check)
		fixture_btrfs_check_clean(buf, bufsize);
	munmap(buf, bufsize);
}

/* n items of `size` bytes in ascending or descending key order: leaves full
 * but one, at the ideal count; level-1 nodes as well (but for the two slack
 * pointers the top-down split keeps) when the tree has them. */
static void sequential(const char *recipe, uint32_t ns, uint32_t size, unsigned n, int descending, int want_level,
		       bool check)
{
	struct btrfs_key *keys = calloc(n, sizeof(*keys));
	struct shape *sh = malloc(sizeof(*sh));
	unsigned per = per_leaf(ns, size), partial, max = node_max_ptrs(ns);

	cr_assert(keys && sh);
	for (unsigned i = 0; i < n; i++)
		keys[i] = (struct btrfs_key){ descending ? n - i : i + 1, BTRFS_UUID_KEY_SUBVOL, 0x5eed };
	g_fixed_size = size;
	build_tree(recipe, keys, n, fixed_size, sh, check);
	cr_log_info("%s size %u %s: %u leaves (ideal %u), %u level-1 nodes, level %u", recipe, size,
		    descending ? "descending" : "ascending", sh->leaves, ceil_div(n, per), sh->level1, sh->max_level);
	cr_assert_eq(sh->ns, ns);
	cr_assert_geq(sh->max_level, (unsigned)want_level, "tree only reached level %u", sh->max_level);
	cr_assert_eq(sh->leaves, ceil_div(n, per), "%s size %u: %u leaves, ideal %u", recipe, size, sh->leaves,
		     ceil_div(n, per));
	partial = descending ? 0 : sh->leaves - 1;
	for (unsigned i = 0; i < sh->leaves; i++)
		if (i != partial)
			cr_assert_eq(sh->leaf_items[i], per, "leaf %u has %u items, not %u", i, sh->leaf_items[i], per);
	if (sh->level1 > 1) {
		partial = descending ? 0 : sh->level1 - 1;
		for (unsigned i = 0; i < sh->level1; i++)
			if (i != partial)
				cr_assert_geq(sh->node_ptrs[i], max - 2, "node %u has %u pointers of %u", i,
					      sh->node_ptrs[i], max);
	}
	free(keys);
	free(sh);
}

Test(ctree_split, cow_sequential_4k)
{
	/* 2 items per leaf, 300 leaves: more than one node of 121 pointers;
	 * the reference checker on both (not under valgrind: it would trace it) */
	sequential("deep", 4096, 1400, 600, 0, 2, !RUNNING_ON_VALGRIND);
	sequential("deep", 4096, 1400, 600, 1, 2, !RUNNING_ON_VALGRIND);
	sequential("deep", 4096, 16, 3000, 0, 1, false);
}

Test(ctree_split, cow_sequential_16k)
{
	/* 3 items per leaf, 520 leaves: more than one node of 493 pointers */
	sequential("small", 16384, 5400, 1560, 0, 2, false);
	sequential("small", 16384, 5400, 1560, 1, 2, false);
	sequential("small", 16384, 24, 5000, 0, 1, false);
}

Test(ctree_split, cow_sequential_64k)
{
	sequential("n64k", 65536, 20000, 300, 0, 1, false);
	sequential("n64k", 65536, 20000, 300, 1, 1, false);
	sequential("n64k", 65536, 40, 5000, 1, 1, false);
}

/* Random keys and sizes: every block valid, every item there. */
static void random_inserts(const char *recipe, unsigned n, uint64_t seed)
{
	struct btrfs_key *keys = calloc(n, sizeof(*keys));
	struct shape *sh = malloc(sizeof(*sh));
	uint64_t x = seed;

	cr_assert(keys && sh);
	for (unsigned i = 0; i < n; i++) {
		/* xorshift; objectids distinct, so are the keys */
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		keys[i] = (struct btrfs_key){ (x & ~0xffffULL) | i, BTRFS_UUID_KEY_SUBVOL, x >> 40 };
		/* a third of them in runs of ascending keys, like appends */
		if (i % 3 == 2)
			keys[i] = (struct btrfs_key){ keys[i - 1].objectid + 1, BTRFS_UUID_KEY_SUBVOL, 1 };
	}
	/* the reference checker too, but not under valgrind (it would trace it) */
	build_tree(recipe, keys, n, random_size, sh, !RUNNING_ON_VALGRIND);
	cr_assert_geq(sh->max_level, 1);
	free(keys);
	free(sh);
}

Test(ctree_split, cow_random_4k)
{
	random_inserts("deep", 1500, 0x4b1d);
}

Test(ctree_split, cow_random_16k)
{
	random_inserts("small", 1500, 0x16c0de);
}

Test(ctree_split, cow_random_64k)
{
	random_inserts("n64k", 1000, 0x64);
}
