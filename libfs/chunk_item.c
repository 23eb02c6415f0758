// SPDX-License-Identifier: LGPL-2.1-or-later
/* A chunk item built from its geometry and stripes: what the chunk allocator
 * writes for a new chunk and btk-check's chunk-items repair writes for a lost
 * one. Below both (it reads only the open devices). */
#include <string.h>

#include <btk/chunk_edit.h>
#include <btk/format.h>
#include <btk/fs.h>

uint32_t chunk_item_build(const struct fs_info *fs, uint64_t length, uint64_t type,
			  const struct stripe_place *stripes, unsigned n, uint8_t *item)
{
	uint32_t size = (uint32_t)chunk_item_size(n);

	memset(item, 0, size);
	chunk_set_length(item, length);
	chunk_set_owner(item, BTRFS_EXTENT_TREE_OBJECTID);
	chunk_set_stripe_len(item, BTRFS_STRIPE_LEN);
	chunk_set_type(item, type);
	chunk_set_io_align(item, (uint32_t)BTRFS_STRIPE_LEN);
	chunk_set_io_width(item, (uint32_t)BTRFS_STRIPE_LEN);
	chunk_set_sector_size(item, fs->sectorsize);
	chunk_set_num_stripes(item, (uint16_t)n);
	chunk_set_sub_stripes(item, 1);
	for (unsigned i = 0; i < n; i++) {
		uint8_t *s = chunk_stripe(item, i);
		stripe_set_devid(s, stripes[i].devid);
		stripe_set_offset(s, stripes[i].physical);
		for (unsigned d = 0; d < fs_num_devices(fs); d++)
			if (fs_device(fs, d)->devid == stripes[i].devid)
				memcpy(stripe_dev_uuid_ptr(s), fs_device(fs, d)->uuid, BTRFS_UUID_SIZE);
	}
	return size;
}
