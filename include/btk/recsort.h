/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Record streams with spill: sort fixed-size records within a memory budget,
 * spilling sorted runs to a temporary file when over it, then read them back
 * in order through a k-way merge; and a merge-join of two such streams.
 *
 * Memory: the budget covers everything recsort allocates: one arena (an
 * anonymous mapping of about 15/16 of the budget, touched only as it fills;
 * it holds the records being collected, then the read buffers of the merge)
 * plus the run table and merge state in the rest. Records are sorted in place
 * (an introsort, not glibc's qsort_r, which would allocate a second copy).
 * Every merge reads each run through a buffer of at least 4 KiB (and at least
 * 1/256 of the arena); when the runs are too many for that, the smallest are
 * merged first. While collecting, every 'fan-in' runs of one size are merged
 * into one, so the run table stays small whatever the input.
 *
 * Disk: one spill file per sorter, made with mkstemp in tmpdir and unlinked at
 * once (nothing is left behind, even after a crash); space already read back
 * is punched out of it when the file system allows. Runs are written as
 * lz4-compressed frames (sorted records compress well), so the bytes spilled
 * (recsort_stats.spilled_bytes) are the compressed ones; recsort_options.raw
 * (measurements) stores them uncompressed.
 *
 * Records are stored record_size apart from an aligned base, so records of a
 * C type (record_size = sizeof(T)) are correctly aligned for the comparator and
 * the reader. Records that compare equal come out in no particular order.
 * Nothing prints; errors are -errno and stick: after one, every call returns it. */
#ifndef BTK_RECSORT_H
#define BTK_RECSORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* <0, 0, >0 like memcmp. With jobs > 1 it is called from several threads. */
typedef int (*recsort_cmp_fn)(const void *a, const void *b, void *arg);

struct recsort;

/* Where and how a sorter spills; NULL options (or zero fields) are the defaults. */
struct recsort_options {
	const char *tmpdir;   /* NULL: $TMPDIR, else /tmp */
	size_t run_records;   /* tests, fuzzing: cap a run in memory at this many records, so small inputs spill */
	bool raw;             /* measurements: spill uncompressed */
};

/* record_size: 1..65536. memory_budget: at least RECSORT_MIN_BUDGET (and room
 * for a few 4 KiB buffers of records). NULL with errno EINVAL or ENOMEM. */
#define RECSORT_MIN_BUDGET (64 * 1024)
struct recsort *recsort_create(size_t record_size, recsort_cmp_fn cmp, void *arg,
			       size_t memory_budget, const struct recsort_options *opts);
/* Sort runs on this many threads (default 1; at most 64); before the first add. */
int recsort_set_jobs(struct recsort *rs, unsigned jobs);
/* Copy one record in. May sort and spill a run (and merge runs on disk). */
int recsort_add(struct recsort *rs, const void *record);
/* No more records: sort what is in memory and prepare to read. */
int recsort_finish(struct recsort *rs);
/* The next record in order: 1 and *record (valid until the next call), 0 at
 * the end, or -errno. Only after recsort_finish. */
int recsort_next(struct recsort *rs, const void **record);
/* Frees memory and closes the spill file (which has no name already). */
void recsort_destroy(struct recsort *rs);
size_t recsort_record_size(const struct recsort *rs);

struct recsort_stats {
	uint64_t records;         /* added */
	uint64_t runs;            /* sorted runs written to disk */
	uint64_t merges;          /* runs merged on disk into a longer run */
	uint64_t spilled_bytes;   /* written to disk, all passes */
	uint64_t memory;          /* in use now: arena pages touched + metadata */
	uint64_t peak_memory;
	uint64_t budget;
};
void recsort_get_stats(const struct recsort *rs, struct recsort_stats *out);

/* ---- merge-join -------------------------------------------------------------
 * Walk two finished sorters in key order and hand each key to a callback with
 * all its records from both sides: the reference checks of the checker (what
 * the trees were observed to reference vs what the extent tree declares). */
enum recjoin_kind {
	RECJOIN_LEFT_ONLY,
	RECJOIN_RIGHT_ONLY,
	RECJOIN_BOTH,
};

struct recjoin_group {
	enum recjoin_kind kind;
	const void *left;         /* nleft records, left record size apart */
	size_t nleft;
	const void *right;        /* nright records, right record size apart */
	size_t nright;
};

struct recjoin {
	struct recsort *left, *right;         /* finished, not yet read */
	/* Instead of right (NULL): records of right_size bytes already in key
	 * order, pulled one at a time: 1 and *rec (valid until the next call),
	 * 0 at the end, or -errno. For a side that comes sorted (a tree scan),
	 * so it is never stored. */
	int (*right_next)(void *right_arg, const void **rec);
	void *right_arg;
	size_t right_size;
	/* Key order between a left and a right record; both sorters must be
	 * sorted consistently with it. */
	int (*cmp)(const void *left, const void *right, void *arg);
	/* Key equality within one side, to group records that have no match on
	 * the other side. NULL: each such record is a group of its own. */
	int (*cmp_left)(const void *a, const void *b, void *arg);
	int (*cmp_right)(const void *a, const void *b, void *arg);
	/* Called once per key; nonzero stops the join and is returned. The
	 * records are valid during the call only. */
	int (*group)(const struct recjoin_group *g, void *arg);
	void *arg;
	/* Filled in by recjoin_run. */
	uint64_t groups[3];                   /* by enum recjoin_kind */
	size_t peak_group_bytes;              /* largest group buffer (heap) */
};

/* 0 when both sides are exhausted, the callback's nonzero value, or -errno. */
int recjoin_run(struct recjoin *join);

#endif
