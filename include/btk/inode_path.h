/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The path of an inode inside its subvolume, from its names (INODE_REF or
 * INODE_EXTREF items), for reports that name files. */
#ifndef BTK_INODE_PATH_H
#define BTK_INODE_PATH_H

#include <stddef.h>
#include <stdint.h>

#include <btk/fs.h>

/* Components followed at most (a loop of names stops there). */
#define INODE_PATH_MAX_DEPTH 4096

/* "/dir/sub/name" of inode ino in the subvolume tree root, from the
 * subvolume's top directory, following the first name of each inode. 0 with
 * the whole path in out; 1 with a partial one: it starts with "?" where an
 * inode on the way has no name (or the names loop), with "..." where out is
 * too short (len >= 8 always holds something); -errno when a block does not
 * read (out then holds what was found, like a partial path). */
int inode_path(struct fs_info *fs, const struct tree_root_ptr *root, uint64_t ino, char *out, size_t len);

#endif
