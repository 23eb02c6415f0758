// SPDX-License-Identifier: GPL-2.0-only
/* Helpers every restore file shares: the error message on the context, a
 * tree block's checksum, the superblock copies. Kept out of restore.c, the
 * orchestrator that calls the layouts which use them. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "image/restore.h"
#include <btk/block.h>
#include <btk/csum.h>
#include <btk/super.h>

void restore_block_csum(struct restore_ctx *r, uint8_t *block)
{
	uint8_t csum[BTRFS_CSUM_SIZE];

	csum_compute(r->fs->csum_type, block + BTRFS_CSUM_SIZE, r->fs->nodesize - BTRFS_CSUM_SIZE, csum);
	memcpy(header_csum_ptr(block), csum, BTRFS_CSUM_SIZE);
}

int rs_error(struct restore_ctx *r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(r->err, sizeof(r->err), fmt, ap);
	va_end(ap);
	return -EUCLEAN;
}

int restore_write_supers(struct restore_ctx *r, struct io_dev *io, const uint8_t *base,
			 const uint8_t *dev_item, const uint8_t *const *verbatim, uint64_t size)
{
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	int ret;

	if ((ret = io_flush(io)))
		return ret;
	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint64_t off = btrfs_super_offset(m);
		if (off + BTRFS_SUPER_INFO_SIZE > size)
			break;
		if (verbatim && verbatim[m]) {
			memcpy(sb, verbatim[m], sizeof(sb));
		} else {
			memcpy(sb, base, sizeof(sb));
			if (dev_item)
				memcpy(super_dev_item_ptr(sb), dev_item, sizeof(struct btrfs_dev_item));
			super_set_bytenr(sb, off);
			super_update_csum(sb);
		}
		if ((ret = io_write(io, sb, sizeof(sb), off)))
			return ret;
	}
	return io_flush(io);
}

static void frame_get(void *f) { img_frame_get(f); }
static void frame_put(void *f) { img_frame_put(f); }

/* A reference on the record's frame when data lies in it (the writer then
 * keeps the bytes there rather than a copy), else hold stays unused: NULL. */
const struct io_ref *restore_frame_hold(const struct restore_ctx *r, const uint8_t *data, uint32_t len,
					struct io_ref *hold)
{
	const struct img_frame *f = r->cur_frame;

	if (!f || data < f->data || len > f->len || (size_t)(data - f->data) > f->len - len)
		return NULL;
	*hold = (struct io_ref){ frame_get, frame_put, r->cur_frame };
	return hold;
}
