// SPDX-License-Identifier: LGPL-2.1-or-later
/* io backends: regular files / block devices, and memory buffers. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "libfs/fdio.h"
#include <btk/io.h>

struct file_priv {
	int fd;
	uint64_t size;
	int dfd;                /* O_DIRECT descriptor: -1 not opened yet, -2 unavailable */
	pthread_mutex_t dlock;  /* guards opening dfd */
};

static int file_read(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = io->priv;
	int ret;

	if (off > fp->size || len > fp->size - off)
		return -ENXIO;
	ret = fd_read_full(fp->fd, buf, len, off);
	return ret == -ENODATA ? -ENXIO : ret;
}

static int file_write(struct io_dev *io, const void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = io->priv;
	int ret;

	if (!io->writable)
		return -EROFS;
	ret = fd_write_full(fp->fd, buf, len, off);
	if (!ret && off + len > fp->size)
		fp->size = off + len;
	return ret;
}

static int file_flush(struct io_dev *io)
{
	struct file_priv *fp = io->priv;

	if (!io->writable)
		return 0;
	return fsync(fp->fd) ? -errno : 0;
}

static uint64_t file_size(struct io_dev *io)
{
	return ((struct file_priv *)io->priv)->size;
}

static void file_close(struct io_dev *io)
{
	struct file_priv *fp = io->priv;

	close(fp->fd);
	if (fp->dfd >= 0)
		close(fp->dfd);
	pthread_mutex_destroy(&fp->dlock);
	free(fp);
}

static int file_prefetch(struct io_dev *io, uint64_t off, uint64_t len)
{
	struct file_priv *fp = io->priv;

	if (off >= fp->size)
		return 0;
	if (len > fp->size - off)
		len = fp->size - off;
	return -posix_fadvise(fp->fd, (off_t)off, (off_t)len, POSIX_FADV_WILLNEED);
}

/* The O_DIRECT descriptor, opened on first use (read-only: only reads use
 * it); -EOPNOTSUPP when the file system refuses O_DIRECT. */
static int file_direct_fd(struct io_dev *io, struct file_priv *fp)
{
	int fd;

	pthread_mutex_lock(&fp->dlock);
	if (fp->dfd == -1) {
		fp->dfd = open(io->path, O_RDONLY | O_DIRECT | O_CLOEXEC);
		if (fp->dfd < 0)
			fp->dfd = -2;
	}
	fd = fp->dfd;
	pthread_mutex_unlock(&fp->dlock);
	return fd >= 0 ? fd : -EOPNOTSUPP;
}

static int file_read_direct(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	struct file_priv *fp = io->priv;
	int fd, ret;

	if (off > fp->size || len > fp->size - off)
		return -ENXIO;
	if ((off | len | (uintptr_t)buf) % IO_DIRECT_ALIGN)
		return -EINVAL;
	fd = file_direct_fd(io, fp);
	if (fd < 0)
		return fd;
	ret = fd_read_full(fd, buf, len, off);
	return ret == -ENODATA ? -ENXIO : ret;
}

static const struct io_ops file_ops = {
	.name = "file",
	.read = file_read,
	.write = file_write,
	.flush = file_flush,
	.size = file_size,
	.close = file_close,
	.prefetch = file_prefetch,
	.read_direct = file_read_direct,
};

struct io_dev *io_dev_new(const struct io_ops *ops, const char *path, bool writable, void *priv)
{
	struct io_dev *io = calloc(1, sizeof(*io));

	if (!io)
		return NULL;
	io->path = strdup(path);
	if (!io->path) {
		free(io);
		return NULL;
	}
	io->ops = ops;
	io->writable = writable;
	io->priv = priv;
	return io;
}

int io_open_file(const char *path, unsigned flags, struct io_dev **out)
{
	struct file_priv *fp;
	struct stat st;
	int oflags = (flags & IO_OPEN_WRITE) ? O_RDWR : O_RDONLY;
	int fd, ret;

	*out = NULL;
	fd = open(path, oflags | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) < 0)
		goto fail_errno;
	if (S_ISBLK(st.st_mode) && (flags & IO_OPEN_EXCL)) {
		/* O_EXCL on a block device fails with EBUSY when it is mounted or claimed. */
		int efd = open(path, oflags | O_CLOEXEC | O_EXCL);
		if (efd < 0)
			goto fail_errno;
		close(fd);
		fd = efd;
	}
	fp = calloc(1, sizeof(*fp));
	if (!fp) {
		close(fd);
		return -ENOMEM;
	}
	fp->fd = fd;
	fp->dfd = -1;
	pthread_mutex_init(&fp->dlock, NULL);
	if (S_ISBLK(st.st_mode)) {
		uint64_t bytes;
		if (ioctl(fd, BLKGETSIZE64, &bytes) < 0) {
			ret = -errno;
			free(fp);
			close(fd);
			return ret;
		}
		fp->size = bytes;
	} else if (S_ISREG(st.st_mode)) {
		fp->size = (uint64_t)st.st_size;
	} else {
		free(fp);
		close(fd);
		return -ENOTBLK;
	}
	*out = io_dev_new(&file_ops, path, flags & IO_OPEN_WRITE, fp);
	if (!*out) {
		free(fp);
		close(fd);
		return -ENOMEM;
	}
	return 0;

fail_errno:
	ret = -errno;
	close(fd);
	return ret;
}

struct mem_priv {
	uint8_t *buf;
	size_t size;
	bool owned;
};

static int mem_read(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	struct mem_priv *mp = io->priv;

	if (off > mp->size || len > mp->size - off)
		return -ENXIO;
	memcpy(buf, mp->buf + off, len);
	return 0;
}

static int mem_write(struct io_dev *io, const void *buf, size_t len, uint64_t off)
{
	struct mem_priv *mp = io->priv;

	if (!io->writable)
		return -EROFS;
	if (off > mp->size || len > mp->size - off)
		return -ENOSPC;
	memcpy(mp->buf + off, buf, len);
	return 0;
}

static int mem_flush(struct io_dev *io)
{
	(void)io;
	return 0;
}

static uint64_t mem_size(struct io_dev *io)
{
	return ((struct mem_priv *)io->priv)->size;
}

static void mem_close(struct io_dev *io)
{
	struct mem_priv *mp = io->priv;

	if (mp->owned)
		free(mp->buf);
	free(mp);
}

static const struct io_ops mem_ops = {
	.name = "memory",
	.read = mem_read,
	.write = mem_write,
	.flush = mem_flush,
	.size = mem_size,
	.close = mem_close,
};

int io_open_mem(void *buf, size_t size, bool take_ownership, struct io_dev **out)
{
	struct mem_priv *mp = calloc(1, sizeof(*mp));

	*out = NULL;
	if (!mp)
		return -ENOMEM;
	mp->buf = buf;
	mp->size = size;
	mp->owned = take_ownership;
	*out = io_dev_new(&mem_ops, "<memory>", true, mp);
	if (!*out) {
		free(mp);
		return -ENOMEM;
	}
	return 0;
}

void io_close(struct io_dev *io)
{
	if (!io)
		return;
	io->ops->close(io);
	free(io->path);
	free(io);
}
