// SPDX-License-Identifier: GPL-2.0-only
/* --check-data-csum: read every checksummed data block, every copy of it,
 * and verify it against the csum tree. Device stripes are visited in
 * physical order (sorted by device and offset); contiguous checksummed runs
 * of up to 1 MiB are read ahead by reader threads, uncached where the device
 * allows it (libfs/read_pipe), while the main thread walks the csum tree,
 * verifies the oldest run read (split over --jobs threads) and reports.
 * Memory: PIECES runs of at most 1 MiB (less under a small budget). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check/refs.h"
#include <btk/csum.h>
#include <btk/csum_tree.h>
#include <btk/io.h>
#include <btk/read_pipe.h>
#include <btk/volumes.h>

#define PIECE_MAX (1u << 20)
#define PIECES 6
#define READERS 3
#define MAX_THREADS 64
#define PART_BAD_MAX 16

/* One contiguous run of one copy, read as one segment of a pipe slot. */
struct dc_piece {
	struct fs_device *dev;
	int mirror;
	uint64_t logical, physical, len;
	uint8_t *csums;               /* len / sectorsize checksums */
};

/* The share of one verifying thread in the piece being verified. */
struct dc_part {
	uint64_t start, end;          /* byte offsets in the piece */
	unsigned nbad;
	uint64_t bad[PART_BAD_MAX];   /* offsets of the first bad blocks */
	uint64_t nbad_total;
};

/* A stripe of a data chunk: where one device holds part of it. */
struct dc_stripe {
	uint64_t devid, physical, size;
	const struct chunk *chunk;
};

struct dc_state {
	struct check_ctx *ctx;
	struct read_pipe *pipe;
	struct read_slot *filling;    /* the slot the next run joins, or NULL */
	struct dc_piece pieces[PIECES];  /* per slot of the pipe */
	uint64_t piece_max;
	/* verifying threads: workers wait for a new generation, verify their part */
	const uint8_t *buf, *csums;
	struct dc_part parts[MAX_THREADS];
	unsigned nworkers, pending;
	uint64_t gen;
	bool stop;
	struct dc_worker { struct dc_state *s; unsigned part; pthread_t tid; } workers[MAX_THREADS];
	pthread_mutex_t lock;
	pthread_cond_t go, done;
};

static void verify_part(struct dc_state *s, struct dc_part *p)
{
	struct fs_info *fs = s->ctx->fs;
	uint8_t sum[BTRFS_CSUM_SIZE];

	p->nbad = 0;
	p->nbad_total = 0;
	for (uint64_t off = p->start; off < p->end; off += fs->sectorsize) {
		csum_compute(fs->csum_type, s->buf + off, fs->sectorsize, sum);
		if (memcmp(sum, s->csums + off / fs->sectorsize * fs->csum_size, fs->csum_size)) {
			if (p->nbad < PART_BAD_MAX)
				p->bad[p->nbad++] = off;
			p->nbad_total++;
		}
	}
}

static void *worker(void *arg)
{
	struct dc_worker *w = arg;
	struct dc_state *s = w->s;
	uint64_t seen = 0;

	pthread_mutex_lock(&s->lock);
	for (;;) {
		while (!s->stop && s->gen == seen)
			pthread_cond_wait(&s->go, &s->lock);
		if (s->stop)
			break;
		seen = s->gen;
		pthread_mutex_unlock(&s->lock);
		verify_part(s, &s->parts[w->part]);
		pthread_mutex_lock(&s->lock);
		if (--s->pending == 0)
			pthread_cond_signal(&s->done);
	}
	pthread_mutex_unlock(&s->lock);
	return NULL;
}

/* Verify a piece read into buf, on every verifying thread; parts[] hold the
 * bad blocks in order. Returns how many parts there are. */
static unsigned verify_piece(struct dc_state *s, const struct dc_piece *pc, const uint8_t *buf)
{
	uint32_t ss = s->ctx->fs->sectorsize;
	uint64_t sectors = pc->len / ss;
	unsigned n = s->nworkers + 1;

	if (sectors < (uint64_t)n * 16)
		n = 1;   /* too small to share */
	s->buf = buf;
	s->csums = pc->csums;
	for (unsigned i = 0; i < n; i++) {
		s->parts[i].start = sectors * i / n * ss;
		s->parts[i].end = sectors * (i + 1) / n * ss;
	}
	if (n == 1) {
		verify_part(s, &s->parts[0]);
		return 1;
	}
	pthread_mutex_lock(&s->lock);
	s->pending = n - 1;
	s->gen++;
	pthread_cond_broadcast(&s->go);
	pthread_mutex_unlock(&s->lock);
	verify_part(s, &s->parts[0]);
	pthread_mutex_lock(&s->lock);
	while (s->pending)
		pthread_cond_wait(&s->done, &s->lock);
	pthread_mutex_unlock(&s->lock);
	return n;
}

/* Verify and report the oldest piece read ahead: 1, 0 when none is queued,
 * or -ECANCELED. */
static int check_piece(struct dc_state *s)
{
	struct check_ctx *ctx = s->ctx;
	struct read_slot *slot = read_pipe_next(s->pipe);
	const struct dc_piece *j;
	unsigned nparts, reported = 0;
	uint64_t total = 0;

	if (!slot)
		return 0;
	j = &s->pieces[slot->index];
	if (slot->seg[0].ret) {
		report_problem(ctx, PR_DATA_UNREADABLE, "data %" PRIu64 "+%" PRIu64 " copy %d (devid %" PRIu64
			       " physical %" PRIu64 "): %s", j->logical, j->len, j->mirror + 1, j->dev->devid,
			       j->physical, strerror(-slot->seg[0].ret));
		read_pipe_release(s->pipe);
		return cli_cancelled() ? -ECANCELED : 1;
	}
	nparts = verify_piece(s, j, slot->seg[0].buf);
	ctx->stats.data_csum_bytes += j->len;
	for (unsigned p = 0; p < nparts; p++) {
		total += s->parts[p].nbad_total;
		for (unsigned b = 0; b < s->parts[p].nbad && reported < PART_BAD_MAX; b++, reported++)
			report_problem(ctx, PR_DATA_CSUM_MISMATCH, "data block %" PRIu64 " copy %d (devid %" PRIu64
				       " %s physical %" PRIu64 ") does not match its checksum",
				       j->logical + s->parts[p].bad[b], j->mirror + 1, j->dev->devid,
				       j->dev->path ? j->dev->path : "?", j->physical + s->parts[p].bad[b]);
	}
	if (total > reported)
		report_problem(ctx, PR_DATA_CSUM_MISMATCH, "data %" PRIu64 "+%" PRIu64 " copy %d: %" PRIu64
			       " more bad blocks", j->logical, j->len, j->mirror + 1, total - reported);
	read_pipe_release(s->pipe);
	progress_update(ctx->progress, ctx->stats.data_csum_bytes);
	return cli_cancelled() ? -ECANCELED : 1;
}

/* Queue the run being filled for reading. */
static void submit_piece(struct dc_state *s)
{
	const struct dc_piece *j;

	if (!s->filling)
		return;
	j = &s->pieces[s->filling->index];
	s->filling->seg[0].io = j->dev->io;
	s->filling->seg[0].offset = j->physical;
	s->filling->seg[0].len = j->len;
	read_pipe_submit(s->pipe);
	s->filling = NULL;
}

/* Append [logical, +len) at physical with its checksums to the run being
 * filled, or start a new run (checking the oldest while none is free). */
static int queue_piece(struct dc_state *s, struct fs_device *dev, int mirror, uint64_t logical, uint64_t physical,
		       uint64_t len, const uint8_t *csums)
{
	struct fs_info *fs = s->ctx->fs;
	struct dc_piece *j = s->filling ? &s->pieces[s->filling->index] : NULL;
	int ret;

	if (j && (j->dev != dev || j->logical + j->len != logical || j->physical + j->len != physical ||
		  j->len + len > s->piece_max)) {
		submit_piece(s);
		j = NULL;
	}
	while (!j) {
		s->filling = read_pipe_fill(s->pipe);
		if (s->filling) {
			j = &s->pieces[s->filling->index];
			j->dev = dev;
			j->mirror = mirror;
			j->logical = logical;
			j->physical = physical;
			j->len = 0;
		} else if ((ret = check_piece(s)) < 0) {
			return ret;
		}
	}
	memcpy(j->csums + j->len / fs->sectorsize * fs->csum_size, csums, len / fs->sectorsize * fs->csum_size);
	j->len += len;
	return 0;
}

/* The checksummed part of [start, end) (one csum item's range within the
 * chunk) that lies on stripe st. */
static int queue_range(struct dc_state *s, const struct dc_stripe *st, uint64_t start, uint64_t end,
		       const uint8_t *csums)
{
	struct fs_info *fs = s->ctx->fs;
	uint64_t pos = start;

	while (pos < end) {
		struct phys_copy copies[MAX_COPIES];
		uint64_t contig, piece;
		int n = volumes_map(fs, pos, fs->sectorsize, copies, &contig), ret;

		if (n < 0)
			return 0; /* unmapped: the chunk phase reports it */
		piece = contig < end - pos ? contig : end - pos;
		piece -= piece % fs->sectorsize;
		if (!piece)
			piece = fs->sectorsize;
		if (piece > s->piece_max)
			piece = s->piece_max;
		for (int c = 0; c < n; c++) {
			if (!copies[c].dev || !copies[c].dev->io || copies[c].devid != st->devid ||
			    copies[c].physical < st->physical || copies[c].physical >= st->physical + st->size)
				continue;
			ret = queue_piece(s, copies[c].dev, c, pos, copies[c].physical, piece,
					  csums + (pos - start) / fs->sectorsize * fs->csum_size);
			if (ret < 0)
				return ret;
		}
		pos += piece;
	}
	return 0;
}

/* Every checksummed run of the chunk of stripe st. */
static int verify_stripe(struct dc_state *s, const struct dc_stripe *st)
{
	struct fs_info *fs = s->ctx->fs;
	const struct chunk *ch = st->chunk;
	struct csum_tree_cursor c;
	const uint8_t *d;
	uint64_t lo, hi;
	int ret;

	ret = csum_tree_open(&c, fs, ch->logical, ch->logical + ch->length);
	while (!ret && (ret = csum_tree_next(&c, &lo, &hi, &d)) == 1)
		ret = queue_range(s, st, lo, hi, d);
	csum_tree_close(&c);
	if (ret < 0 && ret != -ECANCELED && ret != -ENOMEM) {
		report_problem(s->ctx, PR_TREE_BLOCK_UNREADABLE, "csum tree: %s", btk_error_msg());
		ret = 0;
	}
	return ret < 0 ? ret : 0;
}

static int stripe_cmp(const void *x, const void *y)
{
	const struct dc_stripe *p = x, *q = y;

	if (p->devid != q->devid)
		return p->devid < q->devid ? -1 : 1;
	return p->physical < q->physical ? -1 : p->physical > q->physical;
}

static int list_stripes(struct fs_info *fs, struct dc_stripe **out, size_t *count)
{
	size_t n = 0, cap = 0;
	struct dc_stripe *v = NULL;

	for (size_t i = 0; i < fs_chunk_count(fs); i++) {
		const struct chunk *ch = fs_chunk(fs, i);
		uint64_t ssize = chunk_stripe_size(ch->length, ch->type, ch->num_stripes, ch->sub_stripes);
		if (!(ch->type & BTRFS_BLOCK_GROUP_DATA))
			continue;
		for (unsigned k = 0; k < ch->num_stripes; k++) {
			if (n == cap) {
				struct dc_stripe *p = realloc(v, (cap = cap ? cap * 2 : 64) * sizeof(*v));
				if (!p) {
					free(v);
					return -ENOMEM;
				}
				v = p;
			}
			v[n++] = (struct dc_stripe){ ch->stripes[k].devid, ch->stripes[k].physical, ssize, ch };
		}
	}
	if (n)
		qsort(v, n, sizeof(*v), stripe_cmp);
	*out = v;
	*count = n;
	return 0;
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Pipe, checksum buffers and verifying threads (jobs - 1 besides the caller). */
static int dc_setup(struct dc_state *s)
{
	struct check_ctx *ctx = s->ctx;
	struct fs_info *fs = ctx->fs;
	unsigned jobs = ctx->opts->jobs ? ctx->opts->jobs : 1;
	int ret;

	s->piece_max = PIECE_MAX;
	/* all runs together take at most a quarter of the budget */
	while (s->piece_max > 64 * 1024 && PIECES * s->piece_max > ctx->opts->memory_limit / 4)
		s->piece_max /= 2;
	s->piece_max -= s->piece_max % fs->sectorsize;
	if (s->piece_max < fs->sectorsize)
		s->piece_max = fs->sectorsize;
	ret = read_pipe_create(PIECES, 1, s->piece_max, READERS, &s->pipe);
	if (ret)
		return ret;
	for (unsigned i = 0; i < PIECES; i++)
		if (!(s->pieces[i].csums = malloc(s->piece_max / fs->sectorsize * fs->csum_size)))
			return -ENOMEM;
	/* part 0 is the caller's; workers take parts 1.. */
	for (unsigned i = 1; i < jobs && i < MAX_THREADS; i++) {
		struct dc_worker *w = &s->workers[s->nworkers];
		*w = (struct dc_worker){ .s = s, .part = i };
		if (pthread_create(&w->tid, NULL, worker, w))
			break;   /* fewer threads still work */
		s->nworkers++;
	}
	return 0;
}

static void dc_teardown(struct dc_state *s)
{
	pthread_mutex_lock(&s->lock);
	s->stop = true;
	pthread_cond_broadcast(&s->go);
	pthread_mutex_unlock(&s->lock);
	for (unsigned i = 0; i < s->nworkers; i++)
		pthread_join(s->workers[i].tid, NULL);
	read_pipe_destroy(s->pipe);
	for (unsigned i = 0; i < PIECES; i++)
		free(s->pieces[i].csums);
	pthread_cond_destroy(&s->go);
	pthread_cond_destroy(&s->done);
	pthread_mutex_destroy(&s->lock);
}

int check_data_csums(struct check_ctx *ctx)
{
	struct fs_info *fs = ctx->fs;
	struct dc_state *s;
	struct dc_stripe *stripes = NULL;
	size_t nstripes = 0;
	double t0 = now();
	int ret;

	if (!ctx->opts->check_data_csum || !fs->csum_root.bytenr || !fs->csum_size)
		return 0;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->ctx = ctx;
	pthread_mutex_init(&s->lock, NULL);
	pthread_cond_init(&s->go, NULL);
	pthread_cond_init(&s->done, NULL);
	ret = dc_setup(s);
	if (!ret)
		ret = list_stripes(fs, &stripes, &nstripes);
	/* for the percentage and ETA: what the data block groups use, every copy */
	progress_set_total(ctx->progress, check_data_bytes_estimate(fs));
	for (size_t i = 0; !ret && i < nstripes; i++)
		ret = verify_stripe(s, &stripes[i]);
	if (!ret) {
		submit_piece(s);
		while ((ret = check_piece(s)) > 0)
			;
	}
	ctx->stats.data_csum_seconds = now() - t0;
	dc_teardown(s);
	free(stripes);
	free(s);
	return ret == -ECANCELED ? 0 : ret;
}
