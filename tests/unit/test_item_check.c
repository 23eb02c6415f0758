// SPDX-License-Identifier: GPL-2.0-only
/* libfs/item_check: one valid item of each type passes, and each damage the
 * kernel's tree checker refuses gives the fault it is, at its place. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <btk/csum.h>
#include <btk/format.h>
#include <btk/item_check.h>

static const struct item_geometry geo = { 4096, 16384, 4, BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA };

static enum item_fault check(uint64_t objectid, uint8_t type, uint64_t offset, const void *data, uint32_t size)
{
	struct btrfs_key k = { objectid, type, offset };
	struct item_view v = item_view_of(data, size);
	struct item_verdict vd;
	int ret = item_check(&geo, &k, &v, &vd);

	cr_assert((ret == 0) == (vd.fault == ITEM_OK), "return %d with fault %d", ret, vd.fault);
	cr_assert(ret == 0 || ret == -EUCLEAN);
	cr_assert(ret == 0 || vd.why != NULL);
	return vd.fault;
}

/* A dir entry (or xattr) at p: location, name, data; returns its size. */
static uint32_t put_dir_entry(uint8_t *p, uint8_t ftype, const char *name, uint16_t data_len)
{
	uint16_t len = (uint16_t)strlen(name);

	memset(p, 0, sizeof(struct btrfs_dir_item));
	disk_key_set_objectid(dir_item_location_ptr(p), 257);
	disk_key_set_type(dir_item_location_ptr(p), BTRFS_INODE_ITEM_KEY);
	dir_item_set_name_len(p, len);
	dir_item_set_data_len(p, data_len);
	dir_item_set_type(p, ftype);
	memcpy(p + sizeof(struct btrfs_dir_item), name, len);
	memset(p + sizeof(struct btrfs_dir_item) + len, 'v', data_len);
	return sizeof(struct btrfs_dir_item) + len + data_len;
}

Test(item_check, view_reads_stop_at_the_end)
{
	uint8_t b[10] = { 1, 2, 3, 4, 5, 6, 7, 8, 9, 10 };
	struct item_view v = item_view_of(b, sizeof(b));
	uint64_t x = 0;
	uint16_t y = 0;

	cr_assert_eq(item_view_le64(&v, 2, &x), 0);
	cr_assert_eq(x, get_le64(b + 2));
	cr_assert_eq(item_view_le64(&v, 3, &x), -EUCLEAN);
	cr_assert_eq(x, get_le64(b + 2), "untouched on failure");
	cr_assert_eq(item_view_le16(&v, 8, &y), 0);
	cr_assert_eq(item_view_le16(&v, 9, &y), -EUCLEAN);
	cr_assert_eq(item_view_le16(&v, UINT32_MAX, &y), -EUCLEAN, "no wrap past the end");
	cr_assert_null(ITEM_VIEW_STRUCT(&v, 1, struct btrfs_inode_ref));
	cr_assert_not_null(ITEM_VIEW_STRUCT(&v, 0, struct btrfs_inode_ref));
	cr_assert_not_null(ITEM_VIEW_STRUCT(&v, 0, struct btrfs_shared_data_ref));
}

Test(item_check, inode_item)
{
	uint8_t b[sizeof(struct btrfs_inode_item) + 1] = { 0 };

	cr_assert_eq(check(256, BTRFS_INODE_ITEM_KEY, 0, b, sizeof(struct btrfs_inode_item)), ITEM_OK);
	cr_assert_eq(check(256, BTRFS_INODE_ITEM_KEY, 0, b, sizeof(struct btrfs_inode_item) - 1), ITEM_TOO_SMALL);
	cr_assert_eq(check(256, BTRFS_INODE_ITEM_KEY, 0, b, 0), ITEM_TOO_SMALL);
	cr_assert_eq(check(256, BTRFS_INODE_ITEM_KEY, 0, b, sizeof(b)), ITEM_BAD_SIZE);
	cr_assert_eq(check(256, BTRFS_INODE_ITEM_KEY, 1, b, sizeof(struct btrfs_inode_item)), ITEM_BAD_KEY);
	cr_assert_eq(check(256, BTRFS_INODE_ITEM_KEY, 1, b, sizeof(b)), ITEM_BAD_KEY, "the key before the size");
}

Test(item_check, dir_item_several_entries)
{
	uint8_t b[256];
	uint32_t n = put_dir_entry(b, BTRFS_FT_REG_FILE, "a", 0);

	n += put_dir_entry(b + n, BTRFS_FT_DIR, "bcd", 0);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, n), ITEM_OK);
	/* a DIR_INDEX holds exactly one */
	cr_assert_eq(check(256, BTRFS_DIR_INDEX_KEY, 2, b, n), ITEM_BAD_SIZE);
	cr_assert_eq(check(256, BTRFS_DIR_INDEX_KEY, 2, b, n - 33), ITEM_OK);
	/* cut inside the second entry's name, and inside its header */
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, n - 1), ITEM_TRUNCATED);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, 31 + 10), ITEM_TRUNCATED);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, 10), ITEM_TOO_SMALL);
}

Test(item_check, dir_item_lengths_and_types)
{
	uint8_t b[2048];
	char name[300];
	uint32_t n;

	/* name_len larger than the item: truncated, not read past */
	n = put_dir_entry(b, BTRFS_FT_REG_FILE, "abc", 0);
	dir_item_set_name_len(b, 4000);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, n), ITEM_TRUNCATED);
	/* a name over 255 bytes that fits the item */
	memset(name, 'x', 256);
	name[256] = 0;
	n = put_dir_entry(b, BTRFS_FT_REG_FILE, name, 0);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, n), ITEM_NAME_LEN);
	name[255] = 0;
	n = put_dir_entry(b, BTRFS_FT_REG_FILE, name, 0);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, n), ITEM_OK);
	n = put_dir_entry(b, BTRFS_FT_REG_FILE, "", 0);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, n), ITEM_NAME_LEN);
	/* data only in xattrs; types in range */
	n = put_dir_entry(b, BTRFS_FT_REG_FILE, "a", 4);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, n), ITEM_DATA_LEN);
	n = put_dir_entry(b, BTRFS_FT_XATTR, "user.a", 4);
	cr_assert_eq(check(256, BTRFS_XATTR_ITEM_KEY, 7, b, n), ITEM_OK);
	/* data_len past the end */
	dir_item_set_data_len(b, 5);
	cr_assert_eq(check(256, BTRFS_XATTR_ITEM_KEY, 7, b, n), ITEM_TRUNCATED);
	n = put_dir_entry(b, BTRFS_FT_REG_FILE, "user.a", 0);
	cr_assert_eq(check(256, BTRFS_XATTR_ITEM_KEY, 7, b, n), ITEM_ENTRY_TYPE);
	n = put_dir_entry(b, BTRFS_FT_XATTR, "a", 0);
	cr_assert_eq(check(256, BTRFS_DIR_ITEM_KEY, 7, b, n), ITEM_ENTRY_TYPE);
	n = put_dir_entry(b, BTRFS_FT_MAX, "a", 0);
	cr_assert_eq(check(256, BTRFS_DIR_INDEX_KEY, 7, b, n), ITEM_ENTRY_TYPE);
	n = put_dir_entry(b, BTRFS_FT_UNKNOWN, "a", 0);
	cr_assert_eq(check(256, BTRFS_DIR_INDEX_KEY, 7, b, n), ITEM_ENTRY_TYPE);
	n = put_dir_entry(b, BTRFS_FT_REG_FILE | BTRFS_FT_ENCRYPTED, "a", 0);
	cr_assert_eq(check(256, BTRFS_DIR_INDEX_KEY, 7, b, n), ITEM_OK);
}

Test(item_check, inode_ref_chains)
{
	uint8_t b[64] = { 0 };
	struct item_view v;
	struct item_entry e;
	uint32_t off = 0;

	inode_ref_set_index(b, 2);
	inode_ref_set_name_len(b, 3);
	memcpy(b + 10, "abc", 3);
	inode_ref_set_index(b + 13, 3);
	inode_ref_set_name_len(b + 13, 2);
	memcpy(b + 23, "de", 2);
	cr_assert_eq(check(257, BTRFS_INODE_REF_KEY, 256, b, 25), ITEM_OK);
	cr_assert_eq(check(257, BTRFS_INODE_REF_KEY, 256, b, 24), ITEM_TRUNCATED);
	cr_assert_eq(check(257, BTRFS_INODE_REF_KEY, 256, b, 20), ITEM_TRUNCATED);
	cr_assert_eq(check(257, BTRFS_INODE_REF_KEY, 256, b, 9), ITEM_TOO_SMALL);
	inode_ref_set_name_len(b + 13, 0);
	cr_assert_eq(check(257, BTRFS_INODE_REF_KEY, 256, b, 23), ITEM_NAME_LEN);
	/* the walker hands out entries until the damage */
	inode_ref_set_name_len(b + 13, 200);
	v = item_view_of(b, 25);
	cr_assert_eq(item_entry_next(BTRFS_INODE_REF_KEY, &v, &off, &e), 1);
	cr_assert_eq(e.name_len, 3);
	cr_assert_eq(memcmp(e.name, "abc", 3), 0);
	cr_assert_eq(off, 13);
	cr_assert_eq(item_entry_next(BTRFS_INODE_REF_KEY, &v, &off, &e), -EUCLEAN);
	cr_assert_eq(item_entry_next(BTRFS_CHUNK_ITEM_KEY, &v, &off, &e), -EINVAL);
}

Test(item_check, inode_extref)
{
	uint8_t b[64] = { 0 };

	inode_extref_set_parent_objectid(b, 256);
	inode_extref_set_name_len(b, 4);
	memcpy(b + sizeof(struct btrfs_inode_extref), "name", 4);
	cr_assert_eq(check(257, BTRFS_INODE_EXTREF_KEY, 1, b, sizeof(struct btrfs_inode_extref) + 4), ITEM_OK);
	cr_assert_eq(check(257, BTRFS_INODE_EXTREF_KEY, 1, b, sizeof(struct btrfs_inode_extref) + 3), ITEM_TRUNCATED);
	inode_extref_set_name_len(b, 0xffff);
	cr_assert_eq(check(257, BTRFS_INODE_EXTREF_KEY, 1, b, sizeof(b)), ITEM_TRUNCATED);
}

Test(item_check, root_item_old_and_new_sizes)
{
	uint8_t b[sizeof(struct btrfs_root_item) + 8] = { 0 };

	cr_assert_eq(check(5, BTRFS_ROOT_ITEM_KEY, 0, b, BTRFS_ROOT_ITEM_V1_SIZE), ITEM_OK);
	cr_assert_eq(check(5, BTRFS_ROOT_ITEM_KEY, 0, b, sizeof(struct btrfs_root_item)), ITEM_OK);
	cr_assert_eq(check(5, BTRFS_ROOT_ITEM_KEY, 0, b, BTRFS_ROOT_ITEM_V1_SIZE - 1), ITEM_TOO_SMALL);
	cr_assert_eq(check(5, BTRFS_ROOT_ITEM_KEY, 0, b, BTRFS_ROOT_ITEM_V1_SIZE + 8), ITEM_BAD_SIZE);
	cr_assert_eq(check(5, BTRFS_ROOT_ITEM_KEY, 0, b, sizeof(b)), ITEM_BAD_SIZE);
	root_item_set_level(b, BTRFS_MAX_LEVEL);
	cr_assert_eq(check(5, BTRFS_ROOT_ITEM_KEY, 0, b, sizeof(struct btrfs_root_item)), ITEM_BAD_FIELD);
}

Test(item_check, root_ref)
{
	uint8_t b[32] = { 0 };

	root_ref_set_dirid(b, 256);
	root_ref_set_name_len(b, 4);
	memcpy(b + sizeof(struct btrfs_root_ref), "snap", 4);
	cr_assert_eq(check(5, BTRFS_ROOT_REF_KEY, 256, b, sizeof(struct btrfs_root_ref) + 4), ITEM_OK);
	cr_assert_eq(check(256, BTRFS_ROOT_BACKREF_KEY, 5, b, sizeof(struct btrfs_root_ref) + 3), ITEM_TRUNCATED);
	cr_assert_eq(check(256, BTRFS_ROOT_BACKREF_KEY, 5, b, 10), ITEM_TOO_SMALL);
}

/* An extent item with the inline refs given, as (type, offset) pairs. */
static uint32_t put_extent(uint8_t *b, uint64_t flags, const uint8_t *types, const uint64_t *offs, int n)
{
	uint32_t at = sizeof(struct btrfs_extent_item);

	memset(b, 0, 256);
	extent_set_refs(b, (uint64_t)n);
	extent_set_flags(b, flags);
	for (int i = 0; i < n; i++) {
		b[at] = types[i];
		if (types[i] == BTRFS_EXTENT_DATA_REF_KEY) {
			data_ref_set_root(b + at + 1, 5);
			data_ref_set_objectid(b + at + 1, offs[i]);
			data_ref_set_count(b + at + 1, 1);
		} else {
			put_le64(b + at + 1, offs[i]);
			if (types[i] == BTRFS_SHARED_DATA_REF_KEY)
				shared_data_ref_set_count(b + at + 9, 1);
		}
		at += extent_inline_ref_size(types[i]) ? extent_inline_ref_size(types[i]) : 9;
	}
	return at;
}

Test(item_check, metadata_item_inline_refs)
{
	uint8_t b[256];
	const uint8_t t2[] = { BTRFS_TREE_BLOCK_REF_KEY, BTRFS_SHARED_BLOCK_REF_KEY };
	const uint64_t o2[] = { 5, 1 << 20 };
	const uint8_t bad[] = { BTRFS_TREE_BLOCK_REF_KEY, 99 };
	const uint8_t rev[] = { BTRFS_SHARED_BLOCK_REF_KEY, BTRFS_TREE_BLOCK_REF_KEY };
	const uint64_t same_up[] = { 5, 7 };
	const uint8_t same[] = { BTRFS_TREE_BLOCK_REF_KEY, BTRFS_TREE_BLOCK_REF_KEY };
	uint32_t n;

	n = put_extent(b, BTRFS_EXTENT_FLAG_TREE_BLOCK, t2, o2, 2);
	cr_assert_eq(check(1 << 20, BTRFS_METADATA_ITEM_KEY, 0, b, n), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_METADATA_ITEM_KEY, 0, b, n - 1), ITEM_REF_TYPE, "cut inline ref");
	cr_assert_eq(check(1 << 20, BTRFS_METADATA_ITEM_KEY, 8, b, n), ITEM_BAD_KEY, "level 8");
	cr_assert_eq(check((1 << 20) + 1, BTRFS_METADATA_ITEM_KEY, 0, b, n), ITEM_BAD_KEY, "unaligned");
	{
		struct item_geometry flat = geo;
		struct btrfs_key k = { 1 << 20, BTRFS_METADATA_ITEM_KEY, 0 };
		struct item_verdict vd;

		flat.incompat = 0;
		cr_assert_eq(item_key_check(&flat, &k, &vd), -EUCLEAN, "skinny item without the feature");
		cr_assert_eq(vd.fault, ITEM_BAD_KEY);
		cr_assert_eq(item_key_check(&geo, &k, &vd), 0);
	}
	cr_assert_eq(check(1 << 20, BTRFS_METADATA_ITEM_KEY, 0, b, 20), ITEM_TOO_SMALL);
	n = put_extent(b, BTRFS_EXTENT_FLAG_TREE_BLOCK, bad, o2, 2);
	cr_assert_eq(check(1 << 20, BTRFS_METADATA_ITEM_KEY, 0, b, n), ITEM_REF_TYPE);
	n = put_extent(b, BTRFS_EXTENT_FLAG_TREE_BLOCK, rev, o2, 2);
	cr_assert_eq(check(1 << 20, BTRFS_METADATA_ITEM_KEY, 0, b, n), ITEM_REF_ORDER);
	/* within a type, offsets from the largest down */
	n = put_extent(b, BTRFS_EXTENT_FLAG_TREE_BLOCK, same, same_up, 2);
	cr_assert_eq(check(1 << 20, BTRFS_METADATA_ITEM_KEY, 0, b, n), ITEM_REF_ORDER);
	n = put_extent(b, BTRFS_EXTENT_FLAG_TREE_BLOCK | BTRFS_EXTENT_FLAG_DATA, t2, o2, 2);
	cr_assert_eq(check(1 << 20, BTRFS_METADATA_ITEM_KEY, 0, b, n), ITEM_BAD_FIELD);
}

Test(item_check, extent_item_tree_block_info_and_data_refs)
{
	uint8_t b[256];
	const uint8_t t[] = { BTRFS_EXTENT_DATA_REF_KEY, BTRFS_SHARED_DATA_REF_KEY };
	const uint64_t o[] = { 257, 1 << 20 };
	struct btrfs_key k = { 1 << 20, BTRFS_EXTENT_ITEM_KEY, 4096 };
	struct item_view v;
	struct inline_ref_view r;
	uint32_t n, off;

	n = put_extent(b, BTRFS_EXTENT_FLAG_DATA, t, o, 2);
	cr_assert_eq(check(1 << 20, BTRFS_EXTENT_ITEM_KEY, 4096, b, n), ITEM_OK);
	v = item_view_of(b, n);
	off = extent_item_refs_start(&k, &v);
	cr_assert_eq(off, sizeof(struct btrfs_extent_item));
	cr_assert_eq(inline_ref_next(&v, &off, &r), 1);
	cr_assert_eq(r.type, BTRFS_EXTENT_DATA_REF_KEY);
	cr_assert_eq(r.sort_off, btrfs_extent_data_ref_hash(5, 257, 0));
	cr_assert_eq(inline_ref_next(&v, &off, &r), 1);
	cr_assert_eq(inline_ref_next(&v, &off, &r), 0);
	/* a non-skinny tree block needs its tree block info */
	memset(b, 0, sizeof(b));
	extent_set_flags(b, BTRFS_EXTENT_FLAG_TREE_BLOCK);
	cr_assert_eq(check(1 << 20, BTRFS_EXTENT_ITEM_KEY, 16384, b, sizeof(struct btrfs_extent_item)),
		     ITEM_BAD_SIZE);
	b[sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_tree_block_info)] = BTRFS_TREE_BLOCK_REF_KEY;
	cr_assert_eq(check(1 << 20, BTRFS_EXTENT_ITEM_KEY, 16384, b,
			   sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_tree_block_info) + 9), ITEM_OK);
}

Test(item_check, keyed_refs)
{
	uint8_t b[32] = { 0 };

	cr_assert_eq(check(1 << 20, BTRFS_TREE_BLOCK_REF_KEY, 5, b, 0), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_TREE_BLOCK_REF_KEY, 5, b, 8), ITEM_BAD_SIZE);
	cr_assert_eq(check(1 << 20, BTRFS_EXTENT_DATA_REF_KEY, 5, b, sizeof(struct btrfs_extent_data_ref)), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_EXTENT_DATA_REF_KEY, 5, b, 27), ITEM_TOO_SMALL);
	cr_assert_eq(check(1 << 20, BTRFS_SHARED_DATA_REF_KEY, 5, b, 4), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_SHARED_DATA_REF_KEY, 5, b, 3), ITEM_TOO_SMALL);
}

Test(item_check, file_extents_inline_and_regular)
{
	uint8_t b[sizeof(struct btrfs_file_extent_item) + 16] = { 0 };
	const uint32_t start = BTRFS_FILE_EXTENT_INLINE_DATA_START;

	file_extent_set_type(b, BTRFS_FILE_EXTENT_INLINE);
	file_extent_set_ram_bytes(b, 10);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 0, b, start + 10), ITEM_OK);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 0, b, start + 9), ITEM_BAD_SIZE);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 4096, b, start + 10), ITEM_BAD_KEY);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 0, b, start - 1), ITEM_TOO_SMALL);
	file_extent_set_compression(b, BTRFS_COMPRESS_ZSTD);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 0, b, start + 3), ITEM_OK, "compressed: any size");
	file_extent_set_compression(b, BTRFS_COMPRESS_ZSTD + 1);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 0, b, start + 3), ITEM_BAD_FIELD);

	memset(b, 0, sizeof(b));
	file_extent_set_type(b, BTRFS_FILE_EXTENT_REG);
	file_extent_set_disk_bytenr(b, 1 << 20);
	file_extent_set_disk_num_bytes(b, 8192);
	file_extent_set_num_bytes(b, 8192);
	file_extent_set_ram_bytes(b, 8192);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 4096, b, sizeof(struct btrfs_file_extent_item)), ITEM_OK);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 4096, b, sizeof(struct btrfs_file_extent_item) - 1),
		     ITEM_BAD_SIZE);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 4097, b, sizeof(struct btrfs_file_extent_item)),
		     ITEM_BAD_FIELD, "unaligned file offset");
	file_extent_set_type(b, BTRFS_FILE_EXTENT_PREALLOC + 1);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 4096, b, sizeof(struct btrfs_file_extent_item)),
		     ITEM_BAD_FIELD);
	file_extent_set_type(b, BTRFS_FILE_EXTENT_PREALLOC);
	file_extent_set_compression(b, BTRFS_COMPRESS_ZLIB);
	cr_assert_eq(check(257, BTRFS_EXTENT_DATA_KEY, 4096, b, sizeof(struct btrfs_file_extent_item)),
		     ITEM_BAD_FIELD);
}

Test(item_check, csum_items)
{
	uint8_t b[64] = { 0 };

	cr_assert_eq(check(BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 1 << 20, b, 12), ITEM_OK);
	cr_assert_eq(check(BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 1 << 20, b, 13), ITEM_BAD_SIZE);
	cr_assert_eq(check(BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 1 << 20, b, 0), ITEM_OK);
	cr_assert_eq(check(256, BTRFS_EXTENT_CSUM_KEY, 1 << 20, b, 13), ITEM_BAD_SIZE, "size first");
	cr_assert_eq(check(BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 100, b, 12), ITEM_BAD_KEY);
	cr_assert_eq(check(256, BTRFS_EXTENT_CSUM_KEY, 1 << 20, b, 12), ITEM_BAD_KEY);
}

/* A chunk of n stripes of this type. */
static uint32_t put_chunk(uint8_t *b, uint64_t type, uint16_t n)
{
	memset(b, 0, sizeof(struct btrfs_chunk) + n * sizeof(struct btrfs_stripe));
	chunk_set_length(b, 1 << 30);
	chunk_set_owner(b, BTRFS_EXTENT_TREE_OBJECTID);
	chunk_set_stripe_len(b, BTRFS_STRIPE_LEN);
	chunk_set_sector_size(b, geo.sectorsize);
	chunk_set_type(b, type);
	chunk_set_num_stripes(b, n);
	chunk_set_sub_stripes(b, type & BTRFS_BLOCK_GROUP_RAID10 ? 2 : 1);
	return sizeof(struct btrfs_chunk) + n * sizeof(struct btrfs_stripe);
}

Test(item_check, chunk_items)
{
	uint8_t b[sizeof(struct btrfs_chunk) + 8 * sizeof(struct btrfs_stripe)];
	uint32_t n;

	n = put_chunk(b, BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_DUP, 2);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n), ITEM_OK);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n - 1), ITEM_BAD_SIZE);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n + 32), ITEM_BAD_SIZE);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, 40), ITEM_TOO_SMALL);
	chunk_set_num_stripes(b, 3);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n + 32), ITEM_BAD_FIELD, "DUP has 2 stripes");
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA, 1);
	chunk_set_stripe_len(b, 4096);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n), ITEM_BAD_FIELD);
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_DUP, 2);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n), ITEM_BAD_FIELD, "two profiles");
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA | (1ULL << 20), 1);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n), ITEM_UNKNOWN_BITS, "unknown bit");
	/* an unknown bit is reported only when nothing else is wrong */
	chunk_set_num_stripes(b, 2);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n + 32), ITEM_BAD_FIELD, "single has 1 stripe");
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA, 1);
	chunk_set_sector_size(b, 512);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n), ITEM_BAD_FIELD, "sector size");
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA, 1);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, UINT64_MAX - 4095 - (1 << 20), b, n), ITEM_BAD_FIELD, "wraps");
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA, 1);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n), ITEM_BAD_FIELD, "mixed without the feature");
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID10, 4);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n), ITEM_OK);
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_RAID1C3, 2);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, 1 << 20, b, n), ITEM_BAD_FIELD);
	n = put_chunk(b, BTRFS_BLOCK_GROUP_DATA, 1);
	cr_assert_eq(check(256, BTRFS_CHUNK_ITEM_KEY, (1 << 20) + 1, b, n), ITEM_BAD_KEY);
}

Test(item_check, dev_items_and_extents)
{
	uint8_t b[sizeof(struct btrfs_dev_item)] = { 0 };

	dev_item_set_devid(b, 1);
	cr_assert_eq(check(BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 1, b, sizeof(b)), ITEM_OK);
	cr_assert_eq(check(BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 2, b, sizeof(b)), ITEM_BAD_FIELD);
	cr_assert_eq(check(BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 1, b, sizeof(b) - 1), ITEM_TOO_SMALL);
	cr_assert_eq(check(BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 1, b, 0), ITEM_TOO_SMALL);
	cr_assert_eq(check(2, BTRFS_DEV_ITEM_KEY, 1, b, sizeof(b)), ITEM_BAD_KEY);

	memset(b, 0, sizeof(b));
	dev_extent_set_chunk_tree(b, BTRFS_CHUNK_TREE_OBJECTID);
	dev_extent_set_chunk_objectid(b, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	dev_extent_set_chunk_offset(b, 1 << 20);
	dev_extent_set_length(b, 1 << 20);
	cr_assert_eq(check(1, BTRFS_DEV_EXTENT_KEY, 1 << 20, b, sizeof(struct btrfs_dev_extent)), ITEM_OK);
	cr_assert_eq(check(1, BTRFS_DEV_EXTENT_KEY, 1 << 20, b, sizeof(struct btrfs_dev_extent) - 1), ITEM_TOO_SMALL);
	cr_assert_eq(check(1, BTRFS_DEV_EXTENT_KEY, 1 << 20, b, sizeof(struct btrfs_dev_extent) + 1), ITEM_BAD_SIZE);
	cr_assert_eq(check(1, BTRFS_DEV_EXTENT_KEY, 100, b, sizeof(struct btrfs_dev_extent)), ITEM_BAD_FIELD);
	dev_extent_set_chunk_tree(b, 2);
	cr_assert_eq(check(1, BTRFS_DEV_EXTENT_KEY, 1 << 20, b, sizeof(struct btrfs_dev_extent)), ITEM_BAD_FIELD);
}

Test(item_check, block_groups_and_free_space)
{
	uint8_t b[64] = { 0 };

	block_group_set_used(b, 4096);
	block_group_set_chunk_objectid(b, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
	block_group_set_flags(b, BTRFS_BLOCK_GROUP_DATA);
	cr_assert_eq(check(1 << 20, BTRFS_BLOCK_GROUP_ITEM_KEY, 1 << 30, b, 24), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_BLOCK_GROUP_ITEM_KEY, 1 << 30, b, 23), ITEM_TOO_SMALL);
	cr_assert_eq(check(1 << 20, BTRFS_BLOCK_GROUP_ITEM_KEY, 2048, b, 24), ITEM_BAD_FIELD, "used > length");
	cr_assert_eq(check(1 << 20, BTRFS_BLOCK_GROUP_ITEM_KEY, 0, b, 24), ITEM_BAD_KEY);
	block_group_set_flags(b, 0);
	cr_assert_eq(check(1 << 20, BTRFS_BLOCK_GROUP_ITEM_KEY, 1 << 30, b, 24), ITEM_BAD_FIELD);

	cr_assert_eq(check(1 << 20, BTRFS_FREE_SPACE_INFO_KEY, 1 << 30, b, 8), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_FREE_SPACE_INFO_KEY, 1 << 30, b, 7), ITEM_TOO_SMALL);
	cr_assert_eq(check(1 << 20, BTRFS_FREE_SPACE_EXTENT_KEY, 4096, b, 0), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_FREE_SPACE_EXTENT_KEY, 4096, b, 1), ITEM_BAD_SIZE);
	/* 64 sectors: 8 bytes of bits; 65 sectors: 9 */
	cr_assert_eq(check(1 << 20, BTRFS_FREE_SPACE_BITMAP_KEY, 64 * 4096, b, 8), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_FREE_SPACE_BITMAP_KEY, 65 * 4096, b, 9), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_FREE_SPACE_BITMAP_KEY, 65 * 4096, b, 8), ITEM_BAD_SIZE);
	cr_assert_eq(check(1 << 20, BTRFS_FREE_SPACE_BITMAP_KEY, 100, b, 1), ITEM_BAD_KEY);
}

Test(item_check, quota_uuid_and_device_items)
{
	uint8_t b[512] = { 0 };

	cr_assert_eq(check(0, BTRFS_QGROUP_STATUS_KEY, 0, b, BTRFS_QGROUP_STATUS_V1_SIZE), ITEM_OK);
	cr_assert_eq(check(0, BTRFS_QGROUP_STATUS_KEY, 0, b, sizeof(struct btrfs_qgroup_status_item)), ITEM_OK);
	cr_assert_eq(check(0, BTRFS_QGROUP_STATUS_KEY, 0, b, 31), ITEM_TOO_SMALL);
	cr_assert_eq(check(0, BTRFS_QGROUP_STATUS_KEY, 0, b, 36), ITEM_BAD_SIZE);
	cr_assert_eq(check(0, BTRFS_QGROUP_INFO_KEY, 5, b, 40), ITEM_OK);
	cr_assert_eq(check(0, BTRFS_QGROUP_INFO_KEY, 5, b, 39), ITEM_TOO_SMALL);
	cr_assert_eq(check(0, BTRFS_QGROUP_LIMIT_KEY, 5, b, 41), ITEM_BAD_SIZE);
	cr_assert_eq(check(1, BTRFS_QGROUP_INFO_KEY, 5, b, 41), ITEM_BAD_KEY, "the key before the size");
	cr_assert_eq(check(5, BTRFS_QGROUP_RELATION_KEY, 1ULL << 48, b, 0), ITEM_OK);
	cr_assert_eq(check(5, BTRFS_QGROUP_RELATION_KEY, 1ULL << 48, b, 8), ITEM_BAD_SIZE);
	cr_assert_eq(check(1, BTRFS_UUID_KEY_SUBVOL, 2, b, 16), ITEM_OK);
	cr_assert_eq(check(1, BTRFS_UUID_KEY_SUBVOL, 2, b, 12), ITEM_BAD_SIZE);
	cr_assert_eq(check(1, BTRFS_UUID_KEY_RECEIVED_SUBVOL, 2, b, 0), ITEM_BAD_SIZE);
	cr_assert_eq(check(BTRFS_DEV_STATS_OBJECTID, BTRFS_PERSISTENT_ITEM_KEY, 1, b, 40), ITEM_OK);
	cr_assert_eq(check(BTRFS_DEV_STATS_OBJECTID, BTRFS_PERSISTENT_ITEM_KEY, 1, b, 41), ITEM_BAD_SIZE);
	cr_assert_eq(check(BTRFS_DEV_STATS_OBJECTID, BTRFS_PERSISTENT_ITEM_KEY, 1, b, 12), ITEM_BAD_SIZE);
	cr_assert_eq(check(0, BTRFS_DEV_REPLACE_KEY, 0, b, sizeof(struct btrfs_dev_replace_item)), ITEM_OK);
	cr_assert_eq(check(0, BTRFS_DEV_REPLACE_KEY, 0, b, 8), ITEM_TOO_SMALL);
	cr_assert_eq(check(BTRFS_BALANCE_OBJECTID, BTRFS_TEMPORARY_ITEM_KEY, 0, b, 448), ITEM_OK);
	cr_assert_eq(check(BTRFS_BALANCE_OBJECTID, BTRFS_TEMPORARY_ITEM_KEY, 0, b, 447), ITEM_TOO_SMALL);
	cr_assert_eq(check(256, BTRFS_ORPHAN_ITEM_KEY, 0, b, 0), ITEM_OK);
	cr_assert_eq(check(256, BTRFS_ORPHAN_ITEM_KEY, 0, b, 1), ITEM_BAD_SIZE);
	cr_assert_eq(check(256, BTRFS_DIR_LOG_INDEX_KEY, 0, b, 8), ITEM_OK);
	cr_assert_eq(check(256, BTRFS_DIR_LOG_INDEX_KEY, 0, b, 4), ITEM_TOO_SMALL);
	cr_assert_eq(check(1 << 20, BTRFS_RAID_STRIPE_KEY, 4096, b, 32), ITEM_OK);
	cr_assert_eq(check(1 << 20, BTRFS_RAID_STRIPE_KEY, 4096, b, 24), ITEM_BAD_SIZE);
	/* a type without rules passes whatever its size */
	cr_assert_eq(check(1, 77, 0, b, 3), ITEM_OK);
}

/* The size rules alone (what a leaf salvage asks): values the format forbids
 * pass, lengths do not, and a forbidden value does not end the walk. */
Test(item_check, sizes_only)
{
	uint8_t b[256] = { 0 };
	struct btrfs_key k = { 256, BTRFS_DIR_ITEM_KEY, 7 };
	struct item_view v;
	struct item_verdict vd;
	uint32_t n;

	n = put_dir_entry(b, BTRFS_FT_MAX, "a", 0);          /* bad type */
	n += put_dir_entry(b + n, BTRFS_FT_REG_FILE, "", 0);  /* empty name */
	v = item_view_of(b, n);
	cr_assert_eq(item_check(&geo, &k, &v, &vd), -EUCLEAN);
	cr_assert_eq(vd.fault, ITEM_ENTRY_TYPE);
	cr_assert_eq(item_check_sizes(&geo, &k, &v, &vd), 0);
	cr_assert_eq(vd.fault, ITEM_OK);
	cr_assert_not(vd.sizes_only, "the mode does not stick");
	v = item_view_of(b, n - 1);                           /* and the second entry cut */
	cr_assert_eq(item_check_sizes(&geo, &k, &v, &vd), -EUCLEAN);
	cr_assert_eq(vd.fault, ITEM_TRUNCATED);
	cr_assert_eq(vd.at, 31u);
	/* a key the format forbids, then a size that is wrong */
	k = (struct btrfs_key){ 256, BTRFS_INODE_ITEM_KEY, 1 };
	v = item_view_of(b, sizeof(struct btrfs_inode_item) + 1);
	cr_assert_eq(item_check_sizes(&geo, &k, &v, &vd), -EUCLEAN);
	cr_assert_eq(vd.fault, ITEM_BAD_SIZE);
	/* an unknown file extent type is laid out as a regular one */
	memset(b, 0, sizeof(b));
	file_extent_set_type(b, 7);
	k = (struct btrfs_key){ 257, BTRFS_EXTENT_DATA_KEY, 0 };
	v = item_view_of(b, sizeof(struct btrfs_file_extent_item));
	cr_assert_eq(item_check_sizes(&geo, &k, &v, &vd), 0);
	v = item_view_of(b, 30);
	cr_assert_eq(item_check_sizes(&geo, &k, &v, &vd), -EUCLEAN);
	/* the chunk's stripe count decides its size, even when it is 0 */
	k = (struct btrfs_key){ 256, BTRFS_CHUNK_ITEM_KEY, 1 << 20 };
	v = item_view_of(b, sizeof(struct btrfs_chunk));
	cr_assert_eq(item_check_sizes(&geo, &k, &v, &vd), 0);
	cr_assert_eq(item_check(&geo, &k, &v, &vd), -EUCLEAN);
}
