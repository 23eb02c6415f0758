// SPDX-License-Identifier: GPL-2.0-only
/* The read-only views programs get of struct fs_info (libfs/fs_access.c):
 * devices, chunks (against the reference tool's chunk tree dump), the
 * superblock, and the error message written from several threads at once. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
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

struct writer { struct fs_info *fs; int id; };

/* Writer id's message: 500 times the letter of its id, so that a copy
 * mixing two messages shows. */
static void message_of(int id, char *buf)
{
	memset(buf, 'a' + id, 500);
	buf[500] = 0;
}

static void *write_errors(void *arg)
{
	struct writer *w = arg;
	char msg[501];

	message_of(w->id, msg);
	for (int i = 0; i < 100000; i++)
		fs_error(w->fs, -EIO, "%s", msg);
	return NULL;
}

struct reader { struct fs_info *fs; volatile bool *stop; unsigned torn, read; };

/* Copies of the message taken while the writers write: each must be whole. */
static void *read_errors(void *arg)
{
	struct reader *r = arg;
	char buf[512], want[501];

	while (!*r->stop) {
		fs_error_message_copy(r->fs, buf, sizeof(buf));
		if (!buf[0])
			continue;
		r->read++;
		message_of(buf[0] - 'a', want);
		r->torn += strcmp(buf, want) != 0;
	}
	return NULL;
}

/* fs_error from worker threads (the copy verifiers) leaves whole messages.
 * Without the lock a torn copy shows up in about one run of three on two
 * busy cores: a race test catches often, not always. */
Test(fs_access, error_message_from_threads)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct writer w[4];
	pthread_t th[4];
	const char *m;
	char want[501];
	volatile bool stop = false;
	struct reader r = { fs, &stop, 0, 0 };
	pthread_t rth;

	cr_assert_eq(fs_error(fs, -EINVAL, "bad %s", "thing"), -EINVAL);
	cr_assert_str_eq(fs_error_message(fs), "bad thing");
	fs_error_clear(fs);
	cr_assert_str_eq(fs_error_message(fs), "");
	cr_assert_eq(pthread_create(&rth, NULL, read_errors, &r), 0);
	for (int i = 0; i < 4; i++) {
		w[i] = (struct writer){ fs, i + 1 };
		cr_assert_eq(pthread_create(&th[i], NULL, write_errors, &w[i]), 0);
	}
	for (int i = 0; i < 4; i++)
		pthread_join(th[i], NULL);
	stop = true;
	pthread_join(rth, NULL);
	cr_assert_gt(r.read, 0);
	cr_assert_eq(r.torn, 0, "%u of %u copies were torn", r.torn, r.read);
	m = fs_error_message(fs);
	message_of(m[0] - 'a', want);
	cr_assert_str_eq(m, want);
	fs_close(fs);
}
