/* SPDX-License-Identifier: GPL-2.0-only */
/* Where a system chunk really lies when the superblock's system chunk array
 * and the chunk tree place a stripe of it differently (check/sys_chunk_place.c). */
#ifndef BTK_CHECK_SYS_CHUNK_PLACE_H
#define BTK_CHECK_SYS_CHUNK_PLACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/fs.h>

/* The chunk items t (the tree's) and a (the array's) of the chunk at
 * logical, alike but for the devid and offset of some stripes: for each
 * stripe they differ in, which one is right (from[i]: 't' or 'a'; 0 where
 * they agree). 0 when every such stripe is decided, 1 when one is not (why
 * says which), -errno. */
int sys_chunk_place(struct fs_info *fs, uint64_t logical, const uint8_t *t, const uint8_t *a, char *from,
		    char *why, size_t why_len);

#endif
