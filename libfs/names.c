// SPDX-License-Identifier: LGPL-2.1-or-later
/* Names of on-disk constants; see names.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <btk/format.h>
#include <btk/names.h>

/* The legacy checksum item type; dump-tree still names it. */
#define LEGACY_CSUM_ITEM_KEY 120

static const char *const key_type_names[256] = {
	[BTRFS_INODE_ITEM_KEY] = "INODE_ITEM",
	[BTRFS_INODE_REF_KEY] = "INODE_REF",
	[BTRFS_INODE_EXTREF_KEY] = "INODE_EXTREF",
	[BTRFS_XATTR_ITEM_KEY] = "XATTR_ITEM",
	[BTRFS_VERITY_DESC_ITEM_KEY] = "VERITY_DESC_ITEM",
	[BTRFS_VERITY_MERKLE_ITEM_KEY] = "VERITY_MERKLE_ITEM",
	[BTRFS_ORPHAN_ITEM_KEY] = "ORPHAN_ITEM",
	[BTRFS_DIR_LOG_ITEM_KEY] = "DIR_LOG_ITEM",
	[BTRFS_DIR_LOG_INDEX_KEY] = "DIR_LOG_INDEX",
	[BTRFS_DIR_ITEM_KEY] = "DIR_ITEM",
	[BTRFS_DIR_INDEX_KEY] = "DIR_INDEX",
	[BTRFS_EXTENT_DATA_KEY] = "EXTENT_DATA",
	[LEGACY_CSUM_ITEM_KEY] = "CSUM_ITEM",
	[BTRFS_EXTENT_CSUM_KEY] = "EXTENT_CSUM",
	[BTRFS_ROOT_ITEM_KEY] = "ROOT_ITEM",
	[BTRFS_ROOT_BACKREF_KEY] = "ROOT_BACKREF",
	[BTRFS_ROOT_REF_KEY] = "ROOT_REF",
	[BTRFS_EXTENT_ITEM_KEY] = "EXTENT_ITEM",
	[BTRFS_METADATA_ITEM_KEY] = "METADATA_ITEM",
	[BTRFS_EXTENT_OWNER_REF_KEY] = "EXTENT_OWNER_REF",
	[BTRFS_TREE_BLOCK_REF_KEY] = "TREE_BLOCK_REF",
	[BTRFS_EXTENT_DATA_REF_KEY] = "EXTENT_DATA_REF",
	[BTRFS_EXTENT_REF_V0_KEY] = "EXTENT_REF_V0",
	[BTRFS_SHARED_BLOCK_REF_KEY] = "SHARED_BLOCK_REF",
	[BTRFS_SHARED_DATA_REF_KEY] = "SHARED_DATA_REF",
	[BTRFS_BLOCK_GROUP_ITEM_KEY] = "BLOCK_GROUP_ITEM",
	[BTRFS_FREE_SPACE_INFO_KEY] = "FREE_SPACE_INFO",
	[BTRFS_FREE_SPACE_EXTENT_KEY] = "FREE_SPACE_EXTENT",
	[BTRFS_FREE_SPACE_BITMAP_KEY] = "FREE_SPACE_BITMAP",
	[BTRFS_DEV_EXTENT_KEY] = "DEV_EXTENT",
	[BTRFS_DEV_ITEM_KEY] = "DEV_ITEM",
	[BTRFS_CHUNK_ITEM_KEY] = "CHUNK_ITEM",
	[BTRFS_RAID_STRIPE_KEY] = "RAID_STRIPE",
	[BTRFS_QGROUP_STATUS_KEY] = "QGROUP_STATUS",
	[BTRFS_QGROUP_INFO_KEY] = "QGROUP_INFO",
	[BTRFS_QGROUP_LIMIT_KEY] = "QGROUP_LIMIT",
	[BTRFS_QGROUP_RELATION_KEY] = "QGROUP_RELATION",
	[BTRFS_TEMPORARY_ITEM_KEY] = "TEMPORARY_ITEM",
	[BTRFS_PERSISTENT_ITEM_KEY] = "PERSISTENT_ITEM",
	[BTRFS_DEV_REPLACE_KEY] = "DEV_REPLACE",
	[BTRFS_UUID_KEY_SUBVOL] = "UUID_KEY_SUBVOL",
	[BTRFS_UUID_KEY_RECEIVED_SUBVOL] = "UUID_KEY_RECEIVED_SUBVOL",
	[BTRFS_STRING_ITEM_KEY] = "STRING_ITEM",
};

const char *key_type_name(uint8_t type)
{
	return key_type_names[type];
}

/* The key type named NAME as dump-tree prints it (case ignored): the
 * inverse of key_type_name(), for tools that take a type on the command line. */
int key_type_from_name(const char *name, uint8_t *out)
{
	for (unsigned t = 0; t < 256; t++)
		if (key_type_names[t] && !strcasecmp(key_type_names[t], name)) {
			*out = (uint8_t)t;
			return 0;
		}
	return -EINVAL;
}

const char *key_type_name_or_number(uint8_t type, char *buf)
{
	const char *name = key_type_name(type);

	if (name)
		return name;
	snprintf(buf, KEY_TYPE_NAME_BUF, "UNKNOWN.%u", (unsigned)type);
	return buf;
}

struct tree_id_name {
	uint64_t id;
	const char *name;  /* as printed */
	const char *short_name; /* as typed on a command line, '_' separated */
};

static const struct tree_id_name tree_names[] = {
	{BTRFS_ROOT_TREE_OBJECTID, "ROOT_TREE", "root"},
	{BTRFS_EXTENT_TREE_OBJECTID, "EXTENT_TREE", "extent"},
	{BTRFS_CHUNK_TREE_OBJECTID, "CHUNK_TREE", "chunk"},
	{BTRFS_DEV_TREE_OBJECTID, "DEV_TREE", "dev"},
	{BTRFS_FS_TREE_OBJECTID, "FS_TREE", "fs"},
	{BTRFS_CSUM_TREE_OBJECTID, "CSUM_TREE", "csum"},
	{BTRFS_QUOTA_TREE_OBJECTID, "QUOTA_TREE", "quota"},
	{BTRFS_UUID_TREE_OBJECTID, "UUID_TREE", "uuid"},
	{BTRFS_FREE_SPACE_TREE_OBJECTID, "FREE_SPACE_TREE", "free_space"},
	{BTRFS_BLOCK_GROUP_TREE_OBJECTID, "BLOCK_GROUP_TREE", "block_group"},
	{BTRFS_RAID_STRIPE_TREE_OBJECTID, "RAID_STRIPE_TREE", "raid_stripe"},
	{BTRFS_DATA_RELOC_TREE_OBJECTID, "DATA_RELOC_TREE", "data_reloc"},
	{BTRFS_TREE_LOG_OBJECTID, "TREE_LOG", "log"},
	{BTRFS_TREE_RELOC_OBJECTID, "TREE_RELOC", "reloc"},
};

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

const char *tree_name(uint64_t objectid)
{
	for (size_t i = 0; i < ARRAY_LEN(tree_names); i++)
		if (tree_names[i].id == objectid)
			return tree_names[i].name;
	return NULL;
}

/* Decimal tree ids; a leading '-' counts down from 2^64 as the special trees do. */
static int tree_id_parse_number(const char *s, uint64_t *out)
{
	int negative = (*s == '-');
	const char *digits = negative ? s + 1 : s;
	char *end;
	unsigned long long v;

	if (*digits < '0' || *digits > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(digits, &end, 10);
	if (errno || *end)
		return -EINVAL;
	if (negative && v > 255)
		return -EINVAL; /* only the small negative ids of special trees */
	*out = negative ? (uint64_t)0 - v : v;
	return 0;
}

/* Lowercase s into buf with '-' turned into '_', and drop a "tree_" prefix
 * ("tree_log") or "_tree" suffix ("extent_tree"). -EINVAL if it is too long. */
static int tree_name_normalize(const char *s, char *buf, size_t len)
{
	size_t n = strlen(s);

	if (n == 0 || n >= len)
		return -EINVAL;
	for (size_t i = 0; i <= n; i++) {
		char c = s[i];
		buf[i] = c == '-' ? '_' : (c >= 'A' && c <= 'Z') ? (char)(c - 'A' + 'a') : c;
	}
	if (n > 5 && strcmp(buf + n - 5, "_tree") == 0)
		buf[n - 5] = '\0';
	else if (n > 5 && strncmp(buf, "tree_", 5) == 0)
		memmove(buf, buf + 5, n - 5 + 1);
	return 0;
}

int tree_id_parse(const char *s, uint64_t *out)
{
	char buf[32];

	if (!s || !*s)
		return -EINVAL;
	if (tree_id_parse_number(s, out) == 0)
		return 0;
	if (tree_name_normalize(s, buf, sizeof(buf)) < 0)
		return -EINVAL;
	for (size_t i = 0; i < ARRAY_LEN(tree_names); i++) {
		if (strcmp(buf, tree_names[i].short_name) == 0) {
			*out = tree_names[i].id;
			return 0;
		}
	}
	return -EINVAL;
}

/* Append "|part" (or just "part" at the start) to buf, truncating safely. */
static void flags_append(char *buf, size_t len, size_t *used, const char *part)
{
	int n;

	if (*used >= len)
		return;
	n = snprintf(buf + *used, len - *used, "%s%s", *used ? "|" : "", part);
	if (n > 0)
		*used += (size_t)n;
}

void block_group_flags_str(uint64_t flags, char *buf, size_t len)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} bits[] = {
		{BTRFS_BLOCK_GROUP_DATA, "DATA"},       {BTRFS_BLOCK_GROUP_METADATA, "METADATA"},
		{BTRFS_BLOCK_GROUP_SYSTEM, "SYSTEM"},   {BTRFS_BLOCK_GROUP_RAID0, "RAID0"},
		{BTRFS_BLOCK_GROUP_RAID1, "RAID1"},     {BTRFS_BLOCK_GROUP_DUP, "DUP"},
		{BTRFS_BLOCK_GROUP_RAID10, "RAID10"},   {BTRFS_BLOCK_GROUP_RAID5, "RAID5"},
		{BTRFS_BLOCK_GROUP_RAID6, "RAID6"},     {BTRFS_BLOCK_GROUP_RAID1C3, "RAID1C3"},
		{BTRFS_BLOCK_GROUP_RAID1C4, "RAID1C4"},
	};
	uint64_t rest = flags;
	size_t used = 0;
	char hex[24];

	if (!buf || len == 0)
		return;
	buf[0] = '\0';
	for (size_t i = 0; i < ARRAY_LEN(bits); i++) {
		if (flags & bits[i].bit) {
			flags_append(buf, len, &used, bits[i].name);
			rest &= ~bits[i].bit;
		}
	}
	if (rest || used == 0) {
		snprintf(hex, sizeof(hex), "0x%llx", (unsigned long long)rest);
		flags_append(buf, len, &used, hex);
	}
}

const char *compression_name(uint8_t compression)
{
	switch (compression) {
	case BTRFS_COMPRESS_NONE: return "none";
	case BTRFS_COMPRESS_ZLIB: return "zlib";
	case BTRFS_COMPRESS_LZO: return "lzo";
	case BTRFS_COMPRESS_ZSTD: return "zstd";
	default: return NULL;
	}
}

const char *file_extent_type_name(uint8_t type)
{
	switch (type) {
	case BTRFS_FILE_EXTENT_INLINE: return "inline";
	case BTRFS_FILE_EXTENT_REG: return "regular";
	case BTRFS_FILE_EXTENT_PREALLOC: return "prealloc";
	default: return NULL;
	}
}

const char *dir_type_name(uint8_t type)
{
	static const char *const names[BTRFS_FT_MAX] = {
		[BTRFS_FT_REG_FILE] = "FILE",  [BTRFS_FT_DIR] = "DIR",
		[BTRFS_FT_CHRDEV] = "CHRDEV",  [BTRFS_FT_BLKDEV] = "BLKDEV",
		[BTRFS_FT_FIFO] = "FIFO",      [BTRFS_FT_SOCK] = "SOCK",
		[BTRFS_FT_SYMLINK] = "SYMLINK", [BTRFS_FT_XATTR] = "XATTR",
	};
	uint8_t ft = type & (uint8_t)~BTRFS_FT_ENCRYPTED;

	return ft < BTRFS_FT_MAX ? names[ft] : NULL;
}

void uuid_to_str(const uint8_t uuid[16], char out[UUID_STR_BUF])
{
	static const char hexdigits[] = "0123456789abcdef";
	size_t o = 0;

	for (int i = 0; i < 16; i++) {
		if (i == 4 || i == 6 || i == 8 || i == 10)
			out[o++] = '-';
		out[o++] = hexdigits[uuid[i] >> 4];
		out[o++] = hexdigits[uuid[i] & 0xf];
	}
	out[o] = '\0';
}
