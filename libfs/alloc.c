// SPDX-License-Identifier: LGPL-2.1-or-later
/* Tree-block allocation for the write path. Each metadata block group's
 * used space is read lazily from the committed extent tree (which the
 * transaction never changes in place), plus the stripes that hold
 * superblock copies. Blocks freed by the transaction are pinned: they stay
 * unusable until the commit, so the old tree stays intact on disk. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/ebitmap.h>
#include <btk/extent_scan.h>
#include "libfs/trans_internal.h"
#include <btk/tree.h>
#include <btk/volumes.h>
#include "libfs/volumes_internal.h"

/* The allocator's part of a transaction. */
struct trans_alloc {
	struct alloc_group **groups;
	size_t ngroups, groups_cap;
	struct ebitmap *pinned;     /* freed by this transaction: not reusable before commit */
	uint64_t alloc_events;      /* allocations + frees, to detect a stable commit loop */
	int64_t bytes_used_delta;
};

static bool group_fits_tree(const struct alloc_group *g, uint64_t root)
{
	if (root == BTRFS_CHUNK_TREE_OBJECTID)
		return g->flags & BTRFS_BLOCK_GROUP_SYSTEM;
	return g->flags & BTRFS_BLOCK_GROUP_METADATA;
}

/* Groups are allocated one by one: a group's address stays valid while the
 * commit adds groups (a new chunk) under it. */
struct alloc_group *alloc_add_group(struct trans *t, uint64_t start, uint64_t length, uint64_t flags)
{
	struct alloc_group *g;

	if (t->alloc->ngroups == t->alloc->groups_cap) {
		size_t cap = t->alloc->groups_cap ? t->alloc->groups_cap * 2 : 16;
		struct alloc_group **v = realloc(t->alloc->groups, cap * sizeof(*v));
		if (!v)
			return NULL;
		t->alloc->groups = v;
		t->alloc->groups_cap = cap;
	}
	g = calloc(1, sizeof(*g));
	if (!g)
		return NULL;
	*g = (struct alloc_group){ .start = start, .length = length, .flags = flags, .cursor = start };
	t->alloc->groups[t->alloc->ngroups++] = g;
	return g;
}

int alloc_init(struct trans *t)
{
	struct chunk_map *map = t->fs->chunks;

	t->alloc = calloc(1, sizeof(*t->alloc));
	if (!t->alloc)
		return -ENOMEM;
	t->alloc->pinned = ebitmap_create(t->fs->sectorsize);
	if (!t->alloc->pinned)
		return -ENOMEM;
	for (size_t i = 0; i < map->count; i++) {
		const struct chunk *c = map->chunks[i];
		if (!(c->type & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM)))
			continue;
		if (!alloc_add_group(t, c->logical, c->length, c->type))
			return -ENOMEM;
	}
	return 0;
}

void alloc_release(struct trans *t)
{
	struct trans_alloc *a = t->alloc;

	if (!a)
		return;
	for (size_t i = 0; i < a->ngroups; i++) {
		ebitmap_destroy(a->groups[i]->used);
		free(a->groups[i]);
	}
	free(a->groups);
	ebitmap_destroy(a->pinned);
	free(a);
	t->alloc = NULL;
}

size_t alloc_group_count(const struct trans *t)
{
	return t->alloc->ngroups;
}

struct alloc_group *alloc_group_at(struct trans *t, size_t i)
{
	return t->alloc->groups[i];
}

uint64_t alloc_events(const struct trans *t)
{
	return t->alloc->alloc_events;
}

void alloc_note_event(struct trans *t)
{
	t->alloc->alloc_events++;
}

int64_t alloc_bytes_used_delta(const struct trans *t)
{
	return t->alloc->bytes_used_delta;
}

struct alloc_group *alloc_group_of(struct trans *t, uint64_t bytenr)
{
	for (size_t i = 0; i < t->alloc->ngroups; i++)
		if (bytenr >= t->alloc->groups[i]->start && bytenr - t->alloc->groups[i]->start < t->alloc->groups[i]->length)
			return t->alloc->groups[i];
	return NULL;
}

/* How much logical space a superblock copy in one stripe takes from the
 * chunk, as the kernel excludes it: a stripe_len piece, and with RAID5/6 the
 * full row of data stripes it lies in (parity rotates, so the kernel takes
 * the row whole). */
static uint64_t chunk_super_unit(const struct chunk *c)
{
	uint64_t profile = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
	unsigned parity = profile & BTRFS_BLOCK_GROUP_RAID6 ? 2 : profile & BTRFS_BLOCK_GROUP_RAID5 ? 1 : 0;

	return parity && c->num_stripes > parity ? c->stripe_len * (c->num_stripes - parity) : c->stripe_len;
}

/* Logical address of the byte that physical `phys` of stripe s holds (with
 * RAID5/6: the start of its row). */
static uint64_t stripe_physical_to_logical(const struct chunk *c, unsigned s, uint64_t phys)
{
	uint64_t off = phys - c->stripes[s].physical;
	uint64_t profile = c->type & BTRFS_BLOCK_GROUP_PROFILE_MASK;
	uint64_t row = off / c->stripe_len, in = off % c->stripe_len;

	if (profile == BTRFS_BLOCK_GROUP_RAID0)
		return c->logical + (row * c->num_stripes + s) * c->stripe_len + in;
	if (profile == BTRFS_BLOCK_GROUP_RAID10) {
		unsigned groups = c->num_stripes / c->sub_stripes;
		return c->logical + (row * groups + s / c->sub_stripes) * c->stripe_len + in;
	}
	if (profile & (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))
		return c->logical + row * chunk_super_unit(c);   /* the whole row of data stripes */
	return c->logical + off;
}

static int group_load(struct trans *t, struct alloc_group *g);
static int alloc_from_groups(struct trans *t, uint64_t root, uint64_t *bytenr);

/* The logical ranges of a chunk whose stripes hold a superblock copy: whole
 * pieces (chunk_super_unit) that must never hold a tree block. Returns the count. */
static unsigned chunk_super_ranges(const struct chunk *c, uint64_t *starts, unsigned max)
{
	uint64_t stripe_size = chunk_stripe_size(c->length, c->type, c->num_stripes, c->sub_stripes);
	unsigned n = 0;

	for (unsigned s = 0; s < c->num_stripes; s++) {
		for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX && n < max; m++) {
			uint64_t sb = btrfs_super_offset(m), logical;
			if (sb < c->stripes[s].physical || sb - c->stripes[s].physical >= stripe_size)
				continue;
			logical = stripe_physical_to_logical(c, s, sb);
			logical -= (logical - c->logical) % chunk_super_unit(c);
			for (unsigned k = 0; k < n; k++)   /* RAID5/6: stripes of one row share it */
				if (starts[k] == logical)
					logical = UINT64_MAX;
			if (logical != UINT64_MAX)
				starts[n++] = logical;
		}
	}
	return n;
}

static uint64_t super_range_len(const struct alloc_group *g, const struct chunk *c, uint64_t start)
{
	uint64_t end = start + chunk_super_unit(c);

	return (end > g->start + g->length ? g->start + g->length : end) - start;
}

static int exclude_super_stripes(struct trans *t, struct alloc_group *g)
{
	const struct chunk *c = chunk_map_lookup(t->fs->chunks, g->start);
	uint64_t starts[3 * 16];
	unsigned n;

	if (!c)
		return 0;
	n = chunk_super_ranges(c, starts, sizeof(starts) / sizeof(starts[0]));
	for (unsigned i = 0; i < n; i++) {
		int ret = ebitmap_set(g->used, starts[i], super_range_len(g, c, starts[i]));
		if (ret)
			return ret;
	}
	return 0;
}

int alloc_group_relayout(struct trans *t, const struct chunk *old, const struct chunk *new_layout)
{
	struct alloc_group *g = alloc_group_of(t, old->logical);
	uint64_t before[3 * 16], after[3 * 16];
	unsigned nb, na, same = 0;
	int ret;

	nb = chunk_super_ranges(old, before, sizeof(before) / sizeof(before[0]));
	na = chunk_super_ranges(new_layout, after, sizeof(after) / sizeof(after[0]));
	for (unsigned i = 0; i < nb; i++)
		for (unsigned k = 0; k < na; k++)
			if (before[i] == after[k]) {
				same++;
				break;
			}
	if (same == nb && nb == na)
		return 0; /* the same logical ranges hold superblock copies: nothing to do */
	if (!g) {
		/* a data chunk: tracked from now on only for its free-space-tree items
		 * (alloc_tree_block never picks it: group_fits_tree) */
		g = alloc_add_group(t, old->logical, old->length, old->type);
		if (!g)
			return -ENOMEM;
	}
	ret = group_load(t, g);
	if (ret)
		return ret;
	for (unsigned i = 0; i < nb; i++) {
		bool kept = false;
		for (unsigned k = 0; k < na; k++)
			kept |= after[k] == before[i];
		if (!kept && (ret = ebitmap_clear(g->used, before[i], super_range_len(g, old, before[i]))))
			return ret;
	}
	for (unsigned k = 0; k < na; k++) {
		bool had = false;
		uint64_t len = super_range_len(g, new_layout, after[k]);
		for (unsigned i = 0; i < nb; i++)
			had |= before[i] == after[k];
		if (had)
			continue;
		if (ebitmap_test(g->used, after[k], len) != 0)
			return fs_error(t->fs, -EBUSY, "the new stripe of chunk %llu would put a superblock copy "
					"over metadata at %llu", (unsigned long long)old->logical,
					(unsigned long long)after[k]);
		if ((ret = ebitmap_set(g->used, after[k], len)))
			return ret;
	}
	g->fst_stale = true;
	t->alloc->alloc_events++;
	return 0;
}

/* The group's used space as the committed free-space tree describes it (a
 * handful of leaves, where the extent tree may hold thousands): everything
 * not listed as free. 1 when there is no usable free-space info for it (none,
 * or damaged). */
static int group_load_fst(struct trans *t, struct alloc_group *g)
{
	struct fs_info *fs = t->fs;
	struct btrfs_key min = { g->start, 0, 0 }, max = { g->start + g->length - 1, 255, (uint64_t)-1 }, key;
	uint64_t end = g->start + g->length;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	bool info = false;
	int ret;

	if (!(fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID) || !fs->free_space_root.bytenr)
		return 1;
	if ((ret = ebitmap_set(g->used, g->start, g->length)))
		return ret;
	tree_iter_init(&it, fs, &fs->free_space_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		ret = 0;
		if (key.type == BTRFS_FREE_SPACE_INFO_KEY) {
			info = key.objectid == g->start && key.offset == g->length;
			continue;
		}
		if (key.objectid < g->start || key.offset > end - key.objectid) {
			ret = fs_error(fs, -EUCLEAN, "free space %llu+%llu crosses block group %llu",
				       (unsigned long long)key.objectid, (unsigned long long)key.offset,
				       (unsigned long long)g->start);
			break;
		}
		if (key.type == BTRFS_FREE_SPACE_EXTENT_KEY) {
			ret = ebitmap_clear(g->used, key.objectid, key.offset);
		} else if (key.type == BTRFS_FREE_SPACE_BITMAP_KEY) {
			uint64_t bits = key.offset / fs->sectorsize;
			if (size * 8ull < bits) {
				ret = fs_error(fs, -EUCLEAN, "free space bitmap %llu is too short",
					       (unsigned long long)key.objectid);
				break;
			}
			for (uint64_t b = 0; b < bits && !ret; b++)
				if (data[b / 8] & (1u << (b % 8)))
					ret = ebitmap_clear(g->used, key.objectid + b * fs->sectorsize, fs->sectorsize);
		}
		if (ret)
			break;
	}
	tree_iter_release(&it);
	if (ret < 0 && ret != -ENOMEM) {
		/* an unreadable block or a bad item of the free-space tree: the extent tree says the same */
		btk_error_clear();
		ebitmap_clear_all(g->used);
		return 1;
	}
	if (ret < 0)
		return ret;
	if (!info) {
		ebitmap_clear_all(g->used);
		return 1; /* no info item for the group: do not trust the rest */
	}
	return 0;
}

struct group_fill {
	struct fs_info *fs;
	struct alloc_group *g;
};

static int group_fill_extent(void *arg, const struct extent_rec *e)
{
	const struct group_fill *f = arg;
	const struct alloc_group *g = f->g;

	if (e->bytenr < g->start)
		return fs_error(f->fs, -EUCLEAN, "extent %llu+%llu crosses block group %llu",
				(unsigned long long)e->bytenr, (unsigned long long)e->len,
				(unsigned long long)g->start);
	/* an extent item off the sector grid, or one whose length runs past its group (damage a
	 * repair is removing): its sectors up to the group's end count as used */
	uint64_t ss = f->fs->sectorsize, start = e->bytenr / ss * ss;
	uint64_t end = e->len > g->start + g->length - e->bytenr ? g->start + g->length : e->bytenr + e->len;
	end = end % ss ? end - end % ss + ss : end;
	if (end > g->start + g->length)
		end = g->start + g->length;
	return end > start ? ebitmap_set(g->used, start, end - start) : 0;
}

/* Read the group's used space from the committed free-space tree, or else
 * its extents from the committed extent tree. */
static int group_load(struct trans *t, struct alloc_group *g)
{
	struct fs_info *fs = t->fs;
	struct group_fill f = { fs, g };
	uint64_t pstart, plen, from;
	int ret;

	if (g->used)
		return 0;
	g->used = ebitmap_create(fs->sectorsize);
	if (!g->used)
		return -ENOMEM;
	ret = group_load_fst(t, g);
	if (ret < 0)
		return ret;
	if (ret == 0)
		goto loaded;
	ret = extent_tree_each(fs, &fs->extent_root, g->start, g->start + g->length - 1, group_fill_extent, &f);
	if (ret < 0)
		return ret;
loaded:
	ret = exclude_super_stripes(t, g);
	if (ret)
		return ret;
	/* blocks this transaction freed before the group was loaded */
	for (from = g->start; ebitmap_next_set(t->alloc->pinned, from, &pstart, &plen) == 1; from = pstart + plen) {
		if (pstart >= g->start + g->length)
			break;
		ret = ebitmap_clear(g->used, pstart, plen);
		if (ret)
			return ret;
	}
	return 0;
}

/* First nodesize-aligned free block at or after the cursor, wrapping once. */
static int group_find_free(struct trans *t, struct alloc_group *g, uint64_t *bytenr)
{
	uint32_t ns = t->fs->nodesize;
	uint64_t end = g->start + g->length;

	for (int pass = 0; pass < 2; pass++) {
		uint64_t pos = pass ? g->start : g->cursor;
		uint64_t limit = pass ? g->cursor : end;
		uint64_t fstart, flen;

		while (pos < limit && ebitmap_next_clear(g->used, pos, limit, &fstart, &flen) == 1) {
			uint64_t a = (fstart + ns - 1) / ns * ns;
			while (a + ns <= fstart + flen) {
				if (ebitmap_test(t->alloc->pinned, a, ns) == 0) {
					*bytenr = a;
					return 0;
				}
				a += ns;
			}
			pos = fstart + flen;
		}
	}
	return -ENOSPC;
}

int alloc_tree_block(struct trans *t, uint64_t root, uint64_t *bytenr)
{
	int ret = alloc_from_groups(t, root, bytenr);

	if (ret != -ENOSPC)
		return ret;
	ret = chunk_alloc_for_tree(t, root);
	if (ret)
		return ret;
	ret = alloc_from_groups(t, root, bytenr);
	if (ret == -ENOSPC)
		return fs_error(t->fs, -ENOSPC, "no free space for a new %s tree block in a new chunk",
				root == BTRFS_CHUNK_TREE_OBJECTID ? "system" : "metadata");
	return ret;
}

/* Test knob (fs_test_knobs.alloc_full, $BTK_TEST_ALLOC_FULL in the programs):
 * the block groups that existed when the transaction started count as full,
 * so its first tree block needs a new chunk (how a conversion behaves on a
 * filesystem whose metadata is full, without filling one). */
static bool group_full_for_test(const struct trans *t, const struct alloc_group *g)
{
	if (!t->fs->knobs.alloc_full)
		return false;
	return !chunk_alloc_is_new(t, g->start);
}

/* A free block in the existing groups, -ENOSPC (without a message) if none. */
static int alloc_from_groups(struct trans *t, uint64_t root, uint64_t *bytenr)
{
	for (size_t i = 0; i < t->alloc->ngroups; i++) {
		struct alloc_group *g = t->alloc->groups[i];
		int ret;

		if (!group_fits_tree(g, root) || group_full_for_test(t, g))
			continue;
		if ((g->flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) &
		    (BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6))
			continue; /* no parity writes in this version */
		ret = group_load(t, g);
		if (ret)
			return ret;
		ret = group_find_free(t, g, bytenr);
		if (ret == -ENOSPC)
			continue;
		if (ret)
			return ret;
		ret = ebitmap_set(g->used, *bytenr, t->fs->nodesize);
		if (ret)
			return ret;
		g->cursor = *bytenr + t->fs->nodesize;
		g->used_delta += t->fs->nodesize;
		g->fst_stale = true;
		t->alloc->bytes_used_delta += t->fs->nodesize;
		t->alloc->alloc_events++;
		return 0;
	}
	return -ENOSPC;
}

int alloc_free_tree_block(struct trans *t, uint64_t bytenr)
{
	struct alloc_group *g = alloc_group_of(t, bytenr);
	int ret;

	if (!g)
		return fs_error(t->fs, -EUCLEAN, "freed tree block %llu is in no metadata block group",
				(unsigned long long)bytenr);
	ret = ebitmap_set(t->alloc->pinned, bytenr, t->fs->nodesize);
	if (ret)
		return ret;
	if (g->used) {
		ret = ebitmap_clear(g->used, bytenr, t->fs->nodesize);
		if (ret)
			return ret;
	}
	g->used_delta -= t->fs->nodesize;
	g->fst_stale = true;
	t->alloc->bytes_used_delta -= t->fs->nodesize;
	t->alloc->alloc_events++;
	return 0;
}

int alloc_group_load(struct trans *t, struct alloc_group *g)
{
	return group_load(t, g);
}

int fs_super_stripe_ranges(struct fs_info *fs, uint64_t logical, uint64_t *starts, uint64_t *lens,
			   unsigned max)
{
	const struct chunk *c = chunk_map_lookup(fs->chunks, logical);
	unsigned n;

	if (!c || c->logical != logical)
		return -ENOENT;
	n = chunk_super_ranges(c, starts, max);
	for (unsigned i = 0; i < n; i++) {
		uint64_t end = starts[i] + chunk_super_unit(c);
		lens[i] = (end > c->logical + c->length ? c->logical + c->length : end) - starts[i];
	}
	return (int)n;
}

int trans_extent_space(struct trans *t, uint64_t bytenr, uint64_t len, bool used)
{
	struct alloc_group *g = alloc_group_of(t, bytenr);
	const struct chunk *c;
	int ret;

	if (!g) {
		/* a data chunk: tracked from now on for its free-space-tree items only */
		c = chunk_map_lookup(t->fs->chunks, bytenr);
		if (!c)
			return fs_error(t->fs, -EUCLEAN, "extent %llu lies in no chunk", (unsigned long long)bytenr);
		g = alloc_add_group(t, c->logical, c->length, c->type);
		if (!g)
			return -ENOMEM;
	}
	if (len > g->start + g->length - bytenr)
		return fs_error(t->fs, -EUCLEAN, "extent %llu+%llu crosses block group %llu", (unsigned long long)bytenr,
				(unsigned long long)len, (unsigned long long)g->start);
	if ((ret = group_load(t, g)))
		return ret;
	if (used) {
		if (ebitmap_test(t->alloc->pinned, bytenr, len) != 0)
			return fs_error(t->fs, -EBUSY, "extent %llu was freed by this transaction",
					(unsigned long long)bytenr);
		ret = ebitmap_set(g->used, bytenr, len);
	} else {
		ret = ebitmap_set(t->alloc->pinned, bytenr, len);
		if (!ret)
			ret = ebitmap_clear(g->used, bytenr, len);
	}
	if (ret)
		return ret;
	g->fst_stale = true;
	t->alloc->alloc_events++;
	return 0;
}

int trans_space_forget(struct trans *t)
{
	struct chunk_map *map = t->fs->chunks;

	for (size_t i = 0; i < map->count; i++) {
		const struct chunk *c = map->chunks[i];
		struct alloc_group *g = alloc_group_of(t, c->logical);
		int ret;

		if (!g && !(g = alloc_add_group(t, c->logical, c->length, c->type)))
			return -ENOMEM;
		ebitmap_destroy(g->used);
		if (!(g->used = ebitmap_create(t->fs->sectorsize)))
			return -ENOMEM;
		if ((ret = exclude_super_stripes(t, g)))
			return ret;
		g->fst_stale = true;
	}
	t->alloc->alloc_events++;
	return 0;
}

int trans_space_keep_until_commit(struct trans *t, uint64_t bytenr, uint64_t len)
{
	struct alloc_group *g = alloc_group_of(t, bytenr);
	int ret;

	if (!g || len > g->start + g->length - bytenr)
		return fs_error(t->fs, -EUCLEAN, "block %llu+%llu lies in no block group", (unsigned long long)bytenr,
				(unsigned long long)len);
	if ((ret = group_load(t, g)))
		return ret;
	if (ebitmap_test(g->used, bytenr, len) != 0)
		return 0; /* claimed by an extent (or a superblock stripe): stays used */
	return ebitmap_set(t->alloc->pinned, bytenr, len);
}
