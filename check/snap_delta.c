// SPDX-License-Identifier: GPL-2.0-only
/* A snapshot checked as a delta of the lineage member before it
 * (doc/design.md, "Snapshots: checking each unique subtree once"): the
 * leaves either tree has alone give the inodes that may differ; those are
 * checked in full in this tree, and their items in the tree before emit
 * marks for the name groups they leave. Everything else is the previous
 * member's verdict (held problems, and the name joins' versions). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/phase_fs.h"
#include "check/snap_diff.h"
#include <btk/block.h>
#include <btk/tree.h>

struct ino_set {
	uint64_t *v;
	size_t n, cap;
};

static int ino_add(struct ino_set *s, uint64_t ino)
{
	if (s->n && s->v[s->n - 1] == ino)
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		uint64_t *v = realloc(s->v, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->v = v;
		s->cap = cap;
	}
	s->v[s->n++] = ino;
	return 0;
}

struct changes {
	struct ino_set dirty;
	struct snap_ranges leaves[2];   /* the private leaves of the tree, of the tree before */
};

/* The inodes whose items a private leaf holds (an orphan item: the inode it
 * names), and the leaf's key range. */
static int collect_leaf(void *arg, int side, const struct tree_block *b)
{
	struct changes *c = arg;
	struct ino_set *s = &c->dirty;
	int ret = snap_ranges_add(&c->leaves[side], b);

	for (unsigned slot = 0; slot < block_nritems(b) && !ret; slot++) {
		struct btrfs_key k;
		block_key(b, slot, &k);
		if (k.objectid == BTRFS_ORPHAN_OBJECTID && k.type == BTRFS_ORPHAN_ITEM_KEY)
			ret = ino_add(s, k.offset);
		else if (k.objectid >= BTRFS_FIRST_FREE_OBJECTID && k.objectid <= BTRFS_LAST_FREE_OBJECTID)
			ret = ino_add(s, k.objectid);
	}
	return ret;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

/* The set as sorted runs of consecutive inodes: 0 or -ENOMEM. */
static int to_runs(struct ino_set *s, struct ino_run **out, size_t *nout)
{
	struct ino_run *v;
	size_t n = 0;

	if (s->n)
		qsort(s->v, s->n, sizeof(*s->v), u64_cmp);
	for (size_t i = 0; i < s->n; i++)
		n += !i || s->v[i] > s->v[i - 1] + 1;
	if (!(v = malloc((n ? n : 1) * sizeof(*v))))
		return -ENOMEM;
	n = 0;
	for (size_t i = 0; i < s->n; i++) {
		if (n && s->v[i] <= v[n - 1].hi + 1) {
			v[n - 1].hi = s->v[i];
			continue;
		}
		v[n].lo = v[n].hi = s->v[i];
		n++;
	}
	*out = v;
	*nout = n;
	return 0;
}

struct dirty_walk {
	struct fs_walk *w;
	const struct ino_run *run;
	size_t n;
};

/* An item of a range holding dirty inodes: only theirs go to the fs walk. */
static int dirty_item(void *arg, const struct btrfs_key *k, const uint8_t *data, uint32_t size)
{
	struct dirty_walk *d = arg;
	bool orphan = k->objectid == BTRFS_ORPHAN_OBJECTID && k->type == BTRFS_ORPHAN_ITEM_KEY;

	if (!snap_runs_have(d->run, d->n, orphan ? k->offset : k->objectid))
		return 0;
	return fs_walk_item(d->w, k, data, size);
}

/* Dirty inodes closer than this are read in one range (their items are
 * contiguous, and so mostly are those of the inodes between). */
#define DIRTY_RUN_GAP 16

/* Every item of the dirty inodes of root through the fs walk, then their
 * orphan items. 0, or -errno from reading (reported). */
static int walk_dirty(struct fs_walk *w, const struct tree_root_ptr *root, const struct ino_run *run, size_t n)
{
	struct dirty_walk d = { w, run, n };
	struct btrfs_key olo = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, 0 };
	struct btrfs_key ohi = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, UINT64_MAX };
	int ret = 0;

	for (size_t i = 0, k; i < n && !ret && !w->err; i = k + 1) {
		struct btrfs_key lo = { run[i].lo, 0, 0 }, hi = { 0, 255, UINT64_MAX };
		for (k = i; k + 1 < n && run[k + 1].lo - run[k].hi <= DIRTY_RUN_GAP; k++)
			;
		hi.objectid = run[k].hi;
		ret = tree_each_item_in(w->ctx->fs, root, &lo, &hi, dirty_item, &d);
	}
	if (!ret && n)
		ret = tree_each_item_in(w->ctx->fs, root, &olo, &ohi, dirty_item, &d);
	if (ret > 0)   /* cancelled, or w->err */
		ret = 0;
	fs_walk_finish(w);
	if (ret < 0 && ret != -ENOMEM) {
		report_problem(w->ctx, PR_TREE_ROOT_UNREADABLE, "root %" PRIu64 ": walk stopped: %s",
			       root->objectid, btk_error_msg());
		ret = 0;
	}
	return ret ? ret : w->err;
}

/* The previous member's dir entries naming subvolumes, but those of dirty
 * directories, are this member's too. */
static int carry_subvols(struct fs_walk *w, struct snap_lineage *l, uint32_t seq, const struct snap_plan *p)
{
	size_t n = 0;
	int ret = 0;

	for (size_t i = 0; i < l->nsubvols; i++) {
		struct root_rec r = l->subvols[i];
		if (snap_plan_dirty(p, w->lineage, seq, r.c))
			continue;
		r.a = w->root->objectid;
		l->subvols[n++] = r;
		if (!ret)
			ret = recsort_add(w->subvols, &r);
	}
	l->nsubvols = n;
	return ret;
}

/* The same record but for the gone flag. */
static bool same_content(const struct link_rec *a, const struct link_rec *b)
{
	return a->dir == b->dir && a->key == b->key && a->child == b->child && a->fp == b->fp &&
	       a->index == b->index && a->root == b->root && a->name_len == b->name_len && a->kind == b->kind &&
	       a->type == b->type && a->lineage == b->lineage && a->seq == b->seq &&
	       (a->flags & ~LINK_F_GONE) == (b->flags & ~LINK_F_GONE);
}

static size_t content_hash(const struct link_rec *r, size_t mask)
{
	uint64_t h = r->dir * 0x9e3779b97f4a7c15ULL ^ r->key * 0xc2b2ae3d27d4eb4fULL ^ r->child * 0x165667b19e3779f9ULL ^
		     r->fp ^ r->index * 0x27d4eb2f165667c5ULL ^ ((uint64_t)r->kind << 56 | (uint64_t)r->name_len << 40);

	h ^= h >> 29;
	h *= 0xbf58476d1ce4e5b9ULL;
	return (size_t)(h ^ h >> 32) & mask;
}

/* Pair each gone record of v[0..n) with an equal new one (dead[] both). */
static int cancel_pairs(struct delta_links *d, const struct link_rec *v, size_t n, bool *dead)
{
	size_t cap = 1024, mask;

	while (cap < 2 * n)
		cap *= 2;
	if (cap > d->tabcap) {
		uint32_t *t = realloc(d->tab, cap * sizeof(*t));
		if (!t)
			return -ENOMEM;
		d->tab = t;
		d->tabcap = cap;
	}
	mask = cap - 1;
	memset(d->tab, 0, cap * sizeof(*d->tab));
	for (size_t i = 0; i < n; i++) {   /* slots hold index + 1 of the new records */
		size_t h = content_hash(&v[i], mask);
		if (v[i].flags & LINK_F_GONE)
			continue;
		while (d->tab[h])
			h = (h + 1) & mask;
		d->tab[h] = (uint32_t)i + 1;
	}
	for (size_t j = 0; j < n; j++) {
		if (!(v[j].flags & LINK_F_GONE))
			continue;
		for (size_t h = content_hash(&v[j], mask); d->tab[h]; h = (h + 1) & mask) {
			size_t i = d->tab[h] - 1;
			if (!dead[i] && same_content(&v[i], &v[j])) {
				dead[i] = dead[j] = true;
				d->cancelled += 2;
				break;
			}
		}
	}
	return 0;
}

/* The delta's records to the sorters, but each pair of a record the tree
 * has and the same record found gone from the tree before: the group's
 * version goes on unchanged for them (phase_fs_join.c). */
static int delta_links_flush(struct fs_walk *w, struct delta_links *d)
{
	struct recsort *rs[3] = { w->by_index, w->by_hash, w->orphans };
	int ret = 0;

	for (unsigned i = 0; i < 3 && !ret; i++) {
		size_t n = d->n[i];
		bool *dead = n ? calloc(n, sizeof(*dead)) : NULL;
		if (n && (!dead || (ret = cancel_pairs(d, d->v[i], n, dead)))) {
			free(dead);
			return ret ? ret : -ENOMEM;
		}
		for (size_t k = 0; k < n && !ret; k++)
			if (!dead[k])
				ret = recsort_add(rs[i], &d->v[i][k]);
		free(dead);
		d->n[i] = 0;
	}
	return ret;
}

/* The dirty inodes in the tree (ri: its index), then in the tree before
 * (gone records): a dir entry emits a record only from a private leaf. */
static int delta_walks(struct fs_walk *w, uint32_t seq, const struct tree_root_ptr *r, size_t ri,
		       const struct tree_root_ptr *prev, const struct changes *c)
{
	struct snap_lineage *l = &w->plan->lin[w->plan->lineage[ri]];
	uint64_t inodes;
	int ret;

	fs_walk_set_root(w, r, ri);
	if ((ret = carry_subvols(w, l, seq, w->plan)))
		return ret;
	w->links.max = delta_links_budget(w->ctx->opts->memory_limit);
	w->pending = &w->links;
	w->changed = &c->leaves[0];
	ret = walk_dirty(w, r, l->dirty[seq], l->ndirty[seq]);
	if (!ret) {
		/* its inodes: the tree before's, but the dirty ones as found here */
		inodes = w->inodes;
		w->root = prev;
		w->mark_root = r->objectid;
		w->changed = &c->leaves[1];
		ret = walk_dirty(w, prev, l->dirty[seq], l->ndirty[seq]);
		w->mark_root = 0;
		w->inodes = inodes + w->plan->inodes[l->members[seq - 1]] - (w->inodes - inodes);
		w->plan->inodes[ri] = w->inodes - w->root_inodes0;
	}
	w->changed = NULL;
	w->pending = NULL;
	if (!ret)
		ret = delta_links_flush(w, &w->links);
	return ret;
}

/* The dirty sets of all lineages (kept until the joins) at most: a
 * sixteenth of --memory-limit, at least 1 MiB. */
static uint64_t dirty_budget(const struct check_ctx *ctx)
{
	uint64_t b = ctx->opts->memory_limit / 16;

	return b > (1u << 20) ? b : (1u << 20);
}

int snap_delta_check(struct fs_feed *f, uint32_t li, uint32_t seq)
{
	struct fs_walk *w = &f->w;
	struct snap_plan *p = &f->plan;
	struct snap_lineage *l = &p->lin[li];
	size_t ri = l->members[seq], pi = l->members[seq - 1];
	const struct tree_root_ptr *r = &f->roots.v[ri], *prev = &f->roots.v[pi];
	struct btrfs_key lo = { 0, 0, 0 }, hi = { UINT64_MAX, UINT8_MAX, UINT64_MAX };
	uint64_t nodesize = w->ctx->fs->nodesize, blocks = 0;
	struct changes c = { 0 };
	int ret;

	if (fs_lost_meets(w->lost, prev->objectid, &lo, &hi))
		return 1;   /* the tree before it was not seen whole */
	/* a delta that reads more than half the tree is no cheaper than a walk */
	ret = snap_diff(w->ctx->fs, r, prev, f->roots.used[ri] / nodesize / 2 + 64, collect_leaf, &c, &blocks);
	p->diff_blocks += blocks;
	if (!ret && !(ret = to_runs(&c.dirty, &l->dirty[seq], &l->ndirty[seq])) &&
	    (p->dirty_bytes += l->ndirty[seq] * sizeof(struct ino_run)) > dirty_budget(w->ctx)) {
		ret = 1;   /* the lineages' dirty sets hold their budget: the rest checked in full */
		p->dirty_bytes -= l->ndirty[seq] * sizeof(struct ino_run);
		free(l->dirty[seq]);
		l->dirty[seq] = NULL;
		l->ndirty[seq] = 0;
	}
	if (!ret) {
		snap_ranges_sort(&c.leaves[0]);
		snap_ranges_sort(&c.leaves[1]);
		p->delta_roots++;
		for (size_t i = 0; i < l->ndirty[seq]; i++)
			p->dirty_inodes += l->dirty[seq][i].hi - l->dirty[seq][i].lo + 1;
		if (f->roots.used[ri] / nodesize > blocks)
			p->reused_blocks += f->roots.used[ri] / nodesize - blocks;
		ret = delta_walks(w, seq, r, ri, prev, &c);
	} else if (ret != -ENOMEM) {
		ret = 1;   /* unreadable or too different: checked in full */
	}
	free(c.dirty.v);
	snap_ranges_free(&c.leaves[0]);
	snap_ranges_free(&c.leaves[1]);
	return ret;
}
