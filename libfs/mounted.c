/* Mount detection through sysfs: a mounted btrfs lists its member block
 * devices under /sys/fs/btrfs/<fsid>/devices/, and a loop device names its
 * backing file in /sys/block/loopN/loop/backing_file. */
#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "libfs/mounted.h"

/* Kernel name (e.g. "loop0", "sda1") of a block device node. */
static int block_device_name(dev_t rdev, char *name, size_t len)
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
static int btrfs_member_mounted(const char *name)
{
	char pattern[PATH_MAX];
	glob_t g;
	int found;

	snprintf(pattern, sizeof(pattern), "/sys/fs/btrfs/*/devices/%s", name);
	if (glob(pattern, 0, NULL, &g) != 0)
		return 0;
	found = g.gl_pathc > 0;
	globfree(&g);
	return found;
}

/* Look through loop devices for one backed by `file` that is mounted. */
static int loop_backing_mounted(const char *file, char *where, size_t wherelen)
{
	DIR *d = opendir("/sys/block");
	struct dirent *de;
	int ret = 0;

	if (!d)
		return 0;
	while ((de = readdir(d))) {
		char path[PATH_MAX], backing[PATH_MAX];
		FILE *f;

		if (strncmp(de->d_name, "loop", 4) != 0)
			continue;
		snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
		f = fopen(path, "r");
		if (!f)
			continue;
		if (fgets(backing, sizeof(backing), f)) {
			backing[strcspn(backing, "\n")] = 0;
			if (strcmp(backing, file) == 0 && btrfs_member_mounted(de->d_name)) {
				snprintf(where, wherelen, "/dev/%s", de->d_name);
				ret = 1;
			}
		}
		fclose(f);
		if (ret)
			break;
	}
	closedir(d);
	return ret;
}

int device_is_mounted(const char *path, char *where, size_t wherelen)
{
	struct stat st;
	char real[PATH_MAX], name[64];

	if (stat(path, &st) < 0)
		return -errno;
	if (S_ISBLK(st.st_mode)) {
		if (block_device_name(st.st_rdev, name, sizeof(name)) == 0 && btrfs_member_mounted(name)) {
			snprintf(where, wherelen, "/dev/%s", name);
			return 1;
		}
		return 0;
	}
	if (!realpath(path, real))
		return -errno;
	return loop_backing_mounted(real, where, wherelen);
}
