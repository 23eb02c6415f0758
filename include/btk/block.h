/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tree blocks: a cache keyed by logical address under a byte budget (LRU),
 * and a verified read that falls back to the other copies. */
#ifndef BTK_BLOCK_H
#define BTK_BLOCK_H

#include <stdbool.h>
#include <stdint.h>
#include <btk/fs.h>

/* A tree block as the cache lends it (block_read, block_put): its links in
 * the cache are libfs's own (libfs/block.c). */
struct tree_block {
	uint64_t bytenr;
	uint32_t len;
	int refs;
	int mirror;               /* copy the data came from (0-based) */
	bool dirty;               /* created or changed by the open transaction */
	uint8_t *data;
	bool salvaged;            /* the salvaged view of a damaged block (block_salvage.h) */
};

/* What the referrer expects of a block; zero/negative members are not checked. */
struct block_expect {
	uint64_t generation;      /* 0: any */
	int level;                /* -1: any */
	uint64_t owner;           /* 0: any */
	const struct btrfs_key *first_key; /* NULL: any */
	/* The keys of the parent's neighbouring pointers (NULL: none), only for
	 * a salvage: entries outside (lo_key, hi_key) cannot belong here. */
	const struct btrfs_key *lo_key, *hi_key;
};
#define BLOCK_EXPECT_ANY ((struct block_expect){ .generation = 0, .level = -1 })

/* Why one copy of a tree block was rejected. */
enum block_problem {
	BLOCK_OK = 0,
	BLOCK_IO_ERROR,
	BLOCK_DEV_MISSING,
	BLOCK_BAD_CSUM,
	BLOCK_BAD_BYTENR,
	BLOCK_BAD_FSID,
	BLOCK_BAD_GENERATION,
	BLOCK_BAD_LEVEL,
	BLOCK_BAD_OWNER,
	BLOCK_BAD_FIRST_KEY,
	BLOCK_BAD_NRITEMS,
	BLOCK_BAD_ITEMS,          /* item offsets/sizes outside the leaf or overlapping */
	BLOCK_BAD_FLAGS,          /* the header lacks the WRITTEN flag (the kernel refuses it) */
};
const char *block_problem_name(enum block_problem p);

int block_cache_create(struct fs_info *fs, uint64_t budget_bytes);
void block_cache_destroy(struct fs_info *fs);
/* Cache statistics for debugging and benchmarks. */
struct block_cache_stats { uint64_t hits, misses, bytes, peak_bytes, evictions; };
void block_cache_get_stats(struct fs_info *fs, struct block_cache_stats *out);

/* Read and verify a tree block, trying every copy until one is good. Bad copies
 * are reported through fs_note. Returns 0 with a referenced block, or -EUCLEAN /
 * -EIO with btk_last_error() naming each copy's problem. */
int block_read(struct fs_info *fs, uint64_t bytenr, const struct block_expect *expect,
	       struct tree_block **out);
/* Check one specific copy without caching: BLOCK_OK or the first problem found.
 * buf receives the raw data (nodesize bytes). */
enum block_problem block_read_copy(struct fs_info *fs, uint64_t bytenr, int mirror,
				   const struct block_expect *expect, uint8_t *buf);
/* Verify a block image in memory (checksum, header, item layout). */
enum block_problem block_verify(struct fs_info *fs, uint64_t bytenr, const uint8_t *buf,
				const struct block_expect *expect);
/* The part of block_verify a salvage cannot change: checksum, bytenr, fsid,
 * the WRITTEN flag and a level below the maximum. */
enum block_problem block_verify_identity(struct fs_info *fs, uint64_t bytenr, const uint8_t *buf);
/* The layout of a leaf (items packed, in key order) or a node (pointers in
 * key order) as its header level says. */
enum block_problem block_verify_layout(const struct fs_info *fs, const uint8_t *buf);
void block_put(struct fs_info *fs, struct tree_block *block);
/* Take one more reference to a block (a cached, unreferenced one leaves the LRU). */
void block_hold(struct fs_info *fs, struct tree_block *block);
/* Read the child that slot `slot` of node `parent` points at, checking what
 * the pointer promises: its generation, the level below, its first key. */
int block_read_child(struct fs_info *fs, const struct tree_block *parent, unsigned slot,
		     struct tree_block **out);
/* A new zeroed block at bytenr, in the cache with one reference (for the
 * write path: the caller fills the header and marks it dirty). */
int block_create(struct fs_info *fs, uint64_t bytenr, struct tree_block **out);
/* Take a block out of the cache (its extent was freed); drops the caller's
 * reference. Other holders keep a valid but uncached block. */
void block_forget(struct fs_info *fs, struct tree_block *block);
/* Whether a block at bytenr is in the cache (whatever it holds). */
bool block_is_cached(struct fs_info *fs, uint64_t bytenr);

/* Header accessors on a cached block. */
static inline unsigned block_level(const struct tree_block *b) { return header_level(b->data); }
static inline unsigned block_nritems(const struct tree_block *b) { return header_nritems(b->data); }
static inline uint64_t block_owner(const struct tree_block *b) { return header_owner(b->data); }
static inline uint64_t block_generation(const struct tree_block *b) { return header_generation(b->data); }
/* Key of slot in a leaf (items) or node (key pointers). */
void block_key(const struct tree_block *b, unsigned slot, struct btrfs_key *key);

#endif
