// SPDX-License-Identifier: LGPL-2.1-or-later
/* What every layer below fs.c records on an open filesystem: errors (into
 * the calling thread's record, btk/error.h) and notes for the caller, and the
 * seed fsids found while opening. Kept apart from fs.c so that block, tree
 * and volumes do not call up into the file that opens them. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <btk/error.h>
#include <btk/fs.h>

int fs_error(struct fs_info *fs, int err, const char *fmt, ...)
{
	va_list ap;

	(void)fs;
	va_start(ap, fmt);
	btk_error_vset(err, BTK_ERR_NONE, fmt, ap);
	va_end(ap);
	return err;
}

int fs_error_kind(struct fs_info *fs, int err, enum btk_err_kind kind, const char *fmt, ...)
{
	va_list ap;

	(void)fs;
	va_start(ap, fmt);
	btk_error_vset(err, kind, fmt, ap);
	va_end(ap);
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
