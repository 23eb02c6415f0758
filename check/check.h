/* btk-check: the context every phase works on. */
#ifndef BTK_CHECK_H
#define BTK_CHECK_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "check/problems.h"
#include "common/cli.h"
#include "common/progress.h"
#include "libfs/fs.h"

struct ebitmap;
struct repair_notes;
struct qgroup_state;
struct refs_state;
struct recsort;
struct tree_block;

struct check_options {
	uint64_t memory_limit;
	unsigned jobs;
	enum cli_format format;
	int super_mirror;
	bool check_data_csum;
	enum progress_mode progress;
	bool repair;               /* a --repair run: detectors also note what to fix (repair_notes.h) */
};

struct check_stats {
	uint64_t tree_blocks;      /* distinct tree blocks read */
	uint64_t tree_bytes;
	uint64_t copies_verified;  /* extra copies (mirrors) verified */
	uint64_t items;
	uint64_t trees;
	uint64_t extent_items;
	uint64_t data_bytes;      /* bytes of data extents */
	uint64_t csum_bytes;      /* data bytes the csum tree covers */
	uint64_t ref_records;     /* reference records sorted (phase_refs.c) */
	uint64_t spilled_bytes;   /* written to $TMPDIR by the sorters */
	uint64_t sort_peak_memory;
	uint64_t data_csum_bytes; /* --check-data-csum: bytes read and verified (all copies) */
	double data_csum_seconds;
	uint64_t inodes;          /* inode items of the subvolume trees (phase_fs.c) */
	uint64_t qgroups_verified; /* qgroups whose numbers were compared with the extents */
};

struct check_ctx {
	struct fs_info *fs;
	const struct check_options *opts;
	uint64_t counts[PR__COUNT];
	uint64_t errors;
	uint64_t warnings;
	struct json_object *json_problems; /* with --format json */
	struct progress *progress;
	struct check_stats stats;
	struct ebitmap *visited;           /* tree blocks already checked (logical) */
	/* log tree blocks (not in visited): no extent items until log replay */
	struct ebitmap *log_blocks;
	struct refs_state *refs;           /* phase_refs.c: records collected during the walk */
	/* phase_fs.c -> phase_roots.c: dir entries naming subvolumes (root_rec) */
	struct recsort *subvol_entries;
	struct qgroup_state *qgroups;      /* phase_qgroups.c: collected during the walk */
	struct repair_notes *notes;        /* with opts->repair: what the repair classes need (repair_notes.h) */
};

/* Forget the results of a run (counts, statistics, per-run state) before
 * checking again after a repair (check/repair.c): per-run state added to
 * check_ctx must be released here too. */
void check_ctx_reset(struct check_ctx *ctx);

/* Run every detection phase in order (check/run.c): 0, FSCK_EXIT_ERROR after
 * an operational error (reported) or FSCK_EXIT_CANCELLED. */
int check_run(struct check_ctx *ctx);
/* Free what a run left in the context (not the filesystem). */
void check_ctx_release(struct check_ctx *ctx);

/* Problems of one kind shown in full; the rest are counted only. */
#define REPORT_SHOW_MAX 1000

/* Record one problem: counts it and prints or collects it per output format. */
void report_problem(struct check_ctx *ctx, enum problem_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The phases; each returns 0 or a negative errno for an operational error
 * (problems found are reported, not returned). */
int check_superblocks(struct check_ctx *ctx);
int check_tree_blocks(struct check_ctx *ctx);
int check_chunks(struct check_ctx *ctx);
int check_extents(struct check_ctx *ctx);
int check_refs(struct check_ctx *ctx);
int check_data_csums(struct check_ctx *ctx);
int check_fs_trees(struct check_ctx *ctx);
int check_subvolumes(struct check_ctx *ctx);
int check_qgroups(struct check_ctx *ctx);
/* Called by the tree-block walk for every block reached (first: not reached
 * before from another tree): collects the references the block makes. */
int refs_observe_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
		       bool first);
/* The same, for quota groups: the pointers of subvolume blocks (traditional
 * qgroups) or tree-block owners (simple quotas). */
int qgroups_observe_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
			  bool first);
/* Free what those collected (ctx->refs, ctx->qgroups) when their phases did
 * not run to the end (an operational error stopped the run); NULL is fine. */
void refs_free(struct check_ctx *ctx);
void qgroup_state_free(struct check_ctx *ctx);

#endif
