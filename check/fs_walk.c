// SPDX-License-Identifier: GPL-2.0-only
/* The item-by-item walk of one subvolume tree for the filesystem-tree
 * checks: which tree it is in, where one inode's items end, and the per-inode
 * problems held for a snapshot lineage (snap_plan.h). Used by phase_fs.c for
 * whole trees and by snap_delta.c for the items a snapshot changed. */
#include <inttypes.h>

#include "check/key_types.h"
#include "check/phase_fs.h"
#include "check/repair_notes.h"
#include "common/cli.h"
#include "common/messages.h"

static void inode_start(struct fs_walk *w, uint64_t ino)
{
	memset(&w->ino, 0, sizeof(w->ino));
	w->ino.ino = ino;
}

static int walk_item_body(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct fs_walk *w = arg;

	if (!key_type_in_subvolume(k->type)) {
		report_problem(w->ctx, PR_ITEM_UNKNOWN_TYPE, "root %" PRIu64 " item (%" PRIu64 " %u %" PRIu64
			       "): a key type no subvolume tree holds", w->root->objectid, k->objectid, k->type,
			       k->offset);
		return 0;
	}
	if (k->objectid == BTRFS_FREE_INO_OBJECTID && !w->ino_cache_seen) {
		w->ino_cache_seen = true;
		report_problem(w->ctx, PR_INODE_CACHE, "root %" PRIu64 ": free-inode cache items (mount option "
			       "inode_cache, removed from the kernel in 5.11)", w->root->objectid);
	}
	if (k->objectid == BTRFS_ORPHAN_OBJECTID && k->type == BTRFS_ORPHAN_ITEM_KEY) {
		struct link_rec r = { .root = w->root->objectid, .key = k->offset, .child = k->offset,
				      .kind = LINK_ORPHAN };
		fs_emit_link(w, w->orphans, &r);
		return w->err ? 1 : 0;
	}
	if (k->objectid < BTRFS_FIRST_FREE_OBJECTID || k->objectid > BTRFS_LAST_FREE_OBJECTID)
		return 0;   /* not an inode (free-inode cache and the like) */
	if (k->objectid != w->ino.ino) {
		fs_inode_finish(w);
		inode_start(w, k->objectid);
		if (k->type != BTRFS_INODE_ITEM_KEY && !fs_lost_inode(w->lost, w->root->objectid, k->objectid)) {
			report_problem(w->ctx, PR_INODE_ITEM_MISSING, "root %" PRIu64 " inode %" PRIu64
				       ": first item is of type %u", w->root->objectid, k->objectid, k->type);
			repair_note_inode_problem(w->ctx, PR_INODE_ITEM_MISSING, w->root->objectid, k->objectid);
		}
	}
	switch (k->type) {
	case BTRFS_INODE_ITEM_KEY: fs_item_inode(w, k, d, size); break;
	case BTRFS_INODE_REF_KEY: fs_item_inode_ref(w, k, d, size); break;
	case BTRFS_INODE_EXTREF_KEY: fs_item_inode_extref(w, k, d, size); break;
	case BTRFS_DIR_ITEM_KEY:
	case BTRFS_DIR_INDEX_KEY:
	case BTRFS_XATTR_ITEM_KEY: fs_item_dir_entries(w, k, d, size); break;
	case BTRFS_EXTENT_DATA_KEY: fs_item_file_extent(w, k, d, size); break;
	default: break;
	}
	if ((++w->items & 4095) == 0 && cli_cancelled())
		return 1;   /* progress: fs_walk_items counts the blocks */
	return w->err ? 1 : 0;
}

/* A per-inode problem of a tree whose lineage has other members: held, to
 * be reported once for all the members that share it (snap_plan.h); in a
 * delta's look at the tree before it, dropped (that tree reported it). */
static bool hold_problem(void *arg, enum problem_code code, const char *detail)
{
	struct fs_walk *w = arg;
	struct snap_lineage *l = &w->plan->lin[w->lineage];
	int ret;

	if (w->mark_root)
		return true;
	ret = snap_plan_hold(l, w->ino.ino, w->seq, code, detail);
	if (ret == -ENOSPC)
		l->full_only = true;   /* reported now, for this tree; the members after it are checked in full */
	else if (ret && !w->err)
		w->err = ret;
	return ret == 0;
}

static void hook_on(struct fs_walk *w)
{
	if (w->held || w->mark_root) {
		w->ctx->report_hook = hold_problem;
		w->ctx->report_hook_arg = w;
	}
}

static void hook_off(struct fs_walk *w)
{
	w->ctx->report_hook = NULL;
	w->ctx->report_hook_arg = NULL;
}

int fs_walk_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct fs_walk *w = arg;
	int ret;

	hook_on(w);
	ret = walk_item_body(arg, k, d, size);
	hook_off(w);
	return ret;
}

void fs_walk_finish(struct fs_walk *w)
{
	hook_on(w);
	fs_inode_finish(w);
	hook_off(w);
	inode_start(w, 0);
}

/* The per-tree state of the walk around one tree's items. */
void fs_walk_set_root(struct fs_walk *w, const struct tree_root_ptr *root, size_t i)
{
	w->ino_cache_seen = false;
	w->root = root;
	w->root_dirid = BTRFS_FIRST_FREE_OBJECTID;
	w->root_idx = i;
	w->root_inodes0 = w->inodes;
	w->lineage = w->plan->lineage[i];
	w->seq = w->plan->seq[i];
	w->held = w->plan->lin[w->lineage].n > 1;
	w->mark_root = 0;
	inode_start(w, 0);
}
