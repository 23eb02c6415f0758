// SPDX-License-Identifier: LGPL-2.1-or-later
/* Positional read/write loops (see fdio.h). */
#include <errno.h>
#include <unistd.h>

#include "libfs/fdio.h"

int fd_read_full(int fd, void *buf, size_t len, uint64_t off)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = pread(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -ENODATA;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

int fd_write_full(int fd, const void *buf, size_t len, uint64_t off)
{
	const uint8_t *p = buf;

	while (len) {
		ssize_t n = pwrite(fd, p, len, (off_t)off);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		p += n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}
