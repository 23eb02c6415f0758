// SPDX-License-Identifier: GPL-2.0-only
/* Small sets of tree ids the check keeps on its context: the trees the walk
 * could not read in full, the trees with salvaged blocks. Written by the
 * tree-block walk, asked by later phases and the repair classes. */
#include <limits.h>

#include "check/check.h"

void check_tree_set_add(uint64_t *v, unsigned *n, unsigned max, uint64_t id)
{
	if (*n == UINT_MAX || check_tree_set_has(v, *n, id))
		return;
	if (*n == max) {
		*n = UINT_MAX;
		return;
	}
	v[(*n)++] = id;
}

bool check_tree_set_has(const uint64_t *v, unsigned n, uint64_t id)
{
	if (n == UINT_MAX)
		return true;
	for (unsigned i = 0; i < n; i++)
		if (v[i] == id)
			return true;
	return false;
}

void check_note_unreadable_tree(struct check_ctx *ctx, uint64_t objectid)
{
	struct check_stats *st = &ctx->stats;
	const unsigned max = sizeof(st->unreadable_trees) / sizeof(st->unreadable_trees[0]);

	if (!objectid)
		st->n_unreadable_trees = UINT_MAX;   /* which tree is not known */
	check_tree_set_add(st->unreadable_trees, &st->n_unreadable_trees, max, objectid);
}

bool check_unreadable_only_in(const struct check_ctx *ctx, const uint64_t *trees, unsigned n)
{
	const struct check_stats *st = &ctx->stats;

	if (st->n_unreadable_trees == UINT_MAX)
		return false;
	for (unsigned i = 0; i < st->n_unreadable_trees; i++) {
		bool found = false;
		for (unsigned k = 0; k < n && !found; k++)
			found = st->unreadable_trees[i] == trees[k];
		if (!found)
			return false;
	}
	return true;
}

bool check_tree_unreadable(const struct check_ctx *ctx, uint64_t objectid)
{
	return check_tree_set_has(ctx->stats.unreadable_trees, ctx->stats.n_unreadable_trees, objectid);
}
