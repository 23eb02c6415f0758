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

struct check_options {
	uint64_t memory_limit;
	unsigned jobs;
	enum cli_format format;
	int super_mirror;
	bool check_data_csum;
	enum progress_mode progress;
};

struct check_stats {
	uint64_t tree_blocks;      /* distinct tree blocks read */
	uint64_t tree_bytes;
	uint64_t copies_verified;  /* extra copies (mirrors) verified */
	uint64_t items;
	uint64_t trees;
	uint64_t extent_items;
	uint64_t data_bytes;      /* bytes of data extents */
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
};

/* Record one problem: counts it and prints or collects it per output format. */
void report_problem(struct check_ctx *ctx, enum problem_code code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The phases; each returns 0 or a negative errno for an operational error
 * (problems found are reported, not returned). */
int check_superblocks(struct check_ctx *ctx);
int check_tree_blocks(struct check_ctx *ctx);
int check_chunks(struct check_ctx *ctx);
int check_extents(struct check_ctx *ctx);

#endif
