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
	/* The walk skipped a subtree (checked before from another tree): the
	 * next block it reports does not follow the last one in key order. */
	void (*gap)(struct check_ctx *ctx);
	/* A block read as its salvaged view, in every tree that holds it. */
	int (*salvaged_each)(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b);
	/* The same, once: in the tree that reached it first. */
	int (*salvaged_first)(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b);

	/* An observer that follows whole trees block by block, in key order,
	 * subtrees shared with a tree walked before included (the walk reads
	 * those again for it alone): the filesystem-tree checks. */
	int (*walk_begin)(struct check_ctx *ctx);   /* before the first tree: 0 or -errno */
	/* The bytes the walk will read again for it (the progress total). */
	uint64_t (*reread_estimate)(struct check_ctx *ctx);
	/* A tree starts: true when the observer follows it. */
	bool (*tree_begin)(struct check_ctx *ctx, const struct tree_root_ptr *root);
	/* A block of a followed tree (shared: read again for the observer only);
	 * the walk's visit returns what it returns. */
	int (*tree_block)(struct check_ctx *ctx, const struct tree_block *b, bool shared);
	void (*tree_bad_block)(struct check_ctx *ctx, uint64_t bytenr, int level, const char *why);
	/* The walk of a followed tree ended with walk_ret: 0 to go on, else why
	 * the walk must stop (-ECANCELED, an operational error). */
	int (*tree_end)(struct check_ctx *ctx, int walk_ret);
};

/* The observers, each defined by the file that collects. */
extern const struct tree_observer refs_tree_observer;
extern const struct tree_observer qgroups_tree_observer;
extern const struct tree_observer salvage_tree_observer;
extern const struct tree_observer fs_tree_observer;

/* Call every observer's block hook in registration order: 0 or the first
 * negative value one returned. */
int tree_observers_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
			 bool first);
/* Call every observer's gap hook. */
void tree_observers_gap(struct check_ctx *ctx);
/* Call every observer's salvaged_first (first) or salvaged_each hook. */
int tree_observers_salvaged(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b, bool first);

/* The following observers' hooks, for the ones named in `follow` (a mask
 * of observers, as tree_observers_tree_begin returns it). */
int tree_observers_walk_begin(struct check_ctx *ctx);
uint64_t tree_observers_reread_estimate(struct check_ctx *ctx);
/* The observers that follow this tree (0: none). */
unsigned tree_observers_tree_begin(struct check_ctx *ctx, const struct tree_root_ptr *root);
int tree_observers_tree_block(struct check_ctx *ctx, unsigned follow, const struct tree_block *b, bool shared);
void tree_observers_tree_bad_block(struct check_ctx *ctx, unsigned follow, uint64_t bytenr, int level,
				   const char *why);
int tree_observers_tree_end(struct check_ctx *ctx, unsigned follow, int walk_ret);

#endif
