/* SPDX-License-Identifier: GPL-2.0-only */
/* Which trees the extent tree says hold a subvolume-tree block by a
 * reference of their own (a keyed tree block reference, inline or not), and
 * whether the block has full back references: what decides the owner its
 * header must name (the tree-block-owner check and repair). */
#ifndef BTK_CHECK_OWNER_REFS_H
#define BTK_CHECK_OWNER_REFS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/fs.h>
#include <btk/key.h>

#define OWNER_REFS_MAX 64

struct owner_refs {
	uint64_t roots[OWNER_REFS_MAX]; /* ascending */
	size_t n;
	bool more;      /* more roots than roots[] holds */
	bool found;     /* the block has an extent item */
	bool full;      /* its flags say full back references */
};

/* The references of tree block bytenr in the extent tree at extent_root.
 * 0 (out->found false when it has no item) or -errno. */
int owner_refs_read(struct fs_info *fs, const struct tree_root_ptr *extent_root, uint64_t bytenr,
		    struct owner_refs *out);
/* Whether tree `root` holds the block by a reference of its own (with more
 * roots than read: yes). */
bool owner_refs_hold(const struct owner_refs *r, uint64_t root);

/* Tree root reaches block bytenr of level by a search for key (the block's
 * first key, its parent's key for it): it is the root, or the node at level
 * + 1 the search ends in points at it. 1, 0, or -errno. */
int tree_reaches_block(struct fs_info *fs, const struct tree_root_ptr *root, const struct btrfs_key *key,
		       unsigned level, uint64_t bytenr);

#endif
