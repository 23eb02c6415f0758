// SPDX-License-Identifier: GPL-2.0-only
/* The batched io backend: writes to two outputs in scattered order, some
 * overlapping (the later wins), some referenced rather than copied, some
 * unaligned, one larger than an arena, read back the same before and after
 * the flush, and end up in the files; every reference taken is dropped; a
 * write log stacks on it; direct and page-cache writing give the same bytes;
 * a transaction commits through it under a write log and an undo file. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sys/stat.h>

#include "libfs/fdio.h"
#include <btk/fs.h>
#include <btk/io.h>
#include <btk/trans.h>
#include <btk/wlog.h>
#include "tests/unit/fixtures.h"

#define OUT_SIZE (48u << 20)

static char paths[2][4096];
static uint8_t *want[2];
static int refs_live, refs_taken;

static void ref_get(void *obj) { (void)obj; __atomic_add_fetch(&refs_live, 1, __ATOMIC_RELAXED); refs_taken++; }
static void ref_put(void *obj) { (void)obj; __atomic_sub_fetch(&refs_live, 1, __ATOMIC_RELAXED); }

static void setup(void)
{
	for (int i = 0; i < 2; i++) {
		fixture_temp_file(paths[i], sizeof(paths[i]), NULL, OUT_SIZE);
		want[i] = calloc(1, OUT_SIZE);
		cr_assert_not_null(want[i]);
	}
	refs_live = refs_taken = 0;
}

static void teardown(void)
{
	for (int i = 0; i < 2; i++) {
		unlink(paths[i]);
		free(want[i]);
	}
}

TestSuite(io_batch, .init = setup, .fini = teardown);

/* Queue one write (referenced when ref) and note what the output must hold. */
static void put(struct io_dev **ios, int out, uint64_t off, const uint8_t *src, size_t len, bool ref)
{
	struct io_ref hold = { ref_get, ref_put, NULL };

	cr_assert_eq(io_write_ref(ios[out], src, len, off, ref ? &hold : NULL), 0);
	memcpy(want[out] + off, src, len);
}

static void check_reads(struct io_dev **ios)
{
	uint8_t *buf = malloc(1 << 20);

	for (int o = 0; o < 2; o++)
		for (uint64_t off = 0; off < OUT_SIZE; off += 1 << 20) {
			cr_assert_eq(io_read(ios[o], buf, 1 << 20, off), 0);
			cr_assert_eq(memcmp(buf, want[o] + off, 1 << 20), 0, "output %d at %llu", o,
				     (unsigned long long)off);
		}
	free(buf);
}

static void check_files(void)
{
	uint8_t *buf = malloc(OUT_SIZE);

	for (int o = 0; o < 2; o++) {
		int fd = open(paths[o], O_RDONLY);
		cr_assert(fd >= 0);
		cr_assert_eq(fd_read_full(fd, buf, OUT_SIZE, 0), 0);
		cr_assert_eq(memcmp(buf, want[o], OUT_SIZE), 0, "file %d", o);
		close(fd);
	}
	free(buf);
}

static void scatter(unsigned flags)
{
	const char *p[2] = { paths[0], paths[1] };
	struct io_dev *ios[2];
	uint8_t *src = malloc(40u << 20);
	uint64_t x = 12345;

	for (size_t i = 0; i < (40u << 20); i++)
		src[i] = (uint8_t)(i * 131 + (i >> 12));
	cr_assert_eq(io_open_batched(p, 2, flags, ios), 0);
	cr_assert_eq(io_size(ios[0]), OUT_SIZE);
	/* a write bigger than one arena, then scattered 4 KiB..64 KiB blocks */
	put(ios, 1, 4096, src, 36u << 20, false);
	for (int i = 0; i < 3000; i++) {
		x = x * 6364136223846793005ULL + 1442695040888963407ULL;
		int out = (int)(x >> 63);
		size_t len = 4096u << ((x >> 20) % 5);
		uint64_t off = ((x >> 24) % (OUT_SIZE / 4096 - 16)) * 4096;
		if (i % 7 == 0) { /* unaligned */
			off += (x >> 8) % 4000;
			len -= (x >> 40) % 3000;
		}
		put(ios, out, off, src + (x >> 33) % (1u << 20), len, i % 2);
		if (i == 1500)
			check_reads(ios); /* read what is queued, mid-way */
	}
	check_reads(ios);
	cr_assert_eq(io_flush(ios[0]), 0);
	cr_assert_eq(io_flush(ios[1]), 0);
	check_files();
	put(ios, 0, 8192, src + 7, 5000, true); /* queued at close: the close writes it */
	io_close(ios[0]);
	io_close(ios[1]);
	check_files();
	cr_assert_eq(refs_live, 0, "%d references left", refs_live);
	cr_assert_gt(refs_taken, 1000);
	free(src);
}

Test(io_batch, scattered_writes_direct, .timeout = 60)
{
	scatter(0);
}

Test(io_batch, scattered_writes_page_cache, .timeout = 60)
{
	scatter(IO_OPEN_NO_DIRECT);
}

Test(io_batch, write_log_stacks_on_it)
{
	const char *p[2] = { paths[0], paths[1] };
	struct io_dev *ios[2], *logged;
	struct wlog_writer *w;
	char logpath[4096];
	uint8_t blk[4096], back[4096];

	fixture_temp_file(logpath, sizeof(logpath), NULL, 0);
	unlink(logpath);
	memset(blk, 0x5a, sizeof(blk));
	cr_assert_eq(io_open_batched(p, 2, 0, ios), 0);
	cr_assert_eq(wlog_create(logpath, &w), 0);
	cr_assert_eq(wlog_add_device(w, ios[0], &logged), 0);
	cr_assert_eq(io_write(logged, blk, sizeof(blk), 65536), 0);
	cr_assert_eq(io_read(logged, back, sizeof(back), 65536), 0);
	cr_assert_eq(memcmp(blk, back, sizeof(blk)), 0);
	cr_assert_eq(io_flush(logged), 0);
	memcpy(want[0] + 65536, blk, sizeof(blk));
	check_files();
	io_close(logged);
	io_close(ios[1]);
	wlog_close(w);
	unlink(logpath);
}

Test(io_batch, refuses_what_it_cannot_open)
{
	const char *p[2] = { paths[0], "/nonexistent/btk-out" };
	struct io_dev *ios[2] = { (struct io_dev *)1, (struct io_dev *)1 };

	cr_assert_eq(io_open_batched(p, 2, 0, ios), -ENOENT);
	cr_assert_null(ios[0]);
	cr_assert_null(ios[1]);
	p[1] = "/dev/null";
	cr_assert_eq(io_open_batched(p, 2, 0, ios), -ENOTBLK, "a character device is no output");
}

/* fs_open_options.batched_writes: a commit's blocks and superblocks go out
 * through the batched writer, under the write log and the undo recorder,
 * and the filesystem reopens (plain) with the change. */
Test(io_batch, transaction_commits_through_it, .timeout = 60)
{
	char src[4096], img[4096], log[4096], undo[4096];
	const char *p[1] = { img };
	struct fs_open_options opts;
	struct wlog_reader *r;
	struct fs_info *fs;
	struct trans *t;
	struct stat st;
	uint64_t gen;

	cr_assert_eq(fixture_image("small", src, sizeof(src)), 0);
	cr_assert_eq(stat(src, &st), 0);
	fixture_temp_file(img, sizeof(img), src, (uint64_t)st.st_size);
	fixture_temp_file(log, sizeof(log), NULL, 0);
	fixture_temp_file(undo, sizeof(undo), NULL, 0);
	unlink(log);
	unlink(undo);
	fs_open_options_init(&opts);
	opts.writable = true;
	opts.batched_writes = true;
	opts.write_log_path = log;
	opts.undo_path = undo;
	cr_assert_eq(fs_open(p, 1, &opts, &fs), 0, "%s", btk_error_msg());
	gen = fs->generation;
	cr_assert_eq(trans_start(fs, &t), 0, "%s", btk_error_msg());
	memset(super_label_ptr(trans_super(t)), 0, BTRFS_LABEL_SIZE);
	memcpy(super_label_ptr(trans_super(t)), "batched", 7);
	cr_assert_eq(trans_commit(t), 0, "%s", btk_error_msg());
	cr_assert_eq(fs_finish_undo(fs), 0, "%s", btk_error_msg());
	fs_close(fs);
	cr_assert_eq(wlog_open(log, &r), 0);
	cr_assert_gt(wlog_count(r), 3, "the commit's writes were logged");
	wlog_reader_free(r);
	cr_assert_eq(fs_open(p, 1, NULL, &fs), 0, "%s", btk_error_msg());
	cr_assert_eq(fs->generation, gen + 1);
	cr_assert_str_eq((const char *)super_label_ptr(fs->super), "batched");
	fs_close(fs);
	unlink(img);
	unlink(log);
	unlink(undo);
}
