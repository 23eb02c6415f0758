/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Undo files: an io backend that saves the old bytes of every 4 KiB block
 * before its first overwrite, into one file shared by all devices of a
 * filesystem, and the code that validates such a file and writes the old
 * bytes back. The on-disk format is described in doc/undo-format.md.
 *
 * Recording: undo_create() makes the file, undo_add_device() stacks the
 * recorder over each member device. A write to the stacked device is held
 * back (reads see it) until the records saving the bytes it overwrites are
 * durable in the undo file: every flush of the device, a backlog of more
 * than UNDO_PENDING_LIMIT bytes, or closing the device first appends the
 * batch of new records and fdatasyncs the undo file once, then issues the
 * held writes in order. Writes that overwrite only already saved blocks go
 * straight through when nothing is held back. Writes of a btrfs superblock
 * also record its generation, fsid and checksum, so a file left unfinished
 * by a crash knows every generation the operation may have put on disk.
 * undo_finish() flushes every device, then seals the file with a trailer
 * carrying the generation after the operation and a checksum of the file.
 *
 * Applying (undo_apply): the whole file is validated first (any damage:
 * nothing is written), every device is matched by devid + device uuid from
 * its superblock, and the filesystem must still be in the state the
 * operation left:
 *   - finished file: the newest valid superblock of every device has the
 *     generation the trailer records;
 *   - unfinished file (crash, or a tool that failed): the generation is the
 *     one before the operation, or one the operation itself wrote (recorded
 *     before the write was issued). A torn last batch (written but never
 *     synced, so the writes it covered never happened) is ignored.
 * In both cases a superblock whose generation the operation wrote must be
 * byte-identical to what it wrote (same checksum). UNDO_FORCE skips these
 * generation checks, never the validation of the file.
 *
 * Not thread-safe: one thread writes through the recorder at a time. */
#ifndef BTK_UNDO_H
#define BTK_UNDO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <btk/io.h>

#define UNDO_BLOCK_SIZE 4096U
/* Bytes of held-back writes per device before they are pushed early. */
#define UNDO_PENDING_LIMIT (32U << 20)

struct undo_file;

/* Create the undo file at path (it must not exist: -EEXIST), for the
 * filesystem fsid whose generation is generation_before. The header is
 * synced, and the directory entry too. */
int undo_create(const char *path, const uint8_t fsid[16], uint64_t generation_before,
		struct undo_file **out);
/* Stack the recorder over a member device: *wrapped reads and writes lower,
 * saving old bytes first. The wrapped device owns lower (closing it closes
 * lower) and keeps the undo file alive until it is closed. Devices are
 * numbered in the order they are added. */
int undo_add_device(struct undo_file *u, uint64_t devid, const uint8_t uuid[16], struct io_dev *lower,
		    struct io_dev **wrapped);
/* Seal the file after a successful operation: flush every device still open,
 * then write the trailer with generation_after (0: the newest generation
 * found in the devices' superblocks now) and mark the header finished.
 * Writes through the devices fail with -EROFS afterwards. */
int undo_finish(struct undo_file *u, uint64_t generation_after);
/* Drop the creator's reference. Without undo_finish() the file stays
 * unfinished (still usable to roll back a failed or crashed operation); an
 * unfinished file that saved no bytes at all is removed. */
void undo_close(struct undo_file *u);
/* The first error of recording (0 if none): after one, every write through
 * the wrapped devices fails rather than go unrecorded. */
int undo_error(const struct undo_file *u);

/* What an undo file holds (undo_info). */
struct undo_device_info {
	uint64_t devid;
	uint8_t uuid[16];
	uint64_t size;        /* bytes, when it was added */
	uint64_t records;     /* saved ranges */
	uint64_t bytes;       /* saved bytes */
};

struct undo_summary {
	uint32_t version;
	uint8_t fsid[16];
	uint64_t generation_before;
	bool finished;
	uint64_t generation_after;    /* finished files only */
	uint64_t max_super_generation; /* highest generation of a superblock written; 0 if none */
	uint64_t created;             /* unix time */
	uint64_t batches;
	uint64_t records;             /* saved ranges, all devices */
	uint64_t bytes;               /* saved bytes, all devices */
	uint64_t super_writes;        /* superblock writes recorded */
	uint64_t torn_tail;           /* bytes of an unsynced last batch ignored (unfinished) */
	uint64_t file_size;
	unsigned ndevices;
	struct undo_device_info *devices;
};

/* Validate an undo file and describe it. On damage returns -EUCLEAN with the
 * reason in msg; -errno on other errors. Free with undo_summary_release(). */
int undo_info(const char *path, struct undo_summary *out, char *msg, size_t msglen);
void undo_summary_release(struct undo_summary *s);

#define UNDO_DRY_RUN (1U << 0) /* validate and check everything, write nothing */
#define UNDO_FORCE (1U << 1)   /* skip the generation / superblock checks */

/* Roll an operation back: validate the file, match devs (in any order, one
 * per device of the file), check the filesystem state (see above), write
 * the old bytes back in reverse order of recording and flush every device.
 * Errors: -EUCLEAN damaged file, -ENODEV a device missing, unknown or given
 * twice, -ESTALE the filesystem changed since the operation, -EIO / -errno.
 * msg gets the reason of a refusal, or a one-line summary on success. */
int undo_apply(const char *path, struct io_dev **devs, unsigned ndevs, unsigned flags, char *msg,
	       size_t msglen);

#endif
