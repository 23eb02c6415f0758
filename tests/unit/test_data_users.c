// SPDX-License-Identifier: GPL-2.0-only
/* libfs/data_users.c and libfs/inode_path.c: the files that use a data
 * extent, and their paths, on the "small" fixture (files in big/, inline
 * small files in alpha/, beta/, beta/gamma/). */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <btk/data_users.h>
#include <btk/inode_path.h>
#include <btk/tree.h>
#include "tests/unit/fixtures.h"

static struct tree_root_ptr fs_tree(struct fs_info *fs)
{
	struct tree_root_ptr root;

	cr_assert_eq(fs_find_root(fs, BTRFS_FS_TREE_OBJECTID, &root), 0, "%s", btk_error_msg());
	return root;
}

Test(data_users, every_regular_extent_names_its_file)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct tree_root_ptr root = fs_tree(fs);
	struct btrfs_key min = { 0, BTRFS_EXTENT_DATA_KEY, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	unsigned seen = 0;
	int ret;

	tree_iter_init(&it, fs, &root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &d, &size)) == 1) {
		struct data_user u[8];
		size_t n;
		uint64_t more, start, len, disk;
		char line[600], path[256];

		if (key.type != BTRFS_EXTENT_DATA_KEY || file_extent_type(d) != BTRFS_FILE_EXTENT_REG ||
		    !(disk = file_extent_disk_bytenr(d)))
			continue;
		/* a block inside the extent finds it too */
		ret = data_users_find(fs, disk + file_extent_disk_num_bytes(d) - 1, u, 8, &n, &more, &start, &len);
		cr_assert_eq(ret, 0, "%s", btk_error_msg());
		cr_assert_eq(start, disk);
		cr_assert_eq(len, file_extent_disk_num_bytes(d));
		cr_assert_eq(n, 1);
		cr_assert_eq(more, 0);
		cr_assert_eq(u[0].root, BTRFS_FS_TREE_OBJECTID);
		cr_assert_eq(u[0].ino, key.objectid);
		cr_assert_eq(u[0].offset, key.offset);
		cr_assert_eq(inode_path(fs, &root, key.objectid, path, sizeof(path)), 0);
		cr_assert(strncmp(path, "/big/blob-", 10) == 0 && strlen(path) == 12, "%s", path);
		data_user_describe(fs, &u[0], line, sizeof(line));
		cr_assert(strstr(line, "subvolume 5 inode ") == line && strstr(line, path) &&
			  strstr(line, " at offset 0"), "%s", line);
		/* no room for more than none: counted only */
		cr_assert_eq(data_users_find(fs, disk, u, 0, &n, &more, &start, &len), 0);
		cr_assert(n == 0 && more == 1);
		seen++;
	}
	tree_iter_release(&it);
	cr_assert_eq(ret, 0);
	cr_assert_eq(seen, 20, "regular extents: %u", seen);
	fs_close(fs);
}

Test(data_users, no_data_extent_at_a_tree_block)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct data_user u[2];
	size_t n;
	uint64_t more, start, len;

	cr_assert_eq(data_users_find(fs, fs->tree_root.bytenr, u, 2, &n, &more, &start, &len), -ENOENT);
	cr_assert_eq(data_users_find(fs, 4096, u, 2, &n, &more, &start, &len), -ENOENT);
	fs_close(fs);
}

/* The inode of the entry named name, from the INODE_REF items. */
static uint64_t inode_named(struct fs_info *fs, const struct tree_root_ptr *root, const char *name)
{
	struct btrfs_key min = { 0, BTRFS_INODE_REF_KEY, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	uint64_t ino = 0;

	tree_iter_init(&it, fs, root, &min, &max);
	while (!ino && tree_iter_next(&it, &key, &d, &size) == 1)
		if (key.type == BTRFS_INODE_REF_KEY && inode_ref_name_len(d) == strlen(name) &&
		    !memcmp(d + sizeof(struct btrfs_inode_ref), name, strlen(name)))
			ino = key.objectid;
	tree_iter_release(&it);
	cr_assert_neq(ino, 0, "no inode named %s", name);
	return ino;
}

Test(inode_path, nested_top_missing_and_short)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct tree_root_ptr root = fs_tree(fs);
	uint64_t ino = inode_named(fs, &root, "file-00002");
	char path[256], tiny[12];

	cr_assert_eq(inode_path(fs, &root, ino, path, sizeof(path)), 0);
	cr_assert_str_eq(path, "/beta/gamma/file-00002");
	cr_assert_eq(inode_path(fs, &root, BTRFS_FIRST_FREE_OBJECTID, path, sizeof(path)), 0);
	cr_assert_str_eq(path, "/");
	/* an inode without a name */
	cr_assert_eq(inode_path(fs, &root, 1ULL << 40, path, sizeof(path)), 1);
	cr_assert_str_eq(path, "?");
	/* too short: the tail of the path after "..." */
	cr_assert_eq(inode_path(fs, &root, ino, tiny, sizeof(tiny)), 1);
	cr_assert_str_eq(tiny, "...");
	cr_assert_eq(inode_path(fs, &root, ino, path, 18), 1);
	cr_assert_str_eq(path, ".../file-00002");
	cr_assert_eq(inode_path(fs, &root, ino, path, 4), -EINVAL);
	fs_close(fs);
}
