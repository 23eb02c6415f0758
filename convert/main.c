// SPDX-License-Identifier: GPL-2.0-only
/* btk-convert: offline conversions of a btrfs filesystem. */
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/json_exit.h"
#include "common/messages.h"
#include "convert/convert.h"

static void usage(FILE *out)
{
	fprintf(out, "Usage: btk-convert COMMAND [OPTION...] DEVICE...\n"
		     "Convert an unmounted btrfs filesystem in place.\n\nCommands:\n"
		     "  profile  change the profile of metadata, system (and data) chunks within\n"
		     "           single/dup/raid1/raid1c3/raid1c4 without moving any block\n"
		     "  bg-tree  move block group items into the block-group tree (or back)\n\n"
		     "'btk-convert COMMAND --help' describes each command's options.\n");
}

int main(int argc, char **argv)
{
	static char name[64];

	cli_init("btk-convert", 1);
	json_exit_guard(argc, argv);
	cli_enable_cancel(); /* SIGINT: no commit after it (fs_open_options.cancelled) */
	if (argc < 2) {
		usage(stderr);
		return 1;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-?") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("%s\n", cli_version_string());
		return 0;
	}
	snprintf(name, sizeof(name), "btk-convert %s", argv[1]);
	if (!strcmp(argv[1], "profile")) {
		argv[1] = name;
		return cmd_profile(argc - 1, argv + 1);
	}
	if (!strcmp(argv[1], "bg-tree")) {
		argv[1] = name;
		return cmd_bg_tree(argc - 1, argv + 1);
	}
	msg_error("unknown command '%s' (try 'btk-convert --help')", argv[1]);
	return 1;
}
