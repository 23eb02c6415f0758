// SPDX-License-Identifier: LGPL-2.1-or-later
/* A transaction's start and end: every part (trans_internal.h) is set up
 * and released here. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/chunk_edit.h>
#include <btk/ebitmap.h>
#include <btk/features.h>
#include "libfs/trans_internal.h"

/* New blocks carry the chunk tree uuid the existing blocks carry. */
static int trans_read_chunk_tree_uuid(struct trans *t)
{
	struct tree_block *b;
	struct block_expect e = { .generation = t->fs->tree_root.generation, .level = t->fs->tree_root.level };
	int ret = block_read(t->fs, t->fs->tree_root.bytenr, &e, &b);

	if (ret)
		return ret;
	memcpy(t->chunk_tree_uuid, header_chunk_tree_uuid_ptr(b->data), BTRFS_UUID_SIZE);
	block_put(t->fs, b);
	return 0;
}

/* trans_check_state, with a log tree let through when it is being dropped. */
static int check_state(struct fs_info *fs, bool drop_log)
{
	char why[400];
	int ret;

	/* a dry run opens read-only: the feature gate of fs_open did not ask */
	if ((ret = features_check_write(fs->incompat, fs->compat_ro, why, sizeof(why))))
		return fs_error(fs, ret, "%s", why);
	if (fs->missing_devices)
		return fs_error(fs, -ENODEV, "cannot write with %u device(s) missing", fs->missing_devices);
	if (fs->damage_tolerated)
		return fs_error(fs, -EUCLEAN, "the filesystem was opened despite damage to its chunk or root "
				"trees (part of it is not mapped): it cannot be written");
	/* the log's blocks have no extent items: a transaction could reuse them */
	if (super_log_root(fs->super) && !drop_log)
		return fs_error(fs, -EBUSY, "the filesystem has a log tree to replay: mount it once first (or "
				"drop it with 'btk-check --clear-log', losing what was fsynced since the last commit)");
	if ((super_flags(fs->super) & (BTRFS_SUPER_FLAG_CHANGING_FSID | BTRFS_SUPER_FLAG_CHANGING_FSID_V2)) &&
	    !fs->fsid_change)
		return fs_error(fs, -EBUSY, "an fsid change was interrupted: finish it first (btk-tune --fsid "
				"or --metadata-uuid)");
	return 0;
}

int trans_check_state(struct fs_info *fs)
{
	return check_state(fs, false);
}

int trans_start_with(struct fs_info *fs, const struct trans_options *opts, struct trans **out)
{
	bool drop_log = opts && opts->drop_log_tree;
	struct trans *t;
	int ret;

	*out = NULL;
	if (!fs->writable)
		return fs_error(fs, -EROFS, "the filesystem was opened read-only");
	if ((ret = check_state(fs, drop_log)))
		return ret;
	t = calloc(1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	t->fs = fs;
	t->transid = fs->generation + 1;
	memcpy(t->super, fs->super, sizeof(t->super));
	/* the in-memory superblock keeps the log until the commit says otherwise */
	if (drop_log) {
		super_set_log_root(t->super, 0);
		super_set_log_root_level(t->super, 0);
	}
	ret = trans_read_chunk_tree_uuid(t);
	if (!ret)
		ret = trans_writeback_init(t);
	if (!ret)
		ret = trans_roots_init(t);
	if (!ret)
		ret = trans_refs_init(t);
	if (!ret)
		ret = chunk_alloc_init(t);
	if (!ret)
		ret = alloc_init(t);
	if (ret) {
		trans_abort(t);
		return ret;
	}
	*out = t;
	return 0;
}

int trans_start(struct fs_info *fs, struct trans **out)
{
	return trans_start_with(fs, NULL, out);
}

/* The transaction's figures go to the fs's statistics (and, with
 * the trans_stats test knob, to a note when it committed). */
static void trans_add_figures(struct trans *t)
{
	struct trans_mem_stats *s = &t->fs->trans_stats;
	struct trans_figures f = { 0 };

	trans_writeback_figures(t, &f);
	trans_refs_figures(t, &f);
	s->dirty_budget = f.dirty_budget;
	if (f.peak_dirty > s->peak_dirty_blocks)
		s->peak_dirty_blocks = f.peak_dirty;
	s->written_early += f.written_early;
	s->adopted_again += f.adopted_again;
	if (f.peak_refs > s->peak_queued_refs)
		s->peak_queued_refs = f.peak_refs;
	s->refs_limit = f.refs_limit;
	s->refs_early_runs += f.refs_early_runs;
	s->refs_applied_early += f.refs_applied_early;
	s->refs_spilled += f.refs_spilled_total;
	if (t->committed && t->fs->knobs.trans_stats)
		fs_note(t->fs, FS_NOTE_INFO,
			"transaction %llu: at most %zu dirty tree blocks in memory (budget %llu bytes), "
			"%llu written before the commit, %llu of them changed again; at most %zu extent "
			"reference changes queued in memory (%zu bytes; limit %zu), %llu applied before the "
			"commit in %llu runs, %llu through a spilling sorter",
			(unsigned long long)t->transid, f.peak_dirty, (unsigned long long)f.dirty_budget,
			(unsigned long long)f.written_early, (unsigned long long)f.adopted_again, f.peak_refs,
			f.peak_refs * sizeof(struct delayed_ref), f.refs_limit,
			(unsigned long long)f.refs_applied_early, (unsigned long long)f.refs_early_runs,
			(unsigned long long)f.refs_spilled_total);
}

static void trans_free(struct trans *t)
{
	trans_add_figures(t);
	trans_writeback_release(t, !t->committed);
	trans_roots_release(t);
	trans_refs_release(t);
	chunk_alloc_release(t);
	alloc_release(t);
	trans_squota_release(t);
	free(t);
}

void trans_abort(struct trans *t)
{
	if (!t)
		return;
	/* dirty blocks must not stay in the cache: they were never written */
	trans_writeback_forget_dirty(t);
	/* chunks it allocated are in the chunk map, not on disk: read the map again */
	if (chunk_alloc_any(t) && !t->committed)
		volumes_reload(t->fs);
	trans_free(t);
}

