// SPDX-License-Identifier: LGPL-2.1-or-later
/* libblkid probe of all block devices for btrfs members with a given fsid. */
#include <blkid/blkid.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <uuid/uuid.h>

#include "libfs/devscan.h"

int devscan_find_members(const uint8_t fsid[BTRFS_FSID_SIZE], char ***paths, unsigned *count)
{
	blkid_cache cache;
	blkid_dev_iterate iter;
	blkid_dev dev;
	char fsid_str[37];
	char **v = NULL;
	unsigned n = 0;

	*paths = NULL;
	*count = 0;
	/* "/dev/null" keeps libblkid from reading or writing its on-disk cache */
	if (blkid_get_cache(&cache, "/dev/null") < 0)
		return -ENOMEM;
	blkid_probe_all(cache);
	uuid_unparse_lower(fsid, fsid_str);
	iter = blkid_dev_iterate_begin(cache);
	blkid_dev_set_search(iter, "UUID", fsid_str);
	while (blkid_dev_next(iter, &dev) == 0) {
		char **nv;
		dev = blkid_verify(cache, dev);
		if (!dev || !blkid_dev_has_tag(dev, "TYPE", "btrfs"))
			continue;
		nv = realloc(v, (n + 1) * sizeof(*v));
		if (!nv || !(nv[n] = strdup(blkid_dev_devname(dev)))) {
			v = nv ? nv : v;
			devscan_free(v, n);
			blkid_dev_iterate_end(iter);
			blkid_put_cache(cache);
			return -ENOMEM;
		}
		v = nv;
		n++;
	}
	blkid_dev_iterate_end(iter);
	blkid_put_cache(cache);
	*paths = v;
	*count = n;
	return 0;
}

void devscan_free(char **paths, unsigned count)
{
	for (unsigned i = 0; i < count; i++)
		free(paths[i]);
	free(paths);
}
