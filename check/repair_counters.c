// SPDX-License-Identifier: GPL-2.0-only
/* Space counters recomputed in one transaction: each block group's `used`
 * from the extent items it holds, the superblock's bytes_used from those,
 * each device's bytes_used from its dev extents, a dev item's total_bytes
 * larger than its device down to the device's size, the superblock's
 * total_bytes from the devices' sizes.
 *
 * The values are computed from the trees as they were before the transaction
 * and written as such: the commit then adds what the transaction itself
 * allocates and frees (copy-on-write of the changed blocks) to the block
 * group items and bytes_used, so the committed counters are exact. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include <btk/blockgroups.h>
#include <btk/extent_scan.h>
#include <btk/item_check.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/volumes.h>

struct group_sums {
	struct fs_info *fs;
	const struct block_group_list *bgs;
	uint64_t *sums;
	size_t g;   /* the group of the extent before */
};

static int sum_extent(void *arg, const struct extent_rec *e)
{
	struct group_sums *s = arg;
	const struct block_group *groups = s->bgs->groups;

	/* a length the kernel refuses holds no space (as the check counts it) */
	if (extent_length_refused(e->bytenr, e->len, s->fs->sectorsize))
		return 0;
	while (s->g < s->bgs->count && groups[s->g].start + groups[s->g].length <= e->bytenr)
		s->g++;
	if (s->g == s->bgs->count || e->bytenr < groups[s->g].start ||
	    e->len > groups[s->g].start + groups[s->g].length - e->bytenr)
		return fs_error(s->fs, -EUCLEAN, "extent %" PRIu64 "+%" PRIu64 " lies outside every block group",
				e->bytenr, e->len);
	s->sums[s->g] += e->len;
	return 0;
}

/* Bytes of extent items per block group (groups sorted by start). */
static int sum_extents(struct fs_info *fs, const struct block_group_list *bgs, uint64_t *sums)
{
	struct group_sums s = { fs, bgs, sums, 0 };
	int ret = extent_tree_each(fs, &fs->extent_root, 0, (uint64_t)-1, sum_extent, &s);

	return ret < 0 ? ret : 0;
}

static int fix_block_groups(struct repair_ctx *r, const int64_t *adjust, uint64_t *total)
{
	struct fs_info *fs = r->fs;
	struct block_group_list bgs;
	uint64_t *sums = NULL;
	int ret = fs_read_block_groups(fs, &bgs);

	if (ret)
		return ret;
	sums = calloc(bgs.count ? bgs.count : 1, sizeof(*sums));
	ret = sums ? sum_extents(fs, &bgs, sums) : -ENOMEM;
	for (size_t i = 0; !ret && adjust && i < bgs.count; i++)
		sums[i] += (uint64_t)adjust[i];
	for (size_t i = 0; !ret && i < bgs.count; i++) {
		struct btrfs_key key = { bgs.groups[i].start, BTRFS_BLOCK_GROUP_ITEM_KEY, bgs.groups[i].length };
		struct tree_path path;
		uint8_t *item;
		uint32_t isize;

		*total += sums[i];
		if (bgs.groups[i].missing || bgs.groups[i].used == sums[i])
			continue;
		repair_say(r, "block group %" PRIu64 ": used %" PRIu64 " -> %" PRIu64, bgs.groups[i].start,
			   bgs.groups[i].used, sums[i]);
		r->changes++;
		tree_path_init(&path);
		ret = trans_item_for_update(r->t, trans_block_group_tree(r->t), &key, &item, &isize, &path);
		if (ret == 0 && !item_has_fixed(BTRFS_BLOCK_GROUP_ITEM_KEY, isize))
			ret = fs_error(fs, -EUCLEAN, "block group item %" PRIu64 " is too small", key.objectid);
		if (ret == 0)
			block_group_set_used(item, sums[i]);
		tree_path_release(fs, &path);
	}
	free(sums);
	block_group_list_free(&bgs);
	return ret;
}

static int add_dev_extent(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct item_view v = item_view_of(data, size);

	if (item_view_has_fixed(&v, key->type))
		*(uint64_t *)arg += dev_extent_length(data);
	return 0;
}

/* Sum of the dev extents of one device. */
static int dev_extent_sum(struct fs_info *fs, uint64_t devid, uint64_t *sum)
{
	*sum = 0;
	return volumes_each_dev_extent(fs, &fs->dev_root, devid, add_dev_extent, sum);
}

static int fix_devices(struct repair_ctx *r, uint64_t *total_bytes)
{
	struct fs_info *fs = r->fs;
	int ret = 0;

	for (unsigned i = 0; i < fs_num_devices(fs) && !ret; i++) {
		struct btrfs_key key = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, fs_device(fs, i)->devid };
		struct tree_path path;
		uint8_t *item;
		uint32_t isize;
		uint64_t sum;

		if (!fs->dev_root.bytenr || (ret = dev_extent_sum(fs, key.offset, &sum)))
			return ret;
		tree_path_init(&path);
		/* copies the path to the dev item even when nothing changes: only
		 * called when the check found a device or total_bytes problem */
		ret = trans_item_for_update(r->t, BTRFS_CHUNK_TREE_OBJECTID, &key, &item, &isize, &path);
		if (ret == 0 && !item_has_fixed(BTRFS_DEV_ITEM_KEY, isize))
			ret = fs_error(fs, -EUCLEAN, "dev item %" PRIu64 " is too small", key.offset);
		if (ret == 0 && fs_device(fs, i)->io && dev_item_total_bytes(item) > io_size(fs_device(fs, i)->io)) {
			/* the kernel mounts no device smaller than its dev item says; the dev
			 * extents end inside the device (else the class is not run) */
			uint64_t size = io_size(fs_device(fs, i)->io) / fs->sectorsize * fs->sectorsize;
			repair_say(r, "device %" PRIu64 ": total_bytes %" PRIu64 " -> %" PRIu64 " (the device's size)",
				   key.offset, dev_item_total_bytes(item), size);
			dev_item_set_total_bytes(item, size);
			r->changes++;
		}
		if (ret == 0 && dev_item_total_bytes(item) % fs->sectorsize) {
			/* as btrfs rescue fix-device-size: down to a whole sector */
			uint64_t size = dev_item_total_bytes(item) / fs->sectorsize * fs->sectorsize;
			repair_say(r, "device %" PRIu64 ": total_bytes %" PRIu64 " -> %" PRIu64 " (whole sectors)",
				   key.offset, dev_item_total_bytes(item), size);
			dev_item_set_total_bytes(item, size);
			r->changes++;
		}
		if (ret == 0) {
			*total_bytes += dev_item_total_bytes(item);
			if (dev_item_bytes_used(item) != sum) {
				repair_say(r, "device %" PRIu64 ": bytes_used %" PRIu64 " -> %" PRIu64, key.offset,
					   dev_item_bytes_used(item), sum);
				dev_item_set_bytes_used(item, sum);
				r->changes++;
			}
		}
		tree_path_release(fs, &path);
	}
	return ret;
}

int repair_block_groups_used(struct repair_ctx *r, const int64_t *adjust)
{
	uint8_t *sb = trans_super(r->t);
	uint64_t used = 0;
	int ret = fix_block_groups(r, adjust, &used);

	if (ret)
		return ret;
	if (super_bytes_used(sb) != used) {
		repair_say(r, "superblock bytes_used %" PRIu64 " -> %" PRIu64, super_bytes_used(sb), used);
		super_set_bytes_used(sb, used);
		r->changes++;
	}
	return 0;
}

int repair_space_counters(struct repair_ctx *r)
{
	const struct check_ctx *found = r->found;
	uint8_t *sb = trans_super(r->t);
	uint64_t total_bytes = 0;
	int ret = repair_block_groups_used(r, NULL);

	if (ret)
		return ret;
	if (!found->counts[PR_DEV_BYTES_USED] && !found->counts[PR_SUPER_TOTAL_BYTES] &&
	    !found->counts[PR_DEV_TOTAL_BYTES] && !found->counts[PR_SUPER_TOTAL_BYTES_LARGE] &&
	    !found->counts[PR_DEV_SIZE_UNALIGNED])
		return 0;
	ret = fix_devices(r, &total_bytes);
	if (ret)
		return ret;
	if (r->fs->missing_devices == 0 && super_total_bytes(sb) != total_bytes) {
		repair_say(r, "superblock total_bytes %" PRIu64 " -> %" PRIu64, super_total_bytes(sb), total_bytes);
		super_set_total_bytes(sb, total_bytes);
		r->changes++;
	}
	return 0;
}
