// SPDX-License-Identifier: GPL-2.0-only
/* The dev-extents class: the dev tree made to agree with the chunks.
 * - A dev extent that no chunk accounts for (no chunk at its chunk offset, no
 *   stripe of any chunk starting where it starts) only keeps device space
 *   from being allocated: it is removed.
 * - A dev extent where a chunk stripe starts that names another chunk, or
 *   another length, gets the chunk's offset and stripe length (unless the
 *   longer extent would run into the next one).
 * - A chunk stripe without a dev extent, when it is the chunk's only one on
 *   its device without one and exactly one dev extent of the device names
 *   the chunk where no stripe starts, with the stripe's length: one of the
 *   two moved, and where the chunk's contents are tells which: the chunk
 *   item takes the dev extent's place, or the dev extent the stripe's (not
 *   for system chunks, whose array copy the kernel reads first).
 * - Another chunk stripe without a dev extent gets one, unless the place
 *   overlaps another dev extent or a dev extent elsewhere names the chunk
 *   (then which side is wrong is not known: left as it is).
 * - Of two dev extents that overlap, the one a chunk stripe names exactly
 *   (its chunk, its device and offset, its length) is right; the other is
 *   first given its stripe's length (it starts where a stripe of its chunk
 *   starts: it grew), or moved to the one stripe of its chunk on its device
 *   that has no dev extent (it moved), or removed (its chunk's stripes there
 *   all have theirs). Two that both match, or neither, are left as they are.
 * A dev tree the check could not read whole is made again from the chunk map
 * alone: every stripe gets its dev extent in an empty tree.
 * The space-counters class then recomputes the devices' bytes_used. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/chunk_place_data.h"
#include "check/repair.h"
#include "common/grow.h"
#include <btk/chunk_edit.h>
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>
#include <btk/volumes.h>

struct dev_ext {
	uint64_t devid, physical, length, chunk_offset;
};

struct dev_exts {
	struct fs_info *fs;
	struct dev_ext *v;
	size_t n, cap;
	struct repair_keys strays;
};

static bool stripe_starts_at(const struct fs_info *fs, uint64_t devid, uint64_t physical)
{
	for (size_t i = 0; i < fs_chunk_count(fs); i++)
		for (unsigned s = 0; s < fs_chunk(fs, i)->num_stripes; s++)
			if (fs_chunk(fs, i)->stripes[s].devid == devid && fs_chunk(fs, i)->stripes[s].physical == physical)
				return true;
	return false;
}

static int note_dev_extent(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct dev_exts *s = arg;
	struct item_view v = item_view_of(d, size);
	const struct chunk *c;
	struct dev_ext *grown;

	if (k->type != BTRFS_DEV_EXTENT_KEY || !item_view_has_fixed(&v, k->type))
		return 0;
	if (!(grown = grow_array(s->v, &s->cap, s->n, sizeof(*grown), 64)))
		return -ENOMEM;
	s->v = grown;
	s->v[s->n++] = (struct dev_ext){ k->objectid, k->offset, dev_extent_length(d), dev_extent_chunk_offset(d) };
	c = fs_chunk_lookup(s->fs, dev_extent_chunk_offset(d));
	if ((c && c->logical == dev_extent_chunk_offset(d)) || stripe_starts_at(s->fs, k->objectid, k->offset))
		return 0;
	return repair_keys_push(&s->strays, k);
}

static int remove_strays(struct repair_ctx *r, struct dev_exts *s)
{
	int ret = 0;

	for (size_t i = 0; ret >= 0 && i < s->strays.n; i++) {
		ret = trans_delete_item(r->t, BTRFS_DEV_TREE_OBJECTID, &s->strays.keys[i]);
		if (!ret) {
			r->changes++;
			repair_say(r, "devid %" PRIu64 ": dev extent at %" PRIu64 " belongs to no chunk: removed",
				   s->strays.keys[i].objectid, s->strays.keys[i].offset);
		}
	}
	return ret < 0 ? ret : 0;
}

static bool is_stray(const struct dev_exts *s, uint64_t devid, uint64_t physical)
{
	for (size_t i = 0; i < s->strays.n; i++)
		if (s->strays.keys[i].objectid == devid && s->strays.keys[i].offset == physical)
			return true;
	return false;
}

/* The dev extent of device devid at physical, or NULL. */
static const struct dev_ext *dev_ext_at(const struct dev_exts *s, uint64_t devid, uint64_t physical)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].devid == devid && s->v[i].physical == physical)
			return &s->v[i];
	return NULL;
}

/* Another dev extent of devid than `self` overlaps [physical, physical+len). */
static bool dev_range_taken(const struct dev_exts *s, const struct dev_ext *self, uint64_t devid, uint64_t physical,
			    uint64_t len)
{
	for (size_t i = 0; i < s->n; i++)
		if (&s->v[i] != self && s->v[i].devid == devid && s->v[i].physical < physical + len &&
		    physical < s->v[i].physical + s->v[i].length)
			return true;
	return false;
}

/* A dev extent of devid not where any stripe starts names chunk `logical`. */
static bool chunk_named_elsewhere(const struct dev_exts *s, uint64_t devid, uint64_t logical)
{
	for (size_t i = 0; i < s->n; i++)
		if (s->v[i].devid == devid && s->v[i].chunk_offset == logical &&
		    !stripe_starts_at(s->fs, devid, s->v[i].physical))
			return true;
	return false;
}

static int fix_dev_extent(struct repair_ctx *r, const struct dev_ext *e, uint64_t logical, uint64_t len)
{
	struct btrfs_key key = { e->devid, BTRFS_DEV_EXTENT_KEY, e->physical };
	struct tree_path path;
	uint8_t *item;
	uint32_t isize;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, BTRFS_DEV_TREE_OBJECTID, &key, &item, &isize, &path);
	if (ret == 0) {
		dev_extent_set_chunk_offset(item, logical);
		dev_extent_set_length(item, len);
		r->changes++;
		repair_say(r, "devid %" PRIu64 ": dev extent at %" PRIu64 " (chunk %" PRIu64 ", length %" PRIu64
			   ") -> chunk %" PRIu64 ", length %" PRIu64 " (the chunk stripe starting there)", e->devid,
			   e->physical, e->chunk_offset, e->length, logical, len);
	}
	tree_path_release(r->fs, &path);
	return ret;
}

/* The dev extent that stripe i of chunk c lost (see the top of the file), or NULL. */
static const struct dev_ext *stripe_moved_from(const struct dev_exts *s, const struct chunk *c, unsigned i)
{
	uint64_t devid = c->stripes[i].devid, len = chunk_stripe_size(c->length, c->type, c->num_stripes,
								    c->sub_stripes);
	const struct dev_ext *found = NULL;

	if (c->type & BTRFS_BLOCK_GROUP_SYSTEM)
		return NULL;
	for (unsigned k = 0; k < c->num_stripes; k++)
		if (k != i && c->stripes[k].devid == devid && !dev_ext_at(s, devid, c->stripes[k].physical))
			return NULL;
	for (size_t k = 0; k < s->n; k++) {
		if (s->v[k].devid != devid || s->v[k].chunk_offset != c->logical ||
		    stripe_starts_at(s->fs, devid, s->v[k].physical))
			continue;
		if (found)
			return NULL;
		found = &s->v[k];
	}
	return found && found->length == len ? found : NULL;
}

/* Stripe i of chunk c (which this frees) takes the place of dev extent e. */
static int move_stripe(struct repair_ctx *r, const struct chunk *c, unsigned i, const struct dev_ext *e)
{
	struct btrfs_key key = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, c->logical };
	struct chunk_stripe stripes[MAX_COPIES];
	uint64_t logical = c->logical, was = c->stripes[i].physical;
	unsigned n = c->num_stripes;
	struct tree_path path;
	uint8_t *item;
	uint32_t isize;
	int ret;

	if (n > MAX_COPIES) { /* the in-memory map holds no more */
		r->left++;
		return 0;
	}
	for (unsigned k = 0; k < n; k++)
		stripes[k] = c->stripes[k];
	stripes[i].physical = e->physical;
	tree_path_init(&path);
	ret = trans_item_for_update(r->t, BTRFS_CHUNK_TREE_OBJECTID, &key, &item, &isize, &path);
	if (ret == 0 && (isize < chunk_item_size(n) || chunk_num_stripes(item) != n))
		ret = fs_error(r->fs, -EUCLEAN, "chunk item %" PRIu64 " differs from the chunk map", logical);
	if (ret == 0)
		stripe_set_offset(chunk_stripe(item, i), e->physical);
	tree_path_release(r->fs, &path);
	/* reads of the chunk go where its data is, in this transaction and the check after it */
	if (ret == 0)
		ret = chunk_map_set_stripes(r->fs, logical, stripes, n);
	if (ret == 0) {
		r->changes++;
		repair_say(r, "chunk %" PRIu64 " stripe %u: devid %" PRIu64 " at %" PRIu64 " -> %" PRIu64 " (its dev "
			   "extent)", logical, i, e->devid, was, e->physical);
	}
	return ret;
}

/* Stripe i of chunk c and the dev extent m that names the chunk elsewhere:
 * which one moved is told by where the chunk's contents are
 * (check/chunk_place_data.c). The stripe takes the dev extent's place, or
 * the dev extent the stripe's; neither when that is not clear. */
static int stripe_or_extent_moved(struct repair_ctx *r, const struct dev_exts *s, const struct chunk *c, unsigned i,
				  struct dev_ext *m)
{
	uint64_t devid = c->stripes[i].devid, physical = c->stripes[i].physical;
	int at_stripe = chunk_place_holds_data(r->fs, c, devid, physical);
	int at_extent = chunk_place_holds_data(r->fs, c, m->devid, m->physical);
	struct btrfs_key key = { m->devid, BTRFS_DEV_EXTENT_KEY, m->physical };
	int ret;

	if (at_extent == 1 && at_stripe != 1)
		return move_stripe(r, c, i, m);
	if (at_stripe != 1 || at_extent == 1 || dev_range_taken(s, m, devid, physical, m->length)) {
		r->left++;
		repair_say(r, "chunk %" PRIu64 " stripe %u (devid %" PRIu64 " at %" PRIu64 ") and its dev extent at %"
			   PRIu64 " disagree, and where the chunk's contents are does not tell which moved: left as "
			   "they are", c->logical, i, devid, physical, m->physical);
		return 0;
	}
	if ((ret = trans_delete_item(r->t, BTRFS_DEV_TREE_OBJECTID, &key)) ||
	    (ret = chunk_add_dev_extent(r->t, c->logical, &(struct stripe_place){ devid, physical }, m->length)))
		return ret;
	r->changes++;
	repair_say(r, "devid %" PRIu64 ": dev extent at %" PRIu64 " -> %" PRIu64 " (chunk %" PRIu64 " stripe %u is "
		   "there: its contents are)", devid, m->physical, physical, c->logical, i);
	m->physical = physical;
	return 0;
}

/* The dev tree holds nothing the chunks do not say but the devices' error
 * statistics (the kernel starts them from zero when their item is missing)
 * and a replace in progress: with blocks of it unreadable, it is dropped whole
 * and started again empty, for every stripe to get its dev extent below. */
static int restart_dev_tree(struct repair_ctx *r)
{
	uint64_t unreadable = 0;
	struct tree_root_ptr rp;
	int ret;

	if (!check_tree_unreadable(r->found, BTRFS_DEV_TREE_OBJECTID))
		return 0;
	/* without a root item (and no block found for it) there is nothing to drop */
	if ((trans_get_root(r->t, BTRFS_DEV_TREE_OBJECTID, &rp) == 0 &&
	     (ret = trans_delete_damaged_tree(r->t, BTRFS_DEV_TREE_OBJECTID, &unreadable))) ||
	    (ret = trans_create_tree(r->t, BTRFS_DEV_TREE_OBJECTID)))
		return ret;
	r->changes++;
	repair_say(r, "the dev tree had %" PRIu64 " unreadable block(s): made again from the chunk map", unreadable);
	return 0;
}

/* One chunk stripe: its dev extent made to match, or added. */
static int fix_stripe(struct repair_ctx *r, const struct dev_exts *s, const struct chunk *c, unsigned i)
{
	uint64_t len = chunk_stripe_size(c->length, c->type, c->num_stripes, c->sub_stripes);
	struct stripe_place p = { .devid = c->stripes[i].devid, .physical = c->stripes[i].physical };
	const struct dev_ext *e = dev_ext_at(s, p.devid, p.physical);
	int ret;

	if (e && e->chunk_offset == c->logical && e->length == len)
		return 0;
	if (!e && stripe_moved_from(s, c, i))
		return stripe_or_extent_moved(r, s, c, i, (struct dev_ext *)stripe_moved_from(s, c, i));
	if (e ? dev_range_taken(s, e, p.devid, p.physical, len)
	      : dev_range_taken(s, NULL, p.devid, p.physical, len) || chunk_named_elsewhere(s, p.devid, c->logical)) {
		r->left++;
		repair_say(r, "chunk %" PRIu64 " stripe %u (devid %" PRIu64 " at %" PRIu64 "): its dev extent cannot "
			   "be made to match (the place is taken, or another dev extent names the chunk): left as it is",
			   c->logical, i, p.devid, p.physical);
		return 0;
	}
	if (e)
		return fix_dev_extent(r, e, c->logical, len);
	ret = chunk_add_dev_extent(r->t, c->logical, &p, len);
	if (ret == 0) {
		r->changes++;
		repair_say(r, "devid %" PRIu64 ": dev extent at %" PRIu64 " length %" PRIu64 " added (chunk %" PRIu64
			   " stripe %u had none)", p.devid, p.physical, len, c->logical, i);
	}
	return ret;
}

/* Dev extent e is the one a chunk stripe names: its chunk, place and length. */
static bool matches_stripe(const struct fs_info *fs, const struct dev_ext *e)
{
	const struct chunk *c = fs_chunk_lookup(fs, e->chunk_offset);

	if (!c || c->logical != e->chunk_offset ||
	    e->length != chunk_stripe_size(c->length, c->type, c->num_stripes, c->sub_stripes))
		return false;
	for (unsigned i = 0; i < c->num_stripes; i++)
		if (c->stripes[i].devid == e->devid && c->stripes[i].physical == e->physical)
			return true;
	return false;
}

/* The one stripe of chunk c on devid without a dev extent at its place: its
 * index, or -1 (none: -2 when there are several). */
static int stripe_without_extent(const struct dev_exts *s, const struct chunk *c, uint64_t devid)
{
	int found = -1;

	for (unsigned i = 0; i < c->num_stripes; i++) {
		if (c->stripes[i].devid != devid || dev_ext_at(s, devid, c->stripes[i].physical))
			continue;
		if (found >= 0)
			return -2;
		found = (int)i;
	}
	return found;
}

/* Dev extent e overlaps another and no stripe names it (see the top of the
 * file): its length set, or it moved to its stripe, or removed. */
static int fix_overlapping(struct repair_ctx *r, struct dev_exts *s, struct dev_ext *e)
{
	const struct chunk *c = fs_chunk_lookup(r->fs, e->chunk_offset);
	struct btrfs_key key = { e->devid, BTRFS_DEV_EXTENT_KEY, e->physical };
	uint64_t len;
	int k, ret;

	if (c && c->logical != e->chunk_offset)
		c = NULL;
	if (!c)
		return 0;   /* belongs to no chunk: removed as a stray */
	len = chunk_stripe_size(c->length, c->type, c->num_stripes, c->sub_stripes);
	if (stripe_starts_at(r->fs, e->devid, e->physical)) {
		if (e->length == len || dev_range_taken(s, e, e->devid, e->physical, len))
			goto left;
		ret = fix_dev_extent(r, e, c->logical, len);
		e->length = len;
		return ret;
	}
	k = stripe_without_extent(s, c, e->devid);
	if (k == -2 || (k >= 0 && (e->length != len || dev_range_taken(s, e, e->devid, c->stripes[k].physical, len))))
		goto left;
	if ((ret = trans_delete_item(r->t, BTRFS_DEV_TREE_OBJECTID, &key)))
		return ret;
	r->changes++;
	if (k < 0) {
		repair_say(r, "devid %" PRIu64 ": dev extent at %" PRIu64 " overlaps another and chunk %" PRIu64
			   " has its dev extents there already: removed", e->devid, e->physical, c->logical);
		e->devid = 0;   /* gone */
		return 0;
	}
	ret = chunk_add_dev_extent(r->t, c->logical,
				   &(struct stripe_place){ e->devid, c->stripes[k].physical }, len);
	repair_say(r, "devid %" PRIu64 ": dev extent at %" PRIu64 " overlaps another: moved to %" PRIu64
		   " (chunk %" PRIu64 " stripe %d)", e->devid, e->physical, c->stripes[k].physical, c->logical, k);
	e->physical = c->stripes[k].physical;
	return ret;
left:
	r->left++;
	repair_say(r, "devid %" PRIu64 ": dev extent at %" PRIu64 " overlaps another and cannot be put where its "
		   "chunk says: left as it is", e->devid, e->physical);
	return 0;
}

/* Each pair of overlapping dev extents: the one no stripe names is fixed. */
static int fix_overlaps(struct repair_ctx *r, struct dev_exts *s)
{
	int ret = 0;

	for (size_t i = 0; ret >= 0 && i < s->n; i++)
		for (size_t j = 0; ret >= 0 && j < i; j++) {
			struct dev_ext *a = &s->v[j], *b = &s->v[i], *bad;
			if (!a->devid || a->devid != b->devid || a->physical >= b->physical + b->length ||
			    b->physical >= a->physical + a->length)
				continue;
			if (matches_stripe(r->fs, a) == matches_stripe(r->fs, b)) {
				r->left++;
				repair_say(r, "devid %" PRIu64 ": dev extents at %" PRIu64 " and %" PRIu64 " overlap and "
					   "%s: left as they are", a->devid, a->physical, b->physical,
					   matches_stripe(r->fs, a) ? "chunk stripes name both" : "no chunk stripe names either");
				continue;
			}
			bad = matches_stripe(r->fs, a) ? b : a;
			if (!is_stray(s, bad->devid, bad->physical))
				ret = fix_overlapping(r, s, bad);
		}
	return ret;
}

int repair_dev_extents(struct repair_ctx *r)
{
	struct dev_exts s = { .fs = r->fs };
	struct tree_root_ptr rp;
	int ret = restart_dev_tree(r);

	if (!ret)
		ret = trans_get_root(r->t, BTRFS_DEV_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item(r->fs, &rp, note_dev_extent, &s);
	if (ret >= 0)
		ret = fix_overlaps(r, &s);
	if (ret >= 0)
		ret = remove_strays(r, &s);
	for (size_t i = 0; ret >= 0 && i < fs_chunk_count(r->fs); i++)
		for (unsigned k = 0; ret >= 0 && k < fs_chunk(r->fs, i)->num_stripes; k++)
			ret = fix_stripe(r, &s, fs_chunk(r->fs, i), k);
	/* what is still where no stripe starts, after the removals and the moves */
	for (size_t i = 0; ret >= 0 && i < s.n; i++)
		r->left += s.v[i].devid && !stripe_starts_at(r->fs, s.v[i].devid, s.v[i].physical) &&
			   !is_stray(&s, s.v[i].devid, s.v[i].physical);
	free(s.strays.keys);
	free(s.v);
	return ret < 0 ? ret : 0;
}
