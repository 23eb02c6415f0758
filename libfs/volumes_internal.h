/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The chunk map behind fs_chunk_*() (btk/volumes.h): libfs's own, and the
 * few privileged callers that build a filesystem by hand (image restore). */
#ifndef BTK_VOLUMES_INTERNAL_H
#define BTK_VOLUMES_INTERNAL_H

#include <btk/volumes.h>

struct chunk_map {
	struct chunk **chunks; /* sorted by logical, non-overlapping */
	size_t count;
	size_t capacity;
};

const struct chunk *chunk_map_lookup(const struct chunk_map *map, uint64_t logical);
/* Index of the first chunk (in logical order) whose end is above logical. */
size_t chunk_map_find_index(const struct chunk_map *map, uint64_t logical);
void chunk_map_free(struct chunk_map *map);

/* Read the superblock's system chunk array, then the whole chunk tree. */
int volumes_read_sys_chunk_array(struct fs_info *fs);
int volumes_read_chunk_tree(struct fs_info *fs);

#endif
