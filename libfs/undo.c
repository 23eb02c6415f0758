// SPDX-License-Identifier: LGPL-2.1-or-later
/* The undo recorder: an io backend that saves old bytes into an undo file
 * before they are first overwritten (see undo.h for the protocol and
 * doc/undo-format.md for the file). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <btk/ebitmap.h>
#include <btk/endian_access.h>
#include <btk/format.h>
#include <btk/super.h>
#include <btk/undo.h>
#include "libfs/undo_format.h"
#include "libfs/fdio.h"

/* A saved range is cut into records of at most this many bytes. */
#define UNDO_RECORD_MAX (1U << 20)

/* A write held back until the records it depends on are durable. */
struct pending_write {
	uint64_t offset;
	size_t len;
	uint8_t *data;
};

struct undo_dev {
	struct undo_file *u;
	struct io_dev *lower;       /* NULL once the wrapped device is closed */
	unsigned index;
	struct ebitmap *saved;      /* blocks whose old bytes are recorded */
	struct pending_write *pending;
	size_t npending, pending_cap;
	uint64_t pending_bytes;
};

struct undo_file {
	int fd;
	char *path;
	unsigned refs;              /* the creator + every open wrapped device */
	uint8_t header[UNDO_HEADER_SIZE];
	uint64_t generation_before;
	uint64_t file_len;          /* bytes written and synced */
	uint32_t body_crc;          /* running crc32c register over the batches */
	uint8_t *batch;             /* batch header space + records not yet written */
	size_t batch_len, batch_cap;
	uint32_t batch_records;
	uint64_t batches;
	uint64_t data_records;
	struct undo_dev **devs;
	unsigned ndevs;
	int error;                  /* sticky: nothing is written unrecorded */
	bool finished;
};

static int write_all(int fd, const void *buf, size_t len, uint64_t off)
{
	return fd_write_full(fd, buf, len, off);
}

static int sync_fd(int fd)
{
	while (fdatasync(fd) < 0)
		if (errno != EINTR)
			return -errno;
	return 0;
}

/* fsync the directory holding path, so the new file's name is durable. */
static int sync_parent_dir(const char *path)
{
	char *copy = strdup(path);
	int fd, ret = 0;

	if (!copy)
		return -ENOMEM;
	fd = open(dirname(copy), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		ret = -errno;
	else if (fsync(fd) < 0 && errno != EINVAL)
		ret = -errno;
	if (fd >= 0)
		close(fd);
	free(copy);
	return ret;
}

/* Room for n more bytes (n a multiple of 8) at the end of the batch; the
 * space is zeroed. NULL on -ENOMEM. */
static uint8_t *batch_add(struct undo_file *u, size_t n)
{
	uint8_t *p;

	if (u->batch_len + n > u->batch_cap) {
		size_t cap = u->batch_cap ? u->batch_cap : 65536;
		while (cap < u->batch_len + n)
			cap *= 2;
		p = realloc(u->batch, cap);
		if (!p)
			return NULL;
		u->batch = p;
		u->batch_cap = cap;
	}
	p = u->batch + u->batch_len;
	memset(p, 0, n);
	u->batch_len += n;
	return p;
}

/* Append the records gathered so far as one batch and make it durable. */
static int undo_sync_batch(struct undo_file *u)
{
	uint8_t *h = u->batch;
	uint64_t payload = u->batch_len - UNDO_BATCH_HEADER_SIZE;
	int ret;

	if (u->error)
		return u->error;
	if (!u->batch_records)
		return 0;
	put_le32(h + UB_MAGIC, UNDO_BATCH_MAGIC);
	put_le32(h + UB_NRECORDS, u->batch_records);
	put_le64(h + UB_SEQ, u->batches);
	put_le64(h + UB_PAYLOAD_LEN, payload);
	put_le32(h + UB_PAYLOAD_CRC, undo_crc(h + UNDO_BATCH_HEADER_SIZE, payload));
	put_le32(h + UB_HEADER_CRC, undo_crc(h, UB_HEADER_CRC));
	ret = write_all(u->fd, h, u->batch_len, u->file_len);
	if (!ret)
		ret = sync_fd(u->fd);
	if (ret) {
		u->error = ret;
		return ret;
	}
	u->body_crc = crc32c_btrfs(u->body_crc, h, u->batch_len);
	u->file_len += u->batch_len;
	u->batches++;
	u->batch_len = UNDO_BATCH_HEADER_SIZE;
	u->batch_records = 0;
	return 0;
}

static void undo_free(struct undo_file *u)
{
	bool remove = !u->finished && u->data_records == 0;

	if (!u->finished && !u->error)
		undo_sync_batch(u);
	close(u->fd);
	if (remove)
		unlink(u->path); /* nothing to undo: leave no file behind */
	for (unsigned i = 0; i < u->ndevs; i++) {
		ebitmap_destroy(u->devs[i]->saved);
		free(u->devs[i]);
	}
	free(u->devs);
	free(u->batch);
	free(u->path);
	free(u);
}

static void undo_put(struct undo_file *u)
{
	if (--u->refs == 0)
		undo_free(u);
}

int undo_error(const struct undo_file *u)
{
	return u->error;
}

int undo_create(const char *path, const uint8_t fsid[16], uint64_t generation_before,
		struct undo_file **out)
{
	struct undo_file *u;
	uint8_t *h;
	int ret;

	*out = NULL;
	u = calloc(1, sizeof(*u));
	if (!u)
		return -ENOMEM;
	u->path = strdup(path);
	if (!u->path || !batch_add(u, UNDO_BATCH_HEADER_SIZE)) {
		free(u->path);
		free(u->batch);
		free(u);
		return -ENOMEM;
	}
	u->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (u->fd < 0) {
		ret = -errno;
		free(u->path);
		free(u->batch);
		free(u);
		return ret;
	}
	u->refs = 1;
	u->generation_before = generation_before;
	u->body_crc = ~0U;
	h = u->header;
	memcpy(h + UH_MAGIC, UNDO_MAGIC, 8);
	put_le32(h + UH_VERSION, UNDO_VERSION);
	put_le32(h + UH_HEADER_SIZE, UNDO_HEADER_SIZE);
	memcpy(h + UH_FSID, fsid, 16);
	put_le64(h + UH_GEN_BEFORE, generation_before);
	put_le32(h + UH_BLOCK_SIZE, UNDO_BLOCK_SIZE);
	put_le32(h + UH_STATE, UNDO_STATE_RECORDING);
	put_le64(h + UH_CREATED, (uint64_t)time(NULL));
	put_le32(h + UH_CRC, undo_crc(h, UH_CRC));
	ret = write_all(u->fd, h, UNDO_HEADER_SIZE, 0);
	if (!ret)
		ret = sync_fd(u->fd);
	if (!ret)
		ret = sync_parent_dir(path);
	if (ret) {
		close(u->fd);
		unlink(path);
		free(u->path);
		free(u->batch);
		free(u);
		return ret;
	}
	u->file_len = UNDO_HEADER_SIZE;
	*out = u;
	return 0;
}

/* Record the old bytes of every not yet saved block that [off, off+len)
 * touches. *added is set when a record was appended. */
static int udev_save_old(struct undo_dev *d, uint64_t off, size_t len, bool *added)
{
	struct undo_file *u = d->u;
	uint64_t size = io_size(d->lower);
	uint64_t end = (off + len + UNDO_BLOCK_SIZE - 1) & ~(uint64_t)(UNDO_BLOCK_SIZE - 1);
	uint64_t pos = off & ~(uint64_t)(UNDO_BLOCK_SIZE - 1);
	uint64_t start, run;
	int ret;

	while (pos < end) {
		ret = ebitmap_next_clear(d->saved, pos, end, &start, &run);
		if (ret <= 0)
			return ret;
		for (uint64_t x = start; x < start + run && x < size; x += UNDO_RECORD_MAX) {
			uint64_t n = start + run - x;
			uint8_t *rec;
			if (n > UNDO_RECORD_MAX)
				n = UNDO_RECORD_MAX;
			if (n > size - x)
				n = size - x; /* a device whose size is no multiple of the block */
			rec = batch_add(u, undo_align8(UNDO_REC_DATA_HEAD + n));
			if (!rec)
				return -ENOMEM;
			ret = io_read(d->lower, rec + UNDO_REC_DATA_HEAD, (size_t)n, x);
			if (ret) {
				u->batch_len -= undo_align8(UNDO_REC_DATA_HEAD + n);
				return ret;
			}
			put_le16(rec + UR_TYPE, UNDO_REC_DATA);
			put_le32(rec + UR_DEV, d->index);
			put_le64(rec + UR_DATA_OFFSET, x);
			put_le32(rec + UR_DATA_LENGTH, (uint32_t)n);
			u->batch_records++;
			u->data_records++;
			*added = true;
		}
		/* blocks beyond the end hold nothing to restore: count them saved */
		ret = ebitmap_set(d->saved, start, run);
		if (ret)
			return ret;
		pos = start + run;
	}
	return 0;
}

/* Record every btrfs superblock copy the write carries, so an unfinished
 * file knows which generations the operation may have put on disk. */
static int udev_note_supers(struct undo_dev *d, const uint8_t *buf, size_t len, uint64_t off,
			    bool *added)
{
	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		uint64_t so = btrfs_super_offset(m);
		const uint8_t *sb;
		uint8_t *rec;

		if (so < off || so - off > len || len - (so - off) < BTRFS_SUPER_INFO_SIZE)
			continue;
		sb = buf + (so - off);
		if (super_magic(sb) != BTRFS_MAGIC)
			continue;
		rec = batch_add(d->u, UNDO_REC_SUPER_LEN);
		if (!rec)
			return -ENOMEM;
		put_le16(rec + UR_TYPE, UNDO_REC_SUPER);
		put_le32(rec + UR_DEV, d->index);
		put_le64(rec + UR_SUPER_OFFSET, so);
		put_le64(rec + UR_SUPER_GEN, super_generation(sb));
		memcpy(rec + UR_SUPER_FSID, super_fsid_ptr(sb), 16);
		put_le32(rec + UR_SUPER_CRC, undo_crc(sb, BTRFS_SUPER_INFO_SIZE));
		d->u->batch_records++;
		*added = true;
	}
	return 0;
}

static void udev_drop_pending(struct undo_dev *d)
{
	for (size_t i = 0; i < d->npending; i++)
		free(d->pending[i].data);
	d->npending = 0;
	d->pending_bytes = 0;
}

/* Make the undo file durable, then issue the held-back writes in order. */
static int udev_push(struct undo_dev *d)
{
	int ret = undo_sync_batch(d->u);

	for (size_t i = 0; !ret && i < d->npending; i++)
		ret = io_write(d->lower, d->pending[i].data, d->pending[i].len, d->pending[i].offset);
	udev_drop_pending(d);
	return ret;
}

static int udev_hold(struct undo_dev *d, const void *buf, size_t len, uint64_t off)
{
	struct pending_write *p;

	if (d->npending == d->pending_cap) {
		size_t cap = d->pending_cap ? d->pending_cap * 2 : 64;
		p = realloc(d->pending, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		d->pending = p;
		d->pending_cap = cap;
	}
	p = &d->pending[d->npending];
	p->data = malloc(len);
	if (!p->data)
		return -ENOMEM;
	memcpy(p->data, buf, len);
	p->offset = off;
	p->len = len;
	d->npending++;
	d->pending_bytes += len;
	return 0;
}

static int udev_read(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	struct undo_dev *d = io->priv;
	int ret = io_read(d->lower, buf, len, off);

	if (ret)
		return ret;
	/* held-back writes are what the device holds from the caller's view */
	for (size_t i = 0; i < d->npending; i++) {
		const struct pending_write *p = &d->pending[i];
		uint64_t s = p->offset > off ? p->offset : off;
		uint64_t e = p->offset + p->len < off + len ? p->offset + p->len : off + len;
		if (s < e)
			memcpy((uint8_t *)buf + (s - off), p->data + (s - p->offset), (size_t)(e - s));
	}
	return 0;
}

static int udev_write(struct io_dev *io, const void *buf, size_t len, uint64_t off)
{
	struct undo_dev *d = io->priv;
	struct undo_file *u = d->u;
	bool added = false;
	int ret;

	if (!io->writable || u->finished)
		return -EROFS;
	if (u->error)
		return u->error;
	if (len == 0)
		return 0;
	if (off > UINT64_MAX - UNDO_BLOCK_SIZE - len)
		return -EFBIG;
	ret = udev_save_old(d, off, len, &added);
	if (!ret)
		ret = udev_note_supers(d, buf, len, off, &added);
	if (ret)
		return ret;
	/* Nothing unsynced anywhere and nothing held back: straight through. */
	if (!u->batch_records && !d->npending)
		return io_write(d->lower, buf, len, off);
	ret = udev_hold(d, buf, len, off);
	if (ret)
		return ret;
	if (d->pending_bytes > UNDO_PENDING_LIMIT || u->batch_len > UNDO_PENDING_LIMIT)
		return udev_push(d);
	return 0;
}

static int udev_flush(struct io_dev *io)
{
	struct undo_dev *d = io->priv;
	int ret = udev_push(d);

	if (ret)
		return ret;
	return io_flush(d->lower);
}

static uint64_t udev_size(struct io_dev *io)
{
	return io_size(((struct undo_dev *)io->priv)->lower);
}

/* A read-ahead hint passes straight to the device below. */
static int udev_prefetch(struct io_dev *io, uint64_t off, uint64_t len)
{
	return io_prefetch(((struct undo_dev *)io->priv)->lower, off, len);
}

/* An uncached read passes to the device below (held-back writes are not seen). */
static int udev_read_direct(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	return io_read_direct(((struct undo_dev *)io->priv)->lower, buf, len, off);
}

static void udev_close(struct io_dev *io)
{
	struct undo_dev *d = io->priv;

	udev_push(d); /* best effort: a close has no way to report */
	free(d->pending);
	d->pending = NULL;
	d->pending_cap = 0;
	io_close(d->lower);
	d->lower = NULL;
	undo_put(d->u);
}

static const struct io_ops undo_io_ops = {
	.name = "undo",
	.read = udev_read,
	.write = udev_write,
	.flush = udev_flush,
	.size = udev_size,
	.prefetch = udev_prefetch,
	.read_direct = udev_read_direct,
	.close = udev_close,
};

int undo_add_device(struct undo_file *u, uint64_t devid, const uint8_t uuid[16], struct io_dev *lower,
		    struct io_dev **wrapped)
{
	struct undo_dev *d, **devs;
	struct io_dev *io;
	uint8_t *rec;

	*wrapped = NULL;
	if (u->finished)
		return -EROFS;
	if (u->error)
		return u->error;
	d = calloc(1, sizeof(*d));
	io = calloc(1, sizeof(*io));
	devs = realloc(u->devs, (u->ndevs + 1) * sizeof(*devs));
	if (devs)
		u->devs = devs;
	if (!d || !io || !devs || !(io->path = strdup(lower->path)) ||
	    !(d->saved = ebitmap_create(UNDO_BLOCK_SIZE))) {
		if (io)
			free(io->path);
		free(io);
		free(d);
		return -ENOMEM;
	}
	rec = batch_add(u, UNDO_REC_DEVICE_LEN);
	if (!rec) {
		ebitmap_destroy(d->saved);
		free(io->path);
		free(io);
		free(d);
		return -ENOMEM;
	}
	put_le16(rec + UR_TYPE, UNDO_REC_DEVICE);
	put_le32(rec + UR_DEV, u->ndevs);
	put_le64(rec + UR_DEVICE_DEVID, devid);
	memcpy(rec + UR_DEVICE_UUID, uuid, 16);
	put_le64(rec + UR_DEVICE_SIZE, io_size(lower));
	u->batch_records++;
	d->u = u;
	d->lower = lower;
	d->index = u->ndevs;
	u->devs[u->ndevs++] = d;
	u->refs++;
	io->ops = &undo_io_ops;
	io->writable = lower->writable;
	io->priv = d;
	*wrapped = io;
	return 0;
}

/* The newest valid superblock generation over the devices still open. */
static uint64_t undo_current_generation(struct undo_file *u)
{
	struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];
	uint64_t gen = 0;

	for (unsigned i = 0; i < u->ndevs; i++)
		if (u->devs[i]->lower && super_read_best(u->devs[i]->lower, -1, sb, copies) >= 0 &&
		    super_generation(sb) > gen)
			gen = super_generation(sb);
	return gen ? gen : u->generation_before;
}

int undo_finish(struct undo_file *u, uint64_t generation_after)
{
	uint8_t t[UNDO_TRAILER_SIZE] = { 0 };
	int ret;

	if (u->finished)
		return -EINVAL;
	if (u->error)
		return u->error;
	for (unsigned i = 0; i < u->ndevs; i++) {
		struct undo_dev *d = u->devs[i];
		if (!d->lower)
			continue;
		ret = udev_push(d);
		if (!ret)
			ret = io_flush(d->lower);
		if (ret)
			return ret;
	}
	if (!generation_after)
		generation_after = undo_current_generation(u);
	ret = undo_sync_batch(u);
	if (ret)
		return ret;
	put_le32(t + UT_MAGIC, UNDO_TRAILER_MAGIC);
	put_le32(t + UT_VERSION, UNDO_VERSION);
	put_le64(t + UT_GEN_AFTER, generation_after);
	put_le64(t + UT_BATCHES, u->batches);
	put_le64(t + UT_RECORDS, u->data_records);
	put_le64(t + UT_OFFSET, u->file_len);
	put_le32(t + UT_BODY_CRC, ~u->body_crc);
	put_le32(t + UT_CRC, undo_crc(t, UT_CRC));
	ret = write_all(u->fd, t, sizeof(t), u->file_len);
	if (!ret)
		ret = sync_fd(u->fd);
	if (!ret) {
		/* The header now says finished: a trailer cut off later is damage. */
		put_le32(u->header + UH_STATE, UNDO_STATE_FINISHED);
		put_le32(u->header + UH_CRC, undo_crc(u->header, UH_CRC));
		ret = write_all(u->fd, u->header, UNDO_HEADER_SIZE, 0);
	}
	if (!ret)
		ret = sync_fd(u->fd);
	if (ret) {
		u->error = ret;
		return ret;
	}
	u->file_len += sizeof(t);
	u->finished = true;
	return 0;
}

void undo_close(struct undo_file *u)
{
	if (u)
		undo_put(u);
}
