// SPDX-License-Identifier: GPL-2.0-only
/* Tree blocks: every block of every tree once, every copy of it verified,
 * owners checked. A block shared by snapshots is checked the first time it
 * is reached and its subtree is skipped afterwards. The walk also hands the
 * blocks of each live subvolume tree to the filesystem-tree checks
 * (phase_fs.c, in the same depth-first key order), so their leaves are read
 * once: a shared subtree is descended for those checks alone (read again,
 * not verified or counted again). What the other phases collect from each
 * block they get as observers (tree_observers.c). */
#include <inttypes.h>
#include <stdlib.h>

#include "check/check.h"
#include "check/copy_verify.h"
#include "check/key_types.h"
#include "check/owner_refs.h"
#include "check/phase_fs.h"
#include "check/seen_headers.h"
#include "check/shared_reports.h"
#include "check/tree_observers.h"
#include "common/messages.h"
#include <btk/block.h>
#include <btk/ebitmap.h>
#include <btk/names.h>
#include <btk/volumes.h>
#include <btk/walk.h>

struct tree_visit {
	struct check_ctx *ctx;
	const struct tree_root_ptr *root;
	struct copy_verifier *copies;   /* the other copies of each block, on -j threads */
	unsigned follow;                /* the observers that follow this tree (tree_observers.h) */
	/* >= 0: the level of a block checked before, whose subtree is walked
	 * for the fs checks only (until a block at that level or above) */
	int shared_level;
	int feed_err;                   /* a following observer stopped the walk */
	uint64_t shared_bytes;          /* read again for them, for the progress */
	const struct fs_tree_list *trees; /* every tree (NULL: the root tree is unreadable) */
	uint64_t owner_known, owner_missing; /* the last owner looked up in trees */
	struct seen_headers *headers;   /* subvolume-tree blocks checked: skipped unread from other trees */
	uint64_t unread;                /* children skipped so */
	struct shared_reports unreadable; /* unreadable blocks of subvolume trees: reported once each */
};

/* The other copies of a block, verified (copy_verify.c): report the bad ones. */
static void report_copies(void *arg, const struct copy_job *j)
{
	struct check_ctx *ctx = arg;

	for (int m = 0; m < j->ncopies; m++) {
		if (m == j->good)
			continue;
		ctx->stats.copies_verified++;
		if (j->problem[m] == BLOCK_OK || j->problem[m] == BLOCK_DEV_MISSING)
			continue;
		report_problem(ctx, PR_TREE_BLOCK_BAD_COPY, "tree %" PRIu64 ": block %" PRIu64 " copy %d: %s",
			       j->tree, j->bytenr, m + 1, block_problem_name(j->problem[m]));
	}
	/* copies before the good one were already found bad by block_read */
	for (int m = 0; m < j->good; m++)
		report_problem(ctx, PR_TREE_BLOCK_BAD_COPY, "tree %" PRIu64 ": block %" PRIu64 " copy %d is bad",
			       j->tree, j->bytenr, m + 1);
}

/* Hand a block of a followed tree to the observers following it. */
static int feed_block(struct tree_visit *v, const struct tree_block *b, bool shared)
{
	int ret;

	if (!v->follow)
		return 0;
	if (shared) {
		v->shared_bytes += b->len;
		progress_update(v->ctx->progress, v->ctx->stats.tree_bytes + v->shared_bytes);
	}
	ret = tree_observers_tree_block(v->ctx, v->follow, b, shared);
	if (ret < 0)
		v->feed_err = ret;
	return ret;
}

/* The kernel's owner rule for the blocks it reads from a tree: a subvolume
 * tree's blocks (shared with snapshots) are owned by some subvolume tree (5,
 * or from 256 up to where qgroup levels start), the blocks of every other tree
 * but a relocation tree by that tree itself. */
static bool owner_fits(uint64_t tree, uint64_t owner)
{
	if (key_is_subvolume_id(tree))
		return owner == BTRFS_FS_TREE_OBJECTID || (owner >= BTRFS_FIRST_FREE_OBJECTID && owner >> 48 == 0);
	if (tree == BTRFS_TREE_RELOC_OBJECTID)
		return true;
	return owner == tree;
}

/* A subvolume-tree block whose owner is another tree (shared with a
 * snapshot) and that has no full backrefs is still held by that tree (the
 * reference searches it there): the tree must exist. */
static bool owner_tree_missing(struct tree_visit *v, const struct tree_block *b)
{
	uint64_t owner = block_owner(b);

	if (!v->trees || !key_is_subvolume_id(v->root->objectid) || owner == v->root->objectid ||
	    refs_block_full_backref(v->ctx, b->bytenr))
		return false;
	if (owner == v->owner_known || owner == v->owner_missing)
		return owner == v->owner_missing;
	for (size_t i = 0; i < v->trees->count; i++)
		if (v->trees->roots[i].objectid == owner) {
			v->owner_known = owner;
			return false;
		}
	v->owner_missing = owner;
	return true;
}

/* A subvolume-tree block without full backrefs, reached first from a tree
 * other than its owner: the owner must hold it, by a reference of its own or
 * by reaching it (the reference's rule; a block snapshots share is reached
 * first from the tree that made it, whose id is lower than theirs). An
 * extent tree that does not say is not taken for an answer. */
static bool owner_holds_no_ref(struct tree_visit *v, const struct tree_block *b)
{
	struct check_ctx *ctx = v->ctx;
	uint64_t owner = block_owner(b);
	struct btrfs_key first = { 0, 0, 0 };
	struct owner_refs refs;
	int reach = 0;

	if (!key_is_subvolume_id(v->root->objectid) || owner == v->root->objectid || ctx->infer_full_backref ||
	    !v->trees || refs_block_full_backref(ctx, b->bytenr))
		return false;
	if (owner_refs_read(ctx->fs, &ctx->fs->extent_root, b->bytenr, &refs)) {
		btk_error_clear();
		return false;
	}
	if (!refs.found || refs.full || owner_refs_hold(&refs, owner))
		return false;
	if (block_nritems(b))
		block_key(b, 0, &first);
	for (size_t i = 0; i < v->trees->count && !reach; i++)
		if (v->trees->roots[i].objectid == owner)
			reach = tree_reaches_block(ctx->fs, &v->trees->roots[i], &first, block_level(b), b->bytenr);
	if (reach < 0)
		btk_error_clear();
	return reach == 0;
}

/* A tree the tree-salvage class copies blocks of (check/repair_salvage.c). */
static void note_salvaged_tree(struct check_ctx *ctx, uint64_t objectid)
{
	check_tree_set_add(ctx->stats.salvaged_trees, &ctx->stats.n_salvaged_trees,
			   sizeof(ctx->stats.salvaged_trees) / sizeof(ctx->stats.salvaged_trees[0]), objectid);
}

/* A block of another backref revision than the filesystem's (mixed): the
 * kernel takes a block of an older one for shared, and its copy on write
 * would rewrite references that are not there. */
static bool backref_rev_old(const struct fs_info *fs, const struct tree_block *b)
{
	return (fs->incompat & BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF) &&
	       header_flags(b->data) >> BTRFS_BACKREF_REV_SHIFT != BTRFS_MIXED_BACKREF_REV;
}

/* A node pointer names its child's generation, which is never 0: the kernel
 * reads a pointer of generation 0 without checking the child's (the
 * reference calls it a wrong generation). The tree-salvage class copies the
 * child, which gives the pointer the copy's generation (check/repair_salvage.c). */
static void check_ptr_generations(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b)
{
	for (unsigned i = 0; block_level(b) > 0 && i < block_nritems(b); i++)
		if (key_ptr_generation(node_key_ptr(b->data, i)) == 0) {
			report_problem(ctx, PR_TREE_BLOCK_TRANSID, "tree %" PRIu64 ": node %" PRIu64 " slot %u: pointer "
				       "to %" PRIu64 " of generation 0", root->objectid, b->bytenr, i,
				       key_ptr_blockptr(node_key_ptr(b->data, i)));
			note_salvaged_tree(ctx, root->objectid);
		}
}

/* Items of a key type their (global) tree does not hold: the kernel and
 * btrfs check ignore them, btrfs check says so. */
static void check_key_types(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b)
{
	struct btrfs_key k;

	for (unsigned i = 0; block_level(b) == 0 && i < block_nritems(b); i++) {
		block_key(b, i, &k);
		if (key_type_in_tree(root->objectid, k.type) == 0)
			report_problem(ctx, PR_ITEM_FOREIGN_TYPE, "tree %" PRIu64 ": block %" PRIu64 " item (%" PRIu64
				       " %u %" PRIu64 "): a key type this tree does not hold", root->objectid, b->bytenr,
				       k.objectid, k.type, k.offset);
	}
}

/* A block newer than the filesystem (past the next transaction, as btrfs
 * check allows) whose parent pointer agrees, so it verifies: the kernel's
 * readers refuse it. Its tree is noted for the root-generations class. */
static void check_block_generation(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b)
{
	if (block_generation(b) <= ctx->fs->generation + 1 || root->objectid == BTRFS_TREE_LOG_OBJECTID)
		return;
	report_problem(ctx, PR_TREE_BLOCK_GENERATION, "tree %" PRIu64 ": block %" PRIu64 " (level %u) has generation %"
		       PRIu64 ", the filesystem %" PRIu64, root->objectid, b->bytenr, block_level(b), block_generation(b),
		       ctx->fs->generation);
	check_tree_set_add(ctx->stats.future_trees, &ctx->stats.n_future_trees,
			   sizeof(ctx->stats.future_trees) / sizeof(ctx->stats.future_trees[0]), root->objectid);
}

static int visit_block(void *arg, const struct tree_block *b)
{
	struct tree_visit *v = arg;
	struct check_ctx *ctx = v->ctx;
	/* log tree blocks are kept apart: they are not allocated extents (phase_extents.c) */
	struct ebitmap *marks = v->root->objectid == BTRFS_TREE_LOG_OBJECTID ? ctx->log_blocks : ctx->visited;
	int seen, ret;

	if (b->salvaged) {   /* every tree that holds it: the repair copies it in each */
		note_salvaged_tree(ctx, v->root->objectid);
		if ((ret = tree_observers_salvaged(ctx, v->root->objectid, b, false)) < 0)
			return ret;
	}
	if (v->shared_level >= 0 && (int)block_level(b) < v->shared_level)
		return feed_block(v, b, true);   /* below a shared block: already checked */
	v->shared_level = -1;
	seen = ebitmap_test_and_set(marks, b->bytenr, ctx->fs->nodesize);
	if (seen < 0)
		return seen;
	if ((ret = tree_observers_block(ctx, v->root, b, !seen)) < 0)
		return ret;
	if (seen && !v->follow) {
		if (block_level(b) > 0)
			tree_observers_gap(ctx);
		return 1; /* shared with a tree already checked: skip its subtree */
	}
	if (seen) {
		v->shared_level = (int)block_level(b);
		return feed_block(v, b, true);
	}
	ctx->stats.tree_blocks++;
	ctx->stats.tree_bytes += ctx->fs->nodesize;
	if (block_level(b) == 0)
		ctx->stats.items += block_nritems(b);
	/* a salvaged view stands for every copy: none of them verifies */
	if (b->salvaged && (ret = tree_observers_salvaged(ctx, v->root->objectid, b, true)) < 0)
		return ret;
	if (!b->salvaged && (ret = copy_verifier_add(v->copies, v->root->objectid, b)) < 0)
		return ret;
	if (!owner_fits(v->root->objectid, block_owner(b)))
		report_problem(ctx, PR_TREE_BLOCK_OWNER, "tree %" PRIu64 ": block %" PRIu64 " has owner %" PRIu64,
			       v->root->objectid, b->bytenr, block_owner(b));
	else if (owner_tree_missing(v, b))
		report_problem(ctx, PR_TREE_BLOCK_OWNER, "tree %" PRIu64 ": block %" PRIu64 " has owner %" PRIu64
			       ", a tree that does not exist, and no full backrefs", v->root->objectid, b->bytenr,
			       block_owner(b));
	else if (owner_holds_no_ref(v, b))
		report_problem(ctx, PR_TREE_BLOCK_OWNER, "tree %" PRIu64 ": block %" PRIu64 " has owner %" PRIu64
			       ", which neither reaches it nor holds a reference to it, and no full backrefs",
			       v->root->objectid, b->bytenr,
			       block_owner(b));
	else if (backref_rev_old(ctx->fs, b))
		report_problem(ctx, PR_TREE_BLOCK_OWNER, "tree %" PRIu64 ": block %" PRIu64 " has backref revision %u, "
			       "the filesystem's blocks have %u", v->root->objectid, b->bytenr,
			       (unsigned)(header_flags(b->data) >> BTRFS_BACKREF_REV_SHIFT), BTRFS_MIXED_BACKREF_REV);
	check_ptr_generations(ctx, v->root, b);
	check_key_types(ctx, v->root, b);
	check_block_generation(ctx, v->root, b);
	if (!b->salvaged && key_is_subvolume_id(v->root->objectid) && (ret = seen_headers_add(v->headers, b)) < 0)
		return ret;
	progress_update(ctx->progress, ctx->stats.tree_bytes + v->shared_bytes);
	return feed_block(v, b, false);
}

static bool visited(const struct tree_visit *v, uint64_t bytenr)
{
	struct ebitmap *marks = v->root->objectid == BTRFS_TREE_LOG_OBJECTID ? v->ctx->log_blocks : v->ctx->visited;

	return ebitmap_test(marks, bytenr, v->ctx->fs->nodesize) > 0;
}

/* A child already checked from another tree is skipped: not worth reading
 * ahead, unless the fs checks descend into it. */
static bool skipped_child(void *arg, uint64_t bytenr)
{
	struct tree_visit *v = arg;

	return !v->follow && visited(v, bytenr);
}

/* Such a child read again for the fs checks: its other copies were verified. */
static bool reread_child(void *arg, uint64_t bytenr)
{
	struct tree_visit *v = arg;

	return v->follow && visited(v, bytenr);
}

/* A child checked before from another tree whose pointer here promises
 * what it was: skipped without reading it (unless it feeds the fs checks). */
static bool unread_child(void *arg, const struct tree_block *parent, unsigned slot)
{
	struct tree_visit *v = arg;

	if (v->follow || !key_is_subvolume_id(v->root->objectid) || !seen_headers_match(v->headers, parent, slot))
		return false;
	tree_observers_gap(v->ctx);
	v->unread++;
	return true;
}

static void bad_block(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	struct tree_visit *v = arg;

	(void)err;
	if (v->follow)
		tree_observers_tree_bad_block(v->ctx, v->follow, bytenr, level, why);
	if (v->shared_level >= 0 && level < v->shared_level)
		return;   /* below a shared block: reported when the tree that reached it first was walked */
	v->shared_level = -1;
	check_note_unreadable_tree(v->ctx, v->root->objectid);
	/* snapshots may share it: once, naming them, when the walk is done */
	if (key_is_subvolume_id(v->root->objectid) &&
	    !shared_reports_hold(&v->unreadable, PR_TREE_BLOCK_UNREADABLE, bytenr, v->root->objectid, "tree %" PRIu64
				 ": block %" PRIu64 " (level %d): %s", v->root->objectid, bytenr, level, why))
		return;
	report_problem(v->ctx, PR_TREE_BLOCK_UNREADABLE, "tree %" PRIu64 ": block %" PRIu64 " (level %d): %s",
		       v->root->objectid, bytenr, level, why);
}

int check_tree_blocks(struct check_ctx *ctx)
{
	struct fs_info *fs = ctx->fs;
	struct fs_tree_list list;
	struct tree_visit v = { .ctx = ctx };
	struct tree_walk_prefetch pf = { .all_copies = true, .skip = skipped_child, .one_copy = reread_child,
					 .unread = unread_child };
	int ret;

	ctx->visited = ebitmap_create(fs->sectorsize);
	ebitmap_destroy(ctx->log_blocks); /* from a run before a repair */
	ctx->log_blocks = ebitmap_create(fs->sectorsize);
	if (!ctx->visited || !ctx->log_blocks)
		return -ENOMEM;
	if ((ret = tree_observers_walk_begin(ctx)))
		return ret;
	/* a thirty-second of the budget remembers the blocks snapshots share */
	if (!(v.headers = seen_headers_create(ctx->opts->memory_limit / 32)))
		return -ENOMEM;
	/* the subvolume trees' shared blocks are read again for the fs checks */
	progress_set_total(ctx->progress, ctx->metadata_bytes + tree_observers_reread_estimate(ctx));
	ret = copy_verifier_create(fs, ctx->opts->jobs, report_copies, ctx, &v.copies);
	if (ret) {
		seen_headers_destroy(v.headers);
		return ret;
	}
	ret = fs_list_trees(fs, &list);
	v.trees = ret ? NULL : &list;   /* owners 0 never get that far: no tree looked up yet */
	if (ret == -ENOMEM) {
		copy_verifier_destroy(v.copies);
		seen_headers_destroy(v.headers);
		return ret;
	}
	if (ret) {
		check_note_unreadable_tree(ctx, 0);
		report_problem(ctx, PR_TREE_ROOT_UNREADABLE, "root tree: %s", btk_error_msg());
		/* the chunk tree does not hang off the root tree: still walked */
		list.roots = malloc(sizeof(*list.roots));
		if (!list.roots) {
			copy_verifier_destroy(v.copies);
			seen_headers_destroy(v.headers);
			return -ENOMEM;
		}
		list.roots[0] = fs->chunk_root;
		list.count = 1;
		ret = 0;
	}
	for (size_t i = 0; i < list.count && !cli_cancelled(); i++) {
		struct tree_walk_ops ops = { visit_block, bad_block, &v };
		v.root = &list.roots[i];
		v.follow = tree_observers_tree_begin(ctx, v.root);
		v.shared_level = -1;
		v.feed_err = 0;
		ctx->stats.trees++;
		pf.dropped = list.drops && list.drops[i].level ? &list.drops[i] : NULL;
		ctx->walk_drop = pf.dropped;
		ret = tree_walk_prefetching(fs, v.root, &ops, &pf, NULL);
		copy_verifier_drain(v.copies);   /* a tree's copy problems come before the next tree's */
		if (v.follow) {
			int r = tree_observers_tree_end(ctx, v.follow, ret);
			if (r || v.feed_err) {   /* cancelled, or an operational error of the fs checks */
				ret = r == -ECANCELED ? 0 : r;
				break;
			}
		}
		if (ret == -ENOMEM)
			break;
		if (ret) {
			check_note_unreadable_tree(ctx, v.root->objectid);
			report_problem(ctx, PR_TREE_ROOT_UNREADABLE, "tree %" PRIu64 " root %" PRIu64 ": %s",
				       v.root->objectid, v.root->bytenr, btk_error_msg());
			ret = 0;
		}
	}
	ctx->walk_drop = NULL;
	shared_reports_flush(ctx, &v.unreadable);
	fs_tree_list_free(&list);
	copy_verifier_destroy(v.copies);
	msg_verbose("tree blocks: %" PRIu64 " pointers to blocks checked from another tree skipped unread (%" PRIu64
		    " KiB of headers kept)", v.unread, seen_headers_bytes(v.headers) >> 10);
	seen_headers_destroy(v.headers);
	/* the estimate of the bytes read again replaced by the count */
	progress_set_total(ctx->progress, ctx->metadata_bytes + v.shared_bytes);
	return ret;
}
