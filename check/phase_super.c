/* Superblocks: every copy on every device against the copy in use. */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "check/check.h"
#include "libfs/super.h"
#include "libfs/names.h"

/* Copies of one device must agree except for bytenr and the checksum. */
static bool super_copies_equal(const uint8_t *a, const uint8_t *b)
{
	size_t from = offsetof(struct btrfs_super_block, flags);

	if (memcmp(a + BTRFS_CSUM_SIZE, b + BTRFS_CSUM_SIZE,
		   offsetof(struct btrfs_super_block, bytenr) - BTRFS_CSUM_SIZE) != 0)
		return false;
	return memcmp(a + from, b + from, BTRFS_SUPER_INFO_SIZE - from) == 0;
}

static void check_device_copies(struct check_ctx *ctx, const struct fs_device *dev)
{
	uint8_t first[BTRFS_SUPER_INFO_SIZE], sb[BTRFS_SUPER_INFO_SIZE];
	bool have_first = false;

	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		struct super_copy info;
		int ret = super_read_copy(dev->io, m, sb, &info);

		if (ret == -ENXIO)
			continue; /* the device is too small for this copy */
		if (ret) {
			report_problem(ctx, PR_SUPER_COPY_INVALID, "%s: superblock copy %d (at %" PRIu64 "): %s",
				       dev->path, m, info.offset, info.why);
			continue;
		}
		if (info.generation < ctx->fs->generation) {
			report_problem(ctx, PR_SUPER_COPY_STALE,
				       "%s: superblock copy %d has generation %" PRIu64 ", expected %" PRIu64,
				       dev->path, m, info.generation, ctx->fs->generation);
			continue;
		}
		if (!have_first) {
			memcpy(first, sb, sizeof(sb));
			have_first = true;
		} else if (!super_copies_equal(first, sb)) {
			report_problem(ctx, PR_SUPER_COPY_DIFFERS,
				       "%s: superblock copy %d differs from the first valid copy", dev->path, m);
		}
	}
}

int check_superblocks(struct check_ctx *ctx)
{
	struct fs_info *fs = ctx->fs;

	for (unsigned i = 0; i < fs->num_devices; i++) {
		if (!fs->devices[i].io) {
			char uuid[37];
			uuid_to_str(fs->devices[i].uuid, uuid);
			report_problem(ctx, PR_DEVICE_MISSING, "device devid %" PRIu64 " uuid %s is missing",
				       fs->devices[i].devid, uuid);
			continue;
		}
		check_device_copies(ctx, &fs->devices[i]);
	}
	return 0;
}
