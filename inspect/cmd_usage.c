// SPDX-License-Identifier: GPL-2.0-only
/* btk-inspect usage: tree sizes per level, block groups, totals per profile. */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/cli.h"
#include "common/json_doc.h"
#include "common/messages.h"
#include "common/sizes.h"
#include "inspect/inspect.h"
#include <btk/blockgroups.h>
#include <btk/ebitmap.h>
#include <btk/names.h>
#include <btk/volumes.h>
#include <btk/walk.h>

struct usage_args {
	enum cli_format format;
	char **paths;
	unsigned npaths;
};

struct tree_usage {
	uint64_t objectid;
	uint64_t nodes[BTRFS_MAX_LEVEL];
	uint64_t bad_blocks;
	uint64_t exclusive;        /* bytes of blocks no other tree uses */
	struct ebitmap *mine;      /* its blocks */
	struct block_sharing *sh;
};

/* Which blocks more than one tree uses (snapshots share subtrees): every
 * block once in seen, a second sighting in shared. */
struct block_sharing {
	struct ebitmap *seen;
	struct ebitmap *shared;
	uint32_t nodesize;
	int err;
};

/* A (type, profile) line of the totals, like `btrfs filesystem df`. */
struct usage_total {
	uint64_t flags;
	uint64_t total;
	uint64_t used;
};

/* The bottom rows of the tree table. */
struct usage_sums {
	uint64_t shared;        /* blocks more than one tree uses, once */
	uint64_t total;         /* every block of every tree, once */
	uint64_t metadata_used; /* what the metadata and system block groups count */
	bool mixed;             /* mixed block groups, not counted in metadata_used */
};

static const struct argp_option usage_options[] = {
	{ "format", 'f', "FORMAT", 0, "Output format: text (default) or json", 0 },
	{ 0 }
};

static error_t usage_parse(int key, char *arg, struct argp_state *state)
{
	struct usage_args *a = state->input;

	switch (key) {
	case 'f':
		cli_argp_format(state, arg, CLI_FORMAT_MASK(CLI_FORMAT_TEXT) | CLI_FORMAT_MASK(CLI_FORMAT_JSON),
				&a->format);
		break;
	default: return cli_argp_devices(key, state, &a->paths, &a->npaths);
	}
	return 0;
}

static int count_block(void *arg, const struct tree_block *b)
{
	struct tree_usage *u = arg;
	struct block_sharing *sh = u->sh;
	int r;

	u->nodes[block_level(b)]++;
	if (sh->err)
		return 0;
	/* a tree that reaches a block twice counts it once */
	r = ebitmap_test_and_set(u->mine, b->bytenr, sh->nodesize);
	if (r == 0 && (r = ebitmap_test_and_set(sh->seen, b->bytenr, sh->nodesize)) > 0)
		r = ebitmap_set(sh->shared, b->bytenr, sh->nodesize);
	if (r < 0)
		sh->err = r;
	return 0;
}

/* Bytes of tree u's blocks that no other tree uses. */
static uint64_t exclusive_bytes(struct tree_usage *u, struct ebitmap *shared)
{
	uint64_t from = 0, start, len, bytes = 0;

	while (ebitmap_next_set(u->mine, from, &start, &len) == 1) {
		uint64_t s2, l2, pos = start, end = start + len;
		bytes += len;
		while (pos < end && ebitmap_next_set(shared, pos, &s2, &l2) == 1 && s2 < end) {
			uint64_t a = s2 > pos ? s2 : pos, b = s2 + l2 < end ? s2 + l2 : end;
			bytes -= b - a;
			pos = b;
		}
		if (end < start) /* wrapped at 2^64 */
			break;
		from = end;
	}
	return bytes;
}

/* Metadata in use as the block groups count it (one copy): metadata and
 * system block groups; mixed ones hold data too and are left out. */
static uint64_t metadata_used(const struct block_group_list *bgs, bool *mixed)
{
	uint64_t sum = 0;

	*mixed = false;
	for (size_t i = 0; i < bgs->count; i++) {
		uint64_t f = bgs->groups[i].flags;
		if ((f & BTRFS_BLOCK_GROUP_DATA) && (f & BTRFS_BLOCK_GROUP_METADATA))
			*mixed = true;
		else if (f & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM))
			sum += bgs->groups[i].used;
	}
	return sum;
}

static void count_bad(void *arg, uint64_t bytenr, int level, int err, const char *why)
{
	struct tree_usage *u = arg;

	u->bad_blocks++;
	msg_warning("tree %" PRIu64 ": block %" PRIu64 " unreadable: %s", u->objectid, bytenr, why);
	(void)level;
	(void)err;
}

static const char *type_label(uint64_t flags)
{
	uint64_t t = flags & BTRFS_BLOCK_GROUP_TYPE_MASK;

	if (t == (BTRFS_BLOCK_GROUP_DATA | BTRFS_BLOCK_GROUP_METADATA))
		return "Data+Metadata";
	if (t & BTRFS_BLOCK_GROUP_DATA)
		return "Data";
	if (t & BTRFS_BLOCK_GROUP_SYSTEM)
		return "System";
	return "Metadata";
}

static void add_total(struct usage_total *totals, size_t *n, const struct block_group *bg)
{
	uint64_t key = bg->flags & (BTRFS_BLOCK_GROUP_TYPE_MASK | BTRFS_BLOCK_GROUP_PROFILE_MASK);

	for (size_t i = 0; i < *n; i++) {
		if (totals[i].flags == key) {
			totals[i].total += bg->length;
			totals[i].used += bg->used;
			return;
		}
	}
	totals[*n] = (struct usage_total){ key, bg->length, bg->used };
	(*n)++;
}

static const char *tree_label(uint64_t id, char *buf, size_t len)
{
	const char *name = tree_name(id);

	if (name)
		return name;
	snprintf(buf, len, "SUBVOL %" PRIu64, id);
	return buf;
}

static uint64_t tree_bytes(const struct fs_info *fs, const struct tree_usage *t)
{
	uint64_t nodes = 0;

	for (int l = 0; l < BTRFS_MAX_LEVEL; l++)
		nodes += t->nodes[l];
	return nodes * fs->nodesize;
}

static void print_text(struct fs_info *fs, const struct tree_usage *trees, size_t ntrees,
		       const struct block_group_list *bgs, const struct usage_total *totals, size_t ntotals,
		       const struct usage_sums *sums)
{
	char s1[SIZE_BUF_LEN], s2[SIZE_BUF_LEN], s3[SIZE_BUF_LEN], flags[BG_FLAGS_STR_BUF], name[48];

	printf("%-24s %12s %12s  nodes per level\n", "Tree", "Referenced", "Exclusive");
	for (size_t i = 0; i < ntrees; i++) {
		printf("%-24s %12s %12s ", tree_label(trees[i].objectid, name, sizeof(name)),
		       size_format(tree_bytes(fs, &trees[i]), s1, sizeof(s1), SIZE_HUMAN),
		       size_format(trees[i].exclusive, s2, sizeof(s2), SIZE_HUMAN));
		for (int l = 0; l < BTRFS_MAX_LEVEL; l++)
			if (trees[i].nodes[l])
				printf(" %d(%" PRIu64 ")", l, trees[i].nodes[l]);
		printf("\n");
	}
	printf("%-24s %12s %12s  (blocks several trees use, counted once)\n", "shared", "",
	       size_format(sums->shared, s1, sizeof(s1), SIZE_HUMAN));
	printf("%-24s %12s %12s  (exclusive + shared; metadata used in block groups: %s%s)\n", "total", "",
	       size_format(sums->total, s1, sizeof(s1), SIZE_HUMAN),
	       size_format(sums->metadata_used, s2, sizeof(s2), SIZE_HUMAN), sums->mixed ? ", mixed groups left out" : "");
	printf("\n%-20s %12s %-24s %12s %7s\n", "Block group", "Length", "Flags", "Used", "Used%");
	for (size_t i = 0; i < bgs->count; i++) {
		const struct block_group *bg = &bgs->groups[i];
		block_group_flags_str(bg->flags, flags, sizeof(flags));
		printf("%-20" PRIu64 " %12s %-24s %12s %6.2f%%%s\n", bg->start,
		       size_format(bg->length, s1, sizeof(s1), SIZE_HUMAN), flags,
		       size_format(bg->used, s2, sizeof(s2), SIZE_HUMAN),
		       bg->length ? 100.0 * (double)bg->used / (double)bg->length : 0.0,
		       bg->missing ? "  (no block group item)" : "");
	}
	printf("\n");
	for (size_t i = 0; i < ntotals; i++)
		printf("%s, %s: total=%s, used=%s\n", type_label(totals[i].flags), profile_name(totals[i].flags),
		       size_format(totals[i].total, s1, sizeof(s1), SIZE_HUMAN),
		       size_format(totals[i].used, s2, sizeof(s2), SIZE_HUMAN));
	(void)s3;
}

static void print_json(struct fs_info *fs, const struct tree_usage *trees, size_t ntrees,
		       const struct block_group_list *bgs, const struct usage_total *totals, size_t ntotals,
		       const struct usage_sums *sums)
{
	char name[48];

	printf("{\"version\":%d,\"program\":\"btk-inspect\",\"btk_version\":\"%s\",\"command\":\"usage\","
	       "\"nodesize\":%u,\"trees\":[", JSON_DOC_VERSION, BTK_VERSION, fs->nodesize);
	for (size_t i = 0; i < ntrees; i++) {
		uint64_t nodes = 0;
		int first = 1;
		for (int l = 0; l < BTRFS_MAX_LEVEL; l++)
			nodes += trees[i].nodes[l];
		printf("%s{\"tree\":%" PRIu64 ",\"name\":\"%s\",\"bytes\":%" PRIu64 ",\"exclusive_bytes\":%" PRIu64
		       ",\"levels\":[", i ? "," : "", trees[i].objectid, tree_label(trees[i].objectid, name, sizeof(name)),
		       nodes * fs->nodesize, trees[i].exclusive);
		for (int l = 0; l < BTRFS_MAX_LEVEL; l++) {
			if (!trees[i].nodes[l])
				continue;
			printf("%s{\"level\":%d,\"nodes\":%" PRIu64 "}", first ? "" : ",", l, trees[i].nodes[l]);
			first = 0;
		}
		printf("]}");
	}
	printf("],\"shared_bytes\":%" PRIu64 ",\"total_tree_bytes\":%" PRIu64 ",\"metadata_used\":%" PRIu64
	       ",\"mixed_block_groups\":%s,\"block_groups\":[", sums->shared, sums->total, sums->metadata_used,
	       sums->mixed ? "true" : "false");
	for (size_t i = 0; i < bgs->count; i++)
		printf("%s{\"start\":%" PRIu64 ",\"length\":%" PRIu64 ",\"flags\":%" PRIu64 ",\"used\":%" PRIu64
		       "%s}", i ? "," : "", bgs->groups[i].start, bgs->groups[i].length, bgs->groups[i].flags,
		       bgs->groups[i].used, bgs->groups[i].missing ? ",\"missing\":true" : "");
	printf("],\"totals\":[");
	for (size_t i = 0; i < ntotals; i++)
		printf("%s{\"type\":\"%s\",\"profile\":\"%s\",\"total\":%" PRIu64 ",\"used\":%" PRIu64 "}",
		       i ? "," : "", type_label(totals[i].flags), profile_name(totals[i].flags), totals[i].total,
		       totals[i].used);
	printf("]}\n");
}

int cmd_usage(int argc, char **argv)
{
	static const struct argp argp = { usage_options, usage_parse, "DEVICE...",
		"Print, per tree, the bytes and the number of nodes at each level; per block group, "
		"its address, length, flags and used bytes; and totals per type and profile.",
		NULL, NULL, NULL };
	struct usage_args a = { .format = CLI_FORMAT_TEXT };
	struct fs_tree_list list = { 0 };
	struct block_group_list bgs = { 0 };
	struct tree_usage *trees = NULL;
	struct usage_total *totals = NULL;
	size_t ntotals = 0;
	struct inspect_notes notes = { 0 };
	struct block_sharing sh = { 0 };
	struct usage_sums sums = { 0 };
	struct fs_info *fs;
	int ret, failed = 0;

	argp_parse(&argp, argc, argv, 0, NULL, &a);
	fs = inspect_open(a.paths, a.npaths, -1, false, &notes);
	if (!fs)
		return 1;
	sh.nodesize = fs->nodesize;
	sh.seen = ebitmap_create(fs->nodesize);
	sh.shared = ebitmap_create(fs->nodesize);
	ret = fs_list_trees(fs, &list);
	if (ret) {
		msg_error("cannot list the trees: %s", btk_error_msg());
		goto out;
	}
	trees = calloc(list.count ? list.count : 1, sizeof(*trees));
	if (!trees || !sh.seen || !sh.shared) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < list.count; i++) {
		struct tree_walk_ops ops = { count_block, count_bad, &trees[i] };
		trees[i].objectid = list.roots[i].objectid;
		trees[i].sh = &sh;
		if (!(trees[i].mine = ebitmap_create(fs->nodesize))) {
			ret = -ENOMEM;
			goto out;
		}
		if (tree_walk(fs, &list.roots[i], &ops, NULL)) {
			msg_error("tree %" PRIu64 ": %s", list.roots[i].objectid, btk_error_msg());
			failed = 1;
		}
		failed |= trees[i].bad_blocks != 0;
	}
	if (sh.err) {
		ret = sh.err;
		msg_errno(ret, "counting shared blocks");
		goto out;
	}
	for (size_t i = 0; i < list.count; i++)
		trees[i].exclusive = exclusive_bytes(&trees[i], sh.shared);
	sums.shared = ebitmap_count(sh.shared);
	sums.total = ebitmap_count(sh.seen);
	ret = fs_read_block_groups(fs, &bgs);
	if (ret) {
		msg_error("cannot read the block groups: %s", btk_error_msg());
		goto out;
	}
	totals = calloc(bgs.count ? bgs.count : 1, sizeof(*totals));
	if (!totals) {
		ret = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < bgs.count; i++)
		add_total(totals, &ntotals, &bgs.groups[i]);
	sums.metadata_used = metadata_used(&bgs, &sums.mixed);
	if (a.format == CLI_FORMAT_JSON)
		print_json(fs, trees, list.count, &bgs, totals, ntotals, &sums);
	else
		print_text(fs, trees, list.count, &bgs, totals, ntotals, &sums);
out:
	free(totals);
	for (size_t i = 0; trees && i < list.count; i++)
		ebitmap_destroy(trees[i].mine);
	free(trees);
	ebitmap_destroy(sh.seen);
	ebitmap_destroy(sh.shared);
	block_group_list_free(&bgs);
	fs_tree_list_free(&list);
	fs_close(fs);
	return inspect_status(ret || failed, &notes);
}
