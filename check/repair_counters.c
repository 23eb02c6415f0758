/* Space counters recomputed in one transaction: each block group's `used`
 * from the extent items it holds, the superblock's bytes_used from those,
 * each device's bytes_used from its dev extents, the superblock's
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
#include "libfs/blockgroups.h"
#include "libfs/super.h"
#include "libfs/tree.h"

/* Bytes of extent items per block group (groups sorted by start). */
static int sum_extents(struct fs_info *fs, const struct block_group_list *bgs, uint64_t *sums)
{
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	size_t g = 0;
	int ret;

	tree_iter_init(&it, fs, &fs->extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		uint64_t len = extent_key_length(&key, fs->nodesize);
		if (!len)
			continue;
		while (g < bgs->count && bgs->groups[g].start + bgs->groups[g].length <= key.objectid)
			g++;
		if (g == bgs->count || key.objectid < bgs->groups[g].start ||
		    len > bgs->groups[g].start + bgs->groups[g].length - key.objectid) {
			ret = fs_error(fs, -EUCLEAN, "extent %" PRIu64 "+%" PRIu64 " lies outside every block group",
				       key.objectid, len);
			break;
		}
		sums[g] += len;
	}
	tree_iter_release(&it);
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
		if (ret == 0 && isize < sizeof(struct btrfs_block_group_item))
			ret = fs_error(fs, -EUCLEAN, "block group item %" PRIu64 " is too small", key.objectid);
		if (ret == 0)
			block_group_set_used(item, sums[i]);
		tree_path_release(fs, &path);
	}
	free(sums);
	block_group_list_free(&bgs);
	return ret;
}

/* Sum of the dev extents of one device. */
static int dev_extent_sum(struct fs_info *fs, uint64_t devid, uint64_t *sum)
{
	struct btrfs_key min = { devid, BTRFS_DEV_EXTENT_KEY, 0 }, max = { devid, BTRFS_DEV_EXTENT_KEY, (uint64_t)-1 };
	struct btrfs_key key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	int ret;

	*sum = 0;
	tree_iter_init(&it, fs, &fs->dev_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1)
		if (size >= sizeof(struct btrfs_dev_extent))
			*sum += dev_extent_length(data);
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

static int fix_devices(struct repair_ctx *r, uint64_t *total_bytes)
{
	struct fs_info *fs = r->fs;
	int ret = 0;

	for (unsigned i = 0; i < fs->num_devices && !ret; i++) {
		struct btrfs_key key = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, fs->devices[i].devid };
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
		if (ret == 0 && isize < sizeof(struct btrfs_dev_item))
			ret = fs_error(fs, -EUCLEAN, "dev item %" PRIu64 " is too small", key.offset);
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
	if (!found->counts[PR_DEV_BYTES_USED] && !found->counts[PR_SUPER_TOTAL_BYTES])
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
