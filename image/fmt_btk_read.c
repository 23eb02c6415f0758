// SPDX-License-Identifier: GPL-2.0-only
/* Reading the native image format sequentially (a pipe works), checking
 * every field before it is used: sizes against fixed limits before any
 * allocation, each frame's checksum before decompressing it, each record
 * against its frame, the trailer against what was read, and the checksum of
 * the whole stream. Errors name the byte offset of the bad field. */
#include <errno.h>
#include <lz4.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>
#include <zstd.h>

#include "image/fmt_btk.h"
#include "image/imgio.h"
#include <btk/endian_access.h>

struct btk_reader {
	struct img_input in;
	XXH64_state_t *xxh;       /* whole stream */
	XXH64_state_t *idx;       /* index entries as read */
	struct img_header h;
	uint8_t *comp;
	size_t comp_cap;
	struct img_frame *fraw, *fprev; /* the current and the previous frame */
	uint8_t *raw;             /* fraw's bytes */
	uint8_t *prev;            /* fprev's: a chained frame's zstd prefix */
	size_t raw_len, pos, prev_len;
	uint32_t rec_left;
	uint64_t frame_off;
	ZSTD_DCtx *zd;
	bool ended;
	int failed;
	struct img_totals totals;
	char err[320];
};

void img_frame_get(struct img_frame *f)
{
	__atomic_add_fetch(&f->refs, 1, __ATOMIC_RELAXED);
}

void img_frame_put(struct img_frame *f)
{
	if (!__atomic_sub_fetch(&f->refs, 1, __ATOMIC_ACQ_REL))
		free(f);
}

bool btk_probe(const void *head, size_t n)
{
	return n >= 8 && !memcmp(head, BTK_IMG_MAGIC, 8);
}

__attribute__((format(printf, 3, 4)))
static int rd_error(struct btk_reader *r, uint64_t off, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	snprintf(r->err, sizeof(r->err), "image byte offset %llu: %s", (unsigned long long)off, what);
	r->failed = -EUCLEAN;
	return -EUCLEAN;
}

/* Read exactly len bytes into buf, hashing them; a short read is a truncation error. */
static int rd_exact(struct btk_reader *r, void *buf, size_t len, const char *what)
{
	uint64_t off = r->in.offset;
	ssize_t n = img_input_read(&r->in, buf, len);

	if (n < 0) {
		snprintf(r->err, sizeof(r->err), "image byte offset %llu: reading %s: %s", (unsigned long long)off,
			 what, strerror((int)-n));
		return r->failed = (int)n;
	}
	if ((size_t)n < len)
		return rd_error(r, off + (uint64_t)n, "image truncated inside %s (%zu of %zu bytes)", what,
				(size_t)n, len);
	XXH64_update(r->xxh, buf, len);
	return 0;
}

static bool is_pow2_in(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v >= lo && v <= hi && !(v & (v - 1));
}

static int read_header(struct btk_reader *r)
{
	uint8_t fixed[BTK_IMG_HEADER_FIXED], sum[8], dev[BTK_IMG_DEVICE_SIZE];
	struct img_header *h = &r->h;
	uint32_t size, expect;
	XXH64_state_t *hs = XXH64_createState();
	int ret;

	if (!hs)
		return -ENOMEM;
	XXH64_reset(hs, 0);
	if ((ret = rd_exact(r, fixed, sizeof(fixed), "the header")))
		goto out;
	XXH64_update(hs, fixed, sizeof(fixed));
	if (memcmp(fixed, BTK_IMG_MAGIC, 8)) {
		ret = rd_error(r, 0, "not a btk image (bad magic)");
		goto out;
	}
	h->version = get_le32(fixed + 8);
	if (h->version != BTK_IMG_VERSION) {
		ret = rd_error(r, 8, "unsupported image version %u (this btk-image reads version %u)", h->version,
			       BTK_IMG_VERSION);
		goto out;
	}
	size = get_le32(fixed + 12);
	memcpy(h->fsid, fixed + 16, 16);
	memcpy(h->metadata_uuid, fixed + 32, 16);
	h->nodesize = get_le32(fixed + 48);
	h->sectorsize = get_le32(fixed + 52);
	h->csum_type = get_le16(fixed + 56);
	h->compression = fixed[58];
	h->sanitize = fixed[59];
	h->flags = get_le32(fixed + 60);
	h->generation = get_le64(fixed + 64);
	h->created = get_le64(fixed + 72);
	h->num_devices = get_le32(fixed + 80);
	h->sys_chunk_array_size = get_le32(fixed + 84);
	if (!is_pow2_in(h->nodesize, 4096, 65536))
		ret = rd_error(r, 48, "bad nodesize %u", h->nodesize);
	else if (!is_pow2_in(h->sectorsize, 4096, 65536))
		ret = rd_error(r, 52, "bad sectorsize %u", h->sectorsize);
	else if (h->csum_type > 3)
		ret = rd_error(r, 56, "unknown checksum type %u", h->csum_type);
	else if (h->compression > IMG_COMPRESS_LZ4)
		ret = rd_error(r, 58, "unknown compression %u", h->compression);
	else if (h->sanitize > 2)
		ret = rd_error(r, 59, "unknown sanitize mode %u", h->sanitize);
	else if (h->flags & ~(uint32_t)(IMG_FLAG_DATA | IMG_FLAG_POSTORDER))
		ret = rd_error(r, 60, "unknown flags 0x%x", h->flags);
	else if (h->num_devices == 0 || h->num_devices > BTK_IMG_MAX_DEVICES)
		ret = rd_error(r, 80, "bad device count %u", h->num_devices);
	else if (h->sys_chunk_array_size > sizeof(h->sys_chunk_array))
		ret = rd_error(r, 84, "system chunk array of %u bytes is too large", h->sys_chunk_array_size);
	if (ret)
		goto out;
	expect = BTK_IMG_HEADER_FIXED + h->num_devices * BTK_IMG_DEVICE_SIZE + h->sys_chunk_array_size + 8;
	if (size != expect) {
		ret = rd_error(r, 12, "header size %u does not match its contents (%u)", size, expect);
		goto out;
	}
	h->devices = calloc(h->num_devices, sizeof(*h->devices));
	if (!h->devices) {
		ret = -ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < h->num_devices; i++) {
		if ((ret = rd_exact(r, dev, sizeof(dev), "the device list")))
			goto out;
		XXH64_update(hs, dev, sizeof(dev));
		h->devices[i].devid = get_le64(dev);
		h->devices[i].total_bytes = get_le64(dev + 8);
		h->devices[i].bytes_used = get_le64(dev + 16);
		memcpy(h->devices[i].uuid, dev + 24, 16);
	}
	if ((ret = rd_exact(r, h->sys_chunk_array, h->sys_chunk_array_size, "the system chunk array")))
		goto out;
	XXH64_update(hs, h->sys_chunk_array, h->sys_chunk_array_size);
	if ((ret = rd_exact(r, sum, 8, "the header checksum")))
		goto out;
	if (get_le64(sum) != XXH64_digest(hs))
		ret = rd_error(r, r->in.offset - 8, "header checksum mismatch");
out:
	XXH64_freeState(hs);
	return ret;
}

int btk_reader_open(struct btk_reader **out, int fd, const void *prefix, size_t prefix_len)
{
	struct btk_reader *r = calloc(1, sizeof(*r));
	int ret;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	*out = r;
	if ((ret = img_input_init(&r->in, fd, prefix, prefix_len)))
		return ret;
	r->xxh = XXH64_createState();
	r->idx = XXH64_createState();
	r->zd = ZSTD_createDCtx();
	if (!r->xxh || !r->idx || !r->zd) {
		snprintf(r->err, sizeof(r->err), "out of memory");
		return -ENOMEM;
	}
	XXH64_reset(r->xxh, 0);
	XXH64_reset(r->idx, 0);
	return read_header(r);
}

const struct img_header *btk_reader_header(const struct btk_reader *r)
{
	return &r->h;
}

/* The trailer after the last frame: totals, index, sizes, stream checksum. */
static int read_trailer(struct btk_reader *r, const uint8_t magic[4])
{
	uint8_t fixed[BTK_IMG_TRAILER_FIXED], buf[4096], tail[8];
	uint64_t start = r->in.offset - 4, index_len, left;
	ssize_t n;
	int ret;

	memcpy(fixed, magic, 4);
	if ((ret = rd_exact(r, fixed + 4, sizeof(fixed) - 4, "the trailer")))
		return ret;
	if (get_le32(fixed + 4) != r->totals.frames)
		return rd_error(r, start + 4, "trailer counts %u frames, the image has %llu", get_le32(fixed + 4),
				(unsigned long long)r->totals.frames);
	if (get_le64(fixed + 8) != r->totals.records || get_le64(fixed + 16) != r->totals.raw_bytes ||
	    get_le64(fixed + 24) != r->totals.tree_bytes || get_le64(fixed + 32) != r->totals.data_bytes ||
	    get_le64(fixed + 40) != r->totals.super_records)
		return rd_error(r, start + 8, "trailer totals do not match the records read");
	index_len = r->totals.frames * BTK_IMG_INDEX_ENTRY;
	{
		XXH64_state_t *got = XXH64_createState();
		if (!got)
			return -ENOMEM;
		XXH64_reset(got, 0);
		for (left = index_len; left;) {
			size_t k = left < sizeof(buf) ? (size_t)left : sizeof(buf);
			if ((ret = rd_exact(r, buf, k, "the frame index"))) {
				XXH64_freeState(got);
				return ret;
			}
			XXH64_update(got, buf, k);
			left -= k;
		}
		ret = XXH64_digest(got) != XXH64_digest(r->idx);
		XXH64_freeState(got);
		if (ret)
			return rd_error(r, start + BTK_IMG_TRAILER_FIXED, "frame index does not match the frames");
	}
	if ((ret = rd_exact(r, tail, 8, "the trailer size")))
		return ret;
	if (get_le64(tail) != BTK_IMG_TRAILER_FIXED + index_len + 16)
		return rd_error(r, r->in.offset - 8, "bad trailer size %llu", (unsigned long long)get_le64(tail));
	{
		uint64_t digest = XXH64_digest(r->xxh), off = r->in.offset;
		n = img_input_read(&r->in, tail, 8);
		if (n < 0)
			return r->failed = (int)n;
		if (n < 8)
			return rd_error(r, off + (uint64_t)n, "image truncated inside the stream checksum");
		if (get_le64(tail) != digest)
			return rd_error(r, off, "stream checksum mismatch: the image is corrupt");
	}
	n = img_input_read(&r->in, buf, 1);
	if (n > 0)
		return rd_error(r, r->in.offset - 1, "unexpected data after the end of the image");
	if (n < 0)
		return r->failed = (int)n;
	r->totals.image_bytes = r->in.offset;
	r->ended = true;
	return 0;
}

static int next_frame(struct btk_reader *r)
{
	uint8_t fh[BTK_IMG_FRAME_HEADER], e[BTK_IMG_INDEX_ENTRY];
	uint32_t clen, rlen, nrec;
	uint64_t off = r->in.offset;
	bool chained;
	int ret;

	if ((ret = rd_exact(r, fh, 4, "a frame header")))
		return ret;
	if (!memcmp(fh, "BEND", 4))
		return read_trailer(r, fh);
	chained = !memcmp(fh, "BFRP", 4);
	if (memcmp(fh, "BFRM", 4) && !chained)
		return rd_error(r, off, "bad frame magic");
	if (chained && (r->h.compression != IMG_COMPRESS_ZSTD || !r->totals.frames))
		return rd_error(r, off, "a chained frame %s", r->totals.frames ? "needs zstd" : "comes first");
	if ((ret = rd_exact(r, fh + 4, sizeof(fh) - 4, "a frame header")))
		return ret;
	clen = get_le32(fh + 4);
	rlen = get_le32(fh + 8);
	nrec = get_le32(fh + 12);
	if (rlen == 0 || rlen > BTK_IMG_FRAME_RAW_MAX)
		return rd_error(r, off + 8, "frame size %u out of range", rlen);
	if (clen == 0 || clen > BTK_IMG_FRAME_RAW_MAX + (BTK_IMG_FRAME_RAW_MAX >> 4) ||
	    (r->h.compression == IMG_COMPRESS_NONE && clen != rlen))
		return rd_error(r, off + 4, "compressed frame size %u out of range", clen);
	if (nrec == 0 || (uint64_t)nrec * BTK_IMG_RECORD_HEADER > rlen)
		return rd_error(r, off + 12, "bad record count %u", nrec);
	/* the last frame's bytes become the prefix; each frame gets a new
	 * buffer, since records handed out may still be referenced (img_frame) */
	if (r->fprev)
		img_frame_put(r->fprev);
	r->fprev = r->fraw;
	r->prev = r->raw;
	r->prev_len = r->raw_len;
	r->fraw = malloc(sizeof(*r->fraw) + rlen);
	r->raw = NULL;
	r->raw_len = 0;
	if (!r->fraw)
		return -ENOMEM;
	r->fraw->refs = 1;
	r->fraw->len = rlen;
	r->raw = r->fraw->data;
	if (r->h.compression == IMG_COMPRESS_NONE) {
		if ((ret = rd_exact(r, r->raw, clen, "a frame")))
			return ret;
		if (XXH64(r->raw, clen, 0) != get_le64(fh + 16))
			return rd_error(r, off, "frame checksum mismatch");
	} else {
		if (clen > r->comp_cap) {
			free(r->comp);
			r->comp_cap = 0;
			if (!(r->comp = malloc(clen)))
				return -ENOMEM;
			r->comp_cap = clen;
		}
		if ((ret = rd_exact(r, r->comp, clen, "a frame")))
			return ret;
		if (XXH64(r->comp, clen, 0) != get_le64(fh + 16))
			return rd_error(r, off, "frame checksum mismatch");
	}
	if (r->h.compression == IMG_COMPRESS_ZSTD) {
		size_t n;
		if (chained && ZSTD_isError(ZSTD_DCtx_refPrefix(r->zd, r->prev, r->prev_len)))
			return rd_error(r, off, "cannot use the previous frame as a prefix");
		n = ZSTD_decompressDCtx(r->zd, r->raw, rlen, r->comp, clen);
		if (ZSTD_isError(n) || n != rlen)
			return rd_error(r, off, "frame does not decompress (zstd)");
	} else if (r->h.compression == IMG_COMPRESS_LZ4) {
		int n = LZ4_decompress_safe((const char *)r->comp, (char *)r->raw, (int)clen, (int)rlen);
		if (n < 0 || (uint32_t)n != rlen)
			return rd_error(r, off, "frame does not decompress (lz4)");
	}
	r->raw_len = rlen;
	r->pos = 0;
	r->rec_left = nrec;
	r->frame_off = off;
	r->totals.frames++;
	/* the index entry the writer made for this frame; first/end are added as records pass */
	put_le64(e, off);
	XXH64_update(r->idx, e, 8);
	return 1;
}

int btk_reader_next(struct btk_reader *r, struct img_record *rec)
{
	int ret;

	if (r->failed)
		return r->failed;
	while (!r->rec_left) {
		if (r->ended)
			return 0;
		ret = next_frame(r);
		if (ret <= 0)
			return ret < 0 ? ret : (r->ended ? 0 : rd_error(r, r->in.offset, "bad frame"));
		if (!r->ended) {
			/* index entry: offset (hashed above), then first/end logical, size, count */
			uint64_t first = UINT64_MAX, end = 0;
			size_t p = 0;
			uint8_t e[24];
			for (uint32_t i = 0; i < r->rec_left; i++) {
				uint64_t lg;
				uint32_t len;
				uint16_t type;
				if (r->raw_len - p < BTK_IMG_RECORD_HEADER)
					return rd_error(r, r->frame_off, "record %u of the frame overruns it", i);
				lg = get_le64(r->raw + p);
				len = get_le32(r->raw + p + 8);
				type = get_le16(r->raw + p + 12);
				if (len > r->raw_len - p - BTK_IMG_RECORD_HEADER)
					return rd_error(r, r->frame_off, "record %u of the frame (length %u) overruns it",
							i, len);
				if (type < IMG_REC_TREE || type > IMG_REC_SUPER)
					return rd_error(r, r->frame_off, "record %u of the frame has unknown type %u", i,
							type);
				if (get_le16(r->raw + p + 14) > (type == IMG_REC_SUPER ? 2 : 0))
					return rd_error(r, r->frame_off, "record %u of the frame has a bad copy number %u",
							i, get_le16(r->raw + p + 14));
				if (type != IMG_REC_SUPER && lg + len < lg)
					return rd_error(r, r->frame_off, "record %u of the frame wraps around", i);
				if (type != IMG_REC_SUPER) {
					if (lg < first)
						first = lg;
					if (lg + len > end)
						end = lg + len;
				}
				p += BTK_IMG_RECORD_HEADER + len;
			}
			if (p != r->raw_len)
				return rd_error(r, r->frame_off, "frame has %zu bytes after its last record",
						r->raw_len - p);
			put_le64(e, first);
			put_le64(e + 8, end);
			put_le32(e + 16, (uint32_t)r->raw_len);
			put_le32(e + 20, r->rec_left);
			XXH64_update(r->idx, e, sizeof(e));
		}
	}
	rec->logical = get_le64(r->raw + r->pos);
	rec->len = get_le32(r->raw + r->pos + 8);
	rec->type = get_le16(r->raw + r->pos + 12);
	rec->copy = get_le16(r->raw + r->pos + 14);
	rec->data = r->raw + r->pos + BTK_IMG_RECORD_HEADER;
	rec->frame = r->fraw;
	rec->frame_offset = r->frame_off;
	r->pos += BTK_IMG_RECORD_HEADER + rec->len;
	r->rec_left--;
	r->totals.records++;
	r->totals.raw_bytes += rec->len;
	if (rec->type == IMG_REC_TREE)
		r->totals.tree_bytes += rec->len;
	else if (rec->type == IMG_REC_DATA)
		r->totals.data_bytes += rec->len;
	else
		r->totals.super_records++;
	return 1;
}

void btk_reader_totals(const struct btk_reader *r, struct img_totals *out)
{
	*out = r->totals;
}

const char *btk_reader_error(const struct btk_reader *r)
{
	return r->err[0] ? r->err : "unknown error";
}

void btk_reader_free(struct btk_reader *r)
{
	if (!r)
		return;
	img_input_release(&r->in);
	XXH64_freeState(r->xxh);
	XXH64_freeState(r->idx);
	ZSTD_freeDCtx(r->zd);
	free(r->h.devices);
	free(r->comp);
	if (r->fraw)
		img_frame_put(r->fraw);
	if (r->fprev)
		img_frame_put(r->fprev);
	free(r);
}
