// SPDX-License-Identifier: GPL-2.0-only
/* The target check of every writer: what it lets through (new, empty and
 * signature-free files), what it refuses (a filesystem or other signature
 * unless forced, a member by path or fsid, the same file under another
 * name, a short device), and that it never changes the target. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btk/format.h>
#include <btk/target.h>
#include "tests/unit/fixtures.h"

static const struct target_spec new_content = { .flags = TARGET_NEW_CONTENT | TARGET_MAY_CREATE };

/* A copy of the "small" fixture image in a temporary file. */
static void copy_fixture(char *path, size_t len)
{
	char src[4096], cmd[9000];

	cr_assert_eq(fixture_image("small", src, sizeof(src)), 0);
	fixture_temp_file(path, len, NULL, 0);
	snprintf(cmd, sizeof(cmd), "cp --sparse=always '%s' '%s'", src, path);
	cr_assert_eq(system(cmd), 0);
}

Test(target, new_empty_and_plain_files_pass)
{
	char path[4096], msg[600] = "";

	fixture_temp_file(path, sizeof(path), NULL, 0);
	cr_assert_eq(target_check(path, &new_content, msg, sizeof(msg)), 0, "%s", msg);
	fixture_temp_file(path, sizeof(path), NULL, 1 << 20);
	cr_assert_eq(target_check(path, &new_content, msg, sizeof(msg)), 0, "%s", msg);
	unlink(path);
	cr_assert_eq(target_check(path, &new_content, msg, sizeof(msg)), 0, "a path to create");
	cr_assert_eq(target_check(path, &(struct target_spec){ .flags = TARGET_NEW_CONTENT }, msg, sizeof(msg)),
		     -ENOENT);
}

Test(target, a_filesystem_is_refused_unless_forced)
{
	char path[4096], msg[600] = "";
	struct stat before, after;

	copy_fixture(path, sizeof(path));
	cr_assert_eq(stat(path, &before), 0);
	cr_assert_eq(target_check(path, &new_content, msg, sizeof(msg)), -EEXIST);
	cr_assert(strstr(msg, "btrfs"), "%s", msg);
	cr_assert_eq(target_check(path, &(struct target_spec){ .flags = TARGET_NEW_CONTENT | TARGET_FORCE }, msg,
				  sizeof(msg)), 0, "%s", msg);
	/* in place (the filesystem itself): signatures are what it is */
	cr_assert_eq(target_check(path, &(struct target_spec){ 0 }, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(stat(path, &after), 0);
	cr_assert_eq(before.st_size, after.st_size);
	cr_assert_eq(before.st_mtim.tv_nsec, after.st_mtim.tv_nsec, "the check never writes");
	unlink(path);
}

Test(target, a_member_by_path_link_or_fsid)
{
	char path[4096], hard[4200], msg[600] = "";
	const char *members[1];
	uint8_t fsid[BTRFS_FSID_SIZE];
	struct target_spec spec = { .flags = TARGET_NEW_CONTENT | TARGET_FORCE, .members = members, .nmembers = 1 };
	int fd;

	copy_fixture(path, sizeof(path));
	snprintf(hard, sizeof(hard), "%s.hard", path);
	cr_assert_eq(link(path, hard), 0);
	members[0] = path;
	cr_assert_eq(target_check(hard, &spec, msg, sizeof(msg)), -EINVAL, "a hard link is the same file");
	cr_assert(strstr(msg, "same storage"), "%s", msg);
	/* not given as a member, but it holds the filesystem's fsid */
	fd = open(path, O_RDONLY);
	cr_assert_geq(fd, 0);
	cr_assert_eq(pread(fd, fsid, sizeof(fsid), BTRFS_SUPER_INFO_OFFSET + 32), (ssize_t)sizeof(fsid));
	close(fd);
	spec.nmembers = 0;
	spec.fsid = fsid;
	cr_assert_eq(target_check(path, &spec, msg, sizeof(msg)), -EINVAL);
	cr_assert(strstr(msg, "fsid"), "%s", msg);
	/* the others: an input the command reads */
	spec.fsid = NULL;
	spec.others = members;
	spec.nothers = 1;
	cr_assert_eq(target_check(hard, &spec, msg, sizeof(msg)), -EINVAL);
	unlink(hard);
	unlink(path);
}

Test(target, short_device)
{
	char msg[600] = "";

	cr_assert_eq(target_check_size("x", 1 << 20, 1 << 20, msg, sizeof(msg)), 0);
	cr_assert_eq(target_check_size("x", (1 << 20) - 4096, 1 << 20, msg, sizeof(msg)), -ENOSPC);
	cr_assert(strstr(msg, "1044480") && strstr(msg, "1048576"), "%s", msg);
}

Test(target, pipes_and_character_devices_pass)
{
	char msg[600] = "";
	int p[2];

	cr_assert_eq(pipe(p), 0);
	cr_assert_eq(target_check_fd(p[1], "pipe", &new_content, msg, sizeof(msg)), 0, "%s", msg);
	close(p[0]);
	close(p[1]);
	if (access("/dev/null", F_OK) == 0)
		cr_assert_eq(target_check("/dev/null", &new_content, msg, sizeof(msg)), 0, "%s", msg);
}
