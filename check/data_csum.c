/* --check-data-csum: read every checksummed data block, every copy of it,
 * and verify it against the csum tree. Device stripes are visited in
 * physical order (sorted by device and offset), each read in large
 * sequential pieces; the pieces of one round are read and checksummed on
 * --jobs threads while the main thread only walks the csum tree and reports.
 * Memory: 2 * jobs pieces of at most 4 MiB (less under a small budget). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "check/refs.h"
#include "libfs/csum.h"
#include "libfs/csum_tree.h"
#include "libfs/io.h"
#include "libfs/volumes.h"

#define JOB_BAD_MAX 16

/* One contiguous piece of one copy. */
struct dc_job {
	struct fs_device *dev;
	int mirror;
	uint64_t logical, physical, len;
	uint8_t *buf;
	uint8_t *csums;               /* len / sectorsize checksums */
	int err;                      /* read error */
	unsigned nbad;
	uint64_t bad[JOB_BAD_MAX];    /* offsets of bad blocks in the piece */
	uint64_t nbad_total;
};

/* A stripe of a data chunk: where one device holds part of it. */
struct dc_stripe {
	uint64_t devid, physical, size;
	const struct chunk *chunk;
};

struct dc_state {
	struct check_ctx *ctx;
	struct dc_job *jobs;
	unsigned njobs, max_jobs, threads;
	uint64_t job_bytes;           /* largest piece */
	unsigned next;                /* next job for a worker */
	pthread_mutex_t lock;
};

static void verify_job(struct dc_state *s, struct dc_job *j)
{
	struct fs_info *fs = s->ctx->fs;
	uint8_t sum[BTRFS_CSUM_SIZE];

	j->nbad = 0;
	j->nbad_total = 0;
	j->err = io_read(j->dev->io, j->buf, j->len, j->physical);
	if (j->err)
		return;
	for (uint64_t off = 0, i = 0; off < j->len; off += fs->sectorsize, i++) {
		csum_compute(fs->csum_type, j->buf + off, fs->sectorsize, sum);
		if (memcmp(sum, j->csums + i * fs->csum_size, fs->csum_size)) {
			if (j->nbad < JOB_BAD_MAX)
				j->bad[j->nbad++] = off;
			j->nbad_total++;
		}
	}
}

static void *worker(void *arg)
{
	struct dc_state *s = arg;

	for (;;) {
		unsigned i;
		pthread_mutex_lock(&s->lock);
		i = s->next++;
		pthread_mutex_unlock(&s->lock);
		if (i >= s->njobs)
			return NULL;
		verify_job(s, &s->jobs[i]);
	}
}

/* Verify the queued pieces on the worker threads, then report. */
static int run_round(struct dc_state *s)
{
	struct check_ctx *ctx = s->ctx;
	pthread_t tids[64];
	unsigned started = 0, n = s->threads < s->njobs ? s->threads : s->njobs;

	s->next = 0;
	for (unsigned i = 1; i < n; i++)
		if (pthread_create(&tids[started], NULL, worker, s) == 0)
			started++;
	worker(s);
	for (unsigned i = 0; i < started; i++)
		pthread_join(tids[i], NULL);
	for (unsigned i = 0; i < s->njobs; i++) {
		struct dc_job *j = &s->jobs[i];
		if (j->err) {
			refs_report(ctx, PR_DATA_UNREADABLE, "data %" PRIu64 "+%" PRIu64 " copy %d (devid %" PRIu64
				    " physical %" PRIu64 "): %s", j->logical, j->len, j->mirror + 1, j->dev->devid,
				    j->physical, strerror(-j->err));
			continue;
		}
		ctx->stats.data_csum_bytes += j->len;
		for (unsigned b = 0; b < j->nbad; b++)
			refs_report(ctx, PR_DATA_CSUM_MISMATCH, "data block %" PRIu64 " copy %d (devid %" PRIu64
				    " %s physical %" PRIu64 ") does not match its checksum", j->logical + j->bad[b],
				    j->mirror + 1, j->dev->devid, j->dev->path ? j->dev->path : "?",
				    j->physical + j->bad[b]);
		if (j->nbad_total > j->nbad)
			refs_report(ctx, PR_DATA_CSUM_MISMATCH, "data %" PRIu64 "+%" PRIu64 " copy %d: %" PRIu64
				    " more bad blocks", j->logical, j->len, j->mirror + 1, j->nbad_total - j->nbad);
	}
	s->njobs = 0;
	progress_update(ctx->progress, ctx->stats.data_csum_bytes);
	return cli_cancelled() ? -ECANCELED : 0;
}

/* Append [logical, +len) at physical with its checksums to the queue. */
static int queue_piece(struct dc_state *s, struct fs_device *dev, int mirror, uint64_t logical, uint64_t physical,
		       uint64_t len, const uint8_t *csums)
{
	struct fs_info *fs = s->ctx->fs;
	struct dc_job *j = s->njobs ? &s->jobs[s->njobs - 1] : NULL;
	int ret;

	if (!j || j->dev != dev || j->logical + j->len != logical || j->physical + j->len != physical ||
	    j->len + len > s->job_bytes) {
		if (s->njobs == s->max_jobs && (ret = run_round(s)) < 0)
			return ret;
		j = &s->jobs[s->njobs++];
		j->dev = dev;
		j->mirror = mirror;
		j->logical = logical;
		j->physical = physical;
		j->len = 0;
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
		if (piece > s->job_bytes)
			piece = s->job_bytes;
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
		report_problem(s->ctx, PR_TREE_BLOCK_UNREADABLE, "csum tree: %s", fs->errmsg);
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

	for (size_t i = 0; i < fs->chunks->count; i++) {
		const struct chunk *ch = fs->chunks->chunks[i];
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

int check_data_csums(struct check_ctx *ctx)
{
	struct fs_info *fs = ctx->fs;
	struct dc_state s = { .ctx = ctx };
	struct dc_stripe *stripes = NULL;
	size_t nstripes = 0;
	double t0 = now();
	int ret;

	if (!ctx->opts->check_data_csum || !fs->csum_root.bytenr || !fs->csum_size)
		return 0;
	s.threads = ctx->opts->jobs ? (ctx->opts->jobs > 64 ? 64 : ctx->opts->jobs) : 1;
	s.max_jobs = 2 * s.threads;
	s.job_bytes = 4ULL << 20;
	/* all pieces together take at most a quarter of the budget */
	while (s.job_bytes > 64 * 1024 && s.max_jobs * s.job_bytes > ctx->opts->memory_limit / 4)
		s.job_bytes /= 2;
	s.job_bytes -= s.job_bytes % fs->sectorsize;
	pthread_mutex_init(&s.lock, NULL);
	s.jobs = calloc(s.max_jobs, sizeof(*s.jobs));
	ret = s.jobs ? list_stripes(fs, &stripes, &nstripes) : -ENOMEM;
	for (unsigned i = 0; !ret && i < s.max_jobs; i++) {
		s.jobs[i].buf = malloc(s.job_bytes);
		s.jobs[i].csums = malloc(s.job_bytes / fs->sectorsize * fs->csum_size);
		if (!s.jobs[i].buf || !s.jobs[i].csums)
			ret = -ENOMEM;
	}
	for (size_t i = 0; !ret && i < nstripes; i++)
		ret = verify_stripe(&s, &stripes[i]);
	if (!ret && s.njobs)
		ret = run_round(&s);
	ctx->stats.data_csum_seconds = now() - t0;
	for (unsigned i = 0; s.jobs && i < s.max_jobs; i++) {
		free(s.jobs[i].buf);
		free(s.jobs[i].csums);
	}
	free(s.jobs);
	free(stripes);
	pthread_mutex_destroy(&s.lock);
	return ret == -ECANCELED ? 0 : ret;
}
