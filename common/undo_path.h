/* SPDX-License-Identifier: GPL-2.0-only */
/* Where a writing program's undo file goes when --undo-file names none:
 * $BTK_UNDO_DIR, else /var/lib/btk/undo (made mode 0700 when missing), never
 * the working directory (at boot that is a read-only /). */
#ifndef BTK_COMMON_UNDO_PATH_H
#define BTK_COMMON_UNDO_PATH_H

#include <stddef.h>
#include <stdint.h>

#define UNDO_DIR_DEFAULT "/var/lib/btk/undo"

/* $BTK_UNDO_DIR when set and not empty, else UNDO_DIR_DEFAULT. */
const char *undo_dir(void);
/* Make dir (and any missing parent) with mode 0700; an existing directory is
 * fine. 0 or -errno. */
int undo_dir_make(const char *dir);
/* DIR/PROG-FSID-GENERATION.undo, or with -1, -2, ... when that name is taken.
 * 0, -EEXIST (no free name) or -ENAMETOOLONG. */
int undo_path_in(const char *dir, const char *prog, const uint8_t *fsid, uint64_t generation, char *out,
		 size_t len);
/* Both, before any work starts: the default undo file path into out, or the
 * reason it cannot be made into why (naming --undo-file and --no-undo, for the
 * caller to show) and -errno returned. */
int undo_default_path(const char *prog, const uint8_t *fsid, uint64_t generation, char *out, size_t len,
		      char *why, size_t why_len);

#endif
