/* SPDX-License-Identifier: GPL-2.0-only */
/* A progress line on stderr for long phases:
 *
 *   checking extents: 1.50GiB / 3.00GiB (50.0%), 120.3MiB/s, ETA 0:13
 *
 * Shown when stderr is a terminal (PROGRESS_AUTO), always (PROGRESS_FORCE,
 * for --progress) or never (PROGRESS_OFF); --quiet hides it in any mode
 * (the line is drawn through msg_status_line()). Redrawn at most four times
 * a second. progress_update() and progress_add() may be called from several
 * threads at once; the other calls are for the thread that owns it.
 * Every call accepts NULL and then does nothing, so a failed
 * progress_create() needs no special case. */
#ifndef BTK_COMMON_PROGRESS_H
#define BTK_COMMON_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* PROGRESS_PLAIN (--progress=plain): whole lines for a log, at the end of
 * each phase and every few seconds, no carriage returns. */
enum progress_mode { PROGRESS_AUTO, PROGRESS_FORCE, PROGRESS_OFF, PROGRESS_PLAIN };

struct progress;

/* Start a phase of total bytes (0 when unknown: no percentage or ETA).
 * phase is copied. Returns NULL only when out of memory. */
struct progress *progress_create(const char *phase, uint64_t total, enum progress_mode mode);
/* Set the bytes done so far / add to them; redraw if the last draw is more
 * than a quarter of a second old. */
void progress_update(struct progress *p, uint64_t done);
void progress_add(struct progress *p, uint64_t delta);
/* Set the total of the current phase, for a phase whose size is known only
 * once it has begun (0: unknown). */
void progress_set_total(struct progress *p, uint64_t total);
/* Start the next phase with a fresh clock. The previous phase's final line
 * stays when it took a second or more (always with PROGRESS_PLAIN); a
 * shorter one's is erased, so that quick phases leave no lines behind. */
void progress_next_phase(struct progress *p, const char *phase, uint64_t total);
/* The phases progress_next_phase() will start, in order, with their expected
 * cost (any unit, e.g. seconds per measured rates times sizes): each line
 * then also shows the overall percentage and an ETA for the whole run. */
void progress_plan(struct progress *p, const double *costs, unsigned n);
/* End the last phase as progress_next_phase() would, and free p. */
void progress_finish(struct progress *p);
/* Whether lines are drawn at all (mode and terminal). */
bool progress_enabled(const struct progress *p);

/* Also write e2fsck's machine-readable progress (fsck(8) -C FD) to fd: one
 * "pass current max device" line per redraw and at the end of each phase,
 * pass counting the phases from 1, whatever the mode and verbosity. fd -1
 * turns it off. For the whole process (one filesystem per run). */
void progress_machine_output(int fd, const char *device);

/* What one progress line shows; exposed for the unit tests. */
struct progress_snapshot {
	const char *phase;
	uint64_t done;
	uint64_t total;       /* 0: unknown */
	double elapsed;       /* seconds since the phase started */
	bool finished;        /* show elapsed time instead of the ETA */
	bool has_overall;     /* a planned run (progress_plan): */
	double overall;       /* the share of its cost done, 0..1 */
	double overall_elapsed; /* seconds since its first phase started */
};

/* Format one progress line into buf (len bytes, truncated if short);
 * returns buf. */
const char *progress_format(const struct progress_snapshot *s, char *buf, size_t len);

#endif
