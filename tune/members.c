// SPDX-License-Identifier: GPL-2.0-only
/* The superblock each member device has now. An fsid change writes the
 * devices one after the other, so after a crash they may disagree; libfs
 * keeps only the first device's superblock, and the fsid operations look at
 * all of them to tell where the change stopped. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <btk/super.h>
#include "tune/tune.h"

int member_supers_read(struct fs_info *fs, struct member_supers *out)
{
	out->count = 0;
	out->sb = calloc(fs_num_devices(fs) ? fs_num_devices(fs) : 1, sizeof(*out->sb));
	if (!out->sb)
		return -ENOMEM;
	for (unsigned i = 0; i < fs_num_devices(fs); i++) {
		struct super_copy copies[BTRFS_SUPER_MIRROR_MAX];
		const struct fs_device *d = fs_device(fs, i);
		int ret;

		if (!d->io)
			continue;
		ret = super_read_best(d->io, -1, out->sb[out->count], copies);
		if (ret < 0) {
			member_supers_free(out);
			return fs_error(fs, -EUCLEAN, "%s: no valid superblock", d->path ? d->path : "device");
		}
		out->count++;
	}
	return 0;
}

void member_supers_free(struct member_supers *m)
{
	free(m->sb);
	m->sb = NULL;
	m->count = 0;
}

int tune_fsid_change_pending(struct fs_info *fs)
{
	struct member_supers m;
	int ret = member_supers_read(fs, &m), pending = 0;

	if (ret)
		return ret;
	for (unsigned i = 0; i < m.count; i++) {
		uint64_t flags = super_flags(m.sb[i]);
		if (flags & BTRFS_SUPER_FLAG_CHANGING_FSID)
			pending = 1;
		else if ((flags & BTRFS_SUPER_FLAG_CHANGING_FSID_V2) && !pending)
			pending = 2;
	}
	member_supers_free(&m);
	return pending;
}
