/* btk-inspect: shared declarations of the subcommands. */
#ifndef BTK_INSPECT_H
#define BTK_INSPECT_H

#include "libfs/fs.h"

int cmd_super(int argc, char **argv);
int cmd_tree(int argc, char **argv);
int cmd_map(int argc, char **argv);
int cmd_usage(int argc, char **argv);

/* Open the filesystem on paths (messages through common/messages); NULL on error. */
struct fs_info *inspect_open(char **paths, unsigned npaths, int super_mirror, bool chunk_only);

#endif
