// SPDX-License-Identifier: LGPL-2.1-or-later
/* What every layer below fs.c records on an open filesystem: the error message
 * and notes for the caller, and the seed fsids found while opening. Kept apart
 * from fs.c so that block, tree and volumes do not call up into the file that
 * opens them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <btk/fs.h>
#include "libfs/fs_internal.h"

int fs_error(struct fs_info *fs, int err, const char *fmt, ...)
{
	char buf[sizeof(fs->errmsg)];
	va_list ap;

	/* Format aside: callers wrap the previous message by passing fs->errmsg. */
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fs_errmsg_set(fs, buf);
	return err;
}

void fs_note(struct fs_info *fs, enum fs_note_level level, const char *fmt, ...)
{
	char buf[512];
	va_list ap;

	if (!fs->note)
		return;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	fs->note(fs->note_arg, level, buf);
}

bool fs_fsid_is_seed(const struct fs_info *fs, const uint8_t *fsid)
{
	for (unsigned i = 0; i < fs->nseed_fsids; i++)
		if (memcmp(fs->seed_fsids[i], fsid, BTRFS_FSID_SIZE) == 0)
			return true;
	return false;
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
