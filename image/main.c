// SPDX-License-Identifier: GPL-2.0-only
/* btk-image: metadata images of a btrfs filesystem: dump, restore, info. */
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/json_exit.h"
#include "common/messages.h"
#include "image/image.h"

static void usage(FILE *out)
{
	fprintf(out, "Usage: btk-image COMMAND [OPTION...] ARGS...\n"
		     "Compact, optionally sanitized metadata images of an unmounted btrfs filesystem.\n\nCommands:\n"
		     "  dump     DEVICE... OUTPUT|-   write an image of every tree block (and with --data, the data)\n"
		     "  restore  IMAGE|- OUTPUT...    write an image back onto files or devices\n"
		     "  info     IMAGE|-              describe an image and verify it\n\n"
		     "Both the native btk format and btrfs-image (v0) dumps are read; dump writes either.\n"
		     "'btk-image COMMAND --help' describes each command's options.\n");
}

int main(int argc, char **argv)
{
	static char name[64];
	static const struct { const char *name; int (*fn)(int, char **); } cmds[] = {
		{ "dump", cmd_dump }, { "restore", cmd_restore }, { "info", cmd_info },
	};

	cli_init("btk-image", 1);
	json_exit_guard(argc, argv);
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
	if (!strcmp(argv[1], "--usage")) {
		printf("Usage: btk-image {dump|restore|info} [OPTION...] ARGS...\n");
		return 0;
	}
	for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
		if (strcmp(argv[1], cmds[i].name))
			continue;
		snprintf(name, sizeof(name), "btk-image %s", argv[1]);
		argv[1] = name;
		return cmds[i].fn(argc - 1, argv + 1);
	}
	msg_error("unknown command '%s' (try 'btk-image --help')", argv[1]);
	return 1;
}
