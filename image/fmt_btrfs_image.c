// SPDX-License-Identifier: GPL-2.0-only
/* The btrfs-image v0 dump format: writer and validating reader.
 *
 * A dump is a sequence of clusters. A cluster is a 1024-byte header block
 * (le64 magic, le64 file offset of this header, le32 nritems, u8 compress,
 * then nritems packed (le64 bytenr, le32 size) entries, zero-filled), followed
 * by the item bodies back to back (each zlib-compressed on its own when
 * compress is 1; size is the stored size), zero-padded to a multiple of 1024.
 * The end of the file after a whole cluster is the end of the dump. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "image/fmt_btrfs_image.h"
#include "image/imgio.h"
#include <btk/csum.h>
#include <btk/endian_access.h>
#include <btk/format.h>

#define BIMG_HEADER_BYTES 21u /* magic, bytenr, nritems, compress */
#define BIMG_ITEM_BYTES 12u
#define BIMG_V1_MAGIC 0x31765f506d55445fULL /* progs' experimental data dumps */

struct bimg_writer {
	int fd;
	int level;
	uint64_t cluster_start; /* file offset of the cluster being filled */
	uint32_t nitems;
	uint8_t header[BIMG_BLOCK_SIZE];
	/* stored bodies of the cluster's finished items */
	uint8_t *bodies;
	size_t bodies_len, bodies_cap;
	/* the run being collected (contiguous blocks, not yet an item) */
	uint8_t *run;
	uint64_t run_start;
	uint32_t run_len;
	uint8_t *zbuf;
	uLong zcap;
	uint64_t items, bytes_out;
};

int bimg_writer_open(struct bimg_writer **wp, int fd, int zlib_level)
{
	struct bimg_writer *w;

	*wp = NULL;
	if (zlib_level < 0 || zlib_level > 9)
		return -EINVAL;
	w = calloc(1, sizeof(*w));
	if (!w)
		return -ENOMEM;
	w->fd = fd;
	w->level = zlib_level;
	w->run = malloc(BIMG_MAX_ITEM_SIZE);
	w->zcap = compressBound(BIMG_MAX_ITEM_SIZE);
	w->zbuf = malloc(w->zcap);
	if (!w->run || !w->zbuf) {
		bimg_writer_free(w);
		return -ENOMEM;
	}
	*wp = w;
	return 0;
}

static int bodies_append(struct bimg_writer *w, const void *data, size_t len)
{
	if (w->bodies_len + len > w->bodies_cap) {
		size_t cap = w->bodies_cap ? w->bodies_cap : 65536;
		uint8_t *p;

		while (cap < w->bodies_len + len)
			cap *= 2;
		p = realloc(w->bodies, cap);
		if (!p)
			return -ENOMEM;
		w->bodies = p;
		w->bodies_cap = cap;
	}
	memcpy(w->bodies + w->bodies_len, data, len);
	w->bodies_len += len;
	return 0;
}

/* Write the cluster collected so far (header, bodies, padding) if it has items. */
static int flush_cluster(struct bimg_writer *w)
{
	static const uint8_t zero[BIMG_BLOCK_SIZE];
	size_t pad;
	int ret;

	if (!w->nitems)
		return 0;
	put_le64(w->header, BIMG_HEADER_MAGIC);
	put_le64(w->header + 8, w->cluster_start);
	put_le32(w->header + 16, w->nitems);
	w->header[20] = w->level > 0 ? BIMG_COMPRESS_ZLIB : BIMG_COMPRESS_NONE;
	pad = (BIMG_BLOCK_SIZE - w->bodies_len % BIMG_BLOCK_SIZE) % BIMG_BLOCK_SIZE;
	ret = img_write_all(w->fd, w->header, BIMG_BLOCK_SIZE);
	if (!ret)
		ret = img_write_all(w->fd, w->bodies, w->bodies_len);
	if (!ret && pad)
		ret = img_write_all(w->fd, zero, pad);
	if (ret)
		return ret;
	w->cluster_start += BIMG_BLOCK_SIZE + w->bodies_len + pad;
	w->bytes_out += BIMG_BLOCK_SIZE + w->bodies_len + pad;
	w->nitems = 0;
	w->bodies_len = 0;
	memset(w->header, 0, sizeof(w->header));
	return 0;
}

/* Turn the pending run into an item of the current cluster. */
static int flush_run(struct bimg_writer *w)
{
	const void *body = w->run;
	uLong blen = w->run_len;
	uint8_t *ent;
	int ret;

	if (!w->run_len)
		return 0;
	if (w->level > 0) {
		blen = w->zcap;
		if (compress2(w->zbuf, &blen, w->run, w->run_len, w->level) != Z_OK)
			return -EIO;
		body = w->zbuf;
	}
	ret = bodies_append(w, body, blen);
	if (ret)
		return ret;
	ent = w->header + BIMG_HEADER_BYTES + (size_t)w->nitems * BIMG_ITEM_BYTES;
	put_le64(ent, w->run_start);
	put_le32(ent + 8, (uint32_t)blen);
	w->nitems++;
	w->items++;
	w->run_len = 0;
	if (w->nitems >= BIMG_MAX_ITEMS)
		return flush_cluster(w);
	return 0;
}

int bimg_writer_add(struct bimg_writer *w, uint64_t bytenr, const void *data, uint32_t len)
{
	int ret;

	if (!len || len > BIMG_MAX_ITEM_SIZE || bytenr + len < bytenr)
		return -EINVAL;
	/* merge contiguous tree blocks like progs; the superblock stays alone */
	if (w->run_len && (w->run_start + w->run_len != bytenr ||
			   w->run_len + len > BIMG_MAX_ITEM_SIZE ||
			   w->run_start == BTRFS_SUPER_INFO_OFFSET || bytenr == BTRFS_SUPER_INFO_OFFSET)) {
		ret = flush_run(w);
		if (ret)
			return ret;
	}
	if (!w->run_len)
		w->run_start = bytenr;
	memcpy(w->run + w->run_len, data, len);
	w->run_len += len;
	return 0;
}

int bimg_writer_finish(struct bimg_writer *w)
{
	int ret = flush_run(w);

	return ret ? ret : flush_cluster(w);
}

void bimg_writer_stats(const struct bimg_writer *w, uint64_t *items, uint64_t *bytes_out)
{
	if (items)
		*items = w->items;
	if (bytes_out)
		*bytes_out = w->bytes_out;
}

void bimg_writer_free(struct bimg_writer *w)
{
	if (!w)
		return;
	free(w->bodies);
	free(w->run);
	free(w->zbuf);
	free(w);
}

/* ------------------------------------------------------------ reader */

struct bimg_reader {
	int fd;                 /* -1: memory */
	const uint8_t *mem;
	size_t mem_len;
	uint64_t pos;           /* bytes consumed from the input */
	uint8_t header[BIMG_BLOCK_SIZE];
	uint64_t cluster_start;
	uint32_t nitems, next_item;
	uint8_t compress;
	uint64_t body_bytes;    /* bytes of bodies read in this cluster */
	uint8_t *in;            /* stored item body */
	uint8_t *out;           /* decompressed item */
	size_t in_cap;
	bool in_cluster, failed;
	/* from the dump's superblock: to undo btrfs-image's crc32c stamps */
	uint32_t nodesize;
	uint16_t csum_type;
	uint64_t fixed_csums;
	char err[160];
};

/* Read up to len bytes; returns how many (short only at end of input) or -errno. */
static ssize_t src_read(struct bimg_reader *r, void *buf, size_t len)
{
	size_t got = 0;

	if (r->fd < 0) {
		size_t avail = r->pos < r->mem_len ? r->mem_len - (size_t)r->pos : 0;

		got = len < avail ? len : avail;
		memcpy(buf, r->mem + r->pos, got);
	} else {
		ssize_t n = img_read_upto(r->fd, buf, len);

		if (n < 0)
			return n;
		got = (size_t)n;
	}
	r->pos += got;
	return (ssize_t)got;
}

__attribute__((format(printf, 3, 4)))
static int fail(struct bimg_reader *r, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	r->failed = true;
	return err;
}

static int reader_alloc(struct bimg_reader **rp, int fd, const void *buf, size_t len)
{
	struct bimg_reader *r = calloc(1, sizeof(*r));

	*rp = NULL;
	if (!r)
		return -ENOMEM;
	r->fd = fd;
	r->mem = buf;
	r->mem_len = len;
	r->in_cap = compressBound(BIMG_MAX_ITEM_SIZE);
	r->in = malloc(r->in_cap);
	r->out = malloc(BIMG_MAX_ITEM_SIZE);
	if (!r->in || !r->out) {
		bimg_reader_free(r);
		return -ENOMEM;
	}
	*rp = r;
	return 0;
}

int bimg_reader_open(struct bimg_reader **rp, int fd)
{
	return reader_alloc(rp, fd, NULL, 0);
}

int bimg_reader_open_mem(struct bimg_reader **rp, const void *buf, size_t len)
{
	return reader_alloc(rp, -1, buf, len);
}

/* Read and check the next cluster header; 0 at a clean end of input. */
static int read_cluster_header(struct bimg_reader *r)
{
	uint64_t at = r->pos, magic;
	ssize_t n = src_read(r, r->header, BIMG_BLOCK_SIZE);
	uint32_t i;

	if (n < 0)
		return fail(r, (int)n, "read error at byte %llu: %s", (unsigned long long)at,
			    strerror((int)-n));
	if (n == 0)
		return 0;
	if ((size_t)n < BIMG_BLOCK_SIZE)
		return fail(r, -EIO, "truncated cluster header at byte %llu (%zd of %u bytes)",
			    (unsigned long long)at, n, BIMG_BLOCK_SIZE);
	magic = get_le64(r->header);
	if (magic == BIMG_V1_MAGIC)
		return fail(r, -EOPNOTSUPP,
			    "cluster at byte %llu: btrfs-image v1 (data) dumps are not supported",
			    (unsigned long long)at);
	if (magic != BIMG_HEADER_MAGIC)
		return fail(r, -EINVAL, "bad cluster magic 0x%016llx at byte %llu%s",
			    (unsigned long long)magic, (unsigned long long)at,
			    at ? "" : " (not a btrfs-image dump)");
	if (get_le64(r->header + 8) != at)
		return fail(r, -EINVAL, "cluster at byte %llu says it is at byte %llu",
			    (unsigned long long)at, (unsigned long long)get_le64(r->header + 8));
	r->nitems = get_le32(r->header + 16);
	r->compress = r->header[20];
	if (r->nitems == 0 || r->nitems > BIMG_MAX_ITEMS)
		return fail(r, -EINVAL, "cluster at byte %llu: %u items (1..%u allowed)",
			    (unsigned long long)at, r->nitems, BIMG_MAX_ITEMS);
	if (r->compress != BIMG_COMPRESS_NONE && r->compress != BIMG_COMPRESS_ZLIB)
		return fail(r, -EINVAL, "cluster at byte %llu: unknown compression %u",
			    (unsigned long long)at, r->compress);
	for (i = 0; i < r->nitems; i++) {
		const uint8_t *e = r->header + BIMG_HEADER_BYTES + (size_t)i * BIMG_ITEM_BYTES;
		uint64_t bytenr = get_le64(e);
		uint32_t size = get_le32(e + 8);
		uint64_t max = r->compress ? r->in_cap : BIMG_MAX_ITEM_SIZE;

		if (size == 0 || size > max)
			return fail(r, -EINVAL, "cluster at byte %llu, item %u: size %u (1..%llu allowed)",
				    (unsigned long long)at, i, size, (unsigned long long)max);
		if (bytenr + BIMG_MAX_ITEM_SIZE < bytenr)
			return fail(r, -EINVAL, "cluster at byte %llu, item %u: bytenr %llu out of range",
				    (unsigned long long)at, i, (unsigned long long)bytenr);
	}
	/* the bytes after the item table are not looked at: btrfs-image reuses its
	 * header buffer, so a cluster with fewer items than the one before it
	 * still holds that one's last entries there */
	r->cluster_start = at;
	r->next_item = 0;
	r->body_bytes = 0;
	r->in_cluster = true;
	return 1;
}

/* Skip and check the zero padding that ends a cluster. */
static int finish_cluster(struct bimg_reader *r)
{
	uint8_t pad[BIMG_BLOCK_SIZE];
	size_t want = (BIMG_BLOCK_SIZE - r->body_bytes % BIMG_BLOCK_SIZE) % BIMG_BLOCK_SIZE;
	uint64_t at = r->pos;
	ssize_t n;
	size_t i;

	r->in_cluster = false;
	if (!want)
		return 0;
	n = src_read(r, pad, want);
	if (n < 0)
		return fail(r, (int)n, "read error at byte %llu: %s", (unsigned long long)at,
			    strerror((int)-n));
	if ((size_t)n < want)
		return fail(r, -EIO, "truncated cluster padding at byte %llu (cluster at byte %llu)",
			    (unsigned long long)(at + (size_t)n), (unsigned long long)r->cluster_start);
	for (i = 0; i < want; i++)
		if (pad[i])
			return fail(r, -EINVAL, "non-zero cluster padding at byte %llu",
				    (unsigned long long)(at + i));
	return 0;
}

/* Inflate one zlib item body of slen bytes into r->out; returns its length or <0. */
static int inflate_item(struct bimg_reader *r, uint32_t slen, uint64_t at, uint32_t *olen)
{
	z_stream zs;
	int zret;

	memset(&zs, 0, sizeof(zs));
	if (inflateInit(&zs) != Z_OK)
		return fail(r, -ENOMEM, "cannot initialize zlib");
	zs.next_in = r->in;
	zs.avail_in = slen;
	zs.next_out = r->out;
	zs.avail_out = BIMG_MAX_ITEM_SIZE;
	zret = inflate(&zs, Z_FINISH);
	*olen = BIMG_MAX_ITEM_SIZE - zs.avail_out;
	inflateEnd(&zs);
	if (zret == Z_STREAM_END && zs.avail_in == 0)
		return 0;
	if (zret == Z_STREAM_END)
		return fail(r, -EINVAL, "item at byte %llu: %u bytes after the end of its zlib stream",
			    (unsigned long long)at, zs.avail_in);
	if (zret == Z_BUF_ERROR && zs.avail_out == 0)
		return fail(r, -EINVAL, "item at byte %llu inflates to more than %u bytes",
			    (unsigned long long)at, BIMG_MAX_ITEM_SIZE);
	if (zret == Z_BUF_ERROR)
		return fail(r, -EINVAL, "item at byte %llu: zlib stream ends early",
			    (unsigned long long)at);
	return fail(r, -EINVAL, "item at byte %llu: corrupt zlib data (%s)", (unsigned long long)at,
		    zs.msg ? zs.msg : "error");
}

/* The superblock tells the checksum type; tree blocks of other types get
 * their real checksum back (see bimg_fix_block_csum). */
static void fix_item(struct bimg_reader *r, uint64_t bytenr, uint8_t *data, uint32_t len)
{
	if (bytenr == BTRFS_SUPER_INFO_OFFSET && len == BTRFS_SUPER_INFO_SIZE) {
		uint32_t ns = super_nodesize(data);

		if (super_magic(data) == BTRFS_MAGIC && ns >= 4096 && ns <= 65536 && !(ns & (ns - 1)) &&
		    csum_size(super_csum_type(data))) {
			r->nodesize = ns;
			r->csum_type = super_csum_type(data);
		}
		return;
	}
	if (!r->nodesize || r->csum_type == BTRFS_CSUM_TYPE_CRC32 || len % r->nodesize)
		return;
	for (uint32_t off = 0; off < len; off += r->nodesize)
		if (bimg_fix_block_csum(data + off, r->nodesize, r->csum_type) == 1)
			r->fixed_csums++;
}

int bimg_reader_next(struct bimg_reader *r, uint64_t *bytenr, const uint8_t **data, uint32_t *len)
{
	const uint8_t *e;
	uint32_t slen, olen = 0;
	uint64_t at;
	ssize_t n;
	int ret;

	if (r->failed)
		return -EINVAL;
	if (!r->in_cluster) {
		ret = read_cluster_header(r);
		if (ret <= 0)
			return ret;
	}
	e = r->header + BIMG_HEADER_BYTES + (size_t)r->next_item * BIMG_ITEM_BYTES;
	slen = get_le32(e + 8);
	at = r->pos;
	n = src_read(r, r->in, slen);
	if (n < 0)
		return fail(r, (int)n, "read error at byte %llu: %s", (unsigned long long)at,
			    strerror((int)-n));
	if ((size_t)n < slen)
		return fail(r, -EIO, "truncated item %u of the cluster at byte %llu: input ends at byte %llu, "
			    "%u bytes expected from byte %llu", r->next_item,
			    (unsigned long long)r->cluster_start, (unsigned long long)r->pos, slen,
			    (unsigned long long)at);
	r->body_bytes += slen;
	if (r->compress == BIMG_COMPRESS_ZLIB) {
		ret = inflate_item(r, slen, at, &olen);
		if (ret)
			return ret;
		*data = r->out;
	} else {
		olen = slen;
		*data = r->in;
	}
	if (olen == 0)
		return fail(r, -EINVAL, "item at byte %llu is empty", (unsigned long long)at);
	*bytenr = get_le64(e);
	*len = olen;
	fix_item(r, *bytenr, (uint8_t *)*data, olen);
	if (++r->next_item == r->nitems) {
		ret = finish_cluster(r);
		if (ret)
			return ret;
	}
	return 1;
}

uint64_t bimg_reader_fixed_csums(const struct bimg_reader *r)
{
	return r->fixed_csums;
}

const char *bimg_reader_error(const struct bimg_reader *r)
{
	return r->err;
}

void bimg_reader_free(struct bimg_reader *r)
{
	if (!r)
		return;
	free(r->in);
	free(r->out);
	free(r);
}

bool bimg_probe(const void *head, size_t n)
{
	const uint8_t *p = head;

	if (n < 8 || get_le64(p) != BIMG_HEADER_MAGIC)
		return false;
	/* the first cluster is at offset 0 and says so */
	return n < 16 || get_le64(p + 8) == 0;
}

int bimg_fix_block_csum(uint8_t *block, uint32_t nodesize, uint16_t csum_type)
{
	uint8_t want[BTRFS_CSUM_SIZE];
	unsigned size = csum_size(csum_type);

	if (!size || nodesize <= BTRFS_CSUM_SIZE)
		return -EINVAL;
	if (csum_compute(csum_type, block + BTRFS_CSUM_SIZE, nodesize - BTRFS_CSUM_SIZE, want))
		return -EINVAL;
	if (!memcmp(block, want, size))
		return 0;
	if (csum_type != BTRFS_CSUM_TYPE_CRC32) {
		uint8_t crc[BTRFS_CSUM_SIZE];

		csum_compute(BTRFS_CSUM_TYPE_CRC32, block + BTRFS_CSUM_SIZE, nodesize - BTRFS_CSUM_SIZE, crc);
		if (!memcmp(block, crc, csum_size(BTRFS_CSUM_TYPE_CRC32))) {
			memcpy(block, want, BTRFS_CSUM_SIZE);
			return 1;
		}
	}
	return -EUCLEAN;
}
