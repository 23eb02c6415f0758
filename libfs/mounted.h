/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Is a device (or an image file behind a loop device) mounted or held? The
 * primitives of btk/target.h's check. */
#ifndef BTK_MOUNTED_H
#define BTK_MOUNTED_H

#include <stddef.h>
#include <sys/types.h>

/* Kernel name ("loop0", "sda1") of a block device number: 0 or -errno. */
int block_device_name(dev_t rdev, char *name, size_t len);
/* 1 if the block device (or a partition of it) is mounted, part of a
 * mounted btrfs or held by another device (where says which, as a phrase
 * like "/dev/loop3 is mounted on /mnt"), 0 if not. */
int block_device_in_use(dev_t rdev, char *where, size_t wherelen);
/* The same for a path: a block device, or a regular file behind a loop
 * device that is in use. 1, 0, or -errno when path cannot be looked at. */
int device_is_mounted(const char *path, char *where, size_t wherelen);
/* The loop devices (device numbers, at most max) whose backing file is
 * the file (dev, ino): their count. */
int file_loop_devices(dev_t dev, ino_t ino, dev_t *loops, unsigned max);
/* The backing file of loop device loopname ("loop3"): 0 or -errno (-ENXIO:
 * not attached). */
int loop_backing_identity(const char *loopname, dev_t *dev, ino_t *ino);

#endif
