// SPDX-License-Identifier: GPL-2.0-only
/* The dev-extents class: a dev extent that no chunk accounts for (no chunk at
 * its chunk offset, no stripe of any chunk starting where it starts) only
 * keeps device space from being allocated; it is removed (the space-counters
 * class then recomputes the device's bytes_used). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/tree.h>
#include <btk/volumes.h>

struct strays {
	struct fs_info *fs;
	struct repair_keys l;
};

static bool stripe_starts_at(const struct fs_info *fs, uint64_t devid, uint64_t physical)
{
	for (size_t i = 0; i < fs_chunk_count(fs); i++)
		for (unsigned s = 0; s < fs_chunk(fs, i)->num_stripes; s++)
			if (fs_chunk(fs, i)->stripes[s].devid == devid && fs_chunk(fs, i)->stripes[s].physical == physical)
				return true;
	return false;
}

static int note_stray(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct strays *s = arg;
	struct item_view v = item_view_of(d, size);
	const struct chunk *c;

	if (k->type != BTRFS_DEV_EXTENT_KEY || !item_view_has_fixed(&v, k->type))
		return 0;
	c = fs_chunk_lookup(s->fs, dev_extent_chunk_offset(d));
	if ((c && c->logical == dev_extent_chunk_offset(d)) || stripe_starts_at(s->fs, k->objectid, k->offset))
		return 0;
	return repair_keys_push(&s->l, k);
}

int repair_dev_extents(struct repair_ctx *r)
{
	struct strays s = { .fs = r->fs };
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, BTRFS_DEV_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item(r->fs, &rp, note_stray, &s);
	for (size_t i = 0; ret >= 0 && i < s.l.n; i++) {
		ret = trans_delete_item(r->t, BTRFS_DEV_TREE_OBJECTID, &s.l.keys[i]);
		if (!ret) {
			r->changes++;
			repair_say(r, "devid %" PRIu64 ": dev extent at %" PRIu64 " belongs to no chunk: removed",
				   s.l.keys[i].objectid, s.l.keys[i].offset);
		}
	}
	if (ret >= 0 && s.l.n < r->found->counts[PR_DEV_EXTENT_NO_CHUNK])
		r->left += r->found->counts[PR_DEV_EXTENT_NO_CHUNK] - s.l.n;
	free(s.l.keys);
	return ret < 0 ? ret : 0;
}
