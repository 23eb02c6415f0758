// SPDX-License-Identifier: GPL-2.0-only
/* The root-orphans class: a deleted subvolume (root item refs 0) that the
 * kernel is to drop needs its orphan item in the root tree; without it the
 * subvolume is never cleaned up. The item is added back, so that the next
 * mount drops the subvolume as the kernel would have. */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "check/repair.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/key.h>
#include <btk/tree.h>

struct dead_roots {
	uint64_t *ids;
	size_t n, cap;
};

static int note_dead(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct dead_roots *s = arg;
	struct item_view item = item_view_of(d, size);

	if (k->type != BTRFS_ROOT_ITEM_KEY || !key_is_subvolume_id(k->objectid) || !item_view_has_fixed(&item, k->type) ||
	    root_item_refs(d))
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 8;
		uint64_t *v = realloc(s->ids, cap * sizeof(*v));
		if (!v)
			return -ENOMEM;
		s->ids = v;
		s->cap = cap;
	}
	s->ids[s->n++] = k->objectid;
	return 0;
}

int repair_subvol_orphans(struct repair_ctx *r)
{
	struct dead_roots s = { 0 };
	struct tree_root_ptr rp;
	int ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp);

	if (!ret)
		ret = tree_each_item(r->fs, &rp, note_dead, &s);
	for (size_t i = 0; ret >= 0 && i < s.n; i++) {
		struct btrfs_key key = { BTRFS_ORPHAN_OBJECTID, BTRFS_ORPHAN_ITEM_KEY, s.ids[i] };
		uint8_t none[1];
		uint32_t n = sizeof(none);
		ret = tree_lookup(r->fs, &rp, &key, none, &n);
		if (ret == 0)
			continue;
		if (ret != -ENOENT)
			break;
		ret = trans_insert_item(r->t, BTRFS_ROOT_TREE_OBJECTID, &key, NULL, 0);
		if (!ret) {
			r->changes++;
			repair_say(r, "subvolume %" PRIu64 " (deleted): orphan item added, the next mount drops it",
				   s.ids[i]);
		}
	}
	free(s.ids);
	return ret < 0 ? ret : 0;
}
