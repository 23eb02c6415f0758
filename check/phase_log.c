// SPDX-License-Identifier: GPL-2.0-only
/* Log trees: a regular file extent a subvolume's log tree holds for an
 * inode with checksums must find its checksums in that log tree, which the
 * kernel copies into the csum tree when it replays the log, or already in
 * the csum tree (without them the replayed data reads back as checksum
 * errors). btrfs check reports the
 * same ("csum missing in log"). Nothing else of a log tree is checked here;
 * its blocks are verified by the tree-block walk. */
#include <errno.h>
#include <inttypes.h>

#include "check/check.h"
#include <btk/csum_tree.h>
#include <btk/item_check.h>
#include <btk/tree.h>
#include <btk/walk.h>

struct log_walk {
	struct check_ctx *ctx;
	const struct tree_root_ptr *log;
	uint64_t fs_root;       /* the subvolume the log tree belongs to */
	uint64_t csum_ino;      /* the last inode item seen, when it has checksums */
};

/* The end of the checksummed run that starts at start in root (the csum
 * tree when root is NULL), at most end: start when start has no checksum. */
static int covered_upto(struct log_walk *w, const struct tree_root_ptr *root, uint64_t start, uint64_t end,
			uint64_t *upto)
{
	struct csum_tree_cursor c;
	const uint8_t *csums;
	uint64_t lo, hi;
	int ret = root ? csum_tree_open_in(&c, w->ctx->fs, root, start, end)
		       : csum_tree_open(&c, w->ctx->fs, start, end);

	*upto = start;
	while (ret == 0 && *upto < end && (ret = csum_tree_next(&c, &lo, &hi, &csums)) == 1)
		ret = lo > *upto ? 1 : (*upto = hi, 0);
	csum_tree_close(&c);
	return ret < 0 ? ret : 0;
}

/* Whether checksums cover [start, start + len) once the log is replayed: those
 * the log holds, or those the csum tree already has (a full fsync logs old
 * extents too, whose checksums were committed long ago; btrfs check accepts
 * either): 1, 0 or -errno. */
static int log_covers(struct log_walk *w, uint64_t start, uint64_t len)
{
	uint64_t pos = start, next;
	int ret;

	while (pos < start + len) {
		if ((ret = covered_upto(w, w->log, pos, start + len, &next)) < 0)
			return ret;
		if (next == pos && (ret = covered_upto(w, NULL, pos, start + len, &next)) < 0)
			return ret;
		if (next == pos)
			return 0;
		pos = next;
	}
	return 1;
}

static int log_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct log_walk *w = arg;
	struct item_view v = item_view_of(d, size);
	uint64_t start, len;
	int ret;

	if (k->type == BTRFS_INODE_ITEM_KEY) {
		w->csum_ino = item_view_has_fixed(&v, k->type) && !(inode_flags(d) & BTRFS_INODE_NODATASUM)
				      ? k->objectid : 0;
		return 0;
	}
	if (k->type != BTRFS_EXTENT_DATA_KEY || k->objectid != w->csum_ino)
		return 0;
	/* num_bytes is the last field: an item shorter than the struct is past_end */
	start = file_extent_disk_bytenr_in(&v);
	len = file_extent_num_bytes_in(&v);
	if (v.past_end || file_extent_type_in(&v) != BTRFS_FILE_EXTENT_REG || !start)
		return 0;   /* inline, preallocated, holes, inodes without checksums */
	if (file_extent_compression_in(&v) != BTRFS_COMPRESS_NONE)
		len = file_extent_disk_num_bytes_in(&v);
	else
		start += file_extent_offset_in(&v);
	ret = log_covers(w, start, len);
	if (ret == 0)
		report_problem(w->ctx, PR_LOG_CSUM_MISSING, "log tree of root %" PRIu64 ": inode %" PRIu64 " extent at %"
			       PRIu64 " (disk %" PRIu64 "+%" PRIu64 ") has no checksums in the log", w->fs_root,
			       k->objectid, k->offset, start, len);
	return ret < 0 ? ret : 0;
}

/* One root item of the log root tree: its subvolume's log tree. */
static int log_root_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct check_ctx *ctx = arg;
	struct tree_root_ptr log;
	struct log_walk w = { .ctx = ctx, .log = &log, .fs_root = k->offset };
	int ret;

	if (k->objectid != BTRFS_TREE_LOG_OBJECTID || k->type != BTRFS_ROOT_ITEM_KEY ||
	    !root_ptr_from_item(BTRFS_TREE_LOG_OBJECTID, d, size, &log))
		return 0;
	ret = tree_each_item(ctx->fs, &log, log_item, &w);
	/* an unreadable log block: the tree-block walk reported it */
	return ret < 0 && ret != -ENOMEM ? 0 : ret;
}

int check_log_trees(struct check_ctx *ctx)
{
	struct tree_root_ptr root = { BTRFS_TREE_LOG_OBJECTID, super_log_root(fs_super(ctx->fs)), 0,
				      super_log_root_level(fs_super(ctx->fs)) };
	int ret;

	if (!root.bytenr)
		return 0;
	ret = tree_each_item(ctx->fs, &root, log_root_item, ctx);
	return ret < 0 && ret != -ENOMEM ? 0 : ret;
}
