/* SPDX-License-Identifier: GPL-2.0-only */
/* Whether a place on a device holds a chunk's contents (check/chunk_place_data.c). */
#ifndef BTK_CHECK_CHUNK_PLACE_DATA_H
#define BTK_CHECK_CHUNK_PLACE_DATA_H

#include <stdint.h>

#include <btk/fs.h>
#include <btk/volumes.h>

/* Read at (devid, physical) as if it were a stripe of chunk c, does the
 * chunk's first tree block verify there, or its first checksummed data
 * sector match its checksum? 1 yes, 0 no, -1 not known (no such block or
 * sector, a profile that splits the chunk across stripes, no device). */
int chunk_place_holds_data(struct fs_info *fs, const struct chunk *c, uint64_t devid, uint64_t physical);
/* The reader of member device devid, NULL when it is missing or not a member. */
struct io_dev *device_io_by_id(struct fs_info *fs, uint64_t devid);

#endif
