/* SPDX-License-Identifier: GPL-2.0-only */
#ifndef BTK_CHECK_LOG_DATA_H
#define BTK_CHECK_LOG_DATA_H

#include <btk/ebitmap.h>
#include <btk/fs.h>

/* The disk ranges the file extents of the log trees point at (NULL without a
 * log tree). The kernel puts the checksums of data it logs into the csum tree
 * before the subvolume refers to that data: until the log is replayed such
 * checksums cover no data extent and are not damage. */
int log_data_ranges(struct fs_info *fs, struct ebitmap **out);

#endif
