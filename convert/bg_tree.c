// SPDX-License-Identifier: GPL-2.0-only
/* btk-convert bg-tree: move every block group item from the extent tree into
 * the block-group tree (or back with --revert) in one copy-on-write
 * transaction, and set (or clear) the compat_ro flag with it. The kernel then
 * reads a few hundred block group items from one small tree at mount instead
 * of searching the extent tree for each. */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/env_knobs.h"
#include "common/messages.h"
#include "convert/convert.h"
#include <btk/free_space_tree.h>
#include <btk/trans.h>
#include <btk/volumes.h>

struct bgt_args {
	bool revert, dry_run;
	size_t batch;
	const char *undo_file;
	char **paths;
	unsigned npaths;
};

enum { OPT_REVERT = 'r', OPT_DRY_RUN = 'n', OPT_UNDO = 256, OPT_BATCH };

static const struct argp_option bgt_options[] = {
	{ "revert", OPT_REVERT, NULL, 0, "Move the items back into the extent tree and remove the block-group tree", 0 },
	{ "dry-run", OPT_DRY_RUN, NULL, 0, "Say what would be moved and write nothing", 0 },
	{ "undo-file", OPT_UNDO, "FILE", 0, "Save what is overwritten to FILE, for btk-undo", 0 },
	{ "batch", OPT_BATCH, "N", OPTION_HIDDEN, "Move N block group items per transaction (testing)", 0 },
	{ 0 }
};

static error_t bgt_parse(int key, char *arg, struct argp_state *state)
{
	struct bgt_args *a = state->input;

	switch (key) {
	case OPT_REVERT: a->revert = true; break;
	case OPT_DRY_RUN: a->dry_run = true; break;
	case OPT_UNDO: a->undo_file = arg; break;
	case OPT_BATCH: {
		char *end;
		unsigned long long n = strtoull(arg, &end, 10);
		if (*end || n == 0)
			argp_error(state, "--batch needs a positive number, not '%s'", arg);
		a->batch = (size_t)n;
		break;
	}
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

/* Move one chunk's block group item from one tree to the other; an item
 * already in the target tree (a resumed conversion) is left alone. */
static int move_item(struct trans *t, struct fs_info *fs, const struct chunk *c, uint64_t from, uint64_t to,
		     size_t *moved)
{
	struct btrfs_key key = { c->logical, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length };
	uint8_t item[sizeof(struct btrfs_block_group_item)], *data;
	struct tree_root_ptr root;
	struct tree_path path;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(t, from, &key, &data, &size, &path);
	if (ret == 0 && size != sizeof(item))
		ret = fs_error(fs, -EUCLEAN, "block group item %" PRIu64 " is %u bytes", c->logical, size);
	if (ret == 0)
		memcpy(item, data, sizeof(item));
	tree_path_release(fs, &path);
	if (ret == -ENOENT) {
		size = sizeof(item);
		ret = trans_get_root(t, to, &root);
		if (!ret)
			ret = tree_lookup(fs, &root, &key, item, &size);
		if (ret == -ENOENT)
			return fs_error(fs, -EUCLEAN, "chunk %" PRIu64 " has no block group item", c->logical);
		return ret; /* moved by an earlier run */
	}
	if (ret || (ret = trans_delete_item(t, from, &key)) || (ret = trans_insert_item(t, to, &key, item, sizeof(item))))
		return ret;
	(*moved)++;
	return 0;
}

static int move_items(struct trans *t, struct fs_info *fs, uint64_t from, uint64_t to, size_t first, size_t n,
		      size_t *moved)
{
	for (size_t i = first; i < first + n && i < fs_chunk_count(fs); i++) {
		int ret = move_item(t, fs, fs_chunk(fs, i), from, to, moved);
		if (ret)
			return ret;
	}
	return 0;
}

/* The superblock flags the conversion ends with: compat_ro set or cleared,
 * CHANGING_BG_TREE cleared. */
static void finish_flags(uint8_t *sb, bool revert)
{
	uint64_t ro = super_compat_ro_flags(sb);

	super_set_compat_ro_flags(sb, revert ? ro & ~BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE
					     : ro | BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE);
	super_set_flags(sb, super_flags(sb) & ~BTRFS_SUPER_FLAG_CHANGING_BG_TREE);
}

struct bgt_run {
	struct fs_info *fs;
	bool revert, build_fst, half_done;
	size_t batch;     /* block groups per transaction */
	size_t moved, commits;
};

/* Build the free-space tree in t when asked to, and say so. */
static int maybe_build_fst(struct bgt_run *r, struct trans *t)
{
	struct fst_build_stats st;
	int ret;

	if (!r->build_fst)
		return 0;
	ret = fst_build(r->fs, t, &st);
	if (!ret)
		msg_info("built the free-space tree first (%zu block groups, %" PRIu64 " free extents)", st.groups,
			 st.extents);
	return ret;
}

static int commit_or_abort(struct bgt_run *r, struct trans *t, int ret)
{
	if (ret) {
		trans_abort(t);
		return ret;
	}
	ret = trans_commit(t);
	if (!ret)
		r->commits++;
	return ret;
}

/* Everything in one transaction: a crash leaves the old or the new filesystem. */
static int convert_at_once(struct bgt_run *r)
{
	uint64_t from = r->revert ? BTRFS_BLOCK_GROUP_TREE_OBJECTID : BTRFS_EXTENT_TREE_OBJECTID;
	uint64_t to = r->revert ? BTRFS_EXTENT_TREE_OBJECTID : BTRFS_BLOCK_GROUP_TREE_OBJECTID;
	struct trans *t;
	int ret = trans_start(r->fs, &t);

	if (ret)
		return ret;
	ret = maybe_build_fst(r, t);
	if (!ret && !r->revert)
		ret = trans_create_tree(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID);
	if (!ret)
		ret = move_items(t, r->fs, from, to, 0, fs_chunk_count(r->fs), &r->moved);
	if (!ret && r->revert)
		ret = trans_delete_tree(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID);
	finish_flags(trans_super(t), r->revert);
	return commit_or_abort(r, t, ret);
}

/* In batches under CHANGING_BG_TREE: first commit creates the tree (and the
 * free-space tree) and sets the flag, each batch of block groups is one
 * commit, the last removes the tree (revert) and the flag. Any crash leaves
 * a filesystem that running the same command (or the opposite one) again
 * finishes; every block group item is in exactly one of the two trees. */
static int convert_in_batches(struct bgt_run *r)
{
	uint64_t from = r->revert ? BTRFS_BLOCK_GROUP_TREE_OBJECTID : BTRFS_EXTENT_TREE_OBJECTID;
	uint64_t to = r->revert ? BTRFS_EXTENT_TREE_OBJECTID : BTRFS_BLOCK_GROUP_TREE_OBJECTID;
	struct tree_root_ptr bgt;
	struct trans *t;
	int ret = trans_start(r->fs, &t);

	if (ret)
		return ret;
	ret = maybe_build_fst(r, t);
	if (!ret && !r->revert && trans_get_root(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID, &bgt) == -ENOENT)
		ret = trans_create_tree(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID);
	if (!r->half_done) {
		uint8_t *sb = trans_super(t);
		super_set_flags(sb, super_flags(sb) | BTRFS_SUPER_FLAG_CHANGING_BG_TREE);
	}
	if ((ret = commit_or_abort(r, t, ret)))
		return ret;
	for (size_t first = 0; first < fs_chunk_count(r->fs); first += r->batch) {
		if ((ret = trans_start(r->fs, &t)))
			return ret;
		ret = move_items(t, r->fs, from, to, first, r->batch, &r->moved);
		if ((ret = commit_or_abort(r, t, ret)))
			return ret;
	}
	if ((ret = trans_start(r->fs, &t)))
		return ret;
	if (r->revert && trans_get_root(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID, &bgt) == 0)
		ret = trans_delete_tree(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID);
	finish_flags(trans_super(t), r->revert);
	return commit_or_abort(r, t, ret);
}

/* Block groups per transaction when none is given: what keeps the dirty
 * tree blocks of one transaction under BGT_MEMORY_BUDGET, counting one
 * copied-on-write extent-tree leaf (and a share of the parents) per item. */
#define BGT_MEMORY_BUDGET (256ull << 20)
static size_t default_batch(const struct fs_info *fs)
{
	size_t n = (size_t)(BGT_MEMORY_BUDGET / (2ull * fs->nodesize));

	return n ? n : 1;
}

int cmd_bg_tree(int argc, char **argv)
{
	static const struct argp argp = { bgt_options, bgt_parse, "DEVICE...",
		"Move every block group item into the block-group tree (compat_ro flag "
		"block-group-tree), or back into the extent tree with --revert. One transaction when "
		"the items fit the memory budget (a crash leaves the old or the new filesystem), else "
		"batches of transactions under the CHANGING_BG_TREE superblock flag: a conversion "
		"interrupted then (by btk or another tool such as btrfstune) is finished by running "
		"the same command again, or undone with the opposite one. The free-space tree is built "
		"first when it is missing; the kernel accepts the block-group tree only with no-holes "
		"(see btk-tune --enable).", NULL, NULL, NULL };
	struct bgt_args a = { 0 };
	struct fs_open_options fo;
	struct bgt_run r = { 0 };
	struct fs_info *fs;
	bool enabled;
	int ret;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	fs_open_options_init(&fo);
	fo.writable = !a.dry_run;
	fo.allow_missing = false;
	fo.undo_path = a.dry_run ? NULL : a.undo_file;
	fo.note = msg_fs_note;
	fo.cancelled = cli_cancelled;
	env_knobs_fill(&fo);
	ret = fs_open((const char *const *)a.paths, a.npaths, &fo, &fs);
	if (ret) {
		msg_error("%s", btk_error_msg());
		return 1;
	}
	enabled = fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE;
	r = (struct bgt_run){ .fs = fs, .revert = a.revert, .batch = a.batch ? a.batch : default_batch(fs),
			      .half_done = super_flags(fs_super(fs)) & BTRFS_SUPER_FLAG_CHANGING_BG_TREE };
	r.build_fst = !a.revert && !(fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID);
	if (r.half_done)
		msg_info("a block-group-tree conversion %s was left half done (CHANGING_BG_TREE is set): %s it",
			 enabled ? "back to the extent tree" : "to the block-group tree",
			 enabled == a.revert ? "finishing" : "undoing");
	if (!r.half_done && enabled == !a.revert) {
		msg_info("the block-group tree is %s already: nothing to do", enabled ? "enabled" : "disabled");
	} else if ((ret = trans_check_state(fs))) {
		msg_error("%s", btk_error_msg());
	} else if (!a.revert && !(fs->incompat & BTRFS_FEATURE_INCOMPAT_NO_HOLES)) {
		msg_error("the kernel mounts a block-group tree only with no-holes: run 'btk-tune --enable no-holes' first");
		ret = -EINVAL;
	} else if (r.half_done && r.build_fst) {
		msg_error("the free-space tree is missing and the block group items are split between two trees: "
			  "run 'btk-convert bg-tree --revert' first, then enable the free-space tree");
		ret = -EINVAL;
	} else if (a.dry_run) {
		if (r.build_fst)
			printf("would build the free-space tree first\n");
		printf("would move %zu block group item(s) %s, %s\n", fs_chunk_count(fs),
		       a.revert ? "back into the extent tree and remove the block-group tree"
				: "from the extent tree into a new block-group tree",
		       r.half_done || fs_chunk_count(fs) > r.batch ? "in batches under CHANGING_BG_TREE"
								  : "in one transaction");
	} else {
		if (r.half_done || fs_chunk_count(fs) > r.batch)
			ret = convert_in_batches(&r);
		else
			ret = convert_at_once(&r);
		if (ret && r.commits)
			msg_error("conversion interrupted after %zu commit(s): %s; run the same command again to "
				  "finish it (or the opposite one to undo it)", r.commits,
				  btk_error_text(ret));
		else if (ret)
			msg_error("conversion failed, the filesystem is unchanged: %s",
				  btk_error_text(ret));
		else
			msg_info("moved %zu block group item(s) in %zu transaction(s); block-group tree %s", r.moved,
				 r.commits, a.revert ? "removed" : "enabled");
		if (!ret && a.undo_file && (ret = fs_finish_undo(fs)))
			msg_error("finishing the undo file %s failed", a.undo_file);
	}
	fs_close(fs);
	return ret ? 1 : 0;
}
