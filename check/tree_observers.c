// SPDX-License-Identifier: GPL-2.0-only
/* The registry of tree-block walk observers: the walk iterates this table,
 * so it names no consumer, and a new consumer is one row here. */
#include <stddef.h>

#include "check/tree_observers.h"

/* In the order their reports come out. */
static const struct tree_observer *const observers[] = {
	&salvage_tree_observer,
	&refs_tree_observer,
	&qgroups_tree_observer,
	&fs_tree_observer,
};

#define N_OBSERVERS (sizeof(observers) / sizeof(observers[0]))

int tree_observers_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
			 bool first)
{
	for (size_t i = 0; i < N_OBSERVERS; i++) {
		int ret = observers[i]->block ? observers[i]->block(ctx, root, b, first) : 0;
		if (ret < 0)
			return ret;
	}
	return 0;
}

int tree_observers_salvaged(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b, bool first)
{
	for (size_t i = 0; i < N_OBSERVERS; i++) {
		int (*fn)(struct check_ctx *, uint64_t, const struct tree_block *) =
			first ? observers[i]->salvaged_first : observers[i]->salvaged_each;
		int ret = fn ? fn(ctx, tree, b) : 0;
		if (ret < 0)
			return ret;
	}
	return 0;
}

void tree_observers_gap(struct check_ctx *ctx)
{
	for (size_t i = 0; i < N_OBSERVERS; i++)
		if (observers[i]->gap)
			observers[i]->gap(ctx);
}

int tree_observers_walk_begin(struct check_ctx *ctx)
{
	for (size_t i = 0; i < N_OBSERVERS; i++) {
		int ret = observers[i]->walk_begin ? observers[i]->walk_begin(ctx) : 0;
		if (ret)
			return ret;
	}
	return 0;
}

uint64_t tree_observers_reread_estimate(struct check_ctx *ctx)
{
	uint64_t sum = 0;

	for (size_t i = 0; i < N_OBSERVERS; i++)
		if (observers[i]->reread_estimate)
			sum += observers[i]->reread_estimate(ctx);
	return sum;
}

unsigned tree_observers_tree_begin(struct check_ctx *ctx, const struct tree_root_ptr *root)
{
	unsigned follow = 0;

	for (size_t i = 0; i < N_OBSERVERS; i++)
		if (observers[i]->tree_begin && observers[i]->tree_begin(ctx, root))
			follow |= 1u << i;
	return follow;
}

int tree_observers_tree_block(struct check_ctx *ctx, unsigned follow, const struct tree_block *b, bool shared)
{
	for (size_t i = 0; i < N_OBSERVERS; i++) {
		int ret = (follow & (1u << i)) ? observers[i]->tree_block(ctx, b, shared) : 0;
		if (ret)
			return ret;
	}
	return 0;
}

void tree_observers_tree_bad_block(struct check_ctx *ctx, unsigned follow, uint64_t bytenr, int level,
				   const char *why)
{
	for (size_t i = 0; i < N_OBSERVERS; i++)
		if (follow & (1u << i))
			observers[i]->tree_bad_block(ctx, bytenr, level, why);
}

int tree_observers_tree_end(struct check_ctx *ctx, unsigned follow, int walk_ret)
{
	int first = 0;

	/* every follower hears the end, even after one asked to stop */
	for (size_t i = 0; i < N_OBSERVERS; i++) {
		int ret = (follow & (1u << i)) ? observers[i]->tree_end(ctx, walk_ret) : 0;
		if (ret && !first)
			first = ret;
	}
	return first;
}
