/* SPDX-License-Identifier: GPL-2.0-only */
/* Which file extent items name a disk extent: regular and preallocated ones,
 * and one of an unknown type (damage) with a regular extent's size, which
 * the file-extent-fields class makes one of them again; one of an unknown
 * type and another size is inline data, however its bytes read. */
#ifndef BTK_CHECK_FE_KIND_H
#define BTK_CHECK_FE_KIND_H

#include <stdbool.h>
#include <stdint.h>

#include <btk/format.h>

static inline bool fe_kind_regular(uint8_t type, uint32_t size)
{
	if (type == BTRFS_FILE_EXTENT_INLINE)
		return false;
	return type <= BTRFS_FILE_EXTENT_PREALLOC || size == sizeof(struct btrfs_file_extent_item);
}

#endif
