// SPDX-License-Identifier: GPL-2.0-only
/* Other copies of tree blocks verified by a small thread pool (see copy_verify.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "check/copy_verify.h"

/* Jobs in flight: enough to keep the threads busy, small enough to cost nothing. */
#define COPY_QUEUE 512

struct copy_verifier {
	struct fs_info *fs;
	copy_report_fn report;
	void *arg;
	struct copy_job ring[COPY_QUEUE];
	bool done[COPY_QUEUE];
	uint64_t head, claimed, tail;   /* reported < head <= claimed <= tail */
	pthread_mutex_t lock;
	pthread_cond_t work, finished;
	pthread_t *threads;
	unsigned nthreads;
	bool stop;
	uint8_t *buf;                   /* for verifying on the calling thread */
};

static void verify_job(struct fs_info *fs, struct copy_job *j, uint8_t *buf)
{
	struct block_expect e = { .generation = j->generation, .level = j->level };

	for (int m = 0; m < j->ncopies; m++)
		j->problem[m] = m == j->good ? BLOCK_OK : block_read_copy(fs, j->bytenr, m, &e, buf);
}

static void *worker(void *arg)
{
	struct copy_verifier *cv = arg;
	uint8_t *buf = malloc(cv->fs->nodesize);

	pthread_mutex_lock(&cv->lock);
	while (buf) {
		uint64_t i;
		while (!cv->stop && cv->claimed == cv->tail)
			pthread_cond_wait(&cv->work, &cv->lock);
		if (cv->claimed == cv->tail)
			break;   /* stopping and nothing left */
		i = cv->claimed++ % COPY_QUEUE;
		pthread_mutex_unlock(&cv->lock);
		verify_job(cv->fs, &cv->ring[i], buf);
		pthread_mutex_lock(&cv->lock);
		cv->done[i] = true;
		pthread_cond_broadcast(&cv->finished);
	}
	pthread_mutex_unlock(&cv->lock);
	free(buf);
	return NULL;
}

int copy_verifier_create(struct fs_info *fs, unsigned threads, copy_report_fn report, void *arg,
			 struct copy_verifier **out)
{
	struct copy_verifier *cv = calloc(1, sizeof(*cv));

	*out = NULL;
	if (!cv || !(cv->buf = malloc(fs->nodesize))) {
		free(cv);
		return -ENOMEM;
	}
	cv->fs = fs;
	cv->report = report;
	cv->arg = arg;
	pthread_mutex_init(&cv->lock, NULL);
	pthread_cond_init(&cv->work, NULL);
	pthread_cond_init(&cv->finished, NULL);
	if (threads > 1 && (cv->threads = calloc(threads, sizeof(*cv->threads)))) {
		for (unsigned t = 0; t < threads; t++)
			if (pthread_create(&cv->threads[t], NULL, worker, cv) == 0)
				cv->nthreads++;
	}
	*out = cv;
	return 0;
}

/* Report the oldest job, verifying it here first when no thread took it. */
static void report_head(struct copy_verifier *cv)
{
	uint64_t i = cv->head % COPY_QUEUE;

	pthread_mutex_lock(&cv->lock);
	if (cv->claimed == cv->head) {   /* nobody started it: do it here */
		cv->claimed++;
		pthread_mutex_unlock(&cv->lock);
		verify_job(cv->fs, &cv->ring[i], cv->buf);
		pthread_mutex_lock(&cv->lock);
		cv->done[i] = true;
	}
	while (!cv->done[i])
		pthread_cond_wait(&cv->finished, &cv->lock);
	cv->done[i] = false;
	pthread_mutex_unlock(&cv->lock);
	cv->report(cv->arg, &cv->ring[i]);
	cv->head++;
}

int copy_verifier_add(struct copy_verifier *cv, uint64_t tree, const struct tree_block *b)
{
	struct copy_job *j;
	int n = volumes_num_copies(cv->fs, b->bytenr);

	if (n > MAX_COPIES)
		n = MAX_COPIES;
	if (cv->tail - cv->head == COPY_QUEUE)
		report_head(cv);   /* a fixed point in the walk, whatever the threads did */
	j = &cv->ring[cv->tail % COPY_QUEUE];
	*j = (struct copy_job){ .bytenr = b->bytenr, .generation = block_generation(b), .tree = tree,
				.level = (int)block_level(b), .good = b->mirror, .ncopies = n > 0 ? n : 0 };
	pthread_mutex_lock(&cv->lock);
	cv->tail++;
	if (cv->nthreads)
		pthread_cond_signal(&cv->work);
	pthread_mutex_unlock(&cv->lock);
	return 0;
}

void copy_verifier_drain(struct copy_verifier *cv)
{
	while (cv->head < cv->tail)
		report_head(cv);
}

void copy_verifier_destroy(struct copy_verifier *cv)
{
	if (!cv)
		return;
	copy_verifier_drain(cv);
	pthread_mutex_lock(&cv->lock);
	cv->stop = true;
	pthread_cond_broadcast(&cv->work);
	pthread_mutex_unlock(&cv->lock);
	for (unsigned t = 0; t < cv->nthreads; t++)
		pthread_join(cv->threads[t], NULL);
	free(cv->threads);
	pthread_mutex_destroy(&cv->lock);
	pthread_cond_destroy(&cv->work);
	pthread_cond_destroy(&cv->finished);
	free(cv->buf);
	free(cv);
}
