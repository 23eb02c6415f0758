// SPDX-License-Identifier: GPL-2.0-only
/* btk-undo: roll back what a btk tool wrote, from the undo file it made
 * (--undo-file FILE), as long as nothing else has written to the filesystem
 * since. See libfs/undo.h for the rules and doc/btk-undo.8. */
#include <argp.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/cli.h"
#include "common/json_exit.h"
#include "common/messages.h"
#include "common/sizes.h"
#include <btk/io.h>
#include <btk/target.h>
#include <btk/names.h>
#include <btk/undo.h>

struct undo_args {
	bool dry_run, force, info;
	const char *undo_path;
	char **devices;
	unsigned ndevices;
	struct cli_common_options common;
};

enum { OPT_DRY_RUN = 'n', OPT_FORCE = 'f', OPT_INFO = 'i' };

static const struct argp_option undo_options[] = {
	{ "dry-run", OPT_DRY_RUN, NULL, 0, "Check everything, write nothing", 0 },
	{ "force", OPT_FORCE, NULL, 0,
	  "Roll back even if the filesystem generation shows it was modified after the operation "
	  "(dangerous: destroys those changes and may corrupt the filesystem)", 0 },
	{ "info", OPT_INFO, NULL, 0, "Describe the undo file; no device is needed or touched", 0 },
	{ 0 }
};

static error_t undo_parse(int key, char *arg, struct argp_state *state)
{
	struct undo_args *a = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &a->common;
		break;
	case OPT_DRY_RUN: a->dry_run = true; break;
	case OPT_FORCE: a->force = true; break;
	case OPT_INFO: a->info = true; break;
	case ARGP_KEY_ARGS:
		a->undo_path = state->argv[state->next];
		a->devices = state->argv + state->next + 1;
		a->ndevices = (unsigned)(state->argc - state->next - 1);
		break;
	case ARGP_KEY_NO_ARGS: argp_usage(state); break;
	case ARGP_KEY_END:
		if (!a->info && a->ndevices == 0)
			argp_error(state, "give every device of the filesystem after the undo file");
		if (a->info && a->ndevices)
			argp_error(state, "--info takes only the undo file");
		break;
	default: return ARGP_ERR_UNKNOWN;
	}
	(void)arg;
	return 0;
}

static int print_info(const char *path)
{
	struct undo_summary s;
	char msg[512], u[UUID_STR_BUF], s1[SIZE_BUF_LEN], when[64] = "?";
	time_t created;
	struct tm tm;
	int ret = undo_info(path, &s, msg, sizeof(msg));

	if (ret) {
		msg_error("%s: %s", path, msg[0] ? msg : strerror(-ret));
		return 1;
	}
	created = (time_t)s.created;
	if (localtime_r(&created, &tm))
		strftime(when, sizeof(when), "%Y-%m-%d %H:%M:%S %z", &tm);
	uuid_to_str(s.fsid, u);
	printf("undo file:      %s\n", path);
	printf("version:        %u\n", s.version);
	printf("state:          %s\n", s.finished ? "finished (the operation completed)"
						 : "unfinished (the operation failed or was interrupted)");
	printf("fsid:           %s\n", u);
	printf("created:        %s\n", when);
	printf("generation:     %" PRIu64 " before", s.generation_before);
	if (s.finished)
		printf(", %" PRIu64 " after", s.generation_after);
	printf("\n");
	printf("superblocks:    %" PRIu64 " written", s.super_writes);
	if (s.super_writes)
		printf(" (highest generation %" PRIu64 ")", s.max_super_generation);
	printf("\n");
	printf("saved:          %" PRIu64 " range(s), %s in %" PRIu64 " batch(es)\n", s.records,
	       size_format(s.bytes, s1, sizeof(s1), SIZE_HUMAN), s.batches);
	if (s.torn_tail)
		printf("torn tail:      %" PRIu64 " bytes never synced (ignored: their writes never happened)\n",
		       s.torn_tail);
	printf("devices:        %u\n", s.ndevices);
	for (unsigned i = 0; i < s.ndevices; i++) {
		uuid_to_str(s.devices[i].uuid, u);
		printf("  devid %" PRIu64 " uuid %s size %s: %" PRIu64 " range(s), ", s.devices[i].devid, u,
		       size_format(s.devices[i].size, s1, sizeof(s1), SIZE_HUMAN), s.devices[i].records);
		printf("%s\n", size_format(s.devices[i].bytes, s1, sizeof(s1), SIZE_HUMAN));
	}
	undo_summary_release(&s);
	return 0;
}

/* Open every device (refusing mounted ones) and apply. */
static int run_undo(const struct undo_args *a)
{
	struct io_dev **devs = calloc(a->ndevices, sizeof(*devs));
	unsigned flags = (a->dry_run ? UNDO_DRY_RUN : 0) | (a->force ? UNDO_FORCE : 0);
	struct target_spec spec = { .flags = a->dry_run ? TARGET_READ_ONLY : 0 };
	char msg[768] = "", why[600];
	int ret = 0, status = 1;
	unsigned i;

	if (!devs) {
		msg_errno(-ENOMEM, "%s", a->undo_path);
		return 1;
	}
	for (i = 0; i < a->ndevices; i++) {
		const char *path = a->devices[i];
		if ((ret = target_check(path, &spec, why, sizeof(why)))) {
			msg_error("%s; nothing was changed", why);
			goto out;
		}
		ret = io_open_file(path, IO_OPEN_EXCL | (a->dry_run ? 0 : IO_OPEN_WRITE), &devs[i]);
		if (ret == -EBUSY) {
			msg_error("%s is in use (mounted or opened exclusively): unmount it first; nothing was "
				  "changed", path);
			goto out;
		}
		if (ret) {
			msg_errno(ret, "cannot open %s", path);
			goto out;
		}
	}
	if (a->force && !a->dry_run)
		msg_warning("--force: the filesystem generation is not checked");
	ret = undo_apply(a->undo_path, devs, a->ndevices, flags, msg, sizeof(msg));
	if (ret) {
		msg_error("%s: %s", a->undo_path, msg[0] ? msg : strerror(-ret));
		if (ret == -EUCLEAN || ret == -ESTALE || ret == -ENODEV)
			msg_error("nothing was changed");
		goto out;
	}
	msg_info("%s%s", msg, a->dry_run ? " (dry run: nothing was changed)" : "");
	status = 0;
out:
	for (i = 0; i < a->ndevices; i++)
		io_close(devs[i]);
	free(devs);
	return status;
}

int main(int argc, char **argv)
{
	static const struct argp_child children[] = { { &cli_common_argp, 0, NULL, 0 }, { 0 } };
	static const struct argp argp = {
		undo_options, undo_parse, "UNDO-FILE DEVICE...\n--info UNDO-FILE",
		"Roll back the changes a btk tool recorded in UNDO-FILE (its --undo-file option), on the "
		"unmounted filesystem made of DEVICE... (every device, in any order). Refuses when the "
		"undo file is damaged, when a device is missing or foreign, and when the filesystem "
		"was modified after the operation. Exit status: 0 rolled back (or described), 1 refused "
		"or failed.",
		children, NULL, NULL
	};
	struct undo_args a = { 0 };

	cli_init("btk-undo", 1);
	json_exit_guard(argc, argv);
	argp_parse(&argp, argc, argv, 0, NULL, &a);
	if (a.info)
		return print_info(a.undo_path);
	return run_undo(&a);
}
