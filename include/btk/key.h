/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Keys in CPU byte order, and their ordering. */
#ifndef BTK_KEY_H
#define BTK_KEY_H

#include <stdbool.h>
#include <stdint.h>
#include <btk/format.h>

struct btrfs_key {
	uint64_t objectid;
	uint8_t type;
	uint64_t offset;
};

static inline void key_from_disk(struct btrfs_key *key, const void *disk)
{
	key->objectid = disk_key_objectid(disk);
	key->type = disk_key_type(disk);
	key->offset = disk_key_offset(disk);
}

static inline void key_to_disk(void *disk, const struct btrfs_key *key)
{
	disk_key_set_objectid(disk, key->objectid);
	disk_key_set_type(disk, key->type);
	disk_key_set_offset(disk, key->offset);
}

/* Total order of btrfs keys: objectid, then type, then offset. */
static inline int key_compare(const struct btrfs_key *a, const struct btrfs_key *b)
{
	if (a->objectid != b->objectid)
		return a->objectid < b->objectid ? -1 : 1;
	if (a->type != b->type)
		return a->type < b->type ? -1 : 1;
	if (a->offset != b->offset)
		return a->offset < b->offset ? -1 : 1;
	return 0;
}

/* The bytes an extent-tree key allocates: key.offset for an EXTENT_ITEM,
 * nodesize for a (skinny) METADATA_ITEM, 0 for any other item. */
/* The top-level tree or a subvolume/snapshot tree (not the data reloc tree). */
static inline bool key_is_subvolume_id(uint64_t id)
{
	return id == BTRFS_FS_TREE_OBJECTID || (id >= BTRFS_FIRST_FREE_OBJECTID && id <= BTRFS_LAST_FREE_OBJECTID);
}

/* A tree whose blocks no other root shares (neither snapshots nor relocation
 * copy it): every block's owner is the tree itself. */
static inline bool key_tree_never_shared(uint64_t id)
{
	return !key_is_subvolume_id(id) && id != BTRFS_TREE_RELOC_OBJECTID && id != BTRFS_DATA_RELOC_TREE_OBJECTID;
}

static inline uint64_t extent_key_length(const struct btrfs_key *key, uint32_t nodesize)
{
	if (key->type == BTRFS_EXTENT_ITEM_KEY)
		return key->offset;
	return key->type == BTRFS_METADATA_ITEM_KEY ? nodesize : 0;
}

#endif
