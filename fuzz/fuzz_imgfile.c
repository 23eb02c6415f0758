// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer harness over the metadata image readers of btk-image: the input
 * is an image file. It goes through
 *   - the btrfs-image v0 reader (image/fmt_btrfs_image.h) to the end or the
 *     first error (and its checksum fix-up on each item); every 4 KiB tree
 *     block of the items it yields is then sanitized (image/sanitize.h):
 *     random mode after a prescan of them all, then collide mode without;
 *     garbage leaves must be refused, never crash the sanitizer;
 *   - the native btk reader (image/fmt_btk.h) through a memfd, header,
 *     records, trailer and totals.
 * Both readers are bounded: an image of any content gives records or an
 * error naming an offset. Seeds: tests/images/fuzz/imgfile/seed-*. */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "image/fmt_btk.h"
#include "image/fmt_btrfs_image.h"
#include "image/sanitize.h"
#include <btk/format.h>

#define FUZZ_NODESIZE 4096u

/* Every 4 KiB block of the items, copied (at most FUZZ_MAX_BLOCKS). */
#define FUZZ_MAX_BLOCKS 64
struct blocks {
	uint8_t *data[FUZZ_MAX_BLOCKS];
	unsigned n;
};

static void collect(struct blocks *b, const uint8_t *data, uint32_t len)
{
	for (uint32_t off = 0; off + FUZZ_NODESIZE <= len && b->n < FUZZ_MAX_BLOCKS; off += FUZZ_NODESIZE) {
		b->data[b->n] = malloc(FUZZ_NODESIZE);
		if (!b->data[b->n])
			return;
		memcpy(b->data[b->n++], data + off, FUZZ_NODESIZE);
	}
}

/* Sanitize every block (after a prescan of them all when asked); errors must say why. */
static void sanitize_all(struct blocks *b, enum sanitize_mode mode, bool prescan)
{
	static uint8_t block[FUZZ_NODESIZE];
	struct sanitizer *s;

	if (sanitizer_new(&s, mode, BTRFS_CSUM_TYPE_CRC32, FUZZ_NODESIZE, mode))
		return;
	for (unsigned i = 0; prescan && i < b->n; i++)
		if (sanitize_prescan(s, b->data[i]) < 0 && !sanitizer_error(s)[0])
			abort();
	for (unsigned i = 0; i < b->n; i++) {
		memcpy(block, b->data[i], FUZZ_NODESIZE);
		if (sanitize_tree_block(s, block) < 0 && !sanitizer_error(s)[0])
			abort();
	}
	if (b->n) {
		memcpy(block, b->data[0], FUZZ_NODESIZE);
		(void)sanitize_super(s, block);
	}
	sanitizer_free(s);
}

static void run_btrfs_image(const uint8_t *data, size_t size)
{
	struct bimg_reader *r;
	struct blocks b = { .n = 0 };
	const uint8_t *item;
	uint64_t bytenr;
	uint32_t len;
	int ret;

	(void)bimg_probe(data, size);
	if (bimg_reader_open_mem(&r, data, size))
		return;
	while ((ret = bimg_reader_next(r, &bytenr, &item, &len)) == 1) {
		if (bytenr != BTRFS_SUPER_INFO_OFFSET)
			collect(&b, item, len);
		if (len >= FUZZ_NODESIZE)
			(void)bimg_fix_block_csum((uint8_t *)item, FUZZ_NODESIZE, (uint16_t)(bytenr % 4));
	}
	if (ret < 0 && !bimg_reader_error(r)[0])
		abort();
	bimg_reader_free(r);
	sanitize_all(&b, SANITIZE_RANDOM, true);
	sanitize_all(&b, SANITIZE_COLLIDE, false);
	for (unsigned i = 0; i < b.n; i++)
		free(b.data[i]);
}

static void run_btk(const uint8_t *data, size_t size)
{
	struct btk_reader *r;
	struct img_record rec;
	struct img_totals totals;
	int fd = memfd_create("fuzz_imgfile", 0);
	int ret;

	if (fd < 0)
		return;
	if (write(fd, data, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return;
	}
	(void)btk_probe(data, size);
	ret = btk_reader_open(&r, fd, NULL, 0);
	if (ret == 0) {
		while ((ret = btk_reader_next(r, &rec)) == 1)
			if (rec.len && rec.data[rec.len - 1] == 0xa5 && rec.data[0] == 0x5a)
				asm volatile("" ::: "memory"); /* touch the record's ends */
		if (ret == 0)
			btk_reader_totals(r, &totals);
	}
	if (ret < 0 && r && !btk_reader_error(r)[0])
		abort(); /* an error must say why */
	if (r)
		btk_reader_free(r);
	close(fd);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	run_btrfs_image(data, size);
	run_btk(data, size);
	return 0;
}
