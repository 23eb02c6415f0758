/* SPDX-License-Identifier: GPL-2.0-only */
/* The data references by which a file uses an extent, as the extent tree
 * declares them: each names a file offset minus the file extent's offset
 * into the extent, so they tell where a file extent item belongs. */
#ifndef BTK_CHECK_FE_REFS_H
#define BTK_CHECK_FE_REFS_H

#include <stdbool.h>
#include <stdint.h>

#include "check/repair.h"

#define FE_REFS_MAX 32

struct fe_refs {
	uint64_t v[FE_REFS_MAX];
	size_t n;
};

/* The offsets of the data references of the extent at bytenr naming inode
 * ino of tree root (in the transaction's extent tree). 0 or -errno. */
int fe_refs_of(struct repair_ctx *r, uint64_t bytenr, uint64_t root, uint64_t ino, struct fe_refs *o);
/* The same, of any tree's inode ino: a snapshot's file names its extents
 * through the references of the tree it was taken from. */
int fe_refs_of_any_root(struct repair_ctx *r, uint64_t bytenr, uint64_t ino, struct fe_refs *o);
bool fe_refs_have(const struct fe_refs *o, uint64_t off);

#endif
