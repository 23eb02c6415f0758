// SPDX-License-Identifier: GPL-2.0-only
/* The extent-generations class: an extent item from a generation after the
 * filesystem's (the kernel refuses the extent tree's leaf) gets the
 * generation of its tree block's header, or, for data, the filesystem's last
 * committed generation (any generation up to it is what the item can have). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include <btk/block.h>
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>

struct future_items {
	struct fs_info *fs;
	struct repair_keys l;
};

static int note_future(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct future_items *s = arg;
	struct item_view v = item_view_of(d, size);

	if ((k->type != BTRFS_EXTENT_ITEM_KEY && k->type != BTRFS_METADATA_ITEM_KEY) ||
	    !item_view_has_fixed(&v, k->type) || extent_generation(d) <= s->fs->generation)
		return 0;
	return repair_keys_push(&s->l, k);
}

/* What the item should say: a tree block's own generation when it reads and is not newer. */
static uint64_t wanted_generation(struct repair_ctx *r, const struct btrfs_key *k, uint64_t flags)
{
	struct tree_block *b;
	uint64_t gen = r->fs->generation;

	if (!(flags & BTRFS_EXTENT_FLAG_TREE_BLOCK) || block_read(r->fs, k->objectid, NULL, &b) != 0) {
		fs_error_clear(r->fs);
		return gen;
	}
	if (block_generation(b) && block_generation(b) <= gen)
		gen = block_generation(b);
	block_put(r->fs, b);
	return gen;
}

int repair_extent_generations(struct repair_ctx *r)
{
	struct future_items s = { .fs = r->fs };
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, BTRFS_EXTENT_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item(r->fs, &rp, note_future, &s);
	for (size_t i = 0; ret >= 0 && i < s.l.n; i++) {
		struct tree_path path;
		uint8_t *item;
		uint32_t size;
		tree_path_init(&path);
		ret = trans_item_for_update(r->t, BTRFS_EXTENT_TREE_OBJECTID, &s.l.keys[i], &item, &size, &path);
		if (ret == 0) {
			uint64_t from = extent_generation(item), to = wanted_generation(r, &s.l.keys[i], extent_flags(item));
			extent_set_generation(item, to);
			r->changes++;
			repair_say(r, "extent item (%" PRIu64 " %u %" PRIu64 "): generation %" PRIu64 " -> %" PRIu64,
				   s.l.keys[i].objectid, s.l.keys[i].type, s.l.keys[i].offset, from, to);
		}
		tree_path_release(r->fs, &path);
	}
	free(s.l.keys);
	return ret < 0 ? ret : 0;
}
