// SPDX-License-Identifier: GPL-2.0-only
/* The read pipeline: slots come back in submission order with the bytes of
 * every segment, whether read uncached by the worker threads (a file), through
 * the fallback on the caller's thread (a memory device, an unaligned segment)
 * or with no threads at all; a read past the end is reported per segment; a
 * full pipe hands out no slot; destroying it with slots queued returns. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include <btk/read_pipe.h>
#include "tests/unit/fixtures.h"

#define FILE_SIZE (4u << 20)
#define SEG (64u << 10)

static char path[4096];
static uint8_t *pattern;

static uint8_t byte_at(uint64_t off)
{
	return (uint8_t)(off * 7 + (off >> 12));
}

static void make_file(void)
{
	int fd;

	pattern = malloc(FILE_SIZE);
	cr_assert_not_null(pattern);
	for (size_t i = 0; i < FILE_SIZE; i++)
		pattern[i] = byte_at(i);
	fixture_temp_file(path, sizeof(path), NULL, 0);
	fd = open(path, O_WRONLY);
	cr_assert(fd >= 0);
	cr_assert_eq(write(fd, pattern, FILE_SIZE), (ssize_t)FILE_SIZE);
	close(fd);
}

static void remove_file(void)
{
	unlink(path);
}

TestSuite(read_pipe, .init = make_file, .fini = remove_file);

/* Queue `count` slots of two segments (io1 at k*SEG, io2 at the end minus
 * (k+1)*SEG, `len` bytes) through a pipe and check each as it comes back. */
static void run_slots(struct io_dev *io1, struct io_dev *io2, unsigned threads, size_t len, unsigned count)
{
	struct read_pipe *p;
	unsigned queued = 0, checked = 0;

	cr_assert_eq(read_pipe_create(3, 2, SEG, threads, &p), 0);
	while (checked < count) {
		struct read_slot *s = queued < count ? read_pipe_fill(p) : NULL;
		if (s) {
			s->seg[0] = (struct read_seg){ .io = io1, .offset = (uint64_t)queued * SEG, .len = len,
						       .buf = s->seg[0].buf };
			s->seg[1] = (struct read_seg){ .io = io2, .offset = FILE_SIZE - (uint64_t)(queued + 1) * SEG,
						       .len = len, .buf = s->seg[1].buf };
			read_pipe_submit(p);
			queued++;
			continue;
		}
		s = read_pipe_next(p);
		cr_assert_not_null(s);
		cr_assert_eq(s->index, checked % 3);
		for (unsigned g = 0; g < 2; g++) {
			uint64_t off = g ? FILE_SIZE - (uint64_t)(checked + 1) * SEG : (uint64_t)checked * SEG;
			cr_assert_eq(s->seg[g].ret, 0, "slot %u segment %u: %d", checked, g, s->seg[g].ret);
			cr_assert_eq(memcmp(s->seg[g].buf, pattern + off, len), 0, "slot %u segment %u", checked, g);
		}
		read_pipe_release(p);
		checked++;
	}
	cr_assert_null(read_pipe_next(p));
	read_pipe_destroy(p);
}

Test(read_pipe, file_read_by_threads_in_order)
{
	struct io_dev *io;
	uint8_t *buf = NULL;

	cr_assert_eq(io_open_file(path, 0, &io), 0);
	cr_assert_eq(posix_memalign((void **)&buf, IO_DIRECT_ALIGN, SEG), 0);
	/* uncached reads need aligned buffers, offsets and lengths */
	cr_assert_eq(io_read_direct(io, buf + 1, 4096, 0), -EINVAL);
	cr_assert_eq(io_read_direct(io, buf, 4096, FILE_SIZE), -ENXIO);
	if (io_read_direct(io, buf, SEG, SEG) == 0)
		cr_assert_eq(memcmp(buf, pattern + SEG, SEG), 0);
	free(buf);
	run_slots(io, io, 2, SEG, 20);
	run_slots(io, io, 0, SEG, 7);
	/* unaligned: the uncached read refuses, the caller's thread reads it */
	run_slots(io, io, 2, 1000, 9);
	io_close(io);
}

Test(read_pipe, memory_device_falls_back_to_cached_reads)
{
	struct io_dev *io;

	cr_assert_eq(io_open_mem(pattern, FILE_SIZE, false, &io), 0);
	cr_assert_eq(io_read_direct(io, pattern, 4096, 0), -EOPNOTSUPP);
	run_slots(io, io, 1, SEG, 11);
	io_close(io);
}

Test(read_pipe, past_the_end_and_full_pipe)
{
	struct io_dev *io;
	struct read_pipe *p;
	struct read_slot *s;

	cr_assert_eq(io_open_file(path, 0, &io), 0);
	cr_assert_eq(read_pipe_create(2, 1, SEG, 2, &p), 0);
	cr_assert_null(read_pipe_next(p));
	s = read_pipe_fill(p);
	s->seg[0].io = io;
	s->seg[0].offset = FILE_SIZE - 4096;
	s->seg[0].len = SEG;
	read_pipe_submit(p);
	s = read_pipe_fill(p);
	cr_assert_not_null(s);
	s->seg[0].io = io;
	s->seg[0].len = SEG;
	read_pipe_submit(p);
	cr_assert_null(read_pipe_fill(p));
	s = read_pipe_next(p);
	cr_assert_eq(s->seg[0].ret, -ENXIO);
	read_pipe_release(p);
	cr_assert_not_null(read_pipe_fill(p));
	read_pipe_submit(p);
	/* two slots still queued */
	read_pipe_destroy(p);
	io_close(io);
}
