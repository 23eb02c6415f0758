// SPDX-License-Identifier: LGPL-2.1-or-later
/* In-buffer btree block operations (see ctree_ops.h for the conventions).
 *
 * Leaf layout, offsets relative to the end of the header (L = nodesize - 101):
 *   [item 0][item 1]...[item n-1]  free  [data n-1]...[data 1][data 0]  L
 * Item i's data ends where item i-1's begins; item 0's ends at L. Every
 * operation below is a memmove of a contiguous run of data plus an offset
 * adjustment of the items whose data moved. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <btk/ctree_ops.h>

#define ITEM CTREE_ITEM_SIZE
#define KPTR CTREE_KEY_PTR_SIZE

int ctree_nodesize_valid(uint32_t nodesize)
{
	return nodesize >= 4096 && nodesize <= 65536 && (nodesize & (nodesize - 1)) == 0;
}

__attribute__((format(printf, 3, 4)))
static void say(char *why, size_t len, const char *fmt, ...)
{
	va_list ap;

	if (!why || !len)
		return;
	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
}

/* ------------------------------------------------------- leaf internals */

static uint8_t *leaf_base(const uint8_t *leaf)
{
	return (uint8_t *)leaf + CTREE_HEADER_SIZE;
}

static uint32_t it_off(const uint8_t *leaf, unsigned i)
{
	return item_offset(leaf_item(leaf, i));
}

static uint32_t it_size(const uint8_t *leaf, unsigned i)
{
	return item_size(leaf_item(leaf, i));
}

static void it_key(const uint8_t *leaf, unsigned i, struct btrfs_key *key)
{
	key_from_disk(key, item_key_ptr(leaf_item(leaf, i)));
}

static void it_shift_offsets(uint8_t *leaf, unsigned from, unsigned to, int64_t delta)
{
	for (unsigned i = from; i < to; i++) {
		uint8_t *item = leaf_item(leaf, i);
		item_set_offset(item, (uint32_t)((int64_t)item_offset(item) + delta));
	}
}

/* Where the data of item slot ends (= where item slot-1's begins); valid for
 * slot == nritems too. Only on structurally checked leaves. */
static uint32_t slot_data_top(const uint8_t *leaf, uint32_t nodesize, unsigned slot)
{
	return slot == 0 ? leaf_data_size(nodesize) : it_off(leaf, slot - 1);
}

static uint32_t raw_data_end(const uint8_t *leaf, uint32_t nodesize)
{
	return slot_data_top(leaf, nodesize, header_nritems(leaf));
}

static uint32_t raw_free_space(const uint8_t *leaf, uint32_t nodesize)
{
	return raw_data_end(leaf, nodesize) - header_nritems(leaf) * ITEM;
}

/* Bytes (headers + data) used by items [slot, slot + count). */
static uint32_t run_used(const uint8_t *leaf, uint32_t nodesize, unsigned slot, unsigned count)
{
	if (!count)
		return 0;
	return slot_data_top(leaf, nodesize, slot) - it_off(leaf, slot + count - 1) + count * ITEM;
}

static void fmt_key(char *buf, size_t len, const struct btrfs_key *k)
{
	snprintf(buf, len, "(%llu %u %llu)", (unsigned long long)k->objectid, k->type,
		 (unsigned long long)k->offset);
}

/* The layout rules of the kernel's check_leaf(): item headers inside the
 * leaf, data packed back to back from the end, no overlap with the headers,
 * and (with check_keys) strictly ascending keys. 0 or -EUCLEAN. */
static int leaf_layout_check(const uint8_t *leaf, uint32_t nodesize, int check_keys, char *why,
			     size_t len)
{
	uint32_t data_size = leaf_data_size(nodesize);
	uint32_t nr = header_nritems(leaf);
	uint32_t expect_end = data_size;
	struct btrfs_key prev = { 0 }, key;

	if ((uint64_t)nr * ITEM > data_size) {
		say(why, len, "leaf nritems %u: item headers need %llu bytes, the leaf has %u", nr,
		    (unsigned long long)nr * ITEM, data_size);
		return -EUCLEAN;
	}
	for (uint32_t i = 0; i < nr; i++) {
		uint32_t off = it_off(leaf, i), size = it_size(leaf, i);
		uint64_t end = (uint64_t)off + size;

		if (check_keys) {
			it_key(leaf, i, &key);
			if (i && key_compare(&prev, &key) >= 0) {
				char a[64], b[64];
				fmt_key(a, sizeof(a), &prev);
				fmt_key(b, sizeof(b), &key);
				say(why, len, "leaf item %u key %s is not after item %u key %s", i, b,
				    i - 1, a);
				return -EUCLEAN;
			}
			prev = key;
		}
		if (end > data_size) {
			say(why, len, "leaf item %u data [%u, %llu) ends beyond the leaf data size %u",
			    i, off, (unsigned long long)end, data_size);
			return -EUCLEAN;
		}
		if (end != expect_end) {
			say(why, len, "leaf item %u data ends at %llu, expected %u (items must be packed)",
			    i, (unsigned long long)end, expect_end);
			return -EUCLEAN;
		}
		if (off < nr * ITEM) {
			say(why, len, "leaf item %u data at %u overlaps the item headers ending at %u",
			    i, off, nr * ITEM);
			return -EUCLEAN;
		}
		expect_end = off;
	}
	return 0;
}

/* Entry check of every leaf operation. */
static int leaf_enter(const uint8_t *leaf, uint32_t nodesize)
{
	if (!leaf || !ctree_nodesize_valid(nodesize) || header_level(leaf) != 0)
		return -EINVAL;
	return leaf_layout_check(leaf, nodesize, 0, NULL, 0);
}

/* Room for n item headers at slot and `total` data bytes right below the data
 * of slot-1; items [slot, nritems) shift. The new headers and data are zeroed;
 * returns where the new run's data ends (it occupies [ret - total, ret)). The
 * caller has checked that n * ITEM + total bytes are free. */
static uint32_t leaf_open_gap(uint8_t *leaf, uint32_t nodesize, unsigned slot, unsigned n,
			      uint32_t total)
{
	uint32_t nr = header_nritems(leaf);
	uint32_t data_end = raw_data_end(leaf, nodesize);
	uint32_t top = slot_data_top(leaf, nodesize, slot);
	uint8_t *base = leaf_base(leaf);

	if (slot < nr) {
		memmove(base + data_end - total, base + data_end, top - data_end);
		it_shift_offsets(leaf, slot, nr, -(int64_t)total);
		memmove(leaf_item(leaf, slot + n), leaf_item(leaf, slot), (size_t)(nr - slot) * ITEM);
	}
	memset(leaf_item(leaf, slot), 0, (size_t)n * ITEM);
	memset(base + top - total, 0, total);
	header_set_nritems(leaf, nr + n);
	return top;
}

/* Remove items [slot, slot + n), n >= 1, zeroing the bytes they used. */
static void leaf_close_gap(uint8_t *leaf, uint32_t nodesize, unsigned slot, unsigned n)
{
	uint32_t nr = header_nritems(leaf);
	uint32_t data_end = raw_data_end(leaf, nodesize);
	uint32_t top = slot_data_top(leaf, nodesize, slot);
	uint32_t bottom = it_off(leaf, slot + n - 1);
	uint32_t dsize = top - bottom;
	uint8_t *base = leaf_base(leaf);

	if (slot + n < nr) {
		memmove(base + data_end + dsize, base + data_end, bottom - data_end);
		it_shift_offsets(leaf, slot + n, nr, dsize);
		memmove(leaf_item(leaf, slot), leaf_item(leaf, slot + n),
			(size_t)(nr - slot - n) * ITEM);
	}
	memset(base + data_end, 0, dsize);
	memset(leaf_item(leaf, nr - n), 0, (size_t)n * ITEM);
	header_set_nritems(leaf, nr - n);
}

/* Copy items [s, s + count) of src, headers and data, into dst at dslot. The
 * caller has checked space and key order. */
static void leaf_copy_run(uint8_t *dst, const uint8_t *src, uint32_t nodesize, unsigned dslot,
			  unsigned s, unsigned count)
{
	uint32_t src_top = slot_data_top(src, nodesize, s);
	uint32_t src_bottom = it_off(src, s + count - 1);
	uint32_t total = src_top - src_bottom;
	uint32_t dst_bottom = leaf_open_gap(dst, nodesize, dslot, count, total) - total;

	memcpy(leaf_base(dst) + dst_bottom, leaf_base(src) + src_bottom, total);
	memcpy(leaf_item(dst, dslot), leaf_item(src, s), (size_t)count * ITEM);
	for (unsigned i = 0; i < count; i++) {
		uint8_t *item = leaf_item(dst, dslot + i);
		item_set_offset(item, item_offset(item) - src_bottom + dst_bottom);
	}
}

/* ------------------------------------------------------- leaf interface */

uint32_t leaf_data_end(const uint8_t *leaf, uint32_t nodesize)
{
	if (leaf_enter(leaf, nodesize))
		return ctree_nodesize_valid(nodesize) ? leaf_data_size(nodesize) : 0;
	return raw_data_end(leaf, nodesize);
}

uint32_t leaf_free_space(const uint8_t *leaf, uint32_t nodesize)
{
	if (leaf_enter(leaf, nodesize))
		return 0;
	return raw_free_space(leaf, nodesize);
}

int leaf_insert_items(uint8_t *leaf, uint32_t nodesize, unsigned slot, const struct btrfs_key *keys,
		      const uint32_t *sizes, unsigned n)
{
	struct btrfs_key k;
	uint64_t total = 0;
	uint32_t nr, end;
	int ret = leaf_enter(leaf, nodesize);

	if (ret)
		return ret;
	nr = header_nritems(leaf);
	if (slot > nr)
		return -EINVAL;
	if (n == 0)
		return 0;
	if (!keys || !sizes)
		return -EINVAL;
	for (unsigned i = 0; i < n; i++) {
		if (i && key_compare(&keys[i - 1], &keys[i]) >= 0)
			return -EINVAL;
		total += sizes[i];
	}
	if (slot > 0) {
		it_key(leaf, slot - 1, &k);
		if (key_compare(&k, &keys[0]) >= 0)
			return -EINVAL;
	}
	if (slot < nr) {
		it_key(leaf, slot, &k);
		if (key_compare(&keys[n - 1], &k) >= 0)
			return -EINVAL;
	}
	if (total + (uint64_t)n * ITEM > raw_free_space(leaf, nodesize))
		return -ENOSPC;

	end = leaf_open_gap(leaf, nodesize, slot, n, (uint32_t)total);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *item = leaf_item(leaf, slot + i);
		end -= sizes[i];
		key_to_disk(item_key_ptr(item), &keys[i]);
		item_set_offset(item, end);
		item_set_size(item, sizes[i]);
	}
	return 0;
}

int leaf_delete_items(uint8_t *leaf, uint32_t nodesize, unsigned slot, unsigned n)
{
	int ret = leaf_enter(leaf, nodesize);

	if (ret)
		return ret;
	if (slot > header_nritems(leaf) || n > header_nritems(leaf) - slot)
		return -EINVAL;
	if (n)
		leaf_close_gap(leaf, nodesize, slot, n);
	return 0;
}

int leaf_resize_item(uint8_t *leaf, uint32_t nodesize, unsigned slot, uint32_t new_size)
{
	uint32_t nr, old_size, off, data_end, diff;
	uint8_t *base;
	int ret = leaf_enter(leaf, nodesize);

	if (ret)
		return ret;
	base = leaf_base(leaf);
	nr = header_nritems(leaf);
	if (slot >= nr)
		return -EINVAL;
	old_size = it_size(leaf, slot);
	off = it_off(leaf, slot);
	data_end = raw_data_end(leaf, nodesize);
	if (new_size > old_size) {
		diff = new_size - old_size;
		if (diff > raw_free_space(leaf, nodesize))
			return -ENOSPC;
		/* Item slot and everything after it move down; the tail is new. */
		memmove(base + data_end - diff, base + data_end, off + old_size - data_end);
		it_shift_offsets(leaf, slot, nr, -(int64_t)diff);
		memset(base + off + old_size - diff, 0, diff);
	} else if (new_size < old_size) {
		diff = old_size - new_size;
		/* The first new_size bytes of the item and everything after it move up. */
		memmove(base + data_end + diff, base + data_end, off + new_size - data_end);
		it_shift_offsets(leaf, slot, nr, diff);
		memset(base + data_end, 0, diff);
	}
	item_set_size(leaf_item(leaf, slot), new_size);
	return 0;
}

int leaf_set_key(uint8_t *leaf, uint32_t nodesize, unsigned slot, const struct btrfs_key *key)
{
	struct btrfs_key k;
	uint32_t nr;
	int ret = leaf_enter(leaf, nodesize);

	if (ret)
		return ret;
	nr = header_nritems(leaf);
	if (slot >= nr || !key)
		return -EINVAL;
	if (slot > 0) {
		it_key(leaf, slot - 1, &k);
		if (key_compare(&k, key) >= 0)
			return -EINVAL;
	}
	if (slot + 1 < nr) {
		it_key(leaf, slot + 1, &k);
		if (key_compare(key, &k) >= 0)
			return -EINVAL;
	}
	key_to_disk(item_key_ptr(leaf_item(leaf, slot)), key);
	return 0;
}

/* Both leaves valid, distinct. */
static int leaf_pair_enter(const uint8_t *left, const uint8_t *right, uint32_t nodesize)
{
	int ret;

	if (left == right)
		return -EINVAL;
	ret = leaf_enter(left, nodesize);
	return ret ? ret : leaf_enter(right, nodesize);
}

/* left's last key < right's first key (or one of them is empty). */
static int leaf_pair_ordered(const uint8_t *left, const uint8_t *right)
{
	uint32_t nl = header_nritems(left), nr = header_nritems(right);
	struct btrfs_key a, b;

	if (!nl || !nr)
		return 1;
	it_key(left, nl - 1, &a);
	it_key(right, 0, &b);
	return key_compare(&a, &b) < 0;
}

int leaf_split(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned split_slot)
{
	uint32_t nl;
	int ret = leaf_pair_enter(left, right, nodesize);

	if (ret)
		return ret;
	nl = header_nritems(left);
	if (header_nritems(right) != 0 || split_slot > nl)
		return -EINVAL;
	if (split_slot == nl)
		return 0;
	leaf_copy_run(right, left, nodesize, 0, split_slot, nl - split_slot);
	leaf_close_gap(left, nodesize, split_slot, nl - split_slot);
	return 0;
}

int leaf_push_right(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned count)
{
	uint32_t nl;
	int ret = leaf_pair_enter(left, right, nodesize);

	if (ret)
		return ret;
	nl = header_nritems(left);
	if (count > nl || !leaf_pair_ordered(left, right))
		return -EINVAL;
	if (count == 0)
		return 0;
	if (run_used(left, nodesize, nl - count, count) > raw_free_space(right, nodesize))
		return -ENOSPC;
	leaf_copy_run(right, left, nodesize, 0, nl - count, count);
	leaf_close_gap(left, nodesize, nl - count, count);
	return 0;
}

int leaf_push_left(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned count)
{
	int ret = leaf_pair_enter(left, right, nodesize);

	if (ret)
		return ret;
	if (count > header_nritems(right) || !leaf_pair_ordered(left, right))
		return -EINVAL;
	if (count == 0)
		return 0;
	if (run_used(right, nodesize, 0, count) > raw_free_space(left, nodesize))
		return -ENOSPC;
	leaf_copy_run(left, right, nodesize, header_nritems(left), 0, count);
	leaf_close_gap(right, nodesize, 0, count);
	return 0;
}

unsigned leaf_push_right_max(const uint8_t *left, const uint8_t *right, uint32_t nodesize,
			     uint32_t reserve)
{
	uint32_t avail, used = 0;
	unsigned count = 0, nl;

	if (leaf_pair_enter(left, right, nodesize) || !leaf_pair_ordered(left, right))
		return 0;
	avail = raw_free_space(right, nodesize);
	if (avail < reserve)
		return 0;
	avail -= reserve;
	nl = header_nritems(left);
	while (count < nl) {
		uint32_t need = it_size(left, nl - 1 - count) + ITEM;
		if (need > avail - used)
			break;
		used += need;
		count++;
	}
	return count;
}

unsigned leaf_push_left_max(const uint8_t *left, const uint8_t *right, uint32_t nodesize,
			    uint32_t reserve)
{
	uint32_t avail, used = 0;
	unsigned count = 0, nr;

	if (leaf_pair_enter(left, right, nodesize) || !leaf_pair_ordered(left, right))
		return 0;
	avail = raw_free_space(left, nodesize);
	if (avail < reserve)
		return 0;
	avail -= reserve;
	nr = header_nritems(right);
	while (count < nr) {
		uint32_t need = it_size(right, count) + ITEM;
		if (need > avail - used)
			break;
		used += need;
		count++;
	}
	return count;
}

/* ------------------------------------------------------ split planning */

/* The items of a leaf as they will be once the item is in place: for an
 * insert, the real items with a new one of `weight` bytes at position s; for
 * an extend, the real items with item s weighing `weight`. Weights include the
 * item header. */
struct split_seq {
	const uint8_t *leaf;
	uint32_t nodesize;
	unsigned s, len;
	uint32_t weight;
	int insert;
};

static uint32_t seq_weight(const struct split_seq *q, unsigned v)
{
	if (v == q->s)
		return q->weight;
	if (q->insert && v > q->s)
		v--;
	return it_size(q->leaf, v) + ITEM;
}

/* Turn a cut of the virtual sequence (blocks [0, c) and [c, len)) into a plan. */
static void plan_two(const struct split_seq *q, unsigned c, struct leaf_split_plan *plan)
{
	unsigned n = header_nritems(q->leaf);

	plan->nr_new = 1;
	plan->cut[1] = n;
	if (q->s < c) {
		plan->cut[0] = q->insert ? c - 1 : c;
		plan->target = 0;
		plan->slot = q->s;
	} else {
		plan->cut[0] = c;
		plan->target = 1;
		plan->slot = q->s - c;
	}
}

static int plan_split(const struct split_seq *q, struct leaf_split_plan *plan)
{
	uint32_t data_size = leaf_data_size(q->nodesize);
	uint64_t total = 0, prefix = 0, best = UINT64_MAX;
	unsigned best_cut = 0;

	for (unsigned v = 0; v < q->len; v++)
		total += seq_weight(q, v);
	if (total <= data_size) {
		*plan = (struct leaf_split_plan){ .nr_new = 0, .target = 0, .slot = q->s };
		plan->cut[0] = plan->cut[1] = header_nritems(q->leaf);
		return 0;
	}
	/* Two blocks [0, c) and [c, len), both non-empty: the fuller as empty as can be. */
	for (unsigned c = 1; c < q->len; c++) {
		uint64_t fuller;

		prefix += seq_weight(q, c - 1);
		fuller = prefix > total - prefix ? prefix : total - prefix;
		if (fuller <= data_size && fuller < best) {
			best = fuller;
			best_cut = c;
		}
	}
	if (best_cut) {
		plan_two(q, best_cut, plan);
		return 0;
	}
	/* Neither side can take the item: it goes alone between them. Only
	 * possible away from the edges (there, [item] + the rest always fits). */
	if (q->s == 0 || q->s + 1 >= q->len)
		return -EUCLEAN;
	plan->nr_new = 2;
	plan->cut[0] = q->s;
	plan->cut[1] = q->insert ? q->s : q->s + 1;
	plan->target = 1;
	plan->slot = 0;
	return 0;
}

int leaf_choose_split(const uint8_t *leaf, uint32_t nodesize, unsigned insert_slot,
		      uint32_t insert_size, struct leaf_split_plan *plan)
{
	struct split_seq q;
	int ret = leaf_enter(leaf, nodesize);

	if (ret)
		return ret;
	if (!plan || insert_slot > header_nritems(leaf) || insert_size > leaf_max_item_size(nodesize))
		return -EINVAL;
	q = (struct split_seq){ .leaf = leaf, .nodesize = nodesize, .s = insert_slot,
				.len = header_nritems(leaf) + 1, .weight = insert_size + ITEM,
				.insert = 1 };
	return plan_split(&q, plan);
}

int leaf_choose_split_edge(const uint8_t *leaf, uint32_t nodesize, unsigned insert_slot,
			   uint32_t insert_size, unsigned edge, struct leaf_split_plan *plan)
{
	int ret = leaf_choose_split(leaf, nodesize, insert_slot, insert_size, plan);
	unsigned n;

	if (ret || plan->nr_new == 0)
		return ret;
	n = header_nritems(leaf);
	/* the item alone is always a valid block: insert_size <= leaf_max_item_size() */
	if ((edge & CTREE_EDGE_RIGHT) && insert_slot == n) {
		*plan = (struct leaf_split_plan){ .nr_new = 1, .cut = { n, n }, .target = 1, .slot = 0 };
	} else if ((edge & CTREE_EDGE_LEFT) && insert_slot == 0) {
		*plan = (struct leaf_split_plan){ .nr_new = 1, .cut = { 0, n }, .target = 0, .slot = 0 };
	}
	return 0;
}

int leaf_choose_split_extend(const uint8_t *leaf, uint32_t nodesize, unsigned slot,
			     uint32_t new_size, struct leaf_split_plan *plan)
{
	struct split_seq q;
	int ret = leaf_enter(leaf, nodesize);

	if (ret)
		return ret;
	if (!plan || slot >= header_nritems(leaf) || new_size > leaf_max_item_size(nodesize))
		return -EINVAL;
	q = (struct split_seq){ .leaf = leaf, .nodesize = nodesize, .s = slot,
				.len = header_nritems(leaf), .weight = new_size + ITEM,
				.insert = 0 };
	return plan_split(&q, plan);
}

static int empty_leaf(const uint8_t *leaf, uint32_t nodesize)
{
	int ret = leaf_enter(leaf, nodesize);

	if (ret)
		return ret;
	return header_nritems(leaf) == 0 ? 0 : -EINVAL;
}

int leaf_split_apply(uint8_t *leaf, uint8_t *new1, uint8_t *new2, uint32_t nodesize,
		     const struct leaf_split_plan *plan)
{
	uint32_t n;
	int ret = leaf_enter(leaf, nodesize);

	if (ret)
		return ret;
	if (!plan || plan->nr_new > 2 || plan->target > plan->nr_new)
		return -EINVAL;
	n = header_nritems(leaf);
	if (plan->nr_new == 0)
		return 0;
	if (plan->cut[0] > plan->cut[1] || plan->cut[1] > n || (plan->nr_new == 1 && plan->cut[1] != n))
		return -EINVAL;
	if (new1 == leaf || (ret = empty_leaf(new1, nodesize)))
		return ret ? ret : -EINVAL;
	if (plan->nr_new == 2) {
		if (new2 == leaf || new2 == new1 || (ret = empty_leaf(new2, nodesize)))
			return ret ? ret : -EINVAL;
		ret = leaf_split(leaf, new2, nodesize, plan->cut[1]);
		if (ret)
			return ret;
	}
	return leaf_split(leaf, new1, nodesize, plan->cut[0]);
}

/* ------------------------------------------------------------- nodes */

static void kp_key(const uint8_t *node, unsigned i, struct btrfs_key *key)
{
	key_from_disk(key, key_ptr_key_ptr(node_key_ptr(node, i)));
}

static void kp_write(uint8_t *node, unsigned i, const struct btrfs_key *key, uint64_t blockptr,
		     uint64_t generation)
{
	uint8_t *p = node_key_ptr(node, i);

	key_to_disk(key_ptr_key_ptr(p), key);
	key_ptr_set_blockptr(p, blockptr);
	key_ptr_set_generation(p, generation);
}

static int node_enter(const uint8_t *node, uint32_t nodesize)
{
	if (!node || !ctree_nodesize_valid(nodesize))
		return -EINVAL;
	if (header_level(node) == 0 || header_level(node) >= BTRFS_MAX_LEVEL)
		return -EINVAL;
	return header_nritems(node) > node_max_ptrs(nodesize) ? -EUCLEAN : 0;
}

static int node_pair_enter(const uint8_t *left, const uint8_t *right, uint32_t nodesize)
{
	int ret;

	if (left == right)
		return -EINVAL;
	if ((ret = node_enter(left, nodesize)) || (ret = node_enter(right, nodesize)))
		return ret;
	return header_level(left) == header_level(right) ? 0 : -EINVAL;
}

static int node_pair_ordered(const uint8_t *left, const uint8_t *right)
{
	uint32_t nl = header_nritems(left), nr = header_nritems(right);
	struct btrfs_key a, b;

	if (!nl || !nr)
		return 1;
	kp_key(left, nl - 1, &a);
	kp_key(right, 0, &b);
	return key_compare(&a, &b) < 0;
}

/* key fits strictly between pointers slot-1 and `next` (skipped if out of range). */
static int node_key_fits(const uint8_t *node, unsigned slot, unsigned next,
			 const struct btrfs_key *key)
{
	struct btrfs_key k;

	if (slot > 0) {
		kp_key(node, slot - 1, &k);
		if (key_compare(&k, key) >= 0)
			return 0;
	}
	if (next < header_nritems(node)) {
		kp_key(node, next, &k);
		if (key_compare(key, &k) >= 0)
			return 0;
	}
	return 1;
}

int node_insert_ptr(uint8_t *node, uint32_t nodesize, unsigned slot, const struct btrfs_key *key,
		    uint64_t blockptr, uint64_t generation)
{
	uint32_t nr;
	int ret = node_enter(node, nodesize);

	if (ret)
		return ret;
	nr = header_nritems(node);
	if (slot > nr || !key || blockptr == 0 || !node_key_fits(node, slot, slot, key))
		return -EINVAL;
	if (nr >= node_max_ptrs(nodesize))
		return -ENOSPC;
	memmove(node_key_ptr(node, slot + 1), node_key_ptr(node, slot), (size_t)(nr - slot) * KPTR);
	kp_write(node, slot, key, blockptr, generation);
	header_set_nritems(node, nr + 1);
	return 0;
}

int node_delete_ptrs(uint8_t *node, uint32_t nodesize, unsigned slot, unsigned n)
{
	uint32_t nr;
	int ret = node_enter(node, nodesize);

	if (ret)
		return ret;
	nr = header_nritems(node);
	if (slot > nr || n > nr - slot)
		return -EINVAL;
	memmove(node_key_ptr(node, slot), node_key_ptr(node, slot + n), (size_t)(nr - slot - n) * KPTR);
	memset(node_key_ptr(node, nr - n), 0, (size_t)n * KPTR);
	header_set_nritems(node, nr - n);
	return 0;
}

int node_set_ptr(uint8_t *node, uint32_t nodesize, unsigned slot, const struct btrfs_key *key,
		 uint64_t blockptr, uint64_t generation)
{
	int ret = node_enter(node, nodesize);

	if (ret)
		return ret;
	if (slot >= header_nritems(node) || !key || blockptr == 0 ||
	    !node_key_fits(node, slot, slot + 1, key))
		return -EINVAL;
	kp_write(node, slot, key, blockptr, generation);
	return 0;
}

int node_set_key(uint8_t *node, uint32_t nodesize, unsigned slot, const struct btrfs_key *key)
{
	int ret = node_enter(node, nodesize);

	if (ret)
		return ret;
	if (slot >= header_nritems(node) || !key || !node_key_fits(node, slot, slot + 1, key))
		return -EINVAL;
	key_to_disk(key_ptr_key_ptr(node_key_ptr(node, slot)), key);
	return 0;
}

unsigned node_choose_split(const uint8_t *node, unsigned slot, unsigned edge)
{
	unsigned n = header_nritems(node);

	if (n < 2)
		return n / 2;
	if ((edge & CTREE_EDGE_RIGHT) && slot + 1 == n)
		return n - 1;
	if ((edge & CTREE_EDGE_LEFT) && slot == 0)
		return 1;
	return n / 2;
}

int node_split(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned split_slot)
{
	uint32_t nl, count;
	int ret = node_pair_enter(left, right, nodesize);

	if (ret)
		return ret;
	nl = header_nritems(left);
	if (header_nritems(right) != 0 || split_slot > nl)
		return -EINVAL;
	count = nl - split_slot;
	memcpy(node_key_ptr(right, 0), node_key_ptr(left, split_slot), (size_t)count * KPTR);
	memset(node_key_ptr(left, split_slot), 0, (size_t)count * KPTR);
	header_set_nritems(right, count);
	header_set_nritems(left, split_slot);
	return 0;
}

int node_push_right(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned count)
{
	uint32_t nl, nr;
	int ret = node_pair_enter(left, right, nodesize);

	if (ret)
		return ret;
	nl = header_nritems(left);
	nr = header_nritems(right);
	if (count > nl || !node_pair_ordered(left, right))
		return -EINVAL;
	if (count > node_max_ptrs(nodesize) - nr)
		return -ENOSPC;
	memmove(node_key_ptr(right, count), node_key_ptr(right, 0), (size_t)nr * KPTR);
	memcpy(node_key_ptr(right, 0), node_key_ptr(left, nl - count), (size_t)count * KPTR);
	memset(node_key_ptr(left, nl - count), 0, (size_t)count * KPTR);
	header_set_nritems(left, nl - count);
	header_set_nritems(right, nr + count);
	return 0;
}

int node_push_left(uint8_t *left, uint8_t *right, uint32_t nodesize, unsigned count)
{
	uint32_t nl, nr;
	int ret = node_pair_enter(left, right, nodesize);

	if (ret)
		return ret;
	nl = header_nritems(left);
	nr = header_nritems(right);
	if (count > nr || !node_pair_ordered(left, right))
		return -EINVAL;
	if (count > node_max_ptrs(nodesize) - nl)
		return -ENOSPC;
	memcpy(node_key_ptr(left, nl), node_key_ptr(right, 0), (size_t)count * KPTR);
	memmove(node_key_ptr(right, 0), node_key_ptr(right, count), (size_t)(nr - count) * KPTR);
	memset(node_key_ptr(right, nr - count), 0, (size_t)count * KPTR);
	header_set_nritems(left, nl + count);
	header_set_nritems(right, nr - count);
	return 0;
}

/* ----------------------------------------------------------- checking */

static int node_layout_check(const uint8_t *node, uint32_t nodesize, char *why, size_t len)
{
	uint32_t nr = header_nritems(node), max = node_max_ptrs(nodesize);
	struct btrfs_key prev = { 0 }, key;

	if (nr == 0) {
		say(why, len, "node (level %u) has no key pointers", header_level(node));
		return -EUCLEAN;
	}
	if (nr > max) {
		say(why, len, "node nritems %u exceeds the maximum %u", nr, max);
		return -EUCLEAN;
	}
	for (uint32_t i = 0; i < nr; i++) {
		kp_key(node, i, &key);
		if (i && key_compare(&prev, &key) >= 0) {
			char a[64], b[64];
			fmt_key(a, sizeof(a), &prev);
			fmt_key(b, sizeof(b), &key);
			say(why, len, "node pointer %u key %s is not after pointer %u key %s", i, b,
			    i - 1, a);
			return -EUCLEAN;
		}
		if (key_ptr_blockptr(node_key_ptr(node, i)) == 0) {
			say(why, len, "node pointer %u has block pointer 0", i);
			return -EUCLEAN;
		}
		prev = key;
	}
	return 0;
}

int block_check_layout(const uint8_t *block, uint32_t nodesize, char *why, size_t len)
{
	if (why && len)
		why[0] = '\0';
	if (!block || !ctree_nodesize_valid(nodesize)) {
		say(why, len, "nodesize %u is not a btrfs node size", nodesize);
		return -EINVAL;
	}
	if (header_level(block) >= BTRFS_MAX_LEVEL) {
		say(why, len, "level %u is not below %u", header_level(block), BTRFS_MAX_LEVEL);
		return -EUCLEAN;
	}
	if (header_level(block) == 0)
		return leaf_layout_check(block, nodesize, 1, why, len);
	return node_layout_check(block, nodesize, why, len);
}
