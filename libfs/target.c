// SPDX-License-Identifier: LGPL-2.1-or-later
/* The target check of every btk writer (btk/target.h). Identities are
 * compared by device and inode number, never by name: a loop device and the
 * file behind it are the same target, and so are two paths of one file. */
#include <blkid/blkid.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <btk/endian_access.h>
#include <btk/format.h>
#include "libfs/mounted.h"
#include <btk/target.h>

#define MAX_IDENTS 18

/* A block device (dev = rdev) or a regular file (dev, ino). */
struct ident {
	bool blk;
	dev_t dev;
	ino_t ino;
};

static int check_fd(int fd, const char *name, const struct target_spec *spec, char *msg, size_t len);
static int collect_idents(const struct stat *st, struct ident *out);
static int check_in_use(int fd, const struct stat *st, const struct target_spec *spec, const char *name,
			char *msg, size_t len);
static int check_member(int fd, const struct stat *st, const struct target_spec *spec, const char *name,
			char *msg, size_t len);
static int check_signature(int fd, const struct stat *st, const char *name, char *msg, size_t len);

int target_check_fd(int fd, const char *name, const struct target_spec *spec, char *msg, size_t len)
{
	int flags = fcntl(fd, F_GETFL);

	/* a write-only descriptor (a redirected stdout) cannot be probed: reopen it for reading */
	if (flags >= 0 && (flags & O_ACCMODE) == O_WRONLY) {
		char node[64];
		int rfd, ret;
		snprintf(node, sizeof(node), "/proc/self/fd/%d", fd);
		if ((rfd = open(node, O_RDONLY | O_CLOEXEC | O_NONBLOCK)) >= 0) {
			ret = check_fd(rfd, name, spec, msg, len);
			close(rfd);
			return ret;
		}
	}
	return check_fd(fd, name, spec, msg, len);
}

/* target_check_fd() on a readable descriptor. */
static int check_fd(int fd, const char *name, const struct target_spec *spec, char *msg, size_t len)
{
	struct stat st;
	int ret;

	if (fstat(fd, &st) < 0) {
		ret = -errno;
		snprintf(msg, len, "cannot look at %s: %s", name, strerror(-ret));
		return ret;
	}
	if (!S_ISBLK(st.st_mode) && !S_ISREG(st.st_mode))
		return 0;   /* a pipe, a terminal, /dev/null: nothing to overwrite */
	/* a member first: this run holds its members open exclusively itself */
	if ((spec->flags & TARGET_NEW_CONTENT) && (ret = check_member(fd, &st, spec, name, msg, len)))
		return ret;
	if ((ret = check_in_use(fd, &st, spec, name, msg, len)))
		return ret;
	if (!(spec->flags & TARGET_NEW_CONTENT))
		return 0;
	if (!(spec->flags & TARGET_FORCE))
		return check_signature(fd, &st, name, msg, len);
	return 0;
}

int target_check(const char *path, const struct target_spec *spec, char *msg, size_t len)
{
	int fd, ret;

	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		ret = -errno;
		if (ret == -ENOENT && (spec->flags & TARGET_MAY_CREATE))
			return 0;
		snprintf(msg, len, "cannot open %s: %s", path, strerror(-ret));
		return ret;
	}
	ret = target_check_fd(fd, path, spec, msg, len);
	close(fd);
	return ret;
}

int target_check_size(const char *path, uint64_t have, uint64_t need, char *msg, size_t len)
{
	if (have >= need)
		return 0;
	snprintf(msg, len,
		 "%s holds %llu bytes, but its device item says %llu: it was truncated (or is the wrong "
		 "device); writing would go past its end and the kernel would not mount it",
		 path, (unsigned long long)have, (unsigned long long)need);
	return -ENOSPC;
}

/* Mounted, part of a mounted btrfs, held by another device, or (for a writer)
 * opened exclusively by another program: the device or any loop device
 * in front of the file. */
static int check_in_use(int fd, const struct stat *st, const struct target_spec *spec, const char *name,
			char *msg, size_t len)
{
	struct ident ids[MAX_IDENTS];
	char where[512];
	int n = collect_idents(st, ids);

	for (int i = 0; i < n; i++) {
		char node[64];
		int efd;
		if (!ids[i].blk)
			continue;
		if (block_device_in_use(ids[i].dev, where, sizeof(where))) {
			snprintf(msg, len, "%s is in use: %s; unmount it first", name, where);
			return -EBUSY;
		}
		if (spec->flags & TARGET_READ_ONLY)
			continue;
		/* O_EXCL on a block device fails while anyone has claimed it */
		if (i == 0 && S_ISBLK(st->st_mode))
			snprintf(node, sizeof(node), "/proc/self/fd/%d", fd);
		else if (block_device_name(ids[i].dev, where, sizeof(where)) == 0)
			snprintf(node, sizeof(node), "/dev/%.50s", where);
		else
			continue;
		efd = open(node, O_RDONLY | O_EXCL | O_CLOEXEC | O_NONBLOCK);
		if (efd < 0 && errno == EBUSY) {
			snprintf(msg, len, "%s is in use (%s is opened exclusively: mounted or claimed)", name,
				 i == 0 && S_ISBLK(st->st_mode) ? name : node);
			return -EBUSY;
		}
		if (efd >= 0)
			close(efd);
	}
	return 0;
}

static bool ident_overlap(const struct ident *a, int na, const struct ident *b, int nb)
{
	for (int i = 0; i < na; i++)
		for (int j = 0; j < nb; j++)
			if (a[i].blk == b[j].blk && a[i].dev == b[j].dev && (a[i].blk || a[i].ino == b[j].ino))
				return true;
	return false;
}

/* Whether path is the same device or file as the target (idents). */
static bool same_target(const char *path, const struct ident *ids, int n)
{
	struct ident other[MAX_IDENTS];
	struct stat st;

	if (!path || stat(path, &st) < 0)
		return false;
	return ident_overlap(ids, n, other, collect_idents(&st, other));
}

/* A btrfs superblock copy of fsid at one of the copies' places. */
static bool holds_fsid(int fd, const uint8_t *fsid)
{
	uint8_t sb[BTRFS_SUPER_INFO_SIZE];

	for (int m = 0; m < BTRFS_SUPER_MIRROR_MAX; m++) {
		if (pread(fd, sb, sizeof(sb), (off_t)btrfs_super_offset(m)) != (ssize_t)sizeof(sb))
			break;
		if (get_le64(sb + offsetof(struct btrfs_super_block, magic)) == BTRFS_MAGIC &&
		    memcmp(sb + offsetof(struct btrfs_super_block, fsid), fsid, BTRFS_FSID_SIZE) == 0)
			return true;
	}
	return false;
}

/* A member of the filesystem being read, or one of the other files. */
static int check_member(int fd, const struct stat *st, const struct target_spec *spec, const char *name,
			char *msg, size_t len)
{
	struct ident ids[MAX_IDENTS];
	int n = collect_idents(st, ids);

	for (unsigned i = 0; i < spec->nmembers; i++)
		if (same_target(spec->members[i], ids, n)) {
			if (strcmp(name, spec->members[i]))
				snprintf(msg, len, "%s is %s (the same storage), a device of the filesystem being read",
					 name, spec->members[i]);
			else
				snprintf(msg, len, "%s is a device of the filesystem being read", name);
			return -EINVAL;
		}
	for (unsigned i = 0; i < spec->nothers; i++)
		if (same_target(spec->others[i], ids, n)) {
			if (strcmp(name, spec->others[i]))
				snprintf(msg, len, "%s is %s (the same storage), which this command reads or writes "
					 "already", name, spec->others[i]);
			else
				snprintf(msg, len, "%s is read or written already by this command", name);
			return -EINVAL;
		}
	if (spec->fsid && holds_fsid(fd, spec->fsid)) {
		snprintf(msg, len, "%s is a device of the filesystem being read (it holds its fsid)", name);
		return -EINVAL;
	}
	return 0;
}

/* A filesystem, partition table or other signature libblkid recognises. */
static int check_signature(int fd, const struct stat *st, const char *name, char *msg, size_t len)
{
	blkid_probe pr;
	const char *type = NULL, *what = "a filesystem";
	char found[64] = "";
	int rc;

	if (S_ISREG(st->st_mode) && st->st_size == 0)
		return 0;
	pr = blkid_new_probe();
	if (!pr)
		return 0;
	if (blkid_probe_set_device(pr, fd, 0, 0) == 0) {
		blkid_probe_enable_superblocks(pr, 1);
		blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE);
		blkid_probe_enable_partitions(pr, 1);
		blkid_probe_set_partitions_flags(pr, BLKID_PARTS_MAGIC);
		rc = blkid_do_safeprobe(pr);
		if (rc == 0) {
			if (blkid_probe_lookup_value(pr, "TYPE", &type, NULL) != 0 || !type) {
				what = "a partition table";
				if (blkid_probe_lookup_value(pr, "PTTYPE", &type, NULL) != 0)
					type = NULL;
			}
			snprintf(found, sizeof(found), "%s", type ? type : "unknown");
		} else if (rc == -2) {
			snprintf(found, sizeof(found), "several");
			what = "signatures";
		}
	}
	blkid_free_probe(pr);
	if (!found[0])
		return 0;
	snprintf(msg, len, "%s holds %s (%s)", name, what, found);
	return -EEXIST;
}

/* The target itself, and what is the same storage: the file behind a loop
 * device (and the other loop devices in front of it), the loop devices in
 * front of a file. Returns the count (at most MAX_IDENTS). */
static int collect_idents(const struct stat *st, struct ident *out)
{
	dev_t loops[MAX_IDENTS - 1];
	char name[64];
	int n = 1;

	if (S_ISBLK(st->st_mode)) {
		out[0] = (struct ident){ true, st->st_rdev, 0 };
		if (block_device_name(st->st_rdev, name, sizeof(name)) == 0 && !strncmp(name, "loop", 4)) {
			dev_t dev;
			ino_t ino;
			if (loop_backing_identity(name, &dev, &ino) == 0) {
				/* and the other loop devices in front of the same file */
				int k = file_loop_devices(dev, ino, loops, MAX_IDENTS - 2);
				out[n++] = (struct ident){ false, dev, ino };
				for (int i = 0; i < k; i++)
					if (loops[i] != st->st_rdev)
						out[n++] = (struct ident){ true, loops[i], 0 };
			}
		}
		return n;
	}
	out[0] = (struct ident){ false, st->st_dev, st->st_ino };
	if (S_ISREG(st->st_mode)) {
		int k = file_loop_devices(st->st_dev, st->st_ino, loops, MAX_IDENTS - 1);
		for (int i = 0; i < k; i++)
			out[n++] = (struct ident){ true, loops[i], 0 };
	}
	return n;
}
