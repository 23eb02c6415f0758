/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Building the free-space tree (space_cache=v2) from the extent tree, and
 * clearing the v1 space cache, inside a transaction. Used by btk-tune
 * (--enable free-space-tree) and btk-check (--repair). */
#ifndef BTK_FREE_SPACE_TREE_H
#define BTK_FREE_SPACE_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/fs.h>
#include <btk/trans.h>

/* What fst_build() did, for the caller to report. */
struct fst_build_stats {
	size_t groups;              /* block groups described */
	uint64_t extents;           /* free-space extent items written */
	bool replaced;              /* an existing free-space tree was deleted first */
	size_t v1_caches;           /* v1 cache headers found in the root tree */
	bool v1_removed;            /* and removed (else left for the kernel, invalidated) */
	uint64_t v1_freed;          /* bytes of cache data extents freed */
	const char *v1_why;         /* why they were left (static text), when not removed */
};

/* Delete the free-space tree if there is one, build it again for every
 * block group from the extent tree as t sees it, drop the v1 space cache
 * where it has the usual shape, set the FREE_SPACE_TREE and
 * FREE_SPACE_TREE_VALID compat_ro bits and invalidate cache_generation.
 * 0 or -errno with btk_last_error() set; the transaction must then be aborted. */
int fst_build(struct fs_info *fs, struct trans *t, struct fst_build_stats *st);

#endif
