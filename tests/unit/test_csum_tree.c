// SPDX-License-Identifier: GPL-2.0-only
/* The csum tree cursor: over the whole address space its runs are ascending,
 * disjoint, sector-aligned, cover exactly the sectors of the csum items, and
 * each checksum matches the data block it names; a range cut inside an item
 * starts and ends at the cut with the right checksums; sector by sector it
 * gives the same checksums, and none where the tree has none. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include <btk/csum.h>
#include <btk/csum_tree.h>
#include <btk/volumes.h>
#include "tests/unit/fixtures.h"

/* Sectors the csum items hold, counted with a plain tree iterator. */
static uint64_t item_sectors(struct fs_info *fs)
{
	struct btrfs_key min = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, 0 };
	struct btrfs_key max = { BTRFS_EXTENT_CSUM_OBJECTID, BTRFS_EXTENT_CSUM_KEY, UINT64_MAX }, k;
	struct tree_iter it;
	const uint8_t *d;
	uint32_t size;
	uint64_t n = 0;

	tree_iter_init(&it, fs, &fs->csum_root, &min, &max);
	while (tree_iter_next(&it, &k, &d, &size) == 1)
		n += size / fs->csum_size;
	tree_iter_release(&it);
	return n;
}

Test(csum_tree, runs_cover_every_item_and_match_the_data)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct csum_tree_cursor c;
	uint8_t *buf = malloc(fs->sectorsize), sum[BTRFS_CSUM_SIZE];
	uint64_t lo, hi, prev = 0, sectors = 0, runs = 0;
	const uint8_t *d;
	int ret;

	cr_assert_not_null(buf);
	cr_assert_eq(csum_tree_open(&c, fs, 0, UINT64_MAX), 0);
	while ((ret = csum_tree_next(&c, &lo, &hi, &d)) == 1) {
		cr_assert_lt(lo, hi);
		cr_assert_geq(lo, prev, "run %lu starts below the previous one", (unsigned long)lo);
		cr_assert_eq(lo % fs->sectorsize, 0);
		cr_assert_eq(hi % fs->sectorsize, 0);
		for (uint64_t at = lo; at < hi; at += fs->sectorsize, d += fs->csum_size) {
			cr_assert_eq(volumes_read(fs, at, buf, fs->sectorsize, 0), 0);
			cr_assert_eq(csum_compute(fs->csum_type, buf, fs->sectorsize, sum), 0);
			cr_assert_eq(memcmp(sum, d, fs->csum_size), 0, "data block %lu", (unsigned long)at);
		}
		sectors += (hi - lo) / fs->sectorsize;
		prev = hi;
		runs++;
	}
	cr_assert_eq(ret, 0);
	cr_assert_gt(runs, 0, "the fixture has checksummed data");
	cr_assert_eq(sectors, item_sectors(fs));
	csum_tree_close(&c);
	free(buf);
	fs_close(fs);
}

Test(csum_tree, cut_ranges_and_sector_lookups)
{
	struct fs_info *fs = fixture_open("small", NULL);
	uint32_t ss = fs->sectorsize, cs = fs->csum_size;
	struct csum_tree_cursor c;
	uint64_t lo = 0, hi = 0, a, b, first = 0;
	uint8_t *sums = NULL;
	const uint8_t *d;
	int ret;

	/* the first run of at least three sectors, and its checksums */
	cr_assert_eq(csum_tree_open(&c, fs, 0, UINT64_MAX), 0);
	while ((ret = csum_tree_next(&c, &a, &b, &d)) == 1) {
		if (!first)
			first = a;
		if (b - a >= 3 * (uint64_t)ss) {
			lo = a;
			hi = b;
			sums = malloc((hi - lo) / ss * cs);
			memcpy(sums, d, (hi - lo) / ss * cs);
			break;
		}
	}
	csum_tree_close(&c);
	cr_assert_not_null(sums, "the fixture has a run of three sectors");

	/* cut one sector off each end */
	cr_assert_eq(csum_tree_open(&c, fs, lo + ss, hi - ss), 0);
	cr_assert_eq(csum_tree_next(&c, &a, &b, &d), 1);
	cr_assert_eq(a, lo + ss);
	cr_assert_eq(b, hi - ss);
	cr_assert_eq(memcmp(d, sums + cs, (b - a) / ss * cs), 0);
	cr_assert_eq(csum_tree_next(&c, &a, &b, &d), 0);
	csum_tree_close(&c);

	/* sector by sector, ascending, from below the first checksummed sector */
	cr_assert_eq(csum_tree_open(&c, fs, 0, UINT64_MAX), 0);
	if (first >= ss)
		cr_assert_eq(csum_tree_get(&c, first - ss, &d), 0);
	for (uint64_t at = lo; at < hi; at += ss) {
		cr_assert_eq(csum_tree_get(&c, at, &d), 1);
		cr_assert_eq(memcmp(d, sums + (at - lo) / ss * cs, cs), 0, "sector %lu", (unsigned long)at);
	}
	csum_tree_close(&c);

	/* an empty range, and one below every item */
	cr_assert_eq(csum_tree_open(&c, fs, lo, lo), 0);
	cr_assert_eq(csum_tree_next(&c, &a, &b, &d), 0);
	csum_tree_close(&c);
	if (first >= ss) {
		cr_assert_eq(csum_tree_open(&c, fs, 0, first), 0);
		cr_assert_eq(csum_tree_next(&c, &a, &b, &d), 0);
		cr_assert_eq(csum_tree_get(&c, first - ss, &d), 0);
		csum_tree_close(&c);
	}
	free(sums);
	fs_close(fs);
}
