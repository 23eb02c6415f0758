/* SPDX-License-Identifier: GPL-2.0-only */
/* Verification of the other copies of tree blocks on worker threads (-j):
 * the walk queues each block it checks, workers read and verify its other
 * copies, and the results are handed back in queue order at points that do
 * not depend on the threads (the queue full, the end of a tree), so the
 * report is the same whatever the number of threads. */
#ifndef BTK_CHECK_COPY_VERIFY_H
#define BTK_CHECK_COPY_VERIFY_H

#include <stdint.h>

#include <btk/block.h>
#include <btk/fs.h>
#include <btk/volumes.h>

struct copy_job {
	uint64_t bytenr, generation, tree;
	int level, good, ncopies;                /* good: the copy the walk read */
	enum block_problem problem[MAX_COPIES];  /* of each other copy */
};

/* Called in queue order with each finished job. */
typedef void (*copy_report_fn)(void *arg, const struct copy_job *job);

struct copy_verifier;

/* threads: 0 or 1 verifies on the calling thread (when results are due). */
int copy_verifier_create(struct fs_info *fs, unsigned threads, copy_report_fn report, void *arg,
			 struct copy_verifier **out);
/* Queue a block whose copy `b->mirror` was read and found good. 0 or -errno. */
int copy_verifier_add(struct copy_verifier *cv, uint64_t tree, const struct tree_block *b);
/* Wait for every queued job and report it. */
void copy_verifier_drain(struct copy_verifier *cv);
/* Drains, stops the threads, frees. NULL is fine. */
void copy_verifier_destroy(struct copy_verifier *cv);

#endif
