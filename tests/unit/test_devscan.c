// SPDX-License-Identifier: GPL-2.0-only
/* Device scanning by fsid: an fsid no device carries finds no members, and
 * the result can always be freed. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "libfs/devscan.h"
#include <btk/super.h>
#include "tests/unit/fixtures.h"

Test(devscan, random_fsid_has_no_members)
{
	/* a fixed fsid no mkfs will have produced */
	const uint8_t fsid[BTRFS_FSID_SIZE] = { 0xb7, 0x4b, 0x00, 0xde, 0x5c, 0xa1, 0x4e, 0x21,
						0x9f, 0x03, 0x6d, 0x11, 0xc0, 0xff, 0xee, 0x42 };
	char **paths = (char **)&paths;
	unsigned count = 99;

	cr_assert_eq(devscan_find_members(fsid, &paths, &count), 0);
	cr_assert_eq(count, 0);
	devscan_free(paths, count);
}

Test(devscan, image_files_are_not_scanned)
{
	/* only block devices are probed: the fixture image file is not a member */
	char path[4096];
	struct io_dev *io;
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	char **paths;
	unsigned count;

	cr_assert_eq(fixture_image("small", path, sizeof(path)), 0);
	cr_assert_eq(fixture_load_memory(path, &io), 0);
	cr_assert_eq(super_read_best(io, -1, sb, copies), 0);
	io_close(io);
	cr_assert_eq(devscan_find_members(super_fsid_ptr(sb), &paths, &count), 0);
	for (unsigned i = 0; i < count; i++)
		cr_assert_neq(strcmp(paths[i], path), 0, "%s is a regular file", path);
	devscan_free(paths, count);
}

Test(devscan, free_of_nothing)
{
	devscan_free(NULL, 0);
}
