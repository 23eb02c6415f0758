/* btk-convert bg-tree: move every block group item from the extent tree into
 * the block-group tree (or back with --revert) in one copy-on-write
 * transaction, and set (or clear) the compat_ro flag with it. The kernel then
 * reads a few hundred block group items from one small tree at mount instead
 * of searching the extent tree for each. */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/messages.h"
#include "convert/convert.h"
#include "libfs/trans.h"
#include "libfs/volumes.h"

struct bgt_args {
	bool revert, dry_run;
	const char *undo_file;
	char **paths;
	unsigned npaths;
};

enum { OPT_REVERT = 'r', OPT_DRY_RUN = 'n', OPT_UNDO = 256 };

static const struct argp_option bgt_options[] = {
	{ "revert", OPT_REVERT, NULL, 0, "Move the items back into the extent tree and remove the block-group tree", 0 },
	{ "dry-run", OPT_DRY_RUN, NULL, 0, "Say what would be moved and write nothing", 0 },
	{ "undo-file", OPT_UNDO, "FILE", 0, "Save what is overwritten to FILE, for btk-undo", 0 },
	{ 0 }
};

static error_t bgt_parse(int key, char *arg, struct argp_state *state)
{
	struct bgt_args *a = state->input;

	switch (key) {
	case OPT_REVERT: a->revert = true; break;
	case OPT_DRY_RUN: a->dry_run = true; break;
	case OPT_UNDO: a->undo_file = arg; break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

/* Move the block group item of every chunk from one tree to the other. */
static int move_items(struct trans *t, struct fs_info *fs, uint64_t from, uint64_t to, size_t *moved)
{
	*moved = 0;
	for (size_t i = 0; i < fs->chunks->count; i++) {
		const struct chunk *c = fs->chunks->chunks[i];
		struct btrfs_key key = { c->logical, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length };
		uint8_t item[sizeof(struct btrfs_block_group_item)], *data;
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
		if (ret == -ENOENT)
			return fs_error(fs, -EUCLEAN, "chunk %" PRIu64 " has no block group item in tree %" PRIu64,
					c->logical, from);
		if (ret || (ret = trans_delete_item(t, from, &key)) ||
		    (ret = trans_insert_item(t, to, &key, item, sizeof(item))))
			return ret;
		(*moved)++;
	}
	return 0;
}

static int convert_bg_tree(struct fs_info *fs, bool revert, size_t *moved)
{
	struct trans *t;
	uint8_t *sb;
	int ret = trans_start(fs, &t);

	if (ret)
		return ret;
	sb = trans_super(t);
	if (!revert) {
		ret = trans_create_tree(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID);
		if (!ret)
			ret = move_items(t, fs, BTRFS_EXTENT_TREE_OBJECTID, BTRFS_BLOCK_GROUP_TREE_OBJECTID, moved);
		super_set_compat_ro_flags(sb, super_compat_ro_flags(sb) | BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE);
	} else {
		ret = move_items(t, fs, BTRFS_BLOCK_GROUP_TREE_OBJECTID, BTRFS_EXTENT_TREE_OBJECTID, moved);
		if (!ret)
			ret = trans_delete_tree(t, BTRFS_BLOCK_GROUP_TREE_OBJECTID);
		super_set_compat_ro_flags(sb, super_compat_ro_flags(sb) & ~BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE);
	}
	if (ret) {
		trans_abort(t);
		return ret;
	}
	return trans_commit(t);
}

int cmd_bg_tree(int argc, char **argv)
{
	static const struct argp argp = { bgt_options, bgt_parse, "DEVICE...",
		"Move every block group item into the block-group tree (compat_ro flag "
		"block-group-tree), or back into the extent tree with --revert, in one transaction: "
		"a crash leaves the old or the new filesystem. The kernel accepts the block-group "
		"tree only with the free-space tree and no-holes (see btk-tune --enable).", NULL, NULL, NULL };
	struct bgt_args a = { 0 };
	struct fs_open_options fo;
	struct fs_info *fs;
	char msg[600];
	size_t moved = 0;
	bool enabled;
	int ret;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	fs_open_options_init(&fo);
	fo.writable = !a.dry_run;
	fo.allow_missing = false;
	fo.undo_path = a.dry_run ? NULL : a.undo_file;
	fo.note = msg_fs_note;
	ret = fs_open((const char *const *)a.paths, a.npaths, &fo, &fs, msg, sizeof(msg));
	if (ret) {
		msg_error("%s", msg);
		return 1;
	}
	enabled = fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE;
	if (super_flags(fs->super) & BTRFS_SUPER_FLAG_CHANGING_BG_TREE) {
		msg_error("another tool left a block-group-tree conversion half done (CHANGING_BG_TREE is set); "
			  "resuming one is not supported yet: finish it with the tool that started it");
		ret = -EBUSY;
	} else if (enabled == !a.revert) {
		msg_info("the block-group tree is %s already: nothing to do", enabled ? "enabled" : "disabled");
	} else if (!a.revert && !(fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID)) {
		msg_error("the block-group tree needs the free-space tree: run 'btk-tune --enable free-space-tree' first");
		ret = -EINVAL;
	} else if (!a.revert && !(fs->incompat & BTRFS_FEATURE_INCOMPAT_NO_HOLES)) {
		msg_error("the kernel mounts a block-group tree only with no-holes: run 'btk-tune --enable no-holes' first");
		ret = -EINVAL;
	} else if (a.dry_run) {
		printf("would move %zu block group item(s) %s\n", fs->chunks->count,
		       a.revert ? "back into the extent tree and remove the block-group tree"
				: "from the extent tree into a new block-group tree");
	} else {
		ret = convert_bg_tree(fs, a.revert, &moved);
		if (ret)
			msg_error("conversion failed, the filesystem is unchanged: %s",
				  fs->errmsg[0] ? fs->errmsg : strerror(-ret));
		else
			msg_info("moved %zu block group item(s); block-group tree %s", moved,
				 a.revert ? "removed" : "enabled");
		if (!ret && a.undo_file && (ret = fs_finish_undo(fs)))
			msg_error("finishing the undo file %s failed", a.undo_file);
	}
	fs_close(fs);
	return ret ? 1 : 0;
}
