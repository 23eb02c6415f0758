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
	uint8_t *span[8];          /* one read of up to SPAN bytes per copy that stays */
	uint64_t ahead[8];         /* chunk offset up to which copy i was prefetched */
	struct pending { uint64_t bytenr; int level; } *pend;
	size_t npend;
	char *msg;
	size_t msglen;
};

/* Tree blocks are read in runs of up to SPAN bytes of the chunk, one read
 * per copy that stays, instead of one read per block. */
#define SPAN (1u << 20)
#define PREFETCH (8u << 20) /* read-ahead hint beyond the run being checked */

struct io_dev *convert_device_io(struct fs_info *fs, uint64_t devid)
{
	for (unsigned i = 0; i < fs->num_devices; i++)
		if (fs->devices[i].devid == devid)
			return fs->devices[i].io;
	return NULL;
}

static int write_copy(struct verify_ctx *v, const uint8_t *good, const struct stripe_place *s, uint64_t bytenr)
{
	struct io_dev *io = convert_device_io(v->fs, s->devid);
	int ret;

	if (!io)
		return -ENODEV;
	ret = io_write(io, good, v->fs->nodesize, s->physical + (bytenr - v->plan->logical));
	if (!ret)
		v->st->bytes_written += v->fs->nodesize;
	return ret;
}

bool plan_old_stays(const struct chunk_plan *p, unsigned i)
{
	for (unsigned k = 0; k < p->nnew; k++)
		if (!p->added[k] && p->new_stripes[k].devid == p->old_stripes[i].devid &&
		    p->new_stripes[k].physical == p->old_stripes[i].physical)
			return true;
	return false;
}

/* One tree block: find a good copy, fix the staying copies, fill new ones.
 * pre[i], when set, is copy i of the block already read. */
static int handle_block(struct verify_ctx *v, uint64_t bytenr, int level, const uint8_t *const pre[8])
{
	const struct chunk_plan *p = v->plan;
	struct block_expect e = { .generation = 0, .level = level };
	bool have_good = false, stays_bad[8] = { false };
	const uint8_t *good = v->good;

	v->st->blocks++;
	for (unsigned i = 0; i < p->nold; i++) {
		bool stays = plan_old_stays(p, i);
		enum block_problem pr;
		if (!stays && have_good)
			continue;
		if (!stays && !v->verify)
			continue;
		if (pre[i]) {
			pr = block_verify(v->fs, bytenr, pre[i], &e);
		} else {
			pr = block_read_copy(v->fs, bytenr, (int)i, &e, v->buf);
			v->st->bytes_read += v->fs->nodesize;
		}
		if (pr == BLOCK_OK) {
			if (!have_good && pre[i]) {
				good = pre[i];
			} else if (!have_good) {
				memcpy(v->good, v->buf, v->fs->nodesize);
				good = v->good;
			}
			have_good = true;
		} else if (stays) {
			stays_bad[i] = true;
		}
	}
	if (!have_good) {
		/* the copies that go away were not read yet when verification is off */
		for (unsigned i = 0; i < p->nold && !have_good; i++)
			if (block_read_copy(v->fs, bytenr, (int)i, &e, v->good) == BLOCK_OK) {
				have_good = true;
				good = v->good;
			}
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
		ret = write_copy(v, good, &p->old_stripes[i], bytenr);
		if (ret)
			return ret;
		v->st->repaired++;
	}
	for (unsigned k = 0; k < p->nnew; k++) {
		int ret;
		if (!p->added[k])
			continue;
		ret = write_copy(v, good, &p->new_stripes[k], bytenr);
		if (ret)
			return ret;
	}
	return 0;
}

/* Read the pending run of tree blocks once per copy that stays, then handle
 * each block from memory (a copy whose read failed is read block by block). */
static int flush_pending(struct verify_ctx *v)
{
	const struct chunk_plan *p = v->plan;
	uint64_t first, span;
	int ret = 0;
	const uint8_t *pre[8] = { NULL };

	if (!v->npend)
		return 0;
	first = v->pend[0].bytenr;
	span = v->pend[v->npend - 1].bytenr + v->fs->nodesize - first;
	for (unsigned i = 0; i < p->nold; i++) {
		struct io_dev *io = convert_device_io(v->fs, p->old_stripes[i].devid);
		if (!plan_old_stays(p, i) || !io)
			continue;
		if (io_read(io, v->span[i], span, p->old_stripes[i].physical + (first - p->logical)) == 0) {
			v->st->bytes_read += span;
			pre[i] = v->span[i];
		}
		/* keep the device reading ahead while this run is checked */
		uint64_t end = first - p->logical + span;
		if (v->ahead[i] < end + PREFETCH / 2 && end < p->stripe_size) {
			uint64_t from = v->ahead[i] > end ? v->ahead[i] : end;
			uint64_t to = end + PREFETCH < p->stripe_size ? end + PREFETCH : p->stripe_size;
			io_prefetch(io, p->old_stripes[i].physical + from, to - from);
			v->ahead[i] = to;
		}
	}
	for (size_t b = 0; b < v->npend && !ret; b++) {
		const uint8_t *at[8];
		for (unsigned i = 0; i < 8; i++)
			at[i] = pre[i] ? pre[i] + (v->pend[b].bytenr - first) : NULL;
		ret = handle_block(v, v->pend[b].bytenr, v->pend[b].level, at);
	}
	v->npend = 0;
	return ret;
}

/* Queue a tree block; a run is flushed when the next block would not fit. */
static int queue_block(struct verify_ctx *v, uint64_t bytenr, int level)
{
	const struct chunk_plan *p = v->plan;
	int ret;

	if (bytenr < p->logical || v->fs->nodesize > p->logical + p->length - bytenr) {
		snprintf(v->msg, v->msglen, "tree block %llu is outside chunk %llu: run btk-check",
			 (unsigned long long)bytenr, (unsigned long long)p->logical);
		return -EUCLEAN;
	}
	if (v->npend && (bytenr < v->pend[v->npend - 1].bytenr + v->fs->nodesize ||
			 bytenr + v->fs->nodesize - v->pend[0].bytenr > SPAN) && (ret = flush_pending(v)))
		return ret;
	v->pend[v->npend++] = (struct pending){ bytenr, level };
	return 0;
}

static int handle_chunk(struct verify_ctx *v)
{
	struct fs_info *fs = v->fs;
	struct btrfs_key min = { v->plan->logical, 0, 0 };
	struct btrfs_key max = { v->plan->logical + v->plan->length - 1, 255, (uint64_t)-1 }, key;
	struct data_verify *dv = NULL;
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	bool adds = false;
	int ret;

	memset(v->ahead, 0, sizeof(v->ahead));
	for (unsigned k = 0; k < v->plan->nnew; k++)
		adds |= v->plan->added[k];
	if (!v->verify && !adds)
		return 0; /* only dropping copies, unverified: nothing to read or write */
	if ((v->plan->type & BTRFS_BLOCK_GROUP_DATA) &&
	    (ret = data_verify_begin(fs, v->plan, v->st, v->msg, v->msglen, &dv)))
		return ret;
	tree_iter_init(&it, fs, &fs->extent_root, &min, &max);
	while ((ret = tree_iter_next(&it, &key, &data, &size)) == 1) {
		int level;
		if (dv && key.type == BTRFS_EXTENT_ITEM_KEY && size >= sizeof(struct btrfs_extent_item) &&
		    (extent_flags(data) & BTRFS_EXTENT_FLAG_DATA)) {
			ret = data_verify_extent(dv, key.objectid, key.offset);
			if (ret)
				break;
			continue;
		}
		if (key.type == BTRFS_METADATA_ITEM_KEY)
			level = (int)key.offset;
		else if (key.type == BTRFS_EXTENT_ITEM_KEY && size >= sizeof(struct btrfs_extent_item) &&
			 (extent_flags(data) & BTRFS_EXTENT_FLAG_TREE_BLOCK))
			level = size >= sizeof(struct btrfs_extent_item) + sizeof(struct btrfs_tree_block_info)
					? tree_block_info_level(data + sizeof(struct btrfs_extent_item)) : -1;
		else
			continue;
		ret = queue_block(v, key.objectid, level);
		if (ret)
			break;
	}
	if (ret >= 0) {
		int r2 = flush_pending(v);
		if (r2)
			ret = r2;
	}
	v->npend = 0;
	tree_iter_release(&it);
	data_verify_end(dv);
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
	v.pend = calloc(SPAN / 4096, sizeof(*v.pend));
	for (unsigned i = 0; i < 8; i++)
		v.span[i] = NULL;
	for (size_t i = 0; i < nplans && !ret; i++)
		for (unsigned k = 0; k < plans[i].nold && k < 8; k++)
			if (!v.span[k] && !(v.span[k] = malloc(SPAN)))
				ret = -ENOMEM;
	if (ret || !v.good || !v.buf || !v.pend) {
		ret = -ENOMEM;
		goto out;
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
out:
	for (unsigned i = 0; i < 8; i++)
		free(v.span[i]);
	free(v.pend);
	free(v.good);
	free(v.buf);
	if (ret && !msg[0])
		snprintf(msg, msglen, "%s", fs->errmsg[0] ? fs->errmsg : strerror(-ret));
	return ret;
}
