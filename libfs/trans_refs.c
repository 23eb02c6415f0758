// SPDX-License-Identifier: LGPL-2.1-or-later
/* The queue of extent-tree changes a transaction makes (a reference for each
 * new tree block, a drop for each freed one), in bounded memory.
 *
 * A block created and freed again in one transaction never needs its
 * reference: pending_adds (an extent bitmap, a few runs since blocks are
 * allocated mostly in address order) says in O(1) whether its REF_ADD is
 * still queued, and cancelling it only clears the bit; the entry stays behind
 * and is skipped (and compacted away once they are many).
 *
 * Past refs_limit live entries the queue is applied to the extent tree at the
 * start of the next tree operation, as the commit would apply it (every tree
 * is whole then, and the committed trees stay untouched: the space of a
 * dropped block stays used to the allocator until the commit frees it, as
 * when the commit applies the drop). Not so when the caller edits extent items itself
 * from what the committed trees say (btk-check's repairs and its extent-tree
 * rebuild, or any insert/delete of extent items through the transaction):
 * applying a drop before such an edit would make the edit put back an item
 * for a block no tree uses. Then, and whenever the queue grows past twice the
 * limit between tree operations (a whole tree freed in one call), entries
 * spill to a sorter (libfs/recsort.c, sorted runs in $TMPDIR) and come back
 * at the commit. Either way they are applied in bytenr order, so the extent
 * tree is changed leaf by leaf. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/ebitmap.h>
#include <btk/recsort.h>
#include "libfs/trans_internal.h"

/* Queued extent-tree changes. A REF_ADD counts while its bytenr is in
 * pending_adds: a block freed again before its reference was applied leaves
 * its entry behind, cancelled. Past refs_limit live entries the queue is
 * applied at the start of a tree operation, unless refs_keep: the caller
 * edits extent items itself (a repair, a rebuild), from what the committed
 * trees say, and the queue waits for the commit, spilled to a sorter
 * (refs_spill) past the limit. */
struct trans_ref_queue {
	struct delayed_ref *refs;
	size_t nrefs, refs_cap;
	struct ebitmap *pending_adds;
	size_t refs_cancelled;      /* cancelled REF_ADD entries among refs (at most) */
	size_t refs_limit;
	unsigned refs_busy;         /* applying the queue, or libfs's own extent edits */
	bool refs_keep;
	struct recsort *refs_spill;
	uint64_t refs_spilled;      /* entries in refs_spill */
	uint64_t refs_early_runs, refs_applied_early, refs_spilled_total;
	/* Tree blocks whose drop was applied early: their space stays used to the
	 * allocator until the commit frees it (trans_refs_free_deferred), so it
	 * never scans the holes they would leave. */
	struct ebitmap *freed_early;
	bool refs_early;            /* applying the queue before the commit */
	size_t peak_refs;
};

/* 1.5 MiB: a small dirty budget (a test's) does not change when references
 * are applied, and so where blocks land */
#define TRANS_REFS_FLOOR 65536
#define TRANS_REFS_MIN_LIMIT 16

/* The live entries a transaction queues before applying (or spilling) them:
 * an eighth of the dirty-block budget (at least TRANS_REFS_FLOOR), or the
 * test knob's count. */
static size_t trans_refs_limit(const struct trans *t)
{
	uint64_t n = trans_dirty_budget(t->fs) / 8 / sizeof(struct delayed_ref);

	if (n < TRANS_REFS_FLOOR)
		n = TRANS_REFS_FLOOR;
	if (t->fs->knobs.trans_refs_max)
		n = t->fs->knobs.trans_refs_max;
	return n < TRANS_REFS_MIN_LIMIT ? TRANS_REFS_MIN_LIMIT : (size_t)n;
}

int trans_refs_init(struct trans *t)
{
	struct trans_ref_queue *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	t->ref_queue = q;
	q->refs_limit = trans_refs_limit(t);
	/* btk-check opens damaged filesystems: its repairs edit extent items from
	 * what the check found, so their queues wait for the commit */
	q->refs_keep = t->fs->tolerate_damage;
	q->pending_adds = ebitmap_create(t->fs->sectorsize);
	return q->pending_adds ? 0 : -ENOMEM;
}

void trans_refs_release(struct trans *t)
{
	struct trans_ref_queue *q = t->ref_queue;

	if (!q)
		return;
	free(q->refs);
	ebitmap_destroy(q->pending_adds);
	recsort_destroy(q->refs_spill);
	ebitmap_destroy(q->freed_early);
	free(q);
	t->ref_queue = NULL;
}

void trans_refs_busy_begin(struct trans *t)
{
	t->ref_queue->refs_busy++;
}

void trans_refs_busy_end(struct trans *t)
{
	t->ref_queue->refs_busy--;
}

void trans_refs_keep_until_commit(struct trans *t)
{
	t->ref_queue->refs_keep = true;
}

void trans_refs_figures(const struct trans *t, struct trans_figures *f)
{
	const struct trans_ref_queue *q = t->ref_queue;

	if (!q)
		return;
	f->peak_refs = q->peak_refs;
	f->refs_limit = q->refs_limit;
	f->refs_early_runs = q->refs_early_runs;
	f->refs_applied_early = q->refs_applied_early;
	f->refs_spilled_total = q->refs_spilled_total;
}

uint64_t trans_refs_queued(const struct trans *t)
{
	size_t live = t->ref_queue->nrefs > t->ref_queue->refs_cancelled ? t->ref_queue->nrefs - t->ref_queue->refs_cancelled : 0;

	return live + t->ref_queue->refs_spilled;
}

static bool ref_cancelled(struct trans *t, const struct delayed_ref *r)
{
	return r->op == REF_ADD && ebitmap_test(t->ref_queue->pending_adds, r->bytenr, t->fs->nodesize) != EBITMAP_ALL;
}

/* Drop the cancelled entries from the array, keeping the order. */
static void refs_compact(struct trans *t)
{
	size_t out = 0;

	for (size_t i = 0; i < t->ref_queue->nrefs; i++)
		if (!ref_cancelled(t, &t->ref_queue->refs[i]))
			t->ref_queue->refs[out++] = t->ref_queue->refs[i];
	t->ref_queue->nrefs = out;
	t->ref_queue->refs_cancelled = 0;
}

static int ref_cmp(const void *a, const void *b, void *arg)
{
	const struct delayed_ref *x = a, *y = b;

	(void)arg;
	if (x->bytenr != y->bytenr)
		return x->bytenr < y->bytenr ? -1 : 1;
	return (int)x->op - (int)y->op;
}

static int ref_qsort_cmp(const void *a, const void *b)
{
	return ref_cmp(a, b, NULL);
}

/* Move the live entries of the array to the sorter (made on first use). */
static int refs_spill(struct trans *t)
{
	int ret = 0;

	if (!t->ref_queue->refs_spill) {
		size_t budget = t->ref_queue->refs_limit * sizeof(struct delayed_ref);
		t->ref_queue->refs_spill = recsort_create(sizeof(struct delayed_ref), ref_cmp, NULL,
					       budget < 4 * RECSORT_MIN_BUDGET ? 4 * RECSORT_MIN_BUDGET : budget,
					       &t->fs->knobs.recsort);
		if (!t->ref_queue->refs_spill)
			return fs_error(t->fs, -errno, "queueing extent references on disk: %s", strerror(errno));
	}
	for (size_t i = 0; i < t->ref_queue->nrefs && !ret; i++) {
		if (ref_cancelled(t, &t->ref_queue->refs[i]))
			continue;
		ret = recsort_add(t->ref_queue->refs_spill, &t->ref_queue->refs[i]);
		t->ref_queue->refs_spilled++;
		t->ref_queue->refs_spilled_total++;
	}
	if (ret)
		return fs_error(t->fs, ret, "queueing extent references on disk: %s", strerror(-ret));
	t->ref_queue->nrefs = t->ref_queue->refs_cancelled = 0;
	return 0;
}

int trans_queue_ref(struct trans *t, enum ref_op op, uint64_t bytenr, uint64_t root, uint8_t level)
{
	struct delayed_ref *r;
	int ret;

	if (t->ref_queue->refs_cancelled > 64 && t->ref_queue->refs_cancelled > t->ref_queue->nrefs / 2)
		refs_compact(t);
	if (t->ref_queue->nrefs == t->ref_queue->refs_cap) {
		size_t cap = t->ref_queue->refs_cap ? t->ref_queue->refs_cap * 2 : 64;
		r = realloc(t->ref_queue->refs, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		t->ref_queue->refs = r;
		t->ref_queue->refs_cap = cap;
	}
	if (op == REF_ADD && (ret = ebitmap_set(t->ref_queue->pending_adds, bytenr, t->fs->nodesize)))
		return ret;
	r = &t->ref_queue->refs[t->ref_queue->nrefs++];
	memset(r, 0, sizeof(*r));   /* the padding too: spilled records are written out whole */
	r->bytenr = bytenr;
	r->root = root;
	r->op = (uint8_t)op;
	r->level = level;
	if (t->ref_queue->nrefs > t->ref_queue->peak_refs)
		t->ref_queue->peak_refs = t->ref_queue->nrefs;
	/* past the limit the queue waits for the commit on disk; otherwise it is
	 * applied at the next tree operation, unless one call queues twice as much */
	if (t->ref_queue->nrefs > t->ref_queue->refs_cancelled &&
	    t->ref_queue->nrefs - t->ref_queue->refs_cancelled > (t->ref_queue->refs_keep ? t->ref_queue->refs_limit : 2 * t->ref_queue->refs_limit))
		return refs_spill(t);
	return 0;
}

int trans_remove_pending_add(struct trans *t, uint64_t bytenr)
{
	int ret = ebitmap_test(t->ref_queue->pending_adds, bytenr, t->fs->nodesize);

	if (ret != EBITMAP_ALL)
		return 0;
	ret = ebitmap_clear(t->ref_queue->pending_adds, bytenr, t->fs->nodesize);
	if (ret)
		return ret;
	t->ref_queue->refs_cancelled++;
	return 1;
}

int trans_refs_take(struct trans *t, struct refs_batch *b)
{
	int ret;

	memset(b, 0, sizeof(*b));
	if (t->ref_queue->refs_spill) {
		if ((ret = refs_spill(t)) || (ret = recsort_finish(t->ref_queue->refs_spill))) {
			return ret < 0 && btk_last_error()->err != ret ? fs_error(t->fs, ret, "reading queued extent references "
								       "back: %s", strerror(-ret)) : ret;
		}
		b->spill = t->ref_queue->refs_spill;
		t->ref_queue->refs_spill = NULL;
		t->ref_queue->refs_spilled = 0;
		return 0;
	}
	refs_compact(t);
	if (t->ref_queue->nrefs > 1)
		qsort(t->ref_queue->refs, t->ref_queue->nrefs, sizeof(t->ref_queue->refs[0]), ref_qsort_cmp);
	b->v = t->ref_queue->refs;
	b->n = t->ref_queue->nrefs;
	t->ref_queue->refs = NULL;
	t->ref_queue->nrefs = t->ref_queue->refs_cap = 0;
	return 0;
}

int trans_refs_batch_next(struct trans *t, struct refs_batch *b, struct delayed_ref *r)
{
	for (;;) {
		int ret;
		if (b->spill) {
			const void *rec;
			ret = recsort_next(b->spill, &rec);
			if (ret <= 0)
				return ret < 0 ? fs_error(t->fs, ret, "reading queued extent references back: %s",
							  strerror(-ret)) : 0;
			memcpy(r, rec, sizeof(*r));
		} else {
			if (b->i == b->n)
				return 0;
			*r = b->v[b->i++];
		}
		if (r->op != REF_ADD)
			return 1;
		/* its block may have been freed since it was queued */
		if (ebitmap_test(t->ref_queue->pending_adds, r->bytenr, t->fs->nodesize) != EBITMAP_ALL)
			continue;
		ret = ebitmap_clear(t->ref_queue->pending_adds, r->bytenr, t->fs->nodesize);
		return ret ? ret : 1;
	}
}

void trans_refs_batch_free(struct refs_batch *b)
{
	free(b->v);
	recsort_destroy(b->spill);
	memset(b, 0, sizeof(*b));
}

void trans_refs_note_edit(struct trans *t, uint64_t tree, uint8_t type)
{
	if (tree == BTRFS_EXTENT_TREE_OBJECTID && !t->ref_queue->refs_busy && type != BTRFS_BLOCK_GROUP_ITEM_KEY)
		t->ref_queue->refs_keep = true;
}

int trans_refs_maybe(struct trans *t)
{
	uint64_t n = trans_refs_queued(t);
	int ret;

	if (t->ref_queue->refs_busy || t->ref_queue->refs_keep || n <= t->ref_queue->refs_limit)
		return 0;
	t->ref_queue->refs_early_runs++;
	t->ref_queue->refs_applied_early += n;
	t->ref_queue->refs_early = true;
	ret = extent_refs_run(t);
	t->ref_queue->refs_early = false;
	return ret;
}

int trans_refs_free_block(struct trans *t, uint64_t bytenr)
{
	if (!t->ref_queue->refs_early)
		return alloc_free_tree_block(t, bytenr);
	if (!t->ref_queue->freed_early && !(t->ref_queue->freed_early = ebitmap_create(t->fs->sectorsize)))
		return -ENOMEM;
	return ebitmap_set(t->ref_queue->freed_early, bytenr, t->fs->nodesize);
}

int trans_refs_free_deferred(struct trans *t)
{
	uint64_t from = 0, start, len;
	int ret = 0;

	while (!ret && t->ref_queue->freed_early && ebitmap_next_set(t->ref_queue->freed_early, from, &start, &len) == 1) {
		for (uint64_t x = start; !ret && x < start + len; x += t->fs->nodesize)
			ret = alloc_free_tree_block(t, x);
		from = start + len;
	}
	if (!ret) {
		ebitmap_destroy(t->ref_queue->freed_early);
		t->ref_queue->freed_early = NULL;
	}
	return ret;
}
