// SPDX-License-Identifier: LGPL-2.1-or-later
/* Device space for chunks: the first free gap on a device, a stripe's dev
 * extent and the device's bytes_used. Shared by the chunk allocator of a
 * transaction (chunk_alloc.c) and the stripe changes of a conversion
 * (chunk_edit.c), below both. */
#include <errno.h>
#include <string.h>

#include <btk/chunk_edit.h>
#include <btk/item_check.h>
#include "libfs/trans_internal.h"

int device_add_bytes_used(struct trans *t, uint64_t devid, int64_t delta)
{
	struct btrfs_key key = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, devid };
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(t, BTRFS_CHUNK_TREE_OBJECTID, &key, &item, &size, &path);
	if (ret == 0 && !item_has_fixed(key.type, size))
		ret = -EUCLEAN;
	if (ret == 0)
		dev_item_set_bytes_used(item, dev_item_bytes_used(item) + (uint64_t)delta);
	tree_path_release(t->fs, &path);
	return ret == -ENOENT ? fs_error(t->fs, -EUCLEAN, "device %llu has no dev item",
					 (unsigned long long)devid) : ret;
}

int chunk_add_dev_extent(struct trans *t, uint64_t logical, const struct stripe_place *s, uint64_t len)
{
	uint8_t item[sizeof(struct btrfs_dev_extent)];
	struct btrfs_key key = { s->devid, BTRFS_DEV_EXTENT_KEY, s->physical };

	dev_extent_set_chunk_tree(item, BTRFS_CHUNK_TREE_OBJECTID);
	dev_extent_set_chunk_objectid(item, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	dev_extent_set_chunk_offset(item, logical);
	dev_extent_set_length(item, len);
	memcpy(dev_extent_chunk_tree_uuid_ptr(item), t->chunk_tree_uuid, BTRFS_UUID_SIZE);
	return trans_insert_item(t, BTRFS_DEV_TREE_OBJECTID, &key, item, sizeof(item));
}

struct free_search {
	uint64_t devid, len, dev_size;
	const struct stripe_place *avoid;
	const uint64_t *avoid_len;
	unsigned navoid;
	uint64_t pos; /* the lowest place still possible */
};

/* Does len fit at pos before next_start, once pos has stepped over what
 * `avoid` and the superblock copies take? */
static bool free_gap_fits(struct free_search *f, uint64_t next_start)
{
	bool moved;

	do {
		moved = false;
		for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
			uint64_t sb = btrfs_super_offset(m);
			if (sb < f->pos + f->len && sb + BTRFS_SUPER_INFO_SIZE > f->pos) {
				f->pos = (sb + BTRFS_SUPER_INFO_SIZE + (1ULL << 20) - 1) & ~((1ULL << 20) - 1);
				moved = true;
			}
		}
		for (unsigned i = 0; i < f->navoid; i++) {
			if (f->avoid[i].devid != f->devid)
				continue;
			if (f->avoid[i].physical < f->pos + f->len && f->avoid[i].physical + f->avoid_len[i] > f->pos) {
				f->pos = f->avoid[i].physical + f->avoid_len[i];
				moved = true;
			}
		}
	} while (moved);
	return f->pos + f->len <= next_start;
}

/* The gap before one dev extent: 1 when len fits there. */
static int free_before_extent(void *arg, const struct btrfs_key *key, const uint8_t *data, uint32_t size)
{
	struct free_search *f = arg;
	struct item_view v = item_view_of(data, size);
	uint64_t next_start = f->dev_size, next_end = f->dev_size;

	if (item_view_has_fixed(&v, key->type)) {
		next_start = key->offset;
		next_end = key->offset + dev_extent_length(data);
	}
	if (free_gap_fits(f, next_start))
		return 1;
	if (next_end > f->pos)
		f->pos = next_end;
	return 0;
}

int device_find_free(struct fs_info *fs, uint64_t devid, uint64_t len, const struct stripe_place *avoid,
		     const uint64_t *avoid_len, unsigned navoid, uint64_t *physical)
{
	struct free_search f = { devid, len, 0, avoid, avoid_len, navoid, 1ULL << 20 };
	int ret;

	for (unsigned i = 0; i < fs->num_devices; i++)
		if (fs->devices[i].devid == devid)
			f.dev_size = fs->devices[i].total_bytes;
	ret = volumes_each_dev_extent(fs, &fs->dev_root, devid, free_before_extent, &f);
	if (ret < 0)
		return ret;
	if (ret == 0 && !free_gap_fits(&f, f.dev_size))
		return -ENOSPC;
	*physical = f.pos;
	return 0;
}
