// SPDX-License-Identifier: GPL-2.0-only
/* image/fmt_btrfs_image: the btrfs-image v0 cluster format round-trips
 * (stored and zlib), merges contiguous blocks like progs, and the reader
 * turns truncated or corrupted input into errors that name a byte offset. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/fmt_btrfs_image.h"
#include "tests/unit/under_valgrind.h"
#include <btk/csum.h>
#include <btk/endian_access.h>
#include <btk/format.h>

#define NODE 16384

/* A dump in memory: the superblock, then 200 blocks in runs of 1..7. */
static uint8_t *make_dump(int level, size_t *len, unsigned *nblocks)
{
	struct bimg_writer *w;
	FILE *f = tmpfile();
	uint8_t *block = malloc(NODE), *out;
	uint64_t bytenr = 30 << 20;
	long size;

	cr_assert_not_null(f);
	cr_assert_eq(bimg_writer_open(&w, fileno(f), level), 0);
	memset(block, 0x5a, 4096);
	cr_assert_eq(bimg_writer_add(w, 65536, block, 4096), 0);
	for (unsigned i = 0; i < 200; i++) {
		for (unsigned j = 0; j < NODE; j++)
			block[j] = (uint8_t)(i * 7 + j % 13);
		put_le64(block, bytenr);
		cr_assert_eq(bimg_writer_add(w, bytenr, block, NODE), 0);
		bytenr += NODE * (i % 7 == 6 ? 3 : 1);
	}
	cr_assert_eq(bimg_writer_finish(w), 0);
	bimg_writer_free(w);
	size = ftell(f);
	cr_assert_gt(size, 0);
	cr_assert_eq(size % 1024, 0, "a dump is whole 1024-byte blocks");
	out = malloc((size_t)size);
	rewind(f);
	cr_assert_eq(fread(out, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	free(block);
	*len = (size_t)size;
	*nblocks = 200;
	return out;
}

/* Read every item back; returns the number of tree blocks, asserts their content. */
static int read_all(const uint8_t *buf, size_t len, char *err, size_t errlen)
{
	struct bimg_reader *r;
	uint64_t bytenr;
	const uint8_t *data;
	uint32_t n;
	int blocks = 0, ret, items = 0;

	cr_assert_eq(bimg_reader_open_mem(&r, buf, len), 0);
	while ((ret = bimg_reader_next(r, &bytenr, &data, &n)) == 1) {
		items++;
		if (bytenr == 65536) {
			cr_assert_eq(n, 4096);
			cr_assert_eq(items, 1, "superblock first");
			continue;
		}
		cr_assert_eq(n % NODE, 0);
		for (uint32_t off = 0; off < n; off += NODE)
			cr_assert_eq(get_le64(data + off), bytenr + off, "block content does not match its address");
		blocks += (int)(n / NODE);
	}
	if (ret < 0)
		snprintf(err, errlen, "%s", bimg_reader_error(r));
	bimg_reader_free(r);
	return ret < 0 ? ret : blocks;
}

Test(fmt_btrfs_image, round_trip_stored_and_zlib)
{
	for (int level = 0; level <= 9; level += 9) {
		size_t len;
		unsigned nblocks;
		uint8_t *dump = make_dump(level, &len, &nblocks);
		char err[200] = "";

		cr_assert(bimg_probe(dump, len));
		cr_assert_eq(get_le64(dump), BIMG_HEADER_MAGIC);
		cr_assert_eq(dump[20], level ? BIMG_COMPRESS_ZLIB : BIMG_COMPRESS_NONE);
		/* contiguous blocks were merged: fewer items than blocks */
		cr_assert_lt(get_le32(dump + 16), 83);
		cr_assert_eq(read_all(dump, len, err, sizeof(err)), (int)nblocks, "%s", err);
		if (level)
			cr_assert_lt(len, (size_t)nblocks * NODE / 4, "zlib did not compress");
		free(dump);
	}
}

/* The writer side of the pipe test: 1000 non-contiguous blocks (one item
 * each, 83 per cluster), then the write end closed. */
static void *pipe_writer(void *arg)
{
	int fd = *(int *)arg;
	struct bimg_writer *w;
	uint8_t block[4096] = { 0 };
	intptr_t bad = 1;

	if (bimg_writer_open(&w, fd, 1) == 0) {
		bad = 0;
		for (unsigned i = 0; i < 1000 && !bad; i++) {
			put_le64(block, i);
			bad = bimg_writer_add(w, (uint64_t)(i * 2 + 16) << 20, block, sizeof(block)) != 0;
		}
		if (!bad)
			bad = bimg_writer_finish(w) != 0;
		bimg_writer_free(w);
	}
	close(fd);
	return (void *)bad;
}

Test(fmt_btrfs_image, many_clusters_through_a_pipe)
{
	int fds[2];
	struct bimg_reader *r;
	uint64_t bytenr;
	const uint8_t *data;
	uint32_t n;
	int ret, count = 0;
	pthread_t writer;
	void *bad;

	cr_assert_eq(pipe(fds), 0);
	cr_assert_eq(pthread_create(&writer, NULL, pipe_writer, &fds[1]), 0);
	cr_assert_eq(bimg_reader_open(&r, fds[0]), 0);
	while ((ret = bimg_reader_next(r, &bytenr, &data, &n)) == 1) {
		cr_assert_eq(n, 4096);
		cr_assert_eq(get_le64(data), (uint64_t)count);
		cr_assert_eq(bytenr, (uint64_t)(count * 2 + 16) << 20);
		count++;
	}
	cr_assert_eq(ret, 0, "%s", bimg_reader_error(r));
	cr_assert_eq(count, 1000);
	bimg_reader_free(r);
	close(fds[0]);
	cr_assert_eq(pthread_join(writer, &bad), 0);
	cr_assert_null(bad, "the writer failed");
}

Test(fmt_btrfs_image, every_truncation_is_an_error_naming_a_byte)
{
	size_t len;
	unsigned nblocks;
	uint8_t *dump = make_dump(6, &len, &nblocks);
	uint32_t first_cluster = 0;
	const size_t head_step = RUNNING_ON_VALGRIND ? 7 : 1;

	/* the end of the first cluster: header + stored item sizes, padded */
	for (uint32_t i = 0; i < get_le32(dump + 16); i++)
		first_cluster += get_le32(dump + 21 + 12 * i + 8);
	first_cluster = 1024 + (first_cluster + 1023) / 1024 * 1024;
	/* every byte of the first 4 KiB (every 7th under valgrind), then every 97th */
	for (size_t cut = 1; cut < len; cut += (cut < 4096 ? head_step : 97)) {
		char err[200] = "";
		int ret = read_all(dump, cut, err, sizeof(err));

		if (cut == first_cluster || (cut > first_cluster && ret >= 0 && cut % 1024 == 0))
			continue; /* a cut at a cluster boundary is a shorter valid dump */
		cr_assert_lt(ret, 0, "cut at %zu not detected", cut);
		cr_assert_not_null(strstr(err, "byte"), "error without offset: %s", err);
	}
	free(dump);
}

Test(fmt_btrfs_image, corrupt_fields_are_refused)
{
	size_t len;
	unsigned nblocks;
	uint8_t *dump = make_dump(6, &len, &nblocks);
	uint8_t *bad = malloc(len);
	char err[200];
	static const struct {
		size_t off;
		uint8_t val;
		const char *what;
	} cases[] = {
		{ 0, 0x00, "magic" },
		{ 8, 0x01, "says it is at" },
		{ 16, 0x00, "items" },   /* nritems 0 */
		{ 19, 0x01, "items" },   /* nritems huge */
		{ 20, 0x07, "compression" },
		{ 32, 0xff, "size" },    /* first item size, high byte */
		{ 1040, 0x33, "zlib" },  /* inside the first compressed body */
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		memcpy(bad, dump, len);
		bad[cases[i].off] = cases[i].val;
		err[0] = 0;
		cr_assert_lt(read_all(bad, len, err, sizeof(err)), 0, "case %s not detected", cases[i].what);
		cr_assert_not_null(strstr(err, cases[i].what), "case %s: %s", cases[i].what, err);
		cr_assert_not_null(strstr(err, "byte"), "no offset: %s", err);
	}
	cr_assert_not(bimg_probe("_BHRfS_M", 8));
	free(bad);
	free(dump);
}

/* btrfs-image does not clear its cluster header between clusters: a cluster
 * with fewer items than the one before still holds that one's last entries
 * after its item table. The reader must ignore them, as btrfs-image -r does. */
Test(fmt_btrfs_image, stale_entries_after_the_item_table_are_ignored)
{
	size_t len;
	unsigned nblocks;
	uint8_t *dump = make_dump(0, &len, &nblocks);
	uint32_t nitems = get_le32(dump + 16);
	char err[200] = "";

	cr_assert_lt(21 + 12 * (nitems + 2), 1024);
	for (uint32_t i = nitems; i < nitems + 2; i++) {   /* two old entries, as btrfs-image leaves them */
		put_le64(dump + 21 + 12 * i, 0x123456789000ULL + i);
		put_le32(dump + 21 + 12 * i + 8, 16384);
	}
	dump[1023] = 0xa5;
	cr_assert_eq(read_all(dump, len, err, sizeof(err)), (int)nblocks, "%s", err);
	free(dump);
}

/* btrfs-image stamps crc32c on every block; the reader gives back the real type. */
Test(fmt_btrfs_image, crc32c_stamps_become_the_filesystems_checksums)
{
	FILE *f = tmpfile();
	struct bimg_writer *w;
	struct bimg_reader *r;
	uint8_t super[4096] = { 0 }, block[4096], want[32];
	const uint8_t *data;
	uint64_t bytenr;
	uint32_t len;
	long size;
	uint8_t *buf;

	super_set_magic(super, BTRFS_MAGIC);
	super_set_nodesize(super, 4096);
	super_set_csum_type(super, BTRFS_CSUM_TYPE_XXHASH);
	memset(block, 0x3c, sizeof(block));
	csum_compute(BTRFS_CSUM_TYPE_CRC32, block + 32, sizeof(block) - 32, block); /* what btrfs-image does */
	cr_assert_eq(bimg_fix_block_csum(block, 4096, BTRFS_CSUM_TYPE_CRC32), 0);
	cr_assert_eq(bimg_writer_open(&w, fileno(f), 6), 0);
	cr_assert_eq(bimg_writer_add(w, 65536, super, sizeof(super)), 0);
	cr_assert_eq(bimg_writer_add(w, 1 << 20, block, sizeof(block)), 0);
	cr_assert_eq(bimg_writer_finish(w), 0);
	bimg_writer_free(w);
	size = ftell(f);
	buf = malloc((size_t)size);
	rewind(f);
	cr_assert_eq(fread(buf, 1, (size_t)size, f), (size_t)size);
	fclose(f);
	cr_assert_eq(bimg_reader_open_mem(&r, buf, (size_t)size), 0);
	cr_assert_eq(bimg_reader_next(r, &bytenr, &data, &len), 1);
	cr_assert_eq(bytenr, 65536);
	cr_assert_eq(bimg_reader_next(r, &bytenr, &data, &len), 1);
	csum_compute(BTRFS_CSUM_TYPE_XXHASH, data + 32, 4096 - 32, want);
	cr_assert(!memcmp(data, want, 32), "the block still carries btrfs-image's crc32c");
	cr_assert_eq(bimg_reader_fixed_csums(r), 1);
	cr_assert_eq(bimg_reader_next(r, &bytenr, &data, &len), 0);
	bimg_reader_free(r);
	/* a damaged block is left alone and said to be damaged */
	block[100] ^= 1;
	cr_assert_eq(bimg_fix_block_csum(block, 4096, BTRFS_CSUM_TYPE_XXHASH), -EUCLEAN);
	free(buf);
}
