/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef BTK_CHECK_FST_ORPHANS_H
#define BTK_CHECK_FST_ORPHANS_H

#include "check/check.h"
#include <btk/blockgroups.h>

/* Free-space tree items describing space outside every block group: the
 * kernel never reads them, but btrfs check calls them an error, and a new
 * chunk allocated over them would collide. Those wholly below the first block
 * group are what older mkfs.btrfs (6.14) left of its temporary chunks: no new
 * chunk is ever allocated there, and they are not reported (btrfs check 7.3
 * does; btk deliberately differs, doc/btk-check.8). 0 or -errno. */
int check_fst_orphans(struct check_ctx *ctx, const struct block_group_list *bgs);

#endif
