// SPDX-License-Identifier: GPL-2.0-only
/* Writing a record's bytes to every copy of the layout being restored: the
 * original layout through the image's chunk map, the one-device layout
 * through restore_single.c's map. */
#include <errno.h>
#include <string.h>

#include "image/restore.h"
#include <btk/volumes.h>

static int write_original(struct restore_ctx *r, uint64_t logical, const uint8_t *data, uint32_t len)
{
	struct io_ref hold;
	int ret = parity_note(r, logical, len);

	if (ret)
		return ret;
	while (len) {
		struct phys_copy copies[MAX_COPIES];
		uint64_t contig;
		int n = volumes_map(r->fs, logical, len, copies, &contig);
		uint32_t k;

		if (n < 0)
			return rs_error(r, "logical address %llu of the image is in no chunk", (unsigned long long)logical);
		k = contig < len ? (uint32_t)contig : len;
		for (int i = 0; i < n; i++) {
			if (!copies[i].dev)
				return rs_error(r, "chunk at %llu names device %llu, which the image does not have",
						(unsigned long long)logical, (unsigned long long)copies[i].devid);
			ret = io_write_ref(copies[i].dev->io, data, k, copies[i].physical, restore_frame_hold(r, data, k, &hold));
			if (ret)
				return rs_error(r, "writing %s: %s", copies[i].dev->io->path, strerror(-ret)), ret;
			r->written_bytes += k;
		}
		logical += k;
		data += k;
		len -= k;
	}
	return 0;
}

int restore_write(struct restore_ctx *r, uint64_t logical, const uint8_t *data, uint32_t len)
{
	return r->layout == LAYOUT_SINGLE ? single_write(r, logical, data, len)
					  : write_original(r, logical, data, len);
}
