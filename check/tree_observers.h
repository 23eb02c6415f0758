/* SPDX-License-Identifier: GPL-2.0-only */
/* Observers of the tree-block walk (phase_trees.c): what the other phases
 * collect from every tree block, registered here instead of being called by
 * name from the walk. */
#ifndef BTK_CHECK_TREE_OBSERVERS_H
#define BTK_CHECK_TREE_OBSERVERS_H

#include <stdbool.h>
#include <stdint.h>

#include "check/check.h"

struct tree_observer {
	const char *name;
	/* Every block the walk reaches (first: not reached before from another
	 * tree), before a shared subtree is skipped. NULL: not wanted. */
	int (*block)(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
		     bool first);
	/* A block read as its salvaged view, in every tree that holds it. */
	int (*salvaged_each)(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b);
	/* The same, once: in the tree that reached it first. */
	int (*salvaged_first)(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b);
};

/* The observers, each defined by the file that collects. */
extern const struct tree_observer refs_tree_observer;
extern const struct tree_observer qgroups_tree_observer;
extern const struct tree_observer salvage_tree_observer;

/* Call every observer's block hook in registration order: 0 or the first
 * negative value one returned. */
int tree_observers_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
			 bool first);
/* Call every observer's salvaged_first (first) or salvaged_each hook. */
int tree_observers_salvaged(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b, bool first);

#endif
