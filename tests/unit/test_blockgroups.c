// SPDX-License-Identifier: GPL-2.0-only
/* Block groups of a real image: one per chunk, with the flags and used
 * bytes dump-tree shows for its BLOCK_GROUP_ITEM, and the used bytes of the
 * metadata groups equal the tree blocks the filesystem really has. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <btk/blockgroups.h>
#include <btk/volumes.h>
#include <btk/walk.h>
#include "tests/unit/fixtures.h"
#include "libfs/volumes_internal.h"

struct dumped_bg {
	uint64_t start, length, used, flags;
};

static uint64_t parse_flags(const char *s)
{
	static const struct { const char *name; uint64_t bit; } names[] = {
		{ "DATA", BTRFS_BLOCK_GROUP_DATA },       { "SYSTEM", BTRFS_BLOCK_GROUP_SYSTEM },
		{ "METADATA", BTRFS_BLOCK_GROUP_METADATA }, { "RAID0", BTRFS_BLOCK_GROUP_RAID0 },
		{ "RAID1", BTRFS_BLOCK_GROUP_RAID1 },     { "DUP", BTRFS_BLOCK_GROUP_DUP },
		{ "RAID10", BTRFS_BLOCK_GROUP_RAID10 },   { "RAID5", BTRFS_BLOCK_GROUP_RAID5 },
		{ "RAID6", BTRFS_BLOCK_GROUP_RAID6 },     { "RAID1C3", BTRFS_BLOCK_GROUP_RAID1C3 },
		{ "RAID1C4", BTRFS_BLOCK_GROUP_RAID1C4 }, { "single", 0 },
	};
	char buf[128], *save = NULL;
	uint64_t flags = 0;

	snprintf(buf, sizeof(buf), "%s", s);
	for (char *tok = strtok_r(buf, "|", &save); tok; tok = strtok_r(NULL, "|", &save)) {
		size_t i;
		for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
			if (!strcmp(tok, names[i].name))
				break;
		cr_assert_lt(i, sizeof(names) / sizeof(names[0]), "unknown flag %s in dump-tree", tok);
		flags |= names[i].bit;
	}
	return flags;
}

/* The BLOCK_GROUP_ITEMs of `btrfs inspect-internal dump-tree -t extent`:
 *	item 1 key (13631488 BLOCK_GROUP_ITEM 8388608) itemoff 16206 itemsize 24
 *		block group used 409600 chunk_objectid 256 flags DATA|single */
static size_t parse_dump(const char *recipe, const char *tree, struct dumped_bg *out, size_t max)
{
	char *dump = fixture_dump_tree(recipe, tree);
	size_t n = 0;

	for (const char *p = dump; (p = strstr(p, "BLOCK_GROUP_ITEM ")); p++) {
		unsigned long long start, length, used, chunk_objectid;
		const char *key = p, *next;
		char flags[128];

		while (key > dump && key[-1] != '(')
			key--;
		if (sscanf(key, "%llu BLOCK_GROUP_ITEM %llu)", &start, &length) != 2)
			continue;
		next = strstr(p, "block group used ");
		cr_assert_not_null(next);
		cr_assert_eq(sscanf(next, "block group used %llu chunk_objectid %llu flags %127s", &used,
				    &chunk_objectid, flags),
			     3);
		cr_assert_lt(n, max);
		out[n++] = (struct dumped_bg){ start, length, used, parse_flags(flags) };
	}
	free(dump);
	return n;
}

static void compare_with_dump(const char *recipe)
{
	struct fs_info *fs = fixture_open(recipe, NULL);
	bool bgt = fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE;
	struct dumped_bg dumped[64];
	/* a newer mkfs may default to the block-group tree: dump whichever holds the items */
	size_t ndumped = parse_dump(recipe, bgt ? "11" : "extent", dumped, 64);
	struct block_group_list list;

	cr_assert_eq(fs_block_group_tree(fs), bgt ? &fs->block_group_root : &fs->extent_root);
	cr_assert_eq(fs_read_block_groups(fs, &list), 0, "%s", btk_error_msg());
	cr_assert_eq(list.count, fs->chunks->count, "one entry per chunk");
	cr_assert_eq(list.count, ndumped, "%zu groups, dump-tree shows %zu", list.count, ndumped);
	cr_assert_geq(ndumped, 3, "data, metadata and system at least");
	for (size_t i = 0; i < list.count; i++) {
		const struct block_group *bg = &list.groups[i];
		const struct chunk *c = fs->chunks->chunks[i];
		size_t j;

		if (i)
			cr_assert_lt(list.groups[i - 1].start, bg->start, "sorted by start");
		cr_assert_eq(bg->start, c->logical);
		cr_assert_eq(bg->length, c->length);
		cr_assert_not(bg->missing);
		cr_assert_eq(bg->flags, c->type, "block group flags agree with the chunk");
		for (j = 0; j < ndumped; j++)
			if (dumped[j].start == bg->start)
				break;
		cr_assert_lt(j, ndumped, "block group %llu not in dump-tree", (unsigned long long)bg->start);
		cr_assert_eq(bg->length, dumped[j].length);
		cr_assert_eq(bg->flags, dumped[j].flags, "group %llu: flags 0x%llx, dump-tree 0x%llx",
			     (unsigned long long)bg->start, (unsigned long long)bg->flags,
			     (unsigned long long)dumped[j].flags);
		cr_assert_eq(bg->used, dumped[j].used, "group %llu: used %llu, dump-tree %llu",
			     (unsigned long long)bg->start, (unsigned long long)bg->used,
			     (unsigned long long)dumped[j].used);
	}
	block_group_list_free(&list);
	cr_assert_null(list.groups);
	fs_close(fs);
}

Test(blockgroups, match_dump_tree_small)
{
	compare_with_dump("small");
}

Test(blockgroups, match_dump_tree_xxhash)
{
	compare_with_dump("xxhash");
}

static int count_block(void *arg, const struct tree_block *b)
{
	*(uint64_t *)arg += b->len;
	return 0;
}

Test(blockgroups, used_bytes_are_the_real_contents)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct block_group_list list;
	struct fs_tree_list trees;
	uint64_t meta_used = 0, data_used = 0, tree_bytes = 0;

	cr_assert_eq(fs_read_block_groups(fs, &list), 0, "%s", btk_error_msg());
	for (size_t i = 0; i < list.count; i++) {
		if (list.groups[i].flags & (BTRFS_BLOCK_GROUP_METADATA | BTRFS_BLOCK_GROUP_SYSTEM))
			meta_used += list.groups[i].used;
		else
			data_used += list.groups[i].used;
	}
	block_group_list_free(&list);

	/* every allocated metadata byte is a block of some tree */
	cr_assert_eq(fs_list_trees(fs, &trees), 0);
	for (size_t i = 0; i < trees.count; i++) {
		struct tree_walk_ops ops = { .visit = count_block, .arg = &tree_bytes };
		cr_assert_eq(tree_walk(fs, &trees.roots[i], &ops, NULL), 0);
	}
	fs_tree_list_free(&trees);
	cr_assert_eq(meta_used, tree_bytes, "metadata used %llu, tree blocks %llu bytes",
		     (unsigned long long)meta_used, (unsigned long long)tree_bytes);
	/* the fixture's only regular extents: twenty 20 KiB files */
	cr_assert_eq(data_used, 20 * 20480);
	fs_close(fs);
}

Test(blockgroups, chunk_without_item_is_marked_missing)
{
	struct fs_info *fs = fixture_open("small", NULL);
	const struct chunk *last = fs->chunks->chunks[fs->chunks->count - 1];
	uint64_t logical = last->logical + last->length + (1ULL << 30);
	uint8_t item[sizeof(struct btrfs_chunk) + sizeof(struct btrfs_stripe)] = { 0 };
	struct block_group_list list;
	size_t i;

	chunk_set_length(item, 8ULL << 20);
	chunk_set_stripe_len(item, BTRFS_STRIPE_LEN);
	chunk_set_sector_size(item, fs->sectorsize); /* the kernel's rule: the filesystem's */
	chunk_set_type(item, BTRFS_BLOCK_GROUP_DATA);
	chunk_set_num_stripes(item, 1);
	stripe_set_devid(chunk_stripe(item, 0), 1);
	stripe_set_offset(chunk_stripe(item, 0), 1ULL << 30);
	cr_assert_eq(chunk_map_add_item(fs, logical, item, sizeof(item)), 0, "%s", btk_error_msg());

	cr_assert_eq(fs_read_block_groups(fs, &list), 0, "%s", btk_error_msg());
	cr_assert_eq(list.count, fs->chunks->count);
	for (i = 0; i < list.count; i++)
		cr_assert_eq(list.groups[i].missing, list.groups[i].start == logical, "group %llu",
			     (unsigned long long)list.groups[i].start);
	cr_assert_eq(list.groups[list.count - 1].start, logical);
	cr_assert_eq(list.groups[list.count - 1].flags, BTRFS_BLOCK_GROUP_DATA, "flags from the chunk");
	cr_assert_eq(list.groups[list.count - 1].used, 0);
	block_group_list_free(&list);
	fs_close(fs);
}

Test(blockgroups, damaged_extent_tree_is_an_error)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct block_group_list list;

	cr_assert_eq(fixture_corrupt_block(fs, fs_block_group_tree(fs)->bytenr, -1), 0);
	cr_assert_eq(fs_read_block_groups(fs, &list), -EUCLEAN);
	cr_assert(strstr(btk_error_msg(), "no good copy"), "%s", btk_error_msg());
	cr_assert_null(list.groups);
	cr_assert_eq(list.count, 0);
	fs_close(fs);
}

Test(blockgroups, no_extent_tree)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct block_group_list list;

	fs->extent_root.bytenr = 0;
	fs->block_group_root.bytenr = 0;
	cr_assert_eq(fs_read_block_groups(fs, &list), -ENOENT);
	cr_assert(strstr(btk_error_msg(), "block group"), "%s", btk_error_msg());
	cr_assert_null(list.groups);
	fs_close(fs);
}

Test(blockgroups, block_group_tree_is_used_when_present)
{
	struct fs_info *fs = fixture_open("small", NULL);

	fs->compat_ro &= ~BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE;
	cr_assert_eq(fs_block_group_tree(fs), &fs->extent_root, "no feature bit: extent tree");
	fs->compat_ro |= BTRFS_FEATURE_COMPAT_RO_BLOCK_GROUP_TREE;
	fs->block_group_root.bytenr = 0;
	cr_assert_eq(fs_block_group_tree(fs), &fs->extent_root, "feature bit but no tree: extent tree");
	fs->block_group_root.bytenr = fs->extent_root.bytenr;
	cr_assert_eq(fs_block_group_tree(fs), &fs->block_group_root);
	fs_close(fs);
}
