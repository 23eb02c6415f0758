/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The read-only views programs get of struct fs_info's private members:
 * devices, chunks, the superblock, the last error message (btk/fs.h,
 * btk/volumes.h). */
#include <stdio.h>

#include <btk/fs.h>
#include <btk/volumes.h>
#include "libfs/fs_internal.h"
#include "libfs/volumes_internal.h"

unsigned fs_num_devices(const struct fs_info *fs)
{
	return fs->num_devices;
}

const struct fs_device *fs_device(const struct fs_info *fs, unsigned i)
{
	return i < fs->num_devices ? &fs->devices[i] : NULL;
}

const uint8_t *fs_super(const struct fs_info *fs)
{
	return fs->super;
}

size_t fs_chunk_count(const struct fs_info *fs)
{
	return fs->chunks ? fs->chunks->count : 0;
}

const struct chunk *fs_chunk(const struct fs_info *fs, size_t i)
{
	return i < fs_chunk_count(fs) ? fs->chunks->chunks[i] : NULL;
}

const struct chunk *fs_chunk_lookup(const struct fs_info *fs, uint64_t logical)
{
	return fs->chunks ? chunk_map_lookup(fs->chunks, logical) : NULL;
}

size_t fs_chunk_find_index(const struct fs_info *fs, uint64_t logical)
{
	return fs->chunks ? chunk_map_find_index(fs->chunks, logical) : 0;
}

/* fs->errlock: a spin lock (0 free), so that a hand-built, zeroed fs_info
 * needs no initialisation; held for one copy of at most 512 bytes. */
static void errlock_take(struct fs_info *fs)
{
	while (__atomic_exchange_n(&fs->errlock, 1, __ATOMIC_ACQUIRE))
		while (__atomic_load_n(&fs->errlock, __ATOMIC_RELAXED))
			;
}

static void errlock_drop(struct fs_info *fs)
{
	__atomic_store_n(&fs->errlock, 0, __ATOMIC_RELEASE);
}

void fs_errmsg_set(struct fs_info *fs, const char *msg)
{
	errlock_take(fs);
	snprintf(fs->errmsg, sizeof(fs->errmsg), "%s", msg);
	errlock_drop(fs);
}

const char *fs_error_message(const struct fs_info *fs)
{
	return fs->errmsg;
}

void fs_error_message_copy(const struct fs_info *fs, char *buf, size_t len)
{
	struct fs_info *locked = (struct fs_info *)fs; /* only its lock changes */

	errlock_take(locked);
	snprintf(buf, len, "%s", fs->errmsg);
	errlock_drop(locked);
}

void fs_error_clear(struct fs_info *fs)
{
	fs_errmsg_set(fs, "");
}
