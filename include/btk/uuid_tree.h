/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Rebuilding the uuid tree (subvolume uuid and received uuid -> subvolume
 * ids) from the root items, inside a transaction. Used by btk-tune
 * (--rebuild-uuid-tree) and btk-check (--repair). */
#ifndef BTK_UUID_TREE_H
#define BTK_UUID_TREE_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/fs.h>
#include <btk/trans.h>

struct uuid_tree_stats {
	unsigned items;             /* uuid items written */
	unsigned subvols;           /* subvolume uuids */
	unsigned received;          /* received uuids */
	bool replaced;              /* an existing uuid tree was deleted first */
};

/* Delete the uuid tree (if any) and build it again from the root items as t
 * sees them; the superblock's uuid_tree_generation becomes the transaction's,
 * so the kernel does not rescan. 0 or -errno with btk_last_error() set. */
int uuid_tree_rebuild(struct fs_info *fs, struct trans *t, struct uuid_tree_stats *st);

#endif
