/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Internals shared by the transaction files (trans*.c, alloc.c, chunk_alloc.c,
 * dev_space.c, chunk_edit.c, extent_refs.c, backref.c, commit.c). Not part of
 * the library surface: programs use trans.h (check/repair_log.c included this
 * file to get past trans_start; trans_start_with is the API for that now). */
#ifndef BTK_TRANS_INTERNAL_H
#define BTK_TRANS_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/backref.h>
#include <btk/block.h>
#include <btk/trans.h>

struct ebitmap;
struct recsort;

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

/* A chunk this transaction allocated for tree blocks: in the chunk map and
 * the allocator at once; its items are written at commit (chunk_alloc.c). */
#define NEW_CHUNK_MAX_STRIPES 4
struct new_chunk {
	uint64_t logical, length, type, stripe_size;
	unsigned nstripes;
	uint64_t devid[NEW_CHUNK_MAX_STRIPES], physical[NEW_CHUNK_MAX_STRIPES];
	bool items_written;
};

enum ref_op { REF_ADD, REF_DROP };

/* A change to the extent tree, queued (trans_refs.c) and applied in bytenr
 * order at commit, or before it when the queue outgrows its limit. */
struct delayed_ref {
	uint64_t bytenr;
	uint64_t root;
	uint8_t op;                 /* enum ref_op */
	uint8_t level;
};

/* The parts of a transaction, each a struct defined in (and only touched by)
 * the file that owns it; the others go through that file's functions. */
struct trans_writeback;     /* trans_writeback.c: dirty blocks, early writeback */
struct trans_roots;         /* trans_roots.c: the trees' roots as this transaction sees them */
struct trans_ref_queue;     /* trans_refs.c: queued extent-tree changes */
struct trans_alloc;         /* alloc.c: block groups the allocator uses, pinned space */
struct trans_alloc_chunks;  /* chunk_alloc.c: chunks this transaction allocated */
struct trans_squota;        /* trans_squota.c: simple-quota changes of tree blocks */

struct trans {
	struct fs_info *fs;
	uint64_t transid;
	uint8_t super[BTRFS_SUPER_INFO_SIZE];
	uint8_t chunk_tree_uuid[BTRFS_UUID_SIZE]; /* stamped into new blocks */
	bool committed;             /* the superblocks were written */
	bool qgroups_marked;        /* qgroups were marked inconsistent (shared blocks copied) */
	bool qgroups_inconsistent;  /* ... and quotas were on: the flag is set */
	bool dangling_file_extents; /* trans_tolerate_dangling_file_extents */

	struct trans_writeback *writeback;
	struct trans_roots *root_set;
	struct trans_ref_queue *ref_queue;
	struct trans_alloc *alloc;
	struct trans_alloc_chunks *alloc_chunks;
	struct trans_squota *squota;
};

/* What the parts report when a transaction ends (trans.c adds them to the
 * fs's statistics and, with $BTK_TRANS_STATS, a note). */
struct trans_figures {
	size_t peak_dirty;
	uint64_t dirty_budget, written_early, adopted_again;
	size_t peak_refs, refs_limit;
	uint64_t refs_early_runs, refs_applied_early, refs_spilled_total;
};

/* trans_roots.c */
int trans_roots_init(struct trans *t);
void trans_roots_release(struct trans *t);
/* The entry of tree objectid, looked up in the committed trees the first
 * time (NULL: no such tree, with a message, or out of memory). */
struct trans_root *trans_root_entry(struct trans *t, uint64_t objectid);
/* The -errno for a NULL trans_root_entry(): -ENOMEM or -ENOENT. */
int trans_root_entry_err(void);
/* A new zeroed entry (a tree made by this transaction); NULL: out of memory. */
struct trans_root *trans_root_add(struct trans *t);
/* The entries so far, for the commit. */
size_t trans_root_count(const struct trans *t);
struct trans_root *trans_root_at(struct trans *t, size_t i);

/* trans_writeback.c: the dirty list */
int trans_writeback_init(struct trans *t);
int trans_mark_dirty(struct trans *t, struct tree_block *b);

/* trans_refs.c */
int trans_refs_init(struct trans *t);
void trans_refs_release(struct trans *t);
/* libfs edits extent items itself (or applies the queue): no early run of
 * the queue until the matching trans_refs_busy_end. */
void trans_refs_busy_begin(struct trans *t);
void trans_refs_busy_end(struct trans *t);
/* The caller gives the extent tree its items: the queue waits for the commit. */
void trans_refs_keep_until_commit(struct trans *t);
void trans_refs_figures(const struct trans *t, struct trans_figures *f);
int trans_queue_ref(struct trans *t, enum ref_op op, uint64_t bytenr, uint64_t root, uint8_t level);
/* Cancel a queued, not yet applied REF_ADD: 1 if one was found. */
int trans_remove_pending_add(struct trans *t, uint64_t bytenr);
/* Live entries queued (spilled ones included). */
uint64_t trans_refs_queued(const struct trans *t);
/* The queue so far, cancelled entries left out, in bytenr order (*out NULL
 * when empty; the caller frees it); the transaction starts a new queue. With
 * entries spilled, `next` pulls them instead (trans_refs_batch_next). */
struct refs_batch {
	struct delayed_ref *v;
	size_t n, i;
	struct recsort *spill;
};
int trans_refs_take(struct trans *t, struct refs_batch *b);
/* The next entry of a batch still to apply (a REF_ADD whose block is gone by
 * now is skipped): 1 with *r, 0 at the end, -errno. */
int trans_refs_batch_next(struct trans *t, struct refs_batch *b, struct delayed_ref *r);
void trans_refs_batch_free(struct refs_batch *b);
/* A caller edits extent items of tree `tree` under key type `type`: from now
 * on the queue waits for the commit (see refs_keep). */
void trans_refs_note_edit(struct trans *t, uint64_t tree, uint8_t type);
/* At the start of a tree operation: apply the queue when it is over its limit. */
int trans_refs_maybe(struct trans *t);
/* The extent item of tree block bytenr is gone: free its space now, or at the
 * commit when the queue is applied early. */
int trans_refs_free_block(struct trans *t, uint64_t bytenr);
/* At the commit: free the space of the blocks dropped early. */
int trans_refs_free_deferred(struct trans *t);

/* alloc.c */
int alloc_init(struct trans *t);
void alloc_release(struct trans *t);
/* The block groups tracked so far, for the commit. */
size_t alloc_group_count(const struct trans *t);
struct alloc_group *alloc_group_at(struct trans *t, size_t i);
/* Allocations and frees so far (a commit round that changes none is stable). */
uint64_t alloc_events(const struct trans *t);
void alloc_note_event(struct trans *t);
/* Bytes allocated minus bytes freed: the superblock's bytes_used changes by it. */
int64_t alloc_bytes_used_delta(const struct trans *t);
/* Allocate a tree block for tree `root` (system chunks for the chunk tree). */
int alloc_tree_block(struct trans *t, uint64_t root, uint64_t *bytenr);
/* A tree block's extent is gone: its space becomes free after the commit. */
int alloc_free_tree_block(struct trans *t, uint64_t bytenr);
struct alloc_group *alloc_group_of(struct trans *t, uint64_t bytenr);
/* Track one more block group (NULL: out of memory). */
struct alloc_group *alloc_add_group(struct trans *t, uint64_t start, uint64_t length, uint64_t flags);
/* Read a group's used space now (the allocator does it on first use; the
 * commit needs it for groups where blocks were only freed). */
int alloc_group_load(struct trans *t, struct alloc_group *g);
struct chunk;
/* A chunk's stripes change: the stripes holding superblock copies move with
 * them, and so does the space the free-space tree must call free. */
int alloc_group_relayout(struct trans *t, const struct chunk *old, const struct chunk *new_layout);

/* trans_writeback.c */
void trans_forget_dirty(struct trans *t, struct tree_block *b);

/* chunk_alloc.c */
int chunk_alloc_init(struct trans *t);
void chunk_alloc_release(struct trans *t);
/* This transaction allocated chunks (the chunk map must be read again when
 * it is dropped). */
bool chunk_alloc_any(const struct trans *t);
/* The chunk at logical is one this transaction allocated. */
bool chunk_alloc_is_new(const struct trans *t, uint64_t logical);
/* Some allocated chunk's items are still to be written. */
bool chunk_alloc_items_pending(const struct trans *t);
/* Every block group that can hold tree blocks of `root` is full: allocate a
 * new chunk with the profile of the existing ones (metadata, or system for
 * the chunk tree) on free device space, usable at once. */
int chunk_alloc_for_tree(struct trans *t, uint64_t root);
/* Write the items of the chunks allocated so far (chunk item, system chunk
 * array, dev extents, devices' bytes_used, block group item). */
int chunk_alloc_write_items(struct trans *t);

/* extent_refs.c */
int extent_refs_run(struct trans *t);
/* Before block `old` of tree `root` is copied: move the references of its
 * children the way the kernel does when snapshots share it (owner: the tree
 * that made old, its header's owner unless known wrong). *shared: other
 * trees keep referencing old, so the caller drops only root's reference to
 * it (extent_drop_shared) instead of freeing it. */
int extent_cow_refs(struct trans *t, const struct tree_block *old, uint64_t root, uint64_t owner, bool *shared);
/* Drop tree `root`'s reference to a shared block it no longer uses. */
int extent_drop_shared(struct trans *t, const struct tree_block *old, uint64_t root);

/* backref.c: one reference more or less on an existing extent, at once. */
struct extent_target {
	uint64_t bytenr;
	bool tree;              /* a tree block (level) or a data extent (num_bytes) */
	uint8_t level;
	uint64_t num_bytes;
};
int backref_lookup(struct trans *t, const struct extent_target *x, uint64_t *refs, uint64_t *flags);
int backref_set_flags(struct trans *t, const struct extent_target *x, uint64_t flags);
int backref_add(struct trans *t, const struct extent_target *x, const struct backref *r);
/* *refs_left: references that remain; at 0 a tree block's extent is freed. */
int backref_drop(struct trans *t, const struct extent_target *x, const struct backref *r, uint64_t *refs_left);
/* Add (or drop) one reference to every child of b (tree blocks below a node,
 * data extents of a leaf's file extents): by `owner` or, with full, by b itself. */
int backref_mod_children(struct trans *t, const struct tree_block *b, uint64_t owner, bool full, bool add);

/* trans_squota.c: with simple quotas on, a tree block of tree `owner` made
 * (added) or freed, its extent item of `generation`, changes the numbers of
 * owner's qgroups (from the quota's enable generation on; subvolumes only). */
int trans_squota_tree_block(struct trans *t, uint64_t owner, uint64_t generation, bool added);
/* The same for a freed block, its owner read from its header (`root`, the tree
 * that referenced it, when unreadable). */
int trans_squota_block_freed(struct trans *t, uint64_t bytenr, uint64_t generation, uint64_t root);
/* At commit: add the changes so far to the qgroup info items. */
int trans_squota_apply(struct trans *t);
void trans_squota_release(struct trans *t);

/* commit.c */
int commit_stabilize(struct trans *t);
int commit_write(struct trans *t);

/* trans_writeback.c */
/* The budget of dirty bytes for a new transaction. */
uint64_t trans_dirty_budget(const struct fs_info *fs);
/* Over budget: write the dirty blocks no path holds and drop them from the
 * dirty list (call only between tree operations, when every tree is whole). */
int trans_writeback_maybe(struct trans *t);
/* Checksum a dirty block and write it to every copy. */
int trans_write_block(struct trans *t, struct tree_block *b);
/* 1 when b is this transaction's own block (dirty, or written early: it is
 * made dirty again, to be changed in place), 0 when a committed block, -errno. */
int trans_adopt_block(struct trans *t, struct tree_block *b);
/* Before the commit's flush: blocks written early under a chunk map whose
 * copies changed since are written again to every copy. */
int trans_writeback_finish(struct trans *t);
/* Write every dirty block (the commit, before its flush). */
int trans_writeback_write_dirty(struct trans *t);
/* The commit is durable: the dirty blocks are clean now. */
void trans_writeback_clean(struct trans *t);
/* Let go of the dirty blocks (after the commit). */
void trans_writeback_put_dirty(struct trans *t);
/* The transaction is dropped: its dirty blocks must not stay in the cache. */
void trans_writeback_forget_dirty(struct trans *t);
void trans_writeback_figures(const struct trans *t, struct trans_figures *f);
/* The transaction ends: the dirty list is let go, cached copies of blocks
 * an aborted transaction wrote early are dropped. */
void trans_writeback_release(struct trans *t, bool aborted);

#endif
