/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* libbtk: read and write unmounted btrfs filesystems (btk's library, libfs/).
 * The public API is every header of include/btk/ (installed as <btk/...>);
 * this one includes them all. After `pkg-config --cflags --libs btk`:
 *
 *	#include <btk/btk.h>
 *
 *	struct fs_open_options o;
 *	struct fs_info *fs;
 *	const char *paths[] = { "disk.img" };
 *
 *	fs_open_options_init(&o);
 *	if (fs_open(paths, 1, &o, &fs) == 0) {
 *		printf("nodesize %u\n", fs->nodesize);
 *		for (size_t i = 0; i < fs_chunk_count(fs); i++)
 *			printf("chunk %llu\n", (unsigned long long)fs_chunk(fs, i)->logical);
 *		fs_close(fs);
 *	} else {
 *		fprintf(stderr, "%s\n", btk_error_msg());   // btk/error.h: per thread
 *	}
 *
 * struct fs_info's named fields (geometry, features, tree roots) are
 * read-only for callers; devices, chunks and the superblock are read through
 * functions (btk/fs.h, btk/volumes.h); a failed call's reason is the calling
 * thread's btk_last_error() (btk/error.h), not a field of fs. The headers
 * under libfs/ are the library's private side (doc/design.md, "The libfs API
 * boundary"). Link with `pkg-config --libs btk` (libbtk.so.0) or `--static`. */
#ifndef BTK_BTK_H
#define BTK_BTK_H

#include <btk/endian_access.h>
#include <btk/error.h>
#include <btk/format.h>
#include <btk/key.h>
#include <btk/names.h>
#include <btk/io.h>
#include <btk/wlog.h>
#include <btk/undo.h>
#include <btk/csum.h>
#include <btk/super.h>
#include <btk/features.h>
#include <btk/fs.h>
#include <btk/target.h>
#include <btk/volumes.h>
#include <btk/block.h>
#include <btk/block_salvage.h>
#include <btk/tree.h>
#include <btk/walk.h>
#include <btk/ctree_ops.h>
#include <btk/blockgroups.h>
#include <btk/backref.h>
#include <btk/extent_scan.h>
#include <btk/data_users.h>
#include <btk/inode_path.h>
#include <btk/csum_tree.h>
#include <btk/free_space_tree.h>
#include <btk/uuid_tree.h>
#include <btk/trans.h>
#include <btk/chunk_edit.h>
#include <btk/ebitmap.h>
#include <btk/recsort.h>
#include <btk/read_pipe.h>

#endif
