/* SPDX-License-Identifier: GPL-2.0-only */
/* What each checked subvolume-tree block promises a parent: its generation,
 * level and first key, by address. A snapshot's private nodes point at
 * hundreds of blocks checked before from another tree; a pointer that
 * agrees with the table is the block read and verified already, so the
 * tree-block walk skips it without reading it again (block_read_child
 * would check exactly these three). The table has a byte budget: past it,
 * blocks are not added and their other parents read them as before. */
#ifndef BTK_CHECK_SEEN_HEADERS_H
#define BTK_CHECK_SEEN_HEADERS_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/block.h>

struct seen_headers;

/* NULL on ENOMEM. max_bytes: the budget of the table. */
struct seen_headers *seen_headers_create(uint64_t max_bytes);
/* Remember block b (read and verified). 0, or -ENOMEM (the table stays as it was). */
int seen_headers_add(struct seen_headers *h, const struct tree_block *b);
/* Whether the child at slot of node parent is a remembered block that
 * satisfies the pointer (generation, level, first key). */
bool seen_headers_match(const struct seen_headers *h, const struct tree_block *parent, unsigned slot);
uint64_t seen_headers_bytes(const struct seen_headers *h);
void seen_headers_destroy(struct seen_headers *h);

#endif
