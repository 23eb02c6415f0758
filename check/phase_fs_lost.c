// SPDX-License-Identifier: GPL-2.0-only
/* The walk of a subvolume tree item by item that goes on past unreadable
 * blocks (libfs/walk.c reports each and continues with the next sibling),
 * recording the key ranges those blocks would have covered (fs_lost.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "check/phase_fs.h"
#include <btk/block.h>
#include <btk/names.h>
#include <btk/walk.h>

/* The next child of the node above level: its slot, and where its keys end. */
static unsigned take_child(struct fs_item_walk *lw, unsigned level, struct btrfs_key *hi, bool *hi_end)
{
	const struct tree_block *p = level + 1 < BTRFS_MAX_LEVEL ? lw->node[level + 1] : NULL;
	unsigned slot;

	*hi_end = true;
	if (!p)
		return 0;
	slot = lw->next[level + 1]++;
	if (slot + 1 < block_nritems(p)) {
		block_key(p, slot + 1, hi);
		*hi_end = false;
	} else if (!lw->hi_end[level + 1]) {
		*hi = lw->hi[level + 1];
		*hi_end = false;
	}
	return slot;
}

int fs_items_block(struct fs_item_walk *lw, const struct tree_block *b)
{
	unsigned level = block_level(b);

	if (lw->err)
		return lw->err;
	if (level >= BTRFS_MAX_LEVEL)
		return -EUCLEAN;
	if (lw->count_progress)
		progress_add(lw->w->ctx->progress, b->len);
	if (!lw->started) {
		lw->started = true;
		lw->hi_end[level] = true;
	} else {
		take_child(lw, level, &lw->hi[level], &lw->hi_end[level]);
	}
	if (level > 0) {
		lw->node[level] = b;
		lw->next[level] = 0;
		return 0;
	}
	for (unsigned slot = 0; slot < block_nritems(b); slot++) {
		const uint8_t *item = leaf_item(b->data, slot);
		struct btrfs_key k;
		int r;

		block_key(b, slot, &k);
		r = lw->fn(lw->w, &k, leaf_item_data(b->data, slot), item_size(item));
		if (r) {
			lw->stop = r;
			return -ECANCELED;
		}
	}
	return 0;
}

void fs_items_bad_block(struct fs_item_walk *lw, uint64_t bytenr, int level, const char *why)
{
	struct fs_walk *w = lw->w;
	const struct tree_block *p = level >= 0 && level + 1 < BTRFS_MAX_LEVEL ? lw->node[level + 1] : NULL;
	struct btrfs_key lo = { 0, 0, 0 }, hi;
	char a[80], b[80];
	bool hi_end;
	unsigned slot;
	int ret;

	if (level < 0 || level + 1 >= BTRFS_MAX_LEVEL)
		return;
	slot = take_child(lw, (unsigned)level, &hi, &hi_end);
	if (p)
		block_key(p, slot, &lo);
	ret = fs_lost_add(w->lost, w->root->objectid, &lo, hi_end ? NULL : &hi);
	if (ret && !lw->err)
		lw->err = ret;
	fs_lost_key_str(a, sizeof(a), &lo, false);
	fs_lost_key_str(b, sizeof(b), &hi, hi_end);
	/* snapshots may share it: reported once, naming them, when the trees are walked (check_fs_trees) */
	if (shared_reports_hold(&w->unreadable, PR_TREE_ROOT_UNREADABLE, bytenr, w->root->objectid, "root %" PRIu64
				": block %" PRIu64 " (level %d) unreadable, keys %s to %s not checked: %s",
				w->root->objectid, bytenr, level, a, b, why))
		report_problem(w->ctx, PR_TREE_ROOT_UNREADABLE, "root %" PRIu64 ": block %" PRIu64 " (level %d) "
			       "unreadable, keys %s to %s not checked: %s", w->root->objectid, bytenr, level, a, b, why);
}

static int lost_visit(void *arg, const struct tree_block *b)
{
	return fs_items_block(arg, b);
}

static void lost_bad_block(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	(void)err;
	fs_items_bad_block(arg, bytenr, level, why);
}

void fs_items_begin(struct fs_item_walk *iw, struct fs_walk *w, tree_item_fn fn, bool count_progress)
{
	memset(iw, 0, sizeof(*iw));
	iw->w = w;
	iw->fn = fn;
	iw->count_progress = count_progress;
}

int fs_items_end(struct fs_item_walk *lw, const struct tree_root_ptr *root, int ret)
{
	struct btrfs_key all = { 0, 0, 0 };

	if (ret == -ECANCELED && lw->stop)
		return lw->stop;
	if (!ret && lw->err)
		ret = lw->err;
	if (ret < 0 && !lw->started) {   /* the root block: the whole tree is unknown */
		int r = fs_lost_add(lw->w->lost, root->objectid, &all, NULL);
		if (r)
			return r;
	}
	return ret;
}

int fs_walk_items(struct fs_walk *w, const struct tree_root_ptr *root, tree_item_fn fn)
{
	struct fs_item_walk lw;
	struct tree_walk_ops ops = { .visit = lost_visit, .bad_block = lost_bad_block, .arg = &lw };

	fs_items_begin(&lw, w, fn, true);
	return fs_items_end(&lw, root, tree_walk(w->ctx->fs, root, &ops, NULL));
}
