// SPDX-License-Identifier: GPL-2.0-only
/* item_fields_json: every item type decodes to the documented fields, and a
 * short or garbled item is flagged malformed without reading past its end. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

/* The unit-test link line carries libfs and common only, so the decoder
 * under test is compiled in here. */
#include "inspect/item_json.c"
#include <btk/format.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

static struct json_object *field(struct json_object *obj, const char *name)
{
	struct json_object *v = NULL;

	cr_assert(json_object_object_get_ex(obj, name, &v), "missing field %s in %s", name,
		  json_object_to_json_string(obj));
	return v;
}

static uint64_t u64(struct json_object *obj, const char *name)
{
	struct json_object *v = field(obj, name);

	cr_assert(json_object_is_type(v, json_type_int), "%s is not an integer", name);
	return json_object_get_uint64(v);
}

static const char *str(struct json_object *obj, const char *name)
{
	struct json_object *v = field(obj, name);

	cr_assert(json_object_is_type(v, json_type_string), "%s is not a string", name);
	return json_object_get_string(v);
}

static int has(struct json_object *obj, const char *name)
{
	return json_object_object_get_ex(obj, name, NULL);
}

static struct json_object *idx(struct json_object *arr, size_t i)
{
	cr_assert(json_object_is_type(arr, json_type_array));
	cr_assert_lt(i, json_object_array_length(arr));
	return json_object_array_get_idx(arr, i);
}

static void assert_key(struct json_object *arr, uint64_t objectid, uint8_t type, uint64_t offset)
{
	cr_assert_eq(json_object_array_length(arr), 3);
	cr_assert_eq(json_object_get_uint64(idx(arr, 0)), objectid);
	cr_assert_eq(json_object_get_uint64(idx(arr, 1)), type);
	cr_assert_eq(json_object_get_uint64(idx(arr, 2)), offset);
}

/* Decode and require a well-formed item. */
static struct json_object *decode_ok(uint64_t objectid, uint8_t type, uint64_t offset, const void *data,
				     uint32_t size, uint64_t owner)
{
	struct btrfs_key key = {objectid, type, offset};
	int malformed = -1;
	struct json_object *obj = item_fields_json(&key, data, size, 4, owner, &malformed);

	cr_assert_not_null(obj);
	cr_assert_eq(malformed, 0, "type %u size %u flagged malformed: %s", type, size,
		     json_object_to_json_string(obj));
	return obj;
}

static const uint8_t uuid_a[16] = {0x01, 0x23, 0x45, 0x67, 0x89, 0xab, 0xcd, 0xef,
				   0xfe, 0xdc, 0xba, 0x98, 0x76, 0x54, 0x32, 0x10};
static const char uuid_a_str[] = "01234567-89ab-cdef-fedc-ba9876543210";

static size_t build_inode(uint8_t *p)
{
	memset(p, 0, sizeof(struct btrfs_inode_item));
	inode_set_generation(p, 7);
	inode_set_transid(p, 8);
	inode_set_size(p, UINT64_MAX);
	inode_set_nbytes(p, 16384);
	inode_set_block_group(p, 3);
	inode_set_nlink(p, 2);
	inode_set_uid(p, 1000);
	inode_set_gid(p, 100);
	inode_set_mode(p, 040755);
	inode_set_rdev(p, 9);
	inode_set_flags(p, BTRFS_INODE_NODATASUM);
	inode_set_sequence(p, 11);
	timespec_set_sec(inode_atime_ptr(p), 1700000000);
	timespec_set_nsec(inode_atime_ptr(p), 5);
	timespec_set_sec(inode_ctime_ptr(p), 1700000001);
	timespec_set_sec(inode_mtime_ptr(p), 1700000002);
	timespec_set_sec(inode_otime_ptr(p), 1700000003);
	timespec_set_nsec(inode_otime_ptr(p), 999999999);
	return sizeof(struct btrfs_inode_item);
}

static void check_inode(struct json_object *o)
{
	cr_assert_eq(u64(o, "generation"), 7);
	cr_assert_eq(u64(o, "transid"), 8);
	cr_assert_eq(u64(o, "size"), UINT64_MAX);
	cr_assert_eq(u64(o, "nbytes"), 16384);
	cr_assert_eq(u64(o, "block_group"), 3);
	cr_assert_eq(u64(o, "nlink"), 2);
	cr_assert_eq(u64(o, "uid"), 1000);
	cr_assert_eq(u64(o, "gid"), 100);
	cr_assert_eq(u64(o, "mode"), 040755);
	cr_assert_eq(u64(o, "rdev"), 9);
	cr_assert_eq(u64(o, "flags"), BTRFS_INODE_NODATASUM);
	cr_assert_eq(u64(o, "sequence"), 11);
	cr_assert_eq(u64(field(o, "atime"), "sec"), 1700000000);
	cr_assert_eq(u64(field(o, "atime"), "nsec"), 5);
	cr_assert_eq(u64(field(o, "ctime"), "sec"), 1700000001);
	cr_assert_eq(u64(field(o, "mtime"), "sec"), 1700000002);
	cr_assert_eq(u64(field(o, "otime"), "nsec"), 999999999);
	cr_assert(!has(o, "reserved"));
}

Test(item_json, inode_item)
{
	uint8_t buf[sizeof(struct btrfs_inode_item)];
	size_t n = build_inode(buf);
	struct json_object *o = decode_ok(257, BTRFS_INODE_ITEM_KEY, 0, buf, n, 5);

	check_inode(o);
	/* The full 64-bit value survives serialization. */
	cr_assert_not_null(strstr(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN),
				  "\"size\":18446744073709551615"));
	json_object_put(o);
}

/* Append one dir item entry; returns the bytes written. */
static size_t put_dir_entry(uint8_t *p, uint64_t ino, uint8_t ftype, const char *name, const char *data)
{
	size_t name_len = strlen(name), data_len = data ? strlen(data) : 0;
	struct btrfs_key loc = {ino, BTRFS_INODE_ITEM_KEY, 0};

	memset(p, 0, sizeof(struct btrfs_dir_item));
	key_to_disk(dir_item_location_ptr(p), &loc);
	dir_item_set_transid(p, 42);
	dir_item_set_data_len(p, (uint16_t)data_len);
	dir_item_set_name_len(p, (uint16_t)name_len);
	dir_item_set_type(p, ftype);
	memcpy(p + sizeof(struct btrfs_dir_item), name, name_len);
	if (data_len)
		memcpy(p + sizeof(struct btrfs_dir_item) + name_len, data, data_len);
	return sizeof(struct btrfs_dir_item) + name_len + data_len;
}

Test(item_json, dir_item_two_entries)
{
	uint8_t buf[256];
	size_t n = put_dir_entry(buf, 257, BTRFS_FT_REG_FILE, "foo", NULL);
	struct json_object *o, *entries, *e;

	n += put_dir_entry(buf + n, 258, BTRFS_FT_DIR, "bar.d", NULL);
	o = decode_ok(256, BTRFS_DIR_ITEM_KEY, 12345, buf, (uint32_t)n, 5);
	entries = field(o, "entries");
	cr_assert_eq(json_object_array_length(entries), 2);
	e = idx(entries, 0);
	assert_key(field(e, "location"), 257, BTRFS_INODE_ITEM_KEY, 0);
	cr_assert_eq(u64(e, "transid"), 42);
	cr_assert_eq(u64(e, "data_len"), 0);
	cr_assert_eq(u64(e, "name_len"), 3);
	cr_assert_eq(u64(e, "type"), BTRFS_FT_REG_FILE);
	cr_assert_str_eq(str(e, "name"), "foo");
	cr_assert(!has(e, "data_hex"));
	e = idx(entries, 1);
	assert_key(field(e, "location"), 258, BTRFS_INODE_ITEM_KEY, 0);
	cr_assert_eq(u64(e, "type"), BTRFS_FT_DIR);
	cr_assert_str_eq(str(e, "name"), "bar.d");
	json_object_put(o);
}

Test(item_json, dir_index_with_two_entries_is_malformed)
{
	uint8_t buf[256];
	size_t n = put_dir_entry(buf, 257, BTRFS_FT_REG_FILE, "foo", NULL);
	struct btrfs_key key = {256, BTRFS_DIR_INDEX_KEY, 2};
	int malformed = 0;
	struct json_object *o;

	n += put_dir_entry(buf + n, 258, BTRFS_FT_REG_FILE, "bar", NULL);
	o = item_fields_json(&key, buf, (uint32_t)n, 4, 5, &malformed);
	cr_assert_eq(malformed, 1);
	cr_assert_eq(json_object_array_length(field(o, "entries")), 2);
	json_object_put(o);
}

Test(item_json, xattr_value_and_binary_name)
{
	uint8_t buf[512];
	char big[100];
	size_t n = put_dir_entry(buf, 0, BTRFS_FT_XATTR, "user.a", "hi");
	struct json_object *o, *e;

	memset(big, 'v', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	n += put_dir_entry(buf + n, 0, BTRFS_FT_XATTR, "user.\xff", big);
	o = decode_ok(257, BTRFS_XATTR_ITEM_KEY, 99, buf, (uint32_t)n, 5);
	e = idx(field(o, "entries"), 0);
	cr_assert_str_eq(str(e, "name"), "user.a");
	cr_assert_eq(u64(e, "data_len"), 2);
	cr_assert_str_eq(str(e, "data_hex"), "6869");
	e = idx(field(o, "entries"), 1);
	cr_assert(!has(e, "name"));
	cr_assert_str_eq(str(e, "name_hex"), "757365722eff");
	cr_assert_eq(u64(e, "data_len"), 99);
	cr_assert(!has(e, "data_hex"), "values over 64 bytes are not dumped");
	json_object_put(o);
}

Test(item_json, inode_refs_and_extrefs)
{
	uint8_t buf[128];
	size_t n = 0;
	struct json_object *o, *r;

	inode_ref_set_index(buf, 2);
	inode_ref_set_name_len(buf, 3);
	memcpy(buf + sizeof(struct btrfs_inode_ref), "abc", 3);
	n = sizeof(struct btrfs_inode_ref) + 3;
	inode_ref_set_index(buf + n, 3);
	inode_ref_set_name_len(buf + n, 1);
	memcpy(buf + n + sizeof(struct btrfs_inode_ref), "z", 1);
	n += sizeof(struct btrfs_inode_ref) + 1;
	o = decode_ok(257, BTRFS_INODE_REF_KEY, 256, buf, (uint32_t)n, 5);
	cr_assert_eq(json_object_array_length(field(o, "refs")), 2);
	r = idx(field(o, "refs"), 0);
	cr_assert_eq(u64(r, "index"), 2);
	cr_assert_eq(u64(r, "name_len"), 3);
	cr_assert_str_eq(str(r, "name"), "abc");
	cr_assert_str_eq(str(idx(field(o, "refs"), 1), "name"), "z");
	json_object_put(o);

	inode_extref_set_parent_objectid(buf, 300);
	inode_extref_set_index(buf, 5);
	inode_extref_set_name_len(buf, 2);
	memcpy(buf + sizeof(struct btrfs_inode_extref), "xy", 2);
	o = decode_ok(257, BTRFS_INODE_EXTREF_KEY, 77, buf, sizeof(struct btrfs_inode_extref) + 2, 5);
	r = idx(field(o, "refs"), 0);
	cr_assert_eq(u64(r, "parent_objectid"), 300);
	cr_assert_eq(u64(r, "index"), 5);
	cr_assert_eq(u64(r, "name_len"), 2);
	cr_assert_str_eq(str(r, "name"), "xy");
	json_object_put(o);
}

Test(item_json, root_ref)
{
	uint8_t buf[64];
	struct json_object *o;

	root_ref_set_dirid(buf, 256);
	root_ref_set_sequence(buf, 4);
	root_ref_set_name_len(buf, 4);
	memcpy(buf + sizeof(struct btrfs_root_ref), "snap", 4);
	o = decode_ok(5, BTRFS_ROOT_REF_KEY, 257, buf, sizeof(struct btrfs_root_ref) + 4, 1);
	cr_assert_eq(u64(o, "dirid"), 256);
	cr_assert_eq(u64(o, "sequence"), 4);
	cr_assert_eq(u64(o, "name_len"), 4);
	cr_assert_str_eq(str(o, "name"), "snap");
	json_object_put(o);
}

static void set_file_extent_header(uint8_t *p, uint8_t type)
{
	memset(p, 0, sizeof(struct btrfs_file_extent_item));
	file_extent_set_generation(p, 9);
	file_extent_set_ram_bytes(p, 4096);
	file_extent_set_compression(p, BTRFS_COMPRESS_ZSTD);
	file_extent_set_encryption(p, 0);
	file_extent_set_other_encoding(p, 0);
	file_extent_set_type(p, type);
}

Test(item_json, file_extent_inline)
{
	uint8_t buf[BTRFS_FILE_EXTENT_INLINE_DATA_START + 100];
	struct json_object *o;

	set_file_extent_header(buf, BTRFS_FILE_EXTENT_INLINE);
	memset(buf + BTRFS_FILE_EXTENT_INLINE_DATA_START, 'x', 100);
	o = decode_ok(257, BTRFS_EXTENT_DATA_KEY, 0, buf, sizeof(buf), 5);
	cr_assert_eq(u64(o, "generation"), 9);
	cr_assert_eq(u64(o, "ram_bytes"), 4096);
	cr_assert_eq(u64(o, "compression"), BTRFS_COMPRESS_ZSTD);
	cr_assert_eq(u64(o, "encryption"), 0);
	cr_assert_eq(u64(o, "other_encoding"), 0);
	cr_assert_eq(u64(o, "type"), BTRFS_FILE_EXTENT_INLINE);
	cr_assert_eq(u64(o, "inline_size"), 100);
	cr_assert(!has(o, "disk_bytenr"));
	json_object_put(o);
}

Test(item_json, file_extent_regular_and_prealloc)
{
	uint8_t buf[sizeof(struct btrfs_file_extent_item)];
	struct json_object *o;

	for (uint8_t type = BTRFS_FILE_EXTENT_REG; type <= BTRFS_FILE_EXTENT_PREALLOC; type++) {
		set_file_extent_header(buf, type);
		file_extent_set_disk_bytenr(buf, 13631488);
		file_extent_set_disk_num_bytes(buf, 8192);
		file_extent_set_offset(buf, 4096);
		file_extent_set_num_bytes(buf, 4096);
		o = decode_ok(257, BTRFS_EXTENT_DATA_KEY, 0, buf, sizeof(buf), 5);
		cr_assert_eq(u64(o, "type"), type);
		cr_assert_eq(u64(o, "disk_bytenr"), 13631488);
		cr_assert_eq(u64(o, "disk_num_bytes"), 8192);
		cr_assert_eq(u64(o, "offset"), 4096);
		cr_assert_eq(u64(o, "num_bytes"), 4096);
		cr_assert(!has(o, "inline_size"));
		json_object_put(o);
	}
}

static void set_extent_header(uint8_t *p, uint64_t refs, uint64_t flags)
{
	extent_set_refs(p, refs);
	extent_set_generation(p, 6);
	extent_set_flags(p, flags);
}

Test(item_json, skinny_metadata_item_inline_refs)
{
	uint8_t buf[64];
	size_t n = sizeof(struct btrfs_extent_item);
	struct json_object *o, *refs;

	set_extent_header(buf, 2, BTRFS_EXTENT_FLAG_TREE_BLOCK);
	buf[n] = BTRFS_TREE_BLOCK_REF_KEY;
	put_le64(buf + n + 1, 5);
	n += 9;
	buf[n] = BTRFS_SHARED_BLOCK_REF_KEY;
	put_le64(buf + n + 1, 30507008);
	n += 9;
	o = decode_ok(30408704, BTRFS_METADATA_ITEM_KEY, 0, buf, (uint32_t)n, 2);
	cr_assert_eq(u64(o, "refs"), 2);
	cr_assert_eq(u64(o, "generation"), 6);
	cr_assert_eq(u64(o, "flags"), BTRFS_EXTENT_FLAG_TREE_BLOCK);
	cr_assert(!has(o, "key"), "skinny items have no tree_block_info");
	cr_assert(!has(o, "level"));
	refs = field(o, "inline_refs");
	cr_assert_eq(json_object_array_length(refs), 2);
	cr_assert_str_eq(str(idx(refs, 0), "type"), "TREE_BLOCK_REF");
	cr_assert_eq(u64(idx(refs, 0), "root"), 5);
	cr_assert_str_eq(str(idx(refs, 1), "type"), "SHARED_BLOCK_REF");
	cr_assert_eq(u64(idx(refs, 1), "parent"), 30507008);
	json_object_put(o);
}

Test(item_json, extent_item_data_refs)
{
	uint8_t buf[128];
	size_t n = sizeof(struct btrfs_extent_item);
	struct json_object *o, *refs, *r;

	set_extent_header(buf, 3, BTRFS_EXTENT_FLAG_DATA);
	buf[n] = BTRFS_EXTENT_DATA_REF_KEY;
	data_ref_set_root(buf + n + 1, 5);
	data_ref_set_objectid(buf + n + 1, 257);
	data_ref_set_offset(buf + n + 1, 0);
	data_ref_set_count(buf + n + 1, 2);
	n += 1 + sizeof(struct btrfs_extent_data_ref);
	buf[n] = BTRFS_SHARED_DATA_REF_KEY;
	put_le64(buf + n + 1, 30490624);
	shared_data_ref_set_count(buf + n + 9, 1);
	n += 13;
	buf[n] = BTRFS_EXTENT_OWNER_REF_KEY;
	put_le64(buf + n + 1, 256);
	n += 9;
	o = decode_ok(13631488, BTRFS_EXTENT_ITEM_KEY, 8192, buf, (uint32_t)n, 2);
	cr_assert_eq(u64(o, "refs"), 3);
	cr_assert_eq(u64(o, "flags"), BTRFS_EXTENT_FLAG_DATA);
	cr_assert(!has(o, "key"));
	refs = field(o, "inline_refs");
	cr_assert_eq(json_object_array_length(refs), 3);
	r = idx(refs, 0);
	cr_assert_str_eq(str(r, "type"), "EXTENT_DATA_REF");
	cr_assert_eq(u64(r, "root"), 5);
	cr_assert_eq(u64(r, "objectid"), 257);
	cr_assert_eq(u64(r, "offset"), 0);
	cr_assert_eq(u64(r, "count"), 2);
	r = idx(refs, 1);
	cr_assert_str_eq(str(r, "type"), "SHARED_DATA_REF");
	cr_assert_eq(u64(r, "parent"), 30490624);
	cr_assert_eq(u64(r, "count"), 1);
	r = idx(refs, 2);
	cr_assert_str_eq(str(r, "type"), "EXTENT_OWNER_REF");
	cr_assert_eq(u64(r, "root"), 256);
	json_object_put(o);
}

Test(item_json, non_skinny_tree_block_extent_item)
{
	uint8_t buf[128];
	size_t n = sizeof(struct btrfs_extent_item);
	struct btrfs_key first = {256, BTRFS_INODE_ITEM_KEY, 0};
	struct json_object *o;

	set_extent_header(buf, 1, BTRFS_EXTENT_FLAG_TREE_BLOCK);
	key_to_disk(tree_block_info_key_ptr(buf + n), &first);
	tree_block_info_set_level(buf + n, 1);
	n += sizeof(struct btrfs_tree_block_info);
	buf[n] = BTRFS_TREE_BLOCK_REF_KEY;
	put_le64(buf + n + 1, 5);
	n += 9;
	o = decode_ok(30408704, BTRFS_EXTENT_ITEM_KEY, 16384, buf, (uint32_t)n, 2);
	assert_key(field(o, "key"), 256, BTRFS_INODE_ITEM_KEY, 0);
	cr_assert_eq(u64(o, "level"), 1);
	cr_assert_eq(u64(idx(field(o, "inline_refs"), 0), "root"), 5);
	json_object_put(o);
}

Test(item_json, unknown_inline_ref_is_malformed)
{
	uint8_t buf[64];
	struct btrfs_key key = {1, BTRFS_METADATA_ITEM_KEY, 0};
	int malformed = 0;
	struct json_object *o;

	set_extent_header(buf, 1, BTRFS_EXTENT_FLAG_TREE_BLOCK);
	memset(buf + 24, 0x55, 9);
	o = item_fields_json(&key, buf, 33, 4, 2, &malformed);
	cr_assert_eq(malformed, 1);
	cr_assert_eq(u64(o, "refs"), 1);
	cr_assert_eq(json_object_array_length(field(o, "inline_refs")), 0);
	json_object_put(o);
}

static size_t build_chunk(uint8_t *p, unsigned num_stripes)
{
	memset(p, 0, chunk_item_size(num_stripes));
	chunk_set_length(p, 1ULL << 30);
	chunk_set_owner(p, BTRFS_EXTENT_TREE_OBJECTID);
	chunk_set_stripe_len(p, BTRFS_STRIPE_LEN);
	chunk_set_type(p, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP);
	chunk_set_io_align(p, 65536);
	chunk_set_io_width(p, 65536);
	chunk_set_sector_size(p, 4096);
	chunk_set_num_stripes(p, (uint16_t)num_stripes);
	chunk_set_sub_stripes(p, 1);
	for (unsigned i = 0; i < num_stripes; i++) {
		stripe_set_devid(chunk_stripe(p, i), 1);
		stripe_set_offset(chunk_stripe(p, i), 38797312 + i * (1ULL << 30));
		memcpy(stripe_dev_uuid_ptr(chunk_stripe(p, i)), uuid_a, 16);
	}
	return chunk_item_size(num_stripes);
}

Test(item_json, chunk_two_stripes)
{
	uint8_t buf[256];
	size_t n = build_chunk(buf, 2);
	struct json_object *o = decode_ok(BTRFS_FIRST_CHUNK_TREE_OBJECTID, BTRFS_CHUNK_ITEM_KEY, 30408704,
					  buf, (uint32_t)n, 3);
	struct json_object *stripes, *s;

	cr_assert_eq(u64(o, "length"), 1ULL << 30);
	cr_assert_eq(u64(o, "owner"), BTRFS_EXTENT_TREE_OBJECTID);
	cr_assert_eq(u64(o, "stripe_len"), BTRFS_STRIPE_LEN);
	cr_assert_eq(u64(o, "type"), BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP);
	cr_assert_eq(u64(o, "io_align"), 65536);
	cr_assert_eq(u64(o, "io_width"), 65536);
	cr_assert_eq(u64(o, "sector_size"), 4096);
	cr_assert_eq(u64(o, "num_stripes"), 2);
	cr_assert_eq(u64(o, "sub_stripes"), 1);
	stripes = field(o, "stripes");
	cr_assert_eq(json_object_array_length(stripes), 2);
	s = idx(stripes, 1);
	cr_assert_eq(u64(s, "devid"), 1);
	cr_assert_eq(u64(s, "offset"), 38797312 + (1ULL << 30));
	cr_assert_str_eq(str(s, "dev_uuid"), uuid_a_str);
	json_object_put(o);
}

static size_t build_root_item(uint8_t *p, size_t size)
{
	struct btrfs_key drop = {300, BTRFS_EXTENT_DATA_KEY, 4096};

	memset(p, 0, sizeof(struct btrfs_root_item));
	build_inode(root_item_inode_ptr(p));
	root_item_set_generation(p, 20);
	root_item_set_root_dirid(p, 256);
	root_item_set_bytenr(p, 30425088);
	root_item_set_byte_limit(p, 0);
	root_item_set_bytes_used(p, 16384);
	root_item_set_last_snapshot(p, 19);
	root_item_set_flags(p, BTRFS_ROOT_SUBVOL_RDONLY);
	root_item_set_refs(p, 1);
	key_to_disk(root_item_drop_progress_ptr(p), &drop);
	root_item_set_drop_level(p, 0);
	root_item_set_level(p, 2);
	if (size > BTRFS_ROOT_ITEM_V1_SIZE) {
		root_item_set_generation_v2(p, 20);
		memcpy(root_item_uuid_ptr(p), uuid_a, 16);
		root_item_set_ctransid(p, 21);
		root_item_set_otransid(p, 22);
		root_item_set_stransid(p, 23);
		root_item_set_rtransid(p, 24);
		timespec_set_sec(root_item_ctime_ptr(p), 1700000100);
		timespec_set_nsec(root_item_rtime_ptr(p), 77);
	}
	return size;
}

static void check_root_item_v1(struct json_object *o)
{
	check_inode(field(o, "inode"));
	cr_assert_eq(u64(o, "generation"), 20);
	cr_assert_eq(u64(o, "root_dirid"), 256);
	cr_assert_eq(u64(o, "bytenr"), 30425088);
	cr_assert_eq(u64(o, "byte_limit"), 0);
	cr_assert_eq(u64(o, "bytes_used"), 16384);
	cr_assert_eq(u64(o, "last_snapshot"), 19);
	cr_assert_eq(u64(o, "flags"), BTRFS_ROOT_SUBVOL_RDONLY);
	cr_assert_eq(u64(o, "refs"), 1);
	assert_key(field(o, "drop_progress"), 300, BTRFS_EXTENT_DATA_KEY, 4096);
	cr_assert_eq(u64(o, "drop_level"), 0);
	cr_assert_eq(u64(o, "level"), 2);
}

Test(item_json, root_item_v1)
{
	uint8_t buf[sizeof(struct btrfs_root_item)];
	size_t n = build_root_item(buf, BTRFS_ROOT_ITEM_V1_SIZE);
	struct json_object *o = decode_ok(5, BTRFS_ROOT_ITEM_KEY, 0, buf, (uint32_t)n, 1);

	check_root_item_v1(o);
	cr_assert(!has(o, "generation_v2"));
	cr_assert(!has(o, "uuid"));
	cr_assert(!has(o, "ctime"));
	json_object_put(o);
}

Test(item_json, root_item_full)
{
	uint8_t buf[sizeof(struct btrfs_root_item)];
	size_t n = build_root_item(buf, sizeof(buf));
	struct json_object *o = decode_ok(256, BTRFS_ROOT_ITEM_KEY, 0, buf, (uint32_t)n, 1);

	check_root_item_v1(o);
	cr_assert_eq(u64(o, "generation_v2"), 20);
	cr_assert_str_eq(str(o, "uuid"), uuid_a_str);
	cr_assert_str_eq(str(o, "parent_uuid"), "00000000-0000-0000-0000-000000000000");
	cr_assert_str_eq(str(o, "received_uuid"), "00000000-0000-0000-0000-000000000000");
	cr_assert_eq(u64(o, "ctransid"), 21);
	cr_assert_eq(u64(o, "otransid"), 22);
	cr_assert_eq(u64(o, "stransid"), 23);
	cr_assert_eq(u64(o, "rtransid"), 24);
	cr_assert_eq(u64(field(o, "ctime"), "sec"), 1700000100);
	cr_assert_eq(u64(field(o, "otime"), "sec"), 0);
	cr_assert_eq(u64(field(o, "stime"), "nsec"), 0);
	cr_assert_eq(u64(field(o, "rtime"), "nsec"), 77);
	json_object_put(o);
}

Test(item_json, device_and_block_group_items)
{
	uint8_t buf[128] = {0};
	struct json_object *o;

	dev_item_set_devid(buf, 1);
	dev_item_set_total_bytes(buf, 1ULL << 40);
	dev_item_set_bytes_used(buf, 1ULL << 33);
	dev_item_set_io_align(buf, 4096);
	dev_item_set_io_width(buf, 4096);
	dev_item_set_sector_size(buf, 4096);
	dev_item_set_generation(buf, 3);
	dev_item_set_seek_speed(buf, 0);
	memcpy(dev_item_uuid_ptr(buf), uuid_a, 16);
	o = decode_ok(BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 1, buf, sizeof(struct btrfs_dev_item),
		      BTRFS_CHUNK_TREE_OBJECTID);
	cr_assert_eq(u64(o, "devid"), 1);
	cr_assert_eq(u64(o, "total_bytes"), 1ULL << 40);
	cr_assert_eq(u64(o, "bytes_used"), 1ULL << 33);
	cr_assert_eq(u64(o, "generation"), 3);
	cr_assert_eq(u64(o, "dev_group"), 0);
	cr_assert_eq(u64(o, "bandwidth"), 0);
	cr_assert_str_eq(str(o, "uuid"), uuid_a_str);
	cr_assert_str_eq(str(o, "fsid"), "00000000-0000-0000-0000-000000000000");
	json_object_put(o);

	memset(buf, 0, sizeof(buf));
	block_group_set_used(buf, 65536);
	block_group_set_chunk_objectid(buf, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	block_group_set_flags(buf, BTRFS_BLOCK_GROUP_DATA);
	o = decode_ok(13631488, BTRFS_BLOCK_GROUP_ITEM_KEY, 8388608, buf,
		      sizeof(struct btrfs_block_group_item), 2);
	cr_assert_eq(u64(o, "used"), 65536);
	cr_assert_eq(u64(o, "chunk_objectid"), 256);
	cr_assert_eq(u64(o, "flags"), BTRFS_BLOCK_GROUP_DATA);
	json_object_put(o);
}

Test(item_json, csums_one_per_sector)
{
	uint8_t buf[12] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 0, 0, 0, 0};
	struct json_object *o = decode_ok(BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 13631488, buf,
					  sizeof(buf), 7);

	cr_assert_eq(u64(o, "num_csums"), 3);
	cr_assert_str_eq(json_object_get_string(idx(field(o, "csums"), 0)), "deadbeef");
	cr_assert_str_eq(json_object_get_string(idx(field(o, "csums"), 1)), "01020304");
	json_object_put(o);
}

Test(item_json, arrays_of_ids_stats_strides)
{
	uint8_t buf[64] = {0};
	struct json_object *o;

	put_le64(buf, 256);
	put_le64(buf + 8, 300);
	o = decode_ok(0x1234, BTRFS_UUID_KEY_SUBVOL, 0x5678, buf, 16, 9);
	cr_assert_eq(json_object_array_length(field(o, "subvol_ids")), 2);
	cr_assert_eq(json_object_get_uint64(idx(field(o, "subvol_ids"), 1)), 300);
	json_object_put(o);

	o = decode_ok(13631488, BTRFS_RAID_STRIPE_KEY, 65536, buf, 16, 12);
	cr_assert_eq(u64(idx(field(o, "strides"), 0), "devid"), 256);
	cr_assert_eq(u64(idx(field(o, "strides"), 0), "physical"), 300);
	json_object_put(o);

	memset(buf, 0, sizeof(buf));
	put_le64(buf + 8, 3);
	o = decode_ok(BTRFS_DEV_STATS_OBJECTID, BTRFS_PERSISTENT_ITEM_KEY, 1, buf, 40, 4);
	cr_assert_eq(json_object_array_length(field(o, "values")), 5);
	cr_assert_eq(json_object_get_uint64(idx(field(o, "values"), 1)), 3);
	json_object_put(o);
}

Test(item_json, qgroup_status_v1_and_v2)
{
	uint8_t buf[sizeof(struct btrfs_qgroup_status_item)] = {0};
	struct json_object *o;

	qgroup_status_set_version(buf, 1);
	qgroup_status_set_flags(buf, BTRFS_QGROUP_STATUS_FLAG_ON);
	qgroup_status_set_enable_gen(buf, 12);
	o = decode_ok(0, BTRFS_QGROUP_STATUS_KEY, 0, buf, BTRFS_QGROUP_STATUS_V1_SIZE, 8);
	cr_assert_eq(u64(o, "version"), 1);
	cr_assert_eq(u64(o, "flags"), BTRFS_QGROUP_STATUS_FLAG_ON);
	cr_assert(has(o, "rescan"));
	cr_assert(!has(o, "enable_gen"));
	json_object_put(o);
	o = decode_ok(0, BTRFS_QGROUP_STATUS_KEY, 0, buf, sizeof(buf), 8);
	cr_assert_eq(u64(o, "enable_gen"), 12);
	json_object_put(o);
}

Test(item_json, balance_item)
{
	uint8_t buf[sizeof(struct btrfs_balance_item)] = {0};
	struct json_object *o;

	balance_set_flags(buf, 7);
	balance_args_set_profiles(balance_meta_ptr(buf), BTRFS_BLOCK_GROUP_DUP);
	balance_args_set_stripes_max(balance_sys_ptr(buf), 4);
	o = decode_ok(BTRFS_BALANCE_OBJECTID, BTRFS_TEMPORARY_ITEM_KEY, 0, buf, sizeof(buf), 1);
	cr_assert_eq(u64(o, "flags"), 7);
	cr_assert_eq(u64(field(o, "meta"), "profiles"), BTRFS_BLOCK_GROUP_DUP);
	cr_assert_eq(u64(field(o, "sys"), "stripes_max"), 4);
	cr_assert_eq(u64(field(o, "data"), "limit"), 0);
	json_object_put(o);
}

Test(item_json, string_and_unknown_items)
{
	struct json_object *o = decode_ok(0, BTRFS_STRING_ITEM_KEY, 0, "hello", 5, 1);

	cr_assert_str_eq(str(o, "string"), "hello");
	json_object_put(o);
	o = decode_ok(1, 77, 0, "abc", 3, 5);
	cr_assert_eq(json_object_object_length(o), 0);
	json_object_put(o);
	o = decode_ok(1, BTRFS_ORPHAN_ITEM_KEY, 300, NULL, 0, 1);
	cr_assert_eq(json_object_object_length(o), 0);
	json_object_put(o);
}

Test(item_json, v1_free_space_cache_header)
{
	uint8_t buf[41] = {0};
	struct btrfs_key loc = {257, BTRFS_INODE_ITEM_KEY, 0};
	struct json_object *o;

	key_to_disk(buf, &loc);
	put_le64(buf + 17, 8);
	put_le64(buf + 25, 3);
	put_le64(buf + 33, 1);
	o = decode_ok(BTRFS_FREE_SPACE_OBJECTID, 0, 13631488, buf, sizeof(buf), BTRFS_ROOT_TREE_OBJECTID);
	assert_key(field(o, "location"), 257, BTRFS_INODE_ITEM_KEY, 0);
	cr_assert_eq(u64(o, "generation"), 8);
	cr_assert_eq(u64(o, "num_entries"), 3);
	cr_assert_eq(u64(o, "num_bitmaps"), 1);
	json_object_put(o);
}

/* A valid item of each decoded type, for the truncation sweep. */
struct sample {
	uint64_t objectid;
	uint8_t type;
	uint64_t offset;
	uint8_t buf[512];
	size_t size;
	/* A shorter size that is itself a valid item: a legacy root item, an
	 * extent item with one inline ref fewer. 0 if none. */
	size_t also_valid;
};

static size_t fill_fixed(uint8_t *buf, size_t size)
{
	for (size_t i = 0; i < size; i++)
		buf[i] = (uint8_t)(i * 7 + 1);
	return size;
}

static size_t build_sample(struct sample *s)
{
	uint8_t *b = s->buf;
	size_t n;

	memset(b, 0, sizeof(s->buf));
	switch (s->type) {
	case BTRFS_INODE_ITEM_KEY: return build_inode(b);
	case BTRFS_INODE_REF_KEY:
		inode_ref_set_name_len(b, 3);
		memcpy(b + 10, "abc", 3);
		return 13;
	case BTRFS_INODE_EXTREF_KEY:
		inode_extref_set_name_len(b, 3);
		memcpy(b + 18, "abc", 3);
		return 21;
	case BTRFS_XATTR_ITEM_KEY: return put_dir_entry(b, 0, BTRFS_FT_XATTR, "user.x", "val");
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY: return put_dir_entry(b, 257, BTRFS_FT_REG_FILE, "name", NULL);
	case BTRFS_VERITY_DESC_ITEM_KEY: return sizeof(struct btrfs_verity_descriptor_item);
	case BTRFS_DIR_LOG_ITEM_KEY:
	case BTRFS_DIR_LOG_INDEX_KEY: return 8;
	case BTRFS_EXTENT_DATA_KEY:
		set_file_extent_header(b, BTRFS_FILE_EXTENT_REG);
		return sizeof(struct btrfs_file_extent_item);
	case BTRFS_EXTENT_CSUM_KEY: return 4; /* one crc32c */
	case BTRFS_ROOT_ITEM_KEY:
		s->also_valid = BTRFS_ROOT_ITEM_V1_SIZE;
		return build_root_item(b, sizeof(struct btrfs_root_item));
	case BTRFS_ROOT_REF_KEY:
	case BTRFS_ROOT_BACKREF_KEY:
		root_ref_set_name_len(b, 2);
		memcpy(b + 18, "sv", 2);
		return 20;
	case BTRFS_EXTENT_ITEM_KEY:
		set_extent_header(b, 1, BTRFS_EXTENT_FLAG_TREE_BLOCK);
		n = 24 + sizeof(struct btrfs_tree_block_info);
		b[n] = BTRFS_TREE_BLOCK_REF_KEY;
		s->also_valid = n;
		return n + 9;
	case BTRFS_METADATA_ITEM_KEY:
		set_extent_header(b, 1, BTRFS_EXTENT_FLAG_TREE_BLOCK);
		b[24] = BTRFS_SHARED_DATA_REF_KEY;
		s->also_valid = 24;
		return 24 + 13;
	case BTRFS_EXTENT_OWNER_REF_KEY: return 8;
	case BTRFS_EXTENT_DATA_REF_KEY: return sizeof(struct btrfs_extent_data_ref);
	case BTRFS_SHARED_DATA_REF_KEY: return 4;
	case BTRFS_BLOCK_GROUP_ITEM_KEY: return fill_fixed(b, 24);
	case BTRFS_FREE_SPACE_INFO_KEY: return fill_fixed(b, 8);
	case BTRFS_FREE_SPACE_BITMAP_KEY:
		/* 17 sectors of 4 KiB: 3 bytes, and no other sector size fits */
		s->offset = 17 * 4096;
		return fill_fixed(b, 3);
	case BTRFS_DEV_EXTENT_KEY: return fill_fixed(b, sizeof(struct btrfs_dev_extent));
	case BTRFS_DEV_ITEM_KEY: return fill_fixed(b, sizeof(struct btrfs_dev_item));
	case BTRFS_CHUNK_ITEM_KEY: return build_chunk(b, 3);
	case BTRFS_RAID_STRIPE_KEY: return 16;
	case BTRFS_QGROUP_STATUS_KEY: return BTRFS_QGROUP_STATUS_V1_SIZE;
	case BTRFS_QGROUP_INFO_KEY: return sizeof(struct btrfs_qgroup_info_item);
	case BTRFS_QGROUP_LIMIT_KEY: return sizeof(struct btrfs_qgroup_limit_item);
	case BTRFS_TEMPORARY_ITEM_KEY: return sizeof(struct btrfs_balance_item);
	case BTRFS_PERSISTENT_ITEM_KEY: return sizeof(struct btrfs_dev_stats_item);
	case BTRFS_DEV_REPLACE_KEY: return sizeof(struct btrfs_dev_replace_item);
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL: return 8;
	default: return 0;
	}
}

static const uint8_t truncatable_types[] = {
	BTRFS_INODE_ITEM_KEY, BTRFS_INODE_REF_KEY, BTRFS_INODE_EXTREF_KEY, BTRFS_XATTR_ITEM_KEY,
	BTRFS_VERITY_DESC_ITEM_KEY, BTRFS_DIR_LOG_ITEM_KEY, BTRFS_DIR_LOG_INDEX_KEY, BTRFS_DIR_ITEM_KEY,
	BTRFS_DIR_INDEX_KEY, BTRFS_EXTENT_DATA_KEY, BTRFS_EXTENT_CSUM_KEY, BTRFS_ROOT_ITEM_KEY,
	BTRFS_ROOT_BACKREF_KEY, BTRFS_ROOT_REF_KEY, BTRFS_EXTENT_ITEM_KEY, BTRFS_METADATA_ITEM_KEY,
	BTRFS_EXTENT_OWNER_REF_KEY, BTRFS_EXTENT_DATA_REF_KEY, BTRFS_SHARED_DATA_REF_KEY,
	BTRFS_BLOCK_GROUP_ITEM_KEY, BTRFS_FREE_SPACE_INFO_KEY, BTRFS_FREE_SPACE_BITMAP_KEY,
	BTRFS_DEV_EXTENT_KEY, BTRFS_DEV_ITEM_KEY, BTRFS_CHUNK_ITEM_KEY, BTRFS_RAID_STRIPE_KEY,
	BTRFS_QGROUP_STATUS_KEY, BTRFS_QGROUP_INFO_KEY, BTRFS_QGROUP_LIMIT_KEY, BTRFS_TEMPORARY_ITEM_KEY,
	BTRFS_PERSISTENT_ITEM_KEY, BTRFS_DEV_REPLACE_KEY, BTRFS_UUID_KEY_SUBVOL,
	BTRFS_UUID_KEY_RECEIVED_SUBVOL,
};

/* Every size short of the real one is malformed, and the decoder reads only
 * the bytes it was given: each truncated copy sits at the very end of a heap
 * block so ASan catches a read one byte past it. */
Test(item_json, truncated_items_are_malformed)
{
	for (size_t t = 0; t < ARRAY_LEN(truncatable_types); t++) {
		struct sample s = {.type = truncatable_types[t]};
		struct btrfs_key key;
		int malformed;

		s.objectid = s.type == BTRFS_TEMPORARY_ITEM_KEY ? BTRFS_BALANCE_OBJECTID : 256;
		s.size = build_sample(&s);
		cr_assert_gt(s.size, 0, "no sample for type %u", s.type);
		key = (struct btrfs_key){s.objectid, s.type, s.offset};
		json_object_put(decode_ok(s.objectid, s.type, s.offset, s.buf, (uint32_t)s.size, 5));
		for (size_t len = 0; len < s.size; len++) {
			if (len == s.also_valid && len)
				continue;
			uint8_t *copy = malloc(len ? len : 1);
			struct json_object *o;

			memcpy(copy, s.buf, len);
			malformed = 0;
			o = item_fields_json(&key, copy, (uint32_t)len, 4, 5, &malformed);
			cr_assert_not_null(o);
			cr_assert_eq(malformed, 1, "type %u size %zu of %zu not flagged", s.type, len,
				     s.size);
			json_object_put(o);
			free(copy);
		}
	}
}

Test(item_json, bodies_on_empty_items_are_malformed)
{
	static const uint8_t types[] = {BTRFS_ORPHAN_ITEM_KEY, BTRFS_TREE_BLOCK_REF_KEY,
					BTRFS_SHARED_BLOCK_REF_KEY, BTRFS_FREE_SPACE_EXTENT_KEY,
					BTRFS_QGROUP_RELATION_KEY};
	uint8_t byte = 0;

	for (size_t i = 0; i < ARRAY_LEN(types); i++) {
		struct btrfs_key key = {256, types[i], 0};
		int malformed = 0;

		json_object_put(item_fields_json(&key, &byte, 0, 4, 5, &malformed));
		cr_assert_eq(malformed, 0);
		json_object_put(item_fields_json(&key, &byte, 1, 4, 5, &malformed));
		cr_assert_eq(malformed, 1);
	}
}

Test(item_json, inconsistent_lengths_are_malformed)
{
	uint8_t buf[sizeof(struct btrfs_root_item)];
	struct btrfs_key key = {256, BTRFS_DIR_ITEM_KEY, 1};
	int malformed = 0;
	size_t n = put_dir_entry(buf, 257, BTRFS_FT_REG_FILE, "abc", NULL);
	struct json_object *o;

	dir_item_set_name_len(buf, 200); /* runs past the item */
	o = item_fields_json(&key, buf, (uint32_t)n, 4, 5, &malformed);
	cr_assert_eq(malformed, 1);
	cr_assert(!has(idx(field(o, "entries"), 0), "name"));
	json_object_put(o);

	n = build_chunk(buf, 2);
	chunk_set_num_stripes(buf, 5);
	key = (struct btrfs_key){256, BTRFS_CHUNK_ITEM_KEY, 0};
	o = item_fields_json(&key, buf, (uint32_t)n, 4, 3, &malformed);
	cr_assert_eq(malformed, 1);
	cr_assert_eq(json_object_array_length(field(o, "stripes")), 2);
	json_object_put(o);

	n = build_root_item(buf, sizeof(struct btrfs_root_item));
	key = (struct btrfs_key){5, BTRFS_ROOT_ITEM_KEY, 0};
	o = item_fields_json(&key, buf, BTRFS_ROOT_ITEM_V1_SIZE + 20, 4, 1, &malformed);
	cr_assert_eq(malformed, 1, "between v1 and full size");
	cr_assert_eq(u64(o, "generation_v2"), 20);
	cr_assert(!has(o, "ctime"));
	json_object_put(o);
}

/* Random bodies of random sizes for every key type: no crash, no overread,
 * always an object. Deterministic, so a failure reproduces. */
Test(item_json, random_bodies_do_not_crash)
{
	uint64_t state = 0x9e3779b97f4a7c15ULL;

	for (unsigned round = 0; round < 40; round++) {
		for (unsigned type = 0; type < 256; type++) {
			uint32_t size;
			uint8_t *data;
			struct btrfs_key key;
			struct json_object *o;
			char *text = NULL;
			size_t text_len = 0;
			FILE *mem;

			state = state * 6364136223846793005ULL + 1442695040888963407ULL;
			size = (uint32_t)(state >> 33) % 600;
			data = malloc(size ? size : 1);
			for (uint32_t i = 0; i < size; i++) {
				state = state * 6364136223846793005ULL + 1442695040888963407ULL;
				data[i] = (uint8_t)(state >> 56);
			}
			if (size > 24 && round % 2) /* make extent items reach their refs */
				data[16] = 2;
			key = (struct btrfs_key){round % 3 ? 256 : BTRFS_BALANCE_OBJECTID, (uint8_t)type, 0};
			o = item_fields_json(&key, data, size, round % 5 ? 4 : 32, round % 4 ? 5 : 1, NULL);
			cr_assert_not_null(o);
			mem = open_memstream(&text, &text_len);
			item_fields_text(mem, o, 2);
			fclose(mem);
			free(text);
			json_object_put(o);
			free(data);
		}
	}
}

Test(item_json, text_rendering)
{
	uint8_t buf[256];
	size_t n = build_inode(buf);
	struct json_object *o = decode_ok(257, BTRFS_INODE_ITEM_KEY, 0, buf, (uint32_t)n, 5);
	char *text = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&text, &len);

	item_fields_text(mem, o, 2);
	fclose(mem);
	cr_assert(strncmp(text, "\t\tgeneration 7 transid 8 size 18446744073709551615", 50) == 0, "%s",
		  text);
	cr_assert_not_null(strstr(text, "mode 040755"), "%s", text);
	cr_assert_not_null(strstr(text, "flags 0x1"), "%s", text);
	cr_assert_not_null(strstr(text, "atime 1700000000.000000005"), "%s", text);
	cr_assert_eq(text[len - 1], '\n');
	free(text);
	json_object_put(o);

	n = put_dir_entry(buf, 257, BTRFS_FT_REG_FILE, "foo", NULL);
	n += put_dir_entry(buf + n, 258, BTRFS_FT_DIR, "bar", NULL);
	o = decode_ok(256, BTRFS_DIR_ITEM_KEY, 1, buf, (uint32_t)n, 5);
	mem = open_memstream(&text, &len);
	item_fields_text(mem, o, 1);
	fclose(mem);
	cr_assert_not_null(strstr(text, "\tentries:\n\t\t[0] location (257 INODE_ITEM 0) transid 42"), "%s",
			   text);
	cr_assert_not_null(strstr(text, "\n\t\t[1] location (258 INODE_ITEM 0)"), "%s", text);
	cr_assert_not_null(strstr(text, "name bar\n"), "%s", text);
	free(text);
	json_object_put(o);
}
