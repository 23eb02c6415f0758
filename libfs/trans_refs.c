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

/* 1.5 MiB: a small dirty budget (a test's) does not change when references
 * are applied, and so where blocks land */
#define TRANS_REFS_FLOOR 65536
#define TRANS_REFS_MIN_LIMIT 16

/* The live entries a transaction queues before applying (or spilling) them:
 * an eighth of the dirty-block budget (at least TRANS_REFS_FLOOR), or
 * $BTK_TRANS_REFS_MAX entries (tests). */
static size_t trans_refs_limit(const struct trans *t)
{
	const char *env = getenv("BTK_TRANS_REFS_MAX");
	uint64_t n = t->dirty_budget / 8 / sizeof(struct delayed_ref);

	if (n < TRANS_REFS_FLOOR)
		n = TRANS_REFS_FLOOR;
	if (env && *env) {
		char *end;
		unsigned long long v = strtoull(env, &end, 10);
		if (!*end && v)
			n = v;
	}
	return n < TRANS_REFS_MIN_LIMIT ? TRANS_REFS_MIN_LIMIT : (size_t)n;
}

int trans_refs_init(struct trans *t)
{
	t->refs_limit = trans_refs_limit(t);
	/* btk-check opens damaged filesystems: its repairs edit extent items from
	 * what the check found, so their queues wait for the commit */
	t->refs_keep = t->fs->tolerate_damage;
	t->pending_adds = ebitmap_create(t->fs->sectorsize);
	return t->pending_adds ? 0 : -ENOMEM;
}

void trans_refs_release(struct trans *t)
{
	free(t->refs);
	t->refs = NULL;
	t->nrefs = t->refs_cap = t->refs_cancelled = 0;
	ebitmap_destroy(t->pending_adds);
	t->pending_adds = NULL;
	recsort_destroy(t->refs_spill);
	t->refs_spill = NULL;
	t->refs_spilled = 0;
	ebitmap_destroy(t->freed_early);
	t->freed_early = NULL;
}

uint64_t trans_refs_queued(const struct trans *t)
{
	size_t live = t->nrefs > t->refs_cancelled ? t->nrefs - t->refs_cancelled : 0;

	return live + t->refs_spilled;
}

static bool ref_cancelled(struct trans *t, const struct delayed_ref *r)
{
	return r->op == REF_ADD && ebitmap_test(t->pending_adds, r->bytenr, t->fs->nodesize) != EBITMAP_ALL;
}

/* Drop the cancelled entries from the array, keeping the order. */
static void refs_compact(struct trans *t)
{
	size_t out = 0;

	for (size_t i = 0; i < t->nrefs; i++)
		if (!ref_cancelled(t, &t->refs[i]))
			t->refs[out++] = t->refs[i];
	t->nrefs = out;
	t->refs_cancelled = 0;
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

	if (!t->refs_spill) {
		size_t budget = t->refs_limit * sizeof(struct delayed_ref);
		t->refs_spill = recsort_create(sizeof(struct delayed_ref), ref_cmp, NULL,
					       budget < 4 * RECSORT_MIN_BUDGET ? 4 * RECSORT_MIN_BUDGET : budget, NULL);
		if (!t->refs_spill)
			return fs_error(t->fs, -errno, "queueing extent references on disk: %s", strerror(errno));
	}
	for (size_t i = 0; i < t->nrefs && !ret; i++) {
		if (ref_cancelled(t, &t->refs[i]))
			continue;
		ret = recsort_add(t->refs_spill, &t->refs[i]);
		t->refs_spilled++;
		t->refs_spilled_total++;
	}
	if (ret)
		return fs_error(t->fs, ret, "queueing extent references on disk: %s", strerror(-ret));
	t->nrefs = t->refs_cancelled = 0;
	return 0;
}

int trans_queue_ref(struct trans *t, enum ref_op op, uint64_t bytenr, uint64_t root, uint8_t level)
{
	struct delayed_ref *r;
	int ret;

	if (t->refs_cancelled > 64 && t->refs_cancelled > t->nrefs / 2)
		refs_compact(t);
	if (t->nrefs == t->refs_cap) {
		size_t cap = t->refs_cap ? t->refs_cap * 2 : 64;
		r = realloc(t->refs, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		t->refs = r;
		t->refs_cap = cap;
	}
	if (op == REF_ADD && (ret = ebitmap_set(t->pending_adds, bytenr, t->fs->nodesize)))
		return ret;
	r = &t->refs[t->nrefs++];
	memset(r, 0, sizeof(*r));   /* the padding too: spilled records are written out whole */
	r->bytenr = bytenr;
	r->root = root;
	r->op = (uint8_t)op;
	r->level = level;
	if (t->nrefs > t->peak_refs)
		t->peak_refs = t->nrefs;
	/* past the limit the queue waits for the commit on disk; otherwise it is
	 * applied at the next tree operation, unless one call queues twice as much */
	if (t->nrefs > t->refs_cancelled &&
	    t->nrefs - t->refs_cancelled > (t->refs_keep ? t->refs_limit : 2 * t->refs_limit))
		return refs_spill(t);
	return 0;
}

int trans_remove_pending_add(struct trans *t, uint64_t bytenr)
{
	int ret = ebitmap_test(t->pending_adds, bytenr, t->fs->nodesize);

	if (ret != EBITMAP_ALL)
		return 0;
	ret = ebitmap_clear(t->pending_adds, bytenr, t->fs->nodesize);
	if (ret)
		return ret;
	t->refs_cancelled++;
	return 1;
}

int trans_refs_take(struct trans *t, struct refs_batch *b)
{
	int ret;

	memset(b, 0, sizeof(*b));
	if (t->refs_spill) {
		if ((ret = refs_spill(t)) || (ret = recsort_finish(t->refs_spill))) {
			return ret < 0 && !t->fs->errmsg[0] ? fs_error(t->fs, ret, "reading queued extent references "
								       "back: %s", strerror(-ret)) : ret;
		}
		b->spill = t->refs_spill;
		t->refs_spill = NULL;
		t->refs_spilled = 0;
		return 0;
	}
	refs_compact(t);
	if (t->nrefs > 1)
		qsort(t->refs, t->nrefs, sizeof(t->refs[0]), ref_qsort_cmp);
	b->v = t->refs;
	b->n = t->nrefs;
	t->refs = NULL;
	t->nrefs = t->refs_cap = 0;
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
		if (ebitmap_test(t->pending_adds, r->bytenr, t->fs->nodesize) != EBITMAP_ALL)
			continue;
		ret = ebitmap_clear(t->pending_adds, r->bytenr, t->fs->nodesize);
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
	if (tree == BTRFS_EXTENT_TREE_OBJECTID && !t->refs_busy && type != BTRFS_BLOCK_GROUP_ITEM_KEY)
		t->refs_keep = true;
}

int trans_refs_maybe(struct trans *t)
{
	uint64_t n = trans_refs_queued(t);
	int ret;

	if (t->refs_busy || t->refs_keep || n <= t->refs_limit)
		return 0;
	t->refs_early_runs++;
	t->refs_applied_early += n;
	t->refs_early = true;
	ret = extent_refs_run(t);
	t->refs_early = false;
	return ret;
}

int trans_refs_free_block(struct trans *t, uint64_t bytenr)
{
	if (!t->refs_early)
		return alloc_free_tree_block(t, bytenr);
	if (!t->freed_early && !(t->freed_early = ebitmap_create(t->fs->sectorsize)))
		return -ENOMEM;
	return ebitmap_set(t->freed_early, bytenr, t->fs->nodesize);
}

int trans_refs_free_deferred(struct trans *t)
{
	uint64_t from = 0, start, len;
	int ret = 0;

	while (!ret && t->freed_early && ebitmap_next_set(t->freed_early, from, &start, &len) == 1) {
		for (uint64_t x = start; !ret && x < start + len; x += t->fs->nodesize)
			ret = alloc_free_tree_block(t, x);
		from = start + len;
	}
	if (!ret) {
		ebitmap_destroy(t->freed_early);
		t->freed_early = NULL;
	}
	return ret;
}
