/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Who uses a data extent: the files named by its back references in the
 * extent tree, for reports that must say which files a damaged extent hurts. */
#ifndef BTK_DATA_USERS_H
#define BTK_DATA_USERS_H

#include <stddef.h>
#include <stdint.h>

#include <btk/fs.h>

/* One file that uses the extent. */
struct data_user {
	uint64_t root;     /* the subvolume; for a shared reference the owner of the
			    * leaf that holds the file extent (a snapshot may share it) */
	uint64_t ino;
	uint64_t offset;   /* file offset of the first file extent item on the
			    * extent (of those one reference counts) */
};

/* The extent holding logical address `logical`: its start and length in
 * *start and *len, and its first `max` users in out (*n of them; *more counts
 * those left out). Inline and keyed EXTENT_DATA_REF and SHARED_DATA_REF
 * references; a shared one is resolved by reading its parent leaf. An
 * unreadable parent leaf is skipped; a user named twice (by its own
 * reference and by a shared leaf) is listed once. 0, -ENOENT when no data extent holds
 * logical, or -errno. */
int data_users_find(struct fs_info *fs, uint64_t logical, struct data_user *out, size_t max, size_t *n,
		    uint64_t *more, uint64_t *start, uint64_t *len);

/* "subvolume 257 inode 300 /dir/file at offset 4096" for one user into buf
 * (the path from btk/inode_path.h; "?" where a name is missing). */
void data_user_describe(struct fs_info *fs, const struct data_user *u, char *buf, size_t len);

#endif
