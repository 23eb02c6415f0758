// SPDX-License-Identifier: GPL-2.0-only
/* libfs/free_space_tree.c: the tree built from the extent tree describes,
 * for every block group, exactly the space its extents and superblock
 * stripes leave free, and survives a commit. */
#include <criterion/criterion.h>
#include <string.h>

#include <btk/ebitmap.h>
#include <btk/free_space_tree.h>
#include <btk/super.h>
#include <btk/tree.h>
#include <btk/volumes.h>
#include "tests/unit/fixtures.h"
#include "libfs/volumes_internal.h"

static struct fs_info *open_writable(const char *recipe)
{
	struct fs_open_options opts;

	fs_open_options_init(&opts);
	opts.writable = true;
	return fixture_open(recipe, &opts);
}

/* Bytes of [start, start+len) set in eb. */
static uint64_t count_in(struct ebitmap *eb, uint64_t start, uint64_t len)
{
	uint64_t n = 0, from = start, s, l;

	while (ebitmap_next_set(eb, from, &s, &l) == 1 && s < start + len) {
		uint64_t e = s + l < start + len ? s + l : start + len;
		n += e - (s > start ? s : start);
		from = s + l;
	}
	return n;
}

Test(free_space_tree, rebuilt_tree_matches_the_extents)
{
	struct fs_info *fs = open_writable("small");
	struct fst_build_stats st;
	struct trans *t;
	struct btrfs_key min = { 0, 0, 0 }, max = { (uint64_t)-1, 255, (uint64_t)-1 }, key;
	struct ebitmap *used = ebitmap_create(fs->sectorsize), *free_map = ebitmap_create(fs->sectorsize);
	struct tree_iter it;
	const uint8_t *data;
	uint32_t size;
	uint64_t gen = fs->generation, infos = 0;
	int ret;

	cr_assert_eq(trans_start(fs, &t), 0);
	ret = fst_build(fs, t, &st);
	cr_assert_eq(ret, 0, "fst_build: %s", btk_error_msg());
	cr_assert(st.replaced, "mkfs made a free-space tree: it is replaced");
	cr_assert_eq(st.groups, fs->chunks->count);
	cr_assert_eq(trans_commit(t), 0, "commit: %s", btk_error_msg());
	cr_assert_eq(fs->generation, gen + 1);
	cr_assert(fs->compat_ro & BTRFS_FEATURE_COMPAT_RO_FREE_SPACE_TREE_VALID);
	cr_assert_eq(super_cache_generation(fs->super), (uint64_t)-1);

	/* after the commit: used (extents) and free (the tree) partition every group */
	tree_iter_init(&it, fs, &fs->extent_root, &min, &max);
	while (tree_iter_next(&it, &key, &data, &size) == 1)
		if (key.type == BTRFS_EXTENT_ITEM_KEY || key.type == BTRFS_METADATA_ITEM_KEY)
			cr_assert_eq(ebitmap_set(used, key.objectid,
						 key.type == BTRFS_EXTENT_ITEM_KEY ? key.offset : fs->nodesize), 0);
	tree_iter_release(&it);
	tree_iter_init(&it, fs, &fs->free_space_root, &min, &max);
	while (tree_iter_next(&it, &key, &data, &size) == 1) {
		if (key.type == BTRFS_FREE_SPACE_INFO_KEY)
			infos++;
		else if (key.type == BTRFS_FREE_SPACE_EXTENT_KEY)
			cr_assert_eq(ebitmap_set(free_map, key.objectid, key.offset), 0);
	}
	tree_iter_release(&it);
	cr_assert_eq(infos, fs->chunks->count);
	for (size_t i = 0; i < fs->chunks->count; i++) {
		const struct chunk *c = fs->chunks->chunks[i];
		uint64_t starts[48], lens[48];
		int n = fs_super_stripe_ranges(fs, c->logical, starts, lens, 48);
		cr_assert(n >= 0);
		for (int k = 0; k < n; k++)
			cr_assert_eq(ebitmap_set(used, starts[k], lens[k]), 0);
		cr_assert_eq(count_in(used, c->logical, c->length) + count_in(free_map, c->logical, c->length),
			     c->length, "block group %llu: used and free do not add up",
			     (unsigned long long)c->logical);
	}
	/* nothing is both used and free */
	{
		uint64_t from = 0, s, l;
		while (ebitmap_next_set(free_map, from, &s, &l) == 1) {
			cr_assert_eq(count_in(used, s, l), 0, "free extent %llu+%llu overlaps used space",
				     (unsigned long long)s, (unsigned long long)l);
			from = s + l;
		}
	}
	ebitmap_destroy(used);
	ebitmap_destroy(free_map);
	fs_close(fs);
}

Test(free_space_tree, abort_leaves_the_filesystem)
{
	struct fs_info *fs = open_writable("small");
	struct fst_build_stats st;
	struct trans *t;
	uint64_t gen = fs->generation, root = fs->free_space_root.bytenr;

	cr_assert_eq(trans_start(fs, &t), 0);
	cr_assert_eq(fst_build(fs, t, &st), 0, "%s", btk_error_msg());
	trans_abort(t);
	cr_assert_eq(fs->generation, gen);
	cr_assert_eq(fs->free_space_root.bytenr, root);
	fs_close(fs);
}
