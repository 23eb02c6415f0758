/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Read-ahead of tree blocks in physical order: the children a walk is about
 * to read are sorted by device offset, merged into large ranges and handed to
 * the I/O layer as hints, so the device sees a few long sequential reads in
 * place of many small random ones. Only hints: nothing is cached or verified
 * here, and a backend without read-ahead ignores them. */
#ifndef BTK_PREFETCH_H
#define BTK_PREFETCH_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/block.h>
#include <btk/fs.h>

/* Which children block_prefetch_children announces. */
struct prefetch_filter {
	unsigned first, end;            /* slots [first, end) of the node */
	const struct btrfs_key *max;    /* NULL, or: only children whose first key is <= max */
	bool all_copies;                /* every copy (for callers that verify them all), not just the first */
	/* NULL, or true when the child at bytenr will not be read (already seen) */
	bool (*skip)(void *arg, uint64_t bytenr);
	/* NULL, or true when only the first copy of that child is wanted even
	 * with all_copies (a block verified before, read again) */
	bool (*one_copy)(void *arg, uint64_t bytenr);
	void *arg;
};

/* Announce the children of node (level >= 1) that are not cached: 0, or
 * -ENOMEM (read-ahead errors are ignored: the reads that follow report them). */
int block_prefetch_children(struct fs_info *fs, const struct tree_block *node, const struct prefetch_filter *f);

/* Largest gap between two blocks merged into one read-ahead range: none (the
 * block layer merges adjacent requests; a gap would read unrelated data). */
#define PREFETCH_MAX_GAP 0

#endif
