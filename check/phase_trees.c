/* Tree blocks: every block of every tree once, every copy of it verified,
 * owners checked. A block shared by snapshots is checked the first time it
 * is reached and its subtree is skipped afterwards. */
#include <inttypes.h>
#include <stdlib.h>

#include "check/check.h"
#include "libfs/block.h"
#include "libfs/ebitmap.h"
#include "libfs/names.h"
#include "libfs/volumes.h"
#include "libfs/walk.h"

struct tree_visit {
	struct check_ctx *ctx;
	const struct tree_root_ptr *root;
	uint8_t *copy_buf;
};

/* Trees whose blocks are never shared: every block's owner is the tree. */
static bool tree_has_fixed_owner(uint64_t id)
{
	return id != BTRFS_FS_TREE_OBJECTID && !(id >= BTRFS_FIRST_FREE_OBJECTID && id <= BTRFS_LAST_FREE_OBJECTID) &&
	       id != BTRFS_TREE_RELOC_OBJECTID && id != BTRFS_DATA_RELOC_TREE_OBJECTID;
}

/* The copy that served the read is good; check the others too. */
static void verify_other_copies(struct tree_visit *v, const struct tree_block *b)
{
	struct fs_info *fs = v->ctx->fs;
	int n = volumes_num_copies(fs, b->bytenr);
	struct block_expect e = { .generation = block_generation(b), .level = (int)block_level(b) };

	for (int m = 0; m < n; m++) {
		enum block_problem p;
		if (m == b->mirror)
			continue;
		p = block_read_copy(fs, b->bytenr, m, &e, v->copy_buf);
		v->ctx->stats.copies_verified++;
		if (p == BLOCK_OK || p == BLOCK_DEV_MISSING)
			continue;
		report_problem(v->ctx, PR_TREE_BLOCK_BAD_COPY, "tree %" PRIu64 ": block %" PRIu64 " copy %d: %s",
			       v->root->objectid, b->bytenr, m + 1, block_problem_name(p));
	}
	/* copies before the good one were already found bad by block_read */
	for (int m = 0; m < b->mirror; m++)
		report_problem(v->ctx, PR_TREE_BLOCK_BAD_COPY, "tree %" PRIu64 ": block %" PRIu64 " copy %d is bad",
			       v->root->objectid, b->bytenr, m + 1);
}

static int visit_block(void *arg, const struct tree_block *b)
{
	struct tree_visit *v = arg;
	struct check_ctx *ctx = v->ctx;
	/* log tree blocks are kept apart: they are not allocated extents (phase_extents.c) */
	struct ebitmap *marks = v->root->objectid == BTRFS_TREE_LOG_OBJECTID ? ctx->log_blocks : ctx->visited;
	int seen = ebitmap_test_and_set(marks, b->bytenr, ctx->fs->nodesize), ret;

	if (seen < 0)
		return seen;
	if ((ret = refs_observe_block(ctx, v->root, b, !seen)) < 0)
		return ret;
	if ((ret = qgroups_observe_block(ctx, v->root, b, !seen)) < 0)
		return ret;
	if (seen)
		return 1; /* shared with a tree already checked: skip its subtree */
	ctx->stats.tree_blocks++;
	ctx->stats.tree_bytes += ctx->fs->nodesize;
	if (block_level(b) == 0)
		ctx->stats.items += block_nritems(b);
	verify_other_copies(v, b);
	if (tree_has_fixed_owner(v->root->objectid) && block_owner(b) != v->root->objectid)
		report_problem(ctx, PR_TREE_BLOCK_OWNER, "tree %" PRIu64 ": block %" PRIu64 " has owner %" PRIu64,
			       v->root->objectid, b->bytenr, block_owner(b));
	progress_update(ctx->progress, ctx->stats.tree_bytes);
	return 0;
}

static void bad_block(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	struct tree_visit *v = arg;

	(void)err;
	report_problem(v->ctx, PR_TREE_BLOCK_UNREADABLE, "tree %" PRIu64 ": block %" PRIu64 " (level %d): %s",
		       v->root->objectid, bytenr, level, why);
}

int check_tree_blocks(struct check_ctx *ctx)
{
	struct fs_info *fs = ctx->fs;
	struct fs_tree_list list;
	struct tree_visit v = { .ctx = ctx };
	int ret;

	ctx->visited = ebitmap_create(fs->sectorsize);
	ebitmap_destroy(ctx->log_blocks); /* from a run before a repair */
	ctx->log_blocks = ebitmap_create(fs->sectorsize);
	v.copy_buf = malloc(fs->nodesize);
	if (!ctx->visited || !ctx->log_blocks || !v.copy_buf) {
		free(v.copy_buf);
		return -ENOMEM;
	}
	ret = fs_list_trees(fs, &list);
	if (ret) {
		free(v.copy_buf);
		report_problem(ctx, PR_TREE_ROOT_UNREADABLE, "root tree: %s", fs->errmsg);
		return 0;
	}
	for (size_t i = 0; i < list.count && !cli_cancelled(); i++) {
		struct tree_walk_ops ops = { visit_block, bad_block, &v };
		v.root = &list.roots[i];
		ctx->stats.trees++;
		ret = tree_walk(fs, v.root, &ops, NULL);
		if (ret == -ENOMEM)
			break;
		if (ret) {
			report_problem(ctx, PR_TREE_ROOT_UNREADABLE, "tree %" PRIu64 " root %" PRIu64 ": %s",
				       v.root->objectid, v.root->bytenr, fs->errmsg);
			ret = 0;
		}
	}
	fs_tree_list_free(&list);
	free(v.copy_buf);
	return ret;
}
