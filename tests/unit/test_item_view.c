// SPDX-License-Identifier: GPL-2.0-only
/* btk/item_view.h and the _in getters FIELD generates: every field of an
 * item cut short at each length reads as its value while it is inside the
 * item and as 0 with past_end set once it is not, from a buffer of exactly
 * that length (so valgrind or ASan would see any byte read past it), and
 * the validator's size verdict agrees with what the getters could read. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/format.h>
#include <btk/fs.h>
#include <btk/item_check.h>

static const struct item_geometry geo = { 4096, 16384, 4, BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA };

/* One field: where it is, and its bounded getter widened to 64 bits. */
struct field_row {
	const char *name;
	uint32_t offset, width;
	uint64_t (*read)(struct item_view *v);
};

#define WRAP(prefix, type, member) \
	static uint64_t read_##prefix##_##member(struct item_view *v) { return prefix##_##member##_in(v); }
#define ROW(prefix, type, member) \
	{ #prefix "_" #member, offsetof(type, member), sizeof(((type *)0)->member), read_##prefix##_##member },

#define INODE_FIELDS(X)                                                                                        \
	X(inode, struct btrfs_inode_item, generation) X(inode, struct btrfs_inode_item, transid)               \
	X(inode, struct btrfs_inode_item, size) X(inode, struct btrfs_inode_item, nbytes)                     \
	X(inode, struct btrfs_inode_item, block_group) X(inode, struct btrfs_inode_item, nlink)               \
	X(inode, struct btrfs_inode_item, uid) X(inode, struct btrfs_inode_item, gid)                         \
	X(inode, struct btrfs_inode_item, mode) X(inode, struct btrfs_inode_item, rdev)                       \
	X(inode, struct btrfs_inode_item, flags) X(inode, struct btrfs_inode_item, sequence)
#define FILE_EXTENT_FIELDS(X)                                                                                  \
	X(file_extent, struct btrfs_file_extent_item, generation)                                              \
	X(file_extent, struct btrfs_file_extent_item, ram_bytes)                                               \
	X(file_extent, struct btrfs_file_extent_item, compression)                                             \
	X(file_extent, struct btrfs_file_extent_item, encryption)                                              \
	X(file_extent, struct btrfs_file_extent_item, other_encoding)                                          \
	X(file_extent, struct btrfs_file_extent_item, type)                                                    \
	X(file_extent, struct btrfs_file_extent_item, disk_bytenr)                                             \
	X(file_extent, struct btrfs_file_extent_item, disk_num_bytes)                                          \
	X(file_extent, struct btrfs_file_extent_item, offset)                                                  \
	X(file_extent, struct btrfs_file_extent_item, num_bytes)
#define EXTENT_FIELDS(X)                                                                                       \
	X(extent, struct btrfs_extent_item, refs) X(extent, struct btrfs_extent_item, generation)             \
	X(extent, struct btrfs_extent_item, flags)
#define ROOT_FIELDS(X)                                                                                         \
	X(root_item, struct btrfs_root_item, generation) X(root_item, struct btrfs_root_item, root_dirid)     \
	X(root_item, struct btrfs_root_item, bytenr) X(root_item, struct btrfs_root_item, byte_limit)         \
	X(root_item, struct btrfs_root_item, bytes_used) X(root_item, struct btrfs_root_item, last_snapshot)  \
	X(root_item, struct btrfs_root_item, flags) X(root_item, struct btrfs_root_item, refs)                \
	X(root_item, struct btrfs_root_item, drop_level) X(root_item, struct btrfs_root_item, level)          \
	X(root_item, struct btrfs_root_item, generation_v2) X(root_item, struct btrfs_root_item, ctransid)    \
	X(root_item, struct btrfs_root_item, otransid) X(root_item, struct btrfs_root_item, stransid)         \
	X(root_item, struct btrfs_root_item, rtransid)
#define DEV_ITEM_FIELDS(X)                                                                                     \
	X(dev_item, struct btrfs_dev_item, devid) X(dev_item, struct btrfs_dev_item, total_bytes)             \
	X(dev_item, struct btrfs_dev_item, bytes_used) X(dev_item, struct btrfs_dev_item, io_align)           \
	X(dev_item, struct btrfs_dev_item, sector_size) X(dev_item, struct btrfs_dev_item, type)              \
	X(dev_item, struct btrfs_dev_item, generation) X(dev_item, struct btrfs_dev_item, dev_group)          \
	X(dev_item, struct btrfs_dev_item, bandwidth)
#define DEV_EXTENT_FIELDS(X)                                                                                   \
	X(dev_extent, struct btrfs_dev_extent, chunk_tree) X(dev_extent, struct btrfs_dev_extent, chunk_objectid) \
	X(dev_extent, struct btrfs_dev_extent, chunk_offset) X(dev_extent, struct btrfs_dev_extent, length)
#define BLOCK_GROUP_FIELDS(X)                                                                                  \
	X(block_group, struct btrfs_block_group_item, used)                                                    \
	X(block_group, struct btrfs_block_group_item, chunk_objectid)                                          \
	X(block_group, struct btrfs_block_group_item, flags)
#define FSI_FIELDS(X)                                                                                          \
	X(free_space_info, struct btrfs_free_space_info, extent_count)                                         \
	X(free_space_info, struct btrfs_free_space_info, flags)
#define QGROUP_STATUS_FIELDS(X)                                                                                \
	X(qgroup_status, struct btrfs_qgroup_status_item, version)                                             \
	X(qgroup_status, struct btrfs_qgroup_status_item, generation)                                          \
	X(qgroup_status, struct btrfs_qgroup_status_item, flags)                                               \
	X(qgroup_status, struct btrfs_qgroup_status_item, rescan)                                              \
	X(qgroup_status, struct btrfs_qgroup_status_item, enable_gen)
#define QGROUP_INFO_FIELDS(X)                                                                                  \
	X(qgroup_info, struct btrfs_qgroup_info_item, generation) X(qgroup_info, struct btrfs_qgroup_info_item, rfer) \
	X(qgroup_info, struct btrfs_qgroup_info_item, excl) X(qgroup_info, struct btrfs_qgroup_info_item, excl_cmpr)
#define DATA_REF_FIELDS(X)                                                                                     \
	X(data_ref, struct btrfs_extent_data_ref, root) X(data_ref, struct btrfs_extent_data_ref, objectid)   \
	X(data_ref, struct btrfs_extent_data_ref, offset) X(data_ref, struct btrfs_extent_data_ref, count)
#define DIR_FIELDS(X)                                                                                          \
	X(dir_item, struct btrfs_dir_item, transid) X(dir_item, struct btrfs_dir_item, data_len)              \
	X(dir_item, struct btrfs_dir_item, name_len) X(dir_item, struct btrfs_dir_item, type)
#define INODE_REF_FIELDS(X) X(inode_ref, struct btrfs_inode_ref, index) X(inode_ref, struct btrfs_inode_ref, name_len)

INODE_FIELDS(WRAP)
FILE_EXTENT_FIELDS(WRAP)
EXTENT_FIELDS(WRAP)
ROOT_FIELDS(WRAP)
DEV_ITEM_FIELDS(WRAP)
DEV_EXTENT_FIELDS(WRAP)
BLOCK_GROUP_FIELDS(WRAP)
FSI_FIELDS(WRAP)
QGROUP_STATUS_FIELDS(WRAP)
QGROUP_INFO_FIELDS(WRAP)
DATA_REF_FIELDS(WRAP)
DIR_FIELDS(WRAP)
INODE_REF_FIELDS(WRAP)

static const struct field_row inode_rows[] = { INODE_FIELDS(ROW) };
static const struct field_row file_extent_rows[] = { FILE_EXTENT_FIELDS(ROW) };
static const struct field_row extent_rows[] = { EXTENT_FIELDS(ROW) };
static const struct field_row root_rows[] = { ROOT_FIELDS(ROW) };
static const struct field_row dev_item_rows[] = { DEV_ITEM_FIELDS(ROW) };
static const struct field_row dev_extent_rows[] = { DEV_EXTENT_FIELDS(ROW) };
static const struct field_row block_group_rows[] = { BLOCK_GROUP_FIELDS(ROW) };
static const struct field_row fsi_rows[] = { FSI_FIELDS(ROW) };
static const struct field_row qgroup_status_rows[] = { QGROUP_STATUS_FIELDS(ROW) };
static const struct field_row qgroup_info_rows[] = { QGROUP_INFO_FIELDS(ROW) };
static const struct field_row data_ref_rows[] = { DATA_REF_FIELDS(ROW) };
static const struct field_row dir_rows[] = { DIR_FIELDS(ROW) };
static const struct field_row inode_ref_rows[] = { INODE_REF_FIELDS(ROW) };

/* An item type under test: its key, a whole item's bytes, its fields, and
 * the shorter lengths that are whole items too (the old root item...). */
struct item_case {
	struct btrfs_key key;
	uint8_t full[sizeof(struct btrfs_root_item)];
	uint32_t size;
	const struct field_row *rows;
	size_t nrows;
	uint32_t also_valid; /* a shorter valid size, 0 if none */
};

static uint64_t expected(const uint8_t *full, const struct field_row *r)
{
	switch (r->width) {
	case 1: return get_le8(full + r->offset);
	case 2: return get_le16(full + r->offset);
	case 4: return get_le32(full + r->offset);
	default: return get_le64(full + r->offset);
	}
}

/* Distinct non-zero bytes, so a field read from the wrong place shows. */
static void fill(uint8_t *p, uint32_t n)
{
	for (uint32_t i = 0; i < n; i++)
		p[i] = (uint8_t)(i * 7 + 1);
}

/* Every length from 0 to the whole item, each from a buffer of exactly that
 * many bytes: fields inside read right, fields past the end read 0 and set
 * past_end (and it stays set); the validator finds a size fault exactly
 * when the length is not one a whole item has. */
static void read_truncated(const struct item_case *c)
{
	for (uint32_t len = 0; len <= c->size; len++) {
		uint8_t *buf = malloc(len ? len : 1);
		struct item_view v;
		struct item_verdict vd;
		bool was_past = false;
		int ret;

		cr_assert_not_null(buf);
		memcpy(buf, c->full, len);
		v = item_view_of(len ? buf : NULL, len);
		for (size_t i = 0; i < c->nrows; i++) {
			const struct field_row *r = &c->rows[i];
			uint64_t got = r->read(&v);
			bool inside = r->offset + r->width <= len;

			if (inside)
				cr_assert_eq(got, expected(c->full, r), "%s at length %u", r->name, len);
			else
				cr_assert(got == 0 && v.past_end, "%s past the end at length %u", r->name, len);
			cr_assert(!was_past || v.past_end, "past_end is sticky (%s, length %u)", r->name, len);
			cr_assert(v.past_end || inside);
			was_past = v.past_end;
		}
		ret = item_check_sizes(&geo, &c->key, &v, &vd);
		if (len == c->size || (c->also_valid && len == c->also_valid))
			cr_assert_eq(ret, 0, "type %u: whole item of %u bytes: fault %d (%s)", c->key.type, len,
				     vd.fault, vd.why ? vd.why : "");
		else
			cr_assert(ret != 0 && item_fault_is_size(vd.fault), "type %u: %u of %u bytes passes",
				  c->key.type, len, c->size);
		v.past_end = false;
		cr_assert_eq(item_view_has_fixed(&v, c->key.type), len >= item_min_size(c->key.type));
		cr_assert_eq(v.past_end, len < item_min_size(c->key.type));
		cr_assert_eq(item_has_fixed(c->key.type, len), len >= item_min_size(c->key.type));
		free(buf);
	}
}

#define CASE(c, objectid, type, offset, rows_, size_)                                               \
	do {                                                                                          \
		(c).key = (struct btrfs_key){ (objectid), (type), (offset) };                         \
		(c).rows = (rows_);                                                                   \
		(c).nrows = sizeof(rows_) / sizeof((rows_)[0]);                                       \
		(c).size = (size_);                                                                   \
		(c).also_valid = 0;                                                                   \
		fill((c).full, (c).size);                                                             \
	} while (0)

Test(item_view, truncated_fixed_items_read_nothing_past_the_end)
{
	struct item_case c;

	CASE(c, 257, BTRFS_INODE_ITEM_KEY, 0, inode_rows, sizeof(struct btrfs_inode_item));
	read_truncated(&c);

	CASE(c, 257, BTRFS_EXTENT_DATA_KEY, 0, file_extent_rows, sizeof(struct btrfs_file_extent_item));
	file_extent_set_type(c.full, BTRFS_FILE_EXTENT_REG);
	read_truncated(&c);

	CASE(c, 1 << 20, BTRFS_EXTENT_ITEM_KEY, 4096, extent_rows, sizeof(struct btrfs_extent_item));
	extent_set_flags(c.full, BTRFS_EXTENT_FLAG_DATA);
	read_truncated(&c);

	CASE(c, 256, BTRFS_ROOT_ITEM_KEY, 0, root_rows, sizeof(struct btrfs_root_item));
	c.also_valid = BTRFS_ROOT_ITEM_V1_SIZE;
	read_truncated(&c);

	CASE(c, BTRFS_DEV_ITEMS_OBJECTID, BTRFS_DEV_ITEM_KEY, 1, dev_item_rows, sizeof(struct btrfs_dev_item));
	read_truncated(&c);

	CASE(c, 1, BTRFS_DEV_EXTENT_KEY, 1 << 20, dev_extent_rows, sizeof(struct btrfs_dev_extent));
	read_truncated(&c);

	CASE(c, 1 << 20, BTRFS_BLOCK_GROUP_ITEM_KEY, 1 << 20, block_group_rows, sizeof(struct btrfs_block_group_item));
	read_truncated(&c);

	CASE(c, 1 << 20, BTRFS_FREE_SPACE_INFO_KEY, 1 << 20, fsi_rows, sizeof(struct btrfs_free_space_info));
	read_truncated(&c);

	CASE(c, 0, BTRFS_QGROUP_STATUS_KEY, 0, qgroup_status_rows, sizeof(struct btrfs_qgroup_status_item));
	c.also_valid = BTRFS_QGROUP_STATUS_V1_SIZE;
	read_truncated(&c);

	CASE(c, 0, BTRFS_QGROUP_INFO_KEY, 5, qgroup_info_rows, sizeof(struct btrfs_qgroup_info_item));
	read_truncated(&c);

	CASE(c, 1 << 20, BTRFS_EXTENT_DATA_REF_KEY, 77, data_ref_rows, sizeof(struct btrfs_extent_data_ref));
	read_truncated(&c);
}

/* Entries: the header's fields read as above, and the entry walker never
 * hands out an entry that does not fit. */
Test(item_view, truncated_entries_read_nothing_past_the_end)
{
	struct item_case c;

	CASE(c, 256, BTRFS_DIR_ITEM_KEY, 1, dir_rows, sizeof(struct btrfs_dir_item) + 3);
	dir_item_set_name_len(c.full, 3);
	dir_item_set_data_len(c.full, 0);
	dir_item_set_type(c.full, BTRFS_FT_REG_FILE);
	read_truncated(&c);

	CASE(c, 257, BTRFS_INODE_REF_KEY, 256, inode_ref_rows, sizeof(struct btrfs_inode_ref) + 4);
	inode_ref_set_name_len(c.full, 4);
	read_truncated(&c);

	for (uint32_t len = 1; len < c.size; len++) {
		uint8_t *buf = malloc(len);
		struct item_view v = item_view_of(buf, len);
		struct item_entry e;
		uint32_t off = 0;

		memcpy(buf, c.full, len);
		cr_assert_eq(item_entry_next(BTRFS_INODE_REF_KEY, &v, &off, &e), -EUCLEAN, "length %u", len);
		free(buf);
	}
}

Test(item_view, views_of_parts_and_copies)
{
	uint8_t b[40];
	struct item_view v, at;

	fill(b, sizeof(b));
	v = item_view_of(b, 33);
	at = item_view_at(&v, sizeof(struct btrfs_extent_item));
	cr_assert_eq(at.size, 9);
	cr_assert_eq(inline_ref_type_in(&at), b[24]);
	cr_assert_eq(inline_ref_offset_in(&at), get_le64(b + 25));
	cr_assert(!at.past_end);
	at = item_view_at(&v, 34);
	cr_assert(at.past_end && at.size == 0 && inline_ref_type_in(&at) == 0);

	/* a lookup copied at most the buffer: the view is the copied part */
	v = item_view_copied(b, 16, 24);
	cr_assert_eq(v.size, 16);
	cr_assert_eq(extent_generation_in(&v), get_le64(b + 8));
	cr_assert_eq(extent_flags_in(&v), 0);
	cr_assert(v.past_end);
	v = item_view_copied(b, 40, 3);
	cr_assert_eq(v.size, 3);

	/* byte-array members: all of it inside, or NULL */
	v = item_view_of(b, sizeof(b));
	cr_assert_null(root_item_uuid_ptr_in(&v));
	cr_assert(v.past_end);
	v = item_view_of(NULL, 0);
	cr_assert_eq(inode_mode_in(&v), 0);
	cr_assert(v.past_end);
}

/* item_is_whole: the validator's size rules from an open filesystem's
 * geometry (other faults do not count), and item_has_fixed for updates. */
Test(item_view, whole_items_by_the_filesystem_geometry)
{
	static struct fs_info fs;
	struct btrfs_key inode = { 257, BTRFS_INODE_ITEM_KEY, 1 /* a key fault: not a size one */ };
	struct btrfs_key csum = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 1 << 20 };
	uint8_t b[sizeof(struct btrfs_inode_item) + 1] = { 0 };

	fs.sectorsize = 4096;
	fs.nodesize = 16384;
	fs.csum_size = 4;
	cr_assert(item_is_whole(&fs, &inode, b, sizeof(struct btrfs_inode_item)));
	cr_assert_not(item_is_whole(&fs, &inode, b, sizeof(struct btrfs_inode_item) - 1));
	cr_assert_not(item_is_whole(&fs, &inode, b, sizeof(b)), "larger than its struct");
	cr_assert(item_is_whole(&fs, &csum, b, 8));
	cr_assert_not(item_is_whole(&fs, &csum, b, 6), "not whole checksums of this filesystem");
	fs.csum_size = 32;
	cr_assert_not(item_is_whole(&fs, &csum, b, 8));
	cr_assert(item_has_fixed(BTRFS_INODE_ITEM_KEY, sizeof(b)));
	cr_assert_not(item_has_fixed(BTRFS_QGROUP_STATUS_KEY, BTRFS_QGROUP_STATUS_V1_SIZE - 1));
	cr_assert(item_has_fixed(BTRFS_QGROUP_STATUS_KEY, BTRFS_QGROUP_STATUS_V1_SIZE));
}
