/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Finding the other members of a multi-device filesystem with libblkid. */
#ifndef BTK_DEVSCAN_H
#define BTK_DEVSCAN_H

#include <stdint.h>
#include <btk/format.h>

/* Block devices whose btrfs superblock carries fsid. *paths is a malloc'ed
 * array of malloc'ed strings (free with devscan_free). 0 or -errno. */
int devscan_find_members(const uint8_t fsid[BTRFS_FSID_SIZE], char ***paths, unsigned *count);
void devscan_free(char **paths, unsigned count);

#endif
