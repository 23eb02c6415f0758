// SPDX-License-Identifier: GPL-2.0-only
/* The stripe-crossing class: a tree block that crosses a 64 KiB stripe
 * boundary (old kernels wrote some; btrfs check reports them, scrub and
 * RAID5/6 cannot handle them) is copied on write, through the tree that owns
 * it, to a new place, which the allocator puts on a nodesize boundary. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include <btk/block.h>
#include <btk/format.h>
#include <btk/key.h>
#include <btk/tree.h>

bool tree_block_crosses_stripe(uint64_t bytenr, uint64_t len)
{
	return len && len <= BTRFS_STRIPE_LEN && bytenr / BTRFS_STRIPE_LEN != (bytenr + len - 1) / BTRFS_STRIPE_LEN;
}

static int note_crossing(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct repair_ctx *r = ((struct repair_ctx **)arg)[0];
	struct repair_keys *l = ((struct repair_keys **)arg)[1];
	uint64_t len = k->type == BTRFS_METADATA_ITEM_KEY ? r->fs->nodesize : k->offset;

	struct item_view v = item_view_of(d, size);
	uint64_t flags = extent_flags_in(&v);

	if ((k->type != BTRFS_EXTENT_ITEM_KEY && k->type != BTRFS_METADATA_ITEM_KEY) || v.past_end ||
	    !(flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) || !tree_block_crosses_stripe(k->objectid, len))
		return 0;
	return repair_keys_push(l, k);
}

/* Copy the block at bytenr on write by searching its owner tree for its first key. */
static int move_block(struct repair_ctx *r, uint64_t bytenr)
{
	struct block_expect any = BLOCK_EXPECT_ANY;
	struct btrfs_key first = { 0, 0, 0 };
	struct tree_block *b;
	struct tree_path path;
	uint64_t owner;
	int ret = block_read(r->fs, bytenr, &any, &b);

	if (ret)
		return ret;
	owner = block_owner(b);
	if (header_nritems(b->data))
		key_from_disk(&first, leaf_item(b->data, 0));
	block_put(r->fs, b);
	tree_path_init(&path);
	ret = trans_search(r->t, owner, &first, 0, &path);
	tree_path_release(r->fs, &path);
	if (ret < 0)
		return ret;
	r->changes++;
	repair_say(r, "tree %" PRIu64 ": block %" PRIu64 " crosses a stripe boundary: copied on write", owner, bytenr);
	return 0;
}

int repair_stripe_crossing(struct repair_ctx *r)
{
	struct repair_keys l = { 0 };
	void *arg[2] = { r, &l };
	int ret = tree_each_item(r->fs, &r->fs->extent_root, note_crossing, arg);

	for (size_t i = 0; ret >= 0 && i < l.n; i++) {
		ret = move_block(r, l.keys[i].objectid);
		if (ret == -ENOENT || ret == -EUCLEAN) { /* its owner is gone or it does not read: left */
			r->left++;
			fs_error_clear(r->fs);
			ret = 0;
		}
	}
	free(l.keys);
	return ret < 0 ? ret : 0;
}
