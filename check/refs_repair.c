// SPDX-License-Identifier: GPL-2.0-only
/* The reference join, seen by the repair: everything at one bytenr is
 * gathered (the item, the expected references with their counts); when the
 * bytenr's references need rewriting — a count differs, a reference is
 * missing or extra, the item's refs differ from the sum, the item has no
 * user, or users have no item — the extent is noted with the references it
 * must have (check/repair_notes.h). Memory: one bytenr's references, at
 * most UNIT_MAX_REFS (an extent with more is left to be reported). */
#include <errno.h>
#include <stdlib.h>

#include "check/refs_repair.h"
#include "check/repair_notes.h"

#define UNIT_MAX_REFS 65536

struct refs_unit {
	bool active;
	uint64_t bytenr;
	bool has_item;
	uint64_t len, flags, refs;  /* of the extent item */
	uint64_t declared;          /* sum of its declared reference counts */
	uint64_t data_len;          /* the data extent's length as file extents say */
	bool tree, data;            /* kinds of the expected references */
	bool bad, unfixable, overflow;
	bool replace;               /* the item is made again whole (refs_repair_replace) */
	bool full_backref;          /* a tree block with full backrefs */
	uint64_t level, generation; /* of a tree block */
	struct extent_fix *exp;     /* the expected references */
	size_t nexp, cap;
};

/* Rebuilding the extent tree (ctx->infer_full_backref): every extent the
 * trees use is noted with its references and its space claimed, but for the
 * blocks of the trees it replaces; an extent no tree uses is not. */
static int unit_note_rebuild(struct check_ctx *ctx, struct refs_unit *u)
{
	bool tree = u->tree;
	struct extent_fix hdr = { .bytenr = u->bytenr, .c = tree ? EXTENT_FIX_TREE : 0 };
	static const uint64_t rebuilt[] = REBUILT_TREES;
	bool replaced = tree;      /* a block of a tree the rebuild replaces */
	int ret;

	if (!u->nexp)
		return 0;
	if (u->overflow || (u->tree && u->data) || u->unfixable) {
		repair_note_unfixable(ctx);
		return 0;
	}
	for (size_t i = 0; i < u->nexp && replaced; i++)
		replaced = u->exp[i].type == BTRFS_TREE_BLOCK_REF_KEY &&
			   (u->exp[i].a == rebuilt[0] || u->exp[i].a == rebuilt[1]);
	if (replaced)
		return 0;
	hdr.a = tree ? ctx->fs->nodesize : u->data_len;
	hdr.c |= tree ? (uint64_t)u->level << EXTENT_FIX_LEVEL_SHIFT : 0;
	hdr.count = tree ? u->generation : 0;
	hdr.b = tree ? BTRFS_EXTENT_FLAG_TREE_BLOCK | (u->full_backref ? BTRFS_BLOCK_FLAG_FULL_BACKREF : 0)
		     : BTRFS_EXTENT_FLAG_DATA;
	if (!hdr.a) {
		repair_note_unfixable(ctx);
		return 0;
	}
	if ((ret = repair_note_claim(ctx, u->bytenr, hdr.a)) < 0 || (ret = repair_note_extent(ctx, &hdr)) < 0)
		return ret;
	for (size_t i = 0; i < u->nexp; i++)
		if ((ret = repair_note_extent(ctx, &u->exp[i])) < 0)
			return ret;
	return 0;
}

/* A tree block's item whose full-backref flag is not what the trees' shape
 * gives it (check/phase_refs.c decides, and expects its children's
 * references by the shape). */
static bool full_backref_differs(const struct refs_unit *u)
{
	return u->has_item && u->tree && !u->data && (u->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) &&
	       !(u->flags & BTRFS_EXTENT_FLAG_DATA) && !(u->flags & BTRFS_BLOCK_FLAG_FULL_BACKREF) != !u->full_backref;
}

/* A data extent's item with the full-backref flag, which only tree blocks
 * have (the kernel's tree checker refuses the leaf). */
static bool data_full_backref(const struct refs_unit *u)
{
	return u->has_item && (u->flags & BTRFS_EXTENT_FLAG_DATA) && !(u->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) &&
	       (u->flags & BTRFS_BLOCK_FLAG_FULL_BACKREF);
}

static int unit_note(struct check_ctx *ctx, struct refs_unit *u)
{
	struct extent_fix hdr = { .bytenr = u->bytenr };
	bool lie = u->has_item && extent_flags_lie(u->flags, u->len, ctx->fs->nodesize);
	int ret;

	if (ctx->infer_full_backref)
		return unit_note_rebuild(ctx, u);
	if (u->has_item && (u->refs != u->declared || !u->nexp || lie || full_backref_differs(u) ||
			    data_full_backref(u)))
		u->bad = true;
	if (!u->has_item && u->nexp)
		u->bad = true; /* an extent item to create */
	if (!u->bad)
		return 0;
	if (u->unfixable || u->overflow || (u->tree && u->data)) {
		repair_note_unfixable(ctx);
		return 0;
	}
	hdr.c = u->has_item ? EXTENT_FIX_HAS_ITEM : 0;
	if (u->replace && u->has_item && u->tree && !u->data) {
		/* a tree block's item that names another level: made again from the block */
		hdr.a = ctx->fs->nodesize;
		hdr.b = BTRFS_EXTENT_FLAG_TREE_BLOCK | (u->full_backref ? BTRFS_BLOCK_FLAG_FULL_BACKREF : 0);
		hdr.c |= EXTENT_FIX_REPLACE | EXTENT_FIX_TREE;
	} else if (u->replace && u->has_item && u->data && !u->tree && u->data_len) {
		/* a data extent item whose key gave a length the kernel refuses: made again at its users' */
		hdr.a = u->data_len;
		hdr.b = BTRFS_EXTENT_FLAG_DATA;
		hdr.c |= EXTENT_FIX_REPLACE;
		if ((ret = repair_note_claim(ctx, u->bytenr, hdr.a)) < 0)
			return ret;
	} else if (u->has_item && u->nexp && (!extent_kind_known(u->flags) || (lie && u->data)) && u->tree != u->data &&
	    u->len == (u->tree ? ctx->fs->nodesize : u->data_len)) {
		/* flags of neither (or both) kinds, users of one, the length theirs: made again whole */
		hdr.a = u->len;
		hdr.b = u->tree ? BTRFS_EXTENT_FLAG_TREE_BLOCK | (u->full_backref ? BTRFS_BLOCK_FLAG_FULL_BACKREF : 0)
			: BTRFS_EXTENT_FLAG_DATA;
		hdr.c |= EXTENT_FIX_REPLACE | (u->tree ? EXTENT_FIX_TREE : 0);
	} else if (u->has_item) {
		bool tree = u->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK;
		if (u->nexp && (tree != u->tree || !(u->flags & (BTRFS_EXTENT_FLAG_TREE_BLOCK | BTRFS_EXTENT_FLAG_DATA)))) {
			repair_note_unfixable(ctx);
			return 0;
		}
		hdr.a = u->len;
		hdr.b = u->flags;
		hdr.c |= tree ? EXTENT_FIX_TREE : 0;
		if (full_backref_differs(u) || data_full_backref(u)) {
			hdr.b ^= BTRFS_BLOCK_FLAG_FULL_BACKREF;
			hdr.c |= EXTENT_FIX_FLAGS;
		}
	} else if (u->nexp) {
		hdr.a = u->tree ? ctx->fs->nodesize : u->data_len;
		/* a block only snapshots hold (or a relocated copy) has full backrefs: the children's refs say so */
		hdr.b = u->tree ? BTRFS_EXTENT_FLAG_TREE_BLOCK | (u->full_backref ? BTRFS_BLOCK_FLAG_FULL_BACKREF : 0)
			: BTRFS_EXTENT_FLAG_DATA;
		hdr.c |= u->tree ? EXTENT_FIX_TREE : 0;
		if (!hdr.a) {
			repair_note_unfixable(ctx);
			return 0;
		}
		if ((ret = repair_note_claim(ctx, u->bytenr, hdr.a)) < 0)
			return ret;
	}
	if ((ret = repair_note_extent(ctx, &hdr)) < 0)
		return ret;
	for (size_t i = 0; i < u->nexp; i++)
		if ((ret = repair_note_extent(ctx, &u->exp[i])) < 0)
			return ret;
	return 0;
}

int refs_repair_group(struct check_ctx *ctx, struct refs_unit **up, const struct refs_group_view *v)
{
	struct refs_unit *u = *up;
	int ret;

	if (!u) {
		if (!(u = *up = calloc(1, sizeof(*u))))
			return -ENOMEM;
	}
	if (!u->active || u->bytenr != v->bytenr) {
		if (u->active && (ret = unit_note(ctx, u)) < 0)
			return ret;
		*u = (struct refs_unit){ .active = true, .bytenr = v->bytenr, .exp = u->exp, .cap = u->cap };
	}
	if (v->type == 0) {
		u->has_item = true;
		u->len = v->item_len;
		u->flags = v->item_flags;
		u->refs = v->item_refs;
		u->bad |= v->item_rewrite;
		return 0;
	}
	if (v->type == BTRFS_EXTENT_OWNER_REF_KEY)
		return 0; /* kept as they are */
	u->declared += v->declared;
	if (!v->has_expected || !v->has_declared || v->expected != v->declared)
		u->bad = true;
	if (!v->has_expected)
		return 0;
	if (u->nexp == u->cap) {
		size_t cap = u->cap ? u->cap * 2 : 16;
		struct extent_fix *p;
		if (cap > UNIT_MAX_REFS) {
			u->overflow = true;
			return 0;
		}
		if (!(p = realloc(u->exp, cap * sizeof(*p))))
			return -ENOMEM;
		u->exp = p;
		u->cap = cap;
	}
	u->exp[u->nexp++] = (struct extent_fix){ .bytenr = v->bytenr, .type = v->type, .a = v->a, .b = v->b, .c = v->c,
						 .count = v->expected };
	if (v->type == BTRFS_EXTENT_DATA_REF_KEY || v->type == BTRFS_SHARED_DATA_REF_KEY) {
		if (u->data && u->data_len != v->data_len)
			u->unfixable = true;
		u->data = true;
		u->data_len = v->data_len;
	} else {
		u->tree = true;
		u->full_backref = v->full_backref;
		u->level = v->level;
		u->generation = v->generation;
	}
	return 0;
}

void refs_repair_replace(struct check_ctx *ctx, struct refs_unit *u)
{
	if (u && !ctx->infer_full_backref)
		u->replace = u->bad = true;
}

void refs_repair_unfixable(struct check_ctx *ctx, struct refs_unit *u)
{
	/* only the extent tree disagrees: the rebuild replaces it */
	if (u && !ctx->infer_full_backref)
		u->unfixable = true;
}

int refs_repair_finish(struct check_ctx *ctx, struct refs_unit **up, bool incomplete)
{
	struct refs_unit *u = *up;
	int ret = 0;

	if (!u)
		return 0;
	if (u->active && !incomplete)
		ret = unit_note(ctx, u);
	free(u->exp);
	free(u);
	*up = NULL;
	return ret;
}
