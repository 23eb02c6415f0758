/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The btrfs on-disk format: constants and structure layouts.
 *
 * The packed structs below document the layout and feed offsetof() in the
 * generated accessors (btk/endian_access.h). They are never used to read a
 * buffer directly: on-disk data is little-endian and may be unaligned. */
#ifndef BTK_FORMAT_H
#define BTK_FORMAT_H

#include <btk/endian_access.h>

#define BTRFS_MAGIC 0x4D5F53665248425FULL /* "_BHRfS_M" */
#define BTRFS_SUPER_INFO_OFFSET 65536ULL
#define BTRFS_SUPER_INFO_SIZE 4096
#define BTRFS_SUPER_MIRROR_MAX 3
#define BTRFS_SUPER_MIRROR_SHIFT 12
#define BTRFS_CSUM_SIZE 32
#define BTRFS_FSID_SIZE 16
#define BTRFS_UUID_SIZE 16
#define BTRFS_LABEL_SIZE 256
#define BTRFS_SYSTEM_CHUNK_ARRAY_SIZE 2048
#define BTRFS_NUM_BACKUP_ROOTS 4
#define BTRFS_MAX_LEVEL 8
#define BTRFS_NAME_LEN 255
#define BTRFS_STRIPE_LEN 65536ULL

/* Superblock copy N lives at 64 KiB, 64 MiB, 256 GiB. */
static inline uint64_t btrfs_super_offset(int mirror)
{
	return mirror == 0 ? BTRFS_SUPER_INFO_OFFSET : (16384ULL << (BTRFS_SUPER_MIRROR_SHIFT * mirror));
}

/* ---- tree and object ids ---- */
#define BTRFS_DEV_STATS_OBJECTID 0ULL
#define BTRFS_ROOT_TREE_OBJECTID 1ULL
#define BTRFS_EXTENT_TREE_OBJECTID 2ULL
#define BTRFS_CHUNK_TREE_OBJECTID 3ULL
#define BTRFS_DEV_TREE_OBJECTID 4ULL
#define BTRFS_FS_TREE_OBJECTID 5ULL
#define BTRFS_ROOT_TREE_DIR_OBJECTID 6ULL
#define BTRFS_CSUM_TREE_OBJECTID 7ULL
#define BTRFS_QUOTA_TREE_OBJECTID 8ULL
#define BTRFS_UUID_TREE_OBJECTID 9ULL
#define BTRFS_FREE_SPACE_TREE_OBJECTID 10ULL
#define BTRFS_BLOCK_GROUP_TREE_OBJECTID 11ULL
#define BTRFS_RAID_STRIPE_TREE_OBJECTID 12ULL
#define BTRFS_BALANCE_OBJECTID ((uint64_t)-4)
#define BTRFS_ORPHAN_OBJECTID ((uint64_t)-5)
#define BTRFS_TREE_LOG_OBJECTID ((uint64_t)-6)
#define BTRFS_TREE_LOG_FIXUP_OBJECTID ((uint64_t)-7)
#define BTRFS_TREE_RELOC_OBJECTID ((uint64_t)-8)
#define BTRFS_DATA_RELOC_TREE_OBJECTID ((uint64_t)-9)
#define BTRFS_EXTENT_CSUM_OBJECTID ((uint64_t)-10)
#define BTRFS_FREE_SPACE_OBJECTID ((uint64_t)-11)
#define BTRFS_FREE_INO_OBJECTID ((uint64_t)-12)
#define BTRFS_MULTIPLE_OBJECTIDS ((uint64_t)-255)
#define BTRFS_FIRST_FREE_OBJECTID 256ULL
#define BTRFS_LAST_FREE_OBJECTID ((uint64_t)-256)
#define BTRFS_FIRST_CHUNK_TREE_OBJECTID 256ULL
#define BTRFS_DEV_ITEMS_OBJECTID 1ULL

/* ---- key types ---- */
#define BTRFS_INODE_ITEM_KEY 1
#define BTRFS_INODE_REF_KEY 12
#define BTRFS_INODE_EXTREF_KEY 13
#define BTRFS_XATTR_ITEM_KEY 24
#define BTRFS_VERITY_DESC_ITEM_KEY 36
#define BTRFS_VERITY_MERKLE_ITEM_KEY 37
#define BTRFS_ORPHAN_ITEM_KEY 48
#define BTRFS_DIR_LOG_ITEM_KEY 60
#define BTRFS_DIR_LOG_INDEX_KEY 72
#define BTRFS_DIR_ITEM_KEY 84
#define BTRFS_DIR_INDEX_KEY 96
#define BTRFS_EXTENT_DATA_KEY 108
#define BTRFS_EXTENT_CSUM_KEY 128
#define BTRFS_ROOT_ITEM_KEY 132
#define BTRFS_ROOT_BACKREF_KEY 144
#define BTRFS_ROOT_REF_KEY 156
#define BTRFS_EXTENT_ITEM_KEY 168
#define BTRFS_METADATA_ITEM_KEY 169
#define BTRFS_EXTENT_OWNER_REF_KEY 172
#define BTRFS_TREE_BLOCK_REF_KEY 176
#define BTRFS_EXTENT_DATA_REF_KEY 178
#define BTRFS_EXTENT_REF_V0_KEY 180
#define BTRFS_SHARED_BLOCK_REF_KEY 182
#define BTRFS_SHARED_DATA_REF_KEY 184
#define BTRFS_BLOCK_GROUP_ITEM_KEY 192
#define BTRFS_FREE_SPACE_INFO_KEY 198
#define BTRFS_FREE_SPACE_EXTENT_KEY 199
#define BTRFS_FREE_SPACE_BITMAP_KEY 200
#define BTRFS_DEV_EXTENT_KEY 204
#define BTRFS_DEV_ITEM_KEY 216
#define BTRFS_CHUNK_ITEM_KEY 228
#define BTRFS_RAID_STRIPE_KEY 230
#define BTRFS_QGROUP_STATUS_KEY 240
#define BTRFS_QGROUP_INFO_KEY 242
#define BTRFS_QGROUP_LIMIT_KEY 244
#define BTRFS_QGROUP_RELATION_KEY 246
#define BTRFS_TEMPORARY_ITEM_KEY 248 /* balance item */
#define BTRFS_PERSISTENT_ITEM_KEY 249 /* device stats */
#define BTRFS_DEV_REPLACE_KEY 250
#define BTRFS_UUID_KEY_SUBVOL 251
#define BTRFS_UUID_KEY_RECEIVED_SUBVOL 252
#define BTRFS_STRING_ITEM_KEY 253

/* ---- block group / chunk type flags ---- */
#define BTRFS_BLOCK_GROUP_DATA (1ULL << 0)
#define BTRFS_BLOCK_GROUP_SYSTEM (1ULL << 1)
#define BTRFS_BLOCK_GROUP_METADATA (1ULL << 2)
#define BTRFS_BLOCK_GROUP_RAID0 (1ULL << 3)
#define BTRFS_BLOCK_GROUP_RAID1 (1ULL << 4)
#define BTRFS_BLOCK_GROUP_DUP (1ULL << 5)
#define BTRFS_BLOCK_GROUP_RAID10 (1ULL << 6)
#define BTRFS_BLOCK_GROUP_RAID5 (1ULL << 7)
#define BTRFS_BLOCK_GROUP_RAID6 (1ULL << 8)
#define BTRFS_BLOCK_GROUP_RAID1C3 (1ULL << 9)
#define BTRFS_BLOCK_GROUP_RAID1C4 (1ULL << 10)
#define BTRFS_BLOCK_GROUP_TYPE_MASK \
	(BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_SYSTEM | BTRFS_BLOCK_GROUP_METADATA)
#define BTRFS_BLOCK_GROUP_PROFILE_MASK                                                     \
	(BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID1 | BTRFS_BLOCK_GROUP_DUP |         \
	 BTRFS_BLOCK_GROUP_RAID10 | BTRFS_BLOCK_GROUP_RAID5 | BTRFS_BLOCK_GROUP_RAID6 |      \
	 BTRFS_BLOCK_GROUP_RAID1C3 | BTRFS_BLOCK_GROUP_RAID1C4)

/* ---- feature flags ---- */
#define BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE (1ULL << 0)
#define BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID (1ULL << 1)
#define BTRFS_FEATURE_COMPAT_RO_VERITY (1ULL << 2)
#define BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE (1ULL << 3)

#define BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF (1ULL << 0)
#define BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL (1ULL << 1)
#define BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS (1ULL << 2)
#define BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO (1ULL << 3)
#define BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD (1ULL << 4)
#define BTRFS_FEATURE_INCOMPAT_BIG_METADATA (1ULL << 5)
#define BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF (1ULL << 6)
#define BTRFS_FEATURE_INCOMPAT_RAID56 (1ULL << 7)
#define BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA (1ULL << 8)
#define BTRFS_FEATURE_INCOMPAT_NO_HOLES (1ULL << 9)
#define BTRFS_FEATURE_INCOMPAT_METADATA_UUID (1ULL << 10)
#define BTRFS_FEATURE_INCOMPAT_RAID1C34 (1ULL << 11)
#define BTRFS_FEATURE_INCOMPAT_ZONED (1ULL << 12)
#define BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2 (1ULL << 13)
#define BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE (1ULL << 14)
#define BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA (1ULL << 16)
#define BTRFS_FEATURE_INCOMPAT_REMAP_TREE (1ULL << 17)

/* ---- superblock and tree-block header flags ---- */
#define BTRFS_HEADER_FLAG_WRITTEN (1ULL << 0)
#define BTRFS_HEADER_FLAG_RELOC (1ULL << 1)
#define BTRFS_SUPER_FLAG_ERROR (1ULL << 2)
#define BTRFS_SUPER_FLAG_SEEDING (1ULL << 32)
#define BTRFS_SUPER_FLAG_METADUMP (1ULL << 33)
#define BTRFS_SUPER_FLAG_METADUMP_V2 (1ULL << 34)
#define BTRFS_SUPER_FLAG_CHANGING_FSID (1ULL << 35)
#define BTRFS_SUPER_FLAG_CHANGING_FSID_V2 (1ULL << 36)
#define BTRFS_SUPER_FLAG_CHANGING_BG_TREE (1ULL << 38)
#define BTRFS_SUPER_FLAG_CHANGING_DATA_CSUM (1ULL << 44)
#define BTRFS_SUPER_FLAG_CHANGING_META_CSUM (1ULL << 45)
#define BTRFS_BACKREF_REV_SHIFT 56
#define BTRFS_MIXED_BACKREF_REV 1

/* ---- checksums ---- */
#define BTRFS_CSUM_TYPE_CRC32 0
#define BTRFS_CSUM_TYPE_XXHASH 1
#define BTRFS_CSUM_TYPE_SHA256 2
#define BTRFS_CSUM_TYPE_BLAKE2 3

/* ---- extent items ---- */
#define BTRFS_EXTENT_FLAG_DATA (1ULL << 0)
#define BTRFS_EXTENT_FLAG_TREE_BLOCK (1ULL << 1)
#define BTRFS_BLOCK_FLAG_FULL_BACKREF (1ULL << 8)

/* ---- file extents ---- */
#define BTRFS_FILE_EXTENT_INLINE 0
#define BTRFS_FILE_EXTENT_REG 1
#define BTRFS_FILE_EXTENT_PREALLOC 2
#define BTRFS_COMPRESS_NONE 0
#define BTRFS_COMPRESS_ZLIB 1
#define BTRFS_COMPRESS_LZO 2
#define BTRFS_COMPRESS_ZSTD 3

/* ---- dir item types ---- */
#define BTRFS_FT_UNKNOWN 0
#define BTRFS_FT_REG_FILE 1
#define BTRFS_FT_DIR 2
#define BTRFS_FT_CHRDEV 3
#define BTRFS_FT_BLKDEV 4
#define BTRFS_FT_FIFO 5
#define BTRFS_FT_SOCK 6
#define BTRFS_FT_SYMLINK 7
#define BTRFS_FT_XATTR 8
#define BTRFS_FT_MAX 9
#define BTRFS_FT_ENCRYPTED 0x80

/* ---- inode and root flags ---- */
#define BTRFS_INODE_NODATASUM (1ULL << 0)
#define BTRFS_INODE_NODATACOW (1ULL << 1)
#define BTRFS_INODE_READONLY (1ULL << 2)
#define BTRFS_INODE_NOCOMPRESS (1ULL << 3)
#define BTRFS_INODE_PREALLOC (1ULL << 4)
#define BTRFS_INODE_SYNC (1ULL << 5)
#define BTRFS_INODE_IMMUTABLE (1ULL << 6)
#define BTRFS_INODE_APPEND (1ULL << 7)
#define BTRFS_INODE_NODUMP (1ULL << 8)
#define BTRFS_INODE_NOATIME (1ULL << 9)
#define BTRFS_INODE_DIRSYNC (1ULL << 10)
#define BTRFS_INODE_COMPRESS (1ULL << 11)
#define BTRFS_INODE_ROOT_ITEM_INIT (1ULL << 31)
#define BTRFS_ROOT_SUBVOL_RDONLY (1ULL << 0)
#define BTRFS_ROOT_SUBVOL_DEAD (1ULL << 48)

#define BTRFS_FREE_SPACE_USING_BITMAPS (1U << 0)
#define BTRFS_QGROUP_STATUS_FLAG_ON (1ULL << 0)
#define BTRFS_QGROUP_STATUS_FLAG_RESCAN (1ULL << 1)
#define BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT (1ULL << 2)
#define BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE (1ULL << 3)

/* ======================= structure layouts ======================= */
#define PACKED __attribute__((packed))

struct btrfs_disk_key {
	uint64_t objectid;
	uint8_t type;
	uint64_t offset;
} PACKED;

struct btrfs_timespec {
	uint64_t sec;
	uint32_t nsec;
} PACKED;

struct btrfs_header {
	uint8_t csum[BTRFS_CSUM_SIZE];
	uint8_t fsid[BTRFS_FSID_SIZE];
	uint64_t bytenr;
	uint64_t flags;
	uint8_t chunk_tree_uuid[BTRFS_UUID_SIZE];
	uint64_t generation;
	uint64_t owner;
	uint32_t nritems;
	uint8_t level;
} PACKED;

struct btrfs_item {
	struct btrfs_disk_key key;
	uint32_t offset;
	uint32_t size;
} PACKED;

struct btrfs_key_ptr {
	struct btrfs_disk_key key;
	uint64_t blockptr;
	uint64_t generation;
} PACKED;

struct btrfs_dev_item {
	uint64_t devid;
	uint64_t total_bytes;
	uint64_t bytes_used;
	uint32_t io_align;
	uint32_t io_width;
	uint32_t sector_size;
	uint64_t type;
	uint64_t generation;
	uint64_t start_offset;
	uint32_t dev_group;
	uint8_t seek_speed;
	uint8_t bandwidth;
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint8_t fsid[BTRFS_FSID_SIZE];
} PACKED;

struct btrfs_root_backup {
	uint64_t tree_root;
	uint64_t tree_root_gen;
	uint64_t chunk_root;
	uint64_t chunk_root_gen;
	uint64_t extent_root;
	uint64_t extent_root_gen;
	uint64_t fs_root;
	uint64_t fs_root_gen;
	uint64_t dev_root;
	uint64_t dev_root_gen;
	uint64_t csum_root;
	uint64_t csum_root_gen;
	uint64_t total_bytes;
	uint64_t bytes_used;
	uint64_t num_devices;
	uint64_t unused_64[4];
	uint8_t tree_root_level;
	uint8_t chunk_root_level;
	uint8_t extent_root_level;
	uint8_t fs_root_level;
	uint8_t dev_root_level;
	uint8_t csum_root_level;
	uint8_t unused_8[10];
} PACKED;

struct btrfs_super_block {
	uint8_t csum[BTRFS_CSUM_SIZE];
	uint8_t fsid[BTRFS_FSID_SIZE];
	uint64_t bytenr;
	uint64_t flags;
	uint64_t magic;
	uint64_t generation;
	uint64_t root;
	uint64_t chunk_root;
	uint64_t log_root;
	uint64_t unused_log_root_transid;
	uint64_t total_bytes;
	uint64_t bytes_used;
	uint64_t root_dir_objectid;
	uint64_t num_devices;
	uint32_t sectorsize;
	uint32_t nodesize;
	uint32_t unused_leafsize;
	uint32_t stripesize;
	uint32_t sys_chunk_array_size;
	uint64_t chunk_root_generation;
	uint64_t compat_flags;
	uint64_t compat_ro_flags;
	uint64_t incompat_flags;
	uint16_t csum_type;
	uint8_t root_level;
	uint8_t chunk_root_level;
	uint8_t log_root_level;
	struct btrfs_dev_item dev_item;
	char label[BTRFS_LABEL_SIZE];
	uint64_t cache_generation;
	uint64_t uuid_tree_generation;
	uint8_t metadata_uuid[BTRFS_FSID_SIZE];
	uint64_t nr_global_roots;
	uint64_t reserved[27];
	uint8_t sys_chunk_array[BTRFS_SYSTEM_CHUNK_ARRAY_SIZE];
	struct btrfs_root_backup super_roots[BTRFS_NUM_BACKUP_ROOTS];
	uint8_t padding[565];
} PACKED;

struct btrfs_stripe {
	uint64_t devid;
	uint64_t offset;
	uint8_t dev_uuid[BTRFS_UUID_SIZE];
} PACKED;

struct btrfs_chunk {
	uint64_t length;
	uint64_t owner;
	uint64_t stripe_len;
	uint64_t type;
	uint32_t io_align;
	uint32_t io_width;
	uint32_t sector_size;
	uint16_t num_stripes;
	uint16_t sub_stripes;
	/* followed by num_stripes struct btrfs_stripe */
} PACKED;

struct btrfs_dev_extent {
	uint64_t chunk_tree;
	uint64_t chunk_objectid;
	uint64_t chunk_offset;
	uint64_t length;
	uint8_t chunk_tree_uuid[BTRFS_UUID_SIZE];
} PACKED;

struct btrfs_block_group_item {
	uint64_t used;
	uint64_t chunk_objectid;
	uint64_t flags;
} PACKED;

struct btrfs_free_space_info {
	uint32_t extent_count;
	uint32_t flags;
} PACKED;

struct btrfs_inode_item {
	uint64_t generation;
	uint64_t transid;
	uint64_t size;
	uint64_t nbytes;
	uint64_t block_group;
	uint32_t nlink;
	uint32_t uid;
	uint32_t gid;
	uint32_t mode;
	uint64_t rdev;
	uint64_t flags;
	uint64_t sequence;
	uint64_t reserved[4];
	struct btrfs_timespec atime;
	struct btrfs_timespec ctime;
	struct btrfs_timespec mtime;
	struct btrfs_timespec otime;
} PACKED;

struct btrfs_inode_ref {
	uint64_t index;
	uint16_t name_len;
	/* name follows */
} PACKED;

struct btrfs_inode_extref {
	uint64_t parent_objectid;
	uint64_t index;
	uint16_t name_len;
	/* name follows */
} PACKED;

/* Also the layout of xattr items: name then data follow. */
struct btrfs_dir_item {
	struct btrfs_disk_key location;
	uint64_t transid;
	uint16_t data_len;
	uint16_t name_len;
	uint8_t type;
} PACKED;

struct btrfs_dir_log_item {
	uint64_t end;
} PACKED;

struct btrfs_file_extent_item {
	uint64_t generation;
	uint64_t ram_bytes;
	uint8_t compression;
	uint8_t encryption;
	uint16_t other_encoding;
	uint8_t type;
	/* inline data starts here for BTRFS_FILE_EXTENT_INLINE */
	uint64_t disk_bytenr;
	uint64_t disk_num_bytes;
	uint64_t offset;
	uint64_t num_bytes;
} PACKED;
#define BTRFS_FILE_EXTENT_INLINE_DATA_START offsetof(struct btrfs_file_extent_item, disk_bytenr)

struct btrfs_extent_item {
	uint64_t refs;
	uint64_t generation;
	uint64_t flags;
} PACKED;

/* Follows a non-skinny tree-block extent item. */
struct btrfs_tree_block_info {
	struct btrfs_disk_key key;
	uint8_t level;
} PACKED;

struct btrfs_extent_inline_ref {
	uint8_t type;
	uint64_t offset;
} PACKED;

struct btrfs_extent_data_ref {
	uint64_t root;
	uint64_t objectid;
	uint64_t offset;
	uint32_t count;
} PACKED;

struct btrfs_shared_data_ref {
	uint32_t count;
} PACKED;

struct btrfs_extent_owner_ref {
	uint64_t root_id;
} PACKED;

struct btrfs_root_item {
	struct btrfs_inode_item inode;
	uint64_t generation;
	uint64_t root_dirid;
	uint64_t bytenr;
	uint64_t byte_limit;
	uint64_t bytes_used;
	uint64_t last_snapshot;
	uint64_t flags;
	uint32_t refs;
	struct btrfs_disk_key drop_progress;
	uint8_t drop_level;
	uint8_t level;
	/* fields below exist only when the item is this large (generation_v2 == generation) */
	uint64_t generation_v2;
	uint8_t uuid[BTRFS_UUID_SIZE];
	uint8_t parent_uuid[BTRFS_UUID_SIZE];
	uint8_t received_uuid[BTRFS_UUID_SIZE];
	uint64_t ctransid;
	uint64_t otransid;
	uint64_t stransid;
	uint64_t rtransid;
	struct btrfs_timespec ctime;
	struct btrfs_timespec otime;
	struct btrfs_timespec stime;
	struct btrfs_timespec rtime;
	uint64_t reserved[8];
} PACKED;
#define BTRFS_ROOT_ITEM_V1_SIZE offsetof(struct btrfs_root_item, generation_v2)

struct btrfs_root_ref {
	uint64_t dirid;
	uint64_t sequence;
	uint16_t name_len;
	/* name follows */
} PACKED;

struct btrfs_qgroup_status_item {
	uint64_t version;
	uint64_t generation;
	uint64_t flags;
	uint64_t rescan;
	uint64_t enable_gen; /* only with simple quotas */
} PACKED;
#define BTRFS_QGROUP_STATUS_V1_SIZE offsetof(struct btrfs_qgroup_status_item, enable_gen)

struct btrfs_qgroup_info_item {
	uint64_t generation;
	uint64_t rfer;
	uint64_t rfer_cmpr;
	uint64_t excl;
	uint64_t excl_cmpr;
} PACKED;

struct btrfs_qgroup_limit_item {
	uint64_t flags;
	uint64_t max_rfer;
	uint64_t max_excl;
	uint64_t rsv_rfer;
	uint64_t rsv_excl;
} PACKED;

struct btrfs_disk_balance_args {
	uint64_t profiles;
	uint64_t usage; /* or usage_min (low 32) / usage_max (high 32) */
	uint64_t devid;
	uint64_t pstart;
	uint64_t pend;
	uint64_t vstart;
	uint64_t vend;
	uint64_t target;
	uint64_t flags;
	uint64_t limit; /* or limit_min / limit_max */
	uint32_t stripes_min;
	uint32_t stripes_max;
	uint64_t unused[6];
} PACKED;

struct btrfs_balance_item {
	uint64_t flags;
	struct btrfs_disk_balance_args data;
	struct btrfs_disk_balance_args meta;
	struct btrfs_disk_balance_args sys;
	uint64_t unused[4];
} PACKED;

struct btrfs_dev_stats_item {
	uint64_t values[5]; /* write, read, flush, corruption, generation errors */
} PACKED;

struct btrfs_dev_replace_item {
	uint64_t src_devid;
	uint64_t cursor_left;
	uint64_t cursor_right;
	uint64_t cont_reading_from_srcdev_mode;
	uint64_t replace_state;
	uint64_t time_started;
	uint64_t time_stopped;
	uint64_t num_write_errors;
	uint64_t num_uncorrectable_read_errors;
} PACKED;

/* One stride of a raid-stripe-tree item; an item is an array of these. */
struct btrfs_raid_stride {
	uint64_t devid;
	uint64_t physical;
} PACKED;

struct btrfs_verity_descriptor_item {
	uint64_t size;
	uint64_t reserved[2];
	uint8_t encryption;
} PACKED;

_Static_assert(sizeof(struct btrfs_disk_key) == 17, "disk key");
_Static_assert(sizeof(struct btrfs_header) == 101, "header");
_Static_assert(sizeof(struct btrfs_item) == 25, "item");
_Static_assert(sizeof(struct btrfs_key_ptr) == 33, "key ptr");
_Static_assert(sizeof(struct btrfs_dev_item) == 98, "dev item");
_Static_assert(sizeof(struct btrfs_root_backup) == 168, "root backup");
_Static_assert(sizeof(struct btrfs_super_block) == 4096, "super block");
_Static_assert(sizeof(struct btrfs_chunk) == 48, "chunk");
_Static_assert(sizeof(struct btrfs_stripe) == 32, "stripe");
_Static_assert(sizeof(struct btrfs_inode_item) == 160, "inode item");
_Static_assert(sizeof(struct btrfs_dir_item) == 30, "dir item");
_Static_assert(sizeof(struct btrfs_file_extent_item) == 53, "file extent");
_Static_assert(sizeof(struct btrfs_root_item) == 439, "root item");
_Static_assert(BTRFS_ROOT_ITEM_V1_SIZE == 239, "root item v1");
_Static_assert(sizeof(struct btrfs_balance_item) == 448, "balance item");

/* ======================= accessors ======================= */
FIELD(disk_key, struct btrfs_disk_key, objectid, 64)
FIELD(disk_key, struct btrfs_disk_key, type, 8)
FIELD(disk_key, struct btrfs_disk_key, offset, 64)

FIELD(timespec, struct btrfs_timespec, sec, 64)
FIELD(timespec, struct btrfs_timespec, nsec, 32)

FIELD_PTR(header, struct btrfs_header, csum)
FIELD_PTR(header, struct btrfs_header, fsid)
FIELD_PTR(header, struct btrfs_header, chunk_tree_uuid)
FIELD(header, struct btrfs_header, bytenr, 64)
FIELD(header, struct btrfs_header, flags, 64)
FIELD(header, struct btrfs_header, generation, 64)
FIELD(header, struct btrfs_header, owner, 64)
FIELD(header, struct btrfs_header, nritems, 32)
FIELD(header, struct btrfs_header, level, 8)

FIELD_PTR(item, struct btrfs_item, key)
FIELD(item, struct btrfs_item, offset, 32)
FIELD(item, struct btrfs_item, size, 32)
FIELD_PTR(key_ptr, struct btrfs_key_ptr, key)
FIELD(key_ptr, struct btrfs_key_ptr, blockptr, 64)
FIELD(key_ptr, struct btrfs_key_ptr, generation, 64)

FIELD(dev_item, struct btrfs_dev_item, devid, 64)
FIELD(dev_item, struct btrfs_dev_item, total_bytes, 64)
FIELD(dev_item, struct btrfs_dev_item, bytes_used, 64)
FIELD(dev_item, struct btrfs_dev_item, io_align, 32)
FIELD(dev_item, struct btrfs_dev_item, io_width, 32)
FIELD(dev_item, struct btrfs_dev_item, sector_size, 32)
FIELD(dev_item, struct btrfs_dev_item, type, 64)
FIELD(dev_item, struct btrfs_dev_item, generation, 64)
FIELD(dev_item, struct btrfs_dev_item, start_offset, 64)
FIELD(dev_item, struct btrfs_dev_item, dev_group, 32)
FIELD(dev_item, struct btrfs_dev_item, seek_speed, 8)
FIELD(dev_item, struct btrfs_dev_item, bandwidth, 8)
FIELD_PTR(dev_item, struct btrfs_dev_item, uuid)
FIELD_PTR(dev_item, struct btrfs_dev_item, fsid)

FIELD(backup, struct btrfs_root_backup, tree_root, 64)
FIELD(backup, struct btrfs_root_backup, tree_root_gen, 64)
FIELD(backup, struct btrfs_root_backup, chunk_root, 64)
FIELD(backup, struct btrfs_root_backup, chunk_root_gen, 64)
FIELD(backup, struct btrfs_root_backup, extent_root, 64)
FIELD(backup, struct btrfs_root_backup, extent_root_gen, 64)
FIELD(backup, struct btrfs_root_backup, fs_root, 64)
FIELD(backup, struct btrfs_root_backup, fs_root_gen, 64)
FIELD(backup, struct btrfs_root_backup, dev_root, 64)
FIELD(backup, struct btrfs_root_backup, dev_root_gen, 64)
FIELD(backup, struct btrfs_root_backup, csum_root, 64)
FIELD(backup, struct btrfs_root_backup, csum_root_gen, 64)
FIELD(backup, struct btrfs_root_backup, total_bytes, 64)
FIELD(backup, struct btrfs_root_backup, bytes_used, 64)
FIELD(backup, struct btrfs_root_backup, num_devices, 64)
FIELD(backup, struct btrfs_root_backup, tree_root_level, 8)
FIELD(backup, struct btrfs_root_backup, chunk_root_level, 8)
FIELD(backup, struct btrfs_root_backup, extent_root_level, 8)
FIELD(backup, struct btrfs_root_backup, fs_root_level, 8)
FIELD(backup, struct btrfs_root_backup, dev_root_level, 8)
FIELD(backup, struct btrfs_root_backup, csum_root_level, 8)

FIELD_PTR(super, struct btrfs_super_block, csum)
FIELD_PTR(super, struct btrfs_super_block, fsid)
FIELD(super, struct btrfs_super_block, bytenr, 64)
FIELD(super, struct btrfs_super_block, flags, 64)
FIELD(super, struct btrfs_super_block, magic, 64)
FIELD(super, struct btrfs_super_block, generation, 64)
FIELD(super, struct btrfs_super_block, root, 64)
FIELD(super, struct btrfs_super_block, chunk_root, 64)
FIELD(super, struct btrfs_super_block, log_root, 64)
FIELD(super, struct btrfs_super_block, unused_log_root_transid, 64)
FIELD(super, struct btrfs_super_block, total_bytes, 64)
FIELD(super, struct btrfs_super_block, bytes_used, 64)
FIELD(super, struct btrfs_super_block, root_dir_objectid, 64)
FIELD(super, struct btrfs_super_block, num_devices, 64)
FIELD(super, struct btrfs_super_block, sectorsize, 32)
FIELD(super, struct btrfs_super_block, nodesize, 32)
FIELD(super, struct btrfs_super_block, unused_leafsize, 32)
FIELD(super, struct btrfs_super_block, stripesize, 32)
FIELD(super, struct btrfs_super_block, sys_chunk_array_size, 32)
FIELD(super, struct btrfs_super_block, chunk_root_generation, 64)
FIELD(super, struct btrfs_super_block, compat_flags, 64)
FIELD(super, struct btrfs_super_block, compat_ro_flags, 64)
FIELD(super, struct btrfs_super_block, incompat_flags, 64)
FIELD(super, struct btrfs_super_block, csum_type, 16)
FIELD(super, struct btrfs_super_block, root_level, 8)
FIELD(super, struct btrfs_super_block, chunk_root_level, 8)
FIELD(super, struct btrfs_super_block, log_root_level, 8)
FIELD_PTR(super, struct btrfs_super_block, dev_item)
FIELD_PTR(super, struct btrfs_super_block, label)
FIELD(super, struct btrfs_super_block, cache_generation, 64)
FIELD(super, struct btrfs_super_block, uuid_tree_generation, 64)
FIELD_PTR(super, struct btrfs_super_block, metadata_uuid)
FIELD(super, struct btrfs_super_block, nr_global_roots, 64)
FIELD_PTR(super, struct btrfs_super_block, sys_chunk_array)
FIELD_PTR(super, struct btrfs_super_block, super_roots)

FIELD(stripe, struct btrfs_stripe, devid, 64)
FIELD(stripe, struct btrfs_stripe, offset, 64)
FIELD_PTR(stripe, struct btrfs_stripe, dev_uuid)

FIELD(chunk, struct btrfs_chunk, length, 64)
FIELD(chunk, struct btrfs_chunk, owner, 64)
FIELD(chunk, struct btrfs_chunk, stripe_len, 64)
FIELD(chunk, struct btrfs_chunk, type, 64)
FIELD(chunk, struct btrfs_chunk, io_align, 32)
FIELD(chunk, struct btrfs_chunk, io_width, 32)
FIELD(chunk, struct btrfs_chunk, sector_size, 32)
FIELD(chunk, struct btrfs_chunk, num_stripes, 16)
FIELD(chunk, struct btrfs_chunk, sub_stripes, 16)
/* The i-th stripe of a chunk item. */
static inline uint8_t *chunk_stripe(const void *chunk, unsigned i)
{
	return (uint8_t *)chunk + sizeof(struct btrfs_chunk) + (size_t)i * sizeof(struct btrfs_stripe);
}
static inline size_t chunk_item_size(unsigned num_stripes)
{
	return sizeof(struct btrfs_chunk) + (size_t)num_stripes * sizeof(struct btrfs_stripe);
}

FIELD(dev_extent, struct btrfs_dev_extent, chunk_tree, 64)
FIELD(dev_extent, struct btrfs_dev_extent, chunk_objectid, 64)
FIELD(dev_extent, struct btrfs_dev_extent, chunk_offset, 64)
FIELD(dev_extent, struct btrfs_dev_extent, length, 64)
FIELD_PTR(dev_extent, struct btrfs_dev_extent, chunk_tree_uuid)

FIELD(block_group, struct btrfs_block_group_item, used, 64)
FIELD(block_group, struct btrfs_block_group_item, chunk_objectid, 64)
FIELD(block_group, struct btrfs_block_group_item, flags, 64)

FIELD(free_space_info, struct btrfs_free_space_info, extent_count, 32)
FIELD(free_space_info, struct btrfs_free_space_info, flags, 32)

FIELD(inode, struct btrfs_inode_item, generation, 64)
FIELD(inode, struct btrfs_inode_item, transid, 64)
FIELD(inode, struct btrfs_inode_item, size, 64)
FIELD(inode, struct btrfs_inode_item, nbytes, 64)
FIELD(inode, struct btrfs_inode_item, block_group, 64)
FIELD(inode, struct btrfs_inode_item, nlink, 32)
FIELD(inode, struct btrfs_inode_item, uid, 32)
FIELD(inode, struct btrfs_inode_item, gid, 32)
FIELD(inode, struct btrfs_inode_item, mode, 32)
FIELD(inode, struct btrfs_inode_item, rdev, 64)
FIELD(inode, struct btrfs_inode_item, flags, 64)
FIELD(inode, struct btrfs_inode_item, sequence, 64)
FIELD_PTR(inode, struct btrfs_inode_item, atime)
FIELD_PTR(inode, struct btrfs_inode_item, ctime)
FIELD_PTR(inode, struct btrfs_inode_item, mtime)
FIELD_PTR(inode, struct btrfs_inode_item, otime)

FIELD(inode_ref, struct btrfs_inode_ref, index, 64)
FIELD(inode_ref, struct btrfs_inode_ref, name_len, 16)
FIELD(inode_extref, struct btrfs_inode_extref, parent_objectid, 64)
FIELD(inode_extref, struct btrfs_inode_extref, index, 64)
FIELD(inode_extref, struct btrfs_inode_extref, name_len, 16)

FIELD_PTR(dir_item, struct btrfs_dir_item, location)
FIELD(dir_item, struct btrfs_dir_item, transid, 64)
FIELD(dir_item, struct btrfs_dir_item, data_len, 16)
FIELD(dir_item, struct btrfs_dir_item, name_len, 16)
FIELD(dir_item, struct btrfs_dir_item, type, 8)
FIELD(dir_log_item, struct btrfs_dir_log_item, end, 64)

FIELD(file_extent, struct btrfs_file_extent_item, generation, 64)
FIELD(file_extent, struct btrfs_file_extent_item, ram_bytes, 64)
FIELD(file_extent, struct btrfs_file_extent_item, compression, 8)
FIELD(file_extent, struct btrfs_file_extent_item, encryption, 8)
FIELD(file_extent, struct btrfs_file_extent_item, other_encoding, 16)
FIELD(file_extent, struct btrfs_file_extent_item, type, 8)
FIELD(file_extent, struct btrfs_file_extent_item, disk_bytenr, 64)
FIELD(file_extent, struct btrfs_file_extent_item, disk_num_bytes, 64)
FIELD(file_extent, struct btrfs_file_extent_item, offset, 64)
FIELD(file_extent, struct btrfs_file_extent_item, num_bytes, 64)

FIELD(extent, struct btrfs_extent_item, refs, 64)
FIELD(extent, struct btrfs_extent_item, generation, 64)
FIELD(extent, struct btrfs_extent_item, flags, 64)
FIELD_PTR(tree_block_info, struct btrfs_tree_block_info, key)
FIELD(tree_block_info, struct btrfs_tree_block_info, level, 8)
FIELD(inline_ref, struct btrfs_extent_inline_ref, type, 8)
FIELD(inline_ref, struct btrfs_extent_inline_ref, offset, 64)
FIELD(data_ref, struct btrfs_extent_data_ref, root, 64)
FIELD(data_ref, struct btrfs_extent_data_ref, objectid, 64)
FIELD(data_ref, struct btrfs_extent_data_ref, offset, 64)
FIELD(data_ref, struct btrfs_extent_data_ref, count, 32)
FIELD(shared_data_ref, struct btrfs_shared_data_ref, count, 32)
/* Bytes an inline reference of this type takes in an extent item (type
 * byte included), 0 for a type that cannot be inline. */
static inline uint32_t extent_inline_ref_size(uint8_t type)
{
	switch (type) {
	case BTRFS_TREE_BLOCK_REF_KEY:
	case BTRFS_SHARED_BLOCK_REF_KEY:
	case BTRFS_EXTENT_OWNER_REF_KEY:
		return sizeof(struct btrfs_extent_inline_ref);
	case BTRFS_EXTENT_DATA_REF_KEY:
		return 1 + sizeof(struct btrfs_extent_data_ref);
	case BTRFS_SHARED_DATA_REF_KEY:
		return sizeof(struct btrfs_extent_inline_ref) + sizeof(struct btrfs_shared_data_ref);
	default:
		return 0;
	}
}
FIELD(owner_ref, struct btrfs_extent_owner_ref, root_id, 64)

FIELD_PTR(root_item, struct btrfs_root_item, inode)
FIELD(root_item, struct btrfs_root_item, generation, 64)
FIELD(root_item, struct btrfs_root_item, root_dirid, 64)
FIELD(root_item, struct btrfs_root_item, bytenr, 64)
FIELD(root_item, struct btrfs_root_item, byte_limit, 64)
FIELD(root_item, struct btrfs_root_item, bytes_used, 64)
FIELD(root_item, struct btrfs_root_item, last_snapshot, 64)
FIELD(root_item, struct btrfs_root_item, flags, 64)
FIELD(root_item, struct btrfs_root_item, refs, 32)
FIELD_PTR(root_item, struct btrfs_root_item, drop_progress)
FIELD(root_item, struct btrfs_root_item, drop_level, 8)
FIELD(root_item, struct btrfs_root_item, level, 8)
FIELD(root_item, struct btrfs_root_item, generation_v2, 64)
FIELD_PTR(root_item, struct btrfs_root_item, uuid)
FIELD_PTR(root_item, struct btrfs_root_item, parent_uuid)
FIELD_PTR(root_item, struct btrfs_root_item, received_uuid)
FIELD(root_item, struct btrfs_root_item, ctransid, 64)
FIELD(root_item, struct btrfs_root_item, otransid, 64)
FIELD(root_item, struct btrfs_root_item, stransid, 64)
FIELD(root_item, struct btrfs_root_item, rtransid, 64)
FIELD_PTR(root_item, struct btrfs_root_item, ctime)
FIELD_PTR(root_item, struct btrfs_root_item, otime)
FIELD_PTR(root_item, struct btrfs_root_item, stime)
FIELD_PTR(root_item, struct btrfs_root_item, rtime)

FIELD(root_ref, struct btrfs_root_ref, dirid, 64)
FIELD(root_ref, struct btrfs_root_ref, sequence, 64)
FIELD(root_ref, struct btrfs_root_ref, name_len, 16)

FIELD(qgroup_status, struct btrfs_qgroup_status_item, version, 64)
FIELD(qgroup_status, struct btrfs_qgroup_status_item, generation, 64)
FIELD(qgroup_status, struct btrfs_qgroup_status_item, flags, 64)
FIELD(qgroup_status, struct btrfs_qgroup_status_item, rescan, 64)
FIELD(qgroup_status, struct btrfs_qgroup_status_item, enable_gen, 64)
FIELD(qgroup_info, struct btrfs_qgroup_info_item, generation, 64)
FIELD(qgroup_info, struct btrfs_qgroup_info_item, rfer, 64)
FIELD(qgroup_info, struct btrfs_qgroup_info_item, rfer_cmpr, 64)
FIELD(qgroup_info, struct btrfs_qgroup_info_item, excl, 64)
FIELD(qgroup_info, struct btrfs_qgroup_info_item, excl_cmpr, 64)
FIELD(qgroup_limit, struct btrfs_qgroup_limit_item, flags, 64)
FIELD(qgroup_limit, struct btrfs_qgroup_limit_item, max_rfer, 64)
FIELD(qgroup_limit, struct btrfs_qgroup_limit_item, max_excl, 64)
FIELD(qgroup_limit, struct btrfs_qgroup_limit_item, rsv_rfer, 64)
FIELD(qgroup_limit, struct btrfs_qgroup_limit_item, rsv_excl, 64)

FIELD(balance, struct btrfs_balance_item, flags, 64)
FIELD_PTR(balance, struct btrfs_balance_item, data)
FIELD_PTR(balance, struct btrfs_balance_item, meta)
FIELD_PTR(balance, struct btrfs_balance_item, sys)
FIELD(balance_args, struct btrfs_disk_balance_args, profiles, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, usage, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, devid, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, pstart, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, pend, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, vstart, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, vend, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, target, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, flags, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, limit, 64)
FIELD(balance_args, struct btrfs_disk_balance_args, stripes_min, 32)
FIELD(balance_args, struct btrfs_disk_balance_args, stripes_max, 32)

FIELD(dev_replace, struct btrfs_dev_replace_item, src_devid, 64)
FIELD(dev_replace, struct btrfs_dev_replace_item, cursor_left, 64)
FIELD(dev_replace, struct btrfs_dev_replace_item, cursor_right, 64)
FIELD(dev_replace, struct btrfs_dev_replace_item, cont_reading_from_srcdev_mode, 64)
FIELD(dev_replace, struct btrfs_dev_replace_item, replace_state, 64)
FIELD(dev_replace, struct btrfs_dev_replace_item, time_started, 64)
FIELD(dev_replace, struct btrfs_dev_replace_item, time_stopped, 64)
FIELD(dev_replace, struct btrfs_dev_replace_item, num_write_errors, 64)
FIELD(dev_replace, struct btrfs_dev_replace_item, num_uncorrectable_read_errors, 64)

FIELD(raid_stride, struct btrfs_raid_stride, devid, 64)
FIELD(raid_stride, struct btrfs_raid_stride, physical, 64)

FIELD(verity_desc, struct btrfs_verity_descriptor_item, size, 64)
FIELD(verity_desc, struct btrfs_verity_descriptor_item, encryption, 8)

/* Item and key-pointer arrays of a tree block. */
static inline uint8_t *leaf_item(const void *block, unsigned slot)
{
	return (uint8_t *)block + sizeof(struct btrfs_header) + (size_t)slot * sizeof(struct btrfs_item);
}
static inline uint8_t *node_key_ptr(const void *block, unsigned slot)
{
	return (uint8_t *)block + sizeof(struct btrfs_header) + (size_t)slot * sizeof(struct btrfs_key_ptr);
}
/* Item data offsets are relative to the end of the header. */
static inline uint8_t *leaf_item_data(const void *block, unsigned slot)
{
	return (uint8_t *)block + sizeof(struct btrfs_header) + item_offset(leaf_item(block, slot));
}
/* The item at slot of a leaf the block layer verified (its items lie inside
 * the block), as a view for the bounded getters. */
static inline struct item_view leaf_item_view(const void *block, unsigned slot)
{
	return item_view_of(leaf_item_data(block, slot), item_size(leaf_item(block, slot)));
}

#endif
