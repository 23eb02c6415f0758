/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The I/O layer: every device btk touches is a struct io_dev behind a small
 * table of operations, so a file, a block device, a memory buffer, a write
 * log or an undo recorder look the same to the code above. */
#ifndef BTK_IO_H
#define BTK_IO_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct io_dev;

/* Counted caller memory a backend may keep instead of copying (io_write_ref):
 * get(obj) when it takes the bytes, put(obj) when done with them, perhaps
 * from another thread. */
struct io_ref {
	void (*get)(void *obj);
	void (*put)(void *obj);
	void *obj;
};

struct io_ops {
	const char *name;
	/* Whole-buffer read at a byte offset: 0, -ENXIO past the end, or -errno. */
	int (*read)(struct io_dev *io, void *buf, size_t len, uint64_t offset);
	int (*write)(struct io_dev *io, const void *buf, size_t len, uint64_t offset);
	int (*flush)(struct io_dev *io);
	uint64_t (*size)(struct io_dev *io);
	void (*close)(struct io_dev *io);
	/* Optional (may be NULL): start reading a range into the page cache, a
	 * hint that returns at once; 0 or -errno. */
	int (*prefetch)(struct io_dev *io, uint64_t offset, uint64_t len);
	/* Optional (may be NULL): read what the device holds, bypassing the
	 * page cache (O_DIRECT); buf, len and offset aligned to IO_DIRECT_ALIGN.
	 * Safe from several threads at once. Writes a wrapper holds back are
	 * not seen. 0, -EOPNOTSUPP when the backend cannot, or -errno. */
	int (*read_direct)(struct io_dev *io, void *buf, size_t len, uint64_t offset);
	/* Optional (may be NULL): write, keeping a reference on hold's memory
	 * rather than copying buf (io_ref). Like write otherwise. */
	int (*write_ref)(struct io_dev *io, const void *buf, size_t len, uint64_t offset, const struct io_ref *hold);
};

#define IO_DIRECT_ALIGN 4096

struct io_dev {
	const struct io_ops *ops;
	char *path;         /* for messages */
	bool writable;
	void *priv;         /* backend state */
};

#define IO_OPEN_WRITE (1U << 0)   /* open for writing */
#define IO_OPEN_EXCL (1U << 1)    /* O_EXCL on block devices: fail if in use */
#define IO_OPEN_NO_DIRECT (1U << 2) /* io_open_batched: no O_DIRECT writes (page cache only) */

int io_open_file(const char *path, unsigned flags, struct io_dev **out);
/* A device over a memory buffer; with take_ownership the buffer is freed on close. */
int io_open_mem(void *buf, size_t size, bool take_ownership, struct io_dev **out);
/* n existing files or block devices opened for batched writing (io_batch.c):
 * one io_dev each, sharing one writer. Writes are queued and go out sorted,
 * in bulk, from a writer thread (O_DIRECT through Linux AIO where the output
 * takes it, unless IO_OPEN_NO_DIRECT); io_write_ref queues without copying;
 * a read sees every write queued before it; io_flush writes everything
 * queued (to every output) and fsyncs its own; the last close writes what is
 * still queued. flags: IO_OPEN_EXCL, IO_OPEN_NO_DIRECT. */
int io_open_batched(const char *const *paths, unsigned n, unsigned flags, struct io_dev **outs);
/* For backends: a struct io_dev with a copy of path, or NULL. */
struct io_dev *io_dev_new(const struct io_ops *ops, const char *path, bool writable, void *priv);

static inline int io_read(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	return io->ops->read(io, buf, len, off);
}
static inline int io_write(struct io_dev *io, const void *buf, size_t len, uint64_t off)
{
	return io->ops->write(io, buf, len, off);
}
/* A read-ahead hint; backends without one ignore it. */
static inline int io_prefetch(struct io_dev *io, uint64_t off, uint64_t len)
{
	return io->ops->prefetch ? io->ops->prefetch(io, off, len) : 0;
}
/* An uncached read (see io_ops.read_direct); -EOPNOTSUPP without one. */
static inline int io_read_direct(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	return io->ops->read_direct ? io->ops->read_direct(io, buf, len, off) : -EOPNOTSUPP;
}
/* A write that may keep a reference on hold's memory instead of a copy;
 * backends without write_ref (and hold NULL) copy as io_write does. */
static inline int io_write_ref(struct io_dev *io, const void *buf, size_t len, uint64_t off,
			       const struct io_ref *hold)
{
	return io->ops->write_ref && hold ? io->ops->write_ref(io, buf, len, off, hold)
					  : io->ops->write(io, buf, len, off);
}
static inline int io_flush(struct io_dev *io) { return io->ops->flush(io); }
static inline uint64_t io_size(struct io_dev *io) { return io->ops->size(io); }
void io_close(struct io_dev *io);

#endif
