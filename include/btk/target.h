/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* May this path be written? The one check every btk writer (and, reduced
 * to the mount test, every reader) runs on a device or file before its first
 * byte: it refuses a mounted or held device, a file behind a mounted loop
 * device, a member of the filesystem being read, a target holding a
 * signature libblkid knows (unless forced) and a device smaller than its
 * dev item says. It opens the target read-only and never writes. */
#ifndef BTK_TARGET_H
#define BTK_TARGET_H

#include <stddef.h>
#include <stdint.h>

enum target_flags {
	/* the target is only read: refuse a mounted device, not a claimed one */
	TARGET_READ_ONLY = 1u << 0,
	/* the target receives new content (an image dump or restore): also refuse
	 * a member of the filesystem being read, one of the inputs, and a target
	 * holding a filesystem or another known signature */
	TARGET_NEW_CONTENT = 1u << 1,
	/* with TARGET_NEW_CONTENT: a known signature is no reason to refuse */
	TARGET_FORCE = 1u << 2,
	/* a path that does not exist is fine: the writer creates a regular file */
	TARGET_MAY_CREATE = 1u << 3,
};

struct target_spec {
	unsigned flags;
	/* the filesystem being read: its member paths (NULL entries skipped)
	 * and fsid (NULL: none); a target with a btrfs superblock of this fsid
	 * is a member even when it was not opened */
	const char *const *members;
	unsigned nmembers;
	const uint8_t *fsid;
	/* other files this run reads or writes (an image being restored, the
	 * other outputs), which the target must not be */
	const char *const *others;
	unsigned nothers;
};

/* 0 when path may be written, else -errno with the reason in msg:
 * -EBUSY mounted or in use, -EINVAL a member or one of the others,
 * -EEXIST a known signature, or the error of looking at it. */
int target_check(const char *path, const struct target_spec *spec, char *msg, size_t len);
/* The same for an open descriptor (a redirected stdout) named name. */
int target_check_fd(int fd, const char *name, const struct target_spec *spec, char *msg, size_t len);
/* A device holding fewer bytes (have) than its dev item says (need): the
 * kernel does not mount it and a write would go past its end. 0 or
 * -ENOSPC with the reason in msg. */
int target_check_size(const char *path, uint64_t have, uint64_t need, char *msg, size_t len);

#endif
