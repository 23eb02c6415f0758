// SPDX-License-Identifier: GPL-2.0-only
/* Superblocks: every copy on every device against the copy in use. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "check/check.h"
#include "common/messages.h"
#include <btk/block.h>
#include <btk/super.h>
#include <btk/names.h>
#include <btk/volumes.h>

/* Copies of one device must agree except for bytenr and the checksum; and
 * a log sync (fsync) writes only the primary copy, so a later copy may lack
 * the log root the primary names. */
static bool super_copies_equal(const uint8_t *a, const uint8_t *b)
{
	size_t from = offsetof(struct btrfs_super_block, flags);
	uint8_t masked[BTRFS_SUPER_INFO_SIZE];

	if (super_log_root(a) && !super_log_root(b)) {
		memcpy(masked, a, sizeof(masked));
		super_set_log_root(masked, 0);
		super_set_log_root_level(masked, 0);
		a = masked;
	}
	if (memcmp(a + BTRFS_CSUM_SIZE, b + BTRFS_CSUM_SIZE,
		   offsetof(struct btrfs_super_block, bytenr) - BTRFS_CSUM_SIZE) != 0)
		return false;
	return memcmp(a + from, b + from, BTRFS_SUPER_INFO_SIZE - from) == 0;
}

/* A primary copy older than the copy in use is what the kernel mounts (it
 * reads no other): after a crash between the copies' writes it still names
 * the root tree of its own generation, intact. Naming a root tree block of
 * another generation, it mounts nothing. */
static bool stale_primary_mountable(struct check_ctx *ctx, const uint8_t *sb)
{
	struct block_expect want = { .generation = super_generation(sb), .level = super_root_level(sb) };
	struct tree_block *b;
	bool salvage;
	int ret;

	salvage = fs_set_salvage(ctx->fs, false); /* the kernel takes the block as it is, or not at all */
	ret = block_read(ctx->fs, super_root(sb), &want, &b);
	fs_set_salvage(ctx->fs, salvage);
	if (ret)
		return false;
	block_put(ctx->fs, b);
	return true;
}

static void check_device_copies(struct check_ctx *ctx, const struct fs_device *dev)
{
	uint8_t sb[BTRFS_SUPER_MIRROR_MAX][BTRFS_SUPER_INFO_SIZE];
	struct super_copy info[BTRFS_SUPER_MIRROR_MAX];
	int ret[BTRFS_SUPER_MIRROR_MAX], ncopies = BTRFS_SUPER_MIRROR_MAX, first = -1;
	uint64_t expect_gen = ctx->fs->generation;

	/* zoned: the copies live in log zones, not at 64 MiB and 256 GiB (mkfs
	 * in emulated zoned mode writes the primary only) */
	if (ctx->fs->incompat & BTRFS_FEATURE_INCOMPAT_ZONED)
		ncopies = 1;
	for (int m = 0; m < ncopies; m++)
		ret[m] = super_read_copy(dev->io, m, sb[m], &info[m]);
	/* a seed device's copies are the seed filesystem's: held to the newest
	 * valid one among them, not to the sprout's generation */
	if (dev->seed) {
		expect_gen = 0;
		for (int m = 0; m < ncopies; m++)
			if (ret[m] == 0 && info[m].generation > expect_gen)
				expect_gen = info[m].generation;
	}
	for (int m = 0; m < ncopies; m++) {
		if (ret[m] == -ENXIO || !super_copy_kept(dev->total_bytes, m))
			continue; /* the device is too small for this copy */
		if (ret[m] && m > 0) {
			/* the kernel reads the primary only and rewrites every copy at
			 * its next commit (btrfs-image -r writes no other) */
			report_problem(ctx, PR_SUPER_COPY_MISSING, "%s: superblock copy %d (at %" PRIu64 "): %s",
				       dev->path, m, info[m].offset, info[m].why);
			continue;
		}
		if (ret[m]) {
			report_problem(ctx, PR_SUPER_COPY_INVALID, "%s: superblock copy %d (at %" PRIu64 "): %s",
				       dev->path, m, info[m].offset, info[m].why);
			continue;
		}
		if (info[m].generation < expect_gen && m == 0 && !stale_primary_mountable(ctx, sb[m])) {
			report_problem(ctx, PR_SUPER_COPY_INVALID, "%s: superblock copy 0 (the one the kernel reads) has "
				       "generation %" PRIu64 " but its root tree %" PRIu64 " is not a block of that "
				       "generation", dev->path, info[m].generation, super_root(sb[m]));
			continue;
		}
		if (info[m].generation < expect_gen) {
			report_problem(ctx, PR_SUPER_COPY_STALE,
				       "%s: superblock copy %d has generation %" PRIu64 ", expected %" PRIu64,
				       dev->path, m, info[m].generation, expect_gen);
			continue;
		}
		if (first < 0)
			first = m;
		else if (!super_copies_equal(sb[first], sb[m]))
			report_problem(ctx, PR_SUPER_COPY_DIFFERS,
				       "%s: superblock copy %d differs from the first valid copy", dev->path, m);
	}
}

/* A backup root must lie in a chunk of the right type, node-aligned: 0, or
 * 1 after reporting it (ctx NULL: only said by the return). */
static unsigned check_backup_root_ptr(struct check_ctx *ctx, const struct fs_info *fs, int slot, const char *tree,
				      uint64_t bytenr, uint64_t type)
{
	const struct chunk *c;

	if (!bytenr)
		return 0;
	c = fs_chunk_lookup(fs, bytenr);
	if (c && (c->type & type) && !(bytenr % fs->sectorsize) && bytenr + fs->nodesize <= c->logical + c->length)
		return 0;
	if (ctx)
		report_problem(ctx, PR_SUPER_BACKUP_ROOT_BAD, "backup root %d: the %s root %" PRIu64 " is not in a %s "
			       "chunk", slot, tree, bytenr, type == BTRFS_BLOCK_GROUP_SYSTEM ? "system" : "metadata");
	return 1;
}

/* Which backup slots of superblock sb are bad (bad[i]), each fault reported
 * when ctx is set. A used slot names generations no newer than the
 * superblock's and roots inside metadata (chunk root: system) chunks; a slot
 * of the current generation names the superblock's own roots. Older slots
 * may point at blocks reused since, so their blocks are not read. */
static void backup_slots_bad(struct check_ctx *ctx, const struct fs_info *fs, const uint8_t *sb,
			     bool bad[BTRFS_NUM_BACKUP_ROOTS])
{
	uint64_t gen = super_generation(sb);
	int current_slots = 0, current_other = 0;
	bool current_match = false;

	for (int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++) {
		const uint8_t *b = super_super_roots_ptr(sb) + (size_t)i * sizeof(struct btrfs_root_backup);
		unsigned n = 0;

		bad[i] = false;
		if (!backup_tree_root(b) && !backup_tree_root_gen(b))
			continue; /* never used */
		if (backup_tree_root_gen(b) > gen || backup_chunk_root_gen(b) > gen) {
			if (ctx)
				report_problem(ctx, PR_SUPER_BACKUP_ROOT_BAD, "backup root %d: generation %" PRIu64
					       " (chunk root %" PRIu64 ") is newer than the superblock's %" PRIu64, i,
					       backup_tree_root_gen(b), backup_chunk_root_gen(b), gen);
			bad[i] = true;
			continue;
		}
		n += check_backup_root_ptr(ctx, fs, i, "root tree", backup_tree_root(b), BTRFS_BLOCK_GROUP_METADATA);
		n += check_backup_root_ptr(ctx, fs, i, "chunk tree", backup_chunk_root(b), BTRFS_BLOCK_GROUP_SYSTEM);
		n += check_backup_root_ptr(ctx, fs, i, "extent tree", backup_extent_root(b), BTRFS_BLOCK_GROUP_METADATA);
		n += check_backup_root_ptr(ctx, fs, i, "fs tree", backup_fs_root(b), BTRFS_BLOCK_GROUP_METADATA);
		n += check_backup_root_ptr(ctx, fs, i, "dev tree", backup_dev_root(b), BTRFS_BLOCK_GROUP_METADATA);
		n += check_backup_root_ptr(ctx, fs, i, "csum tree", backup_csum_root(b), BTRFS_BLOCK_GROUP_METADATA);
		bad[i] = n > 0;
		if (backup_tree_root_gen(b) == gen) {
			current_slots++;
			if (backup_tree_root(b) == super_root(sb) && backup_tree_root_level(b) == super_root_level(sb) &&
			    backup_chunk_root(b) == super_chunk_root(sb))
				current_match = true;
			else
				current_other = i;
		}
	}
	/* two commits can share a generation (the kernel creating the free-space
	 * tree at mount does): one of them, the last, names the superblock's roots */
	if (!current_slots || current_match)
		return;
	if (ctx)
		report_problem(ctx, PR_SUPER_BACKUP_ROOT_BAD, "backup root %d: generation %" PRIu64 " is the "
			       "current one but names other roots than the superblock", current_other, gen);
	for (int i = 0; i < BTRFS_NUM_BACKUP_ROOTS; i++)
		bad[i] |= backup_tree_root_gen(super_super_roots_ptr(sb) + (size_t)i * sizeof(struct btrfs_root_backup))
			  == gen;
}

/* The backup roots (what mounting with usebackuproot falls back to). */
static void check_backup_roots(struct check_ctx *ctx)
{
	bool bad[BTRFS_NUM_BACKUP_ROOTS];

	backup_slots_bad(ctx, ctx->fs, fs_super(ctx->fs), bad);
}

/* Superblock fields the kernel refuses to mount with: flags it does not know
 * and a stripesize other than the sectorsize. A metadata change in progress
 * (btk-tune or btrfstune finishes it) is a state, not damage: btrfs check
 * passes it, and so it is only said. */
static void check_super_fields(struct check_ctx *ctx)
{
	const uint8_t *sb = fs_super(ctx->fs);
	const uint64_t known = BTRFS_HEADER_FLAG_WRITTEN | BTRFS_HEADER_FLAG_RELOC | BTRFS_SUPER_FLAG_ERROR |
			       BTRFS_SUPER_FLAG_SEEDING | BTRFS_SUPER_FLAG_METADUMP | BTRFS_SUPER_FLAG_METADUMP_V2;
	/* a conversion btrfstune or btk-tune stopped halfway: a state, not damage (btrfs check passes it) */
	const uint64_t changing = BTRFS_SUPER_FLAG_CHANGING_FSID | BTRFS_SUPER_FLAG_CHANGING_FSID_V2 |
				  BTRFS_SUPER_FLAG_CHANGING_BG_TREE | BTRFS_SUPER_FLAG_CHANGING_DATA_CSUM |
				  BTRFS_SUPER_FLAG_CHANGING_META_CSUM;

	if (super_flags(sb) & ~(known | changing))
		report_problem(ctx, PR_SUPER_FIELD_BAD, "superblock flags %#" PRIx64 " hold %#" PRIx64 ", which the "
			       "kernel does not mount with", super_flags(sb), super_flags(sb) & ~(known | changing));
	/* an fsid rewrite stopped halfway: tree blocks carry either fsid; neither the
	 * kernel nor btrfs check opens it until btrfstune -u or btk-tune --fsid ends it */
	if (super_flags(sb) & BTRFS_SUPER_FLAG_CHANGING_FSID)
		report_problem(ctx, PR_SUPER_FIELD_BAD, "superblock flags %#" PRIx64 ": an fsid change was interrupted "
			       "(finish it with btk-tune --fsid or btrfstune -u)", super_flags(sb));
	else if (super_flags(sb) & changing)
		msg_info("superblock flags %#" PRIx64 ": a conversion is in progress (%#" PRIx64 "); the kernel mounts "
			 "nothing until the tool that began it (btrfstune, btk-tune) finishes it", super_flags(sb),
			 super_flags(sb) & changing);
	if (super_stripesize(sb) != super_sectorsize(sb))
		report_problem(ctx, PR_SUPER_FIELD_BAD, "superblock stripesize %u, not the sectorsize %u",
			       super_stripesize(sb), super_sectorsize(sb));
	/* the kernel's rule: block groups in their own tree need the free-space tree and no-holes */
	if ((super_compat_ro_flags(sb) & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE) &&
	    (!(super_compat_ro_flags(sb) & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE) ||
	     !(super_incompat_flags(sb) & BTRFS_FEATURE_INCOMPAT_NO_HOLES)))
		report_problem(ctx, PR_BGT_NO_FST, "the block-group-tree feature without the free-space-tree "
			       "and no-holes features (the kernel does not mount it)");
}

int check_superblocks(struct check_ctx *ctx)
{
	struct fs_info *fs = ctx->fs;

	check_super_fields(ctx);
	check_backup_roots(ctx);
	if (fs->tree_root_backup >= 0)
		report_problem(ctx, PR_TREE_ROOT_UNREADABLE, "root tree: the superblock's root %" PRIu64 " (generation %"
			       PRIu64 ") cannot be read; checked backup root %d (generation %" PRIu64 ") instead",
			       super_root(fs_super(fs)), super_generation(fs_super(fs)), fs->tree_root_backup,
			       fs->tree_root.generation);

	for (unsigned i = 0; i < fs_num_devices(fs); i++) {
		if (!fs_device(fs, i)->io) {
			char uuid[37];
			uuid_to_str(fs_device(fs, i)->uuid, uuid);
			report_problem(ctx, PR_DEVICE_MISSING, "device devid %" PRIu64 " uuid %s is missing",
				       fs_device(fs, i)->devid, uuid);
			continue;
		}
		check_device_copies(ctx, fs_device(fs, i));
	}
	return 0;
}

/* Whether backup slot i of superblock sb is one check_backup_roots reports. */
bool backup_root_slot_bad(const struct fs_info *fs, const uint8_t *sb, int i)
{
	bool bad[BTRFS_NUM_BACKUP_ROOTS];

	backup_slots_bad(NULL, fs, sb, bad);
	return bad[i];
}
