// SPDX-License-Identifier: GPL-2.0-only
/* The set of lost key ranges of the subvolume trees (fs_lost.h): sorted,
 * disjoint, merged as they come. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/fs_lost.h"
#include <btk/names.h>

/* r ends at or after the start of s (both of one root, r.lo <= s.lo). */
static bool ranges_touch(const struct lost_range *r, const struct lost_range *s)
{
	return r->root == s->root && (r->to_end || key_compare(&r->hi, &s->lo) >= 0);
}

/* r grows to cover s as well (r.lo <= s.lo). */
static void range_cover(struct lost_range *r, const struct lost_range *s)
{
	if (s->to_end)
		r->to_end = true;
	else if (!r->to_end && key_compare(&s->hi, &r->hi) > 0)
		r->hi = s->hi;
}

static int range_cmp_start(const struct lost_range *r, uint64_t root, const struct btrfs_key *k)
{
	if (r->root != root)
		return r->root < root ? -1 : 1;
	return key_compare(&r->lo, k);
}

int fs_lost_add(struct fs_lost *l, uint64_t root, const struct btrfs_key *lo, const struct btrfs_key *hi)
{
	struct lost_range r = { .root = root, .lo = *lo, .to_end = hi == NULL };
	size_t p = l->n, q;

	if (hi)
		r.hi = *hi;
	/* the walk goes in key order: the place is nearly always the end */
	while (p > 0 && range_cmp_start(&l->v[p - 1], root, lo) > 0)
		p--;
	if (l->n >= FS_LOST_MAX && p > 0 && l->v[p - 1].root == root) {
		range_cover(&l->v[p - 1], &r);   /* over the budget: cover the gap too */
		p--;
	} else {
		if (l->n == l->cap) {
			size_t cap = l->cap ? l->cap * 2 : 8;
			struct lost_range *v = realloc(l->v, cap * sizeof(*v));
			if (!v)
				return -ENOMEM;
			l->v = v;
			l->cap = cap;
		}
		memmove(&l->v[p + 1], &l->v[p], (l->n - p) * sizeof(*l->v));
		l->v[p] = r;
		l->n++;
	}
	/* keep the ranges disjoint: merge around the new one */
	for (q = p ? p - 1 : 0; q + 1 < l->n;) {
		if (ranges_touch(&l->v[q], &l->v[q + 1])) {
			range_cover(&l->v[q], &l->v[q + 1]);
			memmove(&l->v[q + 1], &l->v[q + 2], (l->n - q - 2) * sizeof(*l->v));
			l->n--;
		} else if (q >= p) {
			break;
		} else {
			q++;
		}
	}
	return 0;
}

bool fs_lost_meets(const struct fs_lost *l, uint64_t root, const struct btrfs_key *first,
		   const struct btrfs_key *last)
{
	size_t lo = 0, hi;

	if (!l || !l->n)
		return false;
	hi = l->n;
	/* the first range that ends after first (ranges are disjoint and sorted) */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		const struct lost_range *r = &l->v[mid];
		bool before = r->root < root || (r->root == root && !r->to_end && key_compare(&r->hi, first) <= 0);
		if (before)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < l->n && l->v[lo].root == root && key_compare(&l->v[lo].lo, last) <= 0;
}

bool fs_lost_key(const struct fs_lost *l, uint64_t root, uint64_t objectid, uint8_t type, uint64_t offset)
{
	struct btrfs_key k = { objectid, type, offset };

	return fs_lost_meets(l, root, &k, &k);
}

bool fs_lost_inode(const struct fs_lost *l, uint64_t root, uint64_t ino)
{
	/* nothing sorts before the inode item: a range ending there spares the inode */
	struct btrfs_key first = { ino, BTRFS_INODE_ITEM_KEY, 0 }, last = { ino, 255, UINT64_MAX };

	return fs_lost_meets(l, root, &first, &last);
}

void fs_lost_key_str(char *buf, size_t n, const struct btrfs_key *k, bool end)
{
	char t[KEY_TYPE_NAME_BUF];

	if (end)
		snprintf(buf, n, "the end");
	else
		snprintf(buf, n, "(%" PRIu64 " %s %" PRIu64 ")", k->objectid, key_type_name_or_number(k->type, t),
			 k->offset);
}

void fs_lost_free(struct fs_lost *l)
{
	free(l->v);
	memset(l, 0, sizeof(*l));
}

void fs_lost_destroy(struct fs_lost *l)
{
	if (l)
		fs_lost_free(l);
	free(l);
}
