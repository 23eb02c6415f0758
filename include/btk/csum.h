/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The four btrfs checksum algorithms behind one call. */
#ifndef BTK_CSUM_H
#define BTK_CSUM_H

#include <stddef.h>
#include <stdint.h>
#include <btk/format.h>

/* Bytes of checksum for a type, or 0 if the type is unknown. */
unsigned csum_size(unsigned csum_type);
/* Short name ("crc32c", "xxhash64", "sha256", "blake2b") or NULL. */
const char *csum_name(unsigned csum_type);
/* Fill out[BTRFS_CSUM_SIZE] (zero-padded) with the checksum of data. -EINVAL on unknown type. */
int csum_compute(unsigned csum_type, const void *data, size_t len, uint8_t out[BTRFS_CSUM_SIZE]);
/* crc32c with the btrfs seed convention (~0 in, inverted out), also used for name hashes. */
uint32_t crc32c_btrfs(uint32_t seed, const void *data, size_t len);
/* The name hash of dir items: crc32c seeded with ~1. */
uint64_t btrfs_name_hash(const void *name, size_t len);
/* The hash keying inode extrefs: crc32c of the name seeded with the parent objectid. */
uint64_t btrfs_extref_hash(uint64_t parent_objectid, const void *name, size_t len);
/* The hash of an extent data reference (root, inode, offset): orders inline
 * data refs and keys keyed ones. */
uint64_t btrfs_extent_data_ref_hash(uint64_t root, uint64_t objectid, uint64_t offset);

#endif
