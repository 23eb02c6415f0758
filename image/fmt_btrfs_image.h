/* SPDX-License-Identifier: GPL-2.0-only */
/* The btrfs-image (v0) metadata dump format, as btrfs-progs' image/ code
 * writes and `btrfs-image -r` reads it: a sequence of 1024-byte cluster
 * headers, each followed by the (optionally zlib-compressed) bodies of its
 * items, the whole cluster padded to 1024 bytes. */
#ifndef BTK_IMAGE_FMT_BTRFS_IMAGE_H
#define BTK_IMAGE_FMT_BTRFS_IMAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BIMG_HEADER_MAGIC 0xbd5c25e27295668bULL
#define BIMG_BLOCK_SIZE 1024u
#define BIMG_MAX_ITEMS ((BIMG_BLOCK_SIZE - 24u) / 12u) /* 83 items per cluster */
#define BIMG_COMPRESS_NONE 0u
#define BIMG_COMPRESS_ZLIB 1u
/* The largest item body the reader accepts (progs' limit is 256 KiB). */
#define BIMG_MAX_ITEM_SIZE (256u * 1024u)

struct bimg_writer;
/* A writer appending to fd (which may be a pipe); zlib_level 0 stores items
 * uncompressed (compress field 0), 1..9 compresses each item with zlib. */
int bimg_writer_open(struct bimg_writer **w, int fd, int zlib_level);
/* Queue one block (a tree block, or the 4096-byte superblock at 65536, which
 * `btrfs-image -r` wants in the first cluster: add it first). Like progs, runs
 * of contiguous blocks are merged into one item of up to 256 KiB; a cluster
 * is written when it holds BIMG_MAX_ITEMS items. */
int bimg_writer_add(struct bimg_writer *w, uint64_t bytenr, const void *data, uint32_t len);
/* Write the last, partial cluster. */
int bimg_writer_finish(struct bimg_writer *w);
void bimg_writer_free(struct bimg_writer *w);
/* Totals so far: items added, bytes written to fd. */
void bimg_writer_stats(const struct bimg_writer *w, uint64_t *items, uint64_t *bytes_out);

struct bimg_reader;
/* A reader of fd (which may be a pipe: it only reads forwards). */
int bimg_reader_open(struct bimg_reader **r, int fd);
/* 1 = one item returned (valid until the next call), 0 = end, <0 = error
 * (negative errno; bimg_reader_error() tells what and at which byte offset).
 * An item is a run of *len bytes at logical *bytenr: the superblock, or one
 * or more consecutive tree blocks (len a multiple of the nodesize). The
 * buffer is the reader's own: the caller may fix it up in place.
 * Tree blocks of a filesystem whose checksum type is not crc32c come back
 * with their real checksum (see bimg_fix_block_csum), the type being read
 * from the dump's superblock (its first item). */
int bimg_reader_next(struct bimg_reader *r, uint64_t *bytenr, const uint8_t **data, uint32_t *len);
const char *bimg_reader_error(const struct bimg_reader *r);
/* How many tree blocks got their checksum type fixed so far. */
uint64_t bimg_reader_fixed_csums(const struct bimg_reader *r);
void bimg_reader_free(struct bimg_reader *r);
/* A reader over a memory buffer (fuzzing, tests); buf must outlive the reader. */
int bimg_reader_open_mem(struct bimg_reader **r, const void *buf, size_t len);
/* btrfs-image stamps a crc32c on every tree block it copies, whatever the
 * filesystem's checksum type (so its own restore only works for crc32c). For
 * a tree block read from such a dump: 0 if its checksum verifies with
 * csum_type, 1 if it had btrfs-image's crc32c and now carries the checksum of
 * csum_type, -EUCLEAN if neither verifies (a damaged block). */
int bimg_fix_block_csum(uint8_t *block, uint32_t nodesize, uint16_t csum_type);

/* The first bytes (at least 8) look like a btrfs-image dump. */
bool bimg_probe(const void *head, size_t n);

#endif
