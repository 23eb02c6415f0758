/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Tree-block salvage: a block whose checksum, bytenr and fsid verify but
 * whose layout or place in the tree does not (item offsets or sizes shifted,
 * overlapping or past the leaf, keys out of order, nritems too large, a level
 * or generation other than the parent's pointer says, a first key other than
 * the parent's key) is turned into the valid block that keeps the most of it.
 * Opt-in per filesystem (fs_info.salvage, on for btk-check): block_read then
 * returns the salvaged view (tree_block.salvaged) instead of failing, and
 * records what it changed in a log the checker reports from; a transaction
 * that copies such a block writes the salvaged view to its new place. */
#ifndef BTK_BLOCK_SALVAGE_H
#define BTK_BLOCK_SALVAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/block.h>

/* What a salvage changed (struct block_salvage.what). */
#define SALVAGE_ITEM_LAYOUT (1u << 0)  /* leaf item offsets/sizes re-laid out, or items past the leaf */
#define SALVAGE_KEY_ORDER   (1u << 1)  /* keys sorted, duplicates or keys outside the parent's range dropped */
#define SALVAGE_LEVEL       (1u << 2)  /* header level replaced by the level the parent expects */
#define SALVAGE_TRANSID     (1u << 3)  /* header generation differs from the parent pointer's */
#define SALVAGE_FIRST_KEY   (1u << 4)  /* the parent's key is not the (salvaged) first key */
#define SALVAGE_NRITEMS     (1u << 5)  /* nritems other than the items the block holds */

struct block_salvage {
	uint64_t bytenr;
	uint64_t owner;
	unsigned what;
	uint8_t header_level, level;         /* as found, as salvaged */
	uint64_t header_generation, expected_generation;
	uint32_t nritems_before, nritems_after;
	uint32_t dropped;                    /* entries left out */
	uint32_t relaid;                     /* leaf items whose offset or size was corrected */
	bool have_dropped;
	struct btrfs_key dropped_lo, dropped_hi; /* the lowest and highest key left out */
	bool have_expected_first;
	struct btrfs_key expected_first, first;
};

struct block_salvage_log {
	struct block_salvage *v;
	size_t n, cap;
};

/* The blocks salvaged so far (NULL when none) and the record of one. */
const struct block_salvage_log *block_salvage_log(const struct fs_info *fs);
const struct block_salvage *block_salvage_find(const struct fs_info *fs, uint64_t bytenr);
void block_salvage_log_free(struct fs_info *fs);

/* The first key of the child the node pointer p leads to, read as a block
 * of `level`: 0, or -errno. */
typedef int (*block_child_key_fn)(struct fs_info *fs, const uint8_t *p, unsigned level, struct btrfs_key *k);
/* The owner in the header of the block at bytenr, read as a block of that
 * generation and level (where a root item points): 0, or -errno. */
typedef int (*block_owner_fn)(struct fs_info *fs, uint64_t bytenr, uint64_t generation, unsigned level,
			      uint64_t *owner);
/* What a salvage may read of other blocks (either may be NULL). */
struct block_salvage_reads {
	block_child_key_fn child_key;  /* the children of a node whose keys are out of order */
	block_owner_fn root_owner;     /* the root block of a root item keyed out of order */
};
/* Salvage buf (the nodesize bytes of one copy of the block at bytenr, whose
 * checksum, bytenr, fsid and flags verify) in place for a referrer expecting
 * e. 0 with *out filled, -EUCLEAN when nothing valid can be made of it.
 * Reads other blocks only through reads. */
int block_salvage_view(struct fs_info *fs, uint64_t bytenr, uint8_t *buf, const struct block_expect *e,
		       const struct block_salvage_reads *reads, struct block_salvage *out);
/* block_salvage_view with the children read through the block cache
 * (block.c, whose verified read falls back on it). */
int block_salvage(struct fs_info *fs, uint64_t bytenr, uint8_t *buf, const struct block_expect *e,
		  struct block_salvage *out);
/* Record a salvage (the first record of a bytenr stays). 0 or -ENOMEM. */
int block_salvage_note(struct fs_info *fs, const struct block_salvage *s);

#endif
