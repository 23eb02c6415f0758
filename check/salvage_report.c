// SPDX-License-Identifier: GPL-2.0-only
/* Blocks the walk read as their salvaged view (libfs/block_salvage.h): one
 * problem per kind of damage, with what the salvage kept and dropped. */
#include <inttypes.h>
#include <stdio.h>

#include "check/check.h"
#include "check/tree_observers.h"
#include "check/fs_lost.h"
#include <btk/block_salvage.h>
#include <btk/names.h>

bool check_tree_salvaged(const struct check_ctx *ctx, uint64_t objectid)
{
	return check_tree_set_has(ctx->stats.salvaged_trees, ctx->stats.n_salvaged_trees, objectid);
}

static void key_str(char *buf, size_t n, const struct btrfs_key *k)
{
	fs_lost_key_str(buf, n, k, false);
}

/* The key just after k (the exclusive end of a range holding k). */
static struct btrfs_key key_after(const struct btrfs_key *k)
{
	struct btrfs_key n = *k;

	if (n.offset != UINT64_MAX) {
		n.offset++;
	} else if (n.type != 255) {
		n.type++;
		n.offset = 0;
	} else {
		n.objectid++;
		n.type = 0;
		n.offset = 0;
	}
	return n;
}

int check_report_salvaged(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b)
{
	const struct block_salvage *s = block_salvage_find(ctx->fs, b->bytenr);
	char what[240] = "", a[80], c[80];

	if (!s)
		return 0;
	if (s->dropped && s->have_dropped) {
		key_str(a, sizeof(a), &s->dropped_lo);
		key_str(c, sizeof(c), &s->dropped_hi);
		snprintf(what, sizeof(what), "; %" PRIu32 " entries dropped (keys %s to %s)", s->dropped, a, c);
	} else if (s->dropped) {
		snprintf(what, sizeof(what), "; %" PRIu32 " entries dropped", s->dropped);
	}
	if (s->what & SALVAGE_NRITEMS)
		report_problem(ctx, PR_TREE_BLOCK_NRITEMS, "tree %" PRIu64 ": block %" PRIu64 " (level %u): nritems %"
			       PRIu32 ", the block holds %" PRIu32 "%s", tree, b->bytenr, s->level, s->nritems_before,
			       s->nritems_after, what);
	if (s->what & SALVAGE_ITEM_LAYOUT)
		report_problem(ctx, PR_LEAF_ITEM_OFFSETS, "tree %" PRIu64 ": leaf %" PRIu64 ": item offsets or sizes "
			       "invalid: %" PRIu32 " item(s) re-laid out%s", tree, b->bytenr, s->relaid, what);
	if (s->what & SALVAGE_KEY_ORDER)
		report_problem(ctx, PR_KEY_ORDER, "tree %" PRIu64 ": block %" PRIu64 " (level %u): keys out of order "
			       "or outside the parent's range%s", tree, b->bytenr, s->level, what);
	if (s->what & SALVAGE_LEVEL)
		report_problem(ctx, PR_TREE_BLOCK_LEVEL, "tree %" PRIu64 ": block %" PRIu64 " has level %u, its parent "
			       "expects %u", tree, b->bytenr, s->header_level, s->level);
	if (s->what & SALVAGE_TRANSID)
		report_problem(ctx, PR_TREE_BLOCK_TRANSID, "tree %" PRIu64 ": block %" PRIu64 " (level %u): parent "
			       "transid %" PRIu64 ", block has %" PRIu64, tree, b->bytenr, s->level, s->expected_generation,
			       s->header_generation);
	if ((s->what & SALVAGE_FIRST_KEY) && s->have_expected_first) {
		key_str(a, sizeof(a), &s->expected_first);
		key_str(c, sizeof(c), &s->first);
		report_problem(ctx, PR_TREE_BLOCK_FIRST_KEY, "tree %" PRIu64 ": block %" PRIu64 " (level %u): parent "
			       "key %s, first key %s", tree, b->bytenr, s->level, a, c);
	}
	return 0;
}

int check_salvaged_lost(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b)
{
	const struct block_salvage *s = block_salvage_find(ctx->fs, b->bytenr);
	struct btrfs_key hi;

	/* what items the dropped keys would have been is not judged against the rest */
	if (!s || !s->have_dropped || !ctx->fs_lost || !key_is_subvolume_id(tree))
		return 0;
	hi = key_after(&s->dropped_hi);
	return fs_lost_add(ctx->fs_lost, tree, &s->dropped_lo, &hi);
}

/* Registered with the tree-block walk (tree_observers.c). */
const struct tree_observer salvage_tree_observer = {
	.name = "salvaged blocks",
	.salvaged_each = check_salvaged_lost,
	.salvaged_first = check_report_salvaged,
};
