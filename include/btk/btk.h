/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libbtk: read and write unmounted btrfs filesystems (btk's library, libfs/).
 * The one header an outside program includes, after `pkg-config --cflags btk`:
 *
 *	#include <btk/btk.h>
 *
 *	struct fs_open_options o;
 *	struct fs_info *fs;
 *	char msg[600];
 *	const char *paths[] = { "disk.img" };
 *
 *	fs_open_options_init(&o);
 *	if (fs_open(paths, 1, &o, &fs, msg, sizeof(msg)) == 0) {
 *		printf("nodesize %u\n", fs->nodesize);
 *		fs_close(fs);
 *	}
 *
 * This is what the library installs for now (opening, closing and the
 * geometry of struct fs_info, from libfs/fs.h); the public API and its
 * stability are still to be defined (issue 14). Link with
 * `pkg-config --libs btk` (libbtk.so.0) or `--static`. */
#ifndef BTK_BTK_H
#define BTK_BTK_H

#include "libfs/fs.h"

#endif
