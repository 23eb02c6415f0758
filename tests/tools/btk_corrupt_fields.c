// SPDX-License-Identifier: GPL-2.0-only
/* btk-corrupt field tables: names to (offset, width) from libfs/format.h. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <btk/format.h>
#include "tests/tools/btk_corrupt_fields.h"

#define F(st, m) { #m, offsetof(st, m), sizeof(((st *)0)->m) }
#define FN(name, st, m) { name, offsetof(st, m), sizeof(((st *)0)->m) }
#define N(a) (sizeof(a) / sizeof((a)[0]))
#define END { NULL, 0, 0 }

static const struct field inode_fields[] = {
	F(struct btrfs_inode_item, generation), F(struct btrfs_inode_item, transid),
	F(struct btrfs_inode_item, size), F(struct btrfs_inode_item, nbytes),
	F(struct btrfs_inode_item, block_group), F(struct btrfs_inode_item, nlink),
	F(struct btrfs_inode_item, uid), F(struct btrfs_inode_item, gid), F(struct btrfs_inode_item, mode),
	F(struct btrfs_inode_item, rdev), F(struct btrfs_inode_item, flags),
	F(struct btrfs_inode_item, sequence), END
};
static const struct field inode_ref_fields[] = {
	F(struct btrfs_inode_ref, index), F(struct btrfs_inode_ref, name_len), END
};
static const struct field inode_extref_fields[] = {
	F(struct btrfs_inode_extref, parent_objectid), F(struct btrfs_inode_extref, index),
	F(struct btrfs_inode_extref, name_len), END
};
static const struct field dir_item_fields[] = {
	{ "location.objectid", offsetof(struct btrfs_dir_item, location), 8 },
	{ "location.type", offsetof(struct btrfs_dir_item, location) + 8, 1 },
	{ "location.offset", offsetof(struct btrfs_dir_item, location) + 9, 8 },
	F(struct btrfs_dir_item, transid), F(struct btrfs_dir_item, data_len),
	F(struct btrfs_dir_item, name_len), F(struct btrfs_dir_item, type), END
};
static const struct field file_extent_fields[] = {
	F(struct btrfs_file_extent_item, generation), F(struct btrfs_file_extent_item, ram_bytes),
	F(struct btrfs_file_extent_item, compression), F(struct btrfs_file_extent_item, encryption),
	F(struct btrfs_file_extent_item, other_encoding), F(struct btrfs_file_extent_item, type),
	F(struct btrfs_file_extent_item, disk_bytenr), F(struct btrfs_file_extent_item, disk_num_bytes),
	F(struct btrfs_file_extent_item, offset), F(struct btrfs_file_extent_item, num_bytes), END
};
static const struct field extent_fields[] = {
	F(struct btrfs_extent_item, refs), F(struct btrfs_extent_item, generation),
	F(struct btrfs_extent_item, flags), END
};
static const struct field data_ref_fields[] = {
	F(struct btrfs_extent_data_ref, root), F(struct btrfs_extent_data_ref, objectid),
	F(struct btrfs_extent_data_ref, offset), F(struct btrfs_extent_data_ref, count), END
};
static const struct field shared_data_ref_fields[] = { F(struct btrfs_shared_data_ref, count), END };
static const struct field block_group_fields[] = {
	F(struct btrfs_block_group_item, used), F(struct btrfs_block_group_item, chunk_objectid),
	F(struct btrfs_block_group_item, flags), END
};
static const struct field free_space_info_fields[] = {
	F(struct btrfs_free_space_info, extent_count), F(struct btrfs_free_space_info, flags), END
};
static const struct field dev_extent_fields[] = {
	F(struct btrfs_dev_extent, chunk_tree), F(struct btrfs_dev_extent, chunk_objectid),
	F(struct btrfs_dev_extent, chunk_offset), F(struct btrfs_dev_extent, length),
	F(struct btrfs_dev_extent, chunk_tree_uuid), END
};
static const struct field dev_item_fields[] = {
	F(struct btrfs_dev_item, devid), F(struct btrfs_dev_item, total_bytes),
	F(struct btrfs_dev_item, bytes_used), F(struct btrfs_dev_item, io_align),
	F(struct btrfs_dev_item, io_width), F(struct btrfs_dev_item, sector_size),
	F(struct btrfs_dev_item, type), F(struct btrfs_dev_item, generation),
	F(struct btrfs_dev_item, start_offset), F(struct btrfs_dev_item, uuid), F(struct btrfs_dev_item, fsid), END
};
static const struct field chunk_fields[] = {
	F(struct btrfs_chunk, length), F(struct btrfs_chunk, owner), F(struct btrfs_chunk, stripe_len),
	F(struct btrfs_chunk, type), F(struct btrfs_chunk, io_align), F(struct btrfs_chunk, io_width),
	F(struct btrfs_chunk, sector_size), F(struct btrfs_chunk, num_stripes),
	F(struct btrfs_chunk, sub_stripes), END
};
static const struct field stripe_fields[] = {
	F(struct btrfs_stripe, devid), F(struct btrfs_stripe, offset), F(struct btrfs_stripe, dev_uuid), END
};
static const struct field root_item_fields[] = {
	F(struct btrfs_root_item, generation), F(struct btrfs_root_item, root_dirid),
	F(struct btrfs_root_item, bytenr), F(struct btrfs_root_item, byte_limit),
	F(struct btrfs_root_item, bytes_used), F(struct btrfs_root_item, last_snapshot),
	F(struct btrfs_root_item, flags), F(struct btrfs_root_item, refs),
	F(struct btrfs_root_item, drop_level), F(struct btrfs_root_item, level),
	F(struct btrfs_root_item, generation_v2), F(struct btrfs_root_item, uuid),
	F(struct btrfs_root_item, parent_uuid), F(struct btrfs_root_item, received_uuid),
	F(struct btrfs_root_item, ctransid), F(struct btrfs_root_item, otransid),
	F(struct btrfs_root_item, stransid), F(struct btrfs_root_item, rtransid), END
};
static const struct field root_ref_fields[] = {
	F(struct btrfs_root_ref, dirid), F(struct btrfs_root_ref, sequence), F(struct btrfs_root_ref, name_len), END
};
static const struct field qgroup_info_fields[] = {
	F(struct btrfs_qgroup_info_item, generation), F(struct btrfs_qgroup_info_item, rfer),
	F(struct btrfs_qgroup_info_item, rfer_cmpr), F(struct btrfs_qgroup_info_item, excl),
	F(struct btrfs_qgroup_info_item, excl_cmpr), END
};
static const struct field header_fields[] = {
	FN("header.csum", struct btrfs_header, csum), FN("header.fsid", struct btrfs_header, fsid),
	FN("header.bytenr", struct btrfs_header, bytenr), FN("header.flags", struct btrfs_header, flags),
	FN("header.chunk_tree_uuid", struct btrfs_header, chunk_tree_uuid),
	FN("header.generation", struct btrfs_header, generation), FN("header.owner", struct btrfs_header, owner),
	FN("header.nritems", struct btrfs_header, nritems), FN("header.level", struct btrfs_header, level), END
};
static const struct field key_fields[] = {
	{ "key.objectid", 0, 8 }, { "key.type", 8, 1 }, { "key.offset", 9, 8 },
	{ "offset", offsetof(struct btrfs_item, offset), 4 }, { "size", offsetof(struct btrfs_item, size), 4 }, END
};
static const struct field ptr_fields[] = {
	{ "key.objectid", 0, 8 }, { "key.type", 8, 1 }, { "key.offset", 9, 8 },
	F(struct btrfs_key_ptr, blockptr), F(struct btrfs_key_ptr, generation), END
};
static const struct field super_fields[] = {
	F(struct btrfs_super_block, csum), F(struct btrfs_super_block, fsid),
	F(struct btrfs_super_block, bytenr), F(struct btrfs_super_block, flags),
	F(struct btrfs_super_block, magic), F(struct btrfs_super_block, generation),
	F(struct btrfs_super_block, root), F(struct btrfs_super_block, chunk_root),
	F(struct btrfs_super_block, log_root), F(struct btrfs_super_block, total_bytes),
	F(struct btrfs_super_block, bytes_used), F(struct btrfs_super_block, root_dir_objectid),
	F(struct btrfs_super_block, num_devices), F(struct btrfs_super_block, sectorsize),
	F(struct btrfs_super_block, nodesize), F(struct btrfs_super_block, stripesize),
	F(struct btrfs_super_block, sys_chunk_array_size), F(struct btrfs_super_block, chunk_root_generation),
	F(struct btrfs_super_block, compat_flags), F(struct btrfs_super_block, compat_ro_flags),
	F(struct btrfs_super_block, incompat_flags), F(struct btrfs_super_block, csum_type),
	F(struct btrfs_super_block, root_level), F(struct btrfs_super_block, chunk_root_level),
	F(struct btrfs_super_block, log_root_level), F(struct btrfs_super_block, label),
	F(struct btrfs_super_block, cache_generation), F(struct btrfs_super_block, uuid_tree_generation),
	F(struct btrfs_super_block, metadata_uuid), F(struct btrfs_super_block, sys_chunk_array), END
};
static const struct field backup_fields[] = {
	F(struct btrfs_root_backup, tree_root), F(struct btrfs_root_backup, tree_root_gen),
	F(struct btrfs_root_backup, chunk_root), F(struct btrfs_root_backup, chunk_root_gen),
	F(struct btrfs_root_backup, extent_root), F(struct btrfs_root_backup, extent_root_gen),
	F(struct btrfs_root_backup, fs_root), F(struct btrfs_root_backup, fs_root_gen),
	F(struct btrfs_root_backup, dev_root), F(struct btrfs_root_backup, dev_root_gen),
	F(struct btrfs_root_backup, csum_root), F(struct btrfs_root_backup, csum_root_gen),
	F(struct btrfs_root_backup, total_bytes), F(struct btrfs_root_backup, bytes_used),
	F(struct btrfs_root_backup, num_devices), F(struct btrfs_root_backup, tree_root_level),
	F(struct btrfs_root_backup, chunk_root_level), F(struct btrfs_root_backup, extent_root_level),
	F(struct btrfs_root_backup, fs_root_level), F(struct btrfs_root_backup, dev_root_level),
	F(struct btrfs_root_backup, csum_root_level), END
};

/* Item types with a fixed table, and where a trailing name starts (0: none). */
static const struct {
	uint8_t type;
	const struct field *fields;
	uint32_t name_at;
} item_tables[] = {
	{ BTRFS_INODE_ITEM_KEY, inode_fields, 0 },
	{ BTRFS_INODE_REF_KEY, inode_ref_fields, sizeof(struct btrfs_inode_ref) },
	{ BTRFS_INODE_EXTREF_KEY, inode_extref_fields, sizeof(struct btrfs_inode_extref) },
	{ BTRFS_DIR_ITEM_KEY, dir_item_fields, sizeof(struct btrfs_dir_item) },
	{ BTRFS_DIR_INDEX_KEY, dir_item_fields, sizeof(struct btrfs_dir_item) },
	{ BTRFS_XATTR_ITEM_KEY, dir_item_fields, sizeof(struct btrfs_dir_item) },
	{ BTRFS_EXTENT_DATA_KEY, file_extent_fields, 0 },
	{ BTRFS_EXTENT_ITEM_KEY, extent_fields, 0 },
	{ BTRFS_METADATA_ITEM_KEY, extent_fields, 0 },
	{ BTRFS_EXTENT_DATA_REF_KEY, data_ref_fields, 0 },
	{ BTRFS_SHARED_DATA_REF_KEY, shared_data_ref_fields, 0 },
	{ BTRFS_BLOCK_GROUP_ITEM_KEY, block_group_fields, 0 },
	{ BTRFS_FREE_SPACE_INFO_KEY, free_space_info_fields, 0 },
	{ BTRFS_DEV_EXTENT_KEY, dev_extent_fields, 0 },
	{ BTRFS_DEV_ITEM_KEY, dev_item_fields, 0 },
	{ BTRFS_CHUNK_ITEM_KEY, chunk_fields, 0 },
	{ BTRFS_ROOT_ITEM_KEY, root_item_fields, 0 },
	{ BTRFS_ROOT_REF_KEY, root_ref_fields, sizeof(struct btrfs_root_ref) },
	{ BTRFS_ROOT_BACKREF_KEY, root_ref_fields, sizeof(struct btrfs_root_ref) },
	{ BTRFS_QGROUP_INFO_KEY, qgroup_info_fields, 0 },
};

static int fail(const char **why, const char *msg, int err)
{
	*why = msg;
	return err;
}

static int table_lookup(const struct field *t, const char *name, uint32_t base, struct field_loc *out)
{
	for (; t->name; t++)
		if (!strcmp(t->name, name)) {
			*out = (struct field_loc){ base + t->off, t->width };
			return 0;
		}
	return -EINVAL;
}

/* "@OFF:WIDTH": raw bytes at an offset of the buffer. */
static int raw_field(const char *name, struct field_loc *out)
{
	char *end;
	unsigned long long off, width;

	if (name[0] != '@')
		return -EINVAL;
	off = strtoull(name + 1, &end, 0);
	if (*end != ':')
		return -EINVAL;
	width = strtoull(end + 1, &end, 0);
	if (*end || !width || off > UINT32_MAX || width > 4096)
		return -EINVAL;
	*out = (struct field_loc){ (uint32_t)off, (uint32_t)width };
	return 0;
}

/* "prefixN.rest" -> N and rest (rest may be empty for "prefixN"). */
static bool indexed(const char *name, const char *prefix, unsigned *index, const char **rest)
{
	size_t len = strlen(prefix);
	char *end;

	if (strncmp(name, prefix, len) || name[len] < '0' || name[len] > '9')
		return false;
	*index = (unsigned)strtoul(name + len, &end, 10);
	if (*end == '.')
		end++;
	else if (*end)
		return false;
	*rest = end;
	return true;
}

/* refN.{type,offset,root,parent,objectid,count} of an extent item's inline refs. */
static int inline_ref_field(uint8_t key_type, const uint8_t *data, uint32_t size, unsigned index,
			    const char *rest, struct field_loc *out, const char **why)
{
	uint32_t pos = sizeof(struct btrfs_extent_item);
	uint8_t t;

	if (size < pos)
		return fail(why, "extent item too small", -ERANGE);
	if (key_type == BTRFS_EXTENT_ITEM_KEY && (extent_flags(data) & BTRFS_EXTENT_FLAG_TREE_BLOCK))
		pos += sizeof(struct btrfs_tree_block_info);
	for (unsigned i = 0;; i++) {
		uint32_t len;
		if (pos >= size)
			return fail(why, "no such inline ref", -ERANGE);
		t = data[pos];
		len = extent_inline_ref_size(t);
		if (!len)
			return fail(why, "unknown inline ref type", -ERANGE);
		if (i == index)
			break;
		pos += len;
	}
	if (!strcmp(rest, "type"))
		*out = (struct field_loc){ pos, 1 };
	else if (t == BTRFS_EXTENT_DATA_REF_KEY)
		return table_lookup(data_ref_fields, rest, pos + 1, out) ? fail(why, "no such data ref field", -EINVAL)
									  : 0;
	else if (!strcmp(rest, "offset") || !strcmp(rest, "root") || !strcmp(rest, "parent"))
		*out = (struct field_loc){ pos + 1, 8 };
	else if (t == BTRFS_SHARED_DATA_REF_KEY && !strcmp(rest, "count"))
		*out = (struct field_loc){ pos + 9, 4 };
	else
		return fail(why, "no such inline ref field", -EINVAL);
	return 0;
}

int item_field(uint8_t type, const uint8_t *data, uint32_t size, uint16_t csum_size, const char *name,
	       struct field_loc *out, const char **why)
{
	const char *rest;
	unsigned index;
	int ret = -EINVAL;

	if (!raw_field(name, out))
		ret = 0;
	else if ((type == BTRFS_EXTENT_ITEM_KEY || type == BTRFS_METADATA_ITEM_KEY) &&
		 indexed(name, "ref", &index, &rest))
		ret = inline_ref_field(type, data, size, index, rest, out, why);
	else if (type == BTRFS_EXTENT_ITEM_KEY && !strcmp(name, "level"))
		*out = (struct field_loc){ sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_disk_key), 1 }, ret = 0;
	else if (type == BTRFS_CHUNK_ITEM_KEY && indexed(name, "stripe", &index, &rest))
		ret = table_lookup(stripe_fields, rest,
				   (uint32_t)(sizeof(struct btrfs_chunk) + index * sizeof(struct btrfs_stripe)), out);
	else if (type == BTRFS_EXTENT_CSUM_KEY && indexed(name, "csum", &index, &rest) && !*rest)
		*out = (struct field_loc){ index * csum_size, csum_size }, ret = 0;
	else if ((type == BTRFS_UUID_KEY_SUBVOL || type == BTRFS_UUID_KEY_RECEIVED_SUBVOL) &&
		 indexed(name, "subvol", &index, &rest) && !*rest)
		*out = (struct field_loc){ index * 8, 8 }, ret = 0;
	else
		for (size_t i = 0; i < N(item_tables); i++) {
			if (item_tables[i].type != type)
				continue;
			ret = table_lookup(item_tables[i].fields, name, 0, out);
			/* the name of the first entry: name_len bytes after the fixed part */
			if (ret && item_tables[i].name_at && !strcmp(name, "name") &&
			    size >= item_tables[i].name_at) {
				const struct field *nl = item_tables[i].fields;
				while (nl->name && strcmp(nl->name, "name_len"))
					nl++;
				*out = (struct field_loc){ item_tables[i].name_at, get_le16(data + nl->off) };
				ret = 0;
			}
		}
	if (ret == -EINVAL && !*why)
		*why = "no such field for this item type (see --list-fields)";
	if (!ret && (out->off > size || out->width > size - out->off))
		return fail(why, "field lies beyond the end of the item", -ERANGE);
	return ret;
}

int block_field(const uint8_t *block, uint32_t nodesize, const char *name, struct field_loc *out,
		const char **why)
{
	bool leaf = header_level(block) == 0;
	const char *rest;
	unsigned index;
	int ret;

	if (!raw_field(name, out) || !table_lookup(header_fields, name, 0, out))
		ret = 0;
	else if (leaf && indexed(name, "item", &index, &rest))
		ret = table_lookup(key_fields, rest,
				   (uint32_t)(sizeof(struct btrfs_header) + index * sizeof(struct btrfs_item)), out);
	else if (!leaf && indexed(name, "ptr", &index, &rest))
		ret = table_lookup(ptr_fields, rest,
				   (uint32_t)(sizeof(struct btrfs_header) + index * sizeof(struct btrfs_key_ptr)), out);
	else
		ret = -EINVAL;
	if (ret)
		return fail(why, "no such tree-block field (see --list-fields)", ret);
	if (out->off > nodesize || out->width > nodesize - out->off)
		return fail(why, "field lies beyond the end of the block", -ERANGE);
	return 0;
}

int super_field(const char *name, struct field_loc *out, const char **why)
{
	const char *rest;
	unsigned index;
	int ret;

	if (!raw_field(name, out) || !table_lookup(super_fields, name, 0, out))
		ret = 0;
	else if (!strncmp(name, "dev_item.", 9))
		ret = table_lookup(dev_item_fields, name + 9, offsetof(struct btrfs_super_block, dev_item), out);
	else if (indexed(name, "backup", &index, &rest) && index < BTRFS_NUM_BACKUP_ROOTS)
		ret = table_lookup(backup_fields, rest,
				   (uint32_t)(offsetof(struct btrfs_super_block, super_roots) +
					      index * sizeof(struct btrfs_root_backup)), out);
	else
		ret = -EINVAL;
	if (ret)
		return fail(why, "no such superblock field (see --list-fields)", ret);
	if (out->off > BTRFS_SUPER_INFO_SIZE || out->width > BTRFS_SUPER_INFO_SIZE - out->off)
		return fail(why, "field lies beyond the superblock", -ERANGE);
	return 0;
}

static void print_table(const char *prefix, const struct field *t)
{
	for (; t->name; t++)
		printf(" %s%s", prefix, t->name);
	printf("\n");
}

void list_fields(void)
{
	printf("superblock (--super):");
	print_table("", super_fields);
	printf("  and dev_item.*:");
	print_table("dev_item.", dev_item_fields);
	printf("  and backupN.* (N 0..3):");
	print_table("", backup_fields);
	printf("tree block (--block):");
	print_table("", header_fields);
	printf("  leaves, itemN.*:");
	print_table("", key_fields);
	printf("  nodes, ptrN.*:");
	print_table("", ptr_fields);
	printf("items (--tree/--key), every type: key.objectid key.type key.offset item.offset item.size\n");
	for (size_t i = 0; i < N(item_tables); i++) {
		printf("  type %u:", item_tables[i].type);
		print_table("", item_tables[i].fields);
		if (item_tables[i].name_at)
			printf("    and name (the first entry's name bytes)\n");
	}
	printf("  EXTENT_ITEM/METADATA_ITEM inline refs: refN.type refN.offset|root|parent, data refs "
	       "refN.root refN.objectid refN.offset refN.count, shared data refs refN.count; "
	       "EXTENT_ITEM of a tree block: level\n");
	printf("  CHUNK_ITEM: stripeN.devid stripeN.offset stripeN.dev_uuid; EXTENT_CSUM: csumN; "
	       "UUID items: subvolN\n");
	printf("anywhere: @OFF:WIDTH (WIDTH bytes at byte offset OFF)\n");
}
