/* The walk over the items of one subvolume tree (phase_fs.c), the per-item
 * checks (phase_fs_items.c) and the name joins run afterwards (phase_fs_join.c). */
#ifndef BTK_CHECK_PHASE_FS_H
#define BTK_CHECK_PHASE_FS_H

#include "check/fs_check.h"
#include "check/fs_lost.h"
#include "libfs/key.h"

/* What the items of the inode being streamed add up to. Items of one inode
 * are contiguous in key order, the inode item first. */
struct inode_state {
	uint64_t ino;
	bool have_item;
	uint32_t mode, nlink;
	uint8_t ftype;
	uint64_t isize, nbytes;
	uint64_t names;          /* inode refs + extrefs */
	uint64_t dir_size;       /* name lengths of its dir items and dir indexes */
	uint64_t found_bytes;    /* what nbytes should be, from the file extents */
	uint64_t extent_end;     /* end of the last file extent */
};

struct fs_walk {
	struct check_ctx *ctx;
	const struct tree_root_ptr *root;
	uint64_t root_dirid;
	bool no_holes;
	struct recsort *by_index;    /* link_rec by (root, dir, index): refs vs dir indexes */
	struct recsort *by_hash;     /* link_rec by (root, dir, hash, name): refs vs dir items */
	struct recsort *orphans;     /* link_rec by (root, ino): nameless inodes vs orphan items */
	struct recsort *subvols;     /* root_rec: dir entries naming subvolumes */
	struct inode_state ino;
	uint64_t inodes;
	uint64_t items;              /* for the cancel check */
	struct fs_lost *lost;        /* key ranges of unreadable blocks (fs_lost.h) */
	int err;                     /* first operational error (recsort) */
};

/* Per-item checks; each updates w->ino and emits join records. */
void fs_item_inode(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size);
void fs_item_inode_ref(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size);
void fs_item_inode_extref(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size);
void fs_item_dir_entries(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size);
void fs_item_file_extent(struct fs_walk *w, const struct btrfs_key *k, const uint8_t *d, uint32_t size);
/* The inode's items are all seen: the checks over all of them. */
void fs_inode_finish(struct fs_walk *w);
void fs_emit_link(struct fs_walk *w, struct recsort *rs, const struct link_rec *r);

/* Comparators of the three link sorters, and their group predicates. */
int link_cmp_index(const void *a, const void *b, void *arg);
int link_cmp_hash(const void *a, const void *b, void *arg);
int link_cmp_orphan(const void *a, const void *b, void *arg);

/* Every item of root in key order through fn (with w as arg), past
 * unreadable blocks: each is reported and its key range recorded in w->lost.
 * 0, fn's nonzero value, or -errno (an unreadable root block: the whole tree
 * recorded lost; fs->errmsg says why). */
int fs_walk_items(struct fs_walk *w, const struct tree_root_ptr *root, tree_item_fn fn);

/* After every tree was walked: the joins. */
int fs_join_links(struct check_ctx *ctx, struct fs_walk *w, const struct fs_roots *roots);

#endif
