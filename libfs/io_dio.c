// SPDX-License-Identifier: LGPL-2.1-or-later
/* Direct writes of the batched io backend: the blocks of a batch are copied once into an
 * aligned staging buffer (the copies of a DUP block share one) and each
 * sorted run is written with O_DIRECT through Linux AIO, up to DIO_DEPTH
 * writes in flight from one thread. The page cache's copies and ext4's
 * delayed-allocation bookkeeping were half of btk-image restore's CPU time,
 * and under memory pressure much more. Outputs that refuse O_DIRECT (tmpfs,
 * or no alignment reported) and runs that are not aligned as the output
 * needs are left to the caller's buffered writes. */
#include <errno.h>
#include <fcntl.h>
#include <linux/aio_abi.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "libfs/io_dio.h"

#define DIO_DEPTH 64
#define DIO_ALIGN_MAX 4096u   /* the staging's alignment: stricter outputs are written buffered */

struct dio_out {
	int fd;                 /* O_DIRECT, or -1 */
	uint32_t off_align, mem_align;
};

struct io_dio {
	struct dio_out *outs;
	unsigned nouts;
	aio_context_t ctx;
	struct iocb cbs[DIO_DEPTH];
	uint64_t want[DIO_DEPTH];   /* bytes each write in flight must write */
	unsigned freel[DIO_DEPTH], nfree;
	uint8_t *stage;
	size_t stage_len, stage_used;
	int err;                    /* the first failed write */
};

static long sys_io_setup(unsigned n, aio_context_t *ctx) { return syscall(SYS_io_setup, n, ctx); }
static long sys_io_destroy(aio_context_t ctx) { return syscall(SYS_io_destroy, ctx); }
static long sys_io_submit(aio_context_t ctx, long n, struct iocb **v) { return syscall(SYS_io_submit, ctx, n, v); }
static long sys_io_getevents(aio_context_t ctx, long min, long max, struct io_event *ev)
{
	return syscall(SYS_io_getevents, ctx, min, max, ev, NULL);
}

/* The output's O_DIRECT descriptor and alignment; fd -1 when the file system
 * reports no direct-I/O alignment (tmpfs) or one the staging cannot meet. */
static void open_out(struct dio_out *o, const char *path)
{
	struct statx sx;

	o->fd = -1;
	if (statx(AT_FDCWD, path, 0, STATX_DIOALIGN, &sx) || !(sx.stx_mask & STATX_DIOALIGN) ||
	    !sx.stx_dio_offset_align || !sx.stx_dio_mem_align || sx.stx_dio_offset_align > DIO_ALIGN_MAX ||
	    sx.stx_dio_mem_align > DIO_ALIGN_MAX)
		return;
	o->fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
	o->off_align = sx.stx_dio_offset_align;
	o->mem_align = sx.stx_dio_mem_align;
}

int dio_open(struct io_dio **out, const char *const *paths, unsigned n, size_t stage_len)
{
	struct io_dio *d;
	unsigned usable = 0;

	*out = NULL;
	d = calloc(1, sizeof(*d));
	if (!d || !(d->outs = calloc(n, sizeof(*d->outs)))) {
		free(d);
		return -ENOMEM;
	}
	for (; d->nouts < n; d->nouts++) {
		open_out(&d->outs[d->nouts], paths[d->nouts]);
		usable += d->outs[d->nouts].fd >= 0;
	}
	if (!usable || sys_io_setup(DIO_DEPTH, &d->ctx) < 0) {
		d->ctx = 0;
		dio_free(d);
		return 0; /* buffered writes only */
	}
	if (posix_memalign((void **)&d->stage, DIO_ALIGN_MAX, stage_len)) {
		d->stage = NULL;
		dio_free(d);
		return -ENOMEM;
	}
	d->stage_len = stage_len;
	for (unsigned i = 0; i < DIO_DEPTH; i++)
		d->freel[d->nfree++] = i;
	*out = d;
	return 0;
}

/* Reap at least min completions; the first error is kept. */
static int reap(struct io_dio *d, unsigned min)
{
	struct io_event ev[DIO_DEPTH];

	while (min) {
		long got = sys_io_getevents(d->ctx, min, DIO_DEPTH, ev);
		if (got < 0) {
			if (errno == EINTR)
				continue;
			return d->err ? d->err : (d->err = -errno);
		}
		for (long i = 0; i < got; i++) {
			int64_t res = (int64_t)ev[i].res;
			if (res < 0 && !d->err)
				d->err = (int)res;
			else if ((uint64_t)res != d->want[ev[i].data] && !d->err)
				d->err = -ENOSPC; /* a short direct write: the file system is full */
			d->freel[d->nfree++] = (unsigned)ev[i].data;
		}
		min = (unsigned)got >= min ? 0 : min - (unsigned)got;
	}
	return d->err;
}

bool dio_usable(const struct io_dio *d, unsigned out)
{
	return d && out < d->nouts && d->outs[out].fd >= 0;
}

uint8_t *dio_stage(struct io_dio *d, const void *src, size_t len)
{
	uint8_t *p;

	if (len > d->stage_len - d->stage_used)
		return NULL;
	p = d->stage + d->stage_used;
	memcpy(p, src, len);
	d->stage_used += (len + DIO_ALIGN_MAX - 1) & ~(size_t)(DIO_ALIGN_MAX - 1);
	if (d->stage_used > d->stage_len)
		d->stage_used = d->stage_len;
	return p;
}

void dio_stage_reset(struct io_dio *d)
{
	d->stage_used = 0;
}

int dio_writev(struct io_dio *d, unsigned out, uint64_t phys, const struct iovec *iov, int cnt)
{
	struct dio_out *o = &d->outs[out];
	uint64_t len = 0, bad = phys & (o->off_align - 1);
	struct iocb *cb, *v[1];
	unsigned k;
	int ret;

	if (d->err)
		return d->err;
	if (o->fd < 0)
		return 0;
	for (int i = 0; i < cnt; i++) {
		len += iov[i].iov_len;
		bad |= ((uintptr_t)iov[i].iov_base | iov[i].iov_len) & (o->mem_align - 1);
	}
	if (bad || (len & (o->off_align - 1)))
		return 0;
	if (!d->nfree && (ret = reap(d, 1)))
		return ret;
	k = d->freel[--d->nfree];
	cb = &d->cbs[k];
	memset(cb, 0, sizeof(*cb));
	cb->aio_data = k;
	cb->aio_lio_opcode = IOCB_CMD_PWRITEV; /* the kernel copies the vector at submission */
	cb->aio_fildes = (uint32_t)o->fd;
	cb->aio_buf = (uint64_t)(uintptr_t)iov;
	cb->aio_nbytes = (uint64_t)cnt;
	cb->aio_offset = (int64_t)phys;
	d->want[k] = len;
	v[0] = cb;
	while (sys_io_submit(d->ctx, 1, v) != 1) {
		if (errno == EINTR || errno == EAGAIN)
			continue;
		d->freel[d->nfree++] = k;
		if (errno == EINVAL && d->nfree == DIO_DEPTH) {
			/* refused before anything went out this way: write buffered from now on */
			close(o->fd);
			o->fd = -1;
			return 0;
		}
		return d->err = -errno;
	}
	return 1;
}

int dio_wait(struct io_dio *d)
{
	return reap(d, DIO_DEPTH - d->nfree);
}

void dio_free(struct io_dio *d)
{
	if (!d)
		return;
	if (d->ctx) {
		reap(d, DIO_DEPTH - d->nfree);
		sys_io_destroy(d->ctx);
	}
	for (unsigned i = 0; i < d->nouts; i++)
		if (d->outs[i].fd >= 0)
			close(d->outs[i].fd);
	free(d->outs);
	free(d->stage);
	free(d);
}
