// SPDX-License-Identifier: GPL-2.0-only
/* Quota groups (report only): the quota tree's items are sane and agree with
 * each other and with the subvolumes, and each qgroup's referenced and
 * exclusive bytes equal what the extents give.
 *
 * Traditional qgroups: an extent (data extent, or tree block at nodesize)
 * counts toward the referenced bytes of every subvolume that reaches it and
 * toward the exclusive bytes of a subvolume that is the only one; a
 * higher-level group counts it as referenced when any of those subvolumes is
 * below it and as exclusive when all are (qgroups_reach.c finds the
 * subvolumes in bounded memory).
 * Simple quotas: each extent counts once, referenced and exclusive, toward
 * the subvolume that allocated it (the owner reference of a data extent, the
 * header owner of a tree block) and the groups above it, unless it is older
 * than the quota's enable generation.
 * Numbers are not compared while the status says a rescan is running or
 * needed, as the kernel and btrfs check do. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/qgroups.h"
#include "check/repair_notes.h"
#include "check/refs.h"
#include "check/tree_observers.h"
#include "common/messages.h"
#include <btk/item_check.h>
#include <btk/block.h>
#include <btk/extent_scan.h>
#include <btk/recsort.h>
#include <btk/super.h>
#include <btk/tree.h>

#define QGROUP_KNOWN_FLAGS (uint64_t)(BTRFS_QGROUP_STATUS_FLAG_ON | BTRFS_QGROUP_STATUS_FLAG_RESCAN | \
			    BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT | BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE)

/* ---- the table of qgroups ------------------------------------------------ */

/* The group with this id, added (in order) if new; NULL on ENOMEM. The quota
 * tree is sorted by key, so groups almost always arrive in id order. */
static struct qgroup *qgroup_get(struct qgroup_table *t, uint64_t id)
{
	struct qgroup *g = qgroup_find(t, id), *p;
	size_t at = t->n;

	if (g)
		return g;
	if (!(p = qgroups_grow(t->g, t->n, &t->cap, sizeof(*p))))
		return NULL;
	t->g = p;
	while (at && t->g[at - 1].id > id)
		at--;
	memmove(&t->g[at + 1], &t->g[at], (t->n - at) * sizeof(*t->g));
	t->n++;
	t->g[at] = (struct qgroup){ .id = id };
	return &t->g[at];
}

static void qgroup_table_free(struct qgroup_table *t)
{
	for (size_t i = 0; i < t->n; i++)
		free(t->g[i].parents);
	free(t->g);
	free(t->stack);
	free(t->touched);
}

/* ---- the quota status ---------------------------------------------------- */

struct quota_status {
	bool present;
	uint64_t version, generation, flags, rescan, enable_gen;
	bool simple;  /* simple quotas (squota) */
	bool verify;  /* the numbers are meant to be exact now */
};

/* Read the status item; with `report`, say what is wrong with it. 0 or -errno
 * for an operational error (an unreadable quota tree is a reported problem). */
static int read_status(struct check_ctx *ctx, struct quota_status *qs, bool report)
{
	struct fs_info *fs = ctx->fs;
	struct btrfs_key key = { 0, BTRFS_QGROUP_STATUS_KEY, 0 };
	uint8_t buf[sizeof(struct btrfs_qgroup_status_item)] = { 0 };
	uint32_t size = sizeof(buf);
	bool incompat = fs->incompat & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA;
	uint64_t gen = super_generation(fs_super(fs));
	int ret = tree_lookup(fs, &fs->quota_root, &key, buf, &size);
	struct item_view v = item_view_copied(buf, sizeof(buf), size);
	bool v1, v2;

	memset(qs, 0, sizeof(*qs));
	if (ret == -ENOMEM)
		return ret;
	if (ret) {
		if (report)
			report_problem(ctx, ret == -ENOENT ? PR_QGROUP_ITEM_BAD : PR_TREE_BLOCK_UNREADABLE,
				       "quota tree: no readable qgroup status item%s%s", ret == -ENOENT ? "" : ": ",
				       ret == -ENOENT ? "" : btk_error_msg());
		return 0;
	}
	qs->present = true;
	qs->version = qgroup_status_version_in(&v);
	qs->generation = qgroup_status_generation_in(&v);
	qs->flags = qgroup_status_flags_in(&v);
	qs->rescan = qgroup_status_rescan_in(&v);
	v1 = !v.past_end;  /* rescan ends the old (v1) item */
	qs->enable_gen = qgroup_status_enable_gen_in(&v);
	v2 = !v.past_end;
	qs->simple = incompat || (qs->flags & BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE);
	qs->verify = v1 && qs->version == 1 &&
		     (qs->flags & BTRFS_QGROUP_STATUS_FLAG_ON) &&
		     !(qs->flags & (BTRFS_QGROUP_STATUS_FLAG_RESCAN | BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT));
	if (!report)
		return 0;
	if (!v1 || (qs->simple && !v2))
		report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: the qgroup status item is %u bytes", size);
	if (qs->version != 1)
		report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: qgroup status version %" PRIu64 " (expected 1)",
			       qs->version);
	if (qs->flags & ~QGROUP_KNOWN_FLAGS)
		report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: qgroup status has unknown flags %#" PRIx64,
			       qs->flags & ~QGROUP_KNOWN_FLAGS);
	if (incompat != !!(qs->flags & BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE))
		report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: simple-quota mode %s in the qgroup status but %s "
			       "in the superblock", incompat ? "off" : "on", incompat ? "on" : "off");
	if (qs->generation != gen)
		report_problem(ctx, PR_QGROUP_INCONSISTENT, "quota tree: qgroup status generation %" PRIu64
			       ", filesystem generation %" PRIu64 ": the kernel will mark qgroups inconsistent",
			       qs->generation, gen);
	if (qs->simple && qs->enable_gen > gen)
		report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: simple quotas enabled at generation %" PRIu64
			       ", after the filesystem generation %" PRIu64, qs->enable_gen, gen);
	if (qs->flags & BTRFS_QGROUP_STATUS_FLAG_RESCAN)
		report_problem(ctx, PR_QGROUP_INCONSISTENT, "quota tree: a qgroup rescan is in progress (at %" PRIu64
			       "): qgroup numbers not verified", qs->rescan);
	else if (qs->flags & BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT)
		report_problem(ctx, PR_QGROUP_INCONSISTENT, "quota tree: qgroup numbers are marked inconsistent, a "
			       "rescan is needed (btrfs quota rescan): not verified");
	return 0;
}

/* ---- the walk ------------------------------------------------------------ */

static int add_owner_bytes(struct qgroup_state *st, uint64_t owner, uint64_t bytes)
{
	size_t lo = 0, hi = st->nowners;
	uint64_t *p;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (st->owner_bytes[2 * mid] == owner) {
			st->owner_bytes[2 * mid + 1] += bytes;
			return 0;
		}
		if (st->owner_bytes[2 * mid] < owner)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!(p = qgroups_grow(st->owner_bytes, st->nowners, &st->owners_cap, 2 * sizeof(*p))))
		return -ENOMEM;
	st->owner_bytes = p;
	memmove(&st->owner_bytes[2 * lo + 2], &st->owner_bytes[2 * lo], 2 * (st->nowners - lo) * sizeof(uint64_t));
	st->owner_bytes[2 * lo] = owner;
	st->owner_bytes[2 * lo + 1] = bytes;
	st->nowners++;
	return 0;
}

/* Decide once, at the first block, what the walk must collect. */
static int qgroups_configure(struct check_ctx *ctx, struct qgroup_state *st)
{
	struct quota_status qs;
	int ret;

	st->configured = true;
	if (!ctx->fs->quota_root.bytenr)
		return 0;
	if ((ret = read_status(ctx, &qs, false)) < 0)
		return ret;
	if (!qs.verify)
		return 0;
	st->collect_owners = qs.simple;
	st->collect_reach = !qs.simple;
	st->enable_gen = qs.enable_gen;
	return 0;
}

int qgroups_observe_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
			  bool first)
{
	struct qgroup_state *st = ctx->qgroups;
	int ret = 0;

	if (!ctx->fs->quota_root.bytenr || root->objectid == BTRFS_TREE_LOG_OBJECTID)
		return 0;
	if (!st) {
		if (!(st = ctx->qgroups = calloc(1, sizeof(*st))))
			return -ENOMEM;
		if ((ret = qgroups_configure(ctx, st)) < 0)
			return ret;
	}
	if (st->error)
		return 0;
	if (st->collect_reach)
		ret = qgroups_reach_observe(ctx, st, root, b, first);
	else if (st->collect_owners && first && qgroup_is_fstree(block_owner(b)) &&
		 block_generation(b) >= st->enable_gen)
		ret = add_owner_bytes(st, block_owner(b), ctx->fs->nodesize);
	/* out of memory or disk for the records: the numbers are not verified, the rest goes on */
	if (ret == -ENOMEM || ret == -ENOSPC) {
		st->error = ret;
		ret = 0;
	}
	return ret;
}

void qgroup_state_free(struct check_ctx *ctx)
{
	struct qgroup_state *st = ctx->qgroups;

	if (!st)
		return;
	recsort_destroy(st->edges);
	free(st->seeds);
	free(st->owner_bytes);
	free(st);
	ctx->qgroups = NULL;
}

/* ---- the quota tree ------------------------------------------------------ */

static void fmt_qgroup(char *buf, size_t n, uint64_t id)
{
	snprintf(buf, n, "%" PRIu64 "/%" PRIu64, QGROUP_LEVEL(id), QGROUP_SUBVOL(id));
}

struct relation {
	uint64_t a, b; /* key objectid, key offset */
};

static int relation_cmp(const void *x, const void *y)
{
	const struct relation *p = x, *q = y;

	if (p->a != q->a)
		return p->a < q->a ? -1 : 1;
	return (p->b > q->b) - (p->b < q->b);
}

/* Both keys of each relation exist, name existing groups, and go up a level;
 * then the member -> parent links of the table. */
static int link_relations(struct check_ctx *ctx, struct qgroup_table *t, struct relation *rel, size_t n)
{
	char a[48], b[48];
	int ret;

	if (!n)
		return 0; /* rel may be NULL: qsort and bsearch want an array */
	qsort(rel, n, sizeof(*rel), relation_cmp);
	for (size_t i = 0; i < n; i++) {
		struct relation mirror = { rel[i].b, rel[i].a };
		uint64_t member = rel[i].a < rel[i].b ? rel[i].a : rel[i].b, parent = rel[i].a ^ rel[i].b ^ member;
		struct qgroup *gm, *gp;

		fmt_qgroup(a, sizeof(a), rel[i].a);
		fmt_qgroup(b, sizeof(b), rel[i].b);
		if (!bsearch(&mirror, rel, n, sizeof(*rel), relation_cmp))
			report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: relation item (%s, %s) has no mirror (%s, %s)",
				       a, b, b, a);
		if (rel[i].a != member)
			continue; /* each relation once, from its member key (as the kernel reads them) */
		gm = qgroup_find(t, member);
		gp = qgroup_find(t, parent);
		if (QGROUP_LEVEL(parent) <= QGROUP_LEVEL(member)) {
			report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: relation between %s and %s does not go up a "
				       "level", a, b);
			continue;
		}
		if (!gm || !gm->has_info || !gp || !gp->has_info) {
			report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: relation %s -> %s names a qgroup without an "
				       "info item (%s)", a, b, !gm || !gm->has_info ? a : b);
			continue;
		}
		if ((ret = qgroups_push(&gm->parents, &gm->nparents, &gm->parents_cap, (uint32_t)(gp - t->g))) < 0)
			return ret;
	}
	return 0;
}

/* Every item of the quota tree into the table; malformed items reported. */
static int read_quota_tree(struct check_ctx *ctx, struct qgroup_table *t)
{
	struct fs_info *fs = ctx->fs;
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, k;
	struct relation *rel = NULL;
	size_t nrel = 0, rel_cap = 0;
	struct item_verdict vd;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	char id[48];
	int ret;

	tree_iter_init(&it, fs, &fs->quota_root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct qgroup *g;

		if (k.type == BTRFS_QGROUP_RELATION_KEY) {
			struct relation *p = qgroups_grow(rel, nrel, &rel_cap, sizeof(*p));
			if (!p) {
				ret = -ENOMEM;
				break;
			}
			rel = p;
			rel[nrel++] = (struct relation){ k.objectid, k.offset };
			continue;
		}
		if (k.type != BTRFS_QGROUP_INFO_KEY && k.type != BTRFS_QGROUP_LIMIT_KEY)
			continue;
		fmt_qgroup(id, sizeof(id), k.offset);
		if (item_check_fs(fs, &k, d, size, &vd) && (vd.fault == ITEM_BAD_KEY || vd.fault == ITEM_TOO_SMALL)) {
			report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: qgroup %s %s item (objectid %" PRIu64 ", %u "
				       "bytes) is malformed", id, k.type == BTRFS_QGROUP_INFO_KEY ? "info" : "limit",
				       k.objectid, size);
			continue;
		}
		if (!(g = qgroup_get(t, k.offset))) {
			ret = -ENOMEM;
			break;
		}
		if (k.type == BTRFS_QGROUP_LIMIT_KEY) {
			g->has_limit = true;
			continue;
		}
		g->has_info = true;
		g->disk_rfer = qgroup_info_rfer(d);
		g->disk_excl = qgroup_info_excl(d);
		if (qgroup_info_generation(d) > super_generation(fs_super(fs)))
			report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: qgroup %s info generation %" PRIu64
				       " is newer than the filesystem (%" PRIu64 ")", id, qgroup_info_generation(d),
				       super_generation(fs_super(fs)));
	}
	tree_iter_release(&it);
	if (ret == 0) {
		for (size_t i = 0; i < t->n; i++) {
			fmt_qgroup(id, sizeof(id), t->g[i].id);
			if (!t->g[i].has_info || !t->g[i].has_limit)
				report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: qgroup %s has a %s item but no %s item",
					       id, t->g[i].has_info ? "info" : "limit", t->g[i].has_info ? "limit" : "info");
		}
		ret = link_relations(ctx, t, rel, nrel);
	} else if (ret != -ENOMEM) {
		report_problem(ctx, PR_TREE_BLOCK_UNREADABLE, "quota tree: %s", btk_error_msg());
		ret = 1; /* the numbers cannot be compared */
	}
	free(rel);
	return ret;
}

/* A subvolume's level-0 qgroup is whole: a limit item or relation without
 * its info item. None at all is not damage: mkfs.btrfs --rootdir --subvol
 * with quotas makes such subvolumes, the kernel leaves them unaccounted. */
static int check_subvolume_qgroups(struct check_ctx *ctx, struct qgroup_table *t)
{
	struct fs_info *fs = ctx->fs;
	struct btrfs_key min = { BTRFS_FS_TREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, 0 },
			 max = { BTRFS_LAST_FREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, (uint64_t)-1 }, k;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	tree_iter_init(&it, fs, &fs->tree_root, &min, &max);
	while ((ret = tree_iter_next(&it, &k, &d, &size)) == 1) {
		struct qgroup *g;
		if (k.type != BTRFS_ROOT_ITEM_KEY || !qgroup_is_fstree(k.objectid))
			continue;
		struct item_view v = item_view_of(d, size);

		/* a deleted subvolume waiting to be cleaned up may have lost its qgroup */
		if (ITEM_VIEW_STRUCT(&v, 0, struct btrfs_root_item) && root_item_refs(d) == 0)
			continue;
		g = qgroup_find(t, k.objectid);
		if (g && !g->has_info)
			report_problem(ctx, PR_QGROUP_ITEM_BAD, "quota tree: subvolume %" PRIu64 " has no qgroup 0/%" PRIu64,
				       k.objectid, k.objectid);
	}
	tree_iter_release(&it);
	return ret == -ENOMEM ? ret : 0; /* an unreadable root tree is reported by the tree phase */
}

/* ---- simple quotas: data extents by owner reference ---------------------- */

/* A data extent owned (simple quotas) by a subvolume since quotas were enabled. */
static int add_owned_extent(void *arg, const struct extent_rec *e)
{
	struct qgroup_state *st = arg;
	struct item_view v = item_view_of(e->item, e->size);
	struct item_view ref = item_view_at(&v, sizeof(struct btrfs_extent_item));
	/* (an owner ref's root id is where other inline refs keep their offset) */
	uint64_t gen = extent_generation_in(&v), owner = inline_ref_offset_in(&ref);
	int ret;

	/* the owner reference sorts first among the inline references */
	if (!e->data || ref.past_end || inline_ref_type_in(&ref) != BTRFS_EXTENT_OWNER_REF_KEY ||
	    gen < st->enable_gen || !qgroup_is_fstree(owner))
		return 0;
	if ((ret = add_owner_bytes(st, owner, e->len)) < 0)
		return ret;
	return cli_cancelled() ? 1 : 0;
}

static int account_simple(struct check_ctx *ctx, struct qgroup_state *st, struct qgroup_table *t)
{
	struct fs_info *fs = ctx->fs;
	int ret = extent_tree_each(fs, &fs->extent_root, 0, (uint64_t)-1, add_owned_extent, st);

	if (ret < 0) {
		if (ret == -ENOMEM)
			return ret;
		report_problem(ctx, PR_TREE_BLOCK_UNREADABLE, "extent tree: %s", btk_error_msg());
		return 1;
	}
	for (size_t i = 0; i < st->nowners; i++)
		if ((ret = qgroup_account(t, &st->owner_bytes[2 * i], 1, st->owner_bytes[2 * i + 1])) < 0)
			return ret;
	return 0;
}

/* ---- the comparison ------------------------------------------------------ */

static int compare(struct check_ctx *ctx, struct qgroup_table *t)
{
	char id[48];
	int ret;

	for (size_t i = 0; i < t->n; i++) {
		const struct qgroup *g = &t->g[i];
		if (!g->has_info)
			continue;
		ctx->stats.qgroups_verified++;
		if (g->rfer == g->disk_rfer && g->excl == g->disk_excl)
			continue;
		fmt_qgroup(id, sizeof(id), g->id);
		report_problem(ctx, PR_QGROUP_MISMATCH, "qgroup %s: referenced %" PRIu64 " (extents give %" PRIu64
			       "), exclusive %" PRIu64 " (extents give %" PRIu64 ")", id, g->disk_rfer, g->rfer,
			       g->disk_excl, g->excl);
		if ((ret = repair_note_qgroup(ctx, g->id, g->rfer, g->excl)) < 0)
			return ret;
	}
	return 0;
}

int check_qgroups(struct check_ctx *ctx)
{
	struct qgroup_state *st = ctx->qgroups;
	struct qgroup_table t = { 0 };
	struct quota_status qs;
	int ret;
	bool unreadable;

	if (!ctx->fs->quota_root.bytenr)
		return 0;
	if ((ret = read_status(ctx, &qs, true)) < 0 || (ret = read_quota_tree(ctx, &t)) < 0)
		goto out;
	unreadable = ret > 0;
	if ((ret = check_subvolume_qgroups(ctx, &t)) < 0)
		goto out;
	if (unreadable || !qs.verify || cli_cancelled()) {
		ret = 0;
		goto out;
	}
	if (!st || st->error || (!st->collect_owners && !st->collect_reach)) {
		msg_info("qgroup numbers not verified: %s", st && st->error ? "out of memory or temporary space" :
			 "the tree walk did not collect them");
		ret = 0;
		goto out;
	}
	if (ctx->counts[PR_TREE_BLOCK_UNREADABLE] || ctx->counts[PR_TREE_ROOT_UNREADABLE]) {
		msg_info("qgroup numbers not verified: some tree blocks are unreadable");
		goto out;
	}
	ret = qs.simple ? account_simple(ctx, st, &t) : qgroups_reach_account(ctx, st, &t);
	if (ret == 0 && !cli_cancelled())
		ret = compare(ctx, &t);
	if (ret > 0)
		ret = 0;
out:
	qgroup_table_free(&t);
	qgroup_state_free(ctx);
	return ret;
}

/* Registered with the tree-block walk (tree_observers.c). */
const struct tree_observer qgroups_tree_observer = { .name = "quota groups", .block = qgroups_observe_block };
