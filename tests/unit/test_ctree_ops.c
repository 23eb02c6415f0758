// SPDX-License-Identifier: GPL-2.0-only
/* ctree_ops: blocks built from scratch at node sizes 4, 16 and 64 KiB go
 * through long random sequences of insert / delete / resize / set-key / split /
 * push, and after every single operation each block passes the tree-checker
 * layout rules AND holds exactly what a reference model (a sorted array of
 * (key, bytes)) says, its unused space zeroed. Failing operations must leave
 * the blocks byte-for-byte unchanged. A "forest" of leaves driven like a
 * B-tree insert path (push to neighbours, then split as leaf_choose_split
 * says) keeps every key and byte in order across leaves, and every split plan
 * is checked against a brute-force search of all cuts. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <btk/ctree_ops.h>

#include "tests/unit/under_valgrind.h"

#define ITEM CTREE_ITEM_SIZE
#define HDR CTREE_HEADER_SIZE
#define KPTR CTREE_KEY_PTR_SIZE
#define RANK_MAX (1ULL << 62)

#define check(cond, ...)                                  \
	do {                                              \
		if (!(cond))                              \
			cr_assert_fail(__VA_ARGS__);      \
	} while (0)

static const uint32_t nodesizes[] = { 4096, 16384, 65536 };
#define NR_NODESIZES (sizeof(nodesizes) / sizeof(nodesizes[0]))

/* Repetitions: a sixteenth under valgrind (at least `min`). */
static unsigned reps(unsigned n, unsigned min)
{
	return (unsigned)valgrind_reps(n, 16, min);
}

/* Whether to check everything after this step of a long run: every step,
 * every 16th under valgrind (the operations themselves all still run). */
static int full_check_due(unsigned step)
{
	return !RUNNING_ON_VALGRIND || step % 16 == 0;
}

/* ------------------------------------------------------------ helpers */

static uint64_t rng_state;

static uint64_t rnd(void)
{
	uint64_t z = (rng_state += 0x9E3779B97F4A7C15ULL);

	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static uint32_t rnd_below(uint32_t n)
{
	return n ? (uint32_t)(rnd() % n) : 0;
}

static void rnd_fill(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rnd();
}

/* Keys are made from a 62-bit rank; key order is rank order, and every field
 * of the key takes part. */
static struct btrfs_key rank_key(uint64_t r)
{
	struct btrfs_key k = { .objectid = r >> 20, .type = (uint8_t)(r >> 12),
			       .offset = (r & 0xfff) * 0x100000001ULL };
	return k;
}

static uint64_t key_rank(const struct btrfs_key *k)
{
	return (k->objectid << 20) | ((uint64_t)k->type << 12) | (k->offset / 0x100000001ULL);
}

static uint8_t *new_block(uint32_t ns, unsigned level)
{
	uint8_t *b = calloc(1, ns);

	cr_assert_not_null(b);
	header_set_bytenr(b, 1ULL << 30);
	header_set_generation(b, 7);
	header_set_owner(b, BTRFS_FS_TREE_OBJECTID);
	header_set_level(b, (uint8_t)level);
	header_set_nritems(b, 0);
	return b;
}

static int all_zero(const uint8_t *p, size_t len)
{
	return len == 0 || (p[0] == 0 && memcmp(p, p + 1, len - 1) == 0);
}

static void leaf_key_at(const uint8_t *leaf, unsigned slot, struct btrfs_key *k)
{
	key_from_disk(k, item_key_ptr(leaf_item(leaf, slot)));
}

/* ------------------------------------------------------------ the model */

struct mitem {
	uint64_t rank;
	uint32_t size;
	uint8_t *data;
};

struct model {
	struct mitem *v;
	unsigned n, cap;
};

static void model_insert(struct model *m, unsigned pos, uint64_t rank, uint32_t size)
{
	if (m->n == m->cap) {
		m->cap = m->cap ? 2 * m->cap : 64;
		m->v = realloc(m->v, m->cap * sizeof(*m->v));
		cr_assert_not_null(m->v);
	}
	memmove(&m->v[pos + 1], &m->v[pos], (m->n - pos) * sizeof(*m->v));
	m->v[pos].rank = rank;
	m->v[pos].size = size;
	m->v[pos].data = calloc(1, size ? size : 1);
	cr_assert_not_null(m->v[pos].data);
	m->n++;
}

static void model_delete(struct model *m, unsigned pos, unsigned count)
{
	for (unsigned i = pos; i < pos + count; i++)
		free(m->v[i].data);
	memmove(&m->v[pos], &m->v[pos + count], (m->n - pos - count) * sizeof(*m->v));
	m->n -= count;
}

static void model_resize(struct model *m, unsigned pos, uint32_t size)
{
	struct mitem *it = &m->v[pos];

	it->data = realloc(it->data, size ? size : 1);
	cr_assert_not_null(it->data);
	if (size > it->size)
		memset(it->data + it->size, 0, size - it->size);
	it->size = size;
}

static void model_free(struct model *m)
{
	model_delete(m, 0, m->n);
	free(m->v);
	memset(m, 0, sizeof(*m));
}

/* Bytes items [pos, pos + count) of the model take in a leaf. */
static uint64_t model_used(const struct model *m, unsigned pos, unsigned count)
{
	uint64_t used = 0;

	for (unsigned i = pos; i < pos + count; i++)
		used += m->v[i].size + ITEM;
	return used;
}

/* Position of the first item with rank >= r. */
static unsigned model_lower_bound(const struct model *m, uint64_t r)
{
	unsigned lo = 0, hi = m->n;

	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		if (m->v[mid].rank < r)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Exclusive rank bounds of the gap before model position pos. */
static uint64_t gap_lo(const struct model *m, unsigned pos)
{
	return pos ? m->v[pos - 1].rank : 0;
}

static uint64_t gap_hi(const struct model *m, unsigned pos)
{
	return pos < m->n ? m->v[pos].rank : RANK_MAX;
}

/* A leaf holds exactly model items [from, from + count), passes the layout
 * check, reports the right free space, and its unused space is zero. */
static void expect_leaf(const uint8_t *leaf, uint32_t ns, const struct model *m, unsigned from,
			unsigned count, const char *ctx)
{
	char why[256];
	uint64_t used = 0;
	uint32_t data_end;

	check(block_check_layout(leaf, ns, why, sizeof(why)) == 0, "%s: layout: %s", ctx, why);
	check(header_nritems(leaf) == count, "%s: nritems %u, model %u", ctx, header_nritems(leaf),
	      count);
	for (unsigned i = 0; i < count; i++) {
		const struct mitem *it = &m->v[from + i];
		struct btrfs_key k;

		leaf_key_at(leaf, i, &k);
		check(key_rank(&k) == it->rank, "%s: slot %u key rank %llu, model %llu", ctx, i,
		      (unsigned long long)key_rank(&k), (unsigned long long)it->rank);
		check(item_size(leaf_item(leaf, i)) == it->size, "%s: slot %u size %u, model %u", ctx,
		      i, item_size(leaf_item(leaf, i)), it->size);
		check(memcmp(leaf_item_data(leaf, i), it->data, it->size) == 0,
		      "%s: slot %u data differs from the model", ctx, i);
		used += it->size + ITEM;
	}
	check(leaf_free_space(leaf, ns) == leaf_data_size(ns) - used, "%s: free %u, model %llu",
	      ctx, leaf_free_space(leaf, ns), (unsigned long long)(leaf_data_size(ns) - used));
	data_end = leaf_data_end(leaf, ns);
	check(all_zero(leaf + HDR + count * ITEM, data_end - count * ITEM),
	      "%s: unused space is not zero", ctx);
	check(header_level(leaf) == 0 && header_generation(leaf) == 7 && header_owner(leaf) == BTRFS_FS_TREE_OBJECTID,
	      "%s: header fields changed", ctx);
}

/* Write random bytes into item slot of a leaf and the model item. */
static void fill_item(uint8_t *leaf, unsigned slot, struct mitem *it)
{
	rnd_fill(it->data, it->size);
	memcpy(leaf_item_data(leaf, slot), it->data, it->size);
}

/* Data size for a new item: mostly small, sometimes exactly filling the leaf,
 * sometimes more than half a leaf. */
static uint32_t pick_size(uint32_t ns, uint32_t free_bytes)
{
	uint32_t data_size = leaf_data_size(ns), r = rnd_below(100);

	if (r < 45)
		return rnd_below(65);
	if (r < 65)
		return rnd_below(513);
	if (r < 75)
		return free_bytes >= ITEM ? free_bytes - ITEM : rnd_below(ITEM);
	if (r < 85)
		return data_size / 2 + rnd_below(data_size / 2 - ITEM);
	return rnd_below(free_bytes + 1);
}

/* ------------------------------------------------------- layout checks */

Test(ctree_ops, empty_leaf_and_geometry)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		uint8_t *leaf = new_block(ns, 0), *node = new_block(ns, 1);
		char why[200];

		cr_assert_eq(block_check_layout(leaf, ns, why, sizeof(why)), 0, "%s", why);
		cr_assert_eq(leaf_free_space(leaf, ns), ns - 101);
		cr_assert_eq(leaf_data_end(leaf, ns), ns - 101);
		cr_assert_eq(leaf_max_item_size(ns), ns - 101 - 25);
		cr_assert_eq(node_max_ptrs(ns), (ns - 101) / 33);
		cr_assert_eq(block_check_layout(node, ns, why, sizeof(why)), -EUCLEAN,
			     "a node without pointers is not a valid block");
		cr_assert(strstr(why, "no key pointers"), "%s", why);
		free(leaf);
		free(node);
	}
	cr_assert_eq(node_max_ptrs(4096), 121);
	cr_assert_eq(node_max_ptrs(16384), 493);
	cr_assert_eq(node_max_ptrs(65536), 1982);
}

/* Each layout rule is caught, and every operation refuses a broken block
 * (-EUCLEAN) without touching it. */
Test(ctree_ops, broken_blocks_are_caught_and_left_alone)
{
	const uint32_t ns = 4096;
	struct btrfs_key keys[3] = { rank_key(100), rank_key(200), rank_key(300) };
	uint32_t sizes[3] = { 10, 20, 30 };
	uint8_t *good = new_block(ns, 0), *bad = malloc(ns), *snap = malloc(ns);
	uint8_t *other = new_block(ns, 0);
	struct leaf_split_plan plan;
	char why[200];
	struct {
		const char *name, *expect;
		void (*mutate)(uint8_t *b);
	} cases[] = {
		{ "keys out of order", "is not after", NULL },
		{ "gap between items", "packed", NULL },
		{ "data beyond the end", "beyond", NULL },
		{ "data over the headers", "overlaps", NULL },
		{ "nritems too large", "nritems", NULL },
		{ "level too high", "level", NULL },
	};

	cr_assert_not_null(bad);
	cr_assert_not_null(snap);
	cr_assert_eq(leaf_insert_items(good, ns, 0, keys, sizes, 3), 0);
	for (unsigned c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint8_t *it;
		int expect_ret = -EUCLEAN;

		memcpy(bad, good, ns);
		switch (c) {
		case 0:
			key_to_disk(item_key_ptr(leaf_item(bad, 2)), &keys[0]);
			break;
		case 1:
			it = leaf_item(bad, 1);
			item_set_offset(it, item_offset(it) - 1);
			break;
		case 2:
			it = leaf_item(bad, 0);
			item_set_size(it, item_size(it) + 1);
			break;
		case 3: /* one big item whose data starts inside the item headers */
			header_set_nritems(bad, 1);
			item_set_offset(leaf_item(bad, 0), 10);
			item_set_size(leaf_item(bad, 0), ns - 101 - 10);
			break;
		case 4:
			header_set_nritems(bad, (ns - 101) / 25 + 1);
			break;
		case 5:
			header_set_level(bad, BTRFS_MAX_LEVEL);
			expect_ret = -EINVAL; /* not a leaf: the leaf operations refuse it as such */
			break;
		}
		cr_assert_eq(block_check_layout(bad, ns, why, sizeof(why)), -EUCLEAN, "%s",
			     cases[c].name);
		cr_assert(strstr(why, cases[c].expect), "%s: %s", cases[c].name, why);
		if (c == 0)
			continue; /* key order is only checked where an operation puts keys */
		memcpy(snap, bad, ns);
		struct btrfs_key k = rank_key(50);
		uint32_t s = 5;
		cr_assert_eq(leaf_insert_items(bad, ns, 0, &k, &s, 1), expect_ret, "%s", cases[c].name);
		cr_assert_eq(leaf_delete_items(bad, ns, 0, 1), expect_ret);
		cr_assert_eq(leaf_resize_item(bad, ns, 0, 1), expect_ret);
		cr_assert_eq(leaf_set_key(bad, ns, 0, &k), expect_ret);
		cr_assert_eq(leaf_split(bad, other, ns, 0), expect_ret);
		cr_assert_eq(leaf_push_right(bad, other, ns, 1), expect_ret);
		cr_assert_eq(leaf_push_left(other, bad, ns, 1), expect_ret);
		cr_assert_eq(leaf_choose_split(bad, ns, 0, 100, &plan), expect_ret);
		cr_assert_eq(leaf_choose_split_extend(bad, ns, 0, 100, &plan), expect_ret);
		cr_assert_eq(leaf_free_space(bad, ns), 0);
		cr_assert_eq(leaf_push_right_max(bad, other, ns, 0), 0);
		cr_assert_eq(memcmp(bad, snap, ns), 0, "%s: the block was modified", cases[c].name);
		cr_assert_eq(header_nritems(other), 0);
	}

	/* Node rules. */
	uint8_t *node = new_block(ns, 1);
	cr_assert_eq(node_insert_ptr(node, ns, 0, &keys[0], 4096, 1), 0);
	cr_assert_eq(node_insert_ptr(node, ns, 1, &keys[1], 8192, 1), 0);
	cr_assert_eq(block_check_layout(node, ns, why, sizeof(why)), 0, "%s", why);
	memcpy(bad, node, ns);
	key_to_disk(key_ptr_key_ptr(node_key_ptr(bad, 1)), &keys[0]);
	cr_assert_eq(block_check_layout(bad, ns, why, sizeof(why)), -EUCLEAN);
	cr_assert(strstr(why, "is not after"), "%s", why);
	memcpy(bad, node, ns);
	key_ptr_set_blockptr(node_key_ptr(bad, 1), 0);
	cr_assert_eq(block_check_layout(bad, ns, why, sizeof(why)), -EUCLEAN);
	cr_assert(strstr(why, "block pointer 0"), "%s", why);
	memcpy(bad, node, ns);
	header_set_nritems(bad, node_max_ptrs(ns) + 1);
	cr_assert_eq(block_check_layout(bad, ns, why, sizeof(why)), -EUCLEAN);
	cr_assert(strstr(why, "exceeds"), "%s", why);
	memcpy(snap, bad, ns);
	cr_assert_eq(node_insert_ptr(bad, ns, 0, &keys[2], 4096, 1), -EUCLEAN);
	cr_assert_eq(node_delete_ptrs(bad, ns, 0, 1), -EUCLEAN);
	cr_assert_eq(memcmp(bad, snap, ns), 0);

	/* Wrong kind of block, wrong node size. */
	cr_assert_eq(leaf_insert_items(node, ns, 0, keys, sizes, 1), -EINVAL);
	cr_assert_eq(node_insert_ptr(good, ns, 0, &keys[0], 4096, 1), -EINVAL);
	cr_assert_eq(leaf_delete_items(good, 3000, 0, 1), -EINVAL);
	cr_assert_eq(block_check_layout(good, 3000, why, sizeof(why)), -EINVAL);
	cr_assert_eq(leaf_split(good, good, ns, 0), -EINVAL);
	free(node);
	free(good);
	free(bad);
	free(snap);
	free(other);
}

/* ------------------------------------------------------------- edges */

Test(ctree_ops, item_exactly_filling_the_leaf)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z], max = leaf_max_item_size(ns), zero = 0, too_big = max + 1;
		uint8_t *leaf = new_block(ns, 0), *snap = malloc(ns);
		struct btrfs_key k = rank_key(1000), k2 = rank_key(2000);
		struct model m = { 0 };

		cr_assert_eq(leaf_insert_items(leaf, ns, 0, &k, &too_big, 1), -ENOSPC);
		cr_assert_eq(leaf_insert_items(leaf, ns, 0, &k, &max, 1), 0);
		model_insert(&m, 0, 1000, max);
		fill_item(leaf, 0, &m.v[0]);
		expect_leaf(leaf, ns, &m, 0, 1, "full");
		cr_assert_eq(leaf_free_space(leaf, ns), 0);
		cr_assert_eq(item_offset(leaf_item(leaf, 0)), 25, "data starts right after the one header");
		memcpy(snap, leaf, ns);
		cr_assert_eq(leaf_insert_items(leaf, ns, 1, &k2, &zero, 1), -ENOSPC,
			     "not even a 0-byte item fits: its header needs 25 bytes");
		cr_assert_eq(leaf_resize_item(leaf, ns, 0, max + 1), -ENOSPC);
		cr_assert_eq(memcmp(leaf, snap, ns), 0);

		/* Shrink to nothing, grow back to the maximum. */
		cr_assert_eq(leaf_resize_item(leaf, ns, 0, 0), 0);
		model_resize(&m, 0, 0);
		expect_leaf(leaf, ns, &m, 0, 1, "resized to 0");
		cr_assert_eq(leaf_resize_item(leaf, ns, 0, max), 0);
		model_resize(&m, 0, max);
		expect_leaf(leaf, ns, &m, 0, 1, "grown back to max");

		/* Delete the last item: an empty, valid leaf with all space zeroed. */
		cr_assert_eq(leaf_delete_items(leaf, ns, 0, 1), 0);
		model_delete(&m, 0, 1);
		expect_leaf(leaf, ns, &m, 0, 0, "emptied");
		cr_assert(all_zero(leaf + HDR, ns - HDR));

		/* A split plan for an item that needs the whole leaf in an empty leaf: none. */
		struct leaf_split_plan plan;
		cr_assert_eq(leaf_choose_split(leaf, ns, 0, max, &plan), 0);
		cr_assert_eq(plan.nr_new, 0);
		cr_assert_eq(leaf_choose_split(leaf, ns, 0, max + 1, &plan), -EINVAL);
		model_free(&m);
		free(leaf);
		free(snap);
	}
}

Test(ctree_ops, insert_at_both_ends_and_in_the_middle)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		uint8_t *leaf = new_block(ns, 0), *snap = malloc(ns);
		struct model m = { 0 };
		uint64_t ranks[] = { 500, 100, 900, 300, 700, 50, 950 }; /* middle, front, end... */
		uint32_t slot_expect[] = { 0, 0, 2, 1, 3, 0, 6 };

		for (unsigned i = 0; i < 7; i++) {
			struct btrfs_key k = rank_key(ranks[i]);
			uint32_t size = 10 + i * 7;
			unsigned pos = model_lower_bound(&m, ranks[i]);

			cr_assert_eq(pos, slot_expect[i]);
			cr_assert_eq(leaf_insert_items(leaf, ns, pos, &k, &size, 1), 0);
			model_insert(&m, pos, ranks[i], size);
			fill_item(leaf, pos, &m.v[pos]);
			expect_leaf(leaf, ns, &m, 0, m.n, "insert");
		}
		/* Out of order and duplicates are refused, the leaf unchanged. */
		memcpy(snap, leaf, ns);
		struct btrfs_key dup = rank_key(300), low = rank_key(10), two[2] = { rank_key(960),
										      rank_key(955) };
		uint32_t sz[2] = { 1, 1 };
		cr_assert_eq(leaf_insert_items(leaf, ns, 2, &dup, sz, 1), -EINVAL, "equal to slot 2");
		cr_assert_eq(leaf_insert_items(leaf, ns, 3, &dup, sz, 1), -EINVAL, "equal to slot 2");
		cr_assert_eq(leaf_insert_items(leaf, ns, 4, &low, sz, 1), -EINVAL);
		cr_assert_eq(leaf_insert_items(leaf, ns, 7, two, sz, 2), -EINVAL, "not ascending");
		cr_assert_eq(leaf_insert_items(leaf, ns, 8, &low, sz, 1), -EINVAL, "slot > nritems");
		cr_assert_eq(leaf_set_key(leaf, ns, 2, &dup), 0, "its own key is fine");
		cr_assert_eq(leaf_set_key(leaf, ns, 3, &low), -EINVAL);
		cr_assert_eq(leaf_set_key(leaf, ns, 7, &low), -EINVAL);
		cr_assert_eq(leaf_delete_items(leaf, ns, 5, 3), -EINVAL);
		cr_assert_eq(leaf_resize_item(leaf, ns, 7, 0), -EINVAL);
		cr_assert_eq(memcmp(leaf, snap, ns), 0);
		/* Several at once, in the middle. */
		struct btrfs_key three[3] = { rank_key(301), rank_key(302), rank_key(303) };
		uint32_t sizes3[3] = { 0, 33, 1000 };
		cr_assert_eq(leaf_insert_items(leaf, ns, 3, three, sizes3, 3), 0);
		for (unsigned i = 0; i < 3; i++) {
			model_insert(&m, 3 + i, 301 + i, sizes3[i]);
			fill_item(leaf, 3 + i, &m.v[3 + i]);
		}
		expect_leaf(leaf, ns, &m, 0, m.n, "3 at once");
		cr_assert_eq(leaf_insert_items(leaf, ns, 4, &three[2], sizes3, 0), 0, "n == 0");
		model_free(&m);
		free(leaf);
		free(snap);
	}
}

/* Push every item one way and back, and splits at 0 and at nritems. */
Test(ctree_ops, push_all_items_and_split_at_the_ends)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		uint8_t *a = new_block(ns, 0), *b = new_block(ns, 0), *snap = malloc(ns);
		struct model m = { 0 };

		while (1) {
			uint32_t size = rnd_below(300);
			struct btrfs_key k = rank_key((m.n + 1) * 1000);
			if (leaf_insert_items(a, ns, m.n, &k, &size, 1))
				break;
			model_insert(&m, m.n, (m.n + 1) * 1000, size);
			fill_item(a, m.n - 1, &m.v[m.n - 1]);
		}
		expect_leaf(a, ns, &m, 0, m.n, "full");
		cr_assert_eq(leaf_push_right_max(a, b, ns, 0), m.n);
		cr_assert_eq(leaf_push_right(a, b, ns, m.n), 0);
		expect_leaf(a, ns, &m, 0, 0, "pushed all right: left");
		expect_leaf(b, ns, &m, 0, m.n, "pushed all right: right");
		cr_assert(all_zero(a + HDR, ns - HDR));
		cr_assert_eq(leaf_push_left(a, b, ns, m.n), 0);
		expect_leaf(a, ns, &m, 0, m.n, "pushed all back: left");
		expect_leaf(b, ns, &m, 0, 0, "pushed all back: right");
		cr_assert_eq(leaf_split(a, b, ns, m.n), 0);
		expect_leaf(a, ns, &m, 0, m.n, "split at nritems");
		expect_leaf(b, ns, &m, 0, 0, "split at nritems");
		cr_assert_eq(leaf_split(a, b, ns, 0), 0);
		expect_leaf(a, ns, &m, 0, 0, "split at 0");
		expect_leaf(b, ns, &m, 0, m.n, "split at 0");
		/* A non-empty right leaf cannot receive a split; wrong order refuses pushes. */
		memcpy(snap, b, ns);
		cr_assert_eq(leaf_split(b, b, ns, 1), -EINVAL);
		struct btrfs_key k = rank_key(5);
		uint32_t size = 1;
		cr_assert_eq(leaf_insert_items(a, ns, 0, &k, &size, 1), 0);
		cr_assert_eq(leaf_split(a, b, ns, 0), -EINVAL);
		k = rank_key(RANK_MAX - 1);
		cr_assert_eq(leaf_set_key(a, ns, 0, &k), 0);
		cr_assert_eq(leaf_push_left(a, b, ns, 1), -EINVAL, "a's key is after all of b's");
		cr_assert_eq(leaf_push_right(a, b, ns, 1), -EINVAL);
		cr_assert_eq(leaf_push_right_max(a, b, ns, 0), 0);
		cr_assert_eq(memcmp(snap, b, ns), 0);
		model_free(&m);
		free(a);
		free(b);
		free(snap);
	}
}

/* ------------------------------------------- random ops on two leaves */

struct pair {
	uint32_t ns;
	uint8_t *b[2];
	uint8_t *snap[2];
	struct model m;
	unsigned split;  /* model items [0, split) are in b[0], the rest in b[1] */
	char ctx[160];
	/* What the run went through, to show the edges were reached. */
	unsigned insert_nospc, insert_at_ends, exact_fill, big_items, delete_all, resize_zero,
		resize_max, resize_nospc, push_all, push_nospc, splits, invalid;
};

static unsigned side_lo(const struct pair *p, int side) { return side ? p->split : 0; }
static unsigned side_hi(const struct pair *p, int side) { return side ? p->m.n : p->split; }
static unsigned side_n(const struct pair *p, int side) { return side_hi(p, side) - side_lo(p, side); }

static uint64_t side_free(const struct pair *p, int side)
{
	return leaf_data_size(p->ns) - model_used(&p->m, side_lo(p, side), side_n(p, side));
}

static void pair_snapshot(struct pair *p)
{
	memcpy(p->snap[0], p->b[0], p->ns);
	memcpy(p->snap[1], p->b[1], p->ns);
}

static void pair_expect_unchanged(const struct pair *p, const char *what)
{
	check(memcmp(p->snap[0], p->b[0], p->ns) == 0 && memcmp(p->snap[1], p->b[1], p->ns) == 0,
	      "%s: failed %s changed a block", p->ctx, what);
}

static void pair_expect(const struct pair *p)
{
	expect_leaf(p->b[0], p->ns, &p->m, 0, p->split, p->ctx);
	expect_leaf(p->b[1], p->ns, &p->m, p->split, p->m.n - p->split, p->ctx);
}

/* k distinct ascending ranks strictly inside (lo, hi); returns how many. */
static unsigned pick_ranks(uint64_t lo, uint64_t hi, unsigned k, uint64_t *out)
{
	unsigned got = 0;

	if (hi - lo < 2)
		return 0;
	for (unsigned i = 0; i < k; i++)
		out[i] = lo + 1 + rnd() % (hi - lo - 1);
	for (unsigned i = 1; i < k; i++)  /* insertion sort */
		for (unsigned j = i; j > 0 && out[j - 1] > out[j]; j--) {
			uint64_t t = out[j];
			out[j] = out[j - 1];
			out[j - 1] = t;
		}
	for (unsigned i = 0; i < k; i++)
		if (!got || out[got - 1] != out[i])
			out[got++] = out[i];
	return got;
}

static void pair_insert(struct pair *p)
{
	int side = rnd_below(2);
	unsigned lo = side_lo(p, side), n = side_n(p, side);
	unsigned slot = rnd_below(3) == 0 ? (rnd_below(2) ? 0 : n) : rnd_below(n + 1);
	unsigned pos = lo + slot, k = rnd_below(10) < 7 ? 1 : 2 + rnd_below(2);
	uint64_t ranks[3], free_bytes = side_free(p, side), total = 0;
	struct btrfs_key keys[3];
	uint32_t sizes[3];
	int expect, ret;

	k = pick_ranks(gap_lo(&p->m, pos), gap_hi(&p->m, pos), k, ranks);
	if (!k)
		return;
	for (unsigned i = 0; i < k; i++) {
		keys[i] = rank_key(ranks[i]);
		sizes[i] = pick_size(p->ns, (uint32_t)(free_bytes / k));
		total += sizes[i] + ITEM;
	}
	if (rnd_below(20) == 0 && slot < n) { /* a duplicate of the next key */
		keys[k - 1] = rank_key(p->m.v[pos].rank);
		expect = -EINVAL;
	} else if (rnd_below(20) == 0 && slot > 0) { /* below the previous key */
		keys[0] = rank_key(p->m.v[pos - 1].rank - 1);
		if (k > 1 && key_compare(&keys[0], &keys[1]) >= 0)
			return;
		expect = -EINVAL;
	} else {
		expect = total <= free_bytes ? 0 : -ENOSPC;
	}
	pair_snapshot(p);
	ret = leaf_insert_items(p->b[side], p->ns, slot, keys, sizes, k);
	check(ret == expect, "%s: insert %u items (%llu bytes, %llu free) at slot %u: %d, want %d",
	      p->ctx, k, (unsigned long long)total, (unsigned long long)free_bytes, slot, ret, expect);
	p->insert_nospc += ret == -ENOSPC;
	p->invalid += ret == -EINVAL;
	if (ret) {
		pair_expect_unchanged(p, "insert");
		return;
	}
	p->insert_at_ends += slot == 0 || slot == n;
	p->exact_fill += total == free_bytes;
	for (unsigned i = 0; i < k; i++)
		p->big_items += sizes[i] > leaf_data_size(p->ns) / 2;
	for (unsigned i = 0; i < k; i++) {
		check(all_zero(leaf_item_data(p->b[side], slot + i), sizes[i]),
		      "%s: new item data not zeroed", p->ctx);
		model_insert(&p->m, pos + i, ranks[i], sizes[i]);
		fill_item(p->b[side], slot + i, &p->m.v[pos + i]);
	}
	if (side == 0)
		p->split += k;
}

static void pair_delete(struct pair *p)
{
	int side = rnd_below(2);
	unsigned lo = side_lo(p, side), n = side_n(p, side), slot, count;

	if (!n)
		return;
	if (rnd_below(10) == 0) {
		slot = 0;
		count = n; /* all of them */
	} else {
		slot = rnd_below(n);
		count = 1 + rnd_below(n - slot < 3 ? n - slot : 3);
	}
	check(leaf_delete_items(p->b[side], p->ns, slot, count) == 0, "%s: delete", p->ctx);
	p->delete_all += count == n;
	model_delete(&p->m, lo + slot, count);
	if (side == 0)
		p->split -= count;
}

static void pair_resize(struct pair *p)
{
	int side = rnd_below(2), ret, expect;
	unsigned lo = side_lo(p, side), n = side_n(p, side), slot, r = rnd_below(100);
	uint32_t old, new_size, max;

	if (!n)
		return;
	slot = rnd_below(n);
	old = p->m.v[lo + slot].size;
	max = old + (uint32_t)side_free(p, side);
	if (r < 15)
		new_size = 0;
	else if (r < 30)
		new_size = max;
	else if (r < 40)
		new_size = max + 1 + rnd_below(100);
	else if (r < 70)
		new_size = rnd_below(old + 1);
	else
		new_size = old + rnd_below(max - old + 1);
	expect = new_size <= max ? 0 : -ENOSPC;
	pair_snapshot(p);
	ret = leaf_resize_item(p->b[side], p->ns, slot, new_size);
	check(ret == expect, "%s: resize %u -> %u (max %u): %d", p->ctx, old, new_size, max, ret);
	p->resize_zero += ret == 0 && new_size == 0;
	p->resize_max += ret == 0 && new_size == max;
	p->resize_nospc += ret == -ENOSPC;
	if (ret) {
		pair_expect_unchanged(p, "resize");
		return;
	}
	model_resize(&p->m, lo + slot, new_size);
	expect_leaf(p->b[side], p->ns, &p->m, lo, n, p->ctx); /* kept bytes intact, tail zero */
	fill_item(p->b[side], slot, &p->m.v[lo + slot]);
}

static void pair_set_key(struct pair *p)
{
	int side = rnd_below(2), ret, expect = 0;
	unsigned lo = side_lo(p, side), n = side_n(p, side), slot, pos;
	uint64_t rank;
	struct btrfs_key key;

	if (!n)
		return;
	slot = rnd_below(n);
	pos = lo + slot;
	if (rnd_below(10) == 0 && slot + 1 < n) {
		rank = p->m.v[pos + 1].rank;
		expect = -EINVAL;
	} else if (!pick_ranks(gap_lo(&p->m, pos), pos + 1 < p->m.n ? p->m.v[pos + 1].rank : RANK_MAX,
			       1, &rank)) {
		return;
	}
	key = rank_key(rank);
	pair_snapshot(p);
	ret = leaf_set_key(p->b[side], p->ns, slot, &key);
	check(ret == expect, "%s: set key: %d, want %d", p->ctx, ret, expect);
	if (ret)
		pair_expect_unchanged(p, "set key");
	else
		p->m.v[pos].rank = rank;
}

/* The largest count whose items fit in `free_bytes`, from the model. */
static unsigned model_push_max(const struct model *m, unsigned from, unsigned n, int from_end,
			       uint64_t free_bytes)
{
	uint64_t used = 0;
	unsigned c = 0;

	while (c < n) {
		unsigned i = from_end ? from + n - 1 - c : from + c;
		if (used + m->v[i].size + ITEM > free_bytes)
			break;
		used += m->v[i].size + ITEM;
		c++;
	}
	return c;
}

static unsigned pick_push_count(unsigned n, unsigned max)
{
	unsigned r = rnd_below(10);

	if (r < 3)
		return n;
	if (r < 6)
		return max;
	return rnd_below(n + 1);
}

static void pair_push(struct pair *p, int right)
{
	unsigned nl = side_n(p, 0), nr = side_n(p, 1), n = right ? nl : nr, count, max, mmax;
	uint64_t need;
	int ret, expect;

	mmax = right ? model_push_max(&p->m, 0, nl, 1, side_free(p, 1))
		     : model_push_max(&p->m, p->split, nr, 0, side_free(p, 0));
	max = right ? leaf_push_right_max(p->b[0], p->b[1], p->ns, 0)
		    : leaf_push_left_max(p->b[0], p->b[1], p->ns, 0);
	check(max == mmax, "%s: push max %u, model %u", p->ctx, max, mmax);
	{ /* keeping some room free in the receiving leaf */
		uint64_t free_to = side_free(p, right ? 1 : 0);
		uint32_t reserve = rnd_below((uint32_t)free_to + 50);
		unsigned rmax = right ? leaf_push_right_max(p->b[0], p->b[1], p->ns, reserve)
				      : leaf_push_left_max(p->b[0], p->b[1], p->ns, reserve);
		unsigned rmodel = reserve > free_to ? 0
			: right ? model_push_max(&p->m, 0, nl, 1, free_to - reserve)
				: model_push_max(&p->m, p->split, nr, 0, free_to - reserve);
		check(rmax == rmodel, "%s: push max with reserve %u: %u, model %u", p->ctx, reserve,
		      rmax, rmodel);
	}
	count = pick_push_count(n, max);
	need = right ? model_used(&p->m, nl - count, count) : model_used(&p->m, p->split, count);
	expect = need <= side_free(p, right ? 1 : 0) ? 0 : -ENOSPC;
	pair_snapshot(p);
	ret = right ? leaf_push_right(p->b[0], p->b[1], p->ns, count)
		    : leaf_push_left(p->b[0], p->b[1], p->ns, count);
	check(ret == expect, "%s: push %s %u of %u: %d, want %d", p->ctx, right ? "right" : "left",
	      count, n, ret, expect);
	p->push_nospc += ret == -ENOSPC;
	p->push_all += ret == 0 && count == n && n > 0;
	if (ret) {
		pair_expect_unchanged(p, "push");
		return;
	}
	p->split = right ? p->split - count : p->split + count;
	if (nl && nr && rnd_below(4) == 0) { /* swapped blocks are not neighbours in key order */
		pair_snapshot(p);
		if (side_n(p, 0) && side_n(p, 1)) {
			check(leaf_push_right(p->b[1], p->b[0], p->ns, 0) == -EINVAL, "%s: swapped",
			      p->ctx);
			pair_expect_unchanged(p, "swapped push");
		}
	}
}

/* Split the left leaf at a random slot into a fresh leaf, check the three,
 * then push the fresh leaf's items on into the right leaf, or back. */
static void pair_split(struct pair *p)
{
	unsigned nl = side_n(p, 0), k = rnd_below(3) == 0 ? (rnd_below(2) ? 0 : nl) : rnd_below(nl + 1);
	uint8_t *e;

	p->splits++;
	if (side_n(p, 1) == 0) { /* the right leaf is empty: split straight into it */
		check(leaf_split(p->b[0], p->b[1], p->ns, k) == 0, "%s: split", p->ctx);
		p->split = k;
		return;
	}
	e = new_block(p->ns, 0);
	check(leaf_split(p->b[0], e, p->ns, k) == 0, "%s: split at %u of %u", p->ctx, k, nl);
	expect_leaf(p->b[0], p->ns, &p->m, 0, k, p->ctx);
	expect_leaf(e, p->ns, &p->m, k, nl - k, p->ctx);
	expect_leaf(p->b[1], p->ns, &p->m, nl, p->m.n - nl, p->ctx);
	if (model_used(&p->m, k, nl - k) <= side_free(p, 1)) {
		check(leaf_push_right(e, p->b[1], p->ns, nl - k) == 0, "%s: push on", p->ctx);
		p->split = k;
	} else {
		check(leaf_push_right(e, p->b[1], p->ns, nl - k) == -ENOSPC, "%s: push on", p->ctx);
		check(leaf_push_left(p->b[0], e, p->ns, nl - k) == 0, "%s: push back", p->ctx);
	}
	check(header_nritems(e) == 0 && all_zero(e + HDR, p->ns - HDR), "%s: not emptied", p->ctx);
	free(e);
}

static void run_pair(struct pair *total, uint32_t ns, uint64_t seed, unsigned steps)
{
	struct pair p = { .ns = ns };

	rng_state = seed;
	for (int i = 0; i < 2; i++) {
		p.b[i] = new_block(ns, 0);
		p.snap[i] = malloc(ns);
		cr_assert_not_null(p.snap[i]);
	}
	for (unsigned step = 0; step < steps; step++) {
		int growing = (step / 150) % 2 == 0;
		unsigned r = rnd_below(100);
		const char *op;

		snprintf(p.ctx, sizeof(p.ctx), "nodesize %u seed %llu step %u", ns,
			 (unsigned long long)seed, step);
		if (r < (growing ? 40u : 15u))
			op = "insert", pair_insert(&p);
		else if (r < 50)
			op = "delete", pair_delete(&p);
		else if (r < 65)
			op = "resize", pair_resize(&p);
		else if (r < 72)
			op = "set-key", pair_set_key(&p);
		else if (r < 82)
			op = "push-right", pair_push(&p, 1);
		else if (r < 92)
			op = "push-left", pair_push(&p, 0);
		else
			op = "split", pair_split(&p);
		size_t l = strlen(p.ctx);
		snprintf(p.ctx + l, sizeof(p.ctx) - l, " (%s)", op);
		pair_expect(&p);
	}
	model_free(&p.m);
	for (int i = 0; i < 2; i++) {
		free(p.b[i]);
		free(p.snap[i]);
	}
#define ADD(f) total->f += p.f
	ADD(insert_nospc); ADD(insert_at_ends); ADD(exact_fill); ADD(big_items); ADD(delete_all);
	ADD(resize_zero); ADD(resize_max); ADD(resize_nospc); ADD(push_all); ADD(push_nospc);
	ADD(splits); ADD(invalid);
#undef ADD
}

Test(ctree_ops, random_ops_on_two_leaves_match_the_model)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		struct pair t = { 0 };

		for (uint64_t seed = 1; seed <= reps(12, 1); seed++)
			run_pair(&t, nodesizes[z], seed * 1000 + z, 1500);
		cr_log_info("nodesize %u: insert -ENOSPC %u, at an end %u, filling exactly %u, "
			    "> half a leaf %u; delete all %u; resize to 0 %u, to max %u, -ENOSPC %u; "
			    "push all %u, -ENOSPC %u; splits %u; -EINVAL %u", nodesizes[z],
			    t.insert_nospc, t.insert_at_ends, t.exact_fill, t.big_items, t.delete_all,
			    t.resize_zero, t.resize_max, t.resize_nospc, t.push_all, t.push_nospc,
			    t.splits, t.invalid);
		cr_assert(t.insert_nospc && t.insert_at_ends && t.exact_fill && t.big_items &&
				  t.delete_all && t.resize_zero && t.resize_max && t.resize_nospc &&
				  t.push_all && t.push_nospc && t.splits && t.invalid,
			  "nodesize %u: the random run missed an edge", nodesizes[z]);
	}
}

/* ------------------------------------------------ split planning */

/* The smallest "fuller leaf" any two-leaf cut can reach, or UINT64_MAX.
 * weights: the item sequence with the item in place. */
static uint64_t brute_best_two(const uint64_t *w, unsigned len, uint32_t data_size)
{
	uint64_t best = UINT64_MAX, total = 0;

	for (unsigned v = 0; v < len; v++)
		total += w[v];
	for (unsigned c = 1; c < len; c++) {
		uint64_t a = 0, fuller;
		for (unsigned v = 0; v < c; v++)
			a += w[v];
		fuller = a > total - a ? a : total - a;
		if (fuller <= data_size && fuller < best)
			best = fuller;
	}
	return best;
}

/* Build a leaf of random items (occasionally big ones) until an insert fails. */
static void fill_random_leaf(uint8_t *leaf, uint32_t ns, struct model *m, int big_items)
{
	unsigned misses = 0;

	while (misses < 3) {
		uint32_t free_bytes = leaf_free_space(leaf, ns), size;
		uint64_t rank = (uint64_t)(m->n + 1) * 1000000;
		struct btrfs_key k = rank_key(rank);

		size = big_items && rnd_below(4) == 0 ? rnd_below(leaf_data_size(ns) / 2)
						       : rnd_below(rnd_below(2) ? 100 : 1500);
		if (size + ITEM > free_bytes) {
			misses++;
			continue;
		}
		cr_assert_eq(leaf_insert_items(leaf, ns, m->n, &k, &size, 1), 0);
		model_insert(m, m->n, rank, size);
		fill_item(leaf, m->n - 1, &m->v[m->n - 1]);
	}
}

/* Plan, apply, insert or grow the item, and check every block against the model. */
static void check_plan(uint32_t ns, int extend, const char *ctx)
{
	uint8_t *leaf = new_block(ns, 0), *nb[3] = { NULL, NULL, NULL }, *blocks[3];
	uint32_t data_size = leaf_data_size(ns), size;
	struct model m = { 0 };
	struct leaf_split_plan plan;
	unsigned n, s, pos, len;
	uint64_t *w, used, best;
	int ret;

	fill_random_leaf(leaf, ns, &m, rnd_below(2));
	n = m.n;
	if (extend && n == 0)
		goto out;
	s = extend ? rnd_below(n) : rnd_below(n + 1);
	if (rnd_below(4) == 0)
		s = extend ? (rnd_below(2) ? 0 : n - 1) : (rnd_below(2) ? 0 : n);
	size = rnd_below(3) == 0 ? leaf_max_item_size(ns) - rnd_below(50)
				 : rnd_below(leaf_max_item_size(ns) + 1);
	if (extend && size < m.v[s].size)
		size = m.v[s].size + rnd_below(leaf_max_item_size(ns) - m.v[s].size + 1);

	/* The sequence with the item in place. */
	len = extend ? n : n + 1;
	w = calloc(len + 1, sizeof(*w));
	cr_assert_not_null(w);
	for (unsigned v = 0, i = 0; v < len; v++) {
		if (v == s)
			w[v] = size + ITEM;
		else
			w[v] = m.v[i].size + ITEM;
		if (v != s || extend)
			i++;
	}
	used = 0;
	for (unsigned v = 0; v < len; v++)
		used += w[v];
	best = brute_best_two(w, len, data_size);

	ret = extend ? leaf_choose_split_extend(leaf, ns, s, size, &plan)
		     : leaf_choose_split(leaf, ns, s, size, &plan);
	check(ret == 0, "%s: plan: %d", ctx, ret);
	if (used <= data_size) {
		check(plan.nr_new == 0 && plan.target == 0 && plan.slot == s, "%s: it fits, no split",
		      ctx);
	} else if (best != UINT64_MAX) {
		/* One new leaf, cut as evenly as the brute force can. */
		uint64_t a = 0;
		check(plan.nr_new == 1, "%s: a two-leaf split exists but nr_new %u", ctx, plan.nr_new);
		unsigned vcut = plan.cut[0] + (!extend && plan.target == 0 ? 1 : 0);
		for (unsigned v = 0; v < vcut; v++)
			a += w[v];
		check((a > used - a ? a : used - a) == best, "%s: fuller leaf %llu, best %llu", ctx,
		      (unsigned long long)(a > used - a ? a : used - a), (unsigned long long)best);
	} else {
		check(plan.nr_new == 2 && plan.target == 1 && plan.slot == 0,
		      "%s: no two-leaf split: the item goes alone in the middle", ctx);
		check(s > 0 && s + 1 < len, "%s: three leaves at an edge", ctx);
	}
	free(w);

	for (unsigned i = 0; i < plan.nr_new; i++)
		nb[i] = new_block(ns, 0);
	check(leaf_split_apply(leaf, nb[0], nb[1], ns, &plan) == 0, "%s: apply", ctx);
	blocks[0] = leaf;
	blocks[1] = nb[0];
	blocks[2] = nb[1];
	/* The item, then the model with it. */
	pos = 0;
	for (unsigned b = 0; b < plan.target; b++)
		pos += header_nritems(blocks[b]);
	pos += plan.slot;
	check(pos == s, "%s: the item would land at %u, not %u", ctx, pos, s);
	if (extend) {
		check(leaf_resize_item(blocks[plan.target], ns, plan.slot, size) == 0, "%s: grow", ctx);
		model_resize(&m, s, size);
	} else {
		uint64_t rank = s ? m.v[s - 1].rank + 1 : 1;
		struct btrfs_key k = rank_key(rank);
		check(leaf_insert_items(blocks[plan.target], ns, plan.slot, &k, &size, 1) == 0,
		      "%s: insert into the planned leaf", ctx);
		model_insert(&m, s, rank, size);
	}
	fill_item(blocks[plan.target], plan.slot, &m.v[s]);
	pos = 0;
	for (unsigned b = 0; b <= plan.nr_new; b++) {
		unsigned cnt = header_nritems(blocks[b]);
		check(cnt > 0, "%s: block %u of the split is empty", ctx, b);
		expect_leaf(blocks[b], ns, &m, pos, cnt, ctx);
		pos += cnt;
	}
	check(pos == m.n, "%s: items lost", ctx);
	for (unsigned i = 0; i < plan.nr_new; i++)
		free(nb[i]);
out:
	model_free(&m);
	free(leaf);
}

Test(ctree_ops, split_plans_are_optimal_and_always_make_room)
{
	char ctx[96];

	for (unsigned z = 0; z < NR_NODESIZES; z++)
		for (unsigned t = 0; t < reps(400, 25); t++) {
			rng_state = 77 + t * 31 + z;
			snprintf(ctx, sizeof(ctx), "nodesize %u trial %u insert", nodesizes[z], t);
			check_plan(nodesizes[z], 0, ctx);
			snprintf(ctx, sizeof(ctx), "nodesize %u trial %u extend", nodesizes[z], t);
			check_plan(nodesizes[z], 1, ctx);
		}
}

/* Hand-made: four items of a fifth of a leaf each, and an item of 60%. */
Test(ctree_ops, item_larger_than_half_a_leaf)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z], fifth = leaf_data_size(ns) / 5 - ITEM;
		uint32_t big = leaf_data_size(ns) * 3 / 5;
		uint8_t *leaf = new_block(ns, 0);
		struct leaf_split_plan plan;

		for (unsigned i = 0; i < 4; i++) {
			struct btrfs_key k = rank_key((i + 1) * 100);
			cr_assert_eq(leaf_insert_items(leaf, ns, i, &k, &fifth, 1), 0);
		}
		/* In the middle: neither two items + it, nor it + two items fit: alone. */
		cr_assert_eq(leaf_choose_split(leaf, ns, 2, big, &plan), 0);
		cr_assert_eq(plan.nr_new, 2);
		cr_assert_eq(plan.cut[0], 2);
		cr_assert_eq(plan.cut[1], 2);
		cr_assert_eq(plan.target, 1);
		cr_assert_eq(plan.slot, 0);
		/* Before slot 1: one item + it fits on the left. */
		cr_assert_eq(leaf_choose_split(leaf, ns, 1, big, &plan), 0);
		cr_assert_eq(plan.nr_new, 1);
		cr_assert_eq(plan.cut[0], 1);
		cr_assert_eq(plan.target, 0);
		cr_assert_eq(plan.slot, 1);
		/* At the end: alone on the right (4/5 | 3/5) beats (3/5 | 4/5 + a header). */
		cr_assert_eq(leaf_choose_split(leaf, ns, 4, big, &plan), 0);
		cr_assert_eq(plan.nr_new, 1);
		cr_assert_eq(plan.cut[0], 4);
		cr_assert_eq(plan.target, 1);
		cr_assert_eq(plan.slot, 0);
		/* A bit smaller (55%): the last item goes with it, 3/5 | 3/4 + a header. */
		cr_assert_eq(leaf_choose_split(leaf, ns, 4, leaf_data_size(ns) * 11 / 20, &plan), 0);
		cr_assert_eq(plan.nr_new, 1);
		cr_assert_eq(plan.cut[0], 3);
		cr_assert_eq(plan.target, 1);
		cr_assert_eq(plan.slot, 1);
		/* A maximal item at the front: alone in the emptied leaf, all items move. */
		cr_assert_eq(leaf_choose_split(leaf, ns, 0, leaf_max_item_size(ns), &plan), 0);
		cr_assert_eq(plan.nr_new, 1);
		cr_assert_eq(plan.cut[0], 0);
		cr_assert_eq(plan.target, 0);
		cr_assert_eq(plan.slot, 0);
		/* ... and at the end: alone in the new leaf, nothing moves. */
		cr_assert_eq(leaf_choose_split(leaf, ns, 4, leaf_max_item_size(ns), &plan), 0);
		cr_assert_eq(plan.nr_new, 1);
		cr_assert_eq(plan.cut[0], 4);
		cr_assert_eq(plan.target, 1);
		cr_assert_eq(plan.slot, 0);
		/* Growing item 2 to the maximum: cut out alone. */
		cr_assert_eq(leaf_choose_split_extend(leaf, ns, 2, leaf_max_item_size(ns), &plan), 0);
		cr_assert_eq(plan.nr_new, 2);
		cr_assert_eq(plan.cut[0], 2);
		cr_assert_eq(plan.cut[1], 3);
		cr_assert_eq(plan.target, 1);
		cr_assert_eq(plan.slot, 0);
		/* Bad plans are refused before anything moves. */
		uint8_t *a = new_block(ns, 0), *snap = malloc(ns);
		memcpy(snap, leaf, ns);
		struct leaf_split_plan badp = { .nr_new = 1, .cut = { 5, 4 } };
		cr_assert_eq(leaf_split_apply(leaf, a, NULL, ns, &badp), -EINVAL);
		badp = (struct leaf_split_plan){ .nr_new = 2, .cut = { 1, 2 } };
		cr_assert_eq(leaf_split_apply(leaf, a, NULL, ns, &badp), -EINVAL);
		cr_assert_eq(leaf_split_apply(leaf, a, a, ns, &badp), -EINVAL);
		cr_assert_eq(leaf_split_apply(leaf, a, leaf, ns, &badp), -EINVAL);
		cr_assert_eq(memcmp(leaf, snap, ns), 0);
		cr_assert_eq(header_nritems(a), 0);
		free(a);
		free(snap);
		free(leaf);
	}
}

/* ---------------------------------------------- a forest of leaves */

struct forest {
	uint32_t ns;
	uint8_t **leaf;
	unsigned n, cap;
	struct model m;
	unsigned splits, doubles, pushes, merges;
	char ctx[128];
};

static void forest_add(struct forest *f, unsigned at, uint8_t *leaf)
{
	if (f->n == f->cap) {
		f->cap = f->cap ? 2 * f->cap : 16;
		f->leaf = realloc(f->leaf, f->cap * sizeof(*f->leaf));
		cr_assert_not_null(f->leaf);
	}
	memmove(&f->leaf[at + 1], &f->leaf[at], (f->n - at) * sizeof(*f->leaf));
	f->leaf[at] = leaf;
	f->n++;
}

static void forest_remove(struct forest *f, unsigned at)
{
	free(f->leaf[at]);
	memmove(&f->leaf[at], &f->leaf[at + 1], (f->n - at - 1) * sizeof(*f->leaf));
	f->n--;
}

/* Every leaf valid and non-empty (but a lone root leaf), and together, in
 * order, exactly the model: keys of leaf i < keys of leaf i+1. */
static void forest_expect(const struct forest *f)
{
	unsigned pos = 0;

	for (unsigned i = 0; i < f->n; i++) {
		unsigned cnt = header_nritems(f->leaf[i]);
		check(cnt > 0 || f->n == 1, "%s: leaf %u of %u is empty", f->ctx, i, f->n);
		check(pos + cnt <= f->m.n, "%s: more items than the model", f->ctx);
		expect_leaf(f->leaf[i], f->ns, &f->m, pos, cnt, f->ctx);
		pos += cnt;
	}
	check(pos == f->m.n, "%s: %u items in leaves, model %u", f->ctx, pos, f->m.n);
}

/* The leaf a key belongs in (the last whose first key is <= it) and its slot. */
static unsigned forest_find(const struct forest *f, uint64_t rank, unsigned *slot)
{
	unsigned i = 0, lo, hi;
	struct btrfs_key k;

	for (unsigned j = 1; j < f->n; j++) {
		leaf_key_at(f->leaf[j], 0, &k);
		if (key_rank(&k) <= rank)
			i = j;
	}
	lo = 0;
	hi = header_nritems(f->leaf[i]);
	while (lo < hi) {
		unsigned mid = (lo + hi) / 2;
		leaf_key_at(f->leaf[i], mid, &k);
		if (key_rank(&k) < rank)
			lo = mid + 1;
		else
			hi = mid;
	}
	*slot = lo;
	return i;
}

/* What a B-tree insert (or item extension) does to find room in leaf i for
 * `need` more bytes at slot: push items before the slot into the left
 * neighbour, items after it into the right one, and split as planned if that
 * is not enough. Returns the leaf and slot that now have room. */
static unsigned forest_make_room(struct forest *f, unsigned i, unsigned *slot, uint32_t need,
				 uint32_t size, int extend)
{
	uint32_t ns = f->ns;
	struct leaf_split_plan plan;
	uint8_t *nb[2] = { NULL, NULL };
	unsigned nr, cnt;

	if (leaf_free_space(f->leaf[i], ns) >= need)
		return i;
	if (i > 0 && *slot > 0) {
		cnt = leaf_push_left_max(f->leaf[i - 1], f->leaf[i], ns, 0);
		if (cnt > *slot)
			cnt = *slot;
		if (cnt) {
			check(leaf_push_left(f->leaf[i - 1], f->leaf[i], ns, cnt) == 0, "%s: push left",
			      f->ctx);
			*slot -= cnt;
			f->pushes++;
			if (leaf_free_space(f->leaf[i], ns) >= need)
				return i;
		}
	}
	nr = header_nritems(f->leaf[i]);
	if (i + 1 < f->n && *slot + (extend ? 1 : 0) < nr) {
		cnt = leaf_push_right_max(f->leaf[i], f->leaf[i + 1], ns, 0);
		if (cnt > nr - *slot - (extend ? 1 : 0))
			cnt = nr - *slot - (extend ? 1 : 0);
		if (cnt) {
			check(leaf_push_right(f->leaf[i], f->leaf[i + 1], ns, cnt) == 0,
			      "%s: push right", f->ctx);
			f->pushes++;
			if (leaf_free_space(f->leaf[i], ns) >= need)
				return i;
		}
	}
	check((extend ? leaf_choose_split_extend(f->leaf[i], ns, *slot, size, &plan)
		      : leaf_choose_split(f->leaf[i], ns, *slot, size, &plan)) == 0,
	      "%s: plan", f->ctx);
	check(plan.nr_new > 0, "%s: no split planned for a leaf without room", f->ctx);
	for (unsigned j = 0; j < plan.nr_new; j++)
		nb[j] = new_block(ns, 0);
	check(leaf_split_apply(f->leaf[i], nb[0], nb[1], ns, &plan) == 0, "%s: apply", f->ctx);
	for (unsigned j = 0; j < plan.nr_new; j++)
		forest_add(f, i + 1 + j, nb[j]);
	f->splits++;
	if (plan.nr_new == 2)
		f->doubles++;
	*slot = plan.slot;
	return i + plan.target;
}

static uint32_t forest_item_size(uint32_t ns)
{
	unsigned r = rnd_below(100);

	if (r < 60)
		return rnd_below(120);
	if (r < 85)
		return rnd_below(ns / 8);
	if (r < 95)
		return leaf_data_size(ns) / 2 + rnd_below(leaf_data_size(ns) / 2 - ITEM);
	return leaf_max_item_size(ns);
}

static void forest_insert(struct forest *f)
{
	uint64_t rank = 1 + rnd() % (RANK_MAX - 2);
	uint32_t size = forest_item_size(f->ns);
	struct btrfs_key k = rank_key(rank);
	unsigned pos = model_lower_bound(&f->m, rank), slot, i;

	if (pos < f->m.n && f->m.v[pos].rank == rank)
		return;
	i = forest_find(f, rank, &slot);
	i = forest_make_room(f, i, &slot, size + ITEM, size, 0);
	check(leaf_insert_items(f->leaf[i], f->ns, slot, &k, &size, 1) == 0, "%s: insert", f->ctx);
	model_insert(&f->m, pos, rank, size);
	fill_item(f->leaf[i], slot, &f->m.v[pos]);
}

/* Locate model item pos in the forest. */
static unsigned forest_locate(const struct forest *f, unsigned pos, unsigned *slot)
{
	unsigned i = 0;

	while (pos >= header_nritems(f->leaf[i])) {
		pos -= header_nritems(f->leaf[i]);
		i++;
	}
	*slot = pos;
	return i;
}

/* After a delete: drop an empty leaf, or merge a light one into a neighbour. */
static void forest_rebalance(struct forest *f, unsigned i)
{
	uint32_t ns = f->ns;
	unsigned nr = header_nritems(f->leaf[i]);

	if (f->n == 1)
		return;
	if (nr && leaf_free_space(f->leaf[i], ns) > leaf_data_size(ns) * 3 / 4) {
		if (i > 0 && leaf_push_left_max(f->leaf[i - 1], f->leaf[i], ns, 0) == nr) {
			check(leaf_push_left(f->leaf[i - 1], f->leaf[i], ns, nr) == 0, "%s: merge left",
			      f->ctx);
			f->merges++;
		} else if (i + 1 < f->n && leaf_push_right_max(f->leaf[i], f->leaf[i + 1], ns, 0) == nr) {
			check(leaf_push_right(f->leaf[i], f->leaf[i + 1], ns, nr) == 0,
			      "%s: merge right", f->ctx);
			f->merges++;
		}
	}
	if (header_nritems(f->leaf[i]) == 0)
		forest_remove(f, i);
}

static void forest_delete(struct forest *f)
{
	unsigned pos, slot, i;

	if (!f->m.n)
		return;
	pos = rnd_below(f->m.n);
	i = forest_locate(f, pos, &slot);
	check(leaf_delete_items(f->leaf[i], f->ns, slot, 1) == 0, "%s: delete", f->ctx);
	model_delete(&f->m, pos, 1);
	forest_rebalance(f, i);
}

static void forest_resize(struct forest *f)
{
	unsigned pos, slot, i;
	uint32_t old, size;

	if (!f->m.n)
		return;
	pos = rnd_below(f->m.n);
	old = f->m.v[pos].size;
	size = rnd_below(3) ? old + rnd_below(leaf_max_item_size(f->ns) - old + 1) : rnd_below(old + 1);
	if (rnd_below(8) == 0)
		size = leaf_max_item_size(f->ns);
	i = forest_locate(f, pos, &slot);
	if (size > old)
		i = forest_make_room(f, i, &slot, size - old, size, 1);
	check(leaf_resize_item(f->leaf[i], f->ns, slot, size) == 0, "%s: resize %u -> %u", f->ctx,
	      old, size);
	model_resize(&f->m, pos, size);
	fill_item(f->leaf[i], slot, &f->m.v[pos]);
	if (size < old)
		forest_rebalance(f, i);
}

static void run_forest(uint32_t ns, uint64_t seed, unsigned steps)
{
	struct forest f = { .ns = ns };

	rng_state = seed;
	forest_add(&f, 0, new_block(ns, 0));
	for (unsigned step = 0; step < steps; step++) {
		unsigned r = rnd_below(100), phase = (step / 400) % 3;

		snprintf(f.ctx, sizeof(f.ctx), "forest nodesize %u seed %llu step %u", ns,
			 (unsigned long long)seed, step);
		if (r < (phase == 2 ? 25u : 60u))
			forest_insert(&f);
		else if (r < 85)
			forest_delete(&f);
		else
			forest_resize(&f);
		if (full_check_due(step))
			forest_expect(&f);
	}
	cr_assert_gt(f.splits, 0, "nodesize %u: the forest never split", ns);
	cr_assert_gt(f.doubles, 0, "nodesize %u: never needed two new leaves", ns);
	cr_assert_gt(f.pushes, 0);
	cr_assert_gt(f.merges, 0);
	/* Drain it. */
	while (f.m.n)
		forest_delete(&f);
	forest_expect(&f);
	cr_assert_eq(f.n, 1);
	cr_assert(all_zero(f.leaf[0] + HDR, ns - HDR));
	model_free(&f.m);
	while (f.n)
		forest_remove(&f, f.n - 1);
	free(f.leaf);
}

Test(ctree_ops, forest_of_leaves_stays_ordered_through_splits_and_pushes)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++)
		for (uint64_t seed = 1; seed <= reps(4, 1); seed++)
			run_forest(nodesizes[z], 4242 * seed + z, 1200);
}

/* ------------------------------------------------------------- nodes */

struct kp {
	uint64_t rank, blockptr, gen;
};

struct node_pair {
	uint32_t ns;
	uint8_t *b[2], *snap[2];
	struct kp *v;
	unsigned n, split;
	int growing;
	unsigned nospc, emptied;
	char ctx[128];
};

static void expect_node(const uint8_t *node, uint32_t ns, const struct kp *v, unsigned count,
			const char *ctx)
{
	char why[200];
	int ret = block_check_layout(node, ns, why, sizeof(why));

	check(count ? ret == 0 : ret == -EUCLEAN, "%s: node layout: %d %s", ctx, ret, why);
	check(header_nritems(node) == count, "%s: node nritems %u, model %u", ctx,
	      header_nritems(node), count);
	for (unsigned i = 0; i < count; i++) {
		const uint8_t *p = node_key_ptr(node, i);
		struct btrfs_key k;
		key_from_disk(&k, key_ptr_key_ptr(p));
		check(key_rank(&k) == v[i].rank && key_ptr_blockptr(p) == v[i].blockptr &&
			      key_ptr_generation(p) == v[i].gen,
		      "%s: node pointer %u differs from the model", ctx, i);
	}
	check(all_zero(node_key_ptr(node, count), ns - HDR - count * KPTR),
	      "%s: unused node space not zero", ctx);
	check(header_level(node) == 1, "%s: level changed", ctx);
}

static void np_expect(const struct node_pair *p)
{
	expect_node(p->b[0], p->ns, p->v, p->split, p->ctx);
	expect_node(p->b[1], p->ns, p->v + p->split, p->n - p->split, p->ctx);
}

static void np_snapshot(struct node_pair *p)
{
	memcpy(p->snap[0], p->b[0], p->ns);
	memcpy(p->snap[1], p->b[1], p->ns);
}

static void np_unchanged(const struct node_pair *p)
{
	check(!memcmp(p->snap[0], p->b[0], p->ns) && !memcmp(p->snap[1], p->b[1], p->ns),
	      "%s: a failed node operation changed a block", p->ctx);
}

static void np_step(struct node_pair *p)
{
	unsigned r = rnd_below(100), side = rnd_below(2), max = node_max_ptrs(p->ns);
	unsigned lo = side ? p->split : 0, cnt = side ? p->n - p->split : p->split;
	int ret, expect;

	if (r < (p->growing ? 60u : 25u)) { /* insert */
		unsigned slot = rnd_below(cnt + 1), pos = lo + slot;
		uint64_t a = pos ? p->v[pos - 1].rank : 0, b = pos < p->n ? p->v[pos].rank : RANK_MAX;
		uint64_t rank, bp = 4096 * (1 + rnd_below(1 << 20)), gen = rnd();
		struct btrfs_key k;

		if (!pick_ranks(a, b, 1, &rank))
			return;
		k = rank_key(rank);
		expect = cnt < max ? 0 : -ENOSPC;
		if (rnd_below(20) == 0) {
			bp = 0;
			expect = -EINVAL;
		}
		np_snapshot(p);
		ret = node_insert_ptr(p->b[side], p->ns, slot, &k, bp, gen);
		check(ret == expect, "%s: node insert: %d want %d", p->ctx, ret, expect);
		p->nospc += ret == -ENOSPC;
		if (ret) {
			np_unchanged(p);
			return;
		}
		memmove(&p->v[pos + 1], &p->v[pos], (p->n - pos) * sizeof(*p->v));
		p->v[pos] = (struct kp){ rank, bp, gen };
		p->n++;
		if (!side)
			p->split++;
	} else if (r < 60) { /* delete */
		unsigned slot, n;
		if (!cnt)
			return;
		slot = rnd_below(cnt);
		n = rnd_below(8) == 0 ? cnt - slot : 1 + rnd_below(cnt - slot < 5 ? cnt - slot : 5);
		check(node_delete_ptrs(p->b[side], p->ns, slot, n) == 0, "%s: node delete", p->ctx);
		p->emptied += n == cnt;
		memmove(&p->v[lo + slot], &p->v[lo + slot + n], (p->n - lo - slot - n) * sizeof(*p->v));
		p->n -= n;
		if (!side)
			p->split -= n;
	} else if (r < 68) { /* set pointer (COW of a child) or key */
		unsigned slot, pos;
		uint64_t rank;
		struct btrfs_key k;
		if (!cnt)
			return;
		slot = rnd_below(cnt);
		pos = lo + slot;
		if (!pick_ranks(pos ? p->v[pos - 1].rank : 0, pos + 1 < p->n ? p->v[pos + 1].rank : RANK_MAX,
				1, &rank))
			return;
		k = rank_key(rank);
		if (rnd_below(2)) {
			uint64_t bp = 4096 * (1 + rnd_below(1 << 20)), gen = rnd();
			check(node_set_ptr(p->b[side], p->ns, slot, &k, bp, gen) == 0, "%s: set ptr",
			      p->ctx);
			p->v[pos] = (struct kp){ rank, bp, gen };
		} else {
			check(node_set_key(p->b[side], p->ns, slot, &k) == 0, "%s: set key", p->ctx);
			p->v[pos].rank = rank;
		}
		if (slot + 1 < cnt) {
			k = rank_key(p->v[pos + 1].rank);
			np_snapshot(p);
			check(node_set_key(p->b[side], p->ns, slot, &k) == -EINVAL, "%s: dup key", p->ctx);
			np_unchanged(p);
		}
	} else if (r < 90) { /* push */
		int right = rnd_below(2);
		unsigned nl = p->split, nr = p->n - p->split, n = right ? nl : nr;
		unsigned count = rnd_below(3) == 0 ? n : rnd_below(n + 1);
		expect = (right ? nr : nl) + count <= max ? 0 : -ENOSPC;
		np_snapshot(p);
		ret = right ? node_push_right(p->b[0], p->b[1], p->ns, count)
			    : node_push_left(p->b[0], p->b[1], p->ns, count);
		check(ret == expect, "%s: node push: %d want %d", p->ctx, ret, expect);
		p->nospc += ret == -ENOSPC;
		if (ret) {
			np_unchanged(p);
			return;
		}
		p->split = right ? p->split - count : p->split + count;
	} else { /* split the left node into a fresh one and push it on or back */
		unsigned nl = p->split, k = rnd_below(nl + 1);
		uint8_t *e = new_block(p->ns, 1);
		check(node_split(p->b[0], e, p->ns, k) == 0, "%s: node split", p->ctx);
		expect_node(p->b[0], p->ns, p->v, k, p->ctx);
		expect_node(e, p->ns, p->v + k, nl - k, p->ctx);
		if ((p->n - nl) + (nl - k) <= max) {
			check(node_push_right(e, p->b[1], p->ns, nl - k) == 0, "%s: push on", p->ctx);
			p->split = k;
		} else {
			check(node_push_right(e, p->b[1], p->ns, nl - k) == -ENOSPC, "%s", p->ctx);
			check(node_push_left(p->b[0], e, p->ns, nl - k) == 0, "%s: push back", p->ctx);
		}
		free(e);
	}
}

/* Phases of growth (nodes fill up: -ENOSPC) and shrinking (nodes empty). */
Test(ctree_ops, random_ops_on_two_nodes_match_the_model)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		unsigned nospc = 0, emptied = 0, seeds = reps(8 >> z, 1);

		for (uint64_t seed = 1; seed <= seeds; seed++) {
			struct node_pair p = { .ns = nodesizes[z] };
			unsigned max = node_max_ptrs(p.ns);

			rng_state = seed * 99 + z;
			p.v = calloc(2 * max + 1, sizeof(*p.v));
			cr_assert_not_null(p.v);
			for (int i = 0; i < 2; i++) {
				p.b[i] = new_block(p.ns, 1);
				p.snap[i] = malloc(p.ns);
			}
			for (unsigned step = 0; step < 10 * max; step++) {
				snprintf(p.ctx, sizeof(p.ctx), "nodes nodesize %u seed %llu step %u",
					 p.ns, (unsigned long long)seed, step);
				p.growing = (step / (4 * max)) % 2 == 0;
				np_step(&p);
				if (full_check_due(step))
					np_expect(&p);
			}
			nospc += p.nospc;
			emptied += p.emptied;
			for (int i = 0; i < 2; i++) {
				free(p.b[i]);
				free(p.snap[i]);
			}
			free(p.v);
		}
		cr_assert_gt(nospc, 0, "nodesize %u: the nodes never filled up", nodesizes[z]);
		cr_assert_gt(emptied, 0, "nodesize %u: a node never emptied", nodesizes[z]);
	}
}

Test(ctree_ops, full_node_then_split)
{
	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		unsigned max = node_max_ptrs(ns), half = max / 2;
		uint8_t *a = new_block(ns, 2), *b = new_block(ns, 2), *leafy = new_block(ns, 0);
		struct btrfs_key k;
		char why[200];

		for (unsigned i = 0; i < max; i++) {
			k = rank_key((i + 1) * 10);
			cr_assert_eq(node_insert_ptr(a, ns, i, &k, 4096 * (i + 1), i), 0);
		}
		cr_assert_eq(block_check_layout(a, ns, why, sizeof(why)), 0, "%s", why);
		k = rank_key(5);
		cr_assert_eq(node_insert_ptr(a, ns, 0, &k, 4096, 1), -ENOSPC);
		cr_assert_eq(node_split(a, leafy, ns, half), -EINVAL, "levels differ");
		cr_assert_eq(node_push_right(a, leafy, ns, 1), -EINVAL);
		cr_assert_eq(node_split(a, b, ns, half), 0);
		cr_assert_eq(header_nritems(a), half);
		cr_assert_eq(header_nritems(b), max - half);
		cr_assert_eq(block_check_layout(a, ns, why, sizeof(why)), 0, "%s", why);
		cr_assert_eq(block_check_layout(b, ns, why, sizeof(why)), 0, "%s", why);
		cr_assert(all_zero(node_key_ptr(a, half), ns - HDR - half * KPTR));
		cr_assert_eq(node_insert_ptr(a, ns, 0, &k, 4096, 1), 0, "room after the split");
		k = rank_key((max + 1) * 10);
		cr_assert_eq(node_insert_ptr(b, ns, max - half, &k, 4096, 1), 0);
		/* b's first key is above a's last: pushing all of b left refills a. */
		cr_assert_eq(node_push_left(a, b, ns, max - half + 1), -ENOSPC);
		cr_assert_eq(node_push_left(a, b, ns, max - half - 1), 0);
		cr_assert_eq(header_nritems(a), max);
		cr_assert_eq(block_check_layout(a, ns, why, sizeof(why)), 0, "%s", why);
		cr_assert_eq(header_nritems(b), 2);
		for (unsigned i = 0; i + 1 < max; i++) {
			struct btrfs_key x, y;
			key_from_disk(&x, key_ptr_key_ptr(node_key_ptr(a, i)));
			key_from_disk(&y, key_ptr_key_ptr(node_key_ptr(a, i + 1)));
			cr_assert_lt(key_compare(&x, &y), 0);
		}
		cr_assert_eq(node_delete_ptrs(b, ns, 0, 2), 0);
		cr_assert_eq(block_check_layout(b, ns, why, sizeof(why)), -EUCLEAN, "empty node");
		cr_assert(all_zero(b + HDR, ns - HDR));
		free(a);
		free(b);
		free(leafy);
	}
}

/* ------------------------------------------------------ garbage in */

/* Damage a block where it hurts: the item count, item offsets and sizes,
 * key-pointer counts, random bytes of the item headers. */
static void damage(uint8_t *b, uint32_t ns)
{
	unsigned nr = header_nritems(b), r = rnd_below(6);
	unsigned slot = rnd_below(nr + 2);
	size_t at;

	switch (r) {
	case 0:
		header_set_nritems(b, rnd_below(2) ? (uint32_t)rnd() : nr + rnd_below(5) - 2);
		break;
	case 1:
		if ((size_t)slot * ITEM + HDR + ITEM <= ns)
			item_set_offset(leaf_item(b, slot), rnd_below(2) ? (uint32_t)rnd()
				: item_offset(leaf_item(b, slot)) + rnd_below(9) - 4);
		break;
	case 2:
		if ((size_t)slot * ITEM + HDR + ITEM <= ns)
			item_set_size(leaf_item(b, slot), rnd_below(2) ? (uint32_t)rnd()
				: item_size(leaf_item(b, slot)) + rnd_below(9) - 4);
		break;
	case 3:
		header_set_level(b, (uint8_t)rnd_below(10));
		break;
	default:
		at = HDR + rnd_below(nr * ITEM + 64);
		if (at < ns)
			b[at] ^= (uint8_t)(1 + rnd_below(255));
		break;
	}
}

static int random_leaf_op(uint8_t *a, uint8_t *b, uint8_t *c, uint32_t ns)
{
	unsigned nr = header_nritems(a), slot = rnd_below(nr + 3), n = rnd_below(4);
	struct btrfs_key keys[3] = { rank_key(rnd() % RANK_MAX), rank_key(rnd() % RANK_MAX),
				     rank_key(rnd() % RANK_MAX) };
	uint32_t sizes[3] = { rnd_below(ns), rnd_below(300), rnd_below(30) };
	struct leaf_split_plan plan;
	int ret;

	switch (rnd_below(12)) {
	case 0: return leaf_insert_items(a, ns, slot, keys, sizes + rnd_below(3), 1);
	case 1: return leaf_delete_items(a, ns, slot, n);
	case 2: return leaf_resize_item(a, ns, slot, sizes[rnd_below(3)]);
	case 3: return leaf_set_key(a, ns, slot, &keys[0]);
	case 4: return leaf_split(a, b, ns, slot);
	case 5: return leaf_push_right(a, b, ns, n);
	case 6: return leaf_push_left(b, a, ns, n);
	case 7: /* the queries stay within what the block can hold */
		return leaf_push_right_max(a, b, ns, n) <= nr && leaf_push_left_max(b, a, ns, n) <= nr &&
		       leaf_free_space(a, ns) <= leaf_data_size(ns) &&
		       leaf_data_end(a, ns) <= leaf_data_size(ns) ? 0 : -EFAULT;
	case 8:
	case 9:
		ret = rnd_below(2) ? leaf_choose_split(a, ns, slot, sizes[0], &plan)
				   : leaf_choose_split_extend(a, ns, slot, sizes[0], &plan);
		if (ret)
			return ret;
		return leaf_split_apply(a, b, c, ns, &plan);
	default: return block_check_layout(a, ns, NULL, 0);
	}
}

static int random_node_op(uint8_t *a, uint8_t *b, uint32_t ns)
{
	unsigned nr = header_nritems(a), slot = rnd_below(nr + 3), n = rnd_below(4);
	struct btrfs_key k = rank_key(rnd() % RANK_MAX);

	switch (rnd_below(7)) {
	case 0: return node_insert_ptr(a, ns, slot, &k, 4096, 1);
	case 1: return node_delete_ptrs(a, ns, slot, n);
	case 2: return node_set_ptr(a, ns, slot, &k, 8192, 2);
	case 3: return node_set_key(a, ns, slot, &k);
	case 4: return node_split(a, b, ns, slot);
	case 5: return node_push_right(a, b, ns, n);
	default: return node_push_left(b, a, ns, n);
	}
}

/* Damaged blocks (ASan watches every byte past the end): each operation
 * answers 0 / -EINVAL / -ENOSPC / -EUCLEAN, leaves the blocks alone when it
 * fails, and from blocks that passed block_check_layout makes blocks that still
 * do (items moved out of a damaged block may of course carry the damage). */
Test(ctree_ops, damaged_blocks_never_lead_outside_the_buffer)
{
	char ctx[96];

	for (unsigned z = 0; z < NR_NODESIZES; z++) {
		uint32_t ns = nodesizes[z];
		uint8_t *snap[3] = { malloc(ns), malloc(ns), malloc(ns) };

		unsigned outcome[4] = { 0 }; /* 0, -EINVAL, -ENOSPC, -EUCLEAN */

		for (unsigned t = 0; t < reps(3000, 200); t++) {
			int node, ret, valid[2];
			uint8_t *blk[3];

			rng_state = 31337 + t * 7 + z;
			node = rnd_below(3) == 0;
			blk[0] = new_block(ns, node);
			blk[1] = new_block(ns, node);
			blk[2] = new_block(ns, 0);
			snprintf(ctx, sizeof(ctx), "nodesize %u trial %u (%s)", ns, t, node ? "node" : "leaf");
			if (node) {
				unsigned cnt = rnd_below(node_max_ptrs(ns) + 1);
				for (unsigned i = 0; i < cnt; i++) {
					struct btrfs_key k = rank_key((i + 1) * 1000);
					cr_assert_eq(node_insert_ptr(blk[0], ns, i, &k, 4096, 1), 0);
				}
			} else {
				struct model m = { 0 };
				fill_random_leaf(blk[0], ns, &m, rnd_below(2));
				model_free(&m);
			}
			for (unsigned d = rnd_below(3); d > 0; d--)
				damage(blk[rnd_below(4) == 0 ? 1 : 0], ns);
			for (int i = 0; i < 2; i++)
				valid[i] = block_check_layout(blk[i], ns, NULL, 0) == 0 ||
					   (header_level(blk[i]) && header_level(blk[i]) < BTRFS_MAX_LEVEL &&
					    header_nritems(blk[i]) == 0);
			for (int i = 0; i < 3; i++)
				memcpy(snap[i], blk[i], ns);
			ret = node ? random_node_op(blk[0], blk[1], ns) : random_leaf_op(blk[0], blk[1], blk[2], ns);
			check(ret == 0 || ret == -EINVAL || ret == -ENOSPC || ret == -EUCLEAN, "%s: %d", ctx,
			      ret);
			outcome[ret == 0 ? 0 : ret == -EINVAL ? 1 : ret == -ENOSPC ? 2 : 3]++;
			if (ret)
				check(!memcmp(snap[0], blk[0], ns) && !memcmp(snap[1], blk[1], ns) &&
				      !memcmp(snap[2], blk[2], ns), "%s: failed op (%d) changed a block",
				      ctx, ret);
			for (int i = 0; i < 2; i++)
				if (valid[0] && valid[1] && header_nritems(blk[i]))
					check(block_check_layout(blk[i], ns, NULL, 0) == 0,
					      "%s: a valid block %d became invalid", ctx, i);
			for (int i = 0; i < 3; i++)
				free(blk[i]);
		}
		for (int i = 0; i < 3; i++)
			free(snap[i]);
		cr_log_info("nodesize %u damaged: %u ok, %u -EINVAL, %u -ENOSPC, %u -EUCLEAN", ns,
			    outcome[0], outcome[1], outcome[2], outcome[3]);
		cr_assert(outcome[0] && outcome[1] && outcome[2] && outcome[3]);
	}
}
