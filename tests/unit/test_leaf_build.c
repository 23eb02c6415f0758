// SPDX-License-Identifier: GPL-2.0-only
/* The bulk leaf builder: sorted items spread over a fixed number of leaves
 * come back out of them in order, byte for byte, in leaves the layout check
 * accepts; uneven items fall back to packing; what cannot fit, keys out of
 * order and too few items are refused without touching the leaf. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/ctree_ops.h>
#include <btk/leaf_build.h>

#define NS 4096u

static uint8_t pool[65536];

static void make_entries(struct leaf_entry *e, size_t n, const uint32_t *sizes)
{
	for (size_t i = 0; i < sizeof(pool); i++)
		pool[i] = (uint8_t)(i * 7 + 3);
	for (size_t i = 0; i < n; i++)
		e[i] = (struct leaf_entry){ { 256 + i, 12, i * 3 }, pool + i * 13 % 4096, sizes[i] };
}

static uint8_t *new_leaf(void)
{
	uint8_t *b = calloc(1, NS);

	header_set_level(b, 0);
	header_set_bytenr(b, 1 << 20);
	return b;
}

/* Build every leaf and read all items back in order. */
static void build_and_compare(const struct leaf_entry *e, size_t n, size_t nleaves, const size_t *counts)
{
	size_t pos = 0;

	for (size_t l = 0; l < nleaves; l++) {
		uint8_t *b = new_leaf();
		char why[200];
		cr_assert_gt(counts[l], 0, "leaf %zu is empty", l);
		cr_assert_eq(leaf_build(b, NS, e + pos, counts[l]), 0);
		cr_assert_eq(block_check_layout(b, NS, why, sizeof(why)), 0, "leaf %zu: %s", l, why);
		cr_assert_eq(header_nritems(b), counts[l]);
		cr_assert_eq(header_bytenr(b), 1 << 20, "the header is kept");
		for (unsigned s = 0; s < counts[l]; s++, pos++) {
			struct btrfs_key k;
			key_from_disk(&k, item_key_ptr(leaf_item(b, s)));
			cr_assert_eq(key_compare(&k, &e[pos].key), 0);
			cr_assert_eq(item_size(leaf_item(b, s)), e[pos].size);
			cr_assert_eq(memcmp(leaf_item_data(b, s), e[pos].data, e[pos].size), 0);
		}
		for (uint32_t off = CTREE_HEADER_SIZE + counts[l] * CTREE_ITEM_SIZE; off < leaf_data_end(b, NS) + CTREE_HEADER_SIZE; off++)
			cr_assert_eq(b[off], 0, "free space zeroed at %u", off);
		free(b);
	}
	cr_assert_eq(pos, n);
}

Test(leaf_build, balanced_over_several_leaves)
{
	enum { N = 200 };
	struct leaf_entry e[N];
	uint32_t sizes[N];
	size_t counts[4], sum = 0;

	for (size_t i = 0; i < N; i++)
		sizes[i] = (uint32_t)(i * 37 % 80);
	make_entries(e, N, sizes);
	cr_assert_eq(leaf_build_distribute(e, N, 4, NS, counts), 0);
	for (int l = 0; l < 4; l++)
		sum += counts[l];
	cr_assert_eq(sum, N);
	/* balanced: each leaf within one item of a quarter of the bytes */
	uint64_t total = 0;
	for (size_t i = 0; i < N; i++)
		total += CTREE_ITEM_SIZE + sizes[i];
	for (size_t l = 0, pos = 0; l < 4; pos += counts[l++]) {
		uint64_t bytes = 0;
		for (size_t i = pos; i < pos + counts[l]; i++)
			bytes += CTREE_ITEM_SIZE + sizes[i];
		cr_assert_leq(bytes, total / 4 + CTREE_ITEM_SIZE + 80, "leaf %zu holds %llu bytes", l,
			      (unsigned long long)bytes);
		cr_assert_geq(bytes + CTREE_ITEM_SIZE + 80, total / 4, "leaf %zu holds %llu bytes", l,
			      (unsigned long long)bytes);
	}
	build_and_compare(e, N, 4, counts);
}

Test(leaf_build, uneven_items_pack_and_every_leaf_gets_one)
{
	/* two big items and many small: the balanced split cannot give each
	 * leaf its share, the packed one fits */
	enum { N = 40 };
	struct leaf_entry e[N];
	uint32_t sizes[N];
	size_t counts[3];

	for (size_t i = 0; i < N; i++)
		sizes[i] = 8;
	sizes[0] = sizes[1] = leaf_data_size(NS) - CTREE_ITEM_SIZE - 600;
	make_entries(e, N, sizes);
	cr_assert_eq(leaf_build_distribute(e, N, 3, NS, counts), 0);
	cr_assert_eq(counts[0], 1);
	build_and_compare(e, N, 3, counts);
	cr_assert_eq(leaf_build_distribute(e, 2, 3, NS, counts), -ENOSPC, "fewer items than leaves");
	cr_assert_eq(leaf_build_distribute(e, N, 1, NS, counts), -ENOSPC, "does not fit one leaf");
	cr_assert_eq(leaf_build_distribute(e, N, 3, 3000, counts), -EINVAL);
}

Test(leaf_build, refuses_without_touching_the_leaf)
{
	enum { N = 3 };
	struct leaf_entry e[N];
	uint32_t sizes[N] = { 10, 10, 10 };
	uint8_t *b = new_leaf(), *copy = malloc(NS);

	make_entries(e, N, sizes);
	cr_assert_eq(leaf_build(b, NS, e, N), 0);
	memcpy(copy, b, NS);
	e[2].key = e[0].key;
	cr_assert_eq(leaf_build(b, NS, e, N), -EINVAL, "keys out of order");
	e[2].key.objectid = 9999;
	e[1].size = NS;
	cr_assert_eq(leaf_build(b, NS, e, N), -ENOSPC);
	cr_assert_eq(memcmp(b, copy, NS), 0);
	header_set_level(b, 1);
	e[1].size = 10;
	cr_assert_eq(leaf_build(b, NS, e, N), -EINVAL, "a node is no leaf");
	cr_assert_eq(leaf_build(b, NS, e, 0), -EINVAL);
	header_set_level(b, 0);
	cr_assert_eq(leaf_build(b, NS, e, 0), 0, "an empty leaf");
	cr_assert_eq(header_nritems(b), 0);
	free(b);
	free(copy);
}
