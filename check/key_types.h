/* SPDX-License-Identifier: GPL-2.0-only */
/* Which key types each tree holds, as the kernel writes them: the checks
 * of items in a tree that does not hold their type (a foreign or unknown
 * key type) ask here. */
#ifndef BTK_CHECK_KEY_TYPES_H
#define BTK_CHECK_KEY_TYPES_H

#include <stdbool.h>
#include <stdint.h>

/* Whether a subvolume tree (and the data reloc tree) holds items of a type. */
bool key_type_in_subvolume(uint8_t type);
/* Whether a global tree (root, extent, chunk, dev, csum, quota, uuid,
 * free-space, block-group, raid-stripe) holds items of a type: 1 yes, 0 no,
 * -1 for other trees (subvolumes, logs, relocation trees). */
int key_type_in_tree(uint64_t tree, uint8_t type);

#endif
