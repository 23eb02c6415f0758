/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* One validator for the items of a leaf, per key type, after the rules the
 * kernel's tree checker enforces when it reads a leaf (sizes, variable-length
 * entries, inline references, field values the format forbids); and the
 * walkers of variable items over a size-carrying item view (btk/item_view.h),
 * so no field is read past the end of its item. The validator reports; what
 * a caller does with a fault (which problem, which message) is its own. */
#ifndef BTK_ITEM_CHECK_H
#define BTK_ITEM_CHECK_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/format.h>
#include <btk/item_view.h>
#include <btk/key.h>

struct fs_info;

/* The on-disk struct `type` at offset at, or NULL when the item is too short:
 * hand the result to the format.h accessors. */
#define ITEM_VIEW_STRUCT(v, at, type) ((const void *)item_view_ptr((v), (at), sizeof(type)))

/* Checked little-endian reads: 0, or -EUCLEAN (and *out untouched) past the end. */
int item_view_le16(const struct item_view *v, uint32_t at, uint16_t *out);
int item_view_le32(const struct item_view *v, uint32_t at, uint32_t *out);
int item_view_le64(const struct item_view *v, uint32_t at, uint64_t *out);

/* What the rules depend on besides the item: from the superblock. */
struct item_geometry {
	uint32_t sectorsize;
	uint32_t nodesize;
	uint16_t csum_size;
	uint64_t incompat;
};

void item_geometry_of(const struct fs_info *fs, struct item_geometry *g);

/* What is wrong with an item; the first fault found, size faults first. */
enum item_fault {
	ITEM_OK = 0,
	ITEM_TOO_SMALL,    /* shorter than its type's fixed part */
	ITEM_BAD_SIZE,     /* not the size its type or its own fields demand */
	ITEM_TRUNCATED,    /* a variable-length entry runs past the end */
	ITEM_NAME_LEN,     /* a name of 0 bytes, or longer than the format allows */
	ITEM_DATA_LEN,     /* data after a name where the type allows none */
	ITEM_ENTRY_TYPE,   /* a dir entry's file type out of range for its key type */
	ITEM_BAD_KEY,      /* the key breaks its type's rules */
	ITEM_BAD_FIELD,    /* a field has a value the format forbids */
	ITEM_REF_TYPE,     /* an inline reference of a type that cannot be inline */
	ITEM_REF_ORDER,    /* inline references out of the kernel's order */
	ITEM_UNKNOWN_BITS, /* otherwise valid, with type bits this format version does not define */
	ITEM_FAULT_LAST = ITEM_UNKNOWN_BITS
};

struct item_verdict {
	enum item_fault fault;
	uint32_t at;       /* offset in the item where the fault is */
	const char *why;   /* one line, for messages: static text */
	bool sizes_only;   /* (item_check_sizes' mode: other faults pass) */
};

/* Check one item (key, bytes) against its type's rules. Returns 0 when it is
 * valid (or of a type without rules), -EUCLEAN with *out filled otherwise. */
int item_check(const struct item_geometry *g, const struct btrfs_key *key, const struct item_view *v,
	       struct item_verdict *out);

/* The same rules, only the faults of item_fault_is_size: whether the bytes
 * have the length (and whole entries) an item of this type has, whatever
 * its values (what a salvage of a damaged leaf can tell). */
int item_check_sizes(const struct item_geometry *g, const struct btrfs_key *key, const struct item_view *v,
		     struct item_verdict *out);

/* The same, from an open filesystem's geometry. */
int item_check_fs(const struct fs_info *fs, const struct btrfs_key *key, const void *data, uint32_t size,
		  struct item_verdict *out);

/* Whether the item has the length (and whole entries) its type demands:
 * item_check_sizes' verdict from an open filesystem's geometry, for a reader
 * or an update that acts on the whole item (its fields are then read with
 * the bare getters). */
bool item_is_whole(const struct fs_info *fs, const struct btrfs_key *key, const void *data, uint32_t size);

/* The rules of the key alone (alignment, levels, features): 0 or -EUCLEAN
 * with *out; item_check applies them too. */
int item_key_check(const struct item_geometry *g, const struct btrfs_key *key, struct item_verdict *out);

/* An extent item's length (its key's offset) the kernel refuses: zero, off
 * the sector grid, or running past the address space. Such an item holds no
 * space; its users say its length. */
static inline bool extent_length_refused(uint64_t bytenr, uint64_t len, uint32_t sectorsize)
{
	return !len || (sectorsize && len % sectorsize) || bytenr + len < bytenr;
}

/* Whether a fault is about the item's length (its fields cannot be read). */
static inline bool item_fault_is_size(enum item_fault f)
{
	return f == ITEM_TOO_SMALL || f == ITEM_BAD_SIZE || f == ITEM_TRUNCATED;
}

/* The fixed part of an item type, 0 for types without one (or unknown). */
uint32_t item_min_size(uint8_t key_type);

/* Whether the view holds the fixed part of an item of this key type (its
 * item_min_size; always for a type without one); past_end set when not. */
static inline bool item_view_has_fixed(struct item_view *v, uint8_t key_type)
{
	return item_view_has(v, 0, item_min_size(key_type));
}

/* The same for an item of size bytes about to be updated in place (the
 * setters then write inside it). */
static inline bool item_has_fixed(uint8_t key_type, uint32_t size)
{
	return size >= item_min_size(key_type);
}

/* ---- variable-length entries ---- */

/* One entry of a dir item / dir index / xattr, or of an inode ref / extref /
 * root ref: its header at off, the name (and data) after it. */
struct item_entry {
	uint32_t off;         /* offset of the entry's header in the item */
	uint32_t len;         /* header + name + data */
	const uint8_t *hdr;
	const uint8_t *name;
	uint16_t name_len;
	const uint8_t *body;  /* a dir entry's data (xattr value), else NULL */
	uint16_t data_len;
};

/* The entry at *off of an item of this key type (DIR_ITEM, DIR_INDEX,
 * XATTR_ITEM, INODE_REF, INODE_EXTREF, ROOT_REF, ROOT_BACKREF), advancing
 * *off past it. Returns 1 with *e, 0 at the end, -EUCLEAN when the entry
 * does not fit in the item, -EINVAL for another key type. */
int item_entry_next(uint8_t key_type, const struct item_view *v, uint32_t *off, struct item_entry *e);

/* The rules of one entry walked by item_entry_next: ITEM_OK, ITEM_NAME_LEN,
 * ITEM_DATA_LEN or ITEM_ENTRY_TYPE (the first that applies). */
enum item_fault item_entry_check(uint8_t key_type, const struct item_entry *e);

/* One inline reference of an extent item. */
struct inline_ref_view {
	uint32_t off;         /* offset of its type byte */
	uint32_t len;         /* type byte included */
	uint8_t type;
	const uint8_t *body;  /* after the type byte */
	uint64_t sort_off;    /* what orders refs of one type (a data ref's hash, else the offset) */
};

/* Where an extent item's inline references start: after the extent item
 * header and, for a non-skinny tree block, the tree block info. */
uint32_t extent_item_refs_start(const struct btrfs_key *key, const struct item_view *v);

/* The inline reference at *off, advancing *off. Returns 1 with *r, 0 at the
 * end, -EUCLEAN for a type that cannot be inline or one that does not fit
 * (*r->type and ->off say which). */
int inline_ref_next(const struct item_view *v, uint32_t *off, struct inline_ref_view *r);

/* The inline references from off to the end: ITEM_OK, ITEM_REF_TYPE (bad
 * type or truncated: the kernel cannot walk further) or ITEM_REF_ORDER. */
enum item_fault inline_refs_check(const struct item_view *v, uint32_t off, uint32_t *at);

#endif
