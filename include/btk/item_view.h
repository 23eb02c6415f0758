/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* An item's bytes with their count, and the bounded reads through it.
 *
 * Every FIELD() in btk/format.h has, besides its bare getter prefix_member(p),
 * a bounded one, prefix_member_in(&view), that reads the field of the struct
 * at the start of the view. A read whose bytes are not all inside the item
 * returns 0 and sets view.past_end, which stays set: a reader reads the
 * fields it needs and asks once whether any of them was missing. Nothing is
 * read past the item, whatever its size says.
 *
 * The rule: code reading an item off the disk reads it through a view (or
 * after item_check() has passed it, or through a pointer a bounded call
 * handed out: ITEM_VIEW_STRUCT, item_entry_next, inline_ref_next). The bare
 * getters are for bytes already known to be whole: the validator itself,
 * builders writing items they sized, tree-block headers the block layer
 * verified, the superblock. */
#ifndef BTK_ITEM_VIEW_H
#define BTK_ITEM_VIEW_H

#include <stdbool.h>
#include <stdint.h>

struct item_view {
	const uint8_t *data;
	uint32_t size;
	bool past_end; /* a bounded read wanted bytes past size; sticky */
};

static inline struct item_view item_view_of(const void *data, uint32_t size)
{
	return (struct item_view){ data, size, false };
}

/* A view of an item copied into a buffer of cap bytes (tree_lookup and
 * friends copy at most cap and report the item's size): the copied part. */
static inline struct item_view item_view_copied(const void *buf, uint32_t cap, uint32_t item_size)
{
	return item_view_of(buf, item_size < cap ? item_size : cap);
}

/* Pointer to len bytes at offset at of the item, NULL when they do not fit. */
static inline const uint8_t *item_view_ptr(const struct item_view *v, uint32_t at, uint32_t len)
{
	if (!v->data || at > v->size || len > v->size - at)
		return NULL;
	return v->data + at;
}

/* The bytes from at to the end, as a view of their own (empty, with
 * past_end set, when at is past the end). */
static inline struct item_view item_view_at(const struct item_view *v, uint32_t at)
{
	if (!v->data || at > v->size)
		return (struct item_view){ NULL, 0, true };
	return item_view_of(v->data + at, v->size - at);
}

/* Whether the view holds len bytes at at; past_end set when it does not
 * (a reader that wants a whole struct before it decides anything). */
static inline bool item_view_has(struct item_view *v, uint32_t at, uint32_t len)
{
	if (item_view_ptr(v, at, len))
		return true;
	v->past_end = true;
	return false;
}

/* The generated bounded reads: see FIELD in btk/endian_access.h. The offset
 * and width are constants, so a read costs one compare. */
static inline const uint8_t *item_view_field(struct item_view *v, uint32_t at, uint32_t width)
{
	if (__builtin_expect(!v->data || (uint64_t)at + width > v->size, 0)) {
		v->past_end = true;
		return NULL;
	}
	return v->data + at;
}

#endif
