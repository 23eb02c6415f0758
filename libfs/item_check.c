// SPDX-License-Identifier: LGPL-2.1-or-later
/* The item validator: see item_check.h. The rules follow what the kernel's
 * tree checker refuses when it reads a leaf (check_leaf_item and the chunk
 * checks); each check_* below takes one key type. */
#include <errno.h>
#include <stddef.h>

#include <btk/csum.h>
#include <btk/fs.h>
#include <btk/item_check.h>

int item_view_le16(const struct item_view *v, uint32_t at, uint16_t *out)
{
	const uint8_t *p = item_view_ptr(v, at, 2);

	if (!p)
		return -EUCLEAN;
	*out = get_le16(p);
	return 0;
}

int item_view_le32(const struct item_view *v, uint32_t at, uint32_t *out)
{
	const uint8_t *p = item_view_ptr(v, at, 4);

	if (!p)
		return -EUCLEAN;
	*out = get_le32(p);
	return 0;
}

int item_view_le64(const struct item_view *v, uint32_t at, uint64_t *out)
{
	const uint8_t *p = item_view_ptr(v, at, 8);

	if (!p)
		return -EUCLEAN;
	*out = get_le64(p);
	return 0;
}

void item_geometry_of(const struct fs_info *fs, struct item_geometry *g)
{
	*g = (struct item_geometry){ fs->sectorsize, fs->nodesize, fs->csum_size, fs->incompat };
}

uint32_t item_min_size(uint8_t key_type)
{
	switch (key_type) {
	case BTRFS_INODE_ITEM_KEY: return sizeof(struct btrfs_inode_item);
	case BTRFS_INODE_REF_KEY: return sizeof(struct btrfs_inode_ref);
	case BTRFS_INODE_EXTREF_KEY: return sizeof(struct btrfs_inode_extref);
	case BTRFS_XATTR_ITEM_KEY:
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY: return sizeof(struct btrfs_dir_item);
	case BTRFS_DIR_LOG_ITEM_KEY:
	case BTRFS_DIR_LOG_INDEX_KEY: return sizeof(struct btrfs_dir_log_item);
	case BTRFS_EXTENT_DATA_KEY: return BTRFS_FILE_EXTENT_INLINE_DATA_START;
	case BTRFS_ROOT_ITEM_KEY: return BTRFS_ROOT_ITEM_V1_SIZE;
	case BTRFS_ROOT_REF_KEY:
	case BTRFS_ROOT_BACKREF_KEY: return sizeof(struct btrfs_root_ref);
	case BTRFS_EXTENT_ITEM_KEY:
	case BTRFS_METADATA_ITEM_KEY: return sizeof(struct btrfs_extent_item);
	case BTRFS_EXTENT_DATA_REF_KEY: return sizeof(struct btrfs_extent_data_ref);
	case BTRFS_SHARED_DATA_REF_KEY: return sizeof(struct btrfs_shared_data_ref);
	case BTRFS_BLOCK_GROUP_ITEM_KEY: return sizeof(struct btrfs_block_group_item);
	case BTRFS_FREE_SPACE_INFO_KEY: return sizeof(struct btrfs_free_space_info);
	case BTRFS_DEV_EXTENT_KEY: return sizeof(struct btrfs_dev_extent);
	case BTRFS_DEV_ITEM_KEY: return sizeof(struct btrfs_dev_item);
	case BTRFS_CHUNK_ITEM_KEY: return sizeof(struct btrfs_chunk) + sizeof(struct btrfs_stripe);
	case BTRFS_QGROUP_STATUS_KEY: return BTRFS_QGROUP_STATUS_V1_SIZE;
	case BTRFS_QGROUP_INFO_KEY: return sizeof(struct btrfs_qgroup_info_item);
	case BTRFS_QGROUP_LIMIT_KEY: return sizeof(struct btrfs_qgroup_limit_item);
	case BTRFS_DEV_REPLACE_KEY: return sizeof(struct btrfs_dev_replace_item);
	default: return 0;
	}
}

/* ---- entries ---- */

/* Header size and name/data lengths of the entry at p (hdr bytes present). */
static uint32_t entry_header(uint8_t type, const uint8_t *p, uint16_t *name_len, uint16_t *data_len)
{
	*data_len = 0;
	switch (type) {
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY:
	case BTRFS_XATTR_ITEM_KEY:
		if (p) {
			*name_len = dir_item_name_len(p);
			*data_len = dir_item_data_len(p);
		}
		return sizeof(struct btrfs_dir_item);
	case BTRFS_INODE_REF_KEY:
		if (p)
			*name_len = inode_ref_name_len(p);
		return sizeof(struct btrfs_inode_ref);
	case BTRFS_INODE_EXTREF_KEY:
		if (p)
			*name_len = inode_extref_name_len(p);
		return sizeof(struct btrfs_inode_extref);
	case BTRFS_ROOT_REF_KEY:
	case BTRFS_ROOT_BACKREF_KEY:
		if (p)
			*name_len = root_ref_name_len(p);
		return sizeof(struct btrfs_root_ref);
	default:
		return 0;
	}
}

int item_entry_next(uint8_t key_type, const struct item_view *v, uint32_t *off, struct item_entry *e)
{
	uint16_t name_len = 0, data_len = 0;
	uint32_t hdr = entry_header(key_type, NULL, &name_len, &data_len);
	const uint8_t *p;

	if (!hdr)
		return -EINVAL;
	if (*off >= v->size)
		return 0;
	if (!(p = item_view_ptr(v, *off, hdr)))
		return -EUCLEAN;
	entry_header(key_type, p, &name_len, &data_len);
	if (!item_view_ptr(v, *off + hdr, (uint32_t)name_len + data_len))
		return -EUCLEAN;
	*e = (struct item_entry){ .off = *off, .len = hdr + name_len + data_len, .hdr = p, .name = p + hdr,
				  .name_len = name_len, .body = data_len ? p + hdr + name_len : NULL,
				  .data_len = data_len };
	*off += e->len;
	return 1;
}

/* ---- inline references ---- */

uint32_t extent_item_refs_start(const struct btrfs_key *key, const struct item_view *v)
{
	const void *ei = ITEM_VIEW_STRUCT(v, 0, struct btrfs_extent_item);
	uint32_t start = sizeof(struct btrfs_extent_item);

	if (key->type == BTRFS_EXTENT_ITEM_KEY && ei && (extent_flags(ei) & BTRFS_EXTENT_FLAG_TREE_BLOCK))
		start += sizeof(struct btrfs_tree_block_info);
	return start;
}

int inline_ref_next(const struct item_view *v, uint32_t *off, struct inline_ref_view *r)
{
	const uint8_t *p;
	uint32_t len;

	if (*off >= v->size)
		return 0;
	r->off = *off;
	r->type = v->data[*off];
	r->len = len = extent_inline_ref_size(r->type);
	if (!len || !(p = item_view_ptr(v, *off, len)))
		return -EUCLEAN;
	r->body = p + 1;
	r->sort_off = r->type == BTRFS_EXTENT_DATA_REF_KEY
			      ? btrfs_extent_data_ref_hash(data_ref_root(r->body), data_ref_objectid(r->body),
							   data_ref_offset(r->body))
			      : get_le64(r->body);
	*off += len;
	return 1;
}

enum item_fault inline_refs_check(const struct item_view *v, uint32_t off, uint32_t *at)
{
	struct inline_ref_view r;
	uint64_t last_off = 0;
	uint8_t last_type = 0;
	int ret;

	while ((ret = inline_ref_next(v, &off, &r)) == 1) {
		/* sorted by type, within a type by offset from the largest down;
		 * a simple-quota owner ref comes first, whatever follows */
		if (last_type != BTRFS_EXTENT_OWNER_REF_KEY &&
		    (r.type < last_type || (r.type == last_type && r.sort_off > last_off))) {
			*at = r.off;
			return ITEM_REF_ORDER;
		}
		last_off = r.sort_off;
		last_type = r.type;
	}
	if (ret < 0) {
		*at = off;
		return ITEM_REF_TYPE;
	}
	return ITEM_OK;
}

/* ---- per key type ---- */

static int key_rules(const struct item_geometry *g, const struct btrfs_key *k, struct item_verdict *out);

/* Record a fault; 0 when the verdict asks for sizes only and this is not
 * one (the check goes on), else -EUCLEAN. */
static int fault(struct item_verdict *out, enum item_fault f, uint32_t at, const char *why)
{
	if (out->sizes_only && !item_fault_is_size(f))
		return 0;
	out->fault = f;
	out->at = at;
	out->why = why;
	return -EUCLEAN;
}

#define FAULT(o, f, at, why)                                  \
	do {                                                  \
		if (fault((o), (f), (at), (why)))             \
			return -EUCLEAN;                      \
	} while (0)
static bool aligned(uint64_t v, uint32_t a)
{
	return !a || v % a == 0;
}

static int check_inode(const struct btrfs_key *k, const struct item_view *v, struct item_verdict *out)
{
	if (v->size < sizeof(struct btrfs_inode_item))
		FAULT(out, ITEM_TOO_SMALL, 0, "inode item too small");
	if (k->offset)
		FAULT(out, ITEM_BAD_KEY, 0, "inode item key offset is not 0");
	if (v->size != sizeof(struct btrfs_inode_item))
		FAULT(out, ITEM_BAD_SIZE, 0, "inode item larger than its struct");
	return 0;
}

enum item_fault item_entry_check(uint8_t key_type, const struct item_entry *e)
{
	bool dir = key_type == BTRFS_DIR_ITEM_KEY || key_type == BTRFS_DIR_INDEX_KEY;
	bool ref = key_type == BTRFS_INODE_REF_KEY || key_type == BTRFS_INODE_EXTREF_KEY;
	uint8_t t;

	/* (a ref's name is bounded by the item only) */
	if (e->name_len == 0 || (!ref && e->name_len > BTRFS_NAME_LEN))
		return ITEM_NAME_LEN;
	if (dir && e->data_len)
		return ITEM_DATA_LEN;
	if (!dir && key_type != BTRFS_XATTR_ITEM_KEY)
		return ITEM_OK;
	t = dir_item_type(e->hdr) & ~BTRFS_FT_ENCRYPTED;
	if (dir ? t == BTRFS_FT_UNKNOWN || t >= BTRFS_FT_XATTR : t != BTRFS_FT_XATTR)
		return ITEM_ENTRY_TYPE;
	return ITEM_OK;
}

/* Refs and dir entries: whole entries that fill the item. */
static int check_entries(const struct btrfs_key *k, const struct item_view *v, struct item_verdict *out)
{
	static const char *const why[] = {
		[ITEM_NAME_LEN] = "name length out of range",
		[ITEM_DATA_LEN] = "dir entry has data",
		[ITEM_ENTRY_TYPE] = "dir entry type invalid",
	};
	struct item_entry e;
	enum item_fault f;
	uint32_t off = 0;
	unsigned n = 0;
	int ret;

	if (v->size < item_min_size(k->type))
		FAULT(out, ITEM_TOO_SMALL, 0, "item smaller than one entry");
	while ((ret = item_entry_next(k->type, v, &off, &e)) == 1) {
		if ((f = item_entry_check(k->type, &e)) != ITEM_OK)
			FAULT(out, f, e.off, why[f]);
		if (k->type == BTRFS_DIR_INDEX_KEY && n)
			FAULT(out, ITEM_BAD_SIZE, e.off, "dir index holds more than one entry");
		if ((k->type == BTRFS_ROOT_REF_KEY || k->type == BTRFS_ROOT_BACKREF_KEY) && n)
			FAULT(out, ITEM_BAD_SIZE, e.off, "root ref holds more than one name");
		n++;
	}
	if (ret < 0)
		FAULT(out, ITEM_TRUNCATED, off, "entry runs past the end of the item");
	return 0;
}

static int check_file_extent(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
			     struct item_verdict *out)
{
	const uint8_t *d = v->data;
	uint8_t type;

	if (v->size < BTRFS_FILE_EXTENT_INLINE_DATA_START)
		FAULT(out, ITEM_TOO_SMALL, 0, "file extent too small");
	type = file_extent_type(d);
	if (type > BTRFS_FILE_EXTENT_PREALLOC)
		FAULT(out, ITEM_BAD_FIELD, 0, "unknown type");
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		if (file_extent_compression(d) == BTRFS_COMPRESS_NONE &&
		    v->size != BTRFS_FILE_EXTENT_INLINE_DATA_START + file_extent_ram_bytes(d))
			FAULT(out, ITEM_BAD_SIZE, 0, "inline extent size is not its ram_bytes");
	} else if (v->size != sizeof(struct btrfs_file_extent_item)) {
		FAULT(out, ITEM_BAD_SIZE, 0, "file extent has the wrong size");
	}
	if (file_extent_compression(d) > BTRFS_COMPRESS_ZSTD)
		FAULT(out, ITEM_BAD_FIELD, 0, "unknown compression");
	if (file_extent_encryption(d) || file_extent_other_encoding(d))
		FAULT(out, ITEM_BAD_FIELD, 0, "unknown encryption or encoding");
	if (type == BTRFS_FILE_EXTENT_INLINE) {
		if (k->offset)
			FAULT(out, ITEM_BAD_KEY, 0, "inline extent not at offset 0");
		return 0;
	}
	if (type == BTRFS_FILE_EXTENT_PREALLOC && file_extent_compression(d) != BTRFS_COMPRESS_NONE)
		FAULT(out, ITEM_BAD_FIELD, 0, "preallocated extent is compressed");
	if (!aligned(k->offset, g->sectorsize) || !aligned(file_extent_ram_bytes(d), g->sectorsize) ||
	    !aligned(file_extent_disk_bytenr(d), g->sectorsize) ||
	    !aligned(file_extent_disk_num_bytes(d), g->sectorsize) ||
	    !aligned(file_extent_offset(d), g->sectorsize) || !aligned(file_extent_num_bytes(d), g->sectorsize))
		FAULT(out, ITEM_BAD_FIELD, 0, "not sector aligned");
	if (k->offset + file_extent_num_bytes(d) < k->offset)
		FAULT(out, ITEM_BAD_FIELD, 0, "end overflows");
	return 0;
}

static int check_csum(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
		      struct item_verdict *out)
{
	if (!g->csum_size || v->size % g->csum_size)
		FAULT(out, ITEM_BAD_SIZE, 0, "csum item size not a multiple of the checksum size");
	if (k->objectid != BTRFS_EXTENT_CSUM_OBJECTID)
		FAULT(out, ITEM_BAD_KEY, 0, "csum item objectid is not EXTENT_CSUM");
	if (!aligned(k->offset, g->sectorsize))
		FAULT(out, ITEM_BAD_KEY, 0, "csum item offset not sector aligned");
	return 0;
}

static int check_root(const struct item_view *v, struct item_verdict *out)
{
	if (v->size < BTRFS_ROOT_ITEM_V1_SIZE)
		FAULT(out, ITEM_TOO_SMALL, 0, "root item too small");
	if (v->size != BTRFS_ROOT_ITEM_V1_SIZE && v->size != sizeof(struct btrfs_root_item))
		FAULT(out, ITEM_BAD_SIZE, 0, "root item neither the old nor the new size");
	if (root_item_level(v->data) >= BTRFS_MAX_LEVEL || root_item_drop_level(v->data) >= BTRFS_MAX_LEVEL)
		FAULT(out, ITEM_BAD_FIELD, 0, "root item level out of range");
	return 0;
}

static int check_extent(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
			struct item_verdict *out)
{
	uint32_t at = 0;
	uint64_t flags;
	enum item_fault f;

	if (v->size < sizeof(struct btrfs_extent_item))
		FAULT(out, ITEM_TOO_SMALL, 0, "extent item too small");
	if (key_rules(g, k, out))
		return -EUCLEAN;
	flags = extent_flags(v->data);
	if (!!(flags & BTRFS_EXTENT_FLAG_DATA) == !!(flags & BTRFS_EXTENT_FLAG_TREE_BLOCK))
		FAULT(out, ITEM_BAD_FIELD, 0, "flags not data xor tree block");
	if (k->type == BTRFS_EXTENT_ITEM_KEY && (flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) &&
	    v->size < sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_tree_block_info))
		FAULT(out, ITEM_BAD_SIZE, 0, "tree block extent item without its tree block info");
	if ((f = inline_refs_check(v, extent_item_refs_start(k, v), &at)) != ITEM_OK)
		FAULT(out, f, at, f == ITEM_REF_ORDER ? "inline references out of order"
							      : "inline reference of an invalid type");
	return 0;
}

/* Keyed back references: a fixed body, none for the tree-block kinds. */
static int check_keyed_ref(const struct btrfs_key *k, const struct item_view *v, struct item_verdict *out)
{
	uint32_t want = k->type == BTRFS_EXTENT_DATA_REF_KEY ? sizeof(struct btrfs_extent_data_ref)
			: k->type == BTRFS_SHARED_DATA_REF_KEY ? sizeof(struct btrfs_shared_data_ref) : 0;

	if (v->size < want)
		FAULT(out, ITEM_TOO_SMALL, 0, "reference item too small");
	if (v->size != want)
		FAULT(out, ITEM_BAD_SIZE, 0, "reference item of the wrong size");
	return 0;
}

/* The number of stripes a profile allows, in [*min, *max]. */
static void profile_stripes(uint64_t type, uint16_t *min, uint16_t *max)
{
	*min = 1;
	*max = UINT16_MAX;
	if (type & BTRFS_BLOCK_GROUP_RAID10)
		*min = 2;
	else if (type & BTRFS_BLOCK_GROUP_RAID1)
		*min = *max = 2;
	else if (type & BTRFS_BLOCK_GROUP_RAID1C3)
		*min = *max = 3;
	else if (type & BTRFS_BLOCK_GROUP_RAID1C4)
		*min = *max = 4;
	else if (type & BTRFS_BLOCK_GROUP_RAID5)
		*min = 2;
	else if (type & BTRFS_BLOCK_GROUP_RAID6)
		*min = 3;
	else if (type & BTRFS_BLOCK_GROUP_DUP)
		*min = *max = 2;
	else if (!(type & BTRFS_BLOCK_GROUP_RAID0))
		*min = *max = 1;
}

/* Type bits of a chunk or block group: a known kind, at most one profile. */
static const char *bg_type_bad(const struct item_geometry *g, uint64_t type)
{
	uint64_t profile = type & BTRFS_BLOCK_GROUP_PROFILE_MASK, kind = type & BTRFS_BLOCK_GROUP_TYPE_MASK;

	if (type & ~(BTRFS_BLOCK_GROUP_TYPE_MASK | BTRFS_BLOCK_GROUP_PROFILE_MASK))
		return "unknown type bits";
	if (profile & (profile - 1))
		return "more than one profile";
	if (!kind)
		return "no data, metadata or system bit";
	if ((kind & BTRFS_BLOCK_GROUP_SYSTEM) && kind != BTRFS_BLOCK_GROUP_SYSTEM)
		return "system mixed with another kind";
	if (kind == (BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA) &&
	    !(g->incompat & BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS))
		return "mixed data and metadata without the mixed-groups feature";
	return NULL;
}

static int check_chunk(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
		       struct item_verdict *out)
{
	const uint8_t *c = v->data;
	uint16_t n, min, max;
	const char *why;
	uint64_t type, known;

	if (v->size < sizeof(struct btrfs_chunk))
		FAULT(out, ITEM_TOO_SMALL, 0, "chunk item too small");
	n = chunk_num_stripes(c);
	if (!n)
		FAULT(out, ITEM_BAD_FIELD, 0, "chunk has no stripes");
	if (v->size != sizeof(struct btrfs_chunk) + (uint32_t)n * sizeof(struct btrfs_stripe))
		FAULT(out, ITEM_BAD_SIZE, 0, "chunk item size does not match its stripe count");
	if (k->objectid != BTRFS_FIRST_CHUNK_TREE_OBJECTID || !aligned(k->offset, g->sectorsize))
		FAULT(out, ITEM_BAD_KEY, 0, "chunk key objectid or offset");
	if (!chunk_length(c) || !aligned(chunk_length(c), g->sectorsize))
		FAULT(out, ITEM_BAD_FIELD, 0, "chunk length zero or not sector aligned");
	if (k->offset + chunk_length(c) < k->offset)
		FAULT(out, ITEM_BAD_FIELD, 0, "chunk range wraps around the address space");
	if (chunk_stripe_len(c) != BTRFS_STRIPE_LEN)
		FAULT(out, ITEM_BAD_FIELD, 0, "chunk stripe_len is not 64KiB");
	if (g->sectorsize && chunk_sector_size(c) != g->sectorsize)
		FAULT(out, ITEM_BAD_FIELD, 0, "chunk sector_size is not the filesystem's sector size");
	type = chunk_type(c);
	known = BTRFS_BLOCK_GROUP_TYPE_MASK | BTRFS_BLOCK_GROUP_PROFILE_MASK;
	if ((why = bg_type_bad(g, type & known)))
		FAULT(out, ITEM_BAD_FIELD, 0, why);
	profile_stripes(type, &min, &max);
	if (n < min || n > max || ((type & BTRFS_BLOCK_GROUP_RAID10) && (chunk_sub_stripes(c) != 2 || n % 2)))
		FAULT(out, ITEM_BAD_FIELD, 0, "stripe count does not fit the profile");
	/* last, so that a reader mapping chunks of a newer format can tell
	 * "valid but for bits it does not know" from a broken item */
	if (type & ~known)
		FAULT(out, ITEM_UNKNOWN_BITS, 0, "unknown type bits");
	return 0;
}

static int check_dev_item(const struct btrfs_key *k, const struct item_view *v, struct item_verdict *out)
{
	if (v->size < sizeof(struct btrfs_dev_item))
		FAULT(out, ITEM_TOO_SMALL, 0, "dev item too small");
	if (v->size != sizeof(struct btrfs_dev_item))
		FAULT(out, ITEM_BAD_SIZE, 0, "dev item larger than its struct");
	if (k->objectid != BTRFS_DEV_ITEMS_OBJECTID)
		FAULT(out, ITEM_BAD_KEY, 0, "dev item objectid is not 1");
	if (dev_item_devid(v->data) != k->offset)
		FAULT(out, ITEM_BAD_FIELD, 0, "dev item devid differs from its key");
	return 0;
}

static int check_dev_extent(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
			    struct item_verdict *out)
{
	const uint8_t *d = v->data;

	if (v->size < sizeof(struct btrfs_dev_extent))
		FAULT(out, ITEM_TOO_SMALL, 0, "dev extent too small");
	if (v->size != sizeof(struct btrfs_dev_extent))
		FAULT(out, ITEM_BAD_SIZE, 0, "dev extent larger than its struct");
	if (dev_extent_chunk_tree(d) != BTRFS_CHUNK_TREE_OBJECTID ||
	    dev_extent_chunk_objectid(d) != BTRFS_FIRST_CHUNK_TREE_OBJECTID ||
	    !aligned(k->offset | dev_extent_chunk_offset(d) | dev_extent_length(d), g->sectorsize))
		FAULT(out, ITEM_BAD_FIELD, 0, "chunk tree, chunk objectid or alignment");
	return 0;
}

static int check_block_group(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
			     struct item_verdict *out)
{
	const char *why;

	if (v->size != sizeof(struct btrfs_block_group_item))
		FAULT(out, v->size < sizeof(struct btrfs_block_group_item) ? ITEM_TOO_SMALL : ITEM_BAD_SIZE, 0,
			     "block group item size");
	if (!k->offset || !aligned(k->objectid, g->sectorsize))
		FAULT(out, ITEM_BAD_KEY, 0, "block group key start or length");
	if (block_group_chunk_objectid(v->data) != BTRFS_FIRST_CHUNK_TREE_OBJECTID)
		FAULT(out, ITEM_BAD_FIELD, 0, "block group chunk objectid is not 256");
	if (block_group_used(v->data) > k->offset)
		FAULT(out, ITEM_BAD_FIELD, 0, "block group uses more than its length");
	if ((why = bg_type_bad(g, block_group_flags(v->data))))
		FAULT(out, ITEM_BAD_FIELD, 0, why);
	return 0;
}

/* An item of a fixed size (0 for the items that are all key). */
static int check_exact(const struct item_view *v, uint32_t want, struct item_verdict *out)
{
	if (v->size == want)
		return 0;
	FAULT(out, v->size < want ? ITEM_TOO_SMALL : ITEM_BAD_SIZE, 0, "item size is not its type's");
	return 0;
}

static int check_free_space_bitmap(const struct item_geometry *g, const struct btrfs_key *k,
				   const struct item_view *v, struct item_verdict *out)
{
	uint64_t bits = g->sectorsize ? k->offset / g->sectorsize : 0;

	if (!v->size)
		FAULT(out, ITEM_BAD_SIZE, 0, "empty free space bitmap");
	if (!g->sectorsize || !k->offset || !aligned(k->offset, g->sectorsize))
		FAULT(out, ITEM_BAD_KEY, 0, "free space bitmap length");
	if (g->sectorsize && v->size != (bits + 7) / 8)
		FAULT(out, ITEM_BAD_SIZE, 0, "free space bitmap size is not its range's");
	return 0;
}

static int check_qgroup_status(const struct item_view *v, struct item_verdict *out)
{
	if (v->size < BTRFS_QGROUP_STATUS_V1_SIZE)
		FAULT(out, ITEM_TOO_SMALL, 0, "qgroup status too small");
	if (v->size != BTRFS_QGROUP_STATUS_V1_SIZE && v->size != sizeof(struct btrfs_qgroup_status_item))
		FAULT(out, ITEM_BAD_SIZE, 0, "qgroup status neither the old nor the new size");
	return 0;
}

static int check_multiple(const struct item_view *v, uint32_t unit, bool empty_ok, struct item_verdict *out)
{
	if (v->size % unit || (!empty_ok && !v->size))
		FAULT(out, ITEM_BAD_SIZE, 0, "item size is not a multiple of its unit");
	return 0;
}

static int key_rules(const struct item_geometry *g, const struct btrfs_key *k, struct item_verdict *out)
{
	if (k->type != BTRFS_EXTENT_ITEM_KEY && k->type != BTRFS_METADATA_ITEM_KEY)
		return 0;
	if (!aligned(k->objectid, g->sectorsize))
		FAULT(out, ITEM_BAD_KEY, 0, "bytenr not sector aligned");
	/* (an extent item's key offset is its length) */
	if (k->type == BTRFS_EXTENT_ITEM_KEY && extent_length_refused(k->objectid, k->offset, g->sectorsize))
		FAULT(out, ITEM_BAD_KEY, 0, "extent length 0, not sector aligned or past the address space");
	if (k->type == BTRFS_METADATA_ITEM_KEY && k->offset >= BTRFS_MAX_LEVEL)
		FAULT(out, ITEM_BAD_KEY, 0, "tree level out of range");
	if (k->type == BTRFS_METADATA_ITEM_KEY && !(g->incompat & BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA))
		FAULT(out, ITEM_BAD_KEY, 0, "skinny metadata item without the skinny-metadata feature");
	return 0;
}

int item_check_fs(const struct fs_info *fs, const struct btrfs_key *key, const void *data, uint32_t size,
		  struct item_verdict *out)
{
	struct item_geometry g;
	struct item_view v = item_view_of(data, size);

	item_geometry_of(fs, &g);
	return item_check(&g, key, &v, out);
}

bool item_is_whole(const struct fs_info *fs, const struct btrfs_key *key, const void *data, uint32_t size)
{
	struct item_geometry g;
	struct item_view v = item_view_of(data, size);
	struct item_verdict vd;

	item_geometry_of(fs, &g);
	return item_check_sizes(&g, key, &v, &vd) == 0;
}

static int item_rules(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
		      struct item_verdict *out)
{
	if (!v->data && v->size)
		FAULT(out, ITEM_TOO_SMALL, 0, "no item data");
	switch (k->type) {
	case BTRFS_INODE_ITEM_KEY:
		return check_inode(k, v, out);
	case BTRFS_INODE_REF_KEY:
	case BTRFS_INODE_EXTREF_KEY:
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY:
	case BTRFS_XATTR_ITEM_KEY:
	case BTRFS_ROOT_REF_KEY:
	case BTRFS_ROOT_BACKREF_KEY:
		return check_entries(k, v, out);
	case BTRFS_ORPHAN_ITEM_KEY:
		return check_exact(v, 0, out);
	case BTRFS_DIR_LOG_ITEM_KEY:
	case BTRFS_DIR_LOG_INDEX_KEY:
		return check_exact(v, sizeof(struct btrfs_dir_log_item), out);
	case BTRFS_EXTENT_DATA_KEY:
		return check_file_extent(g, k, v, out);
	case BTRFS_EXTENT_CSUM_KEY:
		return check_csum(g, k, v, out);
	case BTRFS_ROOT_ITEM_KEY:
		return check_root(v, out);
	case BTRFS_EXTENT_ITEM_KEY:
	case BTRFS_METADATA_ITEM_KEY:
		return check_extent(g, k, v, out);
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_SHARED_BLOCK_REF_KEY:
	case BTRFS_EXTENT_DATA_REF_KEY:
	case BTRFS_SHARED_DATA_REF_KEY:
		return check_keyed_ref(k, v, out);
	case BTRFS_BLOCK_GROUP_ITEM_KEY:
		return check_block_group(g, k, v, out);
	case BTRFS_FREE_SPACE_INFO_KEY:
		return check_exact(v, sizeof(struct btrfs_free_space_info), out);
	case BTRFS_FREE_SPACE_EXTENT_KEY:
		return check_exact(v, 0, out);
	case BTRFS_FREE_SPACE_BITMAP_KEY:
		return check_free_space_bitmap(g, k, v, out);
	case BTRFS_DEV_EXTENT_KEY:
		return check_dev_extent(g, k, v, out);
	case BTRFS_DEV_ITEM_KEY:
		return check_dev_item(k, v, out);
	case BTRFS_CHUNK_ITEM_KEY:
		return check_chunk(g, k, v, out);
	case BTRFS_QGROUP_STATUS_KEY:
		return check_qgroup_status(v, out);
	case BTRFS_QGROUP_INFO_KEY:
	case BTRFS_QGROUP_LIMIT_KEY:
		/* (the key's offset is the qgroup; the objectid is always 0) */
		if (k->objectid)
			FAULT(out, ITEM_BAD_KEY, 0, "qgroup item objectid is not 0");
		return check_exact(v, k->type == BTRFS_QGROUP_INFO_KEY ? sizeof(struct btrfs_qgroup_info_item)
								      : sizeof(struct btrfs_qgroup_limit_item), out);
	case BTRFS_QGROUP_RELATION_KEY:
		return check_exact(v, 0, out);
	case BTRFS_UUID_KEY_SUBVOL:
	case BTRFS_UUID_KEY_RECEIVED_SUBVOL:
		return check_multiple(v, sizeof(uint64_t), false, out);
	case BTRFS_PERSISTENT_ITEM_KEY:
		/* device statistics: whole counters, no more than the kernel knows */
		if (k->objectid == BTRFS_DEV_STATS_OBJECTID && v->size > sizeof(struct btrfs_dev_stats_item))
			FAULT(out, ITEM_BAD_SIZE, 0, "dev stats item larger than its struct");
		return k->objectid == BTRFS_DEV_STATS_OBJECTID ? check_multiple(v, sizeof(uint64_t), true, out) : 0;
	case BTRFS_DEV_REPLACE_KEY:
		return check_exact(v, sizeof(struct btrfs_dev_replace_item), out);
	case BTRFS_TEMPORARY_ITEM_KEY:
		return k->objectid == BTRFS_BALANCE_OBJECTID ? check_exact(v, sizeof(struct btrfs_balance_item), out)
							     : 0;
	case BTRFS_RAID_STRIPE_KEY:
		return check_multiple(v, sizeof(struct btrfs_raid_stride), false, out);
	default:
		return 0;
	}
}

int item_key_check(const struct item_geometry *g, const struct btrfs_key *k, struct item_verdict *out)
{
	*out = (struct item_verdict){ ITEM_OK, 0, NULL, false };
	return key_rules(g, k, out);
}

int item_check(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
	       struct item_verdict *out)
{
	*out = (struct item_verdict){ ITEM_OK, 0, NULL, false };
	return item_rules(g, k, v, out);
}

int item_check_sizes(const struct item_geometry *g, const struct btrfs_key *k, const struct item_view *v,
		     struct item_verdict *out)
{
	int ret;

	*out = (struct item_verdict){ ITEM_OK, 0, NULL, true };
	ret = item_rules(g, k, v, out);
	out->sizes_only = false;
	return ret;
}
