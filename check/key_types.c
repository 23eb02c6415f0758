// SPDX-License-Identifier: GPL-2.0-only
/* Which key types each tree holds (see key_types.h). */
#include <stddef.h>

#include "check/key_types.h"
#include <btk/format.h>

#define FSCRYPT_INODE_CTX_KEY 41
#define FSCRYPT_CTX_KEY 42
#define FREE_SPACE_HEADER_KEY 0   /* a v1 free-space cache's header, in the root tree */

bool key_type_in_subvolume(uint8_t type)
{
	switch (type) {
	case BTRFS_INODE_ITEM_KEY:
	case BTRFS_INODE_REF_KEY:
	case BTRFS_INODE_EXTREF_KEY:
	case BTRFS_XATTR_ITEM_KEY:
	case BTRFS_VERITY_DESC_ITEM_KEY:
	case BTRFS_VERITY_MERKLE_ITEM_KEY:
	case FSCRYPT_INODE_CTX_KEY:
	case FSCRYPT_CTX_KEY:
	case BTRFS_ORPHAN_ITEM_KEY:
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY:
	case BTRFS_EXTENT_DATA_KEY:
		return true;
	default:
		return false;
	}
}

static const uint8_t root_tree[] = {
	FREE_SPACE_HEADER_KEY, BTRFS_INODE_ITEM_KEY, BTRFS_INODE_REF_KEY, BTRFS_INODE_EXTREF_KEY,
	BTRFS_XATTR_ITEM_KEY, BTRFS_ORPHAN_ITEM_KEY, BTRFS_DIR_ITEM_KEY, BTRFS_DIR_INDEX_KEY,
	BTRFS_EXTENT_DATA_KEY, BTRFS_ROOT_ITEM_KEY, BTRFS_ROOT_BACKREF_KEY, BTRFS_ROOT_REF_KEY,
	BTRFS_TEMPORARY_ITEM_KEY, BTRFS_PERSISTENT_ITEM_KEY, 0xff,
};
static const uint8_t extent_tree[] = {
	BTRFS_EXTENT_ITEM_KEY, BTRFS_METADATA_ITEM_KEY, BTRFS_EXTENT_OWNER_REF_KEY, BTRFS_TREE_BLOCK_REF_KEY,
	BTRFS_EXTENT_DATA_REF_KEY, BTRFS_EXTENT_REF_V0_KEY, BTRFS_SHARED_BLOCK_REF_KEY, BTRFS_SHARED_DATA_REF_KEY,
	BTRFS_BLOCK_GROUP_ITEM_KEY, 0xff,
};
static const uint8_t chunk_tree[] = { BTRFS_DEV_ITEM_KEY, BTRFS_CHUNK_ITEM_KEY, 0xff };
static const uint8_t dev_tree[] = { BTRFS_DEV_EXTENT_KEY, BTRFS_PERSISTENT_ITEM_KEY, BTRFS_DEV_REPLACE_KEY, 0xff };
static const uint8_t csum_tree[] = { BTRFS_EXTENT_CSUM_KEY, 0xff };
static const uint8_t quota_tree[] = {
	BTRFS_QGROUP_STATUS_KEY, BTRFS_QGROUP_INFO_KEY, BTRFS_QGROUP_LIMIT_KEY, BTRFS_QGROUP_RELATION_KEY, 0xff,
};
static const uint8_t uuid_tree[] = { BTRFS_UUID_KEY_SUBVOL, BTRFS_UUID_KEY_RECEIVED_SUBVOL, 0xff };
static const uint8_t free_space_tree[] = {
	BTRFS_FREE_SPACE_INFO_KEY, BTRFS_FREE_SPACE_EXTENT_KEY, BTRFS_FREE_SPACE_BITMAP_KEY, 0xff,
};
static const uint8_t block_group_tree[] = { BTRFS_BLOCK_GROUP_ITEM_KEY, 0xff };
static const uint8_t raid_stripe_tree[] = { BTRFS_RAID_STRIPE_KEY, 0xff };

static const uint8_t *tree_types(uint64_t tree)
{
	switch (tree) {
	case BTRFS_ROOT_TREE_OBJECTID: return root_tree;
	case BTRFS_EXTENT_TREE_OBJECTID: return extent_tree;
	case BTRFS_CHUNK_TREE_OBJECTID: return chunk_tree;
	case BTRFS_DEV_TREE_OBJECTID: return dev_tree;
	case BTRFS_CSUM_TREE_OBJECTID: return csum_tree;
	case BTRFS_QUOTA_TREE_OBJECTID: return quota_tree;
	case BTRFS_UUID_TREE_OBJECTID: return uuid_tree;
	case BTRFS_FREE_SPACE_TREE_OBJECTID: return free_space_tree;
	case BTRFS_BLOCK_GROUP_TREE_OBJECTID: return block_group_tree;
	case BTRFS_RAID_STRIPE_TREE_OBJECTID: return raid_stripe_tree;
	default: return NULL;
	}
}

int key_type_in_tree(uint64_t tree, uint8_t type)
{
	const uint8_t *t = tree_types(tree);

	if (!t)
		return -1;
	/* (0xff ends a list: no tree holds that type) */
	for (; *t != 0xff; t++)
		if (*t == type)
			return 1;
	return 0;
}
