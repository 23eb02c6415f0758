/* Before a profile change is committed: every tree block of the changing
 * chunks is read on the copies that stay and verified; a bad copy is
 * rewritten from a good one, and new stripes are filled from good copies.
 * Blocks are visited in extent-tree order, which is physical order within
 * a chunk of the mirror family. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert/convert.h"
#include "libfs/block.h"
#include "libfs/tree.h"
#include "libfs/volumes.h"

struct verify_ctx {
	struct fs_info *fs;
	const struct chunk_plan *plan;
	bool verify;
	struct verify_stats *st;
	uint8_t *good, *buf;
	char *msg;
	size_t msglen;
};

static struct io_dev *device_io(struct fs_info *fs, uint64_t devid)
{
	for (unsigned i = 0; i < fs->num_devices; i++)
		if (fs->devices[i].devid == devid)
			return fs->devices[i].io;
	return NULL;
}

static int write_copy(struct verify_ctx *v, const struct stripe_place *s, uint64_t bytenr)
{
	struct io_dev *io = device_io(v->fs, s->devid);
	int ret;

	if (!io)
		return -ENODEV;
	ret = io_write(io, v->good, v->fs->nodesize, s->physical + (bytenr - v->plan->logical));
	if (!ret)
		v->st->bytes_written += v->fs->nodesize;
	return ret;
}

/* One tree block: find a good copy, fix the staying copies, fill new ones. */
static int handle_block(struct verify_ctx *v, uint64_t bytenr, int level)
{
	const struct chunk_plan *p = v->plan;
	struct block_expect e = { .generation = 0, .level = level };
	bool have_good = false, stays_bad[8] = { false };

	v->st->blocks++;
	for (unsigned i = 0; i < p->nold; i++) {
		bool stays = false;
		enum block_problem pr;
		for (unsigned k = 0; k < p->nnew; k++)
			stays |= !p->added[k] && p->new_stripes[k].devid == p->old_stripes[i].devid &&
				 p->new_stripes[k].physical == p->old_stripes[i].physical;
		if (!stays && have_good)
			continue;
		if (!stays && !v->verify)
			continue;
		pr = block_read_copy(v->fs, bytenr, (int)i, &e, v->buf);
		v->st->bytes_read += v->fs->nodesize;
		if (pr == BLOCK_OK) {
			if (!have_good)
				memcpy(v->good, v->buf, v->fs->nodesize);
			have_good = true;
		} else if (stays) {
			stays_bad[i] = true;
		}
	}
	if (!have_good) {
		/* the copies that go away were not read yet when verification is off */
		for (unsigned i = 0; i < p->nold && !have_good; i++)
			if (block_read_copy(v->fs, bytenr, (int)i, &e, v->good) == BLOCK_OK)
				have_good = true;
	}
	if (!have_good) {
		snprintf(v->msg, v->msglen, "tree block %llu (chunk %llu) has no good copy: nothing was changed",
			 (unsigned long long)bytenr, (unsigned long long)p->logical);
		return -EUCLEAN;
	}
	for (unsigned i = 0; i < p->nold; i++) {
		int ret;
		if (!stays_bad[i])
			continue;
		ret = write_copy(v, &p->old_stripes[i], bytenr);
		if (ret)
			return ret;
		v->st->repaired++;
	}
	for (unsigned k = 0; k < p->nnew; k++) {
		int ret;
		if (!p->added[k])
			continue;
		ret = write_copy(v, &p->new_stripes[k], bytenr);
		if (ret)
			return ret;
	}
	return 0;
}

static int handle_chunk(struct verify_ctx *v)
{
	struct fs_info *fs = v->fs;
	struct btrfs_key min = { v->plan->logical, 0, 0 };
	struct btrfs_key max = { v->plan->logical + v->plan->length - 1, 255, (uint64_t)-1 }, key;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	bool adds = false;
	int ret;

	for (unsigned k = 0; k < v->plan->nnew; k++)
		adds |= v->plan->added[k];
	if (!v->verify && !adds)
		return 0; /* only dropping copies, unverified: nothing to read or write */
	tree_iter_init(&it, fs, &fs->extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		int level;
		if (key.type == BTRFS_METADATA_ITEM_KEY)
			level = (int)key.offset;
		else if (key.type == BTRFS_EXTENT_ITEM_KEY && size >= sizeof(struct btrfs_extent_item) &&
			 (extent_flags(data) & BTRFS_EXTENT_FLAG_TREE_BLOCK))
			level = size >= sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_tree_block_info)
					? tree_block_info_level(data + sizeof(struct btrfs_extent_item)) : -1;
		else
			continue;
		ret = handle_block(v, key.objectid, level);
		if (ret)
			break;
	}
	tree_iter_release(&it);
	return ret < 0 ? ret : 0;
}

int profile_verify_and_copy(struct fs_info *fs, const struct chunk_plan *plans, size_t nplans, bool verify,
			    struct verify_stats *st, char *msg, size_t msglen)
{
	struct verify_ctx v = { .fs = fs, .verify = verify, .st = st, .msg = msg, .msglen = msglen };
	struct timespec a, b;
	int ret = 0;

	memset(st, 0, sizeof(*st));
	v.good = malloc(fs->nodesize);
	v.buf = malloc(fs->nodesize);
	if (!v.good || !v.buf) {
		free(v.good);
		free(v.buf);
		return -ENOMEM;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (size_t i = 0; i < nplans && !ret; i++) {
		v.plan = &plans[i];
		ret = handle_chunk(&v);
	}
	for (unsigned d = 0; !ret && d < fs->num_devices; d++)
		if (fs->devices[d].io)
			ret = io_flush(fs->devices[d].io);
	clock_gettime(CLOCK_MONOTONIC, &b);
	st->seconds = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
	free(v.good);
	free(v.buf);
	if (ret && !msg[0])
		snprintf(msg, msglen, "%s", fs->errmsg[0] ? fs->errmsg : strerror(-ret));
	return ret;
}
