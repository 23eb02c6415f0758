/* SPDX-License-Identifier: GPL-2.0-only */
/* The walk over the items of one subvolume tree (phase_fs.c), the per-item
 * checks (phase_fs_items.c) and the name joins run afterwards (phase_fs_join.c). */
#ifndef BTK_CHECK_PHASE_FS_H
#define BTK_CHECK_PHASE_FS_H

#include "check/fs_check.h"
#include "check/fs_lost.h"
#include "check/shared_reports.h"
#include "check/snap_diff.h"
#include "check/snap_plan.h"
#include <btk/block.h>
#include <btk/key.h>

/* What the items of the inode being streamed add up to. Items of one inode
 * are contiguous in key order, the inode item first. */
struct inode_state {
	uint64_t ino;
	bool have_item;
	uint32_t mode, nlink;
	uint8_t ftype;
	uint64_t isize, nbytes;
	uint64_t flags;           /* the inode item's (BTRFS_INODE_*) */
	uint64_t names;          /* inode refs + extrefs */
	uint64_t dir_size;       /* name lengths of its dir items and dir indexes */
	uint64_t found_bytes;    /* what nbytes should be, from the file extents */
	uint64_t extent_end;     /* end of the last file extent */
	bool regular_extents;    /* a file extent that is not inline */
};

/* The join records of one delta for the three link sorters (by_index,
 * by_hash, orphans), at most `max` each (DELTA_LINKS_MAX, less under a small
 * --memory-limit: delta_links_budget); past that they go to the sorters as
 * they come. */
#define DELTA_LINKS_MAX (64u * 1024)
struct delta_links {
	struct link_rec *v[3];
	size_t n[3], cap[3];
	size_t max;                  /* records held per sorter at most (0: DELTA_LINKS_MAX) */
	uint64_t cancelled;          /* records that cancelled out */
	uint32_t *tab;               /* the pairing's hash table (snap_delta.c) */
	size_t tabcap;
};
/* The records per sorter a memory limit allows: a thirty-second of it over
 * the three sorters (with the pairing table), at most DELTA_LINKS_MAX. */
size_t delta_links_budget(uint64_t memory_limit);
/* Hold record r for sorter i (0, or -ENOMEM; 1: full, add it to the sorter). */
int delta_links_hold(struct delta_links *d, unsigned i, const struct link_rec *r);

struct fs_walk {
	struct check_ctx *ctx;
	const struct tree_root_ptr *root;
	uint64_t root_dirid;
	bool no_holes;
	bool ino_cache_seen;         /* the deprecated free-inode cache reported in this tree */
	struct recsort *by_index;    /* link_rec by (root, dir, index): refs vs dir indexes */
	struct recsort *by_hash;     /* link_rec by (root, dir, hash, name): refs vs dir items */
	struct recsort *orphans;     /* link_rec by (root, ino): nameless inodes vs orphan items */
	struct recsort *subvols;     /* root_rec: dir entries naming subvolumes */
	struct inode_state ino;
	uint64_t inodes;
	uint64_t items;              /* for the cancel check */
	struct fs_lost *lost;        /* key ranges of unreadable blocks (fs_lost.h) */
	struct shared_reports unreadable; /* their reports, once per block (shared by snapshots) */
	int err;                     /* first operational error (recsort) */
	struct snap_plan *plan;      /* the snapshot lineages (snap_plan.h) */
	uint32_t lineage, seq;       /* root's place in them, put in every join record */
	size_t root_idx;             /* root's index in the roots */
	uint64_t root_inodes0;       /* inodes counted when root was started */
	bool held;                   /* its lineage has other members: per-inode problems are held */
	uint64_t mark_root;          /* nonzero: a delta reads the tree before it: gone records for this root */
	/* a delta: the key ranges of the leaves the tree has alone; only dir
	 * entries there emit records (the others' stand from the tree before) */
	const struct snap_ranges *changed;
	/* a delta: its join records, held until both trees were read, so that a
	 * record found gone and found again cancels out (snap_delta.c) */
	struct delta_links *pending;
	struct delta_links links;    /* what pending points at */
};


/* The walk's view of one item (any tree item, in key order) and the end of
 * the last inode; root set up by fs_walk_set_root (i: its index in the roots). */
int fs_walk_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size);
void fs_walk_set_root(struct fs_walk *w, const struct tree_root_ptr *root, size_t i);
void fs_walk_finish(struct fs_walk *w);

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

/* Where an item walk of one tree is (phase_fs_lost.c): the node at each
 * level (referenced by the tree walk while its children are visited), how
 * many of its children were handed out, and the key its subtree ends before. */
struct fs_item_walk {
	struct fs_walk *w;
	tree_item_fn fn;
	bool count_progress;                        /* progress_add each block (a walk of its own) */
	bool started;
	int stop;                                   /* fn's nonzero value */
	int err;
	const struct tree_block *node[BTRFS_MAX_LEVEL];
	unsigned next[BTRFS_MAX_LEVEL];
	struct btrfs_key hi[BTRFS_MAX_LEVEL];
	bool hi_end[BTRFS_MAX_LEVEL];
};

/* Every item of root in key order through fn (with w as arg), past
 * unreadable blocks: each is reported and its key range recorded in w->lost.
 * 0, fn's nonzero value, or -errno (an unreadable root block: the whole tree
 * recorded lost; btk_error_msg() says why). */
int fs_walk_items(struct fs_walk *w, const struct tree_root_ptr *root, tree_item_fn fn);
/* The same walk driven by another tree walk (phase_trees.c) that hands over
 * every block of root in depth-first order and every unreadable child:
 * fs_items_block returns 0 or -ECANCELED when fn stopped (iw->stop says
 * with what) or a recorded error; fs_items_end takes the tree walk's result
 * and returns what fs_walk_items would have. */
void fs_items_begin(struct fs_item_walk *iw, struct fs_walk *w, tree_item_fn fn, bool count_progress);
int fs_items_block(struct fs_item_walk *iw, const struct tree_block *b);
void fs_items_bad_block(struct fs_item_walk *iw, uint64_t bytenr, int level, const char *why);
int fs_items_end(struct fs_item_walk *iw, const struct tree_root_ptr *root, int walk_ret);

/* The subvolume trees' items fed by the tree-block walk, so that their
 * leaves are read once (phase_fs.c): the live subvolume trees (refs != 0),
 * the fs walk over them and which of them were fed. Lives in ctx->fs_feed
 * from the tree-block phase to the filesystem-tree phase, which walks any
 * tree not fed and joins. */
struct fs_feed {
	struct fs_walk w;
	struct fs_roots roots;
	bool *fed;                  /* per roots.v[] entry */
	int roots_err;              /* the root tree could not be listed: roots_msg */
	char roots_msg[512];
	struct fs_item_walk iw;     /* the tree being fed */
	const struct tree_root_ptr *cur;
	uint64_t fed_blocks;        /* blocks handed over */
	uint64_t shared_blocks;     /* of them, read again (shared with a tree checked before) */
	struct snap_plan plan;      /* which trees are checked as deltas of another (snap_plan.h) */
};
/* Set up ctx->fs_feed (replacing one a run before a repair left): 0 or -ENOMEM. */
int fs_feed_start(struct check_ctx *ctx);
/* The tree walk starts root: true when it is a live subvolume tree not fed
 * yet, whose blocks it must then hand over (all of them, shared ones too). */
bool fs_feed_tree_begin(struct fs_feed *f, const struct tree_root_ptr *root);
/* One block of that tree (shared: read again only for the fs checks). */
int fs_feed_block(struct fs_feed *f, const struct tree_block *b, bool shared);
void fs_feed_bad_block(struct fs_feed *f, uint64_t bytenr, int level, const char *why);
/* The tree walk of it ended with walk_ret: 0, -ECANCELED or an operational error. */
int fs_feed_tree_end(struct fs_feed *f, int walk_ret);
/* The bytes the tree walk reads again for the fed trees, estimated from the
 * root items: all but the largest tree, for snapshots of one another. */
uint64_t fs_feed_shared_estimate(const struct fs_feed *f);

/* After every tree was walked: the joins (progress: bytes of name records
 * joined, after done bytes of the phase). */
int fs_join_links(struct check_ctx *ctx, struct fs_walk *w, const struct fs_roots *roots, uint64_t done);

/* Check member seq of lineage l as a delta against the member before it
 * (snap_delta.c): 0, 1 when it must be checked in full instead, -errno. */
int snap_delta_check(struct fs_feed *f, uint32_t l, uint32_t seq);

#endif
