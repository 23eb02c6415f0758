/* SPDX-License-Identifier: GPL-2.0-only */
/* Extent references and checksums: the internals shared by phase_refs.c
 * (the reference joins) and phase_csums.c (the checksum tree against the
 * data extents). */
#ifndef BTK_CHECK_REFS_H
#define BTK_CHECK_REFS_H

#include <stdbool.h>
#include <stdint.h>

#include "check/check.h"

/* A walk of the checksum tree in address order, advanced alongside the data
 * extents of the extent tree (also in address order): item sizes, overlaps,
 * checksums outside every data extent, and how many bytes of each data
 * extent are covered. Memory: one tree path. */
struct csum_cursor;

int csum_cursor_create(struct check_ctx *ctx, struct csum_cursor **out);
/* The next data extent [start, start+len) in address order; *covered gets
 * the bytes of it that have checksums. Reports csum items (wholly or partly)
 * before start that no data extent holds. 0 or -errno. */
int csum_cursor_extent(struct csum_cursor *c, uint64_t start, uint64_t len, uint64_t *covered);
/* No more data extents: the remaining csum items are all outside. */
int csum_cursor_finish(struct csum_cursor *c);
void csum_cursor_destroy(struct csum_cursor *c);

/* Part of a data extent, relative to its start. */
struct csum_need {
	uint64_t lo, hi;
};
/* Bytes of the sorted, disjoint ranges [base+lo, base+hi) that the csum tree
 * does not cover. 0 or -errno. */
int csum_missing_bytes(struct check_ctx *ctx, uint64_t base, const struct csum_need *need, size_t n,
		       uint64_t *missing);

#endif
