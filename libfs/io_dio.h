/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Direct writes under the batched io backend (io_batch.c): O_DIRECT runs
 * through Linux AIO, many in flight, onto the outputs that accept it. */
#ifndef BTK_IO_DIO_H
#define BTK_IO_DIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct io_dio;

/* *d is NULL (and 0 returned) when no output takes direct writes;
 * stage_len bytes of aligned staging hold one batch. */
int dio_open(struct io_dio **d, const char *const *paths, unsigned n, size_t stage_len);
bool dio_usable(const struct io_dio *d, unsigned out);
/* An aligned copy of src in the staging, or NULL when it is full. */
uint8_t *dio_stage(struct io_dio *d, const void *src, size_t len);
/* Start writing the run iov (staged bytes): 1, 0 when the caller must write
 * it itself (output or alignment), or a negative errno. */
int dio_writev(struct io_dio *d, unsigned out, uint64_t phys, const struct iovec *iov, int cnt);
/* Wait for every write started: the first error, or 0. */
int dio_wait(struct io_dio *d);
/* Empty the staging (no write in flight). */
void dio_stage_reset(struct io_dio *d);
void dio_free(struct io_dio *d);

#endif
