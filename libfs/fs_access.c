/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The read-only views programs get of struct fs_info's private members:
 * devices, chunks and the superblock (btk/fs.h, btk/volumes.h), and the
 * few settings programs change on an open filesystem; the last error message
 * is kept by fs_info.c. */
#include <stdio.h>

#include <btk/fs.h>
#include <btk/volumes.h>
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

bool fs_cancel_requested(const struct fs_info *fs)
{
	return fs->cancelled && fs->cancelled();
}

void fs_set_alloc_hints(struct fs_info *fs, const struct chunk_alloc_hints *hints)
{
	fs->alloc_hints = hints;
}

bool fs_set_salvage(struct fs_info *fs, bool on)
{
	bool was = fs->salvage;

	fs->salvage = on;
	return was;
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
