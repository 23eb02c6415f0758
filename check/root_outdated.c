// SPDX-License-Identifier: GPL-2.0-only
/* Outdated root items (see root_outdated.h). A tree's root block is the one
 * block of its top level whose extent item carries a tree-block reference
 * from the tree: when a root item points elsewhere and that block is newer,
 * the root item is stale (a lost update; btrfs check calls it outdated and
 * its repair points the item at that block). A root item whose block does
 * not read as a root of its tree (zeroed space, another tree's block) is
 * pointed there too, whatever the generations say: subvolumes and the
 * global trees other than the three the extent tree itself hangs on. So is
 * one that names that block with a level it does not have.
 * Memory: one entry per live tree. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/check.h"
#include "check/root_outdated.h"
#include "common/grow.h"
#include <btk/block.h>
#include <btk/item_check.h>
#include <btk/key.h>
#include <btk/tree.h>
#include <btk/walk.h>

struct root_seen {
	struct root_fix f;
	int best_level;            /* -1: no block seen */
	unsigned at_best;          /* blocks of that level */
	bool allocated;            /* the root item's block has an extent item */
};

struct scan {
	struct root_seen *v;
	size_t n, cap;
	struct by_bytenr { uint64_t bytenr; size_t i; } *by_bytenr; /* the root items, by their block */
	uint64_t bytenr, generation; /* the tree-block extent being read */
	int level;                 /* -1: not a tree block */
};

/* The trees whose root block the extent tree's references tell: not the
 * root, extent and chunk trees (the extent tree is read through them), nor
 * the log and relocation trees (not referenced as a tree's own). */
static bool root_is_found_by_refs(uint64_t id)
{
	return key_is_subvolume_id(id) || (id > BTRFS_CHUNK_TREE_OBJECTID && id < BTRFS_FIRST_FREE_OBJECTID);
}

static int add_root(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct scan *s = arg;
	struct tree_root_ptr r;
	struct root_seen *v;

	if (k->type != BTRFS_ROOT_ITEM_KEY || !root_is_found_by_refs(k->objectid) ||
	    !root_ptr_from_item(k->objectid, d, size, &r) || root_item_refs(d) == 0 ||
	    root_item_drop_progress(d, size).key.objectid)
		return 0;
	if (!(v = grow_array(s->v, &s->cap, s->n, sizeof(*v), 64)))
		return -ENOMEM;
	s->v = v;
	s->v[s->n++] = (struct root_seen){ .f = { .key = *k, .bytenr = r.bytenr, .generation = r.generation,
						  .level = r.level }, .best_level = -1 };
	return 0;
}

/* The entry of root id (the root tree lists them in id order), or NULL. */
static struct root_seen *find_root(struct scan *s, uint64_t id)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->v[mid].f.key.objectid < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < s->n && s->v[lo].f.key.objectid == id ? &s->v[lo] : NULL;
}

static void seen_ref(struct scan *s, uint64_t root)
{
	struct root_seen *r = s->level >= 0 ? find_root(s, root) : NULL;

	if (!r || s->level < r->best_level)
		return;
	if (s->level > r->best_level) {
		r->best_level = s->level;
		r->at_best = 0;
	}
	if (++r->at_best == 1) {
		r->f.new_bytenr = s->bytenr;
		r->f.new_generation = s->generation;
		r->f.new_level = (uint8_t)s->level;
	}
}

/* The root item's block at bytenr has an extent item. */
static void seen_allocated(struct scan *s, uint64_t bytenr)
{
	size_t lo = 0, hi = s->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (s->by_bytenr[mid].bytenr < bytenr)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (; lo < s->n && s->by_bytenr[lo].bytenr == bytenr; lo++)
		s->v[s->by_bytenr[lo].i].allocated = true;
}

static int extent_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct scan *s = arg;
	struct item_view v = item_view_of(d, size);
	uint32_t cur = sizeof(struct btrfs_extent_item);
	struct inline_ref_view r;

	if (k->type == BTRFS_TREE_BLOCK_REF_KEY) {
		if (k->objectid == s->bytenr)
			seen_ref(s, k->offset);
		return 0;
	}
	if (k->type != BTRFS_EXTENT_ITEM_KEY && k->type != BTRFS_METADATA_ITEM_KEY)
		return 0;
	s->level = -1;
	s->bytenr = k->objectid;
	seen_allocated(s, k->objectid);
	if (!ITEM_VIEW_STRUCT(&v, 0, struct btrfs_extent_item) || !(extent_flags(d) & BTRFS_EXTENT_FLAG_TREE_BLOCK))
		return 0;
	s->generation = extent_generation(d);
	if (k->type == BTRFS_METADATA_ITEM_KEY) {
		s->level = k->offset < BTRFS_MAX_LEVEL ? (int)k->offset : -1;
	} else if (ITEM_VIEW_STRUCT(&v, cur, struct btrfs_tree_block_info)) {
		s->level = tree_block_info_level(d + cur);
		cur += sizeof(struct btrfs_tree_block_info);
	}
	while (s->level >= 0 && inline_ref_next(&v, &cur, &r) == 1)
		if (r.type == BTRFS_TREE_BLOCK_REF_KEY)
			seen_ref(s, get_le64(r.body));
	return 0;
}

static int bytenr_cmp(const void *x, const void *y)
{
	uint64_t a = ((const struct by_bytenr *)x)->bytenr, b = ((const struct by_bytenr *)y)->bytenr;

	return a < b ? -1 : a > b;
}

/* How old the block a root item points at is: the item's generation, or
 * when the item already names the newest block's generation (its bytenr
 * alone lost the update), the older block's own. */
static uint64_t stale_generation(struct fs_info *fs, const struct root_fix *f)
{
	struct block_expect any = BLOCK_EXPECT_ANY;
	struct tree_block *b;
	uint64_t gen = f->generation;

	if (f->new_generation != f->generation)
		return gen;
	if (block_read(fs, f->bytenr, &any, &b) == 0) {
		if (block_owner(b) == f->key.objectid && block_generation(b) < gen)
			gen = block_generation(b);
		block_put(fs, b);
	} else {
		btk_error_clear();
	}
	return gen;
}

/* Whether the root item's block reads as a root of its tree: the owner,
 * level and generation the item names, as it is on disk. */
static bool root_block_reads(struct fs_info *fs, const struct root_fix *f)
{
	struct block_expect e = { .generation = f->generation, .level = f->level, .owner = f->key.objectid };
	struct tree_block *b;

	bool reads;

	if (block_read(fs, f->bytenr, &e, &b)) {
		btk_error_clear();
		return false;
	}
	/* a salvaged view was weighed against a parent, not against its owner */
	reads = !b->salvaged && block_owner(b) == f->key.objectid;
	block_put(fs, b);
	return reads;
}

int root_outdated_each(struct fs_info *fs, int (*fn)(void *arg, const struct root_fix *f), void *arg)
{
	struct scan s = { .level = -1 };
	int ret = tree_each_item(fs, &fs->tree_root, add_root, &s);

	if (!ret && s.n && !(s.by_bytenr = malloc(s.n * sizeof(*s.by_bytenr))))
		ret = -ENOMEM;
	if (!ret && s.n) {
		for (size_t i = 0; i < s.n; i++)
			s.by_bytenr[i] = (struct by_bytenr){ s.v[i].f.bytenr, i };
		qsort(s.by_bytenr, s.n, sizeof(*s.by_bytenr), bytenr_cmp);
		ret = tree_each_item(fs, &fs->extent_root, extent_item, &s);
	}
	/* a root or extent tree that does not read whole tells no root block (its
	 * damage is reported where the check reads it): nothing found here */
	if (ret && ret != -ENOMEM) {
		btk_error_clear();
		s.n = 0;
		ret = 0;
	}
	/* only a root block the extent tree no longer holds is taken for stale */
	for (size_t i = 0; !ret && i < s.n; i++) {
		const struct root_seen *r = &s.v[i];
		if (r->at_best != 1)
			continue;
		/* the right block, but the item's level does not read it (a generation
		 * alone is the salvage's: it rewrites the block) */
		if (r->f.new_bytenr == r->f.bytenr) {
			if (r->f.new_level != r->f.level && !root_block_reads(fs, &r->f))
				ret = fn(arg, &r->f);
			continue;
		}
		if ((!r->allocated && r->f.new_generation > stale_generation(fs, &r->f) &&
		     r->f.new_level >= r->f.level) || !root_block_reads(fs, &r->f))
			ret = fn(arg, &r->f);
	}
	free(s.by_bytenr);
	free(s.v);
	return ret;
}

static int report_outdated(void *arg, const struct root_fix *f)
{
	report_problem(arg, PR_ROOT_ITEM_OUTDATED, "root %" PRIu64 ": root item points at block %" PRIu64 " (generation %"
		       PRIu64 ", level %u), the tree's newest root block is %" PRIu64 " (generation %" PRIu64
		       ", level %u)", f->key.objectid, f->bytenr, f->generation, f->level, f->new_bytenr,
		       f->new_generation, f->new_level);
	return 0;
}

int check_root_items(struct check_ctx *ctx)
{
	/* a stale or misdirected root item leaves its tree's blocks unreferenced (or
	 * its root unreadable): only then looked for */
	if (!ctx->counts[PR_TREE_BLOCK_LEAKED] && !ctx->counts[PR_TREE_ROOT_UNREADABLE])
		return 0;
	return root_outdated_each(ctx->fs, report_outdated, ctx);
}

int root_block_find(struct fs_info *fs, uint64_t id, struct root_fix *f)
{
	struct root_seen one = { .f = { .key = { id, BTRFS_ROOT_ITEM_KEY, 0 } }, .best_level = -1 };
	struct by_bytenr none = { 0, 0 };
	struct scan s = { .v = &one, .n = 1, .cap = 1, .by_bytenr = &none, .level = -1 };
	int ret = tree_each_item(fs, &fs->extent_root, extent_item, &s);

	if (ret)
		return ret < 0 ? ret : -EIO;
	*f = one.f;
	return one.at_best == 1;
}
