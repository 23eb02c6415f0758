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
