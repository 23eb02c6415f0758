/* SPDX-License-Identifier: GPL-2.0-only */
/* The tree-block-owner repair in subvolume trees (check/owners_subvol.c). */
#ifndef BTK_CHECK_OWNERS_SUBVOL_H
#define BTK_CHECK_OWNERS_SUBVOL_H

#include <stdint.h>

#include "check/repair.h"

/* Copy the subvolume-tree blocks whose header names a wrong owner (the
 * tree-block-owner check's rules) in r->t; *fixed: how many such blocks are
 * gone. 0 or -errno. */
int repair_subvolume_block_owners(struct repair_ctx *r, uint64_t *fixed);

#endif
