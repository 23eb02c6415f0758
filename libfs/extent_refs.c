// SPDX-License-Identifier: LGPL-2.1-or-later
/* Extent-tree references of tree blocks, applied at commit (or earlier, when
 * the queue is long: trans_refs.c). Copying a block queues a reference for
 * the new block and a drop for the old one; applying them changes the extent
 * tree, which copies more blocks and queues more references, until none are
 * left. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "libfs/trans_internal.h"
#include <btk/item_check.h>
#include <btk/tree.h>

/* Copying shared blocks changes how much of each subvolume is exclusive:
 * like the kernel when it cannot account, mark the qgroups inconsistent (a
 * rescan at the next mount fixes the numbers). Simple quotas follow each
 * block's allocation and freeing instead (trans_squota.c). */
int trans_mark_qgroups_inconsistent(struct trans *t)
{
	struct btrfs_key key = { 0, BTRFS_QGROUP_STATUS_KEY, 0 };
	struct tree_root_ptr quota;
	struct tree_path path;
	uint8_t *item;
	uint32_t size;
	int ret;

	if (t->qgroups_marked)
		return t->qgroups_inconsistent;
	if (trans_get_root(t, BTRFS_QUOTA_TREE_OBJECTID, &quota) != 0) {
		btk_error_clear();
		return 0;
	}
	t->qgroups_marked = true;
	tree_path_init(&path);
	ret = trans_item_for_update(t, BTRFS_QUOTA_TREE_OBJECTID, &key, &item, &size, &path);
	if (ret == 0 && item_has_fixed(key.type, size) &&
	    (qgroup_status_flags(item) & BTRFS_QGROUP_STATUS_FLAG_ON) &&
	    !(qgroup_status_flags(item) & BTRFS_QGROUP_STATUS_FLAG_SIMPLE_MODE)) {
		qgroup_status_set_flags(item, qgroup_status_flags(item) | BTRFS_QGROUP_STATUS_FLAG_INCONSISTENT);
		t->qgroups_inconsistent = true;
	}
	tree_path_release(t->fs, &path);
	if (ret)
		return ret == -ENOENT ? 0 : ret;
	return t->qgroups_inconsistent;
}

static int cow_refs(struct trans *t, const struct tree_block *b, uint64_t root, uint64_t owner, bool *shared)
{
	struct extent_target x = { .bytenr = b->bytenr, .tree = true, .level = (uint8_t)block_level(b) };
	uint64_t refs = 0, flags = 0;
	int ret;

	*shared = false;
	/* a balance leaves the RELOC flag on the blocks it merged into subvolumes:
	 * only the flag's "may be shared" is left, and the references are read anyway */
	if (root == BTRFS_TREE_RELOC_OBJECTID || owner == BTRFS_TREE_RELOC_OBJECTID)
		return fs_error(t->fs, -EOPNOTSUPP, "tree block %llu belongs to a relocation tree",
				(unsigned long long)b->bytenr);
	if (key_tree_never_shared(root)) {
		if (owner == root)
			return 0;
		/* a header naming another owner: the tree still owns a block only it references
		 * (the copy takes the tree's id); a block referenced twice may be cross-linked */
		ret = backref_lookup(t, &x, &refs, &flags);
		if (!ret && refs != 1)
			ret = fs_error(t->fs, -EUCLEAN, "tree block %llu of tree %llu has owner %llu",
				       (unsigned long long)b->bytenr, (unsigned long long)root,
				       (unsigned long long)owner);
		return ret;
	}
	/* the transaction's view: earlier copies in it changed references */
	ret = backref_lookup(t, &x, &refs, &flags);
	if (ret)
		return ret;
	if (refs == 0)
		return fs_error(t->fs, -EUCLEAN, "tree block %llu has no references", (unsigned long long)b->bytenr);
	if (refs > 1) {
		if (owner == root && !(flags & BTRFS_BLOCK_FLAG_FULL_BACKREF)) {
			/* the other trees keep the old block: its children get
			 * references by it, and the copy inherits root's */
			ret = backref_mod_children(t, b, owner, true, true);
			if (!ret)
				ret = backref_set_flags(t, &x, BTRFS_BLOCK_FLAG_FULL_BACKREF);
		} else {
			ret = backref_mod_children(t, b, root, false, true);
		}
		if (!ret && (ret = trans_mark_qgroups_inconsistent(t)) > 0)
			ret = 0;
		*shared = ret == 0;
		return ret;
	}
	if (flags & BTRFS_BLOCK_FLAG_FULL_BACKREF) {
		/* root is the last user: the children move from the old block's
		 * references to root's */
		ret = backref_mod_children(t, b, root, false, true);
		return ret ? ret : backref_mod_children(t, b, owner, true, false);
	}
	if (owner != root)
		return fs_error(t->fs, -EOPNOTSUPP, "tree block %llu of subvolume %llu is owned by %llu without "
				"a full back reference", (unsigned long long)b->bytenr, (unsigned long long)root,
				(unsigned long long)owner);
	return 0;
}

/* The extent edits of copying a shared block are libfs's own: they neither
 * hold the queue back (refs_keep) nor apply it in the middle. */
int extent_cow_refs(struct trans *t, const struct tree_block *b, uint64_t root, uint64_t owner, bool *shared)
{
	int ret;

	trans_refs_busy_begin(t);
	ret = cow_refs(t, b, root, owner, shared);
	trans_refs_busy_end(t);
	return ret;
}

int extent_drop_shared(struct trans *t, const struct tree_block *b, uint64_t root)
{
	struct extent_target x = { .bytenr = b->bytenr, .tree = true, .level = (uint8_t)block_level(b) };
	struct backref r = { BTRFS_TREE_BLOCK_REF_KEY, root, 0, 0 };
	uint64_t left;
	int ret;

	trans_refs_busy_begin(t);
	ret = backref_drop(t, &x, &r, &left);
	trans_refs_busy_end(t);
	return ret;
}

static int ref_add(struct trans *t, const struct delayed_ref *r)
{
	struct fs_info *fs = t->fs;
	uint8_t item[sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_tree_block_info) +
		     sizeof(struct btrfs_extent_inline_ref)];
	uint8_t *p = item;
	struct btrfs_key key;
	bool skinny = fs->incompat & BTRFS_FEATURE_INCOMPAT_SKINNY_METADATA;
	int ret;

	memset(item, 0, sizeof(item));
	extent_set_refs(p, 1);
	extent_set_generation(p, t->transid);
	extent_set_flags(p, BTRFS_EXTENT_FLAG_TREE_BLOCK);
	p += sizeof(struct btrfs_extent_item);
	if (skinny) {
		key = (struct btrfs_key){ r->bytenr, BTRFS_METADATA_ITEM_KEY, r->level };
	} else {
		/* the block is one of this transaction's, in the cache */
		struct tree_block *b;
		struct btrfs_key first = { 0, 0, 0 };
		ret = block_read(fs, r->bytenr, &BLOCK_EXPECT_ANY, &b);
		if (ret)
			return ret;
		if (block_nritems(b))
			block_key(b, 0, &first);
		block_put(fs, b);
		key = (struct btrfs_key){ r->bytenr, BTRFS_EXTENT_ITEM_KEY, fs->nodesize };
		key_to_disk(tree_block_info_key_ptr(p), &first);
		tree_block_info_set_level(p, r->level);
		p += sizeof(struct btrfs_tree_block_info);
	}
	inline_ref_set_type(p, BTRFS_TREE_BLOCK_REF_KEY);
	inline_ref_set_offset(p, r->root);
	p += sizeof(struct btrfs_extent_inline_ref);
	ret = trans_insert_item(t, BTRFS_EXTENT_TREE_OBJECTID, &key, item, (uint32_t)(p - item));
	if (ret == -EEXIST)
		return fs_error(fs, -EUCLEAN, "tree block %llu already has an extent item",
				(unsigned long long)r->bytenr);
	return ret ? ret : trans_squota_tree_block(t, r->root, t->transid, true);
}

static int ref_drop(struct trans *t, const struct delayed_ref *r)
{
	struct fs_info *fs = t->fs;
	struct btrfs_key key = { r->bytenr, BTRFS_METADATA_ITEM_KEY, r->level };
	struct btrfs_key keyed_ref = { r->bytenr, BTRFS_TREE_BLOCK_REF_KEY, r->root };
	uint8_t *data;
	uint32_t size;
	uint64_t generation;
	struct tree_path path;
	int ret;

	tree_path_init(&path);
	ret = trans_item_for_update(t, BTRFS_EXTENT_TREE_OBJECTID, &key, &data, &size, &path);
	if (ret == -ENOENT) {
		key = (struct btrfs_key){ r->bytenr, BTRFS_EXTENT_ITEM_KEY, fs->nodesize };
		ret = trans_item_for_update(t, BTRFS_EXTENT_TREE_OBJECTID, &key, &data, &size, &path);
	}
	if (ret) {
		tree_path_release(fs, &path);
		return ret == -ENOENT ? fs_error(fs, -EUCLEAN, "freed tree block %llu has no extent item",
						 (unsigned long long)r->bytenr) : ret;
	}
	if (size < sizeof(struct btrfs_extent_item) || extent_refs(data) != 1) {
		tree_path_release(fs, &path);
		return fs_error(fs, -EOPNOTSUPP, "tree block %llu has %llu references: shared blocks are "
				"not supported yet", (unsigned long long)r->bytenr,
				(unsigned long long)(size >= 8 ? extent_refs(data) : 0));
	}
	generation = extent_generation(data);
	tree_path_release(fs, &path);
	ret = trans_delete_item(t, BTRFS_EXTENT_TREE_OBJECTID, &key);
	if (ret)
		return ret;
	/* an old-style keyed reference may stand beside the item */
	ret = trans_delete_item(t, BTRFS_EXTENT_TREE_OBJECTID, &keyed_ref);
	if (ret && ret != -ENOENT)
		return ret;
	if ((ret = trans_squota_block_freed(t, r->bytenr, generation, r->root)))
		return ret;
	return trans_refs_free_block(t, r->bytenr);
}

/* Apply the queue, and what applying it queues, until nothing is left. */
int extent_refs_run(struct trans *t)
{
	int ret = 0;

	trans_refs_busy_begin(t);
	while (!ret && trans_refs_queued(t)) {
		struct refs_batch batch;
		struct delayed_ref r;

		if ((ret = trans_refs_take(t, &batch)))
			break;
		while ((ret = trans_refs_batch_next(t, &batch, &r)) == 1)
			ret = r.op == REF_ADD ? ref_add(t, &r) : ref_drop(t, &r);
		trans_refs_batch_free(&batch);
	}
	trans_refs_busy_end(t);
	return ret;
}
