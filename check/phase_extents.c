// SPDX-License-Identifier: GPL-2.0-only
/* Extents: one pass over the extent tree. Every tree block a tree uses must
 * have an extent item and every tree-block extent item must be used; extents
 * must not overlap or leave their chunks; each block group's `used` is the sum
 * of its extents; the free-space tree (when present) is exactly the space that
 * extents and superblock stripes leave free. Memory: extent bitmaps only. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/fst_orphans.h"
#include "check/repair.h"
#include "check/check.h"
#include <btk/item_check.h>
#include <btk/blockgroups.h>
#include <btk/ebitmap.h>
#include <btk/trans.h>
#include <btk/tree.h>
#include <btk/volumes.h>

struct extent_scan {
	struct check_ctx *ctx;
	struct ebitmap *allocated;    /* every extent, data and metadata */
	struct ebitmap *tree_blocks;  /* tree-block extents only */
	struct block_group_list bgs;
	uint64_t *bg_sum;             /* per block group: bytes of extents */
	size_t bg_cursor;
	uint64_t prev_end;
	uint64_t total;
};

static struct block_group *bg_for(struct extent_scan *s, uint64_t bytenr, size_t *index)
{
	/* extent items come in address order: move a cursor forward */
	while (s->bg_cursor < s->bgs.count &&
	       s->bgs.groups[s->bg_cursor].start + s->bgs.groups[s->bg_cursor].length <= bytenr)
		s->bg_cursor++;
	if (s->bg_cursor < s->bgs.count && s->bgs.groups[s->bg_cursor].start <= bytenr) {
		*index = s->bg_cursor;
		return &s->bgs.groups[s->bg_cursor];
	}
	return NULL;
}

static int scan_extent(struct extent_scan *s, uint64_t start, uint64_t len, bool tree_block)
{
	struct check_ctx *ctx = s->ctx;
	struct block_group *bg;
	size_t idx;
	int ret;

	ctx->stats.extent_items++;
	if (start < s->prev_end)
		report_problem(ctx, PR_EXTENT_OVERLAP, "extent %" PRIu64 "+%" PRIu64 " overlaps the one ending at %"
			       PRIu64, start, len, s->prev_end);
	if (start + len > s->prev_end)
		s->prev_end = start + len;
	bg = bg_for(s, start, &idx);
	if (!bg || start + len > bg->start + bg->length) {
		report_problem(ctx, PR_EXTENT_OUTSIDE_CHUNK, "extent %" PRIu64 "+%" PRIu64, start, len);
		return 0;
	}
	if (tree_block && tree_block_crosses_stripe(start, len))
		report_problem(ctx, PR_TREE_BLOCK_CROSSES_STRIPE, "tree block %" PRIu64 "+%" PRIu64 " crosses a %llu KiB "
			       "stripe boundary", start, len, BTRFS_STRIPE_LEN / 1024);
	s->bg_sum[idx] += len;
	s->total += len;
	if (!tree_block)
		ctx->stats.data_bytes += len;
	if ((ret = ebitmap_set(s->allocated, start, len)) < 0)
		return ret;
	if (tree_block && (ret = ebitmap_set(s->tree_blocks, start, len)) < 0)
		return ret;
	return 0;
}

/* The kernel's tree checker refuses an extent item from a later generation
 * than the filesystem's (and then the whole leaf of the extent tree). */
static void check_extent_generation(struct check_ctx *ctx, const struct btrfs_key *k, const uint8_t *data)
{
	if (extent_generation(data) > ctx->fs->generation + 1)   /* the kernel allows the running transaction */
		report_problem(ctx, PR_EXTENT_ITEM_GENERATION, "extent item (%" PRIu64 " %u %" PRIu64 "): generation %"
			       PRIu64 " is newer than the filesystem's %" PRIu64, k->objectid, k->type, k->offset,
			       extent_generation(data), ctx->fs->generation);
}

/* The key rules of the kernel's tree checker for extent items: the bytenr is
 * sector aligned, a skinny metadata item's level (its key offset) below 8
 * and the skinny-metadata feature set. */
static bool check_extent_key(struct check_ctx *ctx, const struct btrfs_key *k)
{
	struct item_geometry g;
	struct item_verdict vd;

	item_geometry_of(ctx->fs, &g);
	if (!item_key_check(&g, k, &vd))
		return true;
	report_problem(ctx, PR_ITEM_MALFORMED, "extent item (%" PRIu64 " %u %" PRIu64 "): %s", k->objectid,
		       k->type, k->offset, vd.why);
	return false;
}

static int scan_extent_tree(struct extent_scan *s)
{
	struct fs_info *fs = s->ctx->fs;
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	tree_iter_init(&it, fs, &fs->extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (cli_cancelled()) {
			ret = 0;
			break;
		}
		/* a key the kernel refuses (off the sector grid) describes no space: not counted */
		if ((key.type == BTRFS_METADATA_ITEM_KEY || key.type == BTRFS_EXTENT_ITEM_KEY) &&
		    !check_extent_key(s->ctx, &key))
			continue;
		if (key.type == BTRFS_METADATA_ITEM_KEY) {
			struct item_view v = item_view_of(data, size);

			if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_extent_item))
				check_extent_generation(s->ctx, &key, data);
			ret = scan_extent(s, key.objectid, fs->nodesize, true);
		} else if (key.type == BTRFS_EXTENT_ITEM_KEY) {
			/* not one node long: data with a bad flag (phase_refs.c reports it) */
			struct item_verdict vd;
			bool small = item_check_fs(fs, &key, data, size, &vd) && vd.fault == ITEM_TOO_SMALL;
			bool tree = !small && (extent_flags(data) & BTRFS_EXTENT_FLAG_TREE_BLOCK) &&
				    key.offset == fs->nodesize;
			if (small)
				report_problem(s->ctx, PR_ITEM_MALFORMED, "extent item %" PRIu64 " is %u bytes",
					       key.objectid, size);
			else
				check_extent_generation(s->ctx, &key, data);
			ret = scan_extent(s, key.objectid, key.offset, tree);
		} else {
			if (key.type == BTRFS_BLOCK_GROUP_ITEM_KEY && fs_block_group_tree(fs) == &fs->extent_root)
				check_block_group_chunk(s->ctx, &key);
			continue;
		}
		if (ret < 0)
			break;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

/* Tree blocks used by the trees against tree-block extent items, both ways. */
static void compare_tree_blocks(struct extent_scan *s)
{
	struct check_ctx *ctx = s->ctx;
	uint32_t ns = ctx->fs->nodesize;
	uint64_t from = 0, start, len;
	unsigned reported = 0;

	while (ebitmap_next_set(ctx->visited, from, &start, &len) == 1 && reported < 1000) {
		for (uint64_t b = start; b < start + len; b += ns)
			if (ebitmap_test(s->tree_blocks, b, ns) != EBITMAP_ALL && reported++ < 1000)
				report_problem(ctx, PR_TREE_BLOCK_NOT_ALLOCATED, "tree block %" PRIu64, b);
		from = start + len;
	}
	/* blocks of unreadable subtrees were never visited: no leak verdict then */
	if (ctx->counts[PR_TREE_BLOCK_UNREADABLE] || ctx->counts[PR_TREE_ROOT_UNREADABLE])
		return;
	for (from = 0, reported = 0; ebitmap_next_set(s->tree_blocks, from, &start, &len) == 1 && reported < 1000;
	     from = start + len)
		for (uint64_t b = start; b < start + len; b += ns)
			if (ebitmap_test(ctx->visited, b, ns) != EBITMAP_ALL && reported++ < 1000)
				report_problem(ctx, PR_TREE_BLOCK_LEAKED, "tree block %" PRIu64 " has an extent item "
					       "but no tree points at it", b);
}

/* Log tree blocks have no extent items until the log is replayed (the kernel
 * pins them at mount): they must lie in space no extent item claims. */
static void check_log_blocks(struct extent_scan *s)
{
	struct check_ctx *ctx = s->ctx;
	uint32_t ns = ctx->fs->nodesize;
	uint64_t from = 0, start, len;
	unsigned reported = 0;

	if (!ctx->log_blocks)
		return;
	for (; ebitmap_next_set(ctx->log_blocks, from, &start, &len) == 1 && reported < 1000; from = start + len)
		for (uint64_t b = start; b < start + len; b += ns)
			if (ebitmap_test(s->allocated, b, ns) != EBITMAP_NONE && reported++ < 1000)
				report_problem(ctx, PR_EXTENT_OVERLAP, "log tree block %" PRIu64
					       " overlaps an allocated extent", b);
}

static void compare_block_group_used(struct extent_scan *s)
{
	for (size_t i = 0; i < s->bgs.count; i++) {
		const struct block_group *bg = &s->bgs.groups[i];
		if (!bg->missing && bg->used != s->bg_sum[i])
			report_problem(s->ctx, PR_BLOCK_GROUP_USED, "block group %" PRIu64 ": used %" PRIu64
				       ", extents sum to %" PRIu64, bg->start, bg->used, s->bg_sum[i]);
	}
}

/* The free-space tree's view of one block group, as a bitmap of free space:
 * 0, 1 when the tree cannot be read (reported), or -errno. */
static int read_fst_group(struct check_ctx *ctx, const struct block_group *bg, struct ebitmap *free_map,
			  uint64_t *info_count, uint64_t *extent_items, bool *bitmaps, uint64_t *bitmap_items,
			  uint32_t *flags)
{
	struct fs_info *fs = ctx->fs;
	struct btrfs_key min = { bg->start, 0, 0 }, max = { bg->start + bg->length - 1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	*info_count = (uint64_t)-1;
	*extent_items = 0;
	*bitmaps = false;
	*bitmap_items = 0;
	*flags = 0;
	tree_iter_init(&it, fs, &fs->free_space_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		struct item_view v = item_view_of(data, size);

		/* the kernel looks the group's info up by its exact key */
		if (key.type == BTRFS_FREE_SPACE_INFO_KEY && key.objectid == bg->start && key.offset == bg->length &&
		    item_view_has_fixed(&v, key.type)) {
			*info_count = free_space_info_extent_count(data);
			*flags = free_space_info_flags(data);
			*bitmaps = *flags & BTRFS_FREE_SPACE_USING_BITMAPS;
		} else if (key.type == BTRFS_FREE_SPACE_EXTENT_KEY) {
			(*extent_items)++;
			/* an extent off the sector grid frees nothing the kernel can use: the tree is wrong,
			 * not unreadable (a rebuild mends it) */
			if ((key.objectid | key.offset) % fs->sectorsize) {
				report_problem(ctx, PR_FREE_SPACE_MISMATCH, "block group %" PRIu64 ": free-space extent (%"
					       PRIu64 ", %" PRIu64 ") is not aligned to the sector size", bg->start,
					       key.objectid, key.offset);
				continue;
			}
			if (key.offset && key.objectid + key.offset <= bg->start + bg->length &&
			    (ret = ebitmap_set(free_map, key.objectid, key.offset)) < 0)
				break;
		} else if (key.type == BTRFS_FREE_SPACE_BITMAP_KEY) {
			uint64_t bits = key.offset / fs->sectorsize;
			(*bitmap_items)++;
			for (uint64_t b = 0; b < bits && b / 8 < size; b++)
				if ((data[b / 8] >> (b % 8)) & 1)
					if ((ret = ebitmap_set(free_map, key.objectid + b * fs->sectorsize,
							       fs->sectorsize)) < 0)
						goto out;
		}
	}
	if (ret < 0 && ret != -ENOMEM) { /* the tree, not the bitmap: a problem of the filesystem */
		report_problem(ctx, PR_TREE_BLOCK_UNREADABLE, "free-space tree: %s", btk_error_msg());
		ret = 1;
	}
out:
	tree_iter_release(&it);
	return ret;
}

/* Count maximal free runs of a bitmap inside [start, end). */
static uint64_t count_runs(struct ebitmap *eb, uint64_t start, uint64_t end)
{
	uint64_t n = 0, s, l;

	while (start < end && ebitmap_next_set(eb, start, &s, &l) == 1 && s < end) {
		n++;
		start = s + l;
	}
	return n;
}

static int compare_free_space_tree(struct extent_scan *s)
{
	struct check_ctx *ctx = s->ctx;
	struct fs_info *fs = ctx->fs;

	if (!(fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE))
		return 0;
	if (!fs->free_space_root.bytenr) {
		/* the kernel refuses to mount a filesystem that claims the tree and lacks it */
		report_problem(ctx, PR_FREE_SPACE_MISMATCH,
			       "the superblock says there is a free-space tree, but the root tree has no root item for it");
		return 0;
	}
	for (size_t i = 0; i < s->bgs.count && !cli_cancelled(); i++) {
		const struct block_group *bg = &s->bgs.groups[i];
		struct ebitmap *fst = ebitmap_create(fs->sectorsize), *want = ebitmap_create(fs->sectorsize);
		uint64_t starts[48], lens[48], info_count, extent_items, bitmap_items, from, fs_s, fs_l, fst_runs = 0;
		uint32_t flags;
		bool bitmaps;
		int n, ret;

		if (!fst || !want) {
			ebitmap_destroy(fst);
			ebitmap_destroy(want);
			return -ENOMEM;
		}
		/* what should be free: the group minus extents minus superblock stripes */
		ret = ebitmap_set(want, bg->start, bg->length);
		for (from = bg->start; !ret && ebitmap_next_set(s->allocated, from, &fs_s, &fs_l) == 1 &&
				       fs_s < bg->start + bg->length; from = fs_s + fs_l)
			ret = ebitmap_clear(want, fs_s, fs_l);
		n = fs_super_stripe_ranges(fs, bg->start, starts, lens, 48);
		for (int k = 0; !ret && k < n; k++)
			ret = ebitmap_clear(want, starts[k], lens[k]);
		if (!ret)
			ret = read_fst_group(ctx, bg, fst, &info_count, &extent_items, &bitmaps, &bitmap_items, &flags);
		if (ret == 1) { /* unreadable: reported once, nothing to compare */
			ebitmap_destroy(fst);
			ebitmap_destroy(want);
			return 0;
		}
		/* with bitmaps the info counts the free runs the bitmaps describe */
		if (!ret && bitmaps)
			fst_runs = count_runs(fst, bg->start, bg->start + bg->length);
		/* superblock stripes may be listed free or not: readers subtract them */
		for (int k = 0; !ret && k < n; k++)
			ret = ebitmap_clear(fst, starts[k], lens[k]);
		if (!ret) {
			uint64_t a = fst_runs;
			bool same = ebitmap_count(want) == ebitmap_count(fst);
			for (from = bg->start; same && ebitmap_next_set(want, from, &fs_s, &fs_l) == 1; from = fs_s + fs_l)
				same = ebitmap_test(fst, fs_s, fs_l) == EBITMAP_ALL;
			if (!same)
				report_problem(ctx, PR_FREE_SPACE_MISMATCH, "block group %" PRIu64 ": the free-space tree "
					       "says %" PRIu64 " bytes are free, the extents leave %" PRIu64, bg->start,
					       ebitmap_count(fst), ebitmap_count(want));
			else if (info_count == (uint64_t)-1)
				report_problem(ctx, PR_FREE_SPACE_MISMATCH, "block group %" PRIu64 " has no free-space "
					       "info item", bg->start);
			/* the kernel reads the group's items as the flag says they are */
			else if (flags & ~(uint32_t)BTRFS_FREE_SPACE_USING_BITMAPS || (bitmaps ? extent_items : bitmap_items))
				report_problem(ctx, PR_FREE_SPACE_MISMATCH, "block group %" PRIu64 ": free-space info flags %#"
					       PRIx32 ", %" PRIu64 " extent and %" PRIu64 " bitmap items", bg->start, flags,
					       extent_items, bitmap_items);
			else if (info_count != (bitmaps ? a : extent_items))
				report_problem(ctx, PR_FREE_SPACE_INFO_COUNT, "block group %" PRIu64 ": info counts %"
					       PRIu64 " extents, there are %" PRIu64, bg->start, info_count,
					       bitmaps ? a : extent_items);
		}
		ebitmap_destroy(fst);
		ebitmap_destroy(want);
		if (ret < 0)
			return ret;
	}
	return 0;
}

int check_extents(struct check_ctx *ctx)
{
	struct extent_scan s = { .ctx = ctx };
	int ret;

	if (!ctx->fs->extent_root.bytenr || !ctx->visited)
		return 0;
	ret = fs_read_block_groups(ctx->fs, &s.bgs);
	if (ret)
		return 0; /* reported by the chunk phase */
	s.allocated = ebitmap_create(ctx->fs->sectorsize);
	s.tree_blocks = ebitmap_create(ctx->fs->sectorsize);
	s.bg_sum = calloc(s.bgs.count ? s.bgs.count : 1, sizeof(*s.bg_sum));
	if (!s.allocated || !s.tree_blocks || !s.bg_sum) {
		ret = -ENOMEM;
		goto out;
	}
	ret = scan_extent_tree(&s);
	if (ret) {
		report_problem(ctx, PR_TREE_BLOCK_UNREADABLE, "extent tree: %s", btk_error_msg());
		ret = 0;
		goto out;
	}
	compare_tree_blocks(&s);
	check_log_blocks(&s);
	compare_block_group_used(&s);
	ret = compare_free_space_tree(&s);
	if (!ret)
		ret = check_fst_orphans(ctx, &s.bgs);
out:
	free(s.bg_sum);
	ebitmap_destroy(s.allocated);
	ebitmap_destroy(s.tree_blocks);
	block_group_list_free(&s.bgs);
	return ret;
}
