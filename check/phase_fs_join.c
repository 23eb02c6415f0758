// SPDX-License-Identifier: GPL-2.0-only
/* The name joins of the filesystem trees, after every tree was walked:
 *   (root, dir, index):       inode refs/extrefs  <-> DIR_INDEX entries
 *   (root, dir, hash, name):  inode refs/extrefs  <-> DIR_ITEM entries
 *   (root, ino):              nameless inodes     <-> ORPHAN_ITEMs
 * Each sorter holds both sides; groups of equal keys are compared. The
 * other end of an unmatched name is looked up in its tree (error path only)
 * to tell a dangling entry from a missing ref. Snapshots checked as deltas
 * (snap_plan.h) sort by (lineage, ..., seq) in place of root: the versions
 * of a group in a lineage's members are adjacent, and each member's is the
 * one before with its dirty inodes' records replaced (struct versions). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check/phase_fs.h"
#include "check/repair_notes.h"

#define CMP(x, y) do { if ((x) != (y)) return (x) < (y) ? -1 : 1; } while (0)

int link_cmp_index(const void *a, const void *b, void *arg)
{
	const struct link_rec *x = a, *y = b;

	(void)arg;
	CMP(x->lineage, y->lineage);
	CMP(x->dir, y->dir);
	CMP(x->key, y->key);
	CMP(x->seq, y->seq);
	CMP(x->kind, y->kind);
	CMP(x->child, y->child);
	return 0;
}

int link_cmp_hash(const void *a, const void *b, void *arg)
{
	const struct link_rec *x = a, *y = b;

	(void)arg;
	CMP(x->lineage, y->lineage);
	CMP(x->dir, y->dir);
	CMP(x->key, y->key);
	CMP(x->seq, y->seq);
	CMP(x->fp, y->fp);
	CMP(x->name_len, y->name_len);
	CMP(x->kind, y->kind);
	CMP(x->child, y->child);
	return 0;
}

int link_cmp_orphan(const void *a, const void *b, void *arg)
{
	const struct link_rec *x = a, *y = b;

	(void)arg;
	CMP(x->lineage, y->lineage);
	CMP(x->key, y->key);
	CMP(x->seq, y->seq);
	CMP(x->kind, y->kind);
	return 0;
}

static int same_index(const void *a, const void *b)
{
	const struct link_rec *x = a, *y = b;
	return x->lineage == y->lineage && x->dir == y->dir && x->key == y->key && x->seq == y->seq;
}

static int same_inode(const void *a, const void *b)
{
	const struct link_rec *x = a, *y = b;
	return x->lineage == y->lineage && x->key == y->key && x->seq == y->seq;
}

#define JOIN_LOOKUPS_MAX 8

struct join {
	struct check_ctx *ctx;
	const struct snap_plan *plan;
	const struct fs_roots *roots;
	const struct fs_lost *lost;   /* unreadable key ranges: what they may hold is not judged */
	uint64_t done;                /* bytes of records joined, progress from the start of the phase */
	/* the inodes a judgment looked up (its verdict holds while they are unchanged) */
	uint64_t looked[JOIN_LOOKUPS_MAX];
	unsigned nlooked;             /* past JOIN_LOOKUPS_MAX: judged again in every member */
};

/* 1 when inode ino of root exists (and is a directory, if want_dir), else 0. */
static void note_lookup(struct join *j, uint64_t ino)
{
	if (j->nlooked < JOIN_LOOKUPS_MAX)
		j->looked[j->nlooked] = ino;
	if (j->nlooked <= JOIN_LOOKUPS_MAX)
		j->nlooked++;
}

static int inode_exists(struct join *j, uint64_t root, uint64_t ino, bool want_dir)
{
	uint32_t mode = 0, nlink = 0;
	int ret = fs_lookup_inode(j->ctx, fs_roots_find(j->roots, root), ino, &mode, &nlink);

	note_lookup(j, ino);
	if (ret < 0)
		return 1;   /* unreadable: do not pile a second verdict on it */
	return ret == 1 && (!want_dir || S_ISDIR(mode));
}

static bool same_name_rec(const struct link_rec *a, const struct link_rec *b)
{
	return a->fp == b->fp && a->name_len == b->name_len;
}

/* A ref and the entry that carries its name: location and type. */
static void judge_pair(struct join *j, const struct link_rec *ref, const struct link_rec *ent, const char *what)
{
	if (ref->flags & LINK_F_NO_INODE) {
		if (!fs_lost_key(j->lost, ref->root, ref->child, BTRFS_INODE_ITEM_KEY, 0))
			report_problem(j->ctx, PR_DIR_ENTRY_DANGLING, "root %" PRIu64 " dir %" PRIu64 ": %s (key %"
				       PRIu64 ") names inode %" PRIu64 ", which has no inode item", ent->root, ent->dir,
				       what, ent->key, ent->child);
	} else if (ref->child != ent->child || !same_name_rec(ref, ent)) {
		report_problem(j->ctx, PR_DIR_ITEM_INDEX_MISMATCH, "root %" PRIu64 " dir %" PRIu64 ": %s (key %"
			       PRIu64 ") names inode %" PRIu64 ", the ref of inode %" PRIu64 " %s", ref->root, ref->dir,
			       what, ent->key, ent->child, ref->child,
			       same_name_rec(ref, ent) ? "has the same name" : "has another name");
		repair_note_name(j->ctx, PR_DIR_ITEM_INDEX_MISMATCH, ref->root, ref->dir, ref->child);
		if (ent->child != ref->child)
			repair_note_name(j->ctx, PR_DIR_ITEM_INDEX_MISMATCH, ent->root, ent->dir, ent->child);
	} else if (ref->type != ent->type && ref->type != BTRFS_FT_UNKNOWN) {
		report_problem(j->ctx, PR_DIR_ENTRY_TYPE, "root %" PRIu64 " dir %" PRIu64 ": %s for inode %" PRIu64
			       " has type %u, the inode's mode says %u", ent->root, ent->dir, what, ent->child,
			       ent->type, ref->type);
		repair_note_name(j->ctx, PR_DIR_ENTRY_TYPE, ent->root, ent->dir, ent->child);
	}
	if (ref->child != ent->child && !inode_exists(j, ent->root, ent->child, false))
		report_problem(j->ctx, PR_DIR_ENTRY_DANGLING, "root %" PRIu64 " dir %" PRIu64 ": %s (key %" PRIu64
			       ") names inode %" PRIu64 ", which does not exist", ent->root, ent->dir, what, ent->key,
			       ent->child);
}

static void judge_lone_ref(struct join *j, const struct link_rec *ref, enum link_kind entry_kind, const char *what)
{
	if (fs_lost_key(j->lost, ref->root, ref->dir, entry_kind == LINK_DIR_INDEX ? BTRFS_DIR_INDEX_KEY :
			BTRFS_DIR_ITEM_KEY, ref->key))
		return;   /* the entry would be in an unreadable block */
	if (!inode_exists(j, ref->root, ref->dir, true)) {
		/* reported once, from the index join */
		if (entry_kind == LINK_DIR_INDEX) {
			report_problem(j->ctx, PR_DIR_PARENT_MISSING, "root %" PRIu64 " inode %" PRIu64 ": parent %"
				       PRIu64 " is missing or not a directory", ref->root, ref->child, ref->dir);
			/* a subvolume's top directory is made again when it has no inode item at all */
			if (ref->dir == BTRFS_FIRST_FREE_OBJECTID)
				repair_note_inode_problem(j->ctx, PR_INODE_ITEM_MISSING, ref->root, ref->dir);
			else   /* a garbled parent: the names class drops the name (check/repair_parentless.c) */
				repair_note_name(j->ctx, PR_DIR_PARENT_MISSING, ref->root, ref->dir, ref->child);
		}
		return;
	}
	report_problem(j->ctx, entry_kind == LINK_DIR_INDEX ? PR_DIR_INDEX_MISSING : PR_DIR_ITEM_MISSING,
		       "root %" PRIu64 " inode %" PRIu64 ": name in dir %" PRIu64 " (index %" PRIu64 ") has no %s",
		       ref->root, ref->child, ref->dir, ref->index, what);
	repair_note_name(j->ctx, entry_kind == LINK_DIR_INDEX ? PR_DIR_INDEX_MISSING : PR_DIR_ITEM_MISSING,
			 ref->root, ref->dir, ref->child);
}

static void judge_lone_entry(struct join *j, const struct link_rec *ent, const char *what)
{
	bool exists;

	if (fs_lost_inode(j->lost, ent->root, ent->child))
		return;   /* the inode and its refs may be in an unreadable block */
	exists = inode_exists(j, ent->root, ent->child, false);
	if (exists)
		report_problem(j->ctx, PR_INODE_REF_MISSING, "root %" PRIu64 " dir %" PRIu64 ": %s (key %" PRIu64
			       ") names inode %" PRIu64 ", which has no such ref", ent->root, ent->dir, what, ent->key,
			       ent->child);
	else
		report_problem(j->ctx, PR_DIR_ENTRY_DANGLING, "root %" PRIu64 " dir %" PRIu64 ": %s (key %" PRIu64
			       ") names inode %" PRIu64 ", which does not exist", ent->root, ent->dir, what, ent->key,
			       ent->child);
	repair_note_name(j->ctx, exists ? PR_INODE_REF_MISSING : PR_DIR_ENTRY_DANGLING, ent->root, ent->dir,
			 ent->child);
}

/* A group of one (root, dir, index) or (root, dir, name hash): names from
 * refs on one side, entries on the other, paired by name. One ref and one
 * entry left unpaired are the same name gone wrong, not two lost names. */
static void judge_names(struct join *j, const struct link_rec *g, size_t n, bool more, enum link_kind entry_kind)
{
	const char *what = entry_kind == LINK_DIR_INDEX ? "dir index" : "dir item";
	bool used[FS_GROUP_MAX] = { false };
	const struct link_rec *lref = NULL, *lent = NULL;
	size_t nref = 0, nent = 0;

	if (more)
		report_problem(j->ctx, PR_DIR_ITEM_INDEX_MISMATCH, "root %" PRIu64 " dir %" PRIu64 ": more than %d "
			       "names share %s key %" PRIu64, g->root, g->dir, FS_GROUP_MAX, what, g->key);
	for (size_t r = 0; r < n; r++) {
		if (g[r].kind != LINK_REF)
			continue;
		for (size_t e = 0; e < n && !used[r]; e++)
			if (g[e].kind != LINK_REF && !used[e] && same_name_rec(&g[r], &g[e])) {
				used[r] = used[e] = true;
				judge_pair(j, &g[r], &g[e], what);
			}
	}
	for (size_t i = 0; i < n; i++) {
		if (used[i])
			continue;
		if (g[i].kind == LINK_REF) {
			lref = &g[i];
			nref++;
		} else {
			lent = &g[i];
			nent++;
		}
	}
	if (nref == 1 && nent == 1) {
		judge_pair(j, lref, lent, what);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		if (used[i])
			continue;
		if (g[i].kind == LINK_REF)
			judge_lone_ref(j, &g[i], entry_kind, what);
		else
			judge_lone_entry(j, &g[i], what);
	}
}

static void judge_orphan(struct join *j, const struct link_rec *g, size_t n)
{
	bool need = false, orphan = false;
	uint32_t mode, nlink;
	int ret;

	for (size_t i = 0; i < n; i++) {
		need |= g[i].kind == LINK_NEED_ORPHAN;
		orphan |= g[i].kind == LINK_ORPHAN;
	}
	if (need && !orphan && !fs_lost_key(j->lost, g->root, BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, g->key)) {
		report_problem(j->ctx, PR_INODE_UNREACHABLE, "root %" PRIu64 " inode %" PRIu64
			       ": no names, nlink 0 and no orphan item", g->root, g->key);
		repair_note_inode_problem(j->ctx, PR_INODE_UNREACHABLE, g->root, g->key);
	}
	if (need || !orphan)
		return;
	ret = fs_lookup_inode(j->ctx, fs_roots_find(j->roots, g->root), g->key, &mode, &nlink);
	note_lookup(j, g->key);
	if (ret == 0)
		report_problem(j->ctx, PR_ORPHAN_ITEM_BAD, "root %" PRIu64 ": orphan item for inode %" PRIu64
			       ", which does not exist", g->root, g->key);
	else if (ret == 1)
		report_problem(j->ctx, PR_ORPHAN_ITEM_BAD, "root %" PRIu64 ": orphan item for inode %" PRIu64
			       ", which still has names (nlink %u)", g->root, g->key, nlink);
	if (ret == 0 || ret == 1)
		repair_note_inode_problem(j->ctx, PR_ORPHAN_ITEM_BAD, g->root, g->key);
}

enum join_kind { JOIN_INDEX, JOIN_HASH, JOIN_ORPHAN };

static void judge_group(struct join *j, const struct link_rec *recs, size_t n, bool more, enum join_kind kind)
{
	if (kind == JOIN_ORPHAN)
		judge_orphan(j, recs, n);
	else
		judge_names(j, recs, n, more, kind == JOIN_INDEX ? LINK_DIR_INDEX : LINK_DIR_ITEM);
}

/* The versions of one group in the members of a lineage: the last one
 * judged (complete), and its problems, held until the next version says
 * how many members share them. */
struct versions {
	bool have;
	struct link_rec last[FS_GROUP_MAX + 1];
	size_t n;
	struct snap_held *held;
	size_t nheld, capheld;
	uint64_t looked[JOIN_LOOKUPS_MAX];   /* what judging the last version looked up */
	unsigned nlooked;
	bool more;
	int err;
};

static bool hold_version_problem(void *arg, enum problem_code code, const char *detail)
{
	struct versions *v = arg;
	struct snap_lineage l = { .held = v->held, .nheld = v->nheld, .capheld = v->capheld };
	int ret = snap_plan_hold(&l, 0, v->last[0].seq, code, detail);

	v->held = l.held;
	v->nheld = l.nheld;
	v->capheld = l.capheld;
	if (ret && !v->err)
		v->err = ret;
	return ret == 0;
}

/* Report the last version's problems for its member up to member end. */
static void flush_version(struct join *j, struct versions *v, uint32_t end)
{
	const struct snap_lineage *l;

	if (!v->have)
		return;
	l = &j->plan->lin[v->last[0].lineage];
	for (size_t h = 0; h < v->nheld; h++) {
		j->ctx->report_roots = l->ids + v->held[h].seq;
		j->ctx->n_report_roots = end - v->held[h].seq;
		report_problem(j->ctx, v->held[h].code, "%s", v->held[h].detail);
		free(v->held[h].detail);
	}
	j->ctx->report_roots = NULL;
	j->ctx->n_report_roots = 0;
	v->nheld = 0;
}

static bool same_versioned_group(const struct link_rec *a, const struct link_rec *b, enum join_kind kind)
{
	return a->lineage == b->lineage && a->key == b->key && (kind == JOIN_ORPHAN || a->dir == b->dir);
}

/* The same record, but for the root and lineage fields. */
static bool same_record(const struct link_rec *a, const struct link_rec *b)
{
	return a->kind == b->kind && a->dir == b->dir && a->key == b->key && a->fp == b->fp && a->child == b->child &&
	       a->index == b->index && a->name_len == b->name_len && a->type == b->type &&
	       (a->flags & ~LINK_F_GONE) == (b->flags & ~LINK_F_GONE);
}

/* The same records, in any order (at most FS_GROUP_MAX + 1 each). */
static bool same_records(const struct link_rec *a, size_t na, const struct link_rec *b, size_t nb)
{
	bool used[FS_GROUP_MAX + 1] = { false };

	if (na != nb)
		return false;
	for (size_t i = 0; i < na; i++) {
		size_t k = 0;
		while (k < nb && (used[k] || !same_record(&a[i], &b[k])))
			k++;
		if (k == nb)
			return false;
		used[k] = true;
	}
	return true;
}

/* An inode the last version looked up is dirty in member seq. */
static bool looked_dirty(const struct join *j, const struct versions *v, uint32_t seq)
{
	for (unsigned i = 0; i < v->nlooked && i < JOIN_LOOKUPS_MAX; i++)
		if (snap_plan_dirty(j->plan, v->last[0].lineage, seq, v->looked[i]))
			return true;
	return false;
}

/* Judge the last version with its problems held. */
static void judge_last(struct join *j, struct versions *v, enum join_kind kind)
{
	j->nlooked = 0;
	j->ctx->report_hook = hold_version_problem;
	j->ctx->report_hook_arg = v;
	judge_group(j, v->last, v->n, v->more, kind);
	j->ctx->report_hook = NULL;
	j->ctx->report_hook_arg = NULL;
	memcpy(v->looked, j->looked, sizeof(v->looked));
	v->nlooked = j->nlooked;
}

/* The last version's records as member seq's. */
static void set_member(struct versions *v, const struct snap_lineage *l, uint32_t seq)
{
	for (size_t i = 0; i < v->n; i++) {
		v->last[i].root = l->ids[seq];
		v->last[i].seq = seq;
	}
}

/* The last version's verdict holds while the inodes it looked up do not
 * change: judged again, with the same records, in the members before until
 * where one does. */
static void catch_up(struct join *j, struct versions *v, enum join_kind kind, uint32_t until)
{
	while (v->have && v->n && v->nlooked) {
		uint32_t seq = v->last[0].seq, s = seq + 1;
		const struct snap_lineage *l = &j->plan->lin[v->last[0].lineage];
		if (v->nlooked <= JOIN_LOOKUPS_MAX) {
			s = (uint32_t)l->n;
			for (unsigned i = 0; i < v->nlooked; i++) {
				uint32_t d = snap_plan_next_dirty(j->plan, v->last[0].lineage, seq, v->looked[i]);
				s = d < s ? d : s;
			}
		}
		if (s >= until)
			return;
		flush_version(j, v, s);
		set_member(v, l, s);
		judge_last(j, v, kind);
	}
}

/* The group's versions are done: the last one holds to the end of the lineage. */
static void end_versions(struct join *j, struct versions *v, enum join_kind kind)
{
	if (!v->have)
		return;
	catch_up(j, v, kind, (uint32_t)j->plan->lin[v->last[0].lineage].n);
	flush_version(j, v, (uint32_t)j->plan->lin[v->last[0].lineage].n);
	v->have = false;
}

/* One member's version of a group in a lineage of several: the version
 * before it without the records its delta found gone, with those it added. */
static void judge_version(struct join *j, struct versions *v, const struct link_rec *g, size_t n, bool more,
			  enum join_kind kind)
{
	const struct snap_lineage *l = &j->plan->lin[g->lineage];
	bool same_group = v->have && same_versioned_group(&v->last[0], g, kind);
	struct link_rec next[FS_GROUP_MAX + 1];
	size_t m = 0;

	if (same_group) {
		bool gone[FS_GROUP_MAX + 1] = { false };
		catch_up(j, v, kind, g->seq);
		for (size_t i = 0; i < n; i++)
			for (size_t k = 0; (g[i].flags & LINK_F_GONE) && k < v->n; k++)
				if (!gone[k] && same_record(&g[i], &v->last[k])) {
					gone[k] = true;
					break;
				}
		for (size_t k = 0; k < v->n; k++)
			if (!gone[k] && m < FS_GROUP_MAX + 1)
				next[m++] = v->last[k];
	} else {
		end_versions(j, v, kind);
	}
	for (size_t i = 0; i < n; i++)
		if (!(g[i].flags & LINK_F_GONE) && m < FS_GROUP_MAX + 1)
			next[m++] = g[i];
	/* the same records (and what their judgment looked up unchanged): the version before goes on */
	if (same_group && same_records(next, m, v->last, v->n) &&
	    (!v->nlooked || (v->nlooked <= JOIN_LOOKUPS_MAX && !looked_dirty(j, v, g->seq))))
		return;
	if (same_group)
		flush_version(j, v, g->seq);
	v->more = more || m > FS_GROUP_MAX;
	if (m > FS_GROUP_MAX)
		m = FS_GROUP_MAX;
	memcpy(v->last, next, m * sizeof(*next));
	v->n = m;
	v->have = true;
	v->nlooked = 0;
	if (!m) {   /* an empty version: nothing to judge, but it ends the one before */
		v->last[0] = *g;
		return;
	}
	for (size_t i = 0; i < m; i++)
		v->last[i].lineage = g->lineage;
	set_member(v, l, g->seq);
	judge_last(j, v, kind);
}

static int run_join(struct join *j, struct recsort *rs, enum join_kind kind)
{
	static int (*const same[])(const void *, const void *) = { same_index, same_index, same_inode };
	struct versions *v = calloc(1, sizeof(*v));
	struct group_reader g;
	size_t n;
	bool more;
	int ret = v ? recsort_finish(rs) : -ENOMEM;

	if (ret) {
		free(v);
		return ret;
	}
	ret = group_reader_init(&g, rs, same[kind]);
	while (!ret && (ret = group_reader_next(&g, &n, &more)) == 1) {
		const struct link_rec *recs = (const struct link_rec *)g.buf;
		if ((g.records & 1023) < n)   /* about every 1024 records */
			progress_update(j->ctx->progress, j->done + g.records * sizeof(struct link_rec));
		if (j->plan->lin[recs->lineage].n > 1) {
			judge_version(j, v, recs, n, more, kind);
		} else {
			end_versions(j, v, kind);
			judge_group(j, recs, n, more, kind);
		}
		ret = v->err ? v->err : cli_cancelled() ? 1 : 0;
	}
	if (ret >= 0)
		end_versions(j, v, kind);
	for (size_t h = 0; h < v->nheld; h++)
		free(v->held[h].detail);
	free(v->held);
	free(v);
	j->done += g.records * sizeof(struct link_rec);
	progress_update(j->ctx->progress, j->done);
	group_reader_free(&g);
	return ret < 0 ? ret : 0;
}

int fs_join_links(struct check_ctx *ctx, struct fs_walk *w, const struct fs_roots *roots, uint64_t done)
{
	struct join j = { .ctx = ctx, .plan = w->plan, .roots = roots, .lost = w->lost, .done = done };
	int ret;

	if ((ret = run_join(&j, w->by_index, JOIN_INDEX)) ||
	    (ret = run_join(&j, w->by_hash, JOIN_HASH)) ||
	    (ret = run_join(&j, w->orphans, JOIN_ORPHAN)))
		return ret;
	return 0;
}
