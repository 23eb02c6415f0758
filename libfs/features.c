// SPDX-License-Identifier: LGPL-2.1-or-later
/* The feature gate (features.h): one table of the feature bits btk knows. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <btk/features.h>
#include <btk/format.h>

#define I FEATURE_INCOMPAT
#define R FEATURE_COMPAT_RO

static const struct feature_desc feature_table[] = {
	{ I, BTRFS_FEATURE_INCOMPAT_MIXED_BACKREF, "mixed-backref", "MIXED_BACKREF", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_DEFAULT_SUBVOL, "default-subvol", "DEFAULT_SUBVOL", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_MIXED_GROUPS, "mixed-bg", "MIXED_GROUPS", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_COMPRESS_LZO, "compress-lzo", "COMPRESS_LZO", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_COMPRESS_ZSTD, "compress-zstd", "COMPRESS_ZSTD", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_BIG_METADATA, "big-metadata", "BIG_METADATA", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_EXTENDED_IREF, "extref", "EXTENDED_IREF", FEATURE_RW, NULL, false },
	/* new chunks are never RAID5/6 and no tree block is placed in one (alloc.c) */
	{ I, BTRFS_FEATURE_INCOMPAT_RAID56, "raid56", "RAID56", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA, "skinny-metadata", "SKINNY_METADATA", FEATURE_RW, NULL,
	  false },
	{ I, BTRFS_FEATURE_INCOMPAT_NO_HOLES, "no-holes", "NO_HOLES", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_METADATA_UUID, "metadata-uuid", "METADATA_UUID", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_RAID1C34, "raid1c34", "RAID1C34", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_ZONED, "zoned", "ZONED", FEATURE_READ_ONLY,
	  "writes must follow each zone's write pointer and the superblock log zones, which btk does not keep",
	  false },
	{ I, BTRFS_FEATURE_INCOMPAT_EXTENT_TREE_V2, "extent-tree-v2", "EXTENT_TREE_V2", FEATURE_READ_ONLY,
	  "btk does not implement its global roots and reference rules", true },
	{ I, BTRFS_FEATURE_INCOMPAT_RAID_STRIPE_TREE, "raid-stripe-tree", "RAID_STRIPE_TREE", FEATURE_READ_ONLY,
	  "btk does not keep the stripe tree that places data", true },
	/* simple quotas: the transactions keep the numbers of tree blocks (trans_squota.c) */
	{ I, BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA, "squota", "SIMPLE_QUOTA", FEATURE_RW, NULL, false },
	{ I, BTRFS_FEATURE_INCOMPAT_REMAP_TREE, "remap-tree", "REMAP_TREE", FEATURE_READ_ONLY,
	  "btk does not follow or keep the remap tree of relocated block groups", true },
	{ R, BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE, "free-space-tree", "FREE_SPACE_TREE", FEATURE_RW, NULL,
	  false },
	{ R, BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID, "free-space-tree-valid", "FREE_SPACE_TREE_VALID",
	  FEATURE_RW, NULL, false },
	/* verity items are copied as they are: btk never writes file data */
	{ R, BTRFS_FEATURE_COMPAT_RO_VERITY, "verity", "VERITY", FEATURE_RW, NULL, false },
	{ R, BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE, "block-group-tree", "BLOCK_GROUP_TREE", FEATURE_RW, NULL,
	  false },
};

#undef I
#undef R

const struct feature_desc *feature_lookup(enum feature_set set, uint64_t bit)
{
	for (size_t i = 0; i < sizeof(feature_table) / sizeof(feature_table[0]); i++)
		if (feature_table[i].set == set && feature_table[i].bit == bit)
			return &feature_table[i];
	return NULL;
}

/* The bits of flags whose row satisfies want (NULL row: a bit btk does not know). */
static uint64_t features_select(enum feature_set set, uint64_t flags, bool (*want)(const struct feature_desc *))
{
	uint64_t out = 0;

	for (int b = 0; b < 64; b++) {
		uint64_t bit = 1ULL << b;
		if ((flags & bit) && want(feature_lookup(set, bit)))
			out |= bit;
	}
	return out;
}

static bool is_unknown(const struct feature_desc *d) { return !d; }
static bool is_read_only(const struct feature_desc *d) { return d && d->support == FEATURE_READ_ONLY; }
static bool is_partly_read(const struct feature_desc *d) { return d && d->partly_read; }

uint64_t features_unknown(enum feature_set set, uint64_t flags)
{
	/* compat bits are by definition safe to ignore, read and written alike */
	return set == FEATURE_COMPAT ? 0 : features_select(set, flags, is_unknown);
}

uint64_t features_read_only(enum feature_set set, uint64_t flags)
{
	return features_select(set, flags, is_read_only);
}

uint64_t features_partly_read(enum feature_set set, uint64_t flags)
{
	return features_select(set, flags, is_partly_read);
}

const char *features_list(enum feature_set set, uint64_t flags, char *buf, size_t len)
{
	uint64_t unknown = 0;
	size_t pos = 0;

	if (len)
		buf[0] = 0;
	for (int b = 0; b < 64; b++) {
		uint64_t bit = 1ULL << b;
		const struct feature_desc *d = feature_lookup(set, bit);
		int n;

		if (!(flags & bit))
			continue;
		if (!d) {
			unknown |= bit;
			continue;
		}
		n = snprintf(buf + pos, len - pos, "%s%s (0x%llx)", pos ? ", " : "", d->name,
			     (unsigned long long)bit);
		pos += n > 0 ? (size_t)n : 0;
		if (pos >= len) /* truncated: the rest would not fit either */
			return buf;
	}
	if (unknown && pos < len)
		snprintf(buf + pos, len - pos, "%sunknown 0x%llx", pos ? ", " : "",
			 (unsigned long long)unknown);
	return buf;
}

const char *features_dump_name(enum feature_set set, uint64_t flags, unsigned i, char *buf, size_t len)
{
	for (int b = 0; b < 64; b++) {
		uint64_t bit = 1ULL << b;
		const struct feature_desc *d;

		if (!(flags & bit) || i--)
			continue;
		d = feature_lookup(set, bit);
		if (d)
			return d->dump_name;
		snprintf(buf, len, "unknown flag: 0x%llx", (unsigned long long)bit);
		return buf;
	}
	return NULL;
}

int features_check_read(uint64_t incompat, char *msg, size_t len)
{
	uint64_t unknown = features_unknown(FEATURE_INCOMPAT, incompat);

	if (!unknown)
		return 0;
	snprintf(msg, len, "unsupported incompat feature flags 0x%llx (incompat 0x%llx): btk does not know this "
		 "format and opens nothing of it", (unsigned long long)unknown, (unsigned long long)incompat);
	return -EOPNOTSUPP;
}

int features_check_write(uint64_t incompat, uint64_t compat_ro, char *msg, size_t len)
{
	uint64_t ro_in = features_read_only(FEATURE_INCOMPAT, incompat);
	uint64_t unk_ro = features_unknown(FEATURE_COMPAT_RO, compat_ro);
	int ret = features_check_read(incompat, msg, len);
	char names[256];

	if (ret)
		return ret;
	if (unk_ro) {
		snprintf(msg, len, "unsupported compat_ro feature flags 0x%llx: btk reads this filesystem but "
			 "must not write it (like the kernel, which mounts it read-only)",
			 (unsigned long long)unk_ro);
		return -EOPNOTSUPP;
	}
	if (ro_in) {
		const struct feature_desc *d = feature_lookup(FEATURE_INCOMPAT, ro_in & -ro_in);
		snprintf(msg, len, "the filesystem has feature %s: btk reads it but does not write it (%s)",
			 features_list(FEATURE_INCOMPAT, ro_in, names, sizeof(names)), d->why);
		return -EOPNOTSUPP;
	}
	return 0;
}
