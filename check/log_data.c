// SPDX-License-Identifier: GPL-2.0-only
/* The data a log tree refers to (check/log_data.h). */
#include <errno.h>

#include "check/log_data.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>

struct log_walk {
	struct fs_info *fs;
	struct ebitmap *ranges;
};

static int note_file_extent(void *arg, const struct btrfs_key *key, const uint8_t *d, uint32_t size)
{
	struct log_walk *w = arg;
	struct item_view v = item_view_of(d, size);
	uint64_t start, len;

	if (key->type != BTRFS_EXTENT_DATA_KEY || !ITEM_VIEW_STRUCT(&v, 0, struct btrfs_file_extent_item) ||
	    file_extent_type(d) == BTRFS_FILE_EXTENT_INLINE)
		return 0;
	start = file_extent_disk_bytenr(d);
	len = file_extent_disk_num_bytes(d);
	if (!start || !len || start + len < start)
		return 0;
	return ebitmap_set(w->ranges, start, len);
}

/* Each root item of the log root tree is one subvolume's log tree. */
static int walk_log_tree(void *arg, const struct btrfs_key *key, const uint8_t *d, uint32_t size)
{
	struct log_walk *w = arg;
	struct item_view v = item_view_of(d, size);
	struct tree_root_ptr r;
	int ret;

	if (key->type != BTRFS_ROOT_ITEM_KEY)
		return 0;
	r = (struct tree_root_ptr){ key->offset, root_item_bytenr_in(&v), root_item_generation_in(&v),
				    root_item_level_in(&v) };
	if (v.past_end || !r.bytenr || r.level >= BTRFS_MAX_LEVEL)
		return 0;
	ret = tree_each_item(w->fs, &r, note_file_extent, w);
	/* an unreadable log is the log check's business: keep what was read */
	return ret == -ENOMEM ? ret : 0;
}

int log_data_ranges(struct fs_info *fs, struct ebitmap **out)
{
	struct tree_root_ptr log = { BTRFS_TREE_LOG_OBJECTID, super_log_root(fs_super(fs)), 0,
				     super_log_root_level(fs_super(fs)) };
	struct log_walk w = { fs, NULL };
	int ret;

	*out = NULL;
	if (!log.bytenr || log.level >= BTRFS_MAX_LEVEL)
		return 0;
	w.ranges = ebitmap_create(fs->sectorsize);
	if (!w.ranges)
		return -ENOMEM;
	ret = tree_each_item(fs, &log, walk_log_tree, &w);
	if (ret == -ENOMEM) {
		ebitmap_destroy(w.ranges);
		return ret;
	}
	*out = w.ranges;
	return 0;
}
