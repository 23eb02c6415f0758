// SPDX-License-Identifier: GPL-2.0-only
/* btk-inspect: opening the filesystem and the exit status, shared by every
 * subcommand (kept out of main.c, which dispatches to them). */
#include <stdio.h>

#include "common/env_knobs.h"
#include "common/messages.h"
#include "inspect/inspect.h"

/* libfs notes go to stderr as usual; warnings and errors are also counted. */
static void count_note(void *arg, enum fs_note_level level, const char *msg)
{
	struct inspect_notes *notes = arg;

	if (level >= FS_NOTE_WARNING)
		notes->warnings++;
	msg_fs_note(NULL, level, msg);
}

int inspect_status(bool failed, const struct inspect_notes *notes)
{
	if (failed)
		return INSPECT_ERROR;
	return notes->warnings ? INSPECT_DAMAGED : INSPECT_OK;
}

struct fs_info *inspect_open(char **paths, unsigned npaths, int super_mirror, bool chunk_only,
			     struct inspect_notes *notes)
{
	struct fs_open_options opts;
	struct fs_info *fs;
	int ret;

	fs_open_options_init(&opts);
	opts.super_mirror = super_mirror;
	opts.chunk_only = chunk_only;
	opts.note = count_note;
	opts.note_arg = notes;
	env_knobs_fill(&opts);
	ret = fs_open((const char *const *)paths, npaths, &opts, &fs);
	if (ret) {
		msg_error("%s", btk_error_msg());
		return NULL;
	}
	return fs;
}
