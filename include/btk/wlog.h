/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Write logs, for crash tests: an io backend that passes every write and
 * flush through to the device below and appends it to a log file, and the
 * replay that rebuilds what a disk could hold after a crash at any point of
 * the log. The file format is described in doc/write-log-format.md.
 *
 * One log serves all devices of a filesystem: devices are numbered in the
 * order they are added. A log that already exists is appended to as a new
 * session (a tool that opens a filesystem twice); a device whose path a
 * previous session of the log already named gets that device's number again,
 * so replay takes one target per distinct device.
 *
 * Not thread-safe: one thread writes through the logger at a time. */
#ifndef BTK_WLOG_H
#define BTK_WLOG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <btk/io.h>

struct wlog_writer;
struct wlog_reader;

/* Open (create, or append a session to) the log at path. */
int wlog_create(const char *path, struct wlog_writer **out);
/* Stack the logger over a device; *wrapped owns lower and keeps the log
 * alive until it is closed. A write is logged once the device accepted it;
 * a flush, once the device flushed (a barrier: everything logged before it
 * on that device is durable). */
int wlog_add_device(struct wlog_writer *w, struct io_dev *lower, struct io_dev **wrapped);
/* Drop the creator's reference; the session's end marker is written when
 * the last wrapped device is closed too. */
void wlog_close(struct wlog_writer *w);
/* The first error writing the log (0 if none). Logging errors do not fail
 * the device writes (the log is a test aid); check this instead. */
int wlog_error(const struct wlog_writer *w);

/* Read a whole log and check every entry: -EUCLEAN if anything is damaged
 * or cut off mid-entry, -errno on other errors. */
int wlog_open(const char *path, struct wlog_reader **out);
void wlog_reader_free(struct wlog_reader *r);
/* Number of write operations in the log. */
uint64_t wlog_count(const struct wlog_reader *r);
/* Number of distinct devices the log writes to (targets replay needs). */
unsigned wlog_devices(const struct wlog_reader *r);
/* Did the last session end properly (device closed, end marker written)? */
bool wlog_complete(const struct wlog_reader *r);

/* A flush: after `writes` write operations, device `dev` was flushed. */
struct wlog_flush {
	uint64_t writes;
	unsigned dev;
};
/* The flushes in log order; returns how many, *out points into r. */
size_t wlog_flush_points(const struct wlog_reader *r, const struct wlog_flush **out);

/* Rebuild a crash after the first prefix_ops writes (flushes logged after
 * the prefix_ops-th write did not happen), onto targets[dev] for each device
 * number dev < ndevs (ndevs >= wlog_devices). reorder_seed 0: apply those
 * writes in order. Otherwise a disk that may persist any subset of what was
 * not flushed: every write followed by a flush of its device within the
 * prefix is applied, in order; of the others a subset chosen by the seed is
 * applied, in an order chosen by the seed. Each write is applied whole.
 * Flushes every target at the end. */
int wlog_replay(struct wlog_reader *r, struct io_dev **targets, unsigned ndevs, uint64_t prefix_ops,
		uint64_t reorder_seed);

#endif
