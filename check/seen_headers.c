// SPDX-License-Identifier: GPL-2.0-only
/* The headers of checked subvolume-tree blocks, by address (seen_headers.h):
 * an open-addressing table that doubles up to its budget. */
#include <errno.h>
#include <stdlib.h>

#include "check/seen_headers.h"
#include <btk/key.h>

struct header_slot {
	uint64_t bytenr;            /* 0: empty */
	uint64_t generation;
	uint64_t objectid, offset;  /* first key (none: an empty block) */
	uint8_t type, level, has_key;
};

struct seen_headers {
	struct header_slot *v;
	size_t cap, n;              /* cap: a power of two */
	uint64_t max_bytes;
	bool full;                  /* the budget is reached: nothing more is added */
};

struct seen_headers *seen_headers_create(uint64_t max_bytes)
{
	struct seen_headers *h = calloc(1, sizeof(*h));

	if (h)
		h->max_bytes = max_bytes;
	return h;
}

static size_t slot_of(const struct seen_headers *h, uint64_t bytenr)
{
	uint64_t x = bytenr * 0x9e3779b97f4a7c15ULL;

	return (size_t)(x >> 20) & (h->cap - 1);
}

static const struct header_slot *find(const struct seen_headers *h, uint64_t bytenr)
{
	if (!h->cap)
		return NULL;
	for (size_t i = slot_of(h, bytenr);; i = (i + 1) & (h->cap - 1)) {
		if (h->v[i].bytenr == bytenr)
			return &h->v[i];
		if (!h->v[i].bytenr)
			return NULL;
	}
}

static void put(struct seen_headers *h, const struct header_slot *s)
{
	size_t i = slot_of(h, s->bytenr);

	while (h->v[i].bytenr && h->v[i].bytenr != s->bytenr)
		i = (i + 1) & (h->cap - 1);
	h->n += !h->v[i].bytenr;
	h->v[i] = *s;
}

/* Twice the slots, or full when that passes the budget. */
static int grow(struct seen_headers *h)
{
	size_t cap = h->cap ? h->cap * 2 : 1024;
	struct header_slot *old = h->v;
	size_t oldcap = h->cap;

	if ((uint64_t)cap * sizeof(*old) > h->max_bytes) {
		h->full = true;
		return 0;
	}
	if (!(h->v = calloc(cap, sizeof(*old)))) {
		h->v = old;
		return -ENOMEM;
	}
	h->cap = cap;
	h->n = 0;
	for (size_t i = 0; i < oldcap; i++)
		if (old[i].bytenr)
			put(h, &old[i]);
	free(old);
	return 0;
}

int seen_headers_add(struct seen_headers *h, const struct tree_block *b)
{
	struct header_slot s = { .bytenr = b->bytenr, .generation = block_generation(b),
				 .level = (uint8_t)block_level(b), .has_key = block_nritems(b) > 0 };
	int ret;

	if (!h || h->full || !b->bytenr)
		return 0;
	if (h->n + 1 > h->cap / 4 * 3 && ((ret = grow(h)) || h->full))
		return ret;
	if (s.has_key) {
		struct btrfs_key k;
		block_key(b, 0, &k);
		s.objectid = k.objectid;
		s.type = k.type;
		s.offset = k.offset;
	}
	put(h, &s);
	return 0;
}

bool seen_headers_match(const struct seen_headers *h, const struct tree_block *parent, unsigned slot)
{
	const uint8_t *ptr = node_key_ptr(parent->data, slot);
	const struct header_slot *s = h ? find(h, key_ptr_blockptr(ptr)) : NULL;
	struct btrfs_key want, have;

	if (!s || s->level + 1 != (int)block_level(parent) || s->generation != key_ptr_generation(ptr))
		return false;
	if (!s->has_key)
		return true;
	key_from_disk(&want, key_ptr_key_ptr(ptr));
	have = (struct btrfs_key){ s->objectid, s->type, s->offset };
	return key_compare(&have, &want) == 0;
}

uint64_t seen_headers_bytes(const struct seen_headers *h)
{
	return h ? (uint64_t)h->cap * sizeof(struct header_slot) : 0;
}

void seen_headers_destroy(struct seen_headers *h)
{
	if (h) {
		free(h->v);
		free(h);
	}
}
