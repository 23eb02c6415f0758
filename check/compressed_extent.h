/* SPDX-License-Identifier: GPL-2.0-only */
/* The data of compressed regular file extents (zlib, lzo, zstd) as the
 * kernel writes it on disk, decompressed to tell whether it is whole. */
#ifndef BTK_CHECK_COMPRESSED_EXTENT_H
#define BTK_CHECK_COMPRESSED_EXTENT_H

#include <stddef.h>
#include <stdint.h>

struct fs_info;

/* Decompress the len bytes of a compressed extent (`compression`:
 * BTRFS_COMPRESS_*) into out (cap bytes; the extent's ram_bytes). lzo data
 * is the kernel's sector-segmented layout. Returns the decompressed length,
 * -EUCLEAN when the data is no valid stream or does not fit, -EOPNOTSUPP
 * for an unknown compression, -ENOMEM. */
long compressed_extent_decompress(unsigned compression, const uint8_t *src, size_t len, uint32_t sectorsize,
				  uint8_t *out, size_t cap);

/* The len bytes of data at logical from the first copy that reads. 0 or -errno. */
int extent_data_read(struct fs_info *fs, uint64_t logical, uint8_t *buf, uint64_t len);

#endif
