/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Reading the csum tree: the checksums of a logical range [start, end), in
 * ascending order, item by item. One cursor serves both ways of asking:
 * runs of consecutive checksummed sectors (csum_tree_next) or the checksum
 * of one sector at a time (csum_tree_get); use one or the other on a given
 * cursor. The pointers returned point into a tree block the cursor holds:
 * valid until its next call (copy what must live longer). */
#ifndef BTK_CSUM_TREE_H
#define BTK_CSUM_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/fs.h>
#include <btk/tree.h>

struct csum_tree_cursor {
	struct fs_info *fs;
	struct tree_iter it;
	bool open, done, have;
	uint64_t end;         /* of the range asked for */
	uint64_t pos;         /* everything below it was returned or skipped */
	uint64_t start, stop; /* the current item's sectors: [start, stop) */
	const uint8_t *csums; /* its first checksum */
};

/* Position before the checksums of [start, end) (an item that begins
 * before start counts for its part inside). 0 or -errno. */
int csum_tree_open(struct csum_tree_cursor *c, struct fs_info *fs, uint64_t start, uint64_t end);
/* The same over the checksum items of another tree (a log tree holds its own). */
int csum_tree_open_in(struct csum_tree_cursor *c, struct fs_info *fs, const struct tree_root_ptr *root,
		      uint64_t start, uint64_t end);
/* The next run of checksummed sectors [*lo, *hi) within the range, above
 * every run returned before (overlapping items count once), with *csums the
 * checksum of sector *lo: 1, 0 at the end, or -errno. */
int csum_tree_next(struct csum_tree_cursor *c, uint64_t *lo, uint64_t *hi, const uint8_t **csums);
/* The checksum of the sector at logical (calls in ascending order): 1 with
 * *csum set, 0 when the tree has none, or -errno. */
int csum_tree_get(struct csum_tree_cursor *c, uint64_t logical, const uint8_t **csum);
void csum_tree_close(struct csum_tree_cursor *c);

#endif
