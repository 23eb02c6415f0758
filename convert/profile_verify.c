// SPDX-License-Identifier: GPL-2.0-only
/* Before a profile change is committed: every tree block of the changing
 * chunks is read on the copies that stay and verified; a bad copy is
 * rewritten from a good one, and new stripes are filled from good copies.
 * Blocks are visited in extent-tree order, which is physical order within
 * a chunk of the mirror family, and read in runs by reader threads ahead of
 * the checking, uncached where the device allows it (libfs/read_pipe): the
 * bytes verified are the device's, not a cached copy. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "convert/convert.h"
#include <btk/block.h>
#include <btk/extent_scan.h>
#include <btk/read_pipe.h>
#include <btk/tree.h>
#include <btk/volumes.h>

/* Tree blocks are read in runs of up to SPAN bytes of the chunk, one read
 * per copy that stays, instead of one read per block; a gap of more than
 * MAX_GAP between two blocks starts a new run rather than being read. RUNS
 * runs are read ahead by READERS threads while the blocks of the oldest are
 * checked. */
#define SPAN (1u << 20)
#define MAX_GAP (256u << 10)
#define RUNS 6
#define READERS 3

/* A run of tree blocks read with one read per copy that stays. */
struct run {
	const struct chunk_plan *plan;
	uint64_t first, span;
	struct pending { uint64_t bytenr; int level; } *blocks;
	size_t n;
};

struct verify_ctx {
	struct fs_info *fs;
	const struct chunk_plan *plan;
	bool verify;
	struct verify_stats *st;
	uint8_t *good, *buf;
	struct read_pipe *pipe;
	struct read_slot *filling;   /* the slot the next blocks join, or NULL */
	struct run runs[RUNS];       /* per slot of the pipe */
	char *msg;
	size_t msglen;
};

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

/* Is old copy i of the plan read: it stays and its device is open? */
static bool staying_copy(struct verify_ctx *v, const struct chunk_plan *p, unsigned i)
{
	return plan_old_stays(p, i) && convert_device_io(v->fs, p->old_stripes[i].devid);
}

/* Check the blocks of the oldest run read ahead (a copy whose read failed
 * is read block by block): 1, 0 when none is queued, or -errno. */
static int check_run(struct verify_ctx *v)
{
	struct read_slot *slot = read_pipe_next(v->pipe);
	const uint8_t *pre[8] = { NULL };
	struct run *r;
	int ret = 0;

	if (!slot)
		return 0;
	r = &v->runs[slot->index];
	for (unsigned i = 0, k = 0; i < r->plan->nold && i < 8; i++) {
		const struct read_seg *g = &slot->seg[k];
		if (!staying_copy(v, r->plan, i))
			continue;
		k++;
		if (g->ret == 0) {
			v->st->bytes_read += r->span;
			pre[i] = g->buf;
		}
	}
	v->plan = r->plan;
	for (size_t b = 0; b < r->n && !ret; b++) {
		const uint8_t *at[8];
		for (unsigned i = 0; i < 8; i++)
			at[i] = pre[i] ? pre[i] + (r->blocks[b].bytenr - r->first) : NULL;
		ret = handle_block(v, r->blocks[b].bytenr, r->blocks[b].level, at);
	}
	r->n = 0;
	read_pipe_release(v->pipe);
	return ret < 0 ? ret : 1;
}

/* Queue the run being filled for reading on every copy that stays. */
static void submit_run(struct verify_ctx *v)
{
	struct read_slot *slot = v->filling;
	struct run *r;

	if (!slot)
		return;
	r = &v->runs[slot->index];
	r->span = r->blocks[r->n - 1].bytenr + v->fs->nodesize - r->first;
	for (unsigned i = 0, k = 0; i < r->plan->nold && i < 8; i++) {
		if (!staying_copy(v, r->plan, i))
			continue;
		slot->seg[k].io = convert_device_io(v->fs, r->plan->old_stripes[i].devid);
		slot->seg[k].offset = r->plan->old_stripes[i].physical + (r->first - r->plan->logical);
		slot->seg[k++].len = r->span;
	}
	read_pipe_submit(v->pipe);
	v->filling = NULL;
}

/* Submit the run being filled and check every run queued. */
static int drain_runs(struct verify_ctx *v)
{
	int ret = 0;

	submit_run(v);
	while ((ret = check_run(v)) > 0)
		;
	return ret;
}

/* Add a tree block to the run being filled; a run is submitted when the
 * next block would not fit or lies too far ahead. */
static int queue_block(struct verify_ctx *v, uint64_t bytenr, int level)
{
	const struct chunk_plan *p = v->plan;
	struct run *r = v->filling ? &v->runs[v->filling->index] : NULL;
	int ret;

	if (bytenr < p->logical || v->fs->nodesize > p->logical + p->length - bytenr) {
		snprintf(v->msg, v->msglen, "tree block %llu is outside chunk %llu: run btk-check",
			 (unsigned long long)bytenr, (unsigned long long)p->logical);
		return -EUCLEAN;
	}
	if (r) {
		uint64_t end = r->blocks[r->n - 1].bytenr + v->fs->nodesize;
		if (bytenr < end || bytenr - end > MAX_GAP || bytenr + v->fs->nodesize - r->first > SPAN) {
			submit_run(v);
			r = NULL;
		}
	}
	while (!r) {
		v->filling = read_pipe_fill(v->pipe);
		if (v->filling) {
			r = &v->runs[v->filling->index];
			*r = (struct run){ .plan = p, .first = bytenr, .blocks = r->blocks };
		} else if ((ret = check_run(v)) < 0) {
			return ret;
		}
	}
	r->blocks[r->n++] = (struct pending){ bytenr, level };
	return 0;
}

struct chunk_scan {
	struct verify_ctx *v;
	struct data_verify *dv;   /* NULL: data is not verified */
};

static int chunk_extent(void *arg, const struct extent_rec *e)
{
	const struct chunk_scan *s = arg;

	if (s->dv && e->data)
		return data_verify_extent(s->dv, e->bytenr, e->len);
	return e->tree_block ? queue_block(s->v, e->bytenr, e->level) : 0;
}

static int handle_chunk(struct verify_ctx *v)
{
	struct fs_info *fs = v->fs;
	struct chunk_scan s = { v, NULL };
	bool adds = false;
	int ret;

	for (unsigned k = 0; k < v->plan->nnew; k++)
		adds |= v->plan->added[k];
	if (!v->verify && !adds)
		return 0; /* only dropping copies, unverified: nothing to read or write */
	if ((v->plan->type & BTRFS_BLOCK_GROUP_DATA) &&
	    (ret = data_verify_begin(fs, v->plan, v->st, v->msg, v->msglen, &s.dv)))
		return ret;
	ret = extent_tree_each(fs, &fs->extent_root, v->plan->logical, v->plan->logical + v->plan->length - 1,
			       chunk_extent, &s);
	if (ret >= 0) {
		int r2 = drain_runs(v);
		if (r2)
			ret = r2;
	}
	data_verify_end(s.dv);
	return ret < 0 ? ret : 0;
}

/* The most copies read in any plan: one read segment each. */
static unsigned max_copies(struct verify_ctx *v, const struct chunk_plan *plans, size_t nplans)
{
	unsigned most = 1;

	for (size_t c = 0; c < nplans; c++) {
		unsigned n = 0;
		for (unsigned i = 0; i < plans[c].nold && i < 8; i++)
			n += staying_copy(v, &plans[c], i);
		if (n > most)
			most = n;
	}
	return most;
}

int profile_verify_and_copy(struct fs_info *fs, const struct chunk_plan *plans, size_t nplans, bool verify,
			    struct verify_stats *st, char *msg, size_t msglen)
{
	struct verify_ctx v = { .fs = fs, .verify = verify, .st = st, .msg = msg, .msglen = msglen };
	struct timespec a, b;
	int ret;

	memset(st, 0, sizeof(*st));
	v.good = malloc(fs->nodesize);
	v.buf = malloc(fs->nodesize);
	ret = read_pipe_create(RUNS, max_copies(&v, plans, nplans), SPAN, READERS, &v.pipe);
	for (unsigned i = 0; i < RUNS && !ret; i++)
		if (!(v.runs[i].blocks = calloc(SPAN / 4096, sizeof(*v.runs[i].blocks))))
			ret = -ENOMEM;
	if (ret || !v.good || !v.buf) {
		ret = -ENOMEM;
		goto out;
	}
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (size_t i = 0; i < nplans && !ret; i++) {
		if (fs_cancel_requested(fs)) {
			ret = -ECANCELED;
			snprintf(msg, msglen, "cancelled before the commit: the filesystem is unchanged");
			break;
		}
		v.plan = &plans[i];
		ret = handle_chunk(&v);
	}
	for (unsigned d = 0; !ret && d < fs_num_devices(fs); d++)
		if (fs_device(fs, d)->io)
			ret = io_flush(fs_device(fs, d)->io);
	clock_gettime(CLOCK_MONOTONIC, &b);
	st->seconds = (double)(b.tv_sec - a.tv_sec) + (double)(b.tv_nsec - a.tv_nsec) / 1e9;
out:
	read_pipe_destroy(v.pipe);
	for (unsigned i = 0; i < RUNS; i++)
		free(v.runs[i].blocks);
	free(v.good);
	free(v.buf);
	if (ret && !msg[0])
		snprintf(msg, msglen, "%s", fs_error_message(fs)[0] ? fs_error_message(fs) : strerror(-ret));
	return ret;
}
