/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Devices and the chunk map: logical -> physical for every profile. */
#ifndef BTK_VOLUMES_H
#define BTK_VOLUMES_H

#include <stdint.h>
#include <btk/fs.h>
#include <btk/tree.h>

struct chunk_stripe {
	uint64_t devid;
	uint64_t physical;
	struct fs_device *dev; /* NULL when the device is missing */
};

struct chunk {
	uint64_t logical;
	uint64_t length;
	uint64_t type;        /* BTRFS_BLOCK_GROUP_* */
	uint64_t stripe_len;
	uint16_t num_stripes;
	uint16_t sub_stripes;
	struct chunk_stripe stripes[];
};


/* One physical place that holds (a copy of) a logical range. */
struct phys_copy {
	struct fs_device *dev; /* NULL when the device is missing */
	uint64_t devid;
	uint64_t physical;
};

#define MAX_COPIES 8 /* 4 copies, or the union of old and new stripes during a profile change */

/* Profile descriptions. */
const char *profile_name(uint64_t type_flags);      /* "single", "DUP", "RAID1", ... */
unsigned profile_copies(uint64_t type_flags);       /* copies of each byte (1..4; RAID5/6: 1) */
/* Bytes each stripe of a chunk of this length and geometry occupies on its device. */
uint64_t chunk_stripe_size(uint64_t length, uint64_t type, unsigned num_stripes, unsigned sub_stripes);

/* Validate a chunk item's geometry: 0, or -EUCLEAN with a message. */
int chunk_item_validate(struct fs_info *fs, uint64_t logical, const uint8_t *item, uint32_t size);
/* The chunks of the filesystem in logical order (index 0 .. count-1), the
 * chunk holding logical (NULL when none), and the index of the first chunk
 * whose end is above logical (count when none). */
size_t fs_chunk_count(const struct fs_info *fs);
const struct chunk *fs_chunk(const struct fs_info *fs, size_t i);
const struct chunk *fs_chunk_lookup(const struct fs_info *fs, uint64_t logical);
size_t fs_chunk_find_index(const struct fs_info *fs, uint64_t logical);
/* Replace the stripes of the in-memory chunk at logical (the on-disk chunk
 * item is not touched): used to send writes to the union of old and new
 * stripes while a profile change is being committed. */
int chunk_map_set_stripes(struct fs_info *fs, uint64_t logical, const struct chunk_stripe *stripes,
			  unsigned n);

/* Every DEV_ITEM of the chunk tree (key.offset: the devid; fn checks the
 * item's size), as tree_each_item: 0, fn's nonzero value, or -errno. */
int volumes_each_dev_item(struct fs_info *fs, tree_item_fn fn, void *arg);
/* Every DEV_EXTENT of device devid in the dev tree at dev_root, in physical
 * order (key.offset: the start; fn checks the item's size), as tree_each_item. */
int volumes_each_dev_extent(struct fs_info *fs, const struct tree_root_ptr *dev_root, uint64_t devid,
			    tree_item_fn fn, void *arg);

/* Map [logical, logical+len) — which must not cross a stripe boundary — to
 * every copy. Returns the number of copies (>= 1) or -errno. *contig_len
 * receives how many bytes from logical stay in the same stripe. */
int volumes_map(struct fs_info *fs, uint64_t logical, uint64_t len, struct phys_copy *copies,
		uint64_t *contig_len);
/* Number of copies a logical address has (0 if unmapped). */
int volumes_num_copies(struct fs_info *fs, uint64_t logical);
/* Read len bytes at logical from copy `mirror` (0-based), splitting across
 * stripes as needed. -ENOENT if unmapped, -ENODEV if that copy's device is missing. */
int volumes_read(struct fs_info *fs, uint64_t logical, void *buf, uint64_t len, int mirror);

#endif
