// SPDX-License-Identifier: GPL-2.0-only
/* Free-space tree items outside every block group (check/fst_orphans.h). */
#include <errno.h>
#include <inttypes.h>

#include "check/fst_orphans.h"
#include <btk/format.h>
#include <btk/tree.h>

/* Whether [start, start+len) lies inside one block group (sorted by start). */
static bool inside_a_group(const struct block_group_list *bgs, uint64_t start, uint64_t len)
{
	size_t lo = 0, hi = bgs->count;

	while (lo < hi) { /* the last group starting at or below start */
		size_t mid = lo + (hi - lo) / 2;
		if (bgs->groups[mid].start <= start)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return false;
	const struct block_group *bg = &bgs->groups[lo - 1];
	return start - bg->start <= bg->length && len <= bg->length - (start - bg->start);
}

int check_fst_orphans(struct check_ctx *ctx, const struct block_group_list *bgs)
{
	struct fs_info *fs = ctx->fs;
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	uint64_t first = bgs->count ? bgs->groups[0].start : (uint64_t)-1;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	if (!(fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE) || !fs->free_space_root.bytenr)
		return 0;
	tree_iter_init(&it, fs, &fs->free_space_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		if (key.type != BTRFS_FREE_SPACE_INFO_KEY && key.type != BTRFS_FREE_SPACE_EXTENT_KEY &&
		    key.type != BTRFS_FREE_SPACE_BITMAP_KEY)
			continue;
		if (inside_a_group(bgs, key.objectid, key.offset))
			continue;
		/* mkfs' leftovers below the lowest group: the kernel never reads
		 * them, btrfs check 7.x fails them; any commit drops them (libfs/commit.c) */
		if (key.offset && key.objectid + key.offset <= first && key.objectid + key.offset > key.objectid)
			report_problem(ctx, PR_FREE_SPACE_LEFTOVER, "free-space tree: item (%" PRIu64 " %u %" PRIu64
				       ") lies below the lowest block group (%" PRIu64 "): mkfs left it of a "
				       "temporary chunk", key.objectid, key.type, key.offset, first);
		else
			report_problem(ctx, PR_FREE_SPACE_ORPHAN, "free-space tree: item (%" PRIu64 " %u %" PRIu64
				       ") lies in no block group", key.objectid, key.type, key.offset);
	}
	tree_iter_release(&it);
	/* an unreadable tree was reported by the per-group comparison */
	return ret == -ENOMEM ? ret : 0;
}
