// SPDX-License-Identifier: GPL-2.0-only
/* common/undo_path: where default undo files go, and refusing early when that
 * place cannot be made. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/undo_path.h"

static char base[256];

static void make_base(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(base, sizeof(base), "%s/btk-undo-path-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(base));
}

static void remove_base(void)
{
	char cmd[300];

	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", base);
	cr_assert_eq(system(cmd), 0);
}

TestSuite(undo_path, .init = make_base, .fini = remove_base);

Test(undo_path, env_overrides_the_default)
{
	unsetenv("BTK_UNDO_DIR");
	cr_assert_str_eq(undo_dir(), "/var/lib/btk/undo");
	setenv("BTK_UNDO_DIR", "", 1);
	cr_assert_str_eq(undo_dir(), "/var/lib/btk/undo");
	setenv("BTK_UNDO_DIR", base, 1);
	cr_assert_str_eq(undo_dir(), base);
}

Test(undo_path, missing_parents_are_made_private)
{
	char dir[400], parent[400];
	struct stat st;

	snprintf(parent, sizeof(parent), "%s/a", base);
	snprintf(dir, sizeof(dir), "%s/a/b", base);
	cr_assert_eq(undo_dir_make(dir), 0);
	cr_assert_eq(stat(dir, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
	cr_assert_eq(stat(parent, &st), 0);
	cr_assert_eq(st.st_mode & 0777, 0700);
	cr_assert_eq(undo_dir_make(dir), 0, "an existing directory is fine");
}

Test(undo_path, a_file_in_the_way_is_refused)
{
	char file[400], dir[400];

	snprintf(file, sizeof(file), "%s/file", base);
	snprintf(dir, sizeof(dir), "%s/file/undo", base);
	close(open(file, O_CREAT | O_WRONLY, 0600));
	cr_assert_eq(undo_dir_make(file), -ENOTDIR);
	cr_assert_eq(undo_dir_make(dir), -ENOTDIR);
}

Test(undo_path, names_take_the_next_free_suffix)
{
	const uint8_t fsid[16] = { 0x12, 0x34 };
	char p[600], want[600];

	cr_assert_eq(undo_path_in(base, "btk-check", fsid, 42, p, sizeof(p)), 0);
	snprintf(want, sizeof(want), "%s/btk-check-12340000-0000-0000-0000-000000000000-42.undo", base);
	cr_assert_str_eq(p, want);
	close(open(p, O_CREAT | O_WRONLY, 0600));
	cr_assert_eq(undo_path_in(base, "btk-check", fsid, 42, p, sizeof(p)), 0);
	snprintf(want, sizeof(want), "%s/btk-check-12340000-0000-0000-0000-000000000000-42-1.undo", base);
	cr_assert_str_eq(p, want);
	cr_assert_eq(undo_path_in(base, "btk-check", fsid, 42, p, 20), -ENAMETOOLONG);
}
