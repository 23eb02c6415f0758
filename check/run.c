// SPDX-License-Identifier: GPL-2.0-only
/* The detection run of btk-check: every phase in order, and the release of
 * what a run leaves in the context (shared by main.c and fuzz/fuzz_check.c). */
#include <string.h>

#include "check/check.h"
#include "check/fs_lost.h"
#include "check/repair_notes.h"
#include "common/messages.h"
#include <btk/blockgroups.h>
#include <btk/ebitmap.h>
#include <btk/recsort.h>

/* The progress total of the tree-block phase: bytes used in metadata and
 * system block groups (one copy), or the superblock's bytes_used if the
 * block groups cannot be read. */
static uint64_t metadata_bytes_used(struct fs_info *fs)
{
	struct block_group_list bgs;
	uint64_t sum = 0;

	if (fs_read_block_groups(fs, &bgs) != 0)
		return super_bytes_used(fs_super(fs));
	for (size_t i = 0; i < bgs.count; i++)
		if (bgs.groups[i].flags & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM))
			sum += bgs.groups[i].used;
	block_group_list_free(&bgs);
	return sum ? sum : super_bytes_used(fs_super(fs));
}

int check_run(struct check_ctx *ctx)
{
	static const struct {
		const char *name;
		int (*run)(struct check_ctx *);
	} phases[] = {
		{ "superblocks", check_superblocks },
		{ "tree blocks", check_tree_blocks },
		{ "chunks and devices", check_chunks },
		{ "extents and free space", check_extents },
		{ "extent references and checksums", check_refs },
		{ "filesystem trees", check_fs_trees },
		{ "subvolumes", check_subvolumes },
		{ "root items", check_root_items },
		{ "quota groups", check_qgroups },
		{ "log trees", check_log_trees },
		{ "data checksums", check_data_csums },
	};

	ctx->metadata_bytes = metadata_bytes_used(ctx->fs);
	if (progress_enabled(ctx->progress)) {
		double cost[sizeof(phases) / sizeof(phases[0])];
		uint64_t data = ctx->opts->check_data_csum ? check_data_bytes_estimate(ctx->fs) : 0;
		for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++)
			cost[i] = check_phase_cost(ctx, phases[i].name, data);
		progress_plan(ctx->progress, cost, sizeof(phases) / sizeof(phases[0]));
	}
	for (size_t i = 0; i < sizeof(phases) / sizeof(phases[0]); i++) {
		int ret;
		if (cli_cancelled()) {
			ctx->cancelled_phase = phases[i].name;
			return FSCK_EXIT_CANCELLED;
		}
		progress_next_phase(ctx->progress, phases[i].name,
				    !strcmp(phases[i].name, "tree blocks") ? ctx->metadata_bytes : 0);
		msg_verbose("checking %s", phases[i].name);
		if ((ret = report_phase_begin(ctx)) == 0)
			ret = phases[i].run(ctx);
		/* a phase the cancel reached may have stopped anywhere: what it found
		 * is not what a whole run would find, so none of it is shown */
		report_phase_end(ctx, !cli_cancelled());
		if (cli_cancelled()) {
			ctx->cancelled_phase = phases[i].name;
			return FSCK_EXIT_CANCELLED;
		}
		if (ret) {
			msg_errno(ret, "%s", phases[i].name);
			return FSCK_EXIT_ERROR;
		}
	}
	return 0;
}

void check_ctx_release(struct check_ctx *ctx)
{
	report_phase_end(ctx, false);
	json_object_put(ctx->json_problems);
	ctx->json_problems = NULL;
	json_object_put(ctx->json_doc);
	ctx->json_doc = NULL;
	ebitmap_destroy(ctx->visited);
	ctx->visited = NULL;
	ebitmap_destroy(ctx->log_blocks);
	ctx->log_blocks = NULL;
	refs_free(ctx);
	fs_feed_free(ctx);
	qgroup_state_free(ctx);
	recsort_destroy(ctx->subvol_entries);
	ctx->subvol_entries = NULL;
	fs_lost_destroy(ctx->fs_lost);
	ctx->fs_lost = NULL;
	repair_notes_free(ctx);
}
