// SPDX-License-Identifier: GPL-2.0-only
/* Test knobs from the environment into libfs options (env_knobs.h). */
#include <stdlib.h>

#include "common/env_knobs.h"
#include "common/sizes.h"

/* A positive count or size from $name (a size may carry K, M, G), 0 when
 * unset, empty or malformed. */
static uint64_t env_size(const char *name)
{
	const char *v = getenv(name);
	uint64_t n;

	if (!v || !*v || size_parse(v, &n))
		return 0;
	return n;
}

void env_knobs_recsort(struct recsort_options *r)
{
	uint64_t n = env_size("BTK_RECSORT_RUN_RECORDS");

	if (n)
		r->run_records = (size_t)n;
	if (getenv("BTK_RECSORT_RAW"))
		r->raw = true;
}

void env_knobs_fill(struct fs_open_options *o)
{
	const char *log = getenv("BTK_WRITE_LOG");
	uint64_t n;

	if (getenv("BTK_TEST_ALLOC_FULL"))
		o->knobs.alloc_full = true;
	if (getenv("BTK_TRANS_STATS"))
		o->knobs.trans_stats = true;
	if ((n = env_size("BTK_TRANS_REFS_MAX")))
		o->knobs.trans_refs_max = (size_t)n;
	if ((n = env_size("BTK_TRANS_DIRTY_BUDGET")))
		o->trans_dirty_bytes = n;
	if (!o->write_log_path && log && *log)
		o->write_log_path = log;
	env_knobs_recsort(&o->knobs.recsort);
}
