/* SPDX-License-Identifier: GPL-2.0-only */
/* The problem table: every problem btk-check can report, with a stable id,
 * a severity, its detector and the --repair classes that fix it (the
 * registry check/problems.def). Detectors call
 * report_problem() (check/report.h) with a code from here; wording and
 * output formats live in one place. */
#ifndef BTK_CHECK_PROBLEMS_H
#define BTK_CHECK_PROBLEMS_H

#include <stdbool.h>

enum problem_severity { SEV_WARNING, SEV_ERROR };

/* Stable numeric codes, from the registry check/problems.def: never
 * renumber, only append. */
enum problem_code {
	PR__NONE = 0, /* ends code lists */
#define PROBLEM(code, id, severity, detector, classes, summary, man) PR_##code,
#include "check/problems.def"
#undef PROBLEM
	PR__COUNT
};

struct problem_def {
	enum problem_code code;
	const char *id;            /* stable text id, e.g. "tree-block-bad-copy" */
	enum problem_severity severity;
	const char *summary;       /* one line: what is wrong */
	const char *detector;      /* the check/ files that report it; NULL: never reported */
	const char *classes;       /* the repair classes that fix it (space-separated); NULL: none */
	const char *man;           /* more for the man page, or NULL */
};

/* The definition of a code, or NULL for an unknown code. */
const struct problem_def *problem_lookup(enum problem_code code);
/* The whole table (for --list-problems and the table unit test). */
const struct problem_def *problem_table(unsigned *count);

#endif
