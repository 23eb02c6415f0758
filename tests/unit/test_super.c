// SPDX-License-Identifier: GPL-2.0-only
/* Superblocks of a real image: the primary copy is chosen while it is good,
 * a damaged primary falls back to copy 1 (and the filesystem still opens),
 * and every validation rule rejects its kind of damage with a reason. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <btk/csum.h>
#include <btk/super.h>
#include "tests/unit/fixtures.h"

static struct io_dev *load_small(void)
{
	char path[4096];
	struct io_dev *io;
	int ret = fixture_image("small", path, sizeof(path));

	cr_assert_eq(ret, 0, "fixture: %s", strerror(-ret));
	cr_assert_eq(fixture_load_memory(path, &io), 0);
	cr_assert_gt(io_size(io), btrfs_super_offset(1) + BTRFS_SUPER_INFO_SIZE,
		     "the fixture image must be large enough to hold superblock copy 1");
	cr_assert_lt(io_size(io), btrfs_super_offset(2));
	return io;
}

/* Flip one byte of superblock copy `mirror` on the device. */
static void damage_copy(struct io_dev *io, int mirror)
{
	uint8_t b;
	uint64_t off = btrfs_super_offset(mirror) + 0x200; /* inside the label */

	cr_assert_eq(io_read(io, &b, 1, off), 0);
	b ^= 0xff;
	cr_assert_eq(io_write(io, &b, 1, off), 0);
}

Test(super, best_copy_of_a_healthy_image_is_the_primary)
{
	struct io_dev *io = load_small();
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];

	cr_assert_eq(super_read_best(io, -1, sb, copies), 0);
	cr_assert_eq(super_magic(sb), BTRFS_MAGIC);
	cr_assert_eq(super_bytenr(sb), BTRFS_SUPER_INFO_OFFSET);
	cr_assert_eq(copies[0].status, 0, "copy 0: %s", copies[0].why);
	cr_assert_eq(copies[1].status, 0, "copy 1: %s", copies[1].why);
	cr_assert_eq(copies[1].offset, 64ULL << 20);
	cr_assert_eq(copies[0].generation, copies[1].generation);
	cr_assert_eq(copies[2].status, -ENXIO, "copy 2 lies beyond a small image");
	cr_assert(strstr(copies[2].why, "beyond the end"), "%s", copies[2].why);
	cr_assert_eq(super_nodesize(sb), 16384);
	cr_assert_eq(super_csum_type(sb), BTRFS_CSUM_TYPE_CRC32);
	io_close(io);
}

Test(super, damaged_primary_falls_back_to_copy_1)
{
	struct io_dev *io = load_small();
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];

	damage_copy(io, 0);
	cr_assert_eq(super_read_best(io, -1, sb, copies), 1);
	cr_assert_eq(copies[0].status, -EUCLEAN);
	cr_assert(strstr(copies[0].why, "checksum mismatch"), "%s", copies[0].why);
	cr_assert_eq(super_bytenr(sb), 64ULL << 20);
	/* asking for the damaged copy explicitly fails with its reason */
	cr_assert_eq(super_read_best(io, 0, sb, copies), -EUCLEAN);
	cr_assert_eq(super_read_best(io, 2, sb, copies), -ENXIO);
	io_close(io);
}

Test(super, explicit_mirror_is_honoured)
{
	struct io_dev *io = load_small();
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];

	cr_assert_eq(super_read_best(io, 1, sb, copies), 1);
	cr_assert_eq(super_bytenr(sb), 64ULL << 20);
	io_close(io);
}

Test(super, newest_valid_copy_wins)
{
	struct io_dev *io = load_small();
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	struct super_copy info;
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	uint64_t gen;

	cr_assert_eq(super_read_copy(io, 1, sb, &info), 0, "%s", info.why);
	gen = super_generation(sb);
	super_set_generation(sb, gen + 1);
	cr_assert_eq(super_update_csum(sb), 0);
	cr_assert_eq(io_write(io, sb, sizeof(sb), btrfs_super_offset(1)), 0);
	cr_assert_eq(super_read_best(io, -1, sb, copies), 1);
	cr_assert_eq(super_generation(sb), gen + 1);
	io_close(io);
}

Test(super, filesystem_opens_from_copy_1_when_the_primary_is_bad)
{
	char path[4096];
	struct fs_open_options opts;
	struct note_log log;
	struct io_dev *io;
	struct fs_info *fs;

	cr_assert_eq(fixture_image("small", path, sizeof(path)), 0);
	cr_assert_eq(fixture_load_memory(path, &io), 0);
	damage_copy(io, 0);
	memset(&log, 0, sizeof(log));
	fs_open_options_init(&opts);
	opts.note = fixture_note;
	opts.note_arg = &log;
	cr_assert_eq(fs_open_devices(&io, 1, &opts, &fs), 0, "%s", btk_error_msg());
	cr_assert_eq(fs->super_mirror, 1);
	cr_assert(strstr(log.all, "superblock copy 0") && strstr(log.all, "checksum mismatch"),
		  "the bad primary is reported: %s", log.all);
	cr_assert(strstr(log.all, "using superblock copy 1"), "%s", log.all);
	cr_assert_neq(fs->fs_root.bytenr, 0);
	fs_close(fs);
}

/* ---- every rule of super_validate ---- */

static uint8_t good[BTRFS_SUPER_INFO_SIZE];

static void load_good_super(void)
{
	struct io_dev *io = load_small();
	struct super_copy info;

	cr_assert_eq(super_read_copy(io, 0, good, &info), 0, "%s", info.why);
	io_close(io);
}

/* Apply a patch to a copy of the good superblock (re-checksummed unless
 * keep_csum), and expect -EUCLEAN with `reason` in the message. */
#define EXPECT_INVALID(reason, keep_csum, ...)                                              \
	do {                                                                                \
		uint8_t sb[BTRFS_SUPER_INFO_SIZE];                                          \
		char why[160] = "";                                                         \
		memcpy(sb, good, sizeof(sb));                                               \
		__VA_ARGS__;                                                                \
		if (!(keep_csum))                                                           \
			cr_assert_eq(super_update_csum(sb), 0);                             \
		cr_assert_eq(super_validate(sb, BTRFS_SUPER_INFO_OFFSET, why, sizeof(why)), \
			     -EUCLEAN, "accepted: " #__VA_ARGS__);                          \
		cr_assert(strstr(why, reason), "%s: message \"%s\" lacks \"%s\"",         \
			  #__VA_ARGS__, why, reason);                                       \
	} while (0)

TestSuite(super_validate, .init = load_good_super);

Test(super_validate, good_superblock_passes)
{
	char why[160] = "untouched";

	cr_assert_eq(super_validate(good, BTRFS_SUPER_INFO_OFFSET, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(memcmp(super_metadata_fsid(good), super_fsid_ptr(good), BTRFS_FSID_SIZE), 0);
}

Test(super_validate, magic)
{
	EXPECT_INVALID("no btrfs magic", 0, super_set_magic(sb, BTRFS_MAGIC + 1));
	EXPECT_INVALID("no btrfs magic", 1, memset(sb, 0, sizeof(sb)));
}

Test(super_validate, bytenr)
{
	char msg[160] = "";

	cr_assert_eq(super_validate(good, btrfs_super_offset(1), msg, sizeof(msg)), -EUCLEAN);
	cr_assert(strstr(msg, "bytenr 65536 does not match its offset 67108864"), "%s", msg);
	EXPECT_INVALID("does not match its offset", 0, super_set_bytenr(sb, 4096));
}

Test(super_validate, checksum)
{
	EXPECT_INVALID("checksum mismatch", 1, sb[BTRFS_CSUM_SIZE + 1000] ^= 1);
	EXPECT_INVALID("checksum mismatch", 1, sb[0] ^= 1);
	EXPECT_INVALID("checksum mismatch", 1, sb[BTRFS_SUPER_INFO_SIZE - 1] ^= 0x80);
	/* a superblock claiming xxhash must carry an xxhash checksum */
	EXPECT_INVALID("checksum mismatch", 1, super_set_csum_type(sb, BTRFS_CSUM_TYPE_XXHASH));
	EXPECT_INVALID("unknown checksum type 7", 1, super_set_csum_type(sb, 7));
}

Test(super_validate, sectorsize)
{
	EXPECT_INVALID("invalid sectorsize 2048", 0, super_set_sectorsize(sb, 2048));
	EXPECT_INVALID("invalid sectorsize 6144", 0, super_set_sectorsize(sb, 6144));
	EXPECT_INVALID("invalid sectorsize 131072", 0, super_set_sectorsize(sb, 131072));
	EXPECT_INVALID("invalid sectorsize 0", 0, super_set_sectorsize(sb, 0));
}

Test(super_validate, nodesize)
{
	EXPECT_INVALID("invalid nodesize 12288", 0, super_set_nodesize(sb, 12288));
	EXPECT_INVALID("invalid nodesize 2048", 0, super_set_nodesize(sb, 2048));
	EXPECT_INVALID("invalid nodesize 131072", 0, super_set_nodesize(sb, 131072));
	EXPECT_INVALID("invalid nodesize 0", 0, super_set_nodesize(sb, 0));
}

Test(super_validate, stripesize)
{
	EXPECT_INVALID("invalid stripesize 3", 0, super_set_stripesize(sb, 3));
}

Test(super_validate, tree_pointers)
{
	EXPECT_INVALID("not aligned", 0, super_set_root(sb, super_root(sb) + 512));
	EXPECT_INVALID("not aligned", 0, super_set_chunk_root(sb, super_chunk_root(sb) + 1));
	EXPECT_INVALID("not aligned", 0, super_set_log_root(sb, 4097));
	EXPECT_INVALID("pointer is zero", 0, super_set_root(sb, 0));
	EXPECT_INVALID("pointer is zero", 0, super_set_chunk_root(sb, 0));
	EXPECT_INVALID("level out of range", 0, super_set_root_level(sb, BTRFS_MAX_LEVEL));
	EXPECT_INVALID("level out of range", 0, super_set_chunk_root_level(sb, 200));
	EXPECT_INVALID("level out of range", 0, super_set_log_root_level(sb, BTRFS_MAX_LEVEL));
}

Test(super_validate, sys_chunk_array_size)
{
	EXPECT_INVALID("system chunk array size 2049 too large", 0,
		       super_set_sys_chunk_array_size(sb, BTRFS_SYSTEM_CHUNK_ARRAY_SIZE + 1));
	EXPECT_INVALID("too large", 0, super_set_sys_chunk_array_size(sb, UINT32_MAX));
	EXPECT_INVALID("system chunk array too small (0 bytes)", 0, super_set_sys_chunk_array_size(sb, 0));
	EXPECT_INVALID("too small", 0, super_set_sys_chunk_array_size(sb, 17 + 48 + 31));
}

Test(super_validate, counts_and_generations)
{
	EXPECT_INVALID("number of devices is 0", 0, super_set_num_devices(sb, 0));
	EXPECT_INVALID("total_bytes is 0", 0, super_set_total_bytes(sb, 0));
	EXPECT_INVALID("generation is 0", 0, super_set_generation(sb, 0));
	EXPECT_INVALID("chunk root generation", 0,
		       super_set_chunk_root_generation(sb, super_generation(sb) + 1));
}

Test(super_validate, dev_item)
{
	EXPECT_INVALID("dev_item fsid does not match", 0, dev_item_fsid_ptr(super_dev_item_ptr(sb))[5] ^= 1);
	EXPECT_INVALID("dev_item fsid does not match", 0, super_fsid_ptr(sb)[0] ^= 1);
	EXPECT_INVALID("dev_item devid is 0", 0, dev_item_set_devid(super_dev_item_ptr(sb), 0));
}

Test(super_validate, metadata_uuid_is_what_the_dev_item_must_carry)
{
	/* with METADATA_UUID, the dev_item carries metadata_uuid, not fsid */
	EXPECT_INVALID("dev_item fsid does not match", 0,
		       super_set_incompat_flags(sb, super_incompat_flags(sb) |
							    BTRFS_FEATURE_INCOMPAT_METADATA_UUID);
		       memset(super_metadata_uuid_ptr(sb), 0x42, BTRFS_FSID_SIZE));
}

Test(super_validate, metadata_uuid_filesystem_is_valid)
{
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	char why[160] = "";

	memcpy(sb, good, sizeof(sb));
	super_set_incompat_flags(sb, super_incompat_flags(sb) | BTRFS_FEATURE_INCOMPAT_METADATA_UUID);
	memset(super_metadata_uuid_ptr(sb), 0x42, BTRFS_FSID_SIZE);
	memset(dev_item_fsid_ptr(super_dev_item_ptr(sb)), 0x42, BTRFS_FSID_SIZE);
	cr_assert_eq(super_update_csum(sb), 0);
	cr_assert_eq(super_validate(sb, BTRFS_SUPER_INFO_OFFSET, why, sizeof(why)), 0, "%s", why);
	cr_assert_eq(super_metadata_fsid(sb), super_metadata_uuid_ptr(sb));
}

Test(super_validate, update_csum_makes_a_patched_superblock_valid_again)
{
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	char why[160] = "";

	memcpy(sb, good, sizeof(sb));
	memcpy(super_label_ptr(sb), "relabelled", 11);
	cr_assert_eq(super_validate(sb, BTRFS_SUPER_INFO_OFFSET, why, sizeof(why)), -EUCLEAN);
	cr_assert_eq(super_update_csum(sb), 0);
	cr_assert_eq(super_validate(sb, BTRFS_SUPER_INFO_OFFSET, why, sizeof(why)), 0, "%s", why);
	super_set_csum_type(sb, 9);
	cr_assert_eq(super_update_csum(sb), -EINVAL);
}

/* A member superblock with the given flags, fsid byte, generation and devid. */
static void member_super(uint8_t *sb, uint64_t flags, uint8_t fsid, uint64_t gen, uint64_t devid)
{
	memset(sb, 0, BTRFS_SUPER_INFO_SIZE);
	super_set_flags(sb, flags);
	memset(super_fsid_ptr(sb), fsid, BTRFS_FSID_SIZE);
	super_set_generation(sb, gen);
	dev_item_set_devid(super_dev_item_ptr(sb), devid);
}

/* The rule fs_open and restore share: a sprout's superblock beats its seeds'
 * whatever the order, then generation, then the lowest devid; a member of
 * another fsid that is no sprout never wins. */
Test(super, member_preference)
{
	uint8_t a[BTRFS_SUPER_INFO_SIZE], b[BTRFS_SUPER_INFO_SIZE];

	member_super(a, BTRFS_SUPER_FLAG_SEEDING, 1, 50, 1);
	member_super(b, 0, 2, 10, 2);
	cr_assert(super_member_preferred(b, a), "the sprout names the filesystem");
	cr_assert(!super_member_preferred(a, b), "a seed never replaces the sprout");
	member_super(a, 0, 1, 10, 3);
	member_super(b, 0, 1, 11, 4);
	cr_assert(super_member_preferred(b, a), "newer generation");
	cr_assert(!super_member_preferred(a, b));
	member_super(b, 0, 1, 10, 2);
	cr_assert(super_member_preferred(b, a), "same generation: lower devid");
	cr_assert(!super_member_preferred(a, b));
	cr_assert(!super_member_preferred(a, a), "never itself");
	member_super(b, 0, 9, 99, 1);
	cr_assert(!super_member_preferred(b, a), "another fsid, no seed: never");
	member_super(a, BTRFS_SUPER_FLAG_SEEDING, 1, 5, 1);
	member_super(b, BTRFS_SUPER_FLAG_SEEDING, 7, 9, 2);
	cr_assert(!super_member_preferred(b, a), "seeds of two seed filesystems: the first stays");
}
