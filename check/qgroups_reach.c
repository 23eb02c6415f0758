// SPDX-License-Identifier: GPL-2.0-only
/* Traditional qgroups: which subvolumes reach each extent, in bounded memory.
 *
 * An extent counts toward every subvolume from whose root it can be reached
 * by following tree pointers (this is what the kernel's backref walk finds,
 * whether the references on the way are keyed or shared). The tree walk
 * records every pointer of every subvolume block once ("edges", sorted by
 * the level of the pointing block, top down, then by that block) and the
 * root block of each subvolume ("seeds"). Then, level by level from the top,
 * the (block, subvolume) pairs of one level are merge-joined with the edges
 * of that level, giving the pairs of the level below; leaves give
 * (data extent, subvolume) pairs. Each block's and each data extent's group
 * of pairs is one extent with its distinct subvolumes, handed to
 * qgroup_account(). All pairs go through recsort, so memory stays within the
 * budget; the work is proportional to the pairs, i.e. to how many subvolumes
 * share each block. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check/fe_kind.h"
#include "check/qgroups.h"
#include <btk/item_check.h>
#include <btk/walk.h>
#include "common/sizes.h"
#include <btk/block.h>
#include <btk/recsort.h>

struct reach_rec {
	uint64_t block, root;
};

struct data_rec {
	uint64_t bytenr, root, bytes;
};

static int cmp_u64(uint64_t x, uint64_t y)
{
	return x < y ? -1 : x > y;
}

static int edge_cmp(const void *x, const void *y, void *arg)
{
	const struct qgroup_edge *p = x, *q = y;

	(void)arg;
	if (p->plevel != q->plevel)
		return p->plevel > q->plevel ? -1 : 1;
	return cmp_u64(p->parent, q->parent);
}

/* reach_rec and data_rec both start with (extent, root) */
static int pair_cmp(const void *x, const void *y, void *arg)
{
	const uint64_t *p = x, *q = y;
	int r;

	(void)arg;
	return (r = cmp_u64(p[0], q[0])) ? r : cmp_u64(p[1], q[1]);
}

size_t qgroups_sort_budget(const struct check_ctx *ctx)
{
	size_t budget = check_sort_budget(ctx, 8);
	const char *env = getenv("BTK_CHECK_SORT_BUDGET"); /* tests: force spilling on small images */
	uint64_t v;

	if (env && !size_parse(env, &v))
		budget = (size_t)v;
	return budget < RECSORT_MIN_BUDGET ? RECSORT_MIN_BUDGET : budget;
}

static struct recsort *new_sorter(struct check_ctx *ctx, size_t size, recsort_cmp_fn cmp)
{
	struct recsort *rs = recsort_create(size, cmp, NULL, qgroups_sort_budget(ctx),
					    &ctx->fs->knobs.recsort);

	if (rs)
		recsort_set_jobs(rs, ctx->opts->jobs > 4 ? 4 : ctx->opts->jobs);
	return rs;
}

static void add_stats(struct check_ctx *ctx, const struct recsort *rs)
{
	struct recsort_stats s;

	if (!rs)
		return;
	recsort_get_stats(rs, &s);
	ctx->stats.spilled_bytes += s.spilled_bytes;
	if (s.peak_memory > ctx->stats.sort_peak_memory)
		ctx->stats.sort_peak_memory = s.peak_memory;
}

static int add_seed(struct qgroup_state *st, uint64_t bytenr, uint64_t root, unsigned level)
{
	struct qgroup_seed *p = qgroups_grow(st->seeds, st->nseeds, &st->seeds_cap, sizeof(*p));

	if (!p)
		return -ENOMEM;
	st->seeds = p;
	st->seeds[st->nseeds++] = (struct qgroup_seed){ bytenr, root, (uint8_t)level };
	return 0;
}

static int observe_leaf(struct qgroup_state *st, const struct tree_block *b)
{
	for (unsigned i = 0; i < block_nritems(b); i++) {
		struct item_view v = leaf_item_view(b->data, i);
		const uint8_t *d = ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item);
		struct btrfs_key k;
		struct qgroup_edge e;
		int ret;

		block_key(b, i, &k);
		/* malformed items are reported by the reference checks */
		if (k.type != BTRFS_EXTENT_DATA_KEY || !d || !fe_kind_regular(file_extent_type(d), v.size) ||
		    !file_extent_disk_bytenr(d))
			continue;
		e = (struct qgroup_edge){ .parent = b->bytenr, .child = file_extent_disk_bytenr(d),
					  .bytes = file_extent_disk_num_bytes(d) };
		if ((ret = recsort_add(st->edges, &e)) < 0)
			return ret;
	}
	return 0;
}

int qgroups_reach_observe(struct check_ctx *ctx, struct qgroup_state *st, const struct tree_root_ptr *root,
			  const struct tree_block *b, bool first)
{
	unsigned level = block_level(b);
	int ret;

	/* relocation trees share blocks with subvolumes but reach nothing of their own */
	if (!qgroup_is_fstree(root->objectid) && root->objectid != BTRFS_TREE_RELOC_OBJECTID)
		return 0;
	if (!st->edges && !(st->edges = new_sorter(ctx, sizeof(struct qgroup_edge), edge_cmp)))
		return -ENOMEM;
	if (b->bytenr == root->bytenr && qgroup_is_fstree(root->objectid) &&
	    (ret = add_seed(st, b->bytenr, root->objectid, level)) < 0)
		return ret;
	if (!first)
		return 0;
	if (level == 0)
		return observe_leaf(st, b);
	for (unsigned i = 0; i < block_nritems(b); i++) {
		struct qgroup_edge e = { .parent = b->bytenr, .child = key_ptr_blockptr(node_key_ptr(b->data, i)),
					 .plevel = level };
		if (ctx->walk_drop && tree_child_dropped(ctx->walk_drop, b, i))
			continue;   /* the kernel dropped it from this tree already */
		if ((ret = recsort_add(st->edges, &e)) < 0)
			return ret;
	}
	return 0;
}

/* The level-by-level join. */
struct reach_pass {
	struct check_ctx *ctx;
	struct qgroup_state *st;
	struct qgroup_table *t;
	const struct qgroup_edge *edge;   /* next edge, NULL at the end */
	struct recsort *data;             /* struct data_rec */
	uint64_t *roots;                  /* distinct roots of the current extent */
	size_t nroots, roots_cap;
};

static int next_edge(struct reach_pass *p)
{
	const void *r;
	int ret = recsort_next(p->st->edges, &r);

	p->edge = ret == 1 ? r : NULL;
	return ret < 0 ? ret : 0;
}

static int add_root(struct reach_pass *p, uint64_t root)
{
	uint64_t *r;

	if (p->nroots && p->roots[p->nroots - 1] == root)
		return 0; /* sorted: duplicates are adjacent */
	if (!(r = qgroups_grow(p->roots, p->nroots, &p->roots_cap, sizeof(*r))))
		return -ENOMEM;
	p->roots = r;
	p->roots[p->nroots++] = root;
	return 0;
}

/* The pointers of block (at level) to the roots that reach it: pairs for
 * the level below, or data pairs from a leaf. */
static int follow_edges(struct reach_pass *p, unsigned level, uint64_t block, struct recsort *below)
{
	int ret;

	while (p->edge && p->edge->plevel == level && p->edge->parent < block)
		if ((ret = next_edge(p)) < 0)
			return ret; /* a block no subvolume reaches (relocation trees) */
	while (p->edge && p->edge->plevel == level && p->edge->parent == block) {
		for (size_t i = 0; i < p->nroots; i++) {
			if (level) {
				struct reach_rec r = { p->edge->child, p->roots[i] };
				ret = recsort_add(below, &r);
			} else {
				struct data_rec r = { p->edge->child, p->roots[i], p->edge->bytes };
				ret = recsort_add(p->data, &r);
			}
			if (ret < 0)
				return ret;
		}
		if ((ret = next_edge(p)) < 0)
			return ret;
	}
	return 0;
}

/* One level: the blocks of `cur` (finished) are accounted and their edges
 * followed into `below` (NULL for leaves). */
static int join_level(struct reach_pass *p, unsigned level, struct recsort *cur, struct recsort *below)
{
	const void *v;
	const struct reach_rec *r = NULL;
	int ret = recsort_next(cur, &v);

	if (ret == 1)
		r = v;
	while (r) {
		uint64_t block = r->block;
		p->nroots = 0;
		while (r && r->block == block) {
			if ((ret = add_root(p, r->root)) < 0)
				return ret;
			ret = recsort_next(cur, &v);
			if (ret < 0)
				return ret;
			r = ret == 1 ? v : NULL;
		}
		if ((ret = qgroup_account(p->t, p->roots, p->nroots, p->ctx->fs->nodesize)) < 0 ||
		    (ret = follow_edges(p, level, block, below)) < 0)
			return ret;
	}
	if (ret < 0)
		return ret;
	/* edges of blocks no subvolume reaches */
	while (p->edge && p->edge->plevel == level)
		if ((ret = next_edge(p)) < 0)
			return ret;
	return 0;
}

static int account_data(struct reach_pass *p)
{
	const void *v;
	const struct data_rec *r = NULL;
	int ret;

	if ((ret = recsort_finish(p->data)) < 0)
		return ret;
	if ((ret = recsort_next(p->data, &v)) == 1)
		r = v;
	while (r) {
		uint64_t bytenr = r->bytenr, bytes = r->bytes;
		p->nroots = 0;
		while (r && r->bytenr == bytenr) {
			if ((ret = add_root(p, r->root)) < 0)
				return ret;
			ret = recsort_next(p->data, &v);
			if (ret < 0)
				return ret;
			r = ret == 1 ? v : NULL;
		}
		if ((ret = qgroup_account(p->t, p->roots, p->nroots, bytes)) < 0)
			return ret;
	}
	return ret < 0 ? ret : 0;
}

int qgroups_reach_account(struct check_ctx *ctx, struct qgroup_state *st, struct qgroup_table *t)
{
	struct reach_pass p = { .ctx = ctx, .st = st, .t = t };
	struct recsort *cur = NULL, *below = NULL;
	int ret = -ENOMEM;

	if (!st->edges)
		return 0; /* no subvolume block was reached */
	if ((ret = recsort_finish(st->edges)) < 0 || (ret = next_edge(&p)) < 0)
		return ret;
	if (!(p.data = new_sorter(ctx, sizeof(struct data_rec), pair_cmp)))
		return -ENOMEM;
	for (int level = BTRFS_MAX_LEVEL - 1; level >= 0 && !cli_cancelled(); level--) {
		cur = below ? below : new_sorter(ctx, sizeof(struct reach_rec), pair_cmp);
		below = NULL;
		ret = -ENOMEM;
		if (!cur || (level && !(below = new_sorter(ctx, sizeof(struct reach_rec), pair_cmp))))
			goto out;
		for (size_t i = 0; i < st->nseeds; i++) {
			struct reach_rec r = { st->seeds[i].bytenr, st->seeds[i].root };
			if (st->seeds[i].level == level && (ret = recsort_add(cur, &r)) < 0)
				goto out;
		}
		if ((ret = recsort_finish(cur)) < 0 || (ret = join_level(&p, (unsigned)level, cur, below)) < 0)
			goto out;
		add_stats(ctx, cur);
		recsort_destroy(cur);
		cur = NULL;
	}
	if (!cli_cancelled())
		ret = account_data(&p);
	add_stats(ctx, p.data);
	add_stats(ctx, st->edges);
out:
	recsort_destroy(cur);
	recsort_destroy(below);
	recsort_destroy(p.data);
	free(p.roots);
	return ret;
}
