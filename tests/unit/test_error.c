// SPDX-License-Identifier: GPL-2.0-only
/* The per-thread error record (libfs/error.c): kinds from errno, a record
 * per thread that no other thread overwrites, a worker's record handed to
 * the joiner, and fs_open's failure (no fs yet) typed like any other. */
#include <criterion/criterion.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <btk/block.h>
#include <btk/error.h>
#include <btk/fs.h>
#include "tests/unit/fixtures.h"

Test(error, kind_from_errno)
{
	static const struct { int err; enum btk_err_kind kind; const char *name; } map[] = {
		{ -EIO, BTK_ERR_IO, "io" },
		{ -EUCLEAN, BTK_ERR_CORRUPT, "corrupt" },
		{ -EBADMSG, BTK_ERR_CORRUPT, "corrupt" },
		{ -EOPNOTSUPP, BTK_ERR_UNSUPPORTED, "unsupported" },
		{ -ENOSPC, BTK_ERR_NOSPC, "nospc" },
		{ -ECANCELED, BTK_ERR_CANCELLED, "cancelled" },
		{ -EBUSY, BTK_ERR_BUSY, "busy" },
		{ -EINVAL, BTK_ERR_INVALID, "invalid" },
		{ -ENOMEM, BTK_ERR_NOMEM, "nomem" },
		{ -ENOENT, BTK_ERR_NOTFOUND, "notfound" },
		{ -EEXIST, BTK_ERR_EXISTS, "exists" },
		{ -ENODEV, BTK_ERR_MISSING, "missing" },
		{ -EPIPE, BTK_ERR_INTERNAL, "internal" },
		{ 0, BTK_ERR_NONE, "none" },
	};

	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++) {
		cr_assert_eq(btk_err_kind_of(map[i].err), map[i].kind, "errno %d", map[i].err);
		cr_assert_eq(btk_err_kind_of(-map[i].err), map[i].kind, "positive errno %d", -map[i].err);
		cr_assert_str_eq(btk_err_kind_name(map[i].kind), map[i].name);
		cr_assert_eq(btk_error_set(map[i].err, BTK_ERR_NONE, "e%zu", i), map[i].err);
		cr_assert_eq(btk_last_error()->kind, map[i].kind);
	}
	cr_assert_str_eq(btk_err_kind_name((enum btk_err_kind)999), "internal");
	/* an explicit kind wins over the errno's */
	btk_error_set(-EUCLEAN, BTK_ERR_CSUM, "bad csum");
	cr_assert_eq(btk_last_error()->kind, BTK_ERR_CSUM);
	cr_assert_eq(btk_last_error()->err, -EUCLEAN);
	/* the kind of a failure: the record's when it is about that errno */
	cr_assert_eq(btk_error_kind(-EUCLEAN), BTK_ERR_CSUM);
	cr_assert_eq(btk_error_kind(-ECANCELED), BTK_ERR_CANCELLED, "an unrecorded failure: its errno's kind");
	cr_assert_eq(btk_error_kind(0), BTK_ERR_NONE);
}

Test(error, record_message_text_and_clear)
{
	char wrapped[600];

	cr_assert_eq(fs_error(NULL, -EINVAL, "bad %s", "thing"), -EINVAL);
	cr_assert_str_eq(btk_error_msg(), "bad thing");
	cr_assert_eq(btk_last_error()->bytenr, 0);
	/* context wraps the previous message, formatted before the record changes */
	fs_error(NULL, -EINVAL, "opening: %s", btk_error_msg());
	cr_assert_str_eq(btk_error_msg(), "opening: bad thing");
	/* the text of a failure: the record's message, strerror when there is none */
	cr_assert_str_eq(btk_error_text(-EINVAL), "opening: bad thing");
	btk_error_locate(4096, 2);
	cr_assert_eq(btk_last_error()->bytenr, 4096);
	cr_assert_eq(btk_last_error()->devid, 2);
	btk_error_clear();
	cr_assert_eq(btk_last_error()->err, 0);
	cr_assert_eq(btk_last_error()->kind, BTK_ERR_NONE);
	cr_assert_str_eq(btk_error_msg(), "");
	cr_assert_str_eq(btk_error_text(-EINVAL), strerror(EINVAL));
	/* a message longer than the record is cut, not overrun */
	memset(wrapped, 'x', sizeof(wrapped) - 1);
	wrapped[sizeof(wrapped) - 1] = 0;
	fs_error(NULL, -EIO, "%s", wrapped);
	cr_assert_eq(strlen(btk_error_msg()), BTK_ERR_MSG_MAX - 1);
}

struct recorder { int id, err; unsigned wrong; };

/* Thread id's message: 500 times its letter, so that a mixed record shows. */
static void message_of(int id, char *buf)
{
	memset(buf, 'a' + id, 500);
	buf[500] = 0;
}

/* Record and read back, many times, while the other threads do the same. */
static void *record_errors(void *arg)
{
	struct recorder *r = arg;
	char msg[501];

	message_of(r->id, msg);
	for (int i = 0; i < 20000; i++) {
		fs_error(NULL, r->err, "%s", msg);
		if (strcmp(btk_error_msg(), msg) || btk_last_error()->err != r->err ||
		    btk_last_error()->kind != btk_err_kind_of(r->err))
			r->wrong++;
	}
	return NULL;
}

/* Threads recording at once each see only their own record; the main
 * thread's is untouched by them (the old shared buffer was overwritten by
 * the copy-verifying threads). */
Test(error, threads_do_not_see_each_others_errors)
{
	static const int errs[] = { -EIO, -EUCLEAN, -ENOSPC, -ENOMEM };
	struct recorder r[4];
	pthread_t th[4];

	fs_error(NULL, -ECANCELED, "the main thread's");
	for (int i = 0; i < 4; i++) {
		r[i] = (struct recorder){ i + 1, errs[i], 0 };
		cr_assert_eq(pthread_create(&th[i], NULL, record_errors, &r[i]), 0);
	}
	for (int i = 0; i < 4; i++) {
		pthread_join(th[i], NULL);
		cr_assert_eq(r[i].wrong, 0, "thread %d saw %u foreign records", i, r[i].wrong);
	}
	cr_assert_str_eq(btk_error_msg(), "the main thread's");
	cr_assert_eq(btk_last_error()->kind, BTK_ERR_CANCELLED);
}

struct worker { struct fs_info *fs; struct btk_error err; int ret; };

/* A worker that fails on a block read and passes its record on. */
static void *failing_worker(void *arg)
{
	struct worker *w = arg;
	struct tree_block *b;

	w->ret = block_read(w->fs, 12345 * 4096ULL * 1024, &BLOCK_EXPECT_ANY, &b);
	btk_error_pass(&w->err);
	fs_error(w->fs, -EIO, "a later error");   /* only the first is passed */
	btk_error_pass(&w->err);
	return NULL;
}

static void *quiet_worker(void *arg)
{
	btk_error_pass(&((struct worker *)arg)->err);
	return NULL;
}

Test(error, a_workers_error_reaches_the_joiner)
{
	struct fs_info *fs = fixture_open("small", NULL);
	struct worker w = { .fs = fs }, q = { .fs = fs };
	pthread_t th;

	btk_error_clear();
	cr_assert_eq(pthread_create(&th, NULL, failing_worker, &w), 0);
	pthread_join(th, NULL);
	cr_assert_lt(w.ret, 0);
	cr_assert_str_eq(btk_error_msg(), "", "nothing crosses threads by itself");
	cr_assert_eq(btk_error_adopt(&w.err), w.ret);
	cr_assert_eq(btk_last_error()->err, w.ret);
	cr_assert(strstr(btk_error_msg(), "not in any chunk"), "%s", btk_error_msg());
	cr_assert_eq(btk_last_error()->kind, BTK_ERR_CORRUPT);
	/* a worker with nothing to pass leaves the joiner's record alone */
	cr_assert_eq(pthread_create(&th, NULL, quiet_worker, &q), 0);
	pthread_join(th, NULL);
	cr_assert_eq(btk_error_adopt(&q.err), 0);
	cr_assert(strstr(btk_error_msg(), "not in any chunk"), "%s", btk_error_msg());
	fs_close(fs);
}

/* fs_open fails before there is an fs: the record is typed all the same. */
Test(error, fs_open_failure_is_typed)
{
	const char *missing[] = { "/nonexistent/btk-test-device" };
	char path[4096];
	struct fs_info *fs = (struct fs_info *)&fs;
	int ret;

	fs_error(NULL, -EIO, "stale");
	ret = fs_open(missing, 1, NULL, &fs);
	cr_assert_lt(ret, 0);
	cr_assert_null(fs);
	cr_assert_eq(btk_last_error()->err, ret);
	cr_assert_eq(btk_last_error()->kind, btk_err_kind_of(ret));
	cr_assert(strstr(btk_error_msg(), "btk-test-device"), "%s", btk_error_msg());
	cr_assert_eq(fs_open(NULL, 0, NULL, &fs), -EINVAL);
	cr_assert_eq(btk_last_error()->kind, BTK_ERR_INVALID);
	cr_assert_str_eq(btk_error_msg(), "no device given");
	/* a file that is no btrfs at all */
	fixture_temp_file(path, sizeof(path), NULL, 1 << 20);
	cr_assert_eq(fs_open((const char *[]){ path }, 1, NULL, &fs), -EINVAL);
	cr_assert_eq(btk_last_error()->kind, BTK_ERR_INVALID);
	cr_assert(strstr(btk_error_msg(), "not a btrfs filesystem"), "%s", btk_error_msg());
	unlink(path);
}
