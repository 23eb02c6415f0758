// SPDX-License-Identifier: GPL-2.0-only
/* --rebuild-extent-tree: a new extent tree from the trees that use the
 * extents, in one transaction.
 *
 * The check ran with ctx->infer_full_backref: the reference join
 * (phase_refs.c, refs_repair.c) then noted every extent some tree uses, with
 * the references it must have and which tree blocks have full backrefs, and
 * claimed its space — both in spilling sorters, in address order. Here:
 *
 * 1. The allocator forgets what the committed trees say is used; every
 *    claimed extent is used, the (readable) blocks of the old extent and
 *    free-space trees stay untouched until the commit and are free after it.
 *    New blocks can then land only on space no tree uses.
 * 2. The extent tree restarts from an empty leaf and gets every extent item
 *    (with inline and keyed references), in key order, with the block group
 *    items when they live in it (from the chunk map, used from the claims).
 *    The free-space tree restarts empty too (its old blocks, like the extent
 *    tree's, may be unreadable).
 * 3. Block group used, bytes_used and the free-space tree follow at commit
 *    (libfs: the allocator's deltas on top of the values written here).
 *
 * Memory: the notes' merge buffers, one extent's references, one path. The
 * blocks of the new tree stay in memory until the commit (libfs transactions
 * keep their dirty blocks). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "check/extent_items.h"
#include "check/repair.h"
#include "check/refs_repair.h"
#include "check/repair_notes.h"
#include <btk/block.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>
#include <btk/item_check.h>

/* A chunk as it was when the rebuild started (the transaction may add some:
 * their block group items are its own to write). */
struct bg {
	uint64_t start, length, type;
	uint64_t base;            /* bytes of the extents claimed in it */
};

struct rebuild {
	struct repair_ctx *r;
	struct fs_info *fs;
	struct bg *bgs;
	size_t nbgs;
	size_t next_bg;           /* next block group item to insert (in the extent tree) */
	bool bgs_in_extent_tree;
	struct extent_fix hdr;
	struct extent_fix *refs;  /* the current extent's references */
	size_t nrefs;
	uint64_t tree_blocks, data_extents, keep_blocks;
};

static size_t bg_index(const struct rebuild *rb, uint64_t bytenr)
{
	size_t lo = 0, hi = rb->nbgs;

	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (rb->bgs[mid].start + rb->bgs[mid].length <= bytenr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Every extent some tree uses: its space is used (they must not overlap). */
static int claim_all(struct rebuild *rb)
{
	uint64_t prev_end = 0;
	const void *rec;
	int ret;

	while ((ret = repair_notes_next(rb->r->found, NOTES_CLAIMS, &rec)) == 1) {
		const struct extent_claim *c = rec;
		size_t i = bg_index(rb, c->bytenr);

		if (c->bytenr < prev_end)
			return fs_error(rb->fs, -EUCLEAN, "extent %" PRIu64 "+%" PRIu64 " overlaps the extent before it: "
					"two trees disagree on what is there", c->bytenr, c->len);
		prev_end = c->bytenr + c->len;
		if (i == rb->nbgs || c->bytenr < rb->bgs[i].start)
			return fs_error(rb->fs, -EUCLEAN, "extent %" PRIu64 " lies in no chunk", c->bytenr);
		if ((ret = trans_extent_space(rb->r->t, c->bytenr, c->len, true)) < 0)
			return ret;
		rb->bgs[i].base += c->len;
	}
	return ret;
}

/* The old extent tree's blocks: its nodes are read, its leaves only named. */
static int keep_visit(void *arg, const struct tree_block *b)
{
	struct rebuild *rb = arg;
	int ret = trans_space_keep_until_commit(rb->r->t, b->bytenr, rb->fs->nodesize);

	rb->keep_blocks++;
	if (ret || block_level(b) != 1)
		return ret;
	for (unsigned i = 0; i < block_nritems(b); i++) {
		ret = trans_space_keep_until_commit(rb->r->t, key_ptr_blockptr(node_key_ptr(b->data, i)), rb->fs->nodesize);
		if (ret)
			return ret;
		rb->keep_blocks++;
	}
	return 1;
}

static int keep_old_tree(struct rebuild *rb, const struct tree_root_ptr *root)
{
	struct tree_walk_ops ops = { keep_visit, NULL, rb };
	uint64_t bad = 0;
	int ret;

	if (!root->bytenr)
		return 0;
	ret = tree_walk(rb->fs, root, &ops, &bad);
	/* an unreadable old root or node: its blocks below are not known */
	if (ret < 0 && ret != -ENOMEM && ret != -ENOSPC)
		ret = 0;
	return ret;
}

/* Block group items of the extent tree up to (not past) key position bytenr. */
static int put_block_groups(struct rebuild *rb, uint64_t before)
{
	while (rb->bgs_in_extent_tree && rb->next_bg < rb->nbgs) {
		const struct bg *c = &rb->bgs[rb->next_bg];
		struct btrfs_key key = { c->start, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length };
		uint8_t item[sizeof(struct btrfs_block_group_item)];
		int ret;

		if (c->start >= before)
			break;
		block_group_set_used(item, c->base);
		block_group_set_chunk_objectid(item, BTRFS_FIRST_CHUNK_TREE_OBJECTID);
		block_group_set_flags(item, c->type);
		if ((ret = trans_insert_item(rb->r->t, BTRFS_EXTENT_TREE_OBJECTID, &key, item, sizeof(item))) < 0)
			return ret;
		rb->next_bg++;
	}
	return 0;
}

/* Block group items in the block-group tree: their used set from the claims. */
static int set_block_groups_used(struct rebuild *rb)
{
	for (size_t i = 0; i < rb->nbgs; i++) {
		const struct bg *c = &rb->bgs[i];
		struct btrfs_key key = { c->start, BTRFS_BLOCK_GROUP_ITEM_KEY, c->length };
		struct tree_path path;
		uint8_t *item;
		uint32_t size;
		int ret;

		tree_path_init(&path);
		ret = trans_item_for_update(rb->r->t, BTRFS_BLOCK_GROUP_TREE_OBJECTID, &key, &item, &size, &path);
		if (ret == 0 && !item_has_fixed(BTRFS_BLOCK_GROUP_ITEM_KEY, size))
			ret = fs_error(rb->fs, -EUCLEAN, "block group item %" PRIu64 " is too small", c->start);
		if (ret == 0)
			block_group_set_used(item, c->base);
		tree_path_release(rb->fs, &path);
		if (ret)
			return ret == -ENOENT ? fs_error(rb->fs, -EUCLEAN, "chunk %" PRIu64 " has no block group item",
							 c->start) : ret;
	}
	return 0;
}

/* The item head of the current extent: key, extent item, tree block info. */
static int item_head(struct rebuild *rb, struct btrfs_key *key, uint8_t *item, uint32_t *size)
{
	struct fs_info *fs = rb->fs;
	bool tree = rb->hdr.c & EXTENT_FIX_TREE;
	uint8_t level = (uint8_t)(rb->hdr.c >> EXTENT_FIX_LEVEL_SHIFT);
	struct btrfs_key first = { 0, 0, 0 };
	struct tree_block *b;
	int ret;

	memset(item, 0, sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_tree_block_info));
	extent_set_flags(item, rb->hdr.b);
	*size = sizeof(struct btrfs_extent_item);
	if (!tree) {
		extent_set_generation(item, trans_transid(rb->r->t));
		*key = (struct btrfs_key){ rb->hdr.bytenr, BTRFS_EXTENT_ITEM_KEY, rb->hdr.a };
		return 0;
	}
	extent_set_generation(item, rb->hdr.count);
	if (fs->incompat & BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA) {
		*key = (struct btrfs_key){ rb->hdr.bytenr, BTRFS_METADATA_ITEM_KEY, level };
		return 0;
	}
	/* old-style items name the block's first key: read it */
	if ((ret = block_read(fs, rb->hdr.bytenr, &BLOCK_EXPECT_ANY, &b)))
		return ret;
	if (block_nritems(b))
		block_key(b, 0, &first);
	block_put(fs, b);
	*key = (struct btrfs_key){ rb->hdr.bytenr, BTRFS_EXTENT_ITEM_KEY, fs->nodesize };
	key_to_disk(tree_block_info_key_ptr(item + sizeof(struct btrfs_extent_item)), &first);
	tree_block_info_set_level(item + sizeof(struct btrfs_extent_item), level);
	*size += sizeof(struct btrfs_tree_block_info);
	return 0;
}

static int put_extent(struct rebuild *rb)
{
	uint8_t *item = malloc(rb->fs->nodesize);
	struct btrfs_key key;
	uint32_t size;
	uint64_t total;
	int ret;

	if (!item)
		return -ENOMEM;
	ret = put_block_groups(rb, rb->hdr.bytenr + 1);
	if (!ret)
		ret = item_head(rb, &key, item, &size);
	if (!ret)
		ret = extent_item_put_refs(rb->fs, rb->r->t, rb->hdr.bytenr, rb->refs, rb->nrefs, item, &size, &total);
	if (!ret) {
		extent_set_refs(item, total);
		ret = trans_insert_item(rb->r->t, BTRFS_EXTENT_TREE_OBJECTID, &key, item, size);
	}
	free(item);
	if (ret)
		return ret;
	if (rb->hdr.c & EXTENT_FIX_TREE)
		rb->tree_blocks++;
	else
		rb->data_extents++;
	return 0;
}

static int put_one(void *arg, const struct extent_fix *hdr, struct extent_fix *refs, size_t n)
{
	struct rebuild *rb = arg;

	rb->hdr = *hdr;
	rb->refs = refs;
	rb->nrefs = n;
	return put_extent(rb);
}

static int put_extents(struct rebuild *rb)
{
	int ret = extent_notes_each(rb->r->found, rb->fs, put_one, rb);

	return ret ? ret : put_block_groups(rb, UINT64_MAX);
}

/* Why the rebuild cannot run on what the check found, or NULL. */
static const char *refuse_reason(const struct repair_ctx *r)
{
	static const uint64_t rebuilt[] = REBUILT_TREES;
	const struct fs_info *fs = r->fs;

	if (!r->found->infer_full_backref)
		return "the check did not collect the references for a rebuild";
	if (fs->incompat & BTRFS_FEATURE_INCOMPAT_SIMPLE_QUOTA)
		return "simple quotas keep owner references that only the extent tree holds";
	if (super_log_root(fs_super(fs)))
		return "a log tree is present: mount the filesystem once to replay it (or --clear-log)";
	if (super_flags(fs_super(fs)) & BTRFS_SUPER_FLAG_CHANGING_BG_TREE)
		return "a block-group tree conversion was interrupted: finish it first (btk-convert bg-tree)";
	if (!check_unreadable_only_in(r->found, rebuilt, REBUILT_TREES_COUNT))
		return "blocks of other trees are unreadable: the references they hold are unknown";
	if (repair_notes_unfixable(r->found))
		return "some extents have references that cannot be told apart (see the problems)";
	if (!repair_notes_count(r->found, NOTES_EXTENTS))
		return "no tree references any extent";
	return NULL;
}

int repair_rebuild_extent_tree(struct repair_ctx *r)
{
	struct fs_info *fs = r->fs;
	struct rebuild rb = { .r = r, .fs = fs };
	const char *why = refuse_reason(r);
	uint8_t *sb = trans_super(r->t);
	uint64_t used = 0;
	int ret;

	if (why) {
		r->left = 1;
		return fs_error(fs, -EOPNOTSUPP, "the extent tree cannot be rebuilt: %s", why);
	}
	rb.bgs_in_extent_tree = trans_block_group_tree(r->t) == BTRFS_EXTENT_TREE_OBJECTID;
	rb.nbgs = fs_chunk_count(fs);
	rb.bgs = calloc(rb.nbgs ? rb.nbgs : 1, sizeof(*rb.bgs));
	if (!rb.bgs)
		return -ENOMEM;
	for (size_t i = 0; i < rb.nbgs; i++)
		rb.bgs[i] = (struct bg){ fs_chunk(fs, i)->logical, fs_chunk(fs, i)->length,
					 fs_chunk(fs, i)->type, 0 };
	if ((ret = trans_space_forget(r->t)) || (ret = claim_all(&rb)) ||
	    (ret = keep_old_tree(&rb, &fs->extent_root)) || (ret = keep_old_tree(&rb, &fs->free_space_root)) ||
	    (ret = trans_restart_tree(r->t, BTRFS_EXTENT_TREE_OBJECTID)))
		goto out;
	/* the free-space tree is written whole at commit, whatever the old one holds (or made, when
	 * the superblock claims one that the root tree lacks) */
	if (fs->free_space_root.bytenr)
		ret = trans_restart_tree(r->t, BTRFS_FREE_SPACE_TREE_OBJECTID);
	else if (fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE)
		ret = trans_create_tree(r->t, BTRFS_FREE_SPACE_TREE_OBJECTID);
	if (ret)
		goto out;
	if ((ret = put_extents(&rb)))
		goto out;
	if (!rb.bgs_in_extent_tree && (ret = set_block_groups_used(&rb)))
		goto out;
	for (size_t i = 0; i < rb.nbgs; i++)
		used += rb.bgs[i].base;
	super_set_bytes_used(sb, used);
	repair_say(r, "new extent tree: %" PRIu64 " tree block(s), %" PRIu64 " data extent(s), %zu block group(s) "
		   "(%s); the old extent and free-space trees' %" PRIu64 " block(s) are freed", rb.tree_blocks, rb.data_extents,
		   rb.nbgs, rb.bgs_in_extent_tree ? "items in the extent tree" : "block-group tree",
		   rb.keep_blocks);
	repair_say(r, "block group used, bytes_used and the free-space tree recomputed at commit");
	ret = trans_mark_qgroups_inconsistent(r->t);
	if (ret > 0)
		repair_say(r, "quota groups marked inconsistent ('btrfs quota rescan' recomputes them)");
	ret = ret < 0 ? ret : 0;
	r->changes++;
out:
	free(rb.bgs);
	return ret;
}
