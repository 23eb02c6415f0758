/* SPDX-License-Identifier: GPL-2.0-only */
/* The data ranges that should carry checksums, merged where they overlap or
 * touch, streamed in ascending order: from the extent tree (every data
 * extent: what the csum fix keeps), or from every subvolume tree (the parts
 * of data extents that regular file extents of checksummed inodes use: what
 * --rebuild-csum-tree recomputes), sorted through a spilling recsort. Memory:
 * one tree path, or the sorter's budget, whatever the number of extents. */
#ifndef BTK_CHECK_CSUM_RUNS_H
#define BTK_CHECK_CSUM_RUNS_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/fs.h>
#include <btk/tree.h>

struct recsort;

struct csum_run {
	uint64_t start, len;
};

struct csum_runs {
	struct fs_info *fs;
	struct recsort *rs;        /* used ranges, sorted by start; NULL: the extent tree */
	struct tree_iter it;       /* the extent tree */
	bool it_open, pending, eof;
	struct csum_run next;      /* read ahead (pending): the start of the run after */
	uint64_t runs, bytes;      /* merged runs returned so far and their bytes */
	uint64_t spilled_bytes;    /* the sorter's, after csum_runs_close */
};

/* Every data extent of the extent tree. 0 or -errno. */
int csum_runs_open_extents(struct csum_runs *s, struct fs_info *fs);
/* The used parts of data extents, collected from every subvolume tree now
 * into a sorter of memory_budget bytes (spilling to $TMPDIR beyond). */
int csum_runs_open_used(struct csum_runs *s, struct fs_info *fs, size_t memory_budget);
/* The next merged run: 1 with *run, 0 at the end, or -errno. */
int csum_runs_next(struct csum_runs *s, struct csum_run *run);
void csum_runs_close(struct csum_runs *s);

#endif
