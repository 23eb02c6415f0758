// SPDX-License-Identifier: GPL-2.0-only
/* Filesystem trees: every subvolume (the top level, every subvolume and
 * snapshot, the data reloc tree) item by item in key order. The items of one
 * inode are contiguous, so per-inode checks keep one inode's state; names
 * (ref <-> dir item <-> dir index) and orphans are joined afterwards through
 * sorters that spill to disk, so memory does not grow with the number of
 * inodes. The items come from the tree-block walk (phase_trees.c): it
 * hands each live subvolume tree's blocks over as it reads them (fs_feed_*),
 * descending for these checks alone into subtrees shared with a tree walked
 * before, so unshared leaves are read once. This phase walks only the trees
 * that walk did not feed (it stopped early), then joins. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check/phase_fs.h"
#include "check/tree_observers.h"
#include "common/messages.h"
#include <btk/block.h>
#include <btk/walk.h>

static int collect_root(void *arg, const struct tree_root_ptr *root, const uint8_t *data, uint32_t size)
{
	struct fs_roots *out = arg;

	(void)size;
	if ((out->n & (out->n - 1)) == 0 && out->n >= 16) {   /* grow at 16, 32, 64... */
		struct tree_root_ptr *v = realloc(out->v, out->n * 2 * sizeof(*v));
		uint64_t *u;
		if (v)
			out->v = v;
		if (!v || !(u = realloc(out->used, out->n * 2 * sizeof(*u))))
			return -ENOMEM;
		out->used = u;
	}
	out->bytes += root_item_bytes_used(data);
	out->used[out->n] = root_item_bytes_used(data);
	out->v[out->n++] = *root;
	return 0;
}

/* The live subvolume trees (and the data relocation tree), in id order.
 * Memory: one entry per subvolume. */
static int collect_roots(struct check_ctx *ctx, struct fs_roots *out)
{
	memset(out, 0, sizeof(*out));
	out->v = malloc(16 * sizeof(*out->v));
	out->used = malloc(16 * sizeof(*out->used));
	if (!out->v || !out->used)
		return -ENOMEM;
	return fs_each_live_subvolume(ctx->fs, &ctx->fs->tree_root, SUBVOLS_DATA_RELOC | SUBVOLS_WALKABLE,
				      collect_root, out);
}

static int tree_end(struct fs_walk *w, const struct tree_root_ptr *root, int ret)
{
	fs_walk_finish(w);
	w->plan->inodes[w->root_idx] = w->inodes - w->root_inodes0;
	if (ret < 0 && ret != -ENOMEM) {
		/* an unreadable root block: the tree-block phase reported it; go on */
		report_problem(w->ctx, PR_TREE_ROOT_UNREADABLE, "root %" PRIu64 ": walk stopped: %s",
			       root->objectid, btk_error_msg());
		ret = 0;
	}
	return ret < 0 ? ret : w->err;
}

static struct recsort *link_sorter(struct check_ctx *ctx, recsort_cmp_fn cmp, unsigned share)
{
	struct recsort *rs = recsort_create(sizeof(struct link_rec), cmp, NULL, fs_check_sort_budget(ctx, share),
					    &ctx->fs->knobs.recsort);

	if (rs)
		recsort_set_jobs(rs, ctx->opts->jobs);
	return rs;
}

static struct recsort *subvol_sorter_create(struct check_ctx *ctx)
{
	return recsort_create(sizeof(struct root_rec), root_rec_cmp, NULL, fs_check_sort_budget(ctx, 16),
			      &ctx->fs->knobs.recsort);
}

void fs_feed_free(struct check_ctx *ctx)
{
	struct fs_feed *f = ctx->fs_feed;

	if (!f)
		return;
	shared_reports_free(&f->w.unreadable);
	for (unsigned i = 0; i < 3; i++)
		free(f->w.links.v[i]);
	free(f->w.links.tab);
	recsort_destroy(f->w.by_index);
	recsort_destroy(f->w.by_hash);
	recsort_destroy(f->w.orphans);
	free(f->roots.v);
	free(f->roots.used);
	free(f->fed);
	snap_plan_free(&f->plan);
	free(f);
	ctx->fs_feed = NULL;
}

int fs_feed_start(struct check_ctx *ctx)
{
	struct fs_feed *f;
	struct fs_walk *w;
	int ret;

	fs_feed_free(ctx);                 /* a run before a repair left them */
	fs_lost_destroy(ctx->fs_lost);
	ctx->fs_lost = NULL;
	recsort_destroy(ctx->subvol_entries);
	ctx->subvol_entries = NULL;
	if (!(f = ctx->fs_feed = calloc(1, sizeof(*f))))
		return -ENOMEM;
	w = &f->w;
	w->ctx = ctx;
	w->no_holes = ctx->fs->incompat & BTRFS_FEATURE_INCOMPAT_NO_HOLES;
	ret = collect_roots(ctx, &f->roots);
	if (ret) {   /* reported by the filesystem-tree phase, as before the walk was fed */
		f->roots_err = ret;
		snprintf(f->roots_msg, sizeof(f->roots_msg), "%s", btk_error_msg());
		f->roots.n = 0;
		f->roots.bytes = 0;
		return ret == -ENOMEM ? ret : 0;
	}
	/* snapshots are checked as deltas of one another, except for --repair (its notes are per tree) */
	ret = snap_plan_build(ctx, &f->roots, !ctx->opts->repair && !getenv("BTK_CHECK_NO_SNAP_DELTA"), &f->plan);
	if (ret)
		return ret;
	w->plan = &f->plan;
	ctx->fs_lost = w->lost = calloc(1, sizeof(*w->lost));
	f->fed = calloc(f->roots.n ? f->roots.n : 1, sizeof(*f->fed));
	/* live with the tree-block walk's sorters: of the sorters' budget, 5/16
	 * here, 1/8 references, 1/8 quota groups, 1/4 repair notes (--repair);
	 * the block cache has its own eighth of --memory-limit */
	w->by_index = link_sorter(ctx, link_cmp_index, 4);
	w->by_hash = link_sorter(ctx, link_cmp_hash, 4);
	w->orphans = link_sorter(ctx, link_cmp_orphan, 16);
	ctx->subvol_entries = w->subvols = subvol_sorter_create(ctx);
	if (!w->lost || !f->fed || !w->by_index || !w->by_hash || !w->orphans || !w->subvols)
		return -ENOMEM;
	return 0;
}

bool fs_feed_tree_begin(struct fs_feed *f, const struct tree_root_ptr *root)
{
	const struct tree_root_ptr *r = fs_roots_find(&f->roots, root->objectid);

	f->cur = NULL;
	/* a log tree carries its subvolume's id: the root block tells them apart */
	if (!r || r->bytenr != root->bytenr || f->fed[r - f->roots.v])
		return false;
	if (!snap_plan_is_head(&f->plan, (size_t)(r - f->roots.v)))
		return false;   /* checked as a delta of another (check_fs_trees) */
	f->fed[r - f->roots.v] = true;
	f->cur = r;
	fs_walk_set_root(&f->w, r, (size_t)(r - f->roots.v));
	fs_items_begin(&f->iw, &f->w, fs_walk_item, false);
	return true;
}

int fs_feed_block(struct fs_feed *f, const struct tree_block *b, bool shared)
{
	f->fed_blocks++;
	f->shared_blocks += shared;
	return fs_items_block(&f->iw, b);
}

void fs_feed_bad_block(struct fs_feed *f, uint64_t bytenr, int level, const char *why)
{
	fs_items_bad_block(&f->iw, bytenr, level, why);
}

int fs_feed_tree_end(struct fs_feed *f, int walk_ret)
{
	int ret = fs_items_end(&f->iw, f->cur, walk_ret);

	if (ret > 0)   /* walk_item stopped: cancelled, or w->err */
		ret = f->w.err ? f->w.err : -ECANCELED;
	ret = tree_end(&f->w, f->cur, ret == -ECANCELED ? 0 : ret);
	f->cur = NULL;
	return ret ? ret : (cli_cancelled() ? -ECANCELED : 0);
}

uint64_t fs_feed_shared_estimate(const struct fs_feed *f)
{
	uint64_t max = 0, fed = 0;

	for (size_t i = 0; i < f->roots.n; i++) {
		if (f->plan.seq && !snap_plan_is_head(&f->plan, i))
			continue;   /* a snapshot checked as a delta: not fed */
		fed += f->roots.used[i];
		if (f->roots.used[i] > max)
			max = f->roots.used[i];
	}
	return fed - max;
}

/* What a snapshot checked as a delta counts for in the progress of the
 * phase (bytes, as the walks count): a delta reads a few private blocks. */
#define DELTA_PROGRESS (64u * 1024)

/* The name records joined, for the progress of the joins. */
static uint64_t link_bytes(const struct fs_walk *w)
{
	const struct recsort *rs[] = { w->by_index, w->by_hash, w->orphans };
	uint64_t n = 0;

	for (size_t i = 0; i < 3; i++) {
		struct recsort_stats st;
		recsort_get_stats(rs[i], &st);
		n += st.records;
	}
	return n * sizeof(struct link_rec);
}

/* -v: the join records, those the deltas cancelled, and what the sorters spilled. */
static void link_stats_verbose(const struct fs_walk *w, double join_seconds)
{
	const struct recsort *rs[] = { w->by_index, w->by_hash, w->orphans };
	uint64_t records = 0, spilled = 0, runs = 0;

	for (size_t i = 0; i < 3; i++) {
		struct recsort_stats st;
		recsort_get_stats(rs[i], &st);
		records += st.records;
		spilled += st.spilled_bytes;
		runs += st.runs;
	}
	msg_verbose("filesystem trees: %" PRIu64 " name join records (%" PRIu64 " more cancelled out in the deltas), %"
		    PRIu64 " sorted runs spilled, %" PRIu64 " KiB; the joins (last sort, merge, judging) took %.2f s",
		    records, w->links.cancelled, runs, spilled >> 10, join_seconds);
}

int check_fs_trees(struct check_ctx *ctx)
{
	struct block_cache_stats c0, c1;
	struct fs_feed *f;
	struct fs_walk *w;
	uint64_t walk_bytes = 0;
	size_t walked = 0;
	struct timespec t0 = { 0, 0 }, t1 = { 0, 0 };
	int ret = 0;

	if (!ctx->fs_feed && (ret = fs_feed_start(ctx)))   /* the tree-block phase did not start it */
		goto out;
	f = ctx->fs_feed;
	w = &f->w;
	if (f->roots_err) {
		report_problem(ctx, PR_TREE_ROOT_UNREADABLE, "root tree: %s", f->roots_msg);
		goto out;
	}
	/* the trees the tree-block walk did not feed (it stopped early) are walked here */
	for (size_t i = 0; i < f->roots.n; i++)
		if (!f->fed[i] && snap_plan_is_head(&f->plan, i))
			walk_bytes += f->roots.used[i];
		else if (!f->fed[i])
			walk_bytes += DELTA_PROGRESS;
	progress_set_total(ctx->progress, walk_bytes);
	block_cache_get_stats(ctx->fs, &c0);
	/* lineage by lineage; a member that cannot be a delta heads a new lineage, checked later */
	for (uint32_t l = 0; l < f->plan.nlin && !ret && !cli_cancelled(); l++) {
		for (uint32_t s = 0; s < f->plan.lin[l].n && !ret && !cli_cancelled(); s++) {
			size_t i = f->plan.lin[l].members[s];
			if (f->fed[i])
				continue;
			if (s > 0 && !f->plan.lin[l].full_only && (ret = snap_delta_check(f, l, s)) <= 0) {
				f->fed[i] = true;
				progress_add(ctx->progress, DELTA_PROGRESS);
				continue;
			}
			if (s > 0) {   /* the rest of the lineage from here is a lineage of its own */
				/* counted as a delta, walked in full instead */
				walk_bytes += f->roots.used[i] - DELTA_PROGRESS;
				progress_set_total(ctx->progress, walk_bytes);
				snap_plan_flush_held(ctx, &f->plan, l);
				ret = snap_plan_split(&f->plan, l, s);
				break;
			}
			f->fed[i] = true;
			walked++;
			fs_walk_set_root(w, &f->roots.v[i], i);
			ret = tree_end(w, &f->roots.v[i], fs_walk_items(w, &f->roots.v[i], fs_walk_item));
		}
		snap_plan_flush_held(ctx, &f->plan, l);
	}
	shared_reports_flush(ctx, &w->unreadable);
	ctx->stats.inodes += w->inodes;
	if (!ret && !cli_cancelled()) {
		progress_set_total(ctx->progress, walk_bytes + link_bytes(w));
		clock_gettime(CLOCK_MONOTONIC, &t0);
		ret = fs_join_links(ctx, w, &f->roots, walk_bytes);
		clock_gettime(CLOCK_MONOTONIC, &t1);
	}
	block_cache_get_stats(ctx->fs, &c1);
	link_stats_verbose(w, (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9);
	/* what the tree-block walk handed over, read again where snapshots share
	 * blocks; what this phase read itself (lookups on the error paths) */
	msg_verbose("filesystem trees: %zu subvolume tree(s), %zu walked here, %" PRIu64 " inodes; %" PRIu64
		    " blocks fed by the tree-block walk, %" PRIu64 " of them read again (shared); block cache %"
		    PRIu64 " hits, %" PRIu64 " misses", f->roots.n, walked, w->inodes, f->fed_blocks,
		    f->shared_blocks, c1.hits - c0.hits, c1.misses - c0.misses);
	msg_verbose("filesystem trees: inode/name checks processed %" PRIu64 " tree blocks (%" PRIu64 " fed, %"
		    PRIu64 " read by the snapshot diffs) and reused %" PRIu64 "; %" PRIu64 " snapshot(s) checked as "
		    "deltas (%" PRIu64 " changed inodes), %zu lineage(s)", f->fed_blocks + f->plan.diff_blocks,
		    f->fed_blocks, f->plan.diff_blocks, f->plan.reused_blocks + f->shared_blocks, f->plan.delta_roots,
		    f->plan.dirty_inodes, f->plan.nlin);
out:
	if (ret || cli_cancelled()) {   /* the subvolume phase will not run */
		recsort_destroy(ctx->subvol_entries);
		ctx->subvol_entries = NULL;
	}
	fs_feed_free(ctx);
	return ret;
}

static uint64_t feed_reread_estimate(struct check_ctx *ctx)
{
	return fs_feed_shared_estimate(ctx->fs_feed);
}

static bool feed_tree_begin(struct check_ctx *ctx, const struct tree_root_ptr *root)
{
	return fs_feed_tree_begin(ctx->fs_feed, root);
}

static int feed_tree_block(struct check_ctx *ctx, const struct tree_block *b, bool shared)
{
	return fs_feed_block(ctx->fs_feed, b, shared);
}

static void feed_tree_bad_block(struct check_ctx *ctx, uint64_t bytenr, int level, const char *why)
{
	fs_feed_bad_block(ctx->fs_feed, bytenr, level, why);
}

static int feed_tree_end(struct check_ctx *ctx, int walk_ret)
{
	return fs_feed_tree_end(ctx->fs_feed, walk_ret);
}

/* Registered with the tree-block walk (tree_observers.c): it follows every
 * live subvolume tree it has not been fed yet. */
const struct tree_observer fs_tree_observer = {
	.name = "filesystem trees",
	.walk_begin = fs_feed_start,
	.reread_estimate = feed_reread_estimate,
	.tree_begin = feed_tree_begin,
	.tree_block = feed_tree_block,
	.tree_bad_block = feed_tree_bad_block,
	.tree_end = feed_tree_end,
};
