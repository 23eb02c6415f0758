// SPDX-License-Identifier: GPL-2.0-only
/* The memory budget each record sort of the check gets: a share of a
 * quarter of the metadata, within --memory-limit. Used by the phases that
 * run.c calls, so it lives below run.c. */
#include "check/check.h"
#include <btk/recsort.h>

size_t check_sort_budget(const struct check_ctx *ctx, unsigned share)
{
	uint64_t limit = ctx->metadata_bytes / 4, b;

	if (limit < CHECK_SORT_LIMIT_MIN)
		limit = CHECK_SORT_LIMIT_MIN;
	if (limit > ctx->opts->memory_limit)
		limit = ctx->opts->memory_limit;
	b = limit / (share ? share : 1);

	return b < RECSORT_MIN_BUDGET ? RECSORT_MIN_BUDGET : (size_t)b;
}
