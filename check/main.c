// SPDX-License-Identifier: GPL-2.0-only
/* btk-check: read-only consistency check of an unmounted btrfs filesystem.
 * Exit codes follow fsck(8). */
#include <argp.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check/check.h"
#include "check/repair.h"
#include "check/repair_notes.h"
#include "common/json_exit.h"
#include "common/messages.h"
#include "common/env_knobs.h"
#include "common/sizes.h"
#include <btk/blockgroups.h>
#include <btk/ebitmap.h>

struct check_args {
	struct check_options opts;
	struct cli_common_options common;
	struct repair_options repair;
	char **paths;
	unsigned npaths;
	bool no;            /* -n */
	bool list_problems; /* --list-problems */
	int progress_fd;    /* -C FD; -1: none */
};

enum { OPT_MEMORY_LIMIT = 256, OPT_CHECK_DATA_CSUM, OPT_REPAIR, OPT_YES, OPT_DRY_RUN, OPT_UNDO_FILE, OPT_NO_UNDO,
       OPT_REBUILD_FST, OPT_REBUILD_UUID, OPT_CLEAR_LOG, OPT_REBUILD_CSUM,
       OPT_REBUILD_EXTENT, OPT_FORMAT, OPT_LIST_PROBLEMS };

static const struct argp_option check_options[] = {
	{ "memory-limit", OPT_MEMORY_LIMIT, "SIZE", 0,
	  "Memory budget (default: a quarter of RAM, at most 4GiB)", 0 },
	{ "jobs", 'j', "N", 0, "Threads for reading and checksumming (default: cores)", 0 },
	{ "format", OPT_FORMAT, "FORMAT", 0, "Output: text (default) or json", 0 },
	{ "force", 'f', NULL, 0, "Check even if the filesystem seems clean (for fsck(8); btk-check always checks)", 0 },
	{ "no", 'n', NULL, 0, "Read-only: repair nothing, answer no to every question (fsck(8) -n)", 0 },
	{ NULL, 'C', "FD", 0, "Write progress to file descriptor FD (0: stdout) as e2fsck's 'pass current max "
	  "device' lines, for fsck(8) -C", 0 },
	{ "list-problems", OPT_LIST_PROBLEMS, NULL, 0, "List every problem id with its phase, severity and repair "
	  "class (with --format json: as JSON), then exit", 0 },
	{ "super", 's', "N", 0, "Use superblock copy N (0, 1 or 2)", 0 },
	{ "check-data-csum", OPT_CHECK_DATA_CSUM, NULL, 0, "Also read every checksummed data block, every copy, and verify it against the csum tree", 0 },
	{ NULL, 0, NULL, 0, "Repair (doc/btk-check.8 lists what each problem's repair does):", 1 },
	{ "repair", OPT_REPAIR, NULL, 0,
	  "Repair what can be repaired safely, one class of problems at a time, each committed "
	  "atomically; asks before each class on a terminal; then checks again", 1 },
	{ "yes", 'y', NULL, 0, "Repair, answering yes to every question (implies --repair; fsck(8) -y)", 1 },
	{ "preen", 'p', NULL, 0, "Repair unattended only what needs no decision (the classes the man page marks "
	  "preen); never ask; exit 4 when anything else is left (fsck(8) -p and -a)", 1 },
	{ NULL, 'a', NULL, OPTION_ALIAS, NULL, 1 },
	{ "dry-run", OPT_DRY_RUN, NULL, 0,
	  "With --repair: say what would be written; open the devices read-only and write nothing", 1 },
	{ "undo-file", OPT_UNDO_FILE, "FILE", 0,
	  "Save the old contents of everything the repair overwrites in FILE (must not exist), for "
	  "btk-undo (default: btk-check-FSID-GENERATION.undo in $BTK_UNDO_DIR or /var/lib/btk/undo)", 1 },
	{ "no-undo", OPT_NO_UNDO, NULL, 0, "Write no undo file", 1 },
	{ "rebuild-free-space-tree", OPT_REBUILD_FST, NULL, 0,
	  "Rebuild the free-space tree from the extent tree even if it looks right (implies --repair)", 1 },
	{ "rebuild-uuid-tree", OPT_REBUILD_UUID, NULL, 0,
	  "Rebuild the uuid tree from the root items even if it looks right (implies --repair)", 1 },
	{ "clear-log", OPT_CLEAR_LOG, NULL, 0,
	  "Clear the log tree instead of replaying it: what programs fsynced since the last commit is "
	  "lost (implies --repair)", 1 },
	{ "rebuild-csum-tree", OPT_REBUILD_CSUM, NULL, 0,
	  "Recompute every data checksum from the data of the checksummed files (implies --repair); "
	  "data that cannot be read is left without checksums", 1 },
	{ "rebuild-extent-tree", OPT_REBUILD_EXTENT, NULL, 0,
	  "Rebuild the whole extent tree (references, block group items, space counters, free-space "
	  "tree) from the trees that use the extents (implies --repair); refused while blocks of other "
	  "trees are unreadable", 1 },
	{ 0 }
};

static uint64_t default_memory_limit(void)
{
	long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
	uint64_t quarter = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 4 : (1ULL << 30);

	return quarter < (4ULL << 30) ? quarter : (4ULL << 30);
}

static error_t check_parse(int key, char *arg, struct argp_state *state)
{
	struct check_args *a = state->input;
	uint64_t v;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &a->common;
		break;
	case OPT_MEMORY_LIMIT:
		if (size_parse(arg, &v) || v < (16ULL << 20))
			argp_error(state, "invalid --memory-limit '%s' (at least 16M)", arg);
		a->opts.memory_limit = v;
		break;
	case 'j':
		if (u64_parse(arg, &v) || v == 0 || v > 256)
			argp_error(state, "invalid --jobs '%s'", arg);
		a->opts.jobs = (unsigned)v;
		break;
	case 'f': break; /* every run checks everything */
	case 'n': a->no = true; break;
	case 'p':
	case 'a': a->repair.preen = a->repair.yes = a->repair.enabled = true; break;
	case 'C':
		if (u64_parse(arg, &v) || v > 1024 * 1024)
			argp_error(state, "invalid -C '%s' (a file descriptor)", arg);
		a->progress_fd = (int)v;
		break;
	case OPT_LIST_PROBLEMS: a->list_problems = true; break;
	case OPT_FORMAT:
		cli_argp_format(state, arg, CLI_FORMAT_MASK(CLI_FORMAT_TEXT) | CLI_FORMAT_MASK(CLI_FORMAT_JSON),
				&a->opts.format);
		break;
	case 's':
		if (strlen(arg) != 1 || arg[0] < '0' || arg[0] > '2')
			argp_error(state, "--super takes 0, 1 or 2");
		a->opts.super_mirror = arg[0] - '0';
		break;
	case OPT_CHECK_DATA_CSUM: a->opts.check_data_csum = true; break;
	case OPT_REPAIR: a->repair.enabled = true; break;
	case 'y': a->repair.yes = a->repair.enabled = true; break;
	case OPT_DRY_RUN: a->repair.dry_run = true; break;
	case OPT_UNDO_FILE: a->repair.undo_path = arg; break;
	case OPT_NO_UNDO: a->repair.no_undo = true; break;
	case OPT_REBUILD_FST: a->repair.rebuild_fst = a->repair.enabled = true; break;
	case OPT_REBUILD_UUID: a->repair.rebuild_uuid = a->repair.enabled = true; break;
	case OPT_CLEAR_LOG: a->repair.clear_log = a->repair.enabled = true; break;
	case OPT_REBUILD_CSUM: a->repair.rebuild_csum = a->repair.enabled = true; break;
	case OPT_REBUILD_EXTENT: a->repair.rebuild_extent = a->repair.enabled = true; break;
	case ARGP_KEY_NO_ARGS:
		if (a->list_problems)
			return 0;
		return cli_argp_devices(key, state, &a->paths, &a->npaths);
	case ARGP_KEY_END:
		if (a->no && a->repair.enabled)
			argp_error(state, "-n (repair nothing) contradicts --repair, -y, -p and the --rebuild options");
		if ((a->repair.yes || a->repair.dry_run || a->repair.undo_path || a->repair.no_undo) &&
		    !a->repair.enabled)
			argp_error(state, "--dry-run, --undo-file and --no-undo go with --repair");
		if (a->repair.undo_path && (a->repair.no_undo || a->repair.dry_run))
			argp_error(state, "--undo-file makes no sense with --no-undo or --dry-run");
		if (a->repair.enabled && !a->repair.yes && !a->repair.dry_run && !isatty(STDIN_FILENO))
			argp_error(state, "--repair asks before each change and stdin is not a terminal: "
				   "give --yes (or --dry-run)");
		break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

static void print_summary(struct check_ctx *ctx)
{
	char s1[SIZE_BUF_LEN];

	if (ctx->opts->format == CLI_FORMAT_JSON) {
		struct json_object *o = json_object_new_object();
		if (ctx->cancelled_phase) {
			json_object_object_add(o, "cancelled", json_object_new_boolean(true));
			json_object_object_add(o, "cancelled_phase", json_object_new_string(ctx->cancelled_phase));
		}
		json_object_object_add(o, "errors", json_object_new_uint64(ctx->errors));
		json_object_object_add(o, "warnings", json_object_new_uint64(ctx->warnings));
		json_object_object_add(o, "tree_blocks", json_object_new_uint64(ctx->stats.tree_blocks));
		json_object_object_add(o, "tree_bytes", json_object_new_uint64(ctx->stats.tree_bytes));
		json_object_object_add(o, "items", json_object_new_uint64(ctx->stats.items));
		json_object_object_add(o, "trees", json_object_new_uint64(ctx->stats.trees));
		json_object_object_add(o, "bytes_used", json_object_new_uint64(super_bytes_used(fs_super(ctx->fs))));
		json_object_object_add(o, "csum_bytes", json_object_new_uint64(ctx->stats.csum_bytes));
		json_object_object_add(o, "inodes", json_object_new_uint64(ctx->stats.inodes));
		json_object_object_add(o, "qgroups_verified", json_object_new_uint64(ctx->stats.qgroups_verified));
		json_object_object_add(o, "ref_records", json_object_new_uint64(ctx->stats.ref_records));
		json_object_object_add(o, "sort_spilled_bytes", json_object_new_uint64(ctx->stats.spilled_bytes));
		json_object_object_add(o, "sort_peak_memory", json_object_new_uint64(ctx->stats.sort_peak_memory));
		if (ctx->opts->check_data_csum) {
			json_object_object_add(o, "data_csum_bytes", json_object_new_uint64(ctx->stats.data_csum_bytes));
			json_object_object_add(o, "data_csum_seconds", json_object_new_double(ctx->stats.data_csum_seconds));
		}
		json_object_object_add(o, "problems", json_object_get(ctx->json_problems));
		check_output_summary(ctx, o);
		return;
	}
	printf("trees checked: %" PRIu64 ", tree blocks: %" PRIu64 " (%s), items: %" PRIu64 "\n",
	       ctx->stats.trees, ctx->stats.tree_blocks,
	       size_format(ctx->stats.tree_bytes, s1, sizeof(s1), SIZE_HUMAN), ctx->stats.items);
	printf("bytes used: %s\n", size_format(super_bytes_used(fs_super(ctx->fs)), s1, sizeof(s1), SIZE_HUMAN));
	printf("csum bytes: %s (data covered by checksums)\n",
	       size_format(ctx->stats.csum_bytes, s1, sizeof(s1), SIZE_HUMAN));
	printf("inodes checked: %" PRIu64 " (in all subvolumes)\n", ctx->stats.inodes);
	if (ctx->stats.qgroups_verified)
		printf("qgroups verified: %" PRIu64 " (referenced and exclusive bytes)\n", ctx->stats.qgroups_verified);
	if (ctx->opts->check_data_csum)
		printf("data verified: %s (all copies) in %.2f s, %.1f MiB/s\n",
		       size_format(ctx->stats.data_csum_bytes, s1, sizeof(s1), SIZE_HUMAN), ctx->stats.data_csum_seconds,
		       ctx->stats.data_csum_seconds > 0 ?
			       (double)ctx->stats.data_csum_bytes / 1048576.0 / ctx->stats.data_csum_seconds : 0.0);
	for (unsigned c = 0; c < PR__COUNT; c++)
		if (ctx->counts[c] > REPORT_SHOW_MAX)
			printf("... and %" PRIu64 " more [%s] not shown\n", ctx->counts[c] - REPORT_SHOW_MAX,
			       problem_lookup(c)->id);
	if (ctx->cancelled_phase)
		printf("check cancelled during %s: results incomplete\n", ctx->cancelled_phase);
	if (ctx->errors || ctx->warnings)
		printf("found %" PRIu64 " error(s), %" PRIu64 " warning(s)%s\n", ctx->errors, ctx->warnings,
		       ctx->cancelled_phase ? " in the phases that finished" : "");
	else if (!ctx->cancelled_phase)
		printf("no problems found\n");
}

int main(int argc, char **argv)
{
	static const struct argp_child children[] = { { &cli_common_argp, 0, NULL, 0 }, { 0 } };
	static const struct argp argp = { check_options, check_parse, "DEVICE...",
		"Check an unmounted btrfs filesystem (read-only), and with --repair repair it. Exit status: "
		"0 clean, 1 errors corrected, 4 errors left uncorrected, 8 operational error, 16 usage "
		"error, 32 cancelled (sums of these when several apply).",
		children, NULL, NULL };
	struct check_args a = { .opts = { .super_mirror = -1, .format = CLI_FORMAT_TEXT }, .progress_fd = -1 };
	struct check_ctx ctx = { 0 };
	struct fs_open_options fo;
	uint64_t cache_max;
	char msg[600];
	int ret;

	cli_init("btk-check", FSCK_EXIT_USAGE);
	json_exit_guard(argc, argv);
	argp_parse(&argp, argc, argv, 0, NULL, &a);
	if (a.list_problems)
		return check_list_problems(a.opts.format);
	/* unattended (fsck -p at boot, the current directory often read-only):
	 * no undo file unless one is named */
	if (a.repair.preen && !a.repair.undo_path)
		a.repair.no_undo = true;
	if (a.progress_fd >= 0)
		progress_machine_output(a.progress_fd ? a.progress_fd : STDOUT_FILENO, a.paths[0]);
	if (!a.opts.memory_limit)
		a.opts.memory_limit = default_memory_limit();
	if (!a.opts.jobs)
		a.opts.jobs = (unsigned)sysconf(_SC_NPROCESSORS_ONLN);
	a.opts.progress = cli_progress_mode(&a.common);
	a.opts.repair = a.repair.enabled;
	cli_enable_cancel();

	fs_open_options_init(&fo);
	fo.super_mirror = a.opts.super_mirror;
	fo.note = msg_fs_note;
	fo.cancelled = cli_cancelled;
	fo.tolerate_damage = true; /* damage is reported by the phases, not an operational error */
	/* the tree-block cache takes at most an eighth of the budget; a check reads
	 * each block once, a repair's transactions come back to the same blocks */
	cache_max = a.repair.enabled ? CHECK_REPAIR_CACHE_MAX : CHECK_BLOCK_CACHE_MAX;
	fo.cache_bytes = a.opts.memory_limit / 8 < cache_max ? a.opts.memory_limit / 8 : cache_max;
	/* a repair's transaction keeps another eighth in dirty tree blocks at most */
	fo.trans_dirty_bytes = a.opts.memory_limit / 8;
	env_knobs_fill(&fo);
	ret = fs_open((const char *const *)a.paths, a.npaths, &fo, &ctx.fs);
	ctx.opts = &a.opts;
	if (ret) {
		/* fsck(8): an open the user cancelled is cancelled, not an operational error */
		int status = btk_error_kind(ret) == BTK_ERR_CANCELLED ? FSCK_EXIT_CANCELLED : FSCK_EXIT_ERROR;
		msg_error("%s", btk_error_text(ret));
		check_output_end_failed(&ctx, status, ret);
		return status;
	}
	check_output_begin(&ctx);
	if (a.repair.enabled && !a.repair.dry_run && (ret = fs_check_device_sizes(ctx.fs))) {
		msg_error("%s", btk_error_msg());
		check_output_end_failed(&ctx, FSCK_EXIT_ERROR, ret);
		fs_close(ctx.fs);
		return FSCK_EXIT_ERROR;
	}
	if (a.repair.enabled && (ret = repair_preflight(ctx.fs, &a.repair, msg, sizeof(msg)))) {
		msg_error("%s", msg);
		check_output_end(&ctx, ret, msg);
		fs_close(ctx.fs);
		return ret;
	}
	ctx.infer_full_backref = a.repair.rebuild_extent;
	ctx.json_problems = json_object_new_array();
	ctx.progress = progress_create("checking", 0, a.opts.progress);
	ret = check_run(&ctx);
	progress_finish(ctx.progress);
	if (ret == 0 || ret == FSCK_EXIT_CANCELLED)
		print_summary(&ctx);
	if (ret == 0 && a.repair.enabled) {
		static const struct repair_hooks hooks = { check_run, print_summary };
		ret = repair_filesystem(&ctx, &a.repair, a.paths, a.npaths, &fo, &hooks);
	} else if (ret == 0 && ctx.errors) {
		ret = FSCK_EXIT_UNCORRECTED;
	}
	check_output_end(&ctx, ret, NULL);
	check_ctx_release(&ctx);
	fs_close(ctx.fs);
	return ret;
}
