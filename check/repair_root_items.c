// SPDX-License-Identifier: GPL-2.0-only
/* The root-items repair class: a subvolume's root item that points at an
 * older root block than the tree's newest (check/root_outdated.c) is pointed
 * at the newest (and one whose block does not read as its root, zeroed or
 * another tree's, at the block the extent tree names), once that block reads and is what the extent tree says
 * (owner, level, generation), in one transaction; the check runs again after
 * it, so the extent references are judged against the trees as they are
 * then. btrfs check --repair does the same ("Fixed N roots"). A subvolume
 * that root refs name without a root item gets one again (check/root_recreate.c). */
#include <errno.h>
#include <inttypes.h>

#include "check/repair.h"
#include "check/repair_notes.h"
#include "check/root_outdated.h"
#include <btk/block.h>
#include <btk/trans.h>

static int fix_root(void *arg, const struct root_fix *f)
{
	struct repair_ctx *r = arg;
	struct block_expect e = { .generation = f->new_generation, .level = f->new_level, .owner = f->key.objectid };
	struct tree_root_ptr ptr = { .objectid = f->key.objectid, .bytenr = f->new_bytenr,
				     .generation = f->new_generation, .level = f->new_level };
	struct tree_block *b;
	int ret = block_read(r->fs, f->new_bytenr, &e, &b);

	if (ret) {
		r->left++;
		repair_say(r, "root %" PRIu64 ": block %" PRIu64 " does not read as its root (%s), root item left",
			   f->key.objectid, f->new_bytenr, btk_error_msg());
		return 0;
	}
	block_put(r->fs, b);
	/* the transaction's own view of the tree moves too (the commit updates the quota tree, say) */
	if ((ret = trans_set_root(r->t, &ptr)))
		return ret;
	r->changes++;
	repair_say(r, "root %" PRIu64 ": root item %" PRIu64 " (generation %" PRIu64 ", level %u) -> %" PRIu64
		   " (generation %" PRIu64 ", level %u)", f->key.objectid, f->bytenr, f->generation, f->level,
		   f->new_bytenr, f->new_generation, f->new_level);
	return 0;
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
	if (ret < 0 || (ret = root_outdated_each(r->fs, fix_root, r)))
		return ret < 0 ? ret : 0;
	return repair_root_items_recreate(r);
}
