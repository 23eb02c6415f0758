/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Copy-on-write transactions: the one way btk modifies a filesystem.
 *
 * A transaction copies every tree block it changes to a newly allocated
 * place (a block already created by this transaction is changed in place),
 * keeps the extent tree, block group items, the free-space tree and the
 * superblock counters in step, and commits by writing every dirty block to
 * every copy, flushing, then writing the superblocks and flushing again.
 * Until the superblocks are written the old filesystem is untouched: an
 * error or a crash before that point leaves it as it was. A transaction keeps
 * at most a budget of dirty blocks in memory (fs_open_options.trans_dirty_bytes):
 * past it, blocks no path holds are written early to their new places and read
 * back if changed again (libfs/trans_writeback.c). The extent-tree changes it
 * queues are bounded by an eighth of that budget: past it they are applied
 * before the commit, or, in a transaction whose caller edits extent items
 * itself, sorted to temporary files until the commit (libfs/trans_refs.c).
 *
 * Blocks that snapshots share are copied the way the kernel copies them
 * (their children's references move to the copy or to the old block, which
 * then carries FULL_BACKREF); qgroups, if enabled, are then marked
 * inconsistent for the kernel to rescan. When the metadata block groups are
 * full a new chunk is allocated with their profile (single, DUP, RAID1,
 * RAID1C3, RAID1C4).
 *
 * Limits of this version: RAID5/6 metadata is not written, no new RAID0/10
 * chunks, and a tree whose blocks snapshots share is not deleted. */
#ifndef BTK_TRANS_H
#define BTK_TRANS_H

#include <stdbool.h>
#include <stdint.h>
#include <btk/fs.h>
#include <btk/tree.h>

struct trans;

/* Begin a transaction on a filesystem opened writable. */
int trans_start(struct fs_info *fs, struct trans **out);
/* What a transaction may do that trans_start refuses. */
struct trans_options {
	/* The filesystem has a log tree: start anyway, and commit superblocks
	 * without it (log_root 0), losing what was fsynced since the last
	 * commit. Its blocks have no extent items: the caller keeps them
	 * (trans_space_keep_until_commit) so that no new block lands on them
	 * and the old log stays replayable until the commit. */
	bool drop_log_tree;
};
/* trans_start with options (NULL: none). */
int trans_start_with(struct fs_info *fs, const struct trans_options *opts, struct trans **out);
/* Whether the state of the filesystem lets a transaction start (a log tree
 * to replay, missing devices, damage, an unfinished fsid change refuse it),
 * whether or not it was opened writable: 0, or -errno with the reason in
 * btk_last_error(). Tools ask before work that would be wasted (or a dry run). */
int trans_check_state(struct fs_info *fs);
/* Make everything durable; the transaction is freed whatever the result. */
int trans_commit(struct trans *t);
/* Forget every change; nothing the committed filesystem uses has been
 * overwritten (blocks written before the commit to bound the memory of a
 * large transaction went to space it leaves free). */
void trans_abort(struct trans *t);
uint64_t trans_transid(const struct trans *t);
/* For a repair whose file extents may point where no extent item is (it
 * rewrites them, and the references are recounted after): copying a shared
 * leaf then leaves out the references of those file extents instead of
 * failing on them. */
void trans_tolerate_dangling_file_extents(struct trans *t);

/* The current root of a tree as this transaction sees it. */
int trans_get_root(struct trans *t, uint64_t objectid, struct tree_root_ptr *out);
/* Point a tree (not the root or chunk tree) at another root block, one it
 * already holds (its root item named a wrong one): the transaction reads the
 * tree from there, and the commit writes the root item. 0 or -errno. */
int trans_set_root(struct trans *t, const struct tree_root_ptr *ptr);

/* Root a tree the committed root tree has no root item for at ptr, a block it
 * already holds, once the caller inserted its root item in this transaction
 * (the item was lost to damage): the transaction reads the tree from there,
 * the commit writes the item, and the filesystem follows. -EEXIST when the
 * transaction knows the tree already. */
int trans_adopt_root(struct trans *t, const struct tree_root_ptr *ptr);

/* Search for key, copying on write every block on the path, and make room:
 * ins_len > 0 guarantees that many bytes (item header + data) fit in the
 * leaf; ins_len < 0 lets underfull blocks be merged. Returns 0 when the key
 * exists (path at it), 1 when not (path at the insert position), -errno. */
int trans_search(struct trans *t, uint64_t tree, const struct btrfs_key *key, int ins_len,
		 struct tree_path *path);

/* Insert one item (key must not exist): -EEXIST if it does. */
int trans_insert_item(struct trans *t, uint64_t tree, const struct btrfs_key *key, const void *data,
		      uint32_t size);
/* Delete the item at key: -ENOENT if absent. */
int trans_delete_item(struct trans *t, uint64_t tree, const struct btrfs_key *key);
/* Replace the data of an existing item (size may change). */
int trans_update_item(struct trans *t, uint64_t tree, const struct btrfs_key *key, const void *data,
		      uint32_t size);
/* Pointer to the data of the item at key in a block already copied for this
 * transaction, to change fields in place. Valid until the next tree operation. */
int trans_item_for_update(struct trans *t, uint64_t tree, const struct btrfs_key *key, uint8_t **data,
			  uint32_t *size, struct tree_path *path);

/* Create an empty tree (a leaf, and a root item in the root tree). */
int trans_create_tree(struct trans *t, uint64_t objectid);
/* Delete a whole tree: free its blocks and remove its root item. */
int trans_delete_tree(struct trans *t, uint64_t objectid);
/* The same for a tree no snapshot shares whose blocks may be unreadable (a
 * tree about to be rebuilt from others): the blocks below an unreadable one
 * are found in the committed extent tree. *unreadable: blocks not read. */
int trans_delete_damaged_tree(struct trans *t, uint64_t objectid, uint64_t *unreadable);
/* Remove the pointer under key to the block bytenr at child_level of tree
 * (an unreadable block with no good copy), without reading that block; the
 * nodes above it are copied, the tree shrinks when its root keeps one pointer.
 * -ENOENT when no such pointer exists. */
int trans_drop_child(struct trans *t, uint64_t tree, unsigned child_level, const struct btrfs_key *key,
		     uint64_t bytenr);

/* Copy the block bytenr at level of tree (key: its parent's key for it;
 * unused for the root) to a new block as block_read gives it: a damaged
 * block's salvaged view (btk/block_salvage.h) becomes a valid block, its
 * parent's pointer gets the new generation and the block's first key. A
 * block left with no entries is dropped from its parent instead (*emptied). */
int trans_rewrite_block(struct trans *t, uint64_t tree, unsigned level, const struct btrfs_key *key, uint64_t bytenr,
			bool *emptied);
/* The same for a block whose header names a wrong owner: its references are
 * weighed as those of a block that tree `owner` made (the copy in tree is
 * tree's, as every copy is). */
int trans_rewrite_block_owned(struct trans *t, uint64_t tree, unsigned level, const struct btrfs_key *key,
			      uint64_t bytenr, uint64_t owner, bool *emptied);

/* The tree that holds block group items as this transaction will commit it:
 * the block-group tree when the superblock it will write says so, else the
 * extent tree. */
uint64_t trans_block_group_tree(struct trans *t);

/* A repair created (used) or deleted (!used) the extent item of
 * [bytenr, bytenr+len), a tree block or data: keep the allocator and the
 * free-space tree in step (deleted space is not reused before the commit).
 * Block group used and bytes_used are the caller's to set. Claim created
 * extents before changing any tree, so no new block lands on them. */
int trans_extent_space(struct trans *t, uint64_t bytenr, uint64_t len, bool used);

/* Quota numbers no longer follow from what this transaction committed (it
 * changed extent references or what subvolumes share): set the INCONSISTENT
 * flag of the qgroup status item, as the kernel does. 1 when quotas are on
 * (the flag is set), 0 without quotas or with simple quotas, or -errno. */
int trans_mark_qgroups_inconsistent(struct trans *t);

/* Rebuilding the extent tree (btk-check --rebuild-extent-tree): from now on
 * every block group's used space is only what trans_extent_space() claims
 * (plus the superblock stripes), not what the committed trees say, and every
 * group's free-space-tree entries are rewritten at commit. Call first. */
int trans_space_forget(struct trans *t);
/* [bytenr, bytenr+len) held a block of a tree being replaced: not reused
 * before the commit, free after it (unless claimed used). */
int trans_space_keep_until_commit(struct trans *t, uint64_t bytenr, uint64_t len);
/* Start tree objectid again from one empty leaf, leaving its old blocks as
 * they are: the caller accounts for their space. */
int trans_restart_tree(struct trans *t, uint64_t objectid);

/* The superblock image the commit will write (to change label, flags, ...). */
uint8_t *trans_super(struct trans *t);

/* The logical ranges of the chunk starting at `logical` whose stripes hold a
 * superblock copy: whole stripe_len pieces (clipped to the chunk) that never
 * hold an extent and that the free-space tree does not count as free. Fills
 * up to max starts/lens (ranges may repeat when several stripes put a copy at
 * the same place) and returns how many, or -ENOENT when no chunk starts there. */
int fs_super_stripe_ranges(struct fs_info *fs, uint64_t logical, uint64_t *starts, uint64_t *lens,
			   unsigned max);

#endif
