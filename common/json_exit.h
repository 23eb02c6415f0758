/* SPDX-License-Identifier: GPL-2.0-only */
/* The JSON document of a run that fails before it prints its own: a usage
 * error found by argp (exit 16 for btk-check, 1 for the others), an unknown
 * subcommand, a device that cannot be opened. A script that asked for
 * --format json must always get exactly one document, so
 *
 *	cli_init("btk-check", FSCK_EXIT_USAGE);
 *	json_exit_guard(argc, argv);
 *
 * before argp_parse() arranges that a run which asked for it (--format json
 * or --format=json, before any "--") and exits non-zero without having
 * printed a document (json_doc_print) prints
 *
 *	{"version":1,"program":"btk-check","btk_version":"0.1.0",
 *	 "error":"unrecognized option '--bogus'","exit_status":16}
 *
 * "error" is the last line the run wrote to stderr other than argp's
 * "Try `prog --help'" hint, without its "prog: error: " prefix. stderr keeps
 * everything it gets. */
#ifndef BTK_COMMON_JSON_EXIT_H
#define BTK_COMMON_JSON_EXIT_H

#include <stdbool.h>

/* Scan argv and, if a JSON document was asked for, arm the exit-time
 * document. Call once, before parsing. */
void json_exit_guard(int argc, char **argv);

/* Whether argv asks for --format json (the scan json_exit_guard uses). */
bool json_exit_requested(int argc, char **argv);


#endif
