/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* struct fs_info's private side that needs code: the error message's lock. */
#ifndef BTK_FS_INTERNAL_H
#define BTK_FS_INTERNAL_H

#include <btk/fs.h>

/* Store msg as the last error (fs_error_message()); safe from any thread. */
void fs_errmsg_set(struct fs_info *fs, const char *msg);

#endif
