// SPDX-License-Identifier: GPL-2.0-only
/* The root-items repair class: a subvolume's root item that points at an
 * older root block than the tree's newest (check/root_outdated.c) is pointed
 * at the newest, once that block reads and is what the extent tree says
 * (owner, level, generation), in one transaction; the check runs again after
 * it, so the extent references are judged against the trees as they are
 * then. btrfs check --repair does the same ("Fixed N roots"). */
#include <errno.h>
#include <inttypes.h>

#include "check/repair.h"
#include "check/repair_notes.h"
#include "check/root_outdated.h"
#include <btk/block.h>
#include <btk/trans.h>
#include <btk/item_check.h>

static int fix_root(void *arg, const struct root_fix *f)
{
	struct repair_ctx *r = arg;
	struct block_expect e = { .generation = f->new_generation, .level = f->new_level, .owner = f->key.objectid };
	struct tree_block *b;
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret = block_read(r->fs, f->new_bytenr, &e, &b);

	if (ret) {
		r->left++;
		repair_say(r, "root %" PRIu64 ": block %" PRIu64 " does not read as its root (%s), root item left",
			   f->key.objectid, f->new_bytenr, btk_error_msg());
		return 0;
	}
	block_put(r->fs, b);
	tree_path_init(&path);
	ret = trans_item_for_update(r->t, BTRFS_ROOT_TREE_OBJECTID, &f->key, &item, &size, &path);
	if (!ret && !item_has_fixed(BTRFS_ROOT_ITEM_KEY, size))
		ret = fs_error(r->fs, -EUCLEAN, "root item of %" PRIu64 " is %u bytes", f->key.objectid, size);
	if (!ret) {
		root_item_set_bytenr(item, f->new_bytenr);
		root_item_set_generation(item, f->new_generation);
		root_item_set_level(item, f->new_level);
		if (size >= sizeof(struct btrfs_root_item))
			root_item_set_generation_v2(item, f->new_generation);
		r->changes++;
		repair_say(r, "root %" PRIu64 ": root item %" PRIu64 " (generation %" PRIu64 ", level %u) -> %" PRIu64
			   " (generation %" PRIu64 ", level %u)", f->key.objectid, f->bytenr, f->generation, f->level,
			   f->new_bytenr, f->new_generation, f->new_level);
	}
	tree_path_release(r->fs, &path);
	return ret;
}

int repair_root_items(struct repair_ctx *r)
{
	const void *rec;
	int ret;

	/* blocks in use without an extent item (the stale trees' among them): no new block lands there */
	while ((ret = repair_notes_next(r->found, NOTES_CLAIMS, &rec)) == 1) {
		const struct extent_claim *cl = rec;
		if ((ret = trans_space_keep_until_commit(r->t, cl->bytenr, cl->len)) < 0)
			return ret;
	}
	return ret < 0 ? ret : root_outdated_each(r->fs, fix_root, r);
}
