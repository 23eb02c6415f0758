// SPDX-License-Identifier: LGPL-2.1-or-later
/* Mount detection by device number: a mounted btrfs lists its member block
 * devices under /sys/fs/btrfs/<fsid>/devices/, other filesystems show their
 * device in /proc/self/mountinfo, a device-mapper or md device holding a
 * block device shows under its holders/, and a loop device names the file
 * behind it by device and inode number (LOOP_GET_STATUS64). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <limits.h>
#include <linux/loop.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "libfs/mounted.h"

int block_device_name(dev_t rdev, char *name, size_t len)
{
	char link[64], target[PATH_MAX];
	ssize_t n;
	const char *base;

	snprintf(link, sizeof(link), "/sys/dev/block/%u:%u", major(rdev), minor(rdev));
	n = readlink(link, target, sizeof(target) - 1);
	if (n < 0)
		return -errno;
	target[n] = 0;
	base = strrchr(target, '/');
	base = base ? base + 1 : target;
	if (strlen(base) >= len)
		return -ENAMETOOLONG;
	memcpy(name, base, strlen(base) + 1);
	return 0;
}

/* Is the block device with this kernel name a member of a mounted btrfs? */
static bool btrfs_member_mounted(const char *name)
{
	char pattern[PATH_MAX];
	glob_t g;
	bool found;

	snprintf(pattern, sizeof(pattern), "/sys/fs/btrfs/*/devices/%s", name);
	if (glob(pattern, 0, NULL, &g) != 0)
		return false;
	found = g.gl_pathc > 0;
	globfree(&g);
	return found;
}

/* Is rdev the device of a mount in /proc/self/mountinfo? where gets the mount point. */
static bool mountinfo_has(dev_t rdev, char *where, size_t wherelen)
{
	FILE *f = fopen("/proc/self/mountinfo", "r");
	char line[4096];
	bool found = false;

	if (!f)
		return false;
	while (!found && fgets(line, sizeof(line), f)) {
		unsigned maj, min;
		char mnt[PATH_MAX];
		if (sscanf(line, "%*u %*u %u:%u %*s %4095s", &maj, &min, mnt) == 3 && maj == major(rdev) &&
		    min == minor(rdev)) {
			snprintf(where, wherelen, "%s", mnt);
			found = true;
		}
	}
	fclose(f);
	return found;
}

/* The device number in a sysfs "dev" file (MAJ:MIN). */
static int sysfs_read_dev(const char *path, dev_t *out)
{
	FILE *f = fopen(path, "r");
	unsigned maj, min;
	int n;

	if (!f)
		return -errno;
	n = fscanf(f, "%u:%u", &maj, &min);
	fclose(f);
	if (n != 2)
		return -EINVAL;
	*out = makedev(maj, min);
	return 0;
}

/* One block device (not its partitions): mounted, or held by another device. */
static int one_block_in_use(dev_t rdev, const char *name, char *where, size_t wherelen)
{
	char path[PATH_MAX], mnt[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int ret = 0;

	if (btrfs_member_mounted(name)) {
		snprintf(where, wherelen, "/dev/%s is part of a mounted btrfs", name);
		return 1;
	}
	if (mountinfo_has(rdev, mnt, sizeof(mnt))) {
		snprintf(where, wherelen, "/dev/%s is mounted on %s", name, mnt);
		return 1;
	}
	snprintf(path, sizeof(path), "/sys/class/block/%s/holders", name);
	if ((d = opendir(path)) == NULL)
		return 0;
	while (!ret && (de = readdir(d)))
		if (de->d_name[0] != '.') {
			snprintf(where, wherelen, "/dev/%s is held by %s", name, de->d_name);
			ret = 1;
		}
	closedir(d);
	return ret;
}

int block_device_in_use(dev_t rdev, char *where, size_t wherelen)
{
	char name[NAME_MAX + 1], path[PATH_MAX];
	struct dirent *de;
	DIR *d;
	int ret;

	if (block_device_name(rdev, name, sizeof(name)) != 0)
		return 0;
	if ((ret = one_block_in_use(rdev, name, where, wherelen)))
		return ret;
	/* a whole disk is in use when one of its partitions is */
	snprintf(path, sizeof(path), "/sys/class/block/%s", name);
	if ((d = opendir(path)) == NULL)
		return 0;
	while (!ret && (de = readdir(d))) {
		char part[PATH_MAX + NAME_MAX + 16];
		dev_t prdev;
		if (de->d_name[0] == '.' || strncmp(de->d_name, name, strlen(name)) != 0)
			continue;
		snprintf(part, sizeof(part), "%s/%s/partition", path, de->d_name);
		if (access(part, F_OK) != 0)
			continue;
		snprintf(part, sizeof(part), "%s/%s/dev", path, de->d_name);
		if (sysfs_read_dev(part, &prdev) == 0)
			ret = one_block_in_use(prdev, de->d_name, where, wherelen);
	}
	closedir(d);
	return ret;
}

/* The device number of a loop device's backing file, from the kernel's
 * encoding in loop_info64 (new_encode_dev). */
static dev_t loop_decode_dev(uint64_t v)
{
	return makedev((unsigned)((v & 0xfff00) >> 8), (unsigned)((v & 0xff) | ((v >> 12) & 0xfff00)));
}

int loop_backing_identity(const char *loopname, dev_t *dev, ino_t *ino)
{
	char path[PATH_MAX];
	/* zeroed: valgrind does not know LOOP_GET_STATUS64 fills it */
	struct loop_info64 li = { 0 };
	int fd, ret = 0;

	snprintf(path, sizeof(path), "/dev/%s", loopname);
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0)
		return -errno;
	if (ioctl(fd, LOOP_GET_STATUS64, &li) < 0) {
		ret = -errno;   /* ENXIO: not attached */
	} else {
		*dev = loop_decode_dev(li.lo_device);
		*ino = (ino_t)li.lo_inode;
	}
	close(fd);
	return ret;
}

int file_loop_devices(dev_t dev, ino_t ino, dev_t *loops, unsigned max)
{
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	unsigned n = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[PATH_MAX];
		dev_t bdev, rdev;
		ino_t bino;
		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		if (access(path, F_OK) != 0)
			continue;   /* not attached */
		if (loop_backing_identity(de->d_name, &bdev, &bino) != 0 || bdev != dev || bino != ino)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/dev", de->d_name);
		if (sysfs_read_dev(path, &rdev) == 0 && n < max)
			loops[n++] = rdev;
	}
	closedir(d);
	return (int)n;
}

int device_is_mounted(const char *path, char *where, size_t wherelen)
{
	dev_t loops[16];
	struct stat st;
	int n;

	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode))
		return block_device_in_use(st.st_rdev, where, wherelen);
	if (!S_ISREG(st.st_mode))
		return 0;
	n = file_loop_devices(st.st_dev, st.st_ino, loops, 16);
	for (int i = 0; i < n; i++) {
		int ret = block_device_in_use(loops[i], where, wherelen);
		if (ret)
			return ret;
	}
	return 0;
}
