/* SPDX-License-Identifier: GPL-2.0-only */
/* The native btk-image format (doc/image-format.md): a header, a stream of
 * independently compressed frames of (logical, length, payload) records, and
 * a trailer with the frame index and a checksum of the whole stream. The
 * writer compresses frames on worker threads and writes them in order; the
 * reader validates every field and reads from a pipe as well as a file. */
#ifndef BTK_IMAGE_FMT_BTK_H
#define BTK_IMAGE_FMT_BTK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BTK_IMG_MAGIC "BTKIMAGE"
#define BTK_IMG_VERSION 1
#define BTK_IMG_HEADER_FIXED 128
#define BTK_IMG_DEVICE_SIZE 64
#define BTK_IMG_MAX_DEVICES 1024
#define BTK_IMG_FRAME_HEADER 24
#define BTK_IMG_RECORD_HEADER 16
#define BTK_IMG_INDEX_ENTRY 32
#define BTK_IMG_TRAILER_FIXED 48
#define BTK_IMG_FRAME_RAW_DEFAULT (16u << 20)
#define BTK_IMG_FRAME_RAW_MIN (64u << 10)
#define BTK_IMG_ZSTD_LEVEL 1                     /* default zstd level */
#define BTK_IMG_ZSTD_HASH_LOG 20                 /* zstd hash and chain tables: at least 2^20 entries */
#define BTK_IMG_FRAME_RAW_MAX (64u << 20)       /* the reader refuses larger frames */
#define BTK_IMG_MAX_RECORD (1u << 20)            /* data records are split to this */

enum img_compress { IMG_COMPRESS_NONE = 0, IMG_COMPRESS_ZSTD = 1, IMG_COMPRESS_LZ4 = 2 };
enum img_record_type { IMG_REC_TREE = 1, IMG_REC_DATA = 2, IMG_REC_SUPER = 3 };

#define IMG_FLAG_DATA (1u << 0)        /* data extents included */
#define IMG_FLAG_POSTORDER (1u << 1)   /* every node follows its children */

struct img_device {
	uint64_t devid;
	uint64_t total_bytes;
	uint64_t bytes_used;
	uint8_t uuid[16];
};

/* What the header describes. */
struct img_header {
	uint32_t version;
	uint8_t fsid[16];
	uint8_t metadata_uuid[16];
	uint32_t nodesize;
	uint32_t sectorsize;
	uint16_t csum_type;
	uint8_t compression;     /* enum img_compress */
	uint8_t sanitize;        /* enum sanitize_mode values: 0 none, 1 random, 2 collide */
	uint32_t flags;          /* IMG_FLAG_* */
	uint64_t generation;
	uint64_t created;        /* unix seconds */
	uint32_t num_devices;
	struct img_device *devices;
	uint32_t sys_chunk_array_size;
	uint8_t sys_chunk_array[2048];
};

/* A frame's raw bytes, shared: records point into it; whoever keeps such a
 * pointer past the next record takes a reference (thread-safe count). */
struct img_frame {
	int refs;
	size_t len;
	uint8_t data[];
};
void img_frame_get(struct img_frame *f);
void img_frame_put(struct img_frame *f);

/* One record read back; data stays valid until the next call (longer with a
 * reference on frame). */
struct img_record {
	uint64_t logical;        /* for IMG_REC_SUPER: the devid */
	uint32_t len;
	uint16_t type;
	uint16_t copy;           /* IMG_REC_SUPER: which superblock copy (0 primary, 1 at 64 MiB, 2 at 256 GiB) */
	const uint8_t *data;
	uint64_t frame_offset;   /* where its frame starts in the image */
	struct img_frame *frame; /* holding data, or NULL (btrfs-image format) */
};

/* Totals the trailer records (and the reader recounts). */
struct img_totals {
	uint64_t frames, records, raw_bytes, tree_bytes, data_bytes, super_records;
	uint64_t image_bytes;    /* bytes of the whole image file */
};

struct btk_writer;
struct btk_writer_opts {
	enum img_compress comp;
	int level;               /* compressor level (0 = default) */
	unsigned threads;        /* compression workers (>= 1) */
	size_t frame_size;       /* raw bytes per frame (0 = default); a larger record gets a frame of its own */
};
int btk_writer_open(struct btk_writer **w, int fd, const struct img_header *h, const struct btk_writer_opts *o,
		    char *err, size_t errlen);
int btk_writer_add(struct btk_writer *w, uint16_t type, uint64_t logical, const void *data, uint32_t len);
/* A superblock copy other than the primary, kept because it differs from the primary. */
int btk_writer_add_super_copy(struct btk_writer *w, uint64_t devid, unsigned copy, const void *sb);
/* Write the last frame and the trailer; the totals are returned if wanted. */
int btk_writer_finish(struct btk_writer *w, struct img_totals *totals);
const char *btk_writer_error(const struct btk_writer *w);
void btk_writer_free(struct btk_writer *w);

struct btk_reader;
/* prefix: bytes already read from fd (format probing), consumed first. */
int btk_reader_open(struct btk_reader **r, int fd, const void *prefix, size_t prefix_len);
const struct img_header *btk_reader_header(const struct btk_reader *r);
/* 1 = a record, 0 = the end (trailer and stream checksum verified), <0 = error. */
int btk_reader_next(struct btk_reader *r, struct img_record *rec);
/* After the end: what was read and what the trailer says (they were compared). */
void btk_reader_totals(const struct btk_reader *r, struct img_totals *out);
const char *btk_reader_error(const struct btk_reader *r);
void btk_reader_free(struct btk_reader *r);

/* The first bytes look like a native image. */
bool btk_probe(const void *head, size_t n);
const char *img_compress_name(unsigned c);

#endif
