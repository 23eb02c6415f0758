/* SPDX-License-Identifier: GPL-2.0-only */
/* btk-image: the commands, and the record source that restore and info
 * read either image format through. */
#ifndef BTK_IMAGE_IMAGE_H
#define BTK_IMAGE_IMAGE_H

#include <stdbool.h>
#include <stdint.h>
#include "image/fmt_btk.h"

int cmd_dump(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_info(int argc, char **argv);

enum img_format { IMG_FORMAT_BTK, IMG_FORMAT_BTRFS_IMAGE };

/* An opened image of either format, read record by record. For a
 * btrfs-image dump the header is derived from its superblock item (which
 * comes first), and items are returned as superblock / tree-block / data
 * records. */
struct img_source {
	enum img_format format;
	struct btk_reader *btk;
	struct bimg_reader *bimg;
	struct img_header header;     /* btrfs-image: filled from the superblock */
	bool header_valid;
	/* btrfs-image: the pending rest of a multi-block item, and a held first record */
	const uint8_t *pend_data;
	uint64_t pend_logical;
	uint32_t pend_len;
	struct img_record held;
	bool have_held;
	uint64_t items;
	char err[320];
};

/* Open path ("-" for stdin) and detect its format. 0 or -errno with err set. */
int img_source_open(struct img_source *src, const char *path);
/* 1 record, 0 end, <0 error (img_source_error). */
int img_source_next(struct img_source *src, struct img_record *rec);
const char *img_source_error(const struct img_source *src);
void img_source_close(struct img_source *src);

/* Fill an img_header's fields from a superblock (devices not touched). */
void img_header_from_super(struct img_header *h, const uint8_t *sb);

#endif
