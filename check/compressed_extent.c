// SPDX-License-Identifier: GPL-2.0-only
/* Decompressing compressed regular extents (check/compressed_extent.h). */
#include <errno.h>
#include <lzo/lzo1x.h>

#include "check/compressed_extent.h"
#include "check/inline_extent.h"
#include <btk/endian_access.h>
#include <btk/format.h>
#include <btk/volumes.h>

/* btrfs's lzo layout: le32 total length, then segments of le32 length and an
 * lzo1x stream, a segment header never split across a sector boundary (the
 * rest of such a sector is padding). */
static long unlzo_segments(const uint8_t *src, size_t len, uint32_t ss, uint8_t *out, size_t cap)
{
	size_t total, pos = 4, done = 0;

	if (lzo_init() != LZO_E_OK)
		return -ENOMEM;
	if (len < 4 || (total = get_le32(src)) > len || total < 4)
		return -EUCLEAN;
	while (pos < total && done < cap) {
		lzo_uint got = cap - done;
		uint32_t seg;
		if (ss - pos % ss < 4)
			pos += ss - pos % ss;
		if (pos + 4 > total)
			break;
		seg = get_le32(src + pos);
		pos += 4;
		if (seg == 0 || seg > total - pos)
			return -EUCLEAN;
		if (lzo1x_decompress_safe(src + pos, seg, out + done, &got, NULL) != LZO_E_OK)
			return -EUCLEAN;
		done += got;
		pos += seg;
	}
	return (long)done;
}

long compressed_extent_decompress(unsigned compression, const uint8_t *src, size_t len, uint32_t sectorsize,
				  uint8_t *out, size_t cap)
{
	if (compression == BTRFS_COMPRESS_LZO)
		return unlzo_segments(src, len, sectorsize, out, cap);
	return inline_extent_decompress(compression, src, len, out, cap);
}

int extent_data_read(struct fs_info *fs, uint64_t logical, uint8_t *buf, uint64_t len)
{
	int copies = volumes_num_copies(fs, logical), ret = -EIO;

	for (int m = 0; m < copies; m++)
		if ((ret = volumes_read(fs, logical, buf, len, m)) == 0)
			return 0;
	return ret;
}
