/* SPDX-License-Identifier: GPL-2.0-only */
/* The data of compressed inline file extents (zlib, lzo, zstd), decompressed to
 * check it against the extent's ram_bytes. */
#ifndef BTK_CHECK_INLINE_EXTENT_H
#define BTK_CHECK_INLINE_EXTENT_H

#include <stddef.h>
#include <stdint.h>

/* Decompress len bytes of inline extent data compressed with `compression`
 * (BTRFS_COMPRESS_*) into out (cap bytes). Returns the decompressed length
 * (at most cap), -EUCLEAN when the data is no valid stream or needs more
 * than cap bytes -EOPNOTSUPP for an unknown compression, -ENOMEM. */
long inline_extent_decompress(unsigned compression, const uint8_t *src, size_t len, uint8_t *out, size_t cap);

#endif
