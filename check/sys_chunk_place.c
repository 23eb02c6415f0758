// SPDX-License-Identifier: GPL-2.0-only
/* A system chunk's stripe placed differently by the superblock's array and
 * by the chunk tree: the right place is the one the rest of the filesystem
 * agrees with. Two witnesses: the dev tree (a dev extent at that devid and
 * offset naming the chunk, of the stripe's size), and the blocks of the chunk
 * tree that live in the chunk (read at that place, do they verify?). A place
 * wins when it has the dev extent and the other does not, and as many blocks
 * verify there as at the other; or, neither having a dev extent, when every
 * block verifies there and none at the other. Blocks are weighed only for
 * profiles whose every stripe holds the whole chunk (single, DUP, RAID1*). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "check/chunk_place_data.h"
#include "check/sys_chunk_place.h"
#include "common/grow.h"
#include <btk/block.h>
#include <btk/format.h>
#include <btk/io.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include <btk/walk.h>

struct chunk_blocks {
	uint64_t start, end;   /* the chunk's logical range */
	uint64_t *v;
	size_t n, cap;
};

static int collect_block(void *arg, const struct tree_block *b)
{
	struct chunk_blocks *c = arg;
	uint64_t *v;

	if (b->bytenr < c->start || b->bytenr >= c->end)
		return 0;
	if (!(v = grow_array(c->v, &c->cap, c->n, sizeof(*v), 8)))
		return -ENOMEM;
	c->v = v;
	c->v[c->n++] = b->bytenr;
	return 0;
}

/* A dev extent at (devid, offset) names the chunk at logical, len bytes long. */
static bool has_dev_extent(struct fs_info *fs, uint64_t devid, uint64_t offset, uint64_t logical, uint64_t len)
{
	struct btrfs_key key = { devid, BTRFS_DEV_EXTENT_KEY, offset };
	uint8_t item[sizeof(struct btrfs_dev_extent)];
	uint32_t size = sizeof(item);

	if (!fs->dev_root.bytenr || tree_lookup(fs, &fs->dev_root, &key, item, &size) != 0) {
		btk_error_clear();
		return false;
	}
	return size == sizeof(item) && dev_extent_chunk_offset(item) == logical && dev_extent_length(item) == len;
}

/* How many of the chunk's tree blocks verify when read at (devid, offset). */
static size_t blocks_verifying(struct fs_info *fs, const struct chunk_blocks *c, uint64_t devid, uint64_t offset,
			       uint8_t *buf)
{
	struct io_dev *io = device_io_by_id(fs, devid);
	size_t good = 0;

	for (size_t i = 0; io && i < c->n; i++)
		if (io_read(io, buf, fs->nodesize, offset + (c->v[i] - c->start)) == 0 &&
		    block_verify(fs, c->v[i], buf, NULL) == BLOCK_OK)
			good++;
	return good;
}

static bool whole_chunk_stripes(uint64_t type)
{
	return !(type & (BTRFS_BLOCK_GROUP_RAID0 | BTRFS_BLOCK_GROUP_RAID10 | BTRFS_BLOCK_GROUP_RAID5 |
			 BTRFS_BLOCK_GROUP_RAID6));
}

int sys_chunk_place(struct fs_info *fs, uint64_t logical, const uint8_t *t, const uint8_t *a, char *from,
		    char *why, size_t why_len)
{
	unsigned n = chunk_num_stripes(t);
	uint64_t len = chunk_stripe_size(chunk_length(t), chunk_type(t), n, chunk_sub_stripes(t));
	struct chunk_blocks c = { .start = logical, .end = logical + chunk_length(t) };
	struct tree_walk_ops ops = { collect_block, NULL, &c };
	bool weigh = whole_chunk_stripes(chunk_type(t));
	uint8_t *buf = malloc(fs->nodesize);
	int ret = 0;

	if (!buf)
		return -ENOMEM;
	if (weigh && tree_walk(fs, &fs->chunk_root, &ops, NULL) < 0) {
		btk_error_clear();   /* what could be walked is weighed */
	}
	for (unsigned i = 0; i < n && !ret; i++) {
		const uint8_t *ts = chunk_stripe(t, i), *as = chunk_stripe(a, i);
		bool de_t, de_a;
		size_t bt = 0, ba = 0;

		from[i] = 0;
		if (stripe_devid(ts) == stripe_devid(as) && stripe_offset(ts) == stripe_offset(as))
			continue;
		de_t = has_dev_extent(fs, stripe_devid(ts), stripe_offset(ts), logical, len);
		de_a = has_dev_extent(fs, stripe_devid(as), stripe_offset(as), logical, len);
		if (weigh) {
			bt = blocks_verifying(fs, &c, stripe_devid(ts), stripe_offset(ts), buf);
			ba = blocks_verifying(fs, &c, stripe_devid(as), stripe_offset(as), buf);
		}
		if ((de_t && !de_a && bt >= ba) || (!de_t && !de_a && c.n && bt == c.n && ba == 0))
			from[i] = 't';
		else if ((de_a && !de_t && ba >= bt) || (!de_t && !de_a && c.n && ba == c.n && bt == 0))
			from[i] = 'a';
		else {
			snprintf(why, why_len, "stripe %u: the tree says devid %" PRIu64 " at %" PRIu64 " (%s dev extent, "
				 "%zu of %zu blocks verify), the array devid %" PRIu64 " at %" PRIu64 " (%s dev extent, "
				 "%zu verify)", i, stripe_devid(ts), stripe_offset(ts), de_t ? "its" : "no", bt, c.n,
				 stripe_devid(as), stripe_offset(as), de_a ? "its" : "no", ba);
			ret = 1;
		}
	}
	free(c.v);
	free(buf);
	return ret;
}
