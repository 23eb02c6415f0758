// SPDX-License-Identifier: GPL-2.0-only
/* LD_PRELOAD shim for bench/walk: make posix_fadvise() a no-op.
 *
 * btrfs-progs calls posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED) on every
 * device it opens and again when it closes it (strace `btrfs inspect-internal
 * dump-tree IMG` shows three such calls), which drops the whole image from the
 * page cache: without this shim every dump-tree run is a cold-cache run, and so
 * is the next run of any other tool on the same image. bench/walk builds this
 * into a scratch directory (cc -shared -fPIC) and preloads it for the
 * "warm" dump-tree rows only. Nothing here is linked into btk. */
#include <sys/types.h>

int posix_fadvise(int fd, off_t offset, off_t len, int advice);
int posix_fadvise64(int fd, long long offset, long long len, int advice);

int posix_fadvise(int fd, off_t offset, off_t len, int advice)
{
	(void)fd; (void)offset; (void)len; (void)advice;
	return 0;
}

int posix_fadvise64(int fd, long long offset, long long len, int advice)
{
	(void)fd; (void)offset; (void)len; (void)advice;
	return 0;
}
