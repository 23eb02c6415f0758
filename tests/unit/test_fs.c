// SPDX-License-Identifier: GPL-2.0-only
/* Opening filesystems: real images open and find their trees; a file that is
 * not btrfs, a truncated image, a member of another filesystem and a
 * damaged root tree are refused with a message a user can act on. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <btk/block.h>
#include <btk/csum.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include "tests/unit/fixtures.h"
#include "libfs/volumes_internal.h"

static void image(const char *recipe, char *path, size_t len)
{
	int ret = fixture_image(recipe, path, len);

	cr_assert_eq(ret, 0, "fixture %s: %s", recipe, strerror(-ret));
}

/* fs_open on one path must fail; returns the message. */
static void expect_open_fails(const char *path, int want_err, const char *want_msg)
{
	const char *paths[1] = { path };
	struct fs_info *fs = (struct fs_info *)&fs;
	int ret = fs_open(paths, 1, NULL, &fs);
	const struct btk_error *e = btk_last_error();
	const char *msg = e->msg;

	cr_assert_lt(ret, 0, "%s opened", path);
	/* a typed record of this failure, with no fs to hang it on */
	cr_assert_eq(e->err, ret, "the record is about this failure: %d, not %d", e->err, ret);
	cr_assert_neq(e->kind, BTK_ERR_NONE);
	if (want_err)
		cr_assert_eq(ret, want_err, "%s: got %d (%s)", path, ret, msg);
	cr_assert_null(fs);
	cr_assert_neq(msg[0], 0, "a message is given");
	if (want_msg)
		cr_assert(strstr(msg, want_msg), "message \"%s\" lacks \"%s\"", msg, want_msg);
}

Test(fs_open, real_image_by_path)
{
	char path[4096];
	const char *paths[1] = { path };
	struct fs_info *fs;

	image("small", path, sizeof(path));
	cr_assert_eq(fs_open(paths, 1, NULL, &fs), 0, "%s", btk_error_msg());
	cr_assert_eq(fs->num_devices, 1);
	cr_assert_eq(fs->missing_devices, 0);
	cr_assert_str_eq(fs->devices[0].path, path);
	cr_assert_eq(fs->devices[0].devid, 1);
	cr_assert_eq(fs->super_mirror, 0);
	cr_assert_eq(fs->nodesize, 16384);
	cr_assert_eq(fs->sectorsize, 4096);
	cr_assert_eq(fs->csum_type, BTRFS_CSUM_TYPE_CRC32);
	cr_assert_eq(fs->csum_size, 4);
	cr_assert_not(fs->writable);
	cr_assert_eq(memcmp(fs->fsid, fs->metadata_uuid, BTRFS_FSID_SIZE), 0);
	cr_assert_geq(fs->chunks->count, 3);
	fs_close(fs);
}

Test(fs_open, well_known_roots)
{
	struct fs_info *fs = fixture_open("small", NULL);
	const struct { uint64_t id; const struct tree_root_ptr *ptr; } present[] = {
		{ BTRFS_EXTENT_TREE_OBJECTID, &fs->extent_root },
		{ BTRFS_DEV_TREE_OBJECTID, &fs->dev_root },
		{ BTRFS_FS_TREE_OBJECTID, &fs->fs_root },
		{ BTRFS_CSUM_TREE_OBJECTID, &fs->csum_root },
		{ BTRFS_UUID_TREE_OBJECTID, &fs->uuid_root },
		{ BTRFS_FREE_SPACE_TREE_OBJECTID, &fs->free_space_root },
	};
	struct tree_root_ptr r;

	for (size_t i = 0; i < sizeof(present) / sizeof(present[0]); i++) {
		struct tree_block *b;
		cr_assert_neq(present[i].ptr->bytenr, 0, "tree %llu not found", (unsigned long long)present[i].id);
		cr_assert_eq(present[i].ptr->objectid, present[i].id);
		cr_assert_eq(fs_find_root(fs, present[i].id, &r), 0);
		cr_assert_eq(r.bytenr, present[i].ptr->bytenr);
		/* the root block is really that tree's root */
		cr_assert_eq(block_read(fs, r.bytenr, &(struct block_expect){ .generation = r.generation,
										.level = r.level,
										.owner = r.objectid },
					&b),
			     0, "%s", btk_error_msg());
		block_put(fs, b);
	}
	cr_assert_eq(fs->quota_root.bytenr, 0, "no quotas in the fixture");
	cr_assert_eq(fs->block_group_root.bytenr != 0,
		     (fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE) != 0);
	cr_assert_eq(fs->raid_stripe_root.bytenr, 0);
	cr_assert_eq(fs->tree_root.bytenr, super_root(fs->super));
	cr_assert_eq(fs->chunk_root.bytenr, super_chunk_root(fs->super));

	cr_assert_eq(fs_find_root(fs, BTRFS_ROOT_TREE_OBJECTID, &r), 0);
	cr_assert_eq(r.bytenr, fs->tree_root.bytenr);
	cr_assert_eq(fs_find_root(fs, BTRFS_CHUNK_TREE_OBJECTID, &r), 0);
	cr_assert_eq(r.bytenr, fs->chunk_root.bytenr);
	cr_assert_eq(fs_find_root(fs, BTRFS_DATA_RELOC_TREE_OBJECTID, &r), 0);
	cr_assert_neq(r.bytenr, 0);
	cr_assert_eq(fs_find_root(fs, 256, &r), -ENOENT, "no subvolumes");
	cr_assert_eq(fs_find_root(fs, BTRFS_QUOTA_TREE_OBJECTID, &r), -ENOENT);
	fs_close(fs);
}

Test(fs_open, other_recipes)
{
	struct fs_info *fs = fixture_open("xxhash", NULL);

	cr_assert_eq(fs->csum_type, BTRFS_CSUM_TYPE_XXHASH);
	cr_assert_eq(fs->csum_size, 8);
	cr_assert_str_eq(csum_name(fs->csum_type), "xxhash64");
	fs_close(fs);
	fs = fixture_open("deep", NULL);
	cr_assert_eq(fs->nodesize, 4096);
	cr_assert_geq(fs->fs_root.level, 2);
	fs_close(fs);
}

Test(fs_open, not_btrfs)
{
	char path[4096];
	uint8_t junk[4096];
	int fd;

	fixture_temp_file(path, sizeof(path), NULL, 1 << 20);
	expect_open_fails(path, -EINVAL, "not a btrfs filesystem");
	/* random bytes, and big enough for copy 1 */
	fd = open(path, O_WRONLY);
	cr_assert(fd >= 0);
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)(i * 151 + 7);
	for (off_t off = 0; off < (1 << 20); off += (off_t)sizeof(junk))
		cr_assert_eq(pwrite(fd, junk, sizeof(junk), off), (ssize_t)sizeof(junk));
	cr_assert_eq(ftruncate(fd, 80 << 20), 0);
	close(fd);
	expect_open_fails(path, -EINVAL, "not a btrfs filesystem");
	unlink(path);
	/* empty */
	fixture_temp_file(path, sizeof(path), NULL, 0);
	expect_open_fails(path, 0, NULL);
	unlink(path);
}

Test(fs_open, missing_and_unopenable_paths)
{
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	struct fs_info *fs;

	expect_open_fails("/nonexistent/btk-unit.img", -ENOENT, "/nonexistent/btk-unit.img");
	expect_open_fails(tmp, 0, tmp);
	cr_assert_eq(fs_open(NULL, 0, NULL, &fs), -EINVAL);
	cr_assert_null(fs);
	cr_assert(strstr(btk_error_msg(), "no device"), "%s", btk_error_msg());
}

/* "cannot read the <what> tree: tree block <bytenr>: no good copy ..." */
static void chunk_tree_message(char *out, size_t len)
{
	struct fs_info *fs = fixture_open("small", NULL);

	snprintf(out, len, "cannot read the chunk tree: tree block %llu: no good copy",
		 (unsigned long long)fs->chunk_root.bytenr);
	fs_close(fs);
}

Test(fs_open, truncated_image_file)
{
	char src[4096], path[4096], want[128];

	image("small", src, sizeof(src));
	chunk_tree_message(want, sizeof(want));
	fixture_temp_file(path, sizeof(path), src, 20ULL << 20);
	/* the superblock is fine, but the chunk tree lies beyond 20 MiB */
	expect_open_fails(path, -EIO, want);
	unlink(path);
	/* cut through the primary superblock */
	fixture_temp_file(path, sizeof(path), src, BTRFS_SUPER_INFO_OFFSET + 1000);
	expect_open_fails(path, -EINVAL, "beyond the end of the device");
	unlink(path);
}

Test(fs_open, truncated_memory_image_reports_why)
{
	char path[4096], want[128];
	struct note_log log;
	struct fs_open_options opts;
	struct io_dev *io;
	struct fs_info *fs = (struct fs_info *)&fs;
	int ret;

	chunk_tree_message(want, sizeof(want));
	memset(&log, 0, sizeof(log));
	fs_open_options_init(&opts);
	opts.note = fixture_note;
	opts.note_arg = &log;
	image("small", path, sizeof(path));
	cr_assert_eq(fixture_load_memory_size(path, 20ULL << 20, &io), 0);
	ret = fs_open_devices(&io, 1, &opts, &fs);
	cr_assert_lt(ret, 0);
	cr_assert_null(fs);
	cr_assert(strstr(btk_error_msg(), want), "message \"%s\" lacks \"%s\"", btk_error_msg(), want);
	cr_assert(strstr(log.all, "truncated?"), "the short device is noted: %s", log.all);
}

Test(fs_open, member_of_another_filesystem)
{
	char a[4096], b[4096];
	const char *paths[2] = { a, b };
	struct io_dev *ios[2];
	struct fs_info *fs = (struct fs_info *)&fs;

	image("small", a, sizeof(a));
	image("xxhash", b, sizeof(b));
	cr_assert_eq(fixture_load_memory(a, &ios[0]), 0);
	cr_assert_eq(fixture_load_memory(b, &ios[1]), 0);
	cr_assert_eq(fs_open_devices(ios, 2, NULL, &fs), -EINVAL);
	cr_assert_null(fs);
	cr_assert(strstr(btk_error_msg(), "different fsid"), "%s", btk_error_msg());

	cr_assert_eq(fs_open(paths, 2, NULL, &fs), -EINVAL);
	cr_assert(strstr(btk_error_msg(), "different fsid") && strstr(btk_error_msg(), b), "%s", btk_error_msg());
}

Test(fs_open, same_device_twice)
{
	char a[4096];
	struct io_dev *ios[2];
	struct fs_info *fs;

	image("small", a, sizeof(a));
	cr_assert_eq(fixture_load_memory(a, &ios[0]), 0);
	cr_assert_eq(fixture_load_memory(a, &ios[1]), 0);
	cr_assert_eq(fs_open_devices(ios, 2, NULL, &fs), -EINVAL);
	cr_assert(strstr(btk_error_msg(), "given twice"), "%s", btk_error_msg());
}

Test(fs_open, damaged_root_tree_is_refused)
{
	char path[4096], want[128];
	struct phys_copy copies[MAX_COPIES];
	struct fs_info *fs = fixture_open("small", NULL);
	uint64_t root = fs->tree_root.bytenr, phys[MAX_COPIES], nodesize = fs->nodesize;
	int n = volumes_map(fs, root, nodesize, copies, NULL);
	struct io_dev *io;
	uint8_t *junk = calloc(1, nodesize);

	cr_assert_eq(n, 2);
	for (int i = 0; i < n; i++)
		phys[i] = copies[i].physical;
	fs_close(fs);

	image("small", path, sizeof(path));
	cr_assert_eq(fixture_load_memory(path, &io), 0);
	for (int i = 0; i < n; i++)
		cr_assert_eq(io_write(io, junk, nodesize, phys[i]), 0);
	free(junk);
	cr_assert_eq(fs_open_devices(&io, 1, NULL, &fs), -EUCLEAN);
	cr_assert_null(fs);
	snprintf(want, sizeof(want), "cannot read the root tree: tree block %llu: no good copy",
		 (unsigned long long)root);
	cr_assert(strstr(btk_error_msg(), want), "message \"%s\" lacks \"%s\"", btk_error_msg(), want);

	/* chunk_only does not need the root tree */
	{
		struct fs_open_options opts;
		fs_open_options_init(&opts);
		opts.chunk_only = true;
		cr_assert_eq(fixture_load_memory(path, &io), 0);
		for (int i = 0; i < n; i++) {
			uint8_t zero[4096] = { 0 };
			cr_assert_eq(io_write(io, zero, sizeof(zero), phys[i]), 0);
		}
		cr_assert_eq(fs_open_devices(&io, 1, &opts, &fs), 0, "%s", btk_error_msg());
		cr_assert_eq(fs->extent_root.bytenr, 0);
		cr_assert_geq(fs->chunks->count, 3);
		fs_close(fs);
	}
}

Test(fs_open, explicit_superblock_mirror)
{
	struct note_log log;
	struct fs_open_options opts;
	struct fs_info *fs;

	memset(&log, 0, sizeof(log));
	fs_open_options_init(&opts);
	opts.super_mirror = 1;
	opts.note = fixture_note;
	opts.note_arg = &log;
	fs = fixture_open("small", &opts);
	cr_assert_eq(fs->super_mirror, 1);
	cr_assert_eq(super_bytenr(fs->super), 64ULL << 20);
	cr_assert(strstr(log.all, "using superblock copy 1"), "%s", log.all);
	cr_assert_neq(fs->fs_root.bytenr, 0);
	fs_close(fs);
}

Test(fs_messages, error_and_note)
{
	struct fs_info *fs = calloc(1, sizeof(*fs));
	struct note_log log;

	cr_assert_not_null(fs);
	memset(&log, 0, sizeof(log));
	cr_assert_eq(fs_error(fs, -EIO, "block %d is %s", 42, "bad"), -EIO);
	cr_assert_str_eq(btk_error_msg(), "block 42 is bad");
	fs_note(fs, FS_NOTE_INFO, "dropped: no callback");
	fs->note = fixture_note;
	fs->note_arg = &log;
	fs_note(fs, FS_NOTE_ERROR, "note %u", 7u);
	cr_assert_eq(log.total, 1);
	cr_assert_eq(log.count[FS_NOTE_ERROR], 1);
	cr_assert_str_eq(log.last, "note 7");
	fs_close(fs);
	fs_close(NULL);
}

/* An fs built from a superblock and its chunk items (what btk-image restore
 * has) maps and verifies blocks the way fs_open's does; a bad geometry and a
 * device attached twice are refused. */
Test(fs, built_from_super_reads_like_fs_open)
{
	char path[4096];
	const char *paths[1] = { path };
	struct fs_info *fs, *built;
	struct io_dev *io;
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	uint8_t *a, *b;

	image("small", path, sizeof(path));
	cr_assert_eq(fs_open(paths, 1, NULL, &fs), 0, "%s", btk_error_msg());
	memcpy(sb, fs->super, sizeof(sb));
	cr_assert_eq(fs_create_from_super(sb, &built), 0, "%s", btk_error_msg());
	cr_assert_eq(built->nodesize, fs->nodesize);
	cr_assert_eq(built->csum_type, fs->csum_type);
	cr_assert_eq(memcmp(built->metadata_uuid, fs->metadata_uuid, BTRFS_FSID_SIZE), 0);
	cr_assert_eq(built->chunks->count, 0);
	cr_assert_eq(volumes_read_sys_chunk_array(built), 0, "%s", btk_error_msg());
	cr_assert_gt(built->chunks->count, 0);
	cr_assert_eq(fixture_load_memory(path, &io), 0);
	cr_assert_eq(fs_attach_device(built, dev_item_devid(super_dev_item_ptr(sb)),
				      dev_item_uuid_ptr(super_dev_item_ptr(sb)), io, io_size(io)), 0);
	a = malloc(fs->nodesize);
	b = malloc(fs->nodesize);
	cr_assert_eq(volumes_read(fs, fs->chunk_root.bytenr, a, fs->nodesize, 0), 0, "%s", btk_error_msg());
	cr_assert_eq(volumes_read(built, fs->chunk_root.bytenr, b, fs->nodesize, 0), 0, "%s", btk_error_msg());
	cr_assert_eq(memcmp(a, b, fs->nodesize), 0, "the chunk root reads the same through both");
	cr_assert_eq(block_verify(built, fs->chunk_root.bytenr, b, &BLOCK_EXPECT_ANY), BLOCK_OK);
	cr_assert_eq(fixture_load_memory(path, &io), 0);
	cr_assert_eq(fs_attach_device(built, dev_item_devid(super_dev_item_ptr(sb)), NULL, io, io_size(io)), -EEXIST);
	free(a);
	free(b);
	fs_close(built);

	super_set_nodesize(sb, 3000);
	built = (struct fs_info *)&built;
	cr_assert_eq(fs_create_from_super(sb, &built), -EUCLEAN);
	cr_assert_null(built);
	cr_assert(strstr(btk_error_msg(), "nodesize 3000"), "%s", btk_error_msg());
	fs_close(fs);
}
