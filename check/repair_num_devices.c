// SPDX-License-Identifier: GPL-2.0-only
/* The num-devices class: the superblock's num_devices becomes the number of
 * dev items in the chunk tree, when every one of them names a device that
 * was found (the kernel mounts a filesystem only when the two agree). */
#include <inttypes.h>

#include "check/repair.h"
#include <btk/format.h>
#include <btk/item_check.h>
#include <btk/super.h>
#include <btk/volumes.h>

struct dev_count {
	struct fs_info *fs;
	uint64_t items, absent;
};

static int count_dev_item(void *arg, const struct btrfs_key *k, const uint8_t *d, uint32_t size)
{
	struct dev_count *c = arg;
	struct item_view v = item_view_of(d, size);
	bool found = false;

	if (!item_view_has_fixed(&v, k->type))
		return 0;
	c->items++;
	for (unsigned i = 0; i < fs_num_devices(c->fs); i++)
		found |= fs_device(c->fs, i)->devid == k->offset && fs_device(c->fs, i)->io;
	c->absent += !found;
	return 0;
}

int repair_num_devices(struct repair_ctx *r)
{
	struct dev_count c = { .fs = r->fs };
	uint64_t was = super_num_devices(fs_super(r->fs));
	int ret = volumes_each_dev_item(r->fs, count_dev_item, &c);

	if (ret < 0)
		return ret;
	if (c.absent || !c.items) {
		r->left++;
		repair_say(r, "%" PRIu64 " of %" PRIu64 " dev items name no device found: num_devices left at %" PRIu64,
			   c.absent, c.items, was);
		return 0;
	}
	if (c.items == was)
		return 0;
	super_set_num_devices(trans_super(r->t), c.items);
	r->changes++;
	repair_say(r, "superblock num_devices %" PRIu64 " -> %" PRIu64 " (the dev items)", was, c.items);
	return 0;
}
