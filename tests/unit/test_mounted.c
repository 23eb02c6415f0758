// SPDX-License-Identifier: GPL-2.0-only
/* Mount detection: files that no mounted btrfs uses are reported unmounted,
 * and a path that cannot be looked at is an error, not a guess. */
#include <criterion/criterion.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "libfs/mounted.h"
#include "tests/unit/fixtures.h"

Test(mounted, unmounted_regular_file)
{
	char path[4096], where[256] = "untouched";

	fixture_temp_file(path, sizeof(path), NULL, 1 << 20);
	cr_assert_eq(device_is_mounted(path, where, sizeof(where)), 0);
	cr_assert_str_eq(where, "untouched", "where is only filled in for mounted devices");
	unlink(path);
}

Test(mounted, fixture_image_is_not_mounted)
{
	char path[4096], where[256] = "";

	cr_assert_eq(fixture_image("small", path, sizeof(path)), 0);
	cr_assert_eq(device_is_mounted(path, where, sizeof(where)), 0);
}

Test(mounted, symlink_to_an_unmounted_file)
{
	char path[4096], link[4200], where[256] = "";

	fixture_temp_file(path, sizeof(path), NULL, 4096);
	cr_assert_lt((size_t)snprintf(link, sizeof(link), "%s.link", path), sizeof(link));
	cr_assert_eq(symlink(path, link), 0);
	cr_assert_eq(device_is_mounted(link, where, sizeof(where)), 0);
	unlink(link);
	unlink(path);
}

Test(mounted, nonexistent_path_is_an_error)
{
	char where[256] = "";

	cr_assert_eq(device_is_mounted("/nonexistent/btk-unit/dev", where, sizeof(where)), -ENOENT);
	cr_assert_eq(device_is_mounted("", where, sizeof(where)), -ENOENT);
}

Test(mounted, dangling_symlink_is_an_error)
{
	char path[4096], link[4200], where[256] = "";

	fixture_temp_file(path, sizeof(path), NULL, 0);
	cr_assert_lt((size_t)snprintf(link, sizeof(link), "%s.dangling", path), sizeof(link));
	cr_assert_eq(symlink("/nonexistent/btk-unit/target", link), 0);
	cr_assert_eq(device_is_mounted(link, where, sizeof(where)), -ENOENT);
	unlink(link);
	unlink(path);
}

Test(mounted, character_device_is_not_a_mounted_btrfs)
{
	char where[256] = "";

	if (access("/dev/null", F_OK) != 0)
		cr_skip_test("no /dev/null");
	cr_assert_eq(device_is_mounted("/dev/null", where, sizeof(where)), 0);
}
