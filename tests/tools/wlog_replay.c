// SPDX-License-Identifier: GPL-2.0-only
/* btk-wlog-replay: the crash-test side of write logs (libfs/wlog.h).
 *
 *   btk-wlog-replay LOG count
 *       writes N / devices D / complete yes|no / flushes M / flush points P...
 *       (a flush point is the number of writes before a flush, with the
 *       flushed device: "12:0" = device 0 flushed after 12 writes)
 *   btk-wlog-replay LOG apply N [--reorder SEED] IMG...
 *       write the first N writes of the log onto IMG... (one per device
 *       number, in order: the order the tool opened its devices), as a crash
 *       after the N-th write would leave them; with --reorder SEED, a crash
 *       of a disk that persists any subset of the unflushed writes.
 *
 * Exit status 0, 1 on errors, 2 on usage errors. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/sizes.h"
#include <btk/io.h>
#include <btk/wlog.h>

static int usage(void)
{
	fprintf(stderr, "usage: btk-wlog-replay LOG count\n"
			"       btk-wlog-replay LOG apply N [--reorder SEED] IMG...\n");
	return 2;
}

static int open_log(const char *path, struct wlog_reader **r)
{
	int ret = wlog_open(path, r);

	if (ret)
		fprintf(stderr, "btk-wlog-replay: %s: %s\n", path,
			ret == -EUCLEAN ? "damaged or cut off write log" : strerror(-ret));
	return ret;
}

static int cmd_count(const char *log)
{
	const struct wlog_flush *f;
	struct wlog_reader *r;
	size_t n;

	if (open_log(log, &r))
		return 1;
	n = wlog_flush_points(r, &f);
	printf("writes %" PRIu64 "\n", wlog_count(r));
	printf("devices %u\n", wlog_devices(r));
	printf("complete %s\n", wlog_complete(r) ? "yes" : "no");
	printf("flushes %zu\n", n);
	printf("flush points");
	for (size_t i = 0; i < n; i++)
		printf(" %" PRIu64 ":%u", f[i].writes, f[i].dev);
	printf("\n");
	wlog_reader_free(r);
	return 0;
}

static int cmd_apply(const char *log, int argc, char **argv)
{
	uint64_t n, seed = 0;
	struct wlog_reader *r;
	struct io_dev **targets;
	int i = 0, nimg, ret, status = 1;

	if (argc < 1 || u64_parse(argv[0], &n))
		return usage();
	argc--, argv++;
	if (argc >= 2 && !strcmp(argv[0], "--reorder")) {
		if (u64_parse(argv[1], &seed) || seed == 0) {
			fprintf(stderr, "btk-wlog-replay: --reorder takes a nonzero seed\n");
			return 2;
		}
		argc -= 2, argv += 2;
	}
	if (argc < 1)
		return usage();
	if (open_log(log, &r))
		return 1;
	nimg = argc;
	if ((unsigned)nimg < wlog_devices(r) || n > wlog_count(r)) {
		fprintf(stderr, "btk-wlog-replay: the log has %" PRIu64 " writes to %u device(s): "
			"cannot apply %" PRIu64 " writes to %d image(s)\n", wlog_count(r), wlog_devices(r), n, nimg);
		wlog_reader_free(r);
		return 1;
	}
	targets = calloc((size_t)nimg, sizeof(*targets));
	if (!targets) {
		wlog_reader_free(r);
		return 1;
	}
	for (i = 0; i < nimg; i++) {
		ret = io_open_file(argv[i], IO_OPEN_WRITE, &targets[i]);
		if (ret) {
			fprintf(stderr, "btk-wlog-replay: cannot open %s: %s\n", argv[i], strerror(-ret));
			goto out;
		}
	}
	ret = wlog_replay(r, targets, (unsigned)nimg, n, seed);
	if (ret)
		fprintf(stderr, "btk-wlog-replay: replay failed: %s\n", strerror(-ret));
	else
		status = 0;
out:
	for (i = 0; i < nimg; i++)
		io_close(targets[i]);
	free(targets);
	wlog_reader_free(r);
	return status;
}

int main(int argc, char **argv)
{
	if (argc < 3)
		return usage();
	if (!strcmp(argv[2], "count") && argc == 3)
		return cmd_count(argv[1]);
	if (!strcmp(argv[2], "apply"))
		return cmd_apply(argv[1], argc - 3, argv + 3);
	return usage();
}
