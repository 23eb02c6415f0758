// SPDX-License-Identifier: GPL-2.0-only
/* The chunk-items repair class: a block group whose chunk item is lost (or
 * was left out of the chunk map, malformed) gets its chunk item made again
 * from what still describes it: the block group item (start, length, type
 * and profile) and the dev extents that name it as their chunk (devices and
 * places). Without it the chunk's space, extents and data are outside every
 * chunk; btrfs check --repair 7.3 removes the block group and its dev
 * extents instead, and the files whose data was there are lost.
 *
 * Only profiles whose stripes each hold the whole chunk are made (single,
 * DUP and the RAID1 family): their dev extents say everything, and the
 * order of the stripes does not matter. A striped profile's order is not
 * in the dev extents, so such a chunk is left. System chunks are left too
 * (their chunk tree block would be unreadable before this could run). The
 * chunk map is read again after the commit (check/repair.c), and the check
 * runs again. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include "common/grow.h"
#include <btk/blockgroups.h>
#include <btk/chunk_edit.h>
#include <btk/format.h>
#include <btk/trans.h>
#include <btk/tree.h>
#include <btk/volumes.h>

#define MAX_MIRRORS 4

struct lost_group {
	uint64_t start, length, flags;
};

struct dev_ext {
	uint64_t devid, physical, length, chunk_offset;
};

struct chunk_scan {
	struct fs_info *fs;
	struct lost_group *groups;
	size_t ngroups, gcap;
	struct dev_ext *exts;
	size_t nexts, ecap;
};

static int note_group(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct chunk_scan *s = arg;
	const struct chunk *c;
	struct lost_group *v;

	if (k->type != BTRFS_BLOCK_GROUP_ITEM_KEY || size != sizeof(struct btrfs_block_group_item))
		return 0;
	c = fs_chunk_lookup(s->fs, k->objectid);
	if (c && c->logical == k->objectid && c->length == k->offset)
		return 0;
	if (!(v = grow_array(s->groups, &s->gcap, s->ngroups, sizeof(*v), 8)))
		return -ENOMEM;
	s->groups = v;
	s->groups[s->ngroups++] = (struct lost_group){ k->objectid, k->offset, block_group_flags(d) };
	return 0;
}

static int note_dev_extent(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct chunk_scan *s = arg;
	struct dev_ext *v;

	if (k->type != BTRFS_DEV_EXTENT_KEY || size != sizeof(struct btrfs_dev_extent))
		return 0;
	if (!(v = grow_array(s->exts, &s->ecap, s->nexts, sizeof(*v), 64)))
		return -ENOMEM;
	s->exts = v;
	s->exts[s->nexts++] = (struct dev_ext){ k->objectid, k->offset, dev_extent_length(d),
						dev_extent_chunk_offset(d) };
	return 0;
}

/* How many stripes a chunk of this profile has, each holding the whole
 * chunk; 0 for the profiles this class does not make. */
static unsigned mirror_stripes(uint64_t flags)
{
	switch (flags & BTRFS_BLOCK_GROUP_PROFILE_MASK) {
	case 0: return 1;
	case BTRFS_BLOCK_GROUP_DUP: return 2;
	case BTRFS_BLOCK_GROUP_RAID1: return 2;
	case BTRFS_BLOCK_GROUP_RAID1C3: return 3;
	case BTRFS_BLOCK_GROUP_RAID1C4: return 4;
	default: return 0;
	}
}

static bool device_known(const struct fs_info *fs, uint64_t devid)
{
	for (unsigned i = 0; i < fs_num_devices(fs); i++)
		if (fs_device(fs, i)->devid == devid)
			return true;
	return false;
}

/* The stripes of the lost chunk g from its dev extents: how many (0 when
 * they do not fit its profile, or one of its devices is unknown). */
static unsigned stripes_of(const struct chunk_scan *s, const struct lost_group *g, struct dev_ext *out)
{
	unsigned want = mirror_stripes(g->flags), n = 0;

	if (!want || (g->flags & BTRFS_BLOCK_GROUP_SYSTEM))
		return 0;
	for (size_t i = 0; i < s->nexts; i++) {
		if (s->exts[i].chunk_offset != g->start)
			continue;
		if (n == want || s->exts[i].length != g->length || !device_known(s->fs, s->exts[i].devid))
			return 0;
		out[n++] = s->exts[i];
	}
	if (n != want)
		return 0;
	/* DUP: both on one device; the RAID1 family: each on its own */
	for (unsigned i = 0; i < n; i++)
		for (unsigned j = i + 1; j < n; j++)
			if ((out[i].devid == out[j].devid) != ((g->flags & BTRFS_BLOCK_GROUP_DUP) != 0))
				return 0;
	return n;
}

/* No chunk of the map overlaps [start, start + length). */
static bool space_free(const struct fs_info *fs, uint64_t start, uint64_t length)
{
	for (size_t i = 0; i < fs_chunk_count(fs); i++) {
		const struct chunk *c = fs_chunk(fs, i);
		if (c->logical < start + length && start < c->logical + c->length)
			return false;
	}
	return true;
}

static int make_chunk(struct repair_ctx *r, const struct lost_group *g, const struct dev_ext *st, unsigned n)
{
	struct btrfs_key key = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, g->start };
	uint8_t item[sizeof(struct btrfs_chunk) + MAX_MIRRORS * sizeof(struct btrfs_stripe)];
	struct stripe_place places[MAX_MIRRORS];
	uint32_t size;
	int ret;

	for (unsigned i = 0; i < n; i++)
		places[i] = (struct stripe_place){ st[i].devid, st[i].physical };
	size = chunk_item_build(r->fs, g->length, g->flags & (BTRFS_BLOCK_GROUP_TYPE_MASK | BTRFS_BLOCK_GROUP_PROFILE_MASK),
				places, n, item);
	/* a chunk item the open left out (malformed) gives way to the new one */
	ret = trans_delete_item(r->t, BTRFS_CHUNK_TREE_OBJECTID, &key);
	if (ret && ret != -ENOENT)
		return ret;
	btk_error_clear();
	return trans_insert_item(r->t, BTRFS_CHUNK_TREE_OBJECTID, &key, item, size);
}

int repair_chunk_items(struct repair_ctx *r)
{
	struct btrfs_key dmin = { 0, BTRFS_DEV_EXTENT_KEY, 0 }, dmax = { (uint64_t)-1, BTRFS_DEV_EXTENT_KEY, (uint64_t)-1 };
	struct btrfs_key gmin = { 0, BTRFS_BLOCK_GROUP_ITEM_KEY, 0 };
	struct btrfs_key gmax = { (uint64_t)-1, BTRFS_BLOCK_GROUP_ITEM_KEY, (uint64_t)-1 };
	struct chunk_scan s = { .fs = r->fs };
	struct tree_root_ptr bgt, dev;
	int ret = trans_get_root(r->t, trans_block_group_tree(r->t), &bgt);

	if (!ret)
		ret = trans_get_root(r->t, BTRFS_DEV_TREE_OBJECTID, &dev);
	if (!ret)
		ret = tree_each_item_in(r->fs, &bgt, &gmin, &gmax, note_group, &s);
	if (!ret && s.ngroups)
		ret = tree_each_item_in(r->fs, &dev, &dmin, &dmax, note_dev_extent, &s);
	for (size_t i = 0; !ret && i < s.ngroups; i++) {
		const struct lost_group *g = &s.groups[i];
		struct dev_ext st[MAX_MIRRORS];
		unsigned n = stripes_of(&s, g, st);

		if (!n || !space_free(r->fs, g->start, g->length)) {
			r->left++;
			repair_say(r, "block group %" PRIu64 "+%" PRIu64 " (%s): left, its dev extents do not make "
				   "its chunk", g->start, g->length, profile_name(g->flags));
			continue;
		}
		ret = make_chunk(r, g, st, n);
		if (!ret && r->changes++ < REPAIR_SAY_MAX)
			repair_say(r, "block group %" PRIu64 "+%" PRIu64 ": chunk item made again (%s, %u stripe(s) "
				   "from its dev extents)", g->start, g->length, profile_name(g->flags), n);
	}
	free(s.groups);
	free(s.exts);
	return ret;
}
