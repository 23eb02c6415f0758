// SPDX-License-Identifier: GPL-2.0-only
/* Tree diff by block pointers (snap_diff.h). Memory: the private blocks of
 * one level of each side. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check/snap_diff.h"
#include <btk/csum.h>

struct ptr {
	uint64_t bytenr, gen;
};

struct side {
	struct ptr *v;
	size_t n, cap;
	int level;
};

struct diff {
	struct fs_info *fs;
	uint64_t max, *blocks;
	snap_leaf_fn fn;
	void *arg;
};

static int push(struct side *s, uint64_t bytenr, uint64_t gen)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 64;
		struct ptr *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n].bytenr = bytenr;
	s->v[s->n++].gen = gen;
	return 0;
}

static int ptr_cmp(const void *a, const void *b)
{
	const struct ptr *x = a, *y = b;

	if (x->bytenr != y->bytenr)
		return x->bytenr < y->bytenr ? -1 : 1;
	return (x->gen > y->gen) - (x->gen < y->gen);
}

/* Drop the blocks both sides hold (one level): shared subtrees. */
static void drop_common(struct side *a, struct side *b)
{
	size_t i = 0, j = 0, na = 0, nb = 0;

	if (a->n)
		qsort(a->v, a->n, sizeof(*a->v), ptr_cmp);
	if (b->n)
		qsort(b->v, b->n, sizeof(*b->v), ptr_cmp);
	while (i < a->n || j < b->n) {
		int c = i == a->n ? 1 : j == b->n ? -1 : ptr_cmp(&a->v[i], &b->v[j]);
		if (c == 0) {
			i++;
			j++;
		} else if (c < 0) {
			a->v[na++] = a->v[i++];
		} else {
			b->v[nb++] = b->v[j++];
		}
	}
	a->n = na;
	b->n = nb;
}

/* Read side's blocks: a level's nodes are replaced by their children, its
 * leaves handed to fn. */
static int expand(struct diff *d, struct side *s, int which)
{
	struct side next = { .level = s->level - 1 };
	int ret = 0;

	for (size_t i = 0; i < s->n && !ret; i++) {
		struct block_expect e = { .generation = s->v[i].gen, .level = s->level };
		struct tree_block *b;
		if (++*d->blocks > d->max) {
			ret = 1;
			break;
		}
		if ((ret = block_read(d->fs, s->v[i].bytenr, &e, &b)))
			break;
		if (s->level == 0)
			ret = d->fn(d->arg, which, b);
		for (unsigned k = 0; s->level > 0 && k < block_nritems(b) && !ret; k++)
			ret = push(&next, key_ptr_blockptr(node_key_ptr(b->data, k)),
				   key_ptr_generation(node_key_ptr(b->data, k)));
		block_put(d->fs, b);
	}
	free(s->v);
	*s = next;
	return ret;
}

/* A leaf's items: the item headers and the data they point at (the free
 * space between holds stale bytes). The block was verified when read. */
static void leaf_parts(const struct tree_block *b, size_t *nitems, size_t *data_start)
{
	unsigned n = block_nritems(b);
	size_t lo = b->len;

	for (unsigned i = 0; i < n; i++) {
		size_t off = sizeof(struct btrfs_header) + item_offset(leaf_item(b->data, i));
		lo = off < lo ? off : lo;
	}
	*nitems = (size_t)n * sizeof(struct btrfs_item);
	*data_start = lo;
}

static uint64_t leaf_hash(const struct tree_block *b)
{
	size_t nitems, start;

	leaf_parts(b, &nitems, &start);
	return (uint64_t)crc32c_btrfs(0, leaf_item(b->data, 0), nitems) << 32 |
	       crc32c_btrfs(0, b->data + start, b->len - start);
}

/* Two leaves holding the same items (a COWed copy nothing changed in). */
static bool same_leaf(const struct tree_block *a, const struct tree_block *b)
{
	size_t na, sa, nb, sb;

	leaf_parts(a, &na, &sa);
	leaf_parts(b, &nb, &sb);
	return a->len == b->len && na == nb && sa == sb && !memcmp(leaf_item(a->data, 0), leaf_item(b->data, 0), na) &&
	       !memcmp(a->data + sa, b->data + sb, a->len - sa);
}

struct leaf_sum {
	uint64_t hash;
	size_t idx;
	bool matched;
};

static int sum_cmp(const void *a, const void *b)
{
	const struct leaf_sum *x = a, *y = b;

	return (x->hash > y->hash) - (x->hash < y->hash);
}

/* (again: read before, not counted) */
static int read_leaf(struct diff *d, const struct ptr *p, bool again, struct tree_block **out)
{
	struct block_expect e = { .generation = p->gen, .level = 0 };

	if (!again && ++*d->blocks > d->max)
		return 1;
	return block_read(d->fs, p->bytenr, &e, out);
}

/* Is leaf la the copy of one of b's leaves with the same items? (marked matched) */
static int find_copy(struct diff *d, const struct side *b, struct leaf_sum *sums, const struct tree_block *la,
		     bool *found)
{
	struct leaf_sum key = { .hash = leaf_hash(la) };
	struct leaf_sum *s = bsearch(&key, sums, b->n, sizeof(*sums), sum_cmp);
	int ret = 0;

	*found = false;
	while (s && s > sums && s[-1].hash == key.hash)
		s--;
	for (; s && s < sums + b->n && s->hash == key.hash && !*found && !ret; s++) {
		struct tree_block *lb;
		if (s->matched || (ret = read_leaf(d, &b->v[s->idx], true, &lb)))
			continue;
		*found = s->matched = same_leaf(la, lb);
		block_put(d->fs, lb);
	}
	return ret;
}

/* The private leaves of both sides to fn, but the pairs that hold the same
 * items (a root leaf copied by the snapshot, a leaf COWed unchanged). */
static int diff_leaves(struct diff *d, struct side *a, struct side *b)
{
	struct leaf_sum *sums = calloc(b->n ? b->n : 1, sizeof(*sums));
	int ret = sums ? 0 : -ENOMEM;

	for (size_t i = 0; i < b->n && !ret; i++) {
		struct tree_block *lb;
		if (!(ret = read_leaf(d, &b->v[i], false, &lb))) {
			sums[i].hash = leaf_hash(lb);
			sums[i].idx = i;
			block_put(d->fs, lb);
		}
	}
	if (b->n)
		qsort(sums, b->n, sizeof(*sums), sum_cmp);
	for (size_t i = 0; i < a->n && !ret; i++) {
		struct tree_block *la;
		bool found;
		if ((ret = read_leaf(d, &a->v[i], false, &la)))
			break;
		ret = find_copy(d, b, sums, la, &found);
		if (!ret && !found)
			ret = d->fn(d->arg, 0, la);
		block_put(d->fs, la);
	}
	for (size_t i = 0; i < b->n && !ret; i++) {
		struct tree_block *lb;
		if (sums[i].matched || (ret = read_leaf(d, &b->v[sums[i].idx], true, &lb)))
			continue;
		ret = d->fn(d->arg, 1, lb);
		block_put(d->fs, lb);
	}
	free(sums);
	a->n = b->n = 0;
	return ret;
}

int snap_diff(struct fs_info *fs, const struct tree_root_ptr *ra, const struct tree_root_ptr *rb, uint64_t max_blocks,
	      snap_leaf_fn fn, void *arg, uint64_t *blocks)
{
	struct diff d = { fs, max_blocks, blocks, fn, arg };
	struct side a = { .level = ra->level }, b = { .level = rb->level };
	int ret;

	*blocks = 0;
	if ((ret = push(&a, ra->bytenr, ra->generation)) || (ret = push(&b, rb->bytenr, rb->generation)))
		goto out;
	while (!ret && (a.n || b.n)) {
		if (a.level == b.level) {
			drop_common(&a, &b);
			if (a.level == 0) {
				ret = diff_leaves(&d, &a, &b);
				break;
			}
			if (!(ret = expand(&d, &a, 0)))
				ret = expand(&d, &b, 1);
		} else if (a.level > b.level) {   /* the taller tree's top is private */
			ret = expand(&d, &a, 0);
		} else {
			ret = expand(&d, &b, 1);
		}
	}
out:
	free(a.v);
	free(b.v);
	return ret;
}

int snap_ranges_add(struct snap_ranges *r, const struct tree_block *leaf)
{
	unsigned n = block_nritems(leaf);

	if (!n)
		return 0;
	if (r->n == r->cap) {
		size_t cap = r->cap ? r->cap * 2 : 64;
		struct snap_range *v = realloc(r->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->v = v;
		r->cap = cap;
	}
	block_key(leaf, 0, &r->v[r->n].lo);
	block_key(leaf, n - 1, &r->v[r->n].hi);
	r->n++;
	return 0;
}

static int range_cmp(const void *a, const void *b)
{
	return key_compare(&((const struct snap_range *)a)->lo, &((const struct snap_range *)b)->lo);
}

void snap_ranges_sort(struct snap_ranges *r)
{
	if (r->n)
		qsort(r->v, r->n, sizeof(*r->v), range_cmp);
}

bool snap_ranges_has(const struct snap_ranges *r, const struct btrfs_key *k)
{
	size_t lo = 0, hi = r->n;

	while (lo < hi) {   /* past the last range starting at or before k */
		size_t mid = (lo + hi) / 2;
		if (key_compare(&r->v[mid].lo, k) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && key_compare(k, &r->v[lo - 1].hi) <= 0;
}

void snap_ranges_free(struct snap_ranges *r)
{
	free(r->v);
	memset(r, 0, sizeof(*r));
}
