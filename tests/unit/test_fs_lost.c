// SPDX-License-Identifier: GPL-2.0-only
/* The lost key ranges of btk-check's filesystem-tree walk: lookups by key and
 * by inode, merging, out-of-order adds, and the bound on their number. */
#include <criterion/criterion.h>

#include "check/fs_lost.c"

static struct btrfs_key K(uint64_t o, uint8_t t, uint64_t off)
{
	return (struct btrfs_key){ o, t, off };
}

Test(fs_lost, empty_set_loses_nothing)
{
	struct fs_lost l = { 0 };

	cr_assert_not(fs_lost_key(&l, 5, 256, BTRFS_INODE_ITEM_KEY, 0));
	cr_assert_not(fs_lost_inode(&l, 5, 256));
	fs_lost_free(&l);
}

Test(fs_lost, range_bounds_and_inodes)
{
	struct fs_lost l = { 0 };
	struct btrfs_key lo = K(266, BTRFS_INODE_REF_KEY, 261), hi = K(295, BTRFS_INODE_ITEM_KEY, 0);

	cr_assert_eq(fs_lost_add(&l, 5, &lo, &hi), 0);
	cr_assert(fs_lost_key(&l, 5, 266, BTRFS_INODE_REF_KEY, 261));
	cr_assert(fs_lost_key(&l, 5, 280, BTRFS_DIR_INDEX_KEY, 7));
	cr_assert_not(fs_lost_key(&l, 5, 266, BTRFS_INODE_ITEM_KEY, 0), "before the first lost key");
	cr_assert_not(fs_lost_key(&l, 5, 295, BTRFS_INODE_ITEM_KEY, 0), "the end is exclusive");
	cr_assert_not(fs_lost_key(&l, 6, 280, BTRFS_DIR_INDEX_KEY, 7), "another subvolume");
	cr_assert(fs_lost_inode(&l, 5, 266), "its refs are lost");
	cr_assert(fs_lost_inode(&l, 5, 270));
	cr_assert_not(fs_lost_inode(&l, 5, 265));
	cr_assert_not(fs_lost_inode(&l, 5, 295), "a range ending at its inode item spares it");
	fs_lost_free(&l);
}

Test(fs_lost, to_the_end_and_touching_ranges_merge)
{
	struct fs_lost l = { 0 };
	struct btrfs_key a = K(300, 1, 0), b = K(400, 1, 0), c = K(500, 1, 0);

	cr_assert_eq(fs_lost_add(&l, 5, &a, &b), 0);
	cr_assert_eq(fs_lost_add(&l, 5, &b, &c), 0);
	cr_assert_eq(l.n, 1);
	cr_assert(fs_lost_inode(&l, 5, 450));
	cr_assert_eq(fs_lost_add(&l, 5, &c, NULL), 0);
	cr_assert_eq(l.n, 1);
	cr_assert(fs_lost_key(&l, 5, BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, 700));
	cr_assert_not(fs_lost_inode(&l, 5, 299));
	cr_assert_not(fs_lost_inode(&l, 256, 450));
	fs_lost_free(&l);
}

Test(fs_lost, out_of_order_adds_stay_sorted_and_disjoint)
{
	struct fs_lost l = { 0 };
	struct btrfs_key a = K(300, 1, 0), b = K(310, 1, 0), c = K(100, 1, 0), d = K(120, 1, 0), e = K(115, 1, 0),
			 f = K(305, 1, 0);

	cr_assert_eq(fs_lost_add(&l, 256, &a, &b), 0);
	cr_assert_eq(fs_lost_add(&l, 5, &a, &b), 0);     /* a lower root after a higher one */
	cr_assert_eq(fs_lost_add(&l, 256, &c, &d), 0);   /* lower keys of the same root */
	cr_assert_eq(fs_lost_add(&l, 256, &e, &f), 0);   /* bridges both ranges of 256 */
	cr_assert_eq(l.n, 2);
	cr_assert_eq(l.v[0].root, 5);
	cr_assert_eq(l.v[1].root, 256);
	cr_assert_eq(l.v[1].lo.objectid, 100);
	cr_assert_eq(l.v[1].hi.objectid, 310);
	cr_assert(fs_lost_inode(&l, 256, 200));
	cr_assert(fs_lost_inode(&l, 5, 305));
	cr_assert_not(fs_lost_inode(&l, 5, 200));
	fs_lost_free(&l);
}

Test(fs_lost, bounded_number_of_ranges)
{
	struct fs_lost l = { 0 };

	for (uint64_t i = 0; i < FS_LOST_MAX + 100; i++) {
		struct btrfs_key lo = K(1000 + 2 * i, 1, 0), hi = K(1001 + 2 * i, 1, 0);
		cr_assert_eq(fs_lost_add(&l, 5, &lo, &hi), 0);
	}
	cr_assert_leq(l.n, FS_LOST_MAX);
	/* every range added is still covered (more than that, past the bound) */
	cr_assert(fs_lost_inode(&l, 5, 1000));
	cr_assert(fs_lost_inode(&l, 5, 1000 + 2 * (FS_LOST_MAX + 99)));
	cr_assert_not(fs_lost_inode(&l, 5, 999));
	fs_lost_free(&l);
}
