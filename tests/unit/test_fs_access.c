// SPDX-License-Identifier: GPL-2.0-only
/* The read-only views programs get of struct fs_info (libfs/fs_access.c):
 * devices, chunks (against the reference tool's chunk tree dump) and the
 * superblock. The error record is test_error.c's. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <btk/format.h>
#include <btk/fs.h>
#include <btk/super.h>
#include <btk/volumes.h>
#include "tests/unit/fixtures.h"

Test(fs_access, devices_and_super)
{
	struct fs_info *fs = fixture_open("small", NULL);

	cr_assert_eq(fs_num_devices(fs), 1);
	cr_assert_eq(fs_device(fs, 0)->devid, 1);
	cr_assert_not_null(fs_device(fs, 0)->io);
	cr_assert_null(fs_device(fs, 1), "past the last device");
	cr_assert_eq(super_generation(fs_super(fs)), fs->generation);
	cr_assert_eq(super_nodesize(fs_super(fs)), fs->nodesize);
	fs_close(fs);
}

/* Every chunk the chunk tree holds, in logical order, found by lookup and index. */
Test(fs_access, chunks_match_the_chunk_tree)
{
	struct fs_info *fs = fixture_open("small", NULL);
	char *dump = fixture_dump_tree("small", "chunk");
	size_t n = fs_chunk_count(fs);

	cr_assert_eq(n, fixture_count_lines(dump, "\titem ", "CHUNK_ITEM"));
	cr_assert_geq(n, 3);
	for (size_t i = 0; i < n; i++) {
		const struct chunk *c = fs_chunk(fs, i);
		char key[64];

		snprintf(key, sizeof(key), "CHUNK_ITEM %llu)", (unsigned long long)c->logical);
		cr_assert(strstr(dump, key), "chunk %zu at %llu is not in dump-tree", i, (unsigned long long)c->logical);
		if (i)
			cr_assert_gt(c->logical, fs_chunk(fs, i - 1)->logical);
		cr_assert_eq(fs_chunk_lookup(fs, c->logical), c);
		cr_assert_eq(fs_chunk_lookup(fs, c->logical + c->length - 1), c);
		cr_assert_eq(fs_chunk_find_index(fs, c->logical), i);
	}
	cr_assert_null(fs_chunk(fs, n));
	cr_assert_null(fs_chunk_lookup(fs, 0), "nothing is mapped at 0");
	cr_assert_eq(fs_chunk_find_index(fs, fs_chunk(fs, n - 1)->logical + fs_chunk(fs, n - 1)->length), n);
	free(dump);
	fs_close(fs);
}
