/* Internals shared by the transaction files (trans*.c, alloc.c, extent_refs.c,
 * commit.c). Not part of the library surface. */
#ifndef BTK_TRANS_INTERNAL_H
#define BTK_TRANS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "libfs/block.h"
#include "libfs/trans.h"

struct ebitmap;

/* A tree root as the transaction sees it. */
struct trans_root {
	struct tree_root_ptr ptr;
	bool changed;           /* its root item (or superblock pointer) must be rewritten */
	int64_t bytes_delta;    /* change of the tree's size, for root_item.bytes_used */
	bool created;           /* made by this transaction: no root item yet */
	bool deleted;
};

/* A metadata (or system, or mixed) block group the allocator may use. */
struct alloc_group {
	uint64_t start, length, flags;
	struct ebitmap *used;   /* extents and superblock stripes: not free */
	int64_t used_delta;     /* bytes allocated minus bytes freed */
	int64_t written_delta;  /* the part of used_delta already in the block group item */
	bool fst_stale;         /* its free-space tree entries must be rewritten */
	uint64_t cursor;
};

enum ref_op { REF_ADD, REF_DROP };

/* A change to the extent tree, queued and applied at commit. */
struct delayed_ref {
	enum ref_op op;
	uint64_t bytenr;
	uint64_t root;
	uint8_t level;
	struct btrfs_key first_key; /* for non-skinny tree block info */
};

struct trans {
	struct fs_info *fs;
	uint64_t transid;
	uint8_t super[BTRFS_SUPER_INFO_SIZE];
	uint8_t chunk_tree_uuid[BTRFS_UUID_SIZE]; /* stamped into new blocks */

	struct tree_block **dirty;  /* blocks to write; the transaction holds a reference */
	size_t ndirty, dirty_cap;

	struct trans_root *roots;
	size_t nroots, roots_cap;

	struct delayed_ref *refs;
	size_t nrefs, refs_cap;

	struct alloc_group *groups;
	size_t ngroups;
	struct ebitmap *pinned;     /* freed by this transaction: not reusable before commit */
	uint64_t alloc_events;      /* allocations + frees, to detect a stable commit loop */
	int64_t bytes_used_delta;
	bool aborted;
};

/* trans.c */
struct trans_root *trans_root_entry(struct trans *t, uint64_t objectid);
int trans_mark_dirty(struct trans *t, struct tree_block *b);
int trans_queue_ref(struct trans *t, enum ref_op op, uint64_t bytenr, uint64_t root, uint8_t level,
		    const struct btrfs_key *first_key);

/* alloc.c */
int alloc_init(struct trans *t);
void alloc_release(struct trans *t);
/* Allocate a tree block for tree `root` (system chunks for the chunk tree). */
int alloc_tree_block(struct trans *t, uint64_t root, uint64_t *bytenr);
/* A tree block's extent is gone: its space becomes free after the commit. */
int alloc_free_tree_block(struct trans *t, uint64_t bytenr);
struct alloc_group *alloc_group_of(struct trans *t, uint64_t bytenr);
/* Read a group's used space now (the allocator does it on first use; the
 * commit needs it for groups where blocks were only freed). */
int alloc_group_load(struct trans *t, struct alloc_group *g);
struct chunk;
/* A chunk's stripes change: the stripes holding superblock copies move with
 * them, and so does the space the free-space tree must call free. */
int alloc_group_relayout(struct trans *t, const struct chunk *old, const struct chunk *new_layout);

/* trans.c */
void trans_forget_dirty(struct trans *t, struct tree_block *b);
int trans_remove_pending_add(struct trans *t, uint64_t bytenr);

/* extent_refs.c */
int extent_refs_run(struct trans *t);
/* Refuse to copy a block that other trees share (snapshots): 0 if exclusive. */
int extent_block_exclusive(struct trans *t, const struct tree_block *b, uint64_t root);

/* commit.c */
int commit_stabilize(struct trans *t);
int commit_write(struct trans *t);

#endif
