/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Whole-buffer positional reads and writes on a file descriptor, retrying
 * short transfers and EINTR: the one copy of this loop for every backend
 * and file format in libfs. */
#ifndef BTK_FDIO_H
#define BTK_FDIO_H

#include <stddef.h>
#include <stdint.h>

/* 0, -ENODATA when the file ends before len bytes, or -errno. */
int fd_read_full(int fd, void *buf, size_t len, uint64_t off);
/* 0 or -errno (-EIO if the kernel accepts nothing). */
int fd_write_full(int fd, const void *buf, size_t len, uint64_t off);

#endif
