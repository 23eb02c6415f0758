// SPDX-License-Identifier: LGPL-2.1-or-later
/* Chunk stripe changes for in-place profile conversion. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/blockgroups.h>
#include <btk/chunk_edit.h>
#include <btk/item_check.h>
#include "libfs/trans_internal.h"
#include "libfs/volumes_internal.h"

static bool stripe_in(const struct stripe_place *v, unsigned n, uint64_t devid, uint64_t physical)
{
	for (unsigned i = 0; i < n; i++)
		if (v[i].devid == devid && v[i].physical == physical)
			return true;
	return false;
}

static int set_block_group_flags(struct trans *t, uint64_t logical, uint64_t length, uint64_t flags)
{
	uint64_t tree = trans_block_group_tree(t);
	struct btrfs_key key = { logical, BTRFS_BLOCK_GROUP_ITEM_KEY, length };
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(t, tree, &key, &item, &size, &path);
	if (ret == 0 && !item_has_fixed(key.type, size))
		ret = -EUCLEAN;
	if (ret == 0)
		block_group_set_flags(item, flags);
	tree_path_release(t->fs, &path);
	return ret == -ENOENT ? fs_error(t->fs, -EUCLEAN, "chunk %llu has no block group item",
					 (unsigned long long)logical) : ret;
}

/* Rebuild the superblock's system chunk array with one chunk replaced. */
static int update_sys_chunk_array(struct trans *t, uint64_t logical, const uint8_t *chunk, uint32_t csize)
{
	uint8_t *sb = trans_super(t);
	uint8_t *array = super_sys_chunk_array_ptr(sb);
	uint32_t size = super_sys_chunk_array_size(sb), pos = 0, out = 0;
	uint8_t fresh[BTRFS_SYSTEM_CHUNK_ARRAY_SIZE];
	bool found = false;

	while (pos + sizeof(struct btrfs_disk_key) + sizeof(struct btrfs_chunk) <= size) {
		struct btrfs_key key;
		uint32_t isize;
		const uint8_t *src;

		key_from_disk(&key, array + pos);
		isize = (uint32_t)chunk_item_size(chunk_num_stripes(array + pos + sizeof(struct btrfs_disk_key)));
		if (pos + sizeof(struct btrfs_disk_key) + isize > size)
			return fs_error(t->fs, -EUCLEAN, "system chunk array is truncated");
		src = array + pos + sizeof(struct btrfs_disk_key);
		if (key.offset == logical) {
			src = chunk;
			found = true;
		}
		{
			uint32_t len = key.offset == logical ? csize : isize;
			if (out + sizeof(struct btrfs_disk_key) + len > sizeof(fresh))
				return fs_error(t->fs, -ENOSPC, "system chunk array would overflow");
			memcpy(fresh + out, array + pos, sizeof(struct btrfs_disk_key));
			memcpy(fresh + out + sizeof(struct btrfs_disk_key), src, len);
			out += (uint32_t)sizeof(struct btrfs_disk_key) + len;
		}
		pos += (uint32_t)sizeof(struct btrfs_disk_key) + isize;
	}
	if (!found)
		return fs_error(t->fs, -EUCLEAN, "system chunk %llu is not in the system chunk array",
				(unsigned long long)logical);
	memset(array, 0, BTRFS_SYSTEM_CHUNK_ARRAY_SIZE);
	memcpy(array, fresh, out);
	super_set_sys_chunk_array_size(sb, out);
	return 0;
}

/* Tell the allocator about the chunk's new physical layout. */
static int relayout_group(struct trans *t, const struct chunk *old, uint64_t type,
			  const struct stripe_place *stripes, unsigned n)
{
	struct chunk *c = calloc(1, sizeof(*c) + n * sizeof(c->stripes[0]));
	int ret;

	if (!c)
		return -ENOMEM;
	c->logical = old->logical;
	c->length = old->length;
	c->type = type;
	c->stripe_len = old->stripe_len;
	c->num_stripes = (uint16_t)n;
	c->sub_stripes = 1;
	for (unsigned i = 0; i < n; i++) {
		c->stripes[i].devid = stripes[i].devid;
		c->stripes[i].physical = stripes[i].physical;
	}
	ret = alloc_group_relayout(t, old, c);
	free(c);
	return ret;
}

int chunk_set_stripes(struct trans *t, uint64_t logical, uint64_t profile,
		      const struct stripe_place *stripes, unsigned n)
{
	const struct chunk *old = chunk_map_lookup(t->fs->chunks, logical);
	struct btrfs_key key = { BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, logical };
	uint8_t item[sizeof(struct btrfs_chunk) + 16 * sizeof(struct btrfs_stripe)];
	uint64_t type, stripe_len;
	uint32_t size = sizeof(item);
	struct tree_root_ptr chunk_root;
	struct stripe_place old_set[16];
	int ret;

	if (!old || old->logical != logical)
		return fs_error(t->fs, -ENOENT, "no chunk starts at %llu", (unsigned long long)logical);
	if (n == 0 || n > 16 || old->num_stripes > 16)
		return -EINVAL;
	ret = trans_get_root(t, BTRFS_CHUNK_TREE_OBJECTID, &chunk_root);
	if (!ret)
		ret = tree_lookup(t->fs, &chunk_root, &key, item, &size);
	if (ret)
		return ret;
	if (size != chunk_item_size(old->num_stripes))
		return fs_error(t->fs, -EUCLEAN, "chunk %llu item size does not match", (unsigned long long)logical);
	stripe_len = chunk_stripe_size(old->length, old->type, old->num_stripes, old->sub_stripes);
	if (chunk_stripe_size(old->length, profile, n, 1) != stripe_len)
		return fs_error(t->fs, -EINVAL, "profile change would change the stripe size");
	type = (old->type & ~BTRFS_BLOCK_GROUP_PROFILE_MASK) | profile;
	for (unsigned i = 0; i < old->num_stripes; i++)
		old_set[i] = (struct stripe_place){ old->stripes[i].devid, old->stripes[i].physical };

	/* the new item: same header, new type and stripes (uuids from the dev items) */
	chunk_set_type(item, type);
	chunk_set_num_stripes(item, (uint16_t)n);
	chunk_set_sub_stripes(item, 1);
	for (unsigned i = 0; i < n; i++) {
		uint8_t dev[sizeof(struct btrfs_dev_item)];
		uint32_t dsize = sizeof(dev);
		struct btrfs_key dkey = { BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, stripes[i].devid };
		uint8_t *s = chunk_stripe(item, i);
		ret = tree_lookup(t->fs, &chunk_root, &dkey, dev, &dsize);
		if (ret)
			return fs_error(t->fs, ret, "device %llu has no dev item", (unsigned long long)stripes[i].devid);
		stripe_set_devid(s, stripes[i].devid);
		stripe_set_offset(s, stripes[i].physical);
		memcpy(stripe_dev_uuid_ptr(s), dev_item_uuid_ptr(dev), BTRFS_UUID_SIZE);
	}
	ret = relayout_group(t, old, type, stripes, n);
	if (ret)
		return ret;
	ret = trans_update_item(t, BTRFS_CHUNK_TREE_OBJECTID, &key, item, (uint32_t)chunk_item_size(n));
	if (ret)
		return ret;
	if (type & BTRFS_BLOCK_GROUP_SYSTEM) {
		ret = update_sys_chunk_array(t, logical, item, (uint32_t)chunk_item_size(n));
		if (ret)
			return ret;
	}
	ret = set_block_group_flags(t, logical, old->length, type);
	if (ret)
		return ret;
	for (unsigned i = 0; i < old->num_stripes; i++) {
		struct btrfs_key dk = { old_set[i].devid, BTRFS_DEV_EXTENT_KEY, old_set[i].physical };
		if (stripe_in(stripes, n, old_set[i].devid, old_set[i].physical))
			continue;
		ret = trans_delete_item(t, BTRFS_DEV_TREE_OBJECTID, &dk);
		if (!ret)
			ret = device_add_bytes_used(t, old_set[i].devid, -(int64_t)stripe_len);
		if (ret)
			return ret;
	}
	for (unsigned i = 0; i < n; i++) {
		if (stripe_in(old_set, old->num_stripes, stripes[i].devid, stripes[i].physical))
			continue;
		ret = chunk_add_dev_extent(t, logical, &stripes[i], stripe_len);
		if (!ret)
			ret = device_add_bytes_used(t, stripes[i].devid, (int64_t)stripe_len);
		if (ret)
			return ret;
	}
	return 0;
}

int volumes_reload(struct fs_info *fs)
{
	int ret;

	chunk_map_free(fs->chunks);
	fs->chunks = NULL;
	ret = volumes_read_sys_chunk_array(fs);
	return ret ? ret : volumes_read_chunk_tree(fs);
}
