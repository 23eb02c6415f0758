/* Is a device (or an image file behind a loop device) part of a mounted btrfs? */
#ifndef BTK_MOUNTED_H
#define BTK_MOUNTED_H

#include <stddef.h>

/* 1 if mounted (where names the mount or the loop device), 0 if not, -errno. */
int device_is_mounted(const char *path, char *where, size_t wherelen);

#endif
