// SPDX-License-Identifier: GPL-2.0-only
/* --clear-log: drop the log tree instead of replaying it. The superblock's
 * log_root and log_root_level become 0 in one transaction (every copy is
 * rewritten by the commit); nothing else is freed, since log tree blocks
 * have no extent items. What was fsynced since the last commit is lost.
 *
 * trans_start refuses a filesystem with a log tree, so this class starts its
 * transaction with the drop_log_tree option, and keeps the log's blocks (the
 * checker collected them) until the commit so that no block of the
 * transaction lands on them: until the new superblocks are written the old
 * log stays replayable. */
#include <errno.h>
#include <inttypes.h>

#include "check/repair.h"
#include <btk/ebitmap.h>
#include <btk/super.h>
#include <btk/trans.h>

/* Keep the allocator off the blocks of the log tree being dropped. */
static int pin_log_blocks(struct trans *t, struct ebitmap *log_blocks)
{
	uint64_t from = 0, start, len;
	int ret;

	if (!log_blocks)
		return 0;
	while ((ret = ebitmap_next_set(log_blocks, from, &start, &len)) == 1) {
		ret = trans_space_keep_until_commit(t, start, len);
		/* outside every block group (a damaged log): no allocation lands there */
		if (ret == -EUCLEAN)
			ret = 0;
		if (ret)
			return ret;
		from = start + len;
	}
	return ret < 0 ? ret : 0;
}

int repair_clear_log(struct repair_ctx *r)
{
	struct fs_info *fs = r->fs;
	uint64_t log_root = super_log_root(fs_super(fs));
	uint8_t level = super_log_root_level(fs_super(fs));
	const struct trans_options topts = { .drop_log_tree = true };
	struct trans *t;
	int ret;

	if (!log_root) {
		repair_say(r, "there is no log tree");
		return 0;
	}
	ret = trans_start_with(fs, &topts, &t);
	if (ret)
		return fs_error(fs, ret, "cannot start a transaction: %s", btk_error_msg());
	ret = pin_log_blocks(t, r->found->log_blocks);
	if (ret) {
		trans_abort(t);
		return fs_error(fs, ret, "keeping the log tree's blocks: %s", ret == -ENOMEM ? "out of memory" : btk_error_msg());
	}
	repair_say(r, "log tree at %" PRIu64 " (level %u) dropped: what was fsynced since generation %" PRIu64
		   " is lost", log_root, level, fs->generation);
	r->changes++;
	if (r->opts->dry_run) {
		trans_abort(t);
		return 0;
	}
	ret = trans_commit(t);
	if (ret)
		return ret;
	repair_say(r, "committed (generation %" PRIu64 ")", fs->generation);
	return 0;
}
