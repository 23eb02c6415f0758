// SPDX-License-Identifier: GPL-2.0-only
/* libfs/uuid_tree.c: the rebuilt uuid tree maps the uuid of every
 * subvolume root item to its id, and the superblock says it is current. */
#include <criterion/criterion.h>
#include <string.h>

#include <btk/endian_access.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/uuid_tree.h>
#include "tests/unit/fixtures.h"

Test(uuid_tree, rebuilt_from_the_root_items)
{
	struct fs_open_options opts;
	struct fs_info *fs;
	struct uuid_tree_stats st;
	struct trans *t;
	uint8_t root_item[sizeof(struct btrfs_root_item)], ids[64];
	uint32_t size = sizeof(root_item), isize = sizeof(ids);
	struct btrfs_key rk = { BTRFS_FS_TREE_OBJECTID, BTRFS_ROOT_ITEM_KEY, 0 }, uk;
	uint64_t gen;

	fs_open_options_init(&opts);
	opts.writable = true;
	fs = fixture_open("small", &opts);
	gen = fs->generation;
	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(uuid_tree_rebuild(fs, t, &st), 0, "%s", btk_error_msg());
	cr_assert_geq(st.subvols, 1);
	cr_assert_eq(st.items, st.subvols + st.received);
	cr_assert_eq(trans_commit(t), 0, "commit: %s", btk_error_msg());
	cr_assert_eq(super_uuid_tree_generation(fs->super), gen + 1);
	cr_assert_neq(fs->uuid_root.bytenr, 0);

	cr_assert_eq(tree_lookup(fs, &fs->tree_root, &rk, root_item, &size), 0);
	uk = (struct btrfs_key){ get_le64(root_item_uuid_ptr(root_item)), BTRFS_UUID_KEY_SUBVOL,
				 get_le64(root_item_uuid_ptr(root_item) + 8) };
	cr_assert_eq(tree_lookup(fs, &fs->uuid_root, &uk, ids, &isize), 0, "no uuid item for the top subvolume");
	cr_assert_eq(isize, 8);
	cr_assert_eq(get_le64(ids), BTRFS_FS_TREE_OBJECTID);
	fs_close(fs);
}
