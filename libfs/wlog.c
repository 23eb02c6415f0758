// SPDX-License-Identifier: LGPL-2.1-or-later
/* Write logs: record every write and flush of the devices below (see wlog.h,
 * doc/write-log-format.md), read a log back and replay crash states. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btk/csum.h>
#include <btk/endian_access.h>
#include <btk/wlog.h>
#include "libfs/fdio.h"

#define WLOG_MAGIC "BTKWLOG1"
#define WLOG_VERSION 1U
#define WLOG_HEADER_SIZE 64U
#define WH_MAGIC 0          /* 8 bytes */
#define WH_VERSION 8        /* u32 */
#define WH_HEADER_SIZE 12   /* u32 */
#define WH_CRC 60           /* u32 over [0, 60) */

#define WLOG_ENTRY_HEAD 40U
#define WE_TYPE 0           /* u16 */
#define WE_DEV 4            /* u32 */
#define WE_ARG 8            /* u64: write offset / device size / writes in the session */
#define WE_LEN 16           /* u64: bytes of data following (padded to 8) */
#define WE_SEQ 24           /* u64: entry number in the file */
#define WE_DATA_CRC 32      /* u32 */
#define WE_HEAD_CRC 36      /* u32 over [0, 36) */

enum { WLOG_DEVICE = 1, WLOG_WRITE = 2, WLOG_FLUSH = 3, WLOG_END = 4 };

#define WLOG_DATA_MAX (1ULL << 32)
#define WLOG_PATH_MAX 4096U

static uint32_t wlog_crc(const void *p, size_t n)
{
	return ~crc32c_btrfs(~0U, p, n);
}

static uint64_t align8(uint64_t v)
{
	return (v + 7) & ~(uint64_t)7;
}

/* ---------------------------------------------------------------- reader */

struct wlog_write {
	unsigned dev;
	uint64_t offset;
	uint64_t len;
	uint64_t data_pos;
	uint32_t crc;
};

struct wlog_reader {
	int fd;
	struct wlog_write *writes;
	uint64_t nwrites;
	struct wlog_flush *flushes;
	size_t nflushes;
	char **paths;               /* per device number, as last named */
	unsigned ndevs;
	bool complete;
	uint64_t entries;
	uint64_t session_writes;    /* writes of the last session */
};

void wlog_reader_free(struct wlog_reader *r)
{
	if (!r)
		return;
	if (r->fd >= 0)
		close(r->fd);
	for (unsigned i = 0; i < r->ndevs; i++)
		free(r->paths[i]);
	free(r->paths);
	free(r->writes);
	free(r->flushes);
	free(r);
}

static int read_all(int fd, void *buf, size_t len, uint64_t off)
{
	int ret = fd_read_full(fd, buf, len, off);

	return ret == -ENODATA ? -EUCLEAN : ret; /* a log cut off is a damaged log */
}

/* crc32c of len bytes of the file at off, read in pieces. */
static int file_crc(int fd, uint64_t off, uint64_t len, uint32_t *crc)
{
	static const size_t piece = 1 << 20;
	uint8_t *buf = malloc(len < piece ? (len ? len : 1) : piece);
	uint32_t raw = ~0U;
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	while (len && !ret) {
		size_t n = len < piece ? (size_t)len : piece;
		ret = read_all(fd, buf, n, off);
		raw = crc32c_btrfs(raw, buf, n);
		off += n;
		len -= n;
	}
	free(buf);
	*crc = ~raw;
	return ret;
}

static int reader_add_write(struct wlog_reader *r, const struct wlog_write *w)
{
	if ((r->nwrites & (r->nwrites - 1)) == 0) {
		struct wlog_write *v = realloc(r->writes, (r->nwrites ? r->nwrites * 2 : 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->writes = v;
	}
	r->writes[r->nwrites++] = *w;
	return 0;
}

static int reader_add_flush(struct wlog_reader *r, unsigned dev)
{
	if ((r->nflushes & (r->nflushes - 1)) == 0) {
		struct wlog_flush *v = realloc(r->flushes, (r->nflushes ? r->nflushes * 2 : 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->flushes = v;
	}
	r->flushes[r->nflushes++] = (struct wlog_flush){ r->nwrites, dev };
	return 0;
}

/* One DEVICE entry: a new device number, or one a previous session named. */
static int reader_add_device(struct wlog_reader *r, unsigned dev, const char *path, bool *in_session)
{
	if (dev > r->ndevs || (dev < r->ndevs && in_session[dev]))
		return -EUCLEAN;
	if (dev == r->ndevs) {
		char **v = realloc(r->paths, (r->ndevs + 1) * sizeof(*v));
		if (!v)
			return -ENOMEM;
		r->paths = v;
		r->paths[r->ndevs++] = NULL;
	}
	free(r->paths[dev]);
	r->paths[dev] = strdup(path);
	if (!r->paths[dev])
		return -ENOMEM;
	in_session[dev] = true;
	return 0;
}

/* Walk every entry, checking checksums, order and references. */
static int reader_scan(struct wlog_reader *r, uint64_t size)
{
	uint8_t h[WLOG_ENTRY_HEAD];
	bool *in_session = NULL;
	uint64_t pos = WLOG_HEADER_SIZE, session_writes = 0;
	int ret = 0;

	r->complete = true; /* an empty log is a complete one */
	while (pos < size && !ret) {
		unsigned type, dev;
		uint64_t len;
		uint32_t crc;

		ret = read_all(r->fd, h, sizeof(h), pos);
		if (ret)
			break;
		type = get_le16(h + WE_TYPE);
		dev = get_le32(h + WE_DEV);
		len = get_le64(h + WE_LEN);
		if (wlog_crc(h, WE_HEAD_CRC) != get_le32(h + WE_HEAD_CRC) || get_le64(h + WE_SEQ) != r->entries ||
		    len > WLOG_DATA_MAX || align8(len) > size - pos - sizeof(h)) {
			ret = -EUCLEAN;
			break;
		}
		ret = file_crc(r->fd, pos + sizeof(h), len, &crc);
		if (!ret && crc != get_le32(h + WE_DATA_CRC))
			ret = -EUCLEAN;
		if (ret)
			break;
		if (r->complete && type != WLOG_END) {
			/* a new session: device numbers are named again */
			bool *v = realloc(in_session, (r->ndevs + 1) * sizeof(*v));
			if (!v) {
				ret = -ENOMEM;
				break;
			}
			in_session = v;
			memset(in_session, 0, (r->ndevs + 1) * sizeof(*v));
			session_writes = 0;
			r->complete = false;
		}
		switch (type) {
		case WLOG_DEVICE: {
			char path[WLOG_PATH_MAX + 1];
			bool *v;
			if (len > WLOG_PATH_MAX || (ret = read_all(r->fd, path, len, pos + sizeof(h))))
				ret = ret ? ret : -EUCLEAN;
			else if (!(v = realloc(in_session, (r->ndevs + 2) * sizeof(*v))))
				ret = -ENOMEM;
			else {
				in_session = v;
				in_session[r->ndevs] = false;
				in_session[r->ndevs + 1] = false;
				path[len] = 0;
				ret = reader_add_device(r, dev, path, in_session);
			}
			break;
		}
		case WLOG_WRITE:
			if (dev >= r->ndevs || !in_session[dev] || len == 0)
				ret = -EUCLEAN;
			else
				ret = reader_add_write(r, &(struct wlog_write){ dev, get_le64(h + WE_ARG), len,
										pos + sizeof(h), crc });
			session_writes++;
			break;
		case WLOG_FLUSH:
			if (dev >= r->ndevs || !in_session[dev] || len)
				ret = -EUCLEAN;
			else
				ret = reader_add_flush(r, dev);
			break;
		case WLOG_END:
			if (r->complete || get_le64(h + WE_ARG) != session_writes || len)
				ret = -EUCLEAN;
			r->complete = true;
			break;
		default:
			ret = -EUCLEAN;
		}
		pos += sizeof(h) + align8(len);
		r->entries++;
	}
	free(in_session);
	r->session_writes = session_writes;
	return ret;
}

int wlog_open(const char *path, struct wlog_reader **out)
{
	struct wlog_reader *r = calloc(1, sizeof(*r));
	uint8_t h[WLOG_HEADER_SIZE];
	struct stat st;
	int ret;

	*out = NULL;
	if (!r)
		return -ENOMEM;
	r->fd = open(path, O_RDONLY | O_CLOEXEC);
	if (r->fd < 0) {
		ret = -errno;
		free(r);
		return ret;
	}
	if (fstat(r->fd, &st) < 0) {
		ret = -errno;
		goto fail;
	}
	ret = read_all(r->fd, h, sizeof(h), 0);
	if (ret)
		goto fail;
	if (memcmp(h + WH_MAGIC, WLOG_MAGIC, 8) || wlog_crc(h, WH_CRC) != get_le32(h + WH_CRC) ||
	    get_le32(h + WH_VERSION) != WLOG_VERSION || get_le32(h + WH_HEADER_SIZE) != WLOG_HEADER_SIZE) {
		ret = -EUCLEAN;
		goto fail;
	}
	ret = reader_scan(r, (uint64_t)st.st_size);
	if (ret)
		goto fail;
	*out = r;
	return 0;
fail:
	wlog_reader_free(r);
	return ret;
}

uint64_t wlog_count(const struct wlog_reader *r)
{
	return r->nwrites;
}

unsigned wlog_devices(const struct wlog_reader *r)
{
	return r->ndevs;
}

bool wlog_complete(const struct wlog_reader *r)
{
	return r->complete;
}

size_t wlog_flush_points(const struct wlog_reader *r, const struct wlog_flush **out)
{
	*out = r->flushes;
	return r->nflushes;
}

static uint64_t splitmix64(uint64_t *state)
{
	uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static int replay_one(struct wlog_reader *r, const struct wlog_write *w, struct io_dev *target)
{
	uint8_t *buf = malloc(w->len);
	int ret;

	if (!buf)
		return -ENOMEM;
	ret = read_all(r->fd, buf, w->len, w->data_pos);
	if (!ret && wlog_crc(buf, w->len) != w->crc)
		ret = -EUCLEAN; /* the log changed since it was opened */
	if (!ret)
		ret = io_write(target, buf, w->len, w->offset);
	free(buf);
	return ret;
}

int wlog_replay(struct wlog_reader *r, struct io_dev **targets, unsigned ndevs, uint64_t prefix_ops,
		uint64_t reorder_seed)
{
	uint64_t *durable_until = NULL, *volatile_ops = NULL, nvolatile = 0, rng = reorder_seed;
	int ret = 0;

	if (ndevs < r->ndevs || prefix_ops > r->nwrites)
		return -EINVAL;
	for (unsigned d = 0; d < r->ndevs; d++)
		if (!targets[d])
			return -EINVAL;
	if (reorder_seed) {
		durable_until = calloc(r->ndevs ? r->ndevs : 1, sizeof(*durable_until));
		volatile_ops = malloc((prefix_ops ? prefix_ops : 1) * sizeof(*volatile_ops));
		if (!durable_until || !volatile_ops) {
			ret = -ENOMEM;
			goto out;
		}
		/* a flush logged before the crash makes its device's earlier writes durable */
		for (size_t f = 0; f < r->nflushes && r->flushes[f].writes < prefix_ops; f++)
			durable_until[r->flushes[f].dev] = r->flushes[f].writes;
	}
	for (uint64_t i = 0; i < prefix_ops && !ret; i++) {
		const struct wlog_write *w = &r->writes[i];
		if (reorder_seed && i >= durable_until[w->dev])
			volatile_ops[nvolatile++] = i;
		else
			ret = replay_one(r, w, targets[w->dev]);
	}
	if (reorder_seed && !ret) {
		/* any subset of the unflushed writes, in any order */
		uint64_t n = 0;
		for (uint64_t i = 0; i < nvolatile; i++)
			if (splitmix64(&rng) & 1)
				volatile_ops[n++] = volatile_ops[i];
		for (uint64_t i = n; i > 1; i--) {
			uint64_t j = splitmix64(&rng) % i, t = volatile_ops[i - 1];
			volatile_ops[i - 1] = volatile_ops[j];
			volatile_ops[j] = t;
		}
		for (uint64_t i = 0; i < n && !ret; i++)
			ret = replay_one(r, &r->writes[volatile_ops[i]], targets[r->writes[volatile_ops[i]].dev]);
	}
	for (unsigned d = 0; d < r->ndevs && !ret; d++)
		ret = io_flush(targets[d]);
out:
	free(durable_until);
	free(volatile_ops);
	return ret;
}

/* ---------------------------------------------------------------- writer */

struct wlog_writer {
	FILE *f;
	char *iobuf;
	unsigned refs;
	uint64_t seq;               /* next entry number */
	uint64_t session_start;     /* entry number where this session began */
	uint64_t session_writes;
	char **paths;               /* per device number, from earlier sessions or this one */
	bool *taken;                /* numbered in this session */
	unsigned ndevs;
	int error;
};

struct wlog_dev {
	struct wlog_writer *w;
	struct io_dev *lower;
	unsigned index;
};

int wlog_error(const struct wlog_writer *w)
{
	return w->error;
}

/* Append one entry with its data (NULL: none). */
static void wlog_append(struct wlog_writer *w, unsigned type, unsigned dev, uint64_t arg,
			const void *data, uint64_t len)
{
	static const uint8_t zeros[8];
	uint8_t h[WLOG_ENTRY_HEAD] = { 0 };

	if (w->error)
		return;
	put_le16(h + WE_TYPE, (uint16_t)type);
	put_le32(h + WE_DEV, dev);
	put_le64(h + WE_ARG, arg);
	put_le64(h + WE_LEN, len);
	put_le64(h + WE_SEQ, w->seq);
	put_le32(h + WE_DATA_CRC, wlog_crc(data ? data : zeros, len));
	put_le32(h + WE_HEAD_CRC, wlog_crc(h, WE_HEAD_CRC));
	if (fwrite(h, sizeof(h), 1, w->f) != 1 || (len && fwrite(data, len, 1, w->f) != 1) ||
	    (align8(len) != len && fwrite(zeros, align8(len) - len, 1, w->f) != 1)) {
		w->error = -EIO;
		return;
	}
	w->seq++;
}

static void wlog_put(struct wlog_writer *w)
{
	if (--w->refs)
		return;
	if (w->seq != w->session_start) /* an empty session leaves no trace */
		wlog_append(w, WLOG_END, 0, w->session_writes, NULL, 0);
	if (fclose(w->f) != 0 && !w->error)
		w->error = -EIO;
	for (unsigned i = 0; i < w->ndevs; i++)
		free(w->paths[i]);
	free(w->paths);
	free(w->taken);
	free(w->iobuf);
	free(w);
}

void wlog_close(struct wlog_writer *w)
{
	if (w)
		wlog_put(w);
}

/* Continue an existing log: learn its device numbers and entry count, and
 * end a session a dead process left open. */
static int wlog_resume(struct wlog_writer *w, const char *path)
{
	struct wlog_reader *r;
	int ret = wlog_open(path, &r);

	if (ret)
		return ret;
	w->seq = r->entries;
	w->paths = r->paths;
	w->ndevs = r->ndevs;
	r->paths = NULL;
	r->ndevs = 0;
	w->taken = calloc(w->ndevs ? w->ndevs : 1, sizeof(*w->taken));
	if (!w->taken)
		ret = -ENOMEM;
	else if (!r->complete)
		wlog_append(w, WLOG_END, 0, r->session_writes, NULL, 0);
	w->session_start = w->seq;
	wlog_reader_free(r);
	return ret ? ret : w->error;
}

int wlog_create(const char *path, struct wlog_writer **out)
{
	struct wlog_writer *w = calloc(1, sizeof(*w));
	struct stat st;
	int fd, ret = 0;

	*out = NULL;
	if (!w)
		return -ENOMEM;
	fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
	if (fd < 0) {
		ret = -errno;
		free(w);
		return ret;
	}
	w->f = fdopen(fd, "ab");
	w->iobuf = malloc(1 << 20);
	if (!w->f || !w->iobuf) {
		ret = -ENOMEM;
		if (w->f)
			fclose(w->f);
		else
			close(fd);
		free(w->iobuf);
		free(w);
		return ret;
	}
	setvbuf(w->f, w->iobuf, _IOFBF, 1 << 20);
	w->refs = 1;
	if (fstat(fd, &st) < 0) {
		ret = -errno;
	} else if (st.st_size == 0) {
		uint8_t h[WLOG_HEADER_SIZE] = { 0 };
		memcpy(h + WH_MAGIC, WLOG_MAGIC, 8);
		put_le32(h + WH_VERSION, WLOG_VERSION);
		put_le32(h + WH_HEADER_SIZE, WLOG_HEADER_SIZE);
		put_le32(h + WH_CRC, wlog_crc(h, WH_CRC));
		if (fwrite(h, sizeof(h), 1, w->f) != 1 || fflush(w->f) != 0)
			ret = -EIO;
	} else {
		ret = wlog_resume(w, path);
	}
	if (ret) {
		w->error = ret;
		w->refs = 0;
		fclose(w->f);
		for (unsigned i = 0; i < w->ndevs; i++)
			free(w->paths[i]);
		free(w->paths);
		free(w->taken);
		free(w->iobuf);
		free(w);
		return ret;
	}
	*out = w;
	return 0;
}

static int wdev_read(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	return io_read(((struct wlog_dev *)io->priv)->lower, buf, len, off);
}

static int wdev_write(struct io_dev *io, const void *buf, size_t len, uint64_t off)
{
	struct wlog_dev *d = io->priv;
	int ret = io_write(d->lower, buf, len, off);

	if (!ret && len) {
		wlog_append(d->w, WLOG_WRITE, d->index, off, buf, len);
		d->w->session_writes++;
	}
	return ret;
}

static int wdev_flush(struct io_dev *io)
{
	struct wlog_dev *d = io->priv;
	int ret = io_flush(d->lower);

	if (!ret) {
		wlog_append(d->w, WLOG_FLUSH, d->index, 0, NULL, 0);
		/* the log on disk is current at every barrier, should the tool die */
		if (!d->w->error && fflush(d->w->f) != 0)
			d->w->error = -EIO;
	}
	return ret;
}

static uint64_t wdev_size(struct io_dev *io)
{
	return io_size(((struct wlog_dev *)io->priv)->lower);
}

/* A read-ahead hint passes straight to the device below (it is not a write). */
static int wdev_prefetch(struct io_dev *io, uint64_t off, uint64_t len)
{
	return io_prefetch(((struct wlog_dev *)io->priv)->lower, off, len);
}

/* An uncached read passes straight to the device below, like any read. */
static int wdev_read_direct(struct io_dev *io, void *buf, size_t len, uint64_t off)
{
	return io_read_direct(((struct wlog_dev *)io->priv)->lower, buf, len, off);
}

static void wdev_close(struct io_dev *io)
{
	struct wlog_dev *d = io->priv;

	io_close(d->lower);
	wlog_put(d->w);
	free(d);
}

static const struct io_ops wlog_io_ops = {
	.name = "write-log",
	.read = wdev_read,
	.write = wdev_write,
	.flush = wdev_flush,
	.size = wdev_size,
	.prefetch = wdev_prefetch,
	.read_direct = wdev_read_direct,
	.close = wdev_close,
};

int wlog_add_device(struct wlog_writer *w, struct io_dev *lower, struct io_dev **wrapped)
{
	struct wlog_dev *d = calloc(1, sizeof(*d));
	struct io_dev *io = calloc(1, sizeof(*io));
	const char *path = lower->path ? lower->path : "";
	size_t plen = strlen(path);
	unsigned index;

	*wrapped = NULL;
	if (!d || !io || !(io->path = strdup(path)))
		goto nomem;
	if (plen > WLOG_PATH_MAX)
		plen = WLOG_PATH_MAX;
	for (index = 0; index < w->ndevs; index++)
		if (!w->taken[index] && !strcmp(w->paths[index], io->path))
			break;
	if (index == w->ndevs) {
		char **p = realloc(w->paths, (w->ndevs + 1) * sizeof(*p));
		bool *t;
		if (p)
			w->paths = p;
		t = p ? realloc(w->taken, (w->ndevs + 1) * sizeof(*t)) : NULL;
		if (!t)
			goto nomem;
		w->taken = t;
		w->paths[w->ndevs] = strdup(io->path);
		if (!w->paths[w->ndevs])
			goto nomem;
		w->taken[w->ndevs++] = false;
	}
	w->taken[index] = true;
	wlog_append(w, WLOG_DEVICE, index, io_size(lower), path, plen);
	d->w = w;
	d->lower = lower;
	d->index = index;
	w->refs++;
	io->ops = &wlog_io_ops;
	io->writable = lower->writable;
	io->priv = d;
	*wrapped = io;
	return 0;
nomem:
	if (io)
		free(io->path);
	free(io);
	free(d);
	return -ENOMEM;
}
