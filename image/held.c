// SPDX-License-Identifier: GPL-2.0-only
/* Tree blocks restore keeps in memory (chunk and dev trees), found by
 * address through an open-addressing index, with the set of addresses their
 * nodes point at kept beside them, so that "is every child held" is a
 * counter rather than a scan: adding n blocks costs O(n) in all. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "image/restore.h"
#include <btk/block.h>

static size_t hslot(uint64_t key, size_t mask)
{
	return (size_t)((key * 0x9e3779b97f4a7c15ULL) >> 17) & mask;
}

/* Room in an array of cap elements for element n (doubling). */
static int room_for_one(void **v, size_t *cap, size_t n, size_t size)
{
	size_t ncap = *cap ? 2 * *cap : 16;
	void *p;

	if (n < *cap)
		return 0;
	if (!(p = realloc(*v, ncap * size)))
		return -ENOMEM;
	*v = p;
	*cap = ncap;
	return 0;
}

/* Put value (index + 1) at key's first free slot. */
static void index_put(size_t *slots, size_t mask, uint64_t key, size_t value)
{
	size_t b;

	for (b = hslot(key, mask); slots[b]; b = (b + 1) & mask)
		;
	slots[b] = value;
}

/* Double an index of (value + 1) slots; key_of gives a value's key. */
static int index_grow(size_t **slots, size_t *mask, size_t count, const void *ctx,
		      uint64_t (*key_of)(const void *ctx, size_t value))
{
	size_t nmask = *mask ? 2 * *mask + 1 : 63, *t;

	if (count + 1 <= (*mask + 1) / 2 && *slots)
		return 0;
	t = calloc(nmask + 1, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; *slots && i <= *mask; i++) {
		size_t v = (*slots)[i];
		if (v)
			index_put(t, nmask, key_of(ctx, v - 1), v);
	}
	free(*slots);
	*slots = t;
	*mask = nmask;
	return 0;
}

static uint64_t held_key(const void *ctx, size_t i)
{
	return ((const struct held_list *)ctx)->v[i].bytenr;
}

static uint64_t ref_key(const void *ctx, size_t i)
{
	return ((const struct held_list *)ctx)->refs[i];
}

struct held_block *held_find(struct held_list *l, uint64_t bytenr)
{
	if (!l->slots)
		return NULL;
	for (size_t b = hslot(bytenr, l->mask); l->slots[b]; b = (b + 1) & l->mask)
		if (l->v[l->slots[b] - 1].bytenr == bytenr)
			return &l->v[l->slots[b] - 1];
	return NULL;
}

bool held_referenced(const struct held_list *l, uint64_t bytenr)
{
	if (!l->ref_slots)
		return false;
	for (size_t b = hslot(bytenr, l->ref_mask); l->ref_slots[b]; b = (b + 1) & l->ref_mask)
		if (l->refs[l->ref_slots[b] - 1] == bytenr)
			return true;
	return false;
}

/* Note that a held node points at bytenr; counts it missing when new and not held. */
static int note_ref(struct held_list *l, uint64_t bytenr)
{
	int ret;

	if (held_referenced(l, bytenr))
		return 0;
	if ((ret = room_for_one((void **)&l->refs, &l->refcap, l->nrefs, sizeof(*l->refs))) ||
	    (ret = index_grow(&l->ref_slots, &l->ref_mask, l->nrefs, l, ref_key)))
		return ret;
	l->refs[l->nrefs++] = bytenr;
	index_put(l->ref_slots, l->ref_mask, bytenr, l->nrefs);
	if (!held_find(l, bytenr))
		l->missing++;
	return 0;
}

int held_add(struct held_list *l, uint64_t bytenr, const uint8_t *data, uint32_t len)
{
	size_t max_ptrs;
	uint8_t *copy;
	int ret;

	if (held_find(l, bytenr))
		return 0;
	if ((ret = room_for_one((void **)&l->v, &l->cap, l->n, sizeof(*l->v))) ||
	    (ret = index_grow(&l->slots, &l->mask, l->n, l, held_key)))
		return ret;
	copy = malloc(len);
	if (!copy)
		return -ENOMEM;
	memcpy(copy, data, len);
	l->v[l->n++] = (struct held_block){ bytenr, copy };
	index_put(l->slots, l->mask, bytenr, l->n);
	if (held_referenced(l, bytenr))
		l->missing--;
	if (len < sizeof(struct btrfs_header) || header_level(copy) == 0)
		return 0;
	max_ptrs = (len - sizeof(struct btrfs_header)) / sizeof(struct btrfs_key_ptr);
	for (unsigned s = 0; s < header_nritems(copy) && s < max_ptrs; s++) {
		uint64_t child = key_ptr_blockptr(node_key_ptr(copy, s));
		if (child != bytenr && (ret = note_ref(l, child)))
			return ret;
	}
	return 0;
}

void held_free(struct held_list *l)
{
	for (size_t i = 0; i < l->n; i++)
		free(l->v[i].data);
	free(l->v);
	free(l->slots);
	free(l->refs);
	free(l->ref_slots);
	memset(l, 0, sizeof(*l));
}
