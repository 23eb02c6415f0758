// SPDX-License-Identifier: GPL-2.0-only
/* Write logs: the devices below see every write unchanged; the log counts
 * them; replaying any prefix gives exactly the state of the first N writes
 * applied in order; a reordered crash keeps every flushed write and adds
 * only unflushed ones; any damage to the log is detected; and fs_open logs
 * through write_log_path or $BTK_WRITE_LOG. */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/env_knobs.h"
#include <btk/format.h>
#include <btk/undo.h>
#include <btk/wlog.h>
#include "tests/unit/fixtures.h"

#define NDEV 2
#define DEV_SIZE (256U << 10)
#define NWRITES 120

static char dir[4096];
static uint64_t rng = 0x5eed;

static void make_dir(void)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, sizeof(dir), "%s/btk-wlog-test-XXXXXX", tmp && *tmp ? tmp : "/tmp");
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

TestSuite(wlog, .init = make_dir, .fini = remove_dir);

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

static struct io_dev *mem_io(uint8_t *buf, size_t n)
{
	struct io_dev *io;

	cr_assert_eq(io_open_mem(buf, n, false, &io), 0);
	return io;
}

/* What the test wrote, in order. */
struct op {
	bool flush;
	int dev;
	uint64_t off;
	size_t len;
	uint8_t *data;
};

struct scenario {
	uint8_t *init[NDEV];    /* before */
	uint8_t *dev[NDEV];     /* the logged devices */
	struct op ops[2 * NWRITES];
	unsigned nops, nwrites;
};

/* Random writes (some overlapping) and flushes on NDEV devices, logged. */
static void run_scenario(struct scenario *s, const char *log)
{
	struct wlog_writer *w;
	struct io_dev *io[NDEV];

	memset(s, 0, sizeof(*s));
	cr_assert_eq(wlog_create(log, &w), 0);
	for (int d = 0; d < NDEV; d++) {
		s->init[d] = malloc(DEV_SIZE);
		s->dev[d] = malloc(DEV_SIZE);
		cr_assert(s->init[d] && s->dev[d]);
		fill_random(s->init[d], DEV_SIZE);
		memcpy(s->dev[d], s->init[d], DEV_SIZE);
		cr_assert_eq(wlog_add_device(w, mem_io(s->dev[d], DEV_SIZE), &io[d]), 0);
	}
	while (s->nwrites < NWRITES) {
		struct op *o = &s->ops[s->nops++];
		o->dev = (int)(rnd() % NDEV);
		if (rnd() % 8 == 0) {
			o->flush = true;
			cr_assert_eq(io_flush(io[o->dev]), 0);
			continue;
		}
		o->len = (size_t)(rnd() % 9000) + 1;
		o->off = rnd() % 16 == 0 ? 1000 : rnd() % (DEV_SIZE - o->len); /* some overlap for sure */
		o->data = malloc(o->len);
		cr_assert_not_null(o->data);
		fill_random(o->data, o->len);
		cr_assert_eq(io_write(io[o->dev], o->data, o->len, o->off), 0);
		s->nwrites++;
	}
	cr_assert_eq(wlog_error(w), 0);
	for (int d = 0; d < NDEV; d++)
		io_close(io[d]);
	wlog_close(w);
}

static void scenario_free(struct scenario *s)
{
	for (unsigned i = 0; i < s->nops; i++)
		free(s->ops[i].data);
	for (int d = 0; d < NDEV; d++) {
		free(s->init[d]);
		free(s->dev[d]);
	}
}

/* Replay onto fresh copies of the initial devices into out[]. */
static int replay_into(struct wlog_reader *r, struct scenario *s, uint8_t **out, uint64_t n, uint64_t seed)
{
	struct io_dev *t[NDEV];
	int ret;

	for (int d = 0; d < NDEV; d++) {
		memcpy(out[d], s->init[d], DEV_SIZE);
		t[d] = mem_io(out[d], DEV_SIZE);
	}
	ret = wlog_replay(r, t, NDEV, n, seed);
	for (int d = 0; d < NDEV; d++)
		io_close(t[d]);
	return ret;
}

Test(wlog, passes_writes_through_and_counts_them)
{
	struct scenario s;
	struct wlog_reader *r;
	const struct wlog_flush *f;
	uint8_t *model[NDEV];
	unsigned flushes = 0;
	char log[4200];

	in_dir(log, sizeof(log), "a.wlog");
	run_scenario(&s, log);
	for (int d = 0; d < NDEV; d++) {
		model[d] = malloc(DEV_SIZE);
		memcpy(model[d], s.init[d], DEV_SIZE);
	}
	for (unsigned i = 0; i < s.nops; i++)
		if (s.ops[i].flush)
			flushes++;
		else
			memcpy(model[s.ops[i].dev] + s.ops[i].off, s.ops[i].data, s.ops[i].len);
	for (int d = 0; d < NDEV; d++)
		cr_assert_eq(memcmp(model[d], s.dev[d], DEV_SIZE), 0, "the device got every write");
	cr_assert_eq(wlog_open(log, &r), 0);
	cr_assert_eq(wlog_count(r), NWRITES);
	cr_assert_eq(wlog_devices(r), NDEV);
	cr_assert(wlog_complete(r));
	cr_assert_eq(wlog_flush_points(r, &f), flushes);
	for (unsigned i = 0, writes = 0, k = 0; i < s.nops; i++) {
		if (!s.ops[i].flush) {
			writes++;
			continue;
		}
		cr_assert_eq(f[k].writes, writes, "flush %u", k);
		cr_assert_eq(f[k].dev, (unsigned)s.ops[i].dev);
		k++;
	}
	wlog_reader_free(r);
	for (int d = 0; d < NDEV; d++)
		free(model[d]);
	scenario_free(&s);
}

Test(wlog, every_prefix_replays_to_the_writes_applied_in_order)
{
	struct scenario s;
	struct wlog_reader *r;
	uint8_t *expect[NDEV], *got[NDEV];
	char log[4200];
	unsigned op = 0;

	in_dir(log, sizeof(log), "a.wlog");
	run_scenario(&s, log);
	cr_assert_eq(wlog_open(log, &r), 0);
	for (int d = 0; d < NDEV; d++) {
		expect[d] = malloc(DEV_SIZE);
		got[d] = malloc(DEV_SIZE);
		memcpy(expect[d], s.init[d], DEV_SIZE);
	}
	for (uint64_t n = 0; n <= NWRITES; n++) {
		if (n) { /* the oracle: apply write n-1 ourselves */
			while (s.ops[op].flush)
				op++;
			memcpy(expect[s.ops[op].dev] + s.ops[op].off, s.ops[op].data, s.ops[op].len);
			op++;
		}
		cr_assert_eq(replay_into(r, &s, got, n, 0), 0);
		for (int d = 0; d < NDEV; d++)
			cr_assert_eq(memcmp(expect[d], got[d], DEV_SIZE), 0, "prefix %llu device %d",
				     (unsigned long long)n, d);
	}
	cr_assert_eq(replay_into(r, &s, got, NWRITES + 1, 0), -EINVAL, "no more writes than logged");
	wlog_reader_free(r);
	for (int d = 0; d < NDEV; d++) {
		free(expect[d]);
		free(got[d]);
	}
	scenario_free(&s);
}

/* For a crash after n writes: which writes a flush made durable. */
static void durable_writes(const struct scenario *s, uint64_t n, bool *durable, int *write_op)
{
	uint64_t until[NDEV] = { 0 }, writes = 0;

	for (unsigned i = 0; i < s->nops; i++) {
		if (s->ops[i].flush) {
			if (writes < n)
				until[s->ops[i].dev] = writes;
		} else {
			write_op[writes++] = (int)i;
		}
	}
	for (uint64_t k = 0; k < n; k++)
		durable[k] = k < until[s->ops[write_op[k]].dev];
}

Test(wlog, reordered_crashes_keep_flushed_writes_and_only_add_unflushed_ones)
{
	struct scenario s;
	struct wlog_reader *r;
	uint8_t *base[NDEV], *got[NDEV], *inorder[NDEV];
	bool durable[NWRITES];
	int write_op[NWRITES];
	unsigned differs = 0, runs = 0;
	char log[4200];

	in_dir(log, sizeof(log), "a.wlog");
	run_scenario(&s, log);
	cr_assert_eq(wlog_open(log, &r), 0);
	for (int d = 0; d < NDEV; d++) {
		base[d] = malloc(DEV_SIZE);
		got[d] = malloc(DEV_SIZE);
		inorder[d] = malloc(DEV_SIZE);
	}
	for (uint64_t n = 1; n <= NWRITES; n += 7) {
		durable_writes(&s, n, durable, write_op);
		/* base: the durable writes only, in order */
		for (int d = 0; d < NDEV; d++)
			memcpy(base[d], s.init[d], DEV_SIZE);
		for (uint64_t k = 0; k < n; k++)
			if (durable[k]) {
				const struct op *o = &s.ops[write_op[k]];
				memcpy(base[o->dev] + o->off, o->data, o->len);
			}
		cr_assert_eq(replay_into(r, &s, inorder, n, 0), 0);
		for (uint64_t seed = 1; seed <= 12; seed++) {
			cr_assert_eq(replay_into(r, &s, got, n, seed), 0);
			runs++;
			for (int d = 0; d < NDEV; d++) {
				if (memcmp(got[d], inorder[d], DEV_SIZE))
					differs++;
				/* every byte is the durable state's or that of an unflushed write
				 * of the prefix covering it: nothing flushed is lost, nothing
				 * from after the crash appears */
				for (size_t b = 0; b < DEV_SIZE; b++) {
					bool ok = got[d][b] == base[d][b];
					for (uint64_t k = 0; !ok && k < n; k++) {
						const struct op *o = &s.ops[write_op[k]];
						if (!durable[k] && o->dev == d && b >= o->off && b < o->off + o->len &&
						    got[d][b] == o->data[b - o->off])
							ok = true;
					}
					cr_assert(ok, "crash after %llu writes, seed %llu: device %d byte %zu comes from "
						  "nowhere", (unsigned long long)n, (unsigned long long)seed, d, b);
				}
			}
		}
	}
	cr_assert_gt(differs, runs / 4, "reordering changes the outcome (%u of %u runs)", differs, runs);
	wlog_reader_free(r);
	for (int d = 0; d < NDEV; d++) {
		free(base[d]);
		free(got[d]);
		free(inorder[d]);
	}
	scenario_free(&s);
}

static uint8_t *read_file(const char *path, size_t *len)
{
	struct stat st;
	uint8_t *p;
	FILE *f = fopen(path, "rb");

	cr_assert_not_null(f);
	cr_assert_eq(fstat(fileno(f), &st), 0);
	*len = (size_t)st.st_size;
	p = malloc(*len + 1);
	cr_assert_not_null(p);
	cr_assert_eq(fread(p, 1, *len, f), *len);
	fclose(f);
	return p;
}

static void write_file(const char *path, const uint8_t *data, size_t len)
{
	FILE *f = fopen(path, "wb");

	cr_assert_not_null(f);
	cr_assert_eq(fwrite(data, 1, len, f), len);
	cr_assert_eq(fclose(f), 0);
}

Test(wlog, damage_anywhere_is_detected)
{
	struct scenario s;
	struct wlog_reader *r;
	char log[4200], bad[4200];
	uint8_t *file;
	size_t len;

	in_dir(log, sizeof(log), "a.wlog");
	in_dir(bad, sizeof(bad), "bad.wlog");
	run_scenario(&s, log);
	file = read_file(log, &len);
	for (unsigned k = 0; k < 40; k++) {
		size_t at = k == 0 ? 3 : k == 1 ? len - 1 : rnd() % len;
		file[at] ^= (uint8_t)(1u << (k % 8));
		write_file(bad, file, len);
		cr_assert_eq(wlog_open(bad, &r), -EUCLEAN, "byte %zu flipped", at);
		cr_assert_null(r);
		file[at] ^= (uint8_t)(1u << (k % 8));
	}
	for (unsigned k = 0; k < 20; k++) {
		size_t cut = k == 0 ? len - 1 : rnd() % len;
		write_file(bad, file, cut);
		/* a cut between two entries is a log whose tool died: readable, incomplete */
		if (wlog_open(bad, &r) == 0) {
			cr_assert(cut == 64 || !wlog_complete(r), "cut at %zu", cut);
			cr_assert_leq(wlog_count(r), NWRITES);
			wlog_reader_free(r);
		} else {
			cr_assert_null(r);
		}
	}
	write_file(bad, file, len - 1);
	cr_assert_eq(wlog_open(bad, &r), -EUCLEAN, "cut mid-entry");
	file[len] = 0;
	write_file(bad, file, len + 1);
	cr_assert_eq(wlog_open(bad, &r), -EUCLEAN, "trailing garbage");
	free(file);
	scenario_free(&s);
}

Test(wlog, a_second_session_appends_and_reuses_device_numbers)
{
	static uint8_t a[DEV_SIZE], b[DEV_SIZE], ta[DEV_SIZE], tb[DEV_SIZE];
	struct wlog_reader *r;
	struct wlog_writer *w;
	struct io_dev *io[2], *t[2];
	char log[4200];

	in_dir(log, sizeof(log), "s.wlog");
	for (int session = 0; session < 2; session++) {
		uint8_t data[100];
		memset(data, 'a' + session, sizeof(data));
		cr_assert_eq(wlog_create(log, &w), 0);
		cr_assert_eq(wlog_add_device(w, mem_io(a, sizeof(a)), &io[0]), 0);
		cr_assert_eq(wlog_add_device(w, mem_io(b, sizeof(b)), &io[1]), 0);
		cr_assert_eq(io_write(io[0], data, sizeof(data), 10 + session * 50), 0);
		cr_assert_eq(io_write(io[1], data, sizeof(data), 20), 0);
		cr_assert_eq(io_flush(io[1]), 0);
		wlog_close(w); /* before the devices: they keep the log open */
		io_close(io[0]);
		io_close(io[1]);
	}
	cr_assert_eq(wlog_open(log, &r), 0);
	cr_assert_eq(wlog_count(r), 4);
	cr_assert_eq(wlog_devices(r), 2, "same paths: same device numbers");
	cr_assert(wlog_complete(r));
	t[0] = mem_io(ta, sizeof(ta));
	t[1] = mem_io(tb, sizeof(tb));
	cr_assert_eq(wlog_replay(r, t, 1, 4, 0), -EINVAL, "one target per device number");
	cr_assert_eq(wlog_replay(r, t, 2, 4, 0), 0);
	cr_assert_eq(memcmp(a, ta, sizeof(a)), 0);
	cr_assert_eq(memcmp(b, tb, sizeof(b)), 0);
	io_close(t[0]);
	io_close(t[1]);
	wlog_reader_free(r);
}

/* A fixture image in a malloc'ed buffer opened writable through fs_open_devices. */
static struct fs_info *open_fixture_writable(const struct fs_open_options *base, struct io_dev **mem)
{
	struct fs_open_options opts = *base;
	struct fs_info *fs;
	char image[4096];

	cr_assert_eq(fixture_image("small", image, sizeof(image)), 0);
	cr_assert_eq(fixture_load_memory(image, mem), 0);
	opts.writable = true;
	cr_assert_eq(fs_open_devices(mem, 1, &opts, &fs), 0, "%s", btk_error_msg());
	return fs;
}

Test(wlog, fs_open_logs_through_the_environment_and_the_option)
{
	struct fs_open_options opts;
	struct wlog_reader *r;
	const struct wlog_flush *f;
	struct fs_info *fs;
	struct io_dev *mem;
	char log[4200], log2[4200];

	in_dir(log, sizeof(log), "env.wlog");
	in_dir(log2, sizeof(log2), "opt.wlog");
	fs_open_options_init(&opts);
	setenv("BTK_WRITE_LOG", log, 1);
	/* libfs reads no environment: only the programs' env_knobs_fill does */
	fs = open_fixture_writable(&opts, &mem);
	cr_assert_null(fs->wlog);
	fs_close(fs);
	env_knobs_fill(&opts);
	fs = open_fixture_writable(&opts, &mem);
	cr_assert_not_null(fs->wlog);
	cr_assert_eq(io_write(fs->devices[0].io, "hello", 5, 40ULL << 20), 0);
	cr_assert_eq(io_flush(fs->devices[0].io), 0);
	fs_close(fs);
	cr_assert_eq(wlog_open(log, &r), 0);
	cr_assert_eq(wlog_count(r), 1);
	cr_assert_eq(wlog_flush_points(r, &f), 1);
	cr_assert_eq(f[0].writes, 1);
	wlog_reader_free(r);

	/* the option wins over the environment; read-only opens log nothing */
	opts.write_log_path = log2;
	env_knobs_fill(&opts);
	fs = open_fixture_writable(&opts, &mem);
	cr_assert_eq(io_write(fs->devices[0].io, "hello", 5, 40ULL << 20), 0);
	fs_close(fs);
	unsetenv("BTK_WRITE_LOG");
	cr_assert_eq(wlog_open(log2, &r), 0);
	cr_assert_eq(wlog_count(r), 1);
	wlog_reader_free(r);
	cr_assert_eq(wlog_open(log, &r), 0);
	cr_assert_eq(wlog_count(r), 1, "the environment's log was not used");
	wlog_reader_free(r);
	opts.writable = false;
	cr_assert_not_null(fs = fixture_open("small", &opts));
	cr_assert_null(fs->wlog);
	fs_close(fs);
}

Test(wlog, logs_what_reaches_the_disk_below_an_undo_recorder)
{
	struct fs_open_options opts;
	struct wlog_reader *r;
	struct fs_info *fs;
	struct io_dev *mem;
	char log[4200], undo[4200];

	in_dir(log, sizeof(log), "u.wlog");
	in_dir(undo, sizeof(undo), "u.undo");
	fs_open_options_init(&opts);
	opts.write_log_path = log;
	opts.undo_path = undo;
	fs = open_fixture_writable(&opts, &mem);
	cr_assert(fs->wlog && fs->undo);
	for (int i = 0; i < 10; i++)
		cr_assert_eq(io_write(fs->devices[0].io, "hello", 5, (40ULL << 20) + 4096 * i), 0);
	cr_assert_eq(io_flush(fs->devices[0].io), 0);
	cr_assert_eq(fs_finish_undo(fs), 0, "%s", btk_error_msg());
	fs_close(fs);
	cr_assert_eq(wlog_open(log, &r), 0);
	cr_assert_eq(wlog_count(r), 10);
	wlog_reader_free(r);
}
