// SPDX-License-Identifier: GPL-2.0-only
/* Undo files: what an operation overwrote comes back byte for byte (random,
 * overlapping, unaligned writes on several devices, superblocks included),
 * also after a crash; a file that is damaged in any way, a filesystem that
 * changed since, or a wrong set of devices is refused without writing a
 * byte; and fs_open's undo_path records a real filesystem's changes. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <btk/format.h>
#include <btk/super.h>
#include <btk/undo.h>
#include "tests/unit/fixtures.h"

#define GEN 100
#define NDEV 2
static const size_t dev_sizes[NDEV] = { 1U << 20, (1U << 20) + 1000 }; /* the second ends mid-block */

static char dir[4096];
static uint64_t rng = 0x1234;

static void make_dir(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/btk-undo-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	cr_assert_not_null(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
}

static void remove_dir(void)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char p[8192];

	if (!d)
		return;
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
			snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
			unlink(p);
		}
	closedir(d);
	rmdir(dir);
}

TestSuite(undo, .init = make_dir, .fini = remove_dir);

static void in_dir(char *out, size_t len, const char *name)
{
	snprintf(out, len, "%s/%s", dir, name);
}

static uint64_t rnd(void)
{
	uint64_t z = (rng += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void fill_random(uint8_t *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (uint8_t)rnd();
}

/* A valid primary superblock for device devid of filesystem fsid. */
static void make_super(uint8_t *sb, uint64_t size, const uint8_t *fsid, uint64_t devid, const uint8_t *uuid,
		       uint64_t gen)
{
	uint8_t *di = super_dev_item_ptr(sb);
	char why[160];

	memset(sb, 0, BTRFS_SUPER_INFO_SIZE);
	memcpy(super_fsid_ptr(sb), fsid, 16);
	super_set_bytenr(sb, BTRFS_SUPER_INFO_OFFSET);
	super_set_magic(sb, BTRFS_MAGIC);
	super_set_generation(sb, gen);
	super_set_root(sb, 1 << 20);
	super_set_chunk_root(sb, 2 << 20);
	super_set_chunk_root_generation(sb, gen);
	super_set_total_bytes(sb, size);
	super_set_num_devices(sb, NDEV);
	super_set_sectorsize(sb, 4096);
	super_set_nodesize(sb, 16384);
	super_set_stripesize(sb, 4096);
	super_set_sys_chunk_array_size(sb, (uint32_t)(sizeof(struct btrfs_disk_key) + chunk_item_size(1)));
	super_set_csum_type(sb, BTRFS_CSUM_TYPE_CRC32);
	dev_item_set_devid(di, devid);
	dev_item_set_total_bytes(di, size);
	memcpy(dev_item_uuid_ptr(di), uuid, 16);
	memcpy(dev_item_fsid_ptr(di), fsid, 16);
	cr_assert_eq(super_update_csum(sb), 0);
	cr_assert_eq(super_validate(sb, BTRFS_SUPER_INFO_OFFSET, why, sizeof(why)), 0, "%s", why);
}

/* A set of member devices in memory and what a test expects of them. */
struct devset {
	uint8_t fsid[16];
	uint8_t *buf[NDEV];      /* the devices */
	uint8_t *orig[NDEV];     /* before the operation */
	uint8_t *model[NDEV];    /* what the operation should leave */
	uint8_t uuid[NDEV][16];
	uint8_t sb[NDEV][BTRFS_SUPER_INFO_SIZE];
};

static void devset_init(struct devset *s)
{
	fill_random(s->fsid, 16);
	for (int i = 0; i < NDEV; i++) {
		size_t n = dev_sizes[i];
		s->buf[i] = malloc(n);
		s->orig[i] = malloc(n);
		s->model[i] = malloc(n);
		cr_assert(s->buf[i] && s->orig[i] && s->model[i]);
		fill_random(s->buf[i], n);
		fill_random(s->uuid[i], 16);
		make_super(s->sb[i], n, s->fsid, (uint64_t)i + 1, s->uuid[i], GEN);
		memcpy(s->buf[i] + BTRFS_SUPER_INFO_OFFSET, s->sb[i], BTRFS_SUPER_INFO_SIZE);
		memcpy(s->orig[i], s->buf[i], n);
		memcpy(s->model[i], s->buf[i], n);
	}
}

static void devset_free(struct devset *s)
{
	for (int i = 0; i < NDEV; i++) {
		free(s->buf[i]);
		free(s->orig[i]);
		free(s->model[i]);
	}
}

static struct io_dev *mem_io(uint8_t *buf, size_t n)
{
	struct io_dev *io;

	cr_assert_eq(io_open_mem(buf, n, false, &io), 0);
	return io;
}

/* Start recording: an undo file at path over every device of s. */
static struct undo_file *record(struct devset *s, const char *path, struct io_dev **w)
{
	struct undo_file *u;

	cr_assert_eq(undo_create(path, s->fsid, GEN, &u), 0);
	for (int i = 0; i < NDEV; i++)
		cr_assert_eq(undo_add_device(u, (uint64_t)i + 1, s->uuid[i], mem_io(s->buf[i], dev_sizes[i]), &w[i]),
			     0);
	return u;
}

/* Write through the recorder and into the model; reads through the
 * recorder (held-back writes included) must match the model. */
static void op_write(struct devset *s, struct io_dev **w, int d, uint64_t off, size_t len, const uint8_t *data)
{
	uint8_t back[65536];
	uint64_t roff;
	size_t rlen;

	cr_assert_eq(io_write(w[d], data, len, off), 0, "write %zu at %llu", len, (unsigned long long)off);
	memcpy(s->model[d] + off, data, len);
	rlen = (size_t)(rnd() % sizeof(back)) + 1;
	if (rlen > dev_sizes[d])
		rlen = dev_sizes[d];
	roff = rnd() % (dev_sizes[d] - rlen + 1);
	cr_assert_eq(io_read(w[d], back, rlen, roff), 0);
	cr_assert_eq(memcmp(back, s->model[d] + roff, rlen), 0, "read back at %llu", (unsigned long long)roff);
	rlen = len < sizeof(back) ? len : sizeof(back);
	cr_assert_eq(io_read(w[d], back, rlen, off), 0);
	cr_assert_eq(memcmp(back, data, rlen), 0, "the write reads back");
}

/* count random writes of every shape: tiny and unaligned, across block
 * boundaries, large, and over earlier writes; a flush now and then. */
static void op_random_writes(struct devset *s, struct io_dev **w, unsigned count)
{
	static uint8_t data[200000];
	uint64_t last_off[NDEV] = { 0 };

	for (unsigned k = 0; k < count; k++) {
		int d = (int)(rnd() % NDEV);
		uint64_t size = dev_sizes[d], off;
		size_t len;

		switch (rnd() % 4) {
		case 0: len = (size_t)(rnd() % 300) + 1; off = rnd() % (size - len); break;
		case 1: len = (size_t)(rnd() % 10000) + 2; off = (rnd() % (size / 4096 - 3) + 1) * 4096 - rnd() % (len - 1) - 1; break;
		case 2: len = (size_t)(rnd() % 150000) + 1; off = rnd() % (size - len); break;
		default: len = (size_t)(rnd() % 6000) + 1; off = last_off[d] + rnd() % 3000; break;
		}
		if (off + len > size)
			off = size - len;
		/* the superblock is written whole, by commits only */
		if (off < BTRFS_SUPER_INFO_OFFSET + BTRFS_SUPER_INFO_SIZE && off + len > BTRFS_SUPER_INFO_OFFSET)
			off = BTRFS_SUPER_INFO_OFFSET + BTRFS_SUPER_INFO_SIZE +
			      rnd() % (size - len - BTRFS_SUPER_INFO_OFFSET - BTRFS_SUPER_INFO_SIZE);
		last_off[d] = off;
		fill_random(data, len);
		op_write(s, w, d, off, len, data);
		if (rnd() % 20 == 0)
			cr_assert_eq(io_flush(w[d]), 0);
	}
}

/* A commit: every device gets a superblock of generation gen. */
static void op_commit(struct devset *s, struct io_dev **w, uint64_t gen)
{
	for (int d = 0; d < NDEV; d++) {
		uint8_t sb[BTRFS_SUPER_INFO_SIZE];
		memcpy(sb, s->sb[d], sizeof(sb));
		super_set_generation(sb, gen);
		cr_assert_eq(super_update_csum(sb), 0);
		op_write(s, w, d, BTRFS_SUPER_INFO_OFFSET, sizeof(sb), sb);
		cr_assert_eq(io_flush(w[d]), 0);
	}
}

static void close_all(struct io_dev **w)
{
	for (int d = 0; d < NDEV; d++)
		io_close(w[d]);
}

/* The generation on device d now, written outside the operation (a mount). */
static void outside_commit(struct devset *s, int d, uint64_t gen)
{
	uint8_t *sb = s->buf[d] + BTRFS_SUPER_INFO_OFFSET;

	super_set_generation(sb, gen);
	cr_assert_eq(super_update_csum(sb), 0);
}

/* Apply with the devices in the order given by perm (NULL: in order). */
static int apply(struct devset *s, const char *path, unsigned flags, char *msg, size_t msglen, const int *perm)
{
	struct io_dev *devs[NDEV];
	int ret;

	for (int i = 0; i < NDEV; i++) {
		int d = perm ? perm[i] : i;
		devs[i] = mem_io(s->buf[d], dev_sizes[d]);
	}
	ret = undo_apply(path, devs, NDEV, flags, msg, msglen);
	for (int i = 0; i < NDEV; i++)
		io_close(devs[i]);
	return ret;
}

static void assert_devices_equal(struct devset *s, uint8_t **want, const char *what)
{
	for (int d = 0; d < NDEV; d++)
		for (size_t i = 0; i < dev_sizes[d]; i++)
			if (s->buf[d][i] != want[d][i])
				cr_assert_fail("device %d byte %zu differs from %s", d, i, what);
}

/* Snapshot of the devices, to prove a refusal changed nothing. */
static void snapshot(struct devset *s, uint8_t **snap)
{
	for (int d = 0; d < NDEV; d++) {
		snap[d] = malloc(dev_sizes[d]);
		cr_assert_not_null(snap[d]);
		memcpy(snap[d], s->buf[d], dev_sizes[d]);
	}
}

static void snapshot_free(uint8_t **snap)
{
	for (int d = 0; d < NDEV; d++)
		free(snap[d]);
}

/* A finished operation: random writes and a commit to GEN + 1. */
static void finished_operation(struct devset *s, const char *path)
{
	struct io_dev *w[NDEV];
	struct undo_file *u = record(s, path, w);

	op_random_writes(s, w, 200);
	op_commit(s, w, GEN + 1);
	cr_assert_eq(undo_finish(u, 0), 0);
	close_all(w);
	undo_close(u);
}

Test(undo, round_trip_restores_every_byte_on_every_device)
{
	static const int reversed[NDEV] = { 1, 0 };
	struct devset s;
	struct io_dev *w[NDEV];
	struct undo_summary sum;
	struct undo_file *u;
	char path[4200], msg[512];

	devset_init(&s);
	in_dir(path, sizeof(path), "op.undo");
	u = record(&s, path, w);
	op_random_writes(&s, w, 400);
	op_commit(&s, w, GEN + 1);
	assert_devices_equal(&s, s.model, "the model after the flushes");
	cr_assert_eq(undo_finish(u, 0), 0);
	cr_assert_eq(io_write(w[0], "x", 1, 0), -EROFS, "no write after the file is sealed");
	close_all(w);
	undo_close(u);

	cr_assert_eq(undo_info(path, &sum, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert(sum.finished);
	cr_assert_eq(sum.generation_before, GEN);
	cr_assert_eq(sum.generation_after, GEN + 1, "read from the devices at finish");
	cr_assert_eq(sum.max_super_generation, GEN + 1);
	cr_assert_eq(sum.super_writes, NDEV);
	cr_assert_eq(sum.ndevices, NDEV);
	cr_assert_eq(memcmp(sum.fsid, s.fsid, 16), 0);
	for (int d = 0; d < NDEV; d++) {
		cr_assert_eq(sum.devices[d].devid, (uint64_t)d + 1);
		cr_assert_eq(sum.devices[d].size, dev_sizes[d]);
		cr_assert_gt(sum.devices[d].records, 0);
		cr_assert_leq(sum.devices[d].bytes, dev_sizes[d], "each block is saved once");
	}
	undo_summary_release(&sum);

	cr_assert_eq(apply(&s, path, 0, msg, sizeof(msg), reversed), 0, "%s", msg);
	cr_assert(strstr(msg, "restored"), "%s", msg);
	assert_devices_equal(&s, s.orig, "the original");
	devset_free(&s);
}

Test(undo, one_sync_per_batch_of_writes)
{
	struct devset s;
	struct io_dev *w[NDEV];
	struct undo_summary sum;
	struct undo_file *u;
	uint8_t data[4096];
	char path[4200], msg[512];

	devset_init(&s);
	in_dir(path, sizeof(path), "batch.undo");
	u = record(&s, path, w);
	for (unsigned i = 20; i < 120; i++) { /* past the superblock */
		fill_random(data, sizeof(data));
		op_write(&s, w, 0, i * 4096ULL, sizeof(data), data);
	}
	cr_assert_eq(io_flush(w[0]), 0);
	assert_devices_equal(&s, s.model, "the model after a flush");
	for (unsigned i = 20; i < 120; i++) /* only blocks saved already: no new batch */
		op_write(&s, w, 0, i * 4096ULL + 100, 10, data);
	cr_assert_eq(io_flush(w[0]), 0);
	for (unsigned i = 100; i < 150; i++)
		op_write(&s, w, 1, i * 4096ULL, sizeof(data), data);
	cr_assert_eq(io_flush(w[1]), 0);
	cr_assert_eq(undo_finish(u, GEN), 0);
	close_all(w);
	undo_close(u);
	cr_assert_eq(undo_info(path, &sum, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(sum.batches, 2, "one batch per flush that had new records, got %llu",
		     (unsigned long long)sum.batches);
	cr_assert_eq(sum.bytes, 150 * 4096ULL);
	cr_assert_eq(sum.generation_after, GEN);
	undo_summary_release(&sum);
	cr_assert_eq(apply(&s, path, 0, msg, sizeof(msg), NULL), 0, "%s", msg);
	assert_devices_equal(&s, s.orig, "the original");
	devset_free(&s);
}

Test(undo, refuses_when_the_filesystem_changed_since)
{
	struct devset s;
	uint8_t *snap[NDEV];
	char path[4200], msg[512];

	devset_init(&s);
	in_dir(path, sizeof(path), "op.undo");
	finished_operation(&s, path);
	outside_commit(&s, 1, GEN + 2); /* mounted and written since */
	snapshot(&s, snap);
	cr_assert_eq(apply(&s, path, 0, msg, sizeof(msg), NULL), -ESTALE);
	cr_assert(strstr(msg, "generation is 102") && strstr(msg, "modified since"), "%s", msg);
	assert_devices_equal(&s, snap, "the state before the refusal");
	/* --force rolls back anyway */
	cr_assert_eq(apply(&s, path, UNDO_FORCE, msg, sizeof(msg), NULL), 0, "%s", msg);
	assert_devices_equal(&s, s.orig, "the original");
	/* applying twice: the generation is back to GEN, not GEN + 1 */
	cr_assert_eq(apply(&s, path, 0, msg, sizeof(msg), NULL), -ESTALE);
	snapshot_free(snap);
	devset_free(&s);
}

Test(undo, refuses_a_superblock_of_the_right_generation_that_it_did_not_write)
{
	struct devset s;
	uint8_t *snap[NDEV];
	char path[4200], msg[512];

	devset_init(&s);
	in_dir(path, sizeof(path), "op.undo");
	finished_operation(&s, path);
	memcpy(super_label_ptr(s.buf[0] + BTRFS_SUPER_INFO_OFFSET), "changed", 7);
	cr_assert_eq(super_update_csum(s.buf[0] + BTRFS_SUPER_INFO_OFFSET), 0);
	snapshot(&s, snap);
	cr_assert_eq(apply(&s, path, 0, msg, sizeof(msg), NULL), -ESTALE);
	cr_assert(strstr(msg, "not the one"), "%s", msg);
	assert_devices_equal(&s, snap, "the state before the refusal");
	snapshot_free(snap);
	devset_free(&s);
}

Test(undo, dry_run_checks_and_changes_nothing)
{
	struct devset s;
	uint8_t *snap[NDEV];
	char path[4200], msg[512];

	devset_init(&s);
	in_dir(path, sizeof(path), "op.undo");
	finished_operation(&s, path);
	snapshot(&s, snap);
	cr_assert_eq(apply(&s, path, UNDO_DRY_RUN, msg, sizeof(msg), NULL), 0, "%s", msg);
	cr_assert(strstr(msg, "would restore"), "%s", msg);
	assert_devices_equal(&s, snap, "the state before the dry run");
	snapshot_free(snap);
	devset_free(&s);
}

static void write_file(const char *path, const uint8_t *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *p;
	FILE *f = fopen(path, "rb");

	cr_assert_not_null(f);
	cr_assert_eq(fstat(fileno(f), &st), 0);
	*len = (size_t)st.st_size;
	p = malloc(*len + 200);
	cr_assert_not_null(p);
	cr_assert_eq(fread(p, 1, *len, f), *len);
	fclose(f);
	return p;
}

Test(undo, refuses_a_damaged_or_truncated_file_without_writing)
{
	struct devset s;
	uint8_t *snap[NDEV], *file;
	char path[4200], bad[4200], msg[512];
	size_t len;

	devset_init(&s);
	in_dir(path, sizeof(path), "op.undo");
	in_dir(bad, sizeof(bad), "bad.undo");
	finished_operation(&s, path);
	snapshot(&s, snap);
	file = read_file(path, &len);
	struct { const char *what; size_t flip; size_t newlen; } cases[] = {
		{ "header byte", 20, 0 },
		{ "first batch header", 256 + 5, 0 },
		{ "a record in the middle", 0, 0 },
		{ "last byte before the trailer", 0, 0 },
		{ "trailer", 0, 0 },
		{ "trailer cut off", SIZE_MAX, 0 },
		{ "cut in half", SIZE_MAX, 0 },
		{ "bytes appended", SIZE_MAX, 0 },
		{ "only the header", SIZE_MAX, 256 },
		{ "empty", SIZE_MAX, 0 },
	};
	cases[2].flip = len / 2;
	cases[3].flip = len - 65;
	cases[4].flip = len - 30;
	cases[5].newlen = len - 64;
	cases[6].newlen = len / 2;
	cases[7].newlen = len + 100;
	for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
		uint8_t *copy = malloc(len + 200);
		size_t n = cases[c].flip == SIZE_MAX ? cases[c].newlen : len;
		cr_assert_not_null(copy);
		memcpy(copy, file, len);
		memset(copy + len, 0x5a, 200);
		if (cases[c].flip != SIZE_MAX)
			copy[cases[c].flip] ^= 0x01;
		write_file(bad, copy, n);
		free(copy);
		msg[0] = 0;
		cr_assert_eq(apply(&s, bad, 0, msg, sizeof(msg), NULL), -EUCLEAN, "%s: not refused (%s)",
			     cases[c].what, msg);
		cr_assert_neq(msg[0], 0, "%s: a reason is given", cases[c].what);
		cr_assert_eq(apply(&s, bad, UNDO_FORCE, msg, sizeof(msg), NULL), -EUCLEAN,
			     "%s: --force never applies a damaged file", cases[c].what);
		assert_devices_equal(&s, snap, cases[c].what);
	}
	free(file);
	/* the intact file still works */
	cr_assert_eq(apply(&s, path, 0, msg, sizeof(msg), NULL), 0, "%s", msg);
	assert_devices_equal(&s, s.orig, "the original");
	snapshot_free(snap);
	devset_free(&s);
}

Test(undo, needs_exactly_the_devices_of_the_file)
{
	struct devset s, other;
	struct io_dev *devs[3];
	uint8_t *snap[NDEV];
	char path[4200], msg[512];

	devset_init(&s);
	devset_init(&other);
	in_dir(path, sizeof(path), "op.undo");
	finished_operation(&s, path);
	snapshot(&s, snap);

	devs[0] = mem_io(s.buf[0], dev_sizes[0]);
	cr_assert_eq(undo_apply(path, devs, 1, 0, msg, sizeof(msg)), -ENODEV);
	cr_assert(strstr(msg, "devid 2") && strstr(msg, "not given"), "%s", msg);
	devs[1] = mem_io(other.buf[1], dev_sizes[1]);
	cr_assert_eq(undo_apply(path, devs, 2, 0, msg, sizeof(msg)), -ENODEV);
	cr_assert(strstr(msg, "not a device of this undo file"), "%s", msg);
	io_close(devs[1]);
	devs[1] = mem_io(s.buf[0], dev_sizes[0]);
	cr_assert_eq(undo_apply(path, devs, 2, 0, msg, sizeof(msg)), -ENODEV);
	cr_assert(strstr(msg, "are both devid 1"), "%s", msg);
	io_close(devs[1]);
	devs[1] = mem_io(s.buf[1], dev_sizes[1]);
	devs[2] = mem_io(other.buf[0], dev_sizes[0]);
	cr_assert_eq(undo_apply(path, devs, 3, 0, msg, sizeof(msg)), -ENODEV, "an extra device");
	for (int i = 0; i < 3; i++)
		io_close(devs[i]);
	assert_devices_equal(&s, snap, "the state before the refusals");
	snapshot_free(snap);
	devset_free(&other);
	devset_free(&s);
}

/* An operation that failed after committing GEN + 1 and never finished. */
static void unfinished_operation(struct devset *s, const char *path, bool commit)
{
	struct io_dev *w[NDEV];
	struct undo_file *u = record(s, path, w);

	op_random_writes(s, w, 150);
	if (commit)
		op_commit(s, w, GEN + 1);
	op_random_writes(s, w, 50);
	close_all(w);
	undo_close(u);
}

Test(undo, unfinished_file_rolls_back_a_failed_operation)
{
	struct devset s;
	struct undo_summary sum;
	char path[4200], msg[512];

	for (int commit = 0; commit < 2; commit++) {
		devset_init(&s);
		in_dir(path, sizeof(path), commit ? "commit.undo" : "nocommit.undo");
		unfinished_operation(&s, path, commit);
		cr_assert_eq(undo_info(path, &sum, msg, sizeof(msg)), 0, "%s", msg);
		cr_assert_not(sum.finished);
		cr_assert_eq(sum.max_super_generation, commit ? GEN + 1 : 0);
		undo_summary_release(&sum);
		cr_assert_eq(apply(&s, path, 0, msg, sizeof(msg), NULL), 0, "commit %d: %s", commit, msg);
		assert_devices_equal(&s, s.orig, "the original");
		devset_free(&s);
	}
}

Test(undo, unfinished_file_is_refused_after_a_later_change)
{
	struct devset s;
	uint8_t *snap[NDEV];
	char path[4200], msg[512];

	devset_init(&s);
	in_dir(path, sizeof(path), "op.undo");
	unfinished_operation(&s, path, true);
	outside_commit(&s, 0, GEN + 2);
	snapshot(&s, snap);
	cr_assert_eq(apply(&s, path, 0, msg, sizeof(msg), NULL), -ESTALE);
	cr_assert(strstr(msg, "neither the one before"), "%s", msg);
	assert_devices_equal(&s, snap, "the state before the refusal");
	snapshot_free(snap);
	devset_free(&s);
}

Test(undo, unfinished_file_ignores_a_torn_tail_but_not_damage_before_it)
{
	struct devset s;
	struct undo_summary sum;
	uint8_t *snap[NDEV], *file, junk[100];
	char path[4200], bad[4200], msg[512];
	size_t len;

	devset_init(&s);
	in_dir(path, sizeof(path), "op.undo");
	in_dir(bad, sizeof(bad), "bad.undo");
	unfinished_operation(&s, path, true);
	snapshot(&s, snap);
	file = read_file(path, &len);

	/* damage in an early batch, with valid batches after it */
	file[256 + 40] ^= 0x80;
	write_file(bad, file, len);
	cr_assert_eq(apply(&s, bad, 0, msg, sizeof(msg), NULL), -EUCLEAN);
	cr_assert(strstr(msg, "more records follow"), "%s", msg);
	assert_devices_equal(&s, snap, "the state before the refusal");
	file[256 + 40] ^= 0x80;

	/* a last append that never became durable */
	fill_random(junk, sizeof(junk));
	memcpy(file + len, junk, sizeof(junk));
	write_file(bad, file, len + sizeof(junk));
	cr_assert_eq(undo_info(bad, &sum, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert_eq(sum.torn_tail, sizeof(junk));
	undo_summary_release(&sum);
	cr_assert_eq(apply(&s, bad, 0, msg, sizeof(msg), NULL), 0, "%s", msg);
	assert_devices_equal(&s, s.orig, "the original");
	free(file);
	snapshot_free(snap);
	devset_free(&s);
}

/* Files named devN in the test directory, holding s's devices. */
static void devices_to_files(struct devset *s, char paths[NDEV][4200])
{
	for (int d = 0; d < NDEV; d++) {
		char name[16];
		snprintf(name, sizeof(name), "dev%d", d);
		in_dir(paths[d], sizeof(paths[d]), name);
		write_file(paths[d], s->buf[d], dev_sizes[d]);
	}
}

/* Copy a file as it is now (what a crash at this moment leaves on disk). */
static void copy_file(const char *from, const char *to)
{
	size_t len;
	uint8_t *data = read_file(from, &len);

	write_file(to, data, len);
	free(data);
}

Test(undo, crash_midway_rolls_back_from_what_reached_the_disk)
{
	char paths[NDEV][4200], crashed[NDEV][4200], path[4200], crash_undo[4200], msg[512];
	struct io_dev *w[NDEV], *devs[NDEV];
	struct undo_file *u;
	struct devset s;

	devset_init(&s);
	devices_to_files(&s, paths);
	in_dir(path, sizeof(path), "op.undo");
	in_dir(crash_undo, sizeof(crash_undo), "crash.undo");
	cr_assert_eq(undo_create(path, s.fsid, GEN, &u), 0);
	for (int d = 0; d < NDEV; d++) {
		struct io_dev *f;
		cr_assert_eq(io_open_file(paths[d], IO_OPEN_WRITE, &f), 0);
		cr_assert_eq(undo_add_device(u, (uint64_t)d + 1, s.uuid[d], f, &w[d]), 0);
	}
	/* the operation commits once, then "crashes" with writes held back:
	 * the files as they are now are what the disks would hold */
	op_random_writes(&s, w, 100);
	op_commit(&s, w, GEN + 1);
	op_random_writes(&s, w, 100);
	copy_file(path, crash_undo);
	for (int d = 0; d < NDEV; d++) {
		char name[24];
		snprintf(name, sizeof(name), "crash%d", d);
		in_dir(crashed[d], sizeof(crashed[d]), name);
		copy_file(paths[d], crashed[d]);
	}
	close_all(w);
	undo_close(u);

	for (int d = 0; d < NDEV; d++)
		cr_assert_eq(io_open_file(crashed[d], IO_OPEN_WRITE, &devs[d]), 0);
	cr_assert_eq(undo_apply(crash_undo, devs, NDEV, 0, msg, sizeof(msg)), 0, "%s", msg);
	for (int d = 0; d < NDEV; d++) {
		cr_assert_eq(io_read(devs[d], s.buf[d], dev_sizes[d], 0), 0);
		io_close(devs[d]);
	}
	assert_devices_equal(&s, s.orig, "the original");
	devset_free(&s);
}

Test(undo, create_refuses_an_existing_file_and_close_removes_an_empty_one)
{
	struct devset s;
	struct io_dev *w[NDEV];
	struct undo_file *u;
	char path[4200];

	devset_init(&s);
	in_dir(path, sizeof(path), "op.undo");
	write_file(path, (const uint8_t *)"x", 1);
	cr_assert_eq(undo_create(path, s.fsid, GEN, &u), -EEXIST);
	cr_assert_null(u);
	unlink(path);
	u = record(&s, path, w);
	cr_assert_eq(access(path, F_OK), 0);
	close_all(w);
	undo_close(u);
	cr_assert_neq(access(path, F_OK), 0, "an unfinished file with nothing saved is removed");
	devset_free(&s);
}

/* ------------------------------------------------ through fs_open */

/* The fixture image mapped copy-on-write: writes stay in this process. */
static uint8_t *map_image(const char *path, size_t *size)
{
	struct stat st;
	void *p;
	int fd = open(path, O_RDONLY);

	cr_assert_geq(fd, 0);
	cr_assert_eq(fstat(fd, &st), 0);
	*size = (size_t)st.st_size;
	p = mmap(NULL, *size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
	close(fd);
	cr_assert_neq(p, MAP_FAILED);
	return p;
}

/* A commit of the real filesystem, done by hand: change a few blocks and
 * write every superblock copy with the next generation. */
static void fake_commit(struct fs_info *fs)
{
	struct io_dev *io = fs->devices[0].io;
	uint8_t sb[BTRFS_SUPER_INFO_SIZE], junk[20000];

	fill_random(junk, sizeof(junk));
	cr_assert_eq(io_write(io, junk, sizeof(junk), (30ULL << 20) + 123), 0);
	memcpy(sb, fs->super, sizeof(sb));
	super_set_generation(sb, fs->generation + 1);
	for (int m = 0; m < 2; m++) {
		super_set_bytenr(sb, btrfs_super_offset(m));
		cr_assert_eq(super_update_csum(sb), 0);
		cr_assert_eq(io_write(io, sb, sizeof(sb), btrfs_super_offset(m)), 0);
	}
	cr_assert_eq(io_flush(io), 0);
}

Test(undo, fs_open_records_and_btk_undo_restores_a_real_filesystem)
{
	struct fs_open_options opts;
	struct undo_summary sum;
	struct fs_info *fs;
	struct io_dev *io;
	char image[4096], path[4200], msg[512];
	uint8_t *buf, *orig;
	size_t size, size2;

	cr_assert_eq(fixture_image("small", image, sizeof(image)), 0);
	buf = map_image(image, &size);
	orig = map_image(image, &size2);
	in_dir(path, sizeof(path), "fs.undo");
	fs_open_options_init(&opts);
	opts.writable = true;
	opts.undo_path = path;
	cr_assert_eq(fs_open_devices((struct io_dev *[]){ mem_io(buf, size) }, 1, &opts, &fs), 0,
		     "%s", btk_error_msg());
	cr_assert_not_null(fs->undo);
	fake_commit(fs);
	cr_assert_eq(fs_finish_undo(fs), 0, "%s", btk_error_msg());
	fs_close(fs);

	cr_assert_eq(undo_info(path, &sum, msg, sizeof(msg)), 0, "%s", msg);
	cr_assert(sum.finished);
	cr_assert_eq(sum.generation_after, sum.generation_before + 1);
	cr_assert_eq(sum.ndevices, 1);
	cr_assert_eq(sum.devices[0].devid, 1);
	undo_summary_release(&sum);
	cr_assert_neq(memcmp(buf, orig, size), 0);
	io = mem_io(buf, size);
	cr_assert_eq(undo_apply(path, &io, 1, 0, msg, sizeof(msg)), 0, "%s", msg);
	io_close(io);
	cr_assert_eq(memcmp(buf, orig, size), 0, "the image is back to its original bytes");

	/* the undo file is never overwritten; read-only opens make none */
	cr_assert_neq(fs_open_devices((struct io_dev *[]){ mem_io(buf, size) }, 1, &opts, &fs), 0);
	cr_assert(strstr(btk_error_msg(), "already exists"), "%s", btk_error_msg());
	opts.writable = false;
	in_dir(path, sizeof(path), "ro.undo");
	cr_assert_eq(fs_open_devices((struct io_dev *[]){ mem_io(buf, size) }, 1, &opts, &fs), 0,
		     "%s", btk_error_msg());
	cr_assert_null(fs->undo);
	fs_close(fs);
	cr_assert_neq(access(path, F_OK), 0);
	munmap(buf, size);
	munmap(orig, size2);
}

/* A sparse copy of a file (data regions only). */
static void copy_sparse(const char *src, const char *dst)
{
	int in = open(src, O_RDONLY), out = open(dst, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	static uint8_t buf[1 << 20];
	struct stat st;
	off_t pos = 0;

	cr_assert(in >= 0 && out >= 0);
	cr_assert_eq(fstat(in, &st), 0);
	cr_assert_eq(ftruncate(out, st.st_size), 0);
	while (pos < st.st_size) {
		off_t data = lseek(in, pos, SEEK_DATA), hole;
		if (data < 0)
			break;
		hole = lseek(in, data, SEEK_HOLE);
		for (pos = data; pos < hole;) {
			size_t n = hole - pos < (off_t)sizeof(buf) ? (size_t)(hole - pos) : sizeof(buf);
			cr_assert_eq(pread(in, buf, n, pos), (ssize_t)n);
			cr_assert_eq(pwrite(out, buf, n, pos), (ssize_t)n);
			pos += (off_t)n;
		}
	}
	close(in);
	close(out);
}

static bool files_equal(const char *a, const char *b)
{
	static uint8_t x[1 << 20], y[1 << 20];
	FILE *fa = fopen(a, "rb"), *fb = fopen(b, "rb");
	bool same = true;
	size_t na, nb;

	cr_assert(fa && fb);
	do {
		na = fread(x, 1, sizeof(x), fa);
		nb = fread(y, 1, sizeof(y), fb);
		if (na != nb || memcmp(x, y, na))
			same = false;
	} while (same && na);
	fclose(fa);
	fclose(fb);
	return same;
}

Test(undo, fs_open_by_path_unfinished_operation_rolls_back)
{
	struct fs_open_options opts;
	struct fs_info *fs;
	struct io_dev *io;
	char image[4096], copy[4200], path[4200], msg[512];
	const char *paths[1] = { copy };

	cr_assert_eq(fixture_image("small", image, sizeof(image)), 0);
	in_dir(copy, sizeof(copy), "small.img");
	in_dir(path, sizeof(path), "fs.undo");
	copy_sparse(image, copy);
	fs_open_options_init(&opts);
	opts.writable = true;
	opts.scan_devices = false;
	opts.undo_path = path;
	cr_assert_eq(fs_open(paths, 1, &opts, &fs), 0, "%s", btk_error_msg());
	fake_commit(fs);
	fs_close(fs); /* no fs_finish_undo: the tool failed after its commit */
	cr_assert_not(files_equal(image, copy));
	cr_assert_eq(io_open_file(copy, IO_OPEN_WRITE, &io), 0);
	cr_assert_eq(undo_apply(path, &io, 1, 0, msg, sizeof(msg)), 0, "%s", msg);
	io_close(io);
	cr_assert(files_equal(image, copy), "the image is back to its original bytes");
}
