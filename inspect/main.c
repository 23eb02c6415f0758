// SPDX-License-Identifier: GPL-2.0-only
/* btk-inspect: show what is on a btrfs filesystem. Subcommand dispatch. */
#include <argp.h>
#include <stdio.h>
#include <string.h>

#include "common/cli.h"
#include "common/env_knobs.h"
#include "common/json_exit.h"
#include "common/messages.h"
#include "inspect/inspect.h"

static const struct {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
} commands[] = {
	{ "super", cmd_super, "superblock fields, backup roots, system chunk array" },
	{ "tree", cmd_tree, "every item of every tree, or one tree or block" },
	{ "map", cmd_map, "chunks and their stripes; where a logical address lives" },
	{ "usage", cmd_usage, "per-tree size by level, block groups, totals per profile" },
	{ "heatmap", cmd_heatmap, "a PNG of the chunks along a Hilbert curve (-o FILE)" },
};

static void print_usage(FILE *out)
{
	fprintf(out, "Usage: btk-inspect COMMAND [OPTION...] DEVICE...\n"
		     "Inspect an unmounted btrfs filesystem (read-only).\n\nCommands:\n");
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		fprintf(out, "  %-8s %s\n", commands[i].name, commands[i].summary);
	fprintf(out, "\nExit status: 0 success, 1 error, 2 output complete but damage was found and\n"
		     "worked around (a bad copy of a block or superblock, a missing device).\n");
	fprintf(out, "\n'btk-inspect COMMAND --help' describes each command's options.\n"
		     "  -?, --help     give this help list\n"
		     "  -V, --version  print program version\n");
}

int main(int argc, char **argv)
{
	cli_init("btk-inspect", 1);
	json_exit_guard(argc, argv);
	if (argc < 2) {
		print_usage(stderr);
		return 1;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-?") || !strcmp(argv[1], "help")) {
		print_usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
		printf("%s\n", cli_version_string());
		return 0;
	}
	if (!strcmp(argv[1], "--usage")) {
		printf("Usage: btk-inspect {super|tree|map|usage} [OPTION...] DEVICE...\n");
		return 0;
	}
	for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
		if (!strcmp(argv[1], commands[i].name)) {
			/* argp names the program after argv[0] in its messages */
			static char name[64];
			snprintf(name, sizeof(name), "btk-inspect %s", commands[i].name);
			argv[1] = name;
			return commands[i].run(argc - 1, argv + 1);
		}
	msg_error("unknown command '%s' (try 'btk-inspect --help')", argv[1]);
	return 1;
}
