/* SPDX-License-Identifier: GPL-2.0-only */
/* Root items that point at an older root block than their tree's newest
 * (the extent tree names the newer one): found for the check and its
 * repair alike (check/root_outdated.c). */
#ifndef BTK_CHECK_ROOT_OUTDATED_H
#define BTK_CHECK_ROOT_OUTDATED_H

#include <stdint.h>

#include <btk/fs.h>

struct root_fix {
	struct btrfs_key key;      /* of the root item */
	uint64_t bytenr, generation;
	uint8_t level;             /* what the root item says */
	uint64_t new_bytenr, new_generation;
	uint8_t new_level;         /* the tree's newest root block, as the extent tree says */
};

/* Call fn for every live subvolume root item whose root block the extent
 * tree no longer holds and is not the one block of the tree's top level the
 * extent tree holds, that block being newer; and for every root item (the
 * global trees' too, but the root, extent and chunk trees') whose block does
 * not read as its tree's root while the extent tree names one other. fn's
 * nonzero value stops. 0, fn's value or -errno. */
int root_outdated_each(struct fs_info *fs, int (*fn)(void *arg, const struct root_fix *f), void *arg);

/* The root block of tree id as the extent tree tells it (the one block of
 * the top level with a tree-block reference from id): 1 and f->new_*, 0 when
 * not one block, -errno. */
int root_block_find(struct fs_info *fs, uint64_t id, struct root_fix *f);

#endif
