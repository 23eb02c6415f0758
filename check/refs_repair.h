/* SPDX-License-Identifier: GPL-2.0-only */
/* The reference join's findings for --repair (check/phase_refs.c feeds it,
 * check/repair_extents.c acts on the notes): per bytenr, what the extent item
 * says and which references the trees make, and whether they differ. */
#ifndef BTK_CHECK_REFS_REPAIR_H
#define BTK_CHECK_REFS_REPAIR_H

#include <stdbool.h>
#include <stdint.h>

#include "check/check.h"

/* One group of the join: a reference key (or type 0, the extent item) with
 * what the trees use (expected) and what the extent tree says (declared). */
struct refs_group_view {
	uint64_t bytenr;
	uint32_t type;           /* 0: the extent item; else BTRFS_*_REF_KEY */
	uint64_t a, b, c;        /* the reference's key fields (b, c: data refs only) */
	uint64_t item_len, item_flags, item_refs; /* type 0 */
	bool item_rewrite;       /* type 0: its inline references are damaged, write it again */
	uint64_t expected, declared; /* summed counts */
	bool has_expected, has_declared;
	uint64_t data_len;       /* expected data refs: the file extents' disk length */
	bool full_backref;       /* tree block refs: the block at bytenr has full backrefs (as the check saw it) */
	uint64_t level, generation; /* expected tree block refs: the block's, as its parent (or root item) says */
};

/* The trees --rebuild-extent-tree replaces whole: blocks only they use are
 * not noted (their space is free after the rebuild), and unreadable blocks
 * in them do not stop it. */
#define REBUILT_TREES { BTRFS_EXTENT_TREE_OBJECTID, BTRFS_FREE_SPACE_TREE_OBJECTID }
#define REBUILT_TREES_COUNT 2u

struct refs_unit;

/* Extent item flags that say one kind: data or tree block, not both, not neither. */
static inline bool extent_kind_known(uint64_t flags)
{
	return !(flags & 1) != !(flags & 2); /* BTRFS_EXTENT_FLAG_DATA, BTRFS_EXTENT_FLAG_TREE_BLOCK */
}

/* An extent item flagged a tree block that is not one node long: data whose
 * flags lie (check/phase_refs.c reads its references as data). */
static inline bool extent_flags_lie(uint64_t flags, uint64_t len, uint64_t nodesize)
{
	return (flags & 2) && !(flags & 1) && len != nodesize; /* BTRFS_EXTENT_FLAG_TREE_BLOCK, _DATA */
}

/* Follow the join, group by group, in key order. 0 or -errno. */
int refs_repair_group(struct check_ctx *ctx, struct refs_unit **u, const struct refs_group_view *v);
/* The current bytenr is damaged in a way the repair does not fix. */
void refs_repair_unfixable(struct check_ctx *ctx, struct refs_unit *u);
/* The current bytenr's item is wrong in a way only making it again from its
 * block and users fixes (a tree block's level). */
void refs_repair_replace(struct check_ctx *ctx, struct refs_unit *u);
/* The join ended (incomplete: some tree was unreadable, nothing is noted). */
int refs_repair_finish(struct check_ctx *ctx, struct refs_unit **u, bool incomplete);

#endif
