/* SPDX-License-Identifier: GPL-2.0-only */
/* btk-corrupt: the named fields it can change, as (name, offset, width)
 * tables built from the structures in libfs/format.h. Width 1/2/4/8 is a
 * little-endian number; any other width is a byte string (uuids, names). */
#ifndef BTK_CORRUPT_FIELDS_H
#define BTK_CORRUPT_FIELDS_H

#include <stddef.h>
#include <stdint.h>

struct field {
	const char *name;
	uint32_t off;
	uint32_t width;
};

/* Where a field lives inside a buffer (an item's data, a tree block, a superblock). */
struct field_loc {
	uint32_t off;
	uint32_t width;
};

/* Resolve a field of an item of key type `type` with data[0..size):
 * a name from the tables, an indexed name (ref1.offset, stripe0.devid,
 * csum2, subvol0), or "@OFF:WIDTH". 0 or -EINVAL / -ERANGE with why set. */
int item_field(uint8_t type, const uint8_t *data, uint32_t size, uint16_t csum_size, const char *name,
	       struct field_loc *out, const char **why);
/* A tree-block field: header.*, itemN.key.{objectid,type,offset},
 * itemN.{offset,size} (leaves), ptrN.key.*, ptrN.{blockptr,generation}
 * (nodes), or "@OFF:WIDTH". */
int block_field(const uint8_t *block, uint32_t nodesize, const char *name, struct field_loc *out,
		const char **why);
/* A superblock field: any scalar of the superblock, fsid, metadata_uuid,
 * label, dev_item.*, backupN.*, or "@OFF:WIDTH". */
int super_field(const char *name, struct field_loc *out, const char **why);
/* Print every field name a target accepts (for --list-fields). */
void list_fields(void);

#endif
