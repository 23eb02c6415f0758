// SPDX-License-Identifier: GPL-2.0-only
/* libfs/features: the one table deciding what btk reads and writes. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include <btk/features.h>
#include <btk/format.h>

/* what mkfs.btrfs makes today: btk reads and writes all of it */
#define DEFAULT_INCOMPAT                                                                              \
	(BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF | BTRFS_FEATURE_INCOMPAT_BIG_METADATA |                   \
	 BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF | BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA |                \
	 BTRFS_FEATURE_INCOMPAT_NO_HOLES)

Test(features, ordinary_filesystems_pass_both_gates)
{
	char msg[400];
	uint64_t ro = BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE | BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID |
		      BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE | BTRFS_FEATURE_COMPAT_RO_VERITY;
	uint64_t in = DEFAULT_INCOMPAT | BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA | BTRFS_FEATURE_INCOMPAT_RAID1C34 |
		      BTRFS_FEATURE_INCOMPAT_METADATA_UUID | BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS;

	cr_assert_eq(features_check_read(in, msg, sizeof(msg)), 0);
	cr_assert_eq(features_check_write(in, ro, msg, sizeof(msg)), 0, "%s", msg);
}

Test(features, unknown_incompat_opens_nothing_and_is_named_in_hex)
{
	char msg[400];
	uint64_t in = DEFAULT_INCOMPAT | (1ULL << 15) | (1ULL << 40);

	cr_assert_eq(features_check_read(in, msg, sizeof(msg)), -EOPNOTSUPP);
	cr_assert(strstr(msg, "0x10000008000"), "%s", msg);
	cr_assert_eq(features_check_write(in, 0, msg, sizeof(msg)), -EOPNOTSUPP);
}

Test(features, unknown_compat_ro_reads_but_never_writes)
{
	char msg[400];

	cr_assert_eq(features_check_read(DEFAULT_INCOMPAT, msg, sizeof(msg)), 0);
	cr_assert_eq(features_unknown(FEATURE_COMPAT_RO, 1ULL << 9), 1ULL << 9);
	cr_assert_eq(features_check_write(DEFAULT_INCOMPAT, 1ULL << 9, msg, sizeof(msg)), -EOPNOTSUPP);
	cr_assert(strstr(msg, "compat_ro") && strstr(msg, "0x200"), "%s", msg);
}

Test(features, compat_bits_are_never_in_the_way)
{
	cr_assert_eq(features_unknown(FEATURE_COMPAT, ~0ULL), 0);
}

Test(features, read_only_formats_are_named_with_the_reason)
{
	static const struct {
		uint64_t bit;
		const char *name;
	} ro[] = {
		{ BTRFS_FEATURE_INCOMPAT_ZONED, "zoned" },
		{ BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2, "extent-tree-v2" },
		{ BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE, "raid-stripe-tree" },
		{ BTRFS_FEATURE_INCOMPAT_REMAP_TREE, "remap-tree" },
	};
	char msg[400];

	for (size_t i = 0; i < sizeof(ro) / sizeof(ro[0]); i++) {
		cr_assert_eq(features_check_read(DEFAULT_INCOMPAT | ro[i].bit, msg, sizeof(msg)), 0);
		cr_assert_eq(features_check_write(DEFAULT_INCOMPAT | ro[i].bit, 0, msg, sizeof(msg)), -EOPNOTSUPP);
		cr_assert(strstr(msg, ro[i].name), "%s", msg);
		cr_assert_eq(features_read_only(FEATURE_INCOMPAT, DEFAULT_INCOMPAT | ro[i].bit), ro[i].bit);
	}
	cr_assert_eq(BTRFS_FEATURE_INCOMPAT_REMAP_TREE, 1ULL << 17);
}

Test(features, names_follow_dump_super)
{
	char buf[40];
	uint64_t in = BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF | BTRFS_FEATURE_INCOMPAT_NO_HOLES | (1ULL << 20);

	cr_assert_str_eq(features_dump_name(FEATURE_INCOMPAT, in, 0, buf, sizeof(buf)), "MIXED_BACKREF");
	cr_assert_str_eq(features_dump_name(FEATURE_INCOMPAT, in, 1, buf, sizeof(buf)), "NO_HOLES");
	cr_assert_str_eq(features_dump_name(FEATURE_INCOMPAT, in, 2, buf, sizeof(buf)), "unknown flag: 0x100000");
	cr_assert_null(features_dump_name(FEATURE_INCOMPAT, in, 3, buf, sizeof(buf)));
	cr_assert_str_eq(features_dump_name(FEATURE_COMPAT_RO, BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE, 0, buf,
					    sizeof(buf)),
			 "BLOCK_GROUP_TREE");
}

Test(features, list_names_known_bits_and_sums_the_unknown_ones)
{
	char buf[200];

	features_list(FEATURE_INCOMPAT, BTRFS_FEATURE_INCOMPAT_ZONED | (1ULL << 30) | (1ULL << 31), buf, sizeof(buf));
	cr_assert_str_eq(buf, "zoned (0x1000), unknown 0xc0000000");
	features_list(FEATURE_INCOMPAT, 0, buf, sizeof(buf));
	cr_assert_str_eq(buf, "");
	features_list(FEATURE_INCOMPAT, ~0ULL, buf, 8); /* truncated, still terminated */
	cr_assert_eq(strlen(buf), 7);
}

Test(features, table_has_one_row_per_bit)
{
	for (int set = FEATURE_COMPAT; set <= FEATURE_INCOMPAT; set++)
		for (int b = 0; b < 64; b++) {
			const struct feature_desc *d = feature_lookup(set, 1ULL << b);
			if (!d)
				continue;
			cr_assert_eq(d->bit, 1ULL << b);
			cr_assert(d->support == FEATURE_RW || d->why, "%s: read-only without a reason", d->name);
		}
}
