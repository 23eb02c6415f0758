// SPDX-License-Identifier: GPL-2.0-only
/* Tree blocks of a real image: a damaged first copy is survived through the
 * second (and reported), two damaged copies are an error naming the block,
 * block_verify catches each kind of header and layout damage, and the cache
 * counts hits and misses and stays within its budget. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <btk/block.h>
#include <btk/csum.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include "tests/unit/fixtures.h"

static struct note_log notes;

static struct fs_info *open_with_notes(const char *recipe, uint64_t cache_bytes)
{
	struct fs_open_options opts;

	memset(&notes, 0, sizeof(notes));
	fs_open_options_init(&opts);
	opts.note = fixture_note;
	opts.note_arg = &notes;
	opts.cache_bytes = cache_bytes;
	return fixture_open(recipe, &opts);
}

/* bytenr of the first leaf of the fs tree (which has nodes above it). */
static uint64_t first_fs_leaf(struct fs_info *fs)
{
	struct btrfs_key key = { 0, 0, 0 };
	struct tree_path path;
	uint64_t bytenr;

	cr_assert_geq(fs->fs_root.level, 1, "the fixture's fs tree must have nodes");
	tree_path_init(&path);
	cr_assert_eq(tree_search(fs, &fs->fs_root, &key, &path), 0, "%s", btk_error_msg());
	bytenr = path.nodes[0]->bytenr;
	cr_assert_eq(block_level(path.nodes[0]), 0);
	tree_path_release(fs, &path);
	return bytenr;
}

/* Raw copy `mirror` of a block, which must be good. */
static uint8_t *good_copy(struct fs_info *fs, uint64_t bytenr, int mirror)
{
	uint8_t *buf = malloc(fs->nodesize);

	cr_assert_not_null(buf);
	cr_assert_eq(block_read_copy(fs, bytenr, mirror, NULL, buf), BLOCK_OK);
	return buf;
}

static void recsum(struct fs_info *fs, uint8_t *buf)
{
	uint8_t csum[BTRFS_CSUM_SIZE];

	cr_assert_eq(csum_compute(fs->csum_type, buf + BTRFS_CSUM_SIZE, fs->nodesize - BTRFS_CSUM_SIZE, csum), 0);
	memcpy(header_csum_ptr(buf), csum, BTRFS_CSUM_SIZE);
}

Test(block_read, bad_first_copy_is_survived_through_the_second)
{
	struct fs_info *fs = open_with_notes("small", 0);
	uint64_t leaf = first_fs_leaf(fs);
	uint8_t *want = good_copy(fs, leaf, 1), *scratch = malloc(fs->nodesize);
	struct tree_block *b;
	char where[64];

	cr_assert_not_null(scratch);
	cr_assert_eq(volumes_num_copies(fs, leaf), 2, "metadata is DUP in the fixture");
	memset(&notes, 0, sizeof(notes));
	cr_assert_eq(fixture_corrupt_block(fs, leaf, 0), 0);
	cr_assert_eq(block_read_copy(fs, leaf, 0, NULL, scratch), BLOCK_BAD_CSUM);
	cr_assert_eq(block_read_copy(fs, leaf, 1, NULL, scratch), BLOCK_OK);
	free(scratch);

	cr_assert_eq(block_read(fs, leaf, &BLOCK_EXPECT_ANY, &b), 0, "%s", btk_error_msg());
	cr_assert_eq(b->mirror, 1, "the data came from the second copy");
	cr_assert_eq(b->bytenr, leaf);
	cr_assert_eq(memcmp(b->data, want, fs->nodesize), 0, "the good copy's bytes are returned");
	snprintf(where, sizeof(where), "tree block %llu copy 1: checksum mismatch", (unsigned long long)leaf);
	cr_assert(strstr(notes.all, where), "the bad copy is reported: %s", notes.all);
	cr_assert_geq(notes.count[FS_NOTE_WARNING], 1);
	cr_assert(strstr(notes.all, "using copy 2"), "%s", notes.all);
	block_put(fs, b);
	free(want);
	fs_close(fs);
}

Test(block_read, both_copies_bad_is_an_error_naming_the_block)
{
	struct fs_info *fs = open_with_notes("small", 0);
	uint64_t leaf = first_fs_leaf(fs);
	struct tree_block *b = (struct tree_block *)&b;
	char name[32];
	int ret;

	cr_assert_eq(fixture_corrupt_block(fs, leaf, -1), 0);
	btk_error_clear();
	ret = block_read(fs, leaf, &BLOCK_EXPECT_ANY, &b);
	cr_assert_eq(ret, -EUCLEAN, "got %d", ret);
	cr_assert_null(b);
	snprintf(name, sizeof(name), "%llu", (unsigned long long)leaf);
	cr_assert(strstr(btk_error_msg(), name), "message names the block: %s", btk_error_msg());
	cr_assert(strstr(btk_error_msg(), "no good copy"), "%s", btk_error_msg());
	cr_assert(strstr(btk_error_msg(), "checksum mismatch"), "%s", btk_error_msg());
	/* -EUCLEAN, but typed: every copy failed its checksum, at this block */
	cr_assert_eq(btk_last_error()->kind, BTK_ERR_CSUM, "%s", btk_err_kind_name(btk_last_error()->kind));
	cr_assert_eq(btk_last_error()->bytenr, leaf);
	cr_assert_geq(notes.count[FS_NOTE_WARNING], 2, "each bad copy is reported: %s", notes.all);
	fs_close(fs);
}

Test(block_read, misplaced_block_is_rejected_by_bytenr)
{
	/* both copies hold a valid block, but of another address */
	struct fs_info *fs = open_with_notes("small", 0);
	uint64_t leaf = first_fs_leaf(fs);
	uint8_t *other = good_copy(fs, fs->tree_root.bytenr, 0);
	struct phys_copy copies[MAX_COPIES];
	struct tree_block *b;
	int n = volumes_map(fs, leaf, fs->nodesize, copies, NULL);

	cr_assert_eq(n, 2);
	for (int m = 0; m < n; m++)
		cr_assert_eq(io_write(copies[m].dev->io, other, fs->nodesize, copies[m].physical), 0);
	fixture_drop_cache(fs, 0);
	cr_assert_eq(block_read(fs, leaf, &BLOCK_EXPECT_ANY, &b), -EUCLEAN);
	cr_assert(strstr(btk_error_msg(), "bytenr mismatch"), "%s", btk_error_msg());
	free(other);
	fs_close(fs);
}

Test(block_read, unaligned_and_unmapped_addresses)
{
	struct fs_info *fs = open_with_notes("small", 0);
	struct tree_block *b;

	cr_assert_eq(block_read(fs, fs->tree_root.bytenr + 512, NULL, &b), -EUCLEAN);
	cr_assert(strstr(btk_error_msg(), "not aligned"), "%s", btk_error_msg());
	cr_assert_null(b);
	cr_assert_eq(block_read(fs, 1ULL << 50, NULL, &b), -EUCLEAN);
	cr_assert(strstr(btk_error_msg(), "not in any chunk"), "%s", btk_error_msg());
	fs_close(fs);
}

Test(block_read, expectations_are_checked_also_on_cached_blocks)
{
	struct fs_info *fs = open_with_notes("small", 0);
	uint64_t leaf = first_fs_leaf(fs);
	struct tree_block *a, *b;
	struct block_expect e = BLOCK_EXPECT_ANY;

	cr_assert_eq(block_read(fs, leaf, NULL, &a), 0);
	e.generation = block_generation(a) + 1;
	cr_assert_eq(block_read(fs, leaf, &e, &b), -EUCLEAN, "a newer generation was expected");
	cr_assert(strstr(btk_error_msg(), "generation"), "%s", btk_error_msg());
	e = BLOCK_EXPECT_ANY;
	e.level = 1;
	cr_assert_eq(block_read(fs, leaf, &e, &b), -EUCLEAN, "a node was expected");
	e = BLOCK_EXPECT_ANY;
	e.owner = BTRFS_FS_TREE_OBJECTID;
	e.generation = block_generation(a);
	e.level = 0;
	cr_assert_eq(block_read(fs, leaf, &e, &b), 0, "%s", btk_error_msg());
	cr_assert_eq(a, b, "the same cached block");
	cr_assert_eq(block_owner(b), BTRFS_FS_TREE_OBJECTID);
	block_put(fs, b);
	block_put(fs, a);
	fs_close(fs);
}

/* ---- block_verify on modified copies of a good block ---- */

static void expect_problem(struct fs_info *fs, uint64_t bytenr, const uint8_t *buf,
			   const struct block_expect *e, enum block_problem want, const char *what)
{
	enum block_problem got = block_verify(fs, bytenr, buf, e);

	cr_assert_eq(got, want, "%s: got \"%s\", want \"%s\"", what, block_problem_name(got),
		     block_problem_name(want));
}

Test(block_verify, leaf_damage)
{
	struct fs_info *fs = open_with_notes("small", 0);
	uint64_t leaf = first_fs_leaf(fs);
	uint8_t *good = good_copy(fs, leaf, 0), *buf = malloc(fs->nodesize);
	struct btrfs_key first, k0, k1;
	struct block_expect e;
	uint32_t n = header_nritems(good);

	cr_assert_not_null(buf);
	cr_assert_geq(n, 3);
	key_from_disk(&first, item_key_ptr(leaf_item(good, 0)));
	e = BLOCK_EXPECT_ANY;
	e.generation = header_generation(good);
	e.level = 0;
	e.owner = BTRFS_FS_TREE_OBJECTID;
	e.first_key = &first;
	expect_problem(fs, leaf, good, &e, BLOCK_OK, "untouched");
	expect_problem(fs, leaf, good, NULL, BLOCK_OK, "untouched, no expectations");

#define MUTATE(stmt) (memcpy(buf, good, fs->nodesize), (void)(stmt), recsum(fs, buf))
	memcpy(buf, good, fs->nodesize);
	buf[fs->nodesize - 1] ^= 1;
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_CSUM, "flipped data byte");
	memcpy(buf, good, fs->nodesize);
	header_csum_ptr(buf)[0] ^= 1;
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_CSUM, "flipped checksum byte");

	MUTATE(header_set_bytenr(buf, leaf + fs->nodesize));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_BYTENR, "wrong bytenr in the header");
	expect_problem(fs, leaf + fs->nodesize, good, NULL, BLOCK_BAD_BYTENR, "read from the wrong place");

	MUTATE(header_fsid_ptr(buf)[3] ^= 0x10);
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_FSID, "other filesystem's block");

	MUTATE(header_set_level(buf, BTRFS_MAX_LEVEL));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_LEVEL, "level out of range");
	e.level = 1;
	expect_problem(fs, leaf, good, &e, BLOCK_BAD_LEVEL, "a node was expected");
	e.level = 0;

	e.generation++;
	expect_problem(fs, leaf, good, &e, BLOCK_BAD_GENERATION, "parent expects a newer generation");
	e.generation--;
	MUTATE(header_set_generation(buf, header_generation(buf) - 1));
	expect_problem(fs, leaf, buf, &e, BLOCK_BAD_GENERATION, "stale block (lost write)");

	e.owner = BTRFS_CSUM_TREE_OBJECTID;
	expect_problem(fs, leaf, good, &e, BLOCK_BAD_OWNER, "block of another tree");
	e.owner = BTRFS_FS_TREE_OBJECTID;

	key_from_disk(&k1, item_key_ptr(leaf_item(good, 1)));
	e.first_key = &k1;
	expect_problem(fs, leaf, good, &e, BLOCK_BAD_FIRST_KEY, "parent's key differs");
	e.first_key = &first;

	/* keys out of order: swap the first two item keys */
	MUTATE((key_from_disk(&k0, item_key_ptr(leaf_item(buf, 0))),
		key_from_disk(&k1, item_key_ptr(leaf_item(buf, 1))),
		key_to_disk(item_key_ptr(leaf_item(buf, 0)), &k1),
		key_to_disk(item_key_ptr(leaf_item(buf, 1)), &k0)));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_ITEMS, "unsorted keys");
	MUTATE((key_from_disk(&k0, item_key_ptr(leaf_item(buf, 0))),
		key_to_disk(item_key_ptr(leaf_item(buf, 1)), &k0)));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_ITEMS, "duplicate keys");

	/* item data outside the block or not packed */
	MUTATE(item_set_offset(leaf_item(buf, 0), fs->nodesize));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_ITEMS, "item offset past the end");
	MUTATE(item_set_size(leaf_item(buf, 0), UINT32_MAX));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_ITEMS, "item size overflows");
	MUTATE(item_set_offset(leaf_item(buf, 1), item_offset(leaf_item(buf, 1)) - 1));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_ITEMS, "gap between item data");
	/* the last item's data reaching down over the item headers, still packed */
	MUTATE((item_set_size(leaf_item(buf, n - 1),
			      item_offset(leaf_item(buf, n - 1)) + item_size(leaf_item(buf, n - 1))),
		item_set_offset(leaf_item(buf, n - 1), 0)));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_ITEMS, "item data over the item headers");

	MUTATE(header_set_nritems(buf, 1000000));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_NRITEMS, "absurd item count");
	MUTATE(header_set_nritems(buf, n + 1));
	expect_problem(fs, leaf, buf, NULL, BLOCK_BAD_ITEMS, "one item more than written");
#undef MUTATE
	free(buf);
	free(good);
	fs_close(fs);
}

Test(block_verify, node_damage)
{
	struct fs_info *fs = open_with_notes("small", 0);
	uint64_t node = fs->fs_root.bytenr;
	uint8_t *good = good_copy(fs, node, 0), *buf = malloc(fs->nodesize);
	struct btrfs_key k0, k1;
	uint32_t n = header_nritems(good);

	cr_assert_not_null(buf);
	cr_assert_geq(header_level(good), 1);
	cr_assert_geq(n, 2);
	expect_problem(fs, node, good, NULL, BLOCK_OK, "untouched");
#define MUTATE(stmt) (memcpy(buf, good, fs->nodesize), (void)(stmt), recsum(fs, buf))
	MUTATE(header_set_nritems(buf, 0));
	expect_problem(fs, node, buf, NULL, BLOCK_BAD_NRITEMS, "empty node");
	MUTATE(header_set_nritems(buf, fs->nodesize / 33 + 1));
	expect_problem(fs, node, buf, NULL, BLOCK_BAD_NRITEMS, "more pointers than fit");
	MUTATE(key_ptr_set_blockptr(node_key_ptr(buf, 1), 0));
	expect_problem(fs, node, buf, NULL, BLOCK_BAD_ITEMS, "null child pointer");
	MUTATE((key_from_disk(&k0, key_ptr_key_ptr(node_key_ptr(buf, 0))),
		key_from_disk(&k1, key_ptr_key_ptr(node_key_ptr(buf, 1))),
		key_to_disk(key_ptr_key_ptr(node_key_ptr(buf, 0)), &k1),
		key_to_disk(key_ptr_key_ptr(node_key_ptr(buf, 1)), &k0)));
	expect_problem(fs, node, buf, NULL, BLOCK_BAD_ITEMS, "unsorted node keys");
#undef MUTATE
	free(buf);
	free(good);
	fs_close(fs);
}

Test(block_verify, problem_names)
{
	for (int p = BLOCK_OK; p <= BLOCK_BAD_ITEMS; p++) {
		const char *name = block_problem_name((enum block_problem)p);
		cr_assert(name && *name && strcmp(name, "unknown problem"), "problem %d has no name", p);
	}
	cr_assert_str_eq(block_problem_name(BLOCK_BAD_CSUM), "checksum mismatch");
	cr_assert_str_eq(block_problem_name((enum block_problem)999), "unknown problem");
	cr_assert_str_eq(block_problem_name((enum block_problem)-1), "unknown problem");
}

/* ---- the cache ---- */

Test(block_cache, second_read_is_a_hit)
{
	struct fs_info *fs = open_with_notes("small", 0);
	uint64_t leaf = first_fs_leaf(fs);
	struct block_cache_stats st;
	struct tree_block *a, *b;

	fixture_drop_cache(fs, 0);
	block_cache_get_stats(fs, &st);
	cr_assert_eq(st.hits + st.misses + st.bytes, 0);
	cr_assert_eq(block_read(fs, leaf, NULL, &a), 0);
	block_put(fs, a);
	cr_assert_eq(block_read(fs, leaf, NULL, &b), 0);
	block_cache_get_stats(fs, &st);
	cr_assert_eq(st.misses, 1);
	cr_assert_eq(st.hits, 1);
	cr_assert_eq(st.bytes, fs->nodesize);
	cr_assert_eq(st.evictions, 0);
	cr_assert_eq(a, b);
	block_put(fs, b);
	fs_close(fs);
}

Test(block_cache, tiny_budget_evicts_and_stays_bounded)
{
	struct fs_info *fs;
	struct block_cache_stats st;
	struct btrfs_key min = { 0, 0, 0 }, max = { UINT64_MAX, 255, UINT64_MAX }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size, nodesize;
	uint64_t items = 0, budget;
	int ret;

	fs = open_with_notes("deep", 2 * 4096);
	nodesize = fs->nodesize;
	budget = 2ULL * nodesize;
	cr_assert_eq(nodesize, 4096);
	cr_assert_geq(fs->fs_root.level, 2);
	tree_iter_init(&it, fs, &fs->fs_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		items++;
	cr_assert_eq(ret, 0, "%s", btk_error_msg());
	tree_iter_release(&it);
	block_cache_get_stats(fs, &st);
	cr_assert_gt(items, 3000 * 4, "every file has at least four items");
	cr_assert_gt(st.evictions, 100, "blocks were evicted (%llu)", (unsigned long long)st.evictions);
	/* one referenced block per level of the path, plus the one being read */
	cr_assert_leq(st.peak_bytes, budget + (uint64_t)(fs->fs_root.level + 2) * nodesize,
		      "peak %llu bytes with a budget of %llu", (unsigned long long)st.peak_bytes,
		      (unsigned long long)budget);
	cr_assert_leq(st.bytes, budget, "nothing referenced: back under budget (%llu)",
		      (unsigned long long)st.bytes);
	fs_close(fs);
}
