// SPDX-License-Identifier: GPL-2.0-only
/* The root-item-fields class (root-item-bad, extent-generation): fields of
 * root items that the kernel's tree checker refuses, or that disagree with
 * what another copy of the same fact says, set from that copy, in one
 * transaction:
 *  - the extent tree's root item, misdirected (another tree's block, zeroed
 *    space, a wrong level), points at the root the backup root of the
 *    current generation names (libfs reads it from there then);
 *  - unknown flags are cleared; a generation_v2 or last_snapshot from the
 *    future becomes the item's generation (the filesystem's at most): a
 *    larger last_snapshot only makes the kernel treat more blocks as shared;
 *  - a subvolume's root_dirid other than 256, whose tree has directory 256,
 *    becomes 256 (the kernel always opens 256);
 *  - the extent item of a subvolume's root block gets the block's generation
 *    (the header is checksummed; btrfs check takes the item's for the
 *    root's and calls the root item outdated).
 * The level and generation of other trees' root items are the root-items
 * class's (check/root_outdated.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "check/repair.h"
#include "common/grow.h"
#include <btk/block.h>
#include <btk/item_check.h>
#include <btk/key.h>
#include <btk/tree.h>

struct root_copy {
	struct btrfs_key key;
	uint8_t item[sizeof(struct btrfs_root_item)];
	uint32_t size;
};

struct root_list {
	struct root_copy *v;
	size_t n, cap;
};

static int collect(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct root_list *l = arg;
	struct root_copy *v;

	if (k->type != BTRFS_ROOT_ITEM_KEY || !item_has_fixed(BTRFS_ROOT_ITEM_KEY, size))
		return 0;
	if (!(v = grow_array(l->v, &l->cap, l->n, sizeof(*v), 32)))
		return -ENOMEM;
	l->v = v;
	v = &l->v[l->n++];
	v->key = *k;
	v->size = size < sizeof(v->item) ? size : (uint32_t)sizeof(v->item);
	memset(v->item, 0, sizeof(v->item));
	memcpy(v->item, d, v->size);
	return 0;
}

/* Whether inode 256 of tree id is a directory. */
static bool has_top_dir(struct repair_ctx *r, uint64_t id)
{
	struct btrfs_key key = { BTRFS_FIRST_FREE_OBJECTID, BTRFS_INODE_ITEM_KEY, 0 };
	uint8_t inode[sizeof(struct btrfs_inode_item)];
	uint32_t size = sizeof(inode);
	struct tree_root_ptr rp;

	if (trans_get_root(r->t, id, &rp) || tree_lookup(r->fs, &rp, &key, inode, &size) ||
	    size < sizeof(inode)) {
		btk_error_clear();
		return false;
	}
	return S_ISDIR(inode_mode(inode));
}

static int count_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	(void)k, (void)d, (void)size;
	++*(uint64_t *)arg;
	return 0;
}

/* How many root backrefs name subvolume id (0 when they cannot be read). */
static uint64_t backrefs_of(struct repair_ctx *r, uint64_t id)
{
	struct btrfs_key min = { id, BTRFS_ROOT_BACKREF_KEY, 0 }, max = { id, BTRFS_ROOT_BACKREF_KEY, (uint64_t)-1 };
	struct tree_root_ptr rp;
	uint64_t n = 0;

	if (trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp) ||
	    tree_each_item_in(r->fs, &rp, &min, &max, count_item, &n) < 0) {
		btk_error_clear();
		return 0;
	}
	return n;
}

/* The fields of one root item as they should be: what changed, said. */
static unsigned fix_fields(struct repair_ctx *r, const struct root_copy *c, uint8_t *want)
{
	uint64_t gen = r->fs->generation, id = c->key.objectid, flags = root_item_flags(want);
	uint64_t known = BTRFS_ROOT_SUBVOL_RDONLY | BTRFS_ROOT_SUBVOL_DEAD;
	uint64_t to = root_item_generation(want) <= gen ? root_item_generation(want) : gen;
	unsigned n = 0;

	if (flags & ~known) {
		root_item_set_flags(want, flags & known);
		repair_say(r, "root %" PRIu64 ": unknown flags 0x%" PRIx64 " cleared", id, flags & ~known);
		n++;
	}
	/* (one past the superblock's is the running transaction's: the kernel's limit) */
	if (c->size >= sizeof(struct btrfs_root_item) && root_item_generation_v2(want) > gen + 1) {
		repair_say(r, "root %" PRIu64 ": generation_v2 %" PRIu64 " -> %" PRIu64, id,
			   root_item_generation_v2(want), to);
		root_item_set_generation_v2(want, to);
		n++;
	}
	if (root_item_last_snapshot(want) > gen + 1) {
		repair_say(r, "root %" PRIu64 ": last snapshot %" PRIu64 " -> %" PRIu64, id,
			   root_item_last_snapshot(want), to);
		root_item_set_last_snapshot(want, to);
		n++;
	}
	if ((key_is_subvolume_id(id) || id == BTRFS_DATA_RELOC_TREE_OBJECTID) &&
	    root_item_root_dirid(want) != BTRFS_FIRST_FREE_OBJECTID && has_top_dir(r, id)) {
		repair_say(r, "root %" PRIu64 ": root directory %" PRIu64 " -> 256", id, root_item_root_dirid(want));
		root_item_set_root_dirid(want, BTRFS_FIRST_FREE_OBJECTID);
		n++;
	}
	if (root_item_level(want) >= BTRFS_MAX_LEVEL) {
		/* the root block itself says, when it is the item's (generation and owner) */
		struct block_expect e = { .generation = root_item_generation(want), .level = -1, .owner = id };
		struct tree_block *b;

		if (block_read(r->fs, root_item_bytenr(want), &e, &b) == 0) {
			repair_say(r, "root %" PRIu64 ": level %u -> %u, its root block's", id, root_item_level(want),
				   block_level(b));
			root_item_set_level(want, block_level(b));
			block_put(r->fs, b);
			n++;
		} else {
			btk_error_clear();
		}
	}
	if (root_item_drop_level(want) >= BTRFS_MAX_LEVEL) {
		/* no drop in progress: 0, as the kernel leaves it; else restart at the top */
		static const uint8_t none[sizeof(struct btrfs_disk_key)];
		bool dropping = memcmp(root_item_drop_progress_ptr(want), none, sizeof(none)) != 0;
		uint8_t level = dropping && root_item_level(want) < BTRFS_MAX_LEVEL ? root_item_level(want) : 0;

		repair_say(r, "root %" PRIu64 ": drop level %u -> %u", id, root_item_drop_level(want), level);
		root_item_set_drop_level(want, level);
		n++;
	}
	if (id == BTRFS_FS_TREE_OBJECTID && !root_item_refs(want)) {
		repair_say(r, "root 5: refs 0 -> 1 (the top level is never deleted)");
		root_item_set_refs(want, 1);
		n++;
	} else if (key_is_subvolume_id(id) && id != BTRFS_FS_TREE_OBJECTID) {
		uint64_t backrefs = backrefs_of(r, id);

		if (backrefs && backrefs != root_item_refs(want)) {
			repair_say(r, "root %" PRIu64 ": refs %u -> %" PRIu64 ", its root backrefs", id,
				   root_item_refs(want), backrefs);
			root_item_set_refs(want, (uint32_t)backrefs);
			n++;
		}
	}
	return n;
}

static int write_item(struct repair_ctx *r, const struct root_copy *c, const uint8_t *want)
{
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(r->t, BTRFS_ROOT_TREE_OBJECTID, &c->key, &item, &size, &path);
	if (!ret)
		memcpy(item, want, size < c->size ? size : c->size);
	tree_path_release(r->fs, &path);
	return ret;
}

/* The extent item of a subvolume's root block: the block's generation. */
static int fix_extent_generation(struct repair_ctx *r, const struct root_copy *c)
{
	struct block_expect e = { .generation = root_item_generation(c->item), .level = root_item_level(c->item),
				  .owner = c->key.objectid };
	struct tree_block *b;
	struct btrfs_key keys[2];
	uint64_t bgen;
	int ret = 1;

	if (block_read(r->fs, root_item_bytenr(c->item), &e, &b)) {
		btk_error_clear();
		return 0;
	}
	bgen = block_generation(b);
	keys[0] = (struct btrfs_key){ b->bytenr, BTRFS_METADATA_ITEM_KEY, block_level(b) };
	keys[1] = (struct btrfs_key){ b->bytenr, BTRFS_EXTENT_ITEM_KEY, r->fs->nodesize };
	block_put(r->fs, b);
	if (bgen > r->fs->generation)
		return 0;
	for (int i = 0; i < 2 && ret == 1; i++) {
		uint8_t cur[sizeof(struct btrfs_extent_item)];
		struct tree_root_ptr rp;
		struct tree_path path;
		uint8_t *item;
		uint32_t size = sizeof(cur);
		/* read first: the path is copied on write only for an item to change */
		if ((ret = trans_get_root(r->t, BTRFS_EXTENT_TREE_OBJECTID, &rp)))
			return ret;
		ret = tree_lookup(r->fs, &rp, &keys[i], cur, &size);
		if (ret == -ENOENT) {
			btk_error_clear();
			ret = 1;
			continue;
		}
		if (ret || size < sizeof(cur) || extent_generation(cur) == bgen)
			return ret;
		tree_path_init(&path);
		ret = trans_item_for_update(r->t, BTRFS_EXTENT_TREE_OBJECTID, &keys[i], &item, &size, &path);
		if (ret == 0 && size >= sizeof(struct btrfs_extent_item) && extent_generation(item) != bgen) {
			repair_say(r, "root %" PRIu64 ": extent item of root block %" PRIu64 ": generation %" PRIu64
				   " -> %" PRIu64, c->key.objectid, keys[i].objectid, extent_generation(item), bgen);
			extent_set_generation(item, bgen);
			r->changes++;
		}
		tree_path_release(r->fs, &path);
		if (ret == -ENOENT) {
			btk_error_clear();
			ret = 1;
		}
	}
	return ret < 0 ? ret : 0;
}

/* The extent tree's root item names what the backup root does (libfs uses that one already). */
static int fix_extent_root(struct repair_ctx *r)
{
	const struct tree_root_ptr *was = &r->fs->extent_root_item, *now = &r->fs->extent_root;
	int ret;

	if (!was->bytenr)
		return 0;
	if ((ret = trans_set_root(r->t, now)))
		return ret;
	repair_say(r, "root 2: root item %" PRIu64 " (generation %" PRIu64 ", level %u) -> %" PRIu64 " (generation %"
		   PRIu64 ", level %u), the backup root's", was->bytenr, was->generation, was->level, now->bytenr,
		   now->generation, now->level);
	r->changes++;
	return 0;
}

int repair_root_fields(struct repair_ctx *r)
{
	struct root_list l = { 0 };
	struct tree_root_ptr rp;
	int ret = fix_extent_root(r);

	if (!ret && !(ret = trans_get_root(r->t, BTRFS_ROOT_TREE_OBJECTID, &rp)))
		ret = tree_each_item(r->fs, &rp, collect, &l);
	for (size_t i = 0; ret >= 0 && i < l.n; i++) {
		const struct root_copy *c = &l.v[i];
		uint8_t want[sizeof(c->item)];
		unsigned n;

		memcpy(want, c->item, sizeof(want));
		if ((n = fix_fields(r, c, want)) && !(ret = write_item(r, c, want)))
			r->changes += n;
		if (!ret && (key_is_subvolume_id(c->key.objectid) || c->key.objectid == BTRFS_DATA_RELOC_TREE_OBJECTID) &&
		    root_item_refs(c->item))
			ret = fix_extent_generation(r, c);
	}
	free(l.v);
	return ret < 0 ? ret : 0;
}
