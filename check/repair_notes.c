// SPDX-License-Identifier: GPL-2.0-only
/* The repair notes: spilling sorters, one per list, hung off the check context. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/repair_notes.h"
#include <btk/recsort.h>

struct repair_notes {
	struct recsort *lists[NOTES__COUNT];
	uint64_t counts[NOTES__COUNT];
	bool finished[NOTES__COUNT];
	uint64_t unfixable;
	int err;                 /* the first error: noting stops */
};

static int cmp_u64(uint64_t x, uint64_t y)
{
	return x < y ? -1 : x > y;
}

static int extent_fix_cmp(const void *x, const void *y, void *arg)
{
	const struct extent_fix *p = x, *q = y;
	int r;

	(void)arg;
	if ((r = cmp_u64(p->bytenr, q->bytenr)) || (r = cmp_u64(p->type, q->type)) || (r = cmp_u64(p->a, q->a)) ||
	    (r = cmp_u64(p->b, q->b)))
		return r;
	return cmp_u64(p->c, q->c);
}

static int claim_cmp(const void *x, const void *y, void *arg)
{
	(void)arg;
	return cmp_u64(((const struct extent_claim *)x)->bytenr, ((const struct extent_claim *)y)->bytenr);
}

static int inode_fix_cmp(const void *x, const void *y, void *arg)
{
	const struct inode_fix *p = x, *q = y;
	int r;

	(void)arg;
	if ((r = cmp_u64(p->root, q->root)) || (r = cmp_u64(p->ino, q->ino)))
		return r;
	return cmp_u64(p->code, q->code);
}

static int name_fix_cmp(const void *x, const void *y, void *arg)
{
	const struct name_fix *p = x, *q = y;
	int r;

	(void)arg;
	if ((r = cmp_u64(p->root, q->root)) || (r = cmp_u64(p->dir, q->dir)) || (r = cmp_u64(p->child, q->child)))
		return r;
	return cmp_u64(p->code, q->code);
}

static int qgroup_fix_cmp(const void *x, const void *y, void *arg)
{
	(void)arg;
	return cmp_u64(((const struct qgroup_fix *)x)->id, ((const struct qgroup_fix *)y)->id);
}

static int bytenr_fix_cmp(const void *x, const void *y, void *arg)
{
	const struct bytenr_fix *p = x, *q = y;
	int r;

	(void)arg;
	if ((r = cmp_u64(p->root, q->root)) || (r = cmp_u64(p->ino, q->ino)) || (r = cmp_u64(p->offset, q->offset)) ||
	    (r = cmp_u64(p->kind, q->kind)))
		return r;
	return cmp_u64(p->bytenr, q->bytenr);
}

static struct repair_notes *notes_get(struct check_ctx *ctx)
{
	static const struct {
		size_t size;
		recsort_cmp_fn cmp;
	} kinds[NOTES__COUNT] = {
		[NOTES_EXTENTS] = { sizeof(struct extent_fix), extent_fix_cmp },
		[NOTES_CLAIMS] = { sizeof(struct extent_claim), claim_cmp },
		[NOTES_INODES] = { sizeof(struct inode_fix), inode_fix_cmp },
		[NOTES_NAMES] = { sizeof(struct name_fix), name_fix_cmp },
		[NOTES_QGROUPS] = { sizeof(struct qgroup_fix), qgroup_fix_cmp },
		[NOTES_BYTENRS] = { sizeof(struct bytenr_fix), bytenr_fix_cmp },
		[NOTES_NODATASUM] = { sizeof(struct inode_fix), inode_fix_cmp },
		[NOTES_DIR_LINKS] = { sizeof(struct inode_fix), inode_fix_cmp },
		[NOTES_FILE_EXTENTS] = { sizeof(struct inode_fix), inode_fix_cmp },
		[NOTES_HOLES] = { sizeof(struct bytenr_fix), bytenr_fix_cmp },
		[NOTES_FE_FIELDS] = { sizeof(struct inode_fix), inode_fix_cmp },
		[NOTES_FE_OVERLAP] = { sizeof(struct inode_fix), inode_fix_cmp },
		[NOTES_PLACEHOLDERS] = { sizeof(struct name_fix), name_fix_cmp },
	};
	/* a sixteenth of the budget each: small next to the reference sorters */
	size_t budget = check_sort_budget(ctx, 16);
	struct repair_notes *n;

	if (!ctx->opts->repair)
		return NULL;
	if (ctx->notes)
		return ctx->notes->err ? NULL : ctx->notes;
	if (budget < RECSORT_MIN_BUDGET)
		budget = RECSORT_MIN_BUDGET;
	n = calloc(1, sizeof(*n));
	if (!n)
		return NULL;
	ctx->notes = n;
	for (int i = 0; i < NOTES__COUNT; i++) {
		n->lists[i] = recsort_create(kinds[i].size, kinds[i].cmp, NULL, budget, &ctx->fs->knobs.recsort);
		if (!n->lists[i]) {
			n->err = -ENOMEM;
			return NULL;
		}
	}
	return n;
}

static int note_add(struct check_ctx *ctx, enum repair_note_list which, const void *rec)
{
	struct repair_notes *n = notes_get(ctx);
	int ret;

	if (!n)
		return ctx->notes && ctx->notes->err ? ctx->notes->err : 0;
	ret = recsort_add(n->lists[which], rec);
	if (ret < 0)
		return n->err = ret;
	n->counts[which]++;
	return 0;
}

int repair_note_extent(struct check_ctx *ctx, const struct extent_fix *f)
{
	return note_add(ctx, NOTES_EXTENTS, f);
}

int repair_note_qgroup(struct check_ctx *ctx, uint64_t id, uint64_t rfer, uint64_t excl)
{
	struct qgroup_fix f = { id, rfer, excl };

	return note_add(ctx, NOTES_QGROUPS, &f);
}

int repair_note_bytenr(struct check_ctx *ctx, const struct bytenr_fix *f)
{
	return note_add(ctx, NOTES_BYTENRS, f);
}

int repair_note_hole(struct check_ctx *ctx, const struct bytenr_fix *f)
{
	return note_add(ctx, NOTES_HOLES, f);
}

int repair_note_claim(struct check_ctx *ctx, uint64_t bytenr, uint64_t len)
{
	struct extent_claim c = { bytenr, len };

	return note_add(ctx, NOTES_CLAIMS, &c);
}

int repair_note_inode(struct check_ctx *ctx, enum problem_code code, uint64_t root, uint64_t ino)
{
	struct inode_fix f = { .root = root, .ino = ino, .code = code };

	return note_add(ctx, NOTES_INODES, &f);
}

void repair_note_inode_problem(struct check_ctx *ctx, enum problem_code code, uint64_t root, uint64_t ino)
{
	if (!ctx->opts->repair)
		return;
	if (repair_note_inode(ctx, code, root, ino) < 0)
		repair_note_unfixable(ctx);
}

static void note_inode_list(struct check_ctx *ctx, enum repair_note_list which, enum problem_code code,
			    uint64_t root, uint64_t ino)
{
	struct inode_fix f = { .root = root, .ino = ino, .code = code };

	if (ctx->opts->repair && note_add(ctx, which, &f) < 0)
		repair_note_unfixable(ctx);
}

void repair_note_nodatasum(struct check_ctx *ctx, uint64_t root, uint64_t ino)
{
	note_inode_list(ctx, NOTES_NODATASUM, PR_FILE_EXTENT_COMPRESSED_NODATASUM, root, ino);
}

void repair_note_file_extent(struct check_ctx *ctx, uint64_t root, uint64_t ino)
{
	note_inode_list(ctx, NOTES_FILE_EXTENTS, PR_FILE_EXTENT_BAD, root, ino);
}

void repair_note_fe_fields(struct check_ctx *ctx, uint64_t root, uint64_t ino)
{
	note_inode_list(ctx, NOTES_FE_FIELDS, PR_FILE_EXTENT_BAD, root, ino);
}

void repair_note_fe_overlap(struct check_ctx *ctx, uint64_t root, uint64_t ino)
{
	note_inode_list(ctx, NOTES_FE_OVERLAP, PR_FILE_EXTENT_OVERLAP, root, ino);
}

void repair_note_dir_links(struct check_ctx *ctx, uint64_t root, uint64_t ino)
{
	note_inode_list(ctx, NOTES_DIR_LINKS, PR_DIR_HARDLINK, root, ino);
}

void repair_note_name(struct check_ctx *ctx, enum problem_code code, uint64_t root, uint64_t dir, uint64_t child)
{
	struct name_fix f = { .root = root, .dir = dir, .child = child, .code = code };

	if (ctx->opts->repair && note_add(ctx, NOTES_NAMES, &f) < 0)
		repair_note_unfixable(ctx);
}

void repair_note_placeholder(struct check_ctx *ctx, uint64_t parent, uint64_t dir, uint64_t index)
{
	struct name_fix f = { .root = parent, .dir = dir, .child = index, .code = PR_ROOT_DIR_ENTRY_MISSING };

	if (ctx->opts->repair && note_add(ctx, NOTES_PLACEHOLDERS, &f) < 0)
		repair_note_unfixable(ctx);
}

void repair_note_unfixable(struct check_ctx *ctx)
{
	struct repair_notes *n = notes_get(ctx);

	if (n)
		n->unfixable++;
}

int repair_notes_next(struct check_ctx *ctx, enum repair_note_list which, const void **rec)
{
	struct repair_notes *n = ctx->notes;
	int ret;

	if (!n)
		return 0;
	if (n->err)
		return n->err;
	if (!n->finished[which]) {
		n->finished[which] = true;
		if ((ret = recsort_finish(n->lists[which])) < 0)
			return n->err = ret;
	}
	ret = recsort_next(n->lists[which], rec);
	return ret < 0 ? (n->err = ret) : ret;
}

uint64_t repair_notes_count(const struct check_ctx *ctx, enum repair_note_list which)
{
	return ctx->notes ? ctx->notes->counts[which] : 0;
}

uint64_t repair_notes_unfixable(const struct check_ctx *ctx)
{
	return ctx->notes ? ctx->notes->unfixable + (ctx->notes->err != 0) : 0;
}

void repair_notes_free(struct check_ctx *ctx)
{
	struct repair_notes *n = ctx->notes;

	if (!n)
		return;
	for (int i = 0; i < NOTES__COUNT; i++)
		recsort_destroy(n->lists[i]);
	free(n);
	ctx->notes = NULL;
}
