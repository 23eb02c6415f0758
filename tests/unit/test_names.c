// SPDX-License-Identifier: GPL-2.0-only
/* libfs/names: the names users see in dump output and type on command lines. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <btk/format.h>
#include <btk/names.h>

Test(names, key_types_match_dump_tree)
{
	static const struct {
		uint8_t type;
		const char *name;
	} expect[] = {
		{BTRFS_INODE_ITEM_KEY, "INODE_ITEM"},
		{BTRFS_INODE_REF_KEY, "INODE_REF"},
		{BTRFS_INODE_EXTREF_KEY, "INODE_EXTREF"},
		{BTRFS_XATTR_ITEM_KEY, "XATTR_ITEM"},
		{BTRFS_VERITY_DESC_ITEM_KEY, "VERITY_DESC_ITEM"},
		{BTRFS_VERITY_MERKLE_ITEM_KEY, "VERITY_MERKLE_ITEM"},
		{BTRFS_ORPHAN_ITEM_KEY, "ORPHAN_ITEM"},
		{BTRFS_DIR_LOG_ITEM_KEY, "DIR_LOG_ITEM"},
		{BTRFS_DIR_LOG_INDEX_KEY, "DIR_LOG_INDEX"},
		{BTRFS_DIR_ITEM_KEY, "DIR_ITEM"},
		{BTRFS_DIR_INDEX_KEY, "DIR_INDEX"},
		{BTRFS_EXTENT_DATA_KEY, "EXTENT_DATA"},
		{BTRFS_EXTENT_CSUM_KEY, "EXTENT_CSUM"},
		{BTRFS_ROOT_ITEM_KEY, "ROOT_ITEM"},
		{BTRFS_ROOT_BACKREF_KEY, "ROOT_BACKREF"},
		{BTRFS_ROOT_REF_KEY, "ROOT_REF"},
		{BTRFS_EXTENT_ITEM_KEY, "EXTENT_ITEM"},
		{BTRFS_METADATA_ITEM_KEY, "METADATA_ITEM"},
		{BTRFS_EXTENT_OWNER_REF_KEY, "EXTENT_OWNER_REF"},
		{BTRFS_TREE_BLOCK_REF_KEY, "TREE_BLOCK_REF"},
		{BTRFS_EXTENT_DATA_REF_KEY, "EXTENT_DATA_REF"},
		{BTRFS_SHARED_BLOCK_REF_KEY, "SHARED_BLOCK_REF"},
		{BTRFS_SHARED_DATA_REF_KEY, "SHARED_DATA_REF"},
		{BTRFS_BLOCK_GROUP_ITEM_KEY, "BLOCK_GROUP_ITEM"},
		{BTRFS_FREE_SPACE_INFO_KEY, "FREE_SPACE_INFO"},
		{BTRFS_FREE_SPACE_EXTENT_KEY, "FREE_SPACE_EXTENT"},
		{BTRFS_FREE_SPACE_BITMAP_KEY, "FREE_SPACE_BITMAP"},
		{BTRFS_DEV_EXTENT_KEY, "DEV_EXTENT"},
		{BTRFS_DEV_ITEM_KEY, "DEV_ITEM"},
		{BTRFS_CHUNK_ITEM_KEY, "CHUNK_ITEM"},
		{BTRFS_RAID_STRIPE_KEY, "RAID_STRIPE"},
		{BTRFS_QGROUP_STATUS_KEY, "QGROUP_STATUS"},
		{BTRFS_QGROUP_INFO_KEY, "QGROUP_INFO"},
		{BTRFS_QGROUP_LIMIT_KEY, "QGROUP_LIMIT"},
		{BTRFS_QGROUP_RELATION_KEY, "QGROUP_RELATION"},
		{BTRFS_TEMPORARY_ITEM_KEY, "TEMPORARY_ITEM"},
		{BTRFS_PERSISTENT_ITEM_KEY, "PERSISTENT_ITEM"},
		{BTRFS_DEV_REPLACE_KEY, "DEV_REPLACE"},
		{BTRFS_UUID_KEY_SUBVOL, "UUID_KEY_SUBVOL"},
		{BTRFS_UUID_KEY_RECEIVED_SUBVOL, "UUID_KEY_RECEIVED_SUBVOL"},
		{BTRFS_STRING_ITEM_KEY, "STRING_ITEM"},
	};

	for (size_t i = 0; i < sizeof(expect) / sizeof(expect[0]); i++) {
		cr_assert_not_null(key_type_name(expect[i].type), "type %u", expect[i].type);
		cr_assert_str_eq(key_type_name(expect[i].type), expect[i].name);
	}
	cr_assert_null(key_type_name(0));
	cr_assert_null(key_type_name(2));
	cr_assert_null(key_type_name(255));
}

Test(names, unknown_key_type_as_number)
{
	char buf[KEY_TYPE_NAME_BUF];

	cr_assert_str_eq(key_type_name_or_number(BTRFS_CHUNK_ITEM_KEY, buf), "CHUNK_ITEM");
	cr_assert_str_eq(key_type_name_or_number(0, buf), "UNKNOWN.0");
	cr_assert_str_eq(key_type_name_or_number(255, buf), "UNKNOWN.255");
}

Test(names, tree_names)
{
	cr_assert_str_eq(tree_name(BTRFS_ROOT_TREE_OBJECTID), "ROOT_TREE");
	cr_assert_str_eq(tree_name(BTRFS_EXTENT_TREE_OBJECTID), "EXTENT_TREE");
	cr_assert_str_eq(tree_name(BTRFS_CHUNK_TREE_OBJECTID), "CHUNK_TREE");
	cr_assert_str_eq(tree_name(BTRFS_DEV_TREE_OBJECTID), "DEV_TREE");
	cr_assert_str_eq(tree_name(BTRFS_FS_TREE_OBJECTID), "FS_TREE");
	cr_assert_str_eq(tree_name(BTRFS_CSUM_TREE_OBJECTID), "CSUM_TREE");
	cr_assert_str_eq(tree_name(BTRFS_QUOTA_TREE_OBJECTID), "QUOTA_TREE");
	cr_assert_str_eq(tree_name(BTRFS_UUID_TREE_OBJECTID), "UUID_TREE");
	cr_assert_str_eq(tree_name(BTRFS_FREE_SPACE_TREE_OBJECTID), "FREE_SPACE_TREE");
	cr_assert_str_eq(tree_name(BTRFS_BLOCK_GROUP_TREE_OBJECTID), "BLOCK_GROUP_TREE");
	cr_assert_str_eq(tree_name(BTRFS_RAID_STRIPE_TREE_OBJECTID), "RAID_STRIPE_TREE");
	cr_assert_str_eq(tree_name(BTRFS_DATA_RELOC_TREE_OBJECTID), "DATA_RELOC_TREE");
	cr_assert_str_eq(tree_name(BTRFS_TREE_LOG_OBJECTID), "TREE_LOG");
	cr_assert_str_eq(tree_name(BTRFS_TREE_RELOC_OBJECTID), "TREE_RELOC");
	cr_assert_null(tree_name(256), "subvolumes have no tree name");
	cr_assert_null(tree_name(BTRFS_ROOT_TREE_DIR_OBJECTID));
}

static uint64_t parse_ok(const char *s)
{
	uint64_t id = 12345;

	cr_assert_eq(tree_id_parse(s, &id), 0, "'%s' rejected", s);
	return id;
}

Test(names, tree_id_parse_names_and_numbers)
{
	cr_assert_eq(parse_ok("root"), BTRFS_ROOT_TREE_OBJECTID);
	cr_assert_eq(parse_ok("ROOT_TREE"), BTRFS_ROOT_TREE_OBJECTID);
	cr_assert_eq(parse_ok("Extent"), BTRFS_EXTENT_TREE_OBJECTID);
	cr_assert_eq(parse_ok("chunk"), BTRFS_CHUNK_TREE_OBJECTID);
	cr_assert_eq(parse_ok("dev"), BTRFS_DEV_TREE_OBJECTID);
	cr_assert_eq(parse_ok("fs"), BTRFS_FS_TREE_OBJECTID);
	cr_assert_eq(parse_ok("fs_tree"), BTRFS_FS_TREE_OBJECTID);
	cr_assert_eq(parse_ok("csum"), BTRFS_CSUM_TREE_OBJECTID);
	cr_assert_eq(parse_ok("quota"), BTRFS_QUOTA_TREE_OBJECTID);
	cr_assert_eq(parse_ok("uuid"), BTRFS_UUID_TREE_OBJECTID);
	cr_assert_eq(parse_ok("free-space"), BTRFS_FREE_SPACE_TREE_OBJECTID);
	cr_assert_eq(parse_ok("free_space"), BTRFS_FREE_SPACE_TREE_OBJECTID);
	cr_assert_eq(parse_ok("FREE_SPACE_TREE"), BTRFS_FREE_SPACE_TREE_OBJECTID);
	cr_assert_eq(parse_ok("block-group"), BTRFS_BLOCK_GROUP_TREE_OBJECTID);
	cr_assert_eq(parse_ok("block-group-tree"), BTRFS_BLOCK_GROUP_TREE_OBJECTID);
	cr_assert_eq(parse_ok("raid-stripe"), BTRFS_RAID_STRIPE_TREE_OBJECTID);
	cr_assert_eq(parse_ok("data-reloc"), BTRFS_DATA_RELOC_TREE_OBJECTID);
	cr_assert_eq(parse_ok("DATA_RELOC_TREE"), BTRFS_DATA_RELOC_TREE_OBJECTID);
	cr_assert_eq(parse_ok("log"), BTRFS_TREE_LOG_OBJECTID);
	cr_assert_eq(parse_ok("TREE_LOG"), BTRFS_TREE_LOG_OBJECTID);
	cr_assert_eq(parse_ok("reloc"), BTRFS_TREE_RELOC_OBJECTID);
	cr_assert_eq(parse_ok("5"), 5);
	cr_assert_eq(parse_ok("256"), 256);
	cr_assert_eq(parse_ok("18446744073709551615"), UINT64_MAX);
	cr_assert_eq(parse_ok("-6"), BTRFS_TREE_LOG_OBJECTID);
	cr_assert_eq(parse_ok("-9"), BTRFS_DATA_RELOC_TREE_OBJECTID);
}

Test(names, tree_id_parse_rejects)
{
	static const char *bad[] = {"", "tree", "_tree", "roots", "5x", "0x5", " 5", "-", "-1000",
				    "18446744073709551616", "free space", "extent_tree_tree"};
	uint64_t id = 77;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		cr_assert_eq(tree_id_parse(bad[i], &id), -EINVAL, "'%s' accepted", bad[i]);
	cr_assert_eq(id, 77, "output untouched on error");
	cr_assert_eq(tree_id_parse(NULL, &id), -EINVAL);
}

static const char *bg(uint64_t flags)
{
	static char buf[BG_FLAGS_STR_BUF];

	block_group_flags_str(flags, buf, sizeof(buf));
	return buf;
}

Test(names, block_group_flags)
{
	cr_assert_str_eq(bg(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1), "DATA|RAID1");
	cr_assert_str_eq(bg(BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP), "METADATA|DUP");
	cr_assert_str_eq(bg(BTRFS_BLOCK_GROUP_SYSTEM), "SYSTEM");
	cr_assert_str_eq(bg(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA), "DATA|METADATA");
	cr_assert_str_eq(bg(BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_RAID1C4), "SYSTEM|RAID1C4");
	cr_assert_str_eq(bg(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID10), "DATA|RAID10");
	cr_assert_str_eq(bg(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID6), "DATA|RAID6");
	cr_assert_str_eq(bg(BTRFS_BLOCK_GROUP_DATA | (1ULL << 40)), "DATA|0x10000000000");
	cr_assert_str_eq(bg(0), "0x0");
}

Test(names, block_group_flags_truncate_safely)
{
	char buf[6];

	memset(buf, 'x', sizeof(buf));
	block_group_flags_str(BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP, buf, sizeof(buf));
	cr_assert_str_eq(buf, "METAD");
	block_group_flags_str(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_DUP, buf, sizeof(buf));
	cr_assert_str_eq(buf, "DATA|");
}

Test(names, extent_and_dir_types)
{
	cr_assert_str_eq(compression_name(BTRFS_COMPRESS_NONE), "none");
	cr_assert_str_eq(compression_name(BTRFS_COMPRESS_ZLIB), "zlib");
	cr_assert_str_eq(compression_name(BTRFS_COMPRESS_LZO), "lzo");
	cr_assert_str_eq(compression_name(BTRFS_COMPRESS_ZSTD), "zstd");
	cr_assert_null(compression_name(4));
	cr_assert_str_eq(file_extent_type_name(BTRFS_FILE_EXTENT_INLINE), "inline");
	cr_assert_str_eq(file_extent_type_name(BTRFS_FILE_EXTENT_REG), "regular");
	cr_assert_str_eq(file_extent_type_name(BTRFS_FILE_EXTENT_PREALLOC), "prealloc");
	cr_assert_null(file_extent_type_name(3));
	cr_assert_str_eq(dir_type_name(BTRFS_FT_REG_FILE), "FILE");
	cr_assert_str_eq(dir_type_name(BTRFS_FT_DIR), "DIR");
	cr_assert_str_eq(dir_type_name(BTRFS_FT_SYMLINK), "SYMLINK");
	cr_assert_str_eq(dir_type_name(BTRFS_FT_XATTR), "XATTR");
	cr_assert_str_eq(dir_type_name(BTRFS_FT_REG_FILE | BTRFS_FT_ENCRYPTED), "FILE");
	cr_assert_null(dir_type_name(BTRFS_FT_UNKNOWN));
	cr_assert_null(dir_type_name(BTRFS_FT_MAX));
}

Test(names, uuid_lowercase_canonical)
{
	static const uint8_t uuid[16] = {0xDE, 0xAD, 0xBE, 0xEF, 0x00, 0x01, 0x02, 0x03,
					 0xA0, 0xB1, 0xC2, 0xD3, 0xE4, 0xF5, 0x06, 0x17};
	char out[UUID_STR_BUF];

	uuid_to_str(uuid, out);
	cr_assert_str_eq(out, "deadbeef-0001-0203-a0b1-c2d3e4f50617");
}

Test(names, key_type_from_name_inverts_key_type_name)
{
	uint8_t t = 0;

	for (unsigned i = 0; i < 256; i++) {
		const char *name = key_type_name((uint8_t)i);
		if (!name)
			continue;
		cr_assert_eq(key_type_from_name(name, &t), 0, "%s", name);
		cr_assert_eq(t, i, "%s", name);
	}
	cr_assert_eq(key_type_from_name("inode_item", &t), 0);
	cr_assert_eq(t, BTRFS_INODE_ITEM_KEY);
	cr_assert_eq(key_type_from_name("NO_SUCH_TYPE", &t), -EINVAL);
}
