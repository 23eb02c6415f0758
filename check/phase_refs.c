// SPDX-License-Identifier: GPL-2.0-only
/* Extent references: what the trees use against what the extent tree
 * declares, as joins of sorted record streams (libfs/recsort) so memory stays
 * within the budget whatever the filesystem's size.
 *
 * 1. During the tree-block walk (phase_trees.c calls refs_observe_block, an observer, once
 *    per block), the extent tree's leaves (walked before any subvolume) give
 *    the tree blocks with FULL_BACKREF (a bitmap); then every child pointer
 *    of every node and every file extent of every leaf becomes an expected
 *    reference, shared (parent) or keyed by the holder's flag. Uses of one
 *    extent by the same key within a leaf are one record with a count.
 * 2. A merge-join of the expected references against the declared ones,
 *    read straight from one pass over the extent tree: its items come in
 *    extent order, so each extent's references (inline and keyed) need only
 *    be sorted among themselves (in memory, unless one extent has more than
 *    the budget holds: then it alone goes through a sorter). The pass also checks
 *    each extent's refs against the sum of its references and walks the
 *    checksum tree alongside (phase_csums.c). Progress: extent-tree leaves
 *    read of those the tree-block walk counted. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/fs_check.h"
#include "check/fe_kind.h"
#include "check/refs.h"
#include "check/refs_repair.h"
#include "check/repair_notes.h"
#include "check/tree_observers.h"
#include "common/sizes.h"
#include <btk/item_check.h>
#include <btk/block.h>
#include <btk/csum.h>
#include <btk/ebitmap.h>
#include <btk/recsort.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>

/* A reference, or (type 0, declared side only) the extent itself. Key
 * fields by type: tree block ref (bytenr, a = root), shared block ref
 * (bytenr, a = parent), data ref (bytenr, a = root, b = inode, c = offset),
 * shared data ref (bytenr, a = parent), owner ref (bytenr, a = root); b and c
 * of the other types only say where the reference was seen (messages).
 * Type 0: a = length, b = flags, c = refs. This is the whole declared record. */
struct ref_rec {
	uint64_t bytenr, a, b, c;
	uint32_t count;
	uint8_t type;           /* 0 or BTRFS_*_REF_KEY */
	uint8_t flags;          /* REF_NEEDS_CSUM, REF_NO_CSUM (expected), EXTENT_CSUMMED, EXTENT_HAS_CSUM (type 0) */
	uint16_t pad;           /* type 0 of a tree block: its level + 1 (0: not known) */
};
#define REF_NEEDS_CSUM 1u
#define EXTENT_CSUMMED 2u  /* the csum tree covers the whole extent */
#define EXTENT_REWRITE 4u  /* its inline references are damaged: the repair writes it again */
#define REF_NO_CSUM 8u     /* a NODATASUM file's regular extent: need[] must have no checksums */
#define EXTENT_HAS_CSUM 8u /* the csum tree covers some of the extent */
#define EXTENT_LEN_BAD 16u /* its key's length is one the kernel refuses: the users say it */

/* An expected reference (a user of an extent, seen by the tree walk). Tree
 * block refs carry the block's generation in r.c and its level in len. */
struct exp_rec {
	struct ref_rec r;
	uint32_t len;           /* data: disk_num_bytes (at most UINT32_MAX) */
	/* REF_NEEDS_CSUM: [need[0], need[1]) and [need[2], need[3]) relative to
	 * bytenr need checksums (REF_NO_CSUM: must have none); merged users keep
	 * their first and last range */
	uint32_t need[4];
};

struct refs_state {
	struct recsort *expected;   /* struct exp_rec */
	uint64_t extent_leaf_bytes; /* the extent tree's leaves, for the progress total */
	size_t budget;              /* of the sorter, and of one extent's declared records */
	/* tree blocks whose extent item has FULL_BACKREF: seen in the extent
	 * tree's leaves, which the walk reaches before any subvolume's */
	struct ebitmap *full_backref;
	struct ebitmap *tree_items;  /* tree blocks with an extent item (seen as full_backref) */
	struct exp_rec *leaf_refs;  /* the data references of one leaf */
	size_t leaf_cap;
	/* the tree being walked: the last inode item seen, for NODATASUM */
	uint64_t walk_root;
	uint64_t last_ino;
	bool last_nodatasum;
	bool last_valid;
	/* blocks were skipped since the last leaf: an inode item may lie between */
	bool gap;
};

/* the join's view of the current extent */
struct join_state {
	struct check_ctx *ctx;
	bool have;                  /* an extent item at bytenr */
	bool len_bad;               /* its length is not known yet (EXTENT_LEN_BAD): the first user's */
	uint64_t bytenr, len, flags;
	unsigned level;             /* a tree block's, + 1 (0: not known) */
	bool covered;               /* the csum tree covers all of it */
	bool some_csum;             /* the csum tree covers some of it */
	struct csum_need *need;     /* parts of the extent regular file extents use */
	size_t nneed, need_cap;
	uint64_t not_alloc_reported;
	bool incomplete;            /* some tree was unreadable: expected refs are a lower bound */
	struct refs_unit *unit;     /* --repair: what the repair needs (refs_repair.c) */
};

static int cmp_u64(uint64_t x, uint64_t y)
{
	return x < y ? -1 : x > y;
}

/* Key order of ref_rec (and of exp_rec, which starts with one). */
static int ref_cmp(const void *x, const void *y, void *arg)
{
	const struct ref_rec *p = x, *q = y;
	int r;

	(void)arg;
	if ((r = cmp_u64(p->bytenr, q->bytenr)) || (r = cmp_u64(p->type, q->type)) || (r = cmp_u64(p->a, q->a)))
		return r;
	if (p->type != BTRFS_EXTENT_DATA_REF_KEY)
		return 0;
	if ((r = cmp_u64(p->b, q->b)))
		return r;
	return cmp_u64(p->c, q->c);
}

static const char *ref_type_name(uint32_t type)
{
	switch (type) {
	case BTRFS_TREE_BLOCK_REF_KEY: return "tree block ref";
	case BTRFS_SHARED_BLOCK_REF_KEY: return "shared block ref";
	case BTRFS_EXTENT_DATA_REF_KEY: return "data ref";
	case BTRFS_SHARED_DATA_REF_KEY: return "shared data ref";
	case BTRFS_EXTENT_OWNER_REF_KEY: return "owner ref";
	default: return "ref";
	}
}

/* The expected references' sorter gets an eighth of the sorters' budget
 * (check_sort_budget; the block cache has its own). */
static int refs_start(struct check_ctx *ctx)
{
	struct refs_state *st = calloc(1, sizeof(*st));
	uint64_t budget = check_sort_budget(ctx, 8), v;
	const char *env = getenv("BTK_CHECK_SORT_BUDGET"); /* tests: force spilling on small images */
	unsigned jobs = ctx->opts->jobs > 4 ? 4 : ctx->opts->jobs;

	if (env && !size_parse(env, &v))
		budget = v;
	if (budget < RECSORT_MIN_BUDGET)
		budget = RECSORT_MIN_BUDGET;
	if (!st)
		return -ENOMEM;
	st->budget = (size_t)budget;
	st->expected = recsort_create(sizeof(struct exp_rec), ref_cmp, NULL, (size_t)budget,
				       &ctx->fs->knobs.recsort);
	st->full_backref = ebitmap_create(ctx->fs->sectorsize);
	st->tree_items = ebitmap_create(ctx->fs->sectorsize);
	ctx->refs = st;
	if (!st->expected || !st->full_backref || !st->tree_items)
		return -errno ? -errno : -ENOMEM;
	recsort_set_jobs(st->expected, jobs ? jobs : 1);
	return 0;
}

void refs_free(struct check_ctx *ctx)
{
	struct refs_state *st = ctx->refs;

	if (!st)
		return;
	recsort_destroy(st->expected);
	ebitmap_destroy(st->full_backref);
	ebitmap_destroy(st->tree_items);
	free(st->leaf_refs);
	free(st);
	ctx->refs = NULL;
}

static bool holder_full_backref(struct check_ctx *ctx, uint64_t bytenr)
{
	return ebitmap_test(ctx->refs->full_backref, bytenr, ctx->fs->nodesize) == EBITMAP_ALL;
}

bool refs_block_full_backref(struct check_ctx *ctx, uint64_t bytenr)
{
	return ctx->refs && holder_full_backref(ctx, bytenr);
}

/* A block that relocation copied (the header's RELOC flag: only relocation
 * trees make such copies, of subvolume blocks) was allocated with full
 * backrefs, and keeps them until a tree copies it again: the reference calls
 * it a bad full backref otherwise (a relocation tree's root too has both). */
static void check_reloc_flag(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
			     bool full)
{
	if (full || ctx->infer_full_backref || !(header_flags(b->data) & BTRFS_HEADER_FLAG_RELOC))
		return;
	report_problem(ctx, PR_EXTENT_TYPE, "tree %" PRIu64 ": block %" PRIu64 " has the relocation header flag, its "
		       "extent item no full backrefs", root->objectid, b->bytenr);
}

/* Whether block b, reached first from tree root, has full backrefs by the
 * trees' shape alone (see block_full_backref). */
static bool full_backref_by_trees(const struct tree_root_ptr *root, const struct tree_block *b)
{
	return b->bytenr != root->bytenr && !key_tree_never_shared(root->objectid) &&
	       (root->objectid == BTRFS_TREE_RELOC_OBJECTID || block_owner(b) != root->objectid ||
		(header_flags(b->data) & BTRFS_HEADER_FLAG_RELOC));
}

/* The extent item's full-backref flag of block b, held against the trees'
 * shape where the kernel's rule is plain: in a tree no drop is under way in
 * (relocation trees have rules of their own), a block has full backrefs
 * exactly when it is not a root, its tree can be shared, and its owner no
 * longer holds it (it is reached first from another tree: the owner's id is
 * lower) or relocation copied it (btrfs check: "bad full backref"). A
 * flag that disagrees is reported and the shape wins: the
 * children's references are expected as the shape says, and the repair
 * (extent-refs) sets the flag. 1, 0 or -errno. */
static int declared_full_backref(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b)
{
	bool declared = holder_full_backref(ctx, b->bytenr), shape, has_item;
	int ret;

	/* (the trees are walked by id: a block's owner made it before any later
	 * tree shared it, so an owner above the first tree that reaches it is
	 * the header's damage, which the owner check reports) */
	if (root->objectid == BTRFS_TREE_RELOC_OBJECTID || ctx->walk_drop ||
	    (key_is_subvolume_id(root->objectid) && block_owner(b) > root->objectid))
		return declared;
	shape = full_backref_by_trees(root, b);
	if (shape == declared)
		return declared;
	/* no extent item (tree-block-not-allocated): the one the repair makes follows the shape */
	has_item = ebitmap_test(ctx->refs->tree_items, b->bytenr, ctx->fs->nodesize) == EBITMAP_ALL;
	/* the relocation header flag without full backrefs: reported by check_reloc_flag */
	if (has_item && (!(header_flags(b->data) & BTRFS_HEADER_FLAG_RELOC) || declared))
		report_problem(ctx, PR_EXTENT_FULL_BACKREF, "tree %" PRIu64 ": block %" PRIu64 " (owner %" PRIu64
			       ") %s the full-backref flag", root->objectid, b->bytenr, block_owner(b),
			       declared ? "has" : "lacks");
	else if (has_item)
		check_reloc_flag(ctx, root, b, false);
	ret = shape ? ebitmap_set(ctx->refs->full_backref, b->bytenr, ctx->fs->nodesize)
		    : ebitmap_clear(ctx->refs->full_backref, b->bytenr, ctx->fs->nodesize);
	return ret < 0 ? ret : shape;
}

/* Whether block b, reached for the first time from tree root, has full
 * backrefs. From the extent tree's flags (its leaves come before any
 * subvolume's blocks); or, rebuilding the extent tree, from the trees alone:
 * in a tree snapshots may share, a block other than the root has full
 * backrefs when its owner tree no longer holds it. The trees are walked in
 * objectid order and a snapshot's id is larger than its source's, so a
 * block its owner still holds is reached first from its owner. Relocation
 * trees use full backrefs throughout. 1, 0 or -errno. */
static int block_full_backref(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b)
{
	bool full;
	int ret;

	if (!ctx->infer_full_backref)
		return declared_full_backref(ctx, root, b);
	full = full_backref_by_trees(root, b);
	if (full && (ret = ebitmap_set(ctx->refs->full_backref, b->bytenr, ctx->fs->nodesize)) < 0)
		return ret;
	return full;
}

/* An extent-tree leaf: remember the tree blocks with full backrefs. */
static int observe_extent_leaf(struct check_ctx *ctx, const struct tree_block *b)
{
	for (unsigned i = 0; i < block_nritems(b); i++) {
		struct btrfs_key k;
		int ret;

		block_key(b, i, &k);
		struct item_view v = leaf_item_view(b->data, i);
		uint64_t flags = extent_flags_in(&v);

		if ((k.type != BTRFS_METADATA_ITEM_KEY && k.type != BTRFS_EXTENT_ITEM_KEY) || v.past_end)
			continue;
		/* (an unaligned one is malformed: reported by the extents phase) */
		if (k.objectid % ctx->fs->sectorsize)
			continue;
		if ((flags & (BTRFS_EXTENT_FLAG_TREE_BLOCK | BTRFS_EXTENT_FLAG_DATA)) == BTRFS_EXTENT_FLAG_TREE_BLOCK &&
		    (ret = ebitmap_set(ctx->refs->tree_items, k.objectid, ctx->fs->nodesize)) < 0)
			return ret;
		if ((flags & (BTRFS_BLOCK_FLAG_FULL_BACKREF | BTRFS_EXTENT_FLAG_TREE_BLOCK)) !=
		    (BTRFS_BLOCK_FLAG_FULL_BACKREF | BTRFS_EXTENT_FLAG_TREE_BLOCK))
			continue;
		if ((ret = ebitmap_set(ctx->refs->full_backref, k.objectid, ctx->fs->nodesize)) < 0)
			return ret;
	}
	return 0;
}

static uint32_t clamp32(uint64_t v)
{
	return v > UINT32_MAX ? UINT32_MAX : (uint32_t)v;
}

static int exp_leaf_cmp(const void *x, const void *y)
{
	const struct exp_rec *p = x, *q = y;
	int r = ref_cmp(x, y, NULL);

	if (r || (r = cmp_u64(p->r.flags, q->r.flags)) || (r = cmp_u64(p->len, q->len)))
		return r;
	return cmp_u64(p->need[0], q->need[0]);
}

/* Fold q (same key, flags and length, need[0] not before m's) into m. */
static void merge_user(struct exp_rec *m, const struct exp_rec *q)
{
	bool two = m->need[3] > m->need[2];
	uint32_t *hi = two ? &m->need[3] : &m->need[1];

	m->r.count++;
	if (!(m->r.flags & (REF_NEEDS_CSUM | REF_NO_CSUM)))
		return;
	if (q->need[0] <= *hi) {
		if (q->need[1] > *hi)
			*hi = q->need[1];
	} else {
		/* a gap: keep the first range and this one (checks stay exact, a middle range is not checked) */
		m->need[2] = q->need[0];
		m->need[3] = q->need[1];
	}
}

/* The data references of one leaf, users of the same extent by the same key
 * counted in one record (split file extents, reflinks within a file). */
static int flush_leaf_refs(struct refs_state *st, size_t n)
{
	size_t out = 0;

	if (!n)
		return 0;
	qsort(st->leaf_refs, n, sizeof(*st->leaf_refs), exp_leaf_cmp);
	for (size_t i = 1; i < n; i++) {
		struct exp_rec *m = &st->leaf_refs[out];
		const struct exp_rec *q = &st->leaf_refs[i];
		if (!ref_cmp(m, q, NULL) && m->r.flags == q->r.flags && m->len == q->len)
			merge_user(m, q);
		else
			st->leaf_refs[++out] = *q;
	}
	for (size_t i = 0; i <= out; i++) {
		int ret = recsort_add(st->expected, &st->leaf_refs[i]);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* The file extents and inode items of one leaf. Inode items are tracked even
 * in a leaf already seen from another tree, so the NODATASUM flag is known
 * for the file extents that follow in key order. */
/* A leaf another tree already observed holds no reference of this one; only
 * the inode its last inode item starts matters, to the file extents of this
 * tree's next leaf. Searched from the end: a snapshot reaches hundreds of
 * shared leaves through each of its private nodes. */
static int observe_shared_leaf(struct refs_state *st, const struct tree_block *b)
{
	for (unsigned i = block_nritems(b); i-- > 0;) {
		struct item_view v = leaf_item_view(b->data, i);
		struct btrfs_key k;

		block_key(b, i, &k);
		if (k.type == BTRFS_INODE_ITEM_KEY && item_view_has_fixed(&v, k.type)) {
			st->last_ino = k.objectid;
			st->last_nodatasum = INODE_FLAGS_NODATASUM(inode_flags(v.data));
			st->last_valid = true;
			st->gap = false;
			break;
		}
	}
	return 0;
}

/* After skipped blocks, the inode of the file extents a leaf starts with is
 * looked up in the tree (its inode item may be in what was skipped). */
static void gap_lookup(struct check_ctx *ctx, struct refs_state *st, const struct tree_root_ptr *root, uint64_t ino)
{
	struct btrfs_key key = { ino, BTRFS_INODE_ITEM_KEY, 0 };
	uint8_t buf[sizeof(struct btrfs_inode_item)];
	uint32_t size = sizeof(buf);
	struct item_view v;

	st->gap = false;
	if (st->last_valid && st->last_ino == ino)
		return;
	if (tree_lookup(ctx->fs, root, &key, buf, &size) != 0)
		size = 0;
	v = item_view_copied(buf, sizeof(buf), size);
	st->last_valid = item_view_has_fixed(&v, key.type);
	st->last_ino = ino;
	st->last_nodatasum = st->last_valid && INODE_FLAGS_NODATASUM(inode_flags(buf));
}

/* The walk skipped blocks of the tree (a shared subtree): the inode the next
 * leaf's first file extents belong to is looked up, not taken as the last seen. */
static void refs_note_gap(struct check_ctx *ctx)
{
	if (ctx->refs)
		ctx->refs->gap = true;
}

static int observe_leaf(struct check_ctx *ctx, struct refs_state *st, const struct tree_root_ptr *root,
			const struct tree_block *b, bool first, bool full)
{
	unsigned n = block_nritems(b);
	size_t nrefs = 0;

	if (!first)
		return observe_shared_leaf(st, b);
	if (n > st->leaf_cap) {
		struct exp_rec *p = realloc(st->leaf_refs, n * sizeof(*p));
		if (!p)
			return -ENOMEM;
		st->leaf_refs = p;
		st->leaf_cap = n;
	}
	for (unsigned i = 0; i < n; i++) {
		struct btrfs_key k;
		const uint8_t *d = leaf_item_data(b->data, i);
		uint32_t size = item_size(leaf_item(b->data, i));
		struct item_view v = item_view_of(d, size);
		struct exp_rec *e;
		uint64_t disk_len;
		uint8_t type;

		block_key(b, i, &k);
		if (k.type == BTRFS_INODE_ITEM_KEY && ITEM_VIEW_STRUCT(&v, 0, struct btrfs_inode_item)) {
			st->last_ino = k.objectid;
			/* the data relocation tree's files hold copies whose checksums the
			 * kernel clones from the source extent: none when the source had none */
			st->last_nodatasum = INODE_FLAGS_NODATASUM(inode_flags(d)) ||
					     root->objectid == BTRFS_DATA_RELOC_TREE_OBJECTID;
			st->last_valid = true;
			st->gap = false;
			continue;
		}
		if (!first || k.type != BTRFS_EXTENT_DATA_KEY || !item_view_ptr(&v, 0, BTRFS_FILE_EXTENT_INLINE_DATA_START))
			continue;
		if (st->gap)
			gap_lookup(ctx, st, root, k.objectid);
		type = file_extent_type(d);
		if (!fe_kind_regular(type, size))
			continue;
		if (!ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item)) {
			report_problem(ctx, PR_ITEM_MALFORMED, "tree %" PRIu64 " inode %" PRIu64 " file extent %" PRIu64
				       " is %u bytes", block_owner(b), k.objectid, k.offset, size);
			continue;
		}
		if (!file_extent_disk_bytenr(d))
			continue; /* a hole */
		disk_len = file_extent_disk_num_bytes(d);
		e = &st->leaf_refs[nrefs++];
		*e = (struct exp_rec){ .r = { .bytenr = file_extent_disk_bytenr(d), .count = 1 },
				       .len = clamp32(disk_len) };
		if (full) {
			e->r.type = BTRFS_SHARED_DATA_REF_KEY;
			e->r.a = b->bytenr;
			e->r.b = block_owner(b);
			e->r.c = k.objectid;
		} else {
			e->r.type = BTRFS_EXTENT_DATA_REF_KEY;
			e->r.a = block_owner(b);
			e->r.b = k.objectid;
			e->r.c = k.offset - file_extent_offset(d);
		}
		if (type == BTRFS_FILE_EXTENT_REG && st->last_valid && st->last_ino == k.objectid) {
			/* compressed: checksums cover the compressed bytes, all of them */
			bool whole = file_extent_compression(d) != 0;
			uint64_t lo = whole ? 0 : file_extent_offset(d);
			uint64_t hi = whole ? disk_len : lo + file_extent_num_bytes(d);
			if (hi > disk_len || hi < lo)
				hi = disk_len;
			if (lo > hi)
				lo = hi;
			/* (a compressed extent of a NODATASUM file is a problem of its own,
			 * file-extent-compressed-nodatasum: its checksums are no second one) */
			if (!st->last_nodatasum || !whole) {
				e->r.flags |= st->last_nodatasum ? REF_NO_CSUM : REF_NEEDS_CSUM;
				e->need[0] = clamp32(lo);
				e->need[1] = clamp32(hi);
			}
		}
	}
	st->gap = false;
	return flush_leaf_refs(st, nrefs);
}

int refs_observe_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
		       bool first)
{
	struct refs_state *st;
	bool full;
	int ret;

	/* log tree blocks and file extents have no extent references */
	if (root->objectid == BTRFS_TREE_LOG_OBJECTID)
		return 0;
	if (!ctx->refs && (ret = refs_start(ctx)) < 0)
		return ret;
	st = ctx->refs;
	if (st->walk_root != root->objectid || b->bytenr == root->bytenr) {
		st->walk_root = root->objectid;
		st->last_valid = false;
		st->gap = false;
	}
	if (b->bytenr == root->bytenr && first) {
		struct exp_rec r = { .r = { .bytenr = b->bytenr, .type = BTRFS_TREE_BLOCK_REF_KEY, .a = root->objectid,
					    .c = block_generation(b), .count = 1 }, .len = block_level(b) };
		/* a relocation tree's root is its own parent (full backrefs throughout) */
		if (root->objectid == BTRFS_TREE_RELOC_OBJECTID) {
			r.r.type = BTRFS_SHARED_BLOCK_REF_KEY;
			r.r.a = b->bytenr;
			r.r.b = root->objectid;
		}
		if ((ret = recsort_add(st->expected, &r)) < 0)
			return ret;
	}
	full = false;
	if (first) {
		if ((ret = block_full_backref(ctx, root, b)) < 0)
			return ret;
		full = ret > 0;
		check_reloc_flag(ctx, root, b, full);
	}
	if (block_level(b) == 0) {
		if (first && root->objectid == BTRFS_EXTENT_TREE_OBJECTID)
			st->extent_leaf_bytes += ctx->fs->nodesize;
		if (first && root->objectid == BTRFS_EXTENT_TREE_OBJECTID && !ctx->infer_full_backref &&
		    (ret = observe_extent_leaf(ctx, b)) < 0)
			return ret;
		return observe_leaf(ctx, st, root, b, first, full);
	}
	if (!first)
		return 0;
	for (unsigned i = 0; i < block_nritems(b); i++) {
		/* a child the kernel dropped already holds no reference: its space may be in use again */
		if (ctx->walk_drop && tree_child_dropped(ctx->walk_drop, b, i))
			continue;
		struct exp_rec c = { .r = { .bytenr = key_ptr_blockptr(node_key_ptr(b->data, i)), .count = 1,
					    .type = full ? BTRFS_SHARED_BLOCK_REF_KEY : BTRFS_TREE_BLOCK_REF_KEY,
					    .a = full ? b->bytenr : block_owner(b),
					    .b = full ? block_owner(b) : b->bytenr,
					    .c = key_ptr_generation(node_key_ptr(b->data, i)) },
				     .len = block_level(b) - 1 };
		if ((ret = recsort_add(st->expected, &c)) < 0)
			return ret;
	}
	return 0;
}

/* ---- pass over the extent tree ------------------------------------------- */

struct extent_pass {
	struct check_ctx *ctx;
	struct refs_state *st;
	struct csum_cursor *csums;
	/* the extent item whose references are being summed */
	bool have;
	uint64_t bytenr, len, flags, refs, sum;
	bool tree_block;
	/* the declared records of the extents read so far: [pos, ready) are
	 * sorted and handed to the join, [ready, n) belong to the extent being
	 * read (they all have its bytenr) */
	struct tree_iter it;
	struct ref_rec *buf;
	size_t n, cap, pos, ready;
	uint64_t leaf;                  /* the leaf last read, for the progress */
	bool done;                      /* the iterator has ended */
	bool *incomplete;               /* set when the extent tree cannot be read to its end */
	uint64_t records;
	/* an extent with more declared records than max_recs (very many
	 * reflinks) is sorted through a sorter of its own, so memory stays
	 * within the budget: big collects it, then it is drained to the join */
	size_t max_recs;
	struct recsort *big, *draining;
	uint64_t big_bytenr;            /* the extent being read (objectid of the last item) */
};

/* The extent being read has too many records for memory: move them to a sorter. */
static int start_big_extent(struct extent_pass *p)
{
	int ret = 0;

	p->big = recsort_create(sizeof(struct ref_rec), ref_cmp, NULL, p->st->budget, &p->ctx->fs->knobs.recsort);
	if (!p->big)
		return -errno ? -errno : -ENOMEM;
	for (size_t i = p->ready; i < p->n && !ret; i++)
		ret = recsort_add(p->big, &p->buf[i]);
	p->n = p->ready;
	return ret;
}

/* The big extent is read: the join takes its records next. */
static int end_big_extent(struct extent_pass *p)
{
	struct recsort_stats s;
	int ret = recsort_finish(p->big);

	recsort_get_stats(p->big, &s);
	p->ctx->stats.spilled_bytes += s.spilled_bytes;
	p->draining = p->big;
	p->big = NULL;
	return ret;
}

/* Append one declared record to the extent being read. */
static int push_declared(struct extent_pass *p, const struct ref_rec *r)
{
	p->records++;
	if (p->big)
		return recsort_add(p->big, r);
	if (p->n - p->ready >= p->max_recs) {
		int ret = start_big_extent(p);

		return ret ? ret : recsort_add(p->big, r);
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? p->cap * 2 : 256;
		struct ref_rec *nb = realloc(p->buf, cap * sizeof(*nb));

		if (!nb)
			return -ENOMEM;
		p->buf = nb;
		p->cap = cap;
	}
	p->buf[p->n++] = *r;
	return 0;
}

static int add_declared(struct extent_pass *p, uint8_t type, uint64_t a, uint64_t b, uint64_t c, uint64_t count)
{
	struct ref_rec r = { .bytenr = p->bytenr, .type = type, .a = a, .b = b, .c = c, .count = clamp32(count) };

	if (type != BTRFS_EXTENT_OWNER_REF_KEY)
		p->sum += count;
	return push_declared(p, &r);
}

/* The extent item just ended: its refs against the sum of its references. */
static void finish_extent(struct extent_pass *p)
{
	if (p->have && p->refs != p->sum)
		report_problem(p->ctx, PR_EXTENT_REFS_TOTAL, "extent %" PRIu64 "+%" PRIu64 ": refs %" PRIu64
			       ", its references count %" PRIu64, p->bytenr, p->len, p->refs, p->sum);
	p->have = false;
}

/* Why the inline references from cur on are bad, or NULL (the validator's
 * order: item_check.h). */
static const char *inline_refs_bad(const struct item_view *v, uint32_t cur)
{
	uint32_t at;

	switch (inline_refs_check(v, cur, &at)) {
	case ITEM_OK:
		return NULL;
	case ITEM_REF_ORDER:
		return "out of order";
	default:
		return "of an invalid type";
	}
}

/* An EXTENT_ITEM or METADATA_ITEM: the extent record, its inline references,
 * the checksum walk. */
static int extent_item(struct extent_pass *p, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct check_ctx *ctx = p->ctx;
	struct item_view v = item_view_of(d, size);
	uint32_t cur = sizeof(struct btrfs_extent_item);
	struct inline_ref_view r;
	struct ref_rec hdr;
	uint64_t covered = 0;
	bool kind_unknown = false, len_bad;
	const char *bad;
	int ret;

	finish_extent(p);
	if (!ITEM_VIEW_STRUCT(&v, 0, struct btrfs_extent_item))
		return 0; /* reported by the extents phase */
	p->have = true;
	p->bytenr = k->objectid;
	p->len = k->type == BTRFS_METADATA_ITEM_KEY ? ctx->fs->nodesize : k->offset;
	p->flags = extent_flags(d);
	p->refs = extent_refs(d);
	p->sum = 0;
	p->tree_block = k->type == BTRFS_METADATA_ITEM_KEY || (p->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK);
	/* a length the kernel refuses (the extents phase reports it): its users say it */
	len_bad = k->type == BTRFS_EXTENT_ITEM_KEY && extent_length_refused(k->objectid, k->offset, ctx->fs->sectorsize);
	/* a tree block is one node long: anything else is data whose flags lie */
	if (len_bad)
		p->len = 0;
	else if (k->type == BTRFS_EXTENT_ITEM_KEY && p->tree_block && k->offset != ctx->fs->nodesize) {
		report_problem(ctx, PR_EXTENT_TYPE, "extent %" PRIu64 "+%" PRIu64 " is flagged as a tree block (%#"
			       PRIx64 ") but is not one node long", p->bytenr, p->len, p->flags);
		p->tree_block = false;
	} else if (k->type == BTRFS_METADATA_ITEM_KEY && !(p->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK))
		report_problem(ctx, PR_EXTENT_TYPE, "metadata item %" PRIu64 " lacks the tree-block flag", p->bytenr);
	else if ((kind_unknown = !!(p->flags & BTRFS_EXTENT_FLAG_DATA) == !!(p->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK)))
		report_problem(ctx, PR_EXTENT_TYPE, "extent %" PRIu64 " has flags %#" PRIx64 " (not data xor tree block)",
			       p->bytenr, p->flags);
	else if ((p->flags & BTRFS_EXTENT_FLAG_DATA) && (p->flags & BTRFS_BLOCK_FLAG_FULL_BACKREF))
		report_problem(ctx, PR_EXTENT_TYPE, "data extent %" PRIu64 " has the full-backref flag", p->bytenr);
	if (k->type == BTRFS_EXTENT_ITEM_KEY && p->tree_block)
		cur += sizeof(struct btrfs_tree_block_info);
	hdr = (struct ref_rec){ .bytenr = p->bytenr, .a = p->len, .b = p->flags, .c = p->refs };
	if (p->tree_block && k->type == BTRFS_METADATA_ITEM_KEY && k->offset < BTRFS_MAX_LEVEL)
		hdr.pad = (uint16_t)(k->offset + 1);
	else if (p->tree_block && ITEM_VIEW_STRUCT(&v, sizeof(struct btrfs_extent_item), struct btrfs_tree_block_info))
		hdr.pad = (uint16_t)(tree_block_info_level(d + sizeof(struct btrfs_extent_item)) + 1);
	if (!p->tree_block && p->csums && (ret = csum_cursor_extent(p->csums, p->bytenr, p->len, &covered)) < 0)
		return ret;
	if (covered >= p->len)
		hdr.flags |= EXTENT_CSUMMED;
	if (covered)
		hdr.flags |= EXTENT_HAS_CSUM;
	if (len_bad)
		hdr.flags |= EXTENT_LEN_BAD | EXTENT_REWRITE;
	if (!kind_unknown && (bad = inline_refs_bad(&v, cur))) {
		report_problem(ctx, PR_EXTENT_INLINE_REF_BAD, "extent %" PRIu64 ": inline references %s", p->bytenr, bad);
		hdr.flags |= EXTENT_REWRITE;
	}
	if ((ret = push_declared(p, &hdr)) < 0)
		return ret;
	/* without a kind, a tree block's info cannot be told from inline references:
	 * none are read (the repair writes the item again from its users) */
	/* (a bad one ends the walk: reported above) */
	while (!kind_unknown && inline_ref_next(&v, &cur, &r) == 1) {
		uint8_t type = r.type;
		const uint8_t *q = r.body;

		if (type == BTRFS_EXTENT_DATA_REF_KEY)
			ret = add_declared(p, type, data_ref_root(q), data_ref_objectid(q), data_ref_offset(q),
					   data_ref_count(q));
		else if (type == BTRFS_SHARED_DATA_REF_KEY)
			ret = add_declared(p, type, get_le64(q), 0, 0, shared_data_ref_count(q + 8));
		else
			ret = add_declared(p, type, get_le64(q), 0, 0, 1);
		if (ret < 0)
			return ret;
	}
	return 0;
}

/* A keyed reference item after its extent item. */
static int keyed_ref(struct extent_pass *p, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct item_verdict vd;
	bool small = item_check_fs(p->ctx->fs, k, d, size, &vd) && vd.fault == ITEM_TOO_SMALL;

	if (!p->have || k->objectid != p->bytenr) {
		/* a reference without an extent item: the join reports it unused */
		finish_extent(p);
		p->bytenr = k->objectid;
	}
	switch (k->type) {
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_SHARED_BLOCK_REF_KEY:
	case BTRFS_EXTENT_OWNER_REF_KEY:
		return add_declared(p, k->type, k->offset, 0, 0, 1);
	case BTRFS_EXTENT_DATA_REF_KEY:
		if (small)
			break;
		return add_declared(p, k->type, data_ref_root(d), data_ref_objectid(d), data_ref_offset(d),
				    data_ref_count(d));
	case BTRFS_SHARED_DATA_REF_KEY:
		if (small)
			break;
		return add_declared(p, k->type, k->offset, 0, 0, shared_data_ref_count(d));
	}
	report_problem(p->ctx, PR_ITEM_MALFORMED, "extent %" PRIu64 ": reference item type %u is %u bytes",
		       k->objectid, k->type, size);
	return 0;
}

static int ref_qcmp(const void *x, const void *y)
{
	return ref_cmp(x, y, NULL);
}

/* Read one extent-tree item into the declared records. 1, 0 at the end (or
 * when the tree cannot be read further: reported), or -errno. */
static int scan_item(struct extent_pass *p)
{
	struct check_ctx *ctx = p->ctx;
	struct btrfs_key k;
	const uint8_t *d;
	uint32_t size;
	int ret;

	if (cli_cancelled())
		return -ECANCELED;
	ret = tree_iter_next(&p->it, &k, &d, &size);
	if (ret <= 0) {
		if (ret < 0 && ret != -ENOMEM && ret != -ENOSPC) {
			report_problem(ctx, PR_TREE_BLOCK_UNREADABLE, "extent tree: %s", btk_error_msg());
			/* as the join's start would have said (see join_refs) */
			if (!ctx->infer_full_backref)
				*p->incomplete = true;
			ret = 0;
		}
		return ret;
	}
	if (p->it.path.nodes[0] && p->it.path.nodes[0]->bytenr != p->leaf) {
		p->leaf = p->it.path.nodes[0]->bytenr;
		progress_add(ctx->progress, ctx->fs->nodesize);
	}
	/* an extent's items end where the next bytenr starts */
	if (p->big && k.objectid != p->big_bytenr && (ret = end_big_extent(p)) < 0)
		return ret;
	if (p->n > p->ready && k.objectid != p->buf[p->ready].bytenr) {
		qsort(p->buf + p->ready, p->n - p->ready, sizeof(*p->buf), ref_qcmp);
		p->ready = p->n;
	}
	p->big_bytenr = k.objectid;
	switch (k.type) {
	case BTRFS_EXTENT_ITEM_KEY:
	case BTRFS_METADATA_ITEM_KEY:
		ret = extent_item(p, &k, d, size);
		break;
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_SHARED_BLOCK_REF_KEY:
	case BTRFS_EXTENT_DATA_REF_KEY:
	case BTRFS_SHARED_DATA_REF_KEY:
	case BTRFS_EXTENT_OWNER_REF_KEY:
		ret = keyed_ref(p, &k, d, size);
		break;
	default:
		ret = 0;
	}
	return ret < 0 ? ret : 1;
}

/* The join's right side: the declared references in key order, read from
 * the extent tree as the join asks for them. */
static int declared_next(void *arg, const void **rec)
{
	struct extent_pass *p = arg;
	int ret;

	while (p->pos == p->ready) {
		/* a big extent comes after the smaller bytenrs before it */
		if (p->draining) {
			if ((ret = recsort_next(p->draining, rec)) != 0)
				return ret;
			recsort_destroy(p->draining);
			p->draining = NULL;
		}
		/* drop what the join has read; keep the extent being read */
		if (p->ready && p->n > p->ready)
			memmove(p->buf, p->buf + p->ready, (p->n - p->ready) * sizeof(*p->buf));
		p->n -= p->ready;
		p->pos = p->ready = 0;
		if (p->done) {
			if (p->big && (ret = end_big_extent(p)) < 0)
				return ret;
			if (p->draining)
				continue;
			if (!p->n)
				return 0;
			qsort(p->buf, p->n, sizeof(*p->buf), ref_qcmp);
			p->ready = p->n;
			break;
		}
		if ((ret = scan_item(p)) < 0)
			return ret;
		if (!ret) {
			p->done = true;
			finish_extent(p);
		}
	}
	*rec = &p->buf[p->pos++];
	return 1;
}

/* ---- the join ------------------------------------------------------------- */

static uint64_t sum_declared(const struct ref_rec *r, size_t n)
{
	uint64_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += r[i].count;
	return s;
}

static uint64_t sum_expected(const struct exp_rec *r, size_t n)
{
	uint64_t s = 0;

	for (size_t i = 0; i < n; i++)
		s += r[i].r.count;
	return s;
}

static int need_cmp(const void *x, const void *y)
{
	const struct csum_need *p = x, *q = y;

	return p->lo < q->lo ? -1 : p->lo > q->lo ? 1 : (p->hi > q->hi) - (p->hi < q->hi);
}

/* The extent is done: do checksums cover what regular file extents use of it? */
static int finish_join_extent(struct join_state *j)
{
	uint64_t missing;
	size_t n = 0;
	int ret;

	if (!j->have || !j->nneed || j->covered) {
		j->have = false;
		j->nneed = 0;
		return 0;
	}
	/* sort and merge the used parts, then look them up */
	qsort(j->need, j->nneed, sizeof(*j->need), need_cmp);
	for (size_t i = 0; i < j->nneed; i++) {
		if (n && j->need[i].lo <= j->need[n - 1].hi) {
			if (j->need[i].hi > j->need[n - 1].hi)
				j->need[n - 1].hi = j->need[i].hi;
		} else {
			j->need[n++] = j->need[i];
		}
	}
	j->have = false;
	j->nneed = 0;
	if ((ret = csum_missing_bytes(j->ctx, j->bytenr, j->need, n, &missing)) < 0)
		return ret;
	if (missing)
		report_problem(j->ctx, PR_CSUM_MISSING, "data extent %" PRIu64 "+%" PRIu64 ": %" PRIu64
			       " bytes used by checksummed files have no checksum", j->bytenr, j->len, missing);
	return 0;
}

/* Remember a part of the current extent that needs checksums. Past a limit
 * (an extent shared by very many files) the whole extent is required: memory
 * stays bounded and such extents are never partly written preallocations. */
static int add_need(struct join_state *j, uint64_t lo, uint64_t hi)
{
	if (hi <= lo)
		return 0;
	if (j->nneed == j->need_cap) {
		size_t cap = j->need_cap ? j->need_cap * 2 : 16;
		struct csum_need *p;
		if (cap > 65536) {
			j->need[0] = (struct csum_need){ 0, j->len };
			j->nneed = 1;
			return 0;
		}
		if (!(p = realloc(j->need, cap * sizeof(*p))))
			return -ENOMEM;
		j->need = p;
		j->need_cap = cap;
	}
	j->need[j->nneed++] = (struct csum_need){ lo, hi };
	return 0;
}

/* Where an expected reference was seen: its tree and its inode (data) or the
 * block holding the pointer (tree blocks). */
static void user_of(const struct ref_rec *r, uint64_t *root, uint64_t *where)
{
	bool shared = r->type == BTRFS_SHARED_DATA_REF_KEY || r->type == BTRFS_SHARED_BLOCK_REF_KEY;

	*root = shared ? r->b : r->a;
	*where = r->type == BTRFS_SHARED_DATA_REF_KEY ? r->c : r->type == BTRFS_SHARED_BLOCK_REF_KEY ? r->a : r->b;
}

/* Whether [bytenr, +len) lies in one chunk that holds data. */
static bool data_chunk_holds(struct fs_info *fs, uint64_t bytenr, uint64_t len)
{
	const struct chunk *c = fs_chunk_lookup(fs, bytenr);

	return c && (c->type & BTRFS_BLOCK_GROUP_DATA) && bytenr - c->logical <= c->length &&
	       len <= c->length - (bytenr - c->logical);
}

/* A NODATASUM file's regular extent with checksums for the part it uses:
 * the kernel never writes them (nor clones between files with and without
 * NODATASUM); btrfs check calls it an odd csum item. */
static int check_no_csum(struct join_state *j, const struct exp_rec *e, uint64_t root, uint64_t where)
{
	struct csum_need need[2] = { { e->need[0], e->need[1] }, { e->need[2], e->need[3] } };
	size_t n = e->need[3] > e->need[2] ? 2 : 1;
	uint64_t total = 0, missing;
	int ret;

	if (e->need[1] <= e->need[0])
		return 0;
	for (size_t i = 0; i < n; i++)
		total += need[i].hi - need[i].lo;
	if ((ret = csum_missing_bytes(j->ctx, j->bytenr, need, n, &missing)) < 0)
		return ret;
	if (missing < total)
		report_problem(j->ctx, PR_CSUM_NODATASUM, "tree %" PRIu64 " inode %" PRIu64 ": data extent %" PRIu64
			       "+%" PRIu64 " has checksums for %" PRIu64 " bytes a NODATASUM file uses", root, where,
			       j->bytenr, j->len, total - missing);
	return 0;
}

/* A block of a tree never shared whose item has full backrefs, not seen by
 * declared_full_backref (its tree is walked before the extent tree's
 * leaves tell the flags: the root, chunk and extent trees). */
static void check_unshared_flag(struct join_state *j, uint64_t root, uint64_t bytenr)
{
	if (!key_tree_never_shared(root) || !(j->flags & BTRFS_BLOCK_FLAG_FULL_BACKREF) ||
	    !holder_full_backref(j->ctx, bytenr) || j->ctx->infer_full_backref)
		return;
	report_problem(j->ctx, PR_EXTENT_FULL_BACKREF, "tree %" PRIu64 ": block %" PRIu64 " has the full-backref flag",
		       root, bytenr);
}

/* An expected reference (left) against the extent it names. */
static int check_user(struct join_state *j, const struct exp_rec *e)
{
	bool data = e->r.type == BTRFS_EXTENT_DATA_REF_KEY || e->r.type == BTRFS_SHARED_DATA_REF_KEY;
	uint64_t root, where, bytenr = e->r.bytenr;

	user_of(&e->r, &root, &where);
	if (j->have && bytenr == j->bytenr && j->len_bad) {
		/* the item's length was refused: its first user's is taken, and the item made again */
		j->len = data ? e->len : j->ctx->fs->nodesize;
		j->len_bad = false;
		report_problem(j->ctx, PR_EXTENT_TYPE, "extent %" PRIu64 ": its item's length is refused, its users' is %"
			       PRIu64, bytenr, j->len);
		refs_repair_replace(j->ctx, j->unit);
	}
	if (!j->have || bytenr != j->bytenr) {
		/* tree blocks without an extent item are reported by the extents phase */
		if (!data || j->not_alloc_reported == bytenr + 1)
			return 0;
		j->not_alloc_reported = bytenr + 1;
		if (j->have && bytenr < j->bytenr + j->len)
			refs_repair_unfixable(j->ctx, j->unit);
		/* an extent item can only be made inside a data block group */
		else if (!data_chunk_holds(j->ctx->fs, bytenr, e->len))
			refs_repair_unfixable(j->ctx, j->unit);
		if (j->have && bytenr < j->bytenr + j->len)
			report_problem(j->ctx, PR_FILE_EXTENT_BAD_RANGE, "tree %" PRIu64 " inode %" PRIu64 ": disk bytenr %"
				       PRIu64 " is inside data extent %" PRIu64 "+%" PRIu64, root, where, bytenr, j->bytenr,
				       j->len);
		else
			report_problem(j->ctx, PR_DATA_EXTENT_NOT_ALLOCATED, "tree %" PRIu64 " inode %" PRIu64
				       ": disk bytenr %" PRIu64 "+%" PRIu32 " has no extent item", root, where, bytenr,
				       e->len);
		/* (the file-extent-bytenr class pairs it with an unused ref of the same file; a user
		 * through a shared leaf has no offset to pair by) */
		struct bytenr_fix f = { root, where, e->r.type == BTRFS_EXTENT_DATA_REF_KEY ? e->r.c : BYTENR_FIX_ANY,
					bytenr, e->len, 0, 0 };
		int ret = repair_note_bytenr(j->ctx, &f);
		/* outside every data chunk no extent item can be made for it: a hole, unless pointed back */
		if (!ret && !(j->have && bytenr < j->bytenr + j->len) && !data_chunk_holds(j->ctx->fs, bytenr, e->len))
			ret = repair_note_hole(j->ctx, &f);
		return ret;
	}
	/* users of the other kind than the item's flags say; flags of no (or both)
	 * kinds the repair replaces from the users (check/refs_repair.c) */
	/* an extent item used by a tree but flagged data, where the item's key (a
	 * metadata item, its level known) or its chunk (one that holds no data)
	 * says tree block: the flags lie */
	bool tree_flags_lie = !data && !(j->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) &&
			      (j->level || !data_chunk_holds(j->ctx->fs, bytenr, j->len));

	if ((extent_kind_known(j->flags) && !(data && extent_flags_lie(j->flags, j->len, j->ctx->fs->nodesize)) &&
	     !tree_flags_lie &&
	     ((data && !(j->flags & BTRFS_EXTENT_FLAG_DATA)) || (!data && !(j->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK)))) ||
	    (data && e->len != clamp32(j->len)))
		refs_repair_unfixable(j->ctx, j->unit);
	if (data && !(j->flags & BTRFS_EXTENT_FLAG_DATA))
		report_problem(j->ctx, PR_EXTENT_TYPE, "tree %" PRIu64 " inode %" PRIu64
			       ": file extent points at tree-block extent %" PRIu64, root, where, bytenr);
	else if (!data && !(j->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK)) {
		report_problem(j->ctx, PR_EXTENT_TYPE, "tree %" PRIu64 ": block %" PRIu64 " points at data extent %"
			       PRIu64, root, where, bytenr);
		if (tree_flags_lie)
			refs_repair_replace(j->ctx, j->unit);
	}
	else if (data && e->len != clamp32(j->len)) {
		report_problem(j->ctx, PR_FILE_EXTENT_BAD_RANGE, "tree %" PRIu64 " inode %" PRIu64 ": disk length %"
			       PRIu32 ", the extent item's %" PRIu64, root, where, e->len, j->len);
		/* its reference is the item's: the file extent takes the item's length (file-extent-bytenr) */
		struct bytenr_fix f = { root, where, e->r.type == BTRFS_EXTENT_DATA_REF_KEY ? e->r.c : BYTENR_FIX_ANY,
					bytenr, j->len, 2, 0 };
		int ret = repair_note_bytenr(j->ctx, &f);
		if (ret)
			return ret;
	}
	/* the kernel finds a skinny item by the level in its key */
	else if (!data && j->level && e->len + 1 != j->level) {
		report_problem(j->ctx, PR_EXTENT_LEVEL, "tree %" PRIu64 ": block %" PRIu64 " of level %" PRIu32 ", its extent "
			       "item says level %u", root, bytenr, e->len, j->level - 1);
		refs_repair_replace(j->ctx, j->unit);
	}
	else if (!data)
		check_unshared_flag(j, root, bytenr);
	if ((e->r.flags & REF_NEEDS_CSUM) && !j->covered) {
		int ret = add_need(j, e->need[0], e->need[1]);
		return ret ? ret : add_need(j, e->need[2], e->need[3]);
	}
	if ((e->r.flags & REF_NO_CSUM) && j->some_csum)
		return check_no_csum(j, e, root, where);
	return 0;
}

static void describe(char *buf, size_t n, const struct ref_rec *r)
{
	switch (r->type) {
	case BTRFS_EXTENT_DATA_REF_KEY:
		snprintf(buf, n, "data ref root %" PRIu64 " inode %" PRIu64 " offset %" PRIu64, r->a, r->b, r->c);
		break;
	case BTRFS_SHARED_BLOCK_REF_KEY:
	case BTRFS_SHARED_DATA_REF_KEY:
		snprintf(buf, n, "%s parent %" PRIu64, ref_type_name(r->type), r->a);
		break;
	default:
		snprintf(buf, n, "%s root %" PRIu64, ref_type_name(r->type), r->a);
	}
}

/* Hand a group to the repair's view of the join (check/refs_repair.c). */
static int note_for_repair(struct join_state *j, const struct recjoin_group *g)
{
	const struct exp_rec *l = g->nleft ? g->left : NULL;
	const struct ref_rec *r = g->nright ? g->right : NULL, *any = l ? &l->r : r;
	bool keyed_data = any->type == BTRFS_EXTENT_DATA_REF_KEY;
	struct refs_group_view v = {
		.bytenr = any->bytenr, .type = any->type, .a = any->a,
		/* b and c of the other types say where a reference was seen */
		.b = keyed_data ? any->b : 0, .c = keyed_data ? any->c : 0,
		.expected = sum_expected(l, g->nleft), .declared = sum_declared(r, g->nright),
		.has_expected = g->nleft > 0, .has_declared = g->nright > 0, .data_len = l ? l->len : 0,
	};

	if (l && (any->type == BTRFS_TREE_BLOCK_REF_KEY || any->type == BTRFS_SHARED_BLOCK_REF_KEY)) {
		/* (a tree never shared has none, whatever the extent tree says: check_unshared_flag) */
		v.full_backref = holder_full_backref(j->ctx, any->bytenr) &&
				 !(any->type == BTRFS_TREE_BLOCK_REF_KEY && key_tree_never_shared(any->a));
		v.level = l->len;
		v.generation = l->r.c;
		v.data_len = 0;
	}
	if (any->type == 0) {
		v.item_rewrite = r->flags & EXTENT_REWRITE;
		v.item_len = r->a;
		v.item_flags = r->b;
		v.item_refs = r->c;
	}
	return refs_repair_group(j->ctx, &j->unit, &v);
}

static int join_group(const struct recjoin_group *g, void *arg)
{
	struct join_state *j = arg;
	struct check_ctx *ctx = j->ctx;
	/* a side's pointer is stale when it has no records */
	const struct exp_rec *l = g->nleft ? g->left : NULL;
	const struct ref_rec *r = g->nright ? g->right : NULL;
	const struct ref_rec *any = l ? &l->r : r;
	char what[160];
	int ret;

	if (ctx->opts->repair && !j->incomplete && (ret = note_for_repair(j, g)) < 0)
		return ret;
	if (any->type == 0) {
		if ((ret = finish_join_extent(j)) < 0)
			return ret;
		j->have = true;
		j->bytenr = r->bytenr;
		j->len = r->a;
		j->len_bad = r->flags & EXTENT_LEN_BAD;
		j->flags = r->b;
		j->level = r->pad;
		j->covered = r->flags & EXTENT_CSUMMED;
		j->some_csum = r->flags & EXTENT_HAS_CSUM;
		return 0;
	}
	if (j->have && any->bytenr >= j->bytenr + j->len && !(j->len_bad && any->bytenr == j->bytenr) &&
	    (ret = finish_join_extent(j)) < 0)
		return ret;
	for (size_t i = 0; i < g->nleft; i++)
		if ((ret = check_user(j, &l[i])) < 0)
			return ret;
	/* what: described only for a report (formatting every group costs) */
	if (any->type == BTRFS_EXTENT_OWNER_REF_KEY) {
		if (!(ctx->fs->incompat & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA) || !j->have || j->bytenr != any->bytenr ||
		    !(j->flags & BTRFS_EXTENT_FLAG_DATA) || g->nright > 1) {
			describe(what, sizeof(what), any);
			report_problem(ctx, PR_EXTENT_OWNER_REF, "extent %" PRIu64 ": %s", any->bytenr, what);
		}
		return 0;
	}
	switch (g->kind) {
	case RECJOIN_LEFT_ONLY:
		if (j->have && j->bytenr == any->bytenr) {
			uint64_t root, where;
			user_of(any, &root, &where);
			describe(what, sizeof(what), any);
			report_problem(ctx, PR_EXTENT_REF_MISSING, "extent %" PRIu64 ": no %s (used by %s %" PRIu64
				       " in tree %" PRIu64 ")", any->bytenr, what,
				       any->type == BTRFS_TREE_BLOCK_REF_KEY || any->type == BTRFS_SHARED_BLOCK_REF_KEY
					       ? "block" : "inode", where, root);
		}
		break;
	case RECJOIN_RIGHT_ONLY:
		if (j->incomplete)
			break;
		/* a tree block no tree uses is reported by the extents phase */
		if (j->have && j->bytenr == any->bytenr && (j->flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) &&
		    ebitmap_test(ctx->visited, any->bytenr, ctx->fs->nodesize) != EBITMAP_ALL)
			break;
		describe(what, sizeof(what), any);
		report_problem(ctx, PR_EXTENT_REF_UNUSED, "extent %" PRIu64 ": %s (count %" PRIu64 ") has no user",
			       any->bytenr, what, sum_declared(r, g->nright));
		if (any->type == BTRFS_EXTENT_DATA_REF_KEY && j->have && j->bytenr == any->bytenr) {
			struct bytenr_fix f = { any->a, any->b, any->c, any->bytenr, j->len, 1, 0 };
			if ((ret = repair_note_bytenr(ctx, &f)) < 0)
				return ret;
		}
		break;
	case RECJOIN_BOTH: {
		uint64_t want = sum_expected(l, g->nleft), have = sum_declared(r, g->nright);
		if (want != have && !(j->incomplete && want < have)) {
			describe(what, sizeof(what), any);
			report_problem(ctx, PR_EXTENT_REF_COUNT, "extent %" PRIu64 ": %s counts %" PRIu64 ", %" PRIu64
				       " user(s) found", any->bytenr, what, have, want);
		}
		break;
	}
	}
	return 0;
}

static int join_refs(struct check_ctx *ctx, struct extent_pass *p)
{
	struct refs_state *st = ctx->refs;
	struct join_state j = {
		.ctx = ctx,
		.incomplete = ctx->counts[PR_TREE_BLOCK_UNREADABLE] || ctx->counts[PR_TREE_ROOT_UNREADABLE],
	};
	static const uint64_t rebuilt[] = REBUILT_TREES;
	struct recjoin join = { .left = st->expected, .right_next = declared_next, .right_arg = p,
				.right_size = sizeof(struct ref_rec), .cmp = ref_cmp, .cmp_left = ref_cmp,
				.cmp_right = ref_cmp, .group = join_group, .arg = &j };
	int ret;

	/* rebuilding the extent tree, what the trees it replaces lack does not matter */
	if (ctx->infer_full_backref)
		j.incomplete = !check_unreadable_only_in(ctx, rebuilt, REBUILT_TREES_COUNT);
	p->incomplete = &j.incomplete;

	ret = recjoin_run(&join);
	if (ret >= 0)
		ret = finish_join_extent(&j);
	if (ret >= 0)
		ret = refs_repair_finish(ctx, &j.unit, j.incomplete);
	else
		refs_repair_finish(ctx, &j.unit, true);
	free(j.need);
	return ret < 0 ? ret : 0;
}

static void add_sort_stats(struct check_ctx *ctx, const struct recsort *rs)
{
	struct recsort_stats s;

	recsort_get_stats(rs, &s);
	ctx->stats.ref_records += s.records;
	ctx->stats.spilled_bytes += s.spilled_bytes;
	ctx->stats.sort_peak_memory += s.peak_memory;
}

int check_refs(struct check_ctx *ctx)
{
	static const struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 };
	struct extent_pass p = { .ctx = ctx };
	struct refs_state *st;
	const char *env;
	int ret;

	if (!ctx->fs->extent_root.bytenr || !ctx->visited)
		return 0;
	/* the tree walk found nothing at all (every root unreadable): start empty */
	if (!ctx->refs && (ret = refs_start(ctx)) < 0)
		goto out;
	st = p.st = ctx->refs;
	p.max_recs = st->budget / sizeof(struct ref_rec);
	if ((env = getenv("BTK_CHECK_EXTENT_RECORDS"))) /* tests: sort small extents on the side too */
		p.max_recs = strtoull(env, NULL, 10);
	progress_set_total(ctx->progress, st->extent_leaf_bytes);
	if ((ret = recsort_finish(st->expected)) < 0)
		goto out;
	if (ctx->fs->csum_root.bytenr && (ret = csum_cursor_create(ctx, &p.csums)) < 0)
		goto out;
	tree_iter_init(&p.it, ctx->fs, &ctx->fs->extent_root, &min, &max);
	ret = join_refs(ctx, &p);
	tree_iter_release(&p.it);
	if (!ret && p.csums)
		ret = csum_cursor_finish(p.csums);
	add_sort_stats(ctx, st->expected);
	ctx->stats.ref_records += p.records;
out:
	if (cli_cancelled())
		ret = 0;
	free(p.buf);
	recsort_destroy(p.big);
	recsort_destroy(p.draining);
	csum_cursor_destroy(p.csums);
	refs_free(ctx);
	return ret;
}

/* Registered with the tree-block walk (tree_observers.c). */
const struct tree_observer refs_tree_observer = { .name = "references", .block = refs_observe_block,
						  .gap = refs_note_gap };
