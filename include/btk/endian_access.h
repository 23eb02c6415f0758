/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Unaligned little-endian loads and stores, and the macro that turns an
 * on-disk struct field into a getter/setter pair and a bounded getter.
 * Every on-disk field in btk is read through one of these; nothing casts a
 * buffer to a struct. Which getter to use: see btk/item_view.h. */
#ifndef BTK_ENDIAN_ACCESS_H
#define BTK_ENDIAN_ACCESS_H

#include <endian.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <btk/item_view.h>

static inline uint8_t get_le8(const void *p) { return *(const uint8_t *)p; }
static inline uint16_t get_le16(const void *p) { uint16_t v; memcpy(&v, p, 2); return le16toh(v); }
static inline uint32_t get_le32(const void *p) { uint32_t v; memcpy(&v, p, 4); return le32toh(v); }
static inline uint64_t get_le64(const void *p) { uint64_t v; memcpy(&v, p, 8); return le64toh(v); }
static inline void put_le8(void *p, uint8_t v) { *(uint8_t *)p = v; }
static inline void put_le16(void *p, uint16_t v) { v = htole16(v); memcpy(p, &v, 2); }
static inline void put_le32(void *p, uint32_t v) { v = htole32(v); memcpy(p, &v, 4); }
static inline void put_le64(void *p, uint64_t v) { v = htole64(v); memcpy(p, &v, 8); }

/* FIELD(prefix, struct type, member, bits) defines
 *   uintBITS_t prefix_member(const void *item)
 *   void       prefix_set_member(void *item, uintBITS_t value)
 *   uintBITS_t prefix_member_in(struct item_view *v)
 * where item (or v's data) points at the start of the on-disk structure.
 * The bare getter trusts that the bytes are there; the _in one reads only
 * inside v and yields 0 with v->past_end set when the field is not. */
#define FIELD(prefix, type, member, bits)                                              \
	static inline uint##bits##_t prefix##_##member(const void *p)                  \
	{                                                                              \
		_Static_assert(sizeof(((type *)0)->member) == (bits) / 8, "field size"); \
		return get_le##bits((const uint8_t *)p + offsetof(type, member));      \
	}                                                                              \
	static inline void prefix##_set_##member(void *p, uint##bits##_t v)            \
	{                                                                              \
		put_le##bits((uint8_t *)p + offsetof(type, member), v);                \
	}                                                                              \
	static inline uint##bits##_t prefix##_##member##_in(struct item_view *v)       \
	{                                                                              \
		const uint8_t *q = item_view_field(v, offsetof(type, member), (bits) / 8); \
		return q ? get_le##bits(q) : 0;                                        \
	}

/* Pointer to a byte-array member (uuids, csums, labels, embedded structs);
 * the _in form: NULL (and v->past_end) when the member is not all inside v. */
#define FIELD_PTR(prefix, type, member)                                                \
	static inline uint8_t *prefix##_##member##_ptr(const void *p)                  \
	{                                                                              \
		return (uint8_t *)p + offsetof(type, member);                          \
	}                                                                              \
	static inline const uint8_t *prefix##_##member##_ptr_in(struct item_view *v)   \
	{                                                                              \
		return item_view_field(v, offsetof(type, member), sizeof(((type *)0)->member)); \
	}

#endif
