/* SPDX-License-Identifier: GPL-2.0-only */
/* btk-check: the context every phase works on. */
#ifndef BTK_CHECK_H
#define BTK_CHECK_H

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "check/problems.h"
#include "common/cli.h"
#include "common/progress.h"
#include <btk/fs.h>

struct ebitmap;
struct fs_feed;
struct fs_lost;
struct repair_notes;
struct qgroup_state;
struct refs_state;
struct recsort;
struct report_pending;
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
	/* trees with blocks (or roots) the walk could not read (phase_trees.c) */
	uint64_t unreadable_trees[8];
	unsigned n_unreadable_trees;   /* more than 8: UINT_MAX */
	/* trees with blocks read as their salvaged view (check/salvage_report.c) */
	uint64_t salvaged_trees[8];
	unsigned n_salvaged_trees;     /* more than 8: UINT_MAX */
	/* trees with blocks from a generation after the filesystem's (phase_trees.c) */
	uint64_t future_trees[8];
	unsigned n_future_trees;       /* more than 8: UINT_MAX */
	/* trees the kernel needs whose root item the root tree lacks (phase_roots.c) */
	unsigned root_items_missing;
};

struct check_ctx {
	struct fs_info *fs;
	const struct check_options *opts;
	uint64_t counts[PR__COUNT];
	uint64_t errors;
	uint64_t warnings;
	struct json_object *json_problems; /* with --format json */
	struct json_object *json_doc;      /* the run's one JSON document (check/output.c) */
	struct progress *progress;
	struct check_stats stats;
	uint64_t metadata_bytes;           /* used in metadata block groups (one copy): sizes the sorters */
	struct ebitmap *visited;           /* tree blocks already checked (logical) */
	/* log tree blocks (not in visited): no extent items until log replay */
	struct ebitmap *log_blocks;
	struct refs_state *refs;           /* phase_refs.c: records collected during the walk */
	/* phase_fs.c -> phase_roots.c: dir entries naming subvolumes (root_rec) */
	struct recsort *subvol_entries;
	/* phase_fs.c -> phase_roots.c: key ranges of unreadable fs-tree blocks (fs_lost.h) */
	struct fs_lost *fs_lost;
	/* phase_trees.c -> phase_fs.c: the subvolume trees' item walk, fed by the tree-block walk */
	struct fs_feed *fs_feed;
	struct qgroup_state *qgroups;      /* phase_qgroups.c: collected during the walk */
	/* the tree phase_trees.c is walking is a deleted subvolume being
	 * dropped: its dropped children are not part of it (NULL: none) */
	const struct tree_drop_progress *walk_drop;
	struct repair_notes *notes;        /* with opts->repair: what the repair classes need (repair_notes.h) */
	/* --rebuild-extent-tree: the references are derived from the trees alone
	 * (which blocks have full backrefs too), not from the extent tree */
	bool infer_full_backref;
	/* the problems of the phase running, shown when it ends and dropped
	 * when it is cancelled (check/report.c) */
	struct report_pending *pending;
	/* set when a run was cancelled: the phase it stopped in */
	const char *cancelled_phase;
	/* set: report_problem hands each problem to it first; true: taken (held
	 * to be reported later, or dropped) -- snapshots' shared verdicts (snap_*.c) */
	bool (*report_hook)(void *arg, enum problem_code code, const char *detail);
	void *report_hook_arg;
	/* the roots the problem being reported holds for (n > 1: snapshots sharing it) */
	const uint64_t *report_roots;
	size_t n_report_roots;
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

/* The sorters share a quarter of the metadata bytes used, at least
 * CHECK_SORT_LIMIT_MIN and at most --memory-limit, each its fraction of
 * that: the records grow with the metadata, and runs of that size still merge
 * in one pass; past them, spilling sorted runs (large sequential writes, read
 * back once) costs less than the memory, so memory use follows the need, not
 * the budget (sort_budget.c). */
#define CHECK_SORT_LIMIT_MIN (128ULL << 20)
/* The tree-block cache at most: the walks of a check read each block once,
 * in order (and hold their paths); a repair's transactions revisit blocks. */
#define CHECK_BLOCK_CACHE_MAX (16ULL << 20)
#define CHECK_REPAIR_CACHE_MAX (256ULL << 20)
/* The budget of a sorter given 1/share of the sorters' part of
 * --memory-limit (above), at least RECSORT_MIN_BUDGET. */
size_t check_sort_budget(const struct check_ctx *ctx, unsigned share);

/* Problems of one kind shown in full; the rest are counted only. */
#define REPORT_SHOW_MAX 1000

/* Record one problem: counts it and prints or collects it per output format
 * (inside a phase: when the phase ends). */
void report_problem(struct check_ctx *ctx, enum problem_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* A phase starts: its problems are held until report_phase_end(), which
 * shows them (finished) or forgets them and their counts (cancelled: a phase
 * stopped half-way reports what it had not joined yet). 0 or -ENOMEM. */
int report_phase_begin(struct check_ctx *ctx);
void report_phase_end(struct check_ctx *ctx, bool finished);

/* The phases; each returns 0 or a negative errno for an operational error
 * (problems found are reported, not returned). */
int check_superblocks(struct check_ctx *ctx);
int check_tree_blocks(struct check_ctx *ctx);
int check_chunks(struct check_ctx *ctx);
/* A block group item (key) whose chunk the chunk map lacks: block-group-no-chunk. */
void check_block_group_chunk(struct check_ctx *ctx, const struct btrfs_key *k);
int check_extents(struct check_ctx *ctx);
int check_refs(struct check_ctx *ctx);
int check_data_csums(struct check_ctx *ctx);
int check_fs_trees(struct check_ctx *ctx);
int check_subvolumes(struct check_ctx *ctx);
int check_qgroups(struct check_ctx *ctx);
int check_log_trees(struct check_ctx *ctx);
int check_root_items(struct check_ctx *ctx);
/* Called by the tree-block walk for every block reached (first: not reached
 * before from another tree): collects the references the block makes. */
int refs_observe_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
		       bool first);
/* Whether tree block bytenr has full backrefs (the extent tree's flag; when
 * the extent tree is rebuilt, what the walk inferred), for blocks reached. */
bool refs_block_full_backref(struct check_ctx *ctx, uint64_t bytenr);
/* The same, for quota groups: the pointers of subvolume blocks (traditional
 * qgroups) or tree-block owners (simple quotas). */
int qgroups_observe_block(struct check_ctx *ctx, const struct tree_root_ptr *root, const struct tree_block *b,
			  bool first);
/* A small set of tree ids in v[0..*n) (past max: every tree, *n UINT_MAX). */
void check_tree_set_add(uint64_t *v, unsigned *n, unsigned max, uint64_t id);
bool check_tree_set_has(const uint64_t *v, unsigned n, uint64_t id);
/* The tree walk could not read a block (or the root) of tree objectid
 * (0: the root tree itself, or which tree is not known). */
void check_note_unreadable_tree(struct check_ctx *ctx, uint64_t objectid);
/* Every unreadable block the walk found lies in one of these n trees. */
bool check_unreadable_only_in(const struct check_ctx *ctx, const uint64_t *trees, unsigned n);
/* Tree objectid may have unreadable blocks. */
bool check_tree_unreadable(const struct check_ctx *ctx, uint64_t objectid);
/* check/salvage_report.c: block b of tree (reached first by the walk) was
 * read as its salvaged view: report what was wrong with it. */
int check_report_salvaged(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b);
/* The keys such a block dropped count as lost in subvolume tree `tree` (each
 * tree that holds it: a snapshot's checks read its items too). */
int check_salvaged_lost(struct check_ctx *ctx, uint64_t tree, const struct tree_block *b);
/* Tree objectid had blocks read as their salvaged view. */
bool check_tree_salvaged(const struct check_ctx *ctx, uint64_t objectid);
/* Free what those collected (ctx->refs, ctx->qgroups, ctx->fs_feed) when their phases did
 * not run to the end (an operational error stopped the run); NULL is fine. */
void refs_free(struct check_ctx *ctx);
void fs_feed_free(struct check_ctx *ctx);
void qgroup_state_free(struct check_ctx *ctx);

/* check/output.c: the filesystem checked (first lines, or "filesystem" in
 * JSON); a run's summary into the JSON document (the first at its top level,
 * the check after a repair as "after_repair"); another top-level member;
 * the document printed with the exit status (and error, if any). */
void check_output_begin(struct check_ctx *ctx);
void check_output_summary(struct check_ctx *ctx, struct json_object *summary);
void check_output_section(struct check_ctx *ctx, const char *key, struct json_object *value);
void check_output_end(struct check_ctx *ctx, int status, const char *error);
/* The same after a libfs call failed with err: its message, and in JSON its
 * kind ("error_kind": io, corrupt, unsupported, busy, ...). */
void check_output_end_failed(struct check_ctx *ctx, int status, int err);
/* --list-problems: the problem registry as text or one JSON document; 0. */
int check_list_problems(enum cli_format format);

/* check/progress_plan.c: the expected cost of a phase of check_run() (in
 * proportion to the others), and the data bytes --check-data-csum reads. */
double check_phase_cost(const struct check_ctx *ctx, const char *phase, uint64_t data_bytes);
uint64_t check_data_bytes_estimate(struct fs_info *fs);

/* Backup slot i of superblock sb is one the check reports (check/phase_super.c). */
bool backup_root_slot_bad(const struct fs_info *fs, const uint8_t *sb, int i);

#endif
