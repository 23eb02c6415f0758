// SPDX-License-Identifier: GPL-2.0-only
/* libfs/extent_scan.c on the "small" fixture: each extent item comes once,
 * decoded as dump-tree prints it (tree blocks and data extents), a range
 * keeps to its block group, and a stop from the callback ends the scan. */
#include <criterion/criterion.h>
#include <string.h>

#include <btk/blockgroups.h>
#include <btk/extent_scan.h>
#include "tests/unit/fixtures.h"

struct tally {
	uint32_t nodesize;
	uint64_t first, last;   /* the range asked for */
	unsigned tree_blocks, data, calls, stop_at;
	uint64_t prev, bytes;
	bool bad_order, bad_block, outside;
};

static int count(void *arg, const struct extent_rec *e)
{
	struct tally *t = arg;

	t->calls++;
	t->bad_order |= t->calls > 1 && e->bytenr <= t->prev;
	t->prev = e->bytenr;
	t->outside |= e->bytenr < t->first || e->bytenr > t->last;
	t->bytes += e->len;
	if (e->tree_block) {
		t->tree_blocks++;
		t->bad_block |= e->len != t->nodesize || e->level < 0 || e->level >= BTRFS_MAX_LEVEL || e->data;
	}
	if (e->data)
		t->data++;
	return t->calls == t->stop_at ? 7 : 0;
}

Test(extent_scan, every_extent_as_dump_tree_prints_it)
{
	struct fs_info *fs = fixture_open("small", NULL);
	char *dump = fixture_dump_tree("small", "extent");
	struct tally t = { .nodesize = fs->nodesize, .last = (uint64_t)-1 };

	cr_assert_eq(extent_tree_each(fs, &fs->extent_root, 0, (uint64_t)-1, count, &t), 0, "%s", btk_error_msg());
	cr_assert_eq(t.tree_blocks, fixture_count_lines(dump, "\t\trefs ", "flags TREE_BLOCK"));
	cr_assert_eq(t.data, fixture_count_lines(dump, "\t\trefs ", "flags DATA"));
	cr_assert_eq(t.calls, fixture_count_lines(dump, "\titem ", "_ITEM ") -
				      fixture_count_lines(dump, "\titem ", "BLOCK_GROUP_ITEM "));
	cr_assert_gt(t.tree_blocks, 10);
	cr_assert_gt(t.data, 10);
	cr_assert(!t.bad_order && !t.bad_block);
	free(dump);
	fs_close(fs);
}

Test(extent_scan, a_range_keeps_to_its_block_group)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct tally all = { .nodesize = fs->nodesize, .last = (uint64_t)-1 };
	struct block_group_list bgs;
	uint64_t bytes = 0;
	unsigned calls = 0;

	cr_assert_eq(extent_tree_each(fs, &fs->extent_root, 0, (uint64_t)-1, count, &all), 0);
	cr_assert_eq(fs_read_block_groups(fs, &bgs), 0);
	for (size_t i = 0; i < bgs.count; i++) {
		const struct block_group *g = &bgs.groups[i];
		struct tally t = { .nodesize = fs->nodesize, .first = g->start, .last = g->start + g->length - 1 };
		cr_assert_eq(extent_tree_each(fs, &fs->extent_root, t.first, t.last, count, &t), 0);
		cr_assert(!t.outside, "group %llu", (unsigned long long)g->start);
		cr_assert_eq(t.bytes, g->used, "group %llu: %llu bytes, used %llu", (unsigned long long)g->start,
			     (unsigned long long)t.bytes, (unsigned long long)g->used);
		bytes += t.bytes;
		calls += t.calls;
	}
	cr_assert_eq(calls, all.calls);
	cr_assert_eq(bytes, all.bytes);
	block_group_list_free(&bgs);
	fs_close(fs);
}

Test(extent_scan, the_callback_stops_the_scan)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct tally t = { .nodesize = fs->nodesize, .last = (uint64_t)-1, .stop_at = 3 };

	cr_assert_eq(extent_tree_each(fs, &fs->extent_root, 0, (uint64_t)-1, count, &t), 7);
	cr_assert_eq(t.calls, 3);
	fs_close(fs);
}
