/* The problem table: every problem btk-check can report, with a stable id,
 * a severity, and whether and how --repair can fix it. Detectors call
 * report_problem() (check/report.h) with a code from here; wording and
 * output formats live in one place. */
#ifndef BTK_CHECK_PROBLEMS_H
#define BTK_CHECK_PROBLEMS_H

#include <stdbool.h>

enum problem_severity { SEV_WARNING, SEV_ERROR };

/* How a problem is repaired (or why it is not). */
enum problem_fix {
	FIX_NONE,          /* reported only */
	FIX_FROM_MIRROR,   /* rewrite the bad copy from a good one */
	FIX_RECOMPUTE,     /* recompute a counter or a derived tree */
	FIX_REFS,          /* add / remove / correct extent references */
	FIX_INODE,         /* inode fields, links, names */
};

/* Stable numeric codes: never renumber, only append. */
enum problem_code {
	PR_SUPER_COPY_INVALID = 1,
	PR_SUPER_COPY_STALE,
	PR_SUPER_COPY_DIFFERS,
	PR_SUPER_BACKUP_ROOT_BAD,
	PR_SUPER_BYTES_USED,
	PR_SUPER_TOTAL_BYTES,
	PR_TREE_BLOCK_BAD_COPY,
	PR_TREE_BLOCK_UNREADABLE,
	PR_TREE_BLOCK_OWNER,
	PR_TREE_BLOCK_DOUBLE_REF,
	PR_TREE_ROOT_UNREADABLE,
	PR_ITEM_MALFORMED,
	PR_ITEM_UNKNOWN_TYPE,
	PR_CHUNK_NO_DEV_EXTENT,
	PR_DEV_EXTENT_NO_CHUNK,
	PR_DEV_EXTENT_MISMATCH,
	PR_DEV_EXTENT_OVERLAP,
	PR_DEV_EXTENT_BEYOND_DEVICE,
	PR_DEV_BYTES_USED,
	PR_SYS_CHUNK_NOT_IN_TREE,
	PR_SYS_CHUNK_MISSING,
	PR_CHUNK_NO_BLOCK_GROUP,
	PR_BLOCK_GROUP_NO_CHUNK,
	PR_BLOCK_GROUP_FLAGS,
	PR_DEVICE_MISSING,
	PR_EXTENT_OVERLAP,
	PR_EXTENT_OUTSIDE_CHUNK,
	PR_TREE_BLOCK_NOT_ALLOCATED,
	PR_TREE_BLOCK_LEAKED,
	PR_BLOCK_GROUP_USED,
	PR_FREE_SPACE_MISMATCH,
	PR_FREE_SPACE_INFO_COUNT,
	PR__COUNT
};

struct problem_def {
	enum problem_code code;
	const char *id;            /* stable text id, e.g. "tree-block-bad-copy" */
	enum problem_severity severity;
	enum problem_fix fix;
	const char *summary;       /* one line: what is wrong */
};

/* The definition of a code, or NULL for an unknown code. */
const struct problem_def *problem_lookup(enum problem_code code);
/* The whole table (for --list-problems and the table unit test). */
const struct problem_def *problem_table(unsigned *count);

#endif
