/* SPDX-License-Identifier: GPL-2.0-only */
/* Memory for the sanitizer's maps with a bounded resident size: allocations
 * come from regions of an unlinked temporary file, mapped shared. Once the
 * bytes the process may have resident pass the budget, every region is
 * dropped from the process (MADV_DONTNEED: the pages stay in the page cache,
 * which writes them to the file when it needs the memory) and touched pages
 * fault back in. Regions never move, so pointers into them stay valid. When
 * no temporary file can be made, regions come from the heap (unbounded). */
#ifndef BTK_IMAGE_MAP_ARENA_H
#define BTK_IMAGE_MAP_ARENA_H

#include <stddef.h>

struct map_arena;

/* budget: resident bytes allowed ($BTK_SANITIZE_MAP_BUDGET overrides it, for
 * tests). tmpdir NULL: $TMPDIR, else /tmp. NULL on ENOMEM. */
struct map_arena *map_arena_new(size_t budget, const char *tmpdir);
/* n zeroed bytes, 16-byte aligned; NULL on ENOMEM. */
void *map_arena_alloc(struct map_arena *a, size_t n);
/* The caller touched about pages pages of the arena: may trim. */
void map_arena_touch(struct map_arena *a, size_t pages);
/* How often the arena was trimmed (tests). */
unsigned long map_arena_trims(const struct map_arena *a);
void map_arena_free(struct map_arena *a);

#endif
