/* SPDX-License-Identifier: GPL-2.0-only */
/* The key ranges of the subvolume trees that the walk could not read (an
 * unreadable node or leaf covers the keys from its parent's pointer up to the
 * next pointer's key). A finding that items in such a range could explain
 * (an inode partly lost, a name whose other half would lie there) is not
 * reported: the unreadable block is, once. Kept sorted by (root, first key);
 * usually a handful, and bounded: past FS_LOST_MAX ranges the last one grows. */
#ifndef BTK_CHECK_FS_LOST_H
#define BTK_CHECK_FS_LOST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <btk/key.h>

#define FS_LOST_MAX 65536

struct lost_range {
	uint64_t root;
	struct btrfs_key lo;     /* first key that may be lost */
	struct btrfs_key hi;     /* first key known again (exclusive), unless to_end */
	bool to_end;             /* lost up to the end of the tree */
};

struct fs_lost {
	struct lost_range *v;
	size_t n, cap;
};

/* Record [lo, hi) of root (hi NULL: to the end of the tree). 0 or -ENOMEM. */
int fs_lost_add(struct fs_lost *l, uint64_t root, const struct btrfs_key *lo, const struct btrfs_key *hi);
/* Whether some lost range of root meets the keys [first, last]. */
bool fs_lost_meets(const struct fs_lost *l, uint64_t root, const struct btrfs_key *first,
		   const struct btrfs_key *last);
/* Whether the key (objectid, type, offset) of root may be lost. */
bool fs_lost_key(const struct fs_lost *l, uint64_t root, uint64_t objectid, uint8_t type, uint64_t offset);
/* Whether some item of inode ino of root (inode item to the last key) may be lost. */
bool fs_lost_inode(const struct fs_lost *l, uint64_t root, uint64_t ino);
/* "(256 INODE_ITEM 0)", or "the end" when end. */
void fs_lost_key_str(char *buf, size_t n, const struct btrfs_key *k, bool end);
void fs_lost_free(struct fs_lost *l);
/* fs_lost_free, then free(l) itself (from calloc); NULL is fine. */
void fs_lost_destroy(struct fs_lost *l);

#endif
