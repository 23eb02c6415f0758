// SPDX-License-Identifier: GPL-2.0-only
/* The io layer: the file and memory backends read back what was written,
 * refuse reads past the end and writes to read-only devices, and opening
 * something that is not a file or block device fails cleanly. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btk/io.h>
#include "tests/unit/fixtures.h"

#define FILE_SIZE 10000

static char path[4096];

/* A temp file holding bytes i*7 mod 256 at offset i. */
static void make_pattern_file(void)
{
	uint8_t buf[FILE_SIZE];
	int fd;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)(i * 7);
	fixture_temp_file(path, sizeof(path), NULL, 0);
	fd = open(path, O_WRONLY);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, buf, sizeof(buf)), (ssize_t)sizeof(buf));
	close(fd);
}

static void remove_pattern_file(void)
{
	unlink(path);
}

TestSuite(io_file, .init = make_pattern_file, .fini = remove_pattern_file);

Test(io_file, reads_what_is_in_the_file)
{
	struct io_dev *io;
	uint8_t buf[300];

	cr_assert_eq(io_open_file(path, 0, &io), 0);
	cr_assert_not_null(io);
	cr_assert_str_eq(io->path, path);
	cr_assert_not(io->writable);
	cr_assert_eq(io_size(io), FILE_SIZE);
	cr_assert_eq(io_read(io, buf, sizeof(buf), 4000), 0);
	for (size_t i = 0; i < sizeof(buf); i++)
		cr_assert_eq(buf[i], (uint8_t)((4000 + i) * 7), "byte %zu", 4000 + i);
	/* the last bytes of the file are readable, one past them is not */
	cr_assert_eq(io_read(io, buf, 10, FILE_SIZE - 10), 0);
	cr_assert_eq(buf[9], (uint8_t)((FILE_SIZE - 1) * 7));
	cr_assert_eq(io_read(io, buf, 0, FILE_SIZE), 0);
	io_close(io);
}

Test(io_file, short_read_beyond_end_is_enxio)
{
	struct io_dev *io;
	uint8_t buf[100];

	cr_assert_eq(io_open_file(path, 0, &io), 0);
	cr_assert_eq(io_read(io, buf, 100, FILE_SIZE - 50), -ENXIO, "read crossing the end");
	cr_assert_eq(io_read(io, buf, 1, FILE_SIZE), -ENXIO, "read at the end");
	cr_assert_eq(io_read(io, buf, 1, 1ULL << 40), -ENXIO, "read far beyond the end");
	cr_assert_eq(io_read(io, buf, 16, UINT64_MAX - 8), -ENXIO, "offset + length overflows");
	io_close(io);
}

Test(io_file, read_only_device_refuses_writes)
{
	struct io_dev *io;
	uint8_t buf[16] = { 0 }, check[16];

	cr_assert_eq(io_open_file(path, 0, &io), 0);
	cr_assert_eq(io_write(io, buf, sizeof(buf), 0), -EROFS);
	cr_assert_eq(io_flush(io), 0);
	io_close(io);
	/* and the file is untouched */
	cr_assert_eq(io_open_file(path, 0, &io), 0);
	cr_assert_eq(io_read(io, check, sizeof(check), 0), 0);
	for (size_t i = 0; i < sizeof(check); i++)
		cr_assert_eq(check[i], (uint8_t)(i * 7));
	io_close(io);
}

Test(io_file, writes_land_in_the_file_and_grow_it)
{
	struct io_dev *io;
	const char msg[] = "written through io_write";
	char back[sizeof(msg)];
	struct stat st;

	cr_assert_eq(io_open_file(path, IO_OPEN_WRITE, &io), 0);
	cr_assert(io->writable);
	cr_assert_eq(io_write(io, msg, sizeof(msg), 1234), 0);
	cr_assert_eq(io_write(io, msg, sizeof(msg), FILE_SIZE + 100), 0, "write past the end extends");
	cr_assert_eq(io_size(io), FILE_SIZE + 100 + sizeof(msg));
	cr_assert_eq(io_flush(io), 0);
	io_close(io);

	cr_assert_eq(stat(path, &st), 0);
	cr_assert_eq((uint64_t)st.st_size, FILE_SIZE + 100 + sizeof(msg));
	cr_assert_eq(io_open_file(path, 0, &io), 0);
	cr_assert_eq(io_read(io, back, sizeof(back), 1234), 0);
	cr_assert_str_eq(back, msg);
	cr_assert_eq(io_read(io, back, sizeof(back), FILE_SIZE + 100), 0);
	cr_assert_str_eq(back, msg);
	io_close(io);
}

Test(io_file, missing_file_fails_with_enoent)
{
	struct io_dev *io = (struct io_dev *)&io;

	cr_assert_eq(io_open_file("/nonexistent/btk-unit/none", 0, &io), -ENOENT);
	cr_assert_null(io);
}

Test(io_file, directory_is_refused)
{
	struct io_dev *io = (struct io_dev *)&io;
	const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
	int ret;

	ret = io_open_file(tmp, 0, &io);
	cr_assert(ret < 0, "opening directory %s gave %d", tmp, ret);
	cr_assert_eq(ret, -ENOTBLK);
	cr_assert_null(io);
	ret = io_open_file(tmp, IO_OPEN_WRITE, &io);
	cr_assert(ret == -EISDIR || ret == -ENOTBLK, "writable open of a directory gave %d", ret);
	cr_assert_null(io);
}

Test(io_file, character_device_is_refused)
{
	struct io_dev *io = (struct io_dev *)&io;

	if (access("/dev/null", R_OK) != 0)
		cr_skip_test("no /dev/null");
	cr_assert_eq(io_open_file("/dev/null", 0, &io), -ENOTBLK);
	cr_assert_null(io);
	if (access("/dev/zero", R_OK) == 0) {
		cr_assert_eq(io_open_file("/dev/zero", 0, &io), -ENOTBLK);
		cr_assert_null(io);
	}
}

Test(io_file, close_of_null_is_harmless)
{
	io_close(NULL);
}

Test(io_mem, read_write_size)
{
	uint8_t *buf = calloc(1, 8192);
	uint8_t back[100];
	struct io_dev *io;

	cr_assert_not_null(buf);
	cr_assert_eq(io_open_mem(buf, 8192, true, &io), 0);
	cr_assert_not_null(io);
	cr_assert(io->writable);
	cr_assert_eq(io_size(io), 8192);
	memset(back, 0xab, sizeof(back));
	cr_assert_eq(io_write(io, back, sizeof(back), 8092), 0, "write that ends exactly at the end");
	cr_assert_eq(buf[8191], 0xab, "memory device writes go to the buffer");
	cr_assert_eq(buf[8091], 0);
	memset(back, 0, sizeof(back));
	cr_assert_eq(io_read(io, back, sizeof(back), 8092), 0);
	for (size_t i = 0; i < sizeof(back); i++)
		cr_assert_eq(back[i], 0xab);
	cr_assert_eq(io_flush(io), 0);
	io_close(io); /* frees buf: valgrind/ASan report a leak otherwise */
}

Test(io_mem, bounds)
{
	uint8_t buf[4096] = { 0 }, tmp[16];
	struct io_dev *io;

	cr_assert_eq(io_open_mem(buf, sizeof(buf), false, &io), 0);
	cr_assert_eq(io_read(io, tmp, sizeof(tmp), 4090), -ENXIO);
	cr_assert_eq(io_read(io, tmp, 1, 4096), -ENXIO);
	cr_assert_eq(io_read(io, tmp, 16, UINT64_MAX - 4), -ENXIO);
	cr_assert_eq(io_write(io, tmp, sizeof(tmp), 4090), -ENOSPC, "memory devices do not grow");
	cr_assert_eq(io_write(io, tmp, 16, UINT64_MAX - 4), -ENOSPC);
	cr_assert_eq(io_read(io, tmp, 0, 4096), 0);
	io_close(io); /* the caller's buffer is not freed (it is on the stack) */
	cr_assert_eq(buf[0], 0);
}

Test(io_mem, read_only_flag_is_honoured)
{
	uint8_t buf[512] = { 0 }, one = 1;
	struct io_dev *io;

	cr_assert_eq(io_open_mem(buf, sizeof(buf), false, &io), 0);
	io->writable = false;
	cr_assert_eq(io_write(io, &one, 1, 0), -EROFS);
	cr_assert_eq(buf[0], 0);
	io_close(io);
}
