// SPDX-License-Identifier: GPL-2.0-only
/* One leaf item -> a JSON object of its fields (see doc/inspect-tree-jsonl.md),
 * and a readable text rendering of that object.
 *
 * Fixed layouts are described by tables of (member name, offset, width, kind)
 * taken from the packed structs of libfs/format.h, so a field name is always
 * the struct member's name and a truncated item decodes exactly the members
 * that fit. Variable layouts (names, entry lists, inline refs, stripes) walk
 * the item with every length checked against the item size first. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "inspect/item_json.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/names.h>

#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* Xattr and dir-entry data is shown as hex only up to this many bytes. */
#define DATA_HEX_MAX 64

/* The v1 free-space cache header (key type 0, objectid FREE_SPACE_OBJECTID,
 * root tree); format.h does not carry it because nothing else reads it. */
struct free_space_header {
	struct btrfs_disk_key location;
	uint64_t generation;
	uint64_t num_entries;
	uint64_t num_bitmaps;
} PACKED;

struct item_ctx {
	const struct btrfs_key *key;
	const uint8_t *data;
	uint32_t size;
	unsigned csum_size;
	uint64_t owner_tree;
	int *malformed;
};

static void set_malformed(const struct item_ctx *c)
{
	*c->malformed = 1;
}

/* Malformed when the validator (btk/item_check.h) says the item does not
 * have its type's length: the rule btk-check reports by. The geometry is
 * what this file knows; the types asked here need no more. */
static void check_sizes(const struct item_ctx *c)
{
	struct item_geometry g = { .csum_size = (uint16_t)c->csum_size };
	struct item_view v = item_view_of(c->data, c->size);
	struct item_verdict vd;

	if (item_check_sizes(&g, c->key, &v, &vd))
		set_malformed(c);
}

/* ------------------------------------------------------------------ */
/* JSON building blocks                                               */

static void add(struct json_object *obj, const char *name, struct json_object *val)
{
	json_object_object_add(obj, name, val);
}

static void add_u64(struct json_object *obj, const char *name, uint64_t v)
{
	add(obj, name, json_object_new_uint64(v));
}

static struct json_object *key_json(const uint8_t *disk_key)
{
	struct json_object *arr = json_object_new_array_ext(3);

	json_object_array_add(arr, json_object_new_uint64(disk_key_objectid(disk_key)));
	json_object_array_add(arr, json_object_new_uint64(disk_key_type(disk_key)));
	json_object_array_add(arr, json_object_new_uint64(disk_key_offset(disk_key)));
	return arr;
}

static struct json_object *uuid_json(const uint8_t *uuid)
{
	char str[UUID_STR_BUF];

	uuid_to_str(uuid, str);
	return json_object_new_string(str);
}

static struct json_object *timespec_json(const uint8_t *ts)
{
	struct json_object *obj = json_object_new_object();

	add_u64(obj, "sec", timespec_sec(ts));
	add_u64(obj, "nsec", timespec_nsec(ts));
	return obj;
}

static struct json_object *hex_json(const uint8_t *p, size_t len)
{
	static const char digits[] = "0123456789abcdef";
	char *str;
	struct json_object *val;

	if (len > INT_MAX / 2)
		return NULL; /* json-c lengths are ints; items are far smaller */
	str = malloc(len * 2 + 1);
	if (!str)
		return NULL;
	for (size_t i = 0; i < len; i++) {
		str[2 * i] = digits[p[i] >> 4];
		str[2 * i + 1] = digits[p[i] & 0xf];
	}
	str[len * 2] = '\0';
	val = json_object_new_string_len(str, (int)(len * 2));
	free(str);
	return val;
}

/* Length of the UTF-8 sequence starting at p (at most len bytes), or 0 if it
 * is not well-formed: no overlong forms, surrogates or values past U+10FFFF. */
static size_t utf8_sequence_len(const uint8_t *p, size_t len)
{
	uint8_t b = p[0];
	size_t n;
	uint32_t cp, min;

	if (b < 0x80)
		return 1;
	if ((b & 0xe0) == 0xc0)
		n = 2, cp = b & 0x1f, min = 0x80;
	else if ((b & 0xf0) == 0xe0)
		n = 3, cp = b & 0x0f, min = 0x800;
	else if ((b & 0xf8) == 0xf0)
		n = 4, cp = b & 0x07, min = 0x10000;
	else
		return 0;
	if (n > len)
		return 0;
	for (size_t i = 1; i < n; i++) {
		if ((p[i] & 0xc0) != 0x80)
			return 0;
		cp = (cp << 6) | (p[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return n;
}

static int utf8_valid(const uint8_t *p, size_t len)
{
	size_t i = 0;

	while (i < len) {
		size_t n = utf8_sequence_len(p + i, len - i);

		if (n == 0)
			return 0;
		i += n;
	}
	return 1;
}

/* A name (or string item) as "<field>" when it is valid UTF-8, else as
 * "<field>_hex", so a JSON consumer never sees mangled bytes. */
static void add_name(struct json_object *obj, const char *field, const uint8_t *p, size_t len)
{
	char hex_field[32];

	if (len <= INT_MAX / 2 && utf8_valid(p, len)) {
		add(obj, field, json_object_new_string_len((const char *)p, (int)len));
		return;
	}
	snprintf(hex_field, sizeof(hex_field), "%s_hex", field);
	add(obj, hex_field, hex_json(p, len));
}

/* ------------------------------------------------------------------ */
/* Table-driven fixed layouts                                         */

enum field_kind { FK_UINT, FK_KEY, FK_UUID, FK_TIME, FK_INODE, FK_BALANCE_ARGS };

struct field_desc {
	const char *name;
	uint32_t offset;
	uint32_t width;
	enum field_kind kind;
};

#define FIELD_OF(type, member, kind) \
	{ #member, offsetof(type, member), sizeof(((type *)0)->member), kind }
#define UINT_OF(type, member) FIELD_OF(type, member, FK_UINT)

static int decode_fields(struct json_object *out, const uint8_t *p, size_t avail,
			 const struct field_desc *fields, size_t n);

static uint64_t get_uint(const uint8_t *p, uint32_t width)
{
	switch (width) {
	case 1: return get_le8(p);
	case 2: return get_le16(p);
	case 4: return get_le32(p);
	default: return get_le64(p);
	}
}

static const struct field_desc inode_fields[] = {
	UINT_OF(struct btrfs_inode_item, generation),
	UINT_OF(struct btrfs_inode_item, transid),
	UINT_OF(struct btrfs_inode_item, size),
	UINT_OF(struct btrfs_inode_item, nbytes),
	UINT_OF(struct btrfs_inode_item, block_group),
	UINT_OF(struct btrfs_inode_item, nlink),
	UINT_OF(struct btrfs_inode_item, uid),
	UINT_OF(struct btrfs_inode_item, gid),
	UINT_OF(struct btrfs_inode_item, mode),
	UINT_OF(struct btrfs_inode_item, rdev),
	UINT_OF(struct btrfs_inode_item, flags),
	UINT_OF(struct btrfs_inode_item, sequence),
	FIELD_OF(struct btrfs_inode_item, atime, FK_TIME),
	FIELD_OF(struct btrfs_inode_item, ctime, FK_TIME),
	FIELD_OF(struct btrfs_inode_item, mtime, FK_TIME),
	FIELD_OF(struct btrfs_inode_item, otime, FK_TIME),
};

static const struct field_desc balance_args_fields[] = {
	UINT_OF(struct btrfs_disk_balance_args, profiles),
	UINT_OF(struct btrfs_disk_balance_args, usage),
	UINT_OF(struct btrfs_disk_balance_args, devid),
	UINT_OF(struct btrfs_disk_balance_args, pstart),
	UINT_OF(struct btrfs_disk_balance_args, pend),
	UINT_OF(struct btrfs_disk_balance_args, vstart),
	UINT_OF(struct btrfs_disk_balance_args, vend),
	UINT_OF(struct btrfs_disk_balance_args, target),
	UINT_OF(struct btrfs_disk_balance_args, flags),
	UINT_OF(struct btrfs_disk_balance_args, limit),
	UINT_OF(struct btrfs_disk_balance_args, stripes_min),
	UINT_OF(struct btrfs_disk_balance_args, stripes_max),
};

/* A nested struct member decodes into a nested object; a truncated one keeps
 * the members that fit. Returns 0, or -1 if it was cut short. */
static int decode_nested(struct json_object *out, const struct field_desc *f, const uint8_t *p,
			 size_t avail)
{
	struct json_object *obj = json_object_new_object();
	const struct field_desc *fields = f->kind == FK_INODE ? inode_fields : balance_args_fields;
	size_t n = f->kind == FK_INODE ? ARRAY_LEN(inode_fields) : ARRAY_LEN(balance_args_fields);
	size_t have = avail < f->width ? avail : f->width;
	int ret = decode_fields(obj, p, have, fields, n);

	add(out, f->name, obj);
	return ret < 0 || have < f->width ? -1 : 0;
}

/* Add each field that lies within p[0..avail) to out, in table order.
 * Returns 0 when all fitted, -1 at the first one that did not. */
static int decode_fields(struct json_object *out, const uint8_t *p, size_t avail,
			 const struct field_desc *fields, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		const struct field_desc *f = &fields[i];
		const uint8_t *fp = p + f->offset;

		if (f->kind == FK_INODE || f->kind == FK_BALANCE_ARGS) {
			if (f->offset >= avail || decode_nested(out, f, fp, avail - f->offset) < 0)
				return -1;
			continue;
		}
		if ((size_t)f->offset + f->width > avail)
			return -1;
		switch (f->kind) {
		case FK_KEY: add(out, f->name, key_json(fp)); break;
		case FK_UUID: add(out, f->name, uuid_json(fp)); break;
		case FK_TIME: add(out, f->name, timespec_json(fp)); break;
		default: add_u64(out, f->name, get_uint(fp, f->width)); break;
		}
	}
	return 0;
}

/* An item that is exactly one struct: every member that fits, malformed
 * unless the size is exactly the struct's. */
static void decode_fixed(struct json_object *out, const struct item_ctx *c,
			 const struct field_desc *fields, size_t n, size_t struct_size)
{
	if (decode_fields(out, c->data, c->size, fields, n) < 0 || c->size != struct_size)
		set_malformed(c);
}

#define DECODE_FIXED(out, c, table, type) decode_fixed(out, c, table, ARRAY_LEN(table), sizeof(type))

/* ------------------------------------------------------------------ */
/* Inodes, refs, dir entries                                          */

static void decode_inode_item(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, inode_fields, struct btrfs_inode_item);
}

/* The name of an entry at p[0..avail) with name_len bytes: added when it
 * fits entirely; otherwise left out. Returns 0 or -1 if it does not fit. */
static int add_entry_name(struct json_object *entry, const uint8_t *p, size_t avail, size_t name_len)
{
	if (name_len > avail)
		return -1;
	add_name(entry, "name", p, name_len);
	return 0;
}

/* Append entry to arr if it decoded at least one field, else drop it. */
static void array_add_nonempty(struct json_object *arr, struct json_object *entry)
{
	if (json_object_object_length(entry) > 0)
		json_object_array_add(arr, entry);
	else
		json_object_put(entry);
}

static const struct field_desc inode_ref_fields[] = {
	UINT_OF(struct btrfs_inode_ref, index),
	UINT_OF(struct btrfs_inode_ref, name_len),
};

static const struct field_desc inode_extref_fields[] = {
	UINT_OF(struct btrfs_inode_extref, parent_objectid),
	UINT_OF(struct btrfs_inode_extref, index),
	UINT_OF(struct btrfs_inode_extref, name_len),
};

/* INODE_REF and INODE_EXTREF: a run of (header, name) entries in "refs". */
static void decode_refs(struct json_object *out, const struct item_ctx *c, const struct field_desc *fields,
			size_t n, size_t header_size, size_t name_len_offset)
{
	struct json_object *refs = json_object_new_array();
	size_t cur = 0;

	add(out, "refs", refs);
	if (c->size == 0)
		set_malformed(c);
	while (cur < c->size) {
		struct json_object *entry = json_object_new_object();
		const uint8_t *p = c->data + cur;
		size_t avail = c->size - cur;
		size_t name_len;

		if (decode_fields(entry, p, avail, fields, n) < 0) {
			array_add_nonempty(refs, entry);
			set_malformed(c);
			return;
		}
		name_len = get_le16(p + name_len_offset);
		if (name_len > BTRFS_NAME_LEN || name_len == 0)
			set_malformed(c);
		if (add_entry_name(entry, p + header_size, avail - header_size, name_len) < 0) {
			json_object_array_add(refs, entry);
			set_malformed(c);
			return;
		}
		json_object_array_add(refs, entry);
		cur += header_size + name_len;
	}
}

static void decode_inode_ref(struct json_object *out, const struct item_ctx *c)
{
	decode_refs(out, c, inode_ref_fields, ARRAY_LEN(inode_ref_fields), sizeof(struct btrfs_inode_ref),
		    offsetof(struct btrfs_inode_ref, name_len));
}

static void decode_inode_extref(struct json_object *out, const struct item_ctx *c)
{
	decode_refs(out, c, inode_extref_fields, ARRAY_LEN(inode_extref_fields),
		    sizeof(struct btrfs_inode_extref), offsetof(struct btrfs_inode_extref, name_len));
}

static const struct field_desc dir_item_fields[] = {
	FIELD_OF(struct btrfs_dir_item, location, FK_KEY),
	UINT_OF(struct btrfs_dir_item, transid),
	UINT_OF(struct btrfs_dir_item, data_len),
	UINT_OF(struct btrfs_dir_item, name_len),
	UINT_OF(struct btrfs_dir_item, type),
};

/* One dir/xattr entry at p[0..avail) into entry; returns its total length,
 * or 0 if it is cut short (entry then holds what fitted). */
static size_t decode_dir_entry(struct json_object *entry, const uint8_t *p, size_t avail)
{
	size_t hdr = sizeof(struct btrfs_dir_item);
	size_t name_len, data_len;

	if (decode_fields(entry, p, avail, dir_item_fields, ARRAY_LEN(dir_item_fields)) < 0)
		return 0;
	name_len = dir_item_name_len(p);
	data_len = dir_item_data_len(p);
	if (add_entry_name(entry, p + hdr, avail - hdr, name_len) < 0)
		return 0;
	if (data_len > avail - hdr - name_len)
		return 0;
	if (data_len > 0 && data_len <= DATA_HEX_MAX)
		add(entry, "data_hex", hex_json(p + hdr + name_len, data_len));
	return hdr + name_len + data_len;
}

/* DIR_ITEM, DIR_INDEX, XATTR_ITEM: "entries". A DIR_INDEX holds exactly one. */
static void decode_dir_item(struct json_object *out, const struct item_ctx *c)
{
	struct json_object *entries = json_object_new_array();
	size_t cur = 0, count = 0;

	add(out, "entries", entries);
	while (cur < c->size) {
		struct json_object *entry = json_object_new_object();
		size_t len = decode_dir_entry(entry, c->data + cur, c->size - cur);
		size_t name_len;

		array_add_nonempty(entries, entry);
		if (len == 0) {
			set_malformed(c);
			return;
		}
		name_len = dir_item_name_len(c->data + cur);
		if (name_len == 0 || name_len > BTRFS_NAME_LEN)
			set_malformed(c);
		cur += len;
		count++;
	}
	if (count == 0 || (c->key->type == BTRFS_DIR_INDEX_KEY && count != 1))
		set_malformed(c);
}

static const struct field_desc root_ref_fields[] = {
	UINT_OF(struct btrfs_root_ref, dirid),
	UINT_OF(struct btrfs_root_ref, sequence),
	UINT_OF(struct btrfs_root_ref, name_len),
};

/* ROOT_REF and ROOT_BACKREF: one header and its name. */
static void decode_root_ref(struct json_object *out, const struct item_ctx *c)
{
	size_t hdr = sizeof(struct btrfs_root_ref);
	size_t name_len;

	if (decode_fields(out, c->data, c->size, root_ref_fields, ARRAY_LEN(root_ref_fields)) < 0) {
		set_malformed(c);
		return;
	}
	name_len = root_ref_name_len(c->data);
	if (add_entry_name(out, c->data + hdr, c->size - hdr, name_len) < 0 ||
	    c->size != hdr + name_len || name_len == 0 || name_len > BTRFS_NAME_LEN)
		set_malformed(c);
}

static const struct field_desc dir_log_fields[] = {
	UINT_OF(struct btrfs_dir_log_item, end),
};

static void decode_dir_log(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, dir_log_fields, struct btrfs_dir_log_item);
}

/* ------------------------------------------------------------------ */
/* File extents and checksums                                         */

static const struct field_desc file_extent_header_fields[] = {
	UINT_OF(struct btrfs_file_extent_item, generation),
	UINT_OF(struct btrfs_file_extent_item, ram_bytes),
	UINT_OF(struct btrfs_file_extent_item, compression),
	UINT_OF(struct btrfs_file_extent_item, encryption),
	UINT_OF(struct btrfs_file_extent_item, other_encoding),
	UINT_OF(struct btrfs_file_extent_item, type),
};

static const struct field_desc file_extent_disk_fields[] = {
	UINT_OF(struct btrfs_file_extent_item, disk_bytenr),
	UINT_OF(struct btrfs_file_extent_item, disk_num_bytes),
	UINT_OF(struct btrfs_file_extent_item, offset),
	UINT_OF(struct btrfs_file_extent_item, num_bytes),
};

/* EXTENT_DATA: an inline extent is the header plus data ("inline_size");
 * regular and prealloc extents are the whole struct. */
static void decode_file_extent(struct json_object *out, const struct item_ctx *c)
{
	size_t hdr = BTRFS_FILE_EXTENT_INLINE_DATA_START;
	uint8_t type;

	if (decode_fields(out, c->data, c->size, file_extent_header_fields,
			  ARRAY_LEN(file_extent_header_fields)) < 0) {
		set_malformed(c);
		return;
	}
	type = file_extent_type(c->data);
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		add_u64(out, "inline_size", c->size - hdr);
		/* uncompressed inline data is exactly ram_bytes long */
		if (file_extent_compression(c->data) == BTRFS_COMPRESS_NONE &&
		    file_extent_ram_bytes(c->data) != c->size - hdr)
			set_malformed(c);
		return;
	}
	if (type != BTRFS_FILE_EXTENT_REG && type != BTRFS_FILE_EXTENT_PREALLOC) {
		set_malformed(c);
		return;
	}
	DECODE_FIXED(out, c, file_extent_disk_fields, struct btrfs_file_extent_item);
}

/* EXTENT_CSUM: one checksum per sector, as hex strings. */
static void decode_extent_csum(struct json_object *out, const struct item_ctx *c)
{
	struct json_object *csums;
	size_t n;

	if (c->csum_size == 0 || c->csum_size > BTRFS_CSUM_SIZE) {
		set_malformed(c);
		return;
	}
	n = c->size / c->csum_size;
	if (n == 0 || c->size % c->csum_size)
		set_malformed(c);
	add_u64(out, "num_csums", n);
	csums = json_object_new_array_ext((int)n);
	for (size_t i = 0; i < n; i++)
		json_object_array_add(csums, hex_json(c->data + i * c->csum_size, c->csum_size));
	add(out, "csums", csums);
}

/* ------------------------------------------------------------------ */
/* Extent tree                                                        */

static const struct field_desc extent_item_fields[] = {
	UINT_OF(struct btrfs_extent_item, refs),
	UINT_OF(struct btrfs_extent_item, generation),
	UINT_OF(struct btrfs_extent_item, flags),
};

static const struct field_desc tree_block_info_fields[] = {
	FIELD_OF(struct btrfs_tree_block_info, key, FK_KEY),
	UINT_OF(struct btrfs_tree_block_info, level),
};

static const struct field_desc data_ref_fields[] = {
	UINT_OF(struct btrfs_extent_data_ref, root),
	UINT_OF(struct btrfs_extent_data_ref, objectid),
	UINT_OF(struct btrfs_extent_data_ref, offset),
	UINT_OF(struct btrfs_extent_data_ref, count),
};

/* One inline ref whose body (after the type byte) is complete at body. */
static struct json_object *inline_ref_json(uint8_t type, const uint8_t *body)
{
	struct json_object *ref = json_object_new_object();

	add(ref, "type", json_object_new_string(key_type_name(type)));
	switch (type) {
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_EXTENT_OWNER_REF_KEY:
		add_u64(ref, "root", get_le64(body));
		break;
	case BTRFS_SHARED_BLOCK_REF_KEY:
		add_u64(ref, "parent", get_le64(body));
		break;
	case BTRFS_EXTENT_DATA_REF_KEY:
		decode_fields(ref, body, sizeof(struct btrfs_extent_data_ref), data_ref_fields,
			      ARRAY_LEN(data_ref_fields));
		break;
	case BTRFS_SHARED_DATA_REF_KEY:
		add_u64(ref, "parent", get_le64(body));
		add_u64(ref, "count", shared_data_ref_count(body + sizeof(uint64_t)));
		break;
	}
	return ref;
}

/* How many references of the extent an inline ref accounts for. */
static uint64_t inline_ref_count(uint8_t type, const uint8_t *body)
{
	switch (type) {
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_SHARED_BLOCK_REF_KEY:
		return 1;
	case BTRFS_EXTENT_DATA_REF_KEY:
		return data_ref_count(body);
	case BTRFS_SHARED_DATA_REF_KEY:
		return shared_data_ref_count(body + sizeof(uint64_t));
	default:
		return 0; /* the owner ref is not a reference */
	}
}

/* The inline refs from offset cur to the end of the item, as "inline_refs".
 * They may account for fewer references than the item's refs (the rest are
 * keyed items) but never for more. */
static void decode_inline_refs(struct json_object *out, const struct item_ctx *c, size_t cur)
{
	struct json_object *refs = json_object_new_array();
	uint64_t counted = 0;

	add(out, "inline_refs", refs);
	while (cur < c->size) {
		uint8_t type = c->data[cur];
		size_t body = extent_inline_ref_size(type) ? extent_inline_ref_size(type) - 1u : 0;

		if (body == 0 || c->size - cur - 1 < body) {
			set_malformed(c);
			return;
		}
		json_object_array_add(refs, inline_ref_json(type, c->data + cur + 1));
		counted += inline_ref_count(type, c->data + cur + 1);
		cur += 1 + body;
	}
	if (counted > extent_refs(c->data))
		set_malformed(c);
}

/* EXTENT_ITEM and METADATA_ITEM: header, tree_block_info for a non-skinny
 * tree block, then inline refs. */
static void decode_extent_item(struct json_object *out, const struct item_ctx *c)
{
	size_t cur = sizeof(struct btrfs_extent_item);

	if (decode_fields(out, c->data, c->size, extent_item_fields, ARRAY_LEN(extent_item_fields)) < 0) {
		set_malformed(c);
		return;
	}
	if (c->key->type == BTRFS_EXTENT_ITEM_KEY &&
	    (extent_flags(c->data) & BTRFS_EXTENT_FLAG_TREE_BLOCK)) {
		if (decode_fields(out, c->data + cur, c->size - cur, tree_block_info_fields,
				  ARRAY_LEN(tree_block_info_fields)) < 0) {
			set_malformed(c);
			return;
		}
		cur += sizeof(struct btrfs_tree_block_info);
	}
	decode_inline_refs(out, c, cur);
}

static void decode_extent_data_ref(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, data_ref_fields, struct btrfs_extent_data_ref);
}

static const struct field_desc shared_data_ref_fields[] = {
	UINT_OF(struct btrfs_shared_data_ref, count),
};

static void decode_shared_data_ref(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, shared_data_ref_fields, struct btrfs_shared_data_ref);
}

static const struct field_desc owner_ref_fields[] = {
	UINT_OF(struct btrfs_extent_owner_ref, root_id),
};

static void decode_owner_ref(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, owner_ref_fields, struct btrfs_extent_owner_ref);
}

/* Items whose key says everything: any body is an inconsistency. */
static void decode_no_body(struct json_object *out, const struct item_ctx *c)
{
	(void)out;
	if (c->size != 0)
		set_malformed(c);
}

static const struct field_desc block_group_fields[] = {
	UINT_OF(struct btrfs_block_group_item, used),
	UINT_OF(struct btrfs_block_group_item, chunk_objectid),
	UINT_OF(struct btrfs_block_group_item, flags),
};

static void decode_block_group(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, block_group_fields, struct btrfs_block_group_item);
}

/* ------------------------------------------------------------------ */
/* Free space                                                         */

static const struct field_desc free_space_info_fields[] = {
	UINT_OF(struct btrfs_free_space_info, extent_count),
	UINT_OF(struct btrfs_free_space_info, flags),
};

static void decode_free_space_info(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, free_space_info_fields, struct btrfs_free_space_info);
}

/* Whether a bitmap of size bytes can cover length bytes (the key offset) at
 * one bit per sector for some sector size btrfs allows; the real sector size
 * is not known here. */
static int bitmap_size_plausible(uint64_t length, uint32_t size)
{
	for (uint64_t sector = 2048; sector <= 65536; sector *= 2) {
		uint64_t bits = length / sector;

		if (length % sector == 0 && (bits + 7) / 8 == size)
			return 1;
	}
	return 0;
}

/* FREE_SPACE_BITMAP: one bit per sector of the range; shown as a count. */
static void decode_free_space_bitmap(struct json_object *out, const struct item_ctx *c)
{
	uint64_t bits = 0;

	for (size_t i = 0; i < c->size; i++)
		bits += (uint64_t)__builtin_popcount(c->data[i]);
	add_u64(out, "bits_set", bits);
	if (c->size == 0 || !bitmap_size_plausible(c->key->offset, c->size))
		set_malformed(c);
}

static const struct field_desc free_space_header_fields[] = {
	FIELD_OF(struct free_space_header, location, FK_KEY),
	UINT_OF(struct free_space_header, generation),
	UINT_OF(struct free_space_header, num_entries),
	UINT_OF(struct free_space_header, num_bitmaps),
};

/* ------------------------------------------------------------------ */
/* Chunk and device trees                                             */

static const struct field_desc chunk_fields[] = {
	UINT_OF(struct btrfs_chunk, length),
	UINT_OF(struct btrfs_chunk, owner),
	UINT_OF(struct btrfs_chunk, stripe_len),
	UINT_OF(struct btrfs_chunk, type),
	UINT_OF(struct btrfs_chunk, io_align),
	UINT_OF(struct btrfs_chunk, io_width),
	UINT_OF(struct btrfs_chunk, sector_size),
	UINT_OF(struct btrfs_chunk, num_stripes),
	UINT_OF(struct btrfs_chunk, sub_stripes),
};

static const struct field_desc stripe_fields[] = {
	UINT_OF(struct btrfs_stripe, devid),
	UINT_OF(struct btrfs_stripe, offset),
	FIELD_OF(struct btrfs_stripe, dev_uuid, FK_UUID),
};

/* CHUNK_ITEM: the chunk members and "stripes" (as many as fit). */
static void decode_chunk(struct json_object *out, const struct item_ctx *c)
{
	struct json_object *stripes;
	unsigned num;

	if (decode_fields(out, c->data, c->size, chunk_fields, ARRAY_LEN(chunk_fields)) < 0) {
		set_malformed(c);
		return;
	}
	num = chunk_num_stripes(c->data);
	stripes = json_object_new_array();
	add(out, "stripes", stripes);
	for (unsigned i = 0; i < num; i++) {
		size_t off = chunk_item_size(i);
		struct json_object *stripe;

		if (off + sizeof(struct btrfs_stripe) > c->size)
			break;
		stripe = json_object_new_object();
		decode_fields(stripe, c->data + off, sizeof(struct btrfs_stripe), stripe_fields,
			      ARRAY_LEN(stripe_fields));
		json_object_array_add(stripes, stripe);
	}
	if (num == 0 || c->size != chunk_item_size(num))
		set_malformed(c);
}

static const struct field_desc dev_item_fields[] = {
	UINT_OF(struct btrfs_dev_item, devid),
	UINT_OF(struct btrfs_dev_item, total_bytes),
	UINT_OF(struct btrfs_dev_item, bytes_used),
	UINT_OF(struct btrfs_dev_item, io_align),
	UINT_OF(struct btrfs_dev_item, io_width),
	UINT_OF(struct btrfs_dev_item, sector_size),
	UINT_OF(struct btrfs_dev_item, type),
	UINT_OF(struct btrfs_dev_item, generation),
	UINT_OF(struct btrfs_dev_item, start_offset),
	UINT_OF(struct btrfs_dev_item, dev_group),
	UINT_OF(struct btrfs_dev_item, seek_speed),
	UINT_OF(struct btrfs_dev_item, bandwidth),
	FIELD_OF(struct btrfs_dev_item, uuid, FK_UUID),
	FIELD_OF(struct btrfs_dev_item, fsid, FK_UUID),
};

static void decode_dev_item(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, dev_item_fields, struct btrfs_dev_item);
}

static const struct field_desc dev_extent_fields[] = {
	UINT_OF(struct btrfs_dev_extent, chunk_tree),
	UINT_OF(struct btrfs_dev_extent, chunk_objectid),
	UINT_OF(struct btrfs_dev_extent, chunk_offset),
	UINT_OF(struct btrfs_dev_extent, length),
	FIELD_OF(struct btrfs_dev_extent, chunk_tree_uuid, FK_UUID),
};

static void decode_dev_extent(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, dev_extent_fields, struct btrfs_dev_extent);
}

static const struct field_desc raid_stride_fields[] = {
	UINT_OF(struct btrfs_raid_stride, devid),
	UINT_OF(struct btrfs_raid_stride, physical),
};

/* An item that is an array of fixed-size records: each full one decoded. */
static struct json_object *record_array_json(const struct item_ctx *c, size_t rec_size,
					     const struct field_desc *fields, size_t n)
{
	struct json_object *arr = json_object_new_array();

	for (size_t off = 0; off + rec_size <= c->size; off += rec_size) {
		struct json_object *rec = json_object_new_object();

		decode_fields(rec, c->data + off, rec_size, fields, n);
		json_object_array_add(arr, rec);
	}
	if (c->size == 0 || c->size % rec_size)
		set_malformed(c);
	return arr;
}

static void decode_raid_stripe(struct json_object *out, const struct item_ctx *c)
{
	add(out, "strides", record_array_json(c, sizeof(struct btrfs_raid_stride), raid_stride_fields,
					       ARRAY_LEN(raid_stride_fields)));
}

/* An array of every full little-endian u64 in the item. */
static struct json_object *u64_array_json(const struct item_ctx *c)
{
	struct json_object *arr = json_object_new_array();

	for (size_t off = 0; off + sizeof(uint64_t) <= c->size; off += sizeof(uint64_t))
		json_object_array_add(arr, json_object_new_uint64(get_le64(c->data + off)));
	return arr;
}

/* PERSISTENT_ITEM (device stats): five counters, later kernels may add more. */
static void decode_dev_stats(struct json_object *out, const struct item_ctx *c)
{
	add(out, "values", u64_array_json(c));
	if (c->size < sizeof(struct btrfs_dev_stats_item) || c->size % sizeof(uint64_t))
		set_malformed(c);
}

static const struct field_desc dev_replace_fields[] = {
	UINT_OF(struct btrfs_dev_replace_item, src_devid),
	UINT_OF(struct btrfs_dev_replace_item, cursor_left),
	UINT_OF(struct btrfs_dev_replace_item, cursor_right),
	UINT_OF(struct btrfs_dev_replace_item, cont_reading_from_srcdev_mode),
	UINT_OF(struct btrfs_dev_replace_item, replace_state),
	UINT_OF(struct btrfs_dev_replace_item, time_started),
	UINT_OF(struct btrfs_dev_replace_item, time_stopped),
	UINT_OF(struct btrfs_dev_replace_item, num_write_errors),
	UINT_OF(struct btrfs_dev_replace_item, num_uncorrectable_read_errors),
};

static void decode_dev_replace(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, dev_replace_fields, struct btrfs_dev_replace_item);
}

/* ------------------------------------------------------------------ */
/* Root tree                                                          */

static const struct field_desc root_item_v1_fields[] = {
	FIELD_OF(struct btrfs_root_item, inode, FK_INODE),
	UINT_OF(struct btrfs_root_item, generation),
	UINT_OF(struct btrfs_root_item, root_dirid),
	UINT_OF(struct btrfs_root_item, bytenr),
	UINT_OF(struct btrfs_root_item, byte_limit),
	UINT_OF(struct btrfs_root_item, bytes_used),
	UINT_OF(struct btrfs_root_item, last_snapshot),
	UINT_OF(struct btrfs_root_item, flags),
	UINT_OF(struct btrfs_root_item, refs),
	FIELD_OF(struct btrfs_root_item, drop_progress, FK_KEY),
	UINT_OF(struct btrfs_root_item, drop_level),
	UINT_OF(struct btrfs_root_item, level),
};

static const struct field_desc root_item_v2_fields[] = {
	UINT_OF(struct btrfs_root_item, generation_v2),
	FIELD_OF(struct btrfs_root_item, uuid, FK_UUID),
	FIELD_OF(struct btrfs_root_item, parent_uuid, FK_UUID),
	FIELD_OF(struct btrfs_root_item, received_uuid, FK_UUID),
	UINT_OF(struct btrfs_root_item, ctransid),
	UINT_OF(struct btrfs_root_item, otransid),
	UINT_OF(struct btrfs_root_item, stransid),
	UINT_OF(struct btrfs_root_item, rtransid),
	FIELD_OF(struct btrfs_root_item, ctime, FK_TIME),
	FIELD_OF(struct btrfs_root_item, otime, FK_TIME),
	FIELD_OF(struct btrfs_root_item, stime, FK_TIME),
	FIELD_OF(struct btrfs_root_item, rtime, FK_TIME),
};

/* ROOT_ITEM: a legacy item stops after "level"; a current one has it all.
 * Any size in between, or beyond, is malformed. */
static void decode_root_item(struct json_object *out, const struct item_ctx *c)
{
	if (decode_fields(out, c->data, c->size, root_item_v1_fields, ARRAY_LEN(root_item_v1_fields)) == 0)
		decode_fields(out, c->data, c->size, root_item_v2_fields, ARRAY_LEN(root_item_v2_fields));
	check_sizes(c);
}

static const struct field_desc balance_fields[] = {
	UINT_OF(struct btrfs_balance_item, flags),
	FIELD_OF(struct btrfs_balance_item, data, FK_BALANCE_ARGS),
	FIELD_OF(struct btrfs_balance_item, meta, FK_BALANCE_ARGS),
	FIELD_OF(struct btrfs_balance_item, sys, FK_BALANCE_ARGS),
};

/* TEMPORARY_ITEM: only the balance item (objectid BALANCE) is known. */
static void decode_temporary(struct json_object *out, const struct item_ctx *c)
{
	if (c->key->objectid == BTRFS_BALANCE_OBJECTID)
		DECODE_FIXED(out, c, balance_fields, struct btrfs_balance_item);
}

/* ------------------------------------------------------------------ */
/* Quota, uuid, verity, strings                                       */

static const struct field_desc qgroup_status_fields[] = {
	UINT_OF(struct btrfs_qgroup_status_item, version),
	UINT_OF(struct btrfs_qgroup_status_item, generation),
	UINT_OF(struct btrfs_qgroup_status_item, flags),
	UINT_OF(struct btrfs_qgroup_status_item, rescan),
	UINT_OF(struct btrfs_qgroup_status_item, enable_gen),
};

/* QGROUP_STATUS: without enable_gen before simple quotas, with it after. */
static void decode_qgroup_status(struct json_object *out, const struct item_ctx *c)
{
	/* (the members that fit: a v1 item stops before enable_gen) */
	decode_fields(out, c->data, c->size, qgroup_status_fields, ARRAY_LEN(qgroup_status_fields));
	check_sizes(c);
}

static const struct field_desc qgroup_info_fields[] = {
	UINT_OF(struct btrfs_qgroup_info_item, generation),
	UINT_OF(struct btrfs_qgroup_info_item, rfer),
	UINT_OF(struct btrfs_qgroup_info_item, rfer_cmpr),
	UINT_OF(struct btrfs_qgroup_info_item, excl),
	UINT_OF(struct btrfs_qgroup_info_item, excl_cmpr),
};

static void decode_qgroup_info(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, qgroup_info_fields, struct btrfs_qgroup_info_item);
}

static const struct field_desc qgroup_limit_fields[] = {
	UINT_OF(struct btrfs_qgroup_limit_item, flags),
	UINT_OF(struct btrfs_qgroup_limit_item, max_rfer),
	UINT_OF(struct btrfs_qgroup_limit_item, max_excl),
	UINT_OF(struct btrfs_qgroup_limit_item, rsv_rfer),
	UINT_OF(struct btrfs_qgroup_limit_item, rsv_excl),
};

static void decode_qgroup_limit(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, qgroup_limit_fields, struct btrfs_qgroup_limit_item);
}

/* UUID_KEY_SUBVOL / UUID_KEY_RECEIVED_SUBVOL: the subvolume ids with that uuid. */
static void decode_uuid_item(struct json_object *out, const struct item_ctx *c)
{
	add(out, "subvol_ids", u64_array_json(c));
	check_sizes(c);
}

static const struct field_desc verity_desc_fields[] = {
	UINT_OF(struct btrfs_verity_descriptor_item, size),
	UINT_OF(struct btrfs_verity_descriptor_item, encryption),
};

static void decode_verity_desc(struct json_object *out, const struct item_ctx *c)
{
	DECODE_FIXED(out, c, verity_desc_fields, struct btrfs_verity_descriptor_item);
}

static void decode_string_item(struct json_object *out, const struct item_ctx *c)
{
	add_name(out, "string", c->data, c->size);
}

/* Items with a body nobody interprets (merkle tree blocks): nothing to show. */
static void decode_opaque(struct json_object *out, const struct item_ctx *c)
{
	(void)out;
	(void)c;
}

/* ------------------------------------------------------------------ */
/* Dispatch                                                           */

typedef void (*item_decoder)(struct json_object *out, const struct item_ctx *c);

static const item_decoder decoders[256] = {
	[BTRFS_INODE_ITEM_KEY] = decode_inode_item,
	[BTRFS_INODE_REF_KEY] = decode_inode_ref,
	[BTRFS_INODE_EXTREF_KEY] = decode_inode_extref,
	[BTRFS_XATTR_ITEM_KEY] = decode_dir_item,
	[BTRFS_VERITY_DESC_ITEM_KEY] = decode_verity_desc,
	[BTRFS_VERITY_MERKLE_ITEM_KEY] = decode_opaque,
	[BTRFS_ORPHAN_ITEM_KEY] = decode_no_body,
	[BTRFS_DIR_LOG_ITEM_KEY] = decode_dir_log,
	[BTRFS_DIR_LOG_INDEX_KEY] = decode_dir_log,
	[BTRFS_DIR_ITEM_KEY] = decode_dir_item,
	[BTRFS_DIR_INDEX_KEY] = decode_dir_item,
	[BTRFS_EXTENT_DATA_KEY] = decode_file_extent,
	[BTRFS_EXTENT_CSUM_KEY] = decode_extent_csum,
	[BTRFS_ROOT_ITEM_KEY] = decode_root_item,
	[BTRFS_ROOT_BACKREF_KEY] = decode_root_ref,
	[BTRFS_ROOT_REF_KEY] = decode_root_ref,
	[BTRFS_EXTENT_ITEM_KEY] = decode_extent_item,
	[BTRFS_METADATA_ITEM_KEY] = decode_extent_item,
	[BTRFS_EXTENT_OWNER_REF_KEY] = decode_owner_ref,
	[BTRFS_TREE_BLOCK_REF_KEY] = decode_no_body,
	[BTRFS_EXTENT_DATA_REF_KEY] = decode_extent_data_ref,
	[BTRFS_SHARED_BLOCK_REF_KEY] = decode_no_body,
	[BTRFS_SHARED_DATA_REF_KEY] = decode_shared_data_ref,
	[BTRFS_BLOCK_GROUP_ITEM_KEY] = decode_block_group,
	[BTRFS_FREE_SPACE_INFO_KEY] = decode_free_space_info,
	[BTRFS_FREE_SPACE_EXTENT_KEY] = decode_no_body,
	[BTRFS_FREE_SPACE_BITMAP_KEY] = decode_free_space_bitmap,
	[BTRFS_DEV_EXTENT_KEY] = decode_dev_extent,
	[BTRFS_DEV_ITEM_KEY] = decode_dev_item,
	[BTRFS_CHUNK_ITEM_KEY] = decode_chunk,
	[BTRFS_RAID_STRIPE_KEY] = decode_raid_stripe,
	[BTRFS_QGROUP_STATUS_KEY] = decode_qgroup_status,
	[BTRFS_QGROUP_INFO_KEY] = decode_qgroup_info,
	[BTRFS_QGROUP_LIMIT_KEY] = decode_qgroup_limit,
	[BTRFS_QGROUP_RELATION_KEY] = decode_no_body,
	[BTRFS_TEMPORARY_ITEM_KEY] = decode_temporary,
	[BTRFS_PERSISTENT_ITEM_KEY] = decode_dev_stats,
	[BTRFS_DEV_REPLACE_KEY] = decode_dev_replace,
	[BTRFS_UUID_KEY_SUBVOL] = decode_uuid_item,
	[BTRFS_UUID_KEY_RECEIVED_SUBVOL] = decode_uuid_item,
	[BTRFS_STRING_ITEM_KEY] = decode_string_item,
};

/* The one tree-dependent layout: the untyped v1 free-space cache header. */
static void decode_untyped(struct json_object *out, const struct item_ctx *c)
{
	if (c->key->objectid == BTRFS_FREE_SPACE_OBJECTID && c->owner_tree == BTRFS_ROOT_TREE_OBJECTID)
		DECODE_FIXED(out, c, free_space_header_fields, struct free_space_header);
}

struct json_object *item_fields_json(const struct btrfs_key *key, const uint8_t *data, uint32_t size,
				     unsigned csum_size, uint64_t owner_tree, int *malformed)
{
	static const uint8_t no_data[1];
	struct json_object *out = json_object_new_object();
	int ignored;
	struct item_ctx c = {
		.key = key,
		.data = data ? data : no_data, /* decoders do pointer arithmetic on it */
		.size = data ? size : 0,
		.csum_size = csum_size,
		.owner_tree = owner_tree,
		.malformed = malformed ? malformed : &ignored,
	};
	item_decoder decode = key->type == 0 ? decode_untyped : decoders[key->type];

	*c.malformed = 0;
	if (out && decode)
		decode(out, &c);
	return out;
}

/* ------------------------------------------------------------------ */
/* Text rendering                                                     */

#define TEXT_WIDTH 100
#define INLINE_ARRAY_MAX 8

struct text_line {
	FILE *out;
	int indent; /* tabs */
	int col;    /* 0: nothing on the current line yet */
};

static void line_end(struct text_line *l)
{
	if (l->col)
		fputc('\n', l->out);
	l->col = 0;
}

/* Put one "name value" token on the line, starting a new line if it would
 * run past TEXT_WIDTH. */
static void line_token(struct text_line *l, const char *tok, size_t len)
{
	if (l->col && l->col + 1 + (int)len > TEXT_WIDTH)
		line_end(l);
	if (l->col == 0) {
		for (int i = 0; i < l->indent; i++)
			fputc('\t', l->out);
		l->col = l->indent * 8;
	} else {
		fputc(' ', l->out);
		l->col++;
	}
	fwrite(tok, 1, len, l->out);
	l->col += (int)len;
}

static void print_escaped(FILE *f, const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char ch = (unsigned char)s[i];

		if (ch < 0x20 || ch == 0x7f || ch == '\\')
			fprintf(f, "\\x%02x", ch);
		else
			fputc(ch, f);
	}
}

static int is_timespec(struct json_object *v)
{
	return json_object_is_type(v, json_type_object) && json_object_object_length(v) == 2 &&
	       json_object_object_get_ex(v, "sec", NULL) && json_object_object_get_ex(v, "nsec", NULL);
}

static int is_key_field(const char *name, struct json_object *v)
{
	return json_object_is_type(v, json_type_array) && json_object_array_length(v) == 3 &&
	       (!strcmp(name, "location") || !strcmp(name, "drop_progress") || !strcmp(name, "key"));
}

static void print_int(FILE *f, const char *name, struct json_object *v)
{
	int64_t s = json_object_get_int64(v);
	uint64_t u = json_object_get_uint64(v);

	if (s < 0)
		fprintf(f, "%lld", (long long)s);
	else if (name && !strcmp(name, "mode"))
		fprintf(f, "0%llo", (unsigned long long)u);
	else if (name && !strcmp(name, "flags"))
		fprintf(f, "0x%llx", (unsigned long long)u);
	else
		fprintf(f, "%llu", (unsigned long long)u);
}

/* A value that fits on a line: scalars, timespecs, keys, short scalar arrays. */
static void print_inline_value(FILE *f, const char *name, struct json_object *v)
{
	char buf[KEY_TYPE_NAME_BUF];

	if (is_timespec(v)) {
		fprintf(f, "%llu.%09llu",
			(unsigned long long)json_object_get_uint64(json_object_object_get(v, "sec")),
			(unsigned long long)json_object_get_uint64(json_object_object_get(v, "nsec")));
	} else if (name && is_key_field(name, v)) {
		uint64_t type = json_object_get_uint64(json_object_array_get_idx(v, 1));

		fprintf(f, "(%llu %s %llu)",
			(unsigned long long)json_object_get_uint64(json_object_array_get_idx(v, 0)),
			key_type_name_or_number((uint8_t)type, buf),
			(unsigned long long)json_object_get_uint64(json_object_array_get_idx(v, 2)));
	} else if (json_object_is_type(v, json_type_array)) {
		for (size_t i = 0; i < json_object_array_length(v); i++) {
			if (i)
				fputc(' ', f);
			print_inline_value(f, NULL, json_object_array_get_idx(v, i));
		}
	} else if (json_object_is_type(v, json_type_int)) {
		print_int(f, name, v);
	} else if (json_object_is_type(v, json_type_string)) {
		print_escaped(f, json_object_get_string(v), (size_t)json_object_get_string_len(v));
	} else {
		fputs(json_object_to_json_string_ext(v, JSON_C_TO_STRING_PLAIN), f);
	}
}

static int array_has_containers(struct json_object *arr)
{
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);

		if (json_object_is_type(e, json_type_object) || json_object_is_type(e, json_type_array))
			return 1;
	}
	return 0;
}

static int is_inline(const char *name, struct json_object *v)
{
	if (is_timespec(v) || is_key_field(name, v))
		return 1;
	if (json_object_is_type(v, json_type_object))
		return 0;
	if (json_object_is_type(v, json_type_array))
		return json_object_array_length(v) <= INLINE_ARRAY_MAX && !array_has_containers(v);
	return 1;
}

/* Format "prefix value" into a token and put it on the line. */
static void line_field(struct text_line *l, const char *prefix, const char *name, struct json_object *v)
{
	char *tok = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&tok, &len);

	if (!mem)
		return;
	if (prefix)
		fprintf(mem, "%s ", prefix);
	print_inline_value(mem, name, v);
	fclose(mem);
	line_token(l, tok, len);
	free(tok);
}

static void print_object_fields(struct text_line *l, struct json_object *obj);

/* "name:" then each element one level deeper: objects as "[i] fields...",
 * scalars as a wrapped run. */
static void print_block_array(struct text_line *l, const char *name, struct json_object *arr)
{
	struct text_line sub = {l->out, l->indent + 1, 0};
	char label[32];

	line_end(l);
	line_token(l, name, strlen(name));
	fputc(':', l->out);
	line_end(l);
	for (size_t i = 0; i < json_object_array_length(arr); i++) {
		struct json_object *e = json_object_array_get_idx(arr, i);

		if (json_object_is_type(e, json_type_object) && !is_timespec(e)) {
			snprintf(label, sizeof(label), "[%zu]", i);
			line_token(&sub, label, strlen(label));
			print_object_fields(&sub, e);
			line_end(&sub);
		} else {
			line_field(&sub, NULL, NULL, e);
		}
	}
	line_end(&sub);
}

/* "name:" then the nested object's fields one level deeper. */
static void print_block_object(struct text_line *l, const char *name, struct json_object *obj)
{
	struct text_line sub = {l->out, l->indent + 1, 0};

	line_end(l);
	line_token(l, name, strlen(name));
	fputc(':', l->out);
	line_end(l);
	print_object_fields(&sub, obj);
	line_end(&sub);
}

static void print_object_fields(struct text_line *l, struct json_object *obj)
{
	json_object_object_foreach(obj, name, v) {
		if (is_inline(name, v))
			line_field(l, name, name, v);
		else if (json_object_is_type(v, json_type_array))
			print_block_array(l, name, v);
		else
			print_block_object(l, name, v);
	}
}

void item_fields_text(FILE *out, struct json_object *fields, int indent)
{
	struct text_line l = {out, indent < 0 ? 0 : indent, 0};

	if (!out || !json_object_is_type(fields, json_type_object))
		return;
	print_object_fields(&l, fields);
	line_end(&l);
}
