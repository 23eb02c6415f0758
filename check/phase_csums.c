// SPDX-License-Identifier: GPL-2.0-only
/* The checksum tree walked alongside the data extents (both in address
 * order, so memory is one tree path): item sizes are whole checksums, items
 * do not overlap, every checksummed byte lies in a data extent, and how much
 * of each data extent has checksums (phase_refs.c decides which extents need
 * them). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/log_data.h"
#include "check/refs.h"
#include <btk/item_check.h>
#include <btk/csum_tree.h>
#include <btk/tree.h>

struct csum_cursor {
	struct check_ctx *ctx;
	struct tree_iter it;
	bool have;                  /* a current item */
	bool at_end;
	uint64_t start, end;        /* the data range it covers */
	uint64_t pos;               /* bytes before pos are classified */
	uint64_t outside;           /* bytes of the current item outside every data extent */
	uint64_t outside_from;
	struct ebitmap *log_data;   /* what the log trees refer to: its checksums may precede their extents */
};

int csum_cursor_create(struct check_ctx *ctx, struct csum_cursor **out)
{
	/* the whole tree: an item under another key is reported (next_item) */
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 };
	struct csum_cursor *c = calloc(1, sizeof(*c));

	*out = c;
	if (!c)
		return -ENOMEM;
	c->ctx = ctx;
	tree_iter_init(&c->it, ctx->fs, &ctx->fs->csum_root, &min, &max);
	return log_data_ranges(ctx->fs, &c->log_data);
}

/* The current item is classified to its end. */
static void item_done(struct csum_cursor *c)
{
	if (c->outside)
		report_problem(c->ctx, PR_CSUM_OUTSIDE_EXTENT, "csum item %" PRIu64 "+%" PRIu64 ": %" PRIu64
			       " bytes from %" PRIu64 " lie in no data extent", c->start, c->end - c->start, c->outside,
			       c->outside_from);
	c->have = false;
}

static int next_item(struct csum_cursor *c)
{
	struct check_ctx *ctx = c->ctx;
	unsigned csize = ctx->fs->csum_size;
	struct item_verdict vd;
	struct btrfs_key k;
	const uint8_t *d;
	uint32_t size;
	int ret;

	if (c->at_end)
		return 0;
	/* the kernel rejects a leaf holding an item under another key; the csums class removes it */
	while ((ret = tree_iter_next(&c->it, &k, &d, &size)) == 1 &&
	       (k.objectid != BTRFS_EXTENT_CSUM_OBJECTID || k.type != BTRFS_EXTENT_CSUM_KEY))
		report_problem(ctx, PR_CSUM_OUTSIDE_EXTENT, "csum tree: item (%" PRIu64 " %u %" PRIu64 ") is no checksum "
			       "item (its key is wrong)", k.objectid, k.type, k.offset);
	if (ret <= 0) {
		c->at_end = true;
		if (ret < 0 && ret != -ENOMEM) {
			report_problem(ctx, PR_TREE_BLOCK_UNREADABLE, "csum tree: %s", btk_error_msg());
			ret = 0;
		}
		return ret;
	}
	if (item_check_fs(ctx->fs, &k, d, size, &vd) && vd.fault == ITEM_BAD_SIZE)
		report_problem(ctx, PR_CSUM_ITEM_SIZE, "csum item %" PRIu64 " is %u bytes, not a multiple of %u",
			       k.offset, size, csize);
	c->have = true;
	c->start = k.offset;
	c->end = k.offset + (csize ? (uint64_t)(size / csize) * ctx->fs->sectorsize : 0);
	if (c->end < c->start) /* past the end of the address space: clamp */
		c->end = UINT64_MAX;
	c->outside = 0;
	ctx->stats.csum_bytes += c->end - c->start;
	if (c->start < c->pos)
		report_problem(ctx, PR_CSUM_OVERLAP, "csum item %" PRIu64 "+%" PRIu64 " overlaps the checksums before "
			       "it (up to %" PRIu64 ")", c->start, c->end - c->start, c->pos);
	if (c->pos < c->start)
		c->pos = c->start;
	return 1;
}

/* Bytes [pos, to) of the current item are outside every data extent (but
 * those a log tree refers to). */
static void mark_outside(struct csum_cursor *c, uint64_t to)
{
	uint64_t s, l;

	while (c->pos < to) {
		uint64_t gap_end = to;
		if (c->log_data && ebitmap_next_set(c->log_data, c->pos, &s, &l) == 1 && s < to) {
			if (s <= c->pos) { /* logged data: skip it */
				c->pos = s + l < to ? s + l : to;
				continue;
			}
			gap_end = s;
		}
		if (!c->outside)
			c->outside_from = c->pos;
		c->outside += gap_end - c->pos;
		c->pos = gap_end;
	}
}

int csum_cursor_extent(struct csum_cursor *c, uint64_t start, uint64_t len, uint64_t *covered)
{
	uint64_t end = start + len;
	int ret;

	*covered = 0;
	for (;;) {
		if (!c->have && (ret = next_item(c)) <= 0)
			return ret;
		if (c->pos < c->start)
			c->pos = c->start;
		mark_outside(c, c->end < start ? c->end : start);
		if (c->pos >= c->end) {
			item_done(c);
			continue;
		}
		if (c->pos >= end)
			return 0; /* the item goes on past this extent */
		uint64_t to = c->end < end ? c->end : end;
		*covered += to - c->pos;
		c->pos = to;
		if (c->pos < c->end)
			return 0;
		item_done(c);
	}
}

int csum_cursor_finish(struct csum_cursor *c)
{
	int ret;

	for (;;) {
		if (!c->have && (ret = next_item(c)) <= 0)
			return ret;
		mark_outside(c, c->end);
		item_done(c);
	}
}

void csum_cursor_destroy(struct csum_cursor *c)
{
	if (!c)
		return;
	tree_iter_release(&c->it);
	ebitmap_destroy(c->log_data);
	free(c);
}

/* Bytes of the sorted, disjoint ranges [base+lo, base+hi) that no csum item
 * covers: a lookup in the csum tree, for the few extents only partly covered
 * (a preallocated extent written in places). */
int csum_missing_bytes(struct check_ctx *ctx, uint64_t base, const struct csum_need *need, size_t n,
		       uint64_t *missing)
{
	struct csum_tree_cursor c;
	const uint8_t *sums;
	uint64_t covered = 0, s, e;
	size_t i = 0;
	int ret;

	*missing = 0;
	for (size_t k = 0; k < n; k++)
		*missing += need[k].hi - need[k].lo;
	ret = csum_tree_open(&c, ctx->fs, base + need[0].lo, base + need[n - 1].hi);
	while (!ret && (ret = csum_tree_next(&c, &s, &e, &sums)) == 1) {
		ret = 0;
		/* intersect [s, e) with the needed ranges from i on */
		while (s < e && i < n) {
			uint64_t lo = base + need[i].lo, hi = base + need[i].hi;
			if (hi <= s) {
				i++;
				continue;
			}
			if (lo >= e)
				break;
			uint64_t a = s > lo ? s : lo, b = e < hi ? e : hi;
			covered += b - a;
			s = b;
		}
	}
	csum_tree_close(&c);
	if (ret == -ENOMEM)
		return ret;
	/* an unreadable csum leaf is reported by the tree-block phase: no verdict */
	*missing = ret < 0 ? 0 : covered < *missing ? *missing - covered : 0;
	return 0;
}
