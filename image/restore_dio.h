/* SPDX-License-Identifier: GPL-2.0-only */
/* Restore's direct writes (restore_dio.c): O_DIRECT runs through Linux AIO,
 * many in flight, onto the outputs that accept it. */
#ifndef BTK_IMAGE_RESTORE_DIO_H
#define BTK_IMAGE_RESTORE_DIO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

struct restore_dio;

/* *d is NULL (and 0 returned) when no output takes direct writes or
 * BTK_RESTORE_DIO=0; stage_len bytes of aligned staging hold one batch. */
int dio_open(struct restore_dio **d, char **paths, unsigned n, size_t stage_len);
bool dio_usable(const struct restore_dio *d, unsigned out);
/* An aligned copy of src in the staging, or NULL when it is full. */
uint8_t *dio_stage(struct restore_dio *d, const void *src, size_t len);
/* Start writing the run iov (staged bytes): 1, 0 when the caller must write
 * it itself (output or alignment), or a negative errno. */
int dio_writev(struct restore_dio *d, unsigned out, uint64_t phys, const struct iovec *iov, int cnt);
/* Wait for every write started: the first error, or 0. */
int dio_wait(struct restore_dio *d);
/* Empty the staging (no write in flight). */
void dio_stage_reset(struct restore_dio *d);
void dio_free(struct restore_dio *d);

#endif
