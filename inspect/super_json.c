// SPDX-License-Identifier: GPL-2.0-only
/* Decoding every superblock field into JSON, for `btk-inspect super`. */
#include <string.h>

#include "inspect/item_json.h"
#include "inspect/super_json.h"
#include <btk/csum.h>
#include <btk/features.h>
#include <btk/format.h>
#include <btk/key.h>
#include <btk/names.h>

#define U64(obj, name, v) json_object_object_add(obj, name, json_object_new_uint64(v))

struct json_object *hex_json(const uint8_t *bytes, size_t len)
{
	char buf[2 * 64 + 1];
	size_t n = len > 64 ? 64 : len;

	for (size_t i = 0; i < n; i++)
		snprintf(buf + 2 * i, 3, "%02x", bytes[i]);
	buf[2 * n] = 0;
	return json_object_new_string(buf);
}

struct json_object *uuid_json(const uint8_t *uuid)
{
	char s[UUID_STR_BUF];

	uuid_to_str(uuid, s);
	return json_object_new_string(s);
}

static struct json_object *dev_item_json(const uint8_t *d)
{
	struct json_object *o = json_object_new_object();

	U64(o, "devid", dev_item_devid(d));
	U64(o, "total_bytes", dev_item_total_bytes(d));
	U64(o, "bytes_used", dev_item_bytes_used(d));
	U64(o, "io_align", dev_item_io_align(d));
	U64(o, "io_width", dev_item_io_width(d));
	U64(o, "sector_size", dev_item_sector_size(d));
	U64(o, "type", dev_item_type(d));
	U64(o, "generation", dev_item_generation(d));
	U64(o, "start_offset", dev_item_start_offset(d));
	U64(o, "dev_group", dev_item_dev_group(d));
	U64(o, "seek_speed", dev_item_seek_speed(d));
	U64(o, "bandwidth", dev_item_bandwidth(d));
	json_object_object_add(o, "uuid", uuid_json(dev_item_uuid_ptr(d)));
	json_object_object_add(o, "fsid", uuid_json(dev_item_fsid_ptr(d)));
	return o;
}

static struct json_object *backup_json(const uint8_t *b)
{
	struct json_object *o = json_object_new_object();

	U64(o, "tree_root", backup_tree_root(b));
	U64(o, "tree_root_gen", backup_tree_root_gen(b));
	U64(o, "chunk_root", backup_chunk_root(b));
	U64(o, "chunk_root_gen", backup_chunk_root_gen(b));
	U64(o, "extent_root", backup_extent_root(b));
	U64(o, "extent_root_gen", backup_extent_root_gen(b));
	U64(o, "fs_root", backup_fs_root(b));
	U64(o, "fs_root_gen", backup_fs_root_gen(b));
	U64(o, "dev_root", backup_dev_root(b));
	U64(o, "dev_root_gen", backup_dev_root_gen(b));
	U64(o, "csum_root", backup_csum_root(b));
	U64(o, "csum_root_gen", backup_csum_root_gen(b));
	U64(o, "total_bytes", backup_total_bytes(b));
	U64(o, "bytes_used", backup_bytes_used(b));
	U64(o, "num_devices", backup_num_devices(b));
	U64(o, "tree_root_level", backup_tree_root_level(b));
	U64(o, "chunk_root_level", backup_chunk_root_level(b));
	U64(o, "extent_root_level", backup_extent_root_level(b));
	U64(o, "fs_root_level", backup_fs_root_level(b));
	U64(o, "dev_root_level", backup_dev_root_level(b));
	U64(o, "csum_root_level", backup_csum_root_level(b));
	return o;
}

/* The system chunk array as [{key, chunk}], stopping at anything malformed. */
static struct json_object *sys_chunks_json(const uint8_t *sb)
{
	struct json_object *arr = json_object_new_array();
	const uint8_t *a = super_sys_chunk_array_ptr(sb);
	uint32_t size = super_sys_chunk_array_size(sb), pos = 0;

	if (size > BTRFS_SYSTEM_CHUNK_ARRAY_SIZE)
		size = BTRFS_SYSTEM_CHUNK_ARRAY_SIZE;
	while (size - pos >= sizeof(struct btrfs_disk_key) + sizeof(struct btrfs_chunk)) {
		struct json_object *e = json_object_new_object(), *k = json_object_new_array();
		struct btrfs_key key;
		uint32_t isize;
		int malformed = 0;

		key_from_disk(&key, a + pos);
		pos += sizeof(struct btrfs_disk_key);
		isize = (uint32_t)chunk_item_size(chunk_num_stripes(a + pos));
		if (isize > size - pos)
			isize = size - pos;
		json_object_array_add(k, json_object_new_uint64(key.objectid));
		json_object_array_add(k, json_object_new_uint64(key.type));
		json_object_array_add(k, json_object_new_uint64(key.offset));
		json_object_object_add(e, "key", k);
		json_object_object_add(e, "chunk", item_fields_json(&key, a + pos, isize, 4,
								    BTRFS_CHUNK_TREE_OBJECTID, &malformed));
		json_object_array_add(arr, e);
		pos += isize;
		if (malformed)
			break;
	}
	return arr;
}

/* The names of the set feature bits, as dump-super -f prints them. */
static struct json_object *feature_names_json(enum feature_set set, uint64_t flags)
{
	struct json_object *a = json_object_new_array();
	const char *name;
	char buf[40];

	for (unsigned i = 0; (name = features_dump_name(set, flags, i, buf, sizeof(buf))); i++)
		json_object_array_add(a, json_object_new_string(name));
	return a;
}

struct json_object *super_to_json(const uint8_t *sb)
{
	struct json_object *o = json_object_new_object(), *backups;
	unsigned csize = csum_size(super_csum_type(sb));
	char label[BTRFS_LABEL_SIZE + 1];

	json_object_object_add(o, "csum", hex_json(super_csum_ptr(sb), csize ? csize : BTRFS_CSUM_SIZE));
	json_object_object_add(o, "fsid", uuid_json(super_fsid_ptr(sb)));
	U64(o, "bytenr", super_bytenr(sb));
	U64(o, "flags", super_flags(sb));
	U64(o, "magic", super_magic(sb));
	U64(o, "generation", super_generation(sb));
	U64(o, "root", super_root(sb));
	U64(o, "chunk_root", super_chunk_root(sb));
	U64(o, "log_root", super_log_root(sb));
	U64(o, "unused_log_root_transid", super_unused_log_root_transid(sb));
	U64(o, "total_bytes", super_total_bytes(sb));
	U64(o, "bytes_used", super_bytes_used(sb));
	U64(o, "root_dir_objectid", super_root_dir_objectid(sb));
	U64(o, "num_devices", super_num_devices(sb));
	U64(o, "sectorsize", super_sectorsize(sb));
	U64(o, "nodesize", super_nodesize(sb));
	U64(o, "unused_leafsize", super_unused_leafsize(sb));
	U64(o, "stripesize", super_stripesize(sb));
	U64(o, "sys_chunk_array_size", super_sys_chunk_array_size(sb));
	U64(o, "chunk_root_generation", super_chunk_root_generation(sb));
	U64(o, "compat_flags", super_compat_flags(sb));
	U64(o, "compat_ro_flags", super_compat_ro_flags(sb));
	U64(o, "incompat_flags", super_incompat_flags(sb));
	json_object_object_add(o, "compat_flags_names", feature_names_json(FEATURE_COMPAT, super_compat_flags(sb)));
	json_object_object_add(o, "compat_ro_flags_names",
			       feature_names_json(FEATURE_COMPAT_RO, super_compat_ro_flags(sb)));
	json_object_object_add(o, "incompat_flags_names",
			       feature_names_json(FEATURE_INCOMPAT, super_incompat_flags(sb)));
	U64(o, "csum_type", super_csum_type(sb));
	json_object_object_add(o, "csum_type_name",
			       json_object_new_string(csum_name(super_csum_type(sb)) ?: "unknown"));
	U64(o, "root_level", super_root_level(sb));
	U64(o, "chunk_root_level", super_chunk_root_level(sb));
	U64(o, "log_root_level", super_log_root_level(sb));
	json_object_object_add(o, "dev_item", dev_item_json(super_dev_item_ptr(sb)));
	memcpy(label, super_label_ptr(sb), BTRFS_LABEL_SIZE);
	label[BTRFS_LABEL_SIZE] = 0;
	json_object_object_add(o, "label", json_object_new_string(label));
	U64(o, "cache_generation", super_cache_generation(sb));
	U64(o, "uuid_tree_generation", super_uuid_tree_generation(sb));
	json_object_object_add(o, "metadata_uuid", uuid_json(super_metadata_uuid_ptr(sb)));
	U64(o, "nr_global_roots", super_nr_global_roots(sb));
	json_object_object_add(o, "sys_chunk_array", sys_chunks_json(sb));
	backups = json_object_new_array();
	for (int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++)
		json_object_array_add(backups, backup_json(super_super_roots_ptr(sb) +
							   i * sizeof(struct btrfs_root_backup)));
	json_object_object_add(o, "backup_roots", backups);
	return o;
}
