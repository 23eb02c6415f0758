// SPDX-License-Identifier: GPL-2.0-only
/* Whether a device place holds a chunk: the one witness a stripe and a dev
 * extent that disagree on where the chunk lies cannot forge is the chunk's
 * own contents. A tree block the extent tree records in the chunk verifies
 * (checksum, bytenr) only where the chunk is; a data sector the csum tree
 * covers matches its checksum only there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "check/chunk_place_data.h"
#include <btk/block.h>
#include <btk/csum.h>
#include <btk/format.h>
#include <btk/io.h>
#include <btk/tree.h>

struct io_dev *device_io_by_id(struct fs_info *fs, uint64_t devid)
{
	for (unsigned i = 0; i < fs_num_devices(fs); i++)
		if (fs_device(fs, i)->devid == devid)
			return fs_device(fs, i)->io;
	return NULL;
}

/* The first item of tree root in [min, max] with type in want (0 ends it):
 * 1 with *key (and *data copied, up to cap bytes), 0 none, -errno. */
static int first_item(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *min,
		      const struct btrfs_key *max, const uint8_t *want, struct btrfs_key *key, uint8_t *data,
		      uint32_t cap)
{
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	int ret;

	if (!root->bytenr)
		return 0;
	tree_iter_init(&it, fs, root, min, max);
	while ((ret = tree_iter_next(&it, key, &d, &size)) == 1) {
		bool hit = false;
		for (const uint8_t *w = want; *w && !hit; w++)
			hit = key->type == *w;
		if (!hit)
			continue;
		if (key->type != BTRFS_EXTENT_CSUM_KEY &&
		    (size < sizeof(struct btrfs_extent_item) || !(extent_flags(d) & BTRFS_EXTENT_FLAG_TREE_BLOCK)))
			continue;
		memcpy(data, d, size < cap ? size : cap);
		break;
	}
	tree_iter_release(&it);
	return ret;
}

int chunk_place_holds_data(struct fs_info *fs, const struct chunk *c, uint64_t devid, uint64_t physical)
{
	static const uint8_t tree_types[] = { BTRFS_METADATA_ITEM_KEY, BTRFS_EXTENT_ITEM_KEY, 0 };
	static const uint8_t csum_types[] = { BTRFS_EXTENT_CSUM_KEY, 0 };
	struct btrfs_key min = { c->logical, 0, 0 }, max = { c->logical + c->length - 1, 255, (uint64_t)-1 }, key;
	struct io_dev *io = device_io_by_id(fs, devid);
	uint8_t item[sizeof(struct btrfs_extent_item) + BTRFS_CSUM_SIZE], sum[BTRFS_CSUM_SIZE];
	uint8_t *buf;
	int ret, found = -1;

	if (!io || (c->type & (BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID10 | BTRFS_BLOCK_GROUP_RAID5 |
			       BTRFS_BLOCK_GROUP_RAID6)))
		return -1;
	if (!(buf = malloc(fs->nodesize > fs->sectorsize ? fs->nodesize : fs->sectorsize)))
		return -1;
	if (!(c->type & BTRFS_BLOCK_GROUP_DATA) || (c->type & BTRFS_BLOCK_GROUP_METADATA)) {
		ret = first_item(fs, &fs->extent_root, &min, &max, tree_types, &key, item, sizeof(item));
		if (ret == 1 && io_read(io, buf, fs->nodesize, physical + (key.objectid - c->logical)) == 0)
			found = block_verify(fs, key.objectid, buf, NULL) == BLOCK_OK;
	}
	if (found < 0 && (c->type & BTRFS_BLOCK_GROUP_DATA)) {
		min = (struct btrfs_key){ BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, c->logical };
		max = (struct btrfs_key){ BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, c->logical + c->length - 1 };
		ret = first_item(fs, &fs->csum_root, &min, &max, csum_types, &key, item, fs->csum_size);
		if (ret == 1 && io_read(io, buf, fs->sectorsize, physical + (key.offset - c->logical)) == 0 &&
		    csum_compute(fs->csum_type, buf, fs->sectorsize, sum) == 0)
			found = memcmp(sum, item, fs->csum_size) == 0;
	}
	btk_error_clear();
	free(buf);
	return found;
}
