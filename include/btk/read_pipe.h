/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* A read pipeline: the caller queues slots of reads (one segment per device
 * copy, say) in the order it will consume them, and worker threads read them
 * ahead, uncached (O_DIRECT), while the caller checks the slots already read.
 * Slots come back in submission order. Memory is bounded: nslots slots of
 * nsegs buffers of seg_max bytes each. Without threads (or when a device
 * cannot read uncached) the reads happen on the caller's thread, through the
 * page cache, with a read-ahead hint at submission. */
#ifndef BTK_READ_PIPE_H
#define BTK_READ_PIPE_H

#include <stddef.h>
#include <stdint.h>

#include <btk/io.h>

#define READ_PIPE_MAX_SEGS 8

struct read_seg {
	struct io_dev *io;  /* NULL: this segment is not read */
	uint64_t offset;
	size_t len;         /* at most seg_max */
	uint8_t *buf;       /* owned by the pipe: seg_max bytes, IO_DIRECT_ALIGN-aligned */
	int ret;            /* after read_pipe_next: 0 or -errno */
};

struct read_slot {
	unsigned index;     /* 0..nslots-1, for the caller's own per-slot data */
	struct read_seg seg[READ_PIPE_MAX_SEGS];
};

struct read_pipe;

/* 0 or -errno; nthreads 0 reads on the caller's thread. */
int read_pipe_create(unsigned nslots, unsigned nsegs, size_t seg_max, unsigned nthreads, struct read_pipe **out);
/* Stop the workers (reads in flight finish first) and free everything. */
void read_pipe_destroy(struct read_pipe *p);
/* The slot to fill next (segments cleared), or NULL while every slot is
 * queued or not yet released: consume one with read_pipe_next first. */
struct read_slot *read_pipe_fill(struct read_pipe *p);
/* Queue the slot read_pipe_fill returned. */
void read_pipe_submit(struct read_pipe *p);
/* The oldest queued slot once its segments are read (a segment whose
 * uncached read failed is retried through the cache here), or NULL when
 * nothing is queued. Release it with read_pipe_release. */
struct read_slot *read_pipe_next(struct read_pipe *p);
void read_pipe_release(struct read_pipe *p);

#endif
