/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Changing a chunk's stripes and profile inside a transaction, without
 * moving its logical address range: the chunk item, the block group flags,
 * the dev extents, the devices' bytes_used and, for system chunks, the
 * superblock's system chunk array all change together at commit. */
#ifndef BTK_CHUNK_EDIT_H
#define BTK_CHUNK_EDIT_H

#include <stdint.h>
#include <btk/trans.h>
#include <btk/volumes.h>

struct stripe_place {
	uint64_t devid;
	uint64_t physical;
};

/* What a conversion tells the chunk allocator (chunk_alloc.c) while its
 * transaction runs; fs->alloc_hints points here from before trans_start
 * until after the commit (or abort). A chunk allocated mid-conversion takes
 * the target profile, whatever chunk the conversion has reached (else it
 * would keep the old one and outlive the conversion), and stays off the
 * device space planned for new copies, whose dev extents the transaction
 * inserts only later (else the two could overlap). */
struct chunk_alloc_hints {
	int64_t metadata_profile, system_profile; /* profile bits, or -1: those of the existing groups */
	const struct stripe_place *reserved;      /* device ranges no new chunk may take */
	const uint64_t *reserved_len;
	unsigned nreserved;
};

/* Give the chunk at `logical` the profile bits `profile` (BTRFS_BLOCK_GROUP_*
 * profile flags, 0 for single) and exactly the stripes given. Stripes kept
 * from the old set keep their dev extents; dropped ones lose them; new ones
 * get them (their device space must be free and already hold the data). */
int chunk_set_stripes(struct trans *t, uint64_t logical, uint64_t profile,
		      const struct stripe_place *stripes, unsigned nstripes);

/* Free device space: the first gap of at least len bytes on devid at or
 * above 1 MiB that no dev extent (committed, or in `avoid`) covers.
 * -ENOSPC when there is none. */
int device_find_free(struct fs_info *fs, uint64_t devid, uint64_t len, const struct stripe_place *avoid,
		     const uint64_t *avoid_len, unsigned navoid, uint64_t *physical);

/* The chunk item (without its key) of a chunk of this length and type on
 * these stripes, as the allocator writes one (stripe_len and io sizes 64 KiB,
 * sub_stripes 1, each stripe's device uuid from the open devices); item must
 * hold chunk_item_size(n) bytes, which it returns. */
uint32_t chunk_item_build(const struct fs_info *fs, uint64_t length, uint64_t type,
			  const struct stripe_place *stripes, unsigned n, uint8_t *item);

/* The dev extent of one stripe of the chunk at `logical` (stripe size len). */
int chunk_add_dev_extent(struct trans *t, uint64_t logical, const struct stripe_place *s, uint64_t len);
/* Change a device's bytes_used in its dev item (chunk tree). */
int device_add_bytes_used(struct trans *t, uint64_t devid, int64_t delta);

/* Re-read the chunk map from the (committed) chunk tree and system chunk array. */
int volumes_reload(struct fs_info *fs);

#endif
