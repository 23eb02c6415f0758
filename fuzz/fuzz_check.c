// SPDX-License-Identifier: GPL-2.0-only
/* libFuzzer harness over btk-check: every run patches a base filesystem
 * (fuzz/base.h: the inputs of fuzz_image.c, flag bits 0..4 the same), opens
 * it and runs every read-only phase of btk-check on it (check_run: the same
 * as `btk-check DEVICE...` without --repair), its report going to /dev/null.
 *
 * Flag bits of this harness:
 *   5  a tiny memory budget, and runs of FUZZ_RUN_RECORDS records at most
 *      (fs_test_knobs.recsort.run_records): the sorters (libfs/recsort) spill to
 *      $TMPDIR and merge runs on disk even on the small bases
 *   6  --format json (problems collected as JSON objects)
 *   7  --check-data-csum (every checksummed data block, every copy)
 *
 * After every run the harness verifies what LeakSanitizer cannot see: no
 * file descriptor is left open and no spill file is left in its private
 * $TMPDIR (a directory it makes at start and removes at exit). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check/check.h"
#include "common/messages.h"
#include "fuzz/base.h"
#include <btk/fs.h>

#define FUZZ_TINY_BUDGET (1U << 5)
#define FUZZ_JSON (1U << 6)
#define FUZZ_DATA_CSUM (1U << 7)
#define FUZZ_RUN_RECORDS 3
#define FUZZ_FD_SCAN 256 /* descriptors compared before and after a run */

static char tmpdir[4096];
static bool ready;
static bool fd_open_before[FUZZ_FD_SCAN];

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void fail(const char *what)
{
	fprintf(stderr, "fuzz_check: %s\n", what);
	abort(); /* the harness's own finding: libFuzzer keeps the input */
}

static void note_sink(void *arg, enum fs_note_level level, const char *msg)
{
	(void)arg;
	if (fuzz_verbose)
		fprintf(stderr, "fuzz_check: note %d: %s\n", (int)level, msg);
}

static void remove_tmpdir(void)
{
	rmdir(tmpdir);
}

static void fd_snapshot(bool *open)
{
	for (int fd = 0; fd < FUZZ_FD_SCAN; fd++)
		open[fd] = fcntl(fd, F_GETFD) != -1;
}

/* Once: results to /dev/null, quiet messages, a private $TMPDIR for the spills. */
static void setup(void)
{
	const char *parent = getenv("TMPDIR");

	if (!freopen("/dev/null", "w", stdout))
		fail("cannot send stdout to /dev/null");
	msg_set_program("fuzz_check");
	msg_set_verbosity(MSG_QUIET);
	snprintf(tmpdir, sizeof(tmpdir), "%s/btk-fuzz-check-XXXXXX", parent && *parent ? parent : "/tmp");
	if (!mkdtemp(tmpdir))
		fail("cannot make a temporary directory");
	setenv("TMPDIR", tmpdir, 1);
	atexit(remove_tmpdir);
	ready = true;
}

static void verify_clean(void)
{
	bool open_now[FUZZ_FD_SCAN];
	struct dirent *e;
	DIR *d;

	fd_snapshot(open_now);
	for (int fd = 0; fd < FUZZ_FD_SCAN; fd++)
		if (open_now[fd] && !fd_open_before[fd])
			fail("a file descriptor was left open");
	d = opendir(tmpdir);
	if (!d)
		fail("the temporary directory is gone");
	while ((e = readdir(d)))
		if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
			fail("a spill file was left in $TMPDIR");
	closedir(d);
}

static void run_check(struct fs_info *fs, unsigned flags)
{
	struct check_options opts = {
		.memory_limit = (flags & FUZZ_TINY_BUDGET) ? 512 << 10 : 64 << 20,
		.jobs = 1,
		.format = (flags & FUZZ_JSON) ? CLI_FORMAT_JSON : CLI_FORMAT_TEXT,
		.super_mirror = -1,
		.check_data_csum = (flags & FUZZ_DATA_CSUM) != 0,
		.progress = PROGRESS_OFF,
	};
	struct check_ctx ctx = { .fs = fs, .opts = &opts };
	int ret;

	ctx.json_problems = json_object_new_array();
	fs->knobs.recsort.run_records = (flags & FUZZ_TINY_BUDGET) ? FUZZ_RUN_RECORDS : 0;
	ret = check_run(&ctx);
	fs->knobs.recsort.run_records = 0;
	if (fuzz_verbose)
		fprintf(stderr,
			"fuzz_check: exit %d, %llu error(s), %llu warning(s), %llu items, %llu inodes, "
			"%llu ref records, %llu bytes spilled\n",
			ret, (unsigned long long)ctx.errors, (unsigned long long)ctx.warnings,
			(unsigned long long)ctx.stats.items, (unsigned long long)ctx.stats.inodes,
			(unsigned long long)ctx.stats.ref_records, (unsigned long long)ctx.stats.spilled_bytes);
	check_ctx_release(&ctx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct fuzz_base *b;
	struct fs_info *fs;
	char msg[600] = "";
	unsigned flags;

	if (!ready)
		setup();
	if (size < 1)
		return 0;
	fd_snapshot(fd_open_before);
	flags = data[0];
	b = fuzz_patch(data, size);

	if (fuzz_open(b, flags, note_sink, &fs, msg, sizeof(msg)) == 0) {
		run_check(fs, flags);
		fs_close(fs);
	} else if (fuzz_verbose) {
		fprintf(stderr, "fuzz_check: open failed: %s\n", msg);
	}
	fuzz_restore_blocks(b);
	verify_clean();
	return 0;
}
