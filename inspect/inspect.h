/* SPDX-License-Identifier: GPL-2.0-only */
/* btk-inspect: shared declarations of the subcommands. */
#ifndef BTK_INSPECT_H
#define BTK_INSPECT_H

#include <btk/fs.h>

int cmd_super(int argc, char **argv);
int cmd_tree(int argc, char **argv);
int cmd_map(int argc, char **argv);
int cmd_usage(int argc, char **argv);
int cmd_heatmap(int argc, char **argv);

/* Exit status: 0 read cleanly, 1 error (output incomplete), 2 output complete
 * but damage was worked around (a bad copy, a bad superblock, a missing device). */
enum { INSPECT_OK = 0, INSPECT_ERROR = 1, INSPECT_DAMAGED = 2 };

/* Warnings libfs reported while reading (damage worked around). */
struct inspect_notes {
	unsigned warnings;
};

/* Open the filesystem on paths (messages through common/messages, counted in
 * notes); NULL on error. */
struct fs_info *inspect_open(char **paths, unsigned npaths, int super_mirror, bool chunk_only,
			     struct inspect_notes *notes);
/* The exit status for a command that ended with `failed` after these notes. */
int inspect_status(bool failed, const struct inspect_notes *notes);

#endif
