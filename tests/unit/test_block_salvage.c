// SPDX-License-Identifier: GPL-2.0-only
/* Salvage of tree blocks that verify but are laid out wrong (a real leaf of
 * the fixture, damaged in memory): a shifted offset or size is put back, the
 * items come out identical; swapped items are sorted, swapped keys go back
 * to their data, a lone raised key is mended; a huge nritems keeps
 * the real items; a wrong level is replaced; two disagreements with the
 * pointer are refused; a block from the future is salvaged only under a
 * pointer of the filesystem's generations; and block_read hands out the salvaged view only when
 * the filesystem asks for it. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/block.h>
#include <btk/block_salvage.h>
#include <btk/csum.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include "tests/unit/fixtures.h"

struct leaf_case {
	struct fs_info *fs;
	uint64_t bytenr;
	uint8_t *orig, *buf;
};

static void leaf_case_open(struct leaf_case *c)
{
	struct btrfs_key key = { 0, 0, 0 };
	struct tree_path path;

	c->fs = fixture_open("small", NULL);
	cr_assert_not_null(c->fs);
	tree_path_init(&path);
	cr_assert_eq(tree_search(c->fs, &c->fs->fs_root, &key, &path), 0, "%s", btk_error_msg());
	c->bytenr = path.nodes[0]->bytenr;
	tree_path_release(c->fs, &path);
	c->orig = malloc(c->fs->nodesize);
	c->buf = malloc(c->fs->nodesize);
	cr_assert(c->orig && c->buf);
	cr_assert_eq(block_read_copy(c->fs, c->bytenr, 0, NULL, c->orig), BLOCK_OK);
	cr_assert_geq(header_nritems(c->orig), 4, "the fixture's first fs leaf has a few items");
	memcpy(c->buf, c->orig, c->fs->nodesize);
}

static void leaf_case_close(struct leaf_case *c)
{
	free(c->orig);
	free(c->buf);
	fs_close(c->fs);
}

/* Every item of a is in b with the same key and bytes, and the layout is valid. */
static void assert_same_items(const struct leaf_case *c, const uint8_t *a, const uint8_t *b)
{
	cr_assert_eq(block_verify_layout(c->fs, b), BLOCK_OK);
	cr_assert_eq(header_nritems(a), header_nritems(b));
	for (unsigned i = 0; i < header_nritems(a); i++) {
		const uint8_t *x = leaf_item(a, i), *y = leaf_item(b, i);
		cr_assert_eq(memcmp(item_key_ptr(x), item_key_ptr(y), sizeof(struct btrfs_disk_key)), 0, "key %u", i);
		cr_assert_eq(item_size(x), item_size(y), "size %u", i);
		cr_assert_eq(memcmp(leaf_item_data(a, i), leaf_item_data(b, i), item_size(x)), 0, "data %u", i);
	}
}

Test(block_salvage, shifted_offset_is_put_back)
{
	struct leaf_case c;
	struct block_salvage s;
	uint8_t *it;

	leaf_case_open(&c);
	it = leaf_item(c.buf, 2);
	item_set_offset(it, item_offset(it) + 8);
	cr_assert_neq(block_verify_layout(c.fs, c.buf), BLOCK_OK);
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &BLOCK_EXPECT_ANY, &s), 0);
	cr_assert(s.what & SALVAGE_ITEM_LAYOUT);
	cr_assert_eq(s.relaid, 1);
	cr_assert_eq(s.dropped, 0);
	assert_same_items(&c, c.orig, c.buf);
	leaf_case_close(&c);
}

Test(block_salvage, wrong_size_is_put_back)
{
	struct leaf_case c;
	struct block_salvage s;
	uint8_t *it;

	leaf_case_open(&c);
	it = leaf_item(c.buf, 1);
	item_set_size(it, item_size(it) + 5);
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &BLOCK_EXPECT_ANY, &s), 0);
	cr_assert_eq(s.dropped, 0);
	assert_same_items(&c, c.orig, c.buf);
	leaf_case_close(&c);
}

Test(block_salvage, swapped_items_are_sorted)
{
	struct leaf_case c;
	struct block_salvage s;
	uint8_t tmp[sizeof(struct btrfs_item)];

	leaf_case_open(&c);
	memcpy(tmp, leaf_item(c.buf, 1), sizeof(tmp));
	memcpy(leaf_item(c.buf, 1), leaf_item(c.buf, 2), sizeof(tmp));
	memcpy(leaf_item(c.buf, 2), tmp, sizeof(tmp));
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &BLOCK_EXPECT_ANY, &s), 0);
	cr_assert(s.what & SALVAGE_KEY_ORDER);
	cr_assert_eq(s.dropped, 0);
	assert_same_items(&c, c.orig, c.buf);
	leaf_case_close(&c);
}

Test(block_salvage, swapped_keys_go_back_to_their_data)
{
	struct leaf_case c;
	struct block_salvage s;
	uint8_t tmp[sizeof(struct btrfs_disk_key)];

	leaf_case_open(&c);
	memcpy(tmp, item_key_ptr(leaf_item(c.buf, 1)), sizeof(tmp));
	memcpy(item_key_ptr(leaf_item(c.buf, 1)), item_key_ptr(leaf_item(c.buf, 2)), sizeof(tmp));
	memcpy(item_key_ptr(leaf_item(c.buf, 2)), tmp, sizeof(tmp));
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &BLOCK_EXPECT_ANY, &s), 0);
	cr_assert(s.what & SALVAGE_KEY_ORDER);
	cr_assert_eq(s.dropped, 0);
	assert_same_items(&c, c.orig, c.buf);
	leaf_case_close(&c);
}

Test(block_salvage, lone_raised_key_is_mended_from_its_neighbours)
{
	struct leaf_case c;
	struct block_salvage s;
	struct btrfs_key k;

	leaf_case_open(&c);
	key_from_disk(&k, item_key_ptr(leaf_item(c.buf, 2)));
	k.objectid += 1ull << 40;
	key_to_disk(item_key_ptr(leaf_item(c.buf, 2)), &k);
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &BLOCK_EXPECT_ANY, &s), 0);
	cr_assert(s.what & SALVAGE_KEY_ORDER);
	cr_assert_eq(s.dropped, 0);
	assert_same_items(&c, c.orig, c.buf);
	leaf_case_close(&c);
}

Test(block_salvage, huge_nritems_keeps_the_real_items)
{
	struct leaf_case c;
	struct block_salvage s;

	leaf_case_open(&c);
	header_set_nritems(c.buf, 100000);
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &BLOCK_EXPECT_ANY, &s), 0);
	cr_assert(s.what & SALVAGE_NRITEMS);
	cr_assert_eq(s.nritems_before, 100000);
	assert_same_items(&c, c.orig, c.buf);
	leaf_case_close(&c);
}

Test(block_salvage, level_follows_the_parent)
{
	struct leaf_case c;
	struct block_salvage s;
	struct block_expect e = { .level = 0 };

	leaf_case_open(&c);
	header_set_level(c.buf, 1);
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &e, &s), 0);
	cr_assert(s.what & SALVAGE_LEVEL);
	cr_assert_eq(header_level(c.buf), 0);
	cr_assert_eq(s.header_level, 1);
	assert_same_items(&c, c.orig, c.buf);
	leaf_case_close(&c);
}

Test(block_salvage, two_disagreements_with_the_pointer_are_refused)
{
	struct leaf_case c;
	struct block_salvage s;
	struct btrfs_key other = { 1, 1, 1 };
	struct block_expect e = { .level = 0, .first_key = &other };

	leaf_case_open(&c);
	e.generation = header_generation(c.buf) - 1;
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &e, &s), -EUCLEAN);
	/* one of them alone is a transid fix */
	memcpy(c.buf, c.orig, c.fs->nodesize);
	e.first_key = NULL;
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &e, &s), 0);
	cr_assert_eq(s.what, SALVAGE_TRANSID);
	leaf_case_close(&c);
}

/* A block newer than the filesystem is a transid fix under a pointer that
 * names one of its generations; with no such pointer, or a pointer from the
 * future too, it is refused. */
Test(block_salvage, a_block_from_the_future_needs_a_pointer_of_the_filesystem)
{
	struct leaf_case c;
	struct block_salvage s;
	struct block_expect e = { .level = 0 };

	leaf_case_open(&c);
	e.generation = header_generation(c.buf);
	header_set_generation(c.buf, c.fs->generation + 3);
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &e, &s), 0);
	cr_assert_eq(s.what, SALVAGE_TRANSID);
	cr_assert_eq(s.expected_generation, e.generation);
	assert_same_items(&c, c.orig, c.buf);
	header_set_generation(c.buf, c.fs->generation + 3);
	e.generation = c.fs->generation + 1;
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &e, &s), -EUCLEAN);
	e.generation = 0;
	cr_assert_eq(block_salvage(c.fs, c.bytenr, c.buf, &e, &s), -EUCLEAN);
	leaf_case_close(&c);
}

Test(block_salvage, block_read_salvages_only_when_asked)
{
	struct leaf_case c;
	struct phys_copy copies[MAX_COPIES];
	uint8_t csum[BTRFS_CSUM_SIZE];
	struct tree_block *b;
	int n;

	leaf_case_open(&c);
	item_set_offset(leaf_item(c.buf, 2), item_offset(leaf_item(c.buf, 2)) + 8);
	csum_compute(c.fs->csum_type, c.buf + BTRFS_CSUM_SIZE, c.fs->nodesize - BTRFS_CSUM_SIZE, csum);
	memcpy(header_csum_ptr(c.buf), csum, BTRFS_CSUM_SIZE);
	n = volumes_map(c.fs, c.bytenr, c.fs->nodesize, copies, NULL);
	for (int m = 0; m < n; m++)
		cr_assert_eq(io_write(copies[m].dev->io, c.buf, c.fs->nodesize, copies[m].physical), 0);
	fixture_drop_cache(c.fs, 0);
	c.fs->salvage = false;
	cr_assert_eq(block_read(c.fs, c.bytenr, &BLOCK_EXPECT_ANY, &b), -EUCLEAN);
	cr_assert_null(block_salvage_log(c.fs));
	c.fs->salvage = true;
	cr_assert_eq(block_read(c.fs, c.bytenr, &BLOCK_EXPECT_ANY, &b), 0, "%s", btk_error_msg());
	cr_assert(b->salvaged);
	cr_assert_not_null(block_salvage_find(c.fs, c.bytenr));
	assert_same_items(&c, c.orig, b->data);
	block_put(c.fs, b);
	leaf_case_close(&c);
}
