// SPDX-License-Identifier: GPL-2.0-only
/* The default undo file location (undo_path.h). */
#include <errno.h>
#include <stdbool.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/undo_path.h"
#include <btk/names.h>

const char *undo_dir(void)
{
	const char *env = getenv("BTK_UNDO_DIR");

	return env && *env ? env : UNDO_DIR_DEFAULT;
}

int undo_dir_make(const char *dir)
{
	char path[4096];
	struct stat st;
	size_t n = strlen(dir);

	if (n == 0 || n >= sizeof(path))
		return -ENAMETOOLONG;
	memcpy(path, dir, n + 1);
	/* each missing component in turn, the parents first */
	for (char *p = path + 1;; p++) {
		bool last = *p == 0;
		if (*p != '/' && !last)
			continue;
		*p = 0;
		if (mkdir(path, 0700) != 0 && errno != EEXIST)
			return -errno;
		if (last)
			break;
		*p = '/';
	}
	if (stat(dir, &st) != 0)
		return -errno;
	if (!S_ISDIR(st.st_mode))
		return -ENOTDIR;
	/* the undo file is made after the check: it must not fail then */
	return access(dir, W_OK | X_OK) == 0 ? 0 : -errno;
}

int undo_path_in(const char *dir, const char *prog, const uint8_t *fsid, uint64_t generation, char *out,
		 size_t len)
{
	char uuid[UUID_STR_BUF];
	struct stat st;

	uuid_to_str(fsid, uuid);
	for (unsigned n = 0; n < 1000; n++) {
		int w = n ? snprintf(out, len, "%s/%s-%s-%" PRIu64 "-%u.undo", dir, prog, uuid, generation, n)
			  : snprintf(out, len, "%s/%s-%s-%" PRIu64 ".undo", dir, prog, uuid, generation);
		if (w < 0 || (size_t)w >= len)
			return -ENAMETOOLONG;
		if (lstat(out, &st) != 0)
			return 0;
	}
	return -EEXIST;
}

int undo_default_path(const char *prog, const uint8_t *fsid, uint64_t generation, char *out, size_t len,
		      char *why, size_t why_len)
{
	const char *dir = undo_dir();
	int ret = undo_dir_make(dir);

	if (ret) {
		snprintf(why, why_len, "cannot create the undo directory %s: %s: give --undo-file FILE (or "
			 "--no-undo to write none, or set BTK_UNDO_DIR)", dir, strerror(-ret));
		return ret;
	}
	ret = undo_path_in(dir, prog, fsid, generation, out, len);
	if (ret)
		snprintf(why, why_len, "no free undo file name in %s: give --undo-file FILE (or --no-undo to "
			 "write none)", dir);
	return ret;
}
