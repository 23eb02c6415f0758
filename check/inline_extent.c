// SPDX-License-Identifier: GPL-2.0-only
/* Decompressing compressed inline extents (check/inline_extent.h). */
#include <errno.h>
#include <lzo/lzo1x.h>
#include <zlib.h>
#include <zstd.h>

#include "check/inline_extent.h"
#include <btk/endian_access.h>
#include <btk/format.h>

/* One zlib stream (with its header, as the kernel writes it) to its end. */
static long inflate_all(const uint8_t *src, size_t len, uint8_t *out, size_t cap)
{
	z_stream zs = { 0 };
	int ret;

	if (inflateInit(&zs) != Z_OK)
		return -ENOMEM;
	zs.next_in = (Bytef *)src;
	zs.avail_in = (uInt)len;
	zs.next_out = out;
	zs.avail_out = (uInt)cap;
	ret = inflate(&zs, Z_FINISH);
	inflateEnd(&zs);
	return ret == Z_STREAM_END ? (long)zs.total_out : ret == Z_MEM_ERROR ? -ENOMEM : -EUCLEAN;
}

/* One zstd frame; the kernel's frames may omit the content size. */
static long unzstd(const uint8_t *src, size_t len, uint8_t *out, size_t cap)
{
	ZSTD_DStream *ds = ZSTD_createDStream();
	ZSTD_inBuffer in = { src, len, 0 };
	ZSTD_outBuffer o = { out, cap, 0 };
	size_t r;

	if (!ds)
		return -ENOMEM;
	r = ZSTD_initDStream(ds);
	while (!ZSTD_isError(r) && r != 0 && (in.pos < in.size || o.pos < o.size)) {
		size_t before_in = in.pos, before_out = o.pos;
		r = ZSTD_decompressStream(ds, &o, &in);
		if (!ZSTD_isError(r) && r != 0 && in.pos == before_in && o.pos == before_out)
			break; /* no progress: truncated frame or no room left */
	}
	ZSTD_freeDStream(ds);
	return !ZSTD_isError(r) && r == 0 ? (long)o.pos : -EUCLEAN;
}

/* btrfs's lzo layout, inline as the kernel reads it: le32 total length (the
 * whole item data), then one segment: le32 length and an lzo1x stream. */
static long unlzo(const uint8_t *src, size_t len, uint8_t *out, size_t cap)
{
	lzo_uint got = cap;
	uint32_t seg;

	if (lzo_init() != LZO_E_OK)
		return -ENOMEM;
	if (len < 8 || get_le32(src) != len)
		return -EUCLEAN;
	seg = get_le32(src + 4);
	if (seg > len - 8)
		return -EUCLEAN;
	if (lzo1x_decompress_safe(src + 8, seg, out, &got, NULL) != LZO_E_OK)
		return -EUCLEAN;
	return (long)got;
}

long inline_extent_decompress(unsigned compression, const uint8_t *src, size_t len, uint8_t *out, size_t cap)
{
	switch (compression) {
	case BTRFS_COMPRESS_ZLIB: return inflate_all(src, len, out, cap);
	case BTRFS_COMPRESS_ZSTD: return unzstd(src, len, out, cap);
	case BTRFS_COMPRESS_LZO: return unlzo(src, len, out, cap);
	default: return -EOPNOTSUPP;
	}
}
