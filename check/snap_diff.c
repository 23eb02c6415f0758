/* Tree diff by block pointers (snap_diff.h). Memory: the private blocks of
 * one level of each side. */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "check/snap_diff.h"

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

	qsort(a->v, a->n, sizeof(*a->v), ptr_cmp);
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
