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
	FIX_SALVAGE,       /* the block's salvaged view written to a fresh copy-on-write block */
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
	/* extent references and csums (phase_refs.c, phase_csums.c, data_csum.c) */
	PR_EXTENT_REF_MISSING,
	PR_EXTENT_REF_UNUSED,
	PR_EXTENT_REF_COUNT,
	PR_EXTENT_REFS_TOTAL,
	PR_DATA_EXTENT_NOT_ALLOCATED,
	PR_EXTENT_TYPE,
	PR_FILE_EXTENT_BAD_RANGE,
	PR_EXTENT_OWNER_REF,
	PR_CSUM_ITEM_SIZE,
	PR_CSUM_OVERLAP,
	PR_CSUM_OUTSIDE_EXTENT,
	PR_CSUM_MISSING,
	PR_DATA_CSUM_MISMATCH,
	PR_DATA_UNREADABLE,
	PR_QGROUP_MISMATCH,
	PR_INODE_ITEM_MISSING,
	PR_INODE_MODE_INVALID,
	PR_INODE_GENERATION,
	PR_INODE_FLAGS_UNKNOWN,
	PR_INODE_NLINK,
	PR_INODE_UNREACHABLE,
	PR_DIR_ISIZE,
	PR_INODE_NBYTES,
	PR_NAME_HASH,
	PR_DIR_ITEM_MISSING,
	PR_DIR_INDEX_MISSING,
	PR_INODE_REF_MISSING,
	PR_DIR_ENTRY_TYPE,
	PR_DIR_ENTRY_DANGLING,
	PR_DIR_ITEM_INDEX_MISMATCH,
	PR_FILE_EXTENT_OVERLAP,
	PR_FILE_EXTENT_HOLE,
	PR_FILE_EXTENT_INLINE,
	PR_FILE_EXTENT_BAD,
	PR_ORPHAN_ITEM_BAD,
	PR_DIR_PARENT_MISSING,
	PR_ROOT_ITEM_BAD,
	PR_ROOT_BACKREF_MISSING,
	PR_ROOT_REF_MISSING,
	PR_ROOT_REF_MISMATCH,
	PR_ROOT_DIR_ENTRY_MISSING,
	PR_ROOT_DIR_ENTRY_DANGLING,
	PR_ROOT_UNREFERENCED,
	PR_UUID_TREE_MISSING,
	PR_UUID_TREE_EXTRA,
	/* quota groups (phase_qgroups.c) */
	PR_QGROUP_INCONSISTENT,
	PR_QGROUP_ITEM_BAD,
	PR_DEV_ITEM_MISSING,
	PR_INLINE_EXTENT_CORRUPT,
	PR_NAME_INVALID,
	PR_DEV_TOTAL_BYTES,
	PR_EXTENT_GENERATION,
	PR_SUPER_FIELD_BAD,
	/* tree blocks read as their salvaged view (libfs/block_salvage.h, check/salvage_report.c) */
	PR_LEAF_ITEM_OFFSETS,
	PR_KEY_ORDER,
	PR_TREE_BLOCK_LEVEL,
	PR_TREE_BLOCK_TRANSID,
	PR_TREE_BLOCK_FIRST_KEY,
	PR_TREE_BLOCK_NRITEMS,
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
