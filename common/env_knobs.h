/* SPDX-License-Identifier: GPL-2.0-only */
/* The test and measurement knobs of the environment ($BTK_TEST_ALLOC_FULL,
 * $BTK_WRITE_LOG, $BTK_TRANS_DIRTY_BUDGET, $BTK_TRANS_REFS_MAX,
 * $BTK_TRANS_STATS, $BTK_RECSORT_RUN_RECORDS, $BTK_RECSORT_RAW): read here,
 * once per open, into the options libfs takes; libfs reads no environment. */
#ifndef BTK_COMMON_ENV_KNOBS_H
#define BTK_COMMON_ENV_KNOBS_H

#include <btk/fs.h>

/* Fill the knobs set in the environment into o, after the program's own
 * choices: a knob that is set wins (tests force small budgets with them);
 * an unset or malformed one leaves o as it is. */
void env_knobs_fill(struct fs_open_options *o);

/* The sorters' part alone, for sorters made without an open (a program's
 * own recsort_create calls take fs->knobs.recsort otherwise). */
void env_knobs_recsort(struct recsort_options *r);

#endif
