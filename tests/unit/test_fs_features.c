// SPDX-License-Identifier: GPL-2.0-only
/* fs_open and trans_start through the feature gate (libfs/features.h) on real
 * mkfs.btrfs images with feature bits edited in every superblock copy. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <errno.h>
#include <string.h>

#include <btk/format.h>
#include <btk/fs.h>
#include <btk/super.h>
#include <btk/trans.h>
#include "tests/unit/fixtures.h"

/* The "small" image in memory, its feature flags xor'ed with these bits. */
static struct io_dev *image_with_bits(uint64_t incompat, uint64_t compat_ro)
{
	char path[512];
	struct io_dev *io;

	cr_assert_eq(fixture_image("small", path, sizeof(path)), 0);
	cr_assert_eq(fixture_load_memory(path, &io), 0);
	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint8_t sb[BTRFS_SUPER_INFO_SIZE];
		uint64_t off = btrfs_super_offset(m);
		if (off + sizeof(sb) > io_size(io))
			continue;
		cr_assert_eq(io_read(io, sb, sizeof(sb), off), 0);
		super_set_incompat_flags(sb, super_incompat_flags(sb) ^ incompat);
		super_set_compat_ro_flags(sb, super_compat_ro_flags(sb) ^ compat_ro);
		cr_assert_eq(super_update_csum(sb), 0);
		cr_assert_eq(io_write(io, sb, sizeof(sb), off), 0);
	}
	return io;
}

static int open_with_bits(uint64_t incompat, uint64_t compat_ro, bool writable, struct note_log *log,
			  struct fs_info **fs, char *msg, size_t len)
{
	struct io_dev *io = image_with_bits(incompat, compat_ro);
	struct fs_open_options o;
	int ret;

	fs_open_options_init(&o);
	o.writable = writable;
	o.note = fixture_note;
	o.note_arg = log;
	ret = fs_open_devices(&io, 1, &o, fs);
	snprintf(msg, len, "%s", ret ? btk_error_msg() : "");
	/* a feature gate refusal is typed as such, whatever its errno */
	if (ret == -EOPNOTSUPP)
		cr_assert_eq(btk_last_error()->kind, BTK_ERR_UNSUPPORTED, "%s",
			     btk_err_kind_name(btk_last_error()->kind));
	return ret;
}

Test(fs_features, unknown_incompat_opens_nothing_even_read_only)
{
	struct note_log log = { 0 };
	struct fs_info *fs;
	char msg[600];

	cr_assert_eq(open_with_bits(1ULL << 50, 0, false, &log, &fs, msg, sizeof(msg)), -EOPNOTSUPP);
	cr_assert_null(fs);
	cr_assert(strstr(msg, "0x4000000000000"), "%s", msg);
}

Test(fs_features, unknown_compat_ro_reads_with_a_warning)
{
	struct note_log log = { 0 };
	struct fs_info *fs;
	struct trans *t;
	char msg[600];

	cr_assert_eq(open_with_bits(0, 1ULL << 7, false, &log, &fs, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert(strstr(log.all, "unknown compat_ro feature flags 0x80"), "%s", log.all);
	cr_assert_gt(log.count[FS_NOTE_WARNING], 0);
	/* a dry run's in-memory transaction is refused as well */
	fs->writable = true;
	cr_assert_eq(trans_start(fs, &t), -EOPNOTSUPP);
	cr_assert(strstr(btk_error_msg(), "must not write"), "%s", btk_error_msg());
	fs_close(fs);
	cr_assert_eq(open_with_bits(0, 1ULL << 7, true, &log, &fs, msg, sizeof(msg)), -EOPNOTSUPP);
	cr_assert(strstr(msg, "compat_ro feature flags 0x80"), "%s", msg);
}

Test(fs_features, read_only_formats_open_read_only_only)
{
	struct note_log log = { 0 };
	struct fs_info *fs;
	char msg[600];

	cr_assert_eq(open_with_bits(BTRFS_FEATURE_INCOMPAT_REMAP_TREE, 0, false, &log, &fs, msg, sizeof(msg)), 0,
		     "%s", msg);
	cr_assert(strstr(log.all, "does not interpret remap-tree"), "%s", log.all);
	fs_close(fs);
	cr_assert_eq(open_with_bits(BTRFS_FEATURE_INCOMPAT_ZONED, 0, true, &log, &fs, msg, sizeof(msg)),
		     -EOPNOTSUPP);
	cr_assert(strstr(msg, "zoned (0x1000)"), "%s", msg);
}

Test(fs_features, known_features_open_writable)
{
	struct note_log log = { 0 };
	struct fs_info *fs;
	char msg[600];

	cr_assert_eq(open_with_bits(0, 0, true, &log, &fs, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(log.count[FS_NOTE_WARNING], 0, "%s", log.all);
	fs_close(fs);
}
