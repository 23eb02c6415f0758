/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* Extent bitmaps: a set of unit-aligned byte ranges over the whole 64-bit
 * address space, in memory proportional to its shape rather than its span.
 *
 * The space is cut into regions of 32768 units (128 MiB at a 4 KiB unit).
 * Each region that holds anything is stored in whichever form is smaller:
 *   - up to two runs inline in the region's 16-byte entry (no allocation);
 *   - a sorted array of runs, 4 bytes each;
 *   - a 4 KiB bit chunk, once it has more than 1024 runs (back to runs below
 *     512: the gap keeps a region from flipping on every call);
 *   - completely full regions next to each other share one entry, so a set
 *     range of any length costs 16 bytes.
 * Entries sit in a two-level sorted array with a cursor on the last one used,
 * so sequential set/test calls cost O(1) amortised.
 *
 * All addresses and lengths are bytes and must be multiples of the unit
 * (-EINVAL otherwise); a range may end exactly at 2^64. Nothing prints,
 * nothing aborts; on -ENOMEM a set or clear may have been partly applied, but
 * the bitmap stays consistent. Not thread-safe: one bitmap per thread. */
#ifndef BTK_EBITMAP_H
#define BTK_EBITMAP_H

#include <stdint.h>

struct ebitmap;

/* unit: a power of two >= 2. NULL with errno EINVAL or ENOMEM. */
struct ebitmap *ebitmap_create(uint64_t unit);
void ebitmap_destroy(struct ebitmap *eb);
uint64_t ebitmap_unit(const struct ebitmap *eb);

/* Add or remove [start, start + len). len 0 does nothing. */
int ebitmap_set(struct ebitmap *eb, uint64_t start, uint64_t len);
int ebitmap_clear(struct ebitmap *eb, uint64_t start, uint64_t len);
/* Remove everything (keeps the unit, frees all ranges). */
void ebitmap_clear_all(struct ebitmap *eb);

enum {
	EBITMAP_NONE = 0,         /* no unit of the range is set (also for len 0) */
	EBITMAP_ALL = 1,          /* every unit is set */
	EBITMAP_PARTIAL = 2,      /* some are */
};
/* EBITMAP_NONE / _ALL / _PARTIAL, or -EINVAL. */
int ebitmap_test(struct ebitmap *eb, uint64_t start, uint64_t len);
/* Test, then set: returns what was there before (nonzero: the range overlaps
 * what was already set, e.g. a block visited twice), or -errno. */
int ebitmap_test_and_set(struct ebitmap *eb, uint64_t start, uint64_t len);

/* Bytes set (UINT64_MAX if all of the 2^64 bytes are). */
uint64_t ebitmap_count(const struct ebitmap *eb);

/* The first maximal set range that ends after from: returns 1 with *start >=
 * from and *len, 0 if nothing is set at or after from, or -EINVAL. A range of
 * length 2^64 is reported as 2^64 - unit. */
int ebitmap_next_set(struct ebitmap *eb, uint64_t from, uint64_t *start, uint64_t *len);
/* The first maximal clear range within [from, limit): returns 1 with *start
 * and *len (clipped to limit), 0 if all of [from, limit) is set, or -EINVAL.
 * limit 0 means the end of the address space (2^64). */
int ebitmap_next_clear(struct ebitmap *eb, uint64_t from, uint64_t limit, uint64_t *start,
		       uint64_t *len);

/* Debug statistics. Memory is counted in glibc heap chunk sizes, i.e. what the
 * process pays for each allocation including malloc's own header. */
struct ebitmap_stats {
	uint64_t unit;
	uint64_t bytes_set;
	uint64_t ranges;          /* maximal set ranges (adjacent regions merged) */
	uint64_t memory_bytes;    /* heap in use now, the ebitmap itself included */
	uint64_t peak_memory_bytes;
	double bytes_per_range;   /* memory_bytes / ranges (0 if empty) */
	uint64_t regions_inline;  /* regions holding 1-2 runs in their entry */
	uint64_t regions_runs;    /* regions with an allocated run array */
	uint64_t regions_bits;    /* regions stored as a bit chunk */
	uint64_t regions_full;    /* completely set regions ... */
	uint64_t full_spans;      /* ... and the entries holding them */
	uint64_t leaves;          /* blocks of the entry array */
	uint64_t to_bits, to_runs; /* conversions so far, each direction */
};
void ebitmap_stats(struct ebitmap *eb, struct ebitmap_stats *out);

#endif
